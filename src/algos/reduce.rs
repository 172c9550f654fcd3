//! Sum reduction (seed 004, and seed 003's unrolled kernel): one input vector `x`, one scalar
//! `sum` out.
//!
//! Inputs: i32 uniform in [-100, 100] (sums wrap modulo 2^32, exactly as the GPU's do, so integers
//! must match exactly); f32 and f64 uniform in [0, 1), so the sum is well conditioned and its
//! relative error measures the summation order alone. The reference is a compensated (Neumaier)
//! float64 sum of the same values.

use std::sync::LazyLock;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Deserialize;

use super::{
    Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice, OutputSpec, Spec,
};
use crate::device::{Arg, DeviceBuf, Dims, Gpu, Kernel, KernelFile, Launcher};
use crate::numerics::compensated_sum;
use crate::vocab::{DType, Element, HostData, Tolerance};

#[derive(Debug)]
pub struct Reduce;

static AXES: &[AxisDef] = &[
    AxisDef::size("n", "number of elements summed"),
    AxisDef::dtype(&DType::BUILT_IN, "f32"),
    AxisDef::BLOCK,
];

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "reduce",
    title: "sum of a vector (parallel reduction)",
    axes: AXES,
    kernel_file: KernelFile::embedded("reduce.cu", include_str!("../../kernels/reduce.cu")),
    test_grid: "n = [0, 1, 2, 255, 257, 65_537, 100_003]\ndtype = [\"i32\", \"f32\", \"f64\"]",
    gpu_test_grid: "n = [0, 1, 31, 33, 1000, 65_537, 1_000_003, 4_194_319]\n\
                    dtype = [\"i32\", \"f32\", \"f64\"]\nblock = [32, 64, 128, 256, 512, 1024]",
    ..Spec::implementing(Reduce::CPU, Reduce::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    pub n: usize,
    pub dtype: DType,
    /// CUDA variants only.
    pub block: Option<u32>,
}

/// Elements a CPU tree step sums before handing partials up, like one GPU block.
const TREE_BLOCK: usize = 256;
/// Elements per rayon task: large enough that scheduling costs nothing next to the adds.
const THREAD_CHUNK: usize = 1 << 16;

impl Algorithm for Reduce {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[
        CpuImpl::new("sequential", |p| Ok(cpu_sum(p, Order::Sequential))),
        CpuImpl::new("pairwise", |p| Ok(cpu_sum(p, Order::Pairwise))),
        CpuImpl::new("threads", |p| Ok(cpu_sum(p, Order::Threads))),
    ];

    // The seed's multi-pass kernels differ in (elements per block, dynamic shared bytes), as
    // multiples of (block, block x element size).
    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("reduce_naive", |p, on| MultiPass::launcher(p, on, 2, 2)),
        KernelImpl::new("reduce_optimized", |p, on| MultiPass::launcher(p, on, 1, 1)),
        KernelImpl::new("reduce_unrolled", |p, on| MultiPass::launcher(p, on, 2, 1)),
        KernelImpl::new("reduce_fast", |p, on| Fast::launcher(p, on)),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        (p.n as u64)
            .checked_mul(p.dtype.size_bytes())?
            .checked_add(64)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let dtype = p.dtype;
        // One stream per dtype, so every n takes a prefix of the same draws.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ dtype.size_bytes() ^ ((dtype as u64) << 32));
        let (input, reference) = match dtype {
            DType::I32 => {
                let x: Vec<i32> = (0..p.n).map(|_| rng.random_range(-100..=100)).collect();
                let wrapped = x.iter().fold(0i32, |acc, &v| acc.wrapping_add(v));
                (HostData::I32(x), wrapped as f64)
            }
            DType::F32 => {
                let x: Vec<f32> = (0..p.n).map(|_| rng.random::<f32>()).collect();
                let reference = compensated_sum(x.iter().map(|&v| v as f64));
                (HostData::F32(x), reference)
            }
            DType::F64 => {
                let x: Vec<f64> = (0..p.n).map(|_| rng.random::<f64>()).collect();
                let reference = compensated_sum(x.iter().copied());
                (HostData::F64(x), reference)
            }
            other => anyhow::bail!("reduce runs in i32, f32 or f64, not {other}"),
        };
        Ok(CaseData {
            inputs: Buffers(vec![("x", input)]),
            outputs: vec![OutputSpec::new(
                "sum",
                dtype,
                vec![reference],
                tolerance(p.n, dtype),
            )],
            // x read once, the sum written once.
            bytes_read: (p.n as u64)
                .checked_mul(dtype.size_bytes())
                .context("the byte count overflows")?,
            bytes_written: dtype.size_bytes(),
            flops: p.n.saturating_sub(1) as u64,
            elements: 0,
            facts: Vec::new(),
        })
    }
}

/// A CPU sum in `order`, of the case's dtype.
fn cpu_sum(p: &Params, order: Order) -> CpuRun {
    let dtype = p.dtype;
    Box::new(move |inputs, outputs| {
        macro_rules! run {
            ($t:ty) => {{
                let sum = sum::<$t>(inputs.get::<$t>("x")?, order);
                outputs.get_mut::<$t>("sum")?[0] = sum;
            }};
        }
        match dtype {
            DType::I32 => run!(i32),
            DType::F32 => run!(f32),
            DType::F64 => run!(f64),
            other => anyhow::bail!("reduce runs in i32, f32 or f64, not {other}"),
        }
        Ok(())
    })
}

/// The default tolerance. Rounding errors of a float sum of n random terms grow like
/// sqrt(n) * eps (a random walk; the worst case is n * eps). The tolerance allows twice that, and
/// never less than 8 eps, so a sequential sum passes where its error is the expected one, while a
/// wrong sum (a dropped or repeated element moves the result by ~1/n) fails. Integers are exact.
fn tolerance(n: usize, dtype: DType) -> Tolerance {
    match dtype.epsilon() {
        Some(eps) => Tolerance::relative((2.0 * (n.max(1) as f64).sqrt()).max(8.0) * eps),
        None => Tolerance::EXACT,
    }
}

/// The order a CPU implementation adds in.
#[derive(Debug, Clone, Copy)]
enum Order {
    /// The seed's loop, accumulating in the element type.
    Sequential,
    /// The order a GPU tree sums in.
    Pairwise,
    /// rayon over chunks.
    Threads,
}

/// Addition as the GPU does it: integers wrap modulo 2^32.
trait Summand: Element {
    const ZERO: Self;
    fn add(a: Self, b: Self) -> Self;
}

impl Summand for i32 {
    const ZERO: i32 = 0;
    fn add(a: i32, b: i32) -> i32 {
        a.wrapping_add(b)
    }
}

impl Summand for f32 {
    const ZERO: f32 = 0.0;
    fn add(a: f32, b: f32) -> f32 {
        a + b
    }
}

impl Summand for f64 {
    const ZERO: f64 = 0.0;
    fn add(a: f64, b: f64) -> f64 {
        a + b
    }
}

fn sum<T: Summand>(x: &[T], order: Order) -> T {
    match order {
        Order::Sequential => x.iter().fold(T::ZERO, |a, &b| T::add(a, b)),
        Order::Pairwise => tree_sum(x),
        Order::Threads => x
            .par_chunks(THREAD_CHUNK)
            .map(|c| c.iter().fold(T::ZERO, |a, &b| T::add(a, b)))
            .reduce(|| T::ZERO, T::add),
    }
}

/// Sums in the order a GPU tree reduction does: blocks of `TREE_BLOCK` reduced by halving strides
/// (sequential addressing), then the block sums reduced the same way, until one is left.
fn tree_sum<T: Summand>(x: &[T]) -> T {
    if x.is_empty() {
        return T::ZERO;
    }
    let mut level: Vec<T> = x.chunks(TREE_BLOCK).map(block_tree).collect();
    while level.len() > 1 {
        level = level.chunks(TREE_BLOCK).map(block_tree).collect();
    }
    level[0]
}

fn block_tree<T: Summand>(chunk: &[T]) -> T {
    let mut shared = [T::ZERO; TREE_BLOCK];
    shared[..chunk.len()].copy_from_slice(chunk);
    let mut stride = TREE_BLOCK / 2;
    while stride > 0 {
        for t in 0..stride {
            shared[t] = T::add(shared[t], shared[t + stride]);
        }
        stride /= 2;
    }
    shared[0]
}

/// `reduce_naive`, `reduce_optimized` and `reduce_unrolled`: the seed's scheme. Each pass writes
/// one partial sum per block, and the partials are reduced again (ping-ponging between two
/// scratch buffers) until one block's pass writes the output. The passes are worked out once.
struct MultiPass<'a> {
    kernel: Kernel,
    passes: Vec<(Dims, [Arg; 3])>,
    _buffers: (&'a DeviceBuf, &'a DeviceBuf, DeviceBuf, DeviceBuf),
}

impl<'a> MultiPass<'a> {
    /// The launcher of a multi-pass kernel whose blocks sum `per_thread` elements a thread and
    /// hold `shared_per_thread` elements a thread in shared memory.
    fn launcher(
        p: &Params,
        on: OnDevice<'a>,
        per_thread: u32,
        shared_per_thread: u32,
    ) -> Result<Box<dyn Launcher + 'a>> {
        let block = p.block.context("reduce's kernels need a block size")?;
        let (x, out) = (on.io.input("x")?, on.io.output("sum")?);
        let elem = p.dtype.size_bytes() as u32;
        let (per_block, shared_bytes) = (per_thread * block, shared_per_thread * block * elem);
        let function = on.function(p.dtype)?;
        Ok(Box::new(MultiPass::new(
            on.gpu,
            function,
            x,
            out,
            p,
            block,
            per_block,
            shared_bytes,
        )?))
    }

    #[allow(clippy::too_many_arguments)]
    fn new(
        gpu: Gpu<'a>,
        kernel: Kernel,
        x: &'a DeviceBuf,
        out: &'a DeviceBuf,
        p: &Params,
        block: u32,
        elems_per_block: u32,
        shared_bytes: u32,
    ) -> Result<Self> {
        let per_block = elems_per_block as u64;
        let first = (p.n as u64).div_ceil(per_block).max(1) as usize;
        let a = gpu.alloc(p.dtype, first)?;
        let b = gpu.alloc(p.dtype, first.div_ceil(per_block as usize))?;
        let mut passes = Vec::new();
        let (mut src, mut len) = (x.arg(), p.n as u64);
        let mut scratch = [a.arg(), b.arg()].into_iter().cycle();
        loop {
            let grid = len.div_ceil(per_block).max(1);
            let dst = if grid == 1 {
                out.arg()
            } else {
                scratch.next().expect("cycles forever")
            };
            let grid = u32::try_from(grid).context("the first pass's grid is too large")?;
            passes.push((
                Dims::linear(grid, block, shared_bytes),
                [src, dst, Arg::U64(len)],
            ));
            if grid == 1 {
                break;
            }
            (src, len) = (dst, grid as u64);
        }
        Ok(MultiPass {
            kernel,
            passes,
            _buffers: (x, out, a, b),
        })
    }
}

impl Launcher for MultiPass<'_> {
    fn launch(&mut self) -> Result<()> {
        for (dims, args) in &self.passes {
            // SAFETY: the kernels' signature is (const T* in, T* out, unsigned long long n).
            // Each pass reads `n` elements of its source (the input, or the previous pass's
            // partials) and writes `grid` partials into a distinct buffer (scratch holds the first
            // pass's grid, later passes are smaller; the last writes the output); the shared size
            // is what the kernel indexes for this block size (see reduce.cu's contract).
            unsafe { self.kernel.launch(*dims, args)? };
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        self.passes.len()
    }

    fn graph_refused(&self) -> Option<&'static str> {
        None
    }
}

/// `reduce_fast`: one launch over a resident grid, each block reducing a grid-stride share, the
/// last block to finish summing the partials.
struct Fast<'a> {
    kernel: Kernel,
    dims: Dims,
    args: [Arg; 5],
    _buffers: (&'a DeviceBuf, &'a DeviceBuf, DeviceBuf, DeviceBuf),
}

/// reduce_fast keeps 4 vectors of 16 bytes in flight per thread and iteration.
const FAST_BYTES_PER_THREAD_ITER: u64 = 64;
/// reduce_fast is compiled for 2048 resident threads per SM (`__launch_bounds__(1024, 2)`).
const RESIDENT_THREADS_PER_SM: u64 = 2048;

impl<'a> Fast<'a> {
    fn launcher(p: &Params, on: OnDevice<'a>) -> Result<Box<dyn Launcher + 'a>> {
        let block = p.block.context("reduce's kernels need a block size")?;
        let (x, out) = (on.io.input("x")?, on.io.output("sum")?);
        let function = on.function(p.dtype)?;
        Ok(Box::new(Fast::new(on.gpu, function, x, out, p, block)?))
    }

    fn new(
        gpu: Gpu<'a>,
        kernel: Kernel,
        x: &'a DeviceBuf,
        out: &'a DeviceBuf,
        p: &Params,
        block: u32,
    ) -> Result<Self> {
        let elems_per_thread_iter = FAST_BYTES_PER_THREAD_ITER / p.dtype.size_bytes();
        let resident_blocks = gpu.sm_count() as u64 * (RESIDENT_THREADS_PER_SM / block as u64);
        let grid = resident_blocks
            .min((p.n as u64).div_ceil(block as u64 * elems_per_thread_iter))
            .max(1);
        let partials = gpu.alloc(p.dtype, grid as usize)?;
        // Zeroed when allocated; every completed launch leaves it zero.
        let blocks_done = gpu.alloc(DType::I32, 1)?;
        Ok(Fast {
            kernel,
            dims: Dims::linear(grid as u32, block, 0),
            args: [
                x.arg(),
                partials.arg(),
                blocks_done.arg(),
                out.arg(),
                Arg::U64(p.n as u64),
            ],
            _buffers: (x, out, partials, blocks_done),
        })
    }
}

impl Launcher for Fast<'_> {
    fn launch(&mut self) -> Result<()> {
        // SAFETY: signature (const T* in, T* partials, unsigned int* blocks_done, T* out,
        // unsigned long long n). `in` is a whole allocation (16-byte aligned) of >= n elements,
        // `partials` holds >= grid elements, `blocks_done` one zeroed word.
        unsafe { self.kernel.launch(self.dims, &self.args) }
    }

    fn graph_refused(&self) -> Option<&'static str> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_seeded_random_and_shared_across_sizes() {
        let p = |n| Params {
            n,
            dtype: DType::F32,
            block: None,
        };
        let a = Reduce.prepare(&p(1000), 1).unwrap();
        let b = Reduce.prepare(&p(10), 1).unwrap();
        let c = Reduce.prepare(&p(1000), 2).unwrap();
        let x = |d: &CaseData| d.inputs.get::<f32>("x").unwrap().to_vec();
        assert_eq!(&x(&a)[..10], &x(&b)[..]);
        assert_ne!(x(&a), x(&c));
        assert!(x(&a).iter().all(|&v| (0.0..1.0).contains(&v)));
        assert!(
            x(&a).iter().filter(|&&v| v == 0.0).count() < 2,
            "inputs must not be zeros"
        );
    }

    #[test]
    fn integer_sums_wrap_like_the_gpu() {
        for order in [Order::Sequential, Order::Pairwise, Order::Threads] {
            assert_eq!(sum(&[i32::MAX, 1, 5], order), i32::MIN + 5, "{order:?}");
        }
    }

    #[test]
    fn tree_sum_adds_in_gpu_block_order() {
        // With 256-element blocks, element 0 pairs with 128 first: (1e8 + -1e8) cancels before the
        // small terms are added, which a left-to-right sum would lose in f32.
        let mut x = vec![1.0f32; 256];
        x[0] = 1e8;
        x[128] = -1e8;
        assert_eq!(tree_sum(&x), 254.0);
        assert_ne!(x.iter().fold(0.0f32, |a, &b| a + b), 254.0);
    }

    #[test]
    fn tolerance_scales_with_n_and_dtype() {
        let small = tolerance(100, DType::F32).rel;
        let large = tolerance(1_000_000, DType::F32).rel;
        assert!((large / small - 100.0).abs() < 1e-9);
        assert!(tolerance(1_000_000, DType::F64).rel < 1e-12);
        assert_eq!(tolerance(100, DType::I32), Tolerance::EXACT);
    }
}
