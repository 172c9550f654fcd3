//! A kernel's per-step latency, measured inside it (durbin_schur's thread 0 reads `%globaltimer`
//! as each step starts): how it is written into a case's facts, and read back for the report.
//! The facts are plain numbers, so the JSON needs no field of its own.

use std::collections::BTreeMap;

/// The upper edges of the histogram's bins, in nanoseconds; the last bin is open.
pub const EDGES_NS: [u64; 6] = [250, 500, 750, 1000, 1500, 2000];

const STEPS: &str = "steps_timed";

/// The facts for stamps taken at the start of each step and after the last: the number of steps,
/// their mean, min, median, p90, p99 and max duration, and the count in each bin of `EDGES_NS`
/// (`steps_250_to_500_ns`, ..., `steps_2000_ns_and_more`). None for fewer than two stamps.
pub fn facts_from_stamps(stamps_ns: &[u64]) -> Vec<(String, f64)> {
    let mut steps_ns: Vec<u64> = (stamps_ns.windows(2))
        .map(|w| w[1].saturating_sub(w[0]))
        .collect();
    if steps_ns.is_empty() {
        return Vec::new();
    }
    steps_ns.sort_unstable();
    let count = steps_ns.len();
    // Nearest rank: the smallest duration with at least `p` of the steps at or below it.
    let rank = |p: f64| steps_ns[((p * count as f64).ceil() as usize).clamp(1, count) - 1] as f64;
    let total_ns: u64 = steps_ns.iter().sum();
    let mut facts = vec![
        (STEPS.to_string(), count as f64),
        ("step_ns_mean".to_string(), total_ns as f64 / count as f64),
        ("step_ns_min".to_string(), steps_ns[0] as f64),
        ("step_ns_median".to_string(), rank(0.5)),
        ("step_ns_p90".to_string(), rank(0.9)),
        ("step_ns_p99".to_string(), rank(0.99)),
        ("step_ns_max".to_string(), steps_ns[count - 1] as f64),
    ];
    for (low, high) in bins() {
        let in_bin = steps_ns
            .iter()
            .filter(|&&d| d >= low && high.is_none_or(|h| d < h))
            .count();
        facts.push((bin_name(low, high), in_bin as f64));
    }
    facts
}

/// The histogram's bins as (low, high) in nanoseconds; the last has no high.
fn bins() -> impl Iterator<Item = (u64, Option<u64>)> {
    let lows = std::iter::once(0).chain(EDGES_NS);
    let highs = EDGES_NS.into_iter().map(Some).chain(std::iter::once(None));
    lows.zip(highs)
}

fn bin_name(low: u64, high: Option<u64>) -> String {
    match high {
        Some(high) => format!("steps_{low}_to_{high}_ns"),
        None => format!("steps_{low}_ns_and_more"),
    }
}

/// The per-step latency read back from a case's facts.
#[derive(Debug, Clone, PartialEq)]
pub struct StepLatency {
    pub steps: u64,
    pub mean_ns: f64,
    pub min_ns: f64,
    pub median_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub max_ns: f64,
    /// (low, high, steps) for each bin, high None for the last.
    pub bins: Vec<(u64, Option<u64>, u64)>,
}

impl StepLatency {
    /// None where the case reported no steps (every kernel but durbin_schur's).
    pub fn from_facts(facts: &BTreeMap<String, f64>) -> Option<StepLatency> {
        let get = |key: &str| facts.get(key).copied();
        Some(StepLatency {
            steps: get(STEPS)? as u64,
            mean_ns: get("step_ns_mean")?,
            min_ns: get("step_ns_min")?,
            median_ns: get("step_ns_median")?,
            p90_ns: get("step_ns_p90")?,
            p99_ns: get("step_ns_p99")?,
            max_ns: get("step_ns_max")?,
            bins: bins()
                .map(|(low, high)| Some((low, high, get(&bin_name(low, high))? as u64)))
                .collect::<Option<_>>()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_become_a_summary_and_a_histogram_and_read_back() {
        // 10 steps: 100, 100, 300, 300, 300, 600, 900, 1200, 1800, 5000 ns.
        let mut stamps = vec![1_000_000u64];
        for d in [100, 100, 300, 300, 300, 600, 900, 1200, 1800, 5000] {
            stamps.push(stamps.last().unwrap() + d);
        }
        let facts: BTreeMap<String, f64> = facts_from_stamps(&stamps).into_iter().collect();
        let latency = StepLatency::from_facts(&facts).unwrap();
        assert_eq!(
            latency,
            StepLatency {
                steps: 10,
                mean_ns: 1060.0,
                min_ns: 100.0,
                median_ns: 300.0,
                p90_ns: 1800.0,
                p99_ns: 5000.0,
                max_ns: 5000.0,
                bins: vec![
                    (0, Some(250), 2),
                    (250, Some(500), 3),
                    (500, Some(750), 1),
                    (750, Some(1000), 1),
                    (1000, Some(1500), 1),
                    (1500, Some(2000), 1),
                    (2000, None, 1),
                ],
            }
        );
        assert_eq!(facts["steps_250_to_500_ns"], 3.0);
        assert!(facts_from_stamps(&[5]).is_empty());
        assert_eq!(StepLatency::from_facts(&BTreeMap::new()), None);
    }
}
