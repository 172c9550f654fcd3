//! Execution: runs a study's cases one after another, each in a `kbench worker` process (see
//! `worker`), and hands every finished case to the results file at once, so a failure or an
//! interrupt later in the study loses nothing already measured. Inside the worker, `run_case`
//! prepares a case's data, times it on its backend, verifies its output and summarizes it.
//!
//! A case that cannot run (no GPU) is skipped with the reason; a case that fails (compile error,
//! out of memory, wrong answer, a panic, a kernel fault, a run that never returns) is recorded
//! with the reason and the study goes on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

use crate::algos::{dtype_param, HostData};
use crate::backend::cuda::{Gpu, GpuCase, KernelSource};
use crate::manifest::{Backend, DType, Manifest, MeasureSettings, Scope};
use crate::measure::{self, Deadline, Measurement, StopReason};
use crate::plan::{Case, Params};
use crate::report::json::{self, ResultsFile};
use crate::stats::{self, Summary};
use crate::verify::{self, AccuracyReport};
use crate::worker::{CaseOutcome, StudyJob, Worker, SETUP_LIMIT_S};

/// When `--save-outputs` writes a case's inputs and outputs as `.npy` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
pub enum SaveOutputs {
    Failed,
    All,
}

/// Command-line settings that apply to every study of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The kbench executable, started as `kbench worker` to run each study's cases.
    pub worker_exe: PathBuf,
    pub kernels: KernelSource,
    pub save_outputs: Option<SaveOutputs>,
    /// Set by Ctrl-C or SIGTERM: the case in progress is abandoned and no other starts.
    pub interrupted: Arc<AtomicBool>,
    pub timeout_s: Option<f64>,
    pub warmup: Option<u32>,
    pub min_samples: Option<u32>,
    pub max_samples: Option<u32>,
    pub max_time_s: Option<f64>,
    /// How long a worker may take to get a case going before it counts as hung.
    pub setup_limit_s: f64,
    /// A fault for the tests to inject into the workers (`kbench run` reads KBENCH_WORKER_FAULT).
    pub worker_fault: Option<String>,
}

impl RunOptions {
    /// The manifests' settings throughout, with the embedded kernels.
    pub fn new(worker_exe: PathBuf) -> RunOptions {
        RunOptions {
            worker_exe,
            kernels: KernelSource::default(),
            save_outputs: None,
            interrupted: Arc::new(AtomicBool::new(false)),
            timeout_s: None,
            warmup: None,
            min_samples: None,
            max_samples: None,
            max_time_s: None,
            setup_limit_s: SETUP_LIMIT_S,
            worker_fault: None,
        }
    }

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

/// A worker's GPU, opened the first time a CUDA case needs it.
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
    /// A case's record before it has run.
    pub fn new(manifest: &Manifest, case: &Case) -> CaseResult {
        let variant = &manifest.variants[case.variant];
        CaseResult {
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
        }
    }

    pub fn failed(&self) -> bool {
        matches!(
            self.status,
            CaseStatus::AccuracyFailed | CaseStatus::Error | CaseStatus::TimedOut
        )
    }
}

/// Where a case is, for the worker's parent: the time limit starts at `Measuring`; after
/// `Measured` only checking the answer and saving it remain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaseStage {
    Measuring,
    Measured,
}

/// How a study's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StudyEnd {
    Finished,
    /// Interrupted: the results hold every case finished before; `--resume` runs the rest.
    Interrupted,
}

/// Runs every case, each in a worker process, appending each result to `results` as it finishes.
/// A worker that dies, hangs or breaks its CUDA context costs only its case: the next case
/// starts a new one.
pub fn run_study(
    manifest: &Manifest,
    cases: &[Case],
    options: &RunOptions,
    results: &mut ResultsFile,
    progress: &indicatif::ProgressBar,
) -> Result<StudyEnd> {
    let job = StudyJob {
        manifest_path: manifest.path.clone(),
        manifest_toml: manifest.source.clone(),
        settings: options.measure_settings(&manifest.measure),
        save_outputs: options.save_outputs,
        results_path: results.path.clone(),
        kernels_dir: options.kernels.dir.clone(),
        fault: options.worker_fault.clone(),
    };
    let mut worker: Option<Worker> = None;
    // Set when opening the GPU hung: the CUDA cases after it are skipped, not hung on in turn.
    let mut gpu_hung: Option<String> = None;
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
        let mut result = CaseResult::new(manifest, case);
        if let (Backend::Cuda, Some(reason)) = (variant.backend, &gpu_hung) {
            result.status = CaseStatus::Skipped;
            result.reason = Some(reason.clone());
        } else {
            let running = match worker.as_mut() {
                Some(running) => running,
                None => worker.insert(Worker::spawn(&options.worker_exe, &job)?),
            };
            let timeout_s = job.settings.timeout_s;
            match running.run_case(case, timeout_s, options.setup_limit_s, &options.interrupted) {
                CaseOutcome::Finished(report) => {
                    if let Some(device) = &report.device {
                        results.set_device(device);
                    }
                    if let Some(reason) = &report.gpu_unavailable {
                        results.set_gpu_unavailable(reason);
                    }
                    // A kernel fault leaves the CUDA context unusable for good, and CUDA offers
                    // no way back within the process: the next case gets a new worker.
                    if report.gpu_broken {
                        worker = None;
                    }
                    result = report.result;
                }
                CaseOutcome::Interrupted => return Ok(StudyEnd::Interrupted),
                CaseOutcome::TimedOut(reason) => {
                    worker = None;
                    result.status = CaseStatus::TimedOut;
                    result.reason = Some(reason);
                }
                CaseOutcome::SetupHung(reason) => {
                    worker = None;
                    if variant.backend == Backend::Cuda {
                        let skip = format!(
                            "opening the GPU hung in case #{} (killed after {} s), so the CUDA cases after it are skipped",
                            case.index, options.setup_limit_s
                        );
                        results.set_gpu_unavailable(&skip);
                        gpu_hung = Some(skip);
                    }
                    result.reason = Some(reason);
                }
                CaseOutcome::Died(reason) => {
                    worker = None;
                    result.reason = Some(reason);
                }
            }
        }
        result.wall_s = started.elapsed().as_secs_f64();
        results.push(result)?;
        progress.inc(1);
    }
    Ok(StudyEnd::Finished)
}

/// Runs one case in this process: checks that it fits, prepares its data, times it, verifies and
/// summarizes it. Errors and panics become the case's status and reason. `on_stage` hears of
/// each stage the case reaches.
pub fn run_case(
    manifest: &Manifest,
    case: &Case,
    gpu: &mut GpuState,
    job: &StudyJob,
    on_stage: &mut dyn FnMut(CaseStage),
) -> CaseResult {
    let mut result = CaseResult::new(manifest, case);
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        measure_case(manifest, case, gpu, job, on_stage, &mut result)
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
    result
}

fn measure_case(
    manifest: &Manifest,
    case: &Case,
    gpu: &mut GpuState,
    job: &StudyJob,
    on_stage: &mut dyn FnMut(CaseStage),
    result: &mut CaseResult,
) -> Result<()> {
    let variant = &manifest.variants[case.variant];
    let algorithm = manifest.algorithm;
    let settings = &job.settings;

    let gpu = match variant.backend {
        Backend::Cpu => None,
        Backend::Cuda => match gpu.get() {
            Ok(gpu) => Some(gpu),
            Err(reason) => {
                result.status = CaseStatus::Skipped;
                result.reason = Some(reason);
                return Ok(());
            }
        },
    };

    on_stage(CaseStage::Measuring);
    let deadline = Deadline::after(settings.timeout_s);
    let footprint = algorithm
        .footprint_bytes(&variant.implementation, &case.params)
        .ok_or_else(|| {
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
        None => measure::measure(settings, deadline, || {
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
            gpu.time_case(&case, settings, deadline, &mut output)?
        }
    };
    on_stage(CaseStage::Measured);

    if measurement.stop_reason == StopReason::TimedOut {
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
    let summary = stats::summarize(&measurement.samples_s);
    result.gbytes_per_s = Some(data.bytes_moved as f64 / summary.median_s / 1e9);
    result.gflops_per_s = Some(data.flops as f64 / summary.median_s / 1e9);
    result.summary = Some(summary);
    result.measurement = Some(measurement);

    let accuracy = verify::compare(&output.to_f64(), &data.reference, tolerance);
    // A wrong answer outranks a time limit; a right one does not clear it.
    if !accuracy.passed {
        result.status = CaseStatus::AccuracyFailed;
    } else if result.status != CaseStatus::TimedOut {
        result.status = CaseStatus::Passed;
    }
    if !accuracy.passed {
        result.reason = Some(format!(
            "wrong answer: {} of {} elements outside tolerance (max rel err {:.3e}, rel tol {:.1e})",
            accuracy.wrong_elements, accuracy.elements, accuracy.max_rel_err, tolerance.rel
        ));
    }
    let save = match job.save_outputs {
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
        result.saved_files =
            json::save_arrays(&job.results_path, case.index, &variant.name, &arrays)?;
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
