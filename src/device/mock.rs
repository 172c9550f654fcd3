//! The mock device: a stand-in for the GPU, for developers and tests on machines without one
//! (`KBENCH_MOCK_GPU=<file>`). Opening it gives a fingerprint named `MOCK ...`; a CUDA case run on
//! it takes its outputs from the algorithm's float64 reference (so accuracy checking still runs
//! for real), its samples from a time model with deterministic jitter, and the faults and skips
//! its file scripts: a kernel fault breaks the context (the worker is replaced, as after a real
//! one), a hang never returns (the worker's parent kills it at the time limit), and so on.
//!
//! Everything else a case goes through (the worker process, the stopping rule, verification, the
//! results file, the reports) is the real thing: the mock replaces only what touches CUDA. Its
//! results say so in the device record (`mock`), and its name starts with `MOCK`, so they cannot
//! be mistaken for measurements.
//!
//! The file:
//!
//! ```toml
//! [device]                      # every key optional
//! name = "H100"                 # recorded as "MOCK H100"
//! compute_capability = "9.0"
//! sm_count = 132
//! memory_gib = 80.0             # larger cases are skipped, with the numbers, as on a GPU
//! peak_gbytes_per_s = 3350.0    # the theoretical bandwidth
//! copy_gbytes_per_s = 3000.0    # the "measured" copy
//! host_link_gbytes_per_s = 25.0 # transfers and program scopes copy over this
//!
//! [timing]                      # every CUDA variant's time model (keys optional)
//! seed = 1                      # the jitter's seed
//! launch_s = 5e-6               # a run: launch_s + bytes / bandwidth + flops / gflops
//! gbytes_per_s = 2000.0
//! gflops_per_s = 0.0            # 0: flops cost nothing
//! jitter = 0.01                 # samples spread +-1% around the model, deterministically
//!
//! [timing.variant.tree]         # a variant's own model: any of launch_s, gbytes_per_s, ...
//! gbytes_per_s = 2600.0
//!
//! [[event]]                     # scripted: which cases (variant and/or params, both optional)
//! variant = "gpu"
//! params = { n = [4096, 8192], dtype = "f32" }
//! fault = "kernel fault"        # or "compile error", "out of memory", "hang", "wrong answer"
//! # skip = "a reason"           # ... or skip the case with this reason
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::timer::batch_runs;
use super::KernelFile;
use crate::algos::{Buffers, CaseData};
use crate::manifest::ManifestError;
use crate::measure::{self, Deadline, Measured, Taken};
use crate::schema::{DeviceFingerprint, GpuTimer, MeasureSettings, TimerMethod};
use crate::vocab::{HostData, ParamValue, Params, Scope, TimingMode};

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
    pub host_link_gbytes_per_s: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimeModel {
    pub seed: u64,
    pub launch_s: f64,
    pub gbytes_per_s: f64,
    pub gflops_per_s: f64,
    pub jitter: f64,
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
    host_link_gbytes_per_s: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTiming {
    seed: Option<u64>,
    launch_s: Option<Spanned<f64>>,
    gbytes_per_s: Option<Spanned<f64>>,
    gflops_per_s: Option<Spanned<f64>>,
    jitter: Option<Spanned<f64>>,
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
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    variant: Option<String>,
    #[serde(default)]
    params: BTreeMap<String, Spanned<toml::Value>>,
    skip: Option<String>,
    fault: Option<Fault>,
}

const GIB: f64 = (1u64 << 30) as f64;

impl MockSpec {
    /// Reads and checks the file; mistakes are located in it as a manifest's are.
    pub fn load(path: &Path) -> Result<MockSpec, ManifestError> {
        let source = std::fs::read_to_string(path).map_err(|e| {
            ManifestError::whole_file(path, format!("cannot read the mock device file: {e}"))
        })?;
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
            let ok = x.is_finite() && (x > 0.0 || (zero_ok && x == 0.0));
            if !ok {
                let wanted = if zero_ok { "0 or more" } else { "more than 0" };
                return Err(at(
                    value.span(),
                    format!("`{what}` is {x}; it must be a finite number, {wanted}"),
                ));
            }
            Ok(x)
        };
        let d = &raw.device;
        let device = DeviceSpec {
            name: format!("MOCK {}", d.name.as_deref().unwrap_or("GPU")),
            compute_capability: d.compute_capability.clone().unwrap_or("9.0".into()),
            sm_count: d.sm_count.unwrap_or(132),
            memory_bytes: (positive(&d.memory_gib, "memory_gib", false, 80.0)? * GIB) as u64,
            peak_gbytes_per_s: positive(&d.peak_gbytes_per_s, "peak_gbytes_per_s", false, 3350.0)?,
            copy_gbytes_per_s: positive(&d.copy_gbytes_per_s, "copy_gbytes_per_s", false, 3000.0)?,
            host_link_gbytes_per_s: positive(
                &d.host_link_gbytes_per_s,
                "host_link_gbytes_per_s",
                false,
                25.0,
            )?,
        };
        let model = |raw: &RawModel, base: &TimeModel| -> Result<TimeModel, ManifestError> {
            let jitter = positive(&raw.jitter, "jitter", true, base.jitter)?;
            if jitter >= 1.0 {
                let span = raw.jitter.as_ref().map_or(0..0, |j| j.span());
                return Err(at(
                    span,
                    format!("`jitter` is {jitter}; it must be below 1 (a relative spread)"),
                ));
            }
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
            })
        };
        let defaults = TimeModel {
            seed: 1,
            launch_s: 5e-6,
            gbytes_per_s: 2000.0,
            gflops_per_s: 0.0,
            jitter: 0.01,
        };
        let t = raw.timing;
        let base = RawModel {
            seed: t.seed,
            launch_s: t.launch_s,
            gbytes_per_s: t.gbytes_per_s,
            gflops_per_s: t.gflops_per_s,
            jitter: t.jitter,
        };
        let timing = model(&base, &defaults)?;
        let variants = t
            .variant
            .iter()
            .map(|(name, m)| Ok((name.clone(), model(m, &timing)?)))
            .collect::<Result<_, ManifestError>>()?;
        let events = raw
            .event
            .into_iter()
            .map(|spanned| {
                let span = spanned.span();
                let e = spanned.into_inner();
                let action = match (e.skip, e.fault) {
                    (Some(reason), None) => Action::Skip(reason),
                    (None, Some(fault)) => Action::Fault(fault),
                    _ => {
                        return Err(at(
                            span,
                            "an event takes one of `skip = \"reason\"` or `fault = \"...\"`".into(),
                        ))
                    }
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
            })
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

    /// The first event that strikes this case.
    fn event(&self, variant: &str, params: &Params) -> Option<&Action> {
        self.events
            .iter()
            .find(|e| e.strikes(variant, params))
            .map(|e| &e.action)
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

/// What a CUDA case needs to know to run on the mock.
pub struct MockCase<'a> {
    pub variant: &'a str,
    pub params: &'a Params,
    pub scope: Scope,
    pub kernel_file: &'a KernelFile,
    pub data: &'a CaseData,
    pub settings: &'a MeasureSettings,
    pub deadline: Deadline,
}

/// The mock device, open in a worker.
pub struct MockDevice {
    spec: MockSpec,
    pub fingerprint: DeviceFingerprint,
    /// A scripted kernel fault struck: as a real context, this one stays unusable.
    broken: bool,
}

impl MockDevice {
    pub fn open(spec: MockSpec) -> MockDevice {
        let d = &spec.device;
        let bus_width_bits = 5120;
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
            host_to_device_gbytes_per_s: d.host_link_gbytes_per_s,
            device_to_host_gbytes_per_s: d.host_link_gbytes_per_s,
            event_overhead_s: 0.0,
            cupti_unavailable: Some("the mock device has no CUPTI".into()),
            cupti_profiler_unavailable: Some("the mock device has no CUPTI".into()),
            nvml_unavailable: Some("the mock device has no NVML".into()),
            mock: Some(format!(
                "synthetic timings and reference outputs from the mock device file {}: nothing here was measured",
                spec.path.display()
            )),
        };
        MockDevice {
            spec,
            fingerprint,
            broken: false,
        }
    }

    pub fn is_broken(&self) -> bool {
        self.broken
    }

    pub fn free_memory_bytes(&self) -> u64 {
        self.spec.device.memory_bytes
    }

    /// A scripted skip's reason, if one strikes the case.
    pub fn skip(&self, variant: &str, params: &Params) -> Option<String> {
        match self.spec.event(variant, params) {
            Some(Action::Skip(reason)) => Some(reason.clone()),
            _ => None,
        }
    }

    /// Runs a case: its scripted fault, or samples from the time model and the reference as its
    /// outputs. The time limit starts before this is called, as before a real case's compile.
    pub fn run(&mut self, case: &MockCase) -> Result<(Measured, Buffers, GpuTimer)> {
        if self.broken {
            bail!("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (the mock context faulted earlier)");
        }
        let fault = match self.spec.event(case.variant, case.params) {
            Some(Action::Fault(fault)) => Some(*fault),
            _ => None,
        };
        match fault {
            Some(Fault::CompileError) => bail!(
                "NVRTC failed to compile kernels/{} (mock) for sm_{}:\n{}(1): error: a compile error scripted by the mock device {}",
                case.kernel_file.name,
                self.spec.device.compute_capability.replace('.', ""),
                case.kernel_file.name,
                self.spec.path.display()
            ),
            Some(Fault::OutOfMemory) => {
                bail!("CUDA_ERROR_OUT_OF_MEMORY: out of memory (scripted by the mock device)")
            }
            _ => {}
        }
        let model = self
            .spec
            .variants
            .get(case.variant)
            .unwrap_or(&self.spec.timing);
        let data = case.data;
        let io_bytes: u64 = (data.inputs.0.iter())
            .map(|(_, h)| h.len() as u64 * h.dtype().size_bytes())
            .chain((data.outputs.iter()).map(|o| o.capacity as u64 * o.dtype.size_bytes()))
            .sum();
        let link_s = io_bytes as f64 / (self.spec.device.host_link_gbytes_per_s * 1e9);
        let flops_s = match model.gflops_per_s {
            0.0 => 0.0,
            rate => data.flops as f64 / (rate * 1e9),
        };
        let run_s = model.launch_s + data.bytes_moved as f64 / (model.gbytes_per_s * 1e9) + flops_s;
        let run_s = match case.scope {
            Scope::Kernel => run_s,
            Scope::Transfers => run_s + link_s,
            // Allocation and freeing too.
            Scope::Program => run_s + link_s + 50e-6,
        };
        let key = format!(
            "{}|{}",
            case.variant,
            crate::vocab::describe_params(case.params)
        );
        let mut k = 0u64;
        let jitter = model.jitter;
        let seed = model.seed;
        let broken = &mut self.broken;
        let measured = measure::measure(case.settings, case.deadline, || {
            k += 1;
            match fault {
                Some(Fault::KernelFault) => {
                    *broken = true;
                    bail!("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (a kernel fault scripted by the mock device)")
                }
                Some(Fault::Hang) => {
                    eprintln!(
                        "kbench worker: the mock device hangs this case, as its file scripts"
                    );
                    loop {
                        std::thread::sleep(Duration::from_secs(3600));
                    }
                }
                _ => {}
            }
            let u = unit(seed, &key, k);
            Ok(Taken::clean(run_s * (1.0 + jitter * (2.0 * u - 1.0))))
        })?;
        let mut outputs = data.output_buffers();
        for (spec, (_, host)) in data.outputs.iter().zip(&mut outputs.0) {
            let indices: Box<dyn Iterator<Item = usize>> = match &spec.checked {
                Some(indices) => Box::new(indices.iter().copied()),
                None => Box::new(0..spec.reference.len()),
            };
            for (i, &x) in indices.zip(&spec.reference) {
                set(host, i, x)?;
            }
        }
        if fault == Some(Fault::WrongAnswer) {
            let spec = data
                .outputs
                .iter()
                .position(|o| !o.reference.is_empty())
                .ok_or_else(|| anyhow!("the mock cannot answer wrongly: the case has no output"))?;
            let i = data.outputs[spec].checked.as_ref().map_or(0, |c| c[0]);
            let x = data.outputs[spec].reference[0];
            set(&mut outputs.0[spec].1, i, x + x.abs().max(1.0))?;
        }
        let (method, runs_per_sample) = match case.settings.mode {
            TimingMode::Single => (TimerMethod::BlockedEvents, 1),
            TimingMode::Batch => (
                TimerMethod::BatchEvents,
                batch_runs(case.settings.batch_min_window_s, run_s, 1),
            ),
        };
        let cold_l2 = case.settings.cache == crate::vocab::CacheMode::Cold
            && case.settings.mode == TimingMode::Single;
        let timer = GpuTimer::new(method, runs_per_sample, cold_l2);
        Ok((measured, outputs, timer))
    }
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
    match host {
        HostData::I32(v) => *v.get_mut(i).ok_or_else(slot)? = x as i32,
        HostData::F32(v) => *v.get_mut(i).ok_or_else(slot)? = x as f32,
        HostData::F64(v) => *v.get_mut(i).ok_or_else(slot)? = x,
    }
    Ok(())
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
