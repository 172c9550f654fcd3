//! `kbench run --sanitize`: each CUDA case runs once more under compute-sanitizer, and what the
//! sanitizer reports decides the case. Without a GPU, the cases run on the mock device and a
//! stand-in for compute-sanitizer (KBENCH_COMPUTE_SANITIZER) runs the worker as the real one
//! does (its own options, then the worker's command line) and writes a report in its format;
//! `gpu_custom_guard.rs` runs the real one on a GPU.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const MOCK: &str =
    "[device]\nname = \"H100\"\n\n[timing]\nseed = 3\nlaunch_s = 4e-6\ngbytes_per_s = 2000.0\n";

/// Records its arguments, runs the worker after `--log-file F` (FAKE_SANITIZER_SLEEP_S seconds
/// later, if set), then writes F as compute-sanitizer does: a banner, FAKE_SANITIZER_ERRORS
/// errors, the summary.
const FAKE_SANITIZER: &str = r#"#!/bin/bash
echo "$@" >> "$(dirname "$0")/sanitizer-args.txt"
while [ "$#" -gt 0 ] && [ "$1" != "--log-file" ]; do shift; done
log="$2"; shift 2
echo "========= COMPUTE-SANITIZER" > "$log"
if [ -n "$FAKE_SANITIZER_SLEEP_S" ]; then sleep "$FAKE_SANITIZER_SLEEP_S"; fi
"$@"
status=$?
errors="${FAKE_SANITIZER_ERRORS:-0}"
if [ "$errors" != 0 ]; then
  echo "========= Invalid __global__ write of size 4 bytes" >> "$log"
  echo "=========     at 0x90 in saxpy.cu:9:saxpy4" >> "$log"
fi
echo "=========" >> "$log"
echo "========= ERROR SUMMARY: $errors errors" >> "$log"
exit $status
"#;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

/// A folder with the mock device and the stand-in sanitizer.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    let sanitizer = dir.path().join("compute-sanitizer");
    std::fs::write(&sanitizer, FAKE_SANITIZER).unwrap();
    std::fs::set_permissions(&sanitizer, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `kbench run MANIFEST` on the mock with the stand-in sanitizer, 3 samples a case.
fn run_command(dir: &Path, manifest: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("kbench"));
    cmd.current_dir(dir)
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .env("KBENCH_COMPUTE_SANITIZER", dir.join("compute-sanitizer"))
        .env("COLUMNS", "100")
        .args(["run", "--out-dir", "out", "--warmup", "0"])
        .args(["--min-samples", "3", "--max-samples", "3"])
        .arg(repo(manifest));
    cmd
}

fn kbench(dir: &Path) -> Command {
    Command::from_std(run_command(dir, "examples/numpy_reference/saxpy.toml"))
}

/// The run's results file (the one study's, under `out/`).
fn results_file(dir: &Path) -> PathBuf {
    let study = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_dir(&study)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
}

/// The run's results document, and the folder it lies in.
fn results(dir: &Path) -> (Value, PathBuf) {
    let file = results_file(dir);
    let doc = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    (doc, file.parent().unwrap().to_path_buf())
}

fn numpy_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_clean_report_records_the_check_and_keeps_the_timed_figures() {
    if !numpy_available() {
        // The example's reference is a NumPy script; CI installs NumPy, so there this fails.
        assert!(std::env::var_os("CI").is_none(), "NumPy is required in CI");
        return;
    }
    let dir = setup();
    kbench(dir.path()).arg("--sanitize").assert().success();
    let (doc, folder) = results(dir.path());
    let cases = doc["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases {
        assert_eq!(case["status"], "passed", "{case}");
        let check = &case["sanitizer"];
        assert_eq!(check["tool"], "memcheck");
        assert_eq!(check["errors"], 0);
        // The timed run's samples, not the single sanitized run's.
        assert_eq!(case["summary"]["samples"], 3, "{case}");
        let log = folder.join(check["log_file"].as_str().unwrap());
        assert!(log.is_file(), "{}", log.display());
    }
    let args = std::fs::read_to_string(dir.path().join("sanitizer-args.txt")).unwrap();
    // One sanitized worker per case, memcheck without leak checks, the worker last.
    assert_eq!(args.lines().count(), cases.len());
    for line in args.lines() {
        assert!(line.starts_with("--tool memcheck "), "{line}");
        assert!(line.contains("--leak-check no"), "{line}");
        assert!(line.ends_with(" worker"), "{line}");
    }
}

#[test]
fn errors_the_sanitizer_reports_fail_the_case_with_them() {
    if !numpy_available() {
        assert!(std::env::var_os("CI").is_none(), "NumPy is required in CI");
        return;
    }
    let dir = setup();
    let out = kbench(dir.path())
        .arg("--sanitize=racecheck")
        .env("FAKE_SANITIZER_ERRORS", "2")
        .assert()
        .code(1);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(
        stdout.contains("compute-sanitizer racecheck found 2 errors"),
        "{stdout}"
    );
    let (doc, _) = results(dir.path());
    for case in doc["cases"].as_array().unwrap() {
        assert_eq!(case["status"], "error", "{case}");
        let reason = case["reason"].as_str().unwrap();
        assert!(
            reason.contains("Invalid __global__ write of size 4 bytes"),
            "{reason}"
        );
        assert!(reason.contains("at 0x90 in saxpy.cu:9:saxpy4"), "{reason}");
        assert!(reason.contains("racecheck.log"), "{reason}");
        assert_eq!(case["sanitizer"]["errors"], 2);
    }
}

#[test]
fn a_missing_sanitizer_is_refused_before_anything_runs() {
    let dir = setup();
    let out = kbench(dir.path())
        .arg("--sanitize")
        .env(
            "KBENCH_COMPUTE_SANITIZER",
            dir.path().join("no-such-sanitizer"),
        )
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("no-such-sanitizer names no file"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists());
}

#[test]
fn an_unknown_tool_is_refused() {
    let dir = setup();
    let out = kbench(dir.path())
        .arg("--sanitize=leakcheck")
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(stderr.contains("leakcheck"), "{stderr}");
    assert!(stderr.contains("memcheck"), "{stderr}");
}

#[test]
fn ctrl_c_during_a_sanitizer_run_leaves_the_case_for_resume() {
    let dir = setup();
    let mut cmd = run_command(dir.path(), "examples/reduction/reduction.toml");
    cmd.env("FAKE_SANITIZER_SLEEP_S", "30")
        .arg("--sanitize")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    // The first case is measured and its sanitizer run has started (and sleeps).
    let args = dir.path().join("sanitizer-args.txt");
    let started = std::time::Instant::now();
    while !args.exists() {
        assert!(started.elapsed().as_secs() < 60, "no sanitizer run started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let kill = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    // The case whose check was stopped is not in the file (nor its journal), failed or
    // otherwise; the other cases never started.
    let doc = kbench::results::load_results(&results_file(dir.path())).unwrap();
    assert_eq!(doc.cases.len(), 0, "{:?}", doc.cases);
    assert!(stderr.contains("--resume"), "{stderr}");
}
