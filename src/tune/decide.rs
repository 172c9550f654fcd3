//! Deciding the winner of a problem point statistically. The fastest few correct
//! configurations are measured again, interleaved (round-robin, each round a full case with its
//! own warm-up), their samples pooled per configuration; after each round the winner (the
//! lowest pooled median) is separated from another configuration when its 95% CI of the median
//! lies wholly below the other's. Rounds stop once the winner is separated from every other
//! contender, or at the round limit; the verdict then says whether the winner is separated from
//! the runner-up (with the Mann-Whitney p-value and both intervals), a tie (medians within
//! `tie_within` that did not separate), or unresolved (further apart, yet not separated).

use serde::{Deserialize, Serialize};

use crate::compare::mann_whitney_p;
use crate::stats::median_ci95;

/// A configuration's pooled re-measurement samples.
#[derive(Debug, Clone)]
pub struct Contender {
    pub config: usize,
    pub samples_s: Vec<f64>,
}

/// How the winner stands against the runner-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// The winner's 95% CI of the median lies below the runner-up's.
    Separated,
    /// The intervals overlap and the medians differ by no more than `tie_within`.
    Tie,
    /// The intervals overlap, yet the medians differ by more than `tie_within`: more rounds
    /// (or samples) would be needed to tell.
    Unresolved,
    /// One correct configuration only: nothing to separate it from.
    Alone,
}

/// The decision at one problem point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    pub winner: usize,
    pub winner_median_s: f64,
    pub winner_ci_s: (f64, f64),
    pub runner_up: Option<usize>,
    pub runner_up_median_s: Option<f64>,
    pub runner_up_ci_s: Option<(f64, f64)>,
    /// The runner-up's median over the winner's, less 1 (0.03: 3% slower).
    pub runner_up_slower_by: Option<f64>,
    /// Mann-Whitney's two-sided p-value, winner against runner-up samples.
    pub p_value: Option<f64>,
    /// The tie threshold the verdict used.
    pub tie_within: f64,
}

impl Verdict {
    /// One line: `separated from block=128 items=4 (3.1% slower, p = 0.0002)`.
    pub fn describe(&self, runner_up_label: &str) -> String {
        let slower = self.runner_up_slower_by.unwrap_or(0.0) * 100.0;
        let p = self
            .p_value
            .map_or(String::new(), |p| format!(", p = {p:.2e}"));
        match self.kind {
            VerdictKind::Separated => {
                format!("separated from {runner_up_label} ({slower:.1}% slower{p}; 95% CIs apart)")
            }
            VerdictKind::Tie => format!(
                "a tie with {runner_up_label} (within {:.1}%: {slower:.1}% apart{p}, 95% CIs overlap)",
                self.tie_within * 100.0
            ),
            VerdictKind::Unresolved => format!(
                "not separated from {runner_up_label} ({slower:.1}% slower{p}, 95% CIs overlap; more than the {:.1}% of a tie)",
                self.tie_within * 100.0
            ),
            VerdictKind::Alone => "the only correct configuration".to_string(),
        }
    }
}

/// The median and its 95% CI.
fn median_and_ci(samples_s: &[f64]) -> (f64, (f64, f64)) {
    let mut sorted = samples_s.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    };
    (median, median_ci95(&sorted))
}

/// A contender's configuration, pooled median, its 95% CI, and its samples.
type Ranked<'a> = (usize, f64, (f64, f64), &'a [f64]);

/// The contenders ranked by pooled median (fastest first); those without samples are left out.
fn ranked(contenders: &[Contender]) -> Vec<Ranked<'_>> {
    let mut ranked: Vec<_> = (contenders.iter())
        .filter(|c| !c.samples_s.is_empty())
        .map(|c| {
            let (median, ci) = median_and_ci(&c.samples_s);
            (c.config, median, ci, c.samples_s.as_slice())
        })
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    ranked
}

/// Whether the fastest contender's interval lies below every other's: no more rounds needed.
pub fn winner_separated_from_all(contenders: &[Contender]) -> bool {
    let ranked = ranked(contenders);
    let Some((_, _, (_, winner_hi), _)) = ranked.first() else {
        return true;
    };
    ranked[1..].iter().all(|(_, _, (lo, _), _)| winner_hi < lo)
}

/// The verdict from the pooled samples; None when no contender has samples.
pub fn decide(contenders: &[Contender], tie_within: f64) -> Option<Verdict> {
    let ranked = ranked(contenders);
    let &(winner, winner_median_s, winner_ci_s, winner_samples) = ranked.first()?;
    let mut verdict = Verdict {
        kind: VerdictKind::Alone,
        winner,
        winner_median_s,
        winner_ci_s,
        runner_up: None,
        runner_up_median_s: None,
        runner_up_ci_s: None,
        runner_up_slower_by: None,
        p_value: None,
        tie_within,
    };
    let Some(&(runner_up, median, ci, samples)) = ranked.get(1) else {
        return Some(verdict);
    };
    let slower_by = median / winner_median_s - 1.0;
    verdict.kind = if winner_ci_s.1 < ci.0 {
        VerdictKind::Separated
    } else if slower_by <= tie_within {
        VerdictKind::Tie
    } else {
        VerdictKind::Unresolved
    };
    verdict.runner_up = Some(runner_up);
    verdict.runner_up_median_s = Some(median);
    verdict.runner_up_ci_s = Some(ci);
    verdict.runner_up_slower_by = Some(slower_by);
    verdict.p_value = Some(mann_whitney_p(winner_samples, samples));
    Some(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `n` samples around `center`, spread +-`rel` (uniform), from `seed`.
    fn samples(seed: u64, n: usize, center: f64, rel: f64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|_| center * (1.0 + rel * (2.0 * rng.random::<f64>() - 1.0)))
            .collect()
    }

    fn contenders(sets: Vec<Vec<f64>>) -> Vec<Contender> {
        (sets.into_iter().enumerate())
            .map(|(config, samples_s)| Contender { config, samples_s })
            .collect()
    }

    #[test]
    fn a_three_percent_gap_with_one_percent_noise_separates() {
        let c = contenders(vec![
            samples(1, 60, 1.03e-5, 0.01),
            samples(2, 60, 1.00e-5, 0.01),
            samples(3, 60, 1.10e-5, 0.01),
        ]);
        let v = decide(&c, 0.01).unwrap();
        assert_eq!(v.kind, VerdictKind::Separated);
        assert_eq!(v.winner, 1);
        assert_eq!(v.runner_up, Some(0));
        assert!(v.p_value.unwrap() < 1e-6, "{v:?}");
        assert!((v.runner_up_slower_by.unwrap() - 0.03).abs() < 0.01);
        assert!(winner_separated_from_all(&c));
    }

    #[test]
    fn the_same_distribution_twice_is_a_tie() {
        let c = contenders(vec![
            samples(4, 40, 2.0e-5, 0.02),
            samples(5, 40, 2.0e-5, 0.02),
        ]);
        let v = decide(&c, 0.01).unwrap();
        assert_eq!(v.kind, VerdictKind::Tie, "{v:?}");
        assert!(!winner_separated_from_all(&c));
        assert!(v.p_value.unwrap() > 0.01);
    }

    #[test]
    fn a_gap_the_noise_hides_is_unresolved_not_a_tie() {
        // 5% apart, but 40% noise on 8 samples: the intervals overlap.
        let c = contenders(vec![
            samples(6, 8, 1.00e-5, 0.4),
            samples(7, 8, 1.05e-5, 0.4),
        ]);
        let v = decide(&c, 0.01).unwrap();
        assert_eq!(v.kind, VerdictKind::Unresolved, "{v:?}");
    }

    #[test]
    fn one_contender_stands_alone_and_none_gives_no_verdict() {
        let c = contenders(vec![samples(8, 10, 1e-5, 0.01), Vec::new()]);
        assert_eq!(decide(&c, 0.01).unwrap().kind, VerdictKind::Alone);
        assert!(decide(&contenders(vec![Vec::new()]), 0.01).is_none());
    }
}
