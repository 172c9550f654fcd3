//! `kbench history --html FILE`: one self-contained page with a trend chart per case (its
//! median in each run, in run order) with the change points marked (red: a confirmed slowdown,
//! green: a confirmed speedup, orange: suspected), cases with a change first, and the verdicts'
//! table above them.

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::history::{CaseHistory, History, HistoryVerdict};
use crate::report::html::escape;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static REGISTER_FONT: std::sync::Once = std::sync::Once::new();

const SIZE_PX: (u32, u32) = (720, 300);

/// The page: a heading, the run list, the verdict counts and a chart per case.
pub fn render(history: &History) -> Result<String> {
    REGISTER_FONT.call_once(|| {
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            unreachable!("the bundled font is a valid TrueType file");
        }
    });
    let mut page = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>kbench history: {study}</title>\n\
         <style>body {{ font-family: sans-serif; max-width: 60em; margin: 2em auto; }} \
         figure svg {{ max-width: 100%; height: auto; border: 1px solid #eee; }} \
         .regression {{ color: #b00; }} td, th {{ padding: 0 0.6em; text-align: left; }}</style></head><body>\n\
         <h1>History of {study}</h1>\n<p>{runs} runs, {first} to {last}; a change counts from {effect:.1}% \
         (t-test p &lt; {p}) and is confirmed after {confirm} runs.</p>\n",
        study = escape(&history.study),
        runs = history.runs.len(),
        first = history.runs.first().map_or("", |r| r.started_at.as_str()),
        last = history.runs.last().map_or("", |r| r.started_at.as_str()),
        effect = history.min_effect * 100.0,
        p = history.p_value,
        confirm = history.confirm_runs,
    );
    page.push_str("<table><tr><th>verdict</th><th>cases</th></tr>\n");
    for verdict in VERDICT_ORDER {
        page.push_str(&format!(
            "<tr><td>{}</td><td>{}</td></tr>\n",
            verdict.words(),
            history.count(verdict)
        ));
    }
    page.push_str("</table>\n");
    let mut cases: Vec<&CaseHistory> = history.cases.iter().collect();
    cases.sort_by_key(|c| VERDICT_ORDER.iter().position(|v| *v == c.verdict));
    // A case no run measured (skipped everywhere: no GPU) has nothing to chart.
    for case in cases
        .into_iter()
        .filter(|c| c.medians_s.iter().any(Option::is_some))
    {
        let class = if case.verdict == HistoryVerdict::RegressionConfirmed {
            " class=\"regression\""
        } else {
            ""
        };
        page.push_str(&format!(
            "<h2{class}>{} {}: {}</h2>\n<figure>{}</figure>\n",
            escape(&case.variant),
            escape(&case.params),
            case.verdict.words(),
            chart_svg(case)?
        ));
    }
    page.push_str("</body></html>\n");
    Ok(page)
}

/// Worst first: what a reader of a failed job looks for.
const VERDICT_ORDER: [HistoryVerdict; 7] = [
    HistoryVerdict::RegressionConfirmed,
    HistoryVerdict::SuspectedRegression,
    HistoryVerdict::Improvement,
    HistoryVerdict::SuspectedImprovement,
    HistoryVerdict::MachineChanged,
    HistoryVerdict::Stable,
    HistoryVerdict::InsufficientData,
];

/// One case's medians (µs) against the run number (1-based), a vertical line at each change.
fn chart_svg(case: &CaseHistory) -> Result<String> {
    let points: Vec<(f64, f64)> = case
        .medians_s
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.map(|m| ((i + 1) as f64, m * 1e6)))
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE_PX).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| anyhow!("drawing the history chart: {e:?}");
        root.fill(&WHITE).map_err(e)?;
        if points.is_empty() {
            return Ok("<p>no run measured this case</p>".into());
        }
        let (lo, hi) = points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| {
            (lo.min(p.1), hi.max(p.1))
        });
        let pad = ((hi - lo) * 0.15).max(hi * 0.01);
        let runs = case.medians_s.len() as f64;
        let mut chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(70)
            .build_cartesian_2d(0.5..runs + 0.5, (lo - pad).max(0.0)..hi + pad)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc("run")
            .y_desc("median (µs)")
            .x_label_formatter(&|x| format!("{x:.0}"))
            .draw()
            .map_err(e)?;
        chart
            .draw_series(LineSeries::new(points.iter().copied(), &BLUE))
            .map_err(e)?;
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 3, BLUE.filled())))
            .map_err(e)?;
        for change in &case.changes {
            let color = match (change.confirmed, change.ratio > 1.0) {
                (false, _) => RGBColor(230, 140, 0),
                (true, true) => RGBColor(200, 0, 0),
                (true, false) => RGBColor(0, 150, 0),
            };
            // Between the last run before the change and the first after it.
            let x = change.run as f64 + 0.5;
            chart
                .draw_series(LineSeries::new(
                    [(x, lo - pad), (x, hi + pad)],
                    color.stroke_width(2),
                ))
                .map_err(e)?
                .label(format!(
                    "{:+.1}% from run {}{}",
                    (change.ratio - 1.0) * 100.0,
                    change.run + 1,
                    if change.confirmed { "" } else { " (suspected)" }
                ))
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 15, y)], color));
        }
        if !case.changes.is_empty() {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
        root.present().map_err(e)?;
    }
    Ok(svg)
}
