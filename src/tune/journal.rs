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

use super::spec::TuneSpec;
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
