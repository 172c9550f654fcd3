//! The table `kbench compare` prints: a verdict per compared case (baseline and new medians, the
//! change with its 95% CI, the adjusted p-value, and for the undecided cases the change they
//! could have detected), new failures, the counts, and one line each for the cases not
//! compared (by reason), the noisy and loaded cases, the host's load, the cases that moved GPU
//! and the cases in only one of the runs.

use crate::compare::{CaseComparison, Comparison, LevelsKind, Verdict, NOISY_SPREAD};
use crate::report::case_table::{draw_columns, format_seconds, Column, TableStyle};
use crate::report::text::wrap;

/// The verdicts of the compared cases (and new failures) as a table that fits `max_width_chars`,
/// then one line for the cases not compared, counted by reason.
pub fn render(result: &Comparison, max_width_chars: Option<usize>) -> String {
    let shown: Vec<&CaseComparison> = result
        .cases
        .iter()
        .filter(|c| c.verdict != Verdict::NotCompared)
        .collect();
    let column = |header: &str, cell: &dyn Fn(&CaseComparison) -> String| {
        Column::new(header, shown.iter().map(|c| cell(c)).collect())
    };
    let pct = |r: f64| format!("{:+.1}%", (r - 1.0) * 100.0);
    let mut columns = vec![
        column("variant", &|c| c.variant.clone()),
        column("case", &|c| c.params.clone()),
        column("baseline", &|c| {
            c.base_median_s.map_or("-".into(), format_seconds)
        })
        .numeric()
        .droppable(3),
        column("new", &|c| {
            c.new_median_s.map_or("-".into(), format_seconds)
        })
        .numeric()
        .droppable(4),
        column("change", &|c| c.ratio.map_or("-".into(), pct)).numeric(),
        column("95% CI of change", &|c| {
            c.ratio_ci95
                .map_or("-".into(), |(lo, hi)| format!("{} .. {}", pct(lo), pct(hi)))
        })
        .numeric()
        .droppable(2),
        column("p (BH)", &|c| {
            c.p_adjusted.map_or("-".into(), |p| format!("{p:.3}"))
        })
        .numeric()
        .droppable(1),
        // In capitals, as the claims' verdicts, so each stands out (and is coloured).
        column("verdict", &|c| match c.verdict {
            Verdict::NewFailure => "NEW FAILURE".into(),
            v => format!("{v:?}").to_uppercase(),
        }),
    ];
    // Against several baseline runs: what each undecided case could have caught, and why not
    // less ("noisy": its baselines spread more than NOISY_SPREAD; "loaded": run under load).
    if shown.iter().any(|c| c.detectable_change.is_some()) {
        let at = columns.len() - 1;
        columns.insert(
            at,
            column("detectable", &|c| match c.detectable_change {
                None => String::new(),
                Some(d) if c.loaded => format!("{:.0}% loaded", d * 100.0),
                Some(d) if c.disturbed.is_some() => format!("{:.0}% disturbed", d * 100.0),
                Some(d) if c.baseline_spread.is_some_and(|s| s > NOISY_SPREAD) => {
                    format!("{:.0}% noisy", d * 100.0)
                }
                Some(d) => format!("{:.0}%", d * 100.0),
            })
            .numeric()
            .droppable(5),
        );
    }
    let mut out = String::new();
    if shown.is_empty() {
        out.push_str("no case was compared\n");
    } else {
        let drawn = draw_columns(columns, TableStyle::Terminal, max_width_chars);
        out.push_str(&drawn.table);
        out.push('\n');
        out.push_str(&drawn.left_out_note());
    }
    // The lines below the table wrap at the table's width, continued 4 spaces in.
    let line = |text: String| wrap(&text, max_width_chars, "    ");
    for c in shown.iter().filter(|c| c.verdict == Verdict::NewFailure) {
        out.push_str(&line(format!(
            "new failure: {} {}: {}",
            c.variant,
            c.params,
            c.note.as_deref().unwrap_or("no reason recorded")
        )));
    }
    // `--retest`: what the fresh run of each case called slower showed.
    for c in shown.iter().filter(|c| c.retest.is_some()) {
        out.push_str(&line(format!(
            "retest: {} {}: {}",
            c.variant,
            c.params,
            c.note.as_deref().unwrap_or("no note recorded")
        )));
    }
    out.push_str(&format!(
        "\n{} slower, {} faster, {} same, {} inconclusive, {} new failures, {} not compared\n(min effect {:.1}%, false-discovery rate {:.0}%)\n",
        result.count(Verdict::Slower),
        result.count(Verdict::Faster),
        result.count(Verdict::Same),
        result.count(Verdict::Inconclusive),
        result.count(Verdict::NewFailure),
        result.count(Verdict::NotCompared),
        result.min_effect * 100.0,
        result.fdr * 100.0,
    ));
    out.push_str(&undecided_lines(result, max_width_chars));
    // The cases not compared, grouped by reason, largest group first.
    let mut reasons: Vec<(usize, &str)> = Vec::new();
    for c in result
        .cases
        .iter()
        .filter(|c| c.verdict == Verdict::NotCompared)
    {
        let reason = c.note.as_deref().unwrap_or("no reason recorded");
        match reasons.iter_mut().find(|(_, r)| *r == reason) {
            Some((count, _)) => *count += 1,
            None => reasons.push((1, reason)),
        }
    }
    reasons.sort_by_key(|r| std::cmp::Reverse(r.0));
    if !reasons.is_empty() {
        let parts: Vec<String> = reasons
            .iter()
            .map(|(count, reason)| format!("{count} {reason}"))
            .collect();
        out.push_str(&line(format!("not compared: {}", parts.join("; "))));
    }
    // Same-model GPUs differ by a few percent: a case that moved is judged with that allowed.
    for c in &result.cases {
        if let Some(moved) = &c.moved {
            out.push_str(&line(format!(
                "moved GPU: {} {}: from {} to {}{}",
                c.variant,
                c.params,
                moved.from.join(", "),
                moved.to,
                moved.copy_peak_ratio.map_or(
                    " (copy peaks not recorded: not called slower or faster)".to_string(),
                    |r| format!(
                        " (copy peak {:+.1}%, allowed for in its verdict)",
                        (r - 1.0) * 100.0
                    )
                )
            )));
        }
    }
    for key in &result.only_in_baseline {
        out.push_str(&line(format!("only in the baseline: {key}")));
    }
    for key in &result.only_in_new {
        out.push_str(&line(format!("only in the new run: {key}")));
    }
    out
}

/// The undecided cases whose baselines' samples sit at two levels: why their run-to-run
/// spread is what it is ("samples alternate between two levels 0.9 µs apart").
fn levels_line(result: &Comparison, max_width_chars: Option<usize>) -> String {
    let cases: Vec<String> = result
        .cases
        .iter()
        .filter(|c| c.detectable_change.is_some())
        .filter_map(|c| {
            let levels = c.sample_levels?;
            let how = match levels.kind {
                LevelsKind::Alternate => "samples alternate between two levels",
                LevelsKind::TwoModes => "samples in two modes",
            };
            Some(format!(
                "{} {} ({how} {} apart, in {} of {} baseline runs)",
                c.variant,
                c.params,
                format_seconds(levels.gap_s),
                levels.runs,
                result.baseline_runs
            ))
        })
        .collect();
    if cases.is_empty() {
        return String::new();
    }
    wrap(
        &format!(
            "two levels in the samples (a run's median may sit on either or between): {}",
            cases.join(", ")
        ),
        max_width_chars,
        "    ",
    )
}

/// Below the counts: what the undecided cases could detect (the range), the noisy ones with
/// their spread, and the host's load where it made cases `loaded`.
fn undecided_lines(result: &Comparison, max_width_chars: Option<usize>) -> String {
    let line = |text: String| wrap(&text, max_width_chars, "    ");
    let mut out = String::new();
    let detectable: Vec<f64> = result
        .cases
        .iter()
        .filter_map(|c| c.detectable_change)
        .collect();
    if !detectable.is_empty() {
        let low = detectable.iter().copied().fold(f64::INFINITY, f64::min);
        let high = detectable.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        out.push_str(&line(format!(
            "detectable change: {} undecided cases would be called slower, 4 times in 5, for a slowdown of {:.0}% to {:.0}% (the `detectable` column; from their baselines' run-to-run spread)",
            detectable.len(),
            low * 100.0,
            high * 100.0
        )));
    }
    let noisy: Vec<String> = result
        .cases
        .iter()
        .filter(|c| c.detectable_change.is_some() && !c.loaded && c.disturbed.is_none())
        .filter_map(|c| {
            let spread = c.baseline_spread.filter(|s| *s > NOISY_SPREAD)?;
            Some(format!(
                "{} {} ({:.0}%)",
                c.variant,
                c.params,
                spread * 100.0
            ))
        })
        .collect();
    if !noisy.is_empty() {
        out.push_str(&line(format!(
            "noisy on this host (baselines spread over {:.0}% run to run): {}",
            NOISY_SPREAD * 100.0,
            noisy.join(", ")
        )));
    }
    out.push_str(&levels_line(result, max_width_chars));
    let disturbed: Vec<String> = result
        .cases
        .iter()
        .filter_map(|c| {
            let (new, widest) = c.disturbed?;
            Some(format!(
                "{} {} ({:.1}%, at most {:.1}%)",
                c.variant,
                c.params,
                new * 100.0,
                widest * 100.0
            ))
        })
        .collect();
    if !disturbed.is_empty() {
        out.push_str(&line(format!(
            "disturbed (samples spread over twice the widest baseline run's; never called slower): {}",
            disturbed.join(", ")
        )));
    }
    let loaded = result.cases.iter().filter(|c| c.loaded).count();
    if let Some(load) = result.load.as_ref().filter(|l| l.loaded && loaded > 0) {
        let saturated = if load.saturated_runs > 0 {
            format!(
                " ({} of the runs on a saturated host: others kept more than {:.2} of its {} CPUs busy)",
                load.saturated_runs,
                load.cpu_count as f64 - 1.0 - crate::compare::LOAD_MARGIN_CPUS,
                load.cpu_count
            )
        } else {
            String::new()
        };
        out.push_str(&line(format!(
            "host load: other processes kept {:.1} CPUs busy during the new run, at most {:.1} in the baselines{saturated}: its {loaded} host-bound cases (CPU, program and transfers scope) are judged loaded, never slower",
            load.new_other_busy_cpus, load.baseline_max_other_busy_cpus
        )));
    }
    out
}
