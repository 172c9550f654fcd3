//! `kbench slurm`: a Slurm job array that runs a study in shards, and a merge job after it
//! (the scripts are `crate::slurm`'s).

use std::sync::atomic::AtomicBool;

use super::bad_input;
use crate::cli::SlurmArgs;
use crate::exit::Exit;
use crate::run::session::{load_and_plan, NotPlanned};
use crate::vocab::Backend;
use crate::{errln, out};

/// Writes the scripts and prints how to submit them.
pub fn slurm(args: SlurmArgs) -> Exit {
    // As `run` and `check` load one: the manifest's error with its place, or one that plans no
    // case, refused before any script is written.
    let manifest = match load_and_plan(&args.manifest, &AtomicBool::new(false)) {
        Ok((m, _)) => m,
        Err(NotPlanned::Error(e)) => {
            errln!("{e}\n");
            return Exit::BadInput;
        }
        Err(NotPlanned::Interrupted) => unreachable!("slurm sets no interrupt flag"),
    };
    if args.gpus_per_task.is_none() && manifest.variants.iter().any(|v| v.backend == Backend::Cuda)
    {
        errln!(
            "warning: {}: study `{}` has CUDA variants, but without --gpus-per-task the array tasks \
             ask Slurm for no GPU: they get one only where the cluster gives every job a GPU by \
             default, else their CUDA cases are skipped; ask with `--gpus-per-task N` (each task \
             then runs its shard on its N GPUs)",
            manifest.path.display(),
            manifest.study.name
        );
    }
    let request = crate::slurm::Request {
        shards: args.shards,
        gpus_per_task: args.gpus_per_task,
        partition: args.partition,
        time: args.time,
        exclusive: args.exclusive,
        out: args.out,
    };
    match crate::slurm::write_scripts(&manifest, &request) {
        Ok(written) => {
            out!("{}", written.instructions);
            Exit::Ok
        }
        Err(e) => bad_input(e),
    }
}
