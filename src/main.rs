//! The kbench command line: `run`, `check`, `list`, `kernels`, `compare`, `report`, `merge` and
//! `slurm`.
//!
//! Exit codes: 0 every case passed (skipped cases included); 1 some case failed (wrong answer,
//! runtime error, time limit); 2 bad input (manifest, arguments) or an output that cannot be
//! written; 3 a claim was refuted (only with `--check-claims`, and only when no case failed);
//! 130 interrupted (the results file holds every finished case: `run --resume` it). `merge`: 0,
//! or 1 when planned cases are missing (the merged file is written all the same), 2 refused.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use kbench::compare::{self, CompareSettings, Verdict};
use kbench::device::{nvrtc, KernelSource};
use kbench::manifest::{self, Manifest};
use kbench::plan::{self, Case};
use kbench::report::export::{self, Export};
use kbench::report::table;
use kbench::results::{self, ResultsFile};
use kbench::run::case::SaveOutputs;
use kbench::run::executor::mock::{self, MockSpec};
use kbench::run::lanes::{self, DeviceSelection};
use kbench::run::study::{self, RunOptions, StudyEnd};
use kbench::schema::{ClaimStatus, ShardRecord};
use kbench::shard;
use kbench::vocab::Backend;

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
    /// Run studies: time and check every case, print tables, save JSON.
    Run(RunArgs),
    /// Validate manifests and count the cases each would run; runs nothing.
    Check {
        /// Manifest files or glob patterns (quote globs: 'experiments/*.toml').
        #[arg(required = true)]
        manifests: Vec<String>,
    },
    /// List the algorithms: grid axes, CPU implementations, CUDA kernels.
    List,
    /// Compile every kernel with NVRTC (no GPU needed): registers, spills.
    Kernels(KernelsArgs),
    /// Compare runs of one study: exit 1 if a case got slower or newly fails.
    Compare(CompareArgs),
    /// Re-render a finished run: table, markdown, CSV, JSON, CI dashboard formats, HTML, plots.
    Report(ReportArgs),
    /// Join the results files of a study's shards (`run --shard K/N`) into one: exit 1 if
    /// planned cases are missing (the file is written all the same: `run --resume` it).
    Merge(MergeArgs),
    /// Write a Slurm job array that runs a study in N shards, and a merge job after it.
    Slurm(SlurmArgs),
    /// Print the JSON Schema of manifests (for editors: Taplo / Even Better TOML, Tombi), or of
    /// results files.
    Schema {
        #[arg(value_enum, default_value = "manifest")]
        of: SchemaOf,
    },
    /// Print a shell completion script: e.g. `kbench completions bash > ~/.local/share/bash-completion/completions/kbench`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (kbench.1, kbench-run.1, ...) into a folder: `kbench man target/man`.
    Man {
        #[arg(value_name = "DIR")]
        out_dir: PathBuf,
    },
    /// Internal: runs the cases `kbench run` sends it on stdin (see src/worker.rs).
    #[command(hide = true)]
    Worker,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SchemaOf {
    Manifest,
    Results,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// The baseline results file(s), then the new one; or, with --baseline NAME, the new one alone.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Compare against every run saved with `kbench run --save-baseline NAME`.
    #[arg(long)]
    baseline: Option<String>,
    /// Smallest relative change of a median that counts (default: the manifest's, else 0.03).
    #[arg(long)]
    min_effect: Option<f64>,
    /// False-discovery rate across the study's cases (default: the manifest's, else 0.05).
    #[arg(long)]
    fdr: Option<f64>,
    /// Compare runs made on different GPUs, drivers or CPUs.
    #[arg(long)]
    allow_different_device: bool,
    /// Print the verdicts as JSON.
    #[arg(long)]
    json: bool,
    /// Where baselines are kept (as for `run`).
    #[arg(long, default_value = "out")]
    out_dir: PathBuf,
    /// Show every column of the tables (by default they fit the terminal).
    #[arg(long)]
    wide: bool,
}

#[derive(clap::Args)]
struct MergeArgs {
    /// The shards' results files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The merged results file to write (never an existing file).
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(clap::Args)]
struct SlurmArgs {
    /// The study's manifest.
    manifest: PathBuf,
    /// How many shards (array tasks) to split the study into.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10000))]
    shards: u32,
    /// GPUs per array task: each task runs its shard with `--devices all` on them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    gpus_per_task: Option<u32>,
    /// The Slurm partition.
    #[arg(long)]
    partition: Option<String>,
    /// Each task's time limit, as sbatch takes it (`1:00:00`).
    #[arg(long)]
    time: Option<String>,
    /// Ask for whole nodes (`sbatch --exclusive`), so no other job shares a task's CPUs or GPUs.
    #[arg(long)]
    exclusive: bool,
    /// The folder for the scripts, the shards' results, logs and the merged file.
    #[arg(long, default_value = "slurm")]
    out: PathBuf,
}

#[derive(clap::Args)]
struct ReportArgs {
    /// A results file written by `kbench run`.
    results: PathBuf,
    /// What to print.
    #[arg(long, default_value = "table", value_parser = format_names())]
    format: String,
    /// Also write the HTML report (one self-contained page) to this file.
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Also write FORMAT to PATH (repeatable), e.g. `--export bmf=bench.json`.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = Export::parse)]
    export: Vec<Export>,
    /// Also draw the charts (SVG and PNG) into this folder.
    #[arg(long)]
    plots: Option<PathBuf>,
    /// Print only the tables the manifest declares (and its claims), not every case.
    #[arg(long)]
    tables: bool,
    /// Exit 3 if a claim of the manifest is refuted by these results.
    #[arg(long)]
    check_claims: bool,
    /// Take the tables and claims from this manifest (of the same study) instead of the one
    /// recorded in the results: to judge a saved run against claims written since.
    #[arg(long)]
    manifest: Option<PathBuf>,
    /// Show every column of the tables (by default they fit the terminal).
    #[arg(long)]
    wide: bool,
}

/// The output formats (src/report/export.rs), for `--format`'s help and checking.
fn format_names() -> clap::builder::PossibleValuesParser {
    export::FORMATS
        .iter()
        .map(|f| clap::builder::PossibleValue::new(f.name).help(f.help))
        .collect::<Vec<_>>()
        .into()
}

#[derive(clap::Args)]
struct RunArgs {
    /// Manifest files or glob patterns (quote globs: 'experiments/*.toml').
    #[arg(required_unless_present = "resume")]
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
    #[arg(long, value_parser = parse_positive_seconds)]
    max_time_s: Option<f64>,
    /// Per-case time limit in seconds (default: the manifests', else 120): a case still running
    /// then is recorded as timed out, with the samples it took.
    #[arg(long, value_parser = parse_positive_seconds)]
    timeout_s: Option<f64>,
    /// Finish an interrupted run: the cases missing from this results file are run into it.
    #[arg(long, value_name = "RESULTS_JSON", conflicts_with = "manifests")]
    resume: Option<PathBuf>,
    /// Run on several GPUs of this host at once, one case per GPU: `all` (every GPU CUDA sees;
    /// under Slurm, the job's) or their numbers, `0,1`.
    #[arg(long, value_name = "all|N,N,...", value_parser = lanes::parse_devices)]
    devices: Option<DeviceSelection>,
    /// Run shard K of N (1-based) of each study: the cases whose stable id falls to it, the
    /// same split on every host. Join the shards with `kbench merge`.
    #[arg(long, value_name = "K/N", value_parser = shard::parse_shard, conflicts_with = "resume")]
    shard: Option<ShardRecord>,
    /// Also add each study's results to the baseline NAME (several runs make a better baseline),
    /// for `kbench compare --baseline NAME`.
    #[arg(long, value_name = "NAME", value_parser = parse_baseline_name)]
    save_baseline: Option<String>,
    /// Exit 3 if a claim of a manifest is refuted (when no case failed: failures exit 1).
    #[arg(long)]
    check_claims: bool,
    /// Show every column of the tables (by default they fit the terminal).
    #[arg(long)]
    wide: bool,
    /// Also write each study's results as FORMAT to PATH (repeatable; `{study}` in PATH is the
    /// study's name, needed with several studies): e.g. `--export bmf=bench.json`,
    /// `--export html=out/{study}.html`. Formats as for `kbench report --format`.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = Export::parse)]
    export: Vec<Export>,
}

/// As in the manifests: a finite number of seconds above zero.
fn parse_positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err("expected a positive number of seconds".into()),
    }
}

fn parse_baseline_name(name: &str) -> Result<String, String> {
    if manifest::is_safe_name(name) {
        Ok(name.to_string())
    } else {
        Err("a baseline name is up to 100 letters, digits, `_`, `-` and `.` (not first)".into())
    }
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
    // CUDA's ordinals as `nvidia-smi` numbers the GPUs (see schema::CaseDevice), for
    // `device::count` here and the workers, which inherit it; set while no other thread runs.
    if std::env::var_os(kbench::device::DEVICE_ORDER_ENV).is_none() {
        std::env::set_var(kbench::device::DEVICE_ORDER_ENV, "PCI_BUS_ID");
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args),
        Command::Check { manifests } => check(&manifests),
        Command::List => list(),
        Command::Kernels(args) => kernels(args),
        Command::Compare(args) => compare(args),
        Command::Report(args) => report(args),
        Command::Merge(args) => merge(args),
        Command::Slurm(args) => slurm(args),
        Command::Schema { of } => {
            let schema = match of {
                SchemaOf::Manifest => manifest::manifest_schema(),
                SchemaOf::Results => kbench::schema::json_schema(),
            };
            println!(
                "{}",
                serde_json::to_string_pretty(&schema).expect("a schema serializes")
            );
            ExitCode::SUCCESS
        }
        Command::Completions { shell } => {
            let mut cli = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cli, "kbench", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man { out_dir } => man_pages(&out_dir),
        Command::Worker => match kbench::run::worker::worker_main() {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kbench worker: {e:#}");
                ExitCode::from(2)
            }
        },
    }
}

/// The man pages, from the clap definition: kbench.1 and kbench-<command>.1 in `dir`.
fn man_pages(dir: &std::path::Path) -> ExitCode {
    let cli = <Cli as clap::CommandFactory>::command();
    let written = std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cli, dir));
    match written {
        Ok(()) => {
            println!(
                "wrote the man pages to {} (read one with `man {}/kbench.1`)",
                dir.display(),
                dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => bad_input(anyhow::anyhow!(
            "cannot write the man pages to {}: {e}",
            dir.display()
        )),
    }
}

/// Loads and plans every manifest before anything runs; prints every error, not just the first.
/// Planning stops (exit 130) soon after `interrupted` is set.
fn load_all(
    args: &[String],
    interrupted: &AtomicBool,
) -> Result<Vec<(Manifest, Vec<Case>)>, ExitCode> {
    let paths = kbench::expand_manifest_args(args).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    })?;
    let mut studies = Vec::new();
    let mut failed = false;
    for path in paths {
        match load_and_plan(&path, interrupted) {
            Ok(study) => studies.push(study),
            Err(NotPlanned::Interrupted) => {
                eprintln!(
                    "interrupted while planning {}: nothing was run",
                    path.display()
                );
                return Err(ExitCode::from(130));
            }
            Err(NotPlanned::Error(e)) => {
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

/// Why a manifest gives no study.
enum NotPlanned {
    /// Its error, formatted with the file and line.
    Error(String),
    Interrupted,
}

/// One manifest and its cases (planning refuses a manifest that plans no case, since a run of
/// it would measure nothing and say it passed).
fn load_and_plan(
    path: &std::path::Path,
    interrupted: &AtomicBool,
) -> Result<(Manifest, Vec<Case>), NotPlanned> {
    let m = manifest::load(path).map_err(|e| NotPlanned::Error(e.to_string()))?;
    match plan::plan(&m, interrupted) {
        Ok(cases) => Ok((m, cases)),
        Err(plan::PlanError::Interrupted) => Err(NotPlanned::Interrupted),
        Err(plan::PlanError::Manifest(e)) => Err(NotPlanned::Error(e.to_string())),
    }
}

fn check(args: &[String]) -> ExitCode {
    let paths = match kbench::expand_manifest_args(args) {
        Ok(paths) => paths,
        Err(e) => return bad_input(anyhow::anyhow!("{e}")),
    };
    // Every manifest is reported, the good ones too, whatever the others hold. No Ctrl-C
    // handler here: the default one ends `check` at once, planning included.
    let mut failed = false;
    for path in paths {
        match load_and_plan(&path, &AtomicBool::new(false)) {
            Ok((m, cases)) => println!(
                "ok: {}: study `{}`, {}, {}",
                m.path.display(),
                m.study.name,
                count(cases.len(), "case", "cases"),
                count(m.variants.len(), "variant", "variants")
            ),
            Err(NotPlanned::Error(e)) => {
                eprintln!("{e}\n");
                failed = true;
            }
            Err(NotPlanned::Interrupted) => unreachable!("check sets no interrupt flag"),
        }
    }
    if failed {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// "1 case", "18 cases".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn run(args: RunArgs) -> ExitCode {
    if let (Some(min), Some(max)) = (args.min_samples, args.max_samples) {
        if min > max {
            return bad_input(anyhow::anyhow!(
                "--min-samples {min} is more than --max-samples {max}"
            ));
        }
    }
    if let Err(e) = check_kernels_dir(args.kernels_dir.as_deref()) {
        return bad_input(e);
    }
    // /proc/self/exe still starts this kbench if its file is replaced (a rebuild) mid-run.
    let proc_self = PathBuf::from("/proc/self/exe");
    let worker_exe = if proc_self.exists() {
        proc_self
    } else {
        match std::env::current_exe() {
            Ok(exe) => exe,
            Err(e) => return bad_input(anyhow::anyhow!("cannot find the kbench executable: {e}")),
        }
    };
    let lanes = match &args.devices {
        None => None,
        Some(selection) => match lanes::resolve(
            selection,
            std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
            kbench::device::count(),
        ) {
            Ok(lanes) => Some(lanes),
            Err(e) => return bad_input(anyhow::anyhow!(e)),
        },
    };
    // The mock device (for tests and machines without a GPU), checked before anything runs.
    let mock_gpu = match std::env::var_os(mock::MOCK_ENV) {
        Some(path) if !path.is_empty() => match MockSpec::load(std::path::Path::new(&path)) {
            Ok(spec) => Some(spec),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
        _ => None,
    };
    let mut options = RunOptions {
        kernels: KernelSource {
            dir: args.kernels_dir.clone(),
        },
        mock_gpu,
        save_outputs: args.save_outputs,
        interrupted: interrupt_flag(),
        timeout_s: args.timeout_s,
        warmup: args.warmup,
        min_samples: args.min_samples,
        max_samples: args.max_samples,
        max_time_s: args.max_time_s,
        worker_fault: std::env::var("KBENCH_WORKER_FAULT").ok(),
        // Progress goes to stderr, whatever stdout is: a bar on a terminal, else a line a case.
        case_lines: !std::io::stderr().is_terminal(),
        ..RunOptions::new(worker_exe)
    };
    // Without --devices, the one lane RunOptions::new gives.
    if let Some(lanes) = lanes {
        options.lanes = lanes;
    }
    // Each study with the cases still to run and the results file they go to.
    let mut studies: Vec<(Manifest, Vec<Case>, ResultsFile)> = Vec::new();
    match &args.resume {
        Some(path) => match resume_study(path, &options) {
            Ok(study) => studies.push(study),
            Err(e) => return bad_input(e),
        },
        None => {
            let loaded = match load_all(&args.manifests, &options.interrupted) {
                Ok(s) => s,
                Err(code) => return code,
            };
            // Kernels from --kernels-dir are read before anything runs, GPU or not.
            if options.kernels.dir.is_some() {
                for (manifest, _) in &loaded {
                    let uses_cuda = manifest.variants.iter().any(|v| v.backend == Backend::Cuda);
                    let file = &manifest.algorithm.spec().kernel_file;
                    if let (true, Err(e)) = (uses_cuda, options.kernels.read(file)) {
                        return bad_input(e);
                    }
                }
            }
            let shared = args.export.iter().find(|e| !e.path.contains("{study}"));
            if let (Some(e), 2..) = (shared, loaded.len()) {
                return bad_input(anyhow::anyhow!(
                    "--export {}={}: {} studies would write the same file; put {{study}} in the path",
                    e.format.name,
                    e.path,
                    loaded.len()
                ));
            }
            if let Some(mock) = &options.mock_gpu {
                let cuda_cases = (loaded.iter()).flat_map(|(manifest, cases)| {
                    (cases.iter())
                        .map(|case| (&manifest.variants[case.variant], &case.params))
                        .filter(|(variant, _)| variant.backend == Backend::Cuda)
                        .map(|(variant, params)| (variant.name.as_str(), params))
                });
                for line in mock.idle_events(cuda_cases) {
                    eprintln!(
                        "note: {}:{line}: this mock event strikes none of the CUDA cases to run",
                        mock.path.display()
                    );
                }
            }
            for (manifest, cases) in loaded {
                let cases = shard::select(&manifest, cases, args.shard);
                let measure = options.measure_settings(&manifest.measure);
                // One sample count given against the manifest's other: said, not silent.
                if let Some(note) = sample_count_note(&args, &manifest, &measure) {
                    eprintln!("note: {}: {note}", manifest.path.display());
                }
                match ResultsFile::create(
                    &args.out_dir,
                    &manifest,
                    cases.len(),
                    measure,
                    args.shard,
                ) {
                    Ok(results) => studies.push((manifest, cases, results)),
                    Err(e) => return bad_input(e),
                }
            }
        }
    }
    let interactive = std::io::stderr().is_terminal();
    let mut any_failed = false;
    let mut any_refuted = false;
    for (manifest, cases, mut results) in studies {
        let manifest = &manifest;
        if !args.json {
            println!(
                "study `{}` ({}): {} to run{} -> {}",
                manifest.study.name,
                manifest.path.display(),
                count(cases.len(), "case", "cases"),
                on_what(&results.doc.shard, &options),
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
        let outcome = study::run_study(manifest, &cases, &options, &mut results, &progress);
        progress.finish_and_clear();
        match outcome {
            Ok(StudyEnd::Finished) => {}
            Ok(StudyEnd::Interrupted) => {
                // The journal holds every finished case already; folding it in leaves one file.
                if let Err(e) = results.compact() {
                    eprintln!(
                        "warning: {e:#} (the cases stay in {})",
                        results::journal_path(&results.path).display()
                    );
                }
                eprintln!(
                    "interrupted: {} of {} cases are in {}; finish with `kbench run --resume {}`",
                    results.doc.cases.len(),
                    results.doc.planned_cases,
                    results.path.display(),
                    results.path.display()
                );
                return ExitCode::from(130);
            }
            Err(e) => {
                eprintln!("error: {e:#}");
                // On a full disk this may fail too: the journal then keeps the cases.
                let _ = results.compact();
                eprintln!("results so far are in {}", results.path.display());
                return ExitCode::from(2);
            }
        }
        any_failed |= results.doc.cases.iter().any(|c| c.failed());
        let verdicts = kbench::claims::judge_all(manifest, &results.doc);
        any_refuted |= verdicts.iter().any(|v| v.status == ClaimStatus::Refuted);
        if let Err(e) = results.set_claims(verdicts) {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
        let report = export::Report {
            doc: &results.doc,
            manifest,
            declared_only: false,
            width: None,
        };
        for e in &args.export {
            match e.write(&report, &results.path) {
                Ok(path) => eprintln!("wrote {}", path.display()),
                Err(err) => {
                    eprintln!("error: {err:#}");
                    eprintln!("the results are in {}", results.path.display());
                    return ExitCode::from(2);
                }
            }
        }
        if let Some(name) = &args.save_baseline {
            let dir = results::baseline_dir(&args.out_dir, &manifest.study.name, name);
            let path = dir.join(results.path.file_name().expect("results files have a name"));
            let saved = std::fs::create_dir_all(&dir)
                .map_err(anyhow::Error::from)
                .and_then(|()| results::write_json_atomically(&path, &results.doc));
            if let Err(e) = saved {
                eprintln!("error: cannot save baseline {}: {e:#}", path.display());
                return ExitCode::from(2);
            }
            if !args.json {
                println!("added to baseline `{name}`: {}", path.display());
            }
        }
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&results.doc).expect("results serialize")
            );
        } else {
            let on_terminal = export::Report {
                width: table_width(args.wide),
                ..report
            };
            print!(
                "{}",
                export::tables(&on_terminal, table::TableStyle::Terminal)
            );
            println!("results: {}\n", results.path.display());
        }
    }
    if any_failed {
        ExitCode::from(1)
    } else if any_refuted && args.check_claims {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// ` (shard 2/4) on GPUs 0, 1`: what part of the plan runs where, for the run's first line.
fn on_what(shard: &Option<ShardRecord>, options: &RunOptions) -> String {
    let mut out = String::new();
    if let Some(s) = shard {
        out.push_str(&format!(" (shard {}/{})", s.index, s.count));
    }
    if options.lanes.len() > 1 {
        let numbers: Vec<String> = options.lanes.iter().map(|l| l.index.to_string()).collect();
        out.push_str(&format!(" on GPUs {}", numbers.join(", ")));
    }
    out
}

/// `kbench merge`: the shards' files joined into a new one; exit 1 when planned cases are
/// missing (listed by name; the file is written, for `run --resume`), 2 when refused.
fn merge(args: MergeArgs) -> ExitCode {
    let merged = match shard::merge_files(&args.files, &args.output) {
        Ok(m) => m,
        Err(e) => return bad_input(e),
    };
    let doc = &merged.doc;
    println!(
        "merged {} into {}: {} of {} planned cases",
        count(args.files.len(), "file", "files"),
        args.output.display(),
        doc.cases.len(),
        doc.planned_cases
    );
    if merged.missing.is_empty() {
        return ExitCode::SUCCESS;
    }
    println!(
        "missing {} (no shard's file holds them):",
        count(merged.missing.len(), "case", "cases")
    );
    for name in &merged.missing {
        println!("  {name}");
    }
    println!(
        "run them into the merged file with `kbench run --resume {}`",
        args.output.display()
    );
    ExitCode::from(1)
}

fn slurm(args: SlurmArgs) -> ExitCode {
    // As `run` and `check` load one: the manifest's error with its place, or one that plans no
    // case, refused before any script is written.
    let manifest = match load_and_plan(&args.manifest, &AtomicBool::new(false)) {
        Ok((m, _)) => m,
        Err(NotPlanned::Error(e)) => {
            eprintln!("{e}\n");
            return ExitCode::from(2);
        }
        Err(NotPlanned::Interrupted) => unreachable!("slurm sets no interrupt flag"),
    };
    if args.gpus_per_task.is_none() && manifest.variants.iter().any(|v| v.backend == Backend::Cuda)
    {
        eprintln!(
            "warning: {}: study `{}` has CUDA variants, but without --gpus-per-task the array tasks \
             ask Slurm for no GPU: they get one only where the cluster gives every job a GPU by \
             default, else their CUDA cases are skipped; ask with `--gpus-per-task N` (each task \
             then runs its shard on its N GPUs)",
            manifest.path.display(),
            manifest.study.name
        );
    }
    let request = kbench::slurm::Request {
        shards: args.shards,
        gpus_per_task: args.gpus_per_task,
        partition: args.partition,
        time: args.time,
        exclusive: args.exclusive,
        out: args.out,
    };
    match kbench::slurm::write_scripts(&manifest, &request) {
        Ok(written) => {
            print!("{}", written.instructions);
            ExitCode::SUCCESS
        }
        Err(e) => bad_input(e),
    }
}

/// What a lone `--min-samples` or `--max-samples` did to a manifest's other bound, if anything.
fn sample_count_note(
    args: &RunArgs,
    manifest: &Manifest,
    measure: &kbench::schema::MeasureSettings,
) -> Option<String> {
    let declared = &manifest.measure;
    match (args.min_samples, args.max_samples) {
        (Some(min), None) if min > declared.max_samples => Some(format!(
            "--min-samples {min} raises its max_samples {} to {}",
            declared.max_samples, measure.max_samples
        )),
        (None, Some(max)) if max < declared.min_samples => Some(format!(
            "--max-samples {max} is below its min_samples {}, which it keeps: {} samples at most",
            declared.min_samples, measure.max_samples
        )),
        _ => None,
    }
}

/// The width a terminal table must fit: none with `--wide`.
fn table_width(wide: bool) -> Option<usize> {
    (!wide).then(table::terminal_width)
}

/// Set on the first Ctrl-C or SIGTERM, so the case in progress is abandoned (its worker killed)
/// and the results file keeps every finished case; a second one exits at once (the file is always
/// complete JSON, since each write is a rename).
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let handler_flag = flag.clone();
    let installed = ctrlc::set_handler(move || {
        if handler_flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupt: abandoning the current case, then stopping (again to quit now)");
    });
    if let Err(e) = installed {
        eprintln!("warning: cannot catch Ctrl-C: {e}");
    }
    flag
}

/// An interrupted study: its manifest (as recorded in the results), the cases it has no result
/// for, and its results file, locked and reopened to be completed. The cases still to run are
/// measured with the settings the file records (the original run's, command-line overrides
/// included); an override on the resume's own command line that differs is refused, so one file
/// never holds two settings.
fn resume_study(
    path: &std::path::Path,
    options: &RunOptions,
) -> anyhow::Result<(Manifest, Vec<Case>, ResultsFile)> {
    let results = ResultsFile::resume(path)?;
    let doc = &results.doc;
    let mut manifest =
        manifest::parse(std::path::Path::new(&doc.manifest.path), &doc.manifest.toml)?;
    let recorded = &doc.manifest.measure;
    let conflicts: Vec<String> = [
        (
            "--warmup",
            options.warmup.map(f64::from),
            "warmup",
            f64::from(recorded.warmup),
        ),
        (
            "--min-samples",
            options.min_samples.map(f64::from),
            "min_samples",
            f64::from(recorded.min_samples),
        ),
        (
            "--max-samples",
            options.max_samples.map(f64::from),
            "max_samples",
            f64::from(recorded.max_samples),
        ),
        (
            "--max-time-s",
            options.max_time_s,
            "max_time_s",
            recorded.max_time_s,
        ),
        (
            "--timeout-s",
            options.timeout_s,
            "timeout_s",
            recorded.timeout_s,
        ),
    ]
    .into_iter()
    .filter_map(|(flag, given, key, was)| {
        given
            .filter(|g| *g != was)
            .map(|g| format!("  {flag} {g}, but the run measured with {key} = {was}"))
    })
    .collect();
    if !conflicts.is_empty() {
        anyhow::bail!(
            "{} was measured with other settings than this resume asks for:\n{}\nresume without them (the file's settings are used), or start a new run",
            path.display(),
            conflicts.join("\n")
        );
    }
    manifest.measure = recorded.clone();
    let plan = plan::expand(&manifest)?;
    let planned = shard::select(&manifest, plan.clone(), doc.shard).len();
    if doc.planned_cases != planned {
        anyhow::bail!(
            "{} plans {} cases, but its own manifest plans {planned}{}: was the file edited, or written by another kbench?",
            path.display(),
            doc.planned_cases,
            doc.shard.map_or(String::new(), |s| format!(" in shard {}/{}", s.index, s.count))
        );
    }
    let mut done = std::collections::HashSet::new();
    for case in &doc.cases {
        plan::check_recorded(&manifest, &plan, case, path)?;
        if !done.insert(case.index) {
            anyhow::bail!(
                "{}: {} is in the file twice; was the file edited or merged?",
                path.display(),
                plan::describe_recorded(case)
            );
        }
    }
    let missing: Vec<Case> = shard::select(&manifest, plan, doc.shard)
        .into_iter()
        .filter(|c| !done.contains(&c.index))
        .collect();
    Ok((manifest, missing, results))
}

fn compare(args: CompareArgs) -> ExitCode {
    let Some((new_path, listed_bases)) = args.files.split_last() else {
        unreachable!("clap requires at least one file")
    };
    match (&args.baseline, listed_bases) {
        (None, []) => {
            return bad_input(anyhow::anyhow!(
                "give the baseline results file(s) and then the new one, or --baseline NAME and the new file"
            ))
        }
        (Some(_), [_, ..]) => {
            return bad_input(anyhow::anyhow!(
                "with --baseline, give only the new results file"
            ))
        }
        _ => {}
    }
    let new = match results::load_results(new_path) {
        Ok(doc) => doc,
        Err(e) => return bad_input(e),
    };
    let base_paths = match &args.baseline {
        None => listed_bases.to_vec(),
        Some(name) => {
            match baseline_runs(&results::baseline_dir(&args.out_dir, &new.study.name, name)) {
                Ok(runs) => runs,
                Err(e) => return bad_input(e),
            }
        }
    };
    let mut bases = Vec::new();
    for path in &base_paths {
        match results::load_results(path).and_then(|b| {
            compare::check_comparable(&b, &new, args.allow_different_device).map(|()| b)
        }) {
            Ok(b) => bases.push(b),
            Err(e) => return bad_input(e),
        }
    }
    let defaults = new.manifest.compare;
    let settings = CompareSettings {
        min_effect: args.min_effect.unwrap_or(defaults.min_effect),
        fdr: args.fdr.unwrap_or(defaults.fdr),
        allow_different_device: args.allow_different_device,
    };
    if !(settings.min_effect > 0.0
        && settings.min_effect < 1.0
        && settings.fdr > 0.0
        && settings.fdr < 1.0)
    {
        return bad_input(anyhow::anyhow!(
            "--min-effect and --fdr must be between 0 and 1"
        ));
    }
    let result = compare::compare(&bases, &new, &settings);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&result).expect("comparison serializes")
        );
    } else {
        match base_paths.as_slice() {
            [one] => println!(
                "comparing {}\nwith the baseline {}",
                new_path.display(),
                one.display()
            ),
            several => {
                println!(
                    "comparing {}\nwith {} baseline runs:",
                    new_path.display(),
                    several.len()
                );
                several.iter().for_each(|p| println!("  {}", p.display()));
            }
        }
        if bases.len() == 1 {
            println!("note: one baseline run shows no run-to-run variation, so verdicts rest on");
            println!("its samples alone; save 3 or more baseline runs");
        }
        println!("{}", compare_table(&result, table_width(args.wide)));
    }
    if result.regressed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The verdicts of the compared cases (and new failures) as a table that fits `max_width_chars`,
/// then one line for the cases not compared, counted by reason.
fn compare_table(result: &compare::Comparison, max_width_chars: Option<usize>) -> String {
    use kbench::report::table::{draw_columns, format_seconds, Column};
    let shown: Vec<&compare::CaseComparison> = result
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::NotCompared)
        .collect();
    let column = |header: &str, cell: &dyn Fn(&compare::CaseComparison) -> String| {
        Column::new(header, shown.iter().map(|c| cell(c)).collect())
    };
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    let columns = vec![
        column("variant", &|c| c.variant.clone()),
        column("case", &|c| c.params.clone()),
        column("baseline", &|c| {
            c.base_median_s.map_or("-".into(), format_seconds)
        })
        .numeric()
        .droppable(3),
        column("new", &|c| {
            c.new_median_s.map_or("-".into(), format_seconds)
        })
        .numeric()
        .droppable(4),
        column("change", &|c| c.ratio.map_or("-".into(), pct)).numeric(),
        column("95% CI of change", &|c| {
            c.ratio_ci95
                .map_or("-".into(), |(lo, hi)| format!("{} .. {}", pct(lo), pct(hi)))
        })
        .numeric()
        .droppable(2),
        column("p (BH)", &|c| {
            c.p_adjusted.map_or("-".into(), |p| format!("{p:.3}"))
        })
        .numeric()
        .droppable(1),
        column("verdict", &|c| match c.verdict {
            Verdict::Slower => "SLOWER".into(),
            Verdict::NewFailure => "NEW FAILURE".into(),
            v => format!("{v:?}").to_lowercase(),
        }),
    ];
    let mut out = String::new();
    if shown.is_empty() {
        out.push_str("no case was compared\n");
    } else {
        let drawn = draw_columns(columns, table::TableStyle::Terminal, max_width_chars);
        out.push_str(&drawn.table);
        out.push('\n');
        out.push_str(&drawn.left_out_note());
    }
    for c in shown.iter().filter(|c| c.verdict == Verdict::NewFailure) {
        out.push_str(&format!(
            "new failure: {} {}: {}\n",
            c.variant,
            c.params,
            c.note.as_deref().unwrap_or("no reason recorded")
        ));
    }
    out.push_str(&format!(
        "\n{} slower, {} faster, {} same, {} inconclusive, {} new failures, {} not compared\n(min effect {:.1}%, false-discovery rate {:.0}%)\n",
        result.count(Verdict::Slower),
        result.count(Verdict::Faster),
        result.count(Verdict::Same),
        result.count(Verdict::Inconclusive),
        result.count(Verdict::NewFailure),
        result.count(Verdict::NotCompared),
        result.min_effect * 100.0,
        result.fdr * 100.0,
    ));
    // The cases not compared, grouped by reason, largest group first.
    let mut reasons: Vec<(usize, &str)> = Vec::new();
    for c in result
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::NotCompared)
    {
        let reason = c.note.as_deref().unwrap_or("no reason recorded");
        match reasons.iter_mut().find(|(_, r)| *r == reason) {
            Some((count, _)) => *count += 1,
            None => reasons.push((1, reason)),
        }
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.0));
    if !reasons.is_empty() {
        let parts: Vec<String> = reasons
            .iter()
            .map(|(count, reason)| format!("{count} {reason}"))
            .collect();
        out.push_str(&format!("not compared: {}\n", parts.join("; ")));
    }
    // Same-model GPUs differ by a few percent: a case that moved is judged with that allowed.
    for c in &result.cases {
        if let Some(moved) = &c.moved {
            out.push_str(&format!(
                "moved GPU: {} {}: from {} to {}{}\n",
                c.variant,
                c.params,
                moved.from.join(", "),
                moved.to,
                moved.copy_peak_ratio.map_or(
                    " (copy peaks not recorded: not called slower or faster)".to_string(),
                    |r| format!(
                        " (copy peak {:+.1}%, allowed for in its verdict)",
                        (r - 1.0) * 100.0
                    )
                )
            ));
        }
    }
    for key in &result.only_in_baseline {
        out.push_str(&format!("only in the baseline: {key}\n"));
    }
    for key in &result.only_in_new {
        out.push_str(&format!("only in the new run: {key}\n"));
    }
    out
}

fn report(args: ReportArgs) -> ExitCode {
    let mut doc = match results::load_results(&args.results) {
        Ok(d) => d,
        Err(e) => return bad_input(e),
    };
    // The manifest recorded in the results says which tables to draw and which claims to judge;
    // the claims are judged again, so a run saved by an older kbench gets today's verdicts.
    let parsed = match &args.manifest {
        Some(path) => manifest::load(path).map_err(|e| anyhow::anyhow!("{e}")),
        None => manifest::parse(std::path::Path::new(&doc.manifest.path), &doc.manifest.toml)
            .map_err(|e| {
                anyhow::anyhow!(
                    "the manifest recorded in {} no longer parses:\n{e}",
                    args.results.display()
                )
            }),
    };
    let manifest = match parsed {
        Ok(m) if m.study.name == doc.study.name => m,
        Ok(m) => {
            return bad_input(anyhow::anyhow!(
                "{} is study `{}`, the results are study `{}`",
                m.path.display(),
                m.study.name,
                doc.study.name
            ))
        }
        Err(e) => return bad_input(e),
    };
    doc.claims = kbench::claims::judge_all(&manifest, &doc);
    let axes = manifest.algorithm.spec().axis_names();
    let report = export::Report {
        doc: &doc,
        manifest: &manifest,
        declared_only: args.tables,
        width: table_width(args.wide),
    };
    let format = export::find(&args.format).expect("clap checked the format's name");
    match (format.render)(&report) {
        Ok(text) => print!("{text}"),
        Err(e) => return bad_input(e),
    }
    let html = args.html.iter().map(|path| Export {
        format: export::find("html").expect("html is a format"),
        path: path.display().to_string(),
    });
    // Files get every column, whatever the terminal's width.
    let report = export::Report {
        width: None,
        ..report
    };
    for e in args.export.iter().cloned().chain(html) {
        match e.write(&report, &args.results) {
            Ok(path) => eprintln!("wrote {}", path.display()),
            Err(e) => return bad_input(e),
        }
    }
    if let Some(dir) = &args.plots {
        match kbench::report::plots::write_plots(&doc, &axes, dir) {
            Ok(paths) => paths
                .iter()
                .for_each(|p| eprintln!("wrote {}", p.display())),
            Err(e) => {
                return bad_input(e.context(format!("cannot draw plots into {}", dir.display())))
            }
        }
    }
    let refuted = doc.claims.iter().any(|v| v.status == ClaimStatus::Refuted);
    if refuted && args.check_claims {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    }
}

/// The results files saved under one baseline name, oldest first.
fn baseline_runs(dir: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context;
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("no baseline at {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    runs.sort();
    if runs.is_empty() {
        anyhow::bail!("the baseline folder {} holds no results", dir.display());
    }
    Ok(runs)
}

fn bad_input(e: anyhow::Error) -> ExitCode {
    eprintln!("error: {e:#}");
    ExitCode::from(2)
}

fn list() -> ExitCode {
    for algorithm in kbench::algos::all() {
        let spec = algorithm.spec();
        println!("{} ({})", spec.name, spec.title);
        println!("  axes:");
        for axis in spec.axes {
            let default = axis.default.map_or("required".to_string(), |d| {
                format!("default {}", d.to_param())
            });
            let only = axis
                .only_for
                .map_or(String::new(), |b| format!(", {b} only"));
            println!("    {:<8} {} ({default}{only})", axis.name, axis.doc);
        }
        println!("  cpu impls:    {}", spec.cpu_impls.join(", "));
        println!(
            "  cuda kernels: {} (kernels/{})",
            spec.kernels.join(", "),
            spec.kernel_file.name
        );
    }
    ExitCode::SUCCESS
}

/// A `--kernels-dir` must be a folder that is there, GPU or not: a typo is not a run without
/// kernels.
fn check_kernels_dir(dir: Option<&std::path::Path>) -> anyhow::Result<()> {
    match dir {
        Some(dir) if !dir.is_dir() => anyhow::bail!(
            "--kernels-dir {}: {}",
            dir.display(),
            if dir.exists() {
                "not a folder"
            } else {
                "no such folder"
            }
        ),
        _ => Ok(()),
    }
}

/// NVRTC's architectures are named `sm_90`, `compute_90` (or `sm_90a`).
fn check_arch(arch: &str) -> anyhow::Result<()> {
    let number = arch
        .strip_prefix("sm_")
        .or_else(|| arch.strip_prefix("compute_"))
        .map(|n| n.strip_suffix('a').unwrap_or(n));
    match number {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => anyhow::bail!("--arch {arch}: expected an architecture such as sm_90 or compute_80"),
    }
}

fn kernels(args: KernelsArgs) -> ExitCode {
    let checked = check_kernels_dir(args.kernels_dir.as_deref())
        .and_then(|()| args.archs.iter().try_for_each(|a| check_arch(a)))
        .and_then(|()| match &args.ptxas {
            Some(p) if !p.is_file() => anyhow::bail!("--ptxas {}: no such file", p.display()),
            _ => Ok(()),
        });
    if let Err(e) = checked {
        return bad_input(e);
    }
    let source = KernelSource {
        dir: args.kernels_dir,
    };
    // A source that cannot be read is bad input; one that does not compile fails (exit 1).
    for file in kbench::algos::kernel_files() {
        if let Err(e) = source.read(&file) {
            return bad_input(e);
        }
    }
    let compiled = match nvrtc::compile_all(&source, &kbench::algos::kernel_files(), &args.archs) {
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
    for kbench::device::nvrtc::CompiledFile { file, arch, ptx } in &compiled {
        let path = args
            .out_dir
            .join(format!("{}.{arch}.ptx", file.trim_end_matches(".cu")));
        if let Err(e) = std::fs::write(&path, ptx) {
            eprintln!("error: cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        println!("compiled {file} for {arch} -> {}", path.display());
        if let Some(ptxas) = &ptxas {
            match nvrtc::ptxas_report(ptxas, &path, arch) {
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
