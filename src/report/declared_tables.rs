//! The tables a manifest declares (`[[table]]`): kbench's figures by rows and columns, with the
//! published figures beside them; and the claims' verdicts. Drawn for the terminal, as markdown
//! or as CSV.

use tabled::builder::Builder;
use tabled::settings::object::Columns;
use tabled::settings::{Alignment, Style, Width};

use super::case_table::{format_seconds, TableStyle};
pub use super::text::wrap;
use crate::claims;
use crate::manifest::{selected, Quantity, TableSpec, Unit};
use crate::record::{
    CaseResult, CaseStatus, ClaimStatus, ClaimVerdict, DeviceFingerprint, ResultsDoc,
};
use crate::vocab::ParamValue;

/// One declared table, drawn from `doc`'s cases. On a terminal of `width` columns (None: any
/// width, as `--wide` and files draw it) a table too wide is split into parts of as many columns
/// as fit, each with the rows' labels, and the lines of text around it are wrapped.
pub fn render(
    table: &TableSpec,
    doc: &ResultsDoc,
    style: TableStyle,
    width: Option<usize>,
) -> String {
    let grid = Grid::of(table, doc);
    let corner = format!("{} \\ {}", table.rows.name(), table.columns.name());
    let mut labels = Vec::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    for reference in &table.references {
        labels.push(reference.label.clone());
        rows.push(
            grid.columns
                .iter()
                .map(|c| {
                    reference
                        .values
                        .get(c)
                        .map_or(String::new(), |v| published(*v, reference.unit))
                })
                .collect(),
        );
    }
    for (label, cells) in grid.rows.iter().zip(&grid.cells) {
        labels.push(format!("kbench {label}"));
        rows.push(
            cells
                .iter()
                .map(|cell| match cell {
                    Cell::Value(v, None) => format_value(table.value, *v),
                    Cell::Value(v, Some(mark)) => {
                        format!("{} {mark}", format_value(table.value, *v))
                    }
                    Cell::Missing => "-".into(),
                    Cell::NotPassed(status) => match status {
                        CaseStatus::Skipped => "skipped".into(),
                        other => other.name().to_uppercase(),
                    },
                })
                .collect(),
        );
    }
    // The table of columns `range`, with the rows' labels first (wrapped at `label_max`).
    let draw = |range: std::ops::Range<usize>, label_max: Option<usize>| {
        let mut builder = Builder::default();
        let mut header = vec![corner.clone()];
        header.extend(grid.columns[range.clone()].iter().cloned());
        builder.push_record(header);
        for (label, cells) in labels.iter().zip(&rows) {
            let mut row = vec![label.clone()];
            row.extend(cells[range.clone()].iter().cloned());
            builder.push_record(row);
        }
        let mut drawn = builder.build();
        match style {
            TableStyle::Terminal => drawn.with(Style::rounded()),
            TableStyle::Markdown => drawn.with(Style::markdown()),
        };
        drawn.modify(Columns::new(1..), Alignment::right());
        if let Some(max) = label_max {
            drawn.modify(Columns::first(), Width::wrap(max).keep_words(true));
        }
        drawn
    };
    let width = width.filter(|_| style == TableStyle::Terminal);
    let columns = grid.columns.len();
    // A table too wide whose labels take more than a third of the width has them wrapped there,
    // leaving the rest to the columns.
    let mut label_max = None;
    if let Some(width) = width {
        let longest = (labels.iter().chain([&corner]))
            .map(|l| l.chars().count())
            .max()
            .unwrap_or(0);
        let third = (width / 3).max(12);
        if longest > third && draw(0..columns, None).total_width() > width {
            label_max = Some(third);
        }
    }
    // Parts of as many columns as fit (at least one each).
    let mut parts = Vec::new();
    let mut first = 0;
    while first < columns || parts.is_empty() {
        let mut end = columns;
        if let Some(width) = width {
            end = (first + 1).min(columns);
            while end < columns && draw(first..end + 1, label_max).total_width() <= width {
                end += 1;
            }
        }
        parts.push(first..end);
        first = end;
    }
    let title = format!("{} ({})", table.title, describe_value(table));
    let mut out = wrap(&title, width, "");
    if style == TableStyle::Markdown {
        out.push('\n');
    }
    for (k, part) in parts.iter().enumerate() {
        if parts.len() > 1 {
            out.push_str(&format!(
                "(part {} of {}: {} {})\n",
                k + 1,
                parts.len(),
                table.columns.name(),
                grid.columns[part.clone()].join(", ")
            ));
        }
        out.push_str(&draw(part.clone(), label_max).to_string());
        out.push('\n');
        // A blank line ends a markdown table: the notes after it would be read as more rows.
        if style == TableStyle::Markdown {
            out.push('\n');
        }
    }
    for reference in &table.references {
        let line = format!(
            "  {}: {} (in {})",
            reference.label, reference.source, reference.unit
        );
        match style {
            TableStyle::Terminal => out.push_str(&wrap(&line, width, "    ")),
            // A paragraph each: consecutive lines would run together.
            TableStyle::Markdown => out.push_str(&format!("{}\n\n", line.trim())),
        }
    }
    out
}

/// A published figure as the manifest gives it, in its unit: a published 4.2383 ms reads
/// `4.2383 ms` (Rust's shortest text that reads back as the same number), not rounded to
/// kbench's own digits nor turned into seconds.
pub fn published(value: f64, unit: Unit) -> String {
    match unit {
        Unit::S | Unit::Ms | Unit::Ns => format!("{value} {unit}"),
        Unit::Us => format!("{value} µs"),
        Unit::Percent => format!("{value}%"),
        Unit::Times => format!("{value}x"),
        Unit::GbPerS | Unit::GflopPerS | Unit::Plain => format!("{value}"),
    }
}

/// A published figure in kbench's base unit (seconds for a time), as text in exponent form,
/// converted by moving the decimal point rather than by multiplying: 4.2383 ms is `4.2383e-3`,
/// where `4.2383 * 1e-3` would be 4.2382999999999995e-3.
pub fn published_in_base_unit(value: f64, unit: Unit) -> String {
    let shift = match unit {
        Unit::Ms => -3,
        Unit::Us => -6,
        Unit::Ns => -9,
        _ => 0,
    };
    let text = format!("{value:e}");
    match text.split_once('e') {
        Some((mantissa, exponent)) if value.is_finite() && value != 0.0 => {
            let exponent: i32 = exponent.parse().expect("Rust writes an integer exponent");
            format!("{mantissa}e{}", exponent + shift)
        }
        _ => text,
    }
}

/// One declared table as CSV: a row per cell, values in kbench's base units (seconds, GB/s, %).
pub fn render_csv(table: &TableSpec, doc: &ResultsDoc) -> anyhow::Result<String> {
    let grid = Grid::of(table, doc);
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer.write_record(["table", "row", "column", "source", "quantity", "value"])?;
    for reference in &table.references {
        for (column, v) in &reference.values {
            writer.write_record([
                table.title.as_str(),
                reference.label.as_str(),
                column.as_str(),
                reference.source.as_str(),
                table.value.name(),
                &published_in_base_unit(*v, reference.unit),
            ])?;
        }
    }
    for (label, cells) in grid.rows.iter().zip(&grid.cells) {
        for (column, cell) in grid.columns.iter().zip(cells) {
            let value = match cell {
                Cell::Value(v, _) => format!("{v:e}"),
                Cell::Missing => String::new(),
                Cell::NotPassed(status) => status.name().to_string(),
            };
            writer.write_record([
                table.title.as_str(),
                label.as_str(),
                column.as_str(),
                "kbench",
                table.value.name(),
                value.as_str(),
            ])?;
        }
    }
    Ok(String::from_utf8(writer.into_inner()?)?)
}

/// The claims' verdicts, one per line with its evidence.
pub fn render_claims(verdicts: &[ClaimVerdict], style: TableStyle, width: Option<usize>) -> String {
    if verdicts.is_empty() {
        return String::new();
    }
    let mut out = String::from(match style {
        TableStyle::Terminal => "claims:\n",
        TableStyle::Markdown => "| verdict | claim | source | evidence |\n|---|---|---|---|\n",
    });
    for v in verdicts {
        let verdict = match (v.status, v.skipped) {
            (ClaimStatus::Inconclusive, true) => "INCONCLUSIVE (skipped)".to_string(),
            (status, _) => status.name().to_uppercase(),
        };
        match style {
            TableStyle::Terminal => {
                let indent = " ".repeat(15);
                out.push_str(&wrap(
                    &format!("  {verdict:<12} \"{}\" ({}, {})", v.text, v.source, v.kind),
                    width,
                    &indent,
                ));
                out.push_str(&wrap(&format!("{indent}{}", v.evidence), width, &indent));
            }
            TableStyle::Markdown => out.push_str(&format!(
                "| {verdict} | \"{}\" | {} | {} |\n",
                v.text.replace('|', "\\|"),
                v.source.replace('|', "\\|"),
                v.evidence.replace('|', "\\|")
            )),
        }
    }
    out
}

enum Cell {
    /// With the case's `% peak` mark in a `percent_of_peak` table (see `case_table::peak_mark`).
    Value(f64, Option<&'static str>),
    Missing,
    NotPassed(CaseStatus),
}

/// A table's rows, columns and cells, worked out from the cases.
struct Grid {
    rows: Vec<String>,
    columns: Vec<String>,
    cells: Vec<Vec<Cell>>,
}

impl Grid {
    fn of(table: &TableSpec, doc: &ResultsDoc) -> Grid {
        let cases: Vec<&CaseResult> = doc
            .cases
            .iter()
            .filter(|c| table.variants.contains(&c.variant) && selected(&table.select, &c.params))
            .collect();
        let values_along = |dimension: &crate::manifest::Dimension| -> Vec<String> {
            match dimension {
                crate::manifest::Dimension::Variant => table
                    .variants
                    .iter()
                    .filter(|v| cases.iter().any(|c| &c.variant == *v))
                    .cloned()
                    .collect(),
                // In the order the study ran them, which is the manifest's.
                crate::manifest::Dimension::Axis(axis) => {
                    let mut values: Vec<&ParamValue> = Vec::new();
                    for v in cases.iter().filter_map(|c| c.params.get(axis)) {
                        if !values.contains(&v) {
                            values.push(v);
                        }
                    }
                    values.into_iter().map(|v| v.to_string()).collect()
                }
            }
        };
        let rows = values_along(&table.rows);
        let mut columns = values_along(&table.columns);
        // Published figures may name columns this run lacks (a size not run): keep them.
        for reference in &table.references {
            for column in reference.values.keys() {
                if !columns.contains(column) {
                    columns.push(column.clone());
                }
            }
        }
        let device = doc.environment.device.as_ref();
        let cells = rows
            .iter()
            .map(|row| {
                columns
                    .iter()
                    .map(|column| {
                        let case = cases.iter().find(|c| {
                            table.rows.of(&c.variant, &c.params).as_ref() == Some(row)
                                && table.columns.of(&c.variant, &c.params).as_ref() == Some(column)
                        });
                        match case {
                            None => Cell::Missing,
                            Some(c) if !shows_value(table.value, c.status) => {
                                Cell::NotPassed(c.status)
                            }
                            Some(c) => {
                                let mark = (table.value == Quantity::PercentOfPeak)
                                    .then(|| super::case_table::peak_mark(c))
                                    .flatten();
                                cell_value(table, c, &doc.cases, device)
                                    .map_or(Cell::Missing, |v| Cell::Value(v, mark))
                            }
                        }
                    })
                    .collect()
            })
            .collect();
        Grid {
            rows,
            columns,
            cells,
        }
    }
}

/// A case shows its value if it passed, or, for an accuracy figure, if it failed only that.
fn shows_value(quantity: Quantity, status: CaseStatus) -> bool {
    status == CaseStatus::Passed || (quantity.is_accuracy() && status == CaseStatus::AccuracyFailed)
}

fn cell_value(
    table: &TableSpec,
    case: &CaseResult,
    all: &[CaseResult],
    device: Option<&DeviceFingerprint>,
) -> Option<f64> {
    match table.value {
        // Of the measured peak matching the case's traffic (see `CaseResult::share_of_peak`).
        Quantity::PercentOfPeak => case.share_of_peak(device).map(|s| s * 100.0),
        Quantity::Speedup => super::case_table::speedup(case, table.baseline.as_deref()?, all),
        quantity => claims::value(case, quantity),
    }
}

fn format_value(quantity: Quantity, v: f64) -> String {
    match quantity {
        Quantity::Median | Quantity::Mean | Quantity::Min => format_seconds(v),
        Quantity::GbytesPerS | Quantity::GflopsPerS => format!("{v:.1}"),
        Quantity::PercentOfPeak | Quantity::ShareWithinTolerance => format!("{v:.1}%"),
        Quantity::Speedup => format!("{v:.2}x"),
        Quantity::MaxRelErr => format!("{v:.1e}"),
    }
}

fn describe_value(table: &TableSpec) -> String {
    let what = match table.value {
        Quantity::Median => "median time".to_string(),
        Quantity::Mean => "mean time".to_string(),
        Quantity::Min => "fastest time".to_string(),
        Quantity::GbytesPerS => "GB/s".to_string(),
        Quantity::GflopsPerS => "GFLOP/s".to_string(),
        Quantity::PercentOfPeak => {
            "% of the measured peak matching each case's traffic (read, write, copy or triad; L2: a share above 100% that bytes left in the L2, or already in it, explain; >peak: the case beat the peak kernel)".to_string()
        }
        Quantity::Speedup => format!(
            "speedup over {}",
            table.baseline.as_deref().unwrap_or("the baseline")
        ),
        Quantity::ShareWithinTolerance => "share of outputs within tolerance".to_string(),
        Quantity::MaxRelErr => "largest relative error".to_string(),
    };
    if table.select.is_empty() {
        what
    } else {
        let chosen: Vec<String> = table
            .select
            .iter()
            .map(|(axis, values)| {
                let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
                format!("{axis} = {}", values.join("|"))
            })
            .collect();
        format!("{what}; {}", chosen.join(", "))
    }
}
