//! The output layer `run` and `report` share: every format a results file can be written in,
//! one entry each in `FORMATS` (a name, a line of help, a function from the results to text), so
//! a new format is one file and one line here. The terminal table, markdown and CSV come from
//! `case_table` and `declared_tables`, unchanged; JSON is the results document itself.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

pub use super::format::{Format, Report};
use super::{bmf, case_table, declared_tables, gab, html, pytorch, steps};

pub const FORMATS: &[Format] = &[
    Format {
        name: "table",
        help: "every case, then the declared tables and claims, for a terminal",
        render: |r| Ok(tables(r, case_table::TableStyle::Terminal)),
    },
    Format {
        name: "markdown",
        help: "the same tables as markdown",
        render: |r| Ok(tables(r, case_table::TableStyle::Markdown)),
    },
    Format {
        name: "csv",
        help: "one row per case (or per declared table cell with --tables), plain numbers",
        render: csv,
    },
    Format {
        name: "json",
        help: "the results document (docs/results-format.md)",
        render: |r| Ok(serde_json::to_string_pretty(r.doc)? + "\n"),
    },
    bmf::FORMAT,
    gab::FORMAT,
    pytorch::FORMAT,
    html::FORMAT,
];

pub fn find(name: &str) -> Option<&'static Format> {
    FORMATS.iter().find(|f| f.name == name)
}

pub fn names() -> Vec<&'static str> {
    FORMATS.iter().map(|f| f.name).collect()
}

/// Every case's table (fitted to `r.width`) and the per-step latencies unless `r.declared_only`,
/// then the declared tables and the claims: the table and markdown formats, and what `run` prints.
pub fn tables(r: &Report, style: case_table::TableStyle) -> String {
    let mut out = String::new();
    let width = match style {
        case_table::TableStyle::Terminal => r.width,
        case_table::TableStyle::Markdown => None,
    };
    if !r.declared_only {
        let axes = r.manifest.algorithm.spec().axis_names();
        out.push_str(&case_table::render_fitted(r.doc, &axes, style, width));
        out.push('\n');
        let steps = steps::render(r.doc);
        match style {
            _ if steps.is_empty() => {}
            case_table::TableStyle::Terminal => out.push_str(&format!("{steps}\n")),
            case_table::TableStyle::Markdown => out.push_str(&format!("```text\n{steps}```\n\n")),
        }
    }
    for t in &r.manifest.tables {
        out.push_str(&declared_tables::render(t, r.doc, style, width));
        out.push('\n');
    }
    out.push_str(&declared_tables::render_claims(&r.doc.claims, style, width));
    out
}

fn csv(r: &Report) -> Result<String> {
    if !r.declared_only {
        let axes = r.manifest.algorithm.spec().axis_names();
        return case_table::render_csv(r.doc, &axes);
    }
    let mut out = String::new();
    for t in &r.manifest.tables {
        out.push_str(&declared_tables::render_csv(t, r.doc)?);
    }
    Ok(out)
}

/// An `--export FORMAT=PATH` request, or `run --results FILE` (the JSON results document,
/// never over an existing file unless asked).
#[derive(Debug, Clone)]
pub struct Export {
    pub format: &'static Format,
    /// May hold `{study}`, replaced by each study's name.
    pub path: String,
    pub asked_by: AskedBy,
}

/// The option that asked for an export: it says whether a file already at the path may be
/// replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AskedBy {
    /// `--export FORMAT=PATH` (and `report --html FILE`): written over whatever is there.
    Export,
    /// `run --results FILE`: never over a file, so that results measured before are never
    /// lost, unless `--overwrite-results`.
    Results { overwrite: bool },
}

impl Export {
    /// Parses `FORMAT=PATH` (for clap).
    pub fn parse(text: &str) -> std::result::Result<Export, String> {
        let Some((name, path)) = text.split_once('=') else {
            return Err(format!(
                "expected FORMAT=PATH, e.g. bmf=bench.json; formats: {}",
                names().join(", ")
            ));
        };
        let Some(format) = find(name) else {
            return Err(format!(
                "unknown format `{name}`; formats: {}",
                names().join(", ")
            ));
        };
        if path.is_empty() {
            return Err(format!("no path after `{name}=`"));
        }
        Ok(Export::to_file(format, path))
    }

    /// `format` written to `path`, over whatever is there (as `--export` does).
    pub fn to_file(format: &'static Format, path: &str) -> Export {
        Export {
            format,
            path: path.to_string(),
            asked_by: AskedBy::Export,
        }
    }

    /// `run --results FILE`: each study's results document, as its results file holds it,
    /// written to FILE too once the study has run.
    pub fn results_copy(path: &str, overwrite: bool) -> Export {
        Export {
            format: find("json").expect("json is a format"),
            path: path.to_string(),
            asked_by: AskedBy::Results { overwrite },
        }
    }

    /// How the command line asked for it: `--export bmf=x.json`, `--results r.json`.
    pub fn requested_as(&self) -> String {
        match self.asked_by {
            AskedBy::Results { .. } => format!("--results {}", self.path),
            AskedBy::Export => format!("--export {}={}", self.format.name, self.path),
        }
    }

    /// Whether a file already at the path may be replaced.
    fn overwrites(&self) -> bool {
        match self.asked_by {
            AskedBy::Export => true,
            AskedBy::Results { overwrite } => overwrite,
        }
    }

    /// Refuses, before anything runs, a path that holds a file this export may not replace.
    pub fn check_free(&self, study: &str) -> Result<()> {
        let path = self.path_for(study);
        if !self.overwrites() && path.exists() {
            bail!(
                "{}: {} exists (results are never written over; pass --overwrite-results to \
                 replace it, or name another file)",
                self.requested_as(),
                path.display()
            );
        }
        Ok(())
    }

    pub fn path_for(&self, study: &str) -> PathBuf {
        PathBuf::from(self.path.replace("{study}", study))
    }

    /// Renders `report` and writes it to this export's path (folders made as needed); refuses
    /// to write over the results file itself.
    pub fn write(&self, report: &Report, results_path: &Path) -> Result<PathBuf> {
        let path = self.path_for(&report.doc.study.name);
        if same_file(&path, results_path) {
            bail!(
                "will not write the {} export over the results file {}",
                self.format.name,
                results_path.display()
            );
        }
        let text = (self.format.render)(report)?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create the folder {}", parent.display()))?;
        }
        // A file that appeared since the check before the run is still not replaced.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(self.overwrites())
            .create_new(!self.overwrites())
            .open(&path)
            .with_context(|| format!("{}: cannot write {}", self.requested_as(), path.display()))?;
        file.write_all(text.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
