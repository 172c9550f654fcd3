//! Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/), for
//! `bencher run --adapter json`: `{ case: { "latency": { value, lower_value, upper_value } } }`,
//! the median and its 95% CI in nanoseconds (Bencher's latency unit). Only passed cases: a
//! failed or skipped case has no time to track.

use serde_json::{json, Map, Value};

use super::format::{case_name, timing, Format, Report};

pub const FORMAT: Format = Format {
    name: "bmf",
    help: "Bencher Metric Format: each passed case's median and 95% CI as latency (ns)",
    render,
};

fn render(report: &Report) -> anyhow::Result<String> {
    let mut cases = Map::new();
    for case in &report.doc.cases {
        let Some(t) = timing(case) else { continue };
        let mut latency = Map::new();
        latency.insert("value".into(), json!(t.median_ns));
        if let Some((lower, upper)) = t.ci95_ns {
            latency.insert("lower_value".into(), json!(lower));
            latency.insert("upper_value".into(), json!(upper));
        }
        cases.insert(
            case_name(report.doc, case),
            json!({ "latency": Value::Object(latency) }),
        );
    }
    Ok(serde_json::to_string_pretty(&Value::Object(cases))? + "\n")
}
