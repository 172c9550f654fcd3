//! The HTML report: one self-contained file (no scripts, no external URLs: readable offline and
//! attachable to a CI run). First what a reader needs at a glance, in the first screen: a
//! summary (warnings such as NOT MEASURED, the counts of cases and claims), the claims' verdicts
//! and the manifest's tables; then a contents list; then every case, the plots as inline SVG,
//! each output's accuracy and the environment. Numbers are written for people (`7.54e-6`,
//! dates as `2026-01-01 12:00:00 UTC`); the JSON keeps them whole. The tables are the
//! markdown that `case_table` and `declared_tables` draw, turned into HTML tables, so their columns are decided
//! in one place.

use std::fmt::Write as _;

use anyhow::Result;

use super::format::{Format, Report};
use super::{case_table, declared_tables, plots};
use crate::record::{CaseStatus, ClaimStatus, ResultsDoc};
use crate::vocab::{describe_params, Launch};

pub const FORMAT: Format = Format {
    name: "html",
    help: "one self-contained HTML page: tables, claims, accuracy, environment, plots (inline SVG)",
    render,
};

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 2em auto; max-width: 1200px; padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: 0.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f0f0f0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre.note { white-space: pre-wrap; color: #555; margin: 0.3em 0; font-size: 0.9em; }
figure { margin: 1em 0; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
.refuted, .failed { color: #b00020; font-weight: bold; }
.holds, .passed { color: #1b7f3b; }
p.warning { background: #fff4e5; border-left: 4px solid #e67e00; padding: 0.4em 0.8em; font-weight: bold; }
nav ul { columns: 3; margin: 0.3em 0; }
";

fn render(report: &Report) -> Result<String> {
    let doc = report.doc;
    let axes = report.manifest.algorithm.spec().axis_names();
    let mut page = String::new();
    let title = if doc.study.title.is_empty() {
        doc.study.name.clone()
    } else {
        format!("{}: {}", doc.study.name, doc.study.title)
    };
    write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>kbench: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&doc.study.name),
        escape(&title)
    )?;
    writeln!(
        page,
        "<p>algorithm <code>{}</code>, seed {}; started {}, {}; {} of {} planned cases.</p>",
        escape(&doc.study.algorithm),
        doc.study.seed,
        escape(&human_time(&doc.started_at)),
        match &doc.finished_at {
            Some(t) => format!("finished {}", escape(&human_time(t))),
            None => "not finished".into(),
        },
        doc.cases.len(),
        doc.planned_cases
    )?;

    // What a reader needs first, in the first screen: warnings, the counts, the claims' verdicts
    // and the declared tables; then the contents; then every case and the rest.
    let mut sections: Vec<(&str, &str)> = vec![("summary", "Summary")];
    page.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    page.push_str(&summary(doc));
    if !doc.claims.is_empty() {
        sections.push(("claims", "Claims"));
        page.push_str("<h2 id=\"claims\">Claims</h2>\n");
        page.push_str(&markdown_to_html(&declared_tables::render_claims(
            &doc.claims,
            case_table::TableStyle::Markdown,
            None,
        )));
    }
    if !report.manifest.tables.is_empty() {
        sections.push(("tables", "Tables"));
        page.push_str("<h2 id=\"tables\">Tables</h2>\n");
        for t in &report.manifest.tables {
            page.push_str(&markdown_to_html(&declared_tables::render(
                t,
                doc,
                case_table::TableStyle::Markdown,
                None,
            )));
        }
    }
    page.push_str("</section>\n");
    let plots = inline_plots(doc, &axes);
    let accuracy = accuracy(doc);
    sections.push(("cases", "Cases"));
    sections.push(("plots", "Plots"));
    if !accuracy.is_empty() {
        sections.push(("accuracy", "Accuracy"));
    }
    sections.push(("environment", "Environment"));
    page.push_str("<nav id=\"contents\">\n<h2>Contents</h2>\n<ul>\n");
    for (id, name) in &sections {
        let _ = writeln!(page, "<li><a href=\"#{id}\">{name}</a></li>");
    }
    page.push_str("</ul>\n</nav>\n");

    page.push_str("<h2 id=\"cases\">Cases</h2>\n");
    page.push_str(&markdown_to_html(&case_table::render(
        doc,
        &axes,
        case_table::TableStyle::Markdown,
    )));
    page.push_str("<h2 id=\"plots\">Plots</h2>\n");
    page.push_str(&plots);
    page.push_str(&accuracy);
    page.push_str(&environment(doc));
    writeln!(
        page,
        "<p><small>written by kbench {} from the results of {}</small></p>\n</body>\n</html>",
        escape(&doc.environment.kbench_version),
        escape(&doc.manifest.path)
    )?;
    Ok(page)
}

/// The summary's warnings (figures not measured, no GPU, a run not finished) and counts: cases
/// by status, claims by verdict.
fn summary(doc: &ResultsDoc) -> String {
    let mut out = String::new();
    let mut warnings: Vec<String> = Vec::new();
    if let Some(mock) = doc
        .environment
        .device
        .as_ref()
        .and_then(|d| d.mock.as_ref())
    {
        warnings.push(format!(
            "NOT MEASURED: the GPU figures come from a mock device, not a GPU ({mock})"
        ));
    }
    if let Some(why) = &doc.environment.gpu_unavailable {
        warnings.push(format!("no GPU: {why}"));
    }
    if doc.finished_at.is_none() {
        warnings.push(format!(
            "not finished: {} of {} planned cases ran (kbench run --resume finishes it)",
            doc.cases.len(),
            doc.planned_cases
        ));
    }
    for w in &warnings {
        let _ = writeln!(out, "<p class=\"warning\">{}</p>", escape(w));
    }
    let count = |status: CaseStatus| doc.cases.iter().filter(|c| c.status == status).count();
    let _ = writeln!(
        out,
        "<p class=\"counts\">{} cases: <span class=\"passed\">{} passed</span>, <span class=\"{}\">{} failed</span>, {} skipped.</p>",
        doc.cases.len(),
        count(CaseStatus::Passed),
        if doc.cases.iter().any(|c| c.failed()) { "failed" } else { "none" },
        doc.cases.iter().filter(|c| c.failed()).count(),
        count(CaseStatus::Skipped),
    );
    if !doc.claims.is_empty() {
        let claims = |status: ClaimStatus| doc.claims.iter().filter(|v| v.status == status).count();
        let _ = writeln!(
            out,
            "<p class=\"counts\">{}: <span class=\"holds\">{} hold</span>, <span class=\"{}\">{} refuted</span>, {} inconclusive.</p>",
            match doc.claims.len() {
                1 => "1 claim".to_string(),
                n => format!("{n} claims"),
            },
            claims(ClaimStatus::Holds),
            if claims(ClaimStatus::Refuted) > 0 { "refuted" } else { "none" },
            claims(ClaimStatus::Refuted),
            claims(ClaimStatus::Inconclusive),
        );
    }
    out
}

/// An RFC 3339 timestamp (`2026-01-01T12:00:00.123456789+00:00`) as a reader wants it:
/// `2026-01-01 12:00:00 UTC`; text that is not one is shown as it is.
pub fn human_time(rfc3339: &str) -> String {
    match chrono::DateTime::parse_from_rfc3339(rfc3339) {
        Ok(t) => t
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M:%S UTC")
            .to_string(),
        Err(_) => rfc3339.to_string(),
    }
}

/// Each output of each case against its reference.
fn accuracy(doc: &ResultsDoc) -> String {
    let mut rows = String::new();
    for case in &doc.cases {
        for output in &case.outputs {
            let a = &output.accuracy;
            let (class, verdict) = if a.passed {
                ("passed", "passed")
            } else {
                ("failed", "FAILED")
            };
            let _ = writeln!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{verdict}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td>{} + {}·|x|</td><td class=\"num\">{} of {}{}</td></tr>",
                escape(&case.variant),
                escape(&describe_params(&case.params)),
                escape(&output.name),
                number(a.max_rel_err),
                number(a.max_abs_err),
                short(a.tolerance.abs),
                short(a.tolerance.rel),
                a.wrong_elements,
                a.elements,
                a.subset_of
                    .map_or(String::new(), |n| format!(" checked (of {n})")),
            );
        }
        let whole_answer = match &case.check_command {
            _ if case.unchecked => Some((
                "unchecked",
                "unchecked",
                "timed only: its kernel sequence is `unchecked`",
            )),
            Some(v) if v.passed => Some(("check command", "passed", "")),
            Some(v) => Some((
                "check command",
                "FAILED",
                v.message.as_deref().unwrap_or(""),
            )),
            None => None,
        };
        if let Some((what, verdict, message)) = whole_answer {
            let class = if verdict == "FAILED" {
                "failed"
            } else {
                "passed"
            };
            let _ = writeln!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{what}</td><td class=\"{class}\">{verdict}</td><td colspan=\"4\">{}</td></tr>",
                escape(&case.variant),
                escape(&describe_params(&case.params)),
                escape(message),
            );
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h2 id=\"accuracy\">Accuracy</h2>\n<table>\n<tr><th>variant</th><th>case</th><th>output</th><th>check</th>\
         <th>max rel err</th><th>max abs err</th><th>tolerance</th><th>wrong elements</th></tr>\n{rows}</table>\n"
    )
}

/// A tolerance for people: three significant digits, `0` for none (`7.54e-6`, not
/// `7.539457464619587e-6`).
fn short(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else {
        number(x)
    }
}

fn number(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else {
        format!("{x:.2e}")
    }
}

/// The plots module's SVG charts, drawn into a temporary folder and inlined.
fn inline_plots(doc: &ResultsDoc, axes: &[&str]) -> String {
    let drawn = tempfile::tempdir()
        .map_err(anyhow::Error::from)
        .and_then(|dir| {
            let paths = plots::write_plots(doc, axes, dir.path())?;
            let mut svgs = Vec::new();
            for path in paths
                .iter()
                .filter(|p| p.extension().is_some_and(|e| e == "svg"))
            {
                let text = std::fs::read_to_string(path)?;
                let start = text.find("<svg").unwrap_or(0);
                let name = path.file_stem().unwrap_or_default().to_string_lossy();
                svgs.push(format!(
                    "<figure id=\"plot-{}\">\n{}\n<figcaption>{}</figcaption>\n</figure>\n",
                    escape(&name),
                    &text[start..],
                    escape(&name)
                ));
            }
            Ok(svgs)
        });
    match drawn {
        Ok(svgs) if !svgs.is_empty() => svgs.concat(),
        Ok(_) => "<p>no plots: no case was measured.</p>\n".into(),
        Err(e) => format!("<p>no plots: {}</p>\n", escape(&format!("{e:#}"))),
    }
}

fn environment(doc: &ResultsDoc) -> String {
    let env = &doc.environment;
    let mut rows: Vec<(&str, String)> = vec![
        ("host", env.host.clone()),
        ("os, arch", format!("{}, {}", env.os, env.arch)),
        (
            "cpu",
            format!("{} ({} threads)", env.cpu_model, env.cpu_threads),
        ),
        (
            "kbench",
            format!("{} ({})", env.kbench_version, env.git_revision),
        ),
        ("command", env.command_line.join(" ")),
    ];
    match &env.device {
        Some(d) => {
            rows.push((
                "gpu",
                format!(
                    "{} (sm {}, {} SMs, {:.1} GiB, bus {})",
                    d.name,
                    d.compute_capability,
                    d.sm_count,
                    d.total_memory_bytes as f64 / (1u64 << 30) as f64,
                    d.pci_bus_id
                ),
            ));
            rows.push((
                "gpu memory",
                format!(
                    "{}; theoretical {:.0} GB/s (memory clock x bus){}",
                    super::case_table::peaks_text(d),
                    d.theoretical_memory_gbytes_per_s,
                    d.datasheet_memory_gbytes_per_s
                        .map_or(String::new(), |g| format!(", datasheet {g:.0} GB/s (NVML)"))
                ),
            ));
            rows.push((
                "driver, nvrtc",
                format!("{}, {}", d.driver_version, d.nvrtc_version),
            ));
            if let Some(mock) = &d.mock {
                rows.push(("NOT MEASURED", mock.clone()));
            }
        }
        None => rows.push((
            "gpu",
            env.gpu_unavailable
                .clone()
                .unwrap_or_else(|| "none used".into()),
        )),
    }
    let m = &doc.manifest.measure;
    let processes = match m.processes {
        1 => String::new(),
        k => format!(", each case in {k} worker processes"),
    };
    let launch = match m.launch {
        Launch::Stream => "",
        Launch::Graph => ", kernel-scope runs replayed from CUDA graphs",
    };
    rows.push((
        "measure",
        format!(
            "{} warm-up runs, {} to {} samples, {} s budget, target CI ±{}%, timeout {} s{processes}{launch}",
            m.warmup,
            m.min_samples,
            m.max_samples,
            m.max_time_s,
            m.target_rel_ci * 100.0,
            m.timeout_s
        ),
    ));
    let mut out = String::from("<h2 id=\"environment\">Environment</h2>\n<table class=\"kv\">\n");
    for (key, value) in rows {
        let _ = writeln!(
            out,
            "<tr><th>{}</th><td>{}</td></tr>",
            escape(key),
            escape(&value)
        );
    }
    out.push_str("</table>\n");
    out
}

/// Markdown as `case_table` and `declared_tables` draw it: runs of `| a | b |` lines become a table (the
/// first its header, the `|---|` line dropped), other lines notes.
fn markdown_to_html(markdown: &str) -> String {
    let mut out = String::new();
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut notes: Vec<&str> = Vec::new();
    let flush_notes = |notes: &mut Vec<&str>, out: &mut String| {
        // Blank lines part markdown's paragraphs; in a note they are just space.
        let text = notes
            .iter()
            .filter(|l| !l.trim().is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("\n");
        if !text.trim().is_empty() {
            let _ = writeln!(
                out,
                "<pre class=\"note\">{}</pre>",
                escape(text.trim_matches('\n'))
            );
        }
        notes.clear();
    };
    let flush_rows = |rows: &mut Vec<Vec<String>>, out: &mut String| {
        if rows.is_empty() {
            return;
        }
        out.push_str("<table>\n");
        for (i, row) in rows.iter().enumerate() {
            let cell = if i == 0 { "th" } else { "td" };
            out.push_str("<tr>");
            for value in row {
                let class = match value.as_str() {
                    "HOLDS" => " class=\"holds\"",
                    "REFUTED" | "ERROR" | "ACCURACY_FAILED" | "TIMED_OUT" => " class=\"refuted\"",
                    _ if i > 0 && looks_numeric(value) => " class=\"num\"",
                    _ => "",
                };
                let _ = write!(out, "<{cell}{class}>{}</{cell}>", escape(value));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        rows.clear();
    };
    for line in markdown.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('|') && trimmed.ends_with('|') && trimmed.len() > 1 {
            flush_notes(&mut notes, &mut out);
            let cells = split_cells(&trimmed[1..trimmed.len() - 1]);
            let separator = cells
                .iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| matches!(ch, '-' | ':')));
            if !separator {
                rows.push(cells);
            }
        } else {
            flush_rows(&mut rows, &mut out);
            notes.push(line);
        }
    }
    flush_rows(&mut rows, &mut out);
    flush_notes(&mut notes, &mut out);
    out
}

/// Figures (`1.5 µs`, `±2.0%`, `0.93x`, `-`) are right-aligned, words left.
fn looks_numeric(cell: &str) -> bool {
    let rest = cell.trim_start_matches(['±', '+', '-']);
    cell == "-" || rest.starts_with(|c: char| c.is_ascii_digit())
}

/// A markdown row's cells: split at `|` but not at `\|`, which is a `|` in a cell.
fn split_cells(inner: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cells.last_mut().expect("one cell").push('|');
                chars.next();
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().expect("one cell").push(c),
        }
    }
    cells.into_iter().map(|c| c.trim().to_string()).collect()
}

/// Text made safe inside HTML elements and quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_tables_become_html_tables_and_text_is_escaped() {
        let html = markdown_to_html(
            "title <b>\n\n| a | b \\| c |\n|---|--:|\n| 1 | x<y |\nafter & more\n",
        );
        assert!(
            html.contains("<pre class=\"note\">title &lt;b&gt;</pre>"),
            "{html}"
        );
        assert!(html.contains("<tr><th>a</th><th>b | c</th></tr>"), "{html}");
        assert!(
            html.contains("<tr><td class=\"num\">1</td><td>x&lt;y</td></tr>"),
            "{html}"
        );
        assert!(!html.contains("---"), "{html}");
        assert!(
            html.contains("<pre class=\"note\">after &amp; more</pre>"),
            "{html}"
        );
    }
}
