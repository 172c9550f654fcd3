//! Execution: runs a study's cases one after another on their backends, verifies each output,
//! summarizes its samples, and hands every finished case to the results file at once, so a
//! failure or an interrupt later in the study loses nothing already measured.
//!
//! A case that cannot run (no GPU) is skipped with the reason; a case that fails (compile error,
//! out of memory, wrong answer, even a panic) is recorded with the reason and the study goes on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

use crate::algos::{dtype_param, HostData};
use crate::backend::cuda::{Gpu, GpuCase, KernelSource};
use crate::manifest::{Backend, DType, Manifest, MeasureSettings, Scope};
use crate::measure::{self, Limits, Measurement, StopReason};
use crate::plan::{Case, Params};
use crate::report::json::ResultsFile;
use crate::stats::{self, Summary};
use crate::verify::{self, AccuracyReport};

/// When `--save-outputs` writes a case's inputs and outputs as `.npy` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SaveOutputs {
    Failed,
    All,
}

/// Command-line settings that apply to every study of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub save_outputs: Option<SaveOutputs>,
    /// Set by Ctrl-C or SIGTERM: the case in progress is abandoned and no other starts.
    pub interrupted: Arc<AtomicBool>,
    pub timeout_s: Option<f64>,
    pub warmup: Option<u32>,
    pub min_samples: Option<u32>,
    pub max_samples: Option<u32>,
    pub max_time_s: Option<f64>,
}

impl RunOptions {
    pub fn measure_settings(&self, manifest: &MeasureSettings) -> MeasureSettings {
        let mut s = manifest.clone();
        s.warmup = self.warmup.unwrap_or(s.warmup);
        s.min_samples = self.min_samples.unwrap_or(s.min_samples);
        s.max_samples = self.max_samples.unwrap_or(s.max_samples).max(s.min_samples);
        s.max_time_s = self.max_time_s.unwrap_or(s.max_time_s);
        s.timeout_s = self.timeout_s.unwrap_or(s.timeout_s);
        s
    }
}

/// The GPU, opened the first time a CUDA case needs it and shared by every study of the run.
pub enum GpuState {
    NotOpened(KernelSource),
    Open(Box<Gpu>),
    Unavailable(String),
}

impl GpuState {
    fn get(&mut self) -> Result<&mut Gpu, String> {
        if let GpuState::NotOpened(kernels) = self {
            *self = match Gpu::open(kernels.clone()) {
                Ok(gpu) => GpuState::Open(Box::new(gpu)),
                Err(reason) => GpuState::Unavailable(reason),
            };
        }
        match self {
            GpuState::Open(gpu) => Ok(gpu),
            GpuState::Unavailable(reason) => Err(reason.clone()),
            GpuState::NotOpened(_) => unreachable!("opened above"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Passed,
    AccuracyFailed,
    Error,
    /// Still running at the case's time limit; the samples taken are kept.
    TimedOut,
    Skipped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub index: usize,
    pub variant: String,
    pub backend: Backend,
    pub implementation: String,
    /// The timed region; CPU cases time the computation alone.
    pub scope: Option<Scope>,
    pub params: Params,
    pub status: CaseStatus,
    /// Why a case was skipped or failed.
    pub reason: Option<String>,
    pub bytes_moved: u64,
    pub flops: u64,
    pub summary: Option<Summary>,
    /// From the median time and the fewest bytes the case must move.
    pub gbytes_per_s: Option<f64>,
    pub gflops_per_s: Option<f64>,
    pub measurement: Option<Measurement>,
    pub accuracy: Option<AccuracyReport>,
    /// `.npy` files written for `--save-outputs`, relative to the results file's folder.
    pub saved_files: Vec<String>,
    pub wall_s: f64,
}

impl CaseResult {
    pub fn failed(&self) -> bool {
        matches!(
            self.status,
            CaseStatus::AccuracyFailed | CaseStatus::Error | CaseStatus::TimedOut
        )
    }
}

/// How a study's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StudyEnd {
    Finished,
    /// Interrupted: the results hold every case finished before; `--resume` runs the rest.
    Interrupted,
}

/// Runs every case, appending each result to `results` as it finishes.
pub fn run_study(
    manifest: &Manifest,
    cases: &[Case],
    gpu: &mut GpuState,
    options: &RunOptions,
    results: &mut ResultsFile,
    progress: &indicatif::ProgressBar,
) -> Result<StudyEnd> {
    let settings = options.measure_settings(&manifest.measure);
    for case in cases {
        if options.interrupted.load(Ordering::Relaxed) {
            return Ok(StudyEnd::Interrupted);
        }
        let variant = &manifest.variants[case.variant];
        progress.set_message(format!(
            "{} {}",
            variant.name,
            describe_params(&case.params)
        ));
        let started = Instant::now();
        let mut result = CaseResult {
            index: case.index,
            variant: variant.name.clone(),
            backend: variant.backend,
            implementation: variant.implementation.clone(),
            scope: (variant.backend == Backend::Cuda).then_some(variant.scope),
            params: case.params.clone(),
            status: CaseStatus::Error,
            reason: None,
            bytes_moved: 0,
            flops: 0,
            summary: None,
            gbytes_per_s: None,
            gflops_per_s: None,
            measurement: None,
            accuracy: None,
            saved_files: Vec::new(),
            wall_s: 0.0,
        };
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run_case(
                manifest,
                case,
                gpu,
                &settings,
                options,
                results,
                &mut result,
            )
        }));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                result.status = CaseStatus::Error;
                result.reason = Some(format!("{e:#}"));
            }
            Err(panic) => {
                let text = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown panic".into());
                result.status = CaseStatus::Error;
                result.reason = Some(format!("kbench bug: the case panicked: {text}"));
            }
        }
        if let GpuState::Open(open) = gpu {
            results.set_device(&open.fingerprint);
        }
        // A faulting kernel kills its context, and CUDA offers no way back within the process:
        // the later CUDA cases are skipped with the reason; CPU cases go on.
        if result.status == CaseStatus::Error
            && matches!(gpu, GpuState::Open(open) if open.is_broken())
        {
            *gpu = GpuState::Unavailable(format!(
                "the CUDA context is unusable after the kernel fault in case #{} ({}); CUDA cannot recover it within the process, so these cases need a new run",
                case.index, variant.name
            ));
        }
        let interrupted = result
            .measurement
            .as_ref()
            .is_some_and(|m| m.stop_reason == StopReason::Interrupted);
        if interrupted {
            return Ok(StudyEnd::Interrupted);
        }
        result.wall_s = started.elapsed().as_secs_f64();
        results.push(result)?;
        progress.inc(1);
    }
    Ok(StudyEnd::Finished)
}

fn run_case(
    manifest: &Manifest,
    case: &Case,
    gpu: &mut GpuState,
    settings: &MeasureSettings,
    options: &RunOptions,
    results: &mut ResultsFile,
    result: &mut CaseResult,
) -> Result<()> {
    let variant = &manifest.variants[case.variant];
    let algorithm = manifest.algorithm;

    let gpu = match variant.backend {
        Backend::Cpu => None,
        Backend::Cuda => match gpu.get() {
            Ok(gpu) => Some(gpu),
            Err(reason) => {
                results.set_gpu_unavailable(&reason);
                result.status = CaseStatus::Skipped;
                result.reason = Some(reason);
                return Ok(());
            }
        },
    };

    let limits = Limits::new(&options.interrupted, settings.timeout_s);
    let footprint = algorithm.footprint_bytes(&case.params).ok_or_else(|| {
        anyhow!(
            "the case's size overflows 64-bit arithmetic: {}",
            describe_params(&case.params)
        )
    })?;
    if let Some(gpu) = &gpu {
        if let Err(reason) = gpu.check_device_memory(footprint) {
            result.status = CaseStatus::Skipped;
            result.reason = Some(reason);
            return Ok(());
        }
    }
    check_host_memory(footprint)?;

    let data = algorithm.prepare(&case.params, manifest.study.seed)?;
    result.bytes_moved = data.bytes_moved;
    result.flops = data.flops;
    let dtype = dtype_param(&case.params).unwrap_or(DType::F64);
    let tolerance = algorithm
        .default_tolerance(&case.params)
        .with_overrides(dtype, &manifest.accuracy);

    let mut output = data.output.clone();
    let measurement = match gpu {
        None => measure::measure(settings, limits, || {
            output.poison();
            let start = Instant::now();
            algorithm.run_cpu(&variant.implementation, &case.params, &data, &mut output)?;
            Ok(start.elapsed().as_secs_f64())
        })?,
        Some(gpu) => {
            let case = GpuCase {
                algorithm,
                kernel: &variant.implementation,
                params: &case.params,
                data: &data,
                scope: variant.scope,
            };
            gpu.time_case(&case, settings, limits, &mut output)?
        }
    };

    match measurement.stop_reason {
        StopReason::Interrupted => {
            result.measurement = Some(measurement);
            return Ok(());
        }
        StopReason::TimedOut => {
            result.status = CaseStatus::TimedOut;
            result.reason = Some(format!(
                "still running at its time limit of {} s; {} samples kept",
                settings.timeout_s,
                measurement.samples_s.len()
            ));
            if measurement.samples_s.is_empty() {
                result.measurement = Some(measurement);
                return Ok(());
            }
        }
        _ => {}
    }
    let summary = stats::summarize(&measurement.samples_s);
    result.gbytes_per_s = Some(data.bytes_moved as f64 / summary.median_s / 1e9);
    result.gflops_per_s = Some(data.flops as f64 / summary.median_s / 1e9);
    result.summary = Some(summary);
    result.measurement = Some(measurement);

    let accuracy = verify::compare(&output.to_f64(), &data.reference, tolerance);
    if result.status != CaseStatus::TimedOut || !accuracy.passed {
        result.status = if accuracy.passed {
            CaseStatus::Passed
        } else {
            CaseStatus::AccuracyFailed
        };
    }
    if !accuracy.passed {
        result.reason = Some(format!(
            "wrong answer: {} of {} elements outside tolerance (max rel err {:.3e}, rel tol {:.1e})",
            accuracy.wrong_elements, accuracy.elements, accuracy.max_rel_err, tolerance.rel
        ));
    }
    let save = match options.save_outputs {
        Some(SaveOutputs::All) => true,
        Some(SaveOutputs::Failed) => !accuracy.passed,
        None => false,
    };
    result.accuracy = Some(accuracy);
    if save {
        let reference = HostData::F64(data.reference.clone());
        let mut arrays: Vec<(&str, &HostData)> =
            data.inputs.iter().map(|(name, h)| (*name, h)).collect();
        arrays.push(("output", &output));
        arrays.push(("reference", &reference));
        result.saved_files = results.save_arrays(case.index, &variant.name, &arrays)?;
    }
    Ok(())
}

/// Refuses a case whose inputs alone would not fit in the memory the machine has free, before
/// allocating them (an allocation failure would abort the whole run).
fn check_host_memory(bytes: u64) -> Result<()> {
    let Some(available) = host_memory_available_bytes() else {
        return Ok(());
    };
    if bytes > available {
        anyhow::bail!(
            "needs {:.2} GiB of host memory for its data, only {:.2} GiB is available",
            bytes as f64 / GIB,
            available as f64 / GIB
        );
    }
    Ok(())
}

const GIB: f64 = (1u64 << 30) as f64;

/// MemAvailable from /proc/meminfo; None where that is not known.
fn host_memory_available_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

pub fn describe_params(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}
