//! `kbench history`: a study's kept runs (files, or folders of them) judged as a series per
//! case (`crate::history`), drawn as a table (`report::history_table`) or printed as JSON, with
//! an HTML page of trend charts on request (`report::history_html`).

use std::path::PathBuf;

use anyhow::Context;

use super::{bad_input, table_width};
use crate::cli::HistoryArgs;
use crate::compare;
use crate::exit::Exit;
use crate::history::{self, HistorySettings};
use crate::outln;
use crate::report::{history_html, history_table};
use crate::results;

/// Judges the history; `Regressed` if a case's slowdown is confirmed.
pub fn history(args: HistoryArgs) -> Exit {
    let files = match results_files(&args.paths) {
        Ok(files) => files,
        Err(e) => return bad_input(e),
    };
    let mut runs = Vec::with_capacity(files.len());
    for path in files {
        match results::load_results(&path) {
            Ok(doc) => runs.push((path, doc)),
            Err(e) => return bad_input(e),
        }
    }
    // Every run against the newest, as compare checks its baselines.
    if let Some((_, newest)) = runs
        .iter()
        .max_by(|a, b| a.1.started_at.cmp(&b.1.started_at))
    {
        for (path, doc) in &runs {
            if let Err(e) = compare::check_comparable(doc, newest, args.allow_different_device) {
                return bad_input(e.context(format!("{} cannot join the history", path.display())));
            }
        }
    }
    let min_effect = args.min_effect.unwrap_or_else(|| {
        runs.first()
            .map_or(0.03, |(_, d)| d.manifest.compare.min_effect)
    });
    if !(min_effect > 0.0 && min_effect < 1.0 && args.p_value > 0.0 && args.p_value < 1.0) {
        return bad_input(anyhow::anyhow!(
            "--min-effect and --p-value must be between 0 and 1"
        ));
    }
    let settings = HistorySettings {
        confirm_runs: args.confirm_runs as usize,
        min_runs: args.min_runs as usize,
        min_effect,
        p_value: args.p_value,
    };
    let judged = match history::judge(runs, args.last.map(|n| n as usize), &settings) {
        Ok(h) => h,
        Err(e) => return bad_input(e),
    };
    for (copy, original) in &judged.copies {
        crate::errln!("note: {copy} holds the run {original} holds (a copy): counted once");
    }
    if let Some(page) = &args.html {
        let written = history_html::render(&judged).and_then(|html| {
            std::fs::write(page, html).with_context(|| format!("cannot write {}", page.display()))
        });
        if let Err(e) = written {
            return bad_input(e);
        }
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&judged).expect("a history serializes")
        );
    } else {
        let mut text = format!(
            "history of {}: {} runs, from {} to {}\n",
            judged.study,
            judged.runs.len(),
            judged.runs.first().map_or("", |r| r.path.as_str()),
            judged.runs.last().map_or("", |r| r.path.as_str()),
        );
        text.push_str(&history_table::render(&judged, table_width(args.wide)));
        crate::report::style::print(&text);
    }
    if judged.regressed() {
        Exit::Regressed
    } else {
        Exit::Ok
    }
}

/// The files given, and each folder's `*.json` files (not its subfolders'): a folder of a
/// study's runs is what `kbench run --out-dir` and a CI cache keep.
fn results_files(paths: &[PathBuf]) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("cannot read the folder {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "json"))
                .collect();
            if inside.is_empty() {
                anyhow::bail!(
                    "the folder {} holds no results files (*.json)",
                    path.display()
                );
            }
            inside.sort();
            files.extend(inside);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}
