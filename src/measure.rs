//! Measurement: warm-up runs, then timed samples until the stopping rule holds.
//!
//! Stop when at least `min_samples` (and 6) are in and the median's 95% CI is within
//! `target_rel_ci` of the median; or at `max_samples`; or when the case's time budget is spent (then with fewer
//! than `min_samples` if one sample is that slow). Every raw sample is kept.
//!
//! The case's time limit is checked before every run: a case over it stops there and keeps its
//! samples. A single run is never cut short here; one that hangs is killed with the worker
//! process running it (see `worker`). Interrupts are the worker's parent's business too.

use std::time::{Duration, Instant};

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
    /// The case's time limit (`timeout_s`) passed: the case is recorded as timed out.
    TimedOut,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Measurement {
    pub samples_s: Vec<f64>,
    pub warmup_runs: u32,
    pub stop_reason: StopReason,
}

/// When a time limit (a case's `timeout_s`) passes.
#[derive(Debug, Clone, Copy)]
pub struct Deadline(Instant);

impl Deadline {
    pub fn after(timeout_s: f64) -> Deadline {
        let now = Instant::now();
        // An unrepresentable limit (infinite, or beyond Instant's range) never passes.
        let far = now + Duration::from_secs(1 << 30);
        Deadline(
            Duration::try_from_secs_f64(timeout_s)
                .ok()
                .and_then(|timeout| now.checked_add(timeout))
                .unwrap_or(far),
        )
    }

    pub fn passed(&self) -> bool {
        Instant::now() >= self.0
    }

    /// The time left; zero once passed.
    pub fn remaining(&self) -> Duration {
        self.0.saturating_duration_since(Instant::now())
    }
}

/// Runs `sample` (which returns one timed run, in seconds) under the settings' stopping rule.
pub fn measure(
    settings: &MeasureSettings,
    deadline: Deadline,
    mut sample: impl FnMut() -> Result<f64>,
) -> Result<Measurement> {
    let started = Instant::now();
    let mut samples_s = Vec::new();
    for _ in 0..settings.warmup {
        if deadline.passed() {
            return Ok(Measurement {
                samples_s,
                warmup_runs: settings.warmup,
                stop_reason: StopReason::TimedOut,
            });
        }
        sample()?;
    }
    let stop_reason = loop {
        if deadline.passed() {
            break StopReason::TimedOut;
        }
        samples_s.push(sample()?);
        let n = samples_s.len() as u32;
        // The CI needs a sort: check it at min_samples and then each time the count grows by a
        // tenth, so fast cases with many samples do not spend their budget sorting.
        // Under 6 samples no pair of order statistics covers the median with 95%: never converged.
        let first_check = settings
            .min_samples
            .max(stats::MIN_SAMPLES_FOR_MEDIAN_CI as u32);
        if n >= first_check && (n == first_check || n.is_multiple_of((n / 10).max(1))) {
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

    fn no_deadline() -> Deadline {
        Deadline::after(f64::INFINITY)
    }

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
        let m = measure(&settings(10, 100, 10.0, 0.01), no_deadline(), || {
            calls += 1;
            Ok(1.0)
        })
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::Converged);
        assert_eq!(m.samples_s.len(), 10);
        assert_eq!(calls, 12, "two warm-up runs, then the samples");
    }

    #[test]
    fn convergence_needs_six_samples_for_a_real_confidence_interval() {
        let m = measure(&settings(2, 100, 10.0, 0.01), no_deadline(), || Ok(1.0)).unwrap();
        assert_eq!(
            (m.stop_reason, m.samples_s.len()),
            (StopReason::Converged, 6)
        );
    }

    #[test]
    fn noisy_samples_run_to_max_samples() {
        let mut k = 0u32;
        let m = measure(&settings(5, 40, 10.0, 0.001), no_deadline(), || {
            k += 1;
            Ok(1.0 + (k % 7) as f64)
        })
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::MaxSamples);
        assert_eq!(m.samples_s.len(), 40);
    }

    #[test]
    fn budget_stops_slow_cases() {
        let m = measure(&settings(1000, 10_000, 0.05, 0.0001), no_deadline(), || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            Ok(0.01)
        })
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::Budget);
        assert!(m.samples_s.len() < 10, "{} samples", m.samples_s.len());
    }

    #[test]
    fn a_failing_run_is_an_error() {
        assert!(
            measure(&settings(3, 3, 1.0, 0.5), no_deadline(), || anyhow::bail!(
                "boom"
            ))
            .is_err()
        );
    }

    #[test]
    fn the_time_limit_ends_a_slow_case_with_its_samples() {
        let m = measure(
            &settings(1000, 10_000, 100.0, 0.0001),
            Deadline::after(0.05),
            || {
                std::thread::sleep(std::time::Duration::from_millis(10));
                Ok(0.01)
            },
        )
        .unwrap();
        assert_eq!(m.stop_reason, StopReason::TimedOut);
        assert!(
            !m.samples_s.is_empty() && m.samples_s.len() < 10,
            "{}",
            m.samples_s.len()
        );
    }
}
