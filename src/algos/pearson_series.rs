//! Pearson, step 1 (seed 003's K1): generating M random walks of N values on the device, one
//! thread a series (see `random_walk`). The kernel writes each series contiguously, as the seed
//! did, or interleaved (element j of every series together), the coalesced layout the seed
//! discussed and did not build. The reference is the same walk on the CPU: same bits, so every
//! element must match exactly.

use std::sync::LazyLock;

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use super::random_walk::{self, key_words, seed_of, Layout, Walk};
use super::{
    Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice, OutputSpec, Spec,
};
use crate::device::{Arg, DeviceBuf, Dims, Kernel, KernelFile, Launcher};
use crate::vocab::{DType, Element, HostData, Tolerance};
use crate::{walk_axes, with_float_dtype};

#[derive(Debug)]
pub struct PearsonSeries;

/// K1 and K2 share one kernel file.
pub(super) const KERNEL_FILE: KernelFile = KernelFile::embedded("pearson.cu", include_str!("../../kernels/pearson.cu"));

static AXES: &[AxisDef] = &{
    let [m, n, start, step] = walk_axes!();
    [
        m,
        n,
        start,
        step,
        AxisDef::dtype(&DType::FLOATS, "f32"),
        AxisDef::choice(
            "layout",
            Layout::NAMES,
            "series",
            "series contiguous, or interleaved",
        ),
        AxisDef::BLOCK,
    ]
};

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "pearson_series",
    title: "random-walk series generation, one thread a series (seed 003, K1)",
    axes: AXES,
    kernel_file: KERNEL_FILE,
    test_grid: "m = [0, 1, 3, 67]\nn = [0, 1, 2, 5, 131]\ndtype = [\"f32\", \"f64\"]\n\
                layout = [\"series\", \"interleaved\"]",
    gpu_test_grid: "m = [1, 3, 67, 1_031]\nn = [1, 2, 5, 131, 4_099]\ndtype = [\"f32\", \"f64\"]\n\
                    layout = [\"series\", \"interleaved\"]\nblock = [32, 1024]",
    ..Spec::implementing(PearsonSeries::CPU, PearsonSeries::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    #[serde(flatten)]
    pub walk: Walk,
    pub dtype: DType,
    pub layout: Layout,
    /// CUDA variants only.
    pub block: Option<u32>,
}

impl Algorithm for PearsonSeries {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[
        CpuImpl::new("sequential", |p| Ok(cpu(*p, false))),
        CpuImpl::new("threads", |p| Ok(cpu(*p, true))),
    ];

    const KERNELS: &'static [KernelImpl<Params>] = &[KernelImpl::new("k1_generate", |p, on| Generate::launcher(p, on))];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// The series (device and host copies) and their float64 reference.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        p.walk
            .elements()?
            .checked_mul(2 * p.dtype.size_bytes() + 8)?
            .checked_add(64)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let reference = with_float_dtype!(p.dtype, |T| {
            random_walk::generate::<T>(&p.walk, seed, p.layout)
                .into_iter()
                .map(Element::to_f64)
                .collect::<Vec<f64>>()
        });
        let key = key_words(seed).map(|w| w as i32).to_vec();
        let elements = p.walk.elements().context("m x n overflows")?;
        Ok(CaseData {
            inputs: Buffers(vec![("key", HostData::I32(key))]),
            // Bit for bit: the kernel makes the same two roundings a step as the CPU.
            outputs: vec![OutputSpec::new(
                "series",
                p.dtype,
                reference,
                Tolerance::EXACT,
            )],
            // Written alone: the key is a few words, the walks come from it.
            bytes_read: 0,
            bytes_written: elements
                .checked_mul(p.dtype.size_bytes())
                .context("the byte count overflows")?,
            // A multiply-add and a multiply a step (Philox's integer work not counted).
            flops: 2 * elements,
            elements: 0,
            facts: Vec::new(),
        })
    }
}

/// The walks on the CPU, one series after another or in parallel.
fn cpu(p: Params, parallel: bool) -> CpuRun {
    Box::new(move |inputs, outputs| {
        let seed = seed_of(key_of(inputs)?);
        with_float_dtype!(p.dtype, |T| {
            let out = outputs.get_mut::<T>("series")?;
            random_walk::fill(&p.walk, seed, p.layout, out, parallel);
        });
        Ok(())
    })
}

/// The case seed's key words, from the `key` input.
fn key_of(inputs: &Buffers) -> Result<[u32; 2]> {
    match inputs.get::<i32>("key")? {
        [lo, hi] => Ok([*lo as u32, *hi as u32]),
        other => bail!("the key input holds {} words, not 2", other.len()),
    }
}

/// A float scalar argument in the kernel's element type.
pub(super) fn float_arg(dtype: DType, value: f64) -> Arg {
    match dtype {
        DType::F64 => Arg::F64(value),
        _ => Arg::F32(value as f32),
    }
}

/// `k1_generate`: one launch, one thread a series.
struct Generate<'a> {
    kernel: Kernel,
    dims: Dims,
    args: [Arg; 8],
    _buffers: (&'a DeviceBuf, &'a DeviceBuf),
}

impl<'a> Generate<'a> {
    fn launcher(p: &Params, on: OnDevice<'a>) -> Result<Box<dyn Launcher + 'a>> {
        let block = p.block.context("k1_generate needs a block size")?;
        let m = u32::try_from(p.walk.m).context("m does not fit the kernel's 32-bit index")?;
        let (key, out) = (on.io.input("key")?, on.io.output("series")?);
        let n = p.walk.n as u64;
        // Element j of series i at i * stride_i + j * stride_j.
        let (stride_i, stride_j) = match p.layout {
            Layout::Series => (n, 1),
            Layout::Interleaved => (1, m as u64),
        };
        Ok(Box::new(Generate {
            kernel: on.function(p.dtype)?,
            dims: Dims::linear(m.div_ceil(block).max(1), block, 0),
            args: [
                out.arg(),
                Arg::U32(m),
                Arg::U64(n),
                Arg::U64(stride_j),
                Arg::U64(stride_i),
                float_arg(p.dtype, p.walk.start),
                float_arg(p.dtype, p.walk.step_fraction()),
                key.arg(),
            ],
            _buffers: (key, out),
        }))
    }
}

impl Launcher for Generate<'_> {
    fn launch(&mut self) -> Result<()> {
        // SAFETY: signature (T* out, unsigned m, unsigned long long n, unsigned long long
        // stride_j, unsigned long long stride_i, T start, T fraction, const unsigned* key); out
        // holds m * n elements of the entry's dtype, the strides are one layout's (every index
        // below m * n), key holds two words, and threads past m return (pearson.cu's K1 contract).
        unsafe { self.kernel.launch(self.dims, &self.args) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(layout: Layout) -> Params {
        Params {
            walk: Walk {
                m: 5,
                n: 9,
                start: 100.0,
                step_pct: 2.0,
            },
            dtype: DType::F32,
            layout,
            block: None,
        }
    }

    #[test]
    fn the_reference_is_the_walk_of_the_case_seed_and_the_cpu_writes_it() {
        for layout in [Layout::Series, Layout::Interleaved] {
            let p = params(layout);
            let data = PearsonSeries.prepare(&p, 42).unwrap();
            let expected: Vec<f32> = random_walk::generate(&p.walk, 42, layout);
            let reference = &data.outputs[0].reference;
            assert_eq!(reference.len(), 45);
            assert!(reference.iter().zip(&expected).all(|(r, e)| *r == *e as f64));
            let mut outputs = data.output_buffers();
            let mut run = PearsonSeries.case(p).cpu("sequential").unwrap();
            run(&data.inputs, &mut outputs).unwrap();
            assert_eq!(outputs.get::<f32>("series").unwrap(), &expected[..]);
        }
        let other = PearsonSeries.prepare(&params(Layout::Series), 43).unwrap();
        let this = PearsonSeries.prepare(&params(Layout::Series), 42).unwrap();
        assert_ne!(other.outputs[0].reference, this.outputs[0].reference);
    }
}
