//! One case, run in this process (inside a `kbench worker`), read top to bottom in
//! `measure_case`: bind its parameters, check that it fits where it runs, prepare its data,
//! measure it through its backend's executor (`run::executor`), judge every output against its
//! reference, and save what `--save-outputs` asks for. A skip or failure is a typed `CaseError`;
//! it and any panic become the case's status and reason here, so nothing aborts a study.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::algos::{AlgorithmRef, Buffers, CaseData};
use crate::custom::{Custom, CustomDef};
use crate::manifest::Manifest;
use crate::measure::Deadline;
use crate::plan::Case;
use crate::record::{
    CaseResult, CaseStatus, MeasureSettings, Measurement, OutputCheck, StopReason, Variant,
};
use crate::run::executor::{self, CaseError, Executed, Executor, GpuState, Job};
use crate::stage_clock::{self, Stage};
use crate::stats;
use crate::verify;
use crate::vocab::{describe_params, Backend, HostData, ParamValue, Scope, ToleranceOverrides};

/// When `--save-outputs` writes a case's inputs and outputs as `.npy` files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
pub enum SaveOutputs {
    Failed,
    All,
}

/// What a case needs from the study beyond its manifest.
pub struct CaseSettings<'a> {
    pub measure: &'a MeasureSettings,
    pub save_outputs: Option<SaveOutputs>,
    /// Where `--save-outputs` puts its files: beside this results file.
    pub results_path: &'a std::path::Path,
}

/// Where a case is, for the worker's parent: the time limit starts at `Measuring`; after
/// `Measured` only checking the answer and saving it remain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CaseStage {
    Measuring,
    Measured,
}

/// What a worker needs of a study to run its cases: the parts of the manifest a case reads, as
/// data. The worker gets this rather than the manifest's text, which it would parse and validate
/// again (and, for a study with a file axis, read every matrix file of again) in every worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerStudy {
    /// The algorithm's registered name.
    pub algorithm: String,
    /// The seed every case's inputs are drawn from.
    pub seed: u64,
    pub variants: Vec<Variant>,
    pub accuracy: ToleranceOverrides,
    /// A custom study's definition (its manifest's `[custom]`, checked), from which the worker
    /// rebuilds the algorithm; None for a built-in.
    #[serde(default)]
    pub custom: Option<CustomDef>,
    /// Where each file a file axis names is, by axis and then by the path the cases' parameters
    /// hold: its absolute path, so a run resumed from another folder reads the same file.
    #[serde(default)]
    pub files: BTreeMap<String, BTreeMap<String, PathBuf>>,
    /// Where a custom study's reference command keeps its outputs for the run's other worker
    /// processes (set where a case runs in several: `[measure] processes`).
    #[serde(default)]
    pub shared_references: Option<PathBuf>,
    /// The custom algorithm, rebuilt once per worker rather than once per case.
    #[serde(skip)]
    built: std::sync::OnceLock<AlgorithmRef>,
    /// The last grid point's data, for the cases after it at the same point.
    #[serde(skip)]
    point: LastPoint,
}

/// The inputs and expected outputs of the grid point a worker ran last. The plan puts a grid
/// point's variants side by side, and they all run on the same data (it is drawn from the
/// study's seed and the case's parameters alone): the inputs are made, and a reference command
/// run, once per grid point and worker rather than once per case. A failure to make them is
/// kept too, so a failing reference command fails its point's cases without running again.
#[derive(Debug, Default)]
struct LastPoint(std::sync::Mutex<Option<(String, Result<CaseData, String>)>>);

impl Clone for LastPoint {
    /// A worker's own: a copy starts empty.
    fn clone(&self) -> LastPoint {
        LastPoint::default()
    }
}

/// What names a grid point's data: the case's parameters and the seed.
fn point_key(case: &Case, seed: u64) -> String {
    let params = serde_json::to_string(&case.params).unwrap_or_default();
    format!("{seed} {params}")
}

impl WorkerStudy {
    pub fn of(manifest: &Manifest) -> WorkerStudy {
        WorkerStudy {
            algorithm: manifest.algorithm.spec().name.to_string(),
            seed: manifest.study.seed,
            variants: manifest.variants.clone(),
            accuracy: manifest.accuracy,
            custom: manifest.custom.clone(),
            files: files_by_axis(manifest),
            shared_references: None,
            built: std::sync::OnceLock::new(),
            point: LastPoint::default(),
        }
    }

    fn algorithm(&self) -> Result<AlgorithmRef> {
        if let Some(def) = &self.custom {
            let built = self.built.get_or_init(|| {
                let mut custom = Custom::new(def.clone());
                custom.shared_references = self.shared_references.clone();
                AlgorithmRef::Owned(std::sync::Arc::new(custom))
            });
            return Ok(built.clone());
        }
        crate::algos::find(&self.algorithm).ok_or_else(|| {
            anyhow!(
                "kbench bug: no algorithm `{}` in this build",
                self.algorithm
            )
        })
    }
}

/// `WorkerStudy::files`: each relative path of a file axis, with its absolute path.
fn files_by_axis(manifest: &Manifest) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut by_axis: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for expansion in &manifest.files {
        for (path, absolute) in expansion.paths.iter().zip(&expansion.absolute) {
            if Path::new(path) != absolute {
                (by_axis.entry(expansion.axis.clone()).or_default())
                    .insert(path.clone(), absolute.clone());
            }
        }
    }
    by_axis
}

/// The case as its data is made: each file-axis path replaced by where the file is (its
/// record keeps the path as the manifest's glob matched it).
fn located(study: &WorkerStudy, case: &Case) -> Case {
    let mut located = case.clone();
    for (axis, files) in &study.files {
        if let Some(ParamValue::Str(path)) = located.params.get_mut(axis) {
            if let Some(absolute) = files.get(path.as_str()) {
                *path = absolute.display().to_string();
            }
        }
    }
    located
}

/// A case's record before it has run.
pub fn new_result(manifest: &Manifest, case: &Case) -> CaseResult {
    result_of(&manifest.variants, case)
}

fn result_of(variants: &[Variant], case: &Case) -> CaseResult {
    let variant = &variants[case.variant];
    CaseResult {
        index: case.index,
        variant: variant.name.clone(),
        backend: variant.backend,
        implementation: variant.implementation.clone(),
        scope: (variant.backend == Backend::Cuda).then_some(variant.scope),
        host_memory: (variant.backend == Backend::Cuda && variant.scope != Scope::Kernel)
            .then_some(variant.host_memory),
        params: case.params.clone(),
        status: CaseStatus::Error,
        reason: None,
        bytes_moved: 0,
        bytes_read: 0,
        bytes_written: 0,
        flops: 0,
        summary: None,
        gbytes_per_s: None,
        gflops_per_s: None,
        elements: 0,
        elements_per_s: None,
        peak_kind: None,
        peak_gbytes_per_s: None,
        implausible: false,
        implausible_reason: None,
        above_peak: None,
        measurement: None,
        outputs: Vec::new(),
        unchecked: false,
        check_command: None,
        facts: Default::default(),
        saved_files: Vec::new(),
        wall_s: 0.0,
        device: None,
        sanitizer: None,
        overhead: None,
    }
}

/// Runs one case in this process. `on_stage` hears of each stage the case reaches.
pub fn run_case(
    study: &WorkerStudy,
    case: &Case,
    gpu: &mut GpuState,
    settings: &CaseSettings,
    on_stage: &mut dyn FnMut(CaseStage),
) -> CaseResult {
    let mut result = result_of(&study.variants, case);
    stage_clock::take();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        measure_case(
            study,
            &located(study, case),
            gpu,
            settings,
            on_stage,
            &mut result,
        )
    }));
    result.overhead = Some(stage_clock::take());
    let (status, reason) = match outcome {
        Ok(Ok(())) => return result,
        Ok(Err(CaseError::Skip(reason))) => (CaseStatus::Skipped, reason),
        Ok(Err(CaseError::Fail(e))) => (CaseStatus::Error, format!("{e:#}")),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "unknown panic".into());
            (
                CaseStatus::Error,
                format!("kbench bug: the case panicked: {text}"),
            )
        }
    };
    result.status = status;
    result.reason = Some(reason);
    result
}

/// bind -> fits -> prepare -> measure -> judge -> save, filling in `result`.
fn measure_case(
    study: &WorkerStudy,
    case: &Case,
    gpu: &mut GpuState,
    settings: &CaseSettings,
    on_stage: &mut dyn FnMut(CaseStage),
    result: &mut CaseResult,
) -> Result<(), CaseError> {
    let variant = &study.variants[case.variant];
    let algorithm = study.algorithm()?;
    let bound = algorithm.bind(&case.params)?;
    let mut executor = executor::executor_for(variant.backend, gpu)?;
    let kernel_file = match bound.kernel_file(&variant.implementation) {
        Some(file) => file?,
        None => algorithm.spec().kernel_file,
    };
    let job = Job {
        variant,
        params: &case.params,
        bound: &*bound,
        kernel_file: &kernel_file,
        settings: settings.measure,
    };

    on_stage(CaseStage::Measuring);
    let deadline = Deadline::after(settings.measure.timeout_s);
    if variant.backend == Backend::Cuda {
        let kernels =
            std::iter::once(variant.implementation.as_str()).chain(bound.reference_kernel());
        if let Some(why) = kernels.filter_map(|k| bound.unrunnable(k)).next() {
            return Err(CaseError::Skip(why));
        }
    }
    let footprint = footprint(&job)?;
    executor.fits(&job, footprint)?;
    let mut point = study.point.0.lock().unwrap_or_else(|e| e.into_inner());
    let key = point_key(case, study.seed);
    if point.as_ref().is_none_or(|(made_for, _)| *made_for != key) {
        // The last point's data goes before this one's is made: both may not fit.
        *point = None;
        check_host_memory(footprint)?;
        let made = stage_clock::time(Stage::Inputs, || bound.prepare(study.seed));
        *point = Some((key, made.map_err(|e| format!("{e:#}"))));
    }
    let Some((_, made)) = point.as_mut() else {
        unreachable!("made above")
    };
    let data = made.as_mut().map_err(|e| anyhow!("{e}"))?;
    settle(&job, study, data, result);
    result.unchecked = bound.unchecked(&variant.implementation);
    if !result.unchecked {
        stage_clock::time(Stage::Reference, || {
            bound.prepare_variant(study.seed, variant, data)
        })?;
        if let Some(reference) = bound.reference_kernel() {
            stage_clock::time(Stage::Reference, || {
                run_reference(&mut *executor, &job, reference, data)
            })?;
        }
    }
    let data = &*data;
    let Executed {
        measurement,
        mut outputs,
        facts,
    } = executor.measure(&job, data, deadline)?;
    result.facts.extend(facts);
    on_stage(CaseStage::Measured);

    let timed_out = timed_out_reason(&measurement, settings.measure);
    if timed_out.is_some() && measurement.samples_s.is_empty() {
        result.measurement = Some(measurement);
        (result.status, result.reason) = (CaseStatus::TimedOut, timed_out);
        return Ok(());
    }
    summarize(result, measurement, data);
    if let Some(device) = executor.device() {
        result.judge_peak(device);
    }
    let _checking = stage_clock::Entered::new(Stage::Checking);
    let wrong = match result.unchecked {
        true => None,
        false => judge(result, data, &mut outputs).map_or_else(
            || ask_check_command(&*bound, variant, data, &outputs, result),
            |why| Ok(Some(why)),
        )?,
    };
    // A wrong answer outranks a time that is no number, which outranks a time limit; a right
    // answer clears neither.
    let no_time = non_finite_time(result);
    (result.status, result.reason) = match (&wrong, no_time, timed_out) {
        (Some(why), _, _) => (CaseStatus::AccuracyFailed, Some(why.clone())),
        (None, Some(why), _) => (CaseStatus::Error, Some(why)),
        (None, None, Some(why)) => (CaseStatus::TimedOut, Some(why)),
        (None, None, None) => (CaseStatus::Passed, None),
    };
    save(
        settings,
        case,
        variant,
        data,
        &outputs,
        wrong.is_none(),
        result,
    )
}

/// The bytes the case's data takes, to check that it fits where it would run (the device's
/// memory, the mock's scripted skips) and in the host's memory before it is made.
fn footprint(job: &Job) -> Result<u64, CaseError> {
    let footprint = (job.bound)
        .footprint_bytes(&job.variant.implementation)
        .ok_or_else(|| {
            anyhow!(
                "the case's size overflows 64-bit arithmetic: {}",
                describe_params(job.params)
            )
        })?;
    Ok(footprint)
}

/// Each output's tolerance settled for the case's variant (the algorithm's, then the
/// manifest's), and the work the data stands for recorded.
fn settle(job: &Job, study: &WorkerStudy, data: &mut CaseData, result: &mut CaseResult) {
    for output in &mut data.outputs {
        output.tolerance = (job.bound)
            .tolerance(&job.variant.implementation, output)
            .with_overrides(output.dtype, &study.accuracy);
    }
    result.bytes_moved = data.bytes_moved();
    result.bytes_read = data.bytes_read;
    result.bytes_written = data.bytes_written;
    result.flops = data.flops;
    result.elements = data.elements;
    result.facts = (data.facts.iter())
        .map(|(k, v)| (k.to_string(), *v))
        .collect();
}

/// Runs the kernel `reference` once on the case's inputs, outside the timing, and makes its
/// outputs the reference of every output that has none yet (a custom study's trusted kernel;
/// outputs checked against `.npy` files already have theirs).
fn run_reference(
    executor: &mut dyn Executor,
    job: &Job,
    reference: &str,
    data: &mut CaseData,
) -> Result<(), CaseError> {
    let variant = Variant {
        implementation: reference.to_string(),
        scope: Scope::Kernel,
        streams: 1,
        ..job.variant.clone()
    };
    // Compiled on its own: its kernel sequence's options may not be the variant's.
    let kernel_file = match job.bound.kernel_file(reference) {
        Some(file) => file?,
        None => *job.kernel_file,
    };
    let reference_job = Job {
        variant: &variant,
        kernel_file: &kernel_file,
        ..*job
    };
    let outputs = executor
        .run_once(&reference_job, data)
        .map_err(|e| match e {
            CaseError::Fail(e) => {
                CaseError::Fail(e.context(format!("running the reference kernel `{reference}`")))
            }
            skip => skip,
        })?;
    for output in &mut data.outputs {
        if output.reference.is_empty() && output.capacity > 0 {
            output.reference = outputs.data(output.name)?.to_f64();
        }
    }
    Ok(())
}

/// Why the case stopped at its time limit, if it did.
fn timed_out_reason(measurement: &Measurement, settings: &MeasureSettings) -> Option<String> {
    (measurement.stop_reason == StopReason::TimedOut).then(|| {
        format!(
            "still running at its time limit of {} s; {} samples kept",
            settings.timeout_s,
            measurement.samples_s.len()
        )
    })
}

/// Why the case's time is no measurement, when some sample is infinite or NaN (a timer, or the
/// mock device's time model, overflowed) or the samples' statistics overflowed (a mean of
/// 1e308 s): the case is an error, recorded with those figures.
pub(crate) fn non_finite_time(result: &CaseResult) -> Option<String> {
    let samples_s = &result.measurement.as_ref()?.samples_s;
    let summary = result.summary.as_ref()?;
    let bad = samples_s.iter().filter(|s| !s.is_finite()).count();
    if bad > 0 {
        return Some(format!(
            "{bad} of its {} samples are not a finite time (median {} s): the timer or the device's time model overflowed",
            samples_s.len(),
            summary.median_s
        ));
    }
    let figures_s = [summary.median_s, summary.mean_s, summary.std_dev_s];
    (!figures_s.iter().all(|x| x.is_finite())).then(|| {
        format!(
            "its samples are too large to summarize: mean {} s, standard deviation {} s",
            summary.mean_s, summary.std_dev_s
        )
    })
}

/// The samples' statistics and the throughput they give, with the measurement itself.
fn summarize(result: &mut CaseResult, measurement: Measurement, data: &CaseData) {
    let summary = stats::summarize(&measurement.samples_s);
    result.gbytes_per_s = Some(data.bytes_moved() as f64 / summary.median_s / 1e9);
    result.gflops_per_s = Some(data.flops as f64 / summary.median_s / 1e9);
    result.elements_per_s = (data.elements > 0).then(|| data.elements as f64 / summary.median_s);
    result.summary = Some(summary);
    result.measurement = Some(measurement);
}

/// Checks every output against its reference into `result.outputs`; returns why the answer is
/// wrong, if it is. An output whose length depends on the data is cut to its count first; a
/// count that cannot be right fails the case, as a wrong answer.
fn judge(result: &mut CaseResult, data: &CaseData, outputs: &mut Buffers) -> Option<String> {
    let trimmed = data.trim_outputs(outputs);
    result.outputs = (data.outputs.iter())
        .filter(|spec| spec.compared)
        .map(|spec| {
            let got = (outputs.data(spec.name).map(HostData::to_f64)).unwrap_or_default();
            let (mut accuracy, has_every_element) = match &spec.checked {
                None => (
                    verify::compare(&got, &spec.reference, spec.tolerance),
                    got.len() == spec.reference.len(),
                ),
                Some(indices) => (
                    verify::compare_at(&got, indices, &spec.reference, spec.tolerance),
                    true,
                ),
            };
            if spec.max_mismatches > 0 {
                verify::allow_mismatches(&mut accuracy, spec.max_mismatches, has_every_element);
            }
            OutputCheck {
                name: spec.name.to_string(),
                length: got.len(),
                accuracy,
            }
        })
        .collect();
    let wrong: Vec<String> = (result.outputs.iter())
        .filter(|o| !o.accuracy.passed)
        .map(describe_wrong)
        .collect();
    match trimmed {
        Err(e) => Some(format!("wrong answer: {e:#}")),
        Ok(()) if !wrong.is_empty() => Some(format!("wrong answer: {}", wrong.join("; "))),
        Ok(()) => None,
    }
}

/// The algorithm's own judgement of an answer every output of which passed (a custom study's
/// check command), recorded in `result`: why it is wrong, if it is.
fn ask_check_command(
    bound: &dyn crate::algos::BoundCase,
    variant: &Variant,
    data: &CaseData,
    outputs: &Buffers,
    result: &mut CaseResult,
) -> Result<Option<String>> {
    let Some(verdict) = bound.check_answer(variant, data, outputs)? else {
        return Ok(None);
    };
    result.check_command = Some(verdict.clone());
    Ok(verdict
        .message
        .filter(|_| !verdict.passed)
        .map(|message| format!("wrong answer: the check command says: {message}")))
}

/// One wrong output, with its errors and tolerances.
fn describe_wrong(o: &OutputCheck) -> String {
    let a = &o.accuracy;
    let mut checked = match a.subset_of {
        Some(of) => format!(" checked (a subset of its {of})"),
        None => String::new(),
    };
    if a.mismatches_allowed > 0 {
        checked.push_str(&format!(", {} allowed,", a.mismatches_allowed));
    }
    format!(
        "`{}`: {} of {} elements{checked} outside tolerance (max rel err {:.3e}, rel tol {:.1e}, max abs err {:.3e}, abs tol {:.1e})",
        o.name, a.wrong_elements, a.elements, a.max_rel_err, a.tolerance.rel, a.max_abs_err, a.tolerance.abs
    )
}

/// Writes the case's inputs, outputs and references as `.npy` files where `--save-outputs`
/// asks for this case's.
fn save(
    settings: &CaseSettings,
    case: &Case,
    variant: &Variant,
    data: &CaseData,
    outputs: &Buffers,
    passed: bool,
    result: &mut CaseResult,
) -> Result<(), CaseError> {
    let wanted = match settings.save_outputs {
        Some(SaveOutputs::All) => true,
        Some(SaveOutputs::Failed) => !passed,
        None => false,
    };
    if !wanted {
        return Ok(());
    }
    let references: Vec<(String, HostData)> = (data.outputs.iter())
        .map(|o| {
            let name = format!("{}.reference", o.name);
            (name, HostData::F64(o.reference.clone()))
        })
        .collect();
    let mut arrays: Vec<(String, &HostData)> = (data.inputs.0.iter())
        .map(|(name, h)| (format!("input.{name}"), h))
        .collect();
    arrays.extend((outputs.0.iter()).map(|(name, h)| (format!("output.{name}"), h)));
    arrays.extend(references.iter().map(|(name, h)| (name.clone(), h)));
    result.saved_files =
        crate::results::save_arrays(settings.results_path, case.index, &variant.name, &arrays)?;
    Ok(())
}

/// Refuses a case whose data would not fit in the memory the machine has free, before allocating
/// it (an allocation failure would abort the worker).
fn check_host_memory(bytes: u64) -> Result<()> {
    let Some(available) = crate::env::host_memory_headroom_bytes() else {
        return Ok(());
    };
    if bytes > available {
        bail!(
            "needs {:.2} GiB of host memory for its data, only {:.2} GiB is available",
            bytes as f64 / GIB,
            available as f64 / GIB
        );
    }
    Ok(())
}

const GIB: f64 = (1u64 << 30) as f64;
