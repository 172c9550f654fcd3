//! The mock device: a stand-in for the GPU, for developers and tests on machines without one
//! (`KBENCH_MOCK_GPU=<file>`). Opening it gives a fingerprint named `MOCK ...`; a CUDA case run on
//! it takes its outputs from the algorithm's float64 reference (so accuracy checking still runs
//! for real), its samples from a time model with deterministic jitter, and the faults and skips
//! its file scripts: a kernel fault breaks the context (the worker is replaced, as after a real
//! one), a hang never returns (the worker's parent kills it at the time limit), and so on.
//!
//! Everything else a case goes through is the real thing: the worker process, the CUDA
//! executor's scope logic (`super::cuda::Scoped`: the sample plan, single or batch; transfers
//! from pageable or pinned memory, chunked over streams; program scope; the profiled runs), the
//! stopping rule, verification, the results file and the reports. The mock replaces only the
//! primitives that touch CUDA (`MockRun`): its buffers are host memory, its launcher is a stand-in
//! that writes the reference (it cannot run the algorithm's kernels), and its events read a time
//! model that charges, in each timed window, launch_s + bytes / bandwidth + flops / rate per run
//! (a chunk's share for a chunk), bytes / host link per copy, and 50 µs where buffers were
//! allocated and freed; the window's total is spread by the jitter. Its results say so in the
//! device record (`mock`), and its name starts with `MOCK`, so they cannot be mistaken for
//! measurements.
//!
//! The file:
//!
//! ```toml
//! [device]                      # every key optional
//! name = "H100"                 # recorded as "MOCK H100"
//! compute_capability = "9.0"
//! sm_count = 132
//! memory_gib = 80.0             # larger cases are skipped, with the numbers, as on a GPU
//! peak_gbytes_per_s = 3350.0    # the theoretical bandwidth: above it (+2%) a case is implausible
//! copy_gbytes_per_s = 3000.0    # the "measured" copy
//! read_gbytes_per_s = 3000.0    # the "measured" read-only peak (default: the copy's)
//! write_gbytes_per_s = 3000.0   # the "measured" write-only peak (default: the copy's)
//! triad_gbytes_per_s = 3000.0   # the "measured" two-reads-one-write peak (default: the copy's)
//! host_link_gbytes_per_s = 25.0 # transfers and program scopes copy over this
//! profiler = false              # true: kernel-scope runs are profiled (a stand-in for CUPTI's)
//! tracer = false                # true: kernel-scope runs can be traced (a stand-in for CUPTI's
//!                               # activity records): a traced run takes TRACING_COST longer
//! power_w = 350.0               # given: the mock has "NVML": clocks after each sample, and an
//!                               # energy window whose energy is power_w x the model's time
//! energy_counter = true         # false: NVML without the energy counter (clocks only)
//!
//! [timing]                      # every CUDA variant's time model (keys optional)
//! seed = 1                      # the jitter's seed
//! launch_s = 5e-6               # a run: launch_s + bytes / bandwidth + flops / gflops
//! gbytes_per_s = 2000.0
//! gflops_per_s = 0.0            # 0: flops cost nothing
//! jitter = 0.01                 # samples spread +-1% around the model, deterministically
//! worker_jitter = 0.0           # each case run in a worker process slowed or sped by up to
//!                               #   +-this share for all its samples, drawn afresh in every
//!                               #   process (not deterministic: a GPU's between-process spread)
//!
//! [timing.variant.tree]         # a variant's own model: any of launch_s, gbytes_per_s, ...
//! gbytes_per_s = 2600.0
//!
//! [[event]]                     # scripted: which cases (variant and/or params, both optional)
//! variant = "gpu"
//! params = { n = [4096, 8192], dtype = "f32" }
//! fault = "kernel fault"        # or "compile error", "out of memory", "hang", "wrong answer"
//! # skip = "a reason"           # ... or skip the case with this reason
//! # time_factor = 1.3           # ... or scale the case's kernel time (every such event that
//!                               #   strikes a case applies; faults and skips take the first)
//! ```

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::cuda::{Chunk, Primitives, Scoped};
use super::{CaseError, Executed, Executor, Job};
use crate::algos::{Buffers, CaseData};
use crate::device::nvml::{ClockReading, EnergyReading};
use crate::device::timer::{take_sample, Sample, SampleOps, SamplePlan, PROFILED_RUNS};
use crate::device::{fits_memory, CaptureFailed, DeviceIo, KernelFile, Launcher};
use crate::manifest::ManifestError;
use crate::measure::Deadline;
use crate::record::DeviceFingerprint;
use crate::vocab::{describe_params, DType, Element, HostData, ParamValue, Params};

/// The environment variable naming the mock device's file.
pub const MOCK_ENV: &str = "KBENCH_MOCK_GPU";

/// A mock device file, read and checked: what the workers get.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MockSpec {
    pub path: PathBuf,
    pub device: DeviceSpec,
    pub timing: TimeModel,
    /// Each variant's own model, over `timing`.
    pub variants: BTreeMap<String, TimeModel>,
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceSpec {
    pub name: String,
    pub compute_capability: String,
    pub sm_count: u32,
    pub memory_bytes: u64,
    pub peak_gbytes_per_s: f64,
    pub copy_gbytes_per_s: f64,
    pub read_gbytes_per_s: f64,
    pub write_gbytes_per_s: f64,
    pub triad_gbytes_per_s: f64,
    pub host_link_gbytes_per_s: f64,
    /// Whether kernel-scope runs are profiled after their samples, as with CUPTI's profiler.
    #[serde(default)]
    pub profiler: bool,
    /// Whether kernel-scope runs can be traced, as with CUPTI's activity records.
    #[serde(default)]
    pub tracer: bool,
    /// The board's power while it runs a case: given, the mock has a stand-in for NVML
    /// (synthetic clocks after each sample, an energy window of this power over the model's
    /// time); absent, it has none, as a machine without NVML.
    #[serde(default)]
    pub power_w: Option<f64>,
    /// Where `power_w` is given: whether its NVML has the energy counter.
    #[serde(default)]
    pub energy_counter: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeModel {
    pub seed: u64,
    pub launch_s: f64,
    pub gbytes_per_s: f64,
    pub gflops_per_s: f64,
    pub jitter: f64,
    /// The spread of a case's offset from one worker process to the next (0: none).
    #[serde(default)]
    pub worker_jitter: f64,
}

/// A scripted event and the cases it strikes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// Where the event is in the file, for the note saying it strikes nothing.
    pub line: usize,
    pub variant: Option<String>,
    /// Each named parameter must take one of its values.
    pub params: BTreeMap<String, Vec<ParamValue>>,
    pub action: Action,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Action {
    Skip(String),
    Fault(Fault),
    /// The case's kernel runs take this many times the model's time (a knob's effect, for
    /// `kbench tune`'s tests).
    TimeFactor(f64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    #[serde(rename = "kernel fault")]
    KernelFault,
    #[serde(rename = "compile error")]
    CompileError,
    #[serde(rename = "out of memory")]
    OutOfMemory,
    #[serde(rename = "hang")]
    Hang,
    #[serde(rename = "wrong answer")]
    WrongAnswer,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    device: RawDevice,
    #[serde(default)]
    timing: RawTiming,
    #[serde(default)]
    event: Vec<Spanned<RawEvent>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: Option<String>,
    compute_capability: Option<String>,
    sm_count: Option<u32>,
    memory_gib: Option<Spanned<f64>>,
    peak_gbytes_per_s: Option<Spanned<f64>>,
    copy_gbytes_per_s: Option<Spanned<f64>>,
    read_gbytes_per_s: Option<Spanned<f64>>,
    write_gbytes_per_s: Option<Spanned<f64>>,
    triad_gbytes_per_s: Option<Spanned<f64>>,
    host_link_gbytes_per_s: Option<Spanned<f64>>,
    profiler: Option<bool>,
    tracer: Option<bool>,
    power_w: Option<Spanned<f64>>,
    energy_counter: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTiming {
    seed: Option<u64>,
    launch_s: Option<Spanned<f64>>,
    gbytes_per_s: Option<Spanned<f64>>,
    gflops_per_s: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
    worker_jitter: Option<Spanned<f64>>,
    #[serde(default)]
    variant: BTreeMap<String, RawModel>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawModel {
    seed: Option<u64>,
    launch_s: Option<Spanned<f64>>,
    gbytes_per_s: Option<Spanned<f64>>,
    gflops_per_s: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
    worker_jitter: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    variant: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<toml::Value>>,
    skip: Option<String>,
    fault: Option<Fault>,
    time_factor: Option<Spanned<f64>>,
}

const GIB: f64 = (1u64 << 30) as f64;

/// The most bytes a mock device file may have: a page of TOML, never a device's worth.
const MAX_BYTES: u64 = 1 << 20;

impl MockSpec {
    /// Reads and checks the file; mistakes are located in it as a manifest's are.
    pub fn load(path: &Path) -> Result<MockSpec, ManifestError> {
        let source = crate::input_file::read_regular_text(path, "the mock device file", MAX_BYTES)
            .map_err(|e| ManifestError::whole_file(path, e.to_string()))?;
        MockSpec::parse(path, &source)
    }

    pub fn parse(path: &Path, source: &str) -> Result<MockSpec, ManifestError> {
        let at = |span: std::ops::Range<usize>, message: String| {
            ManifestError::new(path, source, span, None, message)
        };
        let raw: RawFile = toml::from_str(source).map_err(|e| {
            let message = format!("in the mock device file: {}", e.message().trim());
            match e.span() {
                Some(span) => at(span, message),
                None => ManifestError::whole_file(path, message),
            }
        })?;
        // A number that must be positive (or, with `zero_ok`, at least 0), and finite.
        let positive = |value: &Option<Spanned<f64>>,
                        what: &str,
                        zero_ok: bool,
                        default: f64|
         -> Result<f64, ManifestError> {
            let Some(value) = value else {
                return Ok(default);
            };
            let x = *value.get_ref();
            // Up to an hour for a time and 1e15 for a rate: past that a mock makes times that
            // print as hundreds of digits, not a device to test against.
            let most = if what == "launch_s" { 3600.0 } else { 1e15 };
            let ok = x.is_finite() && x <= most && (x > 0.0 || (zero_ok && x == 0.0));
            if !ok {
                let wanted = if zero_ok { "0 or more" } else { "more than 0" };
                return Err(at(
                    value.span(),
                    format!("`{what}` is {x:e}; it must be a number, {wanted}, at most {most:e}"),
                ));
            }
            Ok(x)
        };
        let d = &raw.device;
        let copy_gbytes_per_s = positive(&d.copy_gbytes_per_s, "copy_gbytes_per_s", false, 3000.0)?;
        // The read and write peaks default to the copy's.
        let peak = |value, key| positive(value, key, false, copy_gbytes_per_s);
        let device = DeviceSpec {
            name: format!("MOCK {}", d.name.as_deref().unwrap_or("GPU")),
            compute_capability: d.compute_capability.clone().unwrap_or("9.0".into()),
            sm_count: d.sm_count.unwrap_or(132),
            memory_bytes: (positive(&d.memory_gib, "memory_gib", false, 80.0)? * GIB) as u64,
            peak_gbytes_per_s: positive(&d.peak_gbytes_per_s, "peak_gbytes_per_s", false, 3350.0)?,
            copy_gbytes_per_s,
            read_gbytes_per_s: peak(&d.read_gbytes_per_s, "read_gbytes_per_s")?,
            write_gbytes_per_s: peak(&d.write_gbytes_per_s, "write_gbytes_per_s")?,
            triad_gbytes_per_s: peak(&d.triad_gbytes_per_s, "triad_gbytes_per_s")?,
            host_link_gbytes_per_s: positive(
                &d.host_link_gbytes_per_s,
                "host_link_gbytes_per_s",
                false,
                25.0,
            )?,
            profiler: d.profiler.unwrap_or(false),
            tracer: d.tracer.unwrap_or(false),
            power_w: match &d.power_w {
                Some(_) => Some(positive(&d.power_w, "power_w", false, 0.0)?),
                None => None,
            },
            energy_counter: d.energy_counter.unwrap_or(true),
        };
        let model = |raw: &RawModel, base: &TimeModel| -> Result<TimeModel, ManifestError> {
            let spread = |value: &Option<Spanned<f64>>, key: &str, default: f64| {
                let x = positive(value, key, true, default)?;
                if x >= 1.0 {
                    let span = value.as_ref().map_or(0..0, |j| j.span());
                    return Err(at(
                        span,
                        format!("`{key}` is {x}; it must be below 1 (a relative spread)"),
                    ));
                }
                Ok(x)
            };
            let jitter = spread(&raw.jitter, "jitter", base.jitter)?;
            let worker_jitter = spread(&raw.worker_jitter, "worker_jitter", base.worker_jitter)?;
            Ok(TimeModel {
                seed: raw.seed.unwrap_or(base.seed),
                launch_s: positive(&raw.launch_s, "launch_s", true, base.launch_s)?,
                gbytes_per_s: positive(
                    &raw.gbytes_per_s,
                    "gbytes_per_s",
                    false,
                    base.gbytes_per_s,
                )?,
                gflops_per_s: positive(&raw.gflops_per_s, "gflops_per_s", true, base.gflops_per_s)?,
                jitter,
                worker_jitter,
            })
        };
        let defaults = TimeModel {
            seed: 1,
            launch_s: 5e-6,
            gbytes_per_s: 2000.0,
            gflops_per_s: 0.0,
            jitter: 0.01,
            worker_jitter: 0.0,
        };
        let t = raw.timing;
        let base = RawModel {
            seed: t.seed,
            launch_s: t.launch_s,
            gbytes_per_s: t.gbytes_per_s,
            gflops_per_s: t.gflops_per_s,
            jitter: t.jitter,
            worker_jitter: t.worker_jitter,
        };
        let timing = model(&base, &defaults)?;
        let variants = t
            .variant
            .iter()
            .map(|(name, m)| Ok((name.clone(), model(m, &timing)?)))
            .collect::<Result<_, ManifestError>>()?;
        let events = (raw.event.into_iter())
            .map(|spanned| parse_event(path, source, spanned))
            .collect::<Result<_, ManifestError>>()?;
        Ok(MockSpec {
            path: path.to_path_buf(),
            device,
            timing,
            variants,
            events,
        })
    }

    /// The lines of the events that strike none of `cases` (the CUDA cases about to run, as
    /// variant and parameters): a misspelt name or value, said rather than silently ignored.
    pub fn idle_events<'a>(
        &self,
        cases: impl Iterator<Item = (&'a str, &'a Params)> + Clone,
    ) -> Vec<usize> {
        (self.events.iter())
            .filter(|e| !cases.clone().any(|(v, p)| e.strikes(v, p)))
            .map(|e| e.line)
            .collect()
    }

    /// The first skip or fault that strikes this case.
    fn event(&self, variant: &str, params: &Params) -> Option<&Action> {
        self.events
            .iter()
            .filter(|e| !matches!(e.action, Action::TimeFactor(_)))
            .find(|e| e.strikes(variant, params))
            .map(|e| &e.action)
    }

    /// The product of the time factors that strike this case (1 where none does).
    fn time_factor(&self, variant: &str, params: &Params) -> f64 {
        (self.events.iter())
            .filter(|e| e.strikes(variant, params))
            .filter_map(|e| match e.action {
                Action::TimeFactor(x) => Some(x),
                _ => None,
            })
            .product()
    }
}

impl Event {
    fn strikes(&self, variant: &str, params: &Params) -> bool {
        let same = |a: &ParamValue, b: &ParamValue| match (a, b) {
            (ParamValue::Str(x), ParamValue::Str(y)) => x == y,
            (ParamValue::Str(_), _) | (_, ParamValue::Str(_)) => false,
            (x, y) => as_f64(x) == as_f64(y),
        };
        self.variant.as_deref().is_none_or(|v| v == variant)
            && self.params.iter().all(|(name, values)| {
                params
                    .get(name)
                    .is_some_and(|p| values.iter().any(|v| same(p, v)))
            })
    }
}

fn as_f64(value: &ParamValue) -> f64 {
    match value {
        ParamValue::Int(i) => *i as f64,
        ParamValue::Float(x) => *x,
        ParamValue::Str(_) => f64::NAN,
    }
}

/// The mock device, open in a worker.
pub struct MockDevice {
    spec: MockSpec,
    pub fingerprint: DeviceFingerprint,
    /// A scripted kernel fault struck: as a real context, this one stays unusable.
    broken: Cell<bool>,
}

impl MockDevice {
    pub fn open(spec: MockSpec) -> MockDevice {
        let d = &spec.device;
        let bus_width_bits = 5120;
        let no_cupti = || Some("the mock device has no CUPTI".to_string());
        let fingerprint = DeviceFingerprint {
            name: d.name.clone(),
            host: crate::env::hostname(),
            pci_bus_id: "mock".into(),
            compute_capability: d.compute_capability.clone(),
            sm_count: d.sm_count,
            total_memory_bytes: d.memory_bytes,
            l2_cache_bytes: 50 << 20,
            sm_clock_mhz: 1980.0,
            // What gives the peak at two transfers per clock over the bus.
            memory_clock_mhz: d.peak_gbytes_per_s * 1e3 / (2.0 * bus_width_bits as f64 / 8.0),
            memory_bus_width_bits: bus_width_bits,
            theoretical_memory_gbytes_per_s: d.peak_gbytes_per_s,
            driver_version: "mock".into(),
            nvrtc_version: "mock".into(),
            measured_copy_gbytes_per_s: d.copy_gbytes_per_s,
            measured_read_gbytes_per_s: d.read_gbytes_per_s,
            measured_write_gbytes_per_s: d.write_gbytes_per_s,
            measured_triad_gbytes_per_s: d.triad_gbytes_per_s,
            datasheet_memory_gbytes_per_s: None,
            host_to_device_gbytes_per_s: d.host_link_gbytes_per_s,
            device_to_host_gbytes_per_s: d.host_link_gbytes_per_s,
            event_overhead_s: 0.0,
            cupti_unavailable: if d.tracer { None } else { no_cupti() },
            cupti_profiler_unavailable: if d.profiler { None } else { no_cupti() },
            peaks_unmeasured: None,
            nvml_unavailable: match d.power_w {
                Some(_) => None,
                None => Some("the mock device has no NVML".into()),
            },
            energy_unavailable: (d.power_w.is_some() && !d.energy_counter).then(|| {
                "the mock device file says its NVML has no energy counter (energy_counter = false)"
                    .into()
            }),
            mock: Some(format!(
                "synthetic timings{} and reference outputs from the mock device file {}: nothing here was measured",
                if d.power_w.is_some() { ", clocks, energy" } else { "" },
                spec.path.display()
            )),
        };
        MockDevice {
            spec,
            fingerprint,
            broken: Cell::new(false),
        }
    }

    pub fn is_broken(&self) -> bool {
        self.broken.get()
    }

    /// A scripted skip's reason, if one strikes the case.
    fn skip(&self, variant: &str, params: &Params) -> Option<String> {
        match self.spec.event(variant, params) {
            Some(Action::Skip(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    /// The scripted fault that strikes the case, if one does.
    fn fault(&self, variant: &str, params: &Params) -> Option<Fault> {
        match self.spec.event(variant, params) {
            Some(Action::Fault(fault)) => Some(*fault),
            _ => None,
        }
    }

    /// Loading the case's kernels: fails after a kernel fault, or where a compile error is
    /// scripted, with the message a real device would give.
    fn load_module(&self, kernel_file: &KernelFile, fault: Option<Fault>) -> Result<()> {
        if self.is_broken() {
            bail!("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (the mock context faulted earlier)");
        }
        if fault == Some(Fault::CompileError) {
            bail!(
                "NVRTC failed to compile kernels/{} (mock) for sm_{}:\n{}(1): error: a compile error scripted by the mock device {}",
                kernel_file.name,
                self.spec.device.compute_capability.replace('.', ""),
                kernel_file.name,
                self.spec.path.display()
            );
        }
        Ok(())
    }
}

/// Runs CUDA variants on the mock device, through the CUDA executor's scope logic.
pub struct MockExecutor<'a> {
    mock: &'a MockDevice,
}

impl<'a> MockExecutor<'a> {
    pub fn new(mock: &'a MockDevice) -> MockExecutor<'a> {
        MockExecutor { mock }
    }
}

impl Executor for MockExecutor<'_> {
    fn fits(&self, job: &Job, footprint_bytes: u64) -> Result<(), CaseError> {
        if let Some(reason) = self.mock.skip(&job.variant.name, job.params) {
            return Err(CaseError::Skip(reason));
        }
        let free = self.mock.spec.device.memory_bytes;
        fits_memory(footprint_bytes, free, &self.mock.fingerprint.name).map_err(CaseError::Skip)
    }

    fn measure(
        &mut self,
        job: &Job,
        data: &CaseData,
        deadline: Deadline,
    ) -> Result<Executed, CaseError> {
        let fault = self.mock.fault(&job.variant.name, job.params);
        self.mock.load_module(job.kernel_file, fault)?;
        let spec = &self.mock.spec;
        let model = spec.variants.get(&job.variant.name).unwrap_or(&spec.timing);
        let key = format!("{}|{}", job.variant.name, describe_params(job.params));
        let run = MockRun {
            device: self.mock,
            model,
            data,
            fault,
            time_factor: spec.time_factor(&job.variant.name, job.params)
                * worker_factor(model, &key),
            key,
            windows: Cell::new(0),
            charged: Cell::new(Charges::default()),
            tracing: Cell::new(true),
        };
        Ok(Scoped::new(&run, job, data, deadline).run()?)
    }

    /// The mock cannot run a custom study's reference kernel: it answers zeros (after the
    /// scripted faults), and every variant then writes that reference, so the whole pipeline
    /// runs and the results say `MOCK`.
    fn run_once(&mut self, job: &Job, data: &CaseData) -> Result<Buffers, CaseError> {
        let fault = self.mock.fault(&job.variant.name, job.params);
        self.mock.load_module(job.kernel_file, fault)?;
        Ok(Buffers(
            (data.outputs.iter())
                .map(|o| (o.name, HostData::zeros(o.dtype, o.capacity)))
                .collect(),
        ))
    }

    fn device(&self) -> Option<&DeviceFingerprint> {
        Some(&self.mock.fingerprint)
    }
}

/// A mock buffer "on the device": host memory.
pub type MockBuf = RefCell<HostData>;

/// A mock stream: the mock runs a chunk's copies and kernel when they are queued, so a stream is
/// only a name for where they went.
pub struct MockStream;

/// What the time model has charged since the current timed window started.
#[derive(Debug, Clone, Copy, Default)]
struct Charges {
    /// The kernels' runs: launch_s + bytes / bandwidth + flops / rate each.
    kernel_s: f64,
    /// Bytes copied over the host link.
    link_bytes: u64,
    /// Whether buffers were allocated (and so freed) inside the window.
    allocated: bool,
}

/// Allocation and freeing a case's buffers inside a timed window (program scope).
const ALLOC_AND_FREE_S: f64 = 50e-6;

/// One case on the mock device: its time model, its scripted fault, and the time charged in the
/// current window. The scope logic drives it as it drives a real device.
struct MockRun<'a> {
    device: &'a MockDevice,
    model: &'a TimeModel,
    data: &'a CaseData,
    fault: Option<Fault>,
    /// The scripted scaling of the kernels' time.
    time_factor: f64,
    /// The jitter's key: the variant and the case's parameters.
    key: String,
    /// Windows timed so far: the jitter's sample number.
    windows: Cell<u64>,
    charged: Cell<Charges>,
    /// Whether the stand-in tracer records (`tracer = true`): on, as CUPTI's starts.
    tracing: Cell<bool>,
}

/// How much longer a traced kernel-scope run takes on the mock (`tracer = true`), as CUPTI's
/// activity records slowed a SAXPY of many blocks on an H100.
const TRACING_COST: f64 = 0.02;

impl MockRun<'_> {
    fn charge(&self, add: impl FnOnce(&mut Charges)) {
        let mut charged = self.charged.get();
        add(&mut charged);
        self.charged.set(charged);
    }

    fn start_window(&self) {
        self.charged.set(Charges::default());
    }

    /// The window's time: what was charged in it, spread by the deterministic jitter.
    fn end_window(&self) -> f64 {
        let k = self.windows.get() + 1;
        self.windows.set(k);
        let c = self.charged.get();
        let link_s = c.link_bytes as f64 / (self.device.spec.device.host_link_gbytes_per_s * 1e9);
        let alloc_s = if c.allocated { ALLOC_AND_FREE_S } else { 0.0 };
        let total_s = c.kernel_s + link_s + alloc_s;
        let u = unit(self.model.seed, &self.key, k);
        total_s * (1.0 + self.model.jitter * (2.0 * u - 1.0))
    }

    /// One run's time for `share` of the case's work.
    fn run_s(&self, share: f64) -> f64 {
        let flops_s = match self.model.gflops_per_s {
            0.0 => 0.0,
            rate => self.data.flops as f64 * share / (rate * 1e9),
        };
        let model_s = self.model.launch_s
            + self.data.bytes_moved() as f64 * share / (self.model.gbytes_per_s * 1e9)
            + flops_s;
        model_s * self.time_factor
    }

    /// The stand-in for the algorithm's kernels over elements `chunk` (all of them if `None`):
    /// the scripted fault, the time, and the reference as the answer.
    fn kernel(&self, io: &DeviceIo<MockBuf>, chunk: Option<Chunk>) -> Result<()> {
        match self.fault {
            Some(Fault::KernelFault) => {
                self.device.broken.set(true);
                bail!("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (a kernel fault scripted by the mock device)")
            }
            Some(Fault::Hang) => {
                eprintln!("kbench worker: the mock device hangs this case, as its file scripts");
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            _ => {}
        }
        let elements = (self.data.inputs.0.first())
            .map_or(0, |(_, h)| h.len())
            .max(1);
        let share = chunk.map_or(1.0, |(_, count)| count as f64 / elements as f64);
        let run_s = self.run_s(share);
        self.charge(|c| c.kernel_s += run_s);
        self.answer(io, chunk)
    }

    /// Writes each output's reference (at its checked indices) into its buffer, within `chunk`;
    /// one element wrong where a wrong answer is scripted.
    fn answer(&self, io: &DeviceIo<MockBuf>, chunk: Option<Chunk>) -> Result<()> {
        let within =
            |i: usize| chunk.is_none_or(|(first, count)| (first..first + count).contains(&i));
        for spec in &self.data.outputs {
            let mut buf = io.output(spec.name)?.borrow_mut();
            let indices: Box<dyn Iterator<Item = usize>> = match &spec.checked {
                Some(indices) => Box::new(indices.iter().copied()),
                None => Box::new(0..spec.reference.len()),
            };
            for (i, &x) in indices.zip(&spec.reference) {
                if within(i) {
                    set(&mut buf, i, x)?;
                }
            }
        }
        if self.fault == Some(Fault::WrongAnswer) {
            let spec = (self.data.outputs.iter())
                .find(|o| !o.reference.is_empty())
                .ok_or_else(|| anyhow!("the mock cannot answer wrongly: the case has no output"))?;
            let i = spec.checked.as_ref().map_or(0, |c| c[0]);
            let x = spec.reference[0];
            if within(i) {
                set(
                    &mut io.output(spec.name)?.borrow_mut(),
                    i,
                    x + x.abs().max(1.0),
                )?;
            }
        }
        Ok(())
    }

    /// Copies `range` of `src` into `dst` over the host link, charging its bytes.
    fn copy(&self, dst: &mut HostData, src: &HostData, range: Chunk) -> Result<()> {
        let bytes = copy_range(dst, src, range)?;
        self.charge(|c| c.link_bytes += bytes);
        Ok(())
    }
}

impl Primitives for MockRun<'_> {
    type Buf = MockBuf;
    type Pinned = RefCell<HostData>;
    type Stream = MockStream;

    fn alloc(&self, dtype: DType, len: usize) -> Result<MockBuf> {
        if self.fault == Some(Fault::OutOfMemory) {
            bail!("CUDA_ERROR_OUT_OF_MEMORY: out of memory (scripted by the mock device)");
        }
        self.charge(|c| c.allocated = true);
        Ok(RefCell::new(HostData::zeros(dtype, len)))
    }
    fn copy_in(&self, dst: &MockBuf, host: &HostData) -> Result<()> {
        self.copy(&mut dst.borrow_mut(), host, (0, host.len()))
    }
    fn copy_out(&self, src: &MockBuf, host: &mut HostData) -> Result<()> {
        let len = host.len();
        self.copy(host, &src.borrow(), (0, len))
    }
    fn reset_outputs(&self, io: &DeviceIo<MockBuf>) -> Result<()> {
        for (name, buf) in &io.outputs {
            let mut buf = buf.borrow_mut();
            match io.in_place_input(name) {
                Some(input) => {
                    let input = io.input(input)?.borrow();
                    copy_range(&mut buf, &input, (0, input.len()))?;
                }
                None => buf.poison(),
            }
        }
        Ok(())
    }
    fn pin(&self, host: &HostData) -> Result<RefCell<HostData>> {
        Ok(RefCell::new(host.clone()))
    }
    fn unpin(&self, pinned: &RefCell<HostData>, host: &mut HostData) -> Result<()> {
        let pinned = pinned.borrow();
        copy_range(host, &pinned, (0, pinned.len())).map(|_| ())
    }
    fn copy_in_pinned(
        &self,
        dst: &MockBuf,
        src: &RefCell<HostData>,
        on: Option<(Chunk, &MockStream)>,
    ) -> Result<()> {
        let src = src.borrow();
        let range = on.map_or((0, src.len()), |(chunk, _)| chunk);
        self.copy(&mut dst.borrow_mut(), &src, range)
    }
    fn copy_out_pinned(
        &self,
        src: &MockBuf,
        dst: &RefCell<HostData>,
        on: Option<(Chunk, &MockStream)>,
    ) -> Result<()> {
        let mut dst = dst.borrow_mut();
        let range = on.map_or((0, dst.len()), |(chunk, _)| chunk);
        self.copy(&mut dst, &src.borrow(), range)
    }
    fn new_streams(&self, count: usize) -> Result<Vec<MockStream>> {
        Ok((0..count).map(|_| MockStream).collect())
    }
    fn fork(&self, _stream: &MockStream) -> Result<()> {
        Ok(())
    }
    fn join(&self, _stream: &MockStream) -> Result<()> {
        Ok(())
    }
    fn launcher<'s>(
        &'s self,
        io: &'s DeviceIo<MockBuf>,
    ) -> Result<Box<dyn Launcher<MockStream> + 's>> {
        Ok(Box::new(StandIn { run: self, io }))
    }
    /// The mock has no graphs: the stand-in's run is what a replay would time.
    fn graph_launcher<'s>(
        &'s self,
        launcher: Box<dyn Launcher<MockStream> + 's>,
    ) -> Result<Box<dyn Launcher<MockStream> + 's>, CaptureFailed<'s, MockStream>> {
        Ok(launcher)
    }
    fn hold_refused(&self) -> Option<&str> {
        None
    }
    fn sample_kernel(
        &self,
        io: &DeviceIo<MockBuf>,
        launcher: &mut dyn Launcher<MockStream>,
        plan: &SamplePlan,
    ) -> Result<Sample> {
        let mut sampler = Sampler {
            run: self,
            io,
            launcher,
            elapsed_s: 0.0,
        };
        let seconds = take_sample(&mut sampler, plan)?;
        if !self.traces() {
            return Ok(self.untraced(seconds));
        }
        // Traced: the runs take longer, and the span (from the first block) leaves out a part
        // of the launch's processing, as CUPTI's does.
        let traced_s = seconds * (1.0 + TRACING_COST);
        Ok(Sample {
            cupti_seconds_per_run: Some(traced_s * 0.99),
            ..self.untraced(traced_s)
        })
    }
    fn sample_region(
        &self,
        _flush_l2: bool,
        region: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Sample> {
        self.start_window();
        region()?;
        let seconds = self.end_window();
        Ok(self.untraced(seconds))
    }
    fn can_trace(&self) -> bool {
        self.device.spec.device.tracer
    }
    fn set_tracing(&self, on: bool) -> Result<()> {
        self.tracing.set(on);
        Ok(())
    }
    fn has_profiler(&self) -> bool {
        self.device.spec.device.profiler
    }
    fn profiler_is_blind(&self) -> bool {
        false
    }
    /// Each profiled run alone in a window, as the range profiler times it.
    fn profile_kernel(
        &self,
        io: &DeviceIo<MockBuf>,
        launcher: &mut dyn Launcher<MockStream>,
        _cold_l2: bool,
    ) -> Result<Vec<(f64, usize)>> {
        (0..PROFILED_RUNS)
            .map(|_| {
                self.refresh_inputs(io)?;
                self.reset_outputs(io)?;
                self.start_window();
                launcher.launch()?;
                Ok((self.end_window(), launcher.launches_per_run()))
            })
            .collect()
    }
    fn is_broken(&self) -> bool {
        self.device.is_broken()
    }
    fn has_energy_counter(&self) -> bool {
        let d = &self.device.spec.device;
        d.power_w.is_some() && d.energy_counter
    }
    /// One run in a window of the time model, charged as `runs` (the mock's runs do real work
    /// on the host: 20,000 of them would take a test's time); its energy is `power_w` over the
    /// window's time, in whole millijoules as NVML counts.
    fn energy_window(
        &self,
        runs: u32,
        region: &mut dyn FnMut() -> Result<()>,
    ) -> Result<EnergyReading> {
        let Some(power_w) = self.device.spec.device.power_w else {
            bail!("the mock device has no NVML");
        };
        self.start_window();
        region()?;
        let window_s = self.end_window() * runs as f64;
        Ok(EnergyReading {
            energy_mj: (power_w * window_s * 1e3).round() as u64,
            window_s,
        })
    }
    /// The mock's L2 holds nothing: the reset always succeeds, and is recorded as on a GPU.
    fn reset_persisting_l2(&self) -> Result<(), String> {
        Ok(())
    }
}

impl MockRun<'_> {
    /// Copies every input over from its pristine copy (`fresh_inputs`), outside any window.
    fn refresh_inputs(&self, io: &DeviceIo<MockBuf>) -> Result<()> {
        for (name, pristine) in &io.pristine {
            let pristine = pristine.borrow();
            copy_range(
                &mut io.input(name)?.borrow_mut(),
                &pristine,
                (0, pristine.len()),
            )?;
        }
        if !io.pristine.is_empty() {
            io.refreshes.set(io.refreshes.get() + 1);
        }
        Ok(())
    }
}

impl MockRun<'_> {
    fn traces(&self) -> bool {
        self.device.spec.device.tracer && self.tracing.get()
    }

    /// A sample as the mock takes it: no second timer; where the mock has NVML, clocks near the
    /// maximum (the jitter's draw takes up to 2% off the SM clock), never throttled.
    fn untraced(&self, seconds_per_run: f64) -> Sample {
        let fingerprint = &self.device.fingerprint;
        let clocks = self.device.spec.device.power_w.map(|_| {
            let u = unit(self.model.seed, &self.key, self.windows.get());
            ClockReading {
                sm_clock_mhz: (fingerprint.sm_clock_mhz * (1.0 - 0.02 * u)).round() as u32,
                sm_clock_max_mhz: fingerprint.sm_clock_mhz as u32,
                memory_clock_mhz: fingerprint.memory_clock_mhz.round() as u32,
                reasons: 0,
            }
        });
        Sample {
            seconds_per_run,
            cupti_seconds_per_run: None,
            clocks,
        }
    }
}

/// The mock's launcher: it cannot run the algorithm's kernels, so a run charges the time model
/// and writes the reference (see `MockRun::kernel`).
struct StandIn<'s, 'a> {
    run: &'s MockRun<'a>,
    io: &'s DeviceIo<MockBuf>,
}

impl Launcher<MockStream> for StandIn<'_, '_> {
    fn launch(&mut self) -> Result<()> {
        self.run.kernel(self.io, None)
    }
    fn graph_refused(&self) -> Option<&'static str> {
        None
    }
    /// Any case whose arrays split into chunks (`cuda::chunks` checks) runs chunk by chunk here.
    fn launch_chunk(&mut self, first: usize, count: usize, _stream: &MockStream) -> Result<()> {
        self.run.kernel(self.io, Some((first, count)))
    }
}

/// A kernel-scope sample's steps on the mock (`device::timer::take_sample` orders them): the
/// hold and the flush cost nothing, the events open and close a window of the time model.
struct Sampler<'s, 'a> {
    run: &'s MockRun<'a>,
    io: &'s DeviceIo<MockBuf>,
    launcher: &'s mut dyn Launcher<MockStream>,
    elapsed_s: f64,
}

impl SampleOps for Sampler<'_, '_> {
    fn hold(&mut self) -> Result<()> {
        Ok(())
    }
    fn refresh_inputs(&mut self) -> Result<()> {
        self.run.refresh_inputs(self.io)
    }
    fn flush_l2(&mut self) -> Result<()> {
        Ok(())
    }
    fn reset_outputs(&mut self) -> Result<()> {
        self.run.reset_outputs(self.io)
    }
    fn record_start(&mut self) -> Result<()> {
        self.run.start_window();
        Ok(())
    }
    fn run(&mut self) -> Result<()> {
        self.launcher.launch()
    }
    fn record_stop(&mut self) -> Result<()> {
        self.elapsed_s = self.run.end_window();
        Ok(())
    }
    fn release(&mut self) -> Result<bool> {
        Ok(true)
    }
    fn elapsed_s(&mut self) -> Result<f64> {
        Ok(self.elapsed_s)
    }
}

/// Copies elements `first .. first + count` of `src` into the same elements of `dst` (same
/// dtype); returns the bytes copied.
fn copy_range(dst: &mut HostData, src: &HostData, (first, count): Chunk) -> Result<u64> {
    let fits = |len: usize| first.checked_add(count).is_some_and(|end| end <= len);
    if dst.dtype() != src.dtype() || !fits(dst.len()) || !fits(src.len()) {
        bail!(
            "cannot copy elements {first} + {count} of {} {} into {} {}",
            src.len(),
            src.dtype(),
            dst.len(),
            dst.dtype()
        );
    }
    let size = src.dtype().size_bytes() as usize;
    let bytes = first * size..(first + count) * size;
    dst.as_bytes_mut()[bytes.clone()].copy_from_slice(&src.as_bytes()[bytes.clone()]);
    Ok(bytes.len() as u64)
}

/// This process's offset of a case's time: 1 + worker_jitter x a uniform draw in [-1, 1) from
/// the case and a number drawn once per process (its id and the clock), so every fresh worker
/// draws anew, as a GPU process's level does.
fn worker_factor(model: &TimeModel, key: &str) -> f64 {
    static PROCESS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    if model.worker_jitter == 0.0 {
        return 1.0;
    }
    let process = *PROCESS.get_or_init(|| {
        let nanos = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH))
            .map_or(0, |d| d.as_nanos() as u64);
        nanos ^ (u64::from(std::process::id()) << 32)
    });
    let u = unit(model.seed ^ process, key, 0);
    1.0 + model.worker_jitter * (2.0 * u - 1.0)
}

/// A uniform number in [0, 1) from the seed, the case and the sample: the same on every machine
/// and every run (FNV-1a, then splitmix64).
fn unit(seed: u64, key: &str, k: u64) -> f64 {
    use std::hash::Hasher;
    let mut fnv = fnv::FnvHasher::default();
    fnv.write(key.as_bytes());
    fnv.write(&seed.to_le_bytes());
    fnv.write(&k.to_le_bytes());
    let mut h = fnv.finish();
    h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Element `i` of `host` set to `x`, in its type.
fn set(host: &mut HostData, i: usize, x: f64) -> Result<()> {
    let len = host.len();
    let slot = || anyhow!("the reference names element {i} of an output of {len}");
    // Integers truncate toward zero, as C's conversion does.
    let x = if host.dtype().is_float() {
        x
    } else {
        x.trunc()
    };
    crate::with_dtype!(host.dtype(), |T| {
        let values = T::slice_mut(host).context("kbench bug: a buffer not of its own type")?;
        *values.get_mut(i).ok_or_else(slot)? = T::nearest(x);
    });
    Ok(())
}

/// One `[[event]]` of the mock device file: what it does, to which cases, and its line.
fn parse_event(
    path: &Path,
    source: &str,
    spanned: Spanned<RawEvent>,
) -> Result<Event, ManifestError> {
    let at = |span: std::ops::Range<usize>, message: String| {
        ManifestError::new(path, source, span, None, message)
    };
    let span = spanned.span();
    let e = spanned.into_inner();
    let action =
        match (e.skip, e.fault, e.time_factor) {
            (Some(reason), None, None) => Action::Skip(reason),
            (None, Some(fault), None) => Action::Fault(fault),
            (None, None, Some(factor)) => {
                let x = *factor.get_ref();
                if !(x.is_finite() && x > 0.0) {
                    return Err(at(
                        factor.span(),
                        format!("`time_factor` is {x}; it must be a finite number above 0"),
                    ));
                }
                Action::TimeFactor(x)
            }
            _ => return Err(at(
                span,
                "an event takes one of `skip = \"reason\"`, `fault = \"...\"` or `time_factor = x`"
                    .into(),
            )),
        };
    let params = e
        .params
        .into_iter()
        .map(|(name, value)| {
            let span = value.span();
            let values = match value.into_inner() {
                toml::Value::Array(values) => values,
                one => vec![one],
            };
            let values = values
                .iter()
                .map(crate::grid::param_from_toml)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|m| at(span.clone(), format!("`params.{name}`: {m}")))?;
            Ok((name, values))
        })
        .collect::<Result<_, ManifestError>>()?;
    Ok(Event {
        line: source[..span.start.min(source.len())].matches('\n').count() + 1,
        variant: e.variant,
        params,
        action,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jitter_is_fixed_by_seed_case_and_sample() {
        let a = unit(1, "gpu|n=10", 3);
        assert_eq!(a, unit(1, "gpu|n=10", 3));
        assert_ne!(a, unit(2, "gpu|n=10", 3));
        assert_ne!(a, unit(1, "gpu|n=11", 3));
        assert_ne!(a, unit(1, "gpu|n=10", 4));
        let mean = (0..10_000).map(|k| unit(7, "x", k)).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }

    #[test]
    fn events_match_on_variant_and_any_of_their_values() {
        let text = "[[event]]\nvariant = \"gpu\"\nparams = { n = [10, 20.0], dtype = \"f32\" }\nfault = \"hang\"\n\
                    [[event]]\nskip = \"all the rest of n = 30\"\nparams = { n = 30 }\n";
        let spec = MockSpec::parse(Path::new("m.toml"), text).unwrap();
        let params = |n: i64, dtype: &str| -> Params {
            [
                ("n".to_string(), ParamValue::Int(n)),
                ("dtype".to_string(), ParamValue::Str(dtype.into())),
            ]
            .into()
        };
        let hang = Some(&Action::Fault(Fault::Hang));
        assert_eq!(spec.event("gpu", &params(10, "f32")), hang);
        assert_eq!(spec.event("gpu", &params(20, "f32")), hang);
        assert_eq!(spec.event("gpu", &params(20, "i32")), None);
        assert_eq!(spec.event("cpu", &params(10, "f32")), None);
        assert_eq!(
            spec.event("cpu", &params(30, "f32")),
            Some(&Action::Skip("all the rest of n = 30".into()))
        );
    }

    #[test]
    fn mistakes_in_the_file_are_located() {
        let err = |text: &str| {
            MockSpec::parse(Path::new("m.toml"), text)
                .unwrap_err()
                .to_string()
        };
        let e = err("[timing]\nlaunch_s = 1e-6\ngbytes_per_s = -3.0\n");
        assert!(e.contains("m.toml:3:16"), "{e}");
        assert!(e.contains("`gbytes_per_s` is -3"), "{e}");
        let e = err("[[event]]\nfault = \"segfault\"\n");
        assert!(e.contains("m.toml:2:9"), "{e}");
        assert!(e.contains("kernel fault"), "{e}");
        let e = err("[device]\nnmae = \"x\"\n");
        assert!(e.contains("m.toml:2:1") && e.contains("nmae"), "{e}");
        let e = err("\n[[event]]\nvariant = \"gpu\"\n");
        assert!(
            e.contains("m.toml:2:1") && e.contains("one of `skip"),
            "{e}"
        );
        let e = err("[timing]\njitter = 1.5\n");
        assert!(e.contains("m.toml:2:10") && e.contains("below 1"), "{e}");
    }
}
