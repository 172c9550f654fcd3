//! The terminal table: one row per case (variant x grid point) with the median, its 95% CI,
//! throughput, % of the measured peak matching its traffic (flagged where implausible), speedup
//! over the baseline variant, and accuracy (and, in the wide table and files, energy per run,
//! power, clocks and throttling where NVML gave them); then the reasons for every skipped or
//! failed case and every implausible one. Rows are in the grid's order whatever order the cases
//! ran in; on a terminal (not `--wide`, not a file) the rows of a skip reason that covers
//! `FOLD_SKIPPED_ROWS` cases or more are folded into that reason's line, and every line fits the
//! width (columns left out, then words wrapped).

use std::collections::BTreeMap;

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style, Width};

use crate::record::{
    AbovePeakCause, CaseResult, CaseStatus, DeviceFingerprint, ResultsDoc, Summary,
};
use crate::stats;
use crate::vocab::ParamValue;

/// How the table is drawn: box-drawing for terminals, or markdown to paste into a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableStyle {
    Terminal,
    Markdown,
}

/// The table of every case with all its columns (as `--wide` draws it).
pub fn render(doc: &ResultsDoc, axis_order: &[&str], style: TableStyle) -> String {
    render_fitted(doc, axis_order, style, None)
}

/// The table of every case; with `max_width_chars`, the least needed columns (samples, CI,
/// % peak, ...) are left out until it fits, and a line says which. Rows are in the grid's order
/// (each axis in `axis_order`, the first slowest), whatever order the cases ran in. On a
/// terminal of limited width (not `--wide`, not a file), the rows of a skip reason that covers
/// `FOLD_SKIPPED_ROWS` cases or more (every CUDA case on a machine without a GPU) are folded
/// into its line under the table.
pub fn render_fitted(
    doc: &ResultsDoc,
    axis_order: &[&str],
    style: TableStyle,
    max_width_chars: Option<usize>,
) -> String {
    let cases = grid_order(&doc.cases, axis_order);
    let folded = match max_width_chars {
        Some(_) => folded_reasons(&cases),
        None => Vec::new(),
    };
    let shown: Vec<CaseResult> = cases
        .iter()
        .filter(|c| !is_folded(c, &folded))
        .cloned()
        .collect();
    let axes = SplitAxes::of(&cases, axis_order);
    let mut columns = parameter_columns(&shown, &axes.varying);
    columns.extend(timing_columns(&shown));
    columns.extend(rate_columns(doc, &shown));
    // Energy and clocks are for the wide table (and files) alone: a terminal's width is spent
    // on the time first.
    if max_width_chars.is_none() {
        columns.extend(energy_columns(&shown));
        columns.extend(process_columns(&shown));
    }
    columns.extend(comparison_columns(doc, &shown));
    let drawn = draw_columns(columns, style, max_width_chars);

    let mut out = String::new();
    let mut lines = heading(doc, &axes.fixed);
    lines.push_str(&device_lines(doc));
    lines.push_str(&time_lines(&doc.cases));
    match style {
        TableStyle::Terminal => out.push_str(&lines),
        // One paragraph each: consecutive lines would run together in markdown.
        TableStyle::Markdown => lines
            .lines()
            .for_each(|l| out.push_str(&format!("{}\n\n", l.trim()))),
    }
    if cases.is_empty() {
        out.push_str("no cases\n");
        return out;
    }
    if !shown.is_empty() {
        out.push_str(&drawn.table);
        out.push('\n');
        // A blank line ends a markdown table: the text after it would be read as more rows.
        if style == TableStyle::Markdown {
            out.push('\n');
        }
    }
    out.push_str(&drawn.left_out_note());
    out.push_str(&reasons(&cases, &folded, style, max_width_chars));
    out
}

/// Skip reasons that cover this many cases or more have their rows folded into one line on a
/// terminal: 54 rows that say `skipped` tell less than one line that says why.
pub const FOLD_SKIPPED_ROWS: usize = 10;

/// The skip reasons whose rows are folded (see `render_fitted`).
fn folded_reasons(cases: &[CaseResult]) -> Vec<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for case in cases.iter().filter(|c| c.status == CaseStatus::Skipped) {
        let reason = case.reason.clone().unwrap_or_default();
        match counts.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => counts.push((reason, 1)),
        }
    }
    counts
        .into_iter()
        .filter(|(_, n)| *n >= FOLD_SKIPPED_ROWS)
        .map(|(r, _)| r)
        .collect()
}

fn is_folded(case: &CaseResult, folded: &[String]) -> bool {
    case.status == CaseStatus::Skipped && folded.contains(&case.reason.clone().unwrap_or_default())
}

/// The cases sorted into the grid's order: by each axis of `axis_order` in turn (the first
/// slowest, as the grid expands), an axis's values ranked as they first appear in the run (the
/// manifest's order), a case without the axis (a CPU variant has no `block`) first; then by
/// variant, as they first appear. The plan interleaves variants by their own point lists, so a
/// CPU variant (fewer points, no `block`) would otherwise run ahead of the CUDA ones.
fn grid_order(cases: &[CaseResult], axis_order: &[&str]) -> Vec<CaseResult> {
    let mut ranks: Vec<Vec<&ParamValue>> = vec![Vec::new(); axis_order.len()];
    let mut variants: Vec<&str> = Vec::new();
    for case in cases {
        for (axis, seen) in axis_order.iter().zip(ranks.iter_mut()) {
            if let Some(v) = case.params.get(*axis) {
                if !seen.contains(&v) {
                    seen.push(v);
                }
            }
        }
        if !variants.contains(&case.variant.as_str()) {
            variants.push(&case.variant);
        }
    }
    let key = |case: &CaseResult| -> Vec<usize> {
        let mut key: Vec<usize> = axis_order
            .iter()
            .zip(&ranks)
            .map(|(axis, seen)| {
                case.params
                    .get(*axis)
                    .and_then(|v| seen.iter().position(|s| *s == v))
                    .map_or(0, |p| p + 1)
            })
            .collect();
        key.push(
            variants
                .iter()
                .position(|v| *v == case.variant)
                .unwrap_or(0),
        );
        key
    };
    let mut sorted = cases.to_vec();
    sorted.sort_by_cached_key(key);
    sorted
}

/// The axes of a run, in `axis_order`: those with more than one value get a column; the others
/// go in the heading as `name=value`.
struct SplitAxes<'a> {
    varying: Vec<&'a str>,
    fixed: Vec<String>,
}

impl<'a> SplitAxes<'a> {
    fn of(cases: &[CaseResult], axis_order: &[&'a str]) -> SplitAxes<'a> {
        let mut axis_values: BTreeMap<&str, Vec<&ParamValue>> = BTreeMap::new();
        for case in cases {
            for (name, value) in &case.params {
                let values = axis_values.entry(name.as_str()).or_default();
                if !values.contains(&value) {
                    values.push(value);
                }
            }
        }
        let varying = axis_order
            .iter()
            .copied()
            .filter(|a| axis_values.get(a).is_some_and(|v| v.len() > 1))
            .collect();
        let fixed = axis_order
            .iter()
            .filter_map(|a| match axis_values.get(a) {
                Some(v) if v.len() == 1 => Some(format!("{a}={}", v[0])),
                _ => None,
            })
            .collect();
        SplitAxes { varying, fixed }
    }
}

/// What each case is: its variant, its varying axes, and its scope where any case has one.
fn parameter_columns(cases: &[CaseResult], varying: &[&str]) -> Vec<Column> {
    let mut columns = vec![Column::new(
        "variant",
        cases.iter().map(|c| c.variant.clone()).collect(),
    )];
    for axis in varying {
        columns.push(Column::new(
            axis,
            cases
                .iter()
                .map(|c| c.params.get(*axis).map_or("-".into(), |v| v.to_string()))
                .collect(),
        ));
    }
    if cases.iter().any(|c| c.scope.is_some()) {
        columns.push(
            Column::new(
                "scope",
                cases
                    .iter()
                    .map(|c| c.scope.map_or("-".into(), |s| s.name().to_string()))
                    .collect(),
            )
            .droppable(4),
        );
    }
    columns
}

/// One cell per case from its summary, `-` for a case without one (skipped, failed).
fn summary_cells(cases: &[CaseResult], cell: impl Fn(&Summary) -> String) -> Vec<String> {
    cases
        .iter()
        .map(|c| c.summary.as_ref().map_or("-".into(), &cell))
        .collect()
}

/// The median time and its 95% CI's half width, relative.
fn timing_columns(cases: &[CaseResult]) -> Vec<Column> {
    let ci95 = summary_cells(cases, |s| {
        // Under 6 samples no order-statistic interval reaches 95%.
        if s.samples < stats::MIN_SAMPLES_FOR_MEDIAN_CI {
            "n/a".into()
        } else {
            let half_width = (s.median_ci95_s.1 - s.median_ci95_s.0) / 2.0 / s.median_s * 100.0;
            format!("±{half_width:.1}%")
        }
    });
    vec![
        Column::new(
            "median",
            summary_cells(cases, |s| format_seconds(s.median_s)),
        )
        .numeric(),
        Column::new("95% CI", ci95).numeric().droppable(2),
    ]
}

/// Throughput: GB/s, GFLOP/s where the work is mostly arithmetic, and % of the measured copy
/// peak where the run measured one.
fn rate_columns(doc: &ResultsDoc, cases: &[CaseResult]) -> Vec<Column> {
    // Work that is mostly arithmetic (Durbin, Pearson's matrix: more flops than bytes) is shown
    // in GFLOP/s too; its GB/s alone would read as nothing.
    let show_gflops = cases
        .iter()
        .any(|c| matches!((c.gflops_per_s, c.gbytes_per_s), (Some(f), Some(b)) if f > b));
    let mut columns = vec![Column::new(
        "GB/s",
        cases
            .iter()
            .map(|c| c.gbytes_per_s.map_or("-".into(), format_rate))
            .collect(),
    )
    .numeric()
    .droppable(if show_gflops { 3 } else { 5 })];
    if show_gflops {
        columns.push(
            Column::new(
                "GFLOP/s",
                cases
                    .iter()
                    .map(|c| c.gflops_per_s.map_or("-".into(), format_rate))
                    .collect(),
            )
            .numeric()
            .droppable(5),
        );
    }
    // A study that declares the elements it processes reads in elements per second too.
    if cases.iter().any(|c| c.elements_per_s.is_some()) {
        columns.push(
            Column::new(
                "Gelem/s",
                (cases.iter())
                    .map(|c| {
                        c.elements_per_s
                            .map_or("-".into(), |r| format_rate(r / 1e9))
                    })
                    .collect(),
            )
            .numeric()
            .droppable(4),
        );
    }
    let device = doc.environment.device.as_ref();
    if device.is_some() {
        columns.push(
            Column::new(
                "% peak",
                cases.iter().map(|c| peak_cell(c, device)).collect(),
            )
            .numeric()
            .droppable(3),
        );
    }
    columns
}

/// With several processes per case (`[measure] processes`): how far apart the processes'
/// medians were, (highest - lowest) / the case's median, and how many there were: `3.1% of 4`.
fn process_columns(cases: &[CaseResult]) -> Vec<Column> {
    let medians_s = |c: &CaseResult| -> Option<Vec<f64>> {
        let m = c.measurement.as_ref()?;
        (!m.process_medians_s.is_empty()).then(|| m.process_medians_s.clone())
    };
    if !cases.iter().any(|c| medians_s(c).is_some()) {
        return Vec::new();
    }
    let cell = |c: &CaseResult| -> Option<String> {
        let medians_s = medians_s(c)?;
        let median_s = c.summary.as_ref()?.median_s;
        let high_s = medians_s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let low_s = medians_s.iter().copied().fold(f64::INFINITY, f64::min);
        Some(format!(
            "{:.1}% of {}",
            (high_s - low_s) / median_s * 100.0,
            medians_s.len()
        ))
    };
    vec![Column::new(
        "process spread",
        cases
            .iter()
            .map(|c| cell(c).unwrap_or_else(|| "-".into()))
            .collect(),
    )
    .numeric()]
}

/// Energy per run and power over the case's energy window, the SM clock's median over its
/// samples, and the throttle reasons seen: each column where some case has a figure for it.
fn energy_columns(cases: &[CaseResult]) -> Vec<Column> {
    let mut columns = Vec::new();
    if cases.iter().any(|c| c.energy().is_some()) {
        let cell = |c: &CaseResult, f: fn(&crate::record::EnergyRecord) -> String| {
            c.energy().map_or("-".into(), f)
        };
        columns.push(
            Column::new(
                "J/run",
                cases
                    .iter()
                    .map(|c| cell(c, |e| format_joules(e.joules_per_run)))
                    .collect(),
            )
            .numeric(),
        );
        columns.push(
            Column::new(
                "W",
                cases
                    .iter()
                    .map(|c| cell(c, |e| format!("{:.0}", e.power_w)))
                    .collect(),
            )
            .numeric(),
        );
    }
    if cases.iter().any(|c| c.clocks().is_some()) {
        columns.push(
            Column::new(
                "SM MHz",
                cases
                    .iter()
                    .map(|c| {
                        (c.clocks().and_then(|k| k.sm_clock_median_mhz))
                            .map_or("-".into(), |mhz| mhz.to_string())
                    })
                    .collect(),
            )
            .numeric(),
        );
    }
    if cases
        .iter()
        .any(|c| c.clocks().is_some_and(|k| !k.throttle_reasons.is_empty()))
    {
        columns.push(Column::new(
            "throttled",
            cases
                .iter()
                .map(|c| match c.clocks() {
                    Some(k) if !k.throttle_reasons.is_empty() => k.throttle_reasons.join(" "),
                    Some(_) => "no".into(),
                    None => "-".into(),
                })
                .collect(),
        ));
    }
    columns
}

/// Joules with an SI prefix and four significant figures: `12.30 mJ`, `400.0 µJ`.
pub fn format_joules(j: f64) -> String {
    if !j.is_finite() || j >= 1e6 {
        return format!("{j:.3e} J");
    }
    let (value, unit) = if j >= 1.0 {
        (j, "J")
    } else if j >= 1e-3 {
        (j * 1e3, "mJ")
    } else if j >= 1e-6 {
        (j * 1e6, "µJ")
    } else {
        (j * 1e9, "nJ")
    };
    let decimals = if value >= 100.0 {
        1
    } else if value >= 10.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$} {unit}")
}

/// A case's GB/s as a share of the measured peak matching its traffic (read, write, copy or
/// triad; the copy peak in older files), flagged where the case is implausible (faster than
/// the memory can be) or above its peak (see `CaseResult::judge_peak`).
fn peak_cell(case: &CaseResult, device: Option<&DeviceFingerprint>) -> String {
    match (case.share_of_peak(device), peak_mark(case)) {
        (Some(share), Some(mark)) => format!("{:.0}% {mark}", share * 100.0),
        (Some(share), None) => format!("{:.0}%", share * 100.0),
        (None, Some(mark)) => mark.into(),
        (None, None) => "-".into(),
    }
}

/// The mark after a case's "% peak", if it has one: `implausible`, or why it is above 100%.
pub fn peak_mark(case: &CaseResult) -> Option<&'static str> {
    if case.implausible {
        return Some("implausible");
    }
    Some(above_peak_label(case.above_peak.as_ref()?.cause))
}

/// The mark after a "% peak" above 100%: `L2` where writes still in the L2 (or inputs already in
/// it) explain it, `>peak` where the case beat the peak kernel.
fn above_peak_label(cause: AbovePeakCause) -> &'static str {
    match cause {
        AbovePeakCause::L2 => "L2",
        AbovePeakCause::BeatsPeakKernel => ">peak",
    }
}

/// The speedup over the baseline variant (where the study names one), the sample count, and
/// the accuracy.
fn comparison_columns(doc: &ResultsDoc, cases: &[CaseResult]) -> Vec<Column> {
    let mut columns = Vec::new();
    if let Some(baseline) = &doc.manifest.baseline {
        columns.push(
            Column::new(
                "speedup",
                cases
                    .iter()
                    .map(|c| {
                        speedup(c, baseline, &doc.cases).map_or("-".into(), |s| format!("{s:.2}x"))
                    })
                    .collect(),
            )
            .numeric()
            .droppable(7),
        );
    }
    columns.push(
        Column::new("samples", summary_cells(cases, |s| s.samples.to_string()))
            .numeric()
            .droppable(1),
    );
    columns.push(
        Column::new("rel err", cases.iter().map(accuracy_cell).collect())
            .numeric()
            .droppable(6),
    );
    columns
}

/// The study's name and title, then the count of cases by status and the axes with one value.
fn heading(doc: &ResultsDoc, fixed: &[String]) -> String {
    let cases = &doc.cases;
    let count = |status: CaseStatus| cases.iter().filter(|c| c.status == status).count();
    format!(
        "{}{}\n{} {}: {} passed{}, {} failed, {} skipped{}\n",
        doc.study.name,
        if doc.study.title.is_empty() {
            String::new()
        } else {
            format!(": {}", doc.study.title)
        },
        cases.len(),
        if cases.len() == 1 { "case" } else { "cases" },
        count(CaseStatus::Passed),
        match cases.iter().filter(|c| c.unchecked).count() {
            0 => String::new(),
            n => format!(" ({n} unchecked: timed only)"),
        },
        cases.iter().filter(|c| c.failed()).count(),
        count(CaseStatus::Skipped),
        if fixed.is_empty() {
            String::new()
        } else {
            format!("  ({})", fixed.join(", "))
        },
    )
}

/// Where the cases' wall time went (from their `overhead`; nothing for files without it):
/// the sampling's share first, then the rest by size.
pub fn time_lines(cases: &[CaseResult]) -> String {
    let overheads: Vec<_> = (cases.iter())
        .filter_map(|c| Some((c.wall_s, c.overhead.as_ref()?)))
        .collect();
    if overheads.is_empty() {
        return String::new();
    }
    let wall_s: f64 = overheads.iter().map(|(wall_s, _)| wall_s).sum();
    let total = |part: fn(&crate::record::Overhead) -> f64| -> f64 {
        overheads.iter().map(|(_, o)| part(o)).sum()
    };
    let mut rest = [
        ("reference", total(|o| o.reference_s)),
        ("inputs", total(|o| o.inputs_s)),
        ("compile", total(|o| o.compile_s)),
        ("setup", total(|o| o.setup_s)),
        ("transfers", total(|o| o.transfers_s)),
        ("extra runs", total(|o| o.extra_runs_s)),
        ("checking", total(|o| o.checking_s)),
        ("other", total(|o| o.other_s)),
    ];
    rest.sort_by(|a, b| b.1.total_cmp(&a.1));
    let rest: Vec<String> = (rest.iter())
        .filter(|(_, s)| *s >= 0.05)
        .map(|(stage, s)| format!("{stage} {s:.1} s"))
        .collect();
    let mut text = format!(
        "time: {:.1} s of the cases' {wall_s:.1} s was sampling\n",
        total(|o| o.sampling_s)
    );
    if !rest.is_empty() {
        text.push_str(&format!("  the rest: {}\n", rest.join(", ")));
    }
    text
}

/// The GPU the run used and its measured peaks, or each of several; nothing for a CPU run.
fn device_lines(doc: &ResultsDoc) -> String {
    if doc.environment.devices.len() > 1 {
        return several_devices(doc);
    }
    match &doc.environment.device {
        // Older files: the copy peak alone, on the device's line; else the peaks on one of their
        // own, so each fits 80 columns.
        Some(device) if device.peaks_unmeasured.is_some() => format!(
            "device: {} (sm {}, {} SMs)\n  {}\n",
            device.name,
            device.compute_capability,
            device.sm_count,
            device.peaks_unmeasured.as_deref().unwrap_or_default()
        ),
        Some(device) if device.measured_read_gbytes_per_s <= 0.0 => format!(
            "device: {} (sm {}, {} SMs), measured copy peak {:.0} GB/s\n",
            device.name,
            device.compute_capability,
            device.sm_count,
            device.measured_copy_gbytes_per_s
        ),
        Some(device) => format!(
            "device: {} (sm {}, {} SMs)\n  {}\n",
            device.name,
            device.compute_capability,
            device.sm_count,
            peaks_text(device)
        ),
        None => String::new(),
    }
}

/// The device's measured peaks and its physical ceiling (see `DeviceFingerprint::peak` and
/// `ceiling_gbytes_per_s`, which says where the ceiling comes from); the copy peak alone for a
/// file written before kbench measured the others. One line within 80 columns.
pub fn peaks_text(device: &DeviceFingerprint) -> String {
    if device.measured_read_gbytes_per_s <= 0.0 && device.measured_write_gbytes_per_s <= 0.0 {
        return format!(
            "measured copy peak {:.0} GB/s",
            device.measured_copy_gbytes_per_s
        );
    }
    // A triad peak of 0: a file written before kbench measured it.
    let triad = match device.measured_triad_gbytes_per_s {
        t if t > 0.0 => format!(", triad {t:.0}"),
        _ => String::new(),
    };
    format!(
        "peaks, GB/s: copy {:.0}, read {:.0}, write {:.0}{triad}; ceiling {:.0}",
        device.measured_copy_gbytes_per_s,
        device.measured_read_gbytes_per_s,
        device.measured_write_gbytes_per_s,
        device.ceiling_gbytes_per_s(),
    )
}

/// A run on several GPUs (`run --devices`, or merged shards): each GPU, its measured copy peak
/// and the cases it ran, then how far apart the peaks are: same-model GPUs differ by a few
/// percent, which tells how far apart their cases' times may be for that reason alone.
fn several_devices(doc: &ResultsDoc) -> String {
    let devices = doc.environment.all_devices();
    let counts = crate::shard::cases_per_device(doc);
    // Identical nodes have the same bus ids: the host is named where there are several.
    let hosts = devices
        .iter()
        .map(|d| &d.host)
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    let mut out = format!("devices: {}\n", devices.len());
    for d in &devices {
        let key = d.key("");
        out.push_str(&format!(
            "  {}{} {} (sm {}, {} SMs): measured copy peak {:.0} GB/s, {} cases\n",
            if hosts > 1 {
                format!("{} ", d.host)
            } else {
                String::new()
            },
            d.pci_bus_id,
            d.name,
            d.compute_capability,
            d.sm_count,
            d.measured_copy_gbytes_per_s,
            counts.get(&key).copied().unwrap_or(0)
        ));
    }
    let peaks: Vec<f64> = devices
        .iter()
        .map(|d| d.measured_copy_gbytes_per_s)
        .filter(|p| *p > 0.0)
        .collect();
    if peaks.len() > 1 {
        let (lo, hi) = peaks
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), p| (lo.min(*p), hi.max(*p)));
        out.push_str(&format!(
            "  copy peaks differ by {:.1}% (highest over lowest); each case ran on one GPU, named in the JSON\n",
            (hi / lo - 1.0) * 100.0
        ));
    }
    out
}

/// The width terminal tables are fitted to: `COLUMNS` where set (as clap reads it), else the
/// width of the terminal stdout is, else 80 (a file or a pipe).
pub fn terminal_width() -> usize {
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
    {
        return columns;
    }
    terminal_size::terminal_size_of(std::io::stdout())
        .map_or(80, |(terminal_size::Width(w), _)| usize::from(w))
}

/// One column of a table: its header, its cells, and whether it may be left out to fit a width
/// (`drop_rank`: lowest first; `None`: always shown).
pub struct Column {
    pub header: String,
    pub cells: Vec<String>,
    pub right_aligned: bool,
    pub drop_rank: Option<u8>,
}

impl Column {
    pub fn new(header: &str, cells: Vec<String>) -> Column {
        Column {
            header: header.to_string(),
            cells,
            right_aligned: false,
            drop_rank: None,
        }
    }

    pub fn numeric(mut self) -> Column {
        self.right_aligned = true;
        self
    }

    pub fn droppable(mut self, rank: u8) -> Column {
        self.drop_rank = Some(rank);
        self
    }
}

/// A drawn table and the headers of the columns left out to fit.
pub struct Drawn {
    pub table: String,
    pub left_out: Vec<String>,
    pub max_width_chars: Option<usize>,
}

impl Drawn {
    /// `(left out to fit 80 columns: samples, 95% CI; --wide shows them)`, or nothing.
    pub fn left_out_note(&self) -> String {
        match (self.left_out.is_empty(), self.max_width_chars) {
            (false, Some(width)) => crate::report::text::wrap(
                &format!(
                    "(left out to fit {width} columns: {}; --wide shows them)",
                    self.left_out.join(", ")
                ),
                Some(width),
                " ",
            ),
            _ => String::new(),
        }
    }
}

/// Draws `columns` in `style`; with `max_width_chars`, leaves out droppable columns, lowest rank
/// first, until the table fits; if none is left to drop and it is still too wide, the widest
/// column of words (a case's parameters, a label) is wrapped at its spaces to fit.
pub fn draw_columns(
    mut columns: Vec<Column>,
    style: TableStyle,
    max_width_chars: Option<usize>,
) -> Drawn {
    let mut left_out = Vec::new();
    loop {
        let mut table = build_table(&columns, style);
        let fits = max_width_chars.is_none_or(|w| table.total_width() <= w);
        let lowest = columns
            .iter()
            .enumerate()
            .filter_map(|(i, c)| Some((c.drop_rank?, i)))
            .min();
        match (lowest, max_width_chars) {
            (Some((_, i)), _) if !fits => left_out.push(columns.remove(i).header),
            (_, Some(width)) if !fits && style == TableStyle::Terminal => {
                let overflow = table.total_width() - width;
                wrap_widest_words(&mut table, &columns, overflow);
                return Drawn {
                    table: table.to_string(),
                    left_out,
                    max_width_chars,
                };
            }
            _ => {
                return Drawn {
                    table: table.to_string(),
                    left_out,
                    max_width_chars,
                }
            }
        }
    }
}

/// Narrows the widest left-aligned column holding spaces by `overflow` columns, wrapping its
/// cells at word boundaries (a word is never cut unless it alone is wider than the column).
fn wrap_widest_words(table: &mut tabled::Table, columns: &[Column], overflow: usize) {
    let width_of = |c: &Column| {
        std::iter::once(&c.header)
            .chain(&c.cells)
            .map(|t| unicode_width::UnicodeWidthStr::width(t.as_str()))
            .max()
            .unwrap_or(0)
    };
    let widest = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.right_aligned && c.cells.iter().any(|t| t.contains(' ')))
        .max_by_key(|(_, c)| width_of(c));
    if let Some((i, column)) = widest {
        let longest_word = std::iter::once(&column.header)
            .chain(&column.cells)
            .flat_map(|t| t.split(' '))
            .map(unicode_width::UnicodeWidthStr::width)
            .max()
            .unwrap_or(1);
        let target = width_of(column)
            .saturating_sub(overflow)
            .max(longest_word)
            .max(1);
        table.modify(Columns::one(i), Width::wrap(target).keep_words(true));
    }
}

fn build_table(columns: &[Column], style: TableStyle) -> tabled::Table {
    let mut builder = Builder::default();
    builder.push_record(columns.iter().map(|c| c.header.clone()));
    let rows = columns.first().map_or(0, |c| c.cells.len());
    for row in 0..rows {
        builder.push_record(columns.iter().map(|c| c.cells[row].clone()));
    }
    let mut table = builder.build();
    match style {
        TableStyle::Terminal => table.with(Style::rounded()),
        TableStyle::Markdown => table.with(Style::markdown()),
    };
    for (i, column) in columns.iter().enumerate() {
        if column.right_aligned {
            table.modify(Columns::one(i), Alignment::right());
        }
    }
    table
}

/// A rate (GB/s, GFLOP/s) with three significant digits however small: 2981, 45.2, 0.0123.
pub fn format_rate(rate: f64) -> String {
    if rate >= 100.0 || rate == 0.0 || !rate.is_finite() {
        format!("{rate:.0}")
    } else {
        let decimals = (2 - rate.log10().floor() as i32).clamp(0, 12) as usize;
        format!("{rate:.decimals$}")
    }
}

/// Every case as one CSV row of plain numbers (seconds, GB/s), for spreadsheets and scripts.
pub fn render_csv(doc: &ResultsDoc, axis_order: &[&str]) -> anyhow::Result<String> {
    let axes: Vec<&str> = axis_order
        .iter()
        .copied()
        .filter(|a| doc.cases.iter().any(|c| c.params.contains_key(*a)))
        .collect();
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["index", "variant", "backend", "implementation", "scope"];
    header.extend(&axes);
    header.extend([
        "status",
        "samples",
        "median_s",
        "median_ci95_low_s",
        "median_ci95_high_s",
        "mean_s",
        "std_dev_s",
        "min_s",
        "max_s",
        "gbytes_per_s",
        "percent_of_peak",
        "speedup",
        "max_abs_err",
        "max_rel_err",
        "reason",
    ]);
    // Energy, clocks, the implausible flag and the above-peak one go last, and only where some
    // case has them, so a file without them reads as before.
    let energy = doc.cases.iter().any(|c| c.energy().is_some());
    let clocks = doc.cases.iter().any(|c| c.clocks().is_some());
    let implausible = doc.cases.iter().any(|c| c.implausible);
    let above_peak = doc.cases.iter().any(|c| c.above_peak.is_some());
    let elements = doc.cases.iter().any(|c| c.elements_per_s.is_some());
    let unchecked = doc.cases.iter().any(|c| c.unchecked);
    if elements {
        header.push("elements_per_s");
    }
    if unchecked {
        header.push("unchecked");
    }
    if energy {
        header.extend([
            "joules_per_run",
            "power_w",
            "energy_window_s",
            "energy_runs",
        ]);
    }
    if clocks {
        header.extend([
            "sm_clock_median_mhz",
            "sm_clock_min_mhz",
            "memory_clock_median_mhz",
            "throttle_reasons",
        ]);
    }
    if implausible {
        header.extend(["implausible", "implausible_reason"]);
    }
    if above_peak {
        header.extend(["above_peak", "above_peak_reason"]);
    }
    writer.write_record(&header)?;
    let device = doc.environment.device.as_ref();
    let num = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:e}"));
    for c in &doc.cases {
        let s = c.summary.as_ref();
        let mut row = vec![
            c.index.to_string(),
            c.variant.clone(),
            c.backend.to_string(),
            c.implementation.clone(),
            c.scope.map_or(String::new(), |s| s.name().to_string()),
        ];
        row.extend(
            axes.iter()
                .map(|a| c.params.get(*a).map_or(String::new(), |v| v.to_string())),
        );
        row.push(c.status.name().to_string());
        row.push(s.map_or(String::new(), |s| s.samples.to_string()));
        row.extend(
            [
                s.map(|s| s.median_s),
                s.map(|s| s.median_ci95_s.0),
                s.map(|s| s.median_ci95_s.1),
                s.map(|s| s.mean_s),
                s.map(|s| s.std_dev_s),
                s.map(|s| s.min_s),
                s.map(|s| s.max_s),
                c.gbytes_per_s,
                c.share_of_peak(device).map(|s| s * 100.0),
                doc.manifest
                    .baseline
                    .as_ref()
                    .and_then(|b| speedup(c, b, &doc.cases)),
                c.max_abs_err(),
                c.max_rel_err(),
            ]
            .map(num),
        );
        row.push(c.reason.clone().unwrap_or_default());
        if elements {
            row.push(num(c.elements_per_s));
        }
        if unchecked {
            row.push(c.unchecked.to_string());
        }
        if energy {
            let e = c.energy();
            row.extend([
                num(e.map(|e| e.joules_per_run)),
                num(e.map(|e| e.power_w)),
                num(e.map(|e| e.window_s)),
                e.map_or(String::new(), |e| e.runs.to_string()),
            ]);
        }
        if clocks {
            let k = c.clocks();
            let mhz = |x: Option<u32>| x.map_or(String::new(), |x| x.to_string());
            row.extend([
                mhz(k.and_then(|k| k.sm_clock_median_mhz)),
                mhz(k.map(|k| k.sm_clock_min_mhz)),
                mhz(k.and_then(|k| k.memory_clock_median_mhz)),
                k.map_or(String::new(), |k| k.throttle_reasons.join(" ")),
            ]);
        }
        if implausible {
            row.push(c.implausible.to_string());
            row.push(c.implausible_reason.clone().unwrap_or_default());
        }
        if above_peak {
            let above = c.above_peak.as_ref();
            row.push(above.map_or(String::new(), |a| a.cause.name().to_string()));
            row.push(above.map_or(String::new(), |a| a.reason.clone()));
        }
        writer.write_record(&row)?;
    }
    Ok(String::from_utf8(writer.into_inner()?)?)
}

/// The baseline variant's median over this case's, at the same grid point (matching every axis
/// the baseline has: a CPU baseline has no block size).
pub fn speedup(case: &CaseResult, baseline: &str, cases: &[CaseResult]) -> Option<f64> {
    let median = case.summary.as_ref()?.median_s;
    let base = cases.iter().find(|b| {
        b.variant == baseline
            && b.summary.is_some()
            && b.params
                .iter()
                .all(|(k, v)| case.params.get(k).is_none_or(|cv| cv == v))
    })?;
    Some(base.summary.as_ref()?.median_s / median)
}

fn accuracy_cell(case: &CaseResult) -> String {
    // Where only part of an output was checked (its reference too slow in full), how much.
    let (checked, of) = case
        .outputs
        .iter()
        .filter_map(|o| Some((o.accuracy.elements, o.accuracy.subset_of?)))
        .fold((0, 0), |(c, n), (ci, ni)| (c + ci, n + ni));
    let subset = if of > 0 {
        format!(", {:.2}% checked", 100.0 * checked as f64 / of as f64)
    } else {
        String::new()
    };
    // The check command runs once every output passed, so its verdict decides where it failed.
    let command_failed = case.check_command.as_ref().is_some_and(|v| !v.passed);
    match (case.status, case.max_rel_err()) {
        (CaseStatus::Passed, _) if case.unchecked => "unchecked".into(),
        (CaseStatus::AccuracyFailed, _) if command_failed => "FAIL (check command)".into(),
        (CaseStatus::Passed, Some(e)) => format!("ok {e:.1e}{subset}"),
        (CaseStatus::Passed, None) if case.check_command.is_some() => "ok (check command)".into(),
        (CaseStatus::AccuracyFailed, Some(e)) => format!("FAIL {e:.1e}{subset}"),
        (CaseStatus::Error, _) => "ERROR".into(),
        (CaseStatus::TimedOut, _) => "TIMED OUT".into(),
        (CaseStatus::Skipped, _) => "skipped".into(),
        _ => "-".into(),
    }
}

/// One line per distinct reason, with the cases it covers (or their count, where their rows are
/// folded), wrapped at `width` with a hanging indent.
fn reasons(
    cases: &[CaseResult],
    folded: &[String],
    style: TableStyle,
    width: Option<usize>,
) -> String {
    let mut by_reason: Vec<(String, Vec<String>)> = Vec::new();
    let status_reasons = cases.iter().filter_map(|case| {
        let label = match case.status {
            CaseStatus::Skipped => "skipped",
            CaseStatus::AccuracyFailed => "FAILED",
            CaseStatus::TimedOut => "TIMED OUT",
            _ => "ERROR",
        };
        Some((case, format!("{label}: {}", case.reason.as_ref()?)))
    });
    let implausible = cases.iter().filter_map(|case| {
        let why = case
            .implausible_reason
            .as_deref()
            .unwrap_or("faster than the memory can be");
        case.implausible
            .then(|| (case, format!("IMPLAUSIBLE: {why}")))
    });
    // By cause, not by reason: each reason has its case's own numbers (the JSON keeps them).
    let above_peak = cases.iter().filter_map(|case| {
        let above = case.above_peak.as_ref()?;
        let label = above_peak_label(above.cause);
        let why = match above.cause {
            AbovePeakCause::L2 => "writes still in the L2 when the timer stops (or, without the flush, inputs already in it) need not cross the memory bus within the timing; counting only the bytes that must, the case is within its peak",
            AbovePeakCause::BeatsPeakKernel => "above its peak by more than the L2 explains, yet not implausible: it moved memory faster than kbench's peak kernel did",
        };
        Some((case, format!("% PEAK ABOVE 100% ({label}): {why}")))
    });
    for (case, key) in status_reasons.chain(implausible).chain(above_peak) {
        let who = format!("#{} {}", case.index, case.variant);
        match by_reason.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(who),
            None => by_reason.push((key, vec![who])),
        }
    }
    let mut out = String::new();
    for (reason, list) in by_reason {
        let is_folded = folded.iter().any(|f| reason == format!("skipped: {f}"));
        let who = if is_folded {
            format!(
                "({} cases, not listed in the table: --wide lists them)",
                list.len()
            )
        } else {
            let shown: Vec<&str> = list.iter().take(6).map(String::as_str).collect();
            let more = if list.len() > 6 {
                format!(" and {} more", list.len() - 6)
            } else {
                String::new()
            };
            format!("({}{more})", shown.join(", "))
        };
        match style {
            TableStyle::Terminal => {
                out.push_str(&crate::report::text::wrap(&reason, width, "    "));
                out.push_str(&crate::report::text::wrap(
                    &format!("    {who}"),
                    width,
                    "    ",
                ));
            }
            // A paragraph of its own (an indented line after a blank one would be code).
            TableStyle::Markdown => out.push_str(&format!("{reason} {who}\n\n")),
        }
    }
    out
}

/// Seconds with a unit that keeps 4 significant digits readable: 4.098 ms, 812.3 µs; past a day
/// (no run takes that: a case in error may record it), in powers of ten, `1.700e308 s`, not as
/// a 309-digit number.
pub fn format_seconds(s: f64) -> String {
    if s.is_finite() && s >= 86_400.0 {
        return format!("{s:.3e} s");
    }
    let (value, unit) = if s >= 1.0 {
        (s, "s")
    } else if s >= 1e-3 {
        (s * 1e3, "ms")
    } else if s >= 1e-6 {
        (s * 1e6, "µs")
    } else {
        (s * 1e9, "ns")
    };
    let decimals = if value >= 100.0 {
        1
    } else if value >= 10.0 {
        2
    } else {
        3
    };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joules_get_readable_units() {
        assert_eq!(format_joules(1.5), "1.500 J");
        assert_eq!(format_joules(0.0123), "12.30 mJ");
        assert_eq!(format_joules(3.5e-6), "3.500 µJ");
        assert_eq!(format_joules(0.0004), "400.0 µJ");
        assert_eq!(format_joules(2e-9), "2.000 nJ");
    }

    #[test]
    fn seconds_get_readable_units() {
        assert_eq!(format_seconds(0.004098), "4.098 ms");
        assert_eq!(format_seconds(0.0008123), "812.3 µs");
        assert_eq!(format_seconds(1.7e308), "1.700e308 s");
        assert_eq!(format_seconds(f64::INFINITY), "inf s");
        assert_eq!(format_seconds(2.5), "2.500 s");
        assert_eq!(format_seconds(3.2e-8), "32.00 ns");
    }

    #[test]
    fn rates_keep_three_significant_digits_however_small() {
        assert_eq!(format_rate(2981.4), "2981");
        assert_eq!(format_rate(45.24), "45.2");
        assert_eq!(format_rate(1.5), "1.50");
        assert_eq!(format_rate(0.01234), "0.0123");
        assert_eq!(format_rate(0.0), "0");
    }

    #[test]
    fn columns_are_left_out_lowest_rank_first_until_the_table_fits() {
        let columns = || {
            vec![
                Column::new("name", vec!["a long variant name".into()]),
                Column::new("kept longest", vec!["x".repeat(20)]).droppable(9),
                Column::new("first out", vec!["y".repeat(20)]).droppable(1),
                Column::new("second out", vec!["z".repeat(20)]).droppable(2),
            ]
        };
        let wide = draw_columns(columns(), TableStyle::Terminal, None);
        assert!(wide.left_out.is_empty());
        assert!(wide.table.lines().all(|l| l.chars().count() > 60));
        let narrow = draw_columns(columns(), TableStyle::Terminal, Some(50));
        assert_eq!(narrow.left_out, ["first out", "second out"]);
        assert!(
            narrow.table.lines().all(|l| l.chars().count() <= 50),
            "{}",
            narrow.table
        );
        let note = narrow.left_out_note();
        assert!(note.lines().all(|l| l.chars().count() <= 50), "{note}");
        assert!(
            note.replace("\n ", " ")
                .contains("fit 50 columns: first out, second out"),
            "{note}"
        );
        // Nothing left to drop: the column of words is wrapped at its spaces, no word cut.
        let tight = draw_columns(columns(), TableStyle::Terminal, Some(20));
        assert_eq!(tight.left_out.len(), 3);
        assert!(
            tight.table.lines().all(|l| l.chars().count() <= 20),
            "{}",
            tight.table
        );
        for word in ["long", "variant", "name"] {
            assert!(tight.table.contains(word), "{}", tight.table);
        }
    }
}
