//! The algorithms kbench knows: each declares its grid axes, its CPU implementations and CUDA
//! kernels, generates seeded inputs with a float64 reference, and runs a case on a backend.
//!
//! Adding an algorithm: one module here, one `.cu` file in `kernels/`, one manifest in
//! `experiments/`, and one line in `ALGORITHMS`.

pub mod durbin;
pub mod reduce;

use std::fmt;

use anyhow::Result;

use crate::backend::cuda::CudaRun;
use crate::manifest::{Backend, DType};
use crate::plan::{ParamValue, Params};
use crate::verify::Tolerance;

/// Every algorithm, by name.
static ALGORITHMS: &[&dyn Algorithm] = &[&reduce::Reduce, &durbin::Durbin];

pub fn find(name: &str) -> Option<&'static dyn Algorithm> {
    ALGORITHMS.iter().copied().find(|a| a.name() == name)
}

pub fn all() -> &'static [&'static dyn Algorithm] {
    ALGORITHMS
}

pub fn names() -> Vec<&'static str> {
    ALGORITHMS.iter().map(|a| a.name()).collect()
}

/// What values an axis takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AxisKind {
    /// An element count, >= 0.
    Size,
    /// Threads per block: a power of two from 32 to 1024.
    BlockSize,
    /// One of the listed element types.
    Dtype(&'static [DType]),
    /// One of the listed names.
    Choice(&'static [&'static str]),
}

impl AxisKind {
    pub fn check(self, value: &ParamValue) -> Result<(), String> {
        match (self, value) {
            (AxisKind::Size, ParamValue::Int(n)) if *n >= 0 => Ok(()),
            (AxisKind::Size, ParamValue::Int(n)) => Err(format!("a size must be >= 0, got {n}")),
            (AxisKind::BlockSize, ParamValue::Int(b))
                if (32..=1024).contains(b) && (*b as u64).is_power_of_two() =>
            {
                Ok(())
            }
            (AxisKind::BlockSize, ParamValue::Int(b)) => Err(format!(
                "a block size must be a power of two from 32 to 1024, got {b}"
            )),
            (AxisKind::Dtype(allowed), ParamValue::Str(s)) => match DType::parse(s) {
                Some(d) if allowed.contains(&d) => Ok(()),
                _ => Err(format!(
                    "unknown dtype `{s}`; this algorithm takes {}",
                    allowed
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
            (AxisKind::Dtype(_), ParamValue::Int(i)) => Err(format!(
                "expected a dtype name like \"f32\", found the integer {i}"
            )),
            (AxisKind::Choice(allowed), ParamValue::Str(s)) if allowed.contains(&s.as_str()) => {
                Ok(())
            }
            (AxisKind::Choice(allowed), ParamValue::Str(s)) => Err(format!(
                "unknown value `{s}`; one of: {}",
                allowed.join(", ")
            )),
            (AxisKind::Choice(allowed), ParamValue::Int(i)) => Err(format!(
                "expected one of {}, found the integer {i}",
                allowed.join(", ")
            )),
            (_, ParamValue::Str(s)) => {
                Err(format!("expected an integer, found the string \"{s}\""))
            }
        }
    }

    pub fn is_integer(self) -> bool {
        !matches!(self, AxisKind::Dtype(_) | AxisKind::Choice(_))
    }
}

/// A value an axis takes when the manifest leaves it out.
#[derive(Debug, Clone, Copy)]
pub enum AxisDefault {
    Int(i64),
    Str(&'static str),
}

impl AxisDefault {
    pub fn to_param(self) -> ParamValue {
        match self {
            AxisDefault::Int(i) => ParamValue::Int(i),
            AxisDefault::Str(s) => ParamValue::Str(s.to_string()),
        }
    }
}

#[derive(Debug)]
pub struct AxisDef {
    pub name: &'static str,
    pub kind: AxisKind,
    /// `None`: the manifest must give this axis.
    pub default: Option<AxisDefault>,
    /// `Some(backend)`: the axis means something only there (a CPU sum has no block size).
    pub only_for: Option<Backend>,
    pub doc: &'static str,
}

impl AxisDef {
    pub fn applies_to(&self, backend: Backend) -> bool {
        self.only_for.is_none_or(|b| b == backend)
    }
}

/// One case's data: inputs, the float64 reference its output is checked against, and the least
/// work the case must do (for GB/s and GFLOP/s).
pub struct CaseData {
    pub inputs: Vec<(&'static str, HostData)>,
    /// Shape and dtype of the output; poisoned before every run.
    pub output: HostData,
    pub reference: Vec<f64>,
    pub bytes_moved: u64,
    pub flops: u64,
}

pub trait Algorithm: Sync + fmt::Debug {
    fn name(&self) -> &'static str;
    fn title(&self) -> &'static str;
    fn axes(&self) -> &'static [AxisDef];
    fn cpu_impls(&self) -> &'static [&'static str];
    fn cuda_kernels(&self) -> &'static [&'static str];
    /// The file in `kernels/` holding this algorithm's CUDA kernels.
    fn kernel_file(&self) -> &'static str;
    /// The tolerance a case's output is held to, before the manifest's overrides.
    fn default_tolerance(&self, params: &Params) -> Tolerance;
    /// The bytes of a case's inputs and outputs, and of whatever else `implementation` (a CPU
    /// implementation or a kernel) allocates, computed with checked arithmetic (None: it
    /// overflows), so a size too big for the machine is refused before anything is allocated.
    fn footprint_bytes(&self, implementation: &str, params: &Params) -> Option<u64>;
    /// Seeded inputs and their reference; every variant at one grid point sees the same inputs.
    fn prepare(&self, params: &Params, seed: u64) -> Result<CaseData>;
    /// Runs one CPU implementation on the case's data, writing `output`.
    fn run_cpu(
        &self,
        implementation: &str,
        params: &Params,
        data: &CaseData,
        output: &mut HostData,
    ) -> Result<()>;
    /// Enqueues one run of a CUDA kernel on `run`'s stream: inputs are on the device, the output
    /// buffer must be written.
    fn run_cuda(&self, kernel: &str, params: &Params, run: &mut CudaRun) -> Result<()>;

    fn axis(&self, name: &str) -> Option<&'static AxisDef> {
        self.axes().iter().find(|a| a.name == name)
    }
}

/// A typed host buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum HostData {
    I32(Vec<i32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Written into outputs before each run so an element the code never writes cannot pass.
pub const POISON_I32: i32 = -0x5A5A_5A5B;

impl HostData {
    pub fn zeros(dtype: DType, len: usize) -> HostData {
        match dtype {
            DType::I32 => HostData::I32(vec![0; len]),
            DType::F32 => HostData::F32(vec![0.0; len]),
            DType::F64 => HostData::F64(vec![0.0; len]),
        }
    }

    pub fn dtype(&self) -> DType {
        match self {
            HostData::I32(_) => DType::I32,
            HostData::F32(_) => DType::F32,
            HostData::F64(_) => DType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            HostData::I32(v) => v.len(),
            HostData::F32(v) => v.len(),
            HostData::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// NaN for floats, an unlikely pattern for integers.
    pub fn poison(&mut self) {
        match self {
            HostData::I32(v) => v.fill(POISON_I32),
            HostData::F32(v) => v.fill(f32::NAN),
            HostData::F64(v) => v.fill(f64::NAN),
        }
    }

    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::F64(v) => v.clone(),
        }
    }

    /// Writes the buffer as a NumPy `.npy` file.
    pub fn write_npy(&self, path: &std::path::Path) -> Result<()> {
        use npyz::WriterBuilder;
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let shape = [self.len() as u64];
        macro_rules! write {
            ($v:expr, $t:ty) => {{
                let mut writer = npyz::WriteOptions::<$t>::new()
                    .default_dtype()
                    .shape(&shape)
                    .writer(file)
                    .begin_nd()?;
                writer.extend($v.iter().copied())?;
                writer.finish()?;
            }};
        }
        match self {
            HostData::I32(v) => write!(v, i32),
            HostData::F32(v) => write!(v, f32),
            HostData::F64(v) => write!(v, f64),
        }
        Ok(())
    }
}

/// The integer value of an axis the planner has already validated.
pub fn int_param(params: &Params, name: &str) -> Result<i64> {
    match params.get(name) {
        Some(ParamValue::Int(i)) => Ok(*i),
        other => anyhow::bail!("axis `{name}` should be an integer here, found {other:?}"),
    }
}

/// The dtype of a case (axis `dtype`).
pub fn dtype_param(params: &Params) -> Result<DType> {
    match params.get("dtype") {
        Some(ParamValue::Str(s)) => {
            DType::parse(s).ok_or_else(|| anyhow::anyhow!("unknown dtype `{s}`"))
        }
        other => anyhow::bail!("axis `dtype` should be a dtype name here, found {other:?}"),
    }
}
