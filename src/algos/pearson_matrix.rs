//! Pearson, steps 2-5 of seed 003 (section 1.1): the full M x M matrix of Pearson coefficients
//! of M series of N values (the seed's random walks, `random_walk`), where the seed stopped at
//! step 2. Every variant computes the means and centred norms, the centred, normalised series
//! z_i = (x_i - mean_i) / ||x_i - mean_i||, and r = Z Z^T (r_ij = sum_k z_ik z_jk), both
//! triangles written.
//!
//! Inputs: `series`, M x N, series after series. Output: `r`, M x M, row-major. Reference: float64
//! from the dtype's values (means, centred norms and the centred dot products all in float64).
//! Its cost is M^2 N multiply-adds; past `FULL_REFERENCE_MACS` it covers only the rows and
//! columns of `CHECKED_SERIES` evenly spaced series, first and last included (the results say
//! how many of the M^2 elements were checked). N < 2, or a constant series (possible with a step
//! too small for the dtype), leaves r undefined (0/0): such a case is refused with the reason.
//!
//! Work: flops = M (M + 1) N, the multiply and the add of each term of the M (M + 1) / 2 distinct
//! coefficients (the useful work, whatever a variant computes: corr_gemm and corr_tf32 do twice
//! that, and the means and norms' 3 M N are left out); bytes = the series read once and r
//! written once.
//!
//! | variant | what |
//! |---|---|
//! | cpu `sequential` | the seed's steps in the element type, one after the other: means, norms, each pair's centred dot product, r |
//! | cpu `threads` | rayon: means and norms in float64, z in the element type, then the lower triangle by bands of rows (dot products accumulated in the element type, 8 lanes), mirrored |
//! | cuda `corr_tiled` | kbench's: means and norms (one block a series, float64), z transposed through shared memory, then 128 x 128 tiles of Z Z^T on and below the diagonal (8 x 8 per thread, double-buffered shared memory), each written to r and its mirror |
//! | cuda `corr_syrk` | z, cublas<S/D>syrk (lower), then a mirror kernel for the other triangle |
//! | cuda `corr_gemm` | z, then cublas<S/D>gemm of the full product (what torch.corrcoef does) |
//! | cuda `corr_tf32` | float32 only: z rounded to the nearest TF32, then the lower triangle on the tensor cores (TF32 inputs, float32 accumulation) as a few strided-batched cublasGemmEx (`Blas::lower_product`), then corr_syrk's mirror; held to a looser tolerance, see `TF32_UNIT_ROUNDOFF` |
//! | cuda `corr_3xtf32` | float32 only: z split in two, z = big + small (big TF32), and r = big small^T + small big^T (bfloat16 on the tensor cores, one product of depth 2N) + big big^T (TF32, products of depth `SPLIT_CHUNK` added one to the next): float32's accuracy at tensor-core speed; lower triangles as corr_tf32, then the mirror |

use std::sync::LazyLock;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::Deserialize;

use super::random_walk::{self, Layout, Walk};
use super::{
    Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice, OutputSpec, Spec,
};
use crate::device::blas::{BlasCall, GemmLayout, Inputs};
use crate::device::{Arg, DeviceBuf, Dims, Kernel, KernelFile, Launcher};
use crate::numerics::{compensated_sum, Real};
use crate::vocab::{DType, Element, Tolerance};
use crate::{walk_axes, with_float_dtype};

#[derive(Debug)]
pub struct PearsonMatrix;

static AXES: &[AxisDef] = &{
    let [m, n, start, step] = walk_axes!();
    [m, n, start, step, AxisDef::dtype(&DType::FLOATS, "f32")]
};

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "pearson_matrix",
    title: "the full M x M Pearson coefficient matrix (seed 003, steps 2-5)",
    axes: AXES,
    kernel_file: KernelFile::embedded("pearson_matrix.cu", include_str!("../../kernels/pearson_matrix.cu")),
    test_grid: "m = [1, 2, 3, 17, 67]\nn = [2, 3, 5, 131, 1_031]\ndtype = [\"f32\", \"f64\"]",
    // Sizes off the tiles (128 for corr_tiled, 32 for the mirror), one past the full reference
    // (1031^2 x 1031 > 2^30: its rows and columns subset is checked).
    gpu_test_grid: "m = [1, 2, 33, 129, 257, 1_031]\nn = [2, 3, 31, 1_000, 1_031]\n\
                    dtype = [\"f32\", \"f64\"]",
    ..Spec::implementing(PearsonMatrix::CPU, PearsonMatrix::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    #[serde(flatten)]
    pub walk: Walk,
    pub dtype: DType,
}

/// The most multiply-adds (M^2 N) the float64 reference of every element may take.
const FULL_REFERENCE_MACS: u64 = 1 << 30;
/// Past that, the series whose rows and columns of r are checked.
const CHECKED_SERIES: usize = 64;
/// corr_tiled's tile edge (TILE in pearson_matrix.cu) and the k-padding its loads need.
const TILE: usize = 128;
const K_PAD: usize = 32;
/// The row stride of z for cuBLAS: 8 elements (32 bytes and more) keep each row aligned.
const LDZ_ALIGN: usize = 8;
/// What a cuBLAS call counts for in `launches_per_run` (it queues one or a few kernels; the
/// count only decides whether a run may wait behind a held stream, at 256).
const BLAS_LAUNCHES: usize = 8;
/// corr_tf32's unit roundoff: z is rounded to the nearest TF32 value (10 explicit mantissa bits)
/// by its own kernel, so every product's inputs are within 2^-11 of z (relative).
const TF32_UNIT_ROUNDOFF: f64 = 1.0 / 2048.0;
/// corr_3xtf32's depth per product of big big^T, in series elements. The tensor cores truncate
/// as they accumulate in float32 (each step loses up to an ulp of the running sum), so a sum's
/// error grows with its length: on an H100, 3xTF32 in one product was off by 7.6e-5 over 8192
/// elements, 6.9e-6 over 777. Products of 1024, added one to the next by cuBLAS (beta 1, a
/// rounded float32 add), kept it at 8.8e-6 (measured up to N = 8192; each chunk adds one
/// rounding, so it grows slowly with N).
const SPLIT_CHUNK: usize = 1024;
/// Rows of r per rayon task in the `threads` implementation.
const BAND: usize = 16;

impl Algorithm for PearsonMatrix {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[
        CpuImpl::new("sequential", |p| Ok(cpu(p, false))),
        // z, a copy of the series.
        CpuImpl::new("threads", |p| Ok(cpu(p, true))).scratch_bytes(series_bytes),
    ];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("corr_tiled", tiled).scratch_bytes(tiled_scratch_bytes),
        KernelImpl::new("corr_syrk", |p, on| blas(p, on, Product::Syrk))
            .scratch_bytes(blas_scratch_bytes),
        KernelImpl::new("corr_gemm", |p, on| blas(p, on, Product::Gemm))
            .scratch_bytes(blas_scratch_bytes),
        // The tensor cores take float32 alone.
        KernelImpl::new("corr_tf32", |p, on| blas(p, on, Product::Tf32))
            .scratch_bytes(lower_scratch_bytes)
            .supports(|p| p.dtype == DType::F32)
            .tolerance(tf32_tolerance),
        KernelImpl::new("corr_3xtf32", |p, on| blas(p, on, Product::Tf32x3))
            .scratch_bytes(split_scratch_bytes)
            .supports(|p| p.dtype == DType::F32),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// The series, r and its reference (with the checked indices).
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        let m = p.walk.m as u64;
        let matrix = m.checked_mul(m)?;
        let reference = if full_reference(p.walk.m, p.walk.n) {
            matrix.checked_mul(8)?
        } else {
            (2 * CHECKED_SERIES as u64)
                .checked_mul(m)?
                .checked_mul(16)?
        };
        series_bytes(p)?
            .checked_add(matrix.checked_mul(p.dtype.size_bytes())?)?
            .checked_add(reference)?
            .checked_add(64)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let (m, n) = (p.walk.m, p.walk.n);
        check_sizes(m, n)?;
        let elements = p.walk.elements().context("m x n overflows")?;
        let cells = m.checked_mul(m).context("m x m overflows")?;
        let (series, rows, reference) = with_float_dtype!(p.dtype, |T| {
            let x: Vec<T> = random_walk::generate(&p.walk, seed, Layout::Series);
            let stats = series_stats(&x, n);
            if let Some(i) = stats.iter().position(|s| s.1.is_nan() || s.1 <= 0.0) {
                bail!(
                    "series {i} is constant in {} (a step of {}% of {} does not change it): its \
                     centred norm is 0 and r is undefined",
                    p.dtype,
                    p.walk.step_pct,
                    p.walk.start
                );
            }
            let rows = checked_series(m, n);
            let reference = reference_rows(&x, n, &stats, &rows);
            (T::wrap(x), rows, reference)
        });
        let tolerance = tolerance(n, p.dtype);
        let output = if rows.len() == m {
            OutputSpec::new("r", p.dtype, reference, tolerance)
        } else {
            let (indices, values) = subset(m, &rows, &reference);
            OutputSpec::subset("r", p.dtype, cells, indices, values, tolerance)?
        };
        let s = p.dtype.size_bytes();
        Ok(CaseData {
            inputs: Buffers(vec![("series", series)]),
            outputs: vec![output],
            bytes_read: elements.checked_mul(s).context("the byte count overflows")?,
            bytes_written: (cells as u64)
                .checked_mul(s)
                .context("the byte count overflows")?,
            flops: (m as u64 * (m as u64 + 1))
                .checked_mul(n as u64)
                .context("the flop count overflows")?,
            elements: 0,
            facts: vec![("checked_series", rows.len() as f64)],
        })
    }
}

fn series_bytes(p: &Params) -> Option<u64> {
    (p.walk.m as u64)
        .checked_mul(p.walk.n as u64)?
        .checked_mul(p.dtype.size_bytes())
}

fn round_up(x: u64, to: u64) -> Option<u64> {
    x.div_ceil(to).checked_mul(to)
}

/// corr_tiled's transposed, padded z, its means and norms.
fn tiled_scratch_bytes(p: &Params) -> Option<u64> {
    let (m, n) = (p.walk.m as u64, p.walk.n as u64);
    round_up(m, TILE as u64)?
        .checked_mul(round_up(n, K_PAD as u64)?)?
        .checked_mul(p.dtype.size_bytes())?
        .checked_add(16 * m)
}

/// The cuBLAS kernels' z at its aligned stride, and cuBLAS's workspace.
fn blas_scratch_bytes(p: &Params) -> Option<u64> {
    (p.walk.m as u64)
        .checked_mul(round_up(p.walk.n as u64, LDZ_ALIGN as u64)?)?
        .checked_mul(p.dtype.size_bytes())?
        .checked_add(32 << 20)
}

/// corr_tf32's scratch: z (of `padded_m` rows), cuBLAS's workspace, and the padded product.
fn lower_scratch_bytes(p: &Params) -> Option<u64> {
    padded_scratch_bytes(p, 4)
}

/// corr_3xtf32's scratch: z's TF32 part (float32) and its bfloat16 operands (three values of
/// two bytes an element), of `padded_m` rows, cuBLAS's workspace, and the padded product.
fn split_scratch_bytes(p: &Params) -> Option<u64> {
    padded_scratch_bytes(p, 4 + 3 * 2)
}

fn padded_scratch_bytes(p: &Params, z_bytes_per_element: u64) -> Option<u64> {
    let (m, mp) = (p.walk.m as u64, padded_m(p.walk.m) as u64);
    let product = match mp == m {
        true => 0,
        false => mp.checked_mul(mp)?.checked_mul(4)?,
    };
    mp.checked_mul(round_up(p.walk.n as u64, LDZ_ALIGN as u64)?)?
        .checked_mul(z_bytes_per_element)?
        .checked_add(32 << 20)?
        .checked_add(product)
}

/// The tensor-core products' side: m rounded up to 8 series (32 bytes), the rows past m zero,
/// so that every block cuBLAS multiplies and writes is 16-byte aligned and a multiple of 8
/// (its fast kernels need both). On an H100 at m = 8191, n = 8192, corr_tf32 took 5.3 ms
/// unpadded, 4.2 with only the halves' splits aligned, 2.1 padded (1.97 at 8192). Where that is
/// not m, the product goes to an mp x mp scratch matrix, from which the mirror copies r.
fn padded_m(m: usize) -> usize {
    m.next_multiple_of(8)
}

/// corr_tf32's inputs carry TF32's rounding, up to u = 2^-11 relative: r moves by at most
/// 2u sum_k |z_ik z_jk| <= 2u (Cauchy-Schwarz), on top of the float32 tolerance for its
/// accumulation.
fn tf32_tolerance(_p: &Params, output: &OutputSpec) -> Tolerance {
    let mut tolerance = output.tolerance;
    tolerance.abs += 2.0 * TF32_UNIT_ROUNDOFF;
    tolerance
}

fn cpu(p: &Params, threaded: bool) -> CpuRun {
    let (m, n, dtype) = (p.walk.m, p.walk.n, p.dtype);
    // The threads' z, allocated once per case.
    let mut z32: Vec<f32> = Vec::new();
    let mut z64: Vec<f64> = Vec::new();
    Box::new(move |inputs, outputs| match dtype {
        DType::F32 => run_cpu(inputs, outputs, m, n, threaded, &mut z32),
        DType::F64 => run_cpu(inputs, outputs, m, n, threaded, &mut z64),
        other => bail!("pearson_matrix runs in f32 or f64, not {other}"),
    })
}

/// The product of the cuBLAS kernels: corr_syrk's lower triangle (mirrored by its own kernel),
/// corr_gemm's full product, or corr_tf32's and corr_3xtf32's lower triangles on the tensor cores
/// (mirrored as corr_syrk's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Product {
    Syrk,
    Gemm,
    Tf32,
    Tf32x3,
}

impl Product {
    /// corr_tf32's and corr_3xtf32's: float32 only, their lower triangle by `Blas::lower_product`
    /// over `padded_m` series.
    fn on_tensor_cores(self) -> bool {
        matches!(self, Product::Tf32 | Product::Tf32x3)
    }
}

/// A pipeline over the case's series and r, run once untimed before it is returned: cuBLAS
/// loads its kernels and picks its algorithm on its first call, which must not happen while a
/// sample waits behind the held stream.
fn pipeline<'a>(
    p: &Params,
    on: OnDevice<'a>,
    build: impl FnOnce(&mut Pipeline<'a>, &'a DeviceBuf, &'a DeviceBuf) -> Result<()>,
) -> Result<Box<dyn Launcher + 'a>> {
    check_sizes(p.walk.m, p.walk.n)?;
    let (x, r) = (on.io.input("series")?, on.io.output("r")?);
    let mut pipeline = Pipeline {
        steps: Vec::new(),
        launches: 0,
        scratch: Vec::new(),
        _io: (x, r),
    };
    build(&mut pipeline, x, r)?;
    pipeline.launch()?;
    on.gpu.synchronize()?;
    Ok(Box::new(pipeline))
}

/// corr_tiled: means and norms, z transposed, then the tiles of Z Z^T.
fn tiled<'a>(p: &Params, on: OnDevice<'a>) -> Result<Box<dyn Launcher + 'a>> {
    pipeline(p, on, |pipeline, x, r| {
        let (m, n, dtype, gpu) = (p.walk.m, p.walk.n, p.dtype, on.gpu);
        let k = |name: &str| gpu.kernel(&format!("{name}_{}", dtype.name()));
        let (m32, n32) = (u32_of(m, "m")?, u32_of(n, "n")?);
        let (mp, np) = (m.div_ceil(TILE) * TILE, n.div_ceil(K_PAD) * K_PAD);
        let (mp32, np32) = (u32_of(mp, "m")?, u32_of(np, "n")?);
        if np / 32 > 65_535 {
            bail!("corr_tiled: n = {n} exceeds its transpose's grid (n <= 2,097,120)");
        }
        let mean = gpu.alloc(DType::F64, m)?;
        let inv_norm = gpu.alloc(DType::F64, m)?;
        let zt = gpu.alloc(dtype, mp.checked_mul(np).context("overflow")?)?;
        pipeline.kernel(
            k("corr_tiled_stats")?,
            Dims::linear(m32, 256, 0),
            vec![
                x.arg(),
                mean.arg(),
                inv_norm.arg(),
                Arg::U32(m32),
                Arg::U32(n32),
            ],
        );
        pipeline.kernel(
            k("corr_tiled_transpose")?,
            Dims {
                grid: (mp32 / 32, np32 / 32, 1),
                block: (32, 8, 1),
                shared_bytes: 0,
            },
            vec![
                x.arg(),
                mean.arg(),
                inv_norm.arg(),
                zt.arg(),
                Arg::U32(m32),
                Arg::U32(n32),
                Arg::U32(mp32),
            ],
        );
        let tiles = triangle(mp / TILE, on.kernel)?;
        pipeline.kernel(
            on.function(dtype)?,
            Dims::linear(tiles, 256, 0),
            vec![
                zt.arg(),
                r.arg(),
                Arg::U32(m32),
                Arg::U32(mp32),
                Arg::U32(np32),
            ],
        );
        pipeline.scratch = vec![mean, inv_norm, zt];
        Ok(())
    })
}

/// corr_syrk, corr_gemm, corr_tf32 and corr_3xtf32: z, the cuBLAS product, and the mirror of a
/// lower triangle.
fn blas<'a>(p: &Params, on: OnDevice<'a>, product: Product) -> Result<Box<dyn Launcher + 'a>> {
    pipeline(p, on, |pipeline, x, r| {
        let (m, n, dtype, gpu) = (p.walk.m, p.walk.n, p.dtype, on.gpu);
        let k = |name: &str| gpu.kernel(&format!("{name}_{}", dtype.name()));
        let (m32, n32) = (u32_of(m, "m")?, u32_of(n, "n")?);
        if product.on_tensor_cores() && dtype != DType::F32 {
            bail!(
                "{} multiplies on the tensor cores, whose products here take float32, not {dtype}",
                on.kernel
            );
        }
        let ldz = n.div_ceil(LDZ_ALIGN) * LDZ_ALIGN;
        let ldz32 = u32_of(ldz, "n")?;
        // The tensor-core products' z has `padded_m` rows, zeros past m (allocations start
        // zeroed, and the normalisation writes m rows).
        let mp = if product.on_tensor_cores() { padded_m(m) } else { m };
        let z = gpu.alloc(dtype, mp.checked_mul(ldz).context("overflow")?)?;
        // corr_3xtf32's bfloat16 operands: rows of [big, small, big], 3 ldz values, two to each
        // 4-byte element.
        let bf16 = match product {
            Product::Tf32x3 => Some(gpu.alloc(
                DType::F32,
                mp.checked_mul(3 * ldz / 2).context("overflow")?,
            )?),
            _ => None,
        };
        // corr_syrk multiplies the z of corr_gemm's normalisation (its entry in the kernel
        // file); the others normalise in their own.
        let normalize = match product {
            Product::Syrk => k("corr_gemm")?,
            _ => on.function(dtype)?,
        };
        let mut args = vec![x.arg(), z.arg()];
        args.extend(bf16.as_ref().map(|b| b.arg()));
        args.extend([Arg::U32(m32), Arg::U32(n32), Arg::U32(ldz32)]);
        pipeline.kernel(normalize, Dims::linear(m32, 256, 0), args);
        let blas = gpu.blas()?;
        // z, row-major M x N with row stride ldz, is column-major N x M (lda = ldz):
        // A^T A is r, M x M, column-major = row-major since it is symmetric.
        let z_at = |offset| (&z, offset, ldz);
        // The padded product: r itself where mp = m, else a scratch matrix the mirror copies.
        let c_scratch = match mp == m {
            true => None,
            false => Some(gpu.alloc(dtype, mp.checked_mul(mp).context("overflow")?)?),
        };
        let c = (c_scratch.as_ref().unwrap_or(r), 0, mp);
        let calls = match product {
            Product::Syrk => vec![blas.syrk(true, m, n, &z, ldz, r, m)?],
            Product::Gemm => vec![blas.gemm(
                (true, false),
                (m, m, n),
                [&z, &z, r],
                &GemmLayout::whole([ldz, ldz, m]),
                Inputs::Native,
                false,
            )?],
            Product::Tf32 => blas.lower_product((mp, ldz), z_at(0), z_at(0), c, Inputs::Tf32, false)?,
            Product::Tf32x3 => {
                // big small^T + small big^T: [big, small] times [small, big], one product of
                // depth 2 ldz in bfloat16 (its terms are 2^-11 of r's, so 8 bits are plenty).
                let bf16 = bf16.as_ref().context("corr_3xtf32's bfloat16 operands")?;
                let mut calls = blas.lower_product(
                    (mp, 2 * ldz),
                    (bf16, 0, 3 * ldz),
                    (bf16, ldz, 3 * ldz),
                    c,
                    Inputs::Bf16,
                    false,
                )?;
                // Then big big^T in TF32, added chunk by chunk (`SPLIT_CHUNK`).
                for start in (0..ldz).step_by(SPLIT_CHUNK) {
                    let depth = SPLIT_CHUNK.min(ldz - start);
                    calls.extend(blas.lower_product(
                        (mp, depth),
                        z_at(start),
                        z_at(start),
                        c,
                        Inputs::Tf32,
                        true,
                    )?);
                }
                calls
            }
        };
        for call in calls {
            pipeline.steps.push(Step::Blas(call));
            pipeline.launches += BLAS_LAUNCHES;
        }
        if product != Product::Gemm {
            // Column-major lower = row-major upper; the mirror fills the rest.
            let blocks = triangle(m.div_ceil(32), on.kernel)?;
            pipeline.kernel(
                k("corr_syrk")?,
                Dims {
                    grid: (blocks, 1, 1),
                    block: (32, 8, 1),
                    shared_bytes: 0,
                },
                vec![c.0.arg(), Arg::U32(u32_of(mp, "m")?), r.arg(), Arg::U32(m32)],
            );
        }
        pipeline.scratch = [Some(z), bf16, c_scratch].into_iter().flatten().collect();
        Ok(())
    })
}

fn check_sizes(m: usize, n: usize) -> Result<()> {
    if m == 0 {
        bail!("m = 0: no series to correlate");
    }
    if n < 2 {
        bail!(
            "n = {n}: a series of fewer than 2 values has a centred norm of 0, and Pearson's r \
             (0/0) is undefined"
        );
    }
    Ok(())
}

fn u32_of(x: usize, what: &str) -> Result<u32> {
    u32::try_from(x).with_context(|| format!("{what} = {x} exceeds the kernels' 32-bit sizes"))
}

/// Blocks of a triangular grid over `tiles` x `tiles` (on and below the diagonal).
fn triangle(tiles: usize, what: &str) -> Result<u32> {
    u32::try_from(tiles * (tiles + 1) / 2)
        .ok()
        .filter(|&b| b < i32::MAX as u32)
        .with_context(|| format!("{what}: {tiles} tiles a side is too many blocks"))
}

/// The default tolerance, absolute (r lies in [-1, 1], and near 0 a relative one means nothing).
/// r = sum_k z_ik z_jk over unit vectors, so sum_k |z_ik z_jk| <= 1: rounding z to the dtype moves
/// r by at most 2u, and the rounding errors of accumulating N products (each at most u times a
/// partial sum of magnitude <= 1) grow like a random walk, sqrt(N) u, N u at worst (u = eps / 2).
/// The tolerance is 4 sqrt(N) eps (at least 32 eps): eight times the random walk, so that the
/// largest error of millions of coefficients stays inside, while a dropped term (which moves r
/// by about 1/N) or a wrong normalisation fails. f32 at N = 8192: 4.3e-5.
fn tolerance(n: usize, dtype: DType) -> Tolerance {
    let eps = dtype.epsilon().unwrap_or(0.0);
    Tolerance {
        rel: 0.0,
        abs: 4.0 * (n.max(64) as f64).sqrt() * eps,
    }
}

fn full_reference(m: usize, n: usize) -> bool {
    (m as u64).saturating_mul(m as u64).saturating_mul(n as u64) <= FULL_REFERENCE_MACS
}

/// The series whose rows (and columns) of r the reference covers: all of them, or
/// `CHECKED_SERIES` evenly spaced ones, the first and the last included.
fn checked_series(m: usize, n: usize) -> Vec<usize> {
    if full_reference(m, n) || m <= CHECKED_SERIES {
        return (0..m).collect();
    }
    let last = CHECKED_SERIES - 1;
    (0..CHECKED_SERIES)
        .map(|k| (k * (m - 1) + last / 2) / last)
        .collect()
}

/// The indices of r the checked rows and columns cover, ascending, with their reference values
/// (`rows_ref` holds each checked series' row of r).
fn subset(m: usize, rows: &[usize], rows_ref: &[f64]) -> (Vec<usize>, Vec<f64>) {
    let mut indices = Vec::with_capacity(2 * rows.len() * m);
    let mut values = Vec::with_capacity(2 * rows.len() * m);
    for i in 0..m {
        match rows.binary_search(&i) {
            Ok(k) => {
                indices.extend(i * m..(i + 1) * m);
                values.extend_from_slice(&rows_ref[k * m..(k + 1) * m]);
            }
            Err(_) => {
                for (k, &s) in rows.iter().enumerate() {
                    indices.push(i * m + s);
                    // r is symmetric: r[i][s] = r[s][i].
                    values.push(rows_ref[k * m + i]);
                }
            }
        }
    }
    (indices, values)
}

/// Each series' mean and centred norm, in float64 (a compensated sum, then the two-pass sum of
/// squares).
fn series_stats<T: Element>(x: &[T], n: usize) -> Vec<(f64, f64)> {
    x.par_chunks(n)
        .map(|s| {
            let mean = compensated_sum(s.iter().map(|v| v.to_f64())) / n as f64;
            let squares = compensated_sum(s.iter().map(|v| (v.to_f64() - mean).powi(2)));
            (mean, squares.sqrt())
        })
        .collect()
}

/// Series whose centred copies are computed together for the reference's dot products.
const REFERENCE_BLOCK: usize = 16;

/// r's rows `rows` (rows.len() x M, row after row) in float64.
fn reference_rows<T: Element>(x: &[T], n: usize, stats: &[(f64, f64)], rows: &[usize]) -> Vec<f64> {
    let m = stats.len();
    let centred = |i: usize| -> Vec<f64> {
        let mean = stats[i].0;
        x[i * n..(i + 1) * n]
            .iter()
            .map(|v| v.to_f64() - mean)
            .collect()
    };
    let checked: Vec<Vec<f64>> = rows.par_iter().map(|&s| centred(s)).collect();
    // Blocks of series j, each centred once, against every checked row.
    let blocks: Vec<Vec<f64>> = (0..m.div_ceil(REFERENCE_BLOCK))
        .into_par_iter()
        .map(|b| {
            let js: Vec<usize> = (b * REFERENCE_BLOCK..m.min((b + 1) * REFERENCE_BLOCK)).collect();
            let cj: Vec<Vec<f64>> = js.iter().map(|&j| centred(j)).collect();
            let mut out = Vec::with_capacity(rows.len() * js.len());
            for (k, &s) in rows.iter().enumerate() {
                for (c, &j) in cj.iter().zip(&js) {
                    out.push(dot_f64(&checked[k], c) / (stats[s].1 * stats[j].1));
                }
            }
            out
        })
        .collect();
    let mut reference = vec![0.0; rows.len() * m];
    for (b, block) in blocks.iter().enumerate() {
        let j0 = b * REFERENCE_BLOCK;
        let width = block.len() / rows.len().max(1);
        for k in 0..rows.len() {
            reference[k * m + j0..k * m + j0 + width]
                .copy_from_slice(&block[k * width..(k + 1) * width]);
        }
    }
    reference
}

/// A float64 dot product with four accumulators.
fn dot_f64(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            acc[l] += x[l] * y[l];
        }
    }
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + tail
}

fn run_cpu<T: Real>(
    inputs: &Buffers,
    outputs: &mut Buffers,
    m: usize,
    n: usize,
    threaded: bool,
    z: &mut Vec<T>,
) -> Result<()> {
    let x = inputs.get::<T>("series")?;
    let r = outputs.get_mut::<T>("r")?;
    if threaded {
        z.resize(m * n, T::ZERO);
        threads(x, m, n, z, r);
    } else {
        sequential(x, m, n, r);
    }
    Ok(())
}

fn sqrt<T: Real>(v: T) -> T {
    // Correctly rounded for f32 too: a float64 square root rounded to float32 is.
    T::from_f64(v.to_f64().sqrt())
}

/// The seed's steps in the element type, one after the other (the seed's sequential program in
/// float): the means (step 2), the centred norms (step 3), each pair's centred dot product
/// (step 4) and the coefficient (step 5).
fn sequential<T: Real>(x: &[T], m: usize, n: usize, r: &mut [T]) {
    let count = T::from_f64(n as f64);
    let means: Vec<T> = x
        .chunks(n)
        .map(|s| s.iter().fold(T::ZERO, |a, &v| a + v) / count)
        .collect();
    let norms: Vec<T> = x
        .chunks(n)
        .zip(&means)
        .map(|(s, &mean)| sqrt(s.iter().fold(T::ZERO, |a, &v| a + (v - mean) * (v - mean))))
        .collect();
    for i in 0..m {
        for j in i..m {
            let (xi, xj) = (&x[i * n..(i + 1) * n], &x[j * n..(j + 1) * n]);
            let numerator = xi
                .iter()
                .zip(xj)
                .fold(T::ZERO, |a, (&u, &v)| a + (u - means[i]) * (v - means[j]));
            let coefficient = numerator / (norms[i] * norms[j]);
            r[i * m + j] = coefficient;
            r[j * m + i] = coefficient;
        }
    }
}

/// Eight lanes of products accumulated in the element type, combined pairwise.
fn dot<T: Real>(a: &[T], b: &[T]) -> T {
    let mut acc = [T::ZERO; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let mut tail = T::ZERO;
    for (&u, &v) in ca.remainder().iter().zip(cb.remainder()) {
        tail = tail + u * v;
    }
    for (u, v) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] = acc[l] + u[l] * v[l];
        }
    }
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])) + tail
}

/// rayon: z in the element type from float64 means and norms, the lower triangle by bands of
/// `BAND` rows (each task its own rows of r, their columns in blocks of `BAND` so that both
/// blocks' series stay in cache), then the upper triangle mirrored in cache-sized blocks.
fn threads<T: Real>(x: &[T], m: usize, n: usize, z: &mut [T], r: &mut [T]) {
    z.par_chunks_mut(n)
        .zip(x.par_chunks(n))
        .for_each(|(zs, xs)| {
            let mean = compensated_sum(xs.iter().map(|v| v.to_f64())) / n as f64;
            let squares = compensated_sum(xs.iter().map(|v| (v.to_f64() - mean).powi(2)));
            let inv_norm = 1.0 / squares.sqrt();
            for (zv, xv) in zs.iter_mut().zip(xs) {
                *zv = T::from_f64((xv.to_f64() - mean) * inv_norm);
            }
        });
    let z: &[T] = z;
    r.par_chunks_mut(BAND * m)
        .enumerate()
        .for_each(|(band, rows)| {
            let i0 = band * BAND;
            let last = i0 + rows.len() / m - 1;
            for j0 in (0..=last).step_by(BAND) {
                for (li, row) in rows.chunks_mut(m).enumerate() {
                    let i = i0 + li;
                    let zi = &z[i * n..(i + 1) * n];
                    for j in j0..(j0 + BAND).min(i + 1) {
                        row[j] = dot(zi, &z[j * n..(j + 1) * n]);
                    }
                }
            }
        });
    const B: usize = 64;
    for i0 in (0..m).step_by(B) {
        for j0 in (i0..m).step_by(B) {
            for i in i0..(i0 + B).min(m) {
                for j in j0.max(i + 1)..(j0 + B).min(m) {
                    r[i * m + j] = r[j * m + i];
                }
            }
        }
    }
}

/// One step of a run: a kernel of the file, or a cuBLAS call.
enum Step<'a> {
    Kernel {
        kernel: Kernel,
        dims: Dims,
        args: Vec<Arg>,
    },
    Blas(BlasCall<'a>),
}

/// A variant's launches in order, with its scratch.
struct Pipeline<'a> {
    steps: Vec<Step<'a>>,
    launches: usize,
    /// z (or zt, the means and norms): allocated once, when the launcher is made.
    scratch: Vec<DeviceBuf>,
    _io: (&'a DeviceBuf, &'a DeviceBuf),
}

impl Pipeline<'_> {
    fn kernel(&mut self, kernel: Kernel, dims: Dims, args: Vec<Arg>) {
        self.steps.push(Step::Kernel { kernel, dims, args });
        self.launches += 1;
    }
}

impl Launcher for Pipeline<'_> {
    fn launch(&mut self) -> Result<()> {
        for step in &self.steps {
            match step {
                // SAFETY: each kernel's arguments follow its signature in pearson_matrix.cu
                // (pointers, then unsigned ints) and its launch contract there: grids and blocks
                // as it states, x M x N, r M x M, z M x ldz, zt np x mp, the means and norms M
                // doubles, all allocated in `cuda` with those sizes and kept alive by `scratch`
                // and the case's `DeviceIo`.
                Step::Kernel { kernel, dims, args } => unsafe { kernel.launch(*dims, args)? },
                // SAFETY: the call's buffers (z, r) are `scratch` and the case's output, alive as
                // long as the launcher, and only this stream writes them.
                Step::Blas(call) => unsafe { call.launch()? },
            }
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        self.launches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(m: usize, n: usize, dtype: DType) -> Params {
        Params {
            walk: Walk {
                m,
                n,
                start: 100.0,
                step_pct: 1.0,
            },
            dtype,
        }
    }

    /// Pearson's r of two series by the textbook formula, in float64.
    fn naive_r(a: &[f64], b: &[f64]) -> f64 {
        let n = a.len() as f64;
        let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
        let num: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
        let da: f64 = a.iter().map(|x| (x - ma).powi(2)).sum::<f64>().sqrt();
        let db: f64 = b.iter().map(|y| (y - mb).powi(2)).sum::<f64>().sqrt();
        num / (da * db)
    }

    #[test]
    fn the_reference_is_the_textbook_coefficient_symmetric_with_a_unit_diagonal() {
        let p = params(9, 50, DType::F64);
        let data = PearsonMatrix.prepare(&p, 5).unwrap();
        let x = data.inputs.get::<f64>("series").unwrap();
        let r = &data.outputs[0].reference;
        assert_eq!(data.outputs[0].checked, None);
        assert_eq!(r.len(), 81);
        for i in 0..9 {
            assert!((r[i * 9 + i] - 1.0).abs() < 1e-14);
            for j in 0..9 {
                let want = naive_r(&x[i * 50..(i + 1) * 50], &x[j * 50..(j + 1) * 50]);
                assert!((r[i * 9 + j] - want).abs() < 1e-13, "{i} {j}");
                assert_eq!(r[i * 9 + j], r[j * 9 + i]);
                assert!(r[i * 9 + j].abs() <= 1.0 + 1e-15);
            }
        }
        // Random walks of one start correlate strongly, either way: the case is not trivial.
        assert!(r.iter().any(|&v| v.abs() > 0.5 && v < 0.999));
        assert!(r.iter().any(|&v| v.abs() < 0.5));
        assert_eq!(data.flops, 9 * 10 * 50);
        assert_eq!((data.bytes_read, data.bytes_written), (9 * 50 * 8, 81 * 8));
    }

    #[test]
    fn short_or_constant_series_are_refused_with_the_reason() {
        let err = PearsonMatrix
            .prepare(&params(3, 1, DType::F32), 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("n = 1") && err.contains("undefined"), "{err}");
        let err = PearsonMatrix
            .prepare(&params(0, 5, DType::F32), 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("m = 0"), "{err}");
        // A step far below float32's resolution at 100 leaves every value at 100.
        let mut p = params(2, 10, DType::F32);
        p.walk.step_pct = 1e-7;
        let err = PearsonMatrix.prepare(&p, 1).unwrap_err().to_string();
        assert!(
            err.contains("constant") && err.contains("norm is 0"),
            "{err}"
        );
        // In float64 the same step still moves the values.
        p.dtype = DType::F64;
        assert!(PearsonMatrix.prepare(&p, 1).is_ok());
    }

    #[test]
    fn large_cases_check_evenly_spaced_rows_and_columns_against_the_full_reference() {
        // Subset-sized (1100^2 x 1000 > 2^30), and the subset matches the full computation.
        let (m, n) = (1100, 1000);
        let rows = checked_series(m, n);
        assert_eq!(rows.len(), CHECKED_SERIES);
        assert_eq!((rows[0], rows[63]), (0, m - 1));
        assert!(rows.windows(2).all(|w| w[0] < w[1]));
        let p = params(m, n, DType::F32);
        let data = PearsonMatrix.prepare(&p, 3).unwrap();
        let out = &data.outputs[0];
        let indices = out.checked.as_ref().unwrap();
        assert_eq!(out.capacity, m * m);
        assert_eq!(indices.len(), 2 * 64 * m - 64 * 64);
        assert_eq!(indices.len(), out.reference.len());
        // Spot-check against a direct float64 computation, rows and columns.
        let x: Vec<f64> = data
            .inputs
            .get::<f32>("series")
            .unwrap()
            .iter()
            .map(|&v| v as f64)
            .collect();
        let series = |i: usize| &x[i * n..(i + 1) * n];
        for (&index, &value) in indices.iter().zip(&out.reference).step_by(997) {
            let (i, j) = (index / m, index % m);
            assert!(rows.contains(&i) || rows.contains(&j));
            assert!((value - naive_r(series(i), series(j))).abs() < 1e-12);
        }
        assert!(data.facts.contains(&("checked_series", 64.0)));
    }

    #[test]
    fn a_subset_checked_case_runs_through_the_pipeline_and_says_so() {
        let text = "[study]\nname = \"t\"\nalgorithm = \"pearson_matrix\"\nseed = 2\n\
                    [grid]\nm = 1100\nn = 1000\n\
                    [[variant]]\nname = \"threads\"\nbackend = \"cpu\"\nimpl = \"threads\"\n\
                    [measure]\nwarmup = 0\nmin_samples = 1\nmax_samples = 1\n";
        let manifest = crate::manifest::parse(std::path::Path::new("t.toml"), text).unwrap();
        let case = &crate::plan::expand(&manifest).unwrap()[0];
        let dir = std::env::temp_dir().join(format!("kbench-pm-{}", std::process::id()));
        let settings = crate::run::case::CaseSettings {
            measure: &manifest.measure,
            save_outputs: None,
            results_path: &dir.join("r.json"),
        };
        let mut gpu = crate::run::executor::GpuState::Unavailable("no GPU in this test".into());
        let study = crate::run::case::WorkerStudy::of(&manifest);
        let result = crate::run::case::run_case(&study, case, &mut gpu, &settings, &mut |_| {});
        assert_eq!(
            result.status,
            crate::record::CaseStatus::Passed,
            "{:?}",
            result.reason
        );
        let accuracy = &result.outputs[0].accuracy;
        assert_eq!(accuracy.subset_of, Some(1100 * 1100));
        assert_eq!(accuracy.elements, 2 * 64 * 1100 - 64 * 64);
        assert!(accuracy.max_abs_err > 0.0 && accuracy.max_abs_err < accuracy.tolerance.abs);
    }

    #[test]
    fn cpu_implementations_match_the_reference_and_write_both_triangles() {
        for dtype in DType::FLOATS {
            let p = params(37, 301, dtype);
            let data = PearsonMatrix.prepare(&p, 9).unwrap();
            for implementation in &SPEC.cpu_impls {
                let mut run = PearsonMatrix.case(p).cpu(implementation).unwrap();
                let mut out = data.output_buffers();
                run(&data.inputs, &mut out).unwrap();
                let got = out.data("r").unwrap().to_f64();
                let report = crate::verify::compare(
                    &got,
                    &data.outputs[0].reference,
                    data.outputs[0].tolerance,
                );
                assert!(report.passed, "{implementation} {dtype}: {report:?}");
                for i in 0..37 {
                    for j in 0..37 {
                        assert_eq!(got[i * 37 + j], got[j * 37 + i], "{implementation}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_dropped_term_fails_the_tolerance() {
        // Removing one product of N moves r by about 1/N, far outside 4 sqrt(N) eps.
        let n = 8192;
        let tol = tolerance(n, DType::F32);
        assert!((tol.abs - 4.0 * 8192f64.sqrt() * f32::EPSILON as f64).abs() < 1e-12);
        assert!(tol.abs < 1e-4);
        assert!(tol.abs < 0.1 / n as f64 * 4.0);
        assert!(tolerance(2, DType::F64).abs == 32.0 * f64::EPSILON);
    }

    #[test]
    fn tf32_runs_in_float32_only_with_its_own_budget() {
        assert!(PearsonMatrix.case(params(4, 4, DType::F32)).supports("corr_tf32"));
        assert!(!PearsonMatrix.case(params(4, 4, DType::F64)).supports("corr_tf32"));
        assert!(PearsonMatrix.case(params(4, 4, DType::F64)).supports("corr_syrk"));
        let data = PearsonMatrix
            .prepare(&params(4, 8192, DType::F32), 1)
            .unwrap();
        let out = &data.outputs[0];
        let tf32 = PearsonMatrix.case(params(4, 8192, DType::F32)).tolerance("corr_tf32", out);
        let plain = PearsonMatrix.case(params(4, 8192, DType::F32)).tolerance("corr_gemm", out);
        assert_eq!(plain, out.tolerance);
        assert!((tf32.abs - plain.abs - 1.0 / 1024.0).abs() < 1e-15);
    }

    #[test]
    fn footprints_count_the_reference_subset_and_scratch() {
        let p = params(8192, 8192, DType::F32);
        let cpu = PearsonMatrix.case(p).footprint_bytes("sequential").unwrap();
        let gpu = PearsonMatrix.case(p).footprint_bytes("corr_tiled").unwrap();
        // Series and r, 256 MiB each, and the subset's indices and values.
        assert!(cpu > 512 << 20 && cpu < 530 << 20, "{cpu}");
        assert!(gpu > cpu + (255 << 20), "{gpu}");
        let huge = params(1 << 40, 1 << 40, DType::F64);
        assert_eq!(PearsonMatrix.case(huge).footprint_bytes("corr_gemm"), None);
    }
}
