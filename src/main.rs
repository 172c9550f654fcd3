//! The kbench command line: `run`, `check`, `list` and `kernels`.
//!
//! Exit codes: 0 every case passed (skipped cases included); 1 some case failed (wrong answer,
//! runtime error); 2 bad input (manifest, arguments) or an output that cannot be written.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use kbench::backend::cuda::{self, KernelSource};
use kbench::execute::{self, GpuState, RunOptions, SaveOutputs};
use kbench::manifest::{self, Manifest};
use kbench::plan::{self, Case};
use kbench::report::json::ResultsFile;
use kbench::report::table;

#[derive(Parser)]
#[command(
    name = "kbench",
    version,
    about = "Runs GPU kernel experiments declared in TOML manifests"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run studies: every case is timed, checked for accuracy, printed and saved as JSON.
    Run(RunArgs),
    /// Validate manifests and print how many cases each would run; runs nothing.
    Check {
        /// Manifest files or glob patterns (quote globs: 'experiments/*.toml').
        #[arg(required = true)]
        manifests: Vec<String>,
    },
    /// List the algorithms, their grid axes, CPU implementations and CUDA kernels.
    List,
    /// Compile every CUDA kernel with NVRTC (no GPU needed) and report registers and spills.
    Kernels(KernelsArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// Manifest files or glob patterns (quote globs: 'experiments/*.toml').
    #[arg(required = true)]
    manifests: Vec<String>,
    /// Print the results as JSON on stdout (one document per study, one per line) instead of tables.
    #[arg(long)]
    json: bool,
    /// Folder for results: each run writes <out-dir>/<study>/<timestamp>.json.
    #[arg(long, default_value = "out")]
    out_dir: PathBuf,
    /// Save each case's inputs, output and reference as .npy files beside the JSON.
    #[arg(long, value_enum)]
    save_outputs: Option<SaveOutputs>,
    /// Read kernel sources from this folder instead of the copies built into kbench.
    #[arg(long)]
    kernels_dir: Option<PathBuf>,
    /// Override the manifests' warm-up runs per case.
    #[arg(long)]
    warmup: Option<u32>,
    /// Override the manifests' minimum samples per case.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    min_samples: Option<u32>,
    /// Override the manifests' maximum samples per case.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_samples: Option<u32>,
    /// Override the manifests' time budget per case, in seconds.
    #[arg(long)]
    max_time_s: Option<f64>,
}

#[derive(clap::Args)]
struct KernelsArgs {
    /// Target architectures (repeatable).
    #[arg(long = "arch", default_values = ["sm_90", "sm_80"])]
    archs: Vec<String>,
    /// ptxas to assemble the PTX with for the register/spill report; found on PATH if not given.
    #[arg(long)]
    ptxas: Option<PathBuf>,
    /// Folder for the generated PTX.
    #[arg(long, default_value = "out/kernels")]
    out_dir: PathBuf,
    /// Read kernel sources from this folder instead of the copies built into kbench.
    #[arg(long)]
    kernels_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args),
        Command::Check { manifests } => check(&manifests),
        Command::List => list(),
        Command::Kernels(args) => kernels(args),
    }
}

/// Loads and plans every manifest before anything runs; prints every error, not just the first.
fn load_all(args: &[String]) -> Result<Vec<(Manifest, Vec<Case>)>, ExitCode> {
    let paths = kbench::expand_manifest_args(args).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    let mut studies = Vec::new();
    let mut failed = false;
    for path in paths {
        match manifest::load(&path) {
            Ok(m) => {
                let cases = plan::expand(&m);
                studies.push((m, cases));
            }
            Err(e) => {
                eprintln!("{e}\n");
                failed = true;
            }
        }
    }
    if failed {
        return Err(ExitCode::from(2));
    }
    Ok(studies)
}

fn check(args: &[String]) -> ExitCode {
    let studies = match load_all(args) {
        Ok(s) => s,
        Err(code) => return code,
    };
    for (m, cases) in &studies {
        println!(
            "ok: {}: study `{}`, {} cases ({} variants)",
            m.path.display(),
            m.study.name,
            cases.len(),
            m.variants.len()
        );
    }
    ExitCode::SUCCESS
}

fn run(args: RunArgs) -> ExitCode {
    let studies = match load_all(&args.manifests) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let options = RunOptions {
        save_outputs: args.save_outputs,
        warmup: args.warmup,
        min_samples: args.min_samples,
        max_samples: args.max_samples,
        max_time_s: args.max_time_s,
    };
    let mut gpu = GpuState::NotOpened(KernelSource {
        dir: args.kernels_dir.clone(),
    });
    let interactive = std::io::stdout().is_terminal();
    let mut any_failed = false;
    for (manifest, cases) in &studies {
        let measure = options_measure(&options, manifest);
        let mut results = match ResultsFile::create(&args.out_dir, manifest, cases.len(), measure) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
        };
        if !args.json {
            println!(
                "study `{}` ({}): {} cases -> {}",
                manifest.study.name,
                manifest.path.display(),
                cases.len(),
                results.path.display()
            );
        }
        let progress = ProgressBar::new(cases.len() as u64);
        if interactive {
            progress.set_style(
                ProgressStyle::with_template("{bar:30} {pos}/{len} cases, {elapsed} {msg}")
                    .expect("valid template"),
            );
        } else {
            progress.set_draw_target(ProgressDrawTarget::hidden());
        }
        let outcome =
            execute::run_study(manifest, cases, &mut gpu, &options, &mut results, &progress);
        progress.finish_and_clear();
        if let Err(e) = outcome {
            eprintln!("error: {e:#}");
            eprintln!("results so far are in {}", results.path.display());
            return ExitCode::from(2);
        }
        any_failed |= results.doc.cases.iter().any(|c| c.failed());
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&results.doc).expect("results serialize")
            );
        } else {
            let axes: Vec<&str> = manifest.algorithm.axes().iter().map(|a| a.name).collect();
            println!("{}", table::render(&results.doc, &axes));
            println!("results: {}\n", results.path.display());
        }
    }
    if any_failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn options_measure(options: &RunOptions, manifest: &Manifest) -> manifest::MeasureSettings {
    options.measure_settings(&manifest.measure)
}

fn list() -> ExitCode {
    for algorithm in kbench::algos::all() {
        println!("{} ({})", algorithm.name(), algorithm.title());
        println!("  axes:");
        for axis in algorithm.axes() {
            let default = axis.default.map_or("required".to_string(), |d| {
                format!("default {}", d.to_param())
            });
            let only = axis
                .only_for
                .map_or(String::new(), |b| format!(", {b} only"));
            println!("    {:<8} {} ({default}{only})", axis.name, axis.doc);
        }
        println!("  cpu impls:    {}", algorithm.cpu_impls().join(", "));
        println!(
            "  cuda kernels: {} (kernels/{})",
            algorithm.cuda_kernels().join(", "),
            algorithm.kernel_file()
        );
    }
    ExitCode::SUCCESS
}

fn kernels(args: KernelsArgs) -> ExitCode {
    let source = KernelSource {
        dir: args.kernels_dir,
    };
    let compiled = match cuda::compile_all(&source, &args.archs) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(1);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.out_dir) {
        eprintln!("error: cannot create {}: {e}", args.out_dir.display());
        return ExitCode::from(2);
    }
    let ptxas = args.ptxas.or_else(|| find_on_path("ptxas"));
    let mut reports = Vec::new();
    for (file, arch, ptx) in &compiled {
        let path = args
            .out_dir
            .join(format!("{}.{arch}.ptx", file.trim_end_matches(".cu")));
        if let Err(e) = std::fs::write(&path, ptx) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("compiled {file} for {arch} -> {}", path.display());
        if let Some(ptxas) = &ptxas {
            match cuda::ptxas_report(ptxas, &path, arch) {
                Ok(r) => reports.extend(r),
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::from(1);
                }
            }
        }
    }
    if ptxas.is_none() {
        println!("ptxas not found (pass --ptxas or put it on PATH): no register/spill report");
        return ExitCode::SUCCESS;
    }
    let mut builder = tabled::builder::Builder::default();
    builder.push_record([
        "kernel",
        "arch",
        "registers",
        "spill stores (B)",
        "spill loads (B)",
        "stack (B)",
        "shared (B)",
    ]);
    for r in &reports {
        builder.push_record([
            r.kernel.clone(),
            r.arch.clone(),
            r.registers.to_string(),
            r.spill_store_bytes.to_string(),
            r.spill_load_bytes.to_string(),
            r.stack_bytes.to_string(),
            r.shared_bytes.to_string(),
        ]);
    }
    println!(
        "{}",
        builder.build().with(tabled::settings::Style::rounded())
    );
    let spilling: Vec<&str> = reports
        .iter()
        .filter(|r| r.spill_store_bytes + r.spill_load_bytes > 0)
        .map(|r| r.kernel.as_str())
        .collect();
    if !spilling.is_empty() {
        println!(
            "kernels that spill registers to local memory: {}",
            spilling.join(", ")
        );
    }
    ExitCode::SUCCESS
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}
