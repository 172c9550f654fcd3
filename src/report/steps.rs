//! The per-step latency a kernel measured inside itself (`record::step_latency`), as text under
//! the case table: each reporting case's summary and histogram.

use std::collections::BTreeMap;

use crate::record::step_latency::StepLatency;
use crate::record::ResultsDoc;

/// The widest bar, in characters.
const BAR_WIDTH: usize = 40;

/// One block per case that reported its steps; empty where none did.
pub fn render(doc: &ResultsDoc) -> String {
    render_cases((doc.cases.iter()).map(|case| (super::format::case_name(doc, case), &case.facts)))
}

/// As `render`, from each case's name and facts.
fn render_cases<'a>(cases: impl Iterator<Item = (String, &'a BTreeMap<String, f64>)>) -> String {
    let mut out = String::new();
    for (name, facts) in cases {
        let Some(latency) = StepLatency::from_facts(facts) else {
            continue;
        };
        if out.is_empty() {
            out.push_str(
                "Per-step latency inside the kernel (%globaltimer, thread 0, one more run):\n",
            );
        }
        out.push_str(&format!(
            "{name}: {} steps, mean {:.0} ns, min {:.0}, median {:.0}, p90 {:.0}, p99 {:.0}, \
             max {:.0}\n",
            latency.steps,
            latency.mean_ns,
            latency.min_ns,
            latency.median_ns,
            latency.p90_ns,
            latency.p99_ns,
            latency.max_ns,
        ));
        let most = latency.bins.iter().map(|b| b.2).max().unwrap_or(0).max(1);
        for (low, high, steps) in &latency.bins {
            let range = match high {
                Some(high) => format!("{low:>5} .. {high:>5} ns"),
                None => format!("{low:>5} ns and more "),
            };
            // A bin with any step gets at least one character.
            let bar = (*steps as usize * BAR_WIDTH).div_ceil(most as usize);
            out.push_str(&format!("  {range} {steps:>9} {}\n", "█".repeat(bar)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::step_latency::facts_from_stamps;

    #[test]
    fn cases_with_steps_get_a_summary_and_bars_the_others_nothing() {
        // 4 steps of 300 ns and 1 of 2500 ns.
        let stamps = [0, 300, 600, 900, 1200, 3700];
        let stepped: BTreeMap<String, f64> = facts_from_stamps(&stamps).into_iter().collect();
        let other = BTreeMap::from([("levels".to_string(), 3.0)]);
        let text = render_cases(
            [
                ("a".to_string(), &other),
                ("d/schur n=5".to_string(), &stepped),
            ]
            .into_iter(),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + 7, "{text}");
        assert!(lines[0].starts_with("Per-step latency"));
        assert_eq!(
            lines[1],
            "d/schur n=5: 5 steps, mean 740 ns, min 300, median 300, p90 2500, p99 2500, max 2500"
        );
        assert_eq!(
            lines[3],
            format!("    250 ..   500 ns         4 {}", "█".repeat(40))
        );
        assert_eq!(
            lines[8],
            format!("   2000 ns and more          1 {}", "█".repeat(10))
        );
        assert_eq!(lines[2], "      0 ..   250 ns         0 ");
        assert!(render_cases([("a".to_string(), &other)].into_iter()).is_empty());
    }
}
