//! A finished tune's results: the tune results document (`tune.json`: every evaluation with its
//! configuration, status, median, CI and reason, in the order evaluated; the best so far after
//! each; the decision), a text table per problem point, the HTML report with a convergence plot
//! per problem point (best so far against evaluations, drawn with plotters as the run report's
//! charts are), and the exports a user's build consumes: a C header of the winners and a
//! manifest with the tuned axes fixed to them.

use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use super::decide::{round_cv, Contender, Verdict};
use super::journal::{Evaluation, Start};
use super::space::Problem;
use super::spec::TuneSpec;
use crate::manifest::Manifest;
use crate::record::CaseStatus;
use crate::report::case_table::format_seconds;
use crate::report::html::escape;
use crate::results::write_json_atomically;
use crate::vocab::{describe_params, ParamValue, Params};
use crate::{out, outln};

/// A problem point's decided winner, or why it has none.
pub type Decided = Result<Winner, String>;

/// The tune results document's file name in the tune's folder.
pub const TUNE_JSON: &str = "tune.json";

/// The tune results document (`tune.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneDoc {
    pub study: String,
    pub manifest_path: String,
    pub tune: TuneSpec,
    pub started_at: String,
    pub finished_at: String,
    /// The kbench results files holding every evaluated and re-measured case in full.
    pub results_files: Vec<String>,
    pub problems: Vec<ProblemResult>,
}

/// One problem point's search and decision.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ProblemResult {
    pub label: String,
    pub variant: String,
    /// The axes not tuned.
    pub params: Params,
    pub configurations: usize,
    /// In the order evaluated.
    pub evaluations: Vec<Evaluation>,
    /// The fastest correct median after each evaluation (None until one passes).
    pub best_so_far_s: Vec<Option<f64>>,
    pub winner: Option<Winner>,
    /// Why there is no winner.
    pub no_winner: Option<String>,
}

/// The decided winner of a problem point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Winner {
    /// The tuned axes' values.
    pub values: Params,
    /// Every axis's value: the case to run.
    pub params: Params,
    pub verdict: Verdict,
    pub runner_up_values: Option<Params>,
    /// Re-measurement rounds run (a fresh worker each round).
    pub rounds: usize,
    /// Each contender still in at the end, with its per-round medians.
    pub contenders: Vec<ContenderRounds>,
    /// Contenders put out by a failed re-measurement, with the reason.
    pub dropped: Vec<(Params, String)>,
}

/// A contender's re-measurement: one median per round, and their spread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContenderRounds {
    pub values: Params,
    pub round_medians_s: Vec<f64>,
    /// The between-round coefficient of variation of those medians (None under 2 rounds).
    pub round_cv: Option<f64>,
}

impl Winner {
    pub fn new(
        problem: &Problem,
        verdict: Verdict,
        contenders: &[Contender],
        dropped: &[(usize, String)],
    ) -> Winner {
        let values = |c: usize| problem.configs[c].values.clone();
        Winner {
            values: values(verdict.winner),
            params: problem.configs[verdict.winner].case.params.clone(),
            runner_up_values: verdict.runner_up.map(values),
            rounds: verdict.rounds,
            contenders: (contenders.iter())
                .map(|k| ContenderRounds {
                    values: values(k.config),
                    round_medians_s: k.round_medians_s.clone(),
                    round_cv: round_cv(&k.round_medians_s),
                })
                .collect(),
            dropped: (dropped.iter())
                .map(|(c, why)| (values(*c), why.clone()))
                .collect(),
            verdict,
        }
    }

    /// `block=256 items=4`.
    pub fn label(&self) -> String {
        describe_params(&self.values)
    }

    pub fn verdict_line(&self) -> String {
        let runner_up = self
            .runner_up_values
            .as_ref()
            .map_or(String::new(), describe_params);
        self.verdict.describe(&runner_up)
    }
}

impl ProblemResult {
    pub fn new(problem: &Problem, history: &[Evaluation], winner: Decided) -> ProblemResult {
        let mut best: Option<f64> = None;
        let best_so_far_s = (history.iter())
            .map(|e| {
                if let Some(m) = e.median_s {
                    best = Some(best.map_or(m, |b: f64| b.min(m)));
                }
                best
            })
            .collect();
        let (winner, no_winner) = match winner {
            Ok(w) => (Some(w), None),
            Err(why) => (None, Some(why)),
        };
        ProblemResult {
            label: problem.label(),
            variant: problem.variant.clone(),
            params: problem.params.clone(),
            configurations: problem.configs.len(),
            evaluations: history.to_vec(),
            best_so_far_s,
            winner,
            no_winner,
        }
    }

    /// The fastest evaluation's median.
    pub fn best_evaluated_s(&self) -> Option<f64> {
        self.best_so_far_s.last().copied().flatten()
    }
}

impl TuneDoc {
    pub fn new(
        manifest: &Manifest,
        start: &Start,
        spec: &TuneSpec,
        problems: Vec<ProblemResult>,
        results_files: &[PathBuf],
    ) -> TuneDoc {
        TuneDoc {
            study: manifest.study.name.clone(),
            manifest_path: manifest.path.display().to_string(),
            tune: spec.clone(),
            started_at: start.started_at.clone(),
            finished_at: chrono::Utc::now().to_rfc3339(),
            results_files: (results_files.iter())
                .map(|p| p.display().to_string())
                .collect(),
            problems,
        }
    }
}

/// Writes `tune.json` and `report.html` in the tune's folder, and the exports asked for;
/// returns the paths written.
pub fn write_all(
    doc: &TuneDoc,
    dir: &Path,
    manifest: &Manifest,
    export_header: Option<&Path>,
    export_manifest: Option<&Path>,
) -> Result<Vec<PathBuf>> {
    let json = dir.join(TUNE_JSON);
    write_json_atomically(&json, doc)?;
    let html = dir.join("report.html");
    std::fs::write(&html, html_report(doc)?)
        .with_context(|| format!("cannot write {}", html.display()))?;
    let mut written = vec![json, html];
    if let Some(path) = export_header {
        std::fs::write(path, header(doc))
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path.to_path_buf());
    }
    if let Some(path) = export_manifest {
        std::fs::write(path, fixed_manifest(doc, manifest)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push(path.to_path_buf());
    }
    Ok(written)
}

/// The tables on stdout (or the document as JSON).
pub fn print(doc: &TuneDoc, json: bool) {
    if json {
        outln!(
            "{}",
            serde_json::to_string(doc).expect("the tune document serializes")
        );
        return;
    }
    for problem in &doc.problems {
        out!("{}", table(doc, problem));
    }
}

/// One problem point's table: the configurations tried, fastest first (those that failed
/// after, with the reason), the winner marked, then the verdict.
pub fn table(doc: &TuneDoc, problem: &ProblemResult) -> String {
    let mut rows: Vec<&Evaluation> = problem.evaluations.iter().collect();
    rows.sort_by(|a, b| {
        (a.median_s.unwrap_or(f64::INFINITY))
            .total_cmp(&b.median_s.unwrap_or(f64::INFINITY))
            .then(a.config.cmp(&b.config))
    });
    let winner = problem.winner.as_ref().map(|w| &w.values);
    let mut text = format!(
        "{}: {} of {} configurations evaluated ({})\n",
        problem.label,
        problem.evaluations.len(),
        problem.configurations,
        doc.tune.strategy.name()
    );
    let labels: Vec<String> = rows.iter().map(|e| describe_params(&e.values)).collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0).max(13);
    text.push_str(&format!(
        "  {:<width$}  {:>10}  {:>23}  {}\n",
        "configuration", "median", "95% CI", "status"
    ));
    for (e, label) in rows.iter().zip(&labels) {
        let mark = if Some(&e.values) == winner {
            "  <- winner"
        } else {
            ""
        };
        let (median, ci) = match (e.median_s, e.median_ci95_s) {
            (Some(m), Some((lo, hi))) => (
                format_seconds(m),
                format!("{} .. {}", format_seconds(lo), format_seconds(hi)),
            ),
            _ => ("-".into(), "-".into()),
        };
        let status = match (&e.reason, e.status) {
            (Some(r), s) if s != CaseStatus::Passed => {
                format!("{}: {}", s.name(), r.lines().next().unwrap_or(""))
            }
            (_, s) => s.name().to_string(),
        };
        text.push_str(&format!(
            "  {label:<width$}  {median:>10}  {ci:>23}  {status}{mark}\n"
        ));
    }
    match (&problem.winner, &problem.no_winner) {
        (Some(w), _) => text.push_str(&format!(
            "  winner: {} at {}{}: {}\n\n",
            w.label(),
            format_seconds(w.verdict.winner_median_s),
            w.verdict
                .winner_round_cv
                .map_or(String::new(), |cv| format!(
                    " (over {} rounds, between-round CV {:.1}%)",
                    w.rounds,
                    cv * 100.0
                )),
            w.verdict_line()
        )),
        (None, why) => text.push_str(&format!(
            "  no winner: {}\n\n",
            why.as_deref().unwrap_or("nothing evaluated")
        )),
    }
    text
}

/// A C identifier from any text: letters and digits kept, the rest `_`, upper case.
fn c_name(text: &str) -> String {
    let mut name: String = (text.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

fn c_value(value: &ParamValue) -> String {
    match value {
        ParamValue::Int(i) => format!("{i}"),
        ParamValue::Float(x) => format!("{x:?}"),
        ParamValue::Str(s) => format!("{s:?}"),
    }
}

fn c_type(value: &ParamValue) -> &'static str {
    match value {
        ParamValue::Int(_) => "long long",
        ParamValue::Float(_) => "double",
        ParamValue::Str(_) => "const char*",
    }
}

/// The C header: a table of the winners per problem point (a struct per row: the problem's
/// axes, then the tuned ones), and, for a study of one problem point, a `#define` per tuned
/// axis (`KBENCH_TUNED_BLOCK`).
pub fn header(doc: &TuneDoc) -> String {
    let study = c_name(&doc.study).to_lowercase();
    let mut h = format!(
        "/* The winners of `kbench tune` for study `{}` ({} strategy), {}.\n   Generated: do not edit; tune again instead. */\n#pragma once\n\n",
        doc.study,
        doc.tune.strategy.name(),
        doc.finished_at
    );
    let decided: Vec<(&ProblemResult, &Winner)> = (doc.problems.iter())
        .filter_map(|p| Some((p, p.winner.as_ref()?)))
        .collect();
    if let [(_, w)] = decided.as_slice() {
        for (axis, value) in &w.values {
            h.push_str(&format!(
                "#define KBENCH_TUNED_{} {}\n",
                c_name(axis),
                c_value(value)
            ));
        }
        h.push('\n');
    }
    let Some((first, w)) = decided.first() else {
        h.push_str("/* no problem point has a winner */\n");
        return h;
    };
    let columns: Vec<(String, &ParamValue)> = (first.params.iter())
        .chain(w.values.iter())
        .map(|(k, v)| (k.clone(), v))
        .collect();
    h.push_str(&format!(
        "struct kbench_tuned_{study} {{\n    const char* variant;\n"
    ));
    for (name, value) in &columns {
        h.push_str(&format!(
            "    {} {};\n",
            c_type(value),
            c_name(name).to_lowercase()
        ));
    }
    h.push_str(&format!(
        "}};\n\nstatic const struct kbench_tuned_{study} kbench_tuned_{study}_winners[] = {{\n"
    ));
    for (p, w) in &decided {
        let cells: Vec<String> = (columns.iter())
            .map(|(name, _)| {
                (p.params.get(name).or_else(|| w.values.get(name))).map_or("0".into(), c_value)
            })
            .collect();
        h.push_str(&format!(
            "    {{{:?}, {}}}, /* {}: {} */\n",
            p.variant,
            cells.join(", "),
            format_seconds(w.verdict.winner_median_s),
            w.verdict_line().replace("*/", "* /")
        ));
    }
    h.push_str("};\n");
    h
}

/// The manifest with the tuned axes fixed to the winners: each tuned axis keeps only the values
/// some winner has, and `where` keeps, at each problem point, only its winner (the study's own
/// `where` still applies); `[tune]` is dropped. Relative paths (a custom study's sources) still
/// mean the original manifest's folder: write the export beside it.
pub fn fixed_manifest(doc: &TuneDoc, manifest: &Manifest) -> Result<String> {
    let mut table: toml::Table = toml::from_str(&manifest.source)
        .map_err(|e| anyhow!("{}: {e}", manifest.path.display()))?;
    table.remove("tune");
    let grid = (table.entry("grid"))
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| anyhow!("[grid] is not a table"))?;
    let winners: Vec<(&ProblemResult, &Winner)> = (doc.problems.iter())
        .filter_map(|p| Some((p, p.winner.as_ref()?)))
        .collect();
    for axis in &doc.tune.axes {
        let mut values: Vec<&ParamValue> = winners
            .iter()
            .filter_map(|(_, w)| w.values.get(axis))
            .collect();
        values.sort();
        values.dedup();
        grid.insert(
            axis.clone(),
            toml::Value::Array(values.into_iter().map(toml_value).collect()),
        );
    }
    let chosen: Vec<String> = (winners.iter())
        .map(|(p, w)| {
            let terms: Vec<String> = (p.params.iter().chain(w.values.iter()))
                .map(|(k, v)| format!("{k} == {}", where_value(v)))
                .collect();
            format!("({})", terms.join(" and "))
        })
        .collect();
    let chosen = if chosen.is_empty() {
        "false".to_string()
    } else {
        chosen.join(" or ")
    };
    let filter = match grid.get("where").and_then(|w| w.as_str()) {
        Some(own) => format!("({own}) and ({chosen})"),
        None => chosen,
    };
    grid.insert("where".into(), toml::Value::String(filter));
    let body = toml::to_string(&table).context("the manifest serializes")?;
    Ok(format!(
        "# {} with the axes {} fixed to the winners of `kbench tune` ({} strategy, {}).\n{body}",
        manifest.path.display(),
        doc.tune.axes.join(", "),
        doc.tune.strategy.name(),
        doc.finished_at
    ))
}

fn toml_value(value: &ParamValue) -> toml::Value {
    match value {
        ParamValue::Int(i) => toml::Value::Integer(*i),
        ParamValue::Float(x) => toml::Value::Float(*x),
        ParamValue::Str(s) => toml::Value::String(s.clone()),
    }
}

fn where_value(value: &ParamValue) -> String {
    match value {
        ParamValue::Str(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static REGISTER_FONT: Once = Once::new();

/// The convergence plot of one problem point: the best median so far against evaluations, as
/// an SVG document.
pub fn convergence_svg(problem: &ProblemResult) -> Result<String> {
    REGISTER_FONT.call_once(|| {
        // The same bundled font the run report's charts use; registering it twice is harmless.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
    let points: Vec<(f64, f64)> = (problem.best_so_far_s.iter().enumerate())
        .filter_map(|(i, b)| Some(((i + 1) as f64, (*b)? * 1e6)))
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 360)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<std::io::Error>| {
            anyhow!("drawing the convergence plot: {e:?}")
        };
        root.fill(&WHITE).map_err(e)?;
        let n = problem.evaluations.len().max(2) as f64;
        let (lo, hi) = (points.iter()).fold((f64::MAX, f64::MIN), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
        let (lo, hi) = if points.is_empty() {
            (0.0, 1.0)
        } else {
            (lo * 0.95, hi * 1.05)
        };
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("{}: best so far", problem.label),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(1.0..n, lo..hi)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("evaluations")
            .y_desc("best median, µs")
            .draw()
            .map_err(e)?;
        let color = RGBColor(31, 119, 180);
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))
            .map_err(e)?;
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// The HTML report: per problem point, the table, the verdict and the convergence plot.
pub fn html_report(doc: &TuneDoc) -> Result<String> {
    let mut html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>kbench tune: {0}</title>\n<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}pre{{background:#f6f6f6;padding:1em;overflow-x:auto}}</style></head><body>\n<h1>kbench tune: {0}</h1>\n<p>Strategy <b>{1}</b>, axes {2}, seed {3}; {4} problem points. Started {5}, finished {6}.</p>\n",
        escape(&doc.study),
        doc.tune.strategy.name(),
        escape(&doc.tune.axes.join(", ")),
        doc.tune.seed,
        doc.problems.len(),
        escape(&doc.started_at),
        escape(&doc.finished_at)
    );
    for problem in &doc.problems {
        html.push_str(&format!("<h2>{}</h2>\n", escape(&problem.label)));
        html.push_str(&convergence_svg(problem)?);
        html.push_str(&format!("\n<pre>{}</pre>\n", escape(&table(doc, problem))));
    }
    html.push_str("</body></html>\n");
    Ok(html)
}
