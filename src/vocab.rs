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
    // The first three keep the discriminants they had before the others came: the built-in
    // algorithms seed their random inputs with `dtype as u64`, and the order sorts tables.
    I32 = 0,
    F32 = 1,
    F64 = 2,
    I8 = 3,
    U8 = 4,
    I16 = 5,
    U16 = 6,
    U32 = 7,
    I64 = 8,
    U64 = 9,
    F16 = 10,
    BF16 = 11,
    F8E4M3 = 12,
    F8E5M2 = 13,
}

impl DType {
    pub const ALL: [DType; 14] = [
        DType::I8,
        DType::U8,
        DType::I16,
        DType::U16,
        DType::I32,
        DType::U32,
        DType::I64,
        DType::U64,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::F16,
        DType::BF16,
        DType::F32,
        DType::F64,
    ];
    /// The types the built-in algorithms take (a custom study takes every type in `ALL`).
    pub const BUILT_IN: [DType; 3] = [DType::I32, DType::F32, DType::F64];
    pub const FLOATS: [DType; 2] = [DType::F32, DType::F64];

    pub fn name(self) -> &'static str {
        match self {
            DType::I8 => "i8",
            DType::U8 => "u8",
            DType::I16 => "i16",
            DType::U16 => "u16",
            DType::I32 => "i32",
            DType::U32 => "u32",
            DType::I64 => "i64",
            DType::U64 => "u64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::F32 => "f32",
            DType::F64 => "f64",
        }
    }

    pub fn parse(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Every type's name, for messages: "i8, u8, ..., f64".
    pub fn names() -> String {
        DType::ALL.map(DType::name).join(", ")
    }

    pub fn size_bytes(self) -> u64 {
        match self {
            DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => 1,
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => 2,
            DType::I32 | DType::U32 | DType::F32 => 4,
            DType::I64 | DType::U64 | DType::F64 => 8,
        }
    }

    /// NumPy's `descr` of the type as kbench's (little-endian) hosts hold it in memory; None for
    /// the types NumPy has not (bfloat16, the 8-bit floats).
    pub fn npy_descr(self) -> Option<&'static str> {
        Some(match self {
            DType::I8 => "|i1",
            DType::U8 => "|u1",
            DType::I16 => "<i2",
            DType::U16 => "<u2",
            DType::I32 => "<i4",
            DType::U32 => "<u4",
            DType::I64 => "<i8",
            DType::U64 => "<u8",
            DType::F16 => "<f2",
            DType::F32 => "<f4",
            DType::F64 => "<f8",
            DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => return None,
        })
    }

    pub fn is_float(self) -> bool {
        self.epsilon().is_some()
    }

    /// The unit roundoff's bound (machine epsilon, the gap above 1.0); None for integers, which
    /// must be exact.
    pub fn epsilon(self) -> Option<f64> {
        match self {
            DType::F16 => Some(f64::from(half::f16::EPSILON)),
            DType::BF16 => Some(f64::from(half::bf16::EPSILON)),
            DType::F8E4M3 => Some(float8::F8E4M3::EPSILON.to_f64()),
            DType::F8E5M2 => Some(float8::F8E5M2::EPSILON.to_f64()),
            DType::F32 => Some(f32::EPSILON as f64),
            DType::F64 => Some(f64::EPSILON),
            _ => None,
        }
    }

    /// The smallest and largest value an integer type holds (None for floats). Every value of
    /// every type but i64 and u64 is exact as f64, and kbench's ranges stay within 2^53 there.
    pub fn integer_range(self) -> Option<(f64, f64)> {
        Some(match self {
            DType::I8 => (i8::MIN as f64, i8::MAX as f64),
            DType::U8 => (0.0, u8::MAX as f64),
            DType::I16 => (i16::MIN as f64, i16::MAX as f64),
            DType::U16 => (0.0, u16::MAX as f64),
            DType::I32 => (i32::MIN as f64, i32::MAX as f64),
            DType::U32 => (0.0, u32::MAX as f64),
            DType::I64 => (-(2f64.powi(53)), 2f64.powi(53)),
            DType::U64 => (0.0, 2f64.powi(53)),
            _ => return None,
        })
    }

    /// The largest finite value of a float type (None for integers).
    pub fn float_max(self) -> Option<f64> {
        match self {
            DType::F16 => Some(f64::from(half::f16::MAX)),
            DType::BF16 => Some(f64::from(half::bf16::MAX)),
            DType::F8E4M3 => Some(float8::F8E4M3::MAX.to_f64()),
            DType::F8E5M2 => Some(float8::F8E5M2::MAX.to_f64()),
            DType::F32 => Some(f32::MAX as f64),
            DType::F64 => Some(f64::MAX),
            _ => None,
        }
    }

    /// The CUDA C++ type a kernel declares for it (what the `T` define becomes). The 16-bit
    /// floats need `<cuda_fp16.h>` and `<cuda_bf16.h>`, the 8-bit ones `<cuda_fp8.h>`, which
    /// kbench finds (`device::headers`).
    pub fn c_type(self) -> &'static str {
        match self {
            DType::I8 => "signed char",
            DType::U8 => "unsigned char",
            DType::I16 => "short",
            DType::U16 => "unsigned short",
            DType::I32 => "int",
            DType::U32 => "unsigned int",
            DType::I64 => "long long",
            DType::U64 => "unsigned long long",
            DType::F16 => "__half",
            DType::BF16 => "__nv_bfloat16",
            DType::F8E4M3 => "__nv_fp8_e4m3",
            DType::F8E5M2 => "__nv_fp8_e5m2",
            DType::F32 => "float",
            DType::F64 => "double",
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
            $crate::vocab::DType::I8 => {
                #[allow(dead_code)]
                type $t = i8;
                $body
            }
            $crate::vocab::DType::U8 => {
                #[allow(dead_code)]
                type $t = u8;
                $body
            }
            $crate::vocab::DType::I16 => {
                #[allow(dead_code)]
                type $t = i16;
                $body
            }
            $crate::vocab::DType::U16 => {
                #[allow(dead_code)]
                type $t = u16;
                $body
            }
            $crate::vocab::DType::I32 => {
                #[allow(dead_code)]
                type $t = i32;
                $body
            }
            $crate::vocab::DType::U32 => {
                #[allow(dead_code)]
                type $t = u32;
                $body
            }
            $crate::vocab::DType::I64 => {
                #[allow(dead_code)]
                type $t = i64;
                $body
            }
            $crate::vocab::DType::U64 => {
                #[allow(dead_code)]
                type $t = u64;
                $body
            }
            $crate::vocab::DType::F16 => {
                #[allow(dead_code)]
                type $t = half::f16;
                $body
            }
            $crate::vocab::DType::BF16 => {
                #[allow(dead_code)]
                type $t = half::bf16;
                $body
            }
            $crate::vocab::DType::F8E4M3 => {
                #[allow(dead_code)]
                type $t = float8::F8E4M3;
                $body
            }
            $crate::vocab::DType::F8E5M2 => {
                #[allow(dead_code)]
                type $t = float8::F8E5M2;
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

/// As `with_dtype!`, for code that runs in f32 and f64 only: any other dtype is an error.
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

/// Calls `$m!` with every element type's variant name and Rust type, so the per-type code below
/// is written once.
macro_rules! for_each_element {
    ($m:ident) => {
        $m! {
            I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64,
            F16 half::f16, BF16 half::bf16, F8E4M3 float8::F8E4M3, F8E5M2 float8::F8E5M2,
            F32 f32, F64 f64
        }
    };
}

macro_rules! host_data_enum {
    ($($variant:ident $t:ty),*) => {
        /// A typed host buffer.
        #[derive(Debug, Clone, PartialEq)]
        pub enum HostData {
            $($variant(Vec<$t>),)*
        }
    };
}
for_each_element!(host_data_enum);

/// Written into integer outputs before each run so an element the code never writes cannot pass
/// (floats get NaN). Every integer type is poisoned with bytes of 0xA5: this is its i32 value.
pub const POISON_I32: i32 = -0x5A5A_5A5B;
/// The byte integer outputs are filled with (see `POISON_I32`).
pub const POISON_BYTE: u8 = 0xA5;

/// A Rust type a buffer can hold: the bridge from `HostData` to typed slices.
pub trait Element: Copy + Send + Sync + PartialEq + fmt::Debug + 'static {
    const DTYPE: DType;
    /// NaN, or an unlikely integer.
    const POISON: Self;
    fn slice(data: &HostData) -> Option<&[Self]>;
    fn slice_mut(data: &mut HostData) -> Option<&mut [Self]>;
    fn wrap(values: Vec<Self>) -> HostData;
    fn to_f64(self) -> f64;
    /// The nearest value of the type (integers: rounded, and saturated at the type's range).
    fn nearest(value: f64) -> Self;
}

macro_rules! element_accessors {
    ($t:ty, $variant:ident) => {
        const DTYPE: DType = DType::$variant;
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
    };
}

macro_rules! integer_element {
    ($($variant:ident $t:ty),*) => {$(
        impl Element for $t {
            element_accessors!($t, $variant);
            const POISON: $t = <$t>::from_ne_bytes([POISON_BYTE; std::mem::size_of::<$t>()]);
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn nearest(value: f64) -> $t {
                // `as` rounds toward zero and saturates; round to nearest first.
                value.round() as $t
            }
        }
    )*};
}
integer_element!(I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64);

macro_rules! float_element {
    ($($variant:ident $t:ty, $nan:expr, $from:expr, $to:expr);*) => {$(
        impl Element for $t {
            element_accessors!($t, $variant);
            const POISON: $t = $nan;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn nearest(value: f64) -> $t {
                $from(value)
            }
        }
    )*};
}
float_element!(
    F16 half::f16, half::f16::NAN, half::f16::from_f64, f64::from;
    BF16 half::bf16, half::bf16::NAN, half::bf16::from_f64, f64::from;
    // The types' own conversions (`v.to_f64()` here would be this trait's, calling itself).
    F8E4M3 float8::F8E4M3, float8::F8E4M3::NAN, float8::F8E4M3::from_f64, |v| float8::F8E4M3::to_f64(&v);
    F8E5M2 float8::F8E5M2, float8::F8E5M2::NAN, float8::F8E5M2::from_f64, |v| float8::F8E5M2::to_f64(&v);
    F32 f32, f32::NAN, |v: f64| v as f32, f64::from;
    F64 f64, f64::NAN, |v: f64| v, |v: f64| v
);

impl HostData {
    pub fn zeros(dtype: DType, len: usize) -> HostData {
        with_dtype!(dtype, |T| T::wrap(vec![T::nearest(0.0); len]))
    }

    /// `values` rounded to `dtype` (see `Element::nearest`).
    pub fn from_f64(dtype: DType, values: &[f64]) -> HostData {
        use rayon::prelude::*;
        with_dtype!(dtype, |T| T::wrap(
            values.par_iter().map(|&v| T::nearest(v)).collect()
        ))
    }

    pub fn dtype(&self) -> DType {
        macro_rules! dtype_of {
            ($($variant:ident $t:ty),*) => {
                match self { $(HostData::$variant(_) => DType::$variant,)* }
            };
        }
        for_each_element!(dtype_of)
    }

    pub fn len(&self) -> usize {
        with_dtype!(self.dtype(), |T| T::slice(self).map_or(0, <[T]>::len))
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn truncate(&mut self, len: usize) {
        macro_rules! truncate {
            ($($variant:ident $t:ty),*) => {
                match self { $(HostData::$variant(v) => v.truncate(len),)* }
            };
        }
        for_each_element!(truncate)
    }

    /// NaN for floats, an unlikely pattern for integers.
    pub fn poison(&mut self) {
        with_dtype!(self.dtype(), |T| {
            if let Some(v) = T::slice_mut(self) {
                v.fill(T::POISON)
            }
        })
    }

    /// Every value as f64, converted on every core (a 2^28-element output is checked so).
    pub fn to_f64(&self) -> Vec<f64> {
        use rayon::prelude::*;
        with_dtype!(self.dtype(), |T| T::slice(self)
            .map(|v| v.par_iter().map(|x| x.to_f64()).collect())
            .unwrap_or_default())
    }

    /// The buffer's bytes, as the device stores them.
    pub fn as_bytes(&self) -> &[u8] {
        macro_rules! bytes {
            ($($variant:ident $t:ty),*) => {
                match self { $(HostData::$variant(v) => bytemuck::cast_slice(v),)* }
            };
        }
        for_each_element!(bytes)
    }

    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        macro_rules! bytes_mut {
            ($($variant:ident $t:ty),*) => {
                match self { $(HostData::$variant(v) => bytemuck::cast_slice_mut(v),)* }
            };
        }
        for_each_element!(bytes_mut)
    }

    /// Writes the buffer as a NumPy `.npy` file. bfloat16 and the 8-bit floats have no NumPy
    /// dtype: they are written as float32, which holds each of their values exactly.
    pub fn write_npy(&self, path: &std::path::Path) -> anyhow::Result<()> {
        let widened: Option<Vec<f32>> = match self {
            HostData::BF16(v) => Some(v.iter().map(|x| x.to_f32()).collect()),
            HostData::F8E4M3(v) => Some(v.iter().map(|x| x.to_f32()).collect()),
            HostData::F8E5M2(v) => Some(v.iter().map(|x| x.to_f32()).collect()),
            _ => None,
        };
        if let Some(widened) = widened {
            return HostData::F32(widened).write_npy(path);
        }
        let descr = self.dtype().npy_descr().expect("written as float32 above");
        write_npy_bytes(path, descr, self.len(), self.as_bytes())?;
        Ok(())
    }
}

/// Writes `data` (a 1-D array of `len` values of NumPy type `descr`, as memory holds them) as a
/// `.npy` file (format 1.0): the header, then the bytes in one write.
fn write_npy_bytes(
    path: &std::path::Path,
    descr: &str,
    len: usize,
    data: &[u8],
) -> std::io::Result<()> {
    use std::io::Write;
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},), }}");
    // Magic (6), version (2), the header's length (2), the header: padded with spaces to a
    // multiple of 64 and ended by a newline, as NumPy writes it.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat(unpadded.next_multiple_of(64) - unpadded));
    header.push('\n');
    let mut file = std::fs::File::create(path)?;
    let mut head = b"\x93NUMPY\x01\x00".to_vec();
    head.extend((header.len() as u16).to_le_bytes());
    head.extend(header.as_bytes());
    file.write_all(&head)?;
    file.write_all(data)?;
    Ok(())
}

/// An output element passes when `|got - expected| <= abs + rel * |expected|`. Either may be
/// infinite (an algorithm's tolerance scaled by an answer that overflowed): written as figures,
/// so the worker's message still reads back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tolerance {
    #[serde(with = "crate::figure::one")]
    #[schemars(with = "crate::figure::Figure")]
    pub rel: f64,
    #[serde(with = "crate::figure::one")]
    #[schemars(with = "crate::figure::Figure")]
    pub abs: f64,
}

impl Tolerance {
    pub const EXACT: Tolerance = Tolerance { rel: 0.0, abs: 0.0 };

    pub fn relative(rel: f64) -> Tolerance {
        Tolerance { rel, abs: 0.0 }
    }

    /// The manifest's per-dtype overrides (f32 and f64 have them) on top of an algorithm's
    /// default; the other types keep the default (an integer's is exact unless a custom
    /// study's buffer says otherwise).
    pub fn with_overrides(self, dtype: DType, overrides: &ToleranceOverrides) -> Tolerance {
        let (rel, abs) = match dtype {
            DType::F32 => (overrides.rel_tol_f32, overrides.abs_tol_f32),
            DType::F64 => (overrides.rel_tol_f64, overrides.abs_tol_f64),
            _ => return self,
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
