//! The list of algorithms a study may name: the built-ins (`register!` in `mod.rs`), and any
//! built at run time from data, which a `Registry` holds beside them. `AlgorithmRef` is how the
//! manifest and everything after it hold one algorithm of either kind.

use std::ops::Deref;
use std::sync::{Arc, LazyLock};

use anyhow::{bail, Result};

use super::{DynAlgorithm, BUILTIN};
use crate::device::KernelFile;

/// One algorithm: a built-in, or one built from data (shared by the threads of a run).
#[derive(Debug, Clone)]
pub enum AlgorithmRef {
    Builtin(&'static dyn DynAlgorithm),
    Owned(Arc<dyn DynAlgorithm>),
}

impl Deref for AlgorithmRef {
    type Target = dyn DynAlgorithm;

    fn deref(&self) -> &Self::Target {
        match self {
            AlgorithmRef::Builtin(algorithm) => *algorithm,
            AlgorithmRef::Owned(algorithm) => algorithm.as_ref(),
        }
    }
}

/// Algorithms by name: the built-ins first, in the order `kbench list` shows them, then those
/// added.
#[derive(Debug, Clone)]
pub struct Registry {
    algorithms: Vec<AlgorithmRef>,
}

impl Registry {
    /// The built-in algorithms alone.
    pub fn builtin() -> Registry {
        Registry {
            algorithms: BUILTIN.iter().map(|&a| AlgorithmRef::Builtin(a)).collect(),
        }
    }

    /// Adds an algorithm built at run time; a name already taken is refused, since a manifest
    /// names its algorithm by name.
    pub fn add(&mut self, algorithm: Arc<dyn DynAlgorithm>) -> Result<()> {
        let name = algorithm.spec().name;
        if self.find(name).is_some() {
            bail!("an algorithm named `{name}` is already registered");
        }
        self.algorithms.push(AlgorithmRef::Owned(algorithm));
        Ok(())
    }

    pub fn find(&self, name: &str) -> Option<AlgorithmRef> {
        self.algorithms
            .iter()
            .find(|a| a.spec().name == name)
            .cloned()
    }

    pub fn all(&self) -> &[AlgorithmRef] {
        &self.algorithms
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.algorithms.iter().map(|a| a.spec().name).collect()
    }

    /// Every kernel file, once (algorithms may share one): each algorithm's, and the timer's own.
    pub fn kernel_files(&self) -> Vec<KernelFile> {
        let mut files: Vec<KernelFile> = Vec::new();
        for algorithm in &self.algorithms {
            let file = algorithm.spec().kernel_file;
            // An algorithm without kernels has a file with no name.
            if !file.name.is_empty() && !files.iter().any(|f| f.name == file.name) {
                files.push(file);
            }
        }
        files.push(crate::device::timer::HOLD_KERNEL_FILE);
        files
    }
}

static BUILTINS: LazyLock<Registry> = LazyLock::new(Registry::builtin);

/// The built-in algorithm `name`.
pub fn find(name: &str) -> Option<AlgorithmRef> {
    BUILTINS.find(name)
}

/// Every built-in algorithm, in the order `kbench list` shows them.
pub fn all() -> &'static [AlgorithmRef] {
    BUILTINS.all()
}

pub fn names() -> Vec<&'static str> {
    BUILTINS.names()
}

/// Every built-in's kernel file, once, and the timer's own.
pub fn kernel_files() -> Vec<KernelFile> {
    BUILTINS.kernel_files()
}

#[cfg(test)]
mod tests {
    use anyhow::{bail, Context};

    use super::*;
    use crate::algos::{AxisDef, BoundCase, Buffers, CaseData, CpuRun, OutputSpec, Spec};
    use crate::device::{DeviceIo, Gpu, Launcher};
    use crate::vocab::{DType, HostData, ParamValue, Params, Tolerance};

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
            for library_kernel in &spec.library_kernels {
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

    static SCALED_AXES: [AxisDef; 1] = [AxisDef::size("n", "elements scaled")];

    /// A tiny algorithm built from data, as one a manifest declares will be: y = factor x over
    /// `n` elements, its name and factor known only at run time.
    #[derive(Debug)]
    struct Scaled {
        spec: Spec,
        factor: f64,
    }

    impl Scaled {
        fn from_data(name: &str, factor: f64) -> Scaled {
            // A spec's strings are 'static: one built from data leaks its own, once.
            let name: &'static str = Box::leak(name.to_owned().into_boxed_str());
            Scaled {
                spec: Spec {
                    name,
                    title: "y = factor x",
                    axes: &SCALED_AXES,
                    cpu_impls: vec!["scale"],
                    fixed_dtype: Some(DType::F64),
                    ..Spec::DEFAULT
                },
                factor,
            }
        }
    }

    struct ScaledCase<'a> {
        algorithm: &'a Scaled,
        n: usize,
    }

    impl DynAlgorithm for Scaled {
        fn spec(&self) -> &Spec {
            &self.spec
        }

        fn bind(&self, params: &Params) -> Result<Box<dyn BoundCase + '_>> {
            let n = match params.get("n") {
                Some(ParamValue::Int(n)) => usize::try_from(*n).context("n < 0")?,
                other => bail!("n must be an integer, not {other:?}"),
            };
            Ok(Box::new(ScaledCase { algorithm: self, n }))
        }
    }

    impl BoundCase for ScaledCase<'_> {
        fn footprint_bytes(&self, _implementation: &str) -> Option<u64> {
            (self.n as u64).checked_mul(3 * 8)
        }
        fn prepare(&self, _seed: u64) -> Result<CaseData> {
            let x: Vec<f64> = (0..self.n).map(|i| i as f64).collect();
            let y = x.iter().map(|v| v * self.algorithm.factor).collect();
            Ok(CaseData {
                inputs: Buffers(vec![("x", HostData::F64(x))]),
                outputs: vec![OutputSpec::new("y", DType::F64, y, Tolerance::EXACT)],
                ..CaseData::default()
            })
        }
        fn cpu(&self, implementation: &str) -> Result<CpuRun> {
            if implementation != "scale" {
                return Err(crate::algos::unknown(
                    &self.algorithm.spec,
                    "CPU implementation",
                    implementation,
                ));
            }
            let factor = self.algorithm.factor;
            Ok(Box::new(move |inputs, outputs| {
                let x = inputs.get::<f64>("x")?;
                for (y, x) in outputs.get_mut::<f64>("y")?.iter_mut().zip(x) {
                    *y = factor * x;
                }
                Ok(())
            }))
        }
        fn cuda<'a>(
            &self,
            kernel: &str,
            _gpu: Gpu<'a>,
            _io: &'a DeviceIo,
        ) -> Result<Box<dyn Launcher + 'a>> {
            Err(crate::algos::unknown(
                &self.algorithm.spec,
                "kernel",
                kernel,
            ))
        }
    }

    #[test]
    fn an_algorithm_built_from_data_registers_binds_and_runs_beside_the_builtins() {
        let mut registry = Registry::builtin();
        registry
            .add(Arc::new(Scaled::from_data("triple", 3.0)))
            .unwrap();
        let err = registry.add(Arc::new(Scaled::from_data("reduce", 1.0)));
        assert!(err.unwrap_err().to_string().contains("already registered"));
        assert_eq!(registry.names().last(), Some(&"triple"));
        assert_eq!(registry.kernel_files().len(), kernel_files().len());

        let algorithm = registry.find("triple").unwrap();
        assert!(matches!(algorithm, AlgorithmRef::Owned(_)));
        assert_eq!(algorithm.spec().cpu_impls, ["scale"]);
        let params = Params::from([("n".to_string(), ParamValue::Int(4))]);
        let case = algorithm.bind(&params).unwrap();
        let data = case.prepare(1).unwrap();
        let mut outputs = data.output_buffers();
        (case.cpu("scale").unwrap())(&data.inputs, &mut outputs).unwrap();
        assert_eq!(outputs.get::<f64>("y").unwrap(), &[0.0, 3.0, 6.0, 9.0]);
        let err = case.cpu("sequential").err().unwrap().to_string();
        assert_eq!(err, "triple has no CPU implementation `sequential`");
    }

    #[test]
    fn builtins_are_found_by_name_and_bound_through_their_tables() {
        let reduce = find("reduce").unwrap();
        assert!(matches!(reduce, AlgorithmRef::Builtin(_)));
        assert_eq!(names().len(), all().len());
        let params = Params::from([
            ("n".to_string(), ParamValue::Int(3)),
            ("dtype".to_string(), ParamValue::Str("i32".into())),
        ]);
        let case = reduce.bind(&params).unwrap();
        let err = case.cpu("fastest").err().unwrap().to_string();
        assert_eq!(err, "reduce has no CPU implementation `fastest`");
        assert!(case.footprint_bytes("sequential").is_some());
    }
}
