//! One case measured in several worker processes (`[measure] processes = K`, `--processes K`).
//!
//! Why: a GPU timing carries a level fixed per process (its cause is not known: the buffers'
//! placement was measured and ruled out), which no number of samples inside that process
//! averages out; measured on an H100, one process in four read a reduction 4% faster for every
//! case. So each lane keeps K workers, and
//! each case runs in every one of them in turn: each does the case's own set-up, warm-up and
//! check, and takes its share of the samples (`part_settings`). The order of the workers
//! alternates from case to case (`order`), so a slow drift does not always land on the same
//! one. The K reports become the case's one result (`merge`): the samples one after another,
//! the statistics recomputed over all of them by the code that makes them for one process, and
//! each process's own median kept (`Measurement::process_medians_s`). A part that fails fails
//! the case, with that part's reason and which process it was (`failed_part`, `ended_part`).
//!
//! With K = 1 nothing here touches a case: its one report is the result, as it always was.

use anyhow::Result;

use crate::record::{
    CaseResult, CaseStatus, ClockRecord, EnergyRecord, GpuTimer, MeasureSettings, Measurement,
    OutputCheck, Overhead, StopReason,
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
    if case_number.is_multiple_of(2) {
        (0..k).collect()
    } else {
        (0..k).rev().collect()
    }
}

/// Runs a case in each of the lane's workers, in `order` (see `order`): `run_in(slot)` runs it
/// in the `slot`th. Stops at the first part that does not pass, which is the case's outcome
/// (`failed_part`, `ended_part`); else the parts' reports merged (`merge`). An error (a worker
/// that cannot be started) is the case's, as with one process.
pub fn run_parts(
    order: &[usize],
    settings: &MeasureSettings,
    mut run_in: impl FnMut(usize) -> Result<WorkerOutcome>,
) -> Result<WorkerOutcome> {
    let k = order.len();
    let mut parts = Vec::new();
    for (part, &slot) in order.iter().enumerate() {
        match run_in(slot)? {
            WorkerOutcome::Finished(report) if part_passed(&report) => parts.push(*report),
            WorkerOutcome::Finished(report) if part > 0 => {
                let failed = failed_part(skip_after_pass(*report), part, k);
                return Ok(WorkerOutcome::Finished(Box::new(failed)));
            }
            WorkerOutcome::Finished(report) => {
                let failed = failed_part(*report, part, k);
                return Ok(WorkerOutcome::Finished(Box::new(failed)));
            }
            ended => return Ok(ended_part(ended, part, k)),
        }
    }
    Ok(WorkerOutcome::Finished(Box::new(merge(parts, settings))))
}

/// `process 2 of 3`: the `part`th (from 0) of `k` in the order they ran the case.
fn which(part: usize, k: usize) -> String {
    format!("process {} of {k}", part + 1)
}

/// Whether a part's report lets the case go on to its next process: only a passed one does; a
/// failed or skipped part is the case's result (see `failed_part`).
fn part_passed(report: &WorkerReport) -> bool {
    report.result.status == CaseStatus::Passed
}

/// A part skipped after an earlier part measured the case (where the memory the other
/// processes' idle CUDA contexts hold left too little for it): an error, not a skip, for the case
/// can run and did.
fn skip_after_pass(mut report: WorkerReport) -> WorkerReport {
    let result = &mut report.result;
    if result.status == CaseStatus::Skipped {
        result.status = CaseStatus::Error;
        result.reason = Some(format!(
            "skipped after an earlier process measured the case (the other processes' CUDA contexts hold device memory): {}",
            result.reason.as_deref().unwrap_or("no reason given")
        ));
    }
    report
}

/// The case's result when its `part`th process (of `k`) did not pass: that part's result, its
/// reason saying which process it was. A skip in the first part is kept as it is (every process
/// would skip it alike, and the tables group cases by their skip reason).
fn failed_part(mut report: WorkerReport, part: usize, k: usize) -> WorkerReport {
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
fn ended_part(outcome: WorkerOutcome, part: usize, k: usize) -> WorkerOutcome {
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
/// The result is the first part's (its parameters, bytes, facts: a kernel's step latency is the
/// first process's), with:
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
    let overhead = (parts.iter())
        .filter_map(|p| p.result.overhead.as_ref())
        .fold(None, |sum: Option<Overhead>, o| {
            Some(sum.map_or(o.clone(), |s| s.plus(o)))
        });
    let first = parts.swap_remove(0);
    let mut result = first.result;
    result.overhead = overhead;
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
    if measurement.samples_s.is_empty() {
        // No part passes without a sample; kept as it is, should one ever.
        result.measurement = Some(measurement);
        return;
    }
    let summary = stats::summarize(&measurement.samples_s);
    result.gbytes_per_s = Some(result.bytes_moved as f64 / summary.median_s / 1e9);
    result.gflops_per_s = Some(result.flops as f64 / summary.median_s / 1e9);
    result.elements_per_s =
        (result.elements > 0).then(|| result.elements as f64 / summary.median_s);
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
/// - `samples_s`: every part's, one part after another, in the order they ran, each part cut
///   to the fewest samples any part took (its first ones, and its CUPTI samples with them where
///   they pair with the samples; traced runs, in kernel scope, are cut apart: `merge_timers`): a
///   process that sampled longer (a noisy one does, until its interval converges) would
///   otherwise pull the median to its own level, which is what the processes are there to
///   average out;
/// - `process_medians_s`: each part's own median, over the samples kept;
/// - `warmup_runs`, `throttled_discarded`: summed over the parts;
/// - `stop_reason`: the one that stopped least well (time limit, then budget, then the
///   sample cap, then converged);
/// - `gpu_timer`: merged by `merge_timers` where every part has one.
pub fn merge_measurements(parts: &[&Measurement], settings: &MeasureSettings) -> Measurement {
    let kept = (parts.iter()).map(|m| m.samples_s.len()).min().unwrap_or(0);
    let equal: Vec<Measurement> = parts.iter().map(|m| first_samples(m, kept)).collect();
    let parts: Vec<&Measurement> = equal.iter().collect();
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

/// `m` with its first `kept` samples alone, and as many of its CUPTI samples where they pair
/// one to one with the samples.
fn first_samples(m: &Measurement, kept: usize) -> Measurement {
    let mut m = m.clone();
    if let Some(timer) = m.gpu_timer.as_mut() {
        if timer.traced_events_s.is_empty() && timer.cupti_samples_s.len() == m.samples_s.len() {
            timer.cupti_samples_s.truncate(kept);
        }
    }
    m.samples_s.truncate(kept);
    m
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
/// L2) is the first part's; CUPTI's and the profiler's samples (and the traced runs:
/// `merge_traced`) are concatenated in the parts' order and judged against the events'
/// samples again over all of them (`finish_timer_record`,
/// the code that judges one process's); the clocks, energy windows and persisting-L2 resets
/// are merged by `merge_clocks`, `merge_energy`, and "reset in every part".
fn merge_timers(parts: &[&GpuTimer], samples_s: &[f64], settings: &MeasureSettings) -> GpuTimer {
    let first = parts[0];
    let mut timer = GpuTimer::new(first.method, first.runs_per_sample, first.cold_l2);
    timer.unblocked_reason = parts.iter().find_map(|t| t.unblocked_reason.clone());
    // Replayed only if every process replayed it; else the first refusal says why not.
    timer.launched_as_graph = parts.iter().all(|t| t.launched_as_graph);
    timer.graph_refused = parts.iter().find_map(|t| t.graph_refused.clone());
    timer.profiler_samples_s = (parts.iter())
        .flat_map(|t| t.profiler_samples_s.iter().copied())
        .collect();
    timer.profiler_kernels_per_run = parts
        .iter()
        .filter_map(|t| t.profiler_kernels_per_run)
        .max();
    // Skipped only where no part profiled: a part's skip beside another's samples is not the
    // case's.
    if timer.profiler_samples_s.is_empty() {
        timer.profiler_skipped = parts.iter().find_map(|t| t.profiler_skipped.clone());
    }
    timer.clocks = merge_clocks(parts.iter().filter_map(|t| t.clocks.as_ref()).collect());
    let windows: Vec<&EnergyRecord> = parts.iter().filter_map(|t| t.energy.as_ref()).collect();
    let skipped = parts.iter().find_map(|t| t.energy_skipped.clone());
    timer.energy_skipped = match (windows.len(), skipped) {
        (0, skipped) => skipped,
        // Some processes had a window, others did not: the record covers those alone.
        (n, Some(why)) if n < parts.len() => Some(format!(
            "the energy record covers {n} of the {} processes; another's window was skipped: {why}",
            parts.len()
        )),
        _ => None,
    };
    timer.energy = merge_energy(windows);
    let resets: Vec<bool> = parts.iter().filter_map(|t| t.persisting_l2_reset).collect();
    timer.persisting_l2_reset = (!resets.is_empty()).then(|| resets.iter().all(|&r| r));
    timer.persisting_l2_reset_error =
        (parts.iter()).find_map(|t| t.persisting_l2_reset_error.clone());
    timer.fresh_input_copies = parts.iter().map(|t| t.fresh_input_copies).sum();
    let (traced_events_s, cupti_s) = merge_traced(parts);
    timer.traced_events_s = traced_events_s;
    if timer.traced_events_s.is_empty() {
        timer.traced_skipped = parts.iter().find_map(|t| t.traced_skipped.clone());
    }
    finish_timer_record(&mut timer, samples_s, cupti_s, settings);
    timer
}

/// The parts' traced runs (kernel scope) and CUPTI samples, concatenated in the parts' order:
/// where every part has traced runs, each cut to the fewest any part took (with its CUPTI spans,
/// where they pair with its runs one to one), so that each process counts equally, as with the
/// samples.
fn merge_traced(parts: &[&GpuTimer]) -> (Vec<f64>, Vec<f64>) {
    let kept = (parts.iter())
        .map(|t| t.traced_events_s.len())
        .min()
        .unwrap_or(0);
    let mut traced_events_s = Vec::new();
    let mut cupti_s = Vec::new();
    for t in parts {
        let paired = t.cupti_samples_s.len() == t.traced_events_s.len();
        if kept > 0 && paired {
            traced_events_s.extend(&t.traced_events_s[..kept]);
            cupti_s.extend(&t.cupti_samples_s[..kept]);
        } else {
            traced_events_s.extend(&t.traced_events_s);
            cupti_s.extend(&t.cupti_samples_s);
        }
    }
    (traced_events_s, cupti_s)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::TimerMethod;
    use crate::vocab::Tolerance;
    use std::cell::RefCell;
    use std::path::Path;

    fn settings(processes: u32) -> MeasureSettings {
        MeasureSettings {
            processes,
            ..MeasureSettings::default()
        }
    }

    #[test]
    fn each_process_takes_its_share_of_the_samples_and_the_budget() {
        let whole = MeasureSettings {
            min_samples: 10,
            max_samples: 200,
            max_time_s: 3.0,
            processes: 3,
            ..MeasureSettings::default()
        };
        let part = part_settings(&whole);
        assert_eq!((part.min_samples, part.max_samples), (4, 67));
        assert!((part.max_time_s - 1.0).abs() < 1e-12);
        assert_eq!(part.timeout_s, whole.timeout_s, "each part's own limit");
        assert_eq!(part.warmup, whole.warmup, "each part warms up");
        // At least 2 samples a process, however few the study asks for.
        let few = MeasureSettings {
            min_samples: 1,
            max_samples: 3,
            processes: 4,
            ..MeasureSettings::default()
        };
        let part = part_settings(&few);
        assert_eq!((part.min_samples, part.max_samples), (2, 2));
        // One process: the settings as they are, a single sample included.
        let one = MeasureSettings {
            min_samples: 1,
            max_samples: 1,
            ..MeasureSettings::default()
        };
        assert_eq!(part_settings(&one), one);
    }

    #[test]
    fn the_order_of_the_workers_alternates_from_case_to_case() {
        assert_eq!(order(0, 3), [0, 1, 2]);
        assert_eq!(order(1, 3), [2, 1, 0]);
        assert_eq!(order(2, 3), [0, 1, 2]);
        assert_eq!(order(7, 1), [0]);
    }

    /// A passed report of a CPU case of 4000 bytes with these samples.
    fn report(samples_s: &[f64], max_rel_err: f64) -> WorkerReport {
        let text = "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [1000]\n\
                    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";
        let manifest = crate::manifest::parse(Path::new("t.toml"), text).unwrap();
        let case = &crate::plan::expand(&manifest).unwrap()[0];
        let mut result = case::new_result(&manifest, case);
        result.status = CaseStatus::Passed;
        result.bytes_moved = 4000;
        result.flops = 1000;
        let mut accuracy = crate::verify::compare(&[1.0], &[1.0], Tolerance { rel: 0.1, abs: 0.0 });
        accuracy.max_rel_err = max_rel_err;
        result.outputs = vec![OutputCheck {
            name: "sum".into(),
            length: 1,
            accuracy,
        }];
        result.saved_files = vec!["case-0000.npy".into()];
        result.summary = (!samples_s.is_empty()).then(|| stats::summarize(samples_s));
        result.measurement = Some(Measurement {
            samples_s: samples_s.to_vec(),
            warmup_runs: 3,
            stop_reason: StopReason::Converged,
            throttled_discarded: 1,
            gpu_timer: None,
            process_medians_s: Vec::new(),
        });
        WorkerReport {
            result,
            device: None,
            gpu_unavailable: None,
            gpu_broken: false,
        }
    }

    fn measurement(report: &WorkerReport) -> &Measurement {
        report.result.measurement.as_ref().unwrap()
    }

    #[test]
    fn the_parts_merge_into_one_result_with_each_process_median() {
        let mut parts = vec![
            report(&[1.0e-6, 1.2e-6], 1e-7),
            report(&[2.1e-6, 2.1e-6, 9.0e-6], 3e-7),
            report(&[3.0e-6, 3.4e-6], 2e-7),
        ];
        parts[1].result.measurement.as_mut().unwrap().stop_reason = StopReason::Budget;
        parts[2].result.saved_files.push("case-0000-b.npy".into());
        let merged = merge(parts, &settings(3));
        let m = measurement(&merged);
        // The second process's third sample goes: each counts with the two all of them took.
        let all_s = [1.0e-6, 1.2e-6, 2.1e-6, 2.1e-6, 3.0e-6, 3.4e-6];
        assert_eq!(m.samples_s, all_s, "in the order taken");
        assert_eq!(m.process_medians_s, [1.1e-6, 2.1e-6, 3.2e-6]);
        let summary = merged.result.summary.as_ref().unwrap();
        assert_eq!(*summary, stats::summarize(&all_s), "over every sample");
        assert_eq!(summary.median_s, 2.1e-6);
        assert_eq!(merged.result.gbytes_per_s, Some(4000.0 / 2.1e-6 / 1e9));
        assert_eq!(merged.result.gflops_per_s, Some(1000.0 / 2.1e-6 / 1e9));
        assert_eq!((m.warmup_runs, m.throttled_discarded), (9, 3));
        assert_eq!(m.stop_reason, StopReason::Budget, "the worst");
        assert_eq!(merged.result.outputs[0].accuracy.max_rel_err, 3e-7);
        assert_eq!(
            merged.result.saved_files,
            ["case-0000.npy", "case-0000-b.npy"]
        );
        assert_eq!(merged.result.status, CaseStatus::Passed);
    }

    #[test]
    fn traced_runs_are_cut_to_the_fewest_any_process_took_with_their_spans() {
        let traced = |runs: &[f64], spans: &[f64]| {
            let mut t = GpuTimer::new(TimerMethod::BlockedEvents, 1, true);
            t.traced_events_s = runs.to_vec();
            t.cupti_samples_s = spans.to_vec();
            t
        };
        let a = traced(&[1.0, 1.1, 1.2, 1.3], &[0.9, 1.0, 1.1, 1.2]);
        let b = traced(&[2.0, 2.1], &[1.9, 2.0]);
        let (events, spans) = merge_traced(&[&a, &b]);
        assert_eq!(events, [1.0, 1.1, 2.0, 2.1]);
        assert_eq!(spans, [0.9, 1.0, 1.9, 2.0]);
        // Samples' own CUPTI spans (transfers, program scope): no traced runs, all kept.
        let c = traced(&[], &[3.0, 3.1, 3.2]);
        let (events, spans) = merge_traced(&[&c, &c]);
        assert!(events.is_empty());
        assert_eq!(spans.len(), 6);
    }

    fn timer(cupti_s: &[f64], energy: (u32, u64, f64), sm_mhz: (u32, u32, u32)) -> GpuTimer {
        let mut timer = GpuTimer::new(TimerMethod::BlockedEvents, 1, true);
        timer.cupti_samples_s = cupti_s.to_vec();
        timer.cupti_vs_events = Some(99.0);
        timer.energy = Some(EnergyRecord::of(energy.0, energy.1, energy.2));
        timer.clocks = Some(ClockRecord {
            sm_clock_min_mhz: sm_mhz.0,
            sm_clock_max_mhz: sm_mhz.2,
            throttle_reasons: vec![format!("reason{}", sm_mhz.0)],
            sm_clock_median_mhz: Some(sm_mhz.1),
            memory_clock_median_mhz: None,
            memory_clock_min_mhz: None,
        });
        timer.persisting_l2_reset = Some(true);
        timer.fresh_input_copies = 5;
        timer
    }

    #[test]
    fn the_timers_clocks_and_energy_of_the_parts_merge() {
        let mut parts = vec![
            report(&[1.0e-3, 1.0e-3], 0.0),
            report(&[2.0e-3, 2.0e-3], 0.0),
        ];
        let timers = [
            timer(&[1.1e-3, 1.1e-3], (10, 100, 0.1), (1700, 1750, 1800)),
            timer(&[2.2e-3, 2.2e-3], (30, 300, 0.2), (1600, 1780, 1900)),
        ];
        for (part, t) in parts.iter_mut().zip(timers) {
            part.result.measurement.as_mut().unwrap().gpu_timer = Some(t);
        }
        parts[1]
            .result
            .measurement
            .as_mut()
            .unwrap()
            .gpu_timer
            .as_mut()
            .unwrap()
            .persisting_l2_reset = Some(false);
        let merged = merge(parts, &settings(2));
        let t = measurement(&merged).gpu_timer.clone().unwrap();
        assert_eq!(t.cupti_samples_s, [1.1e-3, 1.1e-3, 2.2e-3, 2.2e-3]);
        // Judged again over all the samples: events' median 1.5 ms, CUPTI's 1.65 ms.
        let cupti_vs_events = t.cupti_vs_events.unwrap();
        assert!((cupti_vs_events - 0.1).abs() < 1e-9, "{cupti_vs_events}");
        assert!(t.timers_disagree, "10% apart, past the 2% tolerance");
        assert_eq!(t.energy, Some(EnergyRecord::of(40, 400, 0.1 + 0.2)));
        let clocks = t.clocks.unwrap();
        assert_eq!(
            (clocks.sm_clock_min_mhz, clocks.sm_clock_max_mhz),
            (1600, 1900)
        );
        assert_eq!(clocks.throttle_reasons, ["reason1600", "reason1700"]);
        assert_eq!(clocks.sm_clock_median_mhz, Some(1780));
        assert_eq!(
            t.persisting_l2_reset,
            Some(false),
            "not reset in every part"
        );
        assert_eq!(t.fresh_input_copies, 10);
    }

    /// `run_parts` over scripted parts: each slot's outcome, and the slots it ran.
    fn run_scripted(
        order: &[usize],
        outcome: impl Fn(usize) -> WorkerOutcome,
    ) -> (WorkerOutcome, Vec<usize>) {
        let ran = RefCell::new(Vec::new());
        let settings = settings(order.len() as u32);
        let outcome = run_parts(order, &settings, |slot| {
            ran.borrow_mut().push(slot);
            Ok(outcome(slot))
        })
        .unwrap();
        (outcome, ran.into_inner())
    }

    fn finished(report: WorkerReport) -> WorkerOutcome {
        WorkerOutcome::Finished(Box::new(report))
    }

    fn result_of(outcome: WorkerOutcome) -> CaseResult {
        match outcome {
            WorkerOutcome::Finished(report) => report.result,
            _ => panic!("the case should have a report"),
        }
    }

    #[test]
    fn a_part_that_fails_fails_the_case_with_its_reason_and_process() {
        let wrong = |slot: usize| {
            let mut part = report(&[1e-6, 1e-6], 0.0);
            if slot == 1 {
                part.result.status = CaseStatus::AccuracyFailed;
                part.result.reason = Some("wrong answer: `sum`".into());
            }
            finished(part)
        };
        let (outcome, ran) = run_scripted(&[0, 1, 2], wrong);
        let result = result_of(outcome);
        assert_eq!(result.status, CaseStatus::AccuracyFailed);
        assert_eq!(
            result.reason.as_deref(),
            Some("in process 2 of 3: wrong answer: `sum`")
        );
        assert_eq!(ran, [0, 1], "no part runs after one fails");
        // Run in the other order, the failing worker is the second again, from the end.
        let (outcome, ran) = run_scripted(&[2, 1, 0], wrong);
        assert_eq!(ran, [2, 1]);
        assert!(result_of(outcome)
            .reason
            .unwrap()
            .starts_with("in process 2 of 3"));

        let died = |slot: usize| match slot {
            2 => WorkerOutcome::Died("the worker process died: SIGSEGV".into()),
            _ => finished(report(&[1e-6, 1e-6], 0.0)),
        };
        match run_scripted(&[0, 1, 2], died).0 {
            WorkerOutcome::Died(reason) => assert_eq!(
                reason,
                "in process 3 of 3: the worker process died: SIGSEGV"
            ),
            _ => panic!("a dead part costs the case"),
        }

        let skipped = |_| {
            let mut part = report(&[], 0.0);
            part.result.status = CaseStatus::Skipped;
            part.result.reason = Some("needs 90 GiB".into());
            finished(part)
        };
        let (outcome, ran) = run_scripted(&[0, 1], skipped);
        let result = result_of(outcome);
        assert_eq!(result.status, CaseStatus::Skipped);
        assert_eq!(result.reason.as_deref(), Some("needs 90 GiB"), "as it was");
        assert_eq!(ran, [0]);

        // Skipped in a later process, after the first measured it: an error, not a skip.
        let skipped_second = |slot: usize| match slot {
            0 => finished(report(&[1e-6, 1e-6], 0.0)),
            _ => skipped(slot),
        };
        let (outcome, ran) = run_scripted(&[0, 1], skipped_second);
        let result = result_of(outcome);
        assert_eq!(result.status, CaseStatus::Error);
        let reason = result.reason.unwrap();
        assert!(
            reason.starts_with("in process 2 of 2: skipped after an earlier process measured")
                && reason.ends_with("needs 90 GiB"),
            "{reason}"
        );
        assert_eq!(ran, [0, 1]);
    }

    #[test]
    fn every_process_counts_with_as_many_samples_as_the_fewest_took() {
        // A noisy process that sampled until its interval converged does not outweigh the
        // quiet ones: without the cut, the median would be its level (5e-6).
        let parts = vec![
            report(&[1.0e-6, 1.1e-6, 1.2e-6], 0.0),
            report(
                &[
                    5.0e-6, 5.1e-6, 5.2e-6, 5.3e-6, 5.4e-6, 5.5e-6, 5.6e-6, 5.7e-6,
                ],
                0.0,
            ),
            report(&[1.3e-6, 1.4e-6, 1.5e-6], 0.0),
        ];
        let merged = merge(parts, &settings(3));
        let m = measurement(&merged);
        assert_eq!(m.samples_s.len(), 9);
        assert_eq!(m.process_medians_s, [1.1e-6, 5.1e-6, 1.4e-6]);
        assert_eq!(merged.result.summary.unwrap().median_s, 1.4e-6);
    }

    #[test]
    fn one_process_gives_its_report_as_it_is() {
        let part = report(&[1e-6, 2e-6, 4e-6], 0.0);
        let sent = serde_json::to_string(&part.result).unwrap();
        let (outcome, _) = run_scripted(&[0], |_| finished(report(&[1e-6, 2e-6, 4e-6], 0.0)));
        let result = result_of(outcome);
        assert_eq!(serde_json::to_string(&result).unwrap(), sent);
        assert!(!sent.contains("process_medians_s"));
        let (outcome, ran) = run_scripted(&[0, 1], |_| finished(report(&[1e-6, 2e-6], 0.0)));
        assert_eq!(ran, [0, 1]);
        let merged = serde_json::to_string(&result_of(outcome)).unwrap();
        assert!(merged.contains("\"process_medians_s\""), "{merged}");
    }
}
