//! Setup shared by the GPU test binaries.

use std::path::{Path, PathBuf};

use kbench::backend::cuda::{self, KernelSource};
use kbench::execute::{self, RunOptions};
use kbench::report::json::ResultsFile;

/// True when a CUDA driver is present; otherwise says the test is skipped, or fails it when
/// KBENCH_REQUIRE_GPU is set (the GPU machine's runs set it, so a skip cannot pass silently).
pub fn gpu_or_skip(test: &str) -> bool {
    match cuda::driver_present() {
        Ok(()) => true,
        Err(reason) if std::env::var("KBENCH_REQUIRE_GPU").is_ok() => {
            panic!("{test}: GPU required: {reason}")
        }
        Err(reason) => {
            eprintln!("{test}: skipped: {reason}");
            false
        }
    }
}

/// The kbench executable the cases run in: KBENCH_EXE where the tests travel without the build
/// tree (the GPU machine), else the one cargo built beside them.
pub fn kbench_exe() -> PathBuf {
    std::env::var_os("KBENCH_EXE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kbench")))
}

/// Runs a manifest given as text into a temporary output folder (returned, to keep it alive).
pub fn run_study(text: &str, kernels: KernelSource) -> (tempfile::TempDir, ResultsFile) {
    let out = tempfile::tempdir().unwrap();
    let manifest = kbench::manifest::parse(Path::new("gpu-test.toml"), text).unwrap();
    let cases = kbench::plan::expand(&manifest);
    let options = RunOptions {
        kernels,
        ..RunOptions::new(kbench_exe())
    };
    let measure = options.measure_settings(&manifest.measure);
    let mut results = ResultsFile::create(out.path(), &manifest, cases.len(), measure).unwrap();
    let progress = indicatif::ProgressBar::hidden();
    execute::run_study(&manifest, &cases, &options, &mut results, &progress).unwrap();
    (out, results)
}
