//! The command line's grammar: every command and option of `kbench`, as clap derives them.
//! `main` parses it and hands each command to its function in `commands`; the man pages and
//! shell completions are generated from it.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::manifest;
use crate::record::{MeasureOverrides, ShardRecord};
use crate::report::export::{self, Export};
use crate::run::case::SaveOutputs;
use crate::run::lanes::{self, DeviceSelection};
use crate::run::sanitize::SanitizerTool;
use crate::shard;

#[derive(Parser)]
#[command(
    name = "kbench",
    version,
    about = "Runs GPU kernel experiments declared in TOML manifests"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// When to colour the verdicts (SLOWER, REFUTED, ...) on stdout: `auto` colours a terminal
    /// unless NO_COLOR is set.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN"
    )]
    pub color: crate::report::style::ColorWhen,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run studies: time and check every case, print tables, save JSON.
    Run(RunArgs),
    /// Validate manifests and count the cases each would run; runs nothing.
    Check {
        /// Manifest files or glob patterns (quote globs: 'experiments/*.toml').
        #[arg(required = true)]
        manifests: Vec<String>,
        /// Also say where a custom study's CUDA and CCCL headers were found.
        #[arg(long, short)]
        verbose: bool,
    },
    /// List the algorithms: grid axes, CPU implementations, CUDA kernels.
    List,
    /// Compile every kernel with NVRTC (no GPU needed): registers, spills.
    Kernels(KernelsArgs),
    /// Compare runs of one study: exit 1 if a case got slower or newly fails.
    Compare(CompareArgs),
    /// Judge a study's history of runs for change points: exit 1 on a confirmed regression.
    History(HistoryArgs),
    /// Re-render a finished run: table, markdown, CSV, JSON, CI dashboard formats, HTML, plots.
    Report(ReportArgs),
    /// Join the results files of a study's shards (`run --shard K/N`) into one: exit 1 if
    /// planned cases are missing (the file is written all the same: `run --resume` it).
    Merge(MergeArgs),
    /// Tune a study's knobs: the fastest correct configuration at each problem point, decided
    /// statistically (the manifest's `[tune]` table says what to tune and how).
    Tune(TuneArgs),
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
    /// Internal: runs the cases `kbench run` sends it on stdin (see src/run/worker.rs).
    #[command(hide = true)]
    Worker,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum SchemaOf {
    Manifest,
    Results,
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// The baseline results file(s), then the new one; or, with --baseline NAME, the new one alone.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Compare against every run saved with `kbench run --save-baseline NAME`.
    #[arg(long)]
    pub baseline: Option<String>,
    /// Smallest relative change of a median that counts (default: the manifest's, else 0.03).
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// False-discovery rate across the study's cases (default: the manifest's, else 0.05).
    #[arg(long)]
    pub fdr: Option<f64>,
    /// Compare runs made on different GPUs, drivers or CPUs.
    #[arg(long)]
    pub allow_different_device: bool,
    /// Measure the cases called slower again, in a fresh `kbench run` of this binary: a case
    /// stays slower only if the retest calls it slower too (its results are kept in `retest/`
    /// beside the new results file).
    #[arg(long)]
    pub retest: bool,
    /// With --retest: the kernel sources the new run was given with `run --kernels-dir`.
    #[arg(long, requires = "retest")]
    pub kernels_dir: Option<PathBuf>,
    /// Print the verdicts as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where baselines are kept (as for `run`).
    #[arg(long, default_value = "out")]
    pub out_dir: PathBuf,
    /// Show every column of the tables (by default they fit the terminal).
    #[arg(long)]
    pub wide: bool,
}

#[derive(clap::Args)]
pub struct HistoryArgs {
    /// Results files of one study, or folders holding them (their `*.json` files); put in run
    /// order by the time each run started, whatever the order given.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Runs a change must hold for before it is confirmed (and fails the gate).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub confirm_runs: u32,
    /// Runs a case needs before it is judged; fewer: insufficient data.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(4..=10000))]
    pub min_runs: u32,
    /// Smallest relative change of a median that counts (default: the manifest's, else 0.03).
    #[arg(long)]
    pub min_effect: Option<f64>,
    /// The change-point t-test's p-value threshold.
    #[arg(long, default_value_t = 0.001)]
    pub p_value: f64,
    /// Judge the last N runs alone (a regression older than that has been accepted).
    #[arg(long, value_parser = clap::value_parser!(u32).range(4..))]
    pub last: Option<u32>,
    /// Judge runs made on different GPUs, drivers or CPUs together.
    #[arg(long)]
    pub allow_different_device: bool,
    /// Print the verdicts as JSON.
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML page with a trend chart per case, its change points marked.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Show every column of the table (by default it fits the terminal).
    #[arg(long)]
    pub wide: bool,
}

#[derive(clap::Args)]
pub struct MergeArgs {
    /// The shards' results files.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The merged results file to write (never an existing file).
    #[arg(short, long)]
    pub output: PathBuf,
}

#[derive(clap::Args)]
pub struct SlurmArgs {
    /// The study's manifest.
    pub manifest: PathBuf,
    /// How many shards (array tasks) to split the study into.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub shards: u32,
    /// GPUs per array task: each task runs its shard with `--devices all` on them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub gpus_per_task: Option<u32>,
    /// The Slurm partition.
    #[arg(long)]
    pub partition: Option<String>,
    /// Each task's time limit, as sbatch takes it (`1:00:00`).
    #[arg(long)]
    pub time: Option<String>,
    /// Ask for whole nodes (`sbatch --exclusive`), so no other job shares a task's CPUs or GPUs.
    #[arg(long)]
    pub exclusive: bool,
    /// The folder for the scripts, the shards' results, logs and the merged file.
    #[arg(long, default_value = "slurm")]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// A results file written by `kbench run`.
    pub results: PathBuf,
    /// What to print.
    #[arg(long, default_value = "table", value_parser = format_names())]
    pub format: String,
    /// Also write the HTML report (one self-contained page) to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also write FORMAT to PATH (repeatable), e.g. `--export bmf=bench.json`.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = Export::parse)]
    pub export: Vec<Export>,
    /// Also draw the charts (SVG and PNG) into this folder.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// Print only the tables the manifest declares (and its claims), not every case.
    #[arg(long)]
    pub tables: bool,
    /// Exit 3 if a claim of the manifest is refuted by these results.
    #[arg(long)]
    pub check_claims: bool,
    /// Take the tables and claims from this manifest (of the same study) instead of the one
    /// recorded in the results: to judge a saved run against claims written since.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// Show every column of the tables (by default they fit the terminal).
    #[arg(long)]
    pub wide: bool,
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
pub struct RunArgs {
    /// Manifest files or glob patterns (quote globs: 'experiments/*.toml').
    #[arg(required_unless_present = "resume")]
    pub manifests: Vec<String>,
    /// Print the results as JSON on stdout (one document per study, one per line) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Folder for results: each run writes <out-dir>/<study>/<timestamp>.json.
    #[arg(long, default_value = "out")]
    pub out_dir: PathBuf,
    /// Save each case's inputs, output and reference as .npy files beside the JSON.
    #[arg(long, value_enum)]
    pub save_outputs: Option<SaveOutputs>,
    /// Read kernel sources from this folder instead of the copies built into kbench.
    #[arg(long)]
    pub kernels_dir: Option<PathBuf>,
    // --warmup, --min-samples, --max-samples, --max-time-s, --timeout-s, --processes: stored
    // whole in the results file, for `--resume` to check.
    #[command(flatten)]
    pub overrides: MeasureOverrides,
    /// Finish an interrupted run: the cases missing from this results file are run into it.
    #[arg(long, value_name = "RESULTS_JSON", conflicts_with = "manifests")]
    pub resume: Option<PathBuf>,
    /// Run on several GPUs of this host at once, one case per GPU: `all` (every GPU CUDA sees;
    /// under Slurm, the job's) or their numbers, `0,1`.
    #[arg(long, value_name = "all|N,N,...", value_parser = lanes::parse_devices)]
    pub devices: Option<DeviceSelection>,
    /// Run shard K of N (1-based) of each study: the cases whose stable id falls to it, the
    /// same split on every host. Join the shards with `kbench merge`.
    #[arg(long, value_name = "K/N", value_parser = shard::parse_shard, conflicts_with = "resume")]
    pub shard: Option<ShardRecord>,
    /// Run only the case NAME: its variant and parameters as `kbench compare` shows them,
    /// `"fast block=256 dtype=f32 n=1000"` (repeatable). A name no planned case has is refused.
    #[arg(long = "case", value_name = "NAME", conflicts_with_all = ["resume", "shard"])]
    pub cases: Vec<String>,
    /// Also add each study's results to the baseline NAME (several runs make a better baseline),
    /// for `kbench compare --baseline NAME`.
    #[arg(long, value_name = "NAME", value_parser = parse_baseline_name)]
    pub save_baseline: Option<String>,
    /// Exit 3 if a claim of a manifest is refuted (when no case failed: failures exit 1).
    #[arg(long)]
    pub check_claims: bool,
    /// Show every column of the tables (by default they fit the terminal).
    #[arg(long)]
    pub wide: bool,
    /// Also write each study's results as FORMAT to PATH (repeatable; `{study}` in PATH is the
    /// study's name, needed with several studies): e.g. `--export bmf=bench.json`,
    /// `--export html=out/{study}.html`. Formats as for `kbench report --format`.
    #[arg(long, value_name = "FORMAT=PATH", value_parser = Export::parse)]
    pub export: Vec<Export>,
    /// Run each CUDA case once more, untimed, under NVIDIA's compute-sanitizer (memcheck unless
    /// another tool is named): a case it finds errors in fails with them. Its reports are kept
    /// beside the results file.
    #[arg(long, value_name = "TOOL", num_args = 0..=1, require_equals = true, default_missing_value = "memcheck")]
    pub sanitize: Option<SanitizerTool>,
    /// Also write each study's results file to FILE once the study has run (`{study}` in FILE
    /// is the study's name, needed with several studies): a known path for `compare` and
    /// `report`. An existing FILE is refused before anything runs.
    #[arg(long, value_name = "FILE", value_parser = parse_results_path)]
    pub results: Option<String>,
    /// Let --results replace an existing file.
    #[arg(long, requires = "results")]
    pub overwrite_results: bool,
}

/// A `--results` path: refused here if empty, rather than after the run has measured.
fn parse_results_path(path: &str) -> Result<String, String> {
    if path.is_empty() {
        Err("an empty path".into())
    } else {
        Ok(path.to_string())
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
pub struct KernelsArgs {
    /// A custom study's manifest: its kernels at each define set (the first 16 over its grid)
    /// instead of kbench's own.
    pub manifest: Option<PathBuf>,
    /// Target architectures (repeatable).
    #[arg(long = "arch", default_values = ["sm_90", "sm_80"])]
    pub archs: Vec<String>,
    /// ptxas to assemble the PTX with for the register/spill report; found on PATH if not given.
    #[arg(long)]
    pub ptxas: Option<PathBuf>,
    /// Folder for the generated PTX.
    #[arg(long, default_value = "out/kernels")]
    pub out_dir: PathBuf,
    /// Read kernel sources from this folder instead of the copies built into kbench.
    #[arg(long)]
    pub kernels_dir: Option<PathBuf>,
}

#[derive(clap::Args)]
pub struct TuneArgs {
    /// The study's manifest, with a `[tune]` table.
    #[arg(required_unless_present = "resume")]
    pub manifest: Option<PathBuf>,
    /// Finish an interrupted tune: its folder (or a file in it); nothing evaluated is evaluated again.
    #[arg(long, value_name = "TUNE_DIR", conflicts_with = "manifest")]
    pub resume: Option<PathBuf>,
    /// Use this strategy instead of the manifest's (`exhaustive` alone: every configuration).
    #[arg(long, value_parser = ["bayes", "anneal", "random", "exhaustive"])]
    pub strategy: Option<String>,
    /// Evaluate at most N configurations per problem point (instead of the manifest's budget).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), conflicts_with = "budget_time_s")]
    pub budget_evaluations: Option<u64>,
    /// Evaluate for at most S seconds per problem point (instead of the manifest's budget).
    #[arg(long, value_name = "S")]
    pub budget_time_s: Option<f64>,
    /// Seed the strategy with this instead of the manifest's `seed`.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Each tune writes <out-dir>/<study>/tune-<timestamp>-<strategy>/.
    #[arg(long, default_value = "out")]
    pub out_dir: PathBuf,
    /// Also write a C header with the winners (`#define`s and a table per problem point).
    #[arg(long, value_name = "FILE")]
    pub export_header: Option<PathBuf>,
    /// Also write a manifest with the tuned axes fixed to the winners.
    #[arg(long, value_name = "FILE")]
    pub export_manifest: Option<PathBuf>,
    /// Print the tune results as JSON on stdout instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Read kernel sources from this folder instead of the copies built into kbench.
    #[arg(long)]
    pub kernels_dir: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: MeasureOverrides,
    /// Spread the evaluations over several GPUs of this host, one case per GPU: `all` or `0,1`.
    #[arg(long, value_name = "all|N,N,...", value_parser = lanes::parse_devices)]
    pub devices: Option<DeviceSelection>,
}
