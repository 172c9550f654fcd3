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

use crate::record::{MeasureSettings, Measurement, StopReason};
use crate::stats;

/// One timed run, whether the GPU throttled during it, and what a second timer said of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Taken {
    pub seconds: f64,
    pub throttled: bool,
    pub second_timer_s: Option<f64>,
}

impl Taken {
    pub fn clean(seconds: f64) -> Taken {
        Taken {
            seconds,
            throttled: false,
            second_timer_s: None,
        }
    }
}

/// The measurement, and the second timer's readings of the kept samples (where it had one).
#[derive(Debug, Clone)]
pub struct Measured {
    pub measurement: Measurement,
    pub second_timer_s: Vec<f64>,
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

/// Runs `sample` (which times one run) under the settings' stopping rule. A throttled sample is
/// discarded and re-taken, up to `max_samples` of them; past that they are kept (and counted by
/// the clocks record), so a GPU that always throttles still gets measured.
pub fn measure(
    settings: &MeasureSettings,
    deadline: Deadline,
    mut sample: impl FnMut() -> Result<Taken>,
) -> Result<Measured> {
    let started = Instant::now();
    let mut samples_s = Vec::new();
    let mut second_timer_s = Vec::new();
    let mut throttled_discarded = 0;
    let done = |samples_s: Vec<f64>,
                second_timer_s: Vec<f64>,
                stop_reason: StopReason,
                throttled_discarded: u32| Measured {
        measurement: Measurement {
            samples_s,
            warmup_runs: settings.warmup,
            stop_reason,
            throttled_discarded,
            gpu_timer: None,
            process_medians_s: Vec::new(),
        },
        second_timer_s,
    };
    for _ in 0..settings.warmup {
        if deadline.passed() {
            return Ok(done(samples_s, second_timer_s, StopReason::TimedOut, 0));
        }
        sample()?;
    }
    let stop_reason = loop {
        if deadline.passed() {
            break StopReason::TimedOut;
        }
        let taken = sample()?;
        if taken.throttled && throttled_discarded < settings.max_samples {
            throttled_discarded += 1;
            continue;
        }
        samples_s.push(taken.seconds);
        second_timer_s.extend(taken.second_timer_s);
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
    Ok(done(
        samples_s,
        second_timer_s,
        stop_reason,
        throttled_discarded,
    ))
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
            Ok(Taken::clean(1.0))
        })
        .unwrap()
        .measurement;
        assert_eq!(m.stop_reason, StopReason::Converged);
        assert_eq!(m.samples_s.len(), 10);
        assert_eq!(calls, 12, "two warm-up runs, then the samples");
    }

    #[test]
    fn convergence_needs_six_samples_for_a_real_confidence_interval() {
        let m = measure(&settings(2, 100, 10.0, 0.01), no_deadline(), || {
            Ok(Taken::clean(1.0))
        })
        .unwrap()
        .measurement;
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
            Ok(Taken::clean(1.0 + (k % 7) as f64))
        })
        .unwrap()
        .measurement;
        assert_eq!(m.stop_reason, StopReason::MaxSamples);
        assert_eq!(m.samples_s.len(), 40);
    }

    #[test]
    fn budget_stops_slow_cases() {
        let m = measure(&settings(1000, 10_000, 0.05, 0.0001), no_deadline(), || {
            std::thread::sleep(std::time::Duration::from_millis(10));
            Ok(Taken::clean(0.01))
        })
        .unwrap()
        .measurement;
        assert_eq!(m.stop_reason, StopReason::Budget);
        assert!(m.samples_s.len() < 10, "{} samples", m.samples_s.len());
    }

    #[test]
    fn throttled_samples_are_discarded_and_retaken_up_to_a_limit() {
        // Every third sample throttled: they are re-taken, and only clean ones are kept.
        let mut k = 0u32;
        let m = measure(&settings(10, 10, 10.0, 1e-9), no_deadline(), || {
            k += 1;
            Ok(Taken {
                seconds: if k.is_multiple_of(3) { 9.0 } else { 1.0 },
                throttled: k.is_multiple_of(3),
                second_timer_s: None,
            })
        })
        .unwrap()
        .measurement;
        assert_eq!(m.samples_s, vec![1.0; 10]);
        assert_eq!(m.throttled_discarded, 5);
        // A GPU that always throttles: max_samples are discarded, then samples are kept.
        let m = measure(&settings(4, 4, 10.0, 1e-9), no_deadline(), || {
            Ok(Taken {
                seconds: 2.0,
                throttled: true,
                second_timer_s: Some(1.9),
            })
        })
        .unwrap()
        .measurement;
        assert_eq!((m.samples_s.len(), m.throttled_discarded), (4, 4));
        let both = measure(&settings(4, 4, 10.0, 1e-9), no_deadline(), || {
            Ok(Taken {
                seconds: 2.0,
                throttled: false,
                second_timer_s: Some(1.9),
            })
        })
        .unwrap();
        assert_eq!(
            both.second_timer_s,
            vec![1.9; 4],
            "warm-ups leave no reading"
        );
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
                Ok(Taken::clean(0.01))
            },
        )
        .unwrap()
        .measurement;
        assert_eq!(m.stop_reason, StopReason::TimedOut);
        assert!(
            !m.samples_s.is_empty() && m.samples_s.len() < 10,
            "{}",
            m.samples_s.len()
        );
    }
}
