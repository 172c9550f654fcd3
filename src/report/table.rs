//! The terminal table: one row per case (variant x grid point) with the median, its 95% CI,
//! throughput, % of the measured copy peak, speedup over the baseline variant, and accuracy;
//! then the reasons for every skipped or failed case.

use std::collections::BTreeMap;

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style};

use crate::schema::{CaseResult, CaseStatus, ResultsDoc};
use crate::stats;
use crate::vocab::{Backend, ParamValue};

/// How the table is drawn: box-drawing for terminals, or markdown to paste into a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableStyle {
    Terminal,
    Markdown,
}

pub fn render(doc: &ResultsDoc, axis_order: &[&str], style: TableStyle) -> String {
    let cases = &doc.cases;
    // Axes with more than one value get a column; the others go in the heading.
    let mut axis_values: BTreeMap<&str, Vec<&ParamValue>> = BTreeMap::new();
    for case in cases {
        for (name, value) in &case.params {
            let values = axis_values.entry(name.as_str()).or_default();
            if !values.contains(&value) {
                values.push(value);
            }
        }
    }
    let varying: Vec<&str> = axis_order
        .iter()
        .copied()
        .filter(|a| axis_values.get(a).is_some_and(|v| v.len() > 1))
        .collect();
    let fixed: Vec<String> = axis_order
        .iter()
        .filter_map(|a| match axis_values.get(a) {
            Some(v) if v.len() == 1 => Some(format!("{a}={}", v[0])),
            _ => None,
        })
        .collect();
    let show_scope = cases.iter().any(|c| c.scope.is_some());
    let peak_gbytes_per_s = doc
        .environment
        .device
        .as_ref()
        .map(|d| d.measured_copy_gbytes_per_s);

    let mut header: Vec<String> = vec!["variant".into()];
    header.extend(varying.iter().map(|a| a.to_string()));
    if show_scope {
        header.push("scope".into());
    }
    header.extend(["median", "95% CI", "GB/s"].map(String::from));
    if peak_gbytes_per_s.is_some() {
        header.push("% peak".into());
    }
    if doc.manifest.baseline.is_some() {
        header.push("speedup".into());
    }
    header.extend(["samples", "accuracy (rel err)"].map(String::from));
    let numeric_from = 1 + varying.len() + usize::from(show_scope);

    let mut builder = Builder::default();
    builder.push_record(header);
    for case in cases {
        let mut row = vec![case.variant.clone()];
        row.extend(
            varying
                .iter()
                .map(|a| case.params.get(*a).map_or("-".into(), |v| v.to_string())),
        );
        if show_scope {
            row.push(case.scope.map_or("-".into(), |s| s.name().to_string()));
        }
        match &case.summary {
            Some(s) => {
                row.push(format_seconds(s.median_s));
                // Under 6 samples no order-statistic interval reaches 95%.
                if s.samples < stats::MIN_SAMPLES_FOR_MEDIAN_CI {
                    row.push("n/a".into());
                } else {
                    let half_width =
                        (s.median_ci95_s.1 - s.median_ci95_s.0) / 2.0 / s.median_s * 100.0;
                    row.push(format!("±{half_width:.1}%"));
                }
                row.push(case.gbytes_per_s.map_or("-".into(), |g| format!("{g:.1}")));
                if let Some(peak) = peak_gbytes_per_s {
                    row.push(match (case.backend, case.gbytes_per_s) {
                        (Backend::Cuda, Some(g)) => format!("{:.0}%", g / peak * 100.0),
                        _ => "-".into(),
                    });
                }
            }
            None => {
                row.extend(["-", "-", "-"].map(String::from));
                if peak_gbytes_per_s.is_some() {
                    row.push("-".into());
                }
            }
        }
        if let Some(baseline) = &doc.manifest.baseline {
            row.push(speedup(case, baseline, cases).map_or("-".into(), |s| format!("{s:.2}x")));
        }
        row.push(
            case.summary
                .as_ref()
                .map_or("-".into(), |s| s.samples.to_string()),
        );
        row.push(accuracy_cell(case));
        builder.push_record(row);
    }
    let mut table = builder.build();
    match style {
        TableStyle::Terminal => table.with(Style::rounded()),
        TableStyle::Markdown => table.with(Style::markdown()),
    };
    table.modify(Columns::new(numeric_from..), Alignment::right());

    let count = |status: CaseStatus| cases.iter().filter(|c| c.status == status).count();
    let mut out = format!(
        "{}{}\n{} cases: {} passed, {} failed, {} skipped{}\n",
        doc.study.name,
        if doc.study.title.is_empty() {
            String::new()
        } else {
            format!(": {}", doc.study.title)
        },
        cases.len(),
        count(CaseStatus::Passed),
        cases.iter().filter(|c| c.failed()).count(),
        count(CaseStatus::Skipped),
        if fixed.is_empty() {
            String::new()
        } else {
            format!("  ({})", fixed.join(", "))
        },
    );
    if let Some(device) = &doc.environment.device {
        out.push_str(&format!(
            "device: {} (sm {}, {} SMs), measured copy peak {:.0} GB/s\n",
            device.name,
            device.compute_capability,
            device.sm_count,
            device.measured_copy_gbytes_per_s
        ));
    }
    if style == TableStyle::Markdown {
        out.push('\n');
    }
    out.push_str(&table.to_string());
    out.push('\n');
    out.push_str(&reasons(cases));
    out
}

/// Every case as one CSV row of plain numbers (seconds, GB/s), for spreadsheets and scripts.
pub fn render_csv(doc: &ResultsDoc, axis_order: &[&str]) -> anyhow::Result<String> {
    let axes: Vec<&str> = axis_order
        .iter()
        .copied()
        .filter(|a| doc.cases.iter().any(|c| c.params.contains_key(*a)))
        .collect();
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["index", "variant", "backend", "implementation", "scope"];
    header.extend(&axes);
    header.extend([
        "status",
        "samples",
        "median_s",
        "median_ci95_low_s",
        "median_ci95_high_s",
        "mean_s",
        "std_dev_s",
        "min_s",
        "max_s",
        "gbytes_per_s",
        "percent_of_peak",
        "speedup",
        "max_abs_err",
        "max_rel_err",
        "reason",
    ]);
    writer.write_record(&header)?;
    let peak = doc
        .environment
        .device
        .as_ref()
        .map(|d| d.measured_copy_gbytes_per_s);
    let num = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:e}"));
    for c in &doc.cases {
        let s = c.summary.as_ref();
        let mut row = vec![
            c.index.to_string(),
            c.variant.clone(),
            c.backend.to_string(),
            c.implementation.clone(),
            c.scope.map_or(String::new(), |s| s.name().to_string()),
        ];
        row.extend(
            axes.iter()
                .map(|a| c.params.get(*a).map_or(String::new(), |v| v.to_string())),
        );
        row.push(c.status.name().to_string());
        row.push(s.map_or(String::new(), |s| s.samples.to_string()));
        row.extend(
            [
                s.map(|s| s.median_s),
                s.map(|s| s.median_ci95_s.0),
                s.map(|s| s.median_ci95_s.1),
                s.map(|s| s.mean_s),
                s.map(|s| s.std_dev_s),
                s.map(|s| s.min_s),
                s.map(|s| s.max_s),
                c.gbytes_per_s,
                match (c.backend, c.gbytes_per_s, peak) {
                    (Backend::Cuda, Some(g), Some(p)) => Some(g / p * 100.0),
                    _ => None,
                },
                doc.manifest
                    .baseline
                    .as_ref()
                    .and_then(|b| speedup(c, b, &doc.cases)),
                c.max_abs_err(),
                c.max_rel_err(),
            ]
            .map(num),
        );
        row.push(c.reason.clone().unwrap_or_default());
        writer.write_record(&row)?;
    }
    Ok(String::from_utf8(writer.into_inner()?)?)
}

/// The baseline variant's median over this case's, at the same grid point (matching every axis
/// the baseline has: a CPU baseline has no block size).
pub fn speedup(case: &CaseResult, baseline: &str, cases: &[CaseResult]) -> Option<f64> {
    let median = case.summary.as_ref()?.median_s;
    let base = cases.iter().find(|b| {
        b.variant == baseline
            && b.summary.is_some()
            && b.params
                .iter()
                .all(|(k, v)| case.params.get(k).is_none_or(|cv| cv == v))
    })?;
    Some(base.summary.as_ref()?.median_s / median)
}

fn accuracy_cell(case: &CaseResult) -> String {
    // Where only part of an output was checked (its reference too slow in full), how much.
    let (checked, of) = case
        .outputs
        .iter()
        .filter_map(|o| Some((o.accuracy.elements, o.accuracy.subset_of?)))
        .fold((0, 0), |(c, n), (ci, ni)| (c + ci, n + ni));
    let subset = if of > 0 {
        format!(", {:.2}% checked", 100.0 * checked as f64 / of as f64)
    } else {
        String::new()
    };
    match (case.status, case.max_rel_err()) {
        (CaseStatus::Passed, Some(e)) => format!("ok {e:.1e}{subset}"),
        (CaseStatus::AccuracyFailed, Some(e)) => format!("FAIL {e:.1e}{subset}"),
        (CaseStatus::Error, _) => "ERROR".into(),
        (CaseStatus::TimedOut, _) => "TIMED OUT".into(),
        (CaseStatus::Skipped, _) => "skipped".into(),
        _ => "-".into(),
    }
}

/// One line per distinct reason, with the cases it covers.
fn reasons(cases: &[CaseResult]) -> String {
    let mut by_reason: Vec<(String, Vec<String>)> = Vec::new();
    for case in cases {
        let Some(reason) = &case.reason else { continue };
        let label = match case.status {
            CaseStatus::Skipped => "skipped",
            CaseStatus::AccuracyFailed => "FAILED",
            CaseStatus::TimedOut => "TIMED OUT",
            _ => "ERROR",
        };
        let key = format!("{label}: {reason}");
        let who = format!("#{} {}", case.index, case.variant);
        match by_reason.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(who),
            None => by_reason.push((key, vec![who])),
        }
    }
    let mut out = String::new();
    for (reason, list) in by_reason {
        let shown: Vec<&str> = list.iter().take(6).map(String::as_str).collect();
        let more = if list.len() > 6 {
            format!(" and {} more", list.len() - 6)
        } else {
            String::new()
        };
        out.push_str(&format!("{reason}\n    ({}{more})\n", shown.join(", ")));
    }
    out
}

/// Seconds with a unit that keeps 4 significant digits readable: 4.098 ms, 812.3 µs.
pub fn format_seconds(s: f64) -> String {
    let (value, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else if s >= 1e-6 {
        (s * 1e6, "µs")
    } else {
        (s * 1e9, "ns")
    };
    let decimals = if value >= 100.0 {
        1
    } else if value >= 10.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_get_readable_units() {
        assert_eq!(format_seconds(0.004098), "4.098 ms");
        assert_eq!(format_seconds(0.0008123), "812.3 µs");
        assert_eq!(format_seconds(2.5), "2.500 s");
        assert_eq!(format_seconds(3.2e-8), "32.00 ns");
    }
}
