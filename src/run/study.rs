//! Execution: runs a study's cases one after another, each in a `kbench worker` process (see
//! `worker`; inside it, `case` runs each one), or in each of several (`[measure] processes`,
//! see `processes`), and hands every finished case to the results file at once, so a failure
//! or an interrupt later in the study loses nothing already measured.
//!
//! A case that cannot run (no GPU) is skipped with the reason; a case that fails (compile error,
//! out of memory, wrong answer, a panic, a kernel fault, a run that never returns) is recorded
//! with the reason and the study goes on.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use crate::device::KernelSource;
use crate::manifest::Manifest;
use crate::plan::Case;
use crate::record::{CaseDevice, CaseResult, CaseStatus, MeasureOverrides, MeasureSettings};
use crate::results::ResultsFile;
use crate::run::case::{self, SaveOutputs, WorkerStudy};
use crate::run::executor::mock::MockSpec;
use crate::run::lanes::{run_pool, After, Kind, LaneDevice, PoolEnd};
use crate::run::processes;
use crate::run::sanitize::{self, Sanitizer};
use crate::run::worker::{StudyJob, Worker, WorkerOutcome, SETUP_LIMIT_S};
use crate::vocab::{describe_params, Backend};

/// Command-line settings that apply to every study of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The kbench executable, started as `kbench worker` to run each study's cases.
    pub worker_exe: PathBuf,
    pub kernels: KernelSource,
    pub save_outputs: Option<SaveOutputs>,
    /// Set by Ctrl-C or SIGTERM: the case in progress is abandoned and no other starts.
    pub interrupted: Arc<AtomicBool>,
    /// The command line's overrides of each manifest's `[measure]`.
    pub overrides: MeasureOverrides,
    /// How long a worker may take to get a case going before it counts as hung.
    pub setup_limit_s: f64,
    /// A fault for the tests to inject into the workers (`kbench run` reads KBENCH_WORKER_FAULT).
    pub worker_fault: Option<String>,
    /// One lane per GPU the cases run on (`run --devices`); one lane by default.
    pub lanes: Vec<LaneDevice>,
    /// Run the CUDA cases on this mock device instead of a GPU (`kbench run` reads the file
    /// KBENCH_MOCK_GPU names).
    pub mock_gpu: Option<MockSpec>,
    /// `run --sanitize`: each CUDA case runs once more under compute-sanitizer.
    pub sanitizer: Option<Sanitizer>,
    /// The folder the workers of every study these options run share their compiles and each
    /// GPU's peaks in (`nvrtc::share_compiles_in`, `peaks::share_peaks_in`); removed with the
    /// last copy of the options. None where no temporary folder could be made: each worker then
    /// compiles and measures for itself.
    pub shared_compiles: Option<Arc<tempfile::TempDir>>,
    /// The folder every study these options run keeps its reference commands' answers in, for
    /// all its workers (a tune's re-measurements); removed with the last copy of the options.
    /// None: a study keeps them for a case's processes alone (`[measure] processes`).
    pub shared_references: Option<Arc<tempfile::TempDir>>,
    /// The folders the workers' reference and check commands exchange their files in; removed
    /// with the last copy of the options, whatever became of the workers. None: the system's.
    pub exchange: Option<Arc<crate::reference_command::ExchangeFolders>>,
}

impl RunOptions {
    /// The manifests' settings throughout, with the embedded kernels.
    pub fn new(worker_exe: PathBuf) -> RunOptions {
        RunOptions {
            worker_exe,
            kernels: KernelSource::default(),
            save_outputs: None,
            interrupted: Arc::new(AtomicBool::new(false)),
            overrides: MeasureOverrides::default(),
            setup_limit_s: SETUP_LIMIT_S,
            worker_fault: None,
            lanes: vec![LaneDevice::default_lane(
                std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
            )],
            mock_gpu: None,
            sanitizer: None,
            shared_compiles: (tempfile::Builder::new()
                .prefix("kbench-compiles-")
                .tempdir())
            .ok()
            .map(Arc::new),
            shared_references: None,
            exchange: crate::reference_command::ExchangeFolders::create().map(Arc::new),
        }
    }

    /// A study's settings: its manifest's, with the command line's overrides.
    pub fn measure_settings(&self, manifest: &MeasureSettings) -> MeasureSettings {
        self.overrides.apply(manifest)
    }
}

/// Where `run_study` reports each finished case as it lands in the results file: a progress
/// bar, a line in a log, or a test's record. Called on the thread that called `run_study`.
pub trait Progress {
    /// The `done`th of the study's `total` cases to finish (cases on several GPUs finish out of
    /// plan order).
    fn case_finished(&self, done: usize, total: usize, study: &str, result: &CaseResult);
}

/// A bar counts the cases and names the one that finished last.
impl Progress for indicatif::ProgressBar {
    fn case_finished(&self, _done: usize, _total: usize, _study: &str, result: &CaseResult) {
        self.set_message(format!(
            "{} {}",
            result.variant,
            describe_params(&result.params)
        ));
        self.inc(1);
    }
}

/// A finished case in one line for a log: `[3/18] reduction: seq dtype=f32 n=777: passed (0.2 s)`,
/// with the first line of the reason for a case that failed (a skipped case's reason is in the
/// table at the end, once for all the cases it covers). A CUDA case adds its GPU's number:
/// `(0.2 s, GPU 1)`.
pub fn case_line(done: usize, total: usize, study: &str, result: &CaseResult) -> String {
    let status = result.status.name().replace('_', " ");
    let reason = match result.reason.as_deref().and_then(|r| r.lines().next()) {
        Some(r) if result.failed() => format!(": {r}"),
        _ => String::new(),
    };
    let gpu = result
        .device
        .as_ref()
        .map_or(String::new(), |d| format!(", GPU {}", d.index));
    format!(
        "[{done}/{total}] {study}: {} {}: {status}{reason} ({:.1} s{gpu})",
        result.variant,
        describe_params(&result.params),
        result.wall_s
    )
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
/// starts a new one. With several lanes (`run --devices`), each lane has its own worker on its
/// own GPU and takes the next case when idle (see `lanes`); results arrive in the order cases
/// finish, and the results file keeps them in plan order.
pub fn run_study(
    manifest: &Manifest,
    cases: &[Case],
    options: &RunOptions,
    results: &mut ResultsFile,
    progress: &(impl Progress + ?Sized),
) -> Result<StudyEnd> {
    let settings = options.measure_settings(&manifest.measure);
    let mut study = WorkerStudy::of(manifest);
    // A case's processes share its grid point's reference outputs through this folder, which
    // goes with the run (whatever way it ends).
    let shared = (options.shared_references.is_none() && settings.processes > 1)
        .then(|| SharedFolder(results.path.with_extension("references")));
    study.shared_references = match &options.shared_references {
        Some(dir) => Some(dir.path().to_path_buf()),
        None => shared.as_ref().map(|s| s.0.clone()),
    };
    let job = StudyJob {
        study,
        // With several processes, each worker takes its share of the samples.
        settings: processes::part_settings(&settings),
        save_outputs: options.save_outputs,
        results_path: results.path.clone(),
        kernels_dir: options.kernels.dir.clone(),
        fault: options.worker_fault.clone(),
        mock_gpu: options.mock_gpu.clone(),
        shared_compiles: (options.shared_compiles.as_ref()).map(|dir| dir.path().to_path_buf()),
        exchange: options.exchange.as_ref().map(|folders| folders.roots()),
    };
    let runners: Vec<_> = (options.lanes.iter())
        .map(|lane| lane_runner(options, &job, &settings, lane))
        .collect();
    let jobs: Vec<(&Case, Kind)> = (cases.iter())
        .map(|case| (case, pool_kind(manifest, case)))
        .collect();
    let total = cases.len();
    let done = std::cell::Cell::new(0);
    let finish = |result: CaseResult, results: &mut ResultsFile| -> Result<()> {
        done.set(done.get() + 1);
        progress.case_finished(done.get(), total, &manifest.study.name, &result);
        results.push(result)
    };
    // Set when opening a GPU hung: that lane takes no more CUDA cases, and the CUDA cases no lane
    // can take are skipped with this reason, not hung on in turn.
    let gpu_hung: std::cell::RefCell<Option<String>> = Default::default();
    // The lanes whose GPU hung: the file-wide `gpu_unavailable` is set once it is every lane,
    // not while other GPUs still run the CUDA cases.
    let hung_lanes = std::cell::Cell::new(0);
    // `on_done` and `on_unrun` both write the results file.
    let results = std::cell::RefCell::new(results);
    let end = run_pool(
        runners,
        jobs,
        &options.interrupted,
        |lane, case, ran| {
            let variant = &manifest.variants[case.variant];
            let mut results = results.borrow_mut();
            let mut result = case::new_result(manifest, case);
            let mut after = After::Continue;
            let (outcome, wall_s) = match ran {
                Ok(ran) => ran,
                // A bug of kbench's own, in this process: the case fails with it, the run goes on.
                Err(panic) => (Ok(WorkerOutcome::Died(format!("kbench panicked while running the case (a bug in kbench: please report it): {panic}"))), 0.0),
            };
            match outcome? {
                WorkerOutcome::Finished(report) => {
                    if let Some(device) = &report.device {
                        results.set_device(device)?;
                    }
                    if let Some(reason) = &report.gpu_unavailable {
                        results.set_gpu_unavailable(reason)?;
                    }
                    result = report.result;
                    if let (Some(device), Backend::Cuda) = (&report.device, result.backend) {
                        let lane = &options.lanes[lane];
                        result.device = Some(CaseDevice {
                            index: lane.index,
                            physical: lane.physical,
                            pci_bus_id: device.pci_bus_id.clone(),
                            host: device.host.clone(),
                        });
                    }
                }
                WorkerOutcome::Interrupted => return Ok(After::Continue),
                WorkerOutcome::TimedOut(reason) => {
                    result.status = CaseStatus::TimedOut;
                    result.reason = Some(reason);
                }
                WorkerOutcome::SetupHung(reason) => {
                    if variant.backend == Backend::Cuda {
                        let skip = setup_hung_skip(options, lane, case);
                        hung_lanes.set(hung_lanes.get() + 1);
                        if hung_lanes.get() == options.lanes.len() {
                            results.set_gpu_unavailable(&skip)?;
                        }
                        *gpu_hung.borrow_mut() = Some(skip);
                        after = After::NoMoreShared;
                    }
                    result.reason = Some(reason);
                }
                WorkerOutcome::Died(reason) => {
                    result.reason = Some(reason);
                }
            }
            result.wall_s = wall_s;
            result.overhead = result.overhead.take().map(|o| o.within(wall_s));
            finish(result, &mut results)?;
            Ok(after)
        },
        |case| {
            // No lane takes CUDA cases any more.
            let mut results = results.borrow_mut();
            let mut result = case::new_result(manifest, case);
            result.status = CaseStatus::Skipped;
            result.reason = gpu_hung.borrow().clone();
            if let Some(reason) = &result.reason {
                results.set_gpu_unavailable(reason)?;
            }
            finish(result, &mut results)
        },
    )?;
    Ok(match end {
        PoolEnd::Finished => StudyEnd::Finished,
        PoolEnd::Stopped => StudyEnd::Interrupted,
    })
}

/// A folder removed when dropped.
struct SharedFolder(PathBuf);

impl Drop for SharedFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A lane's runner for `run_pool`: runs each case it is given in each of the lane's workers
/// (`processes` of them, one by default), starting a worker where the lane has none, and
/// merges their reports into the case's (see `processes`).
fn lane_runner<'a>(
    options: &'a RunOptions,
    job: &'a StudyJob,
    settings: &'a MeasureSettings,
    lane: &'a LaneDevice,
) -> impl FnMut(&&Case, &AtomicBool) -> (Result<WorkerOutcome>, f64) + 'a {
    let k = settings.processes.max(1) as usize;
    let mut workers: Vec<Option<Worker>> = (0..k).map(|_| None).collect();
    let mut cases_run = 0;
    move |case: &&Case, halt: &AtomicBool| {
        let started = Instant::now();
        let order = processes::order(cases_run, k);
        cases_run += 1;
        let ran = processes::run_parts(&order, settings, |slot| {
            run_part(options, job, lane, &mut workers[slot], case, halt)
        });
        let mut outcome = match ran {
            Ok(outcome) => outcome,
            Err(e) => return (Err(e), started.elapsed().as_secs_f64()),
        };
        if let (Some(sanitizer), WorkerOutcome::Finished(report)) =
            (&options.sanitizer, &mut outcome)
        {
            let result = &mut report.result;
            if result.backend == Backend::Cuda && result.status != CaseStatus::Skipped {
                let check = sanitizer.check_case(
                    &options.worker_exe,
                    job,
                    lane.visible.as_deref(),
                    case,
                    options.setup_limit_s,
                    halt,
                );
                match check {
                    Some(check) => sanitize::apply(result, check),
                    // Stopped mid-check: the case is not recorded, as any interrupted case.
                    None => outcome = WorkerOutcome::Interrupted,
                }
            }
        }
        (Ok(outcome), started.elapsed().as_secs_f64())
    }
}

/// Runs `case` (or, with several processes, its part) in `worker`, starting one where there is
/// none; the worker is kept for the lane's next case unless the case broke or ended it.
fn run_part(
    options: &RunOptions,
    job: &StudyJob,
    lane: &LaneDevice,
    worker: &mut Option<Worker>,
    case: &Case,
    halt: &AtomicBool,
) -> Result<WorkerOutcome> {
    // Taken out while the case runs: should anything panic meanwhile, the worker is dropped
    // (ended) with the stack, and the lane's next case gets a new one.
    let mut running = match worker.take() {
        Some(running) => running,
        None => Worker::spawn(&options.worker_exe, job, lane.visible.as_deref())?,
    };
    let timeout_s = job.settings.timeout_s;
    let outcome = running.run_case(case, timeout_s, options.setup_limit_s, halt);
    // A kernel fault leaves the CUDA context unusable for good, and CUDA offers no way back
    // within the process; a worker killed or dead is gone: the lane's next case gets a new
    // worker.
    match &outcome {
        WorkerOutcome::Finished(report) if !report.gpu_broken => *worker = Some(running),
        WorkerOutcome::Interrupted => *worker = Some(running),
        _ => {}
    }
    Ok(outcome)
}

/// How the lanes share a case: CUDA cases run beside each other, one per GPU; a CPU case times
/// the host's CPU, so nothing else runs beside one.
fn pool_kind(manifest: &Manifest, case: &Case) -> Kind {
    match manifest.variants[case.variant].backend {
        Backend::Cuda => Kind::Shared,
        Backend::Cpu => Kind::Exclusive,
    }
}

/// Why the CUDA cases after one whose GPU hung while opening are skipped.
fn setup_hung_skip(options: &RunOptions, lane: usize, case: &Case) -> String {
    if options.lanes.len() == 1 {
        format!(
            "opening the GPU hung in case #{} (killed after {} s), so the CUDA cases after it are skipped",
            case.index, options.setup_limit_s
        )
    } else {
        format!(
            "opening GPU {} hung in case #{} (killed after {} s), so it took no more cases; the CUDA cases no other GPU took are skipped",
            options.lanes[lane].index, case.index, options.setup_limit_s
        )
    }
}
