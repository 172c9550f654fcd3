//! The history of a study: every results file a CI job kept, in run order (by the time each
//! run started), and each case's series of medians judged for change points
//! (`crate::changepoint`), as Apache Otava and MongoDB judge theirs and PyTorch's HUD gates.
//!
//! A case's verdict is about where its series stands now: the last change point, confirmed once
//! `confirm_runs` runs have come after it (a regression or an improvement); a last run or two
//! that stand apart from the level before them but are not yet confirmed (suspected); no change
//! (stable); or too few runs to tell (insufficient data). Only a confirmed regression fails the
//! gate. Older change points are listed; `--last N` judges the last N runs alone, so a
//! regression that was accepted ages out of the window.
//!
//! A change that begins at the first run on another machine (another host or boot, from the
//! results' environment) and whose runs all ran on that machine is put down to the machine: the
//! series cannot tell a code change from the move, so the verdict says so and asks for a new
//! baseline there instead of failing the gate. Runs that each land on a machine of their own
//! (ephemeral CI runners) never make such a block, and their changes are judged as any other.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::changepoint::{self, ChangePointSettings};
use crate::record::{CaseStatus, ResultsDoc};
use crate::vocab::describe_params;

#[derive(Debug, Clone, Copy)]
pub struct HistorySettings {
    /// Runs after a change before it counts as confirmed.
    pub confirm_runs: usize,
    /// Runs a case needs before it is judged at all.
    pub min_runs: usize,
    /// The smallest relative change of the median that counts (0.03 = 3%).
    pub min_effect: f64,
    /// The change-point t-test's p-value threshold.
    pub p_value: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HistoryVerdict {
    /// Slower since a change point that has held for `confirm_runs` runs: fails the gate.
    RegressionConfirmed,
    /// Faster since a confirmed change point.
    Improvement,
    /// The last run(s) slower than the level before, not yet for `confirm_runs` runs.
    SuspectedRegression,
    SuspectedImprovement,
    Stable,
    /// The last change began with a move to another machine and held on it (see the module's
    /// header): not a regression, not an improvement.
    MachineChanged,
    /// Fewer runs than `min_runs`.
    InsufficientData,
}

impl HistoryVerdict {
    pub fn words(self) -> &'static str {
        match self {
            HistoryVerdict::RegressionConfirmed => "regression confirmed",
            HistoryVerdict::Improvement => "improvement",
            HistoryVerdict::SuspectedRegression => "suspected regression (unconfirmed)",
            HistoryVerdict::SuspectedImprovement => "suspected improvement (unconfirmed)",
            HistoryVerdict::MachineChanged => "changed with the machine (save new baselines there)",
            HistoryVerdict::Stable => "stable",
            HistoryVerdict::InsufficientData => "insufficient data",
        }
    }
}

/// One results file of the history.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRun {
    pub path: String,
    pub started_at: String,
    pub git_revision: String,
    /// The machine it ran on: host and boot (None without a recorded boot).
    pub machine: Option<String>,
}

/// A change in a case's series.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryChange {
    /// The first run after the change (0-based, into `History::runs`).
    pub run: usize,
    /// The median level after the change over the level before (geometric means between the
    /// neighbouring change points): above 1 is slower.
    pub ratio: f64,
    pub p_value: f64,
    /// Held for `confirm_runs` runs or more; a suspected change is not.
    pub confirmed: bool,
    /// Began at the first run on another machine and held on that machine alone for
    /// `confirm_runs` runs or more: put down to the machine.
    pub machine_changed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseHistory {
    pub variant: String,
    pub params: String,
    /// The case's median in each run (None where it did not pass or was not in the run).
    pub medians_s: Vec<Option<f64>>,
    pub changes: Vec<HistoryChange>,
    pub verdict: HistoryVerdict,
}

impl CaseHistory {
    /// The change the verdict rests on: the last one, where there is one.
    pub fn latest_change(&self) -> Option<&HistoryChange> {
        self.changes.last()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct History {
    pub study: String,
    pub runs: Vec<HistoryRun>,
    pub confirm_runs: usize,
    pub min_runs: usize,
    pub min_effect: f64,
    pub p_value: f64,
    pub cases: Vec<CaseHistory>,
    /// Files given that hold a run already in `runs` (a copy), each with the one it copies:
    /// counted once, or one slow run copied twice would confirm a regression.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<(String, String)>,
}

impl History {
    pub fn regressed(&self) -> bool {
        self.cases
            .iter()
            .any(|c| c.verdict == HistoryVerdict::RegressionConfirmed)
    }

    pub fn count(&self, verdict: HistoryVerdict) -> usize {
        self.cases.iter().filter(|c| c.verdict == verdict).count()
    }
}

/// Puts the runs in the order they started (refusing a time that does not parse, or two
/// studies), keeps the last `last` of them where given, and judges every case.
pub fn judge(
    mut runs: Vec<(PathBuf, ResultsDoc)>,
    last: Option<usize>,
    settings: &HistorySettings,
) -> Result<History> {
    let mut started = Vec::with_capacity(runs.len());
    for (path, doc) in &runs {
        let at = chrono::DateTime::parse_from_rfc3339(&doc.started_at).with_context(|| {
            format!(
                "{}: started_at `{}` is not an RFC 3339 time",
                path.display(),
                doc.started_at
            )
        })?;
        started.push((at, path.clone()));
    }
    let Some((first_path, first)) = runs.first() else {
        bail!("no results files to judge");
    };
    if let Some((path, other)) = runs.iter().find(|(_, d)| d.study.name != first.study.name) {
        bail!(
            "the history mixes studies: {} holds `{}`, {} holds `{}`",
            first_path.display(),
            first.study.name,
            path.display(),
            other.study.name
        );
    }
    // By start time; the same time (a copied file) by path, so the order is always the same.
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by(|&a, &b| started[a].cmp(&started[b]));
    let mut sorted: Vec<(PathBuf, ResultsDoc)> = Vec::with_capacity(runs.len());
    let mut taken: Vec<Option<(PathBuf, ResultsDoc)>> = runs.drain(..).map(Some).collect();
    for i in order {
        sorted.extend(taken[i].take());
    }
    let copies = drop_copies(&mut sorted)?;
    if let Some(last) = last {
        let skip = sorted.len().saturating_sub(last);
        sorted.drain(..skip);
    }
    let mut history = judge_in_order(&sorted, settings);
    history.copies = copies;
    Ok(history)
}

/// A run is its start and its machine: two files that share them are one run. Identical cases
/// make the second a copy, dropped (returned with the file it copies); other cases (a file and
/// its resumed or edited self) are refused, since either could be the run. `runs` is in start
/// order.
fn drop_copies(runs: &mut Vec<(PathBuf, ResultsDoc)>) -> Result<Vec<(String, String)>> {
    let mut copies = Vec::new();
    let mut kept: Vec<(PathBuf, ResultsDoc)> = Vec::with_capacity(runs.len());
    for (path, doc) in runs.drain(..) {
        let same_run = kept.iter().find(|(_, k)| {
            k.started_at == doc.started_at && k.environment.host == doc.environment.host
        });
        match same_run {
            None => kept.push((path, doc)),
            Some((first, k)) if same_cases(k, &doc) => {
                copies.push((path.display().to_string(), first.display().to_string()))
            }
            Some((first, _)) => bail!(
                "{} and {} hold one run (started {} on {}) with different cases: one is an \
                 edited or partial copy of the other; give the history one of them",
                first.display(),
                path.display(),
                doc.started_at,
                doc.environment.host
            ),
        }
    }
    *runs = kept;
    Ok(copies)
}

fn same_cases(a: &ResultsDoc, b: &ResultsDoc) -> bool {
    a.cases.len() == b.cases.len()
        && serde_json::to_value(&a.cases).ok() == serde_json::to_value(&b.cases).ok()
}

/// Judges runs already in order.
fn judge_in_order(runs: &[(PathBuf, ResultsDoc)], settings: &HistorySettings) -> History {
    // Each case's median per run, cases in the order they first appear.
    let mut keys: Vec<(String, String)> = Vec::new();
    let mut medians: BTreeMap<(String, String), Vec<Option<f64>>> = BTreeMap::new();
    for (i, (_, doc)) in runs.iter().enumerate() {
        for case in &doc.cases {
            let key = (case.variant.clone(), describe_params(&case.params));
            let series = medians.entry(key.clone()).or_insert_with(|| {
                keys.push(key);
                vec![None; runs.len()]
            });
            series[i] = case
                .summary
                .as_ref()
                .filter(|_| case.status == CaseStatus::Passed)
                .map(|s| s.median_s)
                .filter(|m| m.is_finite() && *m > 0.0);
        }
    }
    let machines: Vec<Option<String>> = runs.iter().map(|(_, doc)| machine(doc)).collect();
    let cases = keys
        .into_iter()
        .map(|key| {
            let series = medians.remove(&key).unwrap_or_default();
            judge_case(key.0, key.1, series, &machines, settings)
        })
        .collect();
    History {
        study: runs
            .first()
            .map(|(_, d)| d.study.name.clone())
            .unwrap_or_default(),
        runs: runs
            .iter()
            .zip(machines)
            .map(|((path, doc), machine)| HistoryRun {
                path: path.display().to_string(),
                started_at: doc.started_at.clone(),
                git_revision: doc.environment.git_revision.clone(),
                machine,
            })
            .collect(),
        confirm_runs: settings.confirm_runs,
        min_runs: settings.min_runs,
        min_effect: settings.min_effect,
        p_value: settings.p_value,
        cases,
        copies: Vec::new(),
    }
}

/// The machine a run ran on, where its boot was recorded: "host boot".
fn machine(doc: &ResultsDoc) -> Option<String> {
    let env = &doc.environment;
    env.boot_id
        .as_ref()
        .map(|boot| format!("{} {boot}", env.host))
}

/// One case's series judged: its change points, and the verdict on where it stands now.
/// `machines` holds each run's machine (None where unknown), as `medians_s` holds its median.
pub fn judge_case(
    variant: String,
    params: String,
    medians_s: Vec<Option<f64>>,
    machines: &[Option<String>],
    settings: &HistorySettings,
) -> CaseHistory {
    // The runs the case has a median in, and the log medians (a step is then a ratio).
    let (runs, logs): (Vec<usize>, Vec<f64>) = medians_s
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.map(|m| (i, m.ln())))
        .unzip();
    let mut out = CaseHistory {
        variant,
        params,
        medians_s,
        changes: Vec::new(),
        verdict: HistoryVerdict::InsufficientData,
    };
    if logs.len() < settings.min_runs.max(4) {
        return out;
    }
    let cp_settings = ChangePointSettings {
        p_value: settings.p_value,
        min_magnitude: (1.0 + settings.min_effect).ln(),
        min_segment: 2,
    };
    let confirm = settings.confirm_runs.max(1);
    out.changes = changepoint::change_points(&logs, &cp_settings)
        .into_iter()
        .map(|c| HistoryChange {
            run: runs[c.index],
            ratio: c.shift.exp(),
            p_value: c.p_value,
            confirmed: logs.len() - c.index >= confirm,
            machine_changed: false,
        })
        .collect();
    // The last runs, too few to split off, against the level since the last change.
    let since = out
        .changes
        .iter()
        .rev()
        .find(|c| c.confirmed)
        .and_then(|c| runs.iter().position(|&r| r == c.run))
        .unwrap_or(0);
    let last_at = out.changes.last().map(|c| c.run);
    if out.changes.last().is_none_or(|c| c.confirmed) {
        if let Some(tail) = trailing_change(&logs[since..], confirm, &cp_settings) {
            let run = runs[since + tail.index];
            // Newer than the last change point (E-Divisive may have missed a step in the last
            // `confirm` runs: its best split elsewhere, not significant).
            if last_at.is_none_or(|at| run > at) {
                out.changes.push(HistoryChange {
                    run,
                    ratio: tail.shift.exp(),
                    p_value: tail.p_value,
                    confirmed: logs.len() - (since + tail.index) >= confirm,
                    machine_changed: false,
                });
            }
        }
    }
    mark_machine_changes(&mut out.changes, &runs, machines, confirm);
    out.verdict = match out.changes.last() {
        None => HistoryVerdict::Stable,
        Some(c) if c.machine_changed => HistoryVerdict::MachineChanged,
        Some(c) => match (c.confirmed, c.ratio > 1.0) {
            (true, true) => HistoryVerdict::RegressionConfirmed,
            (true, false) => HistoryVerdict::Improvement,
            (false, true) => HistoryVerdict::SuspectedRegression,
            (false, false) => HistoryVerdict::SuspectedImprovement,
        },
    };
    out
}

/// Marks the changes that began at the first run on another machine and whose level (up to the
/// next change) ran on that machine alone, `confirm` runs or more. `runs` are the runs with a
/// median, in order.
fn mark_machine_changes(
    changes: &mut [HistoryChange],
    runs: &[usize],
    machines: &[Option<String>],
    confirm: usize,
) {
    let ends: Vec<usize> = changes
        .iter()
        .skip(1)
        .map(|c| c.run)
        .chain([usize::MAX])
        .collect();
    for (change, end) in changes.iter_mut().zip(ends) {
        let Some(at) = runs.iter().position(|&r| r == change.run) else {
            continue;
        };
        let Some(before) = at.checked_sub(1).map(|i| runs[i]) else {
            continue;
        };
        let machine = |run: usize| machines.get(run).and_then(Option::as_ref);
        let (Some(new), Some(old)) = (machine(change.run), machine(before)) else {
            continue;
        };
        let level: Vec<usize> = runs[at..]
            .iter()
            .copied()
            .take_while(|&r| r < end)
            .collect();
        change.machine_changed =
            new != old && level.len() >= confirm && level.iter().all(|&r| machine(r) == Some(new));
    }
}

/// The last j <= `confirm` points of a level against the points before them (at least 3), by
/// the t-test and the minimum magnitude, every one of them on the same side: the change the
/// last runs show (confirmed where j = `confirm`). Tries the longest tail first.
fn trailing_change(
    level: &[f64],
    confirm: usize,
    settings: &ChangePointSettings,
) -> Option<changepoint::ChangePoint> {
    for tail in (1..=confirm).rev() {
        if level.len() < tail + 3 {
            continue;
        }
        let at = level.len() - tail;
        let (before, after) = level.split_at(at);
        let (shift, p_value) = changepoint::t_test(before, after)?;
        // The same shift in every point of the tail: one run out of line is not a level.
        let same_side = after.iter().all(|v| {
            let mean_before = before.iter().sum::<f64>() / before.len() as f64;
            (v - mean_before).signum() == shift.signum()
        });
        if p_value < settings.p_value && shift.abs() >= settings.min_magnitude && same_side {
            return Some(changepoint::ChangePoint {
                index: at,
                shift,
                p_value,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const SETTINGS: HistorySettings = HistorySettings {
        confirm_runs: 2,
        min_runs: 5,
        min_effect: 0.03,
        p_value: 0.001,
    };

    /// `len` medians of 1% noise around 10 µs, `factor` times slower from run `from` on.
    fn medians(seed: u64, len: usize, from: usize, factor: f64) -> Vec<Option<f64>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..len)
            .map(|i| {
                let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                let level = if i >= from { factor } else { 1.0 };
                Some(1e-5 * level * (0.01 * z).exp())
            })
            .collect()
    }

    fn verdict(series: Vec<Option<f64>>, settings: &HistorySettings) -> CaseHistory {
        judge_case("v".into(), "n=1".into(), series, &[], settings)
    }

    fn on_machines(series: Vec<Option<f64>>, machines: &[Option<String>]) -> CaseHistory {
        judge_case("v".into(), "n=1".into(), series, machines, &SETTINGS)
    }

    #[test]
    fn a_slowdown_is_suspected_after_one_run_and_confirmed_after_two() {
        // 12 runs at the same level, then 5% slower.
        let (mut confirmed_at, mut four_at, mut early) = (Vec::new(), Vec::new(), 0);
        for seed in 0..40 {
            let all = medians(seed, 16, 12, 1.05);
            assert_eq!(
                verdict(all[..12].to_vec(), &SETTINGS).verdict,
                HistoryVerdict::Stable,
                "seed {seed}"
            );
            // One slow run: a change placed one run early (the run before it high by chance)
            // has two runs after it and is confirmed early; that must stay rare.
            let one = verdict(all[..13].to_vec(), &SETTINGS);
            early += usize::from(one.verdict == HistoryVerdict::RegressionConfirmed);
            // Two slow runs: confirmed, unless their mean is too close to the old level for
            // p < 0.001 on two points (a 5% step on 1% noise: t is about 6 on average).
            let two = verdict(all[..14].to_vec(), &SETTINGS);
            if two.verdict == HistoryVerdict::RegressionConfirmed {
                let change = two.latest_change().unwrap();
                assert!((change.ratio - 1.05).abs() < 0.03, "{change:?}");
                confirmed_at.push(change.run);
            }
            // Four slow runs: always confirmed, at the run it began.
            let four = verdict(all.clone(), &SETTINGS);
            assert_eq!(
                four.verdict,
                HistoryVerdict::RegressionConfirmed,
                "seed {seed}"
            );
            four_at.push(four.latest_change().unwrap().run);
        }
        // Where it began: within a run always, at the very run nearly always.
        assert!(four_at.iter().all(|r| r.abs_diff(12) <= 1), "{four_at:?}");
        assert!(
            four_at.iter().filter(|&&r| r == 12).count() >= 36,
            "{four_at:?}"
        );
        let at_12 = confirmed_at.iter().filter(|&&r| r == 12).count();
        // When this was written: 2 of 40 confirmed after one slow run (one run early), 36 of
        // 40 after two (34 at run 12), all 40 after four (38 at run 12, 2 a run off).
        assert!(early <= 2, "{early} of 40 confirmed after one slow run");
        assert!(confirmed_at.len() >= 34, "{confirmed_at:?}");
        assert!(at_12 + 2 >= confirmed_at.len(), "{confirmed_at:?}");
        assert!(
            confirmed_at.iter().all(|&r| r.abs_diff(12) <= 1),
            "{confirmed_at:?}"
        );
    }

    #[test]
    fn a_suspected_change_is_said_after_one_run_of_three_to_confirm() {
        let settings = HistorySettings {
            confirm_runs: 3,
            ..SETTINGS
        };
        // 10% slower in the last run: suspected; in the last two: still suspected (3 to
        // confirm); in the last three: confirmed.
        let all = medians(3, 15, 12, 1.10);
        let one = verdict(all[..13].to_vec(), &settings);
        assert_eq!(one.verdict, HistoryVerdict::SuspectedRegression, "{one:?}");
        assert_eq!(one.latest_change().unwrap().run, 12);
        let two = verdict(all[..14].to_vec(), &settings);
        assert_eq!(two.verdict, HistoryVerdict::SuspectedRegression, "{two:?}");
        let three = verdict(all.clone(), &settings);
        assert_eq!(
            three.verdict,
            HistoryVerdict::RegressionConfirmed,
            "{three:?}"
        );
        // Faster is an improvement, never a regression.
        let faster = verdict(medians(4, 15, 8, 0.9), &SETTINGS);
        assert_eq!(faster.verdict, HistoryVerdict::Improvement);
    }

    #[test]
    fn short_series_are_insufficient_data_and_gaps_are_skipped() {
        let short = verdict(medians(1, 4, 2, 1.5), &SETTINGS);
        assert_eq!(short.verdict, HistoryVerdict::InsufficientData);
        assert!(short.changes.is_empty());
        // Ten runs, but only three with a median (the case failed in the others).
        let mut gappy = medians(2, 10, 99, 1.0);
        for m in gappy.iter_mut().skip(3) {
            *m = None;
        }
        assert_eq!(
            verdict(gappy, &SETTINGS).verdict,
            HistoryVerdict::InsufficientData
        );
        // A gap in the middle: the change is named by its run, not its place among medians.
        let mut series = medians(5, 14, 8, 1.06);
        series[3] = None;
        series[4] = None;
        let judged = verdict(series, &SETTINGS);
        assert_eq!(judged.verdict, HistoryVerdict::RegressionConfirmed);
        assert_eq!(judged.latest_change().unwrap().run, 8);
    }

    /// Machine names for `len` runs: `a` before run `from`, `b` from it on.
    fn moved_at(len: usize, from: usize) -> Vec<Option<String>> {
        (0..len)
            .map(|i| Some(if i < from { "a" } else { "b" }.to_string()))
            .collect()
    }

    #[test]
    fn a_level_that_began_with_a_move_to_another_machine_is_put_down_to_it() {
        for (seed, factor) in [(11, 0.85), (12, 1.15)] {
            let judged = on_machines(medians(seed, 16, 10, factor), &moved_at(16, 10));
            assert_eq!(judged.verdict, HistoryVerdict::MachineChanged, "{judged:?}");
            let change = judged.latest_change().unwrap();
            assert!(
                change.machine_changed && change.confirmed && change.run == 10,
                "{change:?}"
            );
            assert!((change.ratio - factor).abs() < 0.03, "{change:?}");
        }
        // The move at run 10, the slowdown at run 12 on the new machine: a regression.
        let later = on_machines(medians(13, 16, 12, 1.1), &moved_at(16, 10));
        assert_eq!(
            later.verdict,
            HistoryVerdict::RegressionConfirmed,
            "{later:?}"
        );
        assert!(!later.latest_change().unwrap().machine_changed);
        // One run on the new machine so far: too few to tell, still suspected.
        let one = on_machines(medians(14, 13, 12, 1.15), &moved_at(13, 12));
        assert_eq!(one.verdict, HistoryVerdict::SuspectedRegression, "{one:?}");
    }

    #[test]
    fn runs_each_on_a_machine_of_their_own_are_judged_as_any_other() {
        // Ephemeral CI runners: every run its own machine, 15% slower from run 10.
        let machines: Vec<Option<String>> = (0..16).map(|i| Some(format!("vm {i}"))).collect();
        let judged = on_machines(medians(15, 16, 10, 1.15), &machines);
        assert_eq!(
            judged.verdict,
            HistoryVerdict::RegressionConfirmed,
            "{judged:?}"
        );
        assert!(!judged.latest_change().unwrap().machine_changed);
    }

    #[test]
    fn stable_histories_stay_stable() {
        // 100 stable series of 20 runs: no confirmed regression, suspicions rare.
        let (mut confirmed, mut suspected) = (0, 0);
        for seed in 0..100 {
            match verdict(medians(seed + 500, 20, 99, 1.0), &SETTINGS).verdict {
                HistoryVerdict::Stable => {}
                HistoryVerdict::SuspectedRegression | HistoryVerdict::SuspectedImprovement => {
                    suspected += 1
                }
                _ => confirmed += 1,
            }
        }
        assert!(confirmed <= 1, "{confirmed} of 100 stable series flagged");
        assert!(suspected <= 1, "{suspected} of 100 stable series suspected");
    }
}
