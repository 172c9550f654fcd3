//! The results record: everything a results file holds (the study and its settings, the
//! environment, every case with its samples, statistics and accuracy), in one place, so that the
//! stages that write it and the tools that read it agree. Versioned by `SCHEMA_VERSION`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::figure;
pub mod step_latency;
pub use figure::Figure;

use crate::vocab::{Backend, CacheMode, HostMemory, Launch, Params, Scope, TimingMode, Tolerance};

/// Bumped whenever a field changes meaning or is removed. 2: per-output accuracy, the GPU timer's
/// record, float parameters, case facts.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ResultsDoc {
    pub schema_version: u32,
    pub study: Study,
    pub manifest: ManifestRecord,
    pub environment: Environment,
    pub started_at: String,
    /// When `kbench run --resume` picked the run up again.
    #[serde(default)]
    pub resumed_at: Vec<String>,
    pub finished_at: Option<String>,
    /// False until every planned case has a result.
    pub complete: bool,
    pub planned_cases: usize,
    pub cases: Vec<CaseResult>,
    /// The manifest's claims, judged when the study finished (`kbench report` judges again).
    #[serde(default)]
    pub claims: Vec<ClaimVerdict>,
    /// The part of the plan this file holds when it was run with `--shard K/N`; `planned_cases`
    /// then counts the shard's cases. None: the whole plan (a merged file included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardRecord>,
    /// The shard files `kbench merge` joined into this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<MergedShard>,
}

/// `--shard K/N`: shard K (1-based) of N, of the plan split as `split` says
/// (`crate::shard::select`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ShardRecord {
    /// 1-based: 1..=count.
    pub index: u32,
    pub count: u32,
    /// How a case's id is split (absent: a file written before the ids were mixed, resumed
    /// with the split it was planned with).
    #[serde(default)]
    pub split: ShardSplit,
}

/// How a case id picks its shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ShardSplit {
    /// A case's FNV-1a id modulo N: its low bit is the parity of the bytes' low bits, so two
    /// shards of a small grid could split it very unevenly (or leave one empty).
    #[default]
    Fnv1a,
    /// The plan's cases ordered by their ids mixed (MurmurHash3's fmix64) and dealt to the
    /// shards in turn: each gets within one case of the N-th part. What `--shard` plans with.
    Balanced,
}

impl ShardRecord {
    /// Whether this names a shard that exists: 1 <= index <= count.
    pub fn check(self) -> Result<(), String> {
        let ShardRecord {
            index: k, count: n, ..
        } = self;
        if n == 0 {
            Err("N must be at least 1".into())
        } else if k == 0 {
            Err("shards are numbered from 1 (as Slurm's --array=1-N), so K is 1..N".into())
        } else if k > n {
            Err(format!("shard {k} of {n} does not exist"))
        } else {
            Ok(())
        }
    }
}

/// One input of `kbench merge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MergedShard {
    pub path: String,
    pub host: String,
    pub shard: Option<ShardRecord>,
    pub started_at: String,
    pub cases: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    Holds,
    Refuted,
    Inconclusive,
}

impl ClaimStatus {
    pub fn name(self) -> &'static str {
        match self {
            ClaimStatus::Holds => "holds",
            ClaimStatus::Refuted => "refuted",
            ClaimStatus::Inconclusive => "inconclusive",
        }
    }
}

/// A claim of the manifest, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimVerdict {
    /// The report's sentence.
    pub text: String,
    pub source: String,
    /// faster, reaches_peak, passes, rises or falls.
    pub kind: String,
    pub status: ClaimStatus,
    /// Every case it rests on was skipped (no GPU): inconclusive, not refuted.
    pub skipped: bool,
    /// The counts, and the case that decided the verdict.
    pub evidence: String,
    pub cases: Vec<ClaimCase>,
}

/// One grid point (or pair of points) of a claim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimCase {
    pub point: String,
    pub status: ClaimStatus,
    pub skipped: bool,
    /// The ratio or share the claim is about.
    #[serde(with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub estimate: Option<f64>,
    #[serde(with = "figure::option_pair")]
    #[schemars(with = "Option<(Figure, Figure)>")]
    pub ci95: Option<(f64, f64)>,
    pub evidence: String,
    /// How far the case is on the claim's side of its bound (above 1: holds): which case came
    /// closest to deciding the other way.
    #[serde(default, with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub margin: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Study {
    pub name: String,
    pub title: String,
    pub algorithm: String,
    pub seed: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct ManifestRecord {
    pub path: String,
    /// The manifest's text, exactly as read.
    pub toml: String,
    pub variants: Vec<Variant>,
    // What the cases were measured with: the manifest's `[measure]` with `overrides` applied.
    pub measure: MeasureSettings,
    /// The command line's overrides of `[measure]`, as given (absent: none, or a file written
    /// before they were recorded).
    #[serde(default, skip_serializing_if = "MeasureOverrides::is_empty")]
    pub overrides: MeasureOverrides,
    pub baseline: Option<String>,
    #[serde(default)]
    pub compare: CompareDefaults,
    /// The files each value of a file axis named when the run started (`matrix =
    /// "datasets/*.mtx"`): readers of the results take these and never expand the glob again, so
    /// a results file reads the same from any folder. Absent: no file axis, or a file written
    /// before kbench recorded them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileAxisRecord>,
    /// The manifest's absolute path when the run started: a custom study's files (sources,
    /// `.npy` inputs, commands) are relative to its folder, whatever folder reads the results.
    /// Absent: a file written before kbench recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub absolute: Option<String>,
    /// A custom study's source files as the run compiled them: `report` and `merge` read the
    /// study from these, and `run --resume` compiles only sources on disk that still match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<RecordedSource>,
}

/// A custom study's source file as its run read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordedSource {
    pub absolute: String,
    pub bytes: u64,
    /// FNV-1a (64-bit) of its content, 16 hex digits.
    pub fnv1a64: String,
    pub text: String,
}

/// One value of a file axis (a path or a glob) and the files it named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FileAxisRecord {
    pub axis: String,
    /// The manifest's value, as written.
    pub pattern: String,
    pub files: Vec<RecordedFile>,
}

/// A file a case read, as the run found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RecordedFile {
    /// As the cases' `params` name it (relative to the folder the run started in, when the
    /// manifest's value was relative).
    pub path: String,
    /// Its absolute path: where `run --resume` reads it, from whatever folder.
    pub absolute: String,
    pub bytes: u64,
    /// FNV-1a (64-bit) of its content, 16 hex digits: `run --resume` refuses a file that changed.
    pub fnv1a64: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Variant {
    pub name: String,
    pub backend: Backend,
    /// The CPU implementation or the CUDA kernel this variant runs.
    pub implementation: String,
    /// Axis values that replace the grid's for this variant.
    pub params: BTreeMap<String, Vec<crate::vocab::ParamValue>>,
    pub scope: Scope,
    /// Where timed transfers copy from and to (transfers and program scope).
    #[serde(default)]
    pub host_memory: HostMemory,
    /// Streams the copies and kernels of a transfers-scope run are split over, chunk by chunk
    /// (1: one stream, no overlap).
    #[serde(default = "one_stream")]
    pub streams: u32,
}

fn one_stream() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MeasureSettings {
    pub warmup: u32,
    pub min_samples: u32,
    pub max_samples: u32,
    pub max_time_s: f64,
    pub target_rel_ci: f64,
    pub scope: Scope,
    pub cache: CacheMode,
    /// `single`: one run per sample, the stream held until it is queued; `batch`: several runs
    /// back to back per sample (hot caches), for kernels too short for one event pair.
    pub mode: TimingMode,
    /// In batch mode, the least GPU time one sample spans; the batch grows until it does.
    pub batch_min_window_s: f64,
    /// A case still running after this long (warm-up and samples) is recorded as timed out.
    pub timeout_s: f64,
    /// Every kernel-scope sample starts from inputs no earlier run saw: before each (outside the
    /// timing, before the L2 flush) the device copies the case's inputs over from a pristine
    /// copy, so a kernel that keeps state in or keyed on its inputs cannot reuse it. Not with
    /// batch mode (several runs share one sample's inputs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fresh_inputs: bool,
    /// The most the two timers (events and CUPTI) may disagree, relative to the events' median,
    /// before a case is flagged ...
    pub timer_tolerance: f64,
    /// ... or in seconds, whichever is larger: CUPTI times a kernel from its first block's start
    /// to its last block's end, while events (and Nsight Compute) also see about a microsecond
    /// of the GPU's own launch processing.
    pub timer_tolerance_s: f64,
    /// Whether CUDA cases get an energy window after their samples (where NVML's energy counter
    /// is there): their runs back to back for about `ENERGY_WINDOW_S`, the counter read around
    /// them. Written to the results only when off.
    #[serde(default = "energy_on", skip_serializing_if = "is_on")]
    pub energy: bool,
    /// How many worker processes measure each case (`[measure] processes`, `--processes`):
    /// each does the case's set-up, warm-up and check and takes its share of the samples (see
    /// `run::processes`), so one process's level (a per-process offset of unknown cause) does
    /// not decide the case. Written to the results only when above 1.
    #[serde(default = "one_process", skip_serializing_if = "is_one_process")]
    pub processes: u32,
    /// How kernel-scope runs are launched (`[measure] launch`, `--launch`): one by one on the
    /// stream, or replayed from a CUDA graph captured once per case and process. Written to the
    /// results only when `graph`.
    #[serde(default, skip_serializing_if = "is_stream")]
    pub launch: Launch,
}

fn is_stream(launch: &Launch) -> bool {
    *launch == Launch::Stream
}

fn energy_on() -> bool {
    true
}

/// The most worker processes a case may be measured in: each holds a CUDA context (and its
/// share of device memory) on the lane's GPU while the others run.
pub const MAX_PROCESSES: u32 = 64;

fn one_process() -> u32 {
    1
}

fn is_one_process(processes: &u32) -> bool {
    *processes == 1
}

fn is_on(energy: &bool) -> bool {
    *energy
}

impl Default for MeasureSettings {
    fn default() -> Self {
        MeasureSettings {
            warmup: 3,
            min_samples: 10,
            max_samples: 200,
            max_time_s: 2.0,
            target_rel_ci: 0.01,
            scope: Scope::Kernel,
            cache: CacheMode::Cold,
            mode: TimingMode::Single,
            batch_min_window_s: 100e-6,
            timeout_s: 120.0,
            fresh_inputs: false,
            timer_tolerance: 0.02,
            timer_tolerance_s: 1.5e-6,
            energy: true,
            processes: 1,
            launch: Launch::Stream,
        }
    }
}

// One struct from clap to the results file, applied in one place (`apply`) and checked against
// a resumed file's settings in one place (`conflicts`): a new override is one field here and
// one line in `entries`.
/// The command line's overrides of the manifests' `[measure]` (`kbench run --warmup 1 ...`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema, clap::Args)]
pub struct MeasureOverrides {
    /// Override the manifests' warm-up runs per case.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u32>,
    /// Override the manifests' minimum samples per case.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_samples: Option<u32>,
    /// Override the manifests' maximum samples per case.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_samples: Option<u32>,
    /// Override the manifests' time budget per case, in seconds.
    #[arg(long, value_parser = parse_positive_seconds)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_s: Option<f64>,
    /// Per-case time limit in seconds (default: the manifests', else 120): a case still running
    /// then is recorded as timed out, with the samples it took.
    #[arg(long, value_parser = parse_positive_seconds)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<f64>,
    /// Measure each case in this many worker processes (default: the manifests', else 1), each
    /// taking its share of the samples, so no one process's level decides the case.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_PROCESSES as i64))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes: Option<u32>,
    /// Launch kernel-scope runs one by one on the stream, or replay them from a CUDA graph
    /// captured once per case (default: the manifests', else stream).
    #[arg(long, value_enum)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Launch>,
}

/// One override: its flag, the `[measure]` key it replaces, and its value as the flag takes it,
/// if given.
struct OverrideEntry {
    flag: &'static str,
    key: &'static str,
    value: Option<String>,
}

impl MeasureOverrides {
    /// No override given.
    pub fn is_empty(&self) -> bool {
        *self == MeasureOverrides::default()
    }

    /// The overrides that would turn any manifest's settings into `settings`: every one given.
    pub fn all_of(settings: &MeasureSettings) -> MeasureOverrides {
        MeasureOverrides {
            warmup: Some(settings.warmup),
            min_samples: Some(settings.min_samples),
            max_samples: Some(settings.max_samples),
            max_time_s: Some(settings.max_time_s),
            timeout_s: Some(settings.timeout_s),
            processes: Some(settings.processes),
            launch: Some(settings.launch),
        }
    }

    /// Each override with its flag and key, in the order `--help` lists them.
    fn entries(&self) -> [OverrideEntry; 7] {
        fn text(value: Option<impl ToString>) -> Option<String> {
            value.map(|v| v.to_string())
        }
        let entry = |flag, key, value| OverrideEntry { flag, key, value };
        [
            entry("--warmup", "warmup", text(self.warmup)),
            entry("--min-samples", "min_samples", text(self.min_samples)),
            entry("--max-samples", "max_samples", text(self.max_samples)),
            entry("--max-time-s", "max_time_s", text(self.max_time_s)),
            entry("--timeout-s", "timeout_s", text(self.timeout_s)),
            entry("--processes", "processes", text(self.processes)),
            entry("--launch", "launch", text(self.launch.map(Launch::name))),
        ]
    }

    /// The overrides given, as the flags that give them again (`compare --retest`'s run).
    pub fn args(&self) -> Vec<String> {
        (self.entries().into_iter())
            .filter_map(|e| Some([e.flag.to_string(), e.value?]))
            .flatten()
            .collect()
    }

    /// Refuses overrides that contradict each other, before anything is loaded.
    pub fn check(&self) -> Result<(), String> {
        match (self.min_samples, self.max_samples) {
            (Some(min), Some(max)) if min > max => Err(format!(
                "--min-samples {min} is more than --max-samples {max}"
            )),
            _ => Ok(()),
        }
    }

    /// A study's settings: the manifest's, with these overrides. A lone `--min-samples` above
    /// the manifest's `max_samples` raises it (see `sample_count_note`).
    pub fn apply(&self, manifest: &MeasureSettings) -> MeasureSettings {
        let mut s = manifest.clone();
        s.warmup = self.warmup.unwrap_or(s.warmup);
        s.min_samples = self.min_samples.unwrap_or(s.min_samples);
        s.max_samples = self.max_samples.unwrap_or(s.max_samples).max(s.min_samples);
        s.max_time_s = self.max_time_s.unwrap_or(s.max_time_s);
        s.timeout_s = self.timeout_s.unwrap_or(s.timeout_s);
        s.processes = self.processes.unwrap_or(s.processes);
        s.launch = self.launch.unwrap_or(s.launch);
        s
    }

    /// The overrides given here that differ from the settings a run `measured` with, one line
    /// each (`--resume` refuses them, so one file never holds two settings). An override equal
    /// to the recorded value is no conflict, whether the original run gave it or its manifest.
    pub fn conflicts(&self, measured: &MeasureSettings) -> Vec<String> {
        let recorded = MeasureOverrides::all_of(measured);
        (self.entries().into_iter())
            .zip(recorded.entries())
            .filter_map(|(given, was)| match (given.value, was.value) {
                (Some(g), Some(w)) if g != w => Some(format!(
                    "  {} {g}, but the run measured with {} = {w}",
                    given.flag, was.key
                )),
                _ => None,
            })
            .collect()
    }

    /// What a lone `--min-samples` or `--max-samples` did to a manifest's other bound, if
    /// anything: said, not silent. `measure` is `apply(declared)`.
    pub fn sample_count_note(
        &self,
        declared: &MeasureSettings,
        measure: &MeasureSettings,
    ) -> Option<String> {
        match (self.min_samples, self.max_samples) {
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
}

/// As in the manifests: a finite number of seconds above zero.
fn parse_positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 => Ok(s),
        _ => Err("expected a positive number of seconds".into()),
    }
}

/// What `kbench compare` uses for this study unless the command line says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompareDefaults {
    /// Smallest relative change of a median that counts as slower or faster (0.03 = 3%).
    pub min_effect: f64,
    /// False-discovery rate controlled across the study's cases.
    pub fdr: f64,
}

impl Default for CompareDefaults {
    fn default() -> Self {
        CompareDefaults {
            min_effect: 0.03,
            fdr: 0.05,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    pub host: String,
    /// This boot of the host (Linux's /proc/sys/kernel/random/boot_id): runs with different ones
    /// ran on different machines, or across a reboot, even where the host name is the same (a
    /// cloud GPU machine lent afresh). None in files written before kbench recorded it, and
    /// where it cannot be read. `kbench history` puts a change down to the machine when it
    /// begins with one (`crate::history`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    pub os: String,
    pub arch: String,
    pub cpu_model: String,
    pub cpu_threads: usize,
    pub kbench_version: String,
    pub git_revision: String,
    pub command_line: Vec<String>,
    /// The GPU, when a CUDA case opened one: with several (`run --devices`), the first to open.
    pub device: Option<DeviceFingerprint>,
    /// Every GPU the run's cases opened, in the order they first did (`run --devices` runs on
    /// several; a merged file lists its shards' devices). Empty in files written before kbench
    /// recorded it: `device` is then the only one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceFingerprint>,
    /// Why CUDA cases were skipped, when they were.
    pub gpu_unavailable: Option<String>,
    /// How busy the host was while the run ran (None in files written before kbench recorded
    /// it, and where /proc cannot be read): the gate does not call a host-bound case slower
    /// when its run was busier than the baselines' (`crate::compare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<HostLoad>,
    /// Where a custom study's kernels found CUDA's and CCCL's headers (what `check --verbose`
    /// prints); None for the built-ins, and in files written before kbench recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_headers: Option<String>,
}

/// The host's load over one run, from /proc (`crate::env::load_sample`): read when the run
/// starts and again when it finishes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HostLoad {
    /// The CPUs the host has (all of them online, not only the ones this process may use).
    pub cpu_count: usize,
    pub start: LoadSample,
    /// None until the run finishes.
    #[serde(default)]
    pub end: Option<LoadSample>,
    /// How many CPUs other processes kept busy on average over the run (the host's busy CPU
    /// time less kbench's own, its workers included, over the run's wall time): 0 on an idle
    /// host, `cpu_count` on a saturated one. None until the run finishes.
    #[serde(default)]
    pub other_busy_cpus: Option<f64>,
}

/// The host's counters at one moment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LoadSample {
    /// /proc/loadavg's 1-minute figure (kbench's own runnable processes included).
    pub loadavg_1m: f64,
    /// /proc/stat's first line: CPU time busy (all but idle and iowait) and in all, in clock
    /// ticks (USER_HZ) summed over the CPUs.
    pub busy_ticks: u64,
    pub total_ticks: u64,
    /// This process's CPU time and its waited-for children's (/proc/self/stat utime, stime,
    /// cutime, cstime), in clock ticks.
    pub own_ticks: u64,
    /// The CPUs' mean current clock (/proc/cpuinfo `cpu MHz`), where the kernel reports it.
    #[serde(default)]
    pub cpu_mhz: Option<f64>,
}

/// What the results record about the device.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DeviceFingerprint {
    pub name: String,
    /// The host the GPU is in (a merged file lists several hosts' GPUs). Empty in files written
    /// before kbench recorded it: `environment.host` then.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// `0000:18:00.0`: which GPU of the host.
    #[serde(default)]
    pub pci_bus_id: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub total_memory_bytes: u64,
    pub l2_cache_bytes: u64,
    pub sm_clock_mhz: f64,
    pub memory_clock_mhz: f64,
    pub memory_bus_width_bits: u32,
    /// From the memory clock and bus width: 2 transfers per clock.
    pub theoretical_memory_gbytes_per_s: f64,
    pub driver_version: String,
    pub nvrtc_version: String,
    /// A large device-to-device copy measured at the start of the run (bytes read + written).
    pub measured_copy_gbytes_per_s: f64,
    /// A kernel reading a large buffer with 16-byte loads (and writing next to nothing),
    /// measured at the start of the run: the ceiling of read-only kernels, above the copy's on
    /// an H100. 0 in files written before kbench measured it (the copy peak stands in).
    #[serde(default)]
    pub measured_read_gbytes_per_s: f64,
    /// A kernel storing 16-byte vectors over a large buffer: the ceiling of write-only kernels.
    /// 0 in files written before kbench measured it (the copy peak stands in).
    #[serde(default)]
    pub measured_write_gbytes_per_s: f64,
    /// A kernel reading two large buffers and writing one of them back (b = a + b, 16-byte
    /// vectors): the ceiling of kernels of two reads to one write, such as SAXPY, above the
    /// copy's on an H100. 0 in files written before kbench measured it (the copy peak stands in).
    #[serde(default)]
    pub measured_triad_gbytes_per_s: f64,
    /// The datasheet's bandwidth through NVML: the maximum memory clock x the bus width x 2
    /// transfers per clock. None where NVML is not there (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub datasheet_memory_gbytes_per_s: Option<f64>,
    /// The host link, measured at the start of the run: 256 MiB copied from page-locked host
    /// memory to the device, and back.
    #[serde(default)]
    pub host_to_device_gbytes_per_s: f64,
    #[serde(default)]
    pub device_to_host_gbytes_per_s: f64,
    /// The GPU time between two events with nothing between them (queued behind a held
    /// stream), measured when the device opened: the events' own cost, taken off every event
    /// timing.
    #[serde(default)]
    pub event_overhead_s: f64,
    /// The second timer: None when CUPTI is there, else why not.
    #[serde(default)]
    pub cupti_unavailable: Option<String>,
    /// The third timer, CUPTI's range profiler (Nsight Compute's `gpu__time_duration`): None
    /// when it is there, else why not.
    #[serde(default)]
    pub cupti_profiler_unavailable: Option<String>,
    /// Clocks and throttling: None when NVML is there, else why not.
    #[serde(default)]
    pub nvml_unavailable: Option<String>,
    /// Where NVML is there but its energy counter is not (before Volta, or refused): why. Cases
    /// then have no energy record; where NVML is not there, `nvml_unavailable` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_unavailable: Option<String>,
    /// Why the copy, read and write peaks and the host link were not measured (their figures
    /// are then 0): `KBENCH_SKIP_PEAKS` was set (the timer sweep sets it), or Nsight Compute ran the
    /// process, replaying every launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peaks_unmeasured: Option<String>,
    /// Set on the mock device alone (`KBENCH_MOCK_GPU`): its timings are synthetic, not
    /// measurements, and this says so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mock: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Passed,
    AccuracyFailed,
    Error,
    /// Still running at the case's time limit; the samples taken are kept.
    TimedOut,
    Skipped,
}

impl CaseStatus {
    /// As the JSON writes it: `accuracy_failed`.
    pub fn name(self) -> &'static str {
        match self {
            CaseStatus::Passed => "passed",
            CaseStatus::AccuracyFailed => "accuracy_failed",
            CaseStatus::Error => "error",
            CaseStatus::TimedOut => "timed_out",
            CaseStatus::Skipped => "skipped",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CaseResult {
    pub index: usize,
    pub variant: String,
    pub backend: Backend,
    pub implementation: String,
    /// The timed region; CPU cases time the computation alone.
    pub scope: Option<Scope>,
    /// Where timed transfers copied from and to (CUDA cases with transfers).
    #[serde(default)]
    pub host_memory: Option<HostMemory>,
    pub params: Params,
    pub status: CaseStatus,
    /// Why a case was skipped or failed.
    pub reason: Option<String>,
    /// The fewest bytes the case must move: `bytes_read + bytes_written`.
    pub bytes_moved: u64,
    /// Of `bytes_moved`, those read and those written; both 0 in files written before kbench
    /// split them (their "% peak" is then of the copy peak).
    #[serde(default)]
    pub bytes_read: u64,
    #[serde(default)]
    pub bytes_written: u64,
    pub flops: u64,
    pub summary: Option<Summary>,
    /// From the median time and the fewest bytes the case must move.
    #[serde(with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub gbytes_per_s: Option<f64>,
    #[serde(with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub gflops_per_s: Option<f64>,
    /// Elements the case processes (a custom study's `elements`); 0 where none is declared.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub elements: u64,
    /// From the median time and `elements`; None where none is declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elements_per_s: Option<f64>,
    /// Which measured peak the case's "% peak" divides by: the one matching its traffic (see
    /// `PeakKind::for_traffic`). None for CPU cases and in older files (the copy peak then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_kind: Option<PeakKind>,
    /// That peak, from the device the case ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_gbytes_per_s: Option<f64>,
    /// The case moved its bytes faster than the memory physically can (its GB/s above the
    /// device's ceiling, `DeviceFingerprint::ceiling_gbytes_per_s`, by more than
    /// `IMPLAUSIBLE_MARGIN`): its time is not what it claims to be (data kept in L2 across the
    /// flush, work skipped, or a byte count too high). Every claim resting on it fails.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub implausible: bool,
    /// Why it is implausible, with the numbers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub implausible_reason: Option<String>,
    /// Its "% peak" is above 100% although its time is plausible: why. Every such case run by
    /// this version is flagged (files written before were judged without the flag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub above_peak: Option<AbovePeak>,
    pub measurement: Option<Measurement>,
    /// Each output checked against its reference.
    pub outputs: Vec<OutputCheck>,
    /// Timed only: the variant's kernel sequence is `unchecked`, and no output was checked.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchecked: bool,
    /// What the study's check command said of the answer (custom studies that declare one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_command: Option<CheckVerdict>,
    /// Numbers an algorithm reports about a case (levels, colours, iterations).
    #[serde(default, with = "figure::map")]
    #[schemars(with = "BTreeMap<String, Figure>")]
    pub facts: BTreeMap<String, f64>,
    /// `.npy` files written for `--save-outputs`, relative to the results file's folder.
    pub saved_files: Vec<String>,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub wall_s: f64,
    /// The GPU a CUDA case ran on (None for CPU cases, and in files written before kbench
    /// recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<CaseDevice>,
    /// `run --sanitize`: what compute-sanitizer found in one more run of the case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sanitizer: Option<SanitizerCheck>,
    /// Where the case's `wall_s` went (None in files written before kbench recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<Overhead>,
}

/// A check command's verdict on a case's answer: exit 0 (passed) or 1 (wrong, with what it
/// printed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckVerdict {
    pub passed: bool,
    /// The end of what it printed, where it found the answer wrong.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Where a case's wall time went, in seconds: what kbench spent around the samples, stage by
/// stage. With several processes (`[measure] processes`), the sum over them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Overhead {
    /// Opening the GPU (the context, the device's record, its peaks): a worker's first case.
    pub setup_s: f64,
    /// Making the inputs: random draws, `.npy` files, copies and expressions.
    pub inputs_s: f64,
    /// The expected outputs: the reference command, the reference kernel's run, `.npy` files
    /// (none where an earlier case of the grid point, or of the problem, made them).
    pub reference_s: f64,
    /// NVRTC and loading the module (little where the run compiled the same source before).
    pub compile_s: f64,
    /// Copies to and from the GPU outside the timed runs.
    pub transfers_s: f64,
    /// The warm-up and the timed samples.
    pub sampling_s: f64,
    /// Runs after the samples: traced, profiled, and the energy window.
    pub extra_runs_s: f64,
    /// Checking the outputs against the reference, and saving them.
    pub checking_s: f64,
    /// The rest of `wall_s`: starting worker processes, messages, the results file.
    pub other_s: f64,
}

impl Overhead {
    /// Every stage's seconds but `other_s`.
    pub fn staged_s(&self) -> f64 {
        self.setup_s
            + self.inputs_s
            + self.reference_s
            + self.compile_s
            + self.transfers_s
            + self.sampling_s
            + self.extra_runs_s
            + self.checking_s
    }

    /// `other_s` set to what `wall_s` leaves.
    pub fn within(mut self, wall_s: f64) -> Overhead {
        self.other_s = (wall_s - self.staged_s()).max(0.0);
        self
    }

    /// The two added stage by stage (a case's processes).
    pub fn plus(&self, other: &Overhead) -> Overhead {
        Overhead {
            setup_s: self.setup_s + other.setup_s,
            inputs_s: self.inputs_s + other.inputs_s,
            reference_s: self.reference_s + other.reference_s,
            compile_s: self.compile_s + other.compile_s,
            transfers_s: self.transfers_s + other.transfers_s,
            sampling_s: self.sampling_s + other.sampling_s,
            extra_runs_s: self.extra_runs_s + other.extra_runs_s,
            checking_s: self.checking_s + other.checking_s,
            other_s: self.other_s + other.other_s,
        }
    }
}

/// One run of a CUDA case under compute-sanitizer, outside the timing (`run --sanitize`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SanitizerCheck {
    /// `memcheck`, `racecheck`, `initcheck` or `synccheck`.
    pub tool: String,
    /// From its `ERROR SUMMARY`; None when it wrote none (the run did not finish).
    pub errors: Option<u64>,
    /// Its first error lines.
    pub report: Vec<String>,
    /// Its whole report, relative to the results file's folder.
    pub log_file: String,
    /// Why the run under the sanitizer did not finish (it faulted, hung or could not start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// Which GPU a case ran on: a GPU is named by its host and PCI bus id together (identical
/// nodes have the same bus ids).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CaseDevice {
    /// The GPU's ordinal: the physical one (CUDA's numbering without CUDA_VISIBLE_DEVICES, which
    /// kbench orders by PCI bus id as `nvidia-smi` does, unless CUDA_DEVICE_ORDER says otherwise)
    /// when `physical`, else its place among the devices CUDA_VISIBLE_DEVICES names (by UUID, say).
    pub index: u32,
    pub physical: bool,
    /// `0000:18:00.0`: names the GPU of its host whatever the numbering.
    pub pci_bus_id: String,
    /// The host the case ran on. Empty in files written before kbench recorded it:
    /// `environment.host` then. With `pci_bus_id`, the key into `environment.devices`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
}

/// A GPU's identity among every host's: (host, PCI bus id).
pub type DeviceKey = (String, String);

/// `host`, or `default_host` (the file's `environment.host`) where a file does not record it.
fn host_or<'a>(host: &'a str, default_host: &'a str) -> &'a str {
    if host.is_empty() {
        default_host
    } else {
        host
    }
}

impl DeviceFingerprint {
    /// The GPU's key; `default_host`: its file's `environment.host`.
    pub fn key(&self, default_host: &str) -> DeviceKey {
        (
            host_or(&self.host, default_host).to_string(),
            self.pci_bus_id.clone(),
        )
    }
}

/// Which measured peak a case's "% peak" divides by: the one whose traffic matches its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PeakKind {
    /// Reads alone (16-byte loads over a large buffer): an H100 reads faster than it copies.
    Read,
    /// Writes alone (16-byte stores).
    Write,
    /// Reads and writes mixed, as many of each: the device-to-device copy, which pays the bus
    /// turnarounds a mixed kernel pays.
    Copy,
    /// Two reads to one write (STREAM's triad, SAXPY): kbench's triad kernel.
    Triad,
}

/// The share of a case's bytes the other direction may have and still count as negligible: a
/// reduction reads n values and writes one (or one per block).
pub const NEGLIGIBLE_TRAFFIC_SHARE: f64 = 0.02;

/// Why a plausible case's GB/s is above the measured peak matching its traffic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AbovePeak {
    pub cause: AbovePeakCause,
    /// The cause, with the numbers.
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AbovePeakCause {
    /// Some of its bytes need not cross the memory bus within the timing: writes still in the
    /// L2 when the timer stops (written back after it), or, without the flush, inputs the L2
    /// already held. Counting only the bytes that must cross it, the case is within the peak.
    L2,
    /// Above the peak by more than the L2 can explain, yet not implausible (not past the
    /// physical ceiling by more than `IMPLAUSIBLE_MARGIN`): the case moved memory faster than
    /// kbench's peak kernel did in this run.
    BeatsPeakKernel,
}

impl AbovePeakCause {
    /// As the JSON writes it.
    pub fn name(self) -> &'static str {
        match self {
            AbovePeakCause::L2 => "l2",
            AbovePeakCause::BeatsPeakKernel => "beats_peak_kernel",
        }
    }
}

/// How far above the device's physical ceiling a case's GB/s may be before it is implausible:
/// the datasheet's clocks are rounded (the H100's memory clock reads 2619 MHz), and a median
/// has its own noise.
pub const IMPLAUSIBLE_MARGIN: f64 = 0.02;

impl PeakKind {
    /// The peak matching a case's traffic: read (or write) where the other direction is at most
    /// `NEGLIGIBLE_TRAFFIC_SHARE` of its bytes; triad where its share of reads is nearer the
    /// triad's two thirds than the copy's half or reads alone; else copy, as before the triad
    /// was measured (a mostly-read mix, such as SYMGS's or find_repeats', has no measured peak of
    /// its own between the triad and reads alone). Mixed traffic is held to a mixed kernel rather
    /// than a blend of the one-way peaks, which would ignore the cost of turning the bus around.
    /// Nothing known (both 0, as in older files): copy, as kbench always used.
    pub fn for_traffic(bytes_read: u64, bytes_written: u64) -> PeakKind {
        // In whole bytes, so that the triad's bounds below are exact.
        let read = bytes_read as u128;
        let all = read + bytes_written as u128;
        let negligible = |bytes: u64| bytes as f64 <= NEGLIGIBLE_TRAFFIC_SHARE * all as f64;
        if all == 0 {
            PeakKind::Copy
        } else if negligible(bytes_written) {
            PeakKind::Read
        } else if negligible(bytes_read) {
            PeakKind::Write
        } else if 12 * read > 7 * all && 6 * read <= 5 * all {
            // Between 7/12 (halfway from the copy's half to the triad's two thirds) and 5/6
            // (halfway from the triad to reads alone) of the bytes read.
            PeakKind::Triad
        } else {
            PeakKind::Copy
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PeakKind::Read => "read",
            PeakKind::Write => "write",
            PeakKind::Copy => "copy",
            PeakKind::Triad => "triad",
        }
    }
}

impl DeviceFingerprint {
    /// The measured peak of `kind` and the kind it is: the copy peak where the device has no
    /// measurement of that kind (a file written before kbench measured read and write peaks).
    pub fn peak(&self, kind: PeakKind) -> (PeakKind, f64) {
        let measured = match kind {
            PeakKind::Read => self.measured_read_gbytes_per_s,
            PeakKind::Write => self.measured_write_gbytes_per_s,
            PeakKind::Copy => self.measured_copy_gbytes_per_s,
            PeakKind::Triad => self.measured_triad_gbytes_per_s,
        };
        if measured > 0.0 {
            (kind, measured)
        } else {
            (PeakKind::Copy, self.measured_copy_gbytes_per_s)
        }
    }

    /// What the memory can physically move, in GB/s: the larger of the datasheet's (NVML's
    /// maximum memory clock) and CUDA's attribute figure (the current memory clock), so that a
    /// clock read low never makes an honest case implausible. 0 when neither is known.
    pub fn ceiling_gbytes_per_s(&self) -> f64 {
        let datasheet = self.datasheet_memory_gbytes_per_s.unwrap_or(0.0);
        datasheet.max(self.theoretical_memory_gbytes_per_s)
    }
}

impl CaseResult {
    /// The case's GB/s as a share of its peak (1.0 = 100%): the peak it recorded, or, in files
    /// written before cases recorded theirs, `device`'s copy peak. CUDA cases only.
    pub fn share_of_peak(&self, device: Option<&DeviceFingerprint>) -> Option<f64> {
        if self.backend != Backend::Cuda {
            return None;
        }
        let peak = self
            .peak_gbytes_per_s
            .or_else(|| device.map(|d| d.measured_copy_gbytes_per_s))
            .filter(|p| *p > 0.0)?;
        Some(self.gbytes_per_s? / peak)
    }

    /// Fills in the peak the case is measured against and whether its GB/s is plausible on
    /// `device`, from its bytes and `gbytes_per_s`. Only the bytes that must cross the memory
    /// bus within the timing (`bytes_past_l2`) count against the physical ceiling.
    pub fn judge_peak(&mut self, device: &DeviceFingerprint) {
        let (kind, peak) = device.peak(PeakKind::for_traffic(self.bytes_read, self.bytes_written));
        self.peak_kind = Some(kind);
        self.peak_gbytes_per_s = (peak > 0.0).then_some(peak);
        self.implausible = false;
        self.implausible_reason = None;
        self.above_peak = None;
        let Some(rate) = self.gbytes_per_s.filter(|r| *r > 0.0) else {
            return;
        };
        let past_l2 = self.bytes_past_l2(device.l2_cache_bytes);
        let rate_past_l2 = rate * past_l2 as f64 / self.bytes_moved.max(1) as f64;
        let spared = self.bytes_moved.saturating_sub(past_l2);
        // Formatted only for the cases that are flagged.
        let l2_spared = || {
            format!(
                "{:.1} of its {:.1} MB need not cross the memory bus within the timing ({})",
                spared as f64 / 1e6,
                self.bytes_moved as f64 / 1e6,
                self.l2_allowance(device.l2_cache_bytes),
            )
        };
        let ceiling = device.ceiling_gbytes_per_s();
        if ceiling > 0.0 && rate_past_l2 > ceiling * (1.0 + IMPLAUSIBLE_MARGIN) {
            let over = if spared > 0 {
                format!("{rate_past_l2:.0} GB/s over the bytes that must cross the memory bus ({rate:.0} GB/s over all of them; {})", l2_spared())
            } else {
                format!("{rate:.0} GB/s")
            };
            let kept = if self.cold_l2() {
                "data kept in L2 across the flush"
            } else {
                "data kept in L2 beyond its size"
            };
            self.implausible = true;
            self.implausible_reason = Some(format!(
                "{over} is {:.0}% of the memory's physical ceiling of {ceiling:.0} GB/s (more than {:.0}% over it): the time cannot be right ({kept}, work skipped, or a byte count too high)",
                rate_past_l2 / ceiling * 100.0,
                IMPLAUSIBLE_MARGIN * 100.0
            ));
            return;
        }
        if peak <= 0.0 || rate <= peak {
            return;
        }
        let above = format!(
            "{rate:.0} GB/s is {:.1}% of the {} peak ({peak:.0} GB/s)",
            rate / peak * 100.0,
            kind.name()
        );
        self.above_peak = Some(if past_l2 == 0 {
            // Nothing must reach memory within the timing: no memory peak or ceiling applies,
            // and kbench cannot tell work skipped from writes that fit in L2.
            AbovePeak {
                cause: AbovePeakCause::L2,
                reason: format!("{above}, but all of its bytes can stay in the L2 within the timing ({}): no memory peak applies to it", l2_spared()),
            }
        } else if rate_past_l2 <= peak {
            AbovePeak {
                cause: AbovePeakCause::L2,
                reason: format!(
                    "{above}, but {}: counting only the bytes that must cross it, {rate_past_l2:.0} GB/s, {:.1}% of the peak; its % peak overstates the memory's throughput",
                    l2_spared(),
                    rate_past_l2 / peak * 100.0
                ),
            }
        } else {
            AbovePeak {
                cause: AbovePeakCause::BeatsPeakKernel,
                reason: format!(
                    "{above}, more than the L2 explains ({rate_past_l2:.0} GB/s counting only the bytes that must cross the memory bus), and not past the physical ceiling of {ceiling:.0} GB/s by more than {:.0}%: it moved memory faster than kbench's peak kernel did in this run",
                    IMPLAUSIBLE_MARGIN * 100.0
                ),
            }
        });
    }

    /// Whether the L2 was flushed before the case's samples: true unless its timer says not.
    fn cold_l2(&self) -> bool {
        self.gpu_timer().is_none_or(|t| t.cold_l2)
    }

    /// The fewest of the case's bytes that must cross the memory bus within its timing. Every
    /// read must after the flush; of the writes, all but what the L2 can still hold when the
    /// timer stops (they are written back after it). Without the flush the L2 may also have
    /// held up to its size of the inputs at the start.
    fn bytes_past_l2(&self, l2_bytes: u64) -> u64 {
        let written = self.bytes_written.saturating_sub(l2_bytes);
        if self.cold_l2() {
            self.bytes_read + written
        } else {
            self.bytes_read.saturating_sub(l2_bytes) + written
        }
    }

    fn l2_allowance(&self, l2_bytes: u64) -> String {
        let l2_mb = l2_bytes as f64 / 1e6;
        if self.cold_l2() {
            format!("writes still in the {l2_mb:.1} MB L2 when the timer stops")
        } else {
            format!("no flush: inputs already in the {l2_mb:.1} MB L2, and writes still in it")
        }
    }
}

impl CaseDevice {
    /// The GPU's key; `default_host`: its file's `environment.host`.
    pub fn key(&self, default_host: &str) -> DeviceKey {
        (
            host_or(&self.host, default_host).to_string(),
            self.pci_bus_id.clone(),
        )
    }
}

impl Environment {
    /// Every GPU the run recorded (`devices`, or `device` alone in older files), each with its
    /// host filled in.
    pub fn all_devices(&self) -> Vec<DeviceFingerprint> {
        let listed = if self.devices.is_empty() {
            self.device.iter().collect::<Vec<_>>()
        } else {
            self.devices.iter().collect()
        };
        listed
            .into_iter()
            .map(|d| DeviceFingerprint {
                host: host_or(&d.host, &self.host).to_string(),
                ..d.clone()
            })
            .collect()
    }
}

impl CaseResult {
    /// The GPU timer's record of the case, where it has one (CUDA cases that were measured).
    pub fn gpu_timer(&self) -> Option<&GpuTimer> {
        self.measurement.as_ref()?.gpu_timer.as_ref()
    }

    /// The case's energy window, where it had one.
    pub fn energy(&self) -> Option<&EnergyRecord> {
        self.gpu_timer()?.energy.as_ref()
    }

    /// The clocks read after the case's samples, where NVML was there.
    pub fn clocks(&self) -> Option<&ClockRecord> {
        self.gpu_timer()?.clocks.as_ref()
    }

    pub fn failed(&self) -> bool {
        matches!(
            self.status,
            CaseStatus::AccuracyFailed | CaseStatus::Error | CaseStatus::TimedOut
        )
    }

    pub fn median_s(&self) -> Option<f64> {
        self.summary.as_ref().map(|s| s.median_s)
    }

    /// The largest norm-wise relative error over the outputs (NaN if any output has NaN).
    pub fn max_rel_err(&self) -> Option<f64> {
        self.outputs
            .iter()
            .map(|o| o.accuracy.max_rel_err)
            .reduce(|a, b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            })
    }

    pub fn max_abs_err(&self) -> Option<f64> {
        self.outputs
            .iter()
            .map(|o| o.accuracy.max_abs_err)
            .reduce(|a, b| {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            })
    }

    /// The share of output elements within tolerance, over every output.
    pub fn share_within_tolerance(&self) -> Option<f64> {
        let elements: usize = self.outputs.iter().map(|o| o.accuracy.elements).sum();
        let wrong: usize = self.outputs.iter().map(|o| o.accuracy.wrong_elements).sum();
        (!self.outputs.is_empty())
            .then(|| 1.0 - wrong.min(elements) as f64 / elements.max(1) as f64)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The median's CI reached the target width.
    Converged,
    MaxSamples,
    /// The time budget ran out first.
    Budget,
    /// The case's time limit (`timeout_s`) passed: the case is recorded as timed out.
    TimedOut,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Measurement {
    /// One per sample: seconds per run (a batch's time divided by its runs).
    #[serde(with = "figure::list")]
    #[schemars(with = "Vec<Figure>")]
    pub samples_s: Vec<f64>,
    pub warmup_runs: u32,
    pub stop_reason: StopReason,
    /// Samples taken while the GPU throttled (thermal or power slowdown, or a low SM clock),
    /// discarded and re-taken.
    #[serde(default)]
    pub throttled_discarded: u32,
    /// How the GPU samples were timed; None for CPU cases.
    #[serde(default)]
    pub gpu_timer: Option<GpuTimer>,
    /// With `processes` above 1: the median of each worker process's own samples, in the order
    /// the processes ran (`samples_s` holds their samples in that order, one after another).
    /// Their spread is the between-process spread that one process's samples cannot show.
    /// Absent with one process.
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "figure::list")]
    #[schemars(with = "Vec<Figure>")]
    pub process_medians_s: Vec<f64>,
}

/// How a CUDA case's samples were taken, and what the second timer and the clocks said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GpuTimer {
    /// `blocked_events`: the stream held by a spin kernel while the flush, events and kernels
    /// were queued, so host launch work falls outside the window; `events`: events around work
    /// queued from the host as it goes (transfers, program scope, or too many launches to hold).
    pub method: TimerMethod,
    /// Why the stream was not held, when it was not.
    pub unblocked_reason: Option<String>,
    /// Whether each run was replayed from a CUDA graph captured once (`[measure] launch =
    /// "graph"`), rather than launched kernel by kernel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub launched_as_graph: bool,
    /// Why a case asked to launch as a graph was launched on the stream instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_refused: Option<String>,
    /// Runs per sample: 1 in single mode.
    pub runs_per_sample: u32,
    /// Whether the L2 was flushed before each sample (never in batch mode).
    pub cold_l2: bool,
    /// CUPTI's own GPU duration of each sample's kernels, per run: in kernel scope, of the
    /// traced runs after the samples (`traced_events_s`); in the other scopes, paired with
    /// `samples_s`.
    #[serde(with = "figure::list")]
    #[schemars(with = "Vec<Figure>")]
    pub cupti_samples_s: Vec<f64>,
    /// Kernel scope: the events of the runs CUPTI traced, a few taken as the samples are, after
    /// them. The samples themselves run untraced: CUPTI's kernel records slow a kernel of many
    /// blocks (on an H100, SAXPY of one element a thread at 2^28 ran 1186.8 us traced against
    /// 1160.6 us untraced, and 1159.3 us under Nsight Compute).
    #[serde(default, skip_serializing_if = "Vec::is_empty", with = "figure::list")]
    #[schemars(with = "Vec<Figure>")]
    pub traced_events_s: Vec<f64>,
    /// The traced runs' median event time over the samples' median, minus 1: what tracing
    /// cost the case's runs.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "figure::option"
    )]
    #[schemars(with = "Option<Figure>")]
    pub tracing_slowdown: Option<f64>,
    /// Why a kernel-scope case has no traced runs where kernels can be traced (no time left,
    /// or the runs failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traced_skipped: Option<String>,
    /// CUPTI's median over the median of the events of the same runs, minus 1; flagged past
    /// the tolerance.
    #[serde(with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub cupti_vs_events: Option<f64>,
    /// CUPTI's median less the median of the events of the same runs, in seconds.
    #[serde(default, with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub cupti_minus_events_s: Option<f64>,
    /// The summed `gpu__time_duration` (CUPTI's range profiler, as Nsight Compute reads it) of
    /// the kernels of each of a few extra runs after the samples, each kernel run alone.
    #[serde(default, with = "figure::list")]
    #[schemars(with = "Vec<Figure>")]
    pub profiler_samples_s: Vec<f64>,
    /// The most kernels the profiler saw in one of those runs.
    #[serde(default)]
    pub profiler_kernels_per_run: Option<u32>,
    /// The profiler's median over the event median, minus 1.
    #[serde(default, with = "figure::option")]
    #[schemars(with = "Option<Figure>")]
    pub profiler_vs_events: Option<f64>,
    /// Why the case has no profiler samples, where the device has the profiler.
    #[serde(default)]
    pub profiler_skipped: Option<String>,
    /// The events' median differs from the profiler's (runs of one kernel), or else CUPTI's
    /// activity span from the events of the runs it timed (in kernel scope, the traced runs),
    /// by more than `max(timer_tolerance x median, timer_tolerance_s)`.
    pub timers_disagree: bool,
    pub clocks: Option<ClockRecord>,
    /// The board's energy over the case's energy window (NVML's counter): absent where the
    /// device has no counter (the fingerprint says why once), `energy = false`, or skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy: Option<EnergyRecord>,
    /// Why this case has no energy record where the device has the counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_skipped: Option<String>,
    /// Whether the context's persisting-L2 carve-out was set to 0 and its persisting lines
    /// reset before the case, so no access-policy window keeps data in L2 across the flush.
    /// None in files written before kbench did it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisting_l2_reset: Option<bool>,
    /// Why the reset failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub persisting_l2_reset_error: Option<String>,
    /// `fresh_inputs`: how many times the inputs were copied over from their pristine copy
    /// (once before every sample, warm-up and profiled run).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fresh_input_copies: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl GpuTimer {
    /// The record before any sample: what the other timers say is added as they say it.
    pub fn new(method: TimerMethod, runs_per_sample: u32, cold_l2: bool) -> GpuTimer {
        GpuTimer {
            method,
            unblocked_reason: None,
            launched_as_graph: false,
            graph_refused: None,
            runs_per_sample,
            cold_l2,
            cupti_samples_s: Vec::new(),
            traced_events_s: Vec::new(),
            tracing_slowdown: None,
            traced_skipped: None,
            cupti_vs_events: None,
            cupti_minus_events_s: None,
            profiler_samples_s: Vec::new(),
            profiler_kernels_per_run: None,
            profiler_vs_events: None,
            profiler_skipped: None,
            timers_disagree: false,
            clocks: None,
            energy: None,
            energy_skipped: None,
            persisting_l2_reset: None,
            persisting_l2_reset_error: None,
            fresh_input_copies: 0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TimerMethod {
    BlockedEvents,
    Events,
    BatchEvents,
}

/// SM and memory clocks and throttle reasons read after each of a case's samples (NVML).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClockRecord {
    pub sm_clock_min_mhz: u32,
    pub sm_clock_max_mhz: u32,
    /// Throttle reasons seen at any sample, by name.
    pub throttle_reasons: Vec<String>,
    /// The median of the SM clock's readings (absent in files from before kbench recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sm_clock_median_mhz: Option<u32>,
    /// The memory clock's median and least readings (absent where NVML does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_median_mhz: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_min_mhz: Option<u32>,
}

/// The board's energy over a case's energy window: after its samples, its timed work run again
/// `runs` times back to back (see docs/results-format.md for what a run holds in each scope),
/// NVML's energy counter read before and after. Board energy: idle and static power included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnergyRecord {
    /// Runs in the window.
    pub runs: u32,
    /// Seconds from the counter's first reading to its second (the device drained before each).
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub window_s: f64,
    /// The counter's rise over the window, in millijoules (its unit).
    pub energy_mj: u64,
    /// Energy over the window's time: the board's mean power while it ran the case.
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub power_w: f64,
    /// Energy over the runs.
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub joules_per_run: f64,
}

impl EnergyRecord {
    /// The record of `energy_mj` over `window_s` and `runs` runs (at least one).
    pub fn of(runs: u32, energy_mj: u64, window_s: f64) -> EnergyRecord {
        let joules = energy_mj as f64 / 1e3;
        EnergyRecord {
            runs,
            window_s,
            energy_mj,
            power_w: joules / window_s,
            joules_per_run: joules / runs.max(1) as f64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    pub samples: usize,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub median_s: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub mean_s: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub std_dev_s: f64,
    /// Coefficient of variation: std_dev / mean.
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub cv: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub min_s: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub max_s: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub q1_s: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub q3_s: f64,
    /// 95% confidence interval of the median.
    #[serde(with = "figure::pair")]
    #[schemars(with = "(Figure, Figure)")]
    pub median_ci95_s: (f64, f64),
    /// 95% confidence interval of the mean.
    #[serde(with = "figure::pair")]
    #[schemars(with = "(Figure, Figure)")]
    pub mean_ci95_s: (f64, f64),
    pub outliers: Outliers,
}

/// Counts of samples beyond Tukey's fences: mild past 1.5 IQR, severe past 3 IQR.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Outliers {
    pub low_severe: usize,
    pub low_mild: usize,
    pub high_mild: usize,
    pub high_severe: usize,
    /// Positions (in sample order) of every flagged sample.
    pub indices: Vec<usize>,
}

/// One output of a case against its reference.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct OutputCheck {
    pub name: String,
    /// Elements the case produced (for an output whose length depends on the data, what its
    /// count said).
    pub length: usize,
    pub accuracy: AccuracyReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AccuracyReport {
    pub passed: bool,
    pub tolerance: Tolerance,
    /// NaN when some output is NaN (written as "nan" in JSON, see `Figure`).
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub max_abs_err: f64,
    /// Norm-wise relative error, max |got - expected| / max |expected|: unlike an element-wise
    /// ratio it stays meaningful where some expected elements are (nearly) zero.
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub max_rel_err: f64,
    /// Elements of the reference: every element of the output, or the ones checked.
    pub elements: usize,
    /// Where only some elements were checked (a float64 reference of every element would take
    /// too long): the output's length, of which `elements` were checked. None: all were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subset_of: Option<usize>,
    /// Elements outside tolerance, plus those missing or extra.
    pub wrong_elements: usize,
    /// Elements the output may have outside the tolerance and still pass (a custom buffer's
    /// `check = { max_mismatches = k }`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mismatches_allowed: u64,
    pub nan_elements: usize,
    /// The first few failing elements.
    pub first_wrong: Vec<WrongElement>,
}

/// One element that failed, for the report and the JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WrongElement {
    pub index: usize,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub got: f64,
    #[serde(with = "figure::one")]
    #[schemars(with = "Figure")]
    pub expected: f64,
}

/// The results format's JSON Schema (draft 07), generated from these types: what `kbench schema
/// results` prints and `schema/results.schema.json` holds.
pub fn json_schema() -> serde_json::Value {
    let mut schema = crate::json_schema::generator()
        .into_root_schema_for::<ResultsDoc>()
        .to_value();
    schema["title"] = "kbench results".into();
    schema["description"] = format!(
        "A kbench results file (out/<study>/<timestamp>.json), schema_version {SCHEMA_VERSION}; see docs/results-format.md"
    )
    .into();
    schema["properties"]["schema_version"]["enum"] = serde_json::json!([SCHEMA_VERSION]);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_energy_record_gives_power_and_joules_per_run_in_their_units() {
        // 35,000 mJ over 0.1 s and 20,000 runs: 350 W, 1.75 mJ a run.
        let e = EnergyRecord::of(20_000, 35_000, 0.1);
        assert!((e.power_w - 350.0).abs() < 1e-9, "{e:?}");
        assert!((e.joules_per_run - 1.75e-3).abs() < 1e-15, "{e:?}");
        assert_eq!((e.runs, e.energy_mj), (20_000, 35_000));
        // Serialized with the units in the names, and read back the same.
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["energy_mj"], 35_000);
        assert_eq!(json["power_w"], 350.0);
        let back: EnergyRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn files_without_energy_or_the_new_clocks_still_read_and_energy_on_is_not_written() {
        let old = r#"{"sm_clock_min_mhz": 1700, "sm_clock_max_mhz": 1980, "throttle_reasons": []}"#;
        let clocks: ClockRecord = serde_json::from_str(old).unwrap();
        assert_eq!(clocks.sm_clock_median_mhz, None);
        let settings = serde_json::to_value(MeasureSettings::default()).unwrap();
        assert!(settings.get("energy").is_none(), "{settings}");
        let off = MeasureSettings {
            energy: false,
            ..MeasureSettings::default()
        };
        let json = serde_json::to_value(&off).unwrap();
        assert_eq!(json["energy"], false);
        let mut without = json.clone();
        without.as_object_mut().unwrap().remove("energy");
        let read: MeasureSettings = serde_json::from_value(without).unwrap();
        assert!(read.energy, "a file without the key had the window on");
    }

    #[test]
    fn overrides_apply_over_the_manifest_and_a_lone_min_raises_the_max() {
        let manifest = MeasureSettings::default();
        let none = MeasureOverrides::default();
        assert!(none.is_empty());
        assert_eq!(none.apply(&manifest), manifest);
        let overrides = MeasureOverrides {
            warmup: Some(0),
            min_samples: Some(500),
            timeout_s: Some(5.0),
            ..MeasureOverrides::default()
        };
        let s = overrides.apply(&manifest);
        assert_eq!((s.warmup, s.min_samples, s.max_samples), (0, 500, 500));
        assert_eq!((s.max_time_s, s.timeout_s), (manifest.max_time_s, 5.0));
        assert_eq!(
            overrides.sample_count_note(&manifest, &s).as_deref(),
            Some("--min-samples 500 raises its max_samples 200 to 500")
        );
        assert_eq!(MeasureOverrides::all_of(&s).apply(&manifest), s);
    }

    #[test]
    fn conflicts_name_each_override_that_differs_from_what_the_run_measured_with() {
        let measured = MeasureSettings::default();
        let same = MeasureOverrides {
            min_samples: Some(measured.min_samples),
            ..MeasureOverrides::default()
        };
        assert!(same.conflicts(&measured).is_empty());
        let other = MeasureOverrides {
            min_samples: Some(5),
            max_time_s: Some(0.5),
            ..MeasureOverrides::default()
        };
        assert_eq!(
            other.conflicts(&measured),
            [
                "  --min-samples 5, but the run measured with min_samples = 10",
                "  --max-time-s 0.5, but the run measured with max_time_s = 2",
            ]
        );
        // A file from before `processes` (none recorded) measured with one.
        let old: MeasureSettings =
            serde_json::from_value(serde_json::to_value(MeasureSettings::default()).unwrap())
                .unwrap();
        assert_eq!(old.processes, 1);
        let three = MeasureOverrides {
            processes: Some(3),
            ..MeasureOverrides::default()
        };
        assert_eq!(
            three.conflicts(&old),
            ["  --processes 3, but the run measured with processes = 1"]
        );
        assert_eq!(three.apply(&old).processes, 3);
        assert!(!serde_json::to_string(&old).unwrap().contains("processes"));
        assert!(serde_json::to_string(&three.apply(&old))
            .unwrap()
            .contains("\"processes\":3"));
    }

    #[test]
    fn the_peak_matches_the_traffic_and_negligible_writes_count_as_reads() {
        assert_eq!(PeakKind::for_traffic(4 << 20, 4), PeakKind::Read);
        assert_eq!(PeakKind::for_traffic(0, 4 << 20), PeakKind::Write);
        // A copy's half reads, half writes; SAXPY's two reads to one write: the triad.
        assert_eq!(PeakKind::for_traffic(4 << 20, 4 << 20), PeakKind::Copy);
        assert_eq!(PeakKind::for_traffic(8 << 20, 4 << 20), PeakKind::Triad);
        // The triad from 7/12 of the bytes read (exclusive) to 5/6 (inclusive).
        assert_eq!(PeakKind::for_traffic(7, 5), PeakKind::Copy);
        assert_eq!(PeakKind::for_traffic(59, 41), PeakKind::Triad);
        assert_eq!(PeakKind::for_traffic(5, 1), PeakKind::Triad);
        assert_eq!(PeakKind::for_traffic(84, 16), PeakKind::Copy);
        assert_eq!(PeakKind::for_traffic(30, 70), PeakKind::Copy);
        // 2% of the bytes written is still a read; 3% is a mix (mostly reads: the copy).
        assert_eq!(PeakKind::for_traffic(98, 2), PeakKind::Read);
        assert_eq!(PeakKind::for_traffic(97, 3), PeakKind::Copy);
        // Nothing known (an older file): the copy, as before.
        assert_eq!(PeakKind::for_traffic(0, 0), PeakKind::Copy);
    }

    fn h100(read: f64, datasheet: Option<f64>) -> DeviceFingerprint {
        serde_json::from_value(serde_json::json!({
            "name": "H100", "compute_capability": "9.0", "sm_count": 132,
            "total_memory_bytes": 1u64 << 36, "l2_cache_bytes": 50u64 << 20,
            "sm_clock_mhz": 1980.0, "memory_clock_mhz": 2619.0, "memory_bus_width_bits": 5120,
            "theoretical_memory_gbytes_per_s": 3352.0, "driver_version": "580",
            "nvrtc_version": "13.0", "measured_copy_gbytes_per_s": 2986.0,
            "measured_read_gbytes_per_s": read, "measured_write_gbytes_per_s": 0.0,
            "datasheet_memory_gbytes_per_s": datasheet,
        }))
        .unwrap()
    }

    fn cuda_case(bytes_read: u64, bytes_written: u64, gbytes_per_s: f64) -> CaseResult {
        let mut case: CaseResult = serde_json::from_value(serde_json::json!({
            "index": 0, "variant": "v", "backend": "cuda", "implementation": "k",
            "scope": "kernel", "params": {}, "status": "passed", "reason": null,
            "bytes_moved": bytes_read + bytes_written, "flops": 0, "summary": null,
            "gbytes_per_s": gbytes_per_s, "gflops_per_s": null, "measurement": null,
            "outputs": [], "saved_files": [], "wall_s": 1.0,
        }))
        .unwrap();
        case.bytes_read = bytes_read;
        case.bytes_written = bytes_written;
        case
    }

    #[test]
    fn a_case_is_judged_against_its_peak_and_flagged_past_the_ceiling() {
        let device = h100(3200.0, Some(3352.0));
        // reduce_fast at 2^28: 3129 GB/s, 105% of the copy peak, 98% of the read peak.
        let mut reduce = cuda_case(1 << 30, 4, 3129.0);
        reduce.judge_peak(&device);
        assert_eq!(reduce.peak_kind, Some(PeakKind::Read));
        assert_eq!(reduce.peak_gbytes_per_s, Some(3200.0));
        assert!((reduce.share_of_peak(None).unwrap() - 3129.0 / 3200.0).abs() < 1e-12);
        assert!(!reduce.implausible);
        // Within 2% of the ceiling passes; past it does not.
        let mut close = cuda_case(1 << 30, 4, 3352.0 * 1.019);
        close.judge_peak(&device);
        assert!(!close.implausible);
        let mut past = cuda_case(1 << 30, 4, 3352.0 * 1.03);
        past.judge_peak(&device);
        assert!(past.implausible);
        assert!(past.implausible_reason.unwrap().contains("3352 GB/s"));
        // The larger of the datasheet's and CUDA's figures is the ceiling.
        assert_eq!(h100(3200.0, Some(3400.0)).ceiling_gbytes_per_s(), 3400.0);
        assert_eq!(h100(3200.0, None).ceiling_gbytes_per_s(), 3352.0);
        // SAXPY (two reads to one write) is held to the triad peak where there is one, else
        // (an older file) to the copy.
        let with_triad: DeviceFingerprint = serde_json::from_value({
            let mut v = serde_json::to_value(h100(3200.0, Some(3352.0))).unwrap();
            v["measured_triad_gbytes_per_s"] = 3120.0.into();
            v
        })
        .unwrap();
        let mut saxpy = cuda_case(2 << 30, 1 << 30, 3079.0);
        saxpy.judge_peak(&with_triad);
        assert_eq!(saxpy.peak_kind, Some(PeakKind::Triad));
        assert_eq!(saxpy.peak_gbytes_per_s, Some(3120.0));
        let mut saxpy_old = cuda_case(2 << 30, 1 << 30, 3079.0);
        saxpy_old.judge_peak(&device);
        assert_eq!(saxpy_old.peak_kind, Some(PeakKind::Copy));
        assert_eq!(saxpy_old.peak_gbytes_per_s, Some(2986.0));
        // A device without a read peak (an older file) holds a read-only case to the copy.
        let mut old = cuda_case(1 << 30, 4, 2900.0);
        old.judge_peak(&h100(0.0, None));
        assert_eq!(old.peak_kind, Some(PeakKind::Copy));
        assert_eq!(old.peak_gbytes_per_s, Some(2986.0));
        // A case that recorded no peak reads against the device's copy peak.
        let unjudged = cuda_case(1 << 30, 4, 2986.0);
        assert_eq!(unjudged.share_of_peak(Some(&device)), Some(1.0));
        assert_eq!(unjudged.share_of_peak(None), None);
    }

    #[test]
    fn a_share_above_the_peak_is_flagged_with_its_cause_and_l2_writes_are_not_implausible() {
        let mut device = h100(3200.0, Some(3352.0));
        device.measured_triad_gbytes_per_s = 3120.0;
        let judged = |read: u64, written: u64, rate: f64| {
            let mut case = cuda_case(read, written, rate);
            case.judge_peak(&device);
            case
        };
        let cause = |case: &CaseResult| case.above_peak.as_ref().map(|a| a.cause);
        // SAXPY at 2^24 floats: 128 MiB read, 64 MiB written, at 104% of the triad. Up to 50 MiB
        // of the writes can still be in the L2: counting 142 of 192 MiB, 2404 GB/s.
        let saxpy = judged(128 << 20, 64 << 20, 3250.0);
        assert_eq!(cause(&saxpy), Some(AbovePeakCause::L2), "{saxpy:?}");
        let reason = &saxpy.above_peak.as_ref().unwrap().reason;
        assert!(reason.contains("104.2% of the triad peak"), "{reason}");
        assert!(reason.contains("52.4 of its 201.3 MB"), "{reason}");
        assert!(reason.contains("2404 GB/s"), "{reason}");
        assert!(!saxpy.implausible);
        // At 2^28 the L2 holds too little of the writes to explain 102.6%.
        let big = judged(2 << 30, 1 << 30, 3200.0);
        assert_eq!(
            cause(&big),
            Some(AbovePeakCause::BeatsPeakKernel),
            "{big:?}"
        );
        // Past the ceiling counting every byte, but not counting the writes the L2 can hold (16
        // MiB at 2^22): not implausible, and flagged L2.
        let small = judged(32 << 20, 16 << 20, 4500.0);
        assert!(!small.implausible, "{small:?}");
        assert_eq!(cause(&small), Some(AbovePeakCause::L2));
        // Reads count in full after a flush: a reduction past its read peak beat the peak kernel,
        // one past the ceiling is implausible and no more than that.
        let reduce = judged(1 << 30, 4, 3230.0);
        assert_eq!(cause(&reduce), Some(AbovePeakCause::BeatsPeakKernel));
        let reduce = judged(1 << 30, 4, 3500.0);
        assert!(
            reduce.implausible && reduce.above_peak.is_none(),
            "{reduce:?}"
        );
        // At the peak is not above it; anything over is flagged.
        assert_eq!(cause(&judged(1 << 30, 4, 3200.0)), None);
        assert_eq!(
            cause(&judged(1 << 30, 4, 3201.0)),
            Some(AbovePeakCause::BeatsPeakKernel)
        );
        // A write-only case whose writes fit in the L2 needs no memory at all: flagged `l2`,
        // never implausible.
        let fits = judged(0, 16 << 20, 20_000.0);
        assert!(!fits.implausible);
        let reason = &fits.above_peak.as_ref().unwrap().reason;
        assert!(reason.contains("no memory peak applies"), "{reason}");
        // Without the flush the L2 may also have held up to its size of inputs: a warm reduction
        // of 64 MiB counts 14 MiB against the ceiling, so 5000 GB/s (1094 over those bytes) is
        // plausible and 20,000 GB/s (4375) is not.
        let mut warm = cuda_case(64 << 20, 4, 5000.0);
        warm.measurement = Some(
            serde_json::from_value(serde_json::json!({
                "samples_s": [], "warmup_runs": 0, "stop_reason": "converged",
                "gpu_timer": GpuTimer::new(TimerMethod::BatchEvents, 100, false),
            }))
            .unwrap(),
        );
        warm.judge_peak(&device);
        assert!(!warm.implausible, "{warm:?}");
        assert_eq!(cause(&warm), Some(AbovePeakCause::L2));
        let reason = &warm.above_peak.as_ref().unwrap().reason;
        assert!(
            reason.contains("no flush: inputs already in the 52.4 MB L2"),
            "{reason}"
        );
        assert!(reason.contains("1094 GB/s"), "{reason}");
        warm.gbytes_per_s = Some(20_000.0);
        warm.judge_peak(&device);
        let reason = warm.implausible_reason.unwrap();
        assert!(
            reason.starts_with("4375 GB/s over the bytes that must cross"),
            "{reason}"
        );
        assert!(
            reason.contains("data kept in L2 beyond its size"),
            "{reason}"
        );
    }

    #[test]
    fn min_above_max_is_refused_and_old_files_read_without_overrides() {
        let crossed = MeasureOverrides {
            min_samples: Some(50),
            max_samples: Some(10),
            ..MeasureOverrides::default()
        };
        assert_eq!(
            crossed.check().unwrap_err(),
            "--min-samples 50 is more than --max-samples 10"
        );
        let old: MeasureOverrides = serde_json::from_str("{}").unwrap();
        assert!(old.is_empty());
        assert_eq!(
            serde_json::to_string(&crossed).unwrap(),
            r#"{"min_samples":50,"max_samples":10}"#
        );
    }
}
