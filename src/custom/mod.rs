//! A user's own kernels, declared in TOML (`study.algorithm = "custom"` and a `[custom]` table):
//! the manifest names its `.cu` files and declares axes, buffers, kernel sequences, a reference
//! and the work done, and kbench times, checks and reports them as it does a built-in study.
//!
//! Here: `def` (the definition as data, what the worker receives), `schedule` (what a kernel
//! sequence launches at a grid point, worked out without a GPU), `algorithm` (the definition as
//! a `DynAlgorithm`), `launch` (the launcher). The manifest's keys are read and checked in
//! `manifest::custom`; the expressions are `crate::expr`.
//!
//! Where the checks live: guard zones around every buffer (`device::guard`) are asked for by
//! `CustomCase::guard_buffers` and read by `CustomLauncher::check_guards` after the runs; a
//! launch's arguments are checked against the kernel's PTX parameters before anything runs by
//! `manifest::custom::check_kernel_params` (NVRTC, no GPU); an external reference command
//! (`def::Expected::Command`) is run by `crate::reference_command` from `CustomCase::prepare`.

pub mod algorithm;
pub mod def;
pub mod defines;
pub mod launch;
pub mod schedule;

pub use algorithm::{Custom, CUSTOM};
pub use def::CustomDef;
