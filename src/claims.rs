//! Claims judged against a run: each `[[claim]]` of a manifest gets `holds`, `refuted` or
//! `inconclusive`, per case and overall, with its evidence.
//!
//! Comparisons rest on the interval of a ratio, as the regression gate's do with one baseline
//! run: a bootstrap 95% interval of the ratio of two cases' medians from their samples. A claim
//! holds where the whole interval is on its side of the bound, is refuted where the whole
//! interval is on the other, and is inconclusive otherwise, or where a case did not run (no GPU:
//! `inconclusive (skipped)`, never refuted). Overall: refuted if any case is, holds if every case
//! does, inconclusive otherwise.

use crate::compare::bootstrap_ratio_ci95;
use crate::manifest::{selected, Check, ClaimSpec, Manifest, Quantity};
use crate::record::{
    CaseResult, CaseStatus, ClaimCase, ClaimStatus, ClaimVerdict, DeviceFingerprint, PeakKind,
    ResultsDoc,
};
use crate::vocab::{describe_params, Params};

/// Judges every claim of `manifest` on `doc`'s cases.
pub fn judge_all(manifest: &Manifest, doc: &ResultsDoc) -> Vec<ClaimVerdict> {
    manifest.claims.iter().map(|c| judge(c, doc)).collect()
}

pub fn judge(claim: &ClaimSpec, doc: &ResultsDoc) -> ClaimVerdict {
    let of = |variant: &str| -> Vec<&CaseResult> {
        doc.cases
            .iter()
            .filter(|c| c.variant == variant && selected(&claim.select, &c.params))
            .collect()
    };
    let cases = match &claim.check {
        Check::Faster { a, b, by } => faster(&of(a), &of(b), *by),
        Check::ReachesPeak { a, share } => {
            let device = doc.environment.device.as_ref();
            of(a)
                .into_iter()
                .map(|c| reaches_peak(c, *share, device))
                .collect()
        }
        Check::Passes { variants } => variants.iter().flat_map(|v| of(v)).map(passes).collect(),
        Check::Trend {
            a,
            quantity,
            along,
            rising,
        } => trend(&of(a), *quantity, along, *rising),
    };
    let status = if cases.is_empty() {
        ClaimStatus::Inconclusive
    } else if cases.iter().any(|c| c.status == ClaimStatus::Refuted) {
        ClaimStatus::Refuted
    } else if cases.iter().all(|c| c.status == ClaimStatus::Holds) {
        ClaimStatus::Holds
    } else {
        ClaimStatus::Inconclusive
    };
    let count = |s: ClaimStatus| cases.iter().filter(|c| c.status == s).count();
    let skipped = cases.iter().filter(|c| c.skipped).count();
    let evidence = if cases.is_empty() {
        "no case of the study matches the claim".to_string()
    } else {
        let mut text = format!(
            "{} of {} cases hold, {} refuted, {} inconclusive",
            count(ClaimStatus::Holds),
            cases.len(),
            count(ClaimStatus::Refuted),
            count(ClaimStatus::Inconclusive)
        );
        if skipped > 0 {
            text.push_str(&format!(" ({skipped} skipped)"));
        }
        // The case that decided it: the first refuted one, else the first inconclusive one, else
        // the one that came closest to failing.
        let closest = cases.iter().min_by(|x, y| {
            let m = |c: &ClaimCase| c.margin.unwrap_or(f64::INFINITY);
            m(x).total_cmp(&m(y))
        });
        let decisive = cases
            .iter()
            .find(|c| c.status == ClaimStatus::Refuted)
            .or_else(|| cases.iter().find(|c| c.status == ClaimStatus::Inconclusive))
            .or(closest);
        if let Some(c) = decisive {
            text.push_str(&format!("; {}: {}", c.point, c.evidence));
        }
        text
    };
    ClaimVerdict {
        text: claim.text.clone(),
        source: claim.source.clone(),
        kind: claim.check.kind().to_string(),
        status,
        skipped: skipped > 0 && skipped == cases.len(),
        evidence,
        cases,
    }
}

/// A case that cannot be judged: why, and whether it was skipped (no GPU).
fn not_measured(point: String, case: &CaseResult) -> ClaimCase {
    let (evidence, skipped) = match case.status {
        CaseStatus::Skipped => (
            format!("skipped: {}", case.reason.clone().unwrap_or_default()),
            true,
        ),
        status => (
            format!(
                "{}: {}",
                status.name(),
                case.reason.clone().unwrap_or_default()
            ),
            false,
        ),
    };
    ClaimCase {
        point,
        status: ClaimStatus::Inconclusive,
        skipped,
        estimate: None,
        ci95: None,
        evidence,
        margin: None,
    }
}

/// A case whose GB/s is above what the memory can physically move (`CaseResult::implausible`):
/// any claim on its time fails, with the reason.
fn implausible(point: String, case: &CaseResult) -> ClaimCase {
    ClaimCase {
        point,
        status: ClaimStatus::Refuted,
        skipped: false,
        estimate: None,
        ci95: None,
        evidence: format!(
            "{} is implausible: {}",
            case.variant,
            case.implausible_reason
                .as_deref()
                .unwrap_or("faster than the memory can be")
        ),
        margin: None,
    }
}

fn samples(case: &CaseResult) -> Option<&[f64]> {
    match (case.status, &case.measurement) {
        (CaseStatus::Passed, Some(m)) if !m.samples_s.is_empty() => Some(&m.samples_s),
        _ => None,
    }
}

/// The verdict on an interval against a bound: above it holds, below it is refuted.
fn against(ci: (f64, f64), bound: f64) -> ClaimStatus {
    if ci.0 >= bound {
        ClaimStatus::Holds
    } else if ci.1 < bound {
        ClaimStatus::Refuted
    } else {
        ClaimStatus::Inconclusive
    }
}

/// Whether two cases are at the same grid point: equal on every axis both have, but those in
/// `apart`.
fn same_point(a: &Params, b: &Params, apart: &[&str]) -> bool {
    a.iter()
        .all(|(k, v)| apart.contains(&k.as_str()) || b.get(k).is_none_or(|w| w == v))
}

/// The axes on which `a`'s cases and `b`'s share no value: their variants fix them apart (32
/// threads a block against 1024), so a comparison pairs the cases across them.
fn axes_apart<'a>(a: &[&'a CaseResult], b: &[&CaseResult]) -> Vec<&'a str> {
    let mut axes: Vec<&str> = a
        .iter()
        .flat_map(|c| c.params.keys())
        .map(|k| k.as_str())
        .collect();
    axes.sort();
    axes.dedup();
    axes.retain(|axis| {
        let in_b: Vec<_> = b.iter().filter_map(|c| c.params.get(*axis)).collect();
        !in_b.is_empty()
            && a.iter()
                .filter_map(|c| c.params.get(*axis))
                .all(|v| !in_b.contains(&v))
    });
    axes
}

fn faster(a: &[&CaseResult], b: &[&CaseResult], by: f64) -> Vec<ClaimCase> {
    let apart = axes_apart(a, b);
    let mut out = Vec::new();
    for ca in a {
        for cb in b
            .iter()
            .filter(|cb| same_point(&ca.params, &cb.params, &apart))
        {
            let point = describe_params(if ca.params.len() >= cb.params.len() {
                &ca.params
            } else {
                &cb.params
            });
            if let Some(bad) = [ca, cb].into_iter().find(|c| c.implausible) {
                out.push(implausible(point, bad));
                continue;
            }
            let (Some(sa), Some(sb)) = (samples(ca), samples(cb)) else {
                let unmeasured = if samples(ca).is_none() { ca } else { cb };
                out.push(not_measured(point, unmeasured));
                continue;
            };
            // median(b) / median(a): how many times faster a is.
            let ci = bootstrap_ratio_ci95(sa, sb);
            let estimate = cb.median_s().unwrap_or(f64::NAN) / ca.median_s().unwrap_or(f64::NAN);
            out.push(ClaimCase {
                point,
                status: against(ci, by),
                skipped: false,
                estimate: Some(estimate),
                ci95: Some(ci),
                evidence: format!(
                    "{} is {estimate:.3}x as fast as {} (95% CI {:.3} .. {:.3}; needs {by}x)",
                    ca.variant, cb.variant, ci.0, ci.1
                ),
                margin: Some(ci.0 / by),
            });
        }
    }
    out
}

/// Whether the case reaches `share` of the measured peak matching its traffic (the one it
/// recorded; `device`'s copy peak in files written before cases recorded theirs).
fn reaches_peak(case: &CaseResult, share: f64, device: Option<&DeviceFingerprint>) -> ClaimCase {
    let point = describe_params(&case.params);
    if case.implausible {
        return implausible(point, case);
    }
    let (kind, peak) = match (case.peak_kind, case.peak_gbytes_per_s) {
        (Some(kind), Some(peak)) => (kind, Some(peak)),
        _ => (PeakKind::Copy, device.map(|d| d.measured_copy_gbytes_per_s)),
    };
    let (Some(summary), Some(peak)) = (
        case.summary.as_ref().filter(|_| samples(case).is_some()),
        peak.filter(|p| *p > 0.0),
    ) else {
        return not_measured(point, case);
    };
    let of_peak = |seconds: f64| case.bytes_moved as f64 / seconds / 1e9 / peak;
    // A longer time is a smaller share: the interval's ends swap.
    let ci = (
        of_peak(summary.median_ci95_s.1),
        of_peak(summary.median_ci95_s.0),
    );
    let estimate = of_peak(summary.median_s);
    ClaimCase {
        point,
        status: against(ci, share),
        skipped: false,
        estimate: Some(estimate),
        ci95: Some(ci),
        margin: Some(ci.0 / share),
        evidence: format!(
            "{:.1}% of the {} peak (95% CI {:.1}% .. {:.1}%; needs {:.1}%){}",
            estimate * 100.0,
            kind.name(),
            ci.0 * 100.0,
            ci.1 * 100.0,
            share * 100.0,
            // A share above 100% is flagged with its cause: the claim's reader sees it too.
            case.above_peak
                .as_ref()
                .map_or(String::new(), |a| format!("; above its peak: {}", a.reason))
        ),
    }
}

fn passes(case: &CaseResult) -> ClaimCase {
    let point = format!("{} {}", case.variant, describe_params(&case.params));
    let status = match case.status {
        CaseStatus::Passed => ClaimStatus::Holds,
        CaseStatus::AccuracyFailed => ClaimStatus::Refuted,
        _ => return not_measured(point, case),
    };
    ClaimCase {
        point,
        status,
        skipped: false,
        estimate: case.max_rel_err(),
        ci95: None,
        margin: None,
        evidence: match (status, case.max_rel_err()) {
            (ClaimStatus::Holds, Some(e)) => format!("within tolerance, max rel err {e:.1e}"),
            _ => case.reason.clone().unwrap_or_else(|| "wrong answer".into()),
        },
    }
}

/// The quantity's value for a case, and the interval of its ratio to another case's (where the
/// quantity comes from the samples).
fn trend(cases: &[&CaseResult], quantity: Quantity, along: &str, rising: bool) -> Vec<ClaimCase> {
    // Groups of cases equal on every axis but `along`, each ordered along it.
    let mut groups: Vec<Vec<&CaseResult>> = Vec::new();
    for case in cases {
        let rest = |c: &CaseResult| {
            let mut p = c.params.clone();
            p.remove(along);
            p
        };
        match groups.iter_mut().find(|g| rest(g[0]) == rest(case)) {
            Some(group) => group.push(case),
            None => groups.push(vec![case]),
        }
    }
    let mut out = Vec::new();
    for mut group in groups {
        group.sort_by(|x, y| x.params.get(along).cmp(&y.params.get(along)));
        for pair in group.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            let mut rest = prev.params.clone();
            let from = rest.remove(along).map_or("?".into(), |v| v.to_string());
            let to = next.params.get(along).map_or("?".into(), |v| v.to_string());
            let point = format!("{} {along}: {from} -> {to}", describe_params(&rest));
            // Accuracy figures are exact numbers, with no interval, and a case that failed its
            // check still has them.
            if quantity.is_accuracy() {
                let (Some(p), Some(n)) = (value(prev, quantity), value(next, quantity)) else {
                    let unchecked = if value(prev, quantity).is_none() {
                        prev
                    } else {
                        next
                    };
                    out.push(not_measured(point, unchecked));
                    continue;
                };
                out.push(trend_case(point, quantity, n / p, (n / p, n / p), rising));
                continue;
            }
            if let Some(bad) = [prev, next].into_iter().find(|c| c.implausible) {
                out.push(implausible(point, bad));
                continue;
            }
            let (Some(sp), Some(sn)) = (samples(prev), samples(next)) else {
                let unmeasured = if samples(prev).is_none() { prev } else { next };
                out.push(not_measured(point, unmeasured));
                continue;
            };
            // next / prev of the quantity. Times scale with the median; rates with its inverse
            // times the work.
            let (estimate, ci) = match quantity {
                Quantity::Median | Quantity::Mean | Quantity::Min => {
                    let ci = bootstrap_ratio_ci95(sp, sn);
                    (ratio(value(next, quantity), value(prev, quantity)), ci)
                }
                Quantity::GbytesPerS | Quantity::GflopsPerS | Quantity::PercentOfPeak => {
                    let work = |c: &CaseResult| match quantity {
                        Quantity::GflopsPerS => c.flops as f64,
                        _ => c.bytes_moved as f64,
                    };
                    let scale = work(next) / work(prev);
                    let times = bootstrap_ratio_ci95(sn, sp);
                    // A share of the peak moves with the GB/s: the same ratio.
                    let rate = match quantity {
                        Quantity::GflopsPerS => Quantity::GflopsPerS,
                        _ => Quantity::GbytesPerS,
                    };
                    (
                        ratio(value(next, rate), value(prev, rate)),
                        (scale * times.0, scale * times.1),
                    )
                }
                _ => {
                    let r = ratio(value(next, quantity), value(prev, quantity));
                    (r, (r, r))
                }
            };
            out.push(trend_case(point, quantity, estimate, ci, rising));
        }
    }
    out
}

/// One step of a trend: next / prev of the quantity, and its interval.
fn trend_case(
    point: String,
    quantity: Quantity,
    estimate: f64,
    ci: (f64, f64),
    rising: bool,
) -> ClaimCase {
    // Rising: next / prev above 1. Falling: below 1, i.e. prev / next above 1.
    let toward = if rising { ci } else { (1.0 / ci.1, 1.0 / ci.0) };
    ClaimCase {
        point,
        status: against(toward, 1.0),
        skipped: false,
        estimate: Some(estimate),
        ci95: Some(ci),
        evidence: format!(
            "{} changes by {estimate:.3}x (95% CI {:.3} .. {:.3})",
            quantity.name(),
            ci.0,
            ci.1
        ),
        margin: Some(toward.0),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> f64 {
    match (a, b) {
        (Some(a), Some(b)) => a / b,
        _ => f64::NAN,
    }
}

/// A quantity's value for one case (`speedup` needs a baseline: see `report::declared_tables`).
pub fn value(case: &CaseResult, quantity: Quantity) -> Option<f64> {
    let summary = case.summary.as_ref();
    match quantity {
        Quantity::Median => summary.map(|s| s.median_s),
        Quantity::Mean => summary.map(|s| s.mean_s),
        Quantity::Min => summary.map(|s| s.min_s),
        Quantity::GbytesPerS => case.gbytes_per_s,
        Quantity::GflopsPerS => case.gflops_per_s,
        Quantity::PercentOfPeak | Quantity::Speedup => None,
        Quantity::ShareWithinTolerance => case.share_within_tolerance().map(|s| s * 100.0),
        Quantity::MaxRelErr => case.max_rel_err(),
    }
}
