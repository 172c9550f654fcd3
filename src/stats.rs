//! Summaries of raw timing samples, computed with statrs: median, mean, spread, quartiles,
//! confidence intervals and Tukey-fence outliers (flagged, never dropped).
//!
//! The median's 95% CI is distribution-free (binomial order statistics), since kernel timings are
//! skewed and rarely normal; the mean's uses Student's t and is kept for comparison.

use statrs::distribution::{Binomial, ContinuousCDF, DiscreteCDF, StudentsT};
use statrs::statistics::{Data, OrderStatistics, Statistics};

use crate::record::{Outliers, Summary};

/// Summarizes at least one sample.
pub fn summarize(samples_s: &[f64]) -> Summary {
    assert!(!samples_s.is_empty(), "summarize needs at least one sample");
    let n = samples_s.len();
    let mut data = Data::new(samples_s.to_vec());
    let median_s = data.median();
    let q1_s = data.lower_quartile();
    let q3_s = data.upper_quartile();
    let mean_s = samples_s.iter().mean();
    let std_dev_s = if n > 1 {
        samples_s.iter().std_dev()
    } else {
        0.0
    };

    let mut sorted = samples_s.to_vec();
    sorted.sort_by(f64::total_cmp);

    let mean_ci95_s = if n > 1 {
        let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
            .expect("n > 1 gives a valid t distribution")
            .inverse_cdf(0.975);
        let half = t * std_dev_s / (n as f64).sqrt();
        (mean_s - half, mean_s + half)
    } else {
        (mean_s, mean_s)
    };

    Summary {
        samples: n,
        median_s,
        mean_s,
        std_dev_s,
        cv: if mean_s != 0.0 {
            std_dev_s / mean_s
        } else {
            0.0
        },
        min_s: sorted[0],
        max_s: sorted[n - 1],
        q1_s,
        q3_s,
        median_ci95_s: median_ci95(&sorted),
        mean_ci95_s,
        outliers: tukey_outliers(samples_s, q1_s, q3_s),
    }
}

/// Fewest samples for which some pair of order statistics covers the median with 95%
/// (`median_ci_lower_rank` is 0 below it; a test checks the two agree).
pub const MIN_SAMPLES_FOR_MEDIAN_CI: usize = 6;

/// The 95% distribution-free CI of the median of `sorted` samples: order statistics
/// (x_(l), x_(n+1-l)) with l the largest rank whose binomial tail stays within 2.5%. Under six
/// samples no pair of order statistics reaches 95%, and the whole range is returned.
pub fn median_ci95(sorted: &[f64]) -> (f64, f64) {
    let n = sorted.len();
    let lower_rank = median_ci_lower_rank(n);
    if lower_rank == 0 {
        return (sorted[0], sorted[n - 1]);
    }
    (sorted[lower_rank - 1], sorted[n - lower_rank])
}

/// 1-based rank l of the lower CI bound, or 0 when no rank gives 95% coverage.
pub fn median_ci_lower_rank(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let binomial = Binomial::new(0.5, n as u64).expect("p = 0.5 is a valid probability");
    // P(B <= l - 1) <= 0.025 means the interval (x_(l), x_(n+1-l)) covers the median with >= 95%.
    let mut rank = 0;
    while rank < n / 2 && binomial.cdf(rank as u64) <= 0.025 {
        rank += 1;
    }
    rank
}

fn tukey_outliers(samples_s: &[f64], q1: f64, q3: f64) -> Outliers {
    let iqr = q3 - q1;
    let mut out = Outliers::default();
    for (i, &x) in samples_s.iter().enumerate() {
        let flagged = if x < q1 - 3.0 * iqr {
            out.low_severe += 1;
            true
        } else if x < q1 - 1.5 * iqr {
            out.low_mild += 1;
            true
        } else if x > q3 + 3.0 * iqr {
            out.high_severe += 1;
            true
        } else if x > q3 + 1.5 * iqr {
            out.high_mild += 1;
            true
        } else {
            false
        };
        if flagged {
            out.indices.push(i);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn known_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, sample std dev sqrt(32/7), median 4.5.
        let s = summarize(&[5.0, 2.0, 4.0, 9.0, 4.0, 7.0, 4.0, 5.0]);
        assert_eq!(s.samples, 8);
        assert!(close(s.mean_s, 5.0, 1e-12));
        assert!(close(s.std_dev_s, (32.0f64 / 7.0).sqrt(), 1e-12));
        assert!(close(s.median_s, 4.5, 1e-12));
        assert_eq!((s.min_s, s.max_s), (2.0, 9.0));
        assert!(close(s.cv, (32.0f64 / 7.0).sqrt() / 5.0, 1e-12));
        // t(0.975, 7) = 2.364624...
        let half = 2.364_624_251_6 * (32.0f64 / 7.0).sqrt() / 8.0f64.sqrt();
        assert!(close(s.mean_ci95_s.0, 5.0 - half, 1e-6));
        assert!(close(s.mean_ci95_s.1, 5.0 + half, 1e-6));
    }

    #[test]
    fn median_ci_ranks_match_published_tables() {
        // Tables of the order-statistic CI for the median (e.g. Conover): n=10 -> (2, 9),
        // n=20 -> (6, 15), n=100 -> (40, 61). Under 6 samples no interval reaches 95%.
        assert_eq!(median_ci_lower_rank(5), 0);
        assert_eq!(median_ci_lower_rank(6), 1);
        assert_eq!(median_ci_lower_rank(MIN_SAMPLES_FOR_MEDIAN_CI - 1), 0);
        assert_eq!(median_ci_lower_rank(MIN_SAMPLES_FOR_MEDIAN_CI), 1);
        assert_eq!(median_ci_lower_rank(10), 2);
        assert_eq!(median_ci_lower_rank(20), 6);
        assert_eq!(median_ci_lower_rank(100), 40);
        let sorted: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(median_ci95(&sorted), (2.0, 9.0));
    }

    #[test]
    fn outliers_are_flagged_not_dropped() {
        let mut samples = vec![10.0; 20];
        for (i, s) in samples.iter_mut().enumerate() {
            *s += (i % 5) as f64 * 0.1;
        }
        samples.push(100.0);
        samples.push(10.9);
        let s = summarize(&samples);
        assert_eq!(s.samples, 22);
        assert_eq!(s.outliers.high_severe, 1);
        assert!(s.outliers.indices.contains(&20));
        assert_eq!(s.max_s, 100.0);
    }

    #[test]
    fn a_single_sample_summarizes() {
        let s = summarize(&[3.0]);
        assert_eq!(
            (s.median_s, s.std_dev_s, s.median_ci95_s),
            (3.0, 0.0, (3.0, 3.0))
        );
    }
}
