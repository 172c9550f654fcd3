//! The regression gate: a new results file against one or more baseline runs of the same study,
//! matched case by case (variant and grid point).
//!
//! Each case gets a p-value: against several baseline runs, from the spread of the runs' medians
//! (run-to-run variation is what makes a binary compared with itself look slower); against a
//! single run, from a Mann-Whitney U test on the raw samples. A case is `slower` (or `faster`)
//! when its p-value survives Benjamini-Hochberg control of the false-discovery rate over every
//! compared case *and* the ratio of medians moves by more than the minimum effect; `same` when the
//! 95% interval of the ratio lies within the minimum effect; `inconclusive` otherwise. Only
//! `slower`, or a case that newly fails (wrong answer, error), fails the gate: improvements never
//! do.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

use crate::record::{CaseResult, CaseStatus, DeviceKey, ResultsDoc};
use crate::vocab::describe_params;

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
    pub p_value: Option<f64>,
    /// After Benjamini-Hochberg over all compared cases.
    pub p_adjusted: Option<f64>,
    pub verdict: Verdict,
    pub note: Option<String>,
    /// The case ran on another GPU than in the baseline (`run --devices`, or a merge of shards).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<DeviceMove>,
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

/// Refuses files that cannot be compared meaningfully: different studies, or different machines
/// unless `allow_different_device`.
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
    adjust_benjamini_hochberg(&mut cases);
    for c in &mut cases {
        if let (Some(p), Some(ratio), Some(ci)) = (c.p_adjusted, c.ratio, c.ratio_ci95) {
            c.verdict = match &c.moved {
                None => decide(p, ratio, ci, settings),
                Some(moved) => decide_moved(p, ratio, ci, settings, moved.copy_peak_ratio),
            };
        }
    }
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
    }
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

/// `decide` for a case that moved GPU: the bounds of slower and faster widened by the two
/// GPUs' copy-peak difference, or (not known) never slower or faster.
fn decide_moved(
    p_adjusted: f64,
    ratio: f64,
    ci: (f64, f64),
    settings: &CompareSettings,
    copy_peak_ratio: Option<f64>,
) -> Verdict {
    let Some(peak) = copy_peak_ratio.filter(|r| r.is_finite() && *r > 0.0) else {
        return match decide(p_adjusted, ratio, ci, settings) {
            Verdict::Slower | Verdict::Faster => Verdict::Inconclusive,
            v => v,
        };
    };
    let spread = peak.max(1.0 / peak);
    let widened = CompareSettings {
        min_effect: (1.0 + settings.min_effect) * spread - 1.0,
        ..*settings
    };
    match decide(p_adjusted, ratio, ci, &widened) {
        // Within the GPUs' difference: `same` only by the study's own bound, else inconclusive.
        Verdict::Same => match decide(p_adjusted, ratio, ci, settings) {
            Verdict::Same => Verdict::Same,
            _ => Verdict::Inconclusive,
        },
        v => v,
    }
}

fn decide(p_adjusted: f64, ratio: f64, ci: (f64, f64), settings: &CompareSettings) -> Verdict {
    let upper = 1.0 + settings.min_effect;
    let lower = 1.0 / upper;
    let significant = p_adjusted < settings.fdr;
    if significant && ratio > upper {
        Verdict::Slower
    } else if significant && ratio < lower {
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
        p_value: None,
        p_adjusted: None,
        verdict: Verdict::NotCompared,
        note: None,
        moved: None,
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
        out.p_value = Some(mann_whitney_p(&base_samples, &new_samples));
    } else {
        let (ratio, ci, p) = run_level_test(&base_medians, new_median);
        out.ratio = Some(ratio);
        out.ratio_ci95 = Some(ci);
        out.p_value = Some(p);
    }
    out
}

/// The new median against k >= 2 baseline medians: on the log scale, the baseline runs give a
/// mean and standard deviation, and a new run from the same population falls within
/// mean +- t(k-1) * sd * sqrt(1 + 1/k). Returns the ratio to the baseline's geometric mean, the
/// 95% interval of that ratio, and the two-sided p-value.
pub fn run_level_test(base_medians: &[f64], new_median: f64) -> (f64, (f64, f64), f64) {
    let k = base_medians.len() as f64;
    let logs: Vec<f64> = base_medians.iter().map(|m| m.ln()).collect();
    let mean = logs.iter().sum::<f64>() / k;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (k - 1.0)).sqrt();
    // Runs that agree to the last digit still differ by rounding: keep the scale above zero.
    let scale = sd.max(1e-6) * (1.0 + 1.0 / k).sqrt();
    let student = StudentsT::new(0.0, 1.0, k - 1.0).expect("k >= 2 gives a valid t distribution");
    let diff = new_median.ln() - mean;
    let half = student.inverse_cdf(0.975) * scale;
    let p = 2.0 * (1.0 - student.cdf((diff / scale).abs()));
    (
        diff.exp(),
        ((diff - half).exp(), (diff + half).exp()),
        p.min(1.0),
    )
}

fn geometric_mean(x: &[f64]) -> f64 {
    (x.iter().map(|v| v.ln()).sum::<f64>() / x.len() as f64).exp()
}

/// Benjamini-Hochberg adjusted p-values over the cases that have a p-value.
fn adjust_benjamini_hochberg(cases: &mut [CaseComparison]) {
    let tested: Vec<usize> = (0..cases.len())
        .filter(|&i| cases[i].p_value.is_some())
        .collect();
    let p: Vec<f64> = tested.iter().filter_map(|&i| cases[i].p_value).collect();
    for (&i, adjusted) in tested.iter().zip(benjamini_hochberg(&p)) {
        cases[i].p_adjusted = Some(adjusted);
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

    fn judge(a: &[f64], b: &[f64]) -> Verdict {
        let p = mann_whitney_p(a, b);
        decide(
            p,
            median(b) / median(a),
            bootstrap_ratio_ci95(a, b),
            &SETTINGS,
        )
    }

    #[test]
    fn a_case_that_moved_gpu_is_judged_with_the_gpus_difference_allowed() {
        // 5% slower, significant: slower in place.
        let (p, ratio, ci) = (1e-6, 1.05, (1.04, 1.06));
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
        let same = (0.5, 1.0, (0.99, 1.01));
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

    #[test]
    fn several_baseline_runs_set_the_noise_floor() {
        // Five baseline runs whose medians wander by a few percent, as separate processes do.
        let noisy_runs = [1.00e-3, 1.04e-3, 0.97e-3, 1.06e-3, 1.01e-3];
        let (ratio, ci, p) = run_level_test(&noisy_runs, 1.07e-3);
        assert!(
            ratio > 1.03 && p > 0.05,
            "a 7% difference is within this case's run-to-run noise: p={p}"
        );
        assert_eq!(decide(p, ratio, ci, &SETTINGS), Verdict::Inconclusive);
        // Stable runs: the same 7% stands out.
        let stable_runs = [1.000e-3, 1.002e-3, 0.999e-3, 1.001e-3, 1.000e-3];
        let (ratio, ci, p) = run_level_test(&stable_runs, 1.07e-3);
        assert!(p < 1e-4, "p={p}");
        assert_eq!(decide(p, ratio, ci, &SETTINGS), Verdict::Slower);
        let (ratio, ci, p) = run_level_test(&stable_runs, 1.0005e-3);
        assert_eq!(decide(p, ratio, ci, &SETTINGS), Verdict::Same);
        // The prediction interval: t(0.975, 4) = 2.776, sd of log medians, sqrt(1 + 1/5).
        let logs: Vec<f64> = noisy_runs.iter().map(|m: &f64| m.ln()).collect();
        let mean = logs.iter().sum::<f64>() / 5.0;
        let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
        let (_, ci, _) = run_level_test(&noisy_runs, mean.exp());
        assert!(
            (ci.1.ln() - 2.776_445 * sd * 1.2f64.sqrt()).abs() < 1e-5,
            "{ci:?}"
        );
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
                *q,
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
