//! The table `kbench history` prints: a case per row with its runs, latest median, the change
//! its verdict rests on (how much, from which run) and the verdict, then the counts.

use crate::history::{CaseHistory, History, HistoryVerdict};
use crate::report::case_table::{draw_columns, format_seconds, Column, TableStyle};

/// The verdicts as a table that fits `max_width_chars`, worst first, then the counts.
pub fn render(history: &History, max_width_chars: Option<usize>) -> String {
    let mut shown: Vec<&CaseHistory> = history.cases.iter().collect();
    shown.sort_by_key(|c| rank(c.verdict));
    let column = |header: &str, cell: &dyn Fn(&CaseHistory) -> String| {
        Column::new(header, shown.iter().map(|c| cell(c)).collect())
    };
    let columns = vec![
        column("variant", &|c| c.variant.clone()),
        column("case", &|c| c.params.clone()),
        column("runs", &|c| {
            c.medians_s.iter().flatten().count().to_string()
        })
        .numeric()
        .droppable(1),
        column("latest", &|c| {
            c.medians_s
                .iter()
                .rev()
                .flatten()
                .next()
                .map_or("-".into(), |m| format_seconds(*m))
        })
        .numeric()
        .droppable(2),
        column("change", &|c| {
            c.latest_change().map_or("-".into(), |ch| {
                format!("{:+.1}%", (ch.ratio - 1.0) * 100.0)
            })
        })
        .numeric(),
        column("from run", &|c| {
            c.latest_change()
                .map_or("-".into(), |ch| (ch.run + 1).to_string())
        })
        .numeric()
        .droppable(3),
        column("verdict", &|c| c.verdict.words().to_uppercase()),
    ];
    let mut out = String::new();
    if shown.is_empty() {
        out.push_str("no case in the history\n");
    } else {
        let drawn = draw_columns(columns, TableStyle::Terminal, max_width_chars);
        out.push_str(&drawn.table);
        out.push('\n');
        out.push_str(&drawn.left_out_note());
    }
    let counts: Vec<String> = ORDER
        .iter()
        .map(|v| format!("{} {}", history.count(*v), v.words()))
        .collect();
    out.push_str(&format!(
        "\n{}\n({} runs; a change counts from {:.1}% at p < {}, confirmed after {} runs; fewer than {} runs: insufficient data)\n",
        counts.join(", "),
        history.runs.len(),
        history.min_effect * 100.0,
        history.p_value,
        history.confirm_runs,
        history.min_runs,
    ));
    out
}

const ORDER: [HistoryVerdict; 7] = [
    HistoryVerdict::RegressionConfirmed,
    HistoryVerdict::SuspectedRegression,
    HistoryVerdict::Improvement,
    HistoryVerdict::SuspectedImprovement,
    HistoryVerdict::MachineChanged,
    HistoryVerdict::Stable,
    HistoryVerdict::InsufficientData,
];

fn rank(verdict: HistoryVerdict) -> usize {
    ORDER
        .iter()
        .position(|v| *v == verdict)
        .unwrap_or(ORDER.len())
}
