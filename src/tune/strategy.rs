//! The search strategies: each proposes the next configurations of one problem point from what
//! was measured there so far. A proposal is a function of the space, the history (in the order
//! evaluated) and the seed alone, so a resumed tune that replays its journal gets the same
//! proposals as the run it continues, and no strategy ever proposes a configuration the history
//! holds.
//!
//! - exhaustive: every configuration, in plan order.
//! - random: a permutation drawn from the seed (sampling without replacement).
//! - anneal: simulated annealing over grid neighbours (one step along one axis), on log time;
//!   its walk is rebuilt from the history each time, each step's coin drawn from the seed and
//!   the step's number.
//! - bayes: a Gaussian process (`gp`: one length scale per axis and a noise term, fitted by
//!   marginal likelihood) on log time over the axes' indices scaled to [0, 1]; a space-filling
//!   initial design (a Latin hypercube, 5 points for two axes), then alternately the
//!   configuration of highest expected improvement (over the lowest posterior mean measured)
//!   and the incumbent's most promising unevaluated neighbour. A configuration that failed is
//!   left out of the model (and never proposed again). Its re-measured contenders are the
//!   fastest measured and those of lowest posterior mean (`contenders`).

use rand::seq::{IndexedRandom, SliceRandom};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

use super::gp::Gp;
use super::space::Space;
use super::spec::StrategyKind;

/// A configuration evaluated: its time (the case's median), or None where it failed or was
/// skipped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Observed {
    pub config: usize,
    pub time_s: Option<f64>,
}

/// Up to `want` configurations to evaluate next (the model-based and local searches propose
/// one at a time, since each proposal needs the last one's time); empty when every
/// configuration has been evaluated.
pub fn propose(
    kind: StrategyKind,
    space: &Space,
    history: &[Observed],
    want: usize,
    seed: u64,
) -> Vec<usize> {
    let evaluated = evaluated(space, history);
    let fresh = |c: &usize| !evaluated[*c];
    let proposed: Vec<usize> = match kind {
        StrategyKind::Exhaustive => (0..space.len()).filter(fresh).take(want).collect(),
        StrategyKind::Random => permutation(space.len(), seed)
            .into_iter()
            .filter(fresh)
            .take(want)
            .collect(),
        StrategyKind::Anneal => anneal(space, history, &evaluated, seed)
            .into_iter()
            .collect(),
        StrategyKind::Bayes => bayes(space, history, &evaluated, seed)
            .into_iter()
            .collect(),
    };
    debug_assert!(proposed.iter().all(|c| !evaluated[*c]));
    proposed
}

/// Which configurations the history holds.
fn evaluated(space: &Space, history: &[Observed]) -> Vec<bool> {
    let mut done = vec![false; space.len()];
    for o in history {
        if let Some(d) = done.get_mut(o.config) {
            *d = true;
        }
    }
    done
}

/// The configurations in the seed's random order.
fn permutation(len: usize, seed: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..len).collect();
    order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
    order
}

/// The first configuration of the seed's random order not yet evaluated.
fn next_random(space: &Space, evaluated: &[bool], seed: u64) -> Option<usize> {
    permutation(space.len(), seed)
        .into_iter()
        .find(|c| !evaluated[*c])
}

/// A random number generator for step `step` of the search, from the seed.
fn step_rng(seed: u64, step: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed ^ (step as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The starting temperature of the annealing (on log time: 0.1 accepts a 10% slower
/// configuration with probability 1/e) and its cooling per step.
const ANNEAL_T0: f64 = 0.1;
const ANNEAL_COOLING: f64 = 0.85;

/// Simulated annealing: the walk replayed from the history, then an unevaluated neighbour of
/// where it stands (or of the best so far, or a random configuration when neither has one).
fn anneal(space: &Space, history: &[Observed], evaluated: &[bool], seed: u64) -> Option<usize> {
    let mut current: Option<(usize, f64)> = None;
    let mut best: Option<(usize, f64)> = None;
    for (step, o) in history.iter().enumerate() {
        let Some(t) = o.time_s.map(f64::ln) else {
            continue;
        };
        if best.is_none_or(|(_, b)| t < b) {
            best = Some((o.config, t));
        }
        let temperature = ANNEAL_T0 * ANNEAL_COOLING.powi(step as i32);
        let accept = match current {
            None => true,
            Some((_, c)) if t <= c => true,
            Some((_, c)) => step_rng(seed, step).random::<f64>() < (-(t - c) / temperature).exp(),
        };
        if accept {
            current = Some((o.config, t));
        }
    }
    let mut rng = step_rng(seed, history.len());
    for (from, _) in [current, best].into_iter().flatten() {
        let open: Vec<usize> = (space.neighbours(from).into_iter())
            .filter(|c| !evaluated[*c])
            .collect();
        if let Some(&c) = open.choose(&mut rng) {
            return Some(c);
        }
    }
    next_random(space, evaluated, seed)
}

/// How many configurations of the space-filling design start the Bayesian optimisation: 5
/// for the usual two knobs, at least 4.
fn initial_design_size(dims: usize) -> usize {
    (dims + 3).max(4)
}

/// Latin hypercube designs drawn to choose the initial design from (the most spread kept).
const DESIGN_CANDIDATES: usize = 32;

/// The initial design: `size` points of a Latin hypercube over the axes (each axis's range cut
/// into `size` strata, each stratum used once), the most spread (largest smallest distance) of
/// a few drawn from the seed. Points in unit coordinates.
fn initial_design(dims: usize, size: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5851_F42D_4C95_7F2D);
    let mut best: Option<(Vec<Vec<f64>>, f64)> = None;
    for _ in 0..DESIGN_CANDIDATES {
        let strata: Vec<Vec<usize>> = (0..dims)
            .map(|_| {
                let mut s: Vec<usize> = (0..size).collect();
                s.shuffle(&mut rng);
                s
            })
            .collect();
        let points: Vec<Vec<f64>> = (0..size)
            .map(|i| {
                (strata.iter())
                    .map(|s| (s[i] as f64 + rng.random::<f64>()) / size as f64)
                    .collect()
            })
            .collect();
        let spread = min_distance(&points);
        if best.as_ref().is_none_or(|(_, d)| spread > *d) {
            best = Some((points, spread));
        }
    }
    best.map(|(p, _)| p).unwrap_or_default()
}

fn distance2(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum()
}

fn min_distance(points: &[Vec<f64>]) -> f64 {
    let mut d = f64::MAX;
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            d = d.min(distance2(a, b));
        }
    }
    d
}

/// The unevaluated configuration nearest to a design point (in unit coordinates, where a
/// point in [0, 1) covers an axis's values evenly), lowest index on a tie.
fn nearest_open(space: &Space, evaluated: &[bool], point: &[f64]) -> Option<usize> {
    let target: Vec<f64> = (point.iter().zip(&space.axis_sizes))
        .map(|(&u, &size)| match size {
            0 | 1 => 0.0,
            _ => ((u * size as f64).floor().min(size as f64 - 1.0)) / (size - 1) as f64,
        })
        .collect();
    (0..space.len()).filter(|c| !evaluated[*c]).min_by(|a, b| {
        distance2(&space.unit(*a), &target)
            .total_cmp(&distance2(&space.unit(*b), &target))
            .then(a.cmp(b))
    })
}

/// Bayesian optimisation: a space-filling initial design, then, alternately, the configuration
/// of highest expected improvement under a Gaussian process (`gp`) fitted to the log times so
/// far, and a local step: the unevaluated grid neighbour of lowest predicted time next to the
/// incumbent. The incumbent is the configuration measured of lowest posterior mean (not the
/// lowest noisy time, which a lucky sample would set too low). The local steps find an
/// optimum the smooth model undervalues: one beside a cliff (a spill, an occupancy step), or
/// one a few % better than its neighbours under a few % of noise.
fn bayes(space: &Space, history: &[Observed], evaluated: &[bool], seed: u64) -> Option<usize> {
    let dims = space.axis_sizes.len();
    let initial = initial_design_size(dims);
    let measured = measured_log_times(history);
    if history.len() < initial || measured.len() < 2 {
        // The design's points in order; a point whose nearest configuration is taken goes to
        // the nearest open one. Past the design (too many failures), at random.
        let design = initial_design(dims, initial, seed);
        return match design.get(history.len()) {
            Some(point) => nearest_open(space, evaluated, point),
            None => next_random(space, evaluated, seed),
        };
    }
    let Some((gp, points)) = fit(space, &measured) else {
        return next_random(space, evaluated, seed);
    };
    let predicted = |c: usize| gp.predict(&space.unit(c)).0;
    let local_step = (history.len() - initial) % 2 == 1;
    if local_step {
        let incumbent = (measured.iter().map(|(c, _)| *c))
            .min_by(|a, b| predicted(*a).total_cmp(&predicted(*b)).then(a.cmp(b)));
        let next = incumbent.and_then(|i| {
            (space.neighbours(i).into_iter())
                .filter(|c| !evaluated[*c])
                .min_by(|a, b| predicted(*a).total_cmp(&predicted(*b)).then(a.cmp(b)))
        });
        if next.is_some() {
            return next;
        }
    }
    let incumbent = (points.iter())
        .map(|(x, _)| gp.predict(x).0)
        .fold(f64::MAX, f64::min);
    let normal = Normal::standard();
    let mut pick: Option<(usize, f64)> = None;
    for c in (0..space.len()).filter(|c| !evaluated[*c]) {
        let (mean, var) = gp.predict(&space.unit(c));
        let sd = var.max(1e-12).sqrt();
        let improvement = incumbent - mean - EI_XI;
        let z = improvement / sd;
        let ei = improvement * normal.cdf(z) + sd * normal.pdf(z);
        if pick.is_none_or(|(_, e)| ei > e) {
            pick = Some((c, ei));
        }
    }
    pick.map(|(c, _)| c)
}

/// The configurations measured and their log times. A failure is left out (it is never
/// proposed again): counted as slow, it condemned its neighbours, and a fast configuration
/// often sits beside one that fails (the tests' last landscape).
fn measured_log_times(history: &[Observed]) -> Vec<(usize, f64)> {
    (history.iter())
        .filter_map(|o| Some((o.config, o.time_s?.ln())))
        .collect()
}

/// Points in unit coordinates and their log times.
type Points = Vec<(Vec<f64>, f64)>;

/// The Gaussian process over the measured log times, and its points.
fn fit(space: &Space, measured: &[(usize, f64)]) -> Option<(Gp, Points)> {
    let points: Points = (measured.iter())
        .map(|(c, y)| (space.unit(*c), *y))
        .collect();
    Some((Gp::fit(&points)?, points))
}

/// The `top` configurations to re-measure for the decision, from a problem point's history:
/// the fastest measured first; then, for the model-based strategy, those of lowest posterior
/// mean (the model pools each measurement with its neighbours', so a few % of noise does not
/// push the best out of the top few), for the others the next fastest measured.
pub fn contenders(
    kind: StrategyKind,
    space: &Space,
    history: &[Observed],
    top: usize,
) -> Vec<usize> {
    let mut measured = measured_log_times(history);
    measured.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    let mut picked: Vec<usize> = measured.first().map(|m| m.0).into_iter().collect();
    let by_model = match kind {
        StrategyKind::Bayes => fit(space, &measured).map(|(gp, _)| {
            let mut ranked: Vec<(usize, f64)> = (measured.iter())
                .map(|(c, _)| (*c, gp.predict(&space.unit(*c)).0))
                .collect();
            ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            ranked.into_iter().map(|r| r.0).collect::<Vec<_>>()
        }),
        _ => None,
    };
    let order = by_model.unwrap_or_else(|| measured.iter().map(|m| m.0).collect());
    for c in order {
        if picked.len() >= top {
            break;
        }
        if !picked.contains(&c) {
            picked.push(c);
        }
    }
    picked.truncate(top);
    picked
}

/// Expected improvement's exploration margin, in standard deviations of the log times.
const EI_XI: f64 = 0.01;

#[cfg(test)]
mod tests {
    use super::*;

    /// A grid of 6 block sizes x 8 items per thread, as the example kernel's.
    fn grid(a: usize, b: usize) -> Space {
        let mut coords = Vec::new();
        for i in 0..a {
            for j in 0..b {
                coords.push(vec![i, j]);
            }
        }
        Space {
            coords,
            axis_sizes: vec![a, b],
        }
    }

    /// Runs a strategy to its budget on `f`, returning the configurations in the order
    /// evaluated.
    fn search(
        kind: StrategyKind,
        space: &Space,
        f: &dyn Fn(&[usize]) -> Option<f64>,
        budget: usize,
        seed: u64,
    ) -> Vec<Observed> {
        let mut history = Vec::new();
        while history.len() < budget {
            let want = budget - history.len();
            let next = propose(kind, space, &history, want, seed);
            if next.is_empty() {
                break;
            }
            for c in next {
                history.push(Observed {
                    config: c,
                    time_s: f(&space.coords[c]),
                });
            }
        }
        history
    }

    /// Landscapes with known optima over the 6 x 8 grid (block index 0..6, items index 0..8),
    /// shaped like real tuning landscapes; a configuration's true time, or None where it fails.
    type Landscape = Box<dyn Fn(&[usize]) -> Option<f64>>;

    fn landscapes() -> Vec<(&'static str, Landscape)> {
        vec![
            (
                "bowl, minimum off centre, the knobs interacting",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64 - 3.6, c[1] as f64 - 5.2);
                    Some(1e-3 * (1.0 + 0.08 * b * b + 0.03 * i * i + 0.03 * b * i))
                }),
            ),
            (
                "ridge: a narrow valley along a diagonal, slightly tilted",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64, c[1] as f64);
                    Some(2e-4 * (1.0 + 0.2 * (b + i - 6.0).powi(2) + 0.02 * (b - 1.0).powi(2)))
                }),
            ),
            (
                "plateau of near-ties (within 1.5%) among steep sides",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64, c[1] as f64);
                    let outside = (b - 3.0).abs().max(0.0) - 1.0;
                    let side =
                        0.25 * outside.max(0.0).powi(2) + 0.1 * (i - 4.5).abs().max(2.0) - 0.2;
                    let ripple = 0.015 * (((c[0] * 7 + c[1] * 3) % 5) as f64 / 4.0);
                    Some(5e-5 * (1.0 + side.max(0.0) + ripple))
                }),
            ),
            (
                "cliff: 3x slower past it, the minimum near it",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64, c[1] as f64);
                    let t = 1.0 + 0.06 * (b - 4.3).powi(2) + 0.02 * (i - 4.8).powi(2);
                    Some(1e-3 * if b + i > 10.0 { 3.0 * t } else { t })
                }),
            ),
            (
                "cliff, the minimum alone on its edge (the next best 4% slower)",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64, c[1] as f64);
                    let t = 1.0 + 0.06 * (b - 4.5).powi(2) + 0.02 * (i - 5.5).powi(2);
                    Some(1e-3 * if b + i > 9.0 { 3.0 * t } else { t })
                }),
            ),
            (
                "two basins, the deeper in a corner",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64, c[1] as f64);
                    let near = 1.0 + 0.05 * ((b - 1.0).powi(2) + (i - 2.0).powi(2));
                    let far = 0.93 + 0.05 * ((b - 5.0).powi(2) + (i - 7.0).powi(2));
                    Some(5e-5 * near.min(far))
                }),
            ),
            (
                "bowl with failing configurations (too many items at large blocks)",
                Box::new(|c: &[usize]| {
                    let (b, i) = (c[0] as f64, c[1] as f64);
                    (b + i <= 9.0)
                        .then(|| 1e-3 * (1.0 + 0.1 * (b - 3.0).powi(2) + 0.05 * (i - 5.0).powi(2)))
                }),
            ),
        ]
    }

    /// The landscape measured: each time multiplied by 1 + `noise` x a uniform draw in
    /// [-1, 1), fixed by the seed and the configuration.
    fn noisy(
        f: &dyn Fn(&[usize]) -> Option<f64>,
        c: &[usize],
        noise: f64,
        seed: u64,
    ) -> Option<f64> {
        let key = seed.wrapping_mul(1_000_003) ^ (c[0] as u64 * 131 + c[1] as u64);
        let u: f64 = ChaCha8Rng::seed_from_u64(key).random();
        f(c).map(|t| t * (1.0 + noise * (2.0 * u - 1.0)))
    }

    /// The measurement noise of seed `seed`: 1%, 2%, 3%, 4% and 5% in turn.
    fn noise_of(seed: u64) -> f64 {
        0.01 * (1 + seed % 5) as f64
    }

    fn optimum(space: &Space, f: &dyn Fn(&[usize]) -> Option<f64>) -> f64 {
        (space.coords.iter())
            .filter_map(|c| f(c))
            .fold(f64::MAX, f64::min)
    }

    /// The true time of the best of the configurations the tune would re-measure
    /// (`contenders`, its top 3): what its decision would find.
    fn best_of_contenders(
        kind: StrategyKind,
        space: &Space,
        f: &dyn Fn(&[usize]) -> Option<f64>,
        history: &[Observed],
    ) -> f64 {
        (contenders(kind, space, history, 3).into_iter())
            .filter_map(|c| f(&space.coords[c]))
            .fold(f64::MAX, f64::min)
    }

    /// Over 100 seeds (noise 1% to 5%), with 14 of the 48 configurations (30%): the share of
    /// seeds whose re-measured top 3 holds a configuration within 2% of the true optimum, per
    /// landscape.
    fn shares_within_2_percent(kind: StrategyKind) -> Vec<(&'static str, f64)> {
        let space = grid(6, 8);
        let budget = space.len() * 30 / 100;
        assert_eq!(budget, 14);
        landscapes()
            .into_iter()
            .map(|(name, f)| {
                let best = optimum(&space, f.as_ref());
                let within = (0..100u64)
                    .filter(|&seed| {
                        let measure = |c: &[usize]| noisy(f.as_ref(), c, noise_of(seed), seed);
                        let h = search(kind, &space, &measure, budget, seed);
                        best_of_contenders(kind, &space, f.as_ref(), &h) <= best * 1.02
                    })
                    .count();
                (name, within as f64 / 100.0)
            })
            .collect()
    }

    /// The model-based search finds a configuration within 2% of the best in at least 90% of
    /// the seeds on every landscape but one: where the optimum is alone on a cliff's edge (two
    /// of its four neighbours 3x slower, the rest 4% slower), a needle that no smooth model
    /// points to, it does so in at least 40% (random search: about 30%). Figures:
    /// `cargo test --lib strategy::tests -- --nocapture`.
    #[test]
    fn bayes_gets_within_2_percent_of_the_optimum_with_30_percent_of_the_evaluations() {
        let shares = shares_within_2_percent(StrategyKind::Bayes);
        for (name, share) in &shares {
            eprintln!(
                "bayes, 14 of 48 evaluations: {:.0}% of seeds within 2%: {name}",
                share * 100.0
            );
        }
        for (name, share) in shares {
            let bar = if name.contains("alone on its edge") {
                0.40
            } else {
                0.90
            };
            assert!(
                share >= bar,
                "{name}: {:.0}% of seeds within 2%",
                share * 100.0
            );
        }
    }

    /// The landscapes are not so easy that chance does as well: with the same budget, random
    /// search is within 2% in under 60% of the seeds on average over the landscapes (the
    /// model-based search: over 90%), and under 50% on most of them.
    #[test]
    fn random_search_does_worse_on_the_same_landscapes() {
        let random = shares_within_2_percent(StrategyKind::Random);
        for (name, share) in &random {
            eprintln!(
                "random, 14 of 48 evaluations: {:.0}% of seeds within 2%: {name}",
                share * 100.0
            );
        }
        let mean = random.iter().map(|x| x.1).sum::<f64>() / random.len() as f64;
        let below_half = random.iter().filter(|(_, s)| *s < 0.5).count();
        assert!(mean < 0.6 && 2 * below_half > random.len(), "{random:?}");
    }

    #[test]
    fn anneal_improves_on_its_start_and_never_repeats() {
        let space = grid(6, 8);
        for (name, f) in landscapes() {
            let h = search(StrategyKind::Anneal, &space, f.as_ref(), 20, 3);
            let mut seen: Vec<usize> = h.iter().map(|o| o.config).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(
                seen.len(),
                h.len(),
                "{name}: a configuration evaluated twice"
            );
            let first = h.iter().find_map(|o| o.time_s).unwrap();
            let best = (h.iter()).filter_map(|o| o.time_s).fold(f64::MAX, f64::min);
            assert!(best < first, "{name}: no improvement");
        }
    }

    #[test]
    fn random_never_repeats_and_covers_everything_when_asked() {
        let space = grid(5, 7);
        for seed in 0..5 {
            let h = search(StrategyKind::Random, &space, &|_| Some(1.0), 1000, seed);
            let mut seen: Vec<usize> = h.iter().map(|o| o.config).collect();
            assert_eq!(seen.len(), space.len());
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), space.len(), "seed {seed}: a repeat");
        }
        let a = search(StrategyKind::Random, &space, &|_| Some(1.0), 10, 1);
        let b = search(StrategyKind::Random, &space, &|_| Some(1.0), 10, 2);
        assert_ne!(a, b, "two seeds, the same order");
    }

    #[test]
    fn exhaustive_covers_all_in_order_and_model_strategies_never_repeat() {
        let space = grid(4, 3);
        let h = search(StrategyKind::Exhaustive, &space, &|_| Some(1.0), 1000, 0);
        let order: Vec<usize> = h.iter().map(|o| o.config).collect();
        assert_eq!(order, (0..12).collect::<Vec<_>>());
        for kind in [StrategyKind::Bayes, StrategyKind::Anneal] {
            let f = |c: &[usize]| Some(1.0 + c[0] as f64 * 0.1 + c[1] as f64 * 0.01);
            let h = search(kind, &space, &f, 1000, 0);
            let mut seen: Vec<usize> = h.iter().map(|o| o.config).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(
                seen.len(),
                12,
                "{}: covers all without repeats",
                kind.name()
            );
            assert_eq!(h.len(), 12);
        }
    }

    #[test]
    fn the_same_history_and_seed_give_the_same_proposal() {
        let space = grid(6, 8);
        let (_, f) = &landscapes()[0];
        let h = search(StrategyKind::Bayes, &space, f.as_ref(), 9, 7);
        for kind in [
            StrategyKind::Bayes,
            StrategyKind::Anneal,
            StrategyKind::Random,
        ] {
            let a = propose(kind, &space, &h, 1, 7);
            let b = propose(kind, &space, &h, 1, 7);
            assert_eq!(a, b, "{}", kind.name());
        }
    }
}
