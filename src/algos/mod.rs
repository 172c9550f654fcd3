//! The algorithms kbench knows, and the seam they plug into.
//!
//! An algorithm is data (`Spec`: name, axes, CPU implementations, kernels, its embedded `.cu`
//! file and the grid its correctness is tested on) plus one module implementing `Algorithm`:
//! its typed parameters (parsed once per case with serde), seeded inputs with a float64 (or
//! exact) reference per output, and tables registering each CPU implementation and kernel once,
//! its name beside its constructor, each resolved once per case, outside the timed region. The
//! framework knows no algorithm; one built at run time from data fits the same traits.
//!
//! Here: the module list. `algorithm.rs` holds the seam (`Spec`, the traits, the registration
//! tables), `registry.rs` the lookup by name, `axes.rs` the axes, `data.rs` a case's data.
//!
//! Adding one: its module here, its `.cu` file in `kernels/`, its manifest in `experiments/`, and
//! one line in `register!` below.

mod algorithm;
mod axes;
mod data;
mod registry;

pub use algorithm::{
    unknown, Algorithm, BoundCase, BuildCpu, BuildLauncher, CpuImpl, CpuRun, DynAlgorithm,
    Implementation, KernelImpl, Needs, OnDevice, Spec, Unrunnable,
};
pub use axes::{AxisDef, AxisDefault, AxisKind, FileAxis, ValueType};
pub use data::{u32_size, Buffers, CaseData, Length, OutputSpec};
pub use registry::{all, find, kernel_files, names, AlgorithmRef, Registry};

/// Declares each algorithm's module and lists its value in `BUILTIN`: one line an algorithm.
macro_rules! register {
    ($($module:ident => $algorithm:ident,)+) => {
        $(pub mod $module;)+

        /// Every built-in algorithm, in the order `kbench list` shows them.
        static BUILTIN: &[&dyn DynAlgorithm] = &[$(&$module::$algorithm),+];

        /// Each built-in's spec lists exactly the names its tables register.
        #[cfg(test)]
        #[test]
        fn every_builtin_spec_lists_the_names_its_tables_register() {
            $(algorithm::assert_spec_lists_tables(&$module::$algorithm);)+
        }
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
