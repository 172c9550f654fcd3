//! The Gaussian process behind the `bayes` strategy: a squared-exponential kernel with one
//! length scale per axis (on coordinates scaled to [0, 1]) and a noise term, over standardized
//! targets (the log times, so that a knob's effect is a ratio wherever it applies). The length
//! scales and the noise are fitted by maximising the marginal likelihood over small grids
//! (one isotropic scale first, then each axis's in turn): a tuning space is tens to hundreds of
//! points, so a grid search is fast and never fails to converge. Written here (about 150
//! lines) rather than taken from a crate: the ones that offer Gaussian processes (friedrich,
//! egobox-gp, linfa) bring ndarray or nalgebra and a continuous optimiser for a problem this
//! small.

/// The length scales tried (on axes scaled to [0, 1]).
const LENGTH_SCALES: [f64; 8] = [0.08, 0.12, 0.18, 0.25, 0.35, 0.5, 0.8, 1.5];
/// The noise variances tried, relative to the standardized targets' (1): measurement noise of a
/// few % against times that vary by tens of %.
const NOISE_VARIANCES: [f64; 5] = [1e-4, 1e-3, 1e-2, 3e-2, 1e-1];
/// Passes of the per-axis search after the isotropic one.
const ARD_PASSES: usize = 2;

/// A fitted Gaussian process.
pub struct Gp {
    xs: Vec<Vec<f64>>,
    /// K^-1 y, for the posterior mean.
    alpha: Vec<f64>,
    /// The Cholesky factor of K (lower, row-major).
    chol: Vec<f64>,
    /// One length scale per axis.
    pub lengths: Vec<f64>,
    /// The noise variance (standardized units).
    pub noise: f64,
    y_mean: f64,
    y_sd: f64,
}

/// Hyperparameters and their log marginal likelihood.
struct Fit {
    lengths: Vec<f64>,
    noise: f64,
    chol: Vec<f64>,
    alpha: Vec<f64>,
    likelihood: f64,
}

impl Gp {
    /// Fits the process to `points` (coordinates in [0, 1], target); None without points or
    /// if no kernel matrix factors.
    pub fn fit(points: &[(Vec<f64>, f64)]) -> Option<Gp> {
        let dims = points.first()?.0.len();
        let n = points.len() as f64;
        let y_mean = points.iter().map(|p| p.1).sum::<f64>() / n;
        let var = points.iter().map(|p| (p.1 - y_mean).powi(2)).sum::<f64>() / n;
        let y_sd = var.sqrt().max(1e-9);
        let ys: Vec<f64> = points.iter().map(|p| (p.1 - y_mean) / y_sd).collect();
        let xs: Vec<Vec<f64>> = points.iter().map(|p| p.0.clone()).collect();
        let try_fit = |lengths: &[f64], noise: f64| likelihood(&xs, &ys, lengths, noise);
        let better = |best: Option<Fit>, candidate: Option<Fit>| match (best, candidate) {
            (Some(b), Some(c)) if c.likelihood > b.likelihood => Some(c),
            (None, c) => c,
            (b, _) => b,
        };
        let mut best: Option<Fit> = None;
        for noise in NOISE_VARIANCES {
            for length in LENGTH_SCALES {
                best = better(best, try_fit(&vec![length; dims], noise));
            }
        }
        // One axis has nothing to tell apart: the isotropic scale is its own.
        let passes = if dims > 1 { ARD_PASSES } else { 0 };
        for _ in 0..passes {
            for d in 0..dims {
                let Some(current) = best.as_ref() else { break };
                let (mut lengths, noise) = (current.lengths.clone(), current.noise);
                for length in LENGTH_SCALES {
                    lengths[d] = length;
                    best = better(best, try_fit(&lengths, noise));
                }
            }
        }
        let fit = best?;
        Some(Gp {
            xs,
            alpha: fit.alpha,
            chol: fit.chol,
            lengths: fit.lengths,
            noise: fit.noise,
            y_mean,
            y_sd,
        })
    }

    /// A target in the standardized units of the predictions.
    pub fn standardize(&self, y: f64) -> f64 {
        (y - self.y_mean) / self.y_sd
    }

    /// A standardized prediction back in the targets' units.
    pub fn unstandardize(&self, z: f64) -> f64 {
        z * self.y_sd + self.y_mean
    }

    /// The posterior mean and variance of the noise-free function (standardized) at `x`.
    pub fn predict(&self, x: &[f64]) -> (f64, f64) {
        let k: Vec<f64> = (self.xs.iter())
            .map(|xi| rbf(xi, x, &self.lengths))
            .collect();
        let mean = k.iter().zip(&self.alpha).map(|(a, b)| a * b).sum();
        let v = forward_solve(&self.chol, self.xs.len(), &k);
        let var = 1.0 - v.iter().map(|a| a * a).sum::<f64>();
        (mean, var.max(0.0))
    }
}

/// The log marginal likelihood of standardized `ys` under these hyperparameters, with what
/// predictions need; None where the kernel matrix does not factor.
fn likelihood(xs: &[Vec<f64>], ys: &[f64], lengths: &[f64], noise: f64) -> Option<Fit> {
    let n = xs.len();
    let mut k = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            k[i * n + j] = rbf(&xs[i], &xs[j], lengths) + if i == j { noise } else { 0.0 };
        }
    }
    let chol = cholesky(&k, n)?;
    let alpha = cholesky_solve(&chol, n, ys);
    let fit: f64 = ys.iter().zip(&alpha).map(|(y, a)| y * a).sum();
    let log_det: f64 = (0..n).map(|i| chol[i * n + i].ln()).sum();
    Some(Fit {
        lengths: lengths.to_vec(),
        noise,
        chol,
        alpha,
        likelihood: -0.5 * fit - log_det,
    })
}

fn rbf(a: &[f64], b: &[f64], lengths: &[f64]) -> f64 {
    let d2: f64 = (a.iter().zip(b).zip(lengths))
        .map(|((x, y), l)| ((x - y) / l).powi(2))
        .sum();
    (-0.5 * d2).exp()
}

/// The lower Cholesky factor of the n x n matrix `a`; None if it is not positive definite.
fn cholesky(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let mut l = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..=i {
            let sum: f64 = (0..j).map(|k| l[i * n + k] * l[j * n + k]).sum();
            if i == j {
                let d = a[i * n + i] - sum;
                if d <= 0.0 || !d.is_finite() {
                    return None;
                }
                l[i * n + i] = d.sqrt();
            } else {
                l[i * n + j] = (a[i * n + j] - sum) / l[j * n + j];
            }
        }
    }
    Some(l)
}

/// Solves L v = b.
fn forward_solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let mut v = vec![0.0; n];
    for i in 0..n {
        let sum: f64 = (0..i).map(|k| l[i * n + k] * v[k]).sum();
        v[i] = (b[i] - sum) / l[i * n + i];
    }
    v
}

/// Solves (L L^T) x = b.
fn cholesky_solve(l: &[f64], n: usize, b: &[f64]) -> Vec<f64> {
    let v = forward_solve(l, n, b);
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let sum: f64 = (i + 1..n).map(|k| l[k * n + i] * x[k]).sum();
        x[i] = (v[i] - sum) / l[i * n + i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_interpolates_what_it_saw_and_forgets_far_away() {
        let points: Vec<(Vec<f64>, f64)> = (0..6)
            .map(|i| (vec![i as f64 / 5.0], (i as f64 / 5.0 * 3.0).sin()))
            .collect();
        let gp = Gp::fit(&points).unwrap();
        for (x, y) in &points {
            let (mean, var) = gp.predict(x);
            let got = gp.unstandardize(mean);
            assert!((got - y).abs() < 0.05, "at {x:?}: {got} vs {y}");
            assert!(var < 0.05);
        }
        let (_, far) = gp.predict(&[6.0]);
        assert!(
            far > 0.9,
            "far from the data the variance returns to the prior: {far}"
        );
    }

    /// A function of the first axis alone: the fitted length scale of the second axis is
    /// longer than the first's (it learns which knob matters).
    #[test]
    fn the_length_scales_learn_which_axis_matters() {
        let mut points = Vec::new();
        for i in 0..5 {
            for j in 0..5 {
                let (x, y) = (i as f64 / 4.0, j as f64 / 4.0);
                points.push((vec![x, y], (4.0 * x).sin()));
            }
        }
        let gp = Gp::fit(&points).unwrap();
        assert!(gp.lengths[1] > 2.0 * gp.lengths[0], "{:?}", gp.lengths);
    }

    /// Noisy observations of a constant: the fitted noise is large, the mean smooth.
    #[test]
    fn noise_is_fitted_rather_than_interpolated() {
        let noise = [0.3, -0.2, 0.25, -0.3, 0.1, -0.15, 0.2, -0.25];
        let points: Vec<(Vec<f64>, f64)> = (noise.iter().enumerate())
            .map(|(i, e)| (vec![i as f64 / 7.0], 1.0 + e))
            .collect();
        let gp = Gp::fit(&points).unwrap();
        assert!(gp.noise >= 1e-2, "noise {}", gp.noise);
    }
}
