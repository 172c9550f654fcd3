//! Measurement: warm-up runs, then timed samples until the stopping rule holds.
//!
//! Stop when at least `min_samples` are in and the median's 95% CI is within `target_rel_ci` of
//! the median; or at `max_samples`; or when the case's time budget is spent (then with fewer
//! than `min_samples` if one sample is that slow). Every raw sample is kept.

use std::time::Instant;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::manifest::MeasureSettings;
use crate::stats;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The median's CI reached the target width.
    Converged,
    MaxSamples,
    /// The time budget ran out first.
    Budget,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    pub samples_s: Vec<f64>,
    pub warmup_runs: u32,
    pub stop_reason: StopReason,
}

/// Runs `sample` (which returns one timed run, in seconds) under the settings' stopping rule.
pub fn measure(
    settings: &MeasureSettings,
    mut sample: impl FnMut() -> Result<f64>,
) -> Result<Measurement> {
    let started = Instant::now();
    for _ in 0..settings.warmup {
        sample()?;
    }
    let mut samples_s = Vec::new();
    let stop_reason = loop {
        samples_s.push(sample()?);
        let n = samples_s.len() as u32;
        if n >= settings.min_samples {
            let mut sorted = samples_s.clone();
            sorted.sort_by(f64::total_cmp);
            let median = sorted[sorted.len() / 2];
            let (lo, hi) = stats::median_ci95(&sorted);
            if median > 0.0 && (hi - lo) / median <= settings.target_rel_ci {
                break StopReason::Converged;
            }
        }
        if n >= settings.max_samples {
            break StopReason::MaxSamples;
        }
        if started.elapsed().as_secs_f64() >= settings.max_time_s {
            break StopReason::Budget;
        }
    };
    Ok(Measurement {
        samples_s,
        warmup_runs: settings.warmup,
        stop_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(min: u32, max: u32, budget_s: f64, target: f64) -> MeasureSettings {
        MeasureSettings {
            warmup: 2,
            min_samples: min,
            max_samples: max,
            max_time_s: budget_s,
            target_rel_ci: target,
            ..MeasureSettings::default()
        }
    }

    #[test]
    fn steady_samples_converge_at_min_samples() {
        let mut calls = 0;
        let m = measure(&settings(10, 100, 10.0, 0.01), || {
            calls += 1;
            Ok(1.0)
        })
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::Converged);
        assert_eq!(m.samples_s.len(), 10);
        assert_eq!(calls, 12, "two warm-up runs, then the samples");
    }

    #[test]
    fn noisy_samples_run_to_max_samples() {
        let mut k = 0u32;
        let m = measure(&settings(5, 40, 10.0, 0.001), || {
            k += 1;
            Ok(1.0 + (k % 7) as f64)
        })
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::MaxSamples);
        assert_eq!(m.samples_s.len(), 40);
    }

    #[test]
    fn budget_stops_slow_cases() {
        let m = measure(&settings(1000, 10_000, 0.05, 0.0001), || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            Ok(0.01)
        })
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::Budget);
        assert!(m.samples_s.len() < 10, "{} samples", m.samples_s.len());
    }

    #[test]
    fn a_failing_run_is_an_error() {
        assert!(measure(&settings(3, 3, 1.0, 0.5), || anyhow::bail!("boom")).is_err());
    }
}
