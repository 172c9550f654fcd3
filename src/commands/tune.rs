//! `kbench tune`: the command line made into a tune request (`tune::session`), with the same
//! run options `kbench run` builds (workers, the mock device, `--devices` lanes, Ctrl-C).

use super::run::{interrupt_flag, mock_gpu, worker_exe};
use super::{bad_input, check_kernels_dir};
use crate::cli::TuneArgs;
use crate::device::KernelSource;
use crate::exit::Exit;
use crate::run::lanes;
use crate::run::study::RunOptions;
use crate::tune::session::{self, TuneOverrides, TuneRequest, TuneSource};
use crate::tune::spec::{Budget, StrategyKind};

pub fn tune(args: TuneArgs) -> Exit {
    let request = match request(args) {
        Ok(request) => request,
        Err(exit) => return exit,
    };
    session::run(&request)
}

fn request(args: TuneArgs) -> Result<TuneRequest, Exit> {
    args.overrides
        .check()
        .map_err(|e| bad_input(anyhow::anyhow!(e)))?;
    check_kernels_dir(args.kernels_dir.as_deref()).map_err(bad_input)?;
    let budget = match (args.budget_evaluations, args.budget_time_s) {
        (Some(n), _) => Some(Budget::Evaluations(n as usize)),
        (None, Some(s)) if s.is_finite() && s > 0.0 => Some(Budget::TimeS(s)),
        (None, Some(s)) => {
            return Err(bad_input(anyhow::anyhow!(
                "--budget-time-s {s}: it must be a finite number of seconds above 0"
            )))
        }
        (None, None) => None,
    };
    let mut options = RunOptions {
        kernels: KernelSource {
            dir: args.kernels_dir.clone(),
        },
        mock_gpu: mock_gpu()?,
        interrupted: interrupt_flag(),
        overrides: args.overrides.clone(),
        worker_fault: std::env::var("KBENCH_WORKER_FAULT").ok(),
        ..RunOptions::new(worker_exe().map_err(bad_input)?)
    };
    if let Some(selection) = &args.devices {
        options.lanes = lanes::resolve(
            selection,
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
            crate::device::count(),
        )
        .map_err(|e| bad_input(anyhow::anyhow!(e)))?;
    }
    let source = match (args.resume, args.manifest) {
        (Some(dir), _) => TuneSource::Resume(dir),
        (None, Some(manifest)) => TuneSource::Manifest(manifest),
        (None, None) => return Err(bad_input(anyhow::anyhow!("name a manifest or --resume"))),
    };
    Ok(TuneRequest {
        source,
        overrides: TuneOverrides {
            strategy: args.strategy.as_deref().and_then(StrategyKind::parse),
            budget,
            seed: args.seed,
        },
        options,
        out_dir: args.out_dir,
        export_header: args.export_header,
        export_manifest: args.export_manifest,
        json: args.json,
    })
}
