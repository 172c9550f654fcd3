//! Deciding the winner of a problem point statistically, from rounds of re-measurement.
//!
//! The unit of evidence is a round: in each round every contender (the fastest few correct
//! configurations) runs once, interleaved, in a fresh worker process for the round, and gives one
//! median.
//! A median within one process is very precise (thousands of samples), but medians move by
//! several % between processes on a GPU (of unknown cause), so samples pooled across
//! rounds would make differences look certain that no fresh process reproduces. Here each
//! contender is summarised by its per-round medians alone:
//!
//! - the winner is the contender of lowest mean log median over the rounds;
//! - against every other contender C, the paired differences d_r = ln(median_C,r) -
//!   ln(median_W,r) (paired: both ran in the same round, interleaved) give a Student t interval
//!   of their mean. Separated when it lies wholly above 0; a tie when it lies wholly within
//!   +-ln(1 + tie_within); unresolved otherwise;
//! - nothing is settled before `min_rounds`; rounds are added while some comparison is
//!   unresolved, up to `max_rounds`. Looking after each round from `min_rounds` on is several
//!   tests, so the 95% is split over the looks (Bonferroni: each look's two-sided interval has
//!   confidence 1 - 0.05 / looks), which keeps the chance of a false "separated" or "tie" at
//!   most 5% however many rounds it takes.
//!
//! Why a t interval rather than Wilcoxon's signed-rank or the sign test: with 5 rounds those
//! cannot reach a p-value below 1/32 at all (and not below 0.05 / looks), and they give no
//! interval of the difference, which a tie needs. A round's log median is an average of many
//! effects (thousands of samples, a process's placement), close enough to normal for the t
//! interval; a single wild round widens the interval (it raises the spread), so it costs a
//! verdict, never makes one.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The chance of a false verdict (separated or tie) over all the looks at one comparison.
pub const ALPHA: f64 = 0.05;

/// A configuration's re-measurement: one median per round, in round order (rounds aligned
/// across the contenders of a problem point).
#[derive(Debug, Clone)]
pub struct Contender {
    pub config: usize,
    pub round_medians_s: Vec<f64>,
}

/// When a decision may be made and what counts as a tie.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rule {
    /// No verdict but unresolved before this many rounds (at least 2).
    pub min_rounds: usize,
    /// Rounds stop here, resolved or not.
    pub max_rounds: usize,
    /// A share (0.01 = 1%): an interval of the difference wholly within +- this is a tie.
    pub tie_within: f64,
}

impl Rule {
    /// How many times the rounds may be looked at: after each round from `min_rounds` to
    /// `max_rounds`.
    pub fn looks(&self) -> usize {
        self.max_rounds.saturating_sub(self.min_rounds) + 1
    }

    /// The two-sided confidence of each look's interval (Bonferroni over the looks).
    pub fn confidence(&self) -> f64 {
        1.0 - ALPHA / self.looks() as f64
    }
}

/// How the winner stands against another contender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// The interval of the runner-up's paired log difference over the rounds lies above 0.
    Separated,
    /// The interval lies within +-`tie_within`.
    Tie,
    /// Neither: more rounds would be needed to tell (or the difference does not reproduce
    /// from one process to the next).
    Unresolved,
    /// One correct configuration only: nothing to separate it from.
    Alone,
}

/// One paired comparison: how much slower the other contender is than the winner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Comparison {
    pub kind: VerdictKind,
    /// exp(mean of d_r) - 1: 0.03 is 3% slower.
    pub slower_by: f64,
    /// The interval of `slower_by` at the rule's per-look confidence.
    pub slower_by_ci: (f64, f64),
}

/// The decision at one problem point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    pub winner: usize,
    /// The geometric mean of the winner's per-round medians (its evaluation's median when
    /// alone).
    pub winner_median_s: f64,
    /// The winner's between-round coefficient of variation (of its per-round medians).
    pub winner_round_cv: Option<f64>,
    pub runner_up: Option<usize>,
    /// The geometric mean of the runner-up's per-round medians.
    pub runner_up_median_s: Option<f64>,
    pub runner_up_round_cv: Option<f64>,
    /// The runner-up's paired slowdown over the winner, exp(mean d_r) - 1 (0.03: 3% slower).
    pub runner_up_slower_by: Option<f64>,
    /// Its interval, at `confidence`.
    pub runner_up_slower_by_ci: Option<(f64, f64)>,
    /// Re-measurement rounds the verdict rests on (0 when alone).
    pub rounds: usize,
    /// The two-sided confidence of the interval (0.95 split over the looks).
    pub confidence: f64,
    /// The tie threshold the verdict used.
    pub tie_within: f64,
}

impl Verdict {
    /// The verdict of a configuration with no rival: its evaluation's median stands.
    pub fn alone(config: usize, median_s: f64, rule: &Rule) -> Verdict {
        Verdict {
            kind: VerdictKind::Alone,
            winner: config,
            winner_median_s: median_s,
            winner_round_cv: None,
            runner_up: None,
            runner_up_median_s: None,
            runner_up_round_cv: None,
            runner_up_slower_by: None,
            runner_up_slower_by_ci: None,
            rounds: 0,
            confidence: rule.confidence(),
            tie_within: rule.tie_within,
        }
    }

    /// One line: `separated from block=128 items=4 (3.1% slower, 98.8% CI +2.0% .. +4.2%,
    /// 6 rounds in fresh workers)`.
    pub fn describe(&self, runner_up_label: &str) -> String {
        let pct = |x: f64| format!("{:+.1}%", x * 100.0);
        let slower = self.runner_up_slower_by.unwrap_or(0.0);
        let (lo, hi) = self.runner_up_slower_by_ci.unwrap_or((slower, slower));
        let evidence = format!(
            "{} slower, {:.1}% CI {} .. {}, {} rounds in fresh workers",
            pct(slower),
            self.confidence * 100.0,
            pct(lo),
            pct(hi),
            self.rounds
        );
        match self.kind {
            VerdictKind::Separated => format!("separated from {runner_up_label} ({evidence})"),
            VerdictKind::Tie => format!(
                "a tie with {runner_up_label} ({evidence}: within +-{:.1}%)",
                self.tie_within * 100.0
            ),
            VerdictKind::Unresolved => format!(
                "not separated from {runner_up_label} ({evidence}: neither above 0 nor within +-{:.1}%)",
                self.tie_within * 100.0
            ),
            VerdictKind::Alone => "the only correct configuration".to_string(),
        }
    }
}

/// The mean of the logs of a contender's per-round medians.
fn mean_log(c: &Contender) -> f64 {
    c.round_medians_s.iter().map(|m| m.ln()).sum::<f64>() / c.round_medians_s.len() as f64
}

/// The between-round coefficient of variation of per-round medians (None under 2 rounds).
pub fn round_cv(medians_s: &[f64]) -> Option<f64> {
    let n = medians_s.len();
    if n < 2 {
        return None;
    }
    let mean = medians_s.iter().sum::<f64>() / n as f64;
    let var = medians_s.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    Some(var.sqrt() / mean)
}

/// The contenders that have rounds, ranked by mean log median (fastest first).
fn ranked(contenders: &[Contender]) -> Vec<&Contender> {
    let mut ranked: Vec<&Contender> = (contenders.iter())
        .filter(|c| !c.round_medians_s.is_empty())
        .collect();
    ranked.sort_by(|a, b| {
        mean_log(a)
            .total_cmp(&mean_log(b))
            .then(a.config.cmp(&b.config))
    });
    ranked
}

/// The paired comparison of `other` against `winner` over their common rounds.
pub fn compare(winner: &[f64], other: &[f64], rule: &Rule) -> Comparison {
    let d: Vec<f64> = (winner.iter().zip(other))
        .map(|(w, o)| o.ln() - w.ln())
        .collect();
    let n = d.len();
    let mean = d.iter().sum::<f64>() / n.max(1) as f64;
    let unresolved = Comparison {
        kind: VerdictKind::Unresolved,
        slower_by: mean.exp_m1(),
        slower_by_ci: (f64::NEG_INFINITY, f64::INFINITY),
    };
    if n < 2 || n < rule.min_rounds {
        return unresolved;
    }
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    let Ok(t) = StudentsT::new(0.0, 1.0, (n - 1) as f64) else {
        return unresolved;
    };
    let q = t.inverse_cdf(1.0 - (1.0 - rule.confidence()) / 2.0);
    let (lo, hi) = (mean - q * se, mean + q * se);
    let tie_log = rule.tie_within.ln_1p();
    let kind = if lo > 0.0 {
        VerdictKind::Separated
    } else if lo >= -tie_log && hi <= tie_log {
        VerdictKind::Tie
    } else {
        VerdictKind::Unresolved
    };
    Comparison {
        kind,
        slower_by: mean.exp_m1(),
        slower_by_ci: (lo.exp_m1(), hi.exp_m1()),
    }
}

/// Whether no more rounds are needed: `min_rounds` run and the winner separated from or tied
/// with every other contender (or `max_rounds` reached).
pub fn settled(contenders: &[Contender], rule: &Rule) -> bool {
    if contenders.len() < 2 {
        return true;
    }
    let rounds = (contenders.iter())
        .map(|c| c.round_medians_s.len())
        .min()
        .unwrap_or(0);
    if rounds < rule.min_rounds {
        return false;
    }
    if rounds >= rule.max_rounds {
        return true;
    }
    let ranked = ranked(contenders);
    let winner = ranked[0];
    ranked[1..].iter().all(|c| {
        compare(&winner.round_medians_s, &c.round_medians_s, rule).kind != VerdictKind::Unresolved
    })
}

/// The verdict from the rounds; None when no contender has a round.
pub fn decide(contenders: &[Contender], rule: &Rule) -> Option<Verdict> {
    let ranked = ranked(contenders);
    let winner = *ranked.first()?;
    let geo_mean = |c: &Contender| mean_log(c).exp();
    let mut verdict = Verdict::alone(winner.config, geo_mean(winner), rule);
    verdict.winner_round_cv = round_cv(&winner.round_medians_s);
    verdict.rounds = winner.round_medians_s.len();
    let Some(runner_up) = ranked.get(1) else {
        return Some(verdict);
    };
    let comparison = compare(&winner.round_medians_s, &runner_up.round_medians_s, rule);
    verdict.kind = comparison.kind;
    verdict.runner_up = Some(runner_up.config);
    verdict.runner_up_median_s = Some(geo_mean(runner_up));
    verdict.runner_up_round_cv = round_cv(&runner_up.round_medians_s);
    verdict.runner_up_slower_by = Some(comparison.slower_by);
    verdict.runner_up_slower_by_ci = Some(comparison.slower_by_ci);
    Some(verdict)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::median_ci95;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const RULE: Rule = Rule {
        min_rounds: 5,
        max_rounds: 10,
        tie_within: 0.01,
    };

    /// A uniform draw in [-1, 1).
    fn sym(rng: &mut ChaCha8Rng) -> f64 {
        2.0 * rng.random::<f64>() - 1.0
    }

    /// A GPU as the H100 showed it: each run of a configuration in a fresh process gets an
    /// offset (uniform +-`between`) that holds for all its samples, and each sample a jitter
    /// (+-`within`). Returns, per round, each configuration's samples.
    fn rounds_of_samples(
        seed: u64,
        true_s: &[f64],
        between: f64,
        within: f64,
        rounds: usize,
        samples: usize,
    ) -> Vec<Vec<Vec<f64>>> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..rounds)
            .map(|_| {
                (true_s.iter())
                    .map(|t| {
                        let offset = 1.0 + between * sym(&mut rng);
                        (0..samples)
                            .map(|_| t * offset * (1.0 + within * sym(&mut rng)))
                            .collect()
                    })
                    .collect()
            })
            .collect()
    }

    fn median(samples: &[f64]) -> f64 {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        0.5 * (s[(n - 1) / 2] + s[n / 2])
    }

    /// The contenders after `r` rounds: each one's per-round medians.
    fn contenders_after(rounds: &[Vec<Vec<f64>>], r: usize) -> Vec<Contender> {
        (0..rounds[0].len())
            .map(|config| Contender {
                config,
                round_medians_s: rounds[..r].iter().map(|x| median(&x[config])).collect(),
            })
            .collect()
    }

    /// The decision as the tune makes it: rounds added until settled.
    fn sequential(rounds: &[Vec<Vec<f64>>], rule: &Rule) -> Verdict {
        let mut r = 1;
        while !settled(&contenders_after(rounds, r), rule) {
            r += 1;
        }
        decide(&contenders_after(rounds, r), rule).unwrap()
    }

    /// The old decision: every sample of every round pooled per configuration, separated when
    /// the 95% CIs of the pooled medians do not overlap.
    fn pooled_separated(rounds: &[Vec<Vec<f64>>]) -> bool {
        let pooled: Vec<Vec<f64>> = (0..rounds[0].len())
            .map(|c| rounds.iter().flat_map(|r| r[c].iter().copied()).collect())
            .collect();
        let ci = |s: &[f64]| {
            let mut s = s.to_vec();
            s.sort_by(f64::total_cmp);
            median_ci95(&s)
        };
        let (a, b) = (ci(&pooled[0]), ci(&pooled[1]));
        a.1 < b.0 || b.1 < a.0
    }

    /// A 0.5% gap under a +-5% offset per process: within each process one of the two is
    /// clearly faster (2000 samples each), but which one changes from process to process. Over
    /// 200 seeds the old pooled rule calls nearly all of them separated; the rounds rule calls
    /// at most 5% separated (its promise), and never wrongly in the other direction more.
    #[test]
    fn a_gap_smaller_than_the_between_process_spread_is_not_separated() {
        let (mut old, mut new) = (0, 0);
        for seed in 0..200 {
            let rounds = rounds_of_samples(seed, &[1.0e-5, 1.005e-5], 0.05, 0.01, 10, 2000);
            old += usize::from(pooled_separated(&rounds[..RULE.max_rounds]));
            let v = sequential(&rounds, &RULE);
            new += usize::from(v.kind == VerdictKind::Separated);
            assert!(v.rounds >= RULE.min_rounds);
        }
        eprintln!("0.5% gap, +-5% between processes: pooled rule separated {old}/200, rounds rule {new}/200");
        assert!(old >= 180, "the pooled rule separated only {old}/200");
        assert!(new <= 10, "the rounds rule separated {new}/200");
    }

    /// Identical configurations: the rounds rule says separated in at most 5% of the seeds,
    /// however many rounds it looks at (Bonferroni over the looks).
    #[test]
    fn identical_configurations_are_falsely_separated_in_at_most_5_percent() {
        let rule = Rule {
            min_rounds: 3,
            max_rounds: 12,
            tie_within: 0.002,
        };
        let mut separated = 0;
        for seed in 0..400 {
            let rounds = rounds_of_samples(1000 + seed, &[2e-5, 2e-5], 0.03, 0.01, 12, 50);
            separated += usize::from(sequential(&rounds, &rule).kind == VerdictKind::Separated);
        }
        eprintln!("identical configurations: {separated}/400 falsely separated");
        assert!(separated <= 20, "{separated}/400 falsely separated");
    }

    /// A real 5% gap with 1% between-process noise: separated at the first look, in every seed.
    #[test]
    fn a_five_percent_gap_with_one_percent_noise_is_separated_at_min_rounds() {
        for seed in 0..100 {
            let rounds = rounds_of_samples(seed, &[1.05e-5, 1.0e-5, 1.2e-5], 0.01, 0.01, 10, 500);
            let v = sequential(&rounds, &RULE);
            assert_eq!(v.kind, VerdictKind::Separated, "seed {seed}: {v:?}");
            assert_eq!(v.rounds, RULE.min_rounds, "seed {seed}");
            assert_eq!((v.winner, v.runner_up), (1, Some(0)));
            let (lo, hi) = v.runner_up_slower_by_ci.unwrap();
            assert!(
                lo > 0.0 && lo < 0.05 && hi > 0.05,
                "seed {seed}: {lo} .. {hi}"
            );
            let cv = v.winner_round_cv.unwrap();
            assert!(
                cv > 0.001 && cv < 0.02,
                "seed {seed}: between-round CV {cv}"
            );
        }
    }

    /// The same configuration twice with little between-process noise: a tie (the interval
    /// within +-1%) in at least 90% of the seeds, separated in at most 5% (the rule's promise).
    #[test]
    fn the_same_configuration_twice_with_little_noise_is_a_tie() {
        let (mut ties, mut separated) = (0, 0);
        for seed in 0..100 {
            let rounds = rounds_of_samples(seed, &[3e-5, 3e-5], 0.003, 0.01, 10, 200);
            let v = sequential(&rounds, &RULE);
            if v.kind == VerdictKind::Tie {
                ties += 1;
                let (lo, hi) = v.runner_up_slower_by_ci.unwrap();
                assert!(lo >= -0.01 && hi <= 0.01, "seed {seed}: {lo} .. {hi}");
            }
            separated += usize::from(v.kind == VerdictKind::Separated);
        }
        eprintln!("the same configuration twice: {ties} ties, {separated} separated of 100");
        assert!(
            ties >= 90 && separated <= 5,
            "{ties} ties, {separated} separated of 100"
        );
    }

    /// A 3% gap hidden by a +-10% offset per process: unresolved after every round allowed,
    /// not a tie.
    #[test]
    fn a_gap_the_between_process_noise_hides_is_unresolved_not_a_tie() {
        let rounds = rounds_of_samples(7, &[1e-5, 1.03e-5], 0.10, 0.01, 10, 100);
        let v = sequential(&rounds, &RULE);
        assert_eq!(v.kind, VerdictKind::Unresolved, "{v:?}");
        assert_eq!(v.rounds, RULE.max_rounds);
        let (lo, hi) = v.runner_up_slower_by_ci.unwrap();
        assert!(lo < 0.0 && hi > 0.01, "{lo} .. {hi}");
        assert!(v.describe("x").contains("10 rounds"), "{}", v.describe("x"));
    }

    #[test]
    fn nothing_is_settled_before_min_rounds_and_everything_at_max_rounds() {
        let c = |medians: &[f64]| Contender {
            config: 0,
            round_medians_s: medians.to_vec(),
        };
        // Far apart and exact, yet 4 rounds are not 5.
        assert!(!settled(&[c(&[]), c(&[])], &RULE), "no rounds yet");
        assert!(settled(&[c(&[])], &RULE), "no rival");
        let four = [c(&[1.0; 4]), c(&[2.0; 4])];
        assert!(!settled(&four, &RULE));
        assert_eq!(
            compare(&[1.0; 4], &[2.0; 4], &RULE).kind,
            VerdictKind::Unresolved
        );
        let five = [c(&[1.0; 5]), c(&[2.0; 5])];
        assert!(settled(&five, &RULE));
        let noisy = [
            c(&[1.0, 1.2, 0.9, 1.1, 1.0, 1.3, 0.8, 1.0, 1.1, 1.2]),
            c(&[1.05; 10]),
        ];
        assert!(settled(&noisy, &RULE), "the round limit settles");
    }

    #[test]
    fn one_contender_stands_alone_and_none_gives_no_verdict() {
        let c = vec![
            Contender {
                config: 3,
                round_medians_s: vec![1e-5, 1.1e-5],
            },
            Contender {
                config: 4,
                round_medians_s: Vec::new(),
            },
        ];
        let v = decide(&c, &RULE).unwrap();
        assert_eq!((v.kind, v.winner, v.rounds), (VerdictKind::Alone, 3, 2));
        assert!(decide(&c[1..], &RULE).is_none());
    }

    #[test]
    fn the_confidence_is_split_over_the_looks() {
        assert_eq!(RULE.looks(), 6);
        assert!((RULE.confidence() - (1.0 - 0.05 / 6.0)).abs() < 1e-12);
        let once = Rule {
            min_rounds: 5,
            max_rounds: 5,
            tie_within: 0.01,
        };
        assert!((once.confidence() - 0.95).abs() < 1e-12);
    }
}
