//! Every integration test, as modules of one test binary: one link after a library change
//! instead of one per file, and one binary for the GPU machine's bundle (`scripts/gpu-bundle.sh`).
//! A file's tests are named by its module: `cargo test --test it slurm::` runs tests/slurm.rs.

mod common;

mod claims;
mod cli;
mod compare_report;
mod compare_retest;
mod completions_man;
mod custom_errors;
mod custom_mock;
mod custom_ptx;
mod energy;
mod exports;
mod findings_nonsense;
mod full_disk_symgs;
mod fuzz_inputs;
mod fuzz_manifest;
mod gate;
mod gpu;
mod gpu_custom;
mod gpu_custom_guard;
mod gpu_energy;
mod gpu_fault;
mod gpu_guard;
mod gpu_peaks;
mod gpu_tune;
mod harness;
mod history;
mod hostile_inputs;
mod html_report;
mod json_schemas;
mod kernels_compile;
mod launch;
mod manifest_errors;
mod matrix_market;
mod mock_device;
mod multi;
mod non_finite;
mod peaks;
mod peers_script;
mod pipes;
mod processes;
mod readme;
mod reliability;
mod results_anywhere;
mod sanitize;
mod session;
mod slurm;
mod terminal;
mod tune;
mod tune_rounds;
