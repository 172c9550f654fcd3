//! Sum reduction (seed 004, and seed 003's unrolled kernel): one input vector, one scalar out.
//!
//! Inputs: i32 uniform in [-100, 100] (sums wrap modulo 2^32, exactly as the GPU's do, so integers
//! must match exactly); f32 and f64 uniform in [0, 1), so the sum is well conditioned and its
//! relative error measures the summation order alone. The reference is a compensated (Neumaier)
//! float64 sum of the same values.

use anyhow::{bail, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::{
    dtype_param, int_param, Algorithm, AxisDef, AxisDefault, AxisKind, CaseData, HostData,
};
use crate::backend::cuda::CudaRun;
use crate::manifest::{Backend, DType};
use crate::plan::Params;
use crate::verify::Tolerance;

#[derive(Debug)]
pub struct Reduce;

static AXES: &[AxisDef] = &[
    AxisDef {
        name: "n",
        kind: AxisKind::Size,
        default: None,
        only_for: None,
        doc: "number of elements summed",
    },
    AxisDef {
        name: "dtype",
        kind: AxisKind::Dtype(&DType::ALL),
        default: Some(AxisDefault::Str("f32")),
        only_for: None,
        doc: "element type; sums accumulate in it",
    },
    AxisDef {
        name: "block",
        kind: AxisKind::BlockSize,
        default: Some(AxisDefault::Int(256)),
        only_for: Some(Backend::Cuda),
        doc: "threads per block",
    },
];

/// Elements a CPU tree step sums before handing partials up, like one GPU block.
const TREE_BLOCK: usize = 256;
/// Elements per rayon task: large enough that scheduling costs nothing next to the adds.
const THREAD_CHUNK: usize = 1 << 16;

impl Algorithm for Reduce {
    fn name(&self) -> &'static str {
        "reduce"
    }

    fn title(&self) -> &'static str {
        "sum of a vector (parallel reduction)"
    }

    fn axes(&self) -> &'static [AxisDef] {
        AXES
    }

    fn cpu_impls(&self) -> &'static [&'static str] {
        &["sequential", "pairwise", "threads"]
    }

    fn cuda_kernels(&self) -> &'static [&'static str] {
        &[
            "reduce_naive",
            "reduce_optimized",
            "reduce_unrolled",
            "reduce_fast",
        ]
    }

    fn kernel_file(&self) -> &'static str {
        "reduce.cu"
    }

    /// Rounding errors of a float sum of n random terms grow like sqrt(n) * eps (a random walk;
    /// the worst case is n * eps). The tolerance allows twice that, and never less than 8 eps, so a sequential sum passes where its error is the expected one, while a wrong sum
    /// (a dropped or repeated element moves the result by ~1/n) fails. Integers must be exact.
    fn default_tolerance(&self, params: &Params) -> Tolerance {
        let n = int_param(params, "n").unwrap_or(0).max(1) as f64;
        let eps = match dtype_param(params) {
            Ok(DType::F32) => f32::EPSILON as f64,
            Ok(DType::F64) => f64::EPSILON,
            _ => return Tolerance::EXACT,
        };
        Tolerance {
            rel: (2.0 * n.sqrt()).max(8.0) * eps,
            abs: 0.0,
        }
    }

    fn footprint_bytes(&self, _implementation: &str, params: &Params) -> Option<u64> {
        let n = u64::try_from(int_param(params, "n").ok()?).ok()?;
        n.checked_mul(dtype_param(params).ok()?.size_bytes())?
            .checked_add(64)
    }

    fn prepare(&self, params: &Params, seed: u64) -> Result<CaseData> {
        let n = usize::try_from(int_param(params, "n")?)?;
        let dtype = dtype_param(params)?;
        // One stream per dtype, so every n takes a prefix of the same draws.
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ dtype.size_bytes() ^ ((dtype as u64) << 32));
        let (input, reference) = match dtype {
            DType::I32 => {
                let x: Vec<i32> = (0..n).map(|_| rng.random_range(-100..=100)).collect();
                let wrapped = x.iter().fold(0i32, |acc, &v| acc.wrapping_add(v));
                (HostData::I32(x), wrapped as f64)
            }
            DType::F32 => {
                let x: Vec<f32> = (0..n).map(|_| rng.random::<f32>()).collect();
                let reference = compensated_sum(x.iter().map(|&v| v as f64));
                (HostData::F32(x), reference)
            }
            DType::F64 => {
                let x: Vec<f64> = (0..n).map(|_| rng.random::<f64>()).collect();
                let reference = compensated_sum(x.iter().copied());
                (HostData::F64(x), reference)
            }
        };
        let bytes_moved = (n as u64 + 1)
            .checked_mul(dtype.size_bytes())
            .ok_or_else(|| anyhow::anyhow!("n = {n} overflows the byte count"))?;
        Ok(CaseData {
            inputs: vec![("x", input)],
            output: HostData::zeros(dtype, 1),
            reference: vec![reference],
            bytes_moved,
            flops: n.saturating_sub(1) as u64,
        })
    }

    fn run_cpu(
        &self,
        implementation: &str,
        _params: &Params,
        data: &CaseData,
        output: &mut HostData,
    ) -> Result<()> {
        macro_rules! dispatch {
            ($x:expr, $out:expr, $zero:expr, $add:expr) => {
                $out[0] = match implementation {
                    "sequential" => $x.iter().fold($zero, |a, &b| $add(a, b)),
                    "pairwise" => tree_sum($x, $zero, $add),
                    "threads" => $x
                        .par_chunks(THREAD_CHUNK)
                        .map(|c| c.iter().fold($zero, |a, &b| $add(a, b)))
                        .reduce(|| $zero, $add),
                    other => bail!("reduce has no CPU implementation `{other}`"),
                }
            };
        }
        match (&data.inputs[0].1, output) {
            (HostData::I32(x), HostData::I32(out)) => dispatch!(x, out, 0i32, i32::wrapping_add),
            (HostData::F32(x), HostData::F32(out)) => {
                dispatch!(x, out, 0f32, |a: f32, b: f32| a + b)
            }
            (HostData::F64(x), HostData::F64(out)) => {
                dispatch!(x, out, 0f64, |a: f64, b: f64| a + b)
            }
            _ => bail!("reduce: input and output dtypes differ"),
        }
        Ok(())
    }

    fn run_cuda(&self, kernel: &str, params: &Params, run: &mut CudaRun) -> Result<()> {
        gpu::launch(kernel, params, run)
    }
}

/// Neumaier's compensated sum: exact to about one float64 rounding for these inputs.
pub fn compensated_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut carry) = (0.0f64, 0.0f64);
    for v in values {
        let t = sum + v;
        if sum.abs() >= v.abs() {
            carry += (sum - t) + v;
        } else {
            carry += (v - t) + sum;
        }
        sum = t;
    }
    sum + carry
}

/// Sums in the order a GPU tree reduction does: blocks of `TREE_BLOCK` reduced by halving strides
/// (sequential addressing), then the block sums reduced the same way, until one is left.
pub fn tree_sum<T: Copy>(x: &[T], zero: T, add: impl Fn(T, T) -> T + Copy) -> T {
    if x.is_empty() {
        return zero;
    }
    let mut level: Vec<T> = x
        .chunks(TREE_BLOCK)
        .map(|c| block_tree(c, zero, add))
        .collect();
    while level.len() > 1 {
        level = level
            .chunks(TREE_BLOCK)
            .map(|c| block_tree(c, zero, add))
            .collect();
    }
    level[0]
}

fn block_tree<T: Copy>(chunk: &[T], zero: T, add: impl Fn(T, T) -> T) -> T {
    let mut shared = [zero; TREE_BLOCK];
    shared[..chunk.len()].copy_from_slice(chunk);
    let mut stride = TREE_BLOCK / 2;
    while stride > 0 {
        for t in 0..stride {
            shared[t] = add(shared[t], shared[t + stride]);
        }
        stride /= 2;
    }
    shared[0]
}

/// The CUDA launchers. Each kernel in `kernels/reduce.cu` is launched from exactly one place here.
mod gpu {
    use anyhow::{anyhow, bail, Result};
    use cudarc::driver::{
        CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
    };
    use std::sync::Arc;

    use super::{dtype_param, int_param, Params};
    use crate::backend::cuda::{driver_error, CudaRun, DeviceData, Scratch};
    use crate::manifest::DType;

    /// reduce_fast keeps 4 vectors of 16 bytes in flight per thread and iteration.
    const FAST_BYTES_PER_THREAD_ITER: u64 = 64;
    /// reduce_fast is compiled for 2048 resident threads per SM (`__launch_bounds__(1024, 2)`).
    const RESIDENT_THREADS_PER_SM: u64 = 2048;

    pub fn launch(kernel: &str, params: &Params, run: &mut CudaRun) -> Result<()> {
        let n = int_param(params, "n")? as u64;
        let block = int_param(params, "block")? as u32;
        let dtype = dtype_param(params)?;
        let function = run.function(&format!("{kernel}_{}", dtype.name()))?;
        let elem = dtype.size_bytes() as u32;
        match kernel {
            // (elements per block, dynamic shared bytes)
            "reduce_naive" => multi_pass(
                run,
                &function,
                n,
                block,
                2 * block as u64,
                2 * block * elem,
                dtype,
            ),
            "reduce_optimized" => {
                multi_pass(run, &function, n, block, block as u64, block * elem, dtype)
            }
            "reduce_unrolled" => multi_pass(
                run,
                &function,
                n,
                block,
                2 * block as u64,
                block * elem,
                dtype,
            ),
            "reduce_fast" => fast(run, &function, n, block, dtype),
            other => bail!("reduce has no CUDA kernel `{other}`"),
        }
    }

    /// The seed's scheme: each pass writes one partial sum per block, and the partials are reduced
    /// again (ping-ponging between two scratch buffers) until one block's pass writes the output.
    fn multi_pass(
        run: &mut CudaRun,
        function: &CudaFunction,
        n: u64,
        block: u32,
        elems_per_block: u64,
        shared_bytes: u32,
        dtype: DType,
    ) -> Result<()> {
        let first_len = n.div_ceil(elems_per_block).max(1) as usize;
        run.ensure_data_scratch(0, dtype, first_len)?;
        run.ensure_data_scratch(1, dtype, first_len.div_ceil(elems_per_block as usize))?;
        let CudaRun {
            stream,
            inputs,
            output,
            scratch,
            ..
        } = run;
        let [Some(Scratch::Data(a)), Some(Scratch::Data(b))] = &mut scratch[..2] else {
            bail!("reduce: scratch buffers missing");
        };
        let shape = Passes {
            n,
            block,
            elems_per_block,
            shared_bytes,
        };
        match (&inputs[0], output, a, b) {
            (DeviceData::I32(x), DeviceData::I32(out), DeviceData::I32(a), DeviceData::I32(b)) => {
                shape.run(stream, function, x, out, a, b)
            }
            (DeviceData::F32(x), DeviceData::F32(out), DeviceData::F32(a), DeviceData::F32(b)) => {
                shape.run(stream, function, x, out, a, b)
            }
            (DeviceData::F64(x), DeviceData::F64(out), DeviceData::F64(a), DeviceData::F64(b)) => {
                shape.run(stream, function, x, out, a, b)
            }
            _ => bail!("reduce: device buffers of mixed dtypes"),
        }
    }

    struct Passes {
        n: u64,
        block: u32,
        elems_per_block: u64,
        shared_bytes: u32,
    }

    impl Passes {
        /// Launches `reduce_naive_*`, `reduce_optimized_*` or `reduce_unrolled_*`.
        fn run<T: DeviceRepr>(
            &self,
            stream: &Arc<CudaStream>,
            function: &CudaFunction,
            x: &CudaSlice<T>,
            out: &mut CudaSlice<T>,
            a: &mut CudaSlice<T>,
            b: &mut CudaSlice<T>,
        ) -> Result<()> {
            #[derive(Clone, Copy)]
            enum From {
                Input,
                A,
                B,
            }
            let mut from = From::Input;
            let mut len = self.n;
            loop {
                let grid = len.div_ceil(self.elems_per_block).max(1);
                let last = grid == 1;
                let (src, dst): (&CudaSlice<T>, &mut CudaSlice<T>) = match (from, last) {
                    (From::Input, true) => (x, &mut *out),
                    (From::Input, false) => (x, &mut *a),
                    (From::A, true) => (&*a, &mut *out),
                    (From::A, false) => (&*a, &mut *b),
                    (From::B, true) => (&*b, &mut *out),
                    (From::B, false) => (&*b, &mut *a),
                };
                let config = LaunchConfig {
                    grid_dim: (
                        u32::try_from(grid)
                            .map_err(|_| anyhow!("grid of {grid} blocks is too large"))?,
                        1,
                        1,
                    ),
                    block_dim: (self.block, 1, 1),
                    shared_mem_bytes: self.shared_bytes,
                };
                // SAFETY: the kernels' signature is (const T* in, T* out, unsigned long long n);
                // `src` holds at least `len` elements and `dst` at least `grid` (scratch is sized
                // for the first pass, and each later pass is smaller); the shared size is what
                // the kernel indexes for this block size (see the contract in reduce.cu).
                unsafe {
                    stream
                        .launch_builder(function)
                        .arg(src)
                        .arg(dst)
                        .arg(&len)
                        .launch(config)
                }
                .map_err(driver_error)?;
                if last {
                    return Ok(());
                }
                from = match from {
                    From::Input | From::B => From::A,
                    From::A => From::B,
                };
                len = grid;
            }
        }
    }

    /// One launch of `reduce_fast_*`: a resident grid, each block reducing a grid-stride share,
    /// the last block to finish summing the partials.
    fn fast(
        run: &mut CudaRun,
        function: &CudaFunction,
        n: u64,
        block: u32,
        dtype: DType,
    ) -> Result<()> {
        let elems_per_thread_iter = FAST_BYTES_PER_THREAD_ITER / dtype.size_bytes();
        let resident_blocks = run.sm_count as u64 * (RESIDENT_THREADS_PER_SM / block as u64);
        let grid = resident_blocks
            .min(n.div_ceil(block as u64 * elems_per_thread_iter))
            .max(1);
        run.ensure_data_scratch(0, dtype, grid as usize)?;
        run.ensure_u32_scratch(1, 1)?;
        let CudaRun {
            stream,
            inputs,
            output,
            scratch,
            ..
        } = run;
        let [Some(Scratch::Data(partials)), Some(Scratch::U32(blocks_done))] = &mut scratch[..2]
        else {
            bail!("reduce: scratch buffers missing");
        };
        let config = LaunchConfig {
            grid_dim: (grid as u32, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        };
        macro_rules! go {
            ($x:expr, $partials:expr, $out:expr) => {
                // SAFETY: signature (const T* in, T* partials, unsigned int* blocks_done, T* out,
                // unsigned long long n). `in` is a whole allocation (16-byte aligned) of >= n
                // elements, `partials` holds >= grid elements, `blocks_done` was zeroed when
                // allocated and every completed launch leaves it zero.
                unsafe {
                    stream
                        .launch_builder(function)
                        .arg($x)
                        .arg($partials)
                        .arg(&mut *blocks_done)
                        .arg($out)
                        .arg(&n)
                        .launch(config)
                }
                .map_err(driver_error)?
            };
        }
        match (&inputs[0], output, partials) {
            (DeviceData::I32(x), DeviceData::I32(out), DeviceData::I32(p)) => go!(x, p, out),
            (DeviceData::F32(x), DeviceData::F32(out), DeviceData::F32(p)) => go!(x, p, out),
            (DeviceData::F64(x), DeviceData::F64(out), DeviceData::F64(p)) => go!(x, p, out),
            _ => bail!("reduce: device buffers of mixed dtypes"),
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ParamValue;

    fn params(n: i64, dtype: &str) -> Params {
        [
            ("n".to_string(), ParamValue::Int(n)),
            ("dtype".to_string(), ParamValue::Str(dtype.into())),
        ]
        .into()
    }

    #[test]
    fn every_cpu_implementation_matches_the_reference_at_awkward_sizes() {
        for n in [0, 1, 2, 255, 257, 65_537, 100_003] {
            for dtype in ["i32", "f32", "f64"] {
                let p = params(n, dtype);
                let data = Reduce.prepare(&p, 7).unwrap();
                let tolerance = Reduce.default_tolerance(&p);
                for implementation in Reduce.cpu_impls() {
                    let mut out = data.output.clone();
                    out.poison();
                    Reduce
                        .run_cpu(implementation, &Params::new(), &data, &mut out)
                        .unwrap();
                    let report = crate::verify::compare(&out.to_f64(), &data.reference, tolerance);
                    assert!(report.passed, "{implementation} n={n} {dtype}: {report:?}");
                }
            }
        }
    }

    #[test]
    fn inputs_are_seeded_random_and_shared_across_sizes() {
        let a = Reduce.prepare(&params(1000, "f32"), 1).unwrap();
        let b = Reduce.prepare(&params(10, "f32"), 1).unwrap();
        let c = Reduce.prepare(&params(1000, "f32"), 2).unwrap();
        let (HostData::F32(a), HostData::F32(b), HostData::F32(c)) =
            (&a.inputs[0].1, &b.inputs[0].1, &c.inputs[0].1)
        else {
            panic!("f32 inputs expected");
        };
        assert_eq!(&a[..10], &b[..]);
        assert_ne!(a, c);
        assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
        assert!(
            a.iter().filter(|&&x| x == 0.0).count() < 2,
            "inputs must not be zeros"
        );
    }

    #[test]
    fn integer_sums_wrap_like_the_gpu() {
        let data = CaseData {
            inputs: vec![("x", HostData::I32(vec![i32::MAX, 1, 5]))],
            output: HostData::I32(vec![0]),
            reference: vec![],
            bytes_moved: 0,
            flops: 0,
        };
        for implementation in Reduce.cpu_impls() {
            let mut out = HostData::I32(vec![0]);
            Reduce
                .run_cpu(implementation, &Params::new(), &data, &mut out)
                .unwrap();
            assert_eq!(out, HostData::I32(vec![i32::MIN + 5]), "{implementation}");
        }
    }

    #[test]
    fn tree_sum_adds_in_gpu_block_order() {
        // With 256-element blocks, element 0 pairs with 128 first: (1e8 + -1e8) cancels before the
        // small terms are added, which a left-to-right sum would lose in f32.
        let mut x = vec![1.0f32; 256];
        x[0] = 1e8;
        x[128] = -1e8;
        assert_eq!(tree_sum(&x, 0.0, |a, b| a + b), 254.0);
        assert_ne!(x.iter().fold(0.0f32, |a, &b| a + b), 254.0);
    }

    #[test]
    fn tolerance_scales_with_n_and_dtype() {
        let small = Reduce.default_tolerance(&params(100, "f32")).rel;
        let large = Reduce.default_tolerance(&params(1_000_000, "f32")).rel;
        assert!((large / small - 100.0).abs() < 1e-9);
        assert!(Reduce.default_tolerance(&params(1_000_000, "f64")).rel < 1e-12);
        assert_eq!(
            Reduce.default_tolerance(&params(100, "i32")),
            Tolerance::EXACT
        );
    }
}
