//! The shared vocabulary, below every stage: element types, backends, timing scopes, axis values
//! and a case's parameters, typed host buffers, and tolerances. Nothing here knows a stage.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    I32,
    F32,
    F64,
}

impl DType {
    pub const ALL: [DType; 3] = [DType::I32, DType::F32, DType::F64];
    pub const FLOATS: [DType; 2] = [DType::F32, DType::F64];

    pub fn name(self) -> &'static str {
        match self {
            DType::I32 => "i32",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    pub fn size_bytes(self) -> u64 {
        match self {
            DType::I32 | DType::F32 => 4,
            DType::F64 => 8,
        }
    }

    /// The unit roundoff's bound (machine epsilon); None for integers, which must be exact.
    pub fn epsilon(self) -> Option<f64> {
        match self {
            DType::I32 => None,
            DType::F32 => Some(f32::EPSILON as f64),
            DType::F64 => Some(f64::EPSILON),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs `$body` with the type alias `$t` bound to the Rust type of `$dtype`: the one place a
/// dtype becomes a type.
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, |$t:ident| $body:expr) => {
        match $dtype {
            $crate::vocab::DType::I32 => {
                #[allow(dead_code)]
                type $t = i32;
                $body
            }
            $crate::vocab::DType::F32 => {
                #[allow(dead_code)]
                type $t = f32;
                $body
            }
            $crate::vocab::DType::F64 => {
                #[allow(dead_code)]
                type $t = f64;
                $body
            }
        }
    };
}

/// As `with_dtype!`, for code that runs in f32 and f64 only: an i32 dtype is an error.
#[macro_export]
macro_rules! with_float_dtype {
    ($dtype:expr, |$t:ident| $body:expr) => {
        match $dtype {
            $crate::vocab::DType::F32 => {
                type $t = f32;
                $body
            }
            $crate::vocab::DType::F64 => {
                type $t = f64;
                $body
            }
            other => anyhow::bail!("this runs in f32 or f64, not {other}"),
        }
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cpu,
    Cuda,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Cpu => "cpu",
            Backend::Cuda => "cuda",
        })
    }
}

/// Which region a GPU sample times. CPU variants always time the computation alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The kernel launches alone; inputs already on the device.
    Kernel,
    /// Host-to-device copies, the kernels and the device-to-host copy of the result.
    Transfers,
    /// Allocation, copies, kernels, copy back and free: the seed's "whole program".
    Program,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Kernel => "kernel",
            Scope::Transfers => "transfers",
            Scope::Program => "program",
        }
    }
}

/// Where the host side of timed transfers lives: ordinary (pageable) memory, which the driver
/// stages through a bounce buffer, or page-locked (pinned) memory the GPU copies directly.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum HostMemory {
    #[default]
    Pageable,
    Pinned,
}

/// Whether each GPU sample starts with a cold L2 cache (the default) or follows the last one hot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CacheMode {
    Cold,
    Hot,
}

/// How a GPU sample is timed (kernel scope): one run per event pair, behind a blocked stream; or a
/// batch of back-to-back runs in one event pair, for kernels shorter than the events resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TimingMode {
    Single,
    Batch,
}

/// How a kernel-scope run's launches are queued: one by one on the stream, as the algorithm
/// issues them; or captured once into a CUDA graph that each run replays. On an H100 the
/// two-kernel reductions at n = 1000 sat at levels about 1 us apart from sample to sample and
/// process to process when launched one by one, and at 5.71-5.89 us in six processes as a graph
/// (`scripts/lab/pad_probe.py`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Deserialize,
    Serialize,
    schemars::JsonSchema,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Launch {
    #[default]
    Stream,
    Graph,
}

impl Launch {
    pub fn name(self) -> &'static str {
        match self {
            Launch::Stream => "stream",
            Launch::Graph => "graph",
        }
    }
}

/// One axis value: sizes and block sizes are integers, floats are floats, dtypes, choices and
/// files are strings.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum ParamValue {
    Int(i64),
    Float(f64),
    Str(String),
}

impl ParamValue {
    fn rank(&self) -> u8 {
        match self {
            ParamValue::Int(_) => 0,
            ParamValue::Float(_) => 1,
            ParamValue::Str(_) => 2,
        }
    }

    /// The value as JSON, for parsing a case's parameters into an algorithm's typed struct.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ParamValue::Int(i) => (*i).into(),
            ParamValue::Float(x) => (*x).into(),
            ParamValue::Str(s) => s.clone().into(),
        }
    }
}

/// Floats compare by their bits' total order, so parameters can be sorted, deduplicated and keyed.
impl Ord for ParamValue {
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (ParamValue::Int(a), ParamValue::Int(b)) => a.cmp(b),
            (ParamValue::Float(a), ParamValue::Float(b)) => a.total_cmp(b),
            (ParamValue::Str(a), ParamValue::Str(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for ParamValue {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for ParamValue {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for ParamValue {}

impl std::hash::Hash for ParamValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            ParamValue::Int(i) => (0u8, i).hash(state),
            ParamValue::Float(x) => (1u8, x.to_bits()).hash(state),
            ParamValue::Str(s) => (2u8, s).hash(state),
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(i) => write!(f, "{i}"),
            // Shortest text that reads back as the same float.
            ParamValue::Float(x) => write!(f, "{x:?}"),
            ParamValue::Str(s) => f.write_str(s),
        }
    }
}

/// The parameters of one case, by axis name.
pub type Params = BTreeMap<String, ParamValue>;

/// `n=1000 dtype=f32`: a case's parameters in one line.
pub fn describe_params(params: &Params) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A typed host buffer.
#[derive(Debug, Clone, PartialEq)]
pub enum HostData {
    I32(Vec<i32>),
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// Written into integer outputs before each run so an element the code never writes cannot pass
/// (floats get NaN).
pub const POISON_I32: i32 = -0x5A5A_5A5B;

/// A Rust type a buffer can hold: the bridge from `HostData` to typed slices.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static {
    const DTYPE: DType;
    /// NaN, or an unlikely integer.
    const POISON: Self;
    fn slice(data: &HostData) -> Option<&[Self]>;
    fn slice_mut(data: &mut HostData) -> Option<&mut [Self]>;
    fn wrap(values: Vec<Self>) -> HostData;
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $variant:ident, $poison:expr) => {
        impl Element for $t {
            const DTYPE: DType = DType::$variant;
            const POISON: $t = $poison;
            fn slice(data: &HostData) -> Option<&[$t]> {
                match data {
                    HostData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(data: &mut HostData) -> Option<&mut [$t]> {
                match data {
                    HostData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(values: Vec<$t>) -> HostData {
                HostData::$variant(values)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
        }
    };
}

element!(i32, I32, POISON_I32);
element!(f32, F32, f32::NAN);
element!(f64, F64, f64::NAN);

impl HostData {
    pub fn zeros(dtype: DType, len: usize) -> HostData {
        with_dtype!(dtype, |T| T::wrap(vec![0 as T; len]))
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

    pub fn truncate(&mut self, len: usize) {
        match self {
            HostData::I32(v) => v.truncate(len),
            HostData::F32(v) => v.truncate(len),
            HostData::F64(v) => v.truncate(len),
        }
    }

    /// NaN for floats, an unlikely pattern for integers.
    pub fn poison(&mut self) {
        match self {
            HostData::I32(v) => v.fill(i32::POISON),
            HostData::F32(v) => v.fill(f32::POISON),
            HostData::F64(v) => v.fill(f64::POISON),
        }
    }

    pub fn to_f64(&self) -> Vec<f64> {
        match self {
            HostData::I32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::F64(v) => v.clone(),
        }
    }

    /// The buffer's bytes, as the device stores them.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            HostData::I32(v) => bytemuck::cast_slice(v),
            HostData::F32(v) => bytemuck::cast_slice(v),
            HostData::F64(v) => bytemuck::cast_slice(v),
        }
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        match self {
            HostData::I32(v) => bytemuck::cast_slice_mut(v),
            HostData::F32(v) => bytemuck::cast_slice_mut(v),
            HostData::F64(v) => bytemuck::cast_slice_mut(v),
        }
    }

    /// Writes the buffer as a NumPy `.npy` file.
    pub fn write_npy(&self, path: &std::path::Path) -> anyhow::Result<()> {
        use npyz::WriterBuilder;
        let file = std::io::BufWriter::new(std::fs::File::create(path)?);
        let shape = [self.len() as u64];
        with_dtype!(self.dtype(), |T| {
            let mut writer = npyz::WriteOptions::<T>::new()
                .default_dtype()
                .shape(&shape)
                .writer(file)
                .begin_nd()?;
            writer.extend(T::slice(self).expect("the dtype matches").iter().copied())?;
            writer.finish()?;
        });
        Ok(())
    }
}

/// An output element passes when `|got - expected| <= abs + rel * |expected|`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tolerance {
    pub rel: f64,
    pub abs: f64,
}

impl Tolerance {
    pub const EXACT: Tolerance = Tolerance { rel: 0.0, abs: 0.0 };

    pub fn relative(rel: f64) -> Tolerance {
        Tolerance { rel, abs: 0.0 }
    }

    /// The manifest's per-dtype overrides on top of an algorithm's default; integers stay exact.
    pub fn with_overrides(self, dtype: DType, overrides: &ToleranceOverrides) -> Tolerance {
        let (rel, abs) = match dtype {
            DType::I32 => return Tolerance::EXACT,
            DType::F32 => (overrides.rel_tol_f32, overrides.abs_tol_f32),
            DType::F64 => (overrides.rel_tol_f64, overrides.abs_tol_f64),
        };
        Tolerance {
            rel: rel.unwrap_or(self.rel),
            abs: abs.unwrap_or(self.abs),
        }
    }
}

/// A manifest's `[accuracy]`: relative and absolute tolerances per floating-point dtype.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ToleranceOverrides {
    pub rel_tol_f32: Option<f64>,
    pub rel_tol_f64: Option<f64>,
    pub abs_tol_f32: Option<f64>,
    pub abs_tol_f64: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn param_values_order_floats_totally_and_display_round_trips() {
        let mut v = vec![
            ParamValue::Str("b".into()),
            ParamValue::Float(2.5),
            ParamValue::Int(3),
            ParamValue::Float(-0.0),
        ];
        v.sort();
        assert_eq!(v[0], ParamValue::Int(3));
        assert_eq!(v[1], ParamValue::Float(-0.0));
        assert_ne!(ParamValue::Float(0.0), ParamValue::Float(-0.0));
        assert_eq!(ParamValue::Float(0.1).to_string(), "0.1");
        assert_eq!(ParamValue::Float(2.0).to_string(), "2.0");
        let json = serde_json::to_string(&v).unwrap();
        let back: Vec<ParamValue> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, v);
    }

    #[test]
    fn host_data_views_bytes_and_poisons() {
        let mut h = HostData::zeros(DType::F64, 3);
        assert_eq!(h.as_bytes().len(), 24);
        h.poison();
        assert!(h.to_f64().iter().all(|x| x.is_nan()));
        let mut i = HostData::I32(vec![1, 2, 3]);
        i.truncate(2);
        assert_eq!(i32::slice(&i), Some(&[1, 2][..]));
        assert_eq!(f32::slice(&i), None);
    }
}
