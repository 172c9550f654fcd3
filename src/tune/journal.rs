//! The tune journal, `journal.jsonl` in the tune's folder: its first line says what is tuned
//! (the manifest's path and text, the `[tune]` settings as run, the measurement overrides);
//! then one line per evaluation, appended as each finishes, in the order evaluated. A resumed
//! tune replays these lines to rebuild every strategy's history (the strategies are functions
//! of the history and the seed, so they propose the same again) and evaluates nothing twice.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::space::Problem;
use super::spec::{Budget, StrategyKind, TuneSpec};
use crate::record::{CaseResult, CaseStatus, MeasureOverrides};
use crate::vocab::Params;

/// The journal's file name in a tune's folder.
pub const JOURNAL: &str = "journal.jsonl";

/// What a tune is: the journal's first line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Start {
    pub manifest_path: PathBuf,
    pub manifest_toml: String,
    pub spec: TuneSpec,
    pub overrides: MeasureOverrides,
    pub started_at: String,
}

/// One configuration evaluated at one problem point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The problem point's position among the study's, and the configuration's in it.
    pub problem: usize,
    pub config: usize,
    /// The planned case's index (its place in `kbench run`'s plan of the same manifest).
    pub case_index: usize,
    /// The tuned axes' values.
    pub values: Params,
    pub status: CaseStatus,
    /// The objective: the case's median time (kernel scope as configured), when it passed.
    pub median_s: Option<f64>,
    pub median_ci95_s: Option<(f64, f64)>,
    /// Why it failed or was skipped.
    pub reason: Option<String>,
    pub wall_s: f64,
}

impl Evaluation {
    pub fn of(problem: usize, config: usize, values: Params, result: &CaseResult) -> Evaluation {
        let passed = result.status == CaseStatus::Passed;
        Evaluation {
            problem,
            config,
            case_index: result.index,
            values,
            status: result.status,
            median_s: result
                .summary
                .as_ref()
                .filter(|_| passed)
                .map(|s| s.median_s),
            median_ci95_s: (result.summary.as_ref())
                .filter(|_| passed)
                .map(|s| s.median_ci95_s),
            reason: result.reason.clone(),
            wall_s: result.wall_s,
        }
    }
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
enum Line {
    Start(Start),
    Evaluation(Evaluation),
}

/// The journal, open for appending.
pub struct Journal {
    file: File,
    pub path: PathBuf,
}

impl Journal {
    /// A new journal in `dir`, its first line written.
    pub fn create(dir: &Path, start: &Start) -> Result<Journal> {
        let path = dir.join(JOURNAL);
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut journal = Journal { file, path };
        journal.append(&Line::Start(start.clone()))?;
        Ok(journal)
    }

    /// An existing tune's journal: what it is, and its evaluations in the order made.
    pub fn resume(dir: &Path) -> Result<(Journal, Start, Vec<Evaluation>)> {
        let path = dir.join(JOURNAL);
        let text = crate::input_file::read_regular_text(&path, "the tune journal", 1 << 30)
            .with_context(|| format!("cannot resume the tune in {}", dir.display()))?;
        let mut start = None;
        let mut evaluations = Vec::new();
        // A line torn by a kill is the last one; it is dropped (and evaluated again).
        let whole = match text.rfind('\n') {
            Some(i) => &text[..=i],
            None => "",
        };
        for (n, line) in whole.lines().enumerate() {
            let parsed: Line = serde_json::from_str(line).with_context(|| {
                format!("{}:{}: not a tune journal line", path.display(), n + 1)
            })?;
            match (parsed, n) {
                (Line::Start(s), 0) => start = Some(s),
                (Line::Evaluation(e), 1..) => evaluations.push(e),
                _ => bail!("{}:{}: out of place", path.display(), n + 1),
            }
        }
        let Some(start) = start else {
            bail!("{} holds no tune", path.display());
        };
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {}", path.display()))?;
        file.set_len(whole.len() as u64)
            .with_context(|| format!("cannot repair {}", path.display()))?;
        Ok((Journal { file, path }, start, evaluations))
    }

    pub fn record(&mut self, evaluation: &Evaluation) -> Result<()> {
        self.append(&Line::Evaluation(evaluation.clone()))
    }

    /// One write per line: a kill leaves at most a torn last line, which `resume` drops.
    fn append(&mut self, line: &Line) -> Result<()> {
        let mut bytes = serde_json::to_vec(line).context("a journal line serializes")?;
        bytes.push(b'\n');
        self.file
            .write_all(&bytes)
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// The `[tune]` settings a resumed tune runs with: the journal's, once they are shown to be what
/// the manifest (unchanged since the start) says. Only the strategy, budget and seed may differ,
/// as the command line could set them, and `min_rounds` (journals from before that setting hold
/// none and resume with the least); each of those is checked as the manifest's would be. A
/// journal is a file anyone can edit: its settings bound every loop of the decision.
pub fn checked_spec(journal: &Path, recorded: &TuneSpec, manifest: &TuneSpec) -> Result<TuneSpec> {
    let differs = |what: &str, recorded: String, manifest: String| {
        anyhow::anyhow!(
            "{}: the journal's {what} is {recorded} where the manifest's is {manifest}: was the journal edited? start a new tune",
            journal.display()
        )
    };
    if recorded.axes != manifest.axes {
        return Err(differs(
            "tuned axes",
            format!("{:?}", recorded.axes),
            format!("{:?}", manifest.axes),
        ));
    }
    for (what, r, m) in [
        ("`top`", recorded.top, manifest.top),
        ("`rounds`", recorded.rounds, manifest.rounds),
    ] {
        if r != m {
            return Err(differs(what, r.to_string(), m.to_string()));
        }
    }
    if recorded.tie_within != manifest.tie_within {
        return Err(differs(
            "`tie_within`",
            recorded.tie_within.to_string(),
            manifest.tie_within.to_string(),
        ));
    }
    let refuse = |message: String| {
        anyhow::anyhow!(
            "{}: {message}: was the journal edited? start a new tune",
            journal.display()
        )
    };
    if !(2..=recorded.rounds).contains(&recorded.min_rounds) {
        return Err(refuse(format!(
            "`min_rounds` is {}; it must be from 2 to `rounds` ({})",
            recorded.min_rounds, recorded.rounds
        )));
    }
    match recorded.budget {
        Budget::Evaluations(0) => return Err(refuse("a budget of 0 evaluations".into())),
        Budget::TimeS(s) if !(s.is_finite() && s > 0.0) => {
            return Err(refuse(format!("a budget of {s} seconds")))
        }
        Budget::Everything if recorded.strategy != StrategyKind::Exhaustive => {
            return Err(refuse(format!(
                "strategy `{}` with no budget",
                recorded.strategy.name()
            )))
        }
        _ => {}
    }
    Ok(recorded.clone())
}

/// Each journaled evaluation where the plan has it: its problem point and configuration exist
/// and are that case with those values, none is journaled twice, and its figures are ones a
/// measurement gives (a passed case's finite positive median, inside its interval where one is
/// recorded; no median for any other). An evaluation out of place would be replayed into a strategy's history and the
/// decision as if measured.
pub fn check_evaluations(
    journal: &Path,
    evaluations: &[Evaluation],
    problems: &[Problem],
) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for (i, e) in evaluations.iter().enumerate() {
        // The journal's line: the first holds the start.
        let line = i + 2;
        let refuse = |message: String| {
            anyhow::anyhow!(
                "{}:{line}: {message}: was the manifest or the journal edited? start a new tune",
                journal.display()
            )
        };
        let config = (problems.get(e.problem)).and_then(|p| p.configs.get(e.config));
        let Some(config) = config.filter(|c| c.case.index == e.case_index) else {
            return Err(refuse(format!(
                "the evaluation of case #{} does not fit the manifest's plan",
                e.case_index
            )));
        };
        if config.values != e.values {
            return Err(refuse(format!(
                "the evaluation of case #{} names values {} where the plan has {}",
                e.case_index,
                crate::vocab::describe_params(&e.values),
                crate::vocab::describe_params(&config.values)
            )));
        }
        if !seen.insert((e.problem, e.config)) {
            return Err(refuse(format!("case #{} is evaluated twice", e.case_index)));
        }
        let passed = e.status == CaseStatus::Passed;
        let sound_median = match (e.median_s, e.median_ci95_s) {
            (Some(m), Some((lo, hi))) => {
                passed
                    && m.is_finite()
                    && m > 0.0
                    && lo.is_finite()
                    && hi.is_finite()
                    && lo <= m
                    && m <= hi
            }
            // A journal from before the interval was recorded.
            (Some(m), None) => passed && m.is_finite() && m > 0.0,
            (None, None) => !passed,
            (None, Some(_)) => false,
        };
        if !sound_median {
            return Err(refuse(format!(
                "case #{} is {:?} with median {:?} s and interval {:?}",
                e.case_index, e.status, e.median_s, e.median_ci95_s
            )));
        }
        if !(e.wall_s.is_finite() && e.wall_s >= 0.0) {
            return Err(refuse(format!(
                "case #{} took {} s",
                e.case_index, e.wall_s
            )));
        }
    }
    Ok(())
}
