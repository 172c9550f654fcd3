//! Charts of a finished run, as SVG and PNG (plotters, with a bundled DejaVu Sans so nothing is
//! needed from the system): median time against size on log-log axes with the 95% CI as error
//! bars, speedup over the baseline variant, and throughput as % of the measured copy peak.
//!
//! The x axis is the first integer axis with more than one value (usually `n`); one series per
//! variant, and one chart per combination of the other axes that vary (dtype, block, ...). A
//! study without such an axis (its sizes are matrices' names, say) gets one bar chart instead:
//! a bar per measured case, labelled by its variant and parameters, with its 95% CI.

use std::path::{Path, PathBuf};
use std::sync::Once;

use anyhow::{anyhow, bail, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::case_table::speedup;
use crate::record::{CaseResult, ResultsDoc};
use crate::vocab::ParamValue;

static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
static REGISTER_FONT: Once = Once::new();

const SIZE_PX: (u32, u32) = (1100, 700);

/// One line of a chart: its variant and (x, y, optional (y_low, y_high)) points sorted by x.
type Series = (String, Vec<(f64, f64, Option<(f64, f64)>)>);

/// What a chart shows of a case: its y value and an optional (low, high) band.
type YOf<'a> = dyn Fn(&CaseResult) -> Option<(f64, Option<(f64, f64)>)> + 'a;

struct Chart {
    file_stem: &'static str,
    title: String,
    y_label: &'static str,
    log_y: bool,
    series: Vec<Series>,
    /// A horizontal reference line (speedup 1x, 100% of peak).
    reference_y: Option<f64>,
    y_format: YFormat,
}

#[derive(Clone, Copy)]
enum YFormat {
    Seconds,
    Times,
    Percent,
}

/// Distinct colours (Tableau 10), so neighbouring series never look alike.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// 1000 -> "1k", 16777213 -> "16.8M".
fn si(x: f64) -> String {
    let (v, unit) = if x >= 1e9 {
        (x / 1e9, "G")
    } else if x >= 1e6 {
        (x / 1e6, "M")
    } else if x >= 1e3 {
        (x / 1e3, "k")
    } else {
        (x, "")
    };
    let text = format!("{v:.1}");
    format!("{}{unit}", text.trim_end_matches(".0"))
}

/// Writes every chart that has data into `dir` as `<chart>[-<facet>].svg` and `.png`, one set per
/// combination of the other varying axes (one per dtype, say), so each chart shows the variants
/// side by side; returns the paths.
pub fn write_plots(doc: &ResultsDoc, axis_order: &[&str], dir: &Path) -> Result<Vec<PathBuf>> {
    REGISTER_FONT.call_once(|| {
        if plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_err() {
            unreachable!("the bundled font is a valid TrueType file");
        }
    });
    let measured: Vec<&CaseResult> = doc.cases.iter().filter(|c| c.summary.is_some()).collect();
    if measured.is_empty() {
        bail!("no case was measured: nothing to plot");
    }
    let Some(x_axis) = x_axis(&measured, axis_order) else {
        // Nothing numeric to plot against (symgs's matrices, dtypes): a bar per case.
        std::fs::create_dir_all(dir)?;
        return write_case_bars(doc, &measured, dir);
    };
    let facet_axes: Vec<&str> = axis_order
        .iter()
        .copied()
        .filter(|a| *a != x_axis && distinct(&measured, a) > 1)
        .collect();
    let facet_of = |c: &CaseResult| -> String {
        facet_axes
            .iter()
            .filter_map(|a| c.params.get(*a).map(|v| format!("{a}={v}")))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut facets: Vec<String> = Vec::new();
    for c in &measured {
        let f = facet_of(c);
        if !facets.contains(&f) {
            facets.push(f);
        }
    }
    let x_of = |c: &CaseResult| match c.params.get(x_axis) {
        Some(ParamValue::Int(i)) => Some(*i as f64),
        _ => None,
    };

    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for facet in &facets {
        let in_facet: Vec<&CaseResult> = measured
            .iter()
            .copied()
            .filter(|c| facet_of(c) == *facet)
            .collect();
        let collect = |y: &YOf<'_>| -> Vec<Series> {
            let mut by_variant: Vec<Series> = Vec::new();
            for c in &in_facet {
                let (Some(x), Some((y, band))) = (x_of(c), y(c)) else {
                    continue;
                };
                if !(x > 0.0 && y.is_finite() && y > 0.0) {
                    continue;
                }
                match by_variant.iter_mut().find(|(l, _)| *l == c.variant) {
                    Some((_, pts)) => pts.push((x, y, band)),
                    None => by_variant.push((c.variant.clone(), vec![(x, y, band)])),
                }
            }
            for (_, pts) in &mut by_variant {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            by_variant
        };
        let subtitle = if facet.is_empty() {
            String::new()
        } else {
            format!(", {facet}")
        };
        let mut charts = vec![Chart {
            file_stem: "time",
            title: format!(
                "{}{subtitle}: median time vs {x_axis} (bars: 95% CI)",
                doc.study.name
            ),
            y_label: "median time",
            log_y: true,
            series: collect(&|c| {
                let s = c.summary.as_ref()?;
                Some((s.median_s, Some(s.median_ci95_s)))
            }),
            reference_y: None,
            y_format: YFormat::Seconds,
        }];
        if let Some(baseline) = &doc.manifest.baseline {
            charts.push(Chart {
                file_stem: "speedup",
                title: format!("{}{subtitle}: speedup over `{baseline}`", doc.study.name),
                y_label: "speedup (baseline median / median)",
                log_y: true,
                series: collect(&|c| Some((speedup(c, baseline, &doc.cases)?, None))),
                reference_y: Some(1.0),
                y_format: YFormat::Times,
            });
        }
        if let Some(device) = &doc.environment.device {
            charts.push(Chart {
                file_stem: "peak",
                title: format!(
                    "{}{subtitle}: % of the measured peak matching each case's traffic",
                    doc.study.name
                ),
                y_label: "throughput, % of measured peak",
                log_y: false,
                series: collect(&|c| Some((c.share_of_peak(Some(device))? * 100.0, None))),
                reference_y: Some(100.0),
                y_format: YFormat::Percent,
            });
        }
        let suffix = file_suffix(facet, &facets);
        for chart in charts.iter().filter(|c| !c.series.is_empty()) {
            let name = if suffix.is_empty() {
                chart.file_stem.to_string()
            } else {
                format!("{}-{suffix}", chart.file_stem)
            };
            let svg = dir.join(format!("{name}.svg"));
            draw(
                SVGBackend::new(&svg, SIZE_PX).into_drawing_area(),
                chart,
                x_axis,
            )?;
            let png = dir.join(format!("{name}.png"));
            draw(
                BitMapBackend::new(&png, SIZE_PX).into_drawing_area(),
                chart,
                x_axis,
            )?;
            written.extend([svg, png]);
        }
    }
    Ok(written)
}

/// The file-name part for `facet` (`dtype=f32 matrix=datasets/a.mtx` -> `dtype_f32-matrix_
/// datasets_a.mtx`): a parameter value may hold `/` or anything else a file name cannot, so only
/// ASCII letters, digits, `-`, `_` and `.` are kept (a name at most 120 characters long); a facet
/// whose name another one already has gets its position in `facets` after it.
fn file_suffix(facet: &str, facets: &[String]) -> String {
    let plain = |f: &str| -> String {
        let kept = f.chars().map(|c| match c {
            ' ' => '-',
            c if c.is_ascii_alphanumeric() || c == '-' || c == '.' => c,
            _ => '_',
        });
        kept.take(120).collect()
    };
    let name = plain(facet);
    let position = facets.iter().position(|f| f == facet).unwrap_or(0);
    if facets[..position].iter().any(|f| plain(f) == name) {
        format!("{name}-{}", position + 1)
    } else {
        name
    }
}

/// Round ticks for a log axis covering `lo..hi`: 1, 2 and 5 times each power of ten where the
/// range spans up to three decades, the powers of ten alone beyond; returns the range widened to
/// the nearest tick outside each end, and the ticks within it.
fn log_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let decades = (hi / lo).log10();
    let mantissas: &[f64] = if decades <= 3.0 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let first = lo.log10().floor() as i32 - 1;
    let last = hi.log10().ceil() as i32 + 1;
    let candidates: Vec<f64> = (first..=last)
        .flat_map(|k| mantissas.iter().map(move |m| m * 10f64.powi(k)))
        .collect();
    let low = candidates
        .iter()
        .copied()
        .filter(|t| *t <= lo * (1.0 + 1e-9))
        .fold(candidates[0], f64::max);
    let high = candidates
        .iter()
        .copied()
        .filter(|t| *t >= hi * (1.0 - 1e-9))
        .fold(candidates[candidates.len() - 1], f64::min);
    let ticks = candidates
        .into_iter()
        .filter(|t| *t >= low && *t <= high)
        .collect();
    (low, high, ticks)
}

/// A round tick without trailing zeros: 0.2, 1, 50, 2000.
fn round_tick(v: f64) -> String {
    let text = format!("{v:.6}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A round tick in seconds with its unit: 200 ns, 1 µs, 50 ms, 2 s.
fn seconds_tick(s: f64) -> String {
    // The rounding guards against 1e-6 landing a hair under 1 µs.
    let at_least = |unit: f64| s >= unit * (1.0 - 1e-9);
    let (scale, unit) = if at_least(1.0) {
        (1.0, "s")
    } else if at_least(1e-3) {
        (1e3, "ms")
    } else if at_least(1e-6) {
        (1e6, "µs")
    } else {
        (1e9, "ns")
    };
    format!("{} {unit}", round_tick(s * scale))
}

fn distinct(cases: &[&CaseResult], axis: &str) -> usize {
    let mut seen: Vec<&ParamValue> = Vec::new();
    for c in cases {
        if let Some(v) = c.params.get(axis) {
            if !seen.contains(&v) {
                seen.push(v);
            }
        }
    }
    seen.len()
}

fn x_axis<'a>(cases: &[&CaseResult], axis_order: &[&'a str]) -> Option<&'a str> {
    axis_order.iter().copied().find(|a| {
        distinct(cases, a) > 1
            && cases
                .iter()
                .all(|c| !matches!(c.params.get(*a), Some(ParamValue::Str(_))))
    })
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    chart: &Chart,
    x_label: &str,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing {}: {e:?}", chart.file_stem);
    root.fill(&WHITE).map_err(e)?;
    let points = chart.series.iter().flat_map(|(_, p)| p.iter());
    let (mut x_min, mut x_max, mut y_min, mut y_max) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y, band) in points {
        let (lo, hi) = band.unwrap_or((y, y));
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(lo.min(y));
        y_max = y_max.max(hi.max(y));
    }
    if let Some(r) = chart.reference_y {
        y_min = y_min.min(r);
        y_max = y_max.max(r);
    }
    // Pad the ranges so end points and the legend are not on the frame; a log y axis then widens
    // to its outermost ticks, so both ends and every decade shown carry a label.
    // The x axis, whose ends are the sizes run, keeps its range and the ticks within it.
    let (x_lo, x_hi) = (x_min / 1.3, x_max * 1.3);
    let x_ticks: Vec<f64> = log_ticks(x_lo, x_hi)
        .2
        .into_iter()
        .filter(|t| (x_lo..=x_hi).contains(t))
        .collect();
    let (y_lo, y_hi, y_ticks) = if chart.log_y {
        log_ticks(y_min / 1.2, y_max * 1.2)
    } else {
        (0.0, y_max * 1.15, Vec::new())
    };

    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(&chart.title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(110);
    let series_style = |i: usize| COLORS[i % COLORS.len()];
    // Ticks are round numbers (1, 2, 5 times a power of ten): each shown as short as it is exact.
    let y_text = |v: &f64| match chart.y_format {
        YFormat::Seconds => seconds_tick(*v),
        YFormat::Times => format!("{}x", round_tick(*v)),
        YFormat::Percent => format!("{v:.0}%"),
    };
    macro_rules! plot_on {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            ctx.configure_mesh()
                .x_desc(x_label)
                .y_desc(chart.y_label)
                .label_style(("sans-serif", 15))
                .x_label_formatter(&|x| si(*x))
                .y_label_formatter(&y_text)
                .draw()
                .map_err(e)?;
            if let Some(r) = chart.reference_y {
                ctx.draw_series(LineSeries::new(
                    [(x_lo, r), (x_hi, r)],
                    BLACK.mix(0.4).stroke_width(1),
                ))
                .map_err(e)?;
            }
            for (i, (label, pts)) in chart.series.iter().enumerate() {
                let color = series_style(i);
                ctx.draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.0, p.1)),
                    color.stroke_width(2),
                ))
                .map_err(e)?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(3))
                });
                ctx.draw_series(
                    pts.iter()
                        .map(|p| Circle::new((p.0, p.1), 4, color.filled())),
                )
                .map_err(e)?;
                ctx.draw_series(pts.iter().filter_map(|p| {
                    let (lo, hi) = p.2?;
                    Some(PathElement::new(
                        [(p.0, lo), (p.0, hi)],
                        color.stroke_width(2),
                    ))
                }))
                .map_err(e)?;
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.3))
                .label_font(("sans-serif", 14))
                .position(SeriesLabelPosition::UpperLeft)
                .margin(12)
                .draw()
                .map_err(e)?;
        }};
    }
    let x_range = (x_lo..x_hi).log_scale().with_key_points(x_ticks);
    if chart.log_y {
        plot_on!(builder
            .build_cartesian_2d(x_range, (y_lo..y_hi).log_scale().with_key_points(y_ticks))
            .map_err(e)?);
    } else {
        plot_on!(builder.build_cartesian_2d(x_range, y_lo..y_hi).map_err(e)?);
    }
    root.present().map_err(e)?;
    Ok(())
}

/// One horizontal bar per measured case (`time-cases.svg` and `.png`): its median time, the
/// 95% CI as a line across the bar's end, coloured by variant, labelled by variant and
/// parameters; for a study with no integer axis to plot against.
fn write_case_bars(doc: &ResultsDoc, measured: &[&CaseResult], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut variants: Vec<&str> = Vec::new();
    let mut bars: Vec<(String, usize, f64, (f64, f64))> = Vec::new();
    for c in measured {
        let Some(s) = &c.summary else { continue };
        if !variants.contains(&c.variant.as_str()) {
            variants.push(&c.variant);
        }
        let colour = variants.iter().position(|v| *v == c.variant).unwrap_or(0);
        let label = format!("{} {}", c.variant, crate::vocab::describe_params(&c.params));
        bars.push((
            label.trim_end().to_string(),
            colour,
            s.median_s,
            s.median_ci95_s,
        ));
    }
    let title = format!("{}: median time per case (lines: 95% CI)", doc.study.name);
    // Tall enough for every label: 22 pixels a bar.
    let height_px = SIZE_PX.1.max(120 + 22 * bars.len() as u32);
    let svg = dir.join("time-cases.svg");
    draw_bars(
        SVGBackend::new(&svg, (SIZE_PX.0, height_px)).into_drawing_area(),
        &title,
        &bars,
    )?;
    let png = dir.join("time-cases.png");
    draw_bars(
        BitMapBackend::new(&png, (SIZE_PX.0, height_px)).into_drawing_area(),
        &title,
        &bars,
    )?;
    Ok(vec![svg, png])
}

/// Draws `bars` (label, colour index, median s, CI s) top to bottom on a linear time axis.
fn draw_bars<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    bars: &[(String, usize, f64, (f64, f64))],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing the case bars: {e:?}");
    root.fill(&WHITE).map_err(e)?;
    let x_max = bars
        .iter()
        .map(|b| b.3 .1.max(b.2))
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.1;
    let count = bars.len() as f64;
    // Bars top to bottom in the run's order: row k sits at y = count - k.
    let label_of = |y: &f64| {
        // Ticks fall on whole rows (one a row is asked for, so their step is 1).
        let k = (count - y).round();
        if (y - y.round()).abs() < 1e-6 && (0.0..count).contains(&k) {
            bars[k as usize].0.clone()
        } else {
            String::new()
        }
    };

    let mut ctx = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(420)
        .build_cartesian_2d(0.0..x_max, 0.0..count + 0.5)
        .map_err(e)?;
    ctx.configure_mesh()
        .x_desc("median time")
        .label_style(("sans-serif", 14))
        .x_label_formatter(&|v| seconds_tick(*v))
        .y_labels(bars.len() + 1)
        .y_label_formatter(&label_of)
        .disable_y_mesh()
        .draw()
        .map_err(e)?;
    for (k, (_, colour, median, (lo, hi))) in bars.iter().enumerate() {
        let y = count - k as f64;
        let color = COLORS[colour % COLORS.len()];
        ctx.draw_series([Rectangle::new(
            [(0.0, y - 0.35), (*median, y + 0.35)],
            color.filled(),
        )])
        .map_err(e)?;
        ctx.draw_series([PathElement::new(
            [(*lo, y), (*hi, y)],
            BLACK.stroke_width(2),
        )])
        .map_err(e)?;
    }
    root.present().map_err(e)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facet_file_names_hold_no_separator_and_stay_apart() {
        let facets = vec![
            "dtype=f32 matrix=datasets/a.mtx".to_string(),
            "dtype=f32 matrix=datasets_a.mtx".to_string(),
            "dtype=f32 matrix=../../x".to_string(),
        ];
        assert_eq!(
            file_suffix(&facets[0], &facets),
            "dtype_f32-matrix_datasets_a.mtx"
        );
        assert_eq!(
            file_suffix(&facets[1], &facets),
            "dtype_f32-matrix_datasets_a.mtx-2"
        );
        let third = file_suffix(&facets[2], &facets);
        assert!(!third.contains('/'), "{third}");
        assert_eq!(file_suffix("n=1", &["n=1".to_string()]), "n_1");
    }

    #[test]
    fn log_ticks_label_both_ends_and_every_decade() {
        // A speedup from 0.3x to 1.6x: ticks below 1x too.
        let (lo, hi, ticks) = log_ticks(0.3, 1.6);
        assert_eq!((lo, hi), (0.2, 2.0));
        assert_eq!(ticks, [0.2, 0.5, 1.0, 2.0]);
        // Seven decades of time: a tick at every power of ten, the top one included.
        let (lo, hi, ticks) = log_ticks(3e-7, 0.4);
        assert_eq!((lo, hi), (1e-7, 1.0));
        assert_eq!(ticks.len(), 8);
        let labels: Vec<String> = ticks.iter().map(|t| seconds_tick(*t)).collect();
        assert_eq!(
            labels,
            ["100 ns", "1 µs", "10 µs", "100 µs", "1 ms", "10 ms", "100 ms", "1 s"]
        );
        assert_eq!(round_tick(0.5), "0.5");
        assert_eq!(round_tick(20.0), "20");
    }
}
