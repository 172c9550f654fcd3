//! What every output format is: a name, a line of help and a function from a `Report` (a
//! results document and its manifest) to text; and what the dashboard formats share (a case's
//! name, its median and CI in nanoseconds). Below `export`, which lists the formats, and the
//! format files, which `export` lists.

use crate::manifest::Manifest;
use crate::record::{CaseResult, ResultsDoc};
use crate::stats;

/// What a format draws from: a finished (or interrupted) run and the manifest that says which
/// tables and claims to show.
pub struct Report<'a> {
    pub doc: &'a ResultsDoc,
    pub manifest: &'a Manifest,
    /// Only the manifest's declared tables and claims, not every case (`report --tables`; the
    /// table, markdown and CSV formats).
    pub declared_only: bool,
    /// The terminal table's width: the least needed columns are left out until it fits (None:
    /// every column, as `--wide` and every file export draw it).
    pub width: Option<usize>,
}

/// One output format.
#[derive(Debug)]
pub struct Format {
    /// As `--format` and `--export NAME=PATH` take it.
    pub name: &'static str,
    pub help: &'static str,
    pub render: fn(&Report) -> anyhow::Result<String>,
}

/// A case's name on a dashboard: study, variant and parameters, unique within a results file.
pub fn case_name(doc: &ResultsDoc, case: &CaseResult) -> String {
    format!(
        "{}/{} {}",
        doc.study.name,
        case.variant,
        crate::vocab::describe_params(&case.params)
    )
    .trim_end()
    .to_string()
}

/// A passed case's median and (when it has enough samples for one) the 95% CI of the median,
/// in nanoseconds rounded to the picosecond, so a file's numbers read plainly.
pub struct Timing {
    pub median_ns: f64,
    pub ci95_ns: Option<(f64, f64)>,
    pub samples: usize,
}

pub fn timing(case: &CaseResult) -> Option<Timing> {
    if case.status != crate::record::CaseStatus::Passed {
        return None;
    }
    let summary = case.summary.as_ref()?;
    let ns = |s: f64| (s * 1e12).round() / 1e3;
    Some(Timing {
        median_ns: ns(summary.median_s),
        ci95_ns: (summary.samples >= stats::MIN_SAMPLES_FOR_MEDIAN_CI)
            .then(|| (ns(summary.median_ci95_s.0), ns(summary.median_ci95_s.1))),
        samples: summary.samples,
    })
}
