//! Setup shared by the test binaries; each uses part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use kbench::backend::cuda::{self, KernelSource};
use kbench::execute::{self, RunOptions, StudyEnd};
use kbench::report::json::ResultsFile;

/// True when a CUDA driver is present; otherwise says the test is skipped, or fails it when
/// KBENCH_REQUIRE_GPU is set (the GPU machine's runs set it, so a skip cannot pass silently).
pub fn gpu_or_skip(test: &str) -> bool {
    present_or_skip(test, cuda::driver_present(), "KBENCH_REQUIRE_GPU", "GPU")
}

/// True when NVRTC is present (it needs no GPU); otherwise says the test is skipped, or fails it
/// when KBENCH_REQUIRE_NVRTC is set (CI sets it, having installed NVRTC).
pub fn nvrtc_or_skip(test: &str) -> bool {
    present_or_skip(test, cuda::nvrtc_present(), "KBENCH_REQUIRE_NVRTC", "NVRTC")
}

fn present_or_skip(test: &str, present: Result<(), String>, require_env: &str, what: &str) -> bool {
    match present {
        Ok(()) => true,
        Err(reason) if std::env::var(require_env).is_ok() => {
            panic!("{test}: {what} required: {reason}")
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
    run_study_with(
        text,
        &RunOptions {
            kernels,
            ..RunOptions::new(kbench_exe())
        },
    )
}

/// As `run_study`, with the given options; the study must run to its end.
pub fn run_study_with(text: &str, options: &RunOptions) -> (tempfile::TempDir, ResultsFile) {
    let out = tempfile::tempdir().unwrap();
    let manifest = kbench::manifest::parse(Path::new("test.toml"), text).unwrap();
    let cases = kbench::plan::expand(&manifest);
    let measure = options.measure_settings(&manifest.measure);
    let mut results = ResultsFile::create(out.path(), &manifest, cases.len(), measure).unwrap();
    let progress = indicatif::ProgressBar::hidden();
    let end = execute::run_study(&manifest, &cases, options, &mut results, &progress).unwrap();
    assert_eq!(end, StudyEnd::Finished);
    (out, results)
}
