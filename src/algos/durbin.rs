//! Durbin-Levinson recursion (seed 000): the Yule-Walker solve PolyBench calls `durbin`, in the
//! seed's PolyBench 3.2 form and in PolyBench 4.2's Levinson-Durbin form; one input vector `r`,
//! the vector `y` out.
//!
//! Form `pb42` solves T y = -r, T the symmetric Toeplitz matrix with first column
//! [1, r[0], ..., r[n-2]]. Form `pb32` is the seed's code (beta[k] = beta[k-1] - alpha^2 beta[k-1],
//! alpha = -sum * beta), which multiplies where Levinson divides: it solves no linear system, and
//! only small r keep it bounded.
//!
//! Inputs (axis `init`): `random` (default) derives r from seeded random reflection coefficients
//! kappa_k = +-u * 0.1 / sqrt(k + 1), u uniform in [0.5, 1): any |kappa| < 1 makes T positive
//! definite, the 1/sqrt(k) decay keeps it well conditioned up to n = 15000 (and the pb32 form
//! bounded), and unlike a geometric r it keeps every part of y significant (the median |y| over
//! the last tenth stays above 5e-4 at n = 15000), so a mistake anywhere in y shows. `geometric` is peers.py's r[k] = 0.9^(k+1), whose pb42 solution is
//! [-0.9, 0, ..., 0]. `polybench` is each form's own PolyBench initialisation (see `Init`).
//! f32 cases round the f64 inputs; the reference is computed from the rounded values.
//!
//! The reference: the recursion in float64 with compensated dot products.

use std::sync::LazyLock;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Deserialize;

use super::{
    u32_size, Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice,
    OutputSpec, Spec,
};
use crate::device::{Arg, DeviceBuf, Dims, Gpu, Kernel, KernelFile, Launcher};
use crate::numerics::{compensated_sum, Real};
use crate::record::step_latency;
use crate::vocab::{DType, HostData, Tolerance};
use crate::{choice, with_float_dtype};

#[derive(Debug)]
pub struct Durbin;

static AXES: &[AxisDef] = &[
    AxisDef::size("n", "order of the system (length of r and y)"),
    AxisDef::dtype(&DType::FLOATS, "f64"),
    AxisDef::BLOCK,
    AxisDef::choice(
        "form",
        Form::NAMES,
        "pb42",
        "pb42: PolyBench 4.2's Levinson-Durbin; pb32: the seed's PolyBench 3.2 code",
    ),
    AxisDef::choice(
        "init",
        Init::NAMES,
        "random",
        "r: random (well conditioned), geometric (0.9^(k+1)), polybench (the form's own)",
    ),
];

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "durbin",
    title: "Durbin-Levinson recursion (Toeplitz / Yule-Walker solve)",
    axes: AXES,
    kernel_file: KernelFile::embedded("durbin.cu", include_str!("../../kernels/durbin.cu")),
    test_grid:
        "n = [0, 1, 2, 7, 999, 4_597]\ndtype = [\"f32\", \"f64\"]\nform = [\"pb42\", \"pb32\"]",
    gpu_test_grid: "n = [1, 2, 33, 999, 1000, 4097]\ndtype = [\"f32\", \"f64\"]\n\
                    block = [32, 256, 1024]\nform = [\"pb42\", \"pb32\"]",
    ..Spec::implementing(Durbin::CPU, Durbin::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    pub n: usize,
    pub dtype: DType,
    /// CUDA variants only.
    pub block: Option<u32>,
    pub form: Form,
    pub init: Init,
}

/// Scale of the random reflection coefficients: at 0.2 the pb32 form overflows for some seeds by
/// n = 15000; at 0.1 it stays below 0.2 for every seed tried.
const KAPPA_SCALE: f64 = 0.1;
/// peers.py's input: r[k] = RHO^(k+1).
const RHO: f64 = 0.9;
/// `threads` runs a step serially below this k: a fork-join costs a few microseconds, as much as
/// a serial pass over a few thousand elements.
const PAR_MIN_K: usize = 2 * THREAD_CHUNK_MIN;
/// Fewest elements per rayon task.
const THREAD_CHUNK_MIN: usize = 2048;

choice! {
    /// Which PolyBench version's recursion runs.
    pub enum Form {
        /// PolyBench 4.2: alpha_0 = -r[0], beta_k = (1 - alpha^2) beta, alpha_k = -(r[k] + sum) / beta.
        Pb42 = "pb42",
        /// PolyBench 3.2, the seed's: alpha_0 = r[0], beta_k = beta - alpha^2 beta,
        /// alpha_k = -(r[k] + sum) * beta.
        Pb32 = "pb32",
    }
}

choice! {
    /// How r is generated.
    pub enum Init {
        /// From seeded random reflection coefficients (the module header says why).
        Random = "random",
        /// r[k] = 0.9^(k+1), peers.py's input.
        Geometric = "geometric",
        /// pb32: PolyBench 3.2's r[i] = (i+1)/n/4, read in real arithmetic (in C, `(i+1)/n` is an
        /// integer division that zeroes every r but the last, a degenerate input); the pb32 recursion
        /// then grows past 1e6 by n = 100 and overflows float64 near n = 1500. pb42: PolyBench 4.2's
        /// r[i] = n + 1 - i, for which T is indefinite. Neither keeps accuracy claims meaningful.
        Polybench = "polybench",
    }
}

impl Form {
    /// The kernels' `form` argument.
    fn code(self) -> i32 {
        match self {
            Form::Pb42 => 0,
            Form::Pb32 => 1,
        }
    }

    fn first_alpha<T: Real>(self, r0: T) -> T {
        match self {
            Form::Pb42 => -r0,
            Form::Pb32 => r0,
        }
    }

    /// beta_k from alpha_{k-1} and beta_{k-1}, as each PolyBench version writes it.
    fn next_beta<T: Real>(self, alpha: T, beta: T) -> T {
        match self {
            Form::Pb42 => (T::ONE - alpha * alpha) * beta,
            Form::Pb32 => beta - alpha * alpha * beta,
        }
    }

    /// alpha_k from r[k] + dot_k and beta_k.
    fn next_alpha<T: Real>(self, r_plus_dot: T, beta: T) -> T {
        match self {
            Form::Pb42 => -r_plus_dot / beta,
            Form::Pb32 => -r_plus_dot * beta,
        }
    }
}

impl Init {
    /// About the largest |y| these inputs give: 0.06 to 0.1 for `random` (measured over seeds,
    /// n <= 15000), 0.9 for `geometric`, and no bound for `polybench`. The tolerance's absolute
    /// part is its relative part times this, a normwise bound.
    fn y_scale(self) -> f64 {
        match self {
            Init::Random => 0.1,
            Init::Geometric | Init::Polybench => 1.0,
        }
    }

    /// r for `n` and `form`; the random init's r for a smaller n is a prefix of a larger one's.
    pub fn generate(self, n: usize, form: Form, seed: u64) -> Vec<f64> {
        match (self, form) {
            (Init::Random, _) => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xD0B1_0000);
                let kappa: Vec<f64> = (0..n)
                    .map(|k| {
                        let sign = if rng.random::<bool>() { 1.0 } else { -1.0 };
                        sign * rng.random_range(0.5..1.0) * KAPPA_SCALE / ((k + 1) as f64).sqrt()
                    })
                    .collect();
                r_from_reflections(&kappa)
            }
            (Init::Geometric, _) => (1..=n).map(|k| RHO.powi(k as i32)).collect(),
            (Init::Polybench, Form::Pb32) => {
                (0..n).map(|i| (i + 1) as f64 / n as f64 / 4.0).collect()
            }
            (Init::Polybench, Form::Pb42) => (0..n).map(|i| (n + 1 - i) as f64).collect(),
        }
    }
}

/// The r whose Levinson-Durbin recursion has reflection coefficients `kappa`
/// (alpha_k = kappa_k): the recursion run backwards, r[k] chosen so that
/// -(r[k] + dot_k) / beta_k = kappa_k.
pub fn r_from_reflections(kappa: &[f64]) -> Vec<f64> {
    let n = kappa.len();
    let mut r = vec![0.0; n];
    let mut y = vec![0.0; n];
    let mut z = vec![0.0; n];
    if n == 0 {
        return r;
    }
    r[0] = -kappa[0];
    y[0] = kappa[0];
    let mut beta = 1.0;
    for k in 1..n {
        beta *= 1.0 - kappa[k - 1] * kappa[k - 1];
        let dot: f64 = r[..k].iter().rev().zip(&y[..k]).map(|(a, b)| a * b).sum();
        r[k] = -kappa[k] * beta - dot;
        for i in 0..k {
            z[i] = y[i] + kappa[k] * y[k - 1 - i];
        }
        y[..k].copy_from_slice(&z[..k]);
        y[k] = kappa[k];
    }
    r
}

/// The float64 reference: the recursion with compensated dot products, written as PolyBench 4.2
/// writes it (a temporary z, the sum started at zero).
pub fn reference(form: Form, r: &[f64]) -> Vec<f64> {
    let n = r.len();
    let mut y = vec![0.0; n];
    let mut z = vec![0.0; n];
    if n == 0 {
        return y;
    }
    let mut alpha = form.first_alpha(r[0]);
    let mut beta = 1.0;
    y[0] = alpha;
    for k in 1..n {
        beta = form.next_beta(alpha, beta);
        let sum = compensated_sum((0..k).map(|i| r[k - i - 1] * y[i]));
        alpha = form.next_alpha(r[k] + sum, beta);
        for i in 0..k {
            z[i] = y[i] + alpha * y[k - i - 1];
        }
        y[..k].copy_from_slice(&z[..k]);
        y[k] = alpha;
    }
    y
}

impl Algorithm for Durbin {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[
        // `sequential` keeps two n x n matrices, as PolyBench does.
        CpuImpl::new("sequential", |p| cpu(p, CpuVersion::Sequential)).scratch_bytes(|p| {
            let n = p.n as u64;
            n.checked_mul(n)?.checked_mul(2 * p.dtype.size_bytes())
        }),
        CpuImpl::new("reworked", |p| cpu(p, CpuVersion::Reworked)),
        CpuImpl::new("threads", |p| cpu(p, CpuVersion::Threads)),
    ];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("durbin_atomic", |p, on| {
            let (shape, r, y) = on_device(p, &on)?;
            let update = on.gpu.kernel(&format!("durbin_atomic_update_{}", p.dtype.name()))?;
            let atomic = Atomic::new(on.gpu, shape, on.function(p.dtype)?, update, r, y)?;
            Ok(Box::new(atomic))
        }),
        KernelImpl::new("durbin_twopass", |p, on| {
            let (shape, r, y) = on_device(p, &on)?;
            Ok(Box::new(Steps::new(on.gpu, shape, on.function(p.dtype)?, r, y)?))
        }),
        KernelImpl::new("durbin_graph", |p, on| {
            let (shape, r, y) = on_device(p, &on)?;
            let steps = Steps::new(on.gpu, shape, on.function(p.dtype)?, r, y)?;
            // The step launches captured once, replayed in every run, so kernel-scope samples
            // time the replay alone (in program scope each sample captures anew).
            on.gpu.replay(Box::new(steps)).map_err(|(_, e)| e)
        }),
        KernelImpl::new("durbin_persistent", |p, on| {
            let (shape, r, y) = on_device(p, &on)?;
            let persistent = Persistent::new(on.gpu, shape, on.function(p.dtype)?, r, y)?;
            Ok(Box::new(persistent))
        }),
        KernelImpl::new("durbin_schur", |p, on| {
            let (shape, r, y) = on_device(p, &on)?;
            let slots = schur_slots(p).context("durbin_schur does not fit this n and block")?;
            let kernel = on.gpu.kernel(&format!(
                "durbin_schur_{}_j{slots}",
                p.dtype.name()
            ))?;
            Ok(Box::new(Schur {
                gpu: on.gpu,
                shape,
                kernel,
                r,
                out: y,
            }))
        })
        .supports(|p| p.form == Form::Pb42 && schur_slots(p).is_some()),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// r and y in the case's dtype, the kernels' second row of y, and the float64 reference.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        let n = p.n as u64;
        n.checked_mul(3 * p.dtype.size_bytes() + 8)?.checked_add(64)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let r = p.init.generate(p.n, p.form, seed);
        let (input, reference) = match p.dtype {
            DType::F32 => {
                let r32: Vec<f32> = r.iter().map(|&x| x as f32).collect();
                let widened: Vec<f64> = r32.iter().map(|&x| x as f64).collect();
                (HostData::F32(r32), reference(p.form, &widened))
            }
            DType::F64 => {
                let reference = reference(p.form, &r);
                (HostData::F64(r), reference)
            }
            other => anyhow::bail!("durbin runs in f32 or f64, not {other}"),
        };
        let n = p.n as u64;
        Ok(CaseData {
            inputs: Buffers(vec![("r", input)]),
            outputs: vec![OutputSpec::new("y", p.dtype, reference, tolerance(p))],
            // r read once, y written once: the whole recursion fits on chip.
            bytes_read: n
                .checked_mul(p.dtype.size_bytes())
                .context("the byte count overflows")?,
            bytes_written: n * p.dtype.size_bytes(),
            // Step k: a k-term dot product and k updates, 2 flops each.
            flops: n
                .checked_mul(n.saturating_sub(1))
                .and_then(|f| f.checked_mul(2))
                .context("the flop count overflows")?,
            elements: 0,
            facts: Vec::new(),
        })
    }
}

fn cpu(p: &Params, version: CpuVersion) -> Result<CpuRun> {
    let form = p.form;
    with_float_dtype!(p.dtype, |T| Ok(cpu_run::<T>(version, form)))
}

/// Every kernel's shape, and the case's r and y on the device.
fn on_device<'a>(p: &Params, on: &OnDevice<'a>) -> Result<(Shape, &'a DeviceBuf, &'a DeviceBuf)> {
    let shape = Shape {
        n: u32_size(p.n, "durbin")?,
        block: p.block.context("durbin's kernels need a block size")?,
        form: p.form.code(),
        dtype: p.dtype,
    };
    Ok((shape, on.io.input("r")?, on.io.output("y")?))
}

/// Each alpha_k comes from a k-term dot product whose rounding error grows like sqrt(k) eps
/// (a random walk), and on the `random` and `geometric` inputs the recursion does not amplify
/// it: over 6 seeds at n = 100 .. 15000, both forms, the CPU versions' largest error against
/// the float64 reference stayed below 0.6 sqrt(n) eps max|y| in f32 (0.2 in f64). The
/// tolerance is 4 sqrt(n) eps (at least 16 eps) relative, plus that times the init's y scale
/// absolute, so that elements near zero are held to what rounding does to the largest ones
/// (a normwise bound, 7x above the worst seen). `polybench` inputs are unstable (pb32
/// overflows, pb42's matrix is indefinite) and fail it at large n, as they should.
fn tolerance(p: &Params) -> Tolerance {
    let eps = p.dtype.epsilon().unwrap_or(f64::EPSILON);
    let rel = (4.0 * (p.n.max(1) as f64).sqrt()).max(16.0) * eps;
    Tolerance {
        rel,
        abs: rel * p.init.y_scale(),
    }
}

/// The seed's three CPU versions.
#[derive(Debug, Clone, Copy)]
enum CpuVersion {
    Sequential,
    Reworked,
    Threads,
}

/// A CPU version for one dtype; `sequential` keeps its n x n matrices between runs, as
/// PolyBench allocates its arrays once, outside the timed kernel.
fn cpu_run<T: Real>(version: CpuVersion, form: Form) -> CpuRun {
    let mut matrices: (Vec<T>, Vec<T>) = (Vec::new(), Vec::new());
    Box::new(move |inputs, outputs| {
        let r = inputs.get::<T>("r")?;
        let y = outputs.get_mut::<T>("y")?;
        match version {
            CpuVersion::Sequential => sequential(form, r, y, &mut matrices)?,
            CpuVersion::Reworked => reworked(form, r, y),
            CpuVersion::Threads => threads(form, r, y),
        }
        Ok(())
    })
}

/// The seed's "Sequential": PolyBench 3.2's code with its n x n `sum` and `y` matrices (row-major,
/// walked down columns as the C code does), in either form, kept in `matrices` between runs. Two
/// n x n matrices of f64 at n = 15000 are 3.6 GB: the case's footprint counts them, so a size
/// that does not fit is refused before the case runs.
pub fn sequential<T: Real>(
    form: Form,
    r: &[T],
    out: &mut [T],
    matrices: &mut (Vec<T>, Vec<T>),
) -> Result<()> {
    let n = r.len();
    if n == 0 {
        return Ok(());
    }
    let cells = n
        .checked_mul(n)
        .with_context(|| format!("sequential: n x n overflows for n = {n}"))?;
    // Whether the matrices fit in memory was checked before the case ran (`footprint_bytes`).
    // Every cell the recursion reads it has written first in the same run, so a second run needs
    // no clearing.
    let (y, sum) = matrices;
    y.resize(cells, T::ZERO);
    sum.resize(cells, T::ZERO);
    let mut alpha = vec![T::ZERO; n];
    let mut beta = vec![T::ZERO; n];
    let at = |i: usize, k: usize| i * n + k;

    y[at(0, 0)] = form.first_alpha(r[0]);
    beta[0] = T::ONE;
    alpha[0] = y[at(0, 0)];
    for k in 1..n {
        beta[k] = form.next_beta(alpha[k - 1], beta[k - 1]);
        sum[at(0, k)] = r[k];
        for i in 0..k {
            sum[at(i + 1, k)] = sum[at(i, k)] + r[k - i - 1] * y[at(i, k - 1)];
        }
        alpha[k] = form.next_alpha(sum[at(k, k)], beta[k]);
        for i in 0..k {
            y[at(i, k)] = y[at(i, k - 1)] + alpha[k] * y[at(k - i - 1, k - 1)];
        }
        y[at(k, k)] = alpha[k];
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = y[at(i, n - 1)];
    }
    Ok(())
}

/// The seed's "Reworked sequential": two rows of y instead of the matrix, scalars for alpha,
/// beta and the sum (started at r[k], as the seed's sum[0][k]).
pub fn reworked<T: Real>(form: Form, r: &[T], out: &mut [T]) {
    let n = r.len();
    if n == 0 {
        return;
    }
    let mut y_old = vec![T::ZERO; n];
    let mut y_new = vec![T::ZERO; n];
    let mut alpha = form.first_alpha(r[0]);
    let mut beta = T::ONE;
    y_old[0] = alpha;
    for k in 1..n {
        beta = form.next_beta(alpha, beta);
        // r[k-1-i] for i = 0 .. k-1 is r[..k] reversed.
        let sum = r[..k]
            .iter()
            .rev()
            .zip(&y_old[..k])
            .fold(r[k], |s, (&a, &b)| s + a * b);
        alpha = form.next_alpha(sum, beta);
        let old = &y_old[..k];
        for ((new, &front), &back) in y_new[..k].iter_mut().zip(old).zip(old.iter().rev()) {
            *new = front + alpha * back;
        }
        y_new[k] = alpha;
        std::mem::swap(&mut y_old, &mut y_new);
    }
    out.copy_from_slice(&y_old[..n]);
}

/// The seed's OpenMP version, with rayon: each step updates y in parallel chunks, and each chunk
/// also returns its share of the next step's dot product (the products of the elements it just
/// wrote), so a step is one fork-join. The chunks' sums are added in chunk order, so the result
/// does not depend on scheduling. Steps with k < `PAR_MIN_K` run serially.
pub fn threads<T: Real>(form: Form, r: &[T], out: &mut [T]) {
    if r.len() <= PAR_MIN_K {
        // Every step is serial: entering the pool would only add its latency.
        return threads_in_pool(form, r, out);
    }
    // The loop runs on a pool thread: a fork-join from outside the pool wakes the workers from
    // sleep every step (measured 3x slower than one thread at n = 10000), while between the
    // steps of a loop inside the pool they are still looking for work.
    rayon::scope(|_| threads_in_pool(form, r, out));
}

fn threads_in_pool<T: Real>(form: Form, r: &[T], out: &mut [T]) {
    let n = r.len();
    if n == 0 {
        return;
    }
    let mut y_old = vec![T::ZERO; n];
    let mut y_new = vec![T::ZERO; n];
    let mut alpha = form.first_alpha(r[0]);
    let mut beta = T::ONE;
    y_old[0] = alpha;
    let mut dot = r[0] * alpha;
    let workers = rayon::current_num_threads().max(1);
    for k in 1..n {
        beta = form.next_beta(alpha, beta);
        alpha = form.next_alpha(r[k] + dot, beta);
        let old = &y_old[..k];
        let partial = if k < PAR_MIN_K {
            update_and_dot(0, &mut y_new[..k], old, r, alpha)
        } else {
            let chunk = k.div_ceil(workers).max(THREAD_CHUNK_MIN);
            let parts: Vec<T> = y_new[..k]
                .par_chunks_mut(chunk)
                .enumerate()
                .map(|(c, ys)| update_and_dot(c * chunk, ys, old, r, alpha))
                .collect();
            parts.into_iter().fold(T::ZERO, |a, b| a + b)
        };
        y_new[k] = alpha;
        dot = partial + r[0] * alpha;
        std::mem::swap(&mut y_old, &mut y_new);
    }
    out.copy_from_slice(&y_old[..n]);
}

/// Writes y_new[i] = old[i] + alpha * old[k-1-i] for i = lo .. lo + ys.len() (k = old.len()) and
/// returns the sum of r[k-i] * y_new[i] over the same i: its share of the next step's dot product.
fn update_and_dot<T: Real>(lo: usize, ys: &mut [T], old: &[T], r: &[T], alpha: T) -> T {
    let k = old.len();
    let hi = lo + ys.len();
    let front = &old[lo..hi];
    // old[k-1-i] and r[k-i] for i = lo .. hi, read backwards.
    let back = old[k - hi..k - lo].iter().rev();
    let coefficients = r[k - hi + 1..=k - lo].iter().rev();
    let mut acc = T::ZERO;
    for (((y, &f), &b), &c) in ys.iter_mut().zip(front).zip(back).zip(coefficients) {
        *y = f + alpha * b;
        acc = acc + c * *y;
    }
    acc
}

// ---- The CUDA launchers: each kernel in `kernels/durbin.cu` is launched from one place here.
// `durbin_twopass` and `durbin_graph` are one kernel body under two names, with one launcher.

/// Two slots of (sum, alpha, beta, unused) for the atomic variant, of (alpha, beta) for the
/// one-launch-per-step variants.
const STATE_LEN: usize = 8;

/// What every launch of a case shares.
#[derive(Debug, Clone, Copy)]
struct Shape {
    n: u32,
    block: u32,
    /// The kernels' `form` argument.
    form: i32,
    dtype: DType,
}

impl Shape {
    /// Enough blocks of `block` threads for `elements`.
    fn blocks(&self, elements: u32) -> u32 {
        elements.div_ceil(self.block).max(1)
    }

    /// The rows step k reads and writes: the output for the last step, alternating before it.
    fn rows(&self, k: u32, out: Arg, row: Arg) -> (Arg, Arg) {
        if (self.n - 1 - k).is_multiple_of(2) {
            (row, out)
        } else {
            (out, row)
        }
    }
}

/// `durbin_atomic`: the seed's two kernels per step (2n - 1 launches).
struct Atomic<'a> {
    shape: Shape,
    dot: Kernel,
    update: Kernel,
    r: &'a DeviceBuf,
    out: &'a DeviceBuf,
    row: DeviceBuf,
    state: DeviceBuf,
}

impl<'a> Atomic<'a> {
    fn new(
        gpu: Gpu<'a>,
        shape: Shape,
        dot: Kernel,
        update: Kernel,
        r: &'a DeviceBuf,
        out: &'a DeviceBuf,
    ) -> Result<Self> {
        Ok(Atomic {
            row: gpu.alloc(shape.dtype, shape.n as usize)?,
            state: gpu.alloc(shape.dtype, STATE_LEN)?,
            shape,
            dot,
            update,
            r,
            out,
        })
    }
}

impl Launcher for Atomic<'_> {
    fn launch(&mut self) -> Result<()> {
        let s = self.shape;
        let elem = s.dtype.size_bytes() as u32;
        for k in 0..s.n {
            let (y_old, y_new) = s.rows(k, self.out.arg(), self.row.arg());
            if k > 0 {
                // SAFETY: signature (const T* r, const T* y_old, T* state, unsigned int k), T the
                // dtype of every buffer. r and y_old hold n > k elements, state STATE_LEN; the
                // dynamic shared memory is the blockDim elements the kernel's tree indexes.
                unsafe {
                    self.dot.launch(
                        Dims::linear(s.blocks(k), s.block, s.block * elem),
                        &[self.r.arg(), y_old, self.state.arg(), Arg::U32(k)],
                    )?
                };
            }
            // SAFETY: signature (const T* r, const T* y_old, T* y_new, T* state, unsigned int k,
            // int form). r, y_old and y_new hold n > k elements, y_old and y_new are distinct
            // allocations, state holds STATE_LEN elements.
            unsafe {
                self.update.launch(
                    Dims::linear(s.blocks(k + 1), s.block, 0),
                    &[
                        self.r.arg(),
                        y_old,
                        y_new,
                        self.state.arg(),
                        Arg::U32(k),
                        Arg::I32(s.form),
                    ],
                )?
            };
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        (2 * self.shape.n as usize).saturating_sub(1)
    }
}

/// `durbin_twopass` (and the body of `durbin_graph`): one launch per step, no atomics.
struct Steps<'a> {
    shape: Shape,
    kernel: Kernel,
    r: &'a DeviceBuf,
    out: &'a DeviceBuf,
    row: DeviceBuf,
    parts: [DeviceBuf; 2],
    state: DeviceBuf,
}

impl<'a> Steps<'a> {
    fn new(
        gpu: Gpu<'a>,
        shape: Shape,
        kernel: Kernel,
        r: &'a DeviceBuf,
        out: &'a DeviceBuf,
    ) -> Result<Self> {
        let parts = shape.n.div_ceil(shape.block) as usize;
        Ok(Steps {
            row: gpu.alloc(shape.dtype, shape.n as usize)?,
            parts: [
                gpu.alloc(shape.dtype, parts)?,
                gpu.alloc(shape.dtype, parts)?,
            ],
            state: gpu.alloc(shape.dtype, STATE_LEN)?,
            shape,
            kernel,
            r,
            out,
        })
    }
}

impl Launcher for Steps<'_> {
    fn launch(&mut self) -> Result<()> {
        let s = self.shape;
        for k in 0..s.n {
            let (y_old, y_new) = s.rows(k, self.out.arg(), self.row.arg());
            // Step k writes the partials step k+1 reads.
            let (parts_in, parts_out) = if k.is_multiple_of(2) {
                (self.parts[0].arg(), self.parts[1].arg())
            } else {
                (self.parts[1].arg(), self.parts[0].arg())
            };
            // SAFETY: signature (const T* r, const T* y_old, T* y_new, const T* parts_in,
            // T* parts_out, T* state, unsigned int k, int form). r, y_old and y_new hold n > k
            // elements; parts_in and parts_out hold ceil(n / blockDim) >= the grid of this launch
            // and of the previous one; state holds STATE_LEN; the pairs (y_old, y_new) and
            // (parts_in, parts_out) are distinct allocations.
            unsafe {
                self.kernel.launch(
                    Dims::linear(s.blocks(k + 1), s.block, 0),
                    &[
                        self.r.arg(),
                        y_old,
                        y_new,
                        parts_in,
                        parts_out,
                        self.state.arg(),
                        Arg::U32(k),
                        Arg::I32(s.form),
                    ],
                )?
            };
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        self.shape.n as usize
    }
}

/// `durbin_persistent`: one launch of one block; where y and r live is worked out when the
/// launcher is made.
struct Persistent<'a> {
    shape: Shape,
    kernel: Kernel,
    /// 2: y and r in shared memory; 1: y alone; 0: y updated in place in global memory.
    mode: i32,
    dynamic_bytes: u32,
    r: &'a DeviceBuf,
    out: &'a DeviceBuf,
}

impl<'a> Persistent<'a> {
    fn new(
        gpu: Gpu<'a>,
        shape: Shape,
        kernel: Kernel,
        r: &'a DeviceBuf,
        out: &'a DeviceBuf,
    ) -> Result<Self> {
        let available =
            (gpu.shared_optin_bytes() as u64).saturating_sub(kernel.static_shared_bytes()? as u64);
        let row_bytes = shape.n as u64 * shape.dtype.size_bytes();
        let (mode, dynamic_bytes) = if 2 * row_bytes <= available {
            (2, 2 * row_bytes)
        } else if row_bytes <= available {
            (1, row_bytes)
        } else {
            (0, 0)
        };
        let dynamic_bytes = u32::try_from(dynamic_bytes)?;
        kernel.allow_dynamic_shared(dynamic_bytes)?;
        Ok(Persistent {
            shape,
            kernel,
            mode,
            dynamic_bytes,
            r,
            out,
        })
    }
}

impl Launcher for Persistent<'_> {
    fn launch(&mut self) -> Result<()> {
        if self.shape.n == 0 {
            return Ok(()); // an empty y: nothing to compute or write
        }
        // SAFETY: signature (const T* r, T* out, unsigned int n, int form, int mode). r and out
        // hold n elements and are distinct allocations; the dynamic shared memory is what `mode`
        // needs (2 n, n or 0 elements), and the kernel's limit was raised to it in `new`.
        unsafe {
            self.kernel.launch(
                Dims::linear(1, self.shape.block, self.dynamic_bytes),
                &[
                    self.r.arg(),
                    self.out.arg(),
                    Arg::U32(self.shape.n),
                    Arg::I32(self.shape.form),
                    Arg::I32(self.mode),
                ],
            )
        }
    }
}

/// `durbin_schur`'s instantiations: (slots a thread, largest block in float32, in float64), as
/// `kernels/durbin.cu` declares them. The blocks are the largest at which ptxas fits the 2 J
/// values a thread in registers without spilling (sm_90; 0: no instantiation; the
/// kernels_compile test checks the file against this table).
pub const SCHUR_SLOTS: &[(u32, u32, u32)] = &[
    (1, 1024, 1024),
    (2, 1024, 1024),
    (4, 1024, 1024),
    (8, 1024, 1024),
    (10, 1024, 512),
    (12, 1024, 512),
    (16, 1024, 512),
    (20, 512, 256),
    (24, 512, 256),
    (32, 512, 256),
    (40, 256, 256),
    (48, 256, 0),
];

/// The slots a thread of `durbin_schur` holds for this case: the fewest of `SCHUR_SLOTS` whose
/// block holds the n + 2 slots, None where none does (n + 2 > 40 x 256 in float64) or where the
/// block is not whole warps.
pub fn schur_slots(p: &Params) -> Option<u32> {
    // Whole warps: the kernel shuffles with a full mask.
    let block = p.block.filter(|b| b % 32 == 0)?;
    let per_thread = (p.n as u64 + 2).div_ceil(u64::from(block.max(1)));
    SCHUR_SLOTS
        .iter()
        .find(|&&(slots, f32_block, f64_block)| {
            let largest = if p.dtype == DType::F64 {
                f64_block
            } else {
                f32_block
            };
            u64::from(slots) >= per_thread && block <= largest
        })
        .map(|&(slots, _, _)| slots)
}

/// `durbin_schur`: one launch of one block, the state in registers.
struct Schur<'a> {
    gpu: Gpu<'a>,
    shape: Shape,
    kernel: Kernel,
    r: &'a DeviceBuf,
    out: &'a DeviceBuf,
}

impl Schur<'_> {
    /// One run; `step_ns` null, or a buffer of n + 1 64-bit elements for the step stamps.
    fn launch_stamped(&self, step_ns: Arg) -> Result<()> {
        // SAFETY: signature (const T* r, T* out, unsigned int n, unsigned long long* step_ns).
        // r and out hold n elements and are distinct allocations; the kernel was chosen by
        // `schur_slots`, so blockDim x J >= n + 2, blockDim is whole warps and within its launch
        // bounds; step_ns is null or holds n + 1 elements. (It computes pb42 alone: `supports`.)
        unsafe {
            self.kernel.launch(
                Dims::linear(1, self.shape.block, 0),
                &[
                    self.r.arg(),
                    self.out.arg(),
                    Arg::U32(self.shape.n),
                    step_ns,
                ],
            )
        }
    }
}

impl Launcher for Schur<'_> {
    fn launch(&mut self) -> Result<()> {
        if self.shape.n == 0 {
            return Ok(()); // an empty y: nothing to compute or write
        }
        self.launch_stamped(Arg::Ptr(0))
    }

    /// The latency of each step inside the kernel: one more run in which thread 0 reads
    /// `%globaltimer` as each step starts and after the last (`record::step_latency`).
    fn facts(&mut self) -> Result<Vec<(String, f64)>> {
        let stamps_len = self.shape.n as usize + 1;
        if stamps_len == 1 {
            return Ok(Vec::new());
        }
        // The stamps are 64-bit integers; kbench's buffers are typed by the cases' element types,
        // so they live in a float64 buffer of the same size and are read back as bits.
        let stamps = self.gpu.alloc(DType::F64, stamps_len)?;
        self.launch_stamped(stamps.arg())?;
        let mut host = HostData::F64(vec![0.0; stamps_len]);
        stamps.copy_to_host(&mut host)?;
        let HostData::F64(bits) = host else {
            unreachable!("a float64 buffer reads back as float64");
        };
        let stamps_ns: Vec<u64> = bits.iter().map(|v| v.to_bits()).collect();
        Ok(step_latency::facts_from_stamps(&stamps_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::compare;

    fn params(n: usize, dtype: DType, form: Form, init: Init) -> Params {
        Params {
            n,
            dtype,
            block: None,
            form,
            init,
        }
    }

    fn max_abs(v: &[f64]) -> f64 {
        v.iter().fold(0.0, |m, x| m.max(x.abs()))
    }

    /// T y = b by Gaussian elimination with partial pivoting, T the symmetric Toeplitz matrix
    /// with first column `column`: an independent dense solve, O(n^3).
    fn toeplitz_solve(column: &[f64], b: &[f64]) -> Vec<f64> {
        let n = b.len();
        let mut a: Vec<Vec<f64>> = (0..n)
            .map(|i| (0..n).map(|j| column[i.abs_diff(j)]).collect())
            .collect();
        let mut x = b.to_vec();
        for c in 0..n {
            let pivot = (c..n)
                .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
                .unwrap();
            a.swap(c, pivot);
            x.swap(c, pivot);
            let (upper, lower) = a.split_at_mut(c + 1);
            let pivot_row = &upper[c];
            for (i, row) in (c + 1..n).zip(lower) {
                let f = row[c] / pivot_row[c];
                if f != 0.0 {
                    for (v, p) in row[c..].iter_mut().zip(&pivot_row[c..]) {
                        *v -= f * p;
                    }
                    x[i] -= f * x[c];
                }
            }
        }
        for c in (0..n).rev() {
            let s: f64 = (c + 1..n).map(|j| a[c][j] * x[j]).sum();
            x[c] = (x[c] - s) / a[c][c];
        }
        x
    }

    #[test]
    fn pb42_solves_the_toeplitz_system_as_a_dense_solver_does() {
        for n in [1, 2, 7, 100, 999] {
            for (init, seed) in [(Init::Random, 3), (Init::Random, 4), (Init::Geometric, 0)] {
                let r = init.generate(n, Form::Pb42, seed);
                let y = reference(Form::Pb42, &r);
                let column: Vec<f64> = std::iter::once(1.0)
                    .chain(r[..n - 1].iter().copied())
                    .collect();
                let minus_r: Vec<f64> = r.iter().map(|x| -x).collect();
                let dense = toeplitz_solve(&column, &minus_r);
                let err = max_abs(&y.iter().zip(&dense).map(|(a, b)| a - b).collect::<Vec<_>>());
                assert!(
                    err <= 1e-13 * max_abs(&dense).max(1e-300),
                    "n={n} {init:?}: max |levinson - dense| = {err:e}"
                );
            }
        }
    }

    #[test]
    fn the_random_inputs_have_the_reflection_coefficients_they_were_built_from() {
        // The recursion's last element is alpha_{n-1} = kappa_{n-1}; the start of r is shared.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let kappa: Vec<f64> = (0..300)
            .map(|k| rng.random_range(-0.5..0.5) / ((k + 1) as f64).sqrt())
            .collect();
        let r = r_from_reflections(&kappa);
        for n in [1, 2, 50, 300] {
            let y = reference(Form::Pb42, &r[..n]);
            assert!((y[n - 1] - kappa[n - 1]).abs() < 1e-12, "n={n}");
        }
    }

    #[test]
    fn peers_geometric_input_has_the_ar1_solution() {
        // Why `geometric` is not the default: its pb42 answer is [-0.9, 0, ..., 0].
        let r = Init::Geometric.generate(500, Form::Pb42, 0);
        let y = reference(Form::Pb42, &r);
        assert!((y[0] + RHO).abs() < 1e-15);
        assert!(max_abs(&y[1..]) < 1e-14, "{}", max_abs(&y[1..]));
    }

    #[test]
    fn random_inputs_keep_every_part_of_y_significant_and_pb32_bounded() {
        for form in [Form::Pb42, Form::Pb32] {
            let y = reference(form, &Init::Random.generate(4000, form, 1));
            let mut tail: Vec<f64> = y[3600..].iter().map(|v| v.abs()).collect();
            tail.sort_by(f64::total_cmp);
            assert!(
                tail[tail.len() / 2] > 1e-4,
                "{form:?}: tail median {}",
                tail[200]
            );
            assert!(max_abs(&y) < 0.2, "{form:?}: max |y| = {}", max_abs(&y));
        }
    }

    #[test]
    fn the_seeds_form_with_polybench_init_grows_past_1e6_by_n_1000() {
        // PolyBench 3.2's r[i] = (i+1)/n/4 drives the pb32 recursion out of range: why the
        // study's accuracy claims use `random`.
        let y = reference(Form::Pb32, &Init::Polybench.generate(1000, Form::Pb32, 0));
        let largest = y.iter().fold(0.0f64, |m, v| {
            if v.is_finite() {
                m.max(v.abs())
            } else {
                f64::INFINITY
            }
        });
        assert!(largest > 1e6, "{largest}");
        let small = reference(Form::Pb32, &Init::Polybench.generate(10, Form::Pb32, 0));
        assert!(max_abs(&small) < 1.0);
    }

    #[test]
    fn inputs_are_seeded_shared_across_sizes_and_rounded_for_f32() {
        let r64 = |n, seed| {
            let data = Durbin
                .prepare(&params(n, DType::F64, Form::Pb42, Init::Random), seed)
                .unwrap();
            data.inputs.get::<f64>("r").unwrap().to_vec()
        };
        let (a, b, c) = (r64(1000, 1), r64(10, 1), r64(1000, 2));
        let d = Durbin
            .prepare(&params(1000, DType::F32, Form::Pb42, Init::Random), 1)
            .unwrap();
        let d = d.inputs.get::<f32>("r").unwrap();
        assert_eq!(&a[..10], &b[..]);
        assert_ne!(a, c);
        assert!(a.iter().zip(d).all(|(&x, &y)| x as f32 == y));
    }

    #[test]
    fn the_form_decides_the_recurrence() {
        let data = |form| {
            Durbin
                .prepare(&params(50, DType::F64, form, Init::Random), 1)
                .unwrap()
        };
        let (p32, p42) = (data(Form::Pb32), data(Form::Pb42));
        let mut out = vec![0.0; 50];
        reworked(Form::Pb32, p32.inputs.get::<f64>("r").unwrap(), &mut out);
        let tight = Tolerance {
            rel: 1e-12,
            abs: 1e-14,
        };
        assert!(compare(&out, &p32.outputs[0].reference, tight).passed);
        let loose = Tolerance {
            rel: 1e-6,
            abs: 1e-8,
        };
        assert!(!compare(&out, &p42.outputs[0].reference, loose).passed);
    }

    #[test]
    fn sequential_keeps_its_matrices_between_runs_and_repeats_its_answer() {
        let p = params(300, DType::F64, Form::Pb32, Init::Random);
        let data = Durbin.prepare(&p, 3).unwrap();
        let mut run = Durbin.case(p).cpu("sequential").unwrap();
        let mut first = data.output_buffers();
        run(&data.inputs, &mut first).unwrap();
        let mut second = data.output_buffers();
        run(&data.inputs, &mut second).unwrap();
        assert_eq!(first, second);
        let report = compare(
            &first.data("y").unwrap().to_f64(),
            &data.outputs[0].reference,
            tolerance(&p),
        );
        assert!(report.passed, "{report:?}");
    }

    #[test]
    fn sequentials_footprint_counts_its_matrices() {
        let p = params(300_000, DType::F64, Form::Pb42, Init::Random);
        let sequential = Durbin.case(p).footprint_bytes("sequential").unwrap();
        assert!(sequential > 2 * 300_000u64.pow(2) * 8, "{sequential}");
        for other in ["reworked", "threads", "durbin_persistent"] {
            assert!(Durbin.case(p).footprint_bytes(other).unwrap() < 300_000 * 64);
        }
        let huge = params(usize::MAX, DType::F64, Form::Pb42, Init::Random);
        assert_eq!(Durbin.case(huge).footprint_bytes("sequential"), None);
    }

    #[test]
    fn tolerance_scales_with_n_dtype_and_init() {
        let t = |n, dtype, init| tolerance(&params(n, dtype, Form::Pb42, init));
        let (small, large) = (
            t(100, DType::F32, Init::Random),
            t(10_000, DType::F32, Init::Random),
        );
        assert!((large.rel / small.rel - 10.0).abs() < 1e-9);
        assert!((small.abs / small.rel - 0.1).abs() < 1e-12);
        assert!(t(10_000, DType::F64, Init::Random).rel < 1e-13);
        assert_eq!(
            t(1, DType::F32, Init::Random).rel,
            16.0 * f32::EPSILON as f64
        );
        let geometric = t(100, DType::F64, Init::Geometric);
        assert_eq!(geometric.abs, geometric.rel);
    }

    /// `durbin_persistent`'s schedule run on the CPU: its threads, one after another within a
    /// step (they touch disjoint elements, so that is one valid interleaving), with the same
    /// pairs, middle element, unrolling, fused dot product and reciprocal of beta as the kernel.
    /// y starts as NaN, so an element read before it is written poisons the result.
    fn persistent_model(form: Form, r: &[f64], block: usize) -> Vec<f64> {
        let n = r.len();
        let mut y = vec![f64::NAN; n];
        let mut alpha = form.first_alpha(r[0]);
        let mut beta;
        y[0] = alpha;
        let mut dot = r[0] * alpha;
        let mut beta_next = form.next_beta(alpha, 1.0);
        let mut inv_beta_next = 1.0 / beta_next;
        for k in 1..n {
            beta = beta_next;
            alpha = match form {
                Form::Pb42 => -(r[k] + dot) * inv_beta_next,
                Form::Pb32 => -(r[k] + dot) * beta,
            };
            beta_next = form.next_beta(alpha, beta);
            inv_beta_next = 1.0 / beta_next;
            let pairs = k >> 1;
            let mut partials = vec![0.0; block];
            for (t, partial) in partials.iter_mut().enumerate() {
                let mut p = t;
                let pair = |p: usize, y: &mut [f64]| {
                    let j = k - 1 - p;
                    let (yp, yj) = (y[p], y[j]);
                    y[p] = yp + alpha * yj;
                    y[j] = yj + alpha * yp;
                    r[k - p] * y[p] + r[p + 1] * y[j]
                };
                while p + block < pairs {
                    *partial += pair(p, &mut y);
                    *partial += pair(p + block, &mut y);
                    p += 2 * block;
                }
                if p < pairs {
                    *partial += pair(p, &mut y);
                }
                if k & 1 == 1 && t == pairs % block {
                    y[pairs] += alpha * y[pairs];
                    *partial += r[k - pairs] * y[pairs];
                }
                if t == 0 {
                    y[k] = alpha;
                }
            }
            dot = partials.iter().sum::<f64>() + r[0] * alpha;
        }
        y
    }

    /// `durbin_schur`'s schedule on the CPU, thread by thread: the J slots a thread, the row
    /// started at -pad, each thread's left neighbour read before any thread writes (the
    /// kernel's shuffle and edge values), alpha from slot k + 2's x and 1 / beta as a product.
    fn schur_model<T: Real>(r: &[T], block: usize, slots: usize) -> Vec<T> {
        let form = Form::Pb42;
        let n = r.len();
        let pad = block * slots - (n + 2);
        let start = |i: usize, one: T| match i.checked_sub(pad) {
            None => T::ZERO,
            Some(0) => T::ONE,
            Some(1) => one,
            Some(s) => r[s - 2],
        };
        let mut x: Vec<T> = (0..block * slots).map(|i| start(i, T::ZERO)).collect();
        let mut w: Vec<T> = (0..block * slots).map(|i| start(i, T::ONE)).collect();
        let mut alpha = form.first_alpha(r[0]);
        let mut beta = T::ONE;
        let mut beta_next = form.next_beta(alpha, beta);
        for k in 0..n {
            if k > 0 {
                let f = x[pad + k + 2];
                beta = beta_next;
                alpha = -f * (T::ONE / beta_next);
                beta_next = form.next_beta(alpha, beta);
            }
            let lefts: Vec<T> = (0..block)
                .map(|t| match t {
                    0 => T::ZERO,
                    _ => w[t * slots - 1],
                })
                .collect();
            for (t, &left) in lefts.iter().enumerate() {
                for q in (0..slots).rev() {
                    let i = t * slots + q;
                    let w_left = if q > 0 { w[i - 1] } else { left };
                    let xq = x[i];
                    x[i] = xq + alpha * w_left;
                    w[i] = w_left + alpha * xq;
                }
            }
        }
        x[pad + 1..pad + 1 + n].to_vec()
    }

    #[test]
    fn the_schur_kernels_schedule_computes_the_recursion() {
        for n in [1, 2, 3, 7, 33, 999, 1000, 4097] {
            for block in [32, 64, 1024] {
                for dtype in [DType::F32, DType::F64] {
                    let p = Params {
                        block: Some(block as u32),
                        ..params(n, dtype, Form::Pb42, Init::Random)
                    };
                    let Some(slots) = schur_slots(&p) else {
                        // No instantiation allowed at this block holds the row.
                        let holds = |&(slots, f32_block, f64_block): &(u32, u32, u32)| {
                            let largest = if dtype == DType::F64 { f64_block } else { f32_block };
                            block as u32 <= largest && slots as usize * block >= n + 2
                        };
                        assert!(!SCHUR_SLOTS.iter().any(holds), "n={n} block={block} {dtype:?}");
                        continue;
                    };
                    let data = Durbin.prepare(&p, 8).unwrap();
                    let got = match dtype {
                        DType::F32 => {
                            let r = data.inputs.get::<f32>("r").unwrap();
                            let y = schur_model(r, block, slots as usize);
                            y.iter().map(|&v| v as f64).collect()
                        }
                        _ => schur_model(data.inputs.get::<f64>("r").unwrap(), block, slots as usize),
                    };
                    let report = compare(&got, &data.outputs[0].reference, tolerance(&p));
                    assert!(report.passed, "n={n} block={block} {dtype:?}: {report:?}");
                }
            }
        }
    }

    #[test]
    fn schur_takes_the_fewest_slots_that_hold_the_row_within_the_blocks_registers() {
        let slots = |n, block, dtype| {
            schur_slots(&Params {
                block: Some(block),
                ..params(n, dtype, Form::Pb42, Init::Random)
            })
        };
        assert_eq!(slots(10_000, 256, DType::F64), Some(40));
        assert_eq!(slots(10_000, 512, DType::F64), None);
        assert_eq!(slots(10_000, 512, DType::F32), Some(20));
        assert_eq!(slots(10_000, 1024, DType::F32), Some(10));
        assert_eq!(slots(1, 32, DType::F64), Some(1));
        assert_eq!(slots(31, 32, DType::F64), Some(2));
        assert_eq!(slots(40 * 256 - 2, 256, DType::F64), Some(40));
        assert_eq!(slots(40 * 256 - 1, 256, DType::F64), None);
        assert_eq!(slots(48 * 256 - 2, 256, DType::F32), Some(48));
        assert_eq!(slots(100, 48, DType::F32), None);
        let none = params(10, DType::F64, Form::Pb42, Init::Random);
        assert_eq!(schur_slots(&none), None);
        let case = |n, form| Params {
            block: Some(256),
            ..params(n, DType::F64, form, Init::Random)
        };
        assert!(Durbin.case(case(1000, Form::Pb42)).supports("durbin_schur"));
        assert!(!Durbin.case(case(1000, Form::Pb32)).supports("durbin_schur"));
        assert!(!Durbin.case(case(100_000, Form::Pb42)).supports("durbin_schur"));
    }

    #[test]
    fn the_persistent_kernels_schedule_computes_the_recursion() {
        for n in [1, 2, 3, 7, 33, 999, 1000, 4097] {
            for block in [32, 64, 1024] {
                for form in [Form::Pb42, Form::Pb32] {
                    let r = Init::Random.generate(n, form, 8);
                    let want = reference(form, &r);
                    let got = persistent_model(form, &r, block);
                    let p = params(n, DType::F64, Form::Pb42, Init::Random);
                    let report = compare(&got, &want, tolerance(&p));
                    assert!(report.passed, "n={n} block={block} {form:?}: {report:?}");
                }
            }
        }
    }
}
