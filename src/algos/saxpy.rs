//! SAXPY (seed 001, problem 1): y = a x + y in float32, in place over y.
//!
//! Inputs x and y uniform in [-1, 1); the output y starts as the input y before every run. The
//! reference is a x + y in float64 from the float32 values (a rounded to float32 first, as the
//! kernels see it). Each element moves 12 bytes (x and y read, y written) for 2 flops.

use std::sync::LazyLock;

use anyhow::{bail, Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::Deserialize;

use super::{
    Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice, OutputSpec, Spec,
};
use crate::device::blas::BlasCall;
use crate::device::{Arg, DeviceBuf, Dims, Kernel, KernelFile, Launcher, Stream};
use crate::vocab::{DType, HostData, Tolerance};

#[derive(Debug)]
pub struct Saxpy;

static AXES: &[AxisDef] = &[
    AxisDef::size("n", "elements of x and y"),
    AxisDef::float("a", 2.0, -1e6, 1e6, "the scalar a"),
    AxisDef::BLOCK,
];

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "saxpy",
    title: "y = a x + y in float32 (SAXPY)",
    axes: AXES,
    fixed_dtype: Some(DType::F32),
    kernel_file: KernelFile::embedded("saxpy.cu", include_str!("../../kernels/saxpy.cu")),
    test_grid: "n = [0, 1, 3, 4, 5, 1000, 65_537, 1_000_003]\na = [2.0, -0.5]",
    gpu_test_grid: "n = [0, 1, 3, 5, 1000, 65_537, 1_000_003, 16_777_219]\na = [2.0, -0.5]\n\
                    block = [32, 256, 1024]",
    ..Spec::implementing(Saxpy::CPU, Saxpy::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    pub n: usize,
    pub a: f64,
    /// CUDA variants only.
    pub block: Option<u32>,
}

/// Elements per rayon task.
const THREAD_CHUNK: usize = 1 << 16;
/// saxpy_vector's float4 vectors of x (and of y) per thread (its VECTORS).
const VECTORS_PER_THREAD: u64 = 1;

impl Algorithm for Saxpy {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[
        CpuImpl::new("sequential", |p| Ok(cpu(p, false))),
        CpuImpl::new("threads", |p| Ok(cpu(p, true))),
    ];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("saxpy_naive", |p, on| Elementwise::launcher(p, on, 1)),
        KernelImpl::new("saxpy_vector", |p, on| {
            Elementwise::launcher(p, on, VECTORS_PER_THREAD * 4)
        }),
        KernelImpl::new("saxpy_cublas", |p, on| CublasSaxpy::launcher(p, on)).library(),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// x, y, the output y and its float64 reference.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        (p.n as u64).checked_mul(4 + 4 + 4 + 8)?.checked_add(64)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5A_0001);
        let x: Vec<f32> = (0..p.n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let y: Vec<f32> = (0..p.n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let a = p.a as f32 as f64;
        let reference = x
            .iter()
            .zip(&y)
            .map(|(&x, &y)| a * x as f64 + y as f64)
            .collect();
        // One rounding of a x + y (or two, without a fused multiply-add), each within half an
        // ulp of |a x| + |y| <= |a| + 1: an absolute bound, since a x + y may cancel to 0.
        let eps = f32::EPSILON as f64;
        let tolerance = Tolerance {
            rel: 2.0 * eps,
            abs: 2.0 * eps * (a.abs() + 1.0),
        };
        let output = OutputSpec::new("y", DType::F32, reference, tolerance).in_place_of("y");
        let n = p.n as u64;
        Ok(CaseData {
            inputs: Buffers(vec![("x", HostData::F32(x)), ("y", HostData::F32(y))]),
            outputs: vec![output],
            // x and y read, y written.
            bytes_read: n.checked_mul(8).context("the byte count overflows")?,
            bytes_written: 4 * n,
            flops: 2 * n,
            elements: 0,
            facts: Vec::new(),
        })
    }
}

/// y += a x on the CPU, in one pass or in rayon chunks.
fn cpu(p: &Params, threaded: bool) -> CpuRun {
    let a = p.a as f32;
    Box::new(move |inputs, outputs| {
        let x = inputs.get::<f32>("x")?;
        let y = outputs.get_mut::<f32>("y")?;
        let step = |(y, x): (&mut f32, &f32)| *y += a * *x;
        if threaded {
            y.par_chunks_mut(THREAD_CHUNK)
                .zip(x.par_chunks(THREAD_CHUNK))
                .for_each(|(y, x)| y.iter_mut().zip(x).for_each(step));
        } else {
            y.iter_mut().zip(x).for_each(step);
        }
        Ok(())
    })
}

/// `saxpy_naive` and `saxpy_vector`: one launch over the arrays, or over a chunk of them.
struct Elementwise<'a> {
    kernel: Kernel,
    dims: Dims,
    args: [Arg; 4],
    /// Elements a block covers.
    per_block: u64,
    buffers: (&'a DeviceBuf, &'a DeviceBuf),
}

impl<'a> Elementwise<'a> {
    /// The launcher of a kernel whose threads each cover `per_thread` elements.
    fn launcher(p: &Params, on: OnDevice<'a>, per_thread: u64) -> Result<Box<dyn Launcher + 'a>> {
        let (x, y) = (on.io.input("x")?, on.io.output("y")?);
        let block = p.block.context("saxpy's kernels need a block size")?;
        let n = p.n as u64;
        let per_block = per_thread * block as u64;
        let grid = u32::try_from(n.div_ceil(per_block).max(1)).context("the grid is too large")?;
        Ok(Box::new(Elementwise {
            kernel: on.gpu.kernel(on.kernel)?,
            dims: Dims::linear(grid, block, 0),
            args: [x.arg(), y.arg(), Arg::F32(p.a as f32), Arg::U64(n)],
            per_block,
            buffers: (x, y),
        }))
    }
}

impl Launcher for Elementwise<'_> {
    fn launch(&mut self) -> Result<()> {
        // SAFETY: signature (const float* x, float* y, float a, unsigned long long n); x and y
        // are distinct whole allocations of >= n floats (16-byte aligned), and the grid covers
        // n elements as each kernel's contract in saxpy.cu says.
        unsafe { self.kernel.launch(self.dims, &self.args) }
    }

    fn graph_refused(&self) -> Option<&'static str> {
        None
    }

    fn launch_chunk(&mut self, first: usize, count: usize, stream: &Stream) -> Result<()> {
        let (x, y) = self.buffers;
        if first + count > x.len() {
            bail!("chunk {first} + {count} is past the end of {} elements", x.len());
        }
        let grid = u32::try_from((count as u64).div_ceil(self.per_block).max(1))
            .context("the grid is too large")?;
        let args = [x.arg_at(first)?, y.arg_at(first)?, self.args[2], Arg::U64(count as u64)];
        // SAFETY: as in `launch`, over the `count` elements from `first` (checked above), which
        // start 16-byte aligned (chunks start at multiples of CHUNK_ALIGN elements).
        unsafe {
            self.kernel
                .launch_on_stream(stream, Dims { grid: (grid, 1, 1), ..self.dims }, &args)
        }
    }
}

/// `saxpy_cublas`: cublasSaxpy over the arrays, on the device's stream.
struct CublasSaxpy<'a> {
    call: BlasCall<'a>,
    _buffers: (&'a DeviceBuf, &'a DeviceBuf),
}

impl<'a> CublasSaxpy<'a> {
    fn launcher(p: &Params, on: OnDevice<'a>) -> Result<Box<dyn Launcher + 'a>> {
        let (gpu, x, y) = (on.gpu, on.io.input("x")?, on.io.output("y")?);
        let blas = gpu.blas()?;
        // One untimed call on scratch vectors first: cuBLAS loads its kernel on its first
        // call, which must not happen while a sample waits behind the held stream (and must
        // not touch y, which program scope times from its first value).
        let scratch_len = p.n.min(1 << 24);
        let scratch = (gpu.alloc(DType::F32, scratch_len)?, gpu.alloc(DType::F32, scratch_len)?);
        // SAFETY: both scratch vectors live until the synchronize below.
        unsafe { blas.saxpy(scratch_len, 1.0, &scratch.0, &scratch.1)?.launch()? };
        gpu.synchronize()?;
        Ok(Box::new(CublasSaxpy {
            call: blas.saxpy(p.n, p.a as f32, x, y)?,
            _buffers: (x, y),
        }))
    }
}

impl Launcher for CublasSaxpy<'_> {
    fn launch(&mut self) -> Result<()> {
        // SAFETY: the call was made over x and y, which `_buffers` keeps alive, n elements each.
        unsafe { self.call.launch() }
    }
}
