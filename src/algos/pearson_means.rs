//! Pearson, step 2 (seed 003's K2): the mean of each of M series of N values, stored series after
//! series (the series come from `random_walk`, as K1 makes them). The seed's K2 in its three
//! forms (global memory, shared memory, shared memory unrolled) and with warp shuffles; one block
//! a series, as the seed, or several (`blocks_per_series`), their partial sums then added by a
//! second kernel. The seed's K2 reduced its last level in a child kernel (dynamic parallelism),
//! which NVRTC cannot link; `k2_global` runs the same tree in the same block instead.
//!
//! Sums accumulate in the element type, as the seed's did; the reference is each series'
//! compensated float64 sum over N. The seed judged float against double by the share of series
//! whose sum came within an absolute margin (its accuracy table's Epsi): the `sum_tol` axis is
//! that margin, so its accuracy table is a plain kbench table of `share_within_tolerance`.

use std::sync::LazyLock;

use anyhow::{bail, Context, Result};
use rayon::prelude::*;
use serde::Deserialize;

use super::pearson_series::{float_arg, KERNEL_FILE};
use super::random_walk::{self, Layout, Walk};
use super::{
    Algorithm, AxisDef, AxisDefault, AxisKind, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl,
    OnDevice, OutputSpec, Spec,
};
use crate::device::{Arg, DeviceBuf, Dims, Kernel, Launcher};
use crate::numerics::compensated_sum;
use crate::vocab::{Backend, DType, Element, Tolerance};
use crate::{walk_axes, with_float_dtype};

#[derive(Debug)]
pub struct PearsonMeans;

static AXES: &[AxisDef] = &{
    let [m, n, start, step] = walk_axes!();
    [
        m,
        n,
        start,
        step,
        AxisDef::dtype(&DType::FLOATS, "f32"),
        AxisDef::float(
            "sum_tol",
            0.0,
            0.0,
            1e30,
            "the margin a series' sum may miss by (the seed's accuracy Epsi); 0: kbench's \
             bound, 2 sqrt(n) eps relative",
        ),
        AxisDef {
            name: "blocks_per_series",
            kind: AxisKind::Size,
            default: Some(AxisDefault::Int(1)),
            only_for: Some(Backend::Cuda),
            doc: "blocks summing one series",
        },
        AxisDef::BLOCK,
    ]
};

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "pearson_means",
    title: "the mean of every series (seed 003, K2)",
    axes: AXES,
    kernel_file: KERNEL_FILE,
    test_grid: "m = [0, 1, 3, 67]\nn = [1, 2, 5, 131, 4_099]\ndtype = [\"f32\", \"f64\"]",
    gpu_test_grid: "m = [3, 1_031]\nn = [1, 33, 4_099, 65_537]\ndtype = [\"f32\", \"f64\"]\n\
                    blocks_per_series = [1, 3]\nblock = [32, 1024]",
    ..Spec::implementing(PearsonMeans::CPU, PearsonMeans::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    #[serde(flatten)]
    pub walk: Walk,
    pub dtype: DType,
    pub sum_tol: f64,
    /// CUDA variants only.
    pub blocks_per_series: Option<u32>,
    /// CUDA variants only.
    pub block: Option<u32>,
}

impl Algorithm for PearsonMeans {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[
        CpuImpl::new("sequential", |p| Ok(cpu(p, false))),
        CpuImpl::new("threads", |p| Ok(cpu(p, true))),
    ];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        // Its tree's scratch is half the series again.
        KernelImpl::new("k2_global", |p, on| means(p, on, Workspace::Global))
            .scratch_bytes(|p| Some(series_bytes(p)? / 2)),
        KernelImpl::new("k2_shared", |p, on| means(p, on, Workspace::Shared)),
        KernelImpl::new("k2_unrolled", |p, on| means(p, on, Workspace::Shared)),
        KernelImpl::new("k2_shuffle", |p, on| means(p, on, Workspace::Registers)),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// The series, the means and their reference.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        series_bytes(p)?
            .checked_add((p.walk.m as u64).checked_mul(3 * 8)?)?
            .checked_add(64)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let n = p.walk.n;
        if n == 0 {
            bail!("n = 0: a series without values has no mean");
        }
        let (series, reference) = with_float_dtype!(p.dtype, |T| {
            let series: Vec<T> = random_walk::generate(&p.walk, seed, Layout::Series);
            let reference: Vec<f64> = series
                .par_chunks(n)
                .map(|s| compensated_sum(s.iter().map(|v| v.to_f64())) / n as f64)
                .collect();
            (T::wrap(series), reference)
        });
        let eps = p.dtype.epsilon().context("the series are floats")?;
        let tolerance = if p.sum_tol > 0.0 {
            // The seed's margin on the sum, on the mean.
            Tolerance {
                rel: 0.0,
                abs: p.sum_tol / n as f64,
            }
        } else {
            // As reduce's: twice the random-walk growth of a sum's rounding errors.
            Tolerance::relative((2.0 * (n as f64).sqrt()).max(8.0) * eps)
        };
        let elements = p.walk.elements().context("m x n overflows")?;
        Ok(CaseData {
            inputs: Buffers(vec![("series", series)]),
            outputs: vec![OutputSpec::new("means", p.dtype, reference, tolerance)],
            bytes_read: elements
                .checked_mul(p.dtype.size_bytes())
                .context("the byte count overflows")?,
            bytes_written: p.walk.m as u64 * p.dtype.size_bytes(),
            flops: elements,
            elements: 0,
            facts: Vec::new(),
        })
    }
}

fn series_bytes(p: &Params) -> Option<u64> {
    p.walk.elements()?.checked_mul(p.dtype.size_bytes())
}

/// The seed's loop on the CPU, one series after another or in parallel.
fn cpu(p: &Params, parallel: bool) -> CpuRun {
    let (dtype, n) = (p.dtype, p.walk.n);
    Box::new(move |inputs, outputs| {
        with_float_dtype!(dtype, |T| {
            let series = inputs.get::<T>("series")?;
            let means = outputs.get_mut::<T>("means")?;
            // The seed's loop: one accumulator in the element type, then a division.
            let mean = |s: &[T]| s.iter().fold(0.0 as T, |a, &b| a + b) / n as T;
            if parallel {
                means
                    .par_iter_mut()
                    .zip(series.par_chunks(n))
                    .for_each(|(m, s)| *m = mean(s));
            } else {
                means
                    .iter_mut()
                    .zip(series.chunks(n))
                    .for_each(|(m, s)| *m = mean(s));
            }
        });
        Ok(())
    })
}

/// Where a K2 form reduces a block's values: k2_global in a global scratch buffer, the shared
/// forms in blockDim.x elements of dynamic shared memory, k2_shuffle in registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Workspace {
    Global,
    Shared,
    Registers,
}

/// A K2 form's launcher, with k2_finish after it where several blocks sum a series.
fn means<'a>(p: &Params, on: OnDevice<'a>, workspace: Workspace) -> Result<Box<dyn Launcher + 'a>> {
    let gpu = on.gpu;
        let block = p.block.context("K2 needs a block size")?;
        let blocks_per_series = p.blocks_per_series.unwrap_or(1);
        if blocks_per_series == 0 {
            bail!("blocks_per_series must be at least 1");
        }
        let m = u32::try_from(p.walk.m).context("m does not fit the kernels' 32-bit index")?;
        let grid = m
            .checked_mul(blocks_per_series)
            .context("m x blocks_per_series blocks do not fit a grid")?;
        let (dtype, n) = (p.dtype, p.walk.n as u64);
        let chunk = n.div_ceil(blocks_per_series as u64);
        let elem = dtype.size_bytes() as u32;
        let (x, means) = (on.io.input("series")?, on.io.output("means")?);
        let scratch = match workspace {
            Workspace::Global => {
                let len = (grid as u64).checked_mul(chunk.div_ceil(2)).context("overflow")?;
                Some(gpu.alloc(dtype, usize::try_from(len.max(1))?)?)
            }
            Workspace::Shared | Workspace::Registers => None,
        };
        let shared_bytes = match workspace {
            Workspace::Shared => block * elem,
            Workspace::Global | Workspace::Registers => 0,
        };
        let one_pass = blocks_per_series == 1;
        // Several blocks a series write partial sums, which k2_finish adds and scales.
        let partials = if one_pass {
            None
        } else {
            Some(gpu.alloc(dtype, grid as usize)?)
        };
        let finish = match &partials {
            Some(partials) => Some((
                gpu.kernel(&format!("k2_finish_{dtype}"))?,
                Dims::linear(m.div_ceil(256).max(1), 256, 0),
                [
                    partials.arg(),
                    means.arg(),
                    Arg::U32(m),
                    Arg::U32(blocks_per_series),
                    float_arg(dtype, 1.0 / n as f64),
                ],
            )),
            None => None,
        };
        let scale = if one_pass { 1.0 / n as f64 } else { 1.0 };
        let out = partials.as_ref().unwrap_or(means).arg();
        let scratch_arg = scratch.as_ref().unwrap_or(x).arg();
        Ok(Box::new(Means {
            kernel: on.function(dtype)?,
            dims: Dims::linear(grid.max(1), block, shared_bytes),
            args: [
                x.arg(),
                scratch_arg,
                out,
                Arg::U32(m),
                Arg::U64(n),
                Arg::U64(chunk),
                Arg::U32(blocks_per_series),
                float_arg(dtype, scale),
            ],
            finish,
            _buffers: (x, means, scratch, partials),
        }))
}

/// One K2 launch over m x B blocks, and with B > 1 the launch adding the partials.
struct Means<'a> {
    kernel: Kernel,
    dims: Dims,
    args: [Arg; 8],
    finish: Option<(Kernel, Dims, [Arg; 5])>,
    _buffers: (
        &'a DeviceBuf,
        &'a DeviceBuf,
        Option<DeviceBuf>,
        Option<DeviceBuf>,
    ),
}

impl Launcher for Means<'_> {
    fn launch(&mut self) -> Result<()> {
        // SAFETY: signature (const T* x, T* scratch, T* out, unsigned m, unsigned long long n,
        // unsigned long long chunk, unsigned blocks_per_series, T scale), T the entry's dtype.
        // x holds m * n elements; out holds m * B (the means, or the partials); k2_global's
        // scratch holds (chunk + 1) / 2 elements a block (the others ignore it); the shared
        // kernels get blockDim.x elements of dynamic shared memory (pearson.cu's K2 contract).
        unsafe { self.kernel.launch(self.dims, &self.args)? };
        if let Some((kernel, dims, args)) = &self.finish {
            // SAFETY: signature (const T* partials, T* means, unsigned m, unsigned B, T scale);
            // partials holds m * B elements, means m, and threads past m return.
            unsafe { kernel.launch(*dims, args)? };
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        1 + self.finish.is_some() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(n: usize, dtype: DType, sum_tol: f64) -> Params {
        Params {
            walk: Walk {
                m: 4,
                n,
                start: 100.0,
                step_pct: 1.0,
            },
            dtype,
            sum_tol,
            blocks_per_series: None,
            block: None,
        }
    }

    #[test]
    fn references_are_the_series_means_and_the_margin_is_the_seeds() {
        let data = PearsonMeans
            .prepare(&params(1000, DType::F64, 0.0), 3)
            .unwrap();
        let series = data.inputs.get::<f64>("series").unwrap();
        for (i, r) in data.outputs[0].reference.iter().enumerate() {
            let direct: f64 = series[i * 1000..(i + 1) * 1000].iter().sum::<f64>() / 1000.0;
            assert!((r - direct).abs() < 1e-9 * direct, "{r} vs {direct}");
        }
        let margin = PearsonMeans.prepare(&params(1000, DType::F32, 0.5), 3);
        let tolerance = margin.unwrap().outputs[0].tolerance;
        assert_eq!(tolerance, Tolerance { rel: 0.0, abs: 0.5 / 1000.0 });
    }

    #[test]
    fn an_empty_series_is_refused_not_averaged() {
        let err = PearsonMeans.prepare(&params(0, DType::F32, 0.0), 1).unwrap_err();
        assert!(err.to_string().contains("no mean"), "{err}");
    }

    #[test]
    fn float_sums_of_long_series_miss_a_tight_margin_where_double_sums_do_not() {
        // The seed's accuracy table in small: float sequential sums of 4096 values near 100
        // miss a margin of 1e-3 on the sum for most series; double sums never do.
        let shares: Vec<f64> = [DType::F32, DType::F64]
            .into_iter()
            .map(|dtype| {
                let mut p = params(4096, dtype, 1e-3);
                p.walk.m = 64;
                let data = PearsonMeans.prepare(&p, 9).unwrap();
                let mut outputs = data.output_buffers();
                cpu(&p, false)(&data.inputs, &mut outputs).unwrap();
                let got = outputs.data("means").unwrap().to_f64();
                let check = &data.outputs[0];
                let report = crate::verify::compare(&got, &check.reference, check.tolerance);
                1.0 - report.wrong_elements as f64 / report.elements as f64
            })
            .collect();
        assert!(shares[0] < 0.5, "f32: {}", shares[0]);
        assert_eq!(shares[1], 1.0);
    }
}
