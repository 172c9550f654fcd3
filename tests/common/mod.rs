//! Setup shared by the test binaries; each uses part of it.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kbench::device::KernelSource;
use kbench::record::{CaseResult, CaseStatus};
use kbench::results::ResultsFile;
use kbench::run::study::{self, RunOptions, StudyEnd};

/// `kbench` as cargo built it, run from the repository root (where the shipped manifests' paths
/// start), for the tests of its command line.
pub fn kbench() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

/// The kbench executable the cases run in: KBENCH_EXE if set; else the one cargo built beside the
/// tests; else, where the tests travel without the build tree (`scripts/gpu-bundle.sh` puts them
/// in `.gpu-bundle/tests/`), the `kbench` one folder up from the test binary.
pub fn kbench_exe() -> PathBuf {
    if let Some(exe) = std::env::var_os("KBENCH_EXE") {
        return PathBuf::from(exe);
    }
    let built = PathBuf::from(env!("CARGO_BIN_EXE_kbench"));
    if built.exists() {
        return built;
    }
    let bundled = std::env::current_exe()
        .ok()
        .and_then(|t| Some(t.parent()?.parent()?.join("kbench")));
    match bundled {
        Some(exe) if exe.exists() => exe,
        _ => built,
    }
}

/// `kbench run study.toml` in `dir` on the mock device: `manifest` and the mock's settings are
/// written there first, then run with `args` and `env`, the results to `dir/results`. The run's
/// output and, where one was written, the results.
pub fn run_on_mock(
    dir: &Path,
    manifest: &str,
    mock: &str,
    results: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Output, Option<serde_json::Value>) {
    std::fs::write(dir.join("study.toml"), manifest).unwrap();
    std::fs::write(dir.join("mock.toml"), mock).unwrap();
    let out = std::process::Command::new(kbench_exe())
        .current_dir(dir)
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .envs(env.iter().copied())
        .args([
            "run",
            "study.toml",
            "--out-dir",
            "out",
            "--results",
            results,
        ])
        .args(args)
        .output()
        .unwrap();
    let path = dir.join(results);
    let doc = path.exists().then(|| read(&path));
    (out, doc)
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
    let manifest = kbench::manifest::parse(Path::new("test.toml"), text)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let cases = kbench::plan::expand(&manifest).unwrap();
    let measure = options.measure_settings(&manifest.measure);
    let mut results =
        ResultsFile::create(out.path(), &manifest, cases.len(), measure, None).unwrap();
    let progress = indicatif::ProgressBar::hidden();
    let end = study::run_study(&manifest, &cases, options, &mut results, &progress).unwrap();
    assert_eq!(end, StudyEnd::Finished);
    (out, results)
}

/// Settings that take one sample after one warm-up: correctness runs, not measurements.
pub const QUICK: &str = "[measure]\nwarmup = 1\nmin_samples = 1\nmax_samples = 1\n";

/// The study tests/gpu.rs runs for an algorithm: every kernel of it on its GPU test grid, one
/// sample a case, the cases narrowed by `where_` if given.
pub fn gpu_test_grid_manifest(spec: &kbench::algos::Spec, where_: Option<&str>) -> String {
    let mut text = format!(
        "[study]\nname = \"gpu-{name}\"\nalgorithm = \"{name}\"\nseed = 11\n[grid]\n{grid}\n",
        name = spec.name,
        grid = spec.gpu_test_grid
    );
    if let Some(condition) = where_ {
        text += &format!("where = \"{condition}\"\n");
    }
    for kernel in &spec.kernels {
        text += &format!(
            "[[variant]]\nname = \"{kernel}\"\nbackend = \"cuda\"\nkernel = \"{kernel}\"\n"
        );
    }
    text + QUICK
}

pub fn assert_all_passed(cases: &[CaseResult]) {
    let bad: Vec<String> = cases
        .iter()
        .filter(|c| c.status != CaseStatus::Passed)
        .map(|c| {
            format!(
                "{} {:?}: {:?} {:?}",
                c.variant, c.params, c.status, c.reason
            )
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} cases did not pass:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
}

/// A results file as JSON.
pub fn read(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Each case of a results document as `variant params: status`.
pub fn case_set(doc: &serde_json::Value) -> BTreeSet<String> {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {}: {}", c["variant"], c["params"], c["status"]))
        .collect()
}

/// The results file (`<stamp>.json`) `kbench run` wrote into a study's folder.
pub fn results_file_in(study_dir: &Path) -> PathBuf {
    std::fs::read_dir(study_dir)
        .unwrap_or_else(|e| panic!("{}: {e}", study_dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap_or_else(|| panic!("no results file in {}", study_dir.display()))
}

/// The `[custom]` half of a tune study of the example kernel (examples/tune/sum.cu, copied
/// beside the manifest as `sum.cu`): its axes, buffers, reference and tuned launches, and the
/// one variant. The tune tests put their own `[study]`, `[grid]` and `[tune]` before it.
pub const TUNE_SUM_CUSTOM: &str = r#"[custom]
sources = ["sum.cu"]
defines = { ITEMS = "items" }
reference = "reference"
bytes = "n * sizeof(dtype)"

[[custom.axis]]
name = "n"
kind = "size"
[[custom.axis]]
name = "dtype"
kind = "dtype"
[[custom.axis]]
name = "block"
kind = "block"
[[custom.axis]]
name = "items"
kind = "int"
min = 1
max = 64

[[custom.buffer]]
name = "x"
type = "dtype"
length = "n"
role = "input"
init = { uniform = [0.0, 1.0] }

[[custom.buffer]]
name = "sum"
type = "f64"
length = "1"
role = "output"

[[custom.kernel]]
name = "reference"
[[custom.kernel.launch]]
kernel = "sum_reference"
grid = "1"
block = "256"
args = [{ buffer = "x" }, { buffer = "sum" }, { type = "long long", value = "n" }]

[[custom.kernel]]
name = "tuned"
[[custom.kernel.launch]]
kernel = "sum_tuned"
grid = "max(1, ceil_div(n, block * items))"
block = "block"
args = [{ buffer = "x" }, { buffer = "sum" }, { type = "long long", value = "n" }]

[[variant]]
name = "tuned"
backend = "cuda"
kernel = "tuned"
"#;

thread_local! {
    static PANICS_EXPECTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the panics of this thread kept quiet: a fuzzer catches and tallies them, and the
/// default hook would print each one. The hook is process-wide and every test shares the process,
/// so it stays quiet only on a thread inside `expecting_panics`; another test's panic still prints.
pub fn expecting_panics<T>(f: impl FnOnce() -> T) -> T {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !PANICS_EXPECTED.with(|expected| expected.get()) {
                default(info);
            }
        }));
    });
    PANICS_EXPECTED.with(|expected| expected.set(true));
    let result = f();
    PANICS_EXPECTED.with(|expected| expected.set(false));
    result
}
