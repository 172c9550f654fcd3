//! GPU test of guard zones wired into custom studies: a manifest whose kernels write past the
//! end of an output, before its start, and past the end of a scratch buffer runs through
//! `kbench run`; each of those cases must fail with the buffer's name and the side, while the
//! kernel that stays in bounds (also the reference) passes, in the kernel and transfers scopes.
//! Needs a CUDA GPU: ignored by a plain `cargo test`, run on the GPU machine with
//! `--include-ignored`, where a missing GPU fails it.
//!
//! The same study runs again with `--sanitize` (compute-sanitizer, installed on the GPU machine):
//! memcheck finds nothing in the kernels (the guard zones lie inside each buffer's allocation, so
//! their overruns are the zones' to catch), and racecheck finds the race of `copy_race`, whose
//! answer is right every time.

use crate::common;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// `copy_ok` copies `x` into `y`; `copy_over` also writes 3 floats past `y`'s end, `copy_under`
/// one before its start, `copy_scratch_over` 2 floats past the end of its scratch `s`. Every
/// in-bounds element gets the right value, so only the guard zones can tell them apart.
const SOURCE: &str = r#"
extern "C" __global__ void copy_ok(const float* x, float* y, float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i]; s[i] = x[i]; }
}
extern "C" __global__ void copy_over(const float* x, float* y, float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
  if (i < 3) y[n + i] = 7.0f;
}
extern "C" __global__ void copy_under(const float* x, float* y, float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
  if (i == 0) y[-1] = 7.0f;
}
extern "C" __global__ void copy_scratch_over(const float* x, float* y, float* s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { y[i] = x[i]; s[i] = x[i]; }
  if (i < 2) s[n + i] = 7.0f;
}
extern "C" __global__ void copy_race(const float* x, float* y, float* s, int n) {
  // Each thread writes its slot of `slots` and reads the slot of a thread a warp ahead, with no
  // barrier between: a race racecheck reports, though the value read never changes the answer.
  __shared__ float slots[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  slots[threadIdx.x] = (i < n) ? x[i] : 0.0f;
  float ahead = slots[(threadIdx.x + 32) % blockDim.x];
  if (i < n) y[i] = x[i] + (ahead == 12345.0f ? 1.0f : 0.0f);
}
"#;

fn manifest() -> String {
    manifest_of(
        &["ok", "over", "under", "scratch_over"],
        &["kernel", "transfers"],
    )
}

fn manifest_of(kernels: &[&str], scopes: &[&str]) -> String {
    let mut text = String::from(
        r#"[study]
name = "custom_guards"
algorithm = "custom"
seed = 5

[grid]
n = [1000, 4096]

[custom]
sources = ["guards.cu"]
reference = "ok"
bytes = "8 * n"

[[custom.axis]]
name = "n"
kind = "size"

[[custom.buffer]]
name = "x"
type = "f32"
length = "n"
role = "input"
init = { uniform = [-1.0, 1.0] }

[[custom.buffer]]
name = "y"
type = "f32"
length = "n"
role = "output"
tolerance = "exact"

[[custom.buffer]]
name = "s"
type = "f32"
length = "n"
role = "scratch"
"#,
    );
    for kernel in kernels {
        text += &format!(
            r#"
[[custom.kernel]]
name = "{kernel}"

[[custom.kernel.launch]]
kernel = "copy_{kernel}"
grid = "max(1, ceil_div(n, 256))"
block = "256"
args = [{{ buffer = "x" }}, {{ buffer = "y" }}, {{ buffer = "s" }}, {{ type = "int", value = "n" }}]
"#
        );
        for scope in scopes {
            text += &format!(
                "\n[[variant]]\nname = \"{kernel}_{scope}\"\nbackend = \"cuda\"\nkernel = \
                 \"{kernel}\"\nscope = \"{scope}\"\n"
            );
        }
    }
    text + "\n[measure]\nwarmup = 1\nmin_samples = 2\nmax_samples = 2\n"
}

/// Runs the manifest in `dir` with `kbench run`; returns the results document's cases.
fn run(dir: &Path) -> Vec<Value> {
    run_with(dir, &[])
}

fn run_with(dir: &Path, flags: &[&str]) -> Vec<Value> {
    // The bundled binary on a GPU machine (KBENCH_EXE), else the one cargo built.
    let out = Command::new(common::kbench_exe())
        .current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .args(["run", "guards.toml", "--out-dir", "out"])
        .args(flags)
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let study_dir = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(&study_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    doc["cases"].as_array().unwrap().clone()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_custom_kernel_writing_out_of_bounds_fails_its_case_naming_the_buffer() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("guards.cu"), SOURCE).unwrap();
    std::fs::write(dir.path().join("guards.toml"), manifest()).unwrap();
    let cases = run(dir.path());
    assert_eq!(cases.len(), 16, "4 kernels x 2 scopes x 2 sizes");
    for case in &cases {
        let variant = case["variant"].as_str().unwrap();
        let reason = case["reason"].as_str().unwrap_or("");
        let expected = match variant.rsplit_once('_').unwrap().0 {
            "ok" => None,
            "over" => Some("wrote 12 bytes past the end of `y` (nearest at byte 0 after it)"),
            "under" => Some("wrote 4 bytes before the start of `y` (nearest at byte 0 before it)"),
            "scratch_over" => {
                Some("wrote 8 bytes past the end of `s` (nearest at byte 0 after it)")
            }
            other => panic!("unexpected variant {other}"),
        };
        match expected {
            None => assert_eq!(case["status"], "passed", "{case}"),
            Some(message) => {
                assert_eq!(case["status"], "error", "{case}");
                assert!(reason.contains(message), "{variant}: {reason}");
            }
        }
    }
}

/// Writes the study with `kernels` (kernel scope) into a new folder.
fn study_of(kernels: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("guards.cu"), SOURCE).unwrap();
    std::fs::write(
        dir.path().join("guards.toml"),
        manifest_of(kernels, &["kernel"]),
    )
    .unwrap();
    dir
}

#[test]
#[ignore = "needs a CUDA GPU and compute-sanitizer"]
fn memcheck_runs_every_case_once_more_and_leaves_the_guard_zones_their_verdict() {
    let dir = study_of(&["ok", "over"]);
    let cases = run_with(dir.path(), &["--sanitize"]);
    assert_eq!(cases.len(), 4, "2 kernels x 2 sizes");
    for case in &cases {
        let check = &case["sanitizer"];
        assert_eq!(check["tool"], "memcheck", "{case}");
        assert_eq!(check["errors"], 0, "{case}");
        let log = dir
            .path()
            .join("out/custom_guards")
            .join(check["log_file"].as_str().unwrap());
        let report = std::fs::read_to_string(&log).unwrap();
        assert!(report.contains("ERROR SUMMARY: 0 errors"), "{report}");
        let reason = case["reason"].as_str().unwrap_or("");
        match case["variant"].as_str().unwrap() {
            "ok_kernel" => {
                assert_eq!(case["status"], "passed", "{case}");
                // The timed run's samples are kept: the manifest asks for 2.
                assert_eq!(case["summary"]["samples"], 2, "{case}");
            }
            _ => assert!(
                reason.contains("wrote 12 bytes past the end of `y`"),
                "{reason}"
            ),
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU and compute-sanitizer"]
fn racecheck_fails_a_racy_kernel_whose_answers_are_right() {
    let dir = study_of(&["ok", "race"]);
    // Without the sanitizer, the racy kernel passes: its answers are right.
    for case in run(dir.path()) {
        assert_eq!(case["status"], "passed", "{case}");
    }
    std::fs::remove_dir_all(dir.path().join("out")).unwrap();
    let cases = run_with(dir.path(), &["--sanitize=racecheck"]);
    assert_eq!(cases.len(), 4);
    for case in &cases {
        let reason = case["reason"].as_str().unwrap_or("");
        if case["variant"] == "race_kernel" {
            assert_eq!(case["status"], "error", "{case}");
            assert!(
                reason.contains("compute-sanitizer racecheck found"),
                "{reason}"
            );
            assert!(case["sanitizer"]["errors"].as_u64().unwrap() > 0, "{case}");
        } else {
            assert_eq!(case["status"], "passed", "{case}");
            assert_eq!(case["sanitizer"]["errors"], 0, "{case}");
        }
    }
}
