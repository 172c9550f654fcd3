//! The regression gate: a new results file against one or more baseline runs of the same study,
//! matched case by case (variant and grid point).
//!
//! Against several baseline runs (the recipe: ten), the unit of replication is the run: each
//! case's new median is judged against the spread of the baseline runs' medians (run-to-run
//! variation is what makes a binary compared with itself look slower). A case is `slower` when
//! its one-sided p-value for "slower" survives Benjamini-Hochberg control of the
//! false-discovery rate over every compared case *and* its median moved by more than the minimum
//! effect (`faster` likewise, as a family of its own); `same` when an equivalence test (TOST, 5%
//! a side: the 90% interval of the ratio) puts the change within the minimum effect;
//! `inconclusive` otherwise, with the smallest change the case *could* have detected
//! (`detectable_change`) and why, where the reason is known: a case that is noisy on this host,
//! or a host-bound case (CPU, program or transfers scope) whose run was busier than the
//! baselines', or of runs on a saturated host (the host's load is recorded with every run,
//! `record::HostLoad`). Against a single
//! run only the samples are there: a Mann-Whitney test and a bootstrap interval. Only `slower`,
//! or a case that newly fails (wrong answer, error), fails the gate: improvements never do.
//! docs/ci/gate.md states what the gate assumes.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use crate::record::{CaseResult, CaseStatus, DeviceKey, ResultsDoc};
use crate::vocab::{describe_params, Backend, Scope};

/// Baselines whose medians spread more than this run to run (the relative standard deviation)
/// make a case "noisy on this host": it is said so, beside its detectable change.
pub const NOISY_SPREAD: f64 = 0.10;

/// How many more CPUs other processes may keep busy in the new run than in the busiest baseline
/// before its host-bound cases count as run under load.
pub const LOAD_MARGIN_CPUS: f64 = 0.25;

/// The power at which `detectable_change` is stated: the change that is caught 4 times in 5.
pub const DETECTABLE_POWER: f64 = 0.8;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Slower,
    Faster,
    Same,
    Inconclusive,
    /// Passed in the baseline, fails (wrong answer or error) now.
    NewFailure,
    /// Not comparable: skipped or failed on either side.
    NotCompared,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseComparison {
    pub variant: String,
    pub params: String,
    pub base_median_s: Option<f64>,
    pub new_median_s: Option<f64>,
    /// new median / baseline median (the geometric mean over baseline runs): above 1 is slower.
    pub ratio: Option<f64>,
    pub ratio_ci95: Option<(f64, f64)>,
    /// The 90% interval of the ratio: within the minimum effect, the case is `same` (an
    /// equivalence test, TOST, at 5% a side). Several baseline runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_ci90: Option<(f64, f64)>,
    /// In the direction the median moved: one-sided against several baseline runs, two-sided
    /// (Mann-Whitney) against one.
    pub p_value: Option<f64>,
    /// After Benjamini-Hochberg over all compared cases (slower and faster each a family).
    pub p_adjusted: Option<f64>,
    pub verdict: Verdict,
    /// Why a case is not compared, how it newly fails, or why it is inconclusive (noisy on this
    /// host, or run under load).
    pub note: Option<String>,
    /// The baseline runs' medians, their run-to-run spread: the standard deviation of their
    /// logarithms, as a relative figure (0.01 = 1%). Several baseline runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_spread: Option<f64>,
    /// The smallest slowdown this case would be called `slower` for, 4 times in 5, were it the
    /// only case that changed (0.09 = 9%): from the baselines' run-to-run spread, their number,
    /// the false-discovery rate over the compared cases and the minimum effect. Several baseline
    /// runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detectable_change: Option<f64>,
    /// A host-bound case (CPU, program or transfers scope) of a run whose host was busier than
    /// in every baseline: never called slower.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub loaded: bool,
    /// A host-bound case whose samples in the new run spread far more than in any baseline run:
    /// (the new run's interquartile range over median, the widest baseline run's). Never
    /// called slower.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disturbed: Option<(f64, f64)>,
    /// One-sided p-values of "slower" and "faster" (two-sided against a single baseline run),
    /// each adjusted over its own family.
    #[serde(skip)]
    p_slower: Option<f64>,
    #[serde(skip)]
    p_faster: Option<f64>,
    /// The case times the host's work: CPU cases, program and transfers scope.
    #[serde(skip)]
    host_bound: bool,
    /// The case ran on another GPU than in the baseline (`run --devices`, or a merge of shards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<DeviceMove>,
    /// The baselines' samples sit at two levels (alternating, or two modes): a run's median may
    /// land on either or between, which no number of samples in one run settles. Said beside
    /// the detectable change. Several baseline runs only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sample_levels: Option<SampleLevels>,
    /// Called slower, then measured again in a fresh process (`compare --retest`): what that
    /// run showed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retest: Option<CaseRetest>,
}

/// Two levels in a case's samples, seen in most of its baseline runs (`sample_levels`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SampleLevels {
    /// `alternate`: even and odd samples sit at two levels (a run of several kernels whose
    /// timing flips from one sample to the next); `two_modes`: two clusters, each of at least a
    /// fifth of the samples.
    pub kind: LevelsKind,
    /// How far apart the two levels are (the median over the runs that show them).
    pub gap_s: f64,
    /// In how many of the baseline runs.
    pub runs: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LevelsKind {
    Alternate,
    TwoModes,
}

/// A case's retest: its ratio and verdict in the retest run, judged against the same baselines.
#[derive(Debug, Clone, Serialize)]
pub struct CaseRetest {
    /// The retest run's median over the baselines'. None: the retest gave no result for it.
    pub ratio: Option<f64>,
    pub verdict: Verdict,
    /// The retest called it slower too: it stays slower.
    pub confirmed: bool,
}

/// What `compare --retest` did: which file holds the retest run, how many cases it ran again
/// and how many it confirmed.
#[derive(Debug, Clone, Serialize)]
pub struct RetestSummary {
    pub file: String,
    pub retested: usize,
    pub confirmed: usize,
}

/// A case that ran on another GPU of the same model than in the baseline. Same-model GPUs differ
/// by a few percent, so its verdict allows for the two GPUs' difference: the bounds of `slower`
/// and `faster` are widened by the ratio of their measured copy peaks (each run measures its
/// GPUs' peaks), and where a peak is not known the case is never called slower or faster, only
/// `same` or `inconclusive`.
#[derive(Debug, Clone, Serialize)]
pub struct DeviceMove {
    /// The baseline's GPU(s), by PCI bus id (`host bus id` where the GPUs are on several hosts).
    pub from: Vec<String>,
    pub to: String,
    /// The new GPU's measured copy peak over the baseline's (their geometric mean): None where
    /// a peak is not recorded.
    pub copy_peak_ratio: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub study: String,
    /// How many baseline runs each case was judged against.
    pub baseline_runs: usize,
    pub min_effect: f64,
    pub fdr: f64,
    pub cases: Vec<CaseComparison>,
    pub only_in_baseline: Vec<String>,
    pub only_in_new: Vec<String>,
    /// How the new run's host load compares with the baselines' (None where a run does not
    /// record it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadComparison>,
    /// `--retest`: the cases called slower were run again (`apply_retest`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retest: Option<RetestSummary>,
}

/// Other processes' use of the host's CPUs, in the new run and in the baselines.
#[derive(Debug, Clone, Serialize)]
pub struct LoadComparison {
    /// CPUs other processes kept busy on average over the new run.
    pub new_other_busy_cpus: f64,
    /// The most any baseline run saw.
    pub baseline_max_other_busy_cpus: f64,
    /// The new run's host's CPUs.
    pub cpu_count: usize,
    /// The runs (baselines and the new one) during which other processes kept all CPUs but
    /// less than `1 + LOAD_MARGIN_CPUS` busy: a single-threaded case had no CPU of its own.
    pub saturated_runs: usize,
    /// The new run was busier than every baseline by more than `LOAD_MARGIN_CPUS`, or some run
    /// was saturated: the host-bound cases are judged `loaded`.
    pub loaded: bool,
}

impl Comparison {
    pub fn regressed(&self) -> bool {
        self.cases
            .iter()
            .any(|c| matches!(c.verdict, Verdict::Slower | Verdict::NewFailure))
    }

    pub fn count(&self, verdict: Verdict) -> usize {
        self.cases.iter().filter(|c| c.verdict == verdict).count()
    }
}

#[derive(Debug, Clone, Copy)]
pub struct CompareSettings {
    /// Smallest relative change of the median that counts (0.03 = 3%).
    pub min_effect: f64,
    /// False-discovery rate controlled across the grid.
    pub fdr: f64,
    pub allow_different_device: bool,
}

/// Why a case that is not `passed` with samples on both sides is not compared, in words that
/// group well: "skipped in the baseline and the new run", "timed out in the baseline".
fn not_compared_reason(base_runs: &[&CaseResult], new: &CaseResult) -> String {
    let words = |c: &CaseResult| match (c.status, &c.measurement) {
        (CaseStatus::Passed, Some(m)) if !m.samples_s.is_empty() => None,
        (CaseStatus::Passed, _) => Some("without samples"),
        (CaseStatus::AccuracyFailed, _) => Some("wrong answer"),
        (CaseStatus::Error, _) => Some("error"),
        (CaseStatus::TimedOut, _) => Some("timed out"),
        (CaseStatus::Skipped, _) => Some("skipped"),
    };
    let mut base: Vec<&str> = Vec::new();
    for word in base_runs.iter().filter_map(|c| words(c)) {
        if !base.contains(&word) {
            base.push(word);
        }
    }
    let base = base.join(" or ");
    match (base.as_str(), words(new)) {
        ("", Some(new)) => format!("{new} in the new run"),
        (base, None) => format!("{base} in the baseline"),
        (base, Some(new)) if base == new => format!("{new} in the baseline and the new run"),
        (base, Some(new)) => format!("{base} in the baseline, {new} in the new run"),
    }
}

/// Refuses files that cannot be compared meaningfully: different studies, cases measured in
/// different numbers of processes or launched differently (stream or graph), or different
/// machines unless `allow_different_device`.
pub fn check_comparable(
    base: &ResultsDoc,
    new: &ResultsDoc,
    allow_different_device: bool,
) -> Result<()> {
    if base.study.name != new.study.name {
        bail!(
            "the files hold different studies: `{}` and `{}`",
            base.study.name,
            new.study.name
        );
    }
    // The gate judges a run against the baselines' run-to-run spread, which K processes a case
    // narrow: runs of different K do not share one spread.
    let (base_k, new_k) = (
        base.manifest.measure.processes,
        new.manifest.measure.processes,
    );
    if base_k != new_k {
        bail!(
            "the runs measured each case in different numbers of worker processes ({base_k} in the baseline, {new_k} in the new run: `[measure] processes`, `--processes`), so their run-to-run spreads differ; run both with the same --processes"
        );
    }
    // Launched one by one, a run of several short kernels sits at other levels than replayed
    // from a graph: the two are not one spread either.
    let (base_launch, new_launch) = (base.manifest.measure.launch, new.manifest.measure.launch);
    if base_launch != new_launch {
        bail!(
            "the runs launched kernel-scope runs differently ({} in the baseline, {} in the new run: `[measure] launch`, `--launch`), so their times and spreads differ; run both with the same --launch",
            base_launch.name(),
            new_launch.name()
        );
    }
    if allow_different_device {
        return Ok(());
    }
    let describe = |d: &ResultsDoc| {
        d.environment
            .device
            .as_ref()
            .map(|g| format!("{} (driver {})", g.name, g.driver_version))
    };
    let (a, b) = (describe(base), describe(new));
    if a.is_some() && b.is_some() && a != b {
        bail!(
            "the runs used different GPUs or drivers: {} vs {}; pass --allow-different-device to compare anyway",
            a.unwrap_or_default(),
            b.unwrap_or_default()
        );
    }
    if base.environment.cpu_model != new.environment.cpu_model {
        bail!(
            "the runs used different CPUs: {} vs {}; pass --allow-different-device to compare anyway",
            base.environment.cpu_model,
            new.environment.cpu_model
        );
    }
    Ok(())
}

/// Compares `new` with one or more baseline runs of the same study.
pub fn compare(bases: &[ResultsDoc], new: &ResultsDoc, settings: &CompareSettings) -> Comparison {
    let key = |c: &CaseResult| format!("{} {}", c.variant, describe_params(&c.params));
    let mut base_cases: BTreeMap<String, Vec<&CaseResult>> = BTreeMap::new();
    // Where each baseline run of a case ran, with that GPU's copy peak as its own run measured.
    let mut base_gpus: BTreeMap<String, Vec<Option<RunGpu>>> = BTreeMap::new();
    for base in bases {
        let peaks = copy_peaks(base);
        for c in &base.cases {
            base_cases.entry(key(c)).or_default().push(c);
            base_gpus
                .entry(key(c))
                .or_default()
                .push(run_gpu(base, c, &peaks));
        }
    }
    let new_keys: Vec<String> = new.cases.iter().map(key).collect();

    let new_peaks = copy_peaks(new);
    let mut cases = Vec::new();
    for new_case in &new.cases {
        if let Some(runs) = base_cases.get(&key(new_case)) {
            let mut c = compare_case(runs, new_case);
            c.moved = device_move(
                &base_gpus[&key(new_case)],
                run_gpu(new, new_case, &new_peaks),
            );
            cases.push(c);
        }
    }
    let load = load_comparison(bases, new);
    let loaded = load.as_ref().is_some_and(|l| l.loaded);
    judge_cases(&mut cases, settings, bases.len(), loaded);
    Comparison {
        study: new.study.name.clone(),
        baseline_runs: bases.len(),
        min_effect: settings.min_effect,
        fdr: settings.fdr,
        only_in_baseline: base_cases
            .keys()
            .filter(|k| !new_keys.contains(k))
            .cloned()
            .collect(),
        only_in_new: new_keys
            .iter()
            .filter(|k| !base_cases.contains_key(*k))
            .cloned()
            .collect(),
        cases,
        load,
        retest: None,
    }
}

/// The verdicts, once every case has its p-values: Benjamini-Hochberg over the compared cases,
/// the decision, and for the undecided ones what they could have detected and why not more.
fn judge_cases(
    cases: &mut [CaseComparison],
    settings: &CompareSettings,
    baseline_runs: usize,
    loaded: bool,
) {
    adjust_benjamini_hochberg(cases);
    let tested = tested_count(cases);
    for c in cases.iter_mut() {
        let (Some(ratio), Some(ci)) = (c.ratio, c.ratio_ci95) else {
            continue;
        };
        let p = Adjusted {
            slower: c.p_slower.unwrap_or(1.0),
            faster: c.p_faster.unwrap_or(1.0),
        };
        // The equivalence interval: 90% (TOST) over runs, the bootstrap's 95% over samples.
        let same_ci = c.ratio_ci90.unwrap_or(ci);
        c.verdict = match &c.moved {
            None => decide(p, ratio, same_ci, settings),
            Some(moved) => decide_moved(p, ratio, same_ci, settings, moved.copy_peak_ratio),
        };
        c.p_adjusted = Some(if ratio >= 1.0 { p.slower } else { p.faster });
        c.loaded = loaded && c.host_bound;
        if (c.loaded || c.disturbed.is_some()) && c.verdict == Verdict::Slower {
            c.verdict = Verdict::Inconclusive;
        }
        if c.verdict != Verdict::Inconclusive {
            c.detectable_change = None;
            continue;
        }
        if let Some(spread) = c.baseline_spread {
            c.detectable_change = Some(detectable_change(spread, baseline_runs, tested, settings));
            if c.loaded {
                c.note = Some("run under load (see `load`): not called slower".into());
            } else if let Some((new, widest)) = c.disturbed {
                c.note = Some(format!(
                    "disturbed: its samples spread {:.1}% in the new run, at most {:.1}% in the baselines: not called slower",
                    new * 100.0,
                    widest * 100.0
                ));
            } else if spread > NOISY_SPREAD {
                c.note = Some(format!(
                    "noisy on this host: baselines spread {:.0}%",
                    spread * 100.0
                ));
            }
        } else if c.loaded {
            c.note = Some("run under load (see `load`): not called slower".into());
        }
    }
}

/// Settles the cases `result` called slower by a retest of them (`retest`: the retest run
/// judged against the same baselines, by the same run-level test). A case stays slower only if
/// the retest calls it slower too; otherwise it becomes inconclusive ("not reproduced"), with
/// its detectable change. A case the retest has no result for stays slower: unconfirmed, but
/// the gate does not pass what it could not check.
pub fn apply_retest(
    result: &mut Comparison,
    retest: &Comparison,
    retest_file: &str,
    settings: &CompareSettings,
) {
    let tested = tested_count(&result.cases);
    let (mut retested, mut confirmed) = (0, 0);
    for c in result
        .cases
        .iter_mut()
        .filter(|c| c.verdict == Verdict::Slower)
    {
        retested += 1;
        let again = retest
            .cases
            .iter()
            .find(|r| r.variant == c.variant && r.params == c.params);
        let percent = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
        let first = c.ratio.map_or("?".into(), percent);
        let Some(again) = again.filter(|r| r.ratio.is_some()) else {
            c.retest = Some(CaseRetest {
                ratio: None,
                verdict: again.map_or(Verdict::NotCompared, |r| r.verdict),
                confirmed: false,
            });
            c.note = Some(format!(
                "{first}; the retest gave no result for it: slower, unconfirmed"
            ));
            continue;
        };
        let is_confirmed = again.verdict == Verdict::Slower;
        let second = again.ratio.map_or("?".into(), percent);
        c.retest = Some(CaseRetest {
            ratio: again.ratio,
            verdict: again.verdict,
            confirmed: is_confirmed,
        });
        if is_confirmed {
            confirmed += 1;
            c.note = Some(format!("confirmed on retest: {first} then {second}"));
        } else {
            c.verdict = Verdict::Inconclusive;
            c.note = Some(format!("not reproduced: {first} then {second} on retest"));
            c.detectable_change = c
                .baseline_spread
                .map(|spread| detectable_change(spread, result.baseline_runs, tested, settings));
        }
    }
    result.retest = Some(RetestSummary {
        file: retest_file.to_string(),
        retested,
        confirmed,
    });
}

/// How many cases the family of tests holds (those with a p-value): Benjamini-Hochberg, and
/// so each case's detectable change, depend on it.
fn tested_count(cases: &[CaseComparison]) -> usize {
    cases.iter().filter(|c| c.p_slower.is_some()).count()
}

/// The new run's host load against the baselines': None where any run does not record it.
fn load_comparison(bases: &[ResultsDoc], new: &ResultsDoc) -> Option<LoadComparison> {
    let other = |d: &ResultsDoc| {
        let load = d.environment.load.as_ref()?;
        Some((load.other_busy_cpus?, load.cpu_count))
    };
    let (new_other, cpu_count) = other(new)?;
    let base: Vec<(f64, usize)> = bases.iter().map(other).collect::<Option<_>>()?;
    let base_max = base.iter().map(|b| b.0).fold(f64::NEG_INFINITY, f64::max);
    if !base_max.is_finite() {
        return None;
    }
    // Saturated: others kept all CPUs but (less than) one busy, so a case's thread had no CPU
    // of its own for part of the run.
    let saturated = |(other, cpus): (f64, usize)| other > cpus as f64 - 1.0 - LOAD_MARGIN_CPUS;
    let saturated_runs = base
        .iter()
        .chain(std::iter::once(&(new_other, cpu_count)))
        .filter(|r| saturated(**r))
        .count();
    Some(LoadComparison {
        new_other_busy_cpus: new_other,
        baseline_max_other_busy_cpus: base_max,
        cpu_count,
        saturated_runs,
        loaded: new_other > base_max + LOAD_MARGIN_CPUS || saturated_runs > 0,
    })
}

/// The smallest slowdown a case would be called slower for with `DETECTABLE_POWER`, from its
/// baselines' run-to-run spread (relative), were it the only one of the `tested` cases to
/// change (Benjamini-Hochberg then asks p < fdr / tested): the shift of the log median at
/// which the one-sided t test passes that level and the median clears the minimum effect, 4
/// times in 5.
pub fn detectable_change(
    spread: f64,
    baseline_runs: usize,
    tested: usize,
    settings: &CompareSettings,
) -> f64 {
    let k = baseline_runs as f64;
    let scale = (1.0 + spread).ln().max(1e-6) * (1.0 + 1.0 / k).sqrt();
    let student = StudentsT::new(0.0, 1.0, (k - 1.0).max(1.0)).expect("df >= 1");
    let level = settings.fdr / tested.max(1) as f64;
    let significant = student.inverse_cdf(1.0 - level) * scale;
    let shift = significant.max((1.0 + settings.min_effect).ln())
        + student.inverse_cdf(DETECTABLE_POWER) * scale;
    shift.exp() - 1.0
}

/// Each GPU's measured copy peak, by host and PCI bus id, from one run's environment: each
/// run's cases are judged by the peaks that run measured.
fn copy_peaks(doc: &ResultsDoc) -> BTreeMap<DeviceKey, f64> {
    doc.environment
        .all_devices()
        .into_iter()
        .filter(|d| d.measured_copy_gbytes_per_s > 0.0)
        .map(|d| (d.key(""), d.measured_copy_gbytes_per_s))
        .collect()
}

/// The GPU one run of a case ran on, and its copy peak in that run (where recorded).
struct RunGpu {
    key: DeviceKey,
    peak: Option<f64>,
}

fn run_gpu(
    doc: &ResultsDoc,
    case: &CaseResult,
    peaks: &BTreeMap<DeviceKey, f64>,
) -> Option<RunGpu> {
    let key = case.device.as_ref()?.key(&doc.environment.host);
    Some(RunGpu {
        peak: peaks.get(&key).copied(),
        key,
    })
}

/// Whether a case ran on another GPU than its baseline runs (where both record one): `base`, one
/// entry per baseline run.
fn device_move(base: &[Option<RunGpu>], new: Option<RunGpu>) -> Option<DeviceMove> {
    let to = new?;
    let base: Vec<&RunGpu> = base.iter().map(Option::as_ref).collect::<Option<_>>()?;
    let mut from: Vec<&DeviceKey> = Vec::new();
    for run in &base {
        if !from.contains(&&run.key) {
            from.push(&run.key);
        }
    }
    if from.iter().all(|f| **f == to.key) {
        return None;
    }
    let base_peaks: Option<Vec<f64>> = base.iter().map(|r| r.peak).collect();
    let copy_peak_ratio = match (to.peak, base_peaks) {
        (Some(to), Some(base)) => Some(to / geometric_mean(&base)),
        _ => None,
    };
    // The bus id names a GPU; the host too where the GPUs are on several.
    let one_host = from.iter().all(|f| f.0 == to.key.0);
    let name = |k: &DeviceKey| {
        if one_host {
            k.1.clone()
        } else {
            format!("{} {}", k.0, k.1)
        }
    };
    Some(DeviceMove {
        from: from.into_iter().map(name).collect(),
        to: name(&to.key),
        copy_peak_ratio,
    })
}

/// A case's p-values after Benjamini-Hochberg, one per direction (each its own family).
#[derive(Debug, Clone, Copy)]
struct Adjusted {
    slower: f64,
    faster: f64,
}

/// `decide` for a case that moved GPU: the bounds of slower and faster widened by the two
/// GPUs' copy-peak difference, or (not known) never slower or faster.
fn decide_moved(
    p: Adjusted,
    ratio: f64,
    ci: (f64, f64),
    settings: &CompareSettings,
    copy_peak_ratio: Option<f64>,
) -> Verdict {
    let Some(peak) = copy_peak_ratio.filter(|r| r.is_finite() && *r > 0.0) else {
        return match decide(p, ratio, ci, settings) {
            Verdict::Slower | Verdict::Faster => Verdict::Inconclusive,
            v => v,
        };
    };
    let spread = peak.max(1.0 / peak);
    let widened = CompareSettings {
        min_effect: (1.0 + settings.min_effect) * spread - 1.0,
        ..*settings
    };
    match decide(p, ratio, ci, &widened) {
        // Within the GPUs' difference: `same` only by the study's own bound, else inconclusive.
        Verdict::Same => match decide(p, ratio, ci, settings) {
            Verdict::Same => Verdict::Same,
            _ => Verdict::Inconclusive,
        },
        v => v,
    }
}

/// `ci`: the interval that must lie within the minimum effect for `same` (the 90% interval
/// over runs: an equivalence test at 5% a side).
fn decide(p: Adjusted, ratio: f64, ci: (f64, f64), settings: &CompareSettings) -> Verdict {
    let upper = 1.0 + settings.min_effect;
    let lower = 1.0 / upper;
    if p.slower < settings.fdr && ratio > upper {
        Verdict::Slower
    } else if p.faster < settings.fdr && ratio < lower {
        Verdict::Faster
    } else if ci.0 >= lower && ci.1 <= upper {
        Verdict::Same
    } else {
        Verdict::Inconclusive
    }
}

/// One case against its baseline runs.
///
/// With several baseline runs the unit of replication is the run: a new run's median is judged
/// against the spread of the baseline runs' medians (a Student-t prediction interval on the log
/// scale), which includes the run-to-run variation (clocks, placement, host state) that samples
/// within one run cannot show. With a single baseline run only the samples are available: a
/// Mann-Whitney test and a bootstrap CI of the ratio of medians, blind to run-to-run variation.
fn compare_case(base_runs: &[&CaseResult], new: &CaseResult) -> CaseComparison {
    let samples = |c: &CaseResult| {
        c.measurement
            .as_ref()
            .map(|m| m.samples_s.clone())
            .filter(|s| !s.is_empty())
    };
    let base_medians: Vec<f64> = base_runs
        .iter()
        .filter_map(|c| samples(c))
        .map(|s| median(&s))
        .collect();
    let mut out = CaseComparison {
        variant: new.variant.clone(),
        params: describe_params(&new.params),
        base_median_s: (!base_medians.is_empty()).then(|| geometric_mean(&base_medians)),
        new_median_s: new.summary.as_ref().map(|s| s.median_s),
        ratio: None,
        ratio_ci95: None,
        ratio_ci90: None,
        p_value: None,
        p_adjusted: None,
        verdict: Verdict::NotCompared,
        note: None,
        baseline_spread: None,
        detectable_change: None,
        loaded: false,
        disturbed: None,
        p_slower: None,
        p_faster: None,
        host_bound: new.backend == Backend::Cpu
            || matches!(new.scope, Some(Scope::Program | Scope::Transfers)),
        moved: None,
        sample_levels: None,
        retest: None,
    };
    let base_passed = base_runs.iter().all(|c| c.status == CaseStatus::Passed);
    if new.failed() && base_passed {
        out.verdict = Verdict::NewFailure;
        out.note = new.reason.clone();
        return out;
    }
    let new_samples = match samples(new) {
        Some(s)
            if new.status == CaseStatus::Passed
                && base_passed
                && base_medians.len() == base_runs.len() =>
        {
            s
        }
        _ => {
            out.note = Some(not_compared_reason(base_runs, new));
            return out;
        }
    };
    let new_median = median(&new_samples);
    if let [single] = base_runs {
        let base_samples = samples(single).unwrap_or_default();
        out.ratio = Some(new_median / base_medians[0]);
        out.ratio_ci95 = Some(bootstrap_ratio_ci95(&base_samples, &new_samples));
        let p = mann_whitney_p(&base_samples, &new_samples);
        // Two-sided, in both families: as the gate has always judged a single baseline.
        (out.p_value, out.p_slower, out.p_faster) = (Some(p), Some(p), Some(p));
    } else {
        let base_samples: Vec<Vec<f64>> = base_runs.iter().filter_map(|c| samples(c)).collect();
        let tick_s = timer_tick_s(&base_samples);
        // A median of quantized samples is known to half a tick.
        let floor = (1.0 + 0.5 * tick_s / geometric_mean(&base_medians)).ln();
        let test = run_level_test_floored(&base_medians, new_median, floor);
        if out.host_bound {
            out.disturbed = disturbed(&base_samples, &new_samples);
        }
        out.ratio = Some(test.ratio);
        out.ratio_ci95 = Some(test.ci95);
        out.ratio_ci90 = Some(test.ci90);
        out.p_slower = Some(test.p_slower);
        out.p_faster = Some(test.p_faster);
        out.p_value = Some(test.p_slower.min(test.p_faster));
        out.baseline_spread = Some(test.spread);
        out.sample_levels = sample_levels(&base_samples);
    }
    out
}

/// One new median against k >= 2 baseline medians (`run_level_test`).
#[derive(Debug, Clone, Copy)]
pub struct RunLevelTest {
    /// The new median over the baselines' geometric mean.
    pub ratio: f64,
    /// The 95% and 90% prediction intervals of the ratio.
    pub ci95: (f64, f64),
    pub ci90: (f64, f64),
    /// One-sided p-values: that the new run is slower, and that it is faster.
    pub p_slower: f64,
    pub p_faster: f64,
    /// The baselines' run-to-run spread: the standard deviation of their log medians, as a
    /// relative figure.
    pub spread: f64,
}

/// The new median against k >= 2 baseline medians: on the log scale, the baseline runs give a
/// mean and standard deviation, and a new run from the same population falls within
/// mean +- t(k-1) * sd * sqrt(1 + 1/k). The new run's own run-to-run variation is inside that
/// sqrt(1 + 1/k): its within-run CI is not added (each baseline median carries its sampling
/// noise too, so the spread of the baselines already holds it).
pub fn run_level_test(base_medians: &[f64], new_median: f64) -> RunLevelTest {
    run_level_test_floored(base_medians, new_median, 0.0)
}

/// `run_level_test` with the baselines' spread taken as at least `min_sd_log` (on the log
/// scale): half the timer's tick, below which runs that agree are not evidence of a steady
/// case (a median of samples that sit on one or two tick values moves a whole tick at once).
pub fn run_level_test_floored(
    base_medians: &[f64],
    new_median: f64,
    min_sd_log: f64,
) -> RunLevelTest {
    let k = base_medians.len() as f64;
    let logs: Vec<f64> = base_medians.iter().map(|m| m.ln()).collect();
    let mean = logs.iter().sum::<f64>() / k;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
    // Runs that agree to the last digit still differ by rounding: keep the scale above zero.
    let sd = sd.max(min_sd_log);
    let scale = sd.max(1e-6) * (1.0 + 1.0 / k).sqrt();
    let student = StudentsT::new(0.0, 1.0, k - 1.0).expect("k >= 2 gives a valid t distribution");
    let diff = new_median.ln() - mean;
    let interval = |level: f64| {
        let half = student.inverse_cdf(0.5 + level / 2.0) * scale;
        ((diff - half).exp(), (diff + half).exp())
    };
    let t = diff / scale;
    RunLevelTest {
        ratio: diff.exp(),
        ci95: interval(0.95),
        ci90: interval(0.90),
        p_slower: 1.0 - student.cdf(t),
        p_faster: student.cdf(t),
        spread: sd.exp() - 1.0,
    }
}

/// The timer's tick as the samples show it: the smallest gap between two different sample
/// values of the baseline runs. Samples that are not quantized give a tiny gap (no floor); a CPU
/// case of a few hundred nanoseconds timed in 10 ns ticks gives 10 ns.
fn timer_tick_s(runs: &[Vec<f64>]) -> f64 {
    let mut all: Vec<f64> = runs.iter().flatten().copied().collect();
    all.sort_by(f64::total_cmp);
    let smallest_gap = all
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|gap| *gap > 0.0)
        .fold(f64::INFINITY, f64::min);
    // Every sample the same value: no gap seen, no tick known.
    if smallest_gap.is_finite() {
        smallest_gap
    } else {
        0.0
    }
}

/// Two levels apart by more than this (relative to the median) count as two levels.
pub const LEVELS_GAP: f64 = 0.03;

/// Two levels in the baselines' samples (`CaseComparison::sample_levels`), where at least half
/// of the baseline runs show them: alternation first (the more specific finding), else two modes.
fn sample_levels(base_runs: &[Vec<f64>]) -> Option<SampleLevels> {
    let found: Vec<(LevelsKind, f64)> = base_runs
        .iter()
        .filter_map(|s| {
            alternation_gap_s(s)
                .map(|gap| (LevelsKind::Alternate, gap))
                .or_else(|| two_modes_gap_s(s).map(|gap| (LevelsKind::TwoModes, gap)))
        })
        .collect();
    if found.is_empty() || 2 * found.len() < base_runs.len() {
        return None;
    }
    let alternating = found
        .iter()
        .filter(|f| f.0 == LevelsKind::Alternate)
        .count();
    let kind = if 2 * alternating >= found.len() {
        LevelsKind::Alternate
    } else {
        LevelsKind::TwoModes
    };
    let gaps: Vec<f64> = found.iter().map(|f| f.1).collect();
    Some(SampleLevels {
        kind,
        gap_s: median(&gaps),
        runs: found.len(),
    })
}

/// Even and odd samples at two levels: their medians more than `LEVELS_GAP` apart, and at least
/// 3 in 4 of the pairs (sample 2i, sample 2i+1) ordered the same way. Measured on an H100: the
/// reductions of several kernels at n = 1e6 alternate 0.9 us apart at 14 us, in every run.
pub fn alternation_gap_s(samples: &[f64]) -> Option<f64> {
    if samples.len() < 10 {
        return None;
    }
    let even: Vec<f64> = samples.iter().step_by(2).copied().collect();
    let odd: Vec<f64> = samples.iter().skip(1).step_by(2).copied().collect();
    let gap = median(&even) - median(&odd);
    if gap.abs() <= LEVELS_GAP * median(samples) {
        return None;
    }
    let pairs: Vec<f64> = samples.chunks_exact(2).map(|p| p[0] - p[1]).collect();
    let agree = pairs.iter().filter(|d| **d * gap > 0.0).count();
    (4 * agree >= 3 * pairs.len()).then_some(gap.abs())
}

/// Two clusters: the split of the sorted samples with the least within-cluster variance, each
/// side holding at least a fifth of the samples, whose medians are more than `LEVELS_GAP` apart
/// and well separated (Ashman's D over 4: a normal sample split at its median gives 2.7).
pub fn two_modes_gap_s(samples: &[f64]) -> Option<f64> {
    let n = samples.len();
    if n < 10 {
        return None;
    }
    let mut x = samples.to_vec();
    x.sort_by(f64::total_cmp);
    let smallest = n.div_ceil(5);
    // Prefix sums of the sorted samples and their squares: each split's moments in O(1).
    let (mut sum, mut sum_sq) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (k, v) in x.iter().enumerate() {
        sum[k + 1] = sum[k] + v;
        sum_sq[k + 1] = sum_sq[k] + v * v;
    }
    // (mean, variance) of the sorted samples from..to.
    let moments = |from: usize, to: usize| {
        let count = (to - from) as f64;
        let mean = (sum[to] - sum[from]) / count;
        let var = ((sum_sq[to] - sum_sq[from]) / count - mean * mean).max(0.0);
        (mean, var)
    };
    // The split with the least within-cluster sum of squares.
    let within = |i: usize| moments(0, i).1 * i as f64 + moments(i, n).1 * (n - i) as f64;
    let split = (smallest..=n - smallest).min_by(|&a, &b| within(a).total_cmp(&within(b)))?;
    let (low, high) = (moments(0, split), moments(split, n));
    let gap = median(&x[split..]) - median(&x[..split]);
    let ashman_d = 2f64.sqrt() * (high.0 - low.0) / (low.1 + high.1).sqrt().max(1e-300);
    (gap > LEVELS_GAP * median(&x) && ashman_d > 4.0).then_some(gap)
}

/// How far apart a run's samples are: interquartile range over median.
fn relative_iqr(samples: &[f64]) -> f64 {
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
    (at(0.75) - at(0.25)) / at(0.5)
}

/// Whether the new run's samples of a host-bound case spread far more than in any baseline run
/// (twice the widest, and over 1%): something on the host disturbed the case while it ran,
/// which the run's average load may not show (a burst of other work during a 2-second case).
fn disturbed(base_runs: &[Vec<f64>], new: &[f64]) -> Option<(f64, f64)> {
    let widest = base_runs
        .iter()
        .map(|s| relative_iqr(s))
        .fold(0.0f64, f64::max);
    let spread = relative_iqr(new);
    (spread > 2.0 * widest && spread > 0.01).then_some((spread, widest))
}

fn geometric_mean(x: &[f64]) -> f64 {
    (x.iter().map(|v| v.ln()).sum::<f64>() / x.len() as f64).exp()
}

/// Benjamini-Hochberg over the cases that have p-values: "slower" and "faster" each adjusted
/// as a family of its own (each is a one-sided claim the gate makes).
fn adjust_benjamini_hochberg(cases: &mut [CaseComparison]) {
    let tested: Vec<usize> = (0..cases.len())
        .filter(|&i| cases[i].p_slower.is_some())
        .collect();
    let slower: Vec<f64> = tested.iter().filter_map(|&i| cases[i].p_slower).collect();
    let faster: Vec<f64> = tested.iter().filter_map(|&i| cases[i].p_faster).collect();
    let (slower, faster) = (benjamini_hochberg(&slower), benjamini_hochberg(&faster));
    for (n, &i) in tested.iter().enumerate() {
        cases[i].p_slower = Some(slower[n]);
        cases[i].p_faster = Some(faster[n]);
    }
}

/// Benjamini-Hochberg adjusted p-values of `p`, in the same order.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let m = p.len() as f64;
    let mut adjusted = vec![0.0; p.len()];
    let mut running_min = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running_min = running_min.min(p[i] * m / (rank + 1) as f64);
        adjusted[i] = running_min;
    }
    adjusted
}

/// Two-sided Mann-Whitney U test, normal approximation with tie correction and continuity
/// correction. Identical constant samples give p = 1.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, usize)> = a
        .iter()
        .map(|&x| (x, 0))
        .chain(b.iter().map(|&x| (x, 1)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let average_rank = (i + j) as f64 / 2.0 + 1.0;
        let ties = (j - i + 1) as f64;
        tie_term += ties * ties * ties - ties;
        rank_sum_a +=
            all[i..=j].iter().filter(|(_, side)| *side == 0).count() as f64 * average_rank;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let total = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    if variance <= 0.0 {
        return 1.0;
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    let normal = Normal::new(0.0, 1.0).expect("standard normal");
    (2.0 * (1.0 - normal.cdf(z))).min(1.0)
}

fn median(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    median_in_place(&mut v)
}

fn median_in_place(v: &mut [f64]) -> f64 {
    let n = v.len();
    let (_, &mut upper, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        upper
    } else {
        let lower = v[..n / 2].iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    }
}

const BOOTSTRAP_RESAMPLES: usize = 1000;

/// Percentile bootstrap 95% CI of median(b) / median(a), with a fixed seed so a comparison is
/// reproducible.
pub fn bootstrap_ratio_ci95(a: &[f64], b: &[f64]) -> (f64, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(0x6b62_656e_6368);
    let mut ratios = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let (mut ra, mut rb) = (vec![0.0; a.len()], vec![0.0; b.len()]);
    for _ in 0..BOOTSTRAP_RESAMPLES {
        ra.iter_mut()
            .for_each(|x| *x = a[rng.random_range(0..a.len())]);
        rb.iter_mut()
            .for_each(|x| *x = b[rng.random_range(0..b.len())]);
        ratios.push(median_in_place(&mut rb) / median_in_place(&mut ra));
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| {
        ratios
            [((q * (BOOTSTRAP_RESAMPLES - 1) as f64).round() as usize).min(BOOTSTRAP_RESAMPLES - 1)]
    };
    (at(0.025), at(0.975))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Timing-like samples, seeded: multiplicative noise (a sum of uniforms, roughly normal) and
    /// an occasional slow outlier.
    fn noisy(seed: u64, n: usize, center: f64, rel_noise: f64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let u: f64 = (0..4).map(|_| rng.random::<f64>() - 0.5).sum::<f64>();
                let outlier = if rng.random::<f64>() < 0.03 { 1.2 } else { 1.0 };
                center * (1.0 + rel_noise * u) * outlier
            })
            .collect()
    }

    const SETTINGS: CompareSettings = CompareSettings {
        min_effect: 0.03,
        fdr: 0.05,
        allow_different_device: false,
    };

    /// Both directions' adjusted p-values the same: the two-sided p of one baseline run.
    fn both(p: f64) -> Adjusted {
        Adjusted {
            slower: p,
            faster: p,
        }
    }

    fn judge(a: &[f64], b: &[f64]) -> Verdict {
        let p = mann_whitney_p(a, b);
        decide(
            both(p),
            median(b) / median(a),
            bootstrap_ratio_ci95(a, b),
            &SETTINGS,
        )
    }

    #[test]
    fn a_case_that_moved_gpu_is_judged_with_the_gpus_difference_allowed() {
        // 5% slower, significant: slower in place.
        let (p, ratio, ci) = (both(1e-6), 1.05, (1.04, 1.06));
        assert_eq!(decide(p, ratio, ci, &SETTINGS), Verdict::Slower);
        // Moved to a GPU whose copy peak is 4% lower: within 3% + 4%, not slower.
        assert_eq!(
            decide_moved(p, ratio, ci, &SETTINGS, Some(0.96)),
            Verdict::Inconclusive
        );
        // Moved to a GPU 1% apart: 5% is still more than 3% + 1%.
        assert_eq!(
            decide_moved(p, ratio, ci, &SETTINGS, Some(1.01)),
            Verdict::Slower
        );
        // Peaks unknown: never called slower.
        assert_eq!(
            decide_moved(p, ratio, ci, &SETTINGS, None),
            Verdict::Inconclusive
        );
        let same = (both(0.5), 1.0, (0.99, 1.01));
        assert_eq!(
            decide_moved(same.0, same.1, same.2, &SETTINGS, Some(0.96)),
            Verdict::Same
        );
    }

    #[test]
    fn a_five_percent_slowdown_is_caught() {
        for seed in 0..20 {
            let a = noisy(seed, 20, 1e-3, 0.02);
            let b = noisy(seed + 1000, 20, 1.05e-3, 0.02);
            assert_eq!(judge(&a, &b), Verdict::Slower, "seed {seed}");
            assert_eq!(judge(&b, &a), Verdict::Faster, "seed {seed}");
        }
    }

    #[test]
    fn identical_distributions_are_never_slower() {
        for seed in 0..200 {
            let a = noisy(seed, 20, 1e-3, 0.02);
            let b = noisy(seed + 5000, 20, 1e-3, 0.02);
            let v = judge(&a, &b);
            assert!(
                matches!(v, Verdict::Same | Verdict::Inconclusive),
                "seed {seed}: {v:?}"
            );
        }
        // The very same samples: p = 1 and a ratio CI around 1.
        let a = noisy(1, 30, 1e-3, 0.01);
        assert_eq!(judge(&a, &a), Verdict::Same);
    }

    /// `decide` on a run-level test of one case alone (no other case in the family).
    fn run_verdict(base: &[f64], new: f64) -> Verdict {
        let t = run_level_test(base, new);
        let p = Adjusted {
            slower: t.p_slower,
            faster: t.p_faster,
        };
        decide(p, t.ratio, t.ci90, &SETTINGS)
    }

    #[test]
    fn several_baseline_runs_set_the_noise_floor() {
        // Five baseline runs whose medians wander by a few percent, as separate processes do.
        let noisy_runs = [1.00e-3, 1.04e-3, 0.97e-3, 1.06e-3, 1.01e-3];
        let t = run_level_test(&noisy_runs, 1.07e-3);
        assert!(
            t.ratio > 1.03 && t.p_slower > 0.05,
            "a 7% difference is within this case's run-to-run noise: p={}",
            t.p_slower
        );
        assert_eq!(run_verdict(&noisy_runs, 1.07e-3), Verdict::Inconclusive);
        // Stable runs: the same 7% stands out.
        let stable_runs = [1.000e-3, 1.002e-3, 0.999e-3, 1.001e-3, 1.000e-3];
        let t = run_level_test(&stable_runs, 1.07e-3);
        assert!(t.p_slower < 1e-4, "p={}", t.p_slower);
        assert!(t.p_faster > 0.999, "p={}", t.p_faster);
        assert_eq!(run_verdict(&stable_runs, 1.07e-3), Verdict::Slower);
        assert_eq!(run_verdict(&stable_runs, 1.0005e-3), Verdict::Same);
        // The prediction interval: t(0.975, 4) = 2.776, t(0.95, 4) = 2.132, sd of log medians,
        // sqrt(1 + 1/5).
        let logs: Vec<f64> = noisy_runs.iter().map(|m: &f64| m.ln()).collect();
        let mean = logs.iter().sum::<f64>() / 5.0;
        let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let t = run_level_test(&noisy_runs, mean.exp());
        assert!(
            (t.ci95.1.ln() - 2.776_445 * sd * 1.2f64.sqrt()).abs() < 1e-5,
            "{:?}",
            t.ci95
        );
        assert!(
            (t.ci90.1.ln() - 2.131_847 * sd * 1.2f64.sqrt()).abs() < 1e-5,
            "{:?}",
            t.ci90
        );
        assert!((t.spread - (sd.exp() - 1.0)).abs() < 1e-12);
        // One-sided: the two directions' p-values add up to 1; at the mean both are 1/2.
        assert!((t.p_slower - 0.5).abs() < 1e-9 && (t.p_faster - 0.5).abs() < 1e-9);
    }

    /// k baseline medians and one new median of a case whose run-to-run noise is `noise`
    /// (relative, roughly normal on the log scale), the new one `shift` slower.
    fn runs(seed: u64, k: usize, noise: f64, shift: f64) -> (Vec<f64>, f64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut draw = || {
            // The sum of 12 uniforms less 6: standard normal to a good approximation.
            let z: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
            1e-5 * (noise * z).exp()
        };
        let base: Vec<f64> = (0..k).map(|_| draw()).collect();
        let new = draw() * (1.0 + shift);
        (base, new)
    }

    #[test]
    fn ten_baselines_with_one_percent_noise_decide_same_and_catch_five_percent() {
        let (mut same, mut slower_aa, mut caught) = (0, 0, 0);
        for seed in 0..200 {
            let (base, new) = runs(seed, 10, 0.01, 0.0);
            match run_verdict(&base, new) {
                Verdict::Same => same += 1,
                Verdict::Slower => slower_aa += 1,
                _ => {}
            }
            let (base, new) = runs(seed + 10_000, 10, 0.01, 0.05);
            caught += usize::from(run_verdict(&base, new) == Verdict::Slower);
        }
        // The 90% interval (TOST) of an unchanged case: t(0.95, 9) * 1% * sqrt(1.1) = 1.9%
        // around a change that is itself N(0, 1.05%): within 3% about 2 times in 3 (with the
        // 95% interval the gate used before, 1.5 times in 3).
        assert!(same >= 110, "only {same} of 200 A/A cases judged same");
        assert!(slower_aa <= 10, "{slower_aa} of 200 A/A cases slower");
        // 5% on 1% noise: t = 4.8 on 9 degrees of freedom, then the minimum effect of 3%.
        assert!(
            caught >= 180,
            "a 5% slowdown caught only {caught} of 200 times"
        );
        // One seeded pair, as the brief puts it: noise 1%, 10 baselines, min effect 3%.
        let (base, new) = runs(7, 10, 0.01, 0.0);
        assert_eq!(run_verdict(&base, new), Verdict::Same, "{base:?} {new}");
        let (base, new) = runs(7, 10, 0.01, 0.05);
        assert_eq!(run_verdict(&base, new), Verdict::Slower, "{base:?} {new}");
    }

    #[test]
    fn an_eight_percent_noise_is_inconclusive_and_says_what_it_could_detect() {
        let (mut slower, mut detectable_all) = (0, Vec::new());
        for seed in 0..100 {
            let (base, new) = runs(seed, 10, 0.08, 0.0);
            let t = run_level_test(&base, new);
            let verdict = run_verdict(&base, new);
            assert_ne!(verdict, Verdict::Same, "seed {seed}");
            slower += usize::from(verdict == Verdict::Slower);
            detectable_all.push(detectable_change(t.spread, 10, 1, &SETTINGS));
        }
        // Ten runs estimate an 8% spread loosely; the detectable change follows the estimate:
        // at least 8% in 9 of 10 draws, about 23% (the figure below) in the middle.
        detectable_all.sort_by(f64::total_cmp);
        assert!(detectable_all[10] >= 0.08, "{detectable_all:?}");
        assert!(detectable_all[50] >= 0.18, "{detectable_all:?}");
        // Alone in its family, a case is tested at the false-discovery rate, 5% one-sided.
        assert!(slower <= 8, "{slower} of 100 A/A cases slower");
        // By hand: spread 8%, 10 runs, one case: (t(0.95, 9) + t(0.8, 9)) * ln(1.08) * sqrt(1.1).
        let expected = ((1.833_113 + 0.883_404) * 1.08f64.ln() * 1.1f64.sqrt()).exp() - 1.0;
        let got = detectable_change(0.08, 10, 1, &SETTINGS);
        assert!((got - expected).abs() < 1e-5, "{got} vs {expected}");
        // A quiet case is held to the minimum effect: 3% plus the power margin.
        let quiet = detectable_change(0.001, 10, 1, &SETTINGS);
        assert!(quiet > 0.03 && quiet < 0.032, "{quiet}");
        // More cases in the family ask for a smaller p: a larger detectable change.
        assert!(
            detectable_change(0.01, 10, 81, &SETTINGS) > detectable_change(0.01, 10, 1, &SETTINGS)
        );
    }

    #[test]
    fn a_median_on_timer_ticks_is_held_to_half_a_tick_and_a_disturbed_run_is_seen() {
        // A 300 ns case timed in 10 ns ticks: nine baselines at exactly 300 ns, one at 301.
        let ticks: Vec<Vec<f64>> = (0..10)
            .map(|i| {
                let mut s = vec![300e-9; 20];
                s.extend([310e-9; 8]);
                if i == 3 {
                    s.push(301e-9);
                }
                s
            })
            .collect();
        assert!((timer_tick_s(&ticks) - 1e-9).abs() < 1e-15);
        let quantized: Vec<Vec<f64>> = (0..10)
            .map(|_| [[300e-9; 20], [310e-9; 20]].concat())
            .collect();
        assert!((timer_tick_s(&quantized) - 10e-9).abs() < 1e-15);
        assert_eq!(timer_tick_s(&[vec![1.0; 5]]), 0.0);
        // Medians of 300 ns, and one flipped a tick up: the bare test calls it slower, the
        // floor of half a tick (1.7%) does not.
        let medians = [300e-9; 10];
        assert_eq!(run_verdict(&medians, 310e-9), Verdict::Slower);
        let floor = (1.0 + 0.5 * 10e-9 / 300e-9f64).ln();
        let t = run_level_test_floored(&medians, 310e-9, floor);
        assert!(t.p_slower > 0.01, "{t:?}");
        assert!((t.spread - 0.5 * 10.0 / 300.0).abs() < 1e-9, "{t:?}");
        // A new run whose samples spread 8% where the baselines' spread 2% at most: disturbed.
        let steady: Vec<Vec<f64>> = (0..10).map(|s| noisy(s, 30, 1e-3, 0.02)).collect();
        assert_eq!(disturbed(&steady, &noisy(99, 30, 1e-3, 0.02)), None);
        let (new, widest) = disturbed(&steady, &noisy(99, 30, 1e-3, 0.12)).expect("disturbed");
        assert!(new > 2.0 * widest && widest < 0.03, "{new} {widest}");
    }

    /// Samples of a reduction of several kernels at n = 1e6 on the H100: even and odd samples
    /// at 14.9 and 13.95 µs, each with its own small spread.
    fn alternating(seed: u64, n: usize) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let level = if i % 2 == 0 { 14.9e-6 } else { 13.95e-6 };
                level * (1.0 + 0.01 * (rng.random::<f64>() - 0.5))
            })
            .collect()
    }

    #[test]
    fn samples_at_two_levels_are_found_and_steady_ones_are_not() {
        let gap = alternation_gap_s(&alternating(1, 140)).expect("alternates");
        assert!((gap - 0.95e-6).abs() < 0.05e-6, "{gap}");
        // Shuffled, the same values are two modes, not an alternation.
        let mut shuffled = alternating(2, 140);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.random_range(0..=i));
        }
        assert_eq!(alternation_gap_s(&shuffled), None);
        let modes = two_modes_gap_s(&shuffled).expect("two modes");
        assert!((modes - 0.95e-6).abs() < 0.1e-6, "{modes}");
        // Steady samples (2% noise with outliers) never show two levels, in 200 draws.
        for seed in 0..200 {
            let s = noisy(seed, 100, 1e-5, 0.02);
            assert_eq!(alternation_gap_s(&s), None, "seed {seed}");
            assert_eq!(two_modes_gap_s(&s), None, "seed {seed}");
        }
        // Two levels 2% apart are within the 3% bound: not reported.
        let close: Vec<f64> = (0..100)
            .map(|i| if i % 2 == 0 { 1.02e-5 } else { 1e-5 })
            .collect();
        assert_eq!(alternation_gap_s(&close), None);
        // A case: reported where half its baseline runs or more show the levels.
        let mut runs: Vec<Vec<f64>> = (0..6).map(|s| alternating(s, 120)).collect();
        runs.extend((0..4).map(|s| noisy(s, 120, 14.4e-6, 0.01)));
        let levels = sample_levels(&runs).expect("6 of 10 runs alternate");
        assert_eq!((levels.kind, levels.runs), (LevelsKind::Alternate, 6));
        runs.truncate(4);
        runs.extend((0..6).map(|s| noisy(s, 120, 14.4e-6, 0.01)));
        assert_eq!(sample_levels(&runs), None, "4 of 10 runs");
    }

    /// A comparison of one case whose new run was judged `verdict` at `ratio`.
    fn one_case(verdict: Verdict, ratio: f64) -> Comparison {
        let c = CaseComparison {
            variant: "fast".into(),
            params: "n=1000".into(),
            base_median_s: Some(1e-5),
            new_median_s: Some(1e-5 * ratio),
            ratio: Some(ratio),
            ratio_ci95: None,
            ratio_ci90: None,
            p_value: None,
            p_adjusted: None,
            verdict,
            note: None,
            baseline_spread: Some(0.01),
            detectable_change: None,
            loaded: false,
            disturbed: None,
            p_slower: None,
            p_faster: None,
            host_bound: false,
            moved: None,
            sample_levels: None,
            retest: None,
        };
        Comparison {
            study: "s".into(),
            baseline_runs: 10,
            min_effect: 0.03,
            fdr: 0.05,
            cases: vec![c],
            only_in_baseline: Vec::new(),
            only_in_new: Vec::new(),
            load: None,
            retest: None,
        }
    }

    #[test]
    fn a_retest_confirms_or_clears_a_slower_case() {
        // Not reproduced: inconclusive, with its detectable change and both ratios.
        let mut result = one_case(Verdict::Slower, 14.75);
        apply_retest(
            &mut result,
            &one_case(Verdict::Same, 1.012),
            "r.json",
            &SETTINGS,
        );
        let c = &result.cases[0];
        assert_eq!(c.verdict, Verdict::Inconclusive);
        assert_eq!(
            c.note.as_deref(),
            Some("not reproduced: +1375.0% then +1.2% on retest")
        );
        assert_eq!(
            c.detectable_change,
            Some(detectable_change(0.01, 10, 1, &SETTINGS))
        );
        assert!(!result.regressed());
        let summary = result.retest.as_ref().unwrap();
        assert_eq!((summary.retested, summary.confirmed), (1, 0));
        // Slower again: it stays slower.
        let mut result = one_case(Verdict::Slower, 1.06);
        apply_retest(
            &mut result,
            &one_case(Verdict::Slower, 1.05),
            "r.json",
            &SETTINGS,
        );
        assert_eq!(result.cases[0].verdict, Verdict::Slower);
        assert_eq!(
            result.cases[0].note.as_deref(),
            Some("confirmed on retest: +6.0% then +5.0%")
        );
        assert_eq!(result.retest.as_ref().unwrap().confirmed, 1);
        // Slower by less than the minimum effect, or inconclusive, on retest: not confirmed.
        let mut result = one_case(Verdict::Slower, 1.06);
        apply_retest(
            &mut result,
            &one_case(Verdict::Inconclusive, 1.05),
            "r.json",
            &SETTINGS,
        );
        assert_eq!(result.cases[0].verdict, Verdict::Inconclusive);
        // No result in the retest: the gate does not pass what it could not check.
        let mut result = one_case(Verdict::Slower, 1.06);
        let mut missing = one_case(Verdict::NotCompared, 1.0);
        missing.cases[0].ratio = None;
        apply_retest(&mut result, &missing, "r.json", &SETTINGS);
        assert_eq!(result.cases[0].verdict, Verdict::Slower);
        // Cases that were not slower are left alone.
        let mut result = one_case(Verdict::Same, 1.0);
        apply_retest(
            &mut result,
            &one_case(Verdict::Slower, 1.5),
            "r.json",
            &SETTINGS,
        );
        assert_eq!(result.cases[0].verdict, Verdict::Same);
        assert_eq!(result.retest.as_ref().unwrap().retested, 0);
    }

    #[test]
    fn mann_whitney_matches_a_hand_computed_case() {
        // a = 1..5, b = 6..10: U = 0, mean 12.5, var 25*11/12, z = (12.5 - 0.5)/sqrt(22.9167).
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [6.0, 7.0, 8.0, 9.0, 10.0];
        let z: f64 = 12.0 / (25.0f64 * 11.0 / 12.0).sqrt();
        let expected = 2.0 * (1.0 - Normal::new(0.0, 1.0).unwrap().cdf(z));
        assert!((mann_whitney_p(&a, &b) - expected).abs() < 1e-12);
        assert_eq!(mann_whitney_p(&[1.0; 5], &[1.0; 5]), 1.0);
    }

    #[test]
    fn benjamini_hochberg_matches_the_textbook_example() {
        let p = [0.01, 0.04, 0.03, 0.005];
        let adjusted = benjamini_hochberg(&p);
        let expected = [0.02, 0.04, 0.04, 0.02];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{adjusted:?}");
        }
    }

    #[test]
    fn fdr_is_controlled_across_a_large_grid() {
        // 400 cases: 380 unchanged, 20 truly 6% slower, 10 samples each (small, noisy).
        let mut comparisons = Vec::new();
        for i in 0..400u64 {
            let shift = if i < 20 { 1.06 } else { 1.0 };
            let a = noisy(i, 10, 1e-3, 0.03);
            let b = noisy(i + 100_000, 10, 1e-3 * shift, 0.03);
            comparisons.push((i < 20, a, b));
        }
        let p: Vec<f64> = comparisons
            .iter()
            .map(|(_, a, b)| mann_whitney_p(a, b))
            .collect();
        let adjusted = benjamini_hochberg(&p);
        let mut false_slower = 0;
        let mut true_slower = 0;
        for ((truly, a, b), q) in comparisons.iter().zip(&adjusted) {
            if decide(
                both(*q),
                median(b) / median(a),
                bootstrap_ratio_ci95(a, b),
                &SETTINGS,
            ) == Verdict::Slower
            {
                if *truly {
                    true_slower += 1;
                } else {
                    false_slower += 1;
                }
            }
        }
        // Raw p < 0.05 would flag ~19 of the 380 unchanged cases; BH keeps false discoveries rare.
        let raw_false = p.iter().skip(20).filter(|&&p| p < 0.05).count();
        assert!(
            raw_false >= 5,
            "the raw test should have false positives to control ({raw_false})"
        );
        assert!(
            false_slower <= 1,
            "{false_slower} unchanged cases called slower"
        );
        assert!(
            true_slower >= 10,
            "only {true_slower} of 20 real slowdowns found"
        );
    }
}
