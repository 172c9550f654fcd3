//! A user's own kernels, declared in TOML (`study.algorithm = "custom"` and a `[custom]` table):
//! the manifest names its `.cu` files and declares axes, buffers, kernel sequences, a reference
//! and the work done, and kbench times, checks and reports them as it does a built-in study.
//!
//! Here: `def` (the definition as data, what the worker receives), `schedule` (what a kernel
//! sequence launches at a grid point, worked out without a GPU), `algorithm` (the definition as
//! a `DynAlgorithm`), `launch` (the launcher). The manifest's keys are read and checked in
//! `manifest::custom`; the expressions are `crate::expr`.
//!
//! Not here, and where they plug in: guard regions around buffers (out-of-bounds writes) belong
//! where `launch::CustomLauncher::new` allocates and `Scoped::run_once` downloads; checking a
//! launch's arguments against the kernel's PTX parameters belongs beside
//! `manifest::custom::check_over_grid`, which already has each launch's planned argument list.
//! An external reference command (`def::Expected::Command`) is run by
//! `crate::reference_command` from `algorithm::CustomCase::prepare`.

pub mod algorithm;
pub mod def;
pub mod launch;
pub mod schedule;

pub use algorithm::{Custom, CUSTOM};
pub use def::CustomDef;
