//! What a results file must hold to be read: figures that are times, case indices a plan can
//! have, and names without control characters. kbench never writes otherwise, so a file that
//! does was edited or damaged, and `report`, `compare`, `merge` and `--resume` refuse it
//! naming the case and the figure, rather than render a negative median, a case twice, or an
//! ESC sequence that rewrites the terminal.

use std::collections::HashMap;

use anyhow::{bail, Result};
use serde_json::Value;

use crate::manifest::{printable, MAX_CASES};
use crate::record::{CaseResult, CaseStatus, ResultsDoc};

/// Keys whose text is a message from the system or a user's program (an error, a compiler's
/// output, a reference command's stderr): it may hold anything, so it is shown escaped, not
/// refused.
fn is_free_text(key: &str) -> bool {
    matches!(
        key,
        "reason" | "evidence" | "unblocked_reason" | "profiler_skipped" | "mock"
    ) || key.ends_with("_unavailable")
}

/// The most seconds a recorded time may be: no timed run lasts a year.
pub const MAX_TIME_S: f64 = 365.0 * 24.0 * 3600.0;

/// Refuses a string of the file (outside free text) holding a control character other than
/// tab, newline or carriage return; `at` is the JSON path so far (`cases[3].variant`).
pub fn check_strings(value: &Value, at: &str) -> Result<(), String> {
    match value {
        Value::String(text) => match text
            .chars()
            .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        {
            Some(c) => Err(format!(
                "{at} holds the control character {} (`{}`): kbench writes none there; was \
                 the file edited?",
                c.escape_unicode(),
                printable(text)
            )),
            None => Ok(()),
        },
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| check_strings(item, &format!("{at}[{i}]"))),
        Value::Object(map) => map
            .iter()
            .filter(|(key, _)| !is_free_text(key))
            .try_for_each(|(key, item)| {
                if let Some(c) = key.chars().find(|c| c.is_control()) {
                    return Err(format!(
                        "{at} has a key holding the control character {} (`{}`)",
                        c.escape_unicode(),
                        printable(key)
                    ));
                }
                let at = if at.is_empty() {
                    key.clone()
                } else {
                    format!("{at}.{key}")
                };
                check_strings(item, &at)
            }),
        _ => Ok(()),
    }
}

/// A time figure's fault, if it is not a time a run can measure: not above 0 (negative, zero),
/// subnormal (below 2.2e-308 s: no clock ticks that finely), or past `MAX_TIME_S`.
fn time_fault(seconds: f64) -> Option<&'static str> {
    if seconds.is_nan() {
        Some("not a number")
    } else if seconds < 0.0 {
        Some("negative")
    } else if seconds == 0.0 {
        Some("zero")
    } else if !seconds.is_normal() {
        Some("subnormal (below any clock's tick)")
    } else if seconds > MAX_TIME_S {
        Some("more than a year")
    } else {
        None
    }
}

/// The case's time figures that are not times, as "median_s = -1 (negative)". A case in error
/// is left alone: a run records what it measured there, an infinite time included (and says
/// why in the case's reason); a case that passed or was judged holds only times.
fn case_time_faults(case: &CaseResult) -> Option<String> {
    if case.status == CaseStatus::Error {
        return None;
    }
    let summary = case.summary.as_ref()?;
    let figures = [
        ("median_s", summary.median_s),
        ("mean_s", summary.mean_s),
        ("min_s", summary.min_s),
        ("max_s", summary.max_s),
    ];
    let samples = case.measurement.iter().flat_map(|m| &m.samples_s);
    let sample = samples.copied().find(|&s| time_fault(s).is_some());
    figures
        .into_iter()
        .chain(sample.map(|s| ("a sample", s)))
        .find_map(|(name, s)| time_fault(s).map(|why| format!("{name} = {s:e} ({why})")))
}

/// Refuses duplicate or impossible case indices and figures that are not times, naming the
/// case; shows a case's reason with its control characters escaped. `shown` names the file.
pub fn check_cases(shown: &str, doc: &mut ResultsDoc) -> Result<()> {
    let mut seen: HashMap<usize, usize> = HashMap::new();
    for (k, case) in doc.cases.iter().enumerate() {
        let index = case.index;
        if index as u64 >= MAX_CASES {
            bail!(
                "{shown}: cases[{k}] has index {index}, beyond any plan (a study plans at most \
                 {MAX_CASES} cases); was the file edited?"
            );
        }
        if let Some(first) = seen.insert(index, k) {
            bail!(
                "{shown}: case index {index} is in the file twice (cases[{first}] and \
                 cases[{k}] in index order); was the file edited or merged?"
            );
        }
        if let Some(fault) = case_time_faults(case) {
            bail!(
                "{shown}: case {index} ({}) has {fault}: not a time a run can measure; was the \
                 file edited?",
                case.variant
            );
        }
    }
    for case in &mut doc.cases {
        if let Some(reason) = &case.reason {
            case.reason = Some(printable(reason));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_that_no_run_measures_are_named() {
        assert_eq!(time_fault(-1.0), Some("negative"));
        assert_eq!(time_fault(0.0), Some("zero"));
        assert_eq!(
            time_fault(1e-310),
            Some("subnormal (below any clock's tick)")
        );
        assert_eq!(time_fault(1e308), Some("more than a year"));
        assert_eq!(time_fault(f64::NAN), Some("not a number"));
        assert_eq!(time_fault(3.2e-6), None);
    }

    #[test]
    fn control_characters_are_refused_outside_free_text_at_their_path() {
        let doc: Value = serde_json::json!({
            "study": {"name": "s"},
            "cases": [{"variant": "ok", "reason": "red \u{1b}[31m is fine here"},
                      {"variant": "bad\u{1b}[2J"}]
        });
        let e = check_strings(&doc, "").unwrap_err();
        assert!(
            e.starts_with("cases[1].variant holds the control character \\u{1b}"),
            "{e}"
        );
        let fine = serde_json::json!({"cases": [{"reason": "\u{1b}", "variant": "a\tb"}]});
        assert_eq!(check_strings(&fine, ""), Ok(()));
    }
}
