//! github-action-benchmark's `customSmallerIsBetter` input
//! (https://github.com/benchmark-action/github-action-benchmark): a list of `{ name, unit,
//! value, range, extra }`, the median in nanoseconds, `range` the larger half-width of its 95% CI
//! as `± x`, and `extra` the interval itself and the sample count. Only passed cases.

use serde_json::{json, Value};

use super::format::{case_name, timing, Format, Report};

pub const FORMAT: Format = Format {
    name: "github-action-benchmark",
    help:
        "github-action-benchmark's customSmallerIsBetter: each passed case's median (ns) and 95% CI",
    render,
};

fn render(report: &Report) -> anyhow::Result<String> {
    let mut entries = Vec::new();
    for case in &report.doc.cases {
        let Some(t) = timing(case) else { continue };
        let mut entry = json!({
            "name": case_name(report.doc, case),
            "unit": "ns",
            "value": t.median_ns,
        });
        let extra = match t.ci95_ns {
            Some((lower, upper)) => {
                let half_width = (t.median_ns - lower).max(upper - t.median_ns);
                entry["range"] = format!("± {}", (half_width * 1e3).round() / 1e3).into();
                format!(
                    "95% CI of the median {lower} .. {upper} ns; {} samples",
                    t.samples
                )
            }
            None => format!("{} samples: too few for a 95% CI of the median", t.samples),
        };
        entry["extra"] = extra.into();
        entries.push(entry);
    }
    Ok(serde_json::to_string_pretty(&Value::Array(entries))? + "\n")
}
