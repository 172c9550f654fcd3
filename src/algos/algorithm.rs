//! The seam an algorithm plugs into: its description (`Spec`), the traits the framework holds
//! it by (`DynAlgorithm`, and `BoundCase` for one case), and `Algorithm`, the typed form a Rust
//! module implements, whose CPU implementations and kernels are each registered once, their
//! name beside their constructor (`CpuImpl`, `KernelImpl`).
//!
//! Two kinds of algorithm fit: a built-in (a module with typed parameters and tables of
//! constructors, made a `DynAlgorithm` by the blanket impl here) and one built at run time from
//! data (a manifest's own kernels), which implements `DynAlgorithm` and `BoundCase` itself. The
//! framework sees only the latter two traits, so it cannot tell them apart.

use std::fmt;

use anyhow::{anyhow, Context, Result};
use serde::de::DeserializeOwned;

use super::{AxisDef, Buffers, CaseData, OutputSpec};
use crate::device::{DeviceIo, Gpu, KernelFile, Launcher};
use crate::record::{CheckVerdict, Variant};
use crate::vocab::{Backend, DType, Params, Tolerance};

/// An algorithm, as data.
///
/// Its strings and axes are `'static`: a built-in's are literals, and an algorithm built from a
/// manifest leaks its own once (a process reads its manifest once), so that the plan, the grid
/// and the results can keep axis names without copying them. The lists and folders are owned.
///
/// Build one as `Spec { name, title, .., ..Spec::implementing(A::CPU, A::KERNELS) }` (or
/// `..Spec::DEFAULT`): a field added with a default then touches no algorithm module. A
/// built-in's is a `LazyLock` static, since its lists are collected from its tables; its axes
/// are a plain static beside it (`&[..]` of const calls is not promoted inside the closure).
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: &'static str,
    pub title: &'static str,
    pub axes: &'static [AxisDef],
    /// The CPU implementations' names, in registration order.
    pub cpu_impls: Vec<&'static str>,
    /// The kernels' names, in registration order.
    pub kernels: Vec<&'static str>,
    /// Those of `kernels` that are library calls (cuBLAS, cuSPARSE) with no entry of their own in
    /// the kernel file.
    pub library_kernels: Vec<&'static str>,
    /// The element type of every case, for an algorithm without a `dtype` axis (None where it
    /// has one): a manifest's tolerance for a float type no case has is refused.
    pub fixed_dtype: Option<DType>,
    /// The kernel file (an empty name and source for an algorithm without kernels).
    pub kernel_file: KernelFile,
    /// The `[grid]` every CPU implementation is checked on by the generic harness
    /// (tests/harness.rs): awkward sizes (0 or 1 where legal, primes, non-powers of two).
    pub test_grid: &'static str,
    /// The `[grid]` every kernel is checked on by the GPU tests (tests/gpu.rs).
    pub gpu_test_grid: &'static str,
}

impl Spec {
    /// Every field empty: the base a spec's struct literal completes (`..Spec::DEFAULT`).
    pub const DEFAULT: Spec = Spec {
        name: "",
        title: "",
        axes: &[],
        cpu_impls: Vec::new(),
        kernels: Vec::new(),
        library_kernels: Vec::new(),
        fixed_dtype: None,
        kernel_file: KernelFile::embedded("", ""),
        test_grid: "",
        gpu_test_grid: "",
    };

    /// `DEFAULT` with the implementation lists read from an algorithm's registration tables,
    /// so that each name is written once, beside its constructor.
    pub fn implementing<P>(cpu: &[CpuImpl<P>], kernels: &[KernelImpl<P>]) -> Spec {
        Spec {
            cpu_impls: cpu.iter().map(|i| i.name).collect(),
            kernels: kernels.iter().map(|k| k.name).collect(),
            library_kernels: kernels
                .iter()
                .filter(|k| k.needs.library)
                .map(|k| k.name)
                .collect(),
            ..Spec::DEFAULT
        }
    }

    pub fn axis(&self, name: &str) -> Option<&'static AxisDef> {
        self.axes.iter().find(|a| a.name == name)
    }

    /// The axes' names, in declaration order (the table's columns).
    pub fn axis_names(&self) -> Vec<&'static str> {
        self.axes.iter().map(|a| a.name).collect()
    }

    /// The CPU implementations or the kernels, for a backend.
    pub fn implementations(&self, backend: Backend) -> &[&'static str] {
        match backend {
            Backend::Cpu => &self.cpu_impls,
            Backend::Cuda => &self.kernels,
        }
    }
}

/// A CPU implementation, resolved for one case: reads the inputs, writes the outputs. It may
/// keep state between runs (buffers allocated once).
pub type CpuRun = Box<dyn FnMut(&Buffers, &mut Buffers) -> Result<()>>;

/// Builds a CPU implementation's run for one case's parameters.
pub type BuildCpu<P> = fn(&P) -> Result<CpuRun>;

/// Builds a kernel's launcher, owning its device state (scratch, graphs, kernel handles), bound
/// to the case's buffers.
pub type BuildLauncher<P> = for<'a> fn(&P, OnDevice<'a>) -> Result<Box<dyn Launcher + 'a>>;

/// What a kernel's launcher is built on: the kernel's registered name (its entry in the kernel
/// file, before any dtype suffix), the device, and the case's buffers there.
#[derive(Clone, Copy)]
pub struct OnDevice<'a> {
    pub kernel: &'static str,
    pub gpu: Gpu<'a>,
    pub io: &'a DeviceIo,
}

impl OnDevice<'_> {
    /// The kernel's own function for `dtype`: `{kernel}_{dtype}`, as the kernel files name them.
    pub fn function(&self, dtype: DType) -> Result<crate::device::Kernel> {
        self.gpu
            .kernel(&format!("{}_{}", self.kernel, dtype.name()))
    }
}

/// One CPU implementation or kernel: its name, written once, beside its constructor, and what
/// it needs beyond the algorithm's defaults (set by the builder methods).
pub struct Implementation<P: 'static, B> {
    pub name: &'static str,
    pub build: B,
    pub needs: Needs<P>,
}

/// What an implementation states about itself; each field has a default, so a new one touches
/// only the implementations that differ from it.
pub struct Needs<P: 'static> {
    /// A library call (cuBLAS, cuSPARSE) with no entry of its own in the kernel file.
    pub library: bool,
    /// Bytes it allocates beyond the case's data (None: the count overflows). Default: 0.
    pub scratch_bytes: fn(&P) -> Option<u64>,
    /// Whether it runs at this grid point at all (a TF32 tensor-core kernel takes float32
    /// only). The plan leaves the points it does not out of the variant. Default: everywhere.
    pub supports: fn(&P) -> bool,
    /// The tolerance it is held to on an output, where it is not the output's own: an
    /// implementation that trades precision for speed by design (TF32 tensor cores) states its
    /// error budget here. The manifest's `[accuracy]` still overrides it. Default: the output's.
    pub tolerance: fn(&P, &OutputSpec) -> Tolerance,
}

/// A CPU implementation's registration.
pub type CpuImpl<P> = Implementation<P, BuildCpu<P>>;
/// A kernel's registration.
pub type KernelImpl<P> = Implementation<P, BuildLauncher<P>>;

fn no_scratch<P>(_: &P) -> Option<u64> {
    Some(0)
}

fn everywhere<P>(_: &P) -> bool {
    true
}

fn output_tolerance<P>(_: &P, output: &OutputSpec) -> Tolerance {
    output.tolerance
}

// B: Copy (a function pointer): a const fn may not drop a generic value.
impl<P, B: Copy> Implementation<P, B> {
    /// `name`, built by `build`, with every default.
    pub const fn new(name: &'static str, build: B) -> Self {
        Implementation {
            name,
            build,
            needs: Needs {
                library: false,
                scratch_bytes: no_scratch::<P>,
                supports: everywhere::<P>,
                tolerance: output_tolerance::<P>,
            },
        }
    }

    /// A library call, not a kernel of the algorithm's file.
    pub const fn library(self) -> Self {
        let needs = Needs {
            library: true,
            ..self.needs
        };
        Implementation { needs, ..self }
    }

    pub const fn scratch_bytes(self, scratch_bytes: fn(&P) -> Option<u64>) -> Self {
        let needs = Needs {
            scratch_bytes,
            ..self.needs
        };
        Implementation { needs, ..self }
    }

    pub const fn supports(self, supports: fn(&P) -> bool) -> Self {
        let needs = Needs {
            supports,
            ..self.needs
        };
        Implementation { needs, ..self }
    }

    pub const fn tolerance(self, tolerance: fn(&P, &OutputSpec) -> Tolerance) -> Self {
        let needs = Needs {
            tolerance,
            ..self.needs
        };
        Implementation { needs, ..self }
    }
}

/// What a built-in implements. `Params` is its typed view of a case's axis values.
pub trait Algorithm: Send + Sync + fmt::Debug + 'static {
    /// A case's parameters (serde: a choice axis is an enum, a float axis a float; an axis that
    /// one backend lacks, such as `block` on the CPU, an Option).
    type Params: DeserializeOwned + fmt::Debug;

    /// The CPU implementations, each named once beside its constructor.
    const CPU: &'static [CpuImpl<Self::Params>];
    /// The kernels, each named once beside its launcher's constructor.
    const KERNELS: &'static [KernelImpl<Self::Params>];

    /// Its description; the implementation lists come from `CPU` and `KERNELS`
    /// (`Spec::implementing`).
    fn spec(&self) -> &Spec;

    /// The bytes of a case's inputs, outputs and references, computed with checked arithmetic
    /// (None: it overflows), so that a size too big for the machine is refused before anything
    /// is allocated. Each implementation's own scratch is added from its registration.
    fn footprint_bytes(&self, p: &Self::Params) -> Option<u64>;

    /// Seeded inputs and each output's reference; every variant at one grid point sees the same.
    fn prepare(&self, p: &Self::Params, seed: u64) -> Result<CaseData>;

    /// One case with typed parameters (`bind` makes the same from untyped ones): its
    /// implementations and kernels, found by name in the tables.
    fn case(&self, params: Self::Params) -> Box<dyn BoundCase + '_>
    where
        Self: Sized,
    {
        Box::new(Bound {
            algorithm: self,
            params,
        })
    }
}

/// What the framework holds: any algorithm, built in or built from data, its parameters still
/// untyped.
pub trait DynAlgorithm: Send + Sync + fmt::Debug {
    fn spec(&self) -> &Spec;
    /// Parses a case's parameters into the algorithm's own form.
    fn bind(&self, params: &Params) -> Result<Box<dyn BoundCase + '_>>;
}

/// An algorithm with one case's parameters. `implementation` names a CPU implementation or a
/// kernel of the algorithm's spec.
pub trait BoundCase {
    /// Whether `implementation` can run this case (every one, unless the algorithm says not).
    fn supports(&self, _implementation: &str) -> bool {
        true
    }
    /// The tolerance `output` is checked with: the output's own, unless the algorithm's
    /// implementations differ in accuracy.
    fn tolerance(&self, _implementation: &str, output: &OutputSpec) -> Tolerance {
        output.tolerance
    }
    /// The bytes of the case's data and of what `implementation` allocates (None: overflow).
    fn footprint_bytes(&self, implementation: &str) -> Option<u64>;
    fn prepare(&self, seed: u64) -> Result<CaseData>;
    /// The CPU implementation `implementation`, ready to run on the case's data.
    fn cpu(&self, implementation: &str) -> Result<CpuRun>;
    /// The launcher of `kernel`, bound to the case's buffers on the device.
    fn cuda<'a>(
        &self,
        kernel: &str,
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
    ) -> Result<Box<dyn Launcher + 'a>>;
    /// The kernel file `kernel` (a variant's or the reference's) is compiled from, where it is
    /// not the spec's: a custom study's sources with the case's defines and the kernel
    /// sequence's options. Built-ins: None.
    fn kernel_file(&self, _kernel: &str) -> Option<Result<KernelFile>> {
        None
    }
    /// Why kernel `kernel` cannot run at this case's point on any GPU (a block of 1200
    /// threads), found without one: the case is skipped with it. Built-ins: None.
    fn unrunnable(&self, _kernel: &str) -> Option<String> {
        None
    }
    /// The kernel whose outputs, run once per case outside the timing on the same inputs, are
    /// the reference of the case's outputs (a custom study's trusted kernel). Built-ins: None
    /// (their references come with the data).
    fn reference_kernel(&self) -> Option<&str> {
        None
    }
    /// Makes the part of the case's data its variant decides, after the grid point's (`prepare`,
    /// shared by the point's variants): a custom study's reference command run per variant.
    /// Nothing by default.
    fn prepare_variant(&self, _seed: u64, _variant: &Variant, _data: &mut CaseData) -> Result<()> {
        Ok(())
    }
    /// Whether `implementation` is timed only, its outputs left unchecked (a custom kernel
    /// sequence declared `unchecked`). Built-ins: false.
    fn unchecked(&self, _implementation: &str) -> bool {
        false
    }
    /// A judgement of the whole answer beside each output's against its reference: a custom
    /// study's check command, given the inputs, the `outputs` the variant produced and the
    /// references. An error: no verdict could be had. Built-ins: None.
    fn check_answer(
        &self,
        _variant: &Variant,
        _data: &CaseData,
        _outputs: &Buffers,
    ) -> Result<Option<CheckVerdict>> {
        Ok(None)
    }
    /// Whether the case's device buffers get guard zones (see `device::guard`), checked after
    /// its runs: a custom study's kernels, which kbench cannot vouch for. Built-ins: false
    /// (their kernels are tested, and their allocations stay exactly the seed's).
    fn guard_buffers(&self) -> bool {
        false
    }
}

/// The error for an implementation or kernel name an algorithm does not have (the manifest
/// refuses those first; this guards a caller that skipped it).
/// A case the GPU cannot run as declared (a block of more threads than the kernel's registers
/// allow, more shared memory than the device has): the case is skipped with this reason, and
/// the study goes on, as NVBench's `skip` and Kernel Tuner's invalid configurations.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct Unrunnable(pub String);

pub fn unknown(spec: &Spec, what: &str, name: &str) -> anyhow::Error {
    anyhow!("{} has no {what} `{name}`", spec.name)
}

/// A built-in with one case's typed parameters.
struct Bound<'a, A: Algorithm> {
    algorithm: &'a A,
    params: A::Params,
}

impl<A: Algorithm> DynAlgorithm for A {
    fn spec(&self) -> &Spec {
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
        Ok(self.case(params))
    }
}

impl<A: Algorithm> Bound<'_, A> {
    /// What the implementation `name` states (CPU implementations first); None for a name the
    /// algorithm does not have.
    fn needs(&self, name: &str) -> Option<&'static Needs<A::Params>> {
        let cpu = A::CPU.iter().find(|i| i.name == name).map(|i| &i.needs);
        cpu.or_else(|| A::KERNELS.iter().find(|k| k.name == name).map(|k| &k.needs))
    }
}

impl<A: Algorithm> BoundCase for Bound<'_, A> {
    fn supports(&self, implementation: &str) -> bool {
        self.needs(implementation)
            .is_none_or(|needs| (needs.supports)(&self.params))
    }

    fn tolerance(&self, implementation: &str, output: &OutputSpec) -> Tolerance {
        match self.needs(implementation) {
            Some(needs) => (needs.tolerance)(&self.params, output),
            None => output.tolerance,
        }
    }

    fn footprint_bytes(&self, implementation: &str) -> Option<u64> {
        let data = self.algorithm.footprint_bytes(&self.params)?;
        match self.needs(implementation) {
            Some(needs) => data.checked_add((needs.scratch_bytes)(&self.params)?),
            None => Some(data),
        }
    }

    fn prepare(&self, seed: u64) -> Result<CaseData> {
        self.algorithm.prepare(&self.params, seed)
    }

    fn cpu(&self, implementation: &str) -> Result<CpuRun> {
        let found = A::CPU.iter().find(|i| i.name == implementation);
        let spec = Algorithm::spec(self.algorithm);
        let found = found.ok_or_else(|| unknown(spec, "CPU implementation", implementation))?;
        (found.build)(&self.params)
    }

    fn cuda<'a>(
        &self,
        kernel: &str,
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
    ) -> Result<Box<dyn Launcher + 'a>> {
        let found = A::KERNELS.iter().find(|k| k.name == kernel);
        let spec = Algorithm::spec(self.algorithm);
        let found = found.ok_or_else(|| unknown(spec, "kernel", kernel))?;
        let on = OnDevice {
            kernel: found.name,
            gpu,
            io,
        };
        (found.build)(&self.params, on)
    }
}

/// Fails unless `algorithm`'s spec lists exactly the names its tables register, in their
/// order, and each name once (the spec is built with `Spec::implementing`).
#[cfg(test)]
pub(super) fn assert_spec_lists_tables<A: Algorithm>(algorithm: &A) {
    let spec = Algorithm::spec(algorithm);
    let expected = Spec::implementing(A::CPU, A::KERNELS);
    assert_eq!(spec.cpu_impls, expected.cpu_impls, "{}", spec.name);
    assert_eq!(spec.kernels, expected.kernels, "{}", spec.name);
    assert_eq!(
        spec.library_kernels, expected.library_kernels,
        "{}",
        spec.name
    );
    let mut names: Vec<&str> = spec
        .cpu_impls
        .iter()
        .chain(&spec.kernels)
        .copied()
        .collect();
    names.sort_unstable();
    let count = names.len();
    names.dedup();
    assert_eq!(names.len(), count, "{} registers a name twice", spec.name);
}
