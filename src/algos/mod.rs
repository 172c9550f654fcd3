//! The algorithms kbench knows, and the seam they plug into.
//!
//! An algorithm is data (`Spec`: name, axes, CPU implementations, kernels, its embedded `.cu`
//! file and the grid its correctness is tested on) plus one module implementing `Algorithm`:
//! its typed parameters (parsed once per case with serde), seeded inputs with a float64 (or
//! exact) reference per output, its CPU implementations and one launcher per kernel, each
//! resolved once per case, outside the timed region. The framework knows no algorithm.
//!
//! Adding one: its module here, its `.cu` file in `kernels/`, its manifest in `experiments/`, and
//! one line in `register!` below.

use std::fmt;

use anyhow::{anyhow, bail, Context, Result};
use serde::de::DeserializeOwned;

use crate::device::{DeviceIo, Gpu, KernelFile, Launcher};
use crate::vocab::{Backend, DType, Element, HostData, ParamValue, Params, Tolerance};

/// Declares each algorithm's module and lists its type in `ALGORITHMS`: one line an algorithm.
macro_rules! register {
    ($($module:ident => $algorithm:ident,)+) => {
        $(pub mod $module;)+

        /// Every algorithm, in the order `kbench list` shows them.
        static ALGORITHMS: &[&dyn DynAlgorithm] = &[$(&$module::$algorithm),+];
    };
}

/// Seed 002's sparse matrices (CSR, Matrix Market files, generators), for SYMGS.
pub mod csr;
/// Seed 003's series, shared by the Pearson algorithms.
pub mod random_walk;

register! {
    reduce => Reduce,
    durbin => Durbin,
    saxpy => Saxpy,
    scan => Scan,
    find_repeats => FindRepeats,
    pearson_series => PearsonSeries,
    pearson_means => PearsonMeans,
    pearson_matrix => PearsonMatrix,
    symgs => Symgs,
}

pub fn find(name: &str) -> Option<&'static dyn DynAlgorithm> {
    ALGORITHMS.iter().copied().find(|a| a.spec().name == name)
}

pub fn all() -> &'static [&'static dyn DynAlgorithm] {
    ALGORITHMS
}

pub fn names() -> Vec<&'static str> {
    ALGORITHMS.iter().map(|a| a.spec().name).collect()
}

/// Every kernel file, once (algorithms may share one): each algorithm's, and the timer's own.
pub fn kernel_files() -> Vec<KernelFile> {
    let mut files: Vec<KernelFile> = Vec::new();
    for file in ALGORITHMS.iter().map(|a| a.spec().kernel_file) {
        if !files.iter().any(|f| f.name == file.name) {
            files.push(file);
        }
    }
    files.push(crate::device::timer::HOLD_KERNEL_FILE);
    files
}

/// An algorithm, as data.
#[derive(Debug)]
pub struct Spec {
    pub name: &'static str,
    pub title: &'static str,
    pub axes: &'static [AxisDef],
    pub cpu_impls: &'static [&'static str],
    pub kernels: &'static [&'static str],
    /// Those of `kernels` that are library calls (cuBLAS, cuSPARSE) with no entry of their own in
    /// the kernel file.
    pub library_kernels: &'static [&'static str],
    /// The element type of every case, for an algorithm without a `dtype` axis (None where it
    /// has one): a manifest's tolerance for a float type no case has is refused.
    pub fixed_dtype: Option<DType>,
    pub kernel_file: KernelFile,
    /// The `[grid]` every CPU implementation is checked on by the generic harness
    /// (tests/harness.rs): awkward sizes (0 or 1 where legal, primes, non-powers of two).
    pub test_grid: &'static str,
    /// The `[grid]` every kernel is checked on by the GPU tests (tests/gpu.rs).
    pub gpu_test_grid: &'static str,
}

impl Spec {
    pub fn axis(&self, name: &str) -> Option<&'static AxisDef> {
        self.axes.iter().find(|a| a.name == name)
    }

    /// The axes' names, in declaration order (the table's columns).
    pub fn axis_names(&self) -> Vec<&'static str> {
        self.axes.iter().map(|a| a.name).collect()
    }

    /// The CPU implementations or the kernels, for a backend.
    pub fn implementations(&self, backend: Backend) -> &'static [&'static str] {
        match backend {
            Backend::Cpu => self.cpu_impls,
            Backend::Cuda => self.kernels,
        }
    }
}

/// What an algorithm implements. `Params` is its typed view of a case's axis values.
pub trait Algorithm: Sync + fmt::Debug + 'static {
    /// A case's parameters (serde: a choice axis is an enum, a float axis a float; an axis that
    /// one backend lacks, such as `block` on the CPU, an Option).
    type Params: DeserializeOwned + fmt::Debug;

    fn spec(&self) -> &'static Spec;

    /// The bytes of a case's inputs, outputs and references, and of whatever `implementation`
    /// (a CPU implementation or a kernel) allocates, computed with checked arithmetic (None: it
    /// overflows), so that a size too big for the machine is refused before anything is allocated.
    fn footprint_bytes(&self, p: &Self::Params, implementation: &str) -> Option<u64>;

    /// Seeded inputs and each output's reference; every variant at one grid point sees the same.
    fn prepare(&self, p: &Self::Params, seed: u64) -> Result<CaseData>;

    /// The CPU implementation `implementation`, ready to run on the case's data.
    fn cpu(&self, p: &Self::Params, implementation: &str) -> Result<CpuRun>;

    /// The launcher of `kernel`, owning its device state (scratch, graphs, kernel handles),
    /// bound to the case's buffers.
    fn cuda<'a>(
        &self,
        p: &Self::Params,
        kernel: &str,
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
    ) -> Result<Box<dyn Launcher + 'a>>;

    /// Whether `implementation` runs at this grid point at all (a TF32 tensor-core kernel takes
    /// float32 only). The plan leaves the points it does not out of that variant, as it leaves
    /// out the axes of the other backend. Default: everywhere.
    fn supports(&self, _p: &Self::Params, _implementation: &str) -> bool {
        true
    }

    /// The tolerance `implementation` is held to on `output`, where it is not the output's own:
    /// an implementation that trades precision for speed by design (TF32 tensor cores) states
    /// its error budget here. The manifest's `[accuracy]` still overrides it. Default: the
    /// output's.
    fn tolerance(
        &self,
        _p: &Self::Params,
        _implementation: &str,
        output: &OutputSpec,
    ) -> Tolerance {
        output.tolerance
    }
}

/// A CPU implementation, resolved for one case: reads the inputs, writes the outputs. It may
/// keep state between runs (buffers allocated once).
pub type CpuRun = Box<dyn FnMut(&Buffers, &mut Buffers) -> Result<()>>;

/// What the framework holds: any algorithm, its parameters still untyped.
pub trait DynAlgorithm: Sync + fmt::Debug {
    fn spec(&self) -> &'static Spec;
    /// Parses a case's parameters into the algorithm's typed struct.
    fn bind(&self, params: &Params) -> Result<Box<dyn BoundCase + '_>>;
}

/// An algorithm with one case's typed parameters.
pub trait BoundCase {
    fn supports(&self, implementation: &str) -> bool;
    fn tolerance(&self, implementation: &str, output: &OutputSpec) -> Tolerance;
    fn footprint_bytes(&self, implementation: &str) -> Option<u64>;
    fn prepare(&self, seed: u64) -> Result<CaseData>;
    fn cpu(&self, implementation: &str) -> Result<CpuRun>;
    fn cuda<'a>(
        &self,
        kernel: &str,
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
    ) -> Result<Box<dyn Launcher + 'a>>;
}

struct Bound<'a, A: Algorithm> {
    algorithm: &'a A,
    params: A::Params,
}

impl<A: Algorithm> DynAlgorithm for A {
    fn spec(&self) -> &'static Spec {
        Algorithm::spec(self)
    }

    fn bind(&self, params: &Params) -> Result<Box<dyn BoundCase + '_>> {
        let object: serde_json::Map<String, serde_json::Value> = params
            .iter()
            .map(|(k, v)| (k.clone(), v.to_json()))
            .collect();
        let params =
            serde_json::from_value(serde_json::Value::Object(object)).with_context(|| {
                format!(
                    "the parameters {} do not fit algorithm `{}`",
                    crate::vocab::describe_params(params),
                    Algorithm::spec(self).name
                )
            })?;
        Ok(Box::new(Bound {
            algorithm: self,
            params,
        }))
    }
}

impl<A: Algorithm> BoundCase for Bound<'_, A> {
    fn supports(&self, implementation: &str) -> bool {
        self.algorithm.supports(&self.params, implementation)
    }
    fn tolerance(&self, implementation: &str, output: &OutputSpec) -> Tolerance {
        self.algorithm
            .tolerance(&self.params, implementation, output)
    }
    fn footprint_bytes(&self, implementation: &str) -> Option<u64> {
        self.algorithm.footprint_bytes(&self.params, implementation)
    }
    fn prepare(&self, seed: u64) -> Result<CaseData> {
        self.algorithm.prepare(&self.params, seed)
    }
    fn cpu(&self, implementation: &str) -> Result<CpuRun> {
        self.algorithm.cpu(&self.params, implementation)
    }
    fn cuda<'a>(
        &self,
        kernel: &str,
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
    ) -> Result<Box<dyn Launcher + 'a>> {
        self.algorithm.cuda(&self.params, kernel, gpu, io)
    }
}

/// The error for an implementation or kernel name an algorithm does not have (the manifest
/// refuses those first; this guards the registration against a typo).
pub fn unknown(spec: &Spec, what: &str, name: &str) -> anyhow::Error {
    anyhow!("{} has no {what} `{name}`", spec.name)
}

// ---- Axes ----

/// What values an axis takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AxisKind {
    /// An element count, >= 0.
    Size,
    /// Threads per block: a power of two from 32 to 1024.
    BlockSize,
    /// A float within [min, max].
    Float { min: f64, max: f64 },
    /// One of the listed element types.
    Dtype(&'static [DType]),
    /// One of the listed names.
    Choice(&'static [&'static str]),
    /// A file, named by path or glob (expanded and checked when the manifest is read), or
    /// input the algorithm generates in its place.
    File(&'static FileAxis),
}

/// What a file axis takes: files of some extensions, each checked when the manifest is read so
/// that a malformed one is refused (at its own line) before anything runs, and, in their place,
/// named generated inputs ("hpcg:104").
#[derive(Debug)]
pub struct FileAxis {
    pub extensions: &'static [&'static str],
    /// Reads and validates one file; the error names the file and the line at fault.
    pub check_file: fn(&std::path::Path) -> Result<(), String>,
    /// `None`: the value is a path or glob. `Some(Ok)`: it names generated input. `Some(Err)`:
    /// it tries to (it has a generator's prefix) and is wrong.
    pub generated: fn(&str) -> Option<Result<(), String>>,
}

impl PartialEq for FileAxis {
    /// One axis is one static; two statics are two axes.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// The type an axis's values have in a where-filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    Int,
    Float,
    Str,
}

impl AxisKind {
    pub fn value_type(self) -> ValueType {
        match self {
            AxisKind::Size | AxisKind::BlockSize => ValueType::Int,
            AxisKind::Float { .. } => ValueType::Float,
            AxisKind::Dtype(_) | AxisKind::Choice(_) | AxisKind::File(_) => ValueType::Str,
        }
    }

    /// Checks a value, and returns it as the axis holds it (an integer on a float axis becomes
    /// a float).
    pub fn check(self, value: &ParamValue) -> Result<ParamValue, String> {
        let found = |v: &ParamValue| match v {
            ParamValue::Int(i) => format!("the integer {i}"),
            ParamValue::Float(x) => format!("the float {x}"),
            ParamValue::Str(s) => format!("the string \"{s}\""),
        };
        match (self, value) {
            (AxisKind::Size, ParamValue::Int(n)) if *n >= 0 => Ok(value.clone()),
            (AxisKind::Size, ParamValue::Int(n)) => Err(format!("a size must be >= 0, got {n}")),
            (AxisKind::BlockSize, ParamValue::Int(b))
                if (32..=1024).contains(b) && (*b as u64).is_power_of_two() =>
            {
                Ok(value.clone())
            }
            (AxisKind::BlockSize, ParamValue::Int(b)) => Err(format!(
                "a block size must be a power of two from 32 to 1024, got {b}"
            )),
            (AxisKind::Size | AxisKind::BlockSize, v) => {
                Err(format!("expected an integer, found {}", found(v)))
            }
            (AxisKind::Float { min, max }, ParamValue::Int(_) | ParamValue::Float(_)) => {
                let x = match value {
                    ParamValue::Int(i) => *i as f64,
                    ParamValue::Float(x) => *x,
                    ParamValue::Str(_) => unreachable!("matched above"),
                };
                if x.is_finite() && (min..=max).contains(&x) {
                    Ok(ParamValue::Float(x))
                } else {
                    Err(format!("expected a number from {min} to {max}, got {x}"))
                }
            }
            (AxisKind::Float { .. }, v) => Err(format!("expected a number, found {}", found(v))),
            (AxisKind::Dtype(allowed), ParamValue::Str(s)) => match DType::parse(s) {
                Some(d) if allowed.contains(&d) => Ok(value.clone()),
                _ => Err(format!(
                    "unknown dtype `{s}`; this algorithm takes {}",
                    allowed
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
            (AxisKind::Dtype(_), v) => Err(format!(
                "expected a dtype name like \"f32\", found {}",
                found(v)
            )),
            (AxisKind::Choice(allowed), ParamValue::Str(s)) if allowed.contains(&s.as_str()) => {
                Ok(value.clone())
            }
            (AxisKind::Choice(allowed), v) => Err(format!(
                "expected one of {}, found {}",
                allowed.join(", "),
                found(v)
            )),
            (AxisKind::File(_), ParamValue::Str(_)) => Ok(value.clone()),
            (AxisKind::File(_), v) => Err(format!(
                "expected a file path, a glob or a generator, found {}",
                found(v)
            )),
        }
    }
}

/// A value an axis takes when the manifest leaves it out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AxisDefault {
    Int(i64),
    Float(f64),
    Str(&'static str),
}

impl AxisDefault {
    pub fn to_param(self) -> ParamValue {
        match self {
            AxisDefault::Int(i) => ParamValue::Int(i),
            AxisDefault::Float(x) => ParamValue::Float(x),
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
    /// A required element count.
    pub const fn size(name: &'static str, doc: &'static str) -> AxisDef {
        AxisDef {
            name,
            kind: AxisKind::Size,
            default: None,
            only_for: None,
            doc,
        }
    }

    /// `dtype`, from `allowed`, defaulting to `default`.
    pub const fn dtype(allowed: &'static [DType], default: &'static str) -> AxisDef {
        AxisDef {
            name: "dtype",
            kind: AxisKind::Dtype(allowed),
            default: Some(AxisDefault::Str(default)),
            only_for: None,
            doc: "element type",
        }
    }

    /// `block`: threads per block of the CUDA kernels, 256 unless given.
    pub const BLOCK: AxisDef = AxisDef {
        name: "block",
        kind: AxisKind::BlockSize,
        default: Some(AxisDefault::Int(256)),
        only_for: Some(Backend::Cuda),
        doc: "threads per block",
    };

    /// One of `names` (a `choice!` enum's NAMES), defaulting to `default`.
    pub const fn choice(
        name: &'static str,
        names: &'static [&'static str],
        default: &'static str,
        doc: &'static str,
    ) -> AxisDef {
        AxisDef {
            name,
            kind: AxisKind::Choice(names),
            default: Some(AxisDefault::Str(default)),
            only_for: None,
            doc,
        }
    }

    /// A float from `min` to `max`, defaulting to `default`.
    pub const fn float(
        name: &'static str,
        default: f64,
        min: f64,
        max: f64,
        doc: &'static str,
    ) -> AxisDef {
        AxisDef {
            name,
            kind: AxisKind::Float { min, max },
            default: Some(AxisDefault::Float(default)),
            only_for: None,
            doc,
        }
    }

    pub fn applies_to(&self, backend: Backend) -> bool {
        self.only_for.is_none_or(|b| b == backend)
    }
}

/// Declares an enum for a choice axis: its variants, their names in manifests, serde, and
/// `NAMES` for the axis definition, so the names are written once.
#[macro_export]
macro_rules! choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }
    };
}

// ---- A case's data ----

/// Named host buffers: a case's inputs, or the outputs an implementation writes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Buffers(pub Vec<(&'static str, HostData)>);

impl Buffers {
    pub fn data(&self, name: &str) -> Result<&HostData> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d)
            .ok_or_else(|| anyhow!("no buffer `{name}`"))
    }

    pub fn data_mut(&mut self, name: &str) -> Result<&mut HostData> {
        self.0
            .iter_mut()
            .find(|(n, _)| *n == name)
            .map(|(_, d)| d)
            .ok_or_else(|| anyhow!("no buffer `{name}`"))
    }

    /// The buffer `name` as a slice of `T`.
    pub fn get<T: Element>(&self, name: &str) -> Result<&[T]> {
        let data = self.data(name)?;
        T::slice(data)
            .ok_or_else(|| anyhow!("buffer `{name}` holds {}, not {}", data.dtype(), T::DTYPE))
    }

    pub fn get_mut<T: Element>(&mut self, name: &str) -> Result<&mut [T]> {
        let data = self.data_mut(name)?;
        let dtype = data.dtype();
        T::slice_mut(data).ok_or_else(|| anyhow!("buffer `{name}` holds {dtype}, not {}", T::DTYPE))
    }
}

/// Where an output's produced length comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    /// The whole buffer.
    Full,
    /// Element 0 of the named output (a count the implementation writes), at most the capacity.
    CountIn(&'static str),
}

/// One output: its buffer's shape, how long it turns out, and what it must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputSpec {
    pub name: &'static str,
    pub dtype: DType,
    /// Elements of the buffer an implementation may write.
    pub capacity: usize,
    pub length: Length,
    /// The float64 (or, for integers, exact) reference of the produced elements.
    pub reference: Vec<f64>,
    /// Before the manifest's overrides; integers are always exact.
    pub tolerance: Tolerance,
    /// `Some(input)`: the output is computed in place over a copy of that input (SAXPY's y):
    /// before each run it holds the input, not poison. (An element left unwritten still fails,
    /// since the reference differs from the input.)
    pub in_place: Option<&'static str>,
    /// `Some(indices)`: the reference covers only these elements of the output (ascending, each
    /// below the capacity; `reference[k]` is element `indices[k]`'s), where a float64 reference
    /// of every element would take too long. Only they are checked, and the results say how
    /// many of how many were. `None`: every element.
    pub checked: Option<Vec<usize>>,
}

impl OutputSpec {
    /// An output of fixed length, the reference's.
    pub fn new(
        name: &'static str,
        dtype: DType,
        reference: Vec<f64>,
        tolerance: Tolerance,
    ) -> Self {
        OutputSpec {
            name,
            dtype,
            capacity: reference.len(),
            length: Length::Full,
            reference,
            tolerance,
            in_place: None,
            checked: None,
        }
    }

    /// An output of `capacity` elements of which only those at `indices` (ascending) are
    /// checked, against `reference` (one value an index).
    pub fn subset(
        name: &'static str,
        dtype: DType,
        capacity: usize,
        indices: Vec<usize>,
        reference: Vec<f64>,
        tolerance: Tolerance,
    ) -> Result<Self> {
        if indices.len() != reference.len() {
            bail!(
                "output `{name}`: {} checked indices but {} reference values",
                indices.len(),
                reference.len()
            );
        }
        if indices.windows(2).any(|w| w[0] >= w[1]) || indices.last() >= Some(&capacity) {
            bail!("output `{name}`: checked indices must ascend and stay below {capacity}");
        }
        Ok(OutputSpec {
            name,
            dtype,
            capacity,
            length: Length::Full,
            reference,
            tolerance,
            in_place: None,
            checked: Some(indices),
        })
    }
}

/// One case's data: named inputs, each output's reference, and the least work the case must do
/// (for GB/s and GFLOP/s).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CaseData {
    pub inputs: Buffers,
    pub outputs: Vec<OutputSpec>,
    pub bytes_moved: u64,
    pub flops: u64,
    /// Numbers worth recording about the case (levels, colours, repeats found).
    pub facts: Vec<(&'static str, f64)>,
}

impl CaseData {
    /// Output buffers of each output's capacity, ready for a run (see `reset_outputs`).
    pub fn output_buffers(&self) -> Buffers {
        let mut outputs = Buffers(
            self.outputs
                .iter()
                .map(|o| (o.name, HostData::zeros(o.dtype, o.capacity)))
                .collect(),
        );
        self.reset_outputs(&mut outputs);
        outputs
    }

    /// Readies the outputs for a run: poisoned, or, for one computed in place, a copy of its
    /// input.
    pub fn reset_outputs(&self, outputs: &mut Buffers) {
        for (spec, (_, data)) in self.outputs.iter().zip(&mut outputs.0) {
            match spec.in_place.and_then(|input| self.inputs.data(input).ok()) {
                Some(initial) => data.clone_from(initial),
                None => data.poison(),
            }
        }
    }

    /// Cuts each output with a data-dependent length down to what its count says, checking the
    /// count first: a count outside 0..=capacity is an error, not a reason to read past the end.
    pub fn trim_outputs(&self, outputs: &mut Buffers) -> Result<()> {
        for spec in &self.outputs {
            let Length::CountIn(count_name) = spec.length else {
                continue;
            };
            let count = outputs.data(count_name)?.to_f64().first().copied();
            let len = match count {
                Some(c) if c >= 0.0 && c <= spec.capacity as f64 && c.fract() == 0.0 => c as usize,
                other => bail!(
                    "output `{count_name}` says {} elements of `{}`, which holds at most {}",
                    other.map_or("nothing".into(), |c| c.to_string()),
                    spec.name,
                    spec.capacity
                ),
            };
            outputs.data_mut(spec.name)?.truncate(len);
        }
        Ok(())
    }
}

/// The grid's largest element count that still indexes with 32 bits, for kernels that do.
pub fn u32_size(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n)
        .map_err(|_| anyhow!("{what}: n = {n} does not fit the kernels' 32-bit indices"))
}

#[cfg(test)]
mod tests {
    use super::*;

    choice! {
        enum Shape {
            Round = "round",
            Square = "square",
        }
    }

    #[test]
    fn choice_enums_name_their_values_once() {
        assert_eq!(Shape::NAMES, &["round", "square"]);
        assert_eq!(Shape::Square.name(), "square");
        let parsed: Shape = serde_json::from_str("\"round\"").unwrap();
        assert_eq!(parsed, Shape::Round);
        let kind = AxisKind::Choice(Shape::NAMES);
        assert!(kind.check(&ParamValue::Str("square".into())).is_ok());
        let err = kind.check(&ParamValue::Str("oval".into())).unwrap_err();
        assert!(err.contains("round, square"), "{err}");
        assert!(kind.check(&ParamValue::Int(3)).is_err());
    }

    #[test]
    fn float_axes_take_integers_as_floats_within_bounds() {
        let kind = AxisKind::Float {
            min: 0.0,
            max: 10.0,
        };
        assert_eq!(
            kind.check(&ParamValue::Int(2)).unwrap(),
            ParamValue::Float(2.0)
        );
        assert!(kind.check(&ParamValue::Float(10.5)).is_err());
        assert!(kind.check(&ParamValue::Float(f64::NAN)).is_err());
        assert!(kind.check(&ParamValue::Str("2".into())).is_err());
    }

    #[test]
    fn data_dependent_outputs_are_cut_to_their_count_and_a_bad_count_is_refused() {
        let data = CaseData {
            outputs: vec![
                OutputSpec::new("count", DType::I32, vec![2.0], Tolerance::EXACT),
                OutputSpec {
                    name: "indices",
                    dtype: DType::I32,
                    capacity: 4,
                    length: Length::CountIn("count"),
                    reference: vec![1.0, 3.0],
                    tolerance: Tolerance::EXACT,
                    in_place: None,
                    checked: None,
                },
            ],
            ..CaseData::default()
        };
        let mut out = data.output_buffers();
        out.get_mut::<i32>("count").unwrap()[0] = 2;
        out.get_mut::<i32>("indices").unwrap()[..2].copy_from_slice(&[1, 3]);
        data.trim_outputs(&mut out).unwrap();
        assert_eq!(out.get::<i32>("indices").unwrap(), &[1, 3]);

        let mut out = data.output_buffers();
        out.get_mut::<i32>("count").unwrap()[0] = 5;
        let err = data.trim_outputs(&mut out).unwrap_err().to_string();
        assert!(err.contains("at most 4"), "{err}");
        // Unwritten (poisoned) counts are refused too.
        let mut out = data.output_buffers();
        assert!(data.trim_outputs(&mut out).is_err());
    }

    #[test]
    fn subset_outputs_check_their_indices_against_the_reference() {
        let tol = Tolerance::relative(1e-6);
        let out = OutputSpec::subset("r", DType::F32, 9, vec![0, 4, 8], vec![1.0; 3], tol).unwrap();
        assert_eq!(out.capacity, 9);
        assert_eq!(out.checked.as_deref(), Some(&[0, 4, 8][..]));
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![0, 4], vec![1.0; 3], tol).is_err());
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![4, 0], vec![1.0; 2], tol).is_err());
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![0, 9], vec![1.0; 2], tol).is_err());
        assert!(OutputSpec::subset("r", DType::F32, 9, vec![3, 3], vec![1.0; 2], tol).is_err());
    }

    #[test]
    fn every_registered_algorithm_declares_consistent_data() {
        for algorithm in all() {
            let spec = algorithm.spec();
            assert!(!spec.cpu_impls.is_empty() || !spec.kernels.is_empty());
            for axis in spec.axes {
                if let Some(default) = axis.default {
                    axis.kind
                        .check(&default.to_param())
                        .unwrap_or_else(|e| panic!("{}.{}: {e}", spec.name, axis.name));
                }
            }
            for library_kernel in spec.library_kernels {
                assert!(spec.kernels.contains(library_kernel), "{library_kernel}");
            }
            for kernel in spec
                .kernels
                .iter()
                .filter(|k| !spec.library_kernels.contains(k))
            {
                assert!(
                    spec.kernel_file.source.contains(kernel),
                    "{} names kernel {kernel}, which {} does not mention",
                    spec.name,
                    spec.kernel_file.name
                );
            }
        }
    }
}
