//! One case measured in several worker processes (`[measure] processes = K`, `--processes K`).
//!
//! Why: a GPU timing carries a level fixed per process (where its buffers landed, the clocks it
//! met), which no number of samples inside that process averages out; measured on an H100, one
//! process in four read a reduction 4% faster for every case. So each lane keeps K workers, and
//! each case runs in every one of them in turn: each does the case's own set-up, warm-up and
//! check, and takes its share of the samples (`part_settings`). The order of the workers
//! alternates from case to case (`order`), so a slow drift does not always land on the same
//! one. The K reports become the case's one result (`merge`): the samples one after another,
//! the statistics recomputed over all of them by the code that makes them for one process, and
//! each process's own median kept (`Measurement::process_medians_s`). A part that fails fails
//! the case, with that part's reason and which process it was (`failed_part`, `ended_part`).
//!
//! With K = 1 nothing here touches a case: its one report is the result, as it always was.

use crate::record::{
    CaseResult, CaseStatus, ClockRecord, EnergyRecord, GpuTimer, MeasureSettings, Measurement,
    OutputCheck, StopReason,
};
use crate::run::case;
use crate::run::executor::cuda::{finish_timer_record, median_mhz};
use crate::run::worker::{WorkerOutcome, WorkerReport};
use crate::stats;

/// The fewest samples one process takes of a case measured in several.
pub const MIN_SAMPLES_PER_PROCESS: u32 = 2;

/// What each of the `settings.processes` workers measures a case with: its share of the
/// samples (`min_samples` and `max_samples` divided by K, rounded up, at least
/// `MIN_SAMPLES_PER_PROCESS`) and of the time budget (`max_time_s` / K). The time limit
/// (`timeout_s`) stays each process's own: each part does the whole set-up and warm-up.
pub fn part_settings(settings: &MeasureSettings) -> MeasureSettings {
    let k = settings.processes.max(1);
    if k == 1 {
        return settings.clone();
    }
    let share = |samples: u32| samples.div_ceil(k).max(MIN_SAMPLES_PER_PROCESS);
    MeasureSettings {
        min_samples: share(settings.min_samples),
        max_samples: share(settings.max_samples),
        max_time_s: settings.max_time_s / f64::from(k),
        ..settings.clone()
    }
}

/// The order in which a lane's `k` workers run its `case_number`th case (counted from 0 on the
/// lane): 0..k, then k..0, then 0..k again, so the first and last place alternate.
pub fn order(case_number: usize, k: usize) -> Vec<usize> {
    if case_number % 2 == 0 {
        (0..k).collect()
    } else {
        (0..k).rev().collect()
    }
}

/// `process 2 of 3`: the `part`th (from 0) of `k` in the order they ran the case.
fn which(part: usize, k: usize) -> String {
    format!("process {} of {k}", part + 1)
}

/// Whether a part's report lets the case go on to its next process: only a passed one does; a
/// failed or skipped part is the case's result (see `failed_part`).
pub fn part_passed(report: &WorkerReport) -> bool {
    report.result.status == CaseStatus::Passed
}

/// The case's result when its `part`th process (of `k`) did not pass: that part's result, its
/// reason saying which process it was. A skip is kept as it is (every process would skip it
/// alike, and the tables group cases by their skip reason).
pub fn failed_part(mut report: WorkerReport, part: usize, k: usize) -> WorkerReport {
    if k > 1 && report.result.status != CaseStatus::Skipped {
        let result = &mut report.result;
        result.reason = Some(format!(
            "in {}: {}",
            which(part, k),
            result.reason.as_deref().unwrap_or("no reason given")
        ));
    }
    report
}

/// The case's outcome when its `part`th process (of `k`) ended without a report (it died, hung
/// or timed out, or the run was interrupted): the same outcome, its reason saying which process.
pub fn ended_part(outcome: WorkerOutcome, part: usize, k: usize) -> WorkerOutcome {
    if k == 1 {
        return outcome;
    }
    let named = |reason: String| format!("in {}: {reason}", which(part, k));
    match outcome {
        WorkerOutcome::TimedOut(reason) => WorkerOutcome::TimedOut(named(reason)),
        WorkerOutcome::SetupHung(reason) => WorkerOutcome::SetupHung(named(reason)),
        WorkerOutcome::Died(reason) => WorkerOutcome::Died(named(reason)),
        other => other,
    }
}

/// The one report of a case whose every part passed, in the order they ran; `settings` are the
/// study's whole settings (not a part's). A single part is returned as it is.
///
/// The result is the first part's (its parameters, bytes, facts), with:
/// - the measurement merged (`merge_measurements`) and the summary, throughput and % of peak
///   recomputed from all the samples by the code that computes them for one process;
/// - each output's check from the part whose answer was farthest off (largest relative error);
/// - the files `--save-outputs` wrote (each process writes the same names), once each.
///
/// The report's device is the first part's (every part ran on the lane's GPU).
pub fn merge(mut parts: Vec<WorkerReport>, settings: &MeasureSettings) -> WorkerReport {
    if parts.len() <= 1 {
        return parts.pop().expect("a case has at least one part");
    }
    let measurements: Vec<&Measurement> = (parts.iter())
        .filter_map(|p| p.result.measurement.as_ref())
        .collect();
    let merged =
        (measurements.len() == parts.len()).then(|| merge_measurements(&measurements, settings));
    let outputs = worst_outputs(&parts);
    let saved_files = saved_files_once(&parts);
    let gpu_broken = parts.iter().any(|p| p.gpu_broken);
    let gpu_unavailable = parts.iter().find_map(|p| p.gpu_unavailable.clone());
    let first = parts.swap_remove(0);
    let mut result = first.result;
    result.outputs = outputs;
    result.saved_files = saved_files;
    if let Some(measurement) = merged {
        summarize(&mut result, measurement, first.device.as_ref());
    }
    WorkerReport {
        result,
        device: first.device,
        gpu_unavailable,
        gpu_broken,
    }
}

/// The merged measurement's statistics and what rests on them, as `case::summarize` and
/// `CaseResult::judge_peak` make them for one process; a time that is no number makes the
/// case an error, as in one process.
fn summarize(
    result: &mut CaseResult,
    measurement: Measurement,
    device: Option<&crate::record::DeviceFingerprint>,
) {
    let summary = stats::summarize(&measurement.samples_s);
    result.gbytes_per_s = Some(result.bytes_moved as f64 / summary.median_s / 1e9);
    result.gflops_per_s = Some(result.flops as f64 / summary.median_s / 1e9);
    result.summary = Some(summary);
    result.measurement = Some(measurement);
    if let (Some(device), Some(_)) = (device, result.peak_kind) {
        result.judge_peak(device);
    }
    if let Some(why) = case::non_finite_time(result) {
        (result.status, result.reason) = (CaseStatus::Error, Some(why));
    }
}

/// The parts' measurements as one:
/// - `samples_s`: every part's, one part after another, in the order they ran;
/// - `process_medians_s`: each part's own median;
/// - `warmup_runs`, `throttled_discarded`: summed over the parts;
/// - `stop_reason`: the one that stopped least well (time limit, then budget, then the
///   sample cap, then converged);
/// - `gpu_timer`: merged by `merge_timers` where every part has one.
pub fn merge_measurements(parts: &[&Measurement], settings: &MeasureSettings) -> Measurement {
    let samples_s: Vec<f64> = (parts.iter())
        .flat_map(|m| m.samples_s.iter().copied())
        .collect();
    let process_medians_s = (parts.iter())
        .map(|m| median_or_nan(&m.samples_s))
        .collect();
    let timers: Vec<&GpuTimer> = parts.iter().filter_map(|m| m.gpu_timer.as_ref()).collect();
    let gpu_timer =
        (timers.len() == parts.len()).then(|| merge_timers(&timers, &samples_s, settings));
    Measurement {
        warmup_runs: parts.iter().map(|m| m.warmup_runs).sum(),
        stop_reason: (parts.iter().map(|m| m.stop_reason))
            .max_by_key(|r| stop_rank(*r))
            .expect("a case has at least one part"),
        throttled_discarded: parts.iter().map(|m| m.throttled_discarded).sum(),
        gpu_timer,
        samples_s,
        process_medians_s,
    }
}

/// A part's median: NaN where it has no sample (a passed part always has some).
fn median_or_nan(samples_s: &[f64]) -> f64 {
    if samples_s.is_empty() {
        f64::NAN
    } else {
        stats::summarize(samples_s).median_s
    }
}

/// How badly a part stopped: the merged measurement keeps the worst.
fn stop_rank(reason: StopReason) -> u8 {
    match reason {
        StopReason::Converged => 0,
        StopReason::MaxSamples => 1,
        StopReason::Budget => 2,
        StopReason::TimedOut => 3,
    }
}

/// The parts' timer records as one: how the samples were taken (method, runs per sample, cold
/// L2) is the first part's; CUPTI's and the profiler's samples are concatenated in the parts'
/// order and judged against the events' samples again over all of them (`finish_timer_record`,
/// the code that judges one process's); the clocks, energy windows and persisting-L2 resets
/// are merged by `merge_clocks`, `merge_energy`, and "reset in every part".
fn merge_timers(parts: &[&GpuTimer], samples_s: &[f64], settings: &MeasureSettings) -> GpuTimer {
    let first = parts[0];
    let mut timer = GpuTimer::new(first.method, first.runs_per_sample, first.cold_l2);
    timer.unblocked_reason = parts.iter().find_map(|t| t.unblocked_reason.clone());
    timer.profiler_samples_s = (parts.iter())
        .flat_map(|t| t.profiler_samples_s.iter().copied())
        .collect();
    timer.profiler_kernels_per_run = parts
        .iter()
        .filter_map(|t| t.profiler_kernels_per_run)
        .max();
    timer.profiler_skipped = parts.iter().find_map(|t| t.profiler_skipped.clone());
    timer.clocks = merge_clocks(parts.iter().filter_map(|t| t.clocks.as_ref()).collect());
    timer.energy = merge_energy(parts.iter().filter_map(|t| t.energy.as_ref()).collect());
    if timer.energy.is_none() {
        timer.energy_skipped = parts.iter().find_map(|t| t.energy_skipped.clone());
    }
    let resets: Vec<bool> = parts.iter().filter_map(|t| t.persisting_l2_reset).collect();
    timer.persisting_l2_reset = (!resets.is_empty()).then(|| resets.iter().all(|&r| r));
    timer.persisting_l2_reset_error =
        (parts.iter()).find_map(|t| t.persisting_l2_reset_error.clone());
    timer.fresh_input_copies = parts.iter().map(|t| t.fresh_input_copies).sum();
    let cupti_s: Vec<f64> = (parts.iter())
        .flat_map(|t| t.cupti_samples_s.iter().copied())
        .collect();
    finish_timer_record(&mut timer, samples_s, cupti_s, settings);
    timer
}

/// The parts' clock records as one: the lowest and highest SM clock, every throttle reason,
/// the median of the parts' medians and the lowest memory clock; None where no part has one.
fn merge_clocks(parts: Vec<&ClockRecord>) -> Option<ClockRecord> {
    let mut reasons: Vec<String> = (parts.iter())
        .flat_map(|c| c.throttle_reasons.iter().cloned())
        .collect();
    reasons.sort();
    reasons.dedup();
    let medians = |of: fn(&ClockRecord) -> Option<u32>| -> Option<u32> {
        median_mhz(&parts.iter().filter_map(|c| of(c)).collect::<Vec<_>>())
    };
    Some(ClockRecord {
        sm_clock_min_mhz: parts.iter().map(|c| c.sm_clock_min_mhz).min()?,
        sm_clock_max_mhz: parts.iter().map(|c| c.sm_clock_max_mhz).max()?,
        throttle_reasons: reasons,
        sm_clock_median_mhz: medians(|c| c.sm_clock_median_mhz),
        memory_clock_median_mhz: medians(|c| c.memory_clock_median_mhz),
        memory_clock_min_mhz: parts.iter().filter_map(|c| c.memory_clock_min_mhz).min(),
    })
}

/// The parts' energy windows as one: their runs, time and energy summed, so the power and
/// joules per run are over every window; None where no part has one.
fn merge_energy(parts: Vec<&EnergyRecord>) -> Option<EnergyRecord> {
    if parts.is_empty() {
        return None;
    }
    Some(EnergyRecord::of(
        parts.iter().map(|e| e.runs).sum(),
        parts.iter().map(|e| e.energy_mj).sum(),
        parts.iter().map(|e| e.window_s).sum(),
    ))
}

/// Each output's check from the part whose answer was farthest off it (the largest relative
/// error, NaN the largest): a reader of one check sees the worst any process gave.
fn worst_outputs(parts: &[WorkerReport]) -> Vec<OutputCheck> {
    let mut worst = parts[0].result.outputs.clone();
    for part in &parts[1..] {
        for (kept, other) in worst.iter_mut().zip(&part.result.outputs) {
            let kept_err = error_rank(kept);
            if error_rank(other).total_cmp(&kept_err).is_gt() {
                *kept = other.clone();
            }
        }
    }
    worst
}

/// An output's relative error, NaN counted above every number.
fn error_rank(check: &OutputCheck) -> f64 {
    let err = check.accuracy.max_rel_err;
    if err.is_nan() {
        f64::INFINITY
    } else {
        err
    }
}

/// Every file the parts saved, once each, in the order first saved.
fn saved_files_once(parts: &[WorkerReport]) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for file in parts.iter().flat_map(|p| &p.result.saved_files) {
        if !files.contains(file) {
            files.push(file.clone());
        }
    }
    files
}
