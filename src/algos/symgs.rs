//! SYMGS (seed 002): one symmetric Gauss-Seidel application, a forward sweep then a backward
//! sweep, as HPCG's ComputeSYMGS_ref, on a sparse matrix read from a Matrix Market file or
//! generated (`csr`).
//!
//! The `order` axis says in which order the rows are swept. `natural`: the matrix's own order,
//! the sequential sweep every exact variant must reproduce. `colour`: the rows renumbered by a
//! Jones-Plassmann colouring (colour 0's rows first), so that the case's matrix is the permuted
//! P A P^T and its natural sweep is the colour-order sweep; `greedy_colour`: the same with a
//! greedy colouring in row order (fewer colours on stencils). The multicolour variants run only
//! on rows grouped by colour, and the exact ones run there too, giving the same result. Either
//! way the reference is the sequential sweep of the case's matrix in float64 (from the element
//! type's values).
//!
//! Variants: on the CPU the sequential sweep and a multicolour sweep on all cores; on the GPU
//! the seed's lock scheme (rows in chunks, relaunched until every row is done), a level-
//! scheduled sweep without barriers, a multicolour sweep on sliced ELL, and cuSPARSE's
//! triangular solves. GB/s count the bytes a sweep pair must move: the matrix, r and x read and
//! x written, twice.

use std::sync::LazyLock;

use anyhow::{anyhow, bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Deserialize;

use super::csr::{self, Csr, MatrixSource};
use super::{
    Algorithm, AxisDef, AxisKind, Buffers, CaseData, CpuImpl, CpuRun, FileAxis, KernelImpl,
    OutputSpec, Spec,
};
use crate::choice;
use crate::device::sparse::{CsrRef, SparseCall, Triangle};
use crate::device::{Arg, DeviceBuf, DeviceIo, Dims, Gpu, Graph, Kernel, KernelFile, Launcher};
use crate::numerics::Real;
use crate::vocab::{DType, Element, HostData, Tolerance};
use crate::with_float_dtype;

#[derive(Debug)]
pub struct Symgs;

choice! {
    pub enum Order {
        Natural = "natural",
        /// Rows grouped by a Jones-Plassmann colouring (`jones_plassmann_colour_rows`).
        Colour = "colour",
        /// Rows grouped by a greedy colouring in row order (`greedy_colour_rows`).
        GreedyColour = "greedy_colour",
    }
}

/// Matrix Market files, checked whole when the manifest is read, or a generator's name.
static MATRIX_AXIS: FileAxis = FileAxis {
    extensions: &["mtx"],
    check_file: csr::check_file,
    generated: generated_matrix,
};

fn generated_matrix(value: &str) -> Option<Result<(), String>> {
    match MatrixSource::parse(value) {
        Ok(MatrixSource::File(_)) => None,
        Ok(generated) => Some(generated.check_generated_size()),
        Err(e) => Some(Err(e)),
    }
}

static AXES: &[AxisDef] = &[
    AxisDef {
        name: "matrix",
        kind: AxisKind::File(&MATRIX_AXIS),
        default: None,
        only_for: None,
        doc: "a Matrix Market file (path or glob), or hpcg:NX[xNYxNZ], laplace2d:NX[xNY], \
              random:NxPER_ROW",
    },
    AxisDef::dtype(&DType::FLOATS, "f64"),
    AxisDef::choice(
        "order",
        Order::NAMES,
        "natural",
        "the rows' order: the matrix's own, or grouped by colour: `colour` by a Jones-Plassmann \
         colouring (random weights from the seed), `greedy_colour` by a greedy one in row order \
         (fewer colours: 8 on hpcg:104, 2 on laplace2d)",
    ),
    AxisDef::BLOCK,
];

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "symgs",
    title: "symmetric Gauss-Seidel, one forward and one backward sweep (seed 002)",
    axes: AXES,
    kernel_file: KernelFile::embedded("symgs.cu", include_str!("../../kernels/symgs.cu")),
    test_grid: "matrix = [\"hpcg:1\", \"hpcg:3x2x5\", \"laplace2d:7\", \"random:101x7\", \
                \"datasets/*.mtx\"]\ndtype = [\"f32\", \"f64\"]\n\
                order = [\"natural\", \"colour\", \"greedy_colour\"]",
    // laplace2d:300 and random:200003x40 grouped by colour (either colouring) have levels wider
    // than an H100's resident warps, so symgs_levels takes its half-warp kernel there (random's
    // rows hold about 40 entries, many more than one step's 32); random:1009x40 gives the
    // warp-a-row kernel rows longer than a warp.
    gpu_test_grid: "matrix = [\"hpcg:1\", \"hpcg:5x3x7\", \"hpcg:24\", \"laplace2d:101\", \
                    \"laplace2d:300\", \"random:10007x9\", \"random:1009x40\", \
                    \"random:200003x40\", \"datasets/*.mtx\"]\ndtype = [\"f32\", \"f64\"]\n\
                    order = [\"natural\", \"colour\", \"greedy_colour\"]\nblock = [32, 256]",
    ..Spec::implementing(Symgs::CPU, Symgs::KERNELS)
});

#[derive(Debug, Clone, Deserialize)]
pub struct Params {
    pub matrix: String,
    pub dtype: DType,
    pub order: Order,
    /// CUDA variants only.
    pub block: Option<u32>,
}

/// The seed's lock scheme: lines a thread owns (its LINESPERTHREAD) and chunks a sweep is cut
/// into (its `callsn`; the report does not give its value).
const LOCK_LINES: usize = 8;
const LOCK_CHUNKS: usize = 16;
/// Passes over one chunk before the lock scheme gives up (a chunk needs at most one pass per
/// row in it; far fewer in practice).
const LOCK_MAX_PASSES: usize = 1 << 20;
/// symgs_levels' block (its launch bounds say how many fit an SM; the driver is asked).
const LEVELS_BLOCK: u32 = 256;
/// Rows of a sliced-ELL slice (symgs.cu's SLICE).
const SLICE: usize = 32;
/// What one cuSPARSE call counts for in `launches_per_run` (it queues one or a few kernels).
const LAUNCHES_PER_LIBRARY_CALL: usize = 4;

impl Algorithm for Symgs {
    type Params = Params;

    // The implementations that sweep colour by colour need the rows grouped by colour. Each
    // adds to the case's data: the other sweep vector and flags (or level orders and 1 / a_ii),
    // or (cuSPARSE) two triangles of each kind, or (sliced ELL) a padded copy of the matrix.
    const CPU: &'static [CpuImpl<Params>] = &[
        CpuImpl::new("sequential", |p| Ok(cpu(p, false))).scratch_bytes(flags_bytes),
        CpuImpl::new("colours_threads", |p| Ok(cpu(p, true)))
            .scratch_bytes(flags_bytes)
            .supports(by_colour),
    ];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("symgs_lock", |p: &Params, on| {
            let block = p.block.context("the lock scheme needs a block size")?;
            let sweep = LockSweep::new(on.gpu, DeviceMatrix::of(on.io)?, p.dtype, block)?;
            Ok(Box::new(sweep))
        })
        .scratch_bytes(flags_bytes),
        KernelImpl::new("symgs_levels", |p: &Params, on| {
            let sweep = LevelSweep::new(on.gpu, DeviceMatrix::of(on.io)?, p.dtype)?;
            Ok(Box::new(sweep))
        })
        .scratch_bytes(level_sweep_bytes),
        KernelImpl::new("symgs_colours", |p: &Params, on| {
            let block = p.block.context("the multicolour sweep needs a block size")?;
            let matrix = DeviceMatrix::of(on.io)?;
            let sweep = ColourSweep::new(on.gpu, on.io, matrix, p.dtype, block)?;
            Ok(Box::new(sweep))
        })
        .scratch_bytes(two_matrices_bytes)
        .supports(by_colour),
        KernelImpl::new("symgs_cusparse", |p: &Params, on| {
            let sweep = CusparseSweep::new(on.gpu, DeviceMatrix::of(on.io)?, p.dtype)?;
            Ok(Box::new(sweep))
        })
        .scratch_bytes(two_matrices_bytes),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// The matrix as read (float64, 32-bit indices) and as the case holds it, r, x and the
    /// reference.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        let shape = Shape::of(p)?;
        let read = shape
            .nnz
            .checked_mul(12)?
            .checked_add(shape.n.checked_mul(4)?)?;
        let vectors = shape.n.checked_mul(8 * 8)?;
        read.checked_mul(2)?
            .checked_add(shape.matrix_bytes)?
            .checked_add(vectors)?
            .checked_add(1 << 10)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let source = MatrixSource::parse(&p.matrix).map_err(|e| anyhow!(e))?;
        let matrix = source.load(seed).map_err(|e| anyhow!(e))?;
        let (matrix, colour_ptr) = match p.order {
            Order::Natural => {
                let n = matrix.n as i32;
                (matrix, vec![0, n])
            }
            Order::Colour => {
                let colours = jones_plassmann_colour_rows(&matrix, seed);
                permute_by_colour(&matrix, &colours)
            }
            Order::GreedyColour => {
                let colours = greedy_colour_rows(&matrix);
                permute_by_colour(&matrix, &colours)
            }
        };
        let (n, nnz) = (matrix.n, matrix.nnz());
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5E_0002);
        let r: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let x: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        // Everything in the element type, and the reference from exactly those values.
        let round = |v: &[f64]| -> Vec<f64> {
            match p.dtype {
                DType::F32 => v.iter().map(|&v| v as f32 as f64).collect(),
                _ => v.to_vec(),
            }
        };
        let (val, r, x) = (round(&matrix.val), round(&r), round(&x));
        let diag = round(&matrix.diagonal());
        let mut reference = x.clone();
        sweep(
            &View {
                row_ptr: &matrix.row_ptr,
                col: &matrix.col,
                val: &val,
                diag: &diag,
            },
            &r,
            &mut reference,
        );
        let (levels_forward, levels_backward) = (
            levels(&matrix, Sweep::Forward).1,
            levels(&matrix, Sweep::Backward).1,
        );
        let scale = reference.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // Float64: the sequential result up to rounding, 1e-10 of the largest value. Float32:
        // each row's ~30 terms round at 6e-8 and later rows inherit earlier rows' errors (the
        // sweep averages them, it does not grow them).
        let rel = match p.dtype {
            DType::F64 => 1e-10,
            _ => 2e-4,
        };
        let tolerance = Tolerance {
            rel,
            abs: rel * scale.max(f64::MIN_POSITIVE),
        };
        let wrap = |v: Vec<f64>| -> Result<HostData> {
            Ok(with_float_dtype!(p.dtype, |T| T::wrap(
                v.into_iter().map(T::from_f64).collect()
            )))
        };
        let output = OutputSpec::new("x", p.dtype, reference, tolerance).in_place_of("x");
        let colours = colour_ptr.len() - 1;
        let elem = p.dtype.size_bytes();
        let (n64, nnz64) = (n as u64, nnz as u64);
        // A sweep reads the matrix (values, column indices, row pointers), r and x, and writes x.
        let sweep_read_bytes = nnz64 * (4 + elem) + (n64 + 1) * 4 + 2 * n64 * elem;
        Ok(CaseData {
            inputs: Buffers(vec![
                ("row_ptr", HostData::I32(matrix.row_ptr)),
                ("col", HostData::I32(matrix.col)),
                ("val", wrap(val)?),
                ("diag", wrap(diag)?),
                ("r", wrap(r)?),
                ("x", wrap(x)?),
                ("colour_ptr", HostData::I32(colour_ptr)),
            ]),
            outputs: vec![output],
            bytes_read: 2 * sweep_read_bytes,
            bytes_written: 2 * n64 * elem,
            flops: 2 * 2 * nnz64,
            elements: 0,
            facts: vec![
                ("rows", n as f64),
                ("nonzeros", nnz as f64),
                ("colours", colours as f64),
                ("levels_forward", levels_forward as f64),
                ("levels_backward", levels_backward as f64),
            ],
        })
    }
}

/// A case's matrix, sized cheaply (see `MatrixSource::shape`) for its footprint.
struct Shape {
    n: u64,
    nnz: u64,
    /// As the case holds it: values, column indices, row pointers.
    matrix_bytes: u64,
}

impl Shape {
    fn of(p: &Params) -> Option<Shape> {
        let (n, nnz) = MatrixSource::parse(&p.matrix).ok()?.shape().ok()?;
        let (n, nnz) = (n as u64, nnz as u64);
        let matrix_bytes = nnz
            .checked_mul(4 + p.dtype.size_bytes())?
            .checked_add(n.checked_mul(4)?)?;
        Some(Shape {
            n,
            nnz,
            matrix_bytes,
        })
    }
}

/// The other sweep vector and the flags.
fn flags_bytes(p: &Params) -> Option<u64> {
    Shape::of(p)?.n.checked_mul(16)
}

/// The other sweep vector, 1 / a_ii and the two sweeps' level orders.
fn level_sweep_bytes(p: &Params) -> Option<u64> {
    Shape::of(p)?.n.checked_mul(2 * p.dtype.size_bytes() + 2 * 4)
}

/// Two more copies of the matrix (cuSPARSE's triangles, sliced ELL's padded copy).
fn two_matrices_bytes(p: &Params) -> Option<u64> {
    Shape::of(p)?.matrix_bytes.checked_mul(2)
}

fn by_colour(p: &Params) -> bool {
    matches!(p.order, Order::Colour | Order::GreedyColour)
}

/// One forward and one backward sweep on the CPU, row by row or colour by colour.
fn cpu(p: &Params, by_colour: bool) -> CpuRun {
    let dtype = p.dtype;
    Box::new(move |inputs, outputs| {
        with_float_dtype!(dtype, |T| {
            let view = View::<T>::of(inputs)?;
            let r = inputs.get::<T>("r")?;
            let x = outputs.get_mut::<T>("x")?;
            if by_colour {
                sweep_by_colour(&view, inputs.get::<i32>("colour_ptr")?, r, x);
            } else {
                sweep(&view, r, x);
            }
        });
        Ok(())
    })
}

// ---- The sweeps on the CPU ----

/// A CSR matrix over borrowed arrays, with its diagonal apart.
struct View<'a, T> {
    row_ptr: &'a [i32],
    col: &'a [i32],
    val: &'a [T],
    diag: &'a [T],
}

impl<'a, T: Element> View<'a, T> {
    fn of(inputs: &'a Buffers) -> Result<Self> {
        Ok(View {
            row_ptr: inputs.get::<i32>("row_ptr")?,
            col: inputs.get::<i32>("col")?,
            val: inputs.get::<T>("val")?,
            diag: inputs.get::<T>("diag")?,
        })
    }
}

impl<T: Real> View<'_, T> {
    /// Row i's new value from the current x: (r_i - sum_{j != i} a_ij x_j) / a_ii, the terms in
    /// column order, as every GPU variant adds them.
    fn update(&self, i: usize, r: &[T], x: &[T]) -> T {
        let (start, end) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        let mut sum = T::ZERO;
        for (&j, &a) in self.col[start..end].iter().zip(&self.val[start..end]) {
            if j as usize != i {
                sum = sum + a * x[j as usize];
            }
        }
        (r[i] - sum) / self.diag[i]
    }
}

/// The sequential sweep pair, HPCG's ComputeSYMGS_ref.
fn sweep<T: Real>(a: &View<T>, r: &[T], x: &mut [T]) {
    let n = r.len();
    for i in 0..n {
        x[i] = a.update(i, r, x);
    }
    for i in (0..n).rev() {
        x[i] = a.update(i, r, x);
    }
}

/// The same sweep pair colour by colour, each colour's rows on all cores: no row of a colour
/// neighbours another, so each colour's new values depend only on other colours' and the
/// result is the sequential sweep's.
fn sweep_by_colour<T: Real>(a: &View<T>, colour_ptr: &[i32], r: &[T], x: &mut [T]) {
    let colours: Vec<(usize, usize)> = colour_ptr
        .windows(2)
        .map(|w| (w[0] as usize, w[1] as usize))
        .collect();
    let mut new = Vec::new();
    for &(begin, end) in colours.iter().chain(colours.iter().rev()) {
        (begin..end)
            .into_par_iter()
            .map(|i| a.update(i, r, x))
            .collect_into_vec(&mut new);
        x[begin..end].copy_from_slice(&new);
    }
}

// ---- Schedules: levels and colours ----

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sweep {
    Forward,
    Backward,
}

/// Each row's level in `sweep` (0 for a row that needs no other row's new value, else one more
/// than the highest level among the rows it needs), and the number of levels.
fn levels(a: &Csr, sweep: Sweep) -> (Vec<u32>, usize) {
    let n = a.n;
    let mut level = vec![0u32; n];
    let rows: Box<dyn Iterator<Item = usize>> = match sweep {
        Sweep::Forward => Box::new(0..n),
        Sweep::Backward => Box::new((0..n).rev()),
    };
    let mut count = 0;
    for i in rows {
        let (cols, _) = a.row(i);
        let mut l = 0;
        for &j in cols {
            let j = j as usize;
            let earlier = match sweep {
                Sweep::Forward => j < i,
                Sweep::Backward => j > i,
            };
            if earlier {
                l = l.max(level[j] + 1);
            }
        }
        level[i] = l;
        count = count.max(l as usize + 1);
    }
    (level, count.min(n))
}

/// The rows in level order (ascending row within a level): the order symgs_levels visits them.
fn level_order(level: &[u32], count: usize) -> Vec<i32> {
    let mut start = vec![0usize; count + 1];
    for &l in level {
        start[l as usize + 1] += 1;
    }
    for l in 0..count {
        start[l + 1] += start[l];
    }
    let mut order = vec![0i32; level.len()];
    for (i, &l) in level.iter().enumerate() {
        order[start[l as usize]] = i as i32;
        start[l as usize] += 1;
    }
    order
}

/// A Jones-Plassmann colouring: every row gets a random weight (from `seed`); in each round,
/// every uncoloured row heavier than all its uncoloured neighbours takes the smallest colour
/// none of its neighbours has. Rows chosen in one round are never neighbours, so a round runs
/// in parallel. Neighbours are the rows i reads or that read i (the pattern of A + A^T).
fn jones_plassmann_colour_rows(a: &Csr, seed: u64) -> Vec<u32> {
    let (ptr, adj) = symmetric_pattern(a);
    let weight: Vec<(u64, u32)> = (0..a.n)
        .map(|i| (splitmix64(seed ^ (i as u64).wrapping_mul(0x9E37_79B9)), i as u32))
        .collect();
    let mut colour = vec![u32::MAX; a.n];
    let mut uncoloured: Vec<u32> = (0..a.n as u32).collect();
    while !uncoloured.is_empty() {
        let chosen: Vec<(u32, u32)> = uncoloured
            .par_iter()
            .filter_map(|&i| {
                let neighbours = &adj[ptr[i as usize]..ptr[i as usize + 1]];
                let heaviest = neighbours.iter().all(|&j| {
                    colour[j as usize] != u32::MAX || weight[j as usize] < weight[i as usize]
                });
                heaviest.then(|| {
                    let taken = neighbours.iter().map(|&j| colour[j as usize]);
                    (i, smallest_free(taken.filter(|&c| c != u32::MAX)))
                })
            })
            .collect();
        for (i, c) in chosen {
            colour[i as usize] = c;
        }
        uncoloured.retain(|&i| colour[i as usize] == u32::MAX);
    }
    colour
}

/// A greedy colouring in row order: each row takes the smallest colour none of its
/// already-coloured neighbours has (neighbours as in `jones_plassmann_colour_rows`). On a
/// structured stencil it finds the few colours of a regular pattern (HPCG's 27 points: 8 once
/// every side is 2 or more, where Jones-Plassmann finds 18 on hpcg:104), and fewer colours mean
/// fewer, larger steps for a multicolour sweep: on HPCG 104^3 in float64, symgs_colours
/// 416 -> 295 µs (H100).
fn greedy_colour_rows(a: &Csr) -> Vec<u32> {
    let (ptr, adj) = symmetric_pattern(a);
    let mut colour = vec![u32::MAX; a.n];
    for i in 0..a.n {
        let taken = adj[ptr[i]..ptr[i + 1]].iter().map(|&j| colour[j as usize]);
        colour[i] = smallest_free(taken.filter(|&c| c != u32::MAX));
    }
    colour
}

/// The smallest colour not in `taken`.
fn smallest_free(taken: impl Iterator<Item = u32>) -> u32 {
    let mut low: u128 = 0;
    let mut high = Vec::new();
    for c in taken {
        if c < 128 {
            low |= 1 << c;
        } else {
            high.push(c);
        }
    }
    if low != u128::MAX {
        return low.trailing_ones();
    }
    high.sort_unstable();
    let mut free = 128;
    for c in high {
        if c == free {
            free += 1;
        } else if c > free {
            break;
        }
    }
    free
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The pattern of A + A^T without the diagonal, as (row pointers, ascending columns).
fn symmetric_pattern(a: &Csr) -> (Vec<usize>, Vec<u32>) {
    let n = a.n;
    // A^T's pattern by counting: rows come out ascending because A is read row by row.
    let mut t_ptr = vec![0usize; n + 1];
    for &j in &a.col {
        t_ptr[j as usize + 1] += 1;
    }
    for i in 0..n {
        t_ptr[i + 1] += t_ptr[i];
    }
    let mut t_col = vec![0u32; a.nnz()];
    let mut next = t_ptr.clone();
    for i in 0..n {
        for &j in a.row(i).0 {
            t_col[next[j as usize]] = i as u32;
            next[j as usize] += 1;
        }
    }
    let rows: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let mine = a.row(i).0.iter().map(|&j| j as u32);
            let theirs = &t_col[t_ptr[i]..t_ptr[i + 1]];
            let mut merged: Vec<u32> = mine.chain(theirs.iter().copied()).collect();
            merged.sort_unstable();
            merged.dedup();
            merged.retain(|&j| j as usize != i);
            merged
        })
        .collect();
    let mut ptr = Vec::with_capacity(n + 1);
    ptr.push(0);
    for row in &rows {
        ptr.push(ptr.last().copied().unwrap_or(0) + row.len());
    }
    (ptr, rows.concat())
}

/// P A P^T with the rows grouped by colour (ascending row within a colour), and where each
/// colour's rows begin.
fn permute_by_colour(a: &Csr, colour: &[u32]) -> (Csr, Vec<i32>) {
    let n = a.n;
    let colours = colour.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
    let mut colour_ptr = vec![0i32; colours + 1];
    for &c in colour {
        colour_ptr[c as usize + 1] += 1;
    }
    for c in 0..colours {
        colour_ptr[c + 1] += colour_ptr[c];
    }
    let mut next: Vec<i32> = colour_ptr[..colours].to_vec();
    let mut new_of_old = vec![0i32; n];
    for (i, &c) in colour.iter().enumerate() {
        new_of_old[i] = next[c as usize];
        next[c as usize] += 1;
    }
    let mut old_of_new = vec![0usize; n];
    for (old, &new) in new_of_old.iter().enumerate() {
        old_of_new[new as usize] = old;
    }
    let rows: Vec<Vec<(i32, f64)>> = old_of_new
        .par_iter()
        .map(|&old| {
            let (cols, vals) = a.row(old);
            let mut row: Vec<(i32, f64)> = cols
                .iter()
                .zip(vals)
                .map(|(&j, &v)| (new_of_old[j as usize], v))
                .collect();
            row.sort_unstable_by_key(|&(j, _)| j);
            row
        })
        .collect();
    let mut row_ptr = Vec::with_capacity(n + 1);
    row_ptr.push(0i32);
    let (mut col, mut val) = (Vec::with_capacity(a.nnz()), Vec::with_capacity(a.nnz()));
    for row in rows {
        for (j, v) in row {
            col.push(j);
            val.push(v);
        }
        row_ptr.push(col.len() as i32);
    }
    let permuted = Csr {
        n,
        row_ptr,
        col,
        val,
    };
    (permuted, colour_ptr)
}

// ---- The sweeps on the GPU ----

/// The case's matrix and vectors on the device (x is the in-place output).
struct DeviceMatrix<'a> {
    n: usize,
    row_ptr: &'a DeviceBuf,
    col: &'a DeviceBuf,
    val: &'a DeviceBuf,
    diag: &'a DeviceBuf,
    r: &'a DeviceBuf,
    x: &'a DeviceBuf,
}

impl<'a> DeviceMatrix<'a> {
    fn of(io: &'a DeviceIo) -> Result<Self> {
        let r = io.input("r")?;
        let matrix = DeviceMatrix {
            n: r.len(),
            row_ptr: io.input("row_ptr")?,
            col: io.input("col")?,
            val: io.input("val")?,
            diag: io.input("diag")?,
            r,
            x: io.output("x")?,
        };
        i32::try_from(matrix.n).context("the kernels index rows with 32 bits")?;
        Ok(matrix)
    }

    /// The matrix back on the host, to build what a variant stores besides CSR (its schedule,
    /// its sliced ELL, its triangles) before anything is timed.
    fn download(&self) -> Result<Csr> {
        let mut row_ptr = HostData::zeros(DType::I32, self.n + 1);
        self.row_ptr.copy_to_host(&mut row_ptr)?;
        let mut col = HostData::zeros(DType::I32, self.col.len());
        self.col.copy_to_host(&mut col)?;
        let mut val = HostData::zeros(self.val.dtype(), self.val.len());
        self.val.copy_to_host(&mut val)?;
        let (HostData::I32(row_ptr), HostData::I32(col)) = (row_ptr, col) else {
            bail!("row_ptr and col hold 32-bit integers");
        };
        Ok(Csr {
            n: self.n,
            row_ptr,
            col,
            val: val.to_f64(),
        })
    }

    /// The arguments every sweep kernel starts with: row_ptr, col, val, diag, r.
    fn csr_args(&self) -> [Arg; 5] {
        [
            self.row_ptr.arg(),
            self.col.arg(),
            self.val.arg(),
            self.diag.arg(),
            self.r.arg(),
        ]
    }
}

/// The seed's lock scheme: each sweep cut into chunks, each chunk relaunched until a pass finds
/// every row ready (the host reads the flag back after each pass, as the seed did).
struct LockSweep<'a> {
    kernel: Kernel,
    matrix: DeviceMatrix<'a>,
    block: u32,
    chunks: Vec<(usize, usize)>,
    y: DeviceBuf,
    locks: DeviceBuf,
    thread_done: DeviceBuf,
    not_done: DeviceBuf,
    epoch: u32,
}

impl<'a> LockSweep<'a> {
    fn new(gpu: Gpu<'a>, matrix: DeviceMatrix<'a>, dtype: DType, block: u32) -> Result<Self> {
        let n = matrix.n;
        let chunk = n.div_ceil(LOCK_CHUNKS).div_ceil(LOCK_LINES).max(1) * LOCK_LINES;
        let chunks = (0..n)
            .step_by(chunk)
            .map(|begin| (begin, (begin + chunk).min(n)))
            .collect();
        Ok(LockSweep {
            kernel: gpu.kernel(&format!("symgs_lock_{dtype}"))?,
            block,
            chunks,
            y: gpu.alloc(dtype, n)?,
            locks: gpu.alloc(DType::I32, n)?,
            thread_done: gpu.alloc(DType::I32, n.div_ceil(LOCK_LINES))?,
            not_done: gpu.alloc(DType::I32, 1)?,
            epoch: 0,
            matrix,
        })
    }
}

impl Launcher for LockSweep<'_> {
    fn launch(&mut self) -> Result<()> {
        let m = &self.matrix;
        let zero = HostData::I32(vec![0]);
        let mut flag = HostData::I32(vec![0]);
        // Forward: old x in, new values to y. Backward: y in, the final values to x.
        for (backward, x_old, x_new) in [(0, m.x, &self.y), (1, &self.y, m.x)] {
            self.epoch += 1;
            for &(begin, end) in &self.chunks {
                let threads = (end - begin).div_ceil(LOCK_LINES);
                let grid = u32::try_from(threads.div_ceil(self.block as usize))?;
                let [row_ptr, col, val, diag, r] = m.csr_args();
                let args = [
                    row_ptr,
                    col,
                    val,
                    diag,
                    r,
                    x_old.arg(),
                    x_new.arg(),
                    self.locks.arg(),
                    self.thread_done.arg(),
                    self.not_done.arg(),
                    Arg::I32(m.n as i32),
                    Arg::I32(begin as i32),
                    Arg::I32(end as i32),
                    Arg::U32(self.epoch),
                    Arg::I32(backward),
                ];
                let mut passes = 0;
                loop {
                    self.not_done.copy_from_host(&zero)?;
                    // SAFETY: symgs.cu's symgs_lock contract: the CSR arrays, r, x_old and
                    // x_new hold n rows; locks n and thread_done ceil(n / 8) flags, which hold
                    // earlier epochs only; chunk bounds within n, begin a multiple of 8; the
                    // grid covers the chunk's lines at 8 a thread.
                    unsafe { self.kernel.launch(Dims::linear(grid, self.block, 0), &args)? };
                    self.not_done.copy_to_host(&mut flag)?;
                    if flag == zero {
                        break;
                    }
                    passes += 1;
                    if passes == LOCK_MAX_PASSES {
                        bail!("the lock scheme left rows {begin}..{end} unfinished after {passes} passes");
                    }
                }
            }
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        2 * self.chunks.len()
    }

    fn waits_for_device(&self) -> Option<&'static str> {
        Some("the seed's lock scheme reads a flag back after every pass to decide whether to relaunch")
    }
}

/// The level-scheduled sweep: one launch a sweep, warps taking the rows in level order and each
/// waiting only for the rows it reads, whose values start as a pending NaN.
struct LevelSweep<'a> {
    pending: Kernel,
    matrix: DeviceMatrix<'a>,
    warp_a_row: Kernel,
    half_warp_a_row: Kernel,
    /// Forward and backward: the entry, its grid and the rows in level order.
    sweeps: [(LevelKernel, Dims, DeviceBuf); 2],
    /// 1 / a_ii for symgs_levels, made with the schedule: a row's last step is then a
    /// subtraction and a product, where a division (a dozen dependent operations in float64)
    /// sat on the chain of levels. HPCG 104^3 in the natural order, float64: 2.078 -> 1.980 ms
    /// (H100). symgs_levels_wide takes a_ii itself (see symgs.cu's RowEnd).
    inv_diag: DeviceBuf,
    y: DeviceBuf,
}

/// How many levels ahead of the slowest row symgs_levels' warps reach when its levels are
/// narrow. Each waiting warp polls the L2, so warps beyond what the chain of levels can use
/// only slow it. HPCG 104^3 in the natural order (float64, mean level 1558 rows, sweep pair),
/// with 1 / a_ii given and 32 ns poll sleeps (H100, 2026-11-28): 2.7 levels 1.988 ms, 3.0
/// 1.973, 3.4 1.951, 4.2 2.038 (cuSPARSE 3.054 ms in the same call); polling without sleeps,
/// 2.7 levels 1.932 ms and 4.2 2.426: 1% faster at its best, measured once, and far slower
/// where the grid is larger, so the sleeps stay (unsleeping polls on a matrix with wider
/// levels would cost more). With the warp polling as one (symgs.cu's levels_sweep, H200,
/// 2026-11-28, each twice in one call): 2.7 levels 1.444 ms, 3.4 1.361-1.362, 4.2 1.357-1.358,
/// 5.0 1.403-1.404, so 3.4 stays. The grid is sized from the mean level: a matrix of one
/// very wide level among many narrow ones would run that level on few blocks.
const LEVELS_AHEAD: f64 = 3.4;

/// symgs.cu's two entries of the level-scheduled sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LevelKernel {
    /// symgs_levels: a warp a row, for levels narrower than the resident warps.
    WarpARow,
    /// symgs_levels_wide: a half-warp a row, for levels at least as wide as the resident warps,
    /// where rows in flight rather than the chain of levels set the time.
    HalfWarpARow,
}

impl LevelKernel {
    fn entry(self, dtype: DType) -> String {
        match self {
            LevelKernel::WarpARow => format!("symgs_levels_{dtype}"),
            LevelKernel::HalfWarpARow => format!("symgs_levels_wide_{dtype}"),
        }
    }

    fn rows_per_block(self) -> usize {
        let threads_per_row = match self {
            LevelKernel::WarpARow => 32,
            LevelKernel::HalfWarpARow => 16,
        };
        LEVELS_BLOCK as usize / threads_per_row
    }
}

/// The entry and the grid (in blocks) of one sweep over `rows` rows in `levels` levels, given
/// how many blocks of each entry fit the SMs together (the kernels' contract: every warp
/// resident at once, so never more blocks than that).
fn level_sweep_shape(
    rows: usize,
    levels: usize,
    resident_blocks: [u32; 2],
) -> (LevelKernel, u32) {
    let [narrow_blocks, wide_blocks] = resident_blocks;
    let mean_rows_a_level = rows as f64 / levels.max(1) as f64;
    let narrow_warps = narrow_blocks as usize * LevelKernel::WarpARow.rows_per_block();
    let (kernel, blocks) = if mean_rows_a_level >= narrow_warps as f64 {
        (LevelKernel::HalfWarpARow, wide_blocks as usize)
    } else {
        let warps = (LEVELS_AHEAD * mean_rows_a_level).ceil() as usize;
        let blocks = warps.div_ceil(LevelKernel::WarpARow.rows_per_block());
        (LevelKernel::WarpARow, blocks.min(narrow_blocks as usize))
    };
    // No block without a row to take.
    let row_blocks = rows.div_ceil(kernel.rows_per_block());
    (kernel, blocks.min(row_blocks).max(1) as u32)
}

impl<'a> LevelSweep<'a> {
    fn new(gpu: Gpu<'a>, matrix: DeviceMatrix<'a>, dtype: DType) -> Result<Self> {
        let host = matrix.download()?;
        let warp_a_row = gpu.kernel(&LevelKernel::WarpARow.entry(dtype))?;
        let half_warp_a_row = gpu.kernel(&LevelKernel::HalfWarpARow.entry(dtype))?;
        let resident_blocks = [
            gpu.sm_count() * warp_a_row.max_active_blocks_per_sm(LEVELS_BLOCK, 0)?,
            gpu.sm_count() * half_warp_a_row.max_active_blocks_per_sm(LEVELS_BLOCK, 0)?,
        ];
        // The kernels wait on each other's warps: a block that cannot be resident would hang.
        if resident_blocks.contains(&0) {
            bail!("symgs_levels: the driver fits no block of {LEVELS_BLOCK} threads on an SM");
        }
        let sweep = |sweep| -> Result<(LevelKernel, Dims, DeviceBuf)> {
            let (level, count) = levels(&host, sweep);
            let order = gpu.alloc(DType::I32, host.n)?;
            order.copy_from_host(&HostData::I32(level_order(&level, count)))?;
            let (kernel, blocks) = level_sweep_shape(host.n, count, resident_blocks);
            Ok((kernel, Dims::linear(blocks, LEVELS_BLOCK, 0), order))
        };
        let inv_diag = gpu.alloc(dtype, matrix.n)?;
        inv_diag.copy_from_host(&reciprocals(matrix.diag)?)?;
        Ok(LevelSweep {
            sweeps: [sweep(Sweep::Forward)?, sweep(Sweep::Backward)?],
            inv_diag,
            warp_a_row,
            half_warp_a_row,
            pending: gpu.kernel(&format!("symgs_pending_{dtype}"))?,
            y: gpu.alloc(dtype, matrix.n)?,
            matrix,
        })
    }
}

impl Launcher for LevelSweep<'_> {
    fn launch(&mut self) -> Result<()> {
        let m = &self.matrix;
        let n = m.n as i32;
        let fill = Dims::linear((n as u32).div_ceil(256).max(1), 256, 0);
        // Forward: old x in, new values to y. Backward: y in, the final values to x.
        let buffers = [(0, m.x, &self.y), (1, &self.y, m.x)];
        for (&(backward, x_old, x_new), (kernel, dims, order)) in buffers.iter().zip(&self.sweeps) {
            // SAFETY: symgs_pending(T* v, int n): x_new holds n elements.
            unsafe { self.pending.launch(fill, &[x_new.arg(), Arg::I32(n)])? };
            let [row_ptr, col, val, diag, r] = m.csr_args();
            let (entry, diagonal) = match kernel {
                LevelKernel::WarpARow => (&self.warp_a_row, self.inv_diag.arg()),
                LevelKernel::HalfWarpARow => (&self.half_warp_a_row, diag),
            };
            let args = [
                row_ptr,
                col,
                val,
                diagonal,
                r,
                x_old.arg(),
                x_new.arg(),
                order.arg(),
                Arg::I32(n),
                Arg::I32(backward),
            ];
            // SAFETY: symgs.cu's symgs_levels contract (both entries, 1 / a_ii to the narrow
            // one and a_ii to the wide one, as matched above): n rows in every array,
            // `order` a level order of this sweep, x_new pending (filled just before), 256
            // threads a block and no more blocks than fit the SMs at once (level_sweep_shape),
            // so that every warp is resident.
            unsafe { entry.launch(*dims, &args)? };
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        4
    }
}

/// 1 / a_ii for each row, in the diagonal's own type.
fn reciprocals(diag: &DeviceBuf) -> Result<HostData> {
    let mut host = HostData::zeros(diag.dtype(), diag.len());
    diag.copy_to_host(&mut host)?;
    Ok(match host {
        HostData::F32(d) => HostData::F32(d.iter().map(|&a| 1.0 / a).collect()),
        HostData::F64(d) => HostData::F64(d.iter().map(|&a| 1.0 / a).collect()),
        other => bail!("the diagonal holds floats, not {}", other.dtype()),
    })
}

/// The multicolour sweep on sliced ELL: one launch a colour, forward through the colours and
/// back, captured once into a CUDA graph: on HPCG 104^3 (18 colours, 36 launches) a replay took
/// 423 µs where the same launches queued one by one took 466 µs (H100, float64).
struct ColourSweep<'a> {
    graph: Graph,
    _matrix: DeviceMatrix<'a>,
    /// What the graph's kernels read.
    _ell: [DeviceBuf; 4],
}

/// A matrix in sliced ELL, the diagonal left out (see symgs.cu's symgs_colours).
struct SlicedEll {
    slice_ptr: Vec<i32>,
    slice_width: Vec<i32>,
    col: Vec<i32>,
    val: Vec<f64>,
    /// Each colour's first slice.
    first_slice: Vec<i32>,
}

fn sliced_ell(a: &Csr, colour_ptr: &[i32]) -> Result<SlicedEll> {
    let mut ell = SlicedEll {
        slice_ptr: Vec::new(),
        slice_width: Vec::new(),
        col: Vec::new(),
        val: Vec::new(),
        first_slice: Vec::new(),
    };
    for w in colour_ptr.windows(2) {
        let (begin, end) = (w[0] as usize, w[1] as usize);
        ell.first_slice.push(ell.slice_ptr.len() as i32);
        for slice_begin in (begin..end).step_by(SLICE) {
            let rows = slice_begin..(slice_begin + SLICE).min(end);
            let off_diagonal = |i: usize| a.row(i).0.iter().filter(|&&j| j as usize != i).count();
            let width = rows.clone().map(off_diagonal).max().unwrap_or(0);
            let start = ell.col.len();
            ell.slice_ptr.push(
                i32::try_from(start).context("sliced ELL holds 2^31 entries or more")?,
            );
            ell.slice_width.push(width as i32);
            // Padding: the row itself with value 0 (a harmless read of its own x).
            ell.col.resize(start + width * SLICE, 0);
            ell.val.resize(start + width * SLICE, 0.0);
            for lane in 0..SLICE {
                let i = slice_begin + lane;
                let entries: Vec<(i32, f64)> = if rows.contains(&i) {
                    let (cols, vals) = a.row(i);
                    cols.iter()
                        .zip(vals)
                        .filter(|(&j, _)| j as usize != i)
                        .map(|(&j, &v)| (j, v))
                        .collect()
                } else {
                    Vec::new()
                };
                let own = if rows.contains(&i) { i as i32 } else { 0 };
                for k in 0..width {
                    let (j, v) = entries.get(k).copied().unwrap_or((own, 0.0));
                    ell.col[start + k * SLICE + lane] = j;
                    ell.val[start + k * SLICE + lane] = v;
                }
            }
        }
    }
    i32::try_from(ell.col.len()).context("sliced ELL holds 2^31 entries or more")?;
    Ok(ell)
}

impl<'a> ColourSweep<'a> {
    fn new(
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
        matrix: DeviceMatrix<'a>,
        dtype: DType,
        block: u32,
    ) -> Result<Self> {
        let host = matrix.download()?;
        let colour_buf = io.input("colour_ptr")?;
        let mut colour_ptr = HostData::zeros(DType::I32, colour_buf.len());
        colour_buf.copy_to_host(&mut colour_ptr)?;
        let HostData::I32(colour_ptr) = colour_ptr else {
            bail!("colour_ptr holds 32-bit integers");
        };
        let ell = sliced_ell(&host, &colour_ptr)?;
        let upload = |data: HostData| -> Result<DeviceBuf> {
            let buf = gpu.alloc(data.dtype(), data.len())?;
            buf.copy_from_host(&data)?;
            Ok(buf)
        };
        let ell_val = with_float_dtype!(dtype, |T| T::wrap(
            ell.val.iter().map(|&v| T::from_f64(v)).collect()
        ));
        let [slice_ptr, slice_width, ell_col, ell_val] = [
            upload(HostData::I32(ell.slice_ptr))?,
            upload(HostData::I32(ell.slice_width))?,
            upload(HostData::I32(ell.col))?,
            upload(ell_val)?,
        ];
        let kernel = gpu.kernel(&format!("symgs_colours_{dtype}"))?;
        // Each colour's first slice, first row and rows.
        let colours: Vec<(i32, i32, i32)> = colour_ptr
            .windows(2)
            .zip(&ell.first_slice)
            .map(|(w, &slice)| (slice, w[0], w[1] - w[0]))
            .filter(|&(_, _, rows)| rows > 0)
            .collect();
        let graph = gpu.capture(|| {
            for &(first_slice, first_row, rows) in colours.iter().chain(colours.iter().rev()) {
                let grid = (rows as u32).div_ceil(block);
                let args = [
                    slice_ptr.arg(),
                    slice_width.arg(),
                    ell_col.arg(),
                    ell_val.arg(),
                    matrix.diag.arg(),
                    matrix.r.arg(),
                    matrix.x.arg(),
                    Arg::I32(first_slice),
                    Arg::I32(first_row),
                    Arg::I32(rows),
                ];
                // SAFETY: symgs.cu's symgs_colours contract: the colour's rows and slices lie
                // within the arrays built by `sliced_ell` for this matrix, whose columns index
                // rows of x; B (a power of two >= 32) is a multiple of the slice. The arrays
                // live as long as the graph (both are this launcher's).
                unsafe { kernel.launch(Dims::linear(grid, block, 0), &args)? };
            }
            Ok(())
        })?;
        Ok(ColourSweep {
            graph,
            _matrix: matrix,
            _ell: [slice_ptr, slice_width, ell_col, ell_val],
        })
    }
}

impl Launcher for ColourSweep<'_> {
    fn launch(&mut self) -> Result<()> {
        self.graph.launch()
    }
}

/// cuSPARSE's sweep pair: forward, t = r - U x then (D + L) y = t; backward, t = r - L y then
/// (D + U) x = t. Its four triangles are stored apart, and the solves analysed once, here.
struct CusparseSweep<'a> {
    /// Forward and backward: (t -= the other triangle times x, the triangular solve). Declared
    /// first, so dropped before the buffers they point into.
    calls: Vec<(SparseCall<'a>, SparseCall<'a>)>,
    copy: Kernel,
    matrix: DeviceMatrix<'a>,
    t: DeviceBuf,
    /// The forward sweep's result, and the triangles' arrays: the calls read them.
    _y: DeviceBuf,
    _triangles: Vec<[DeviceBuf; 3]>,
}

/// The part of `a` strictly below (or above) the diagonal, or with the diagonal.
fn triangle(a: &Csr, lower: bool, with_diagonal: bool) -> Csr {
    let mut part = Csr {
        n: a.n,
        row_ptr: vec![0],
        col: Vec::new(),
        val: Vec::new(),
    };
    for i in 0..a.n {
        let (cols, vals) = a.row(i);
        for (&j, &v) in cols.iter().zip(vals) {
            let j = j as usize;
            let keep = if lower { j < i } else { j > i } || (with_diagonal && j == i);
            if keep {
                part.col.push(j as i32);
                part.val.push(v);
            }
        }
        part.row_ptr.push(part.col.len() as i32);
    }
    part
}

impl<'a> CusparseSweep<'a> {
    fn new(gpu: Gpu<'a>, matrix: DeviceMatrix<'a>, dtype: DType) -> Result<Self> {
        let sparse = gpu.sparse()?;
        let host = matrix.download()?;
        let upload = |part: &Csr| -> Result<[DeviceBuf; 3]> {
            let row_ptr = gpu.alloc(DType::I32, part.n + 1)?;
            row_ptr.copy_from_host(&HostData::I32(part.row_ptr.clone()))?;
            let col = gpu.alloc(DType::I32, part.col.len())?;
            col.copy_from_host(&HostData::I32(part.col.clone()))?;
            let val = gpu.alloc(dtype, part.val.len())?;
            val.copy_from_host(&with_float_dtype!(dtype, |T| T::wrap(
                part.val.iter().map(|&v| T::from_f64(v)).collect()
            )))?;
            Ok([row_ptr, col, val])
        };
        // Forward: U strictly, then D + L; backward: L strictly, then D + U.
        let triangles = vec![
            upload(&triangle(&host, false, false))?,
            upload(&triangle(&host, true, true))?,
            upload(&triangle(&host, true, false))?,
            upload(&triangle(&host, false, true))?,
        ];
        let n = matrix.n;
        fn csr(n: usize, [row_ptr, col, val]: &[DeviceBuf; 3]) -> CsrRef<'_> {
            CsrRef {
                n,
                row_ptr,
                col,
                val,
            }
        }
        let t = gpu.alloc(dtype, matrix.n)?;
        let y = gpu.alloc(dtype, matrix.n)?;
        // The analysis reads the values: wait for their uploads.
        gpu.synchronize()?;
        let calls = vec![
            (
                sparse.spmv(&csr(n, &triangles[0]), matrix.x, &t, -1.0, 1.0)?,
                sparse.spsv(&csr(n, &triangles[1]), Triangle::Lower, &t, &y)?,
            ),
            (
                sparse.spmv(&csr(n, &triangles[2]), &y, &t, -1.0, 1.0)?,
                sparse.spsv(&csr(n, &triangles[3]), Triangle::Upper, &t, matrix.x)?,
            ),
        ];
        let mut sweep = CusparseSweep {
            copy: gpu.kernel(&format!("symgs_cusparse_{dtype}"))?,
            matrix,
            t,
            calls,
            _triangles: triangles,
            _y: y,
        };
        // One untimed run: cuSPARSE loads its kernels on first use, waiting for the device,
        // which would deadlock against a held stream.
        sweep.launch()?;
        gpu.synchronize()?;
        Ok(sweep)
    }
}

impl Launcher for CusparseSweep<'_> {
    fn launch(&mut self) -> Result<()> {
        let n = self.matrix.n;
        let dims = Dims::linear((n as u32).div_ceil(256).max(1), 256, 0);
        let args = [self.matrix.r.arg(), self.t.arg(), Arg::I32(n as i32)];
        for (product, solve) in &self.calls {
            // SAFETY: symgs_cusparse(src, dst, n): r and t hold n elements.
            unsafe { self.copy.launch(dims, &args)? };
            // SAFETY (both): the calls were made over this launcher's buffers (the case's x,
            // y, t and the triangles), which live as long as it does.
            unsafe {
                product.launch()?;
                solve.launch()?;
            }
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        2 * (1 + 2 * LAUNCHES_PER_LIBRARY_CALL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpcg(nx: usize, ny: usize, nz: usize) -> Csr {
        MatrixSource::Hpcg { nx, ny, nz }.load(0).unwrap()
    }

    fn random(n: usize, per_row: usize, seed: u64) -> Csr {
        MatrixSource::Random { n, per_row }.load(seed).unwrap()
    }

    fn entry(a: &Csr, i: usize, j: usize) -> Option<f64> {
        let (cols, vals) = a.row(i);
        cols.iter().position(|&c| c as usize == j).map(|k| vals[k])
    }

    #[test]
    fn level_sweeps_take_the_half_warp_entry_where_a_level_is_as_wide_as_the_resident_warps() {
        // An H100: 132 SMs, 8 blocks of 256 threads an SM for either entry.
        let h100 = [132 * 8, 132 * 8];
        // HPCG 104^3 in the natural order: 722 levels of 1558 rows on average, 3.4 levels of
        // rows in flight: 5298 warps in 663 blocks.
        assert_eq!(
            level_sweep_shape(1_124_864, 722, h100),
            (LevelKernel::WarpARow, 663)
        );
        // In colour order its 18 levels are 62,492 rows wide: every resident block.
        assert_eq!(
            level_sweep_shape(1_124_864, 18, h100),
            (LevelKernel::HalfWarpARow, 1056)
        );
        // Exactly as wide as the resident warps (1056 x 8) is wide.
        assert_eq!(level_sweep_shape(8448, 1, h100).0, LevelKernel::HalfWarpARow);
        assert_eq!(level_sweep_shape(8447, 1, h100).0, LevelKernel::WarpARow);
        // Narrow levels never ask for more blocks than fit, nor for blocks without rows.
        assert_eq!(
            level_sweep_shape(100_000, 10, [100, 100]),
            (LevelKernel::HalfWarpARow, 100)
        );
        assert_eq!(
            level_sweep_shape(100_000, 20, [1000, 1000]),
            (LevelKernel::WarpARow, 1000)
        );
        assert_eq!(level_sweep_shape(20, 1, [1, 3]), (LevelKernel::HalfWarpARow, 2));
        assert_eq!(level_sweep_shape(20, 20, h100), (LevelKernel::WarpARow, 1));
        assert_eq!(level_sweep_shape(1, 1, h100), (LevelKernel::WarpARow, 1));
        assert_eq!(level_sweep_shape(0, 0, h100), (LevelKernel::WarpARow, 1));
    }

    #[test]
    fn levels_follow_the_dependencies_of_each_sweep() {
        // A 2-D Laplacian on an nx x ny grid: row (x, y) needs (x - 1, y) and (x, y - 1)
        // forward, so its level is x + y, and there are nx + ny - 1 levels either way.
        let a = MatrixSource::Laplace2d { nx: 7, ny: 5 }.load(0).unwrap();
        let (level, count) = levels(&a, Sweep::Forward);
        assert_eq!(count, 7 + 5 - 1);
        assert_eq!(level[3 + 7 * 2], 3 + 2);
        let (level, count) = levels(&a, Sweep::Backward);
        assert_eq!(count, 11);
        assert_eq!(level[34], 0);
        assert_eq!(level[0], 10);
        // HPCG's 27 points: x + 2y + 4z forward (the (x + 1, y - 1) neighbour comes first).
        let a = hpcg(4, 3, 2);
        let (level, count) = levels(&a, Sweep::Forward);
        assert_eq!(count, 3 + 2 * 2 + 4 + 1);
        assert_eq!(level[1 + 4 * (2 + 3)], 1 + 2 * 2 + 4);
        // A level order lists each level's rows together, lowest first.
        let order = level_order(&level, count);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..a.n as i32).collect::<Vec<_>>());
        assert!(order
            .windows(2)
            .all(|w| level[w[0] as usize] <= level[w[1] as usize]));
    }

    fn assert_no_neighbours_share_a_colour(a: &Csr, colour: &[u32]) {
        for i in 0..a.n {
            for &j in a.row(i).0 {
                if j as usize != i {
                    assert_ne!(colour[i], colour[j as usize], "rows {i} and {j}");
                }
            }
        }
    }

    #[test]
    fn colourings_never_give_neighbours_one_colour_and_repeat_with_the_seed() {
        for a in [hpcg(6, 5, 4), random(997, 9, 3)] {
            let colour = jones_plassmann_colour_rows(&a, 11);
            assert_no_neighbours_share_a_colour(&a, &colour);
            assert_eq!(colour, jones_plassmann_colour_rows(&a, 11));
            let colours = colour.iter().max().unwrap() + 1;
            assert!((2..=27).contains(&colours), "{colours} colours");
        }
        assert_eq!(smallest_free([0, 1, 3].into_iter()), 2);
        assert_eq!(smallest_free((0..200).chain([201])), 200);
        assert_eq!(smallest_free(std::iter::empty()), 0);
    }

    #[test]
    fn the_greedy_colouring_finds_a_stencils_pattern_and_never_gives_neighbours_one_colour() {
        let laplace = MatrixSource::Laplace2d { nx: 7, ny: 5 }.load(0).unwrap();
        let cases = [
            (hpcg(6, 5, 4), Some(8)),
            (hpcg(1, 1, 1), Some(1)),
            (laplace, Some(2)),
            (random(997, 9, 3), None),
        ];
        for (a, expected) in cases {
            let colour = greedy_colour_rows(&a);
            assert_no_neighbours_share_a_colour(&a, &colour);
            let colours = colour.iter().max().unwrap() + 1;
            // A greedy colouring never needs more than the most neighbours of a row, plus one.
            let (ptr, _) = symmetric_pattern(&a);
            let most_neighbours = ptr.windows(2).map(|w| w[1] - w[0]).max().unwrap();
            assert!(colours as usize <= most_neighbours + 1, "{colours} colours");
            if let Some(count) = expected {
                assert_eq!(colours, count);
            }
        }
    }

    #[test]
    fn the_colour_permutation_renumbers_rows_and_columns_alike() {
        let a = random(301, 7, 5);
        let colour = jones_plassmann_colour_rows(&a, 2);
        let (p, colour_ptr) = permute_by_colour(&a, &colour);
        assert_eq!(p.nnz(), a.nnz());
        assert_eq!(*colour_ptr.last().unwrap() as usize, a.n);
        // Row `new` of P is row `old` of A, its columns renumbered the same way.
        let mut new_of_old = vec![0; a.n];
        let mut next = colour_ptr.clone();
        for (old, &c) in colour.iter().enumerate() {
            new_of_old[old] = next[c as usize] as usize;
            next[c as usize] += 1;
        }
        for old in 0..a.n {
            for (&j, &v) in a.row(old).0.iter().zip(a.row(old).1) {
                assert_eq!(entry(&p, new_of_old[old], new_of_old[j as usize]), Some(v));
            }
            assert!(p.row(new_of_old[old]).0.windows(2).all(|w| w[0] < w[1]));
        }
        // No two rows of one colour are neighbours.
        for w in colour_ptr.windows(2) {
            for i in w[0] as usize..w[1] as usize {
                assert!(p.row(i)
                    .0
                    .iter()
                    .all(|&j| j as usize == i || !(w[0]..w[1]).contains(&j)));
            }
        }
    }

    fn view_of(a: &Csr) -> (Vec<f64>, Vec<f64>) {
        (a.val.clone(), a.diagonal())
    }

    #[test]
    fn the_sweep_is_hpcgs_reference_and_colours_on_all_cores_give_it_exactly() {
        let a = random(257, 9, 7);
        let (val, diag) = view_of(&a);
        let view = View {
            row_ptr: &a.row_ptr,
            col: &a.col,
            val: &val,
            diag: &diag,
        };
        let r: Vec<f64> = (0..a.n).map(|i| (i as f64 * 0.37).sin()).collect();
        let x0: Vec<f64> = (0..a.n).map(|i| (i as f64 * 0.11).cos()).collect();
        // HPCG's ComputeSYMGS_ref, written out from its dense definition.
        let mut expect = x0.clone();
        let dense = |i: usize, j: usize| entry(&a, i, j).unwrap_or(0.0);
        let n = a.n;
        let rows: Vec<usize> = (0..n).chain((0..n).rev()).collect();
        for i in rows {
            let sum: f64 = (0..n).filter(|&j| j != i).map(|j| dense(i, j) * expect[j]).sum();
            expect[i] = (r[i] - sum) / dense(i, i);
        }
        let mut x = x0.clone();
        sweep(&view, &r, &mut x);
        for (got, want) in x.iter().zip(&expect) {
            assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "{got} vs {want}");
        }
        // The colour-ordered matrix (either colouring) swept sequentially and colour by colour
        // on all cores.
        for colour in [jones_plassmann_colour_rows(&a, 4), greedy_colour_rows(&a)] {
            let (p, colour_ptr) = permute_by_colour(&a, &colour);
            let (val, diag) = view_of(&p);
            let view = View {
                row_ptr: &p.row_ptr,
                col: &p.col,
                val: &val,
                diag: &diag,
            };
            let (mut one, mut all) = (x0.clone(), x0.clone());
            sweep(&view, &r, &mut one);
            sweep_by_colour(&view, &colour_ptr, &r, &mut all);
            assert_eq!(one, all);
        }
    }

    #[test]
    fn sliced_ell_holds_each_row_off_the_diagonal_and_pads_with_the_row_itself() {
        let a = random(101, 7, 9);
        let (p, colour_ptr) = permute_by_colour(&a, &jones_plassmann_colour_rows(&a, 1));
        let ell = sliced_ell(&p, &colour_ptr).unwrap();
        assert_eq!(ell.first_slice.len(), colour_ptr.len() - 1);
        for (c, w) in colour_ptr.windows(2).enumerate() {
            for i in w[0] as usize..w[1] as usize {
                let local = i - w[0] as usize;
                let s = ell.first_slice[c] as usize + local / SLICE;
                let lane = local % SLICE;
                let mut got = Vec::new();
                for k in 0..ell.slice_width[s] as usize {
                    let e = ell.slice_ptr[s] as usize + k * SLICE + lane;
                    if ell.val[e] != 0.0 {
                        got.push((ell.col[e], ell.val[e]));
                    } else {
                        assert_eq!(ell.col[e] as usize, i);
                    }
                }
                let want: Vec<(i32, f64)> = p
                    .row(i)
                    .0
                    .iter()
                    .zip(p.row(i).1)
                    .filter(|(&j, _)| j as usize != i)
                    .map(|(&j, &v)| (j, v))
                    .collect();
                assert_eq!(got, want, "row {i}");
            }
        }
    }

    #[test]
    fn the_four_triangles_add_up_to_the_matrix() {
        let a = random(53, 5, 2);
        let strict_upper = triangle(&a, false, false);
        let lower_and_diagonal = triangle(&a, true, true);
        let strict_lower = triangle(&a, true, false);
        let upper_and_diagonal = triangle(&a, false, true);
        assert_eq!(strict_upper.nnz() + lower_and_diagonal.nnz(), a.nnz());
        assert_eq!(strict_lower.nnz() + upper_and_diagonal.nnz(), a.nnz());
        for i in 0..a.n {
            for &j in a.row(i).0 {
                let j = j as usize;
                let (low, up) = (entry(&lower_and_diagonal, i, j), entry(&strict_upper, i, j));
                assert_eq!(low.is_some(), j <= i);
                assert_eq!(up.is_some(), j > i);
                assert_eq!(low.or(up), entry(&a, i, j));
            }
        }
    }

    #[test]
    fn only_colour_ordered_cases_run_the_multicolour_sweeps() {
        let p = |order| Params {
            matrix: "hpcg:4".into(),
            dtype: DType::F64,
            order,
            block: None,
        };
        assert!(!Symgs.case(p(Order::Natural)).supports("symgs_colours"));
        assert!(!Symgs.case(p(Order::Natural)).supports("colours_threads"));
        assert!(Symgs.case(p(Order::Colour)).supports("symgs_colours"));
        assert!(Symgs.case(p(Order::Natural)).supports("symgs_levels"));
        let data = Symgs.prepare(&p(Order::Colour), 1).unwrap();
        let fact = |name| data.facts.iter().find(|(f, _)| *f == name).unwrap().1;
        assert_eq!(fact("rows"), 64.0);
        assert!(fact("colours") >= 8.0);
        // Grouped by colour, the forward sweep's levels are at most the colours.
        assert!(fact("levels_forward") <= fact("colours"));
        assert!(Symgs.case(p(Order::GreedyColour)).supports("symgs_colours"));
        assert!(Symgs.case(p(Order::GreedyColour)).supports("colours_threads"));
        let greedy = Symgs.prepare(&p(Order::GreedyColour), 1).unwrap();
        let colours = greedy.facts.iter().find(|(f, _)| *f == "colours").unwrap().1;
        assert_eq!(colours, 8.0);
    }
}
