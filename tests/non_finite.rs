//! Figures that are not finite travel from the worker to the parent and are reported as what
//! they are: a time that overflows to infinity on the mock device (its documented 1e308-scale
//! time model), and NaN in a CPU case's answer (durbin in PolyBench 3.2's form on PolyBench's
//! input, whose recurrence overflows at n = 2000). The results file stays valid JSON, with
//! `"inf"` and `"nan"` where JSON has no number (docs/results-format.md).

use crate::common;
use common::results_file_in;

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn kbench_in(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .env("COLUMNS", "200");
    cmd
}

/// Runs `study` in a new folder (with the mock `mock`, if given), expecting exit `code`; the
/// results document (which must parse as JSON), what `run` printed, and the folder.
fn run(study: &str, mock: Option<&str>, code: i32) -> (Value, String, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    let mut cmd = kbench_in(dir.path());
    if let Some(mock) = mock {
        std::fs::write(dir.path().join("mock.toml"), mock).unwrap();
        cmd.env("KBENCH_MOCK_GPU", "mock.toml");
    }
    let out = cmd
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(code);
    let stdout = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(!stderr.contains("kbench bug"), "{stderr}");
    let dirs: Vec<_> = std::fs::read_dir(dir.path().join("out")).unwrap().collect();
    let file = results_file_in(&dirs[0].as_ref().unwrap().path());
    let text = std::fs::read_to_string(&file).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    (doc, stdout, dir)
}

const REDUCE_ON_MOCK: &str = "[study]\nname = \"overflow\"\nalgorithm = \"reduce\"\nseed = 4\n\
    [grid]\nn = [1000]\ndtype = \"f32\"\n\
    [[variant]]\nname = \"optimized\"\nbackend = \"cuda\"\nkernel = \"reduce_optimized\"\n\
    [measure]\nwarmup = 0\nmin_samples = 3\nmax_samples = 3\n";

#[test]
fn an_infinite_time_on_the_mock_is_recorded_and_reported_as_inf() {
    // 1.7e308 s a run (an hour, scaled by a scripted event: the model's own times are
    // bounded), spread by +-50%: a sample above the model overflows to infinity.
    let mock = "[device]\nname = \"H100 (test)\"\n[timing]\nlaunch_s = 3600.0\njitter = 0.5\n\
        [[event]]\ntime_factor = 4.7e304\n";
    let (doc, stdout, dir) = run(REDUCE_ON_MOCK, Some(mock), 1);
    let case = &doc["cases"][0];
    assert_eq!(case["status"], "error", "{case}");
    let reason = case["reason"].as_str().unwrap();
    assert!(reason.contains("not a finite time"), "{reason}");
    let samples = case["measurement"]["samples_s"].as_array().unwrap();
    assert_eq!(samples.len(), 3);
    assert!(samples.iter().any(|s| s == "inf"), "{samples:?}");
    assert!(samples
        .iter()
        .all(|s| s == "inf" || s.as_f64().is_some_and(f64::is_finite)));
    assert_eq!(case["summary"]["median_s"], "inf");
    assert!(stdout.contains("inf s"), "{stdout}");

    // Read back: the table and the JSON export say inf as well.
    let results = results_file_in(&dir.path().join("out/overflow"));
    let shown = kbench_in(dir.path())
        .arg("report")
        .arg(&results)
        .assert()
        .success();
    assert!(String::from_utf8_lossy(&shown.get_output().stdout).contains("inf s"));
    let json = kbench_in(dir.path())
        .arg("report")
        .arg(&results)
        .args(["--format", "json"])
        .assert()
        .success();
    let exported: Value = serde_json::from_slice(&json.get_output().stdout).unwrap();
    assert_eq!(exported["cases"][0]["summary"]["median_s"], "inf");
}

/// Samples of about 1e308 s, each finite: their squares overflow, so the standard deviation is
/// NaN, recorded as such, and the case is an error rather than a pass.
#[test]
fn finite_samples_whose_statistics_overflow_fail_the_case() {
    let mock = "[device]\nname = \"H100 (test)\"\n[timing]\nlaunch_s = 3600.0\n\
        [[event]]\ntime_factor = 2.8e304\n";
    let (doc, _, _dir) = run(REDUCE_ON_MOCK, Some(mock), 1);
    let case = &doc["cases"][0];
    assert_eq!(case["status"], "error", "{case}");
    let summary = &case["summary"];
    assert!(
        summary["median_s"].as_f64().is_some_and(|m| m > 1e307),
        "{summary}"
    );
    assert_eq!(summary["std_dev_s"], "nan", "{summary}");
    let reason = case["reason"].as_str().unwrap();
    assert!(reason.contains("too large to summarize"), "{reason}");
}

#[test]
fn a_nan_answer_of_a_cpu_case_is_recorded_and_reported_as_nan() {
    let study = "[study]\nname = \"durbin_nan\"\nalgorithm = \"durbin\"\nseed = 0\n\
        [grid]\nn = [2000]\ndtype = \"f64\"\nform = \"pb32\"\ninit = \"polybench\"\n\
        [[variant]]\nname = \"reworked\"\nbackend = \"cpu\"\nimpl = \"reworked\"\n\
        [measure]\nwarmup = 0\nmin_samples = 2\nmax_samples = 2\n";
    let (doc, stdout, _dir) = run(study, None, 1);
    let case = &doc["cases"][0];
    assert_eq!(case["status"], "accuracy_failed", "{case}");
    let accuracy = &case["outputs"][0]["accuracy"];
    assert_eq!(accuracy["max_rel_err"], "nan", "{accuracy}");
    assert!(accuracy["nan_elements"].as_u64().unwrap() > 0, "{accuracy}");
    assert!(case["summary"]["median_s"].as_f64().is_some());
    assert!(stdout.contains("FAIL NaN"), "{stdout}");
}

/// The mock's own model is a device's: a time a run of more than an hour (`launch_s = 1e308`
/// failed every case with a 309-digit mean) or a rate past 1e15 is refused at its line; an
/// event's `time_factor` is what scripts an absurd time.
#[test]
fn a_mock_time_past_an_hour_is_refused_at_its_line() {
    for (mock, key) in [
        (
            "[timing]\nseed = 1\nlaunch_s = 1e308\n",
            "`launch_s` is 1e308",
        ),
        (
            "[device]\ncopy_gbytes_per_s = 1e300\n",
            "`copy_gbytes_per_s` is 1e300",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("study.toml"), REDUCE_ON_MOCK).unwrap();
        std::fs::write(dir.path().join("mock.toml"), mock).unwrap();
        let out = kbench_in(dir.path())
            .env("KBENCH_MOCK_GPU", "mock.toml")
            .args(["run", "study.toml", "--out-dir", "out"])
            .assert()
            .code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains(key) && err.contains("at most"), "{err}");
        assert!(err.contains("mock.toml:"), "{err}");
    }
}

/// SYMGS over a matrix whose diagonal underflows (a subnormal in f64, below float32's range):
/// the answer and its tolerance are infinite, which the worker's message must still carry
/// (its `null` broke the protocol: "kbench bug: the worker process wrote something that is not
/// a message"). Each case is recorded, with the reason it failed.
#[test]
fn a_diagonal_that_underflows_fails_its_cases_and_breaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("sub.mtx"),
        "%%MatrixMarket matrix coordinate real general\n3 3 5\n1 1 1e-40\n2 2 1.0\n3 3 1e-320\n1 2 0.5\n2 1 0.5\n",
    )
    .unwrap();
    let study = "[study]\nname = \"sym\"\nalgorithm = \"symgs\"\nseed = 2\n\
        [grid]\nmatrix = [\"sub.mtx\"]\ndtype = [\"f32\", \"f64\"]\n\
        [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
        [measure]\nwarmup = 0\nmin_samples = 2\nmax_samples = 2\n";
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    let out = kbench_in(dir.path())
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(1);
    let printed = String::from_utf8_lossy(&out.get_output().stdout).into_owned()
        + &String::from_utf8_lossy(&out.get_output().stderr);
    assert!(!printed.contains("kbench bug"), "{printed}");
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(results_file_in(&dir.path().join("out/sym"))).unwrap(),
    )
    .unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for case in cases {
        assert_eq!(case["status"], "accuracy_failed", "{case}");
        assert_eq!(
            case["outputs"][0]["accuracy"]["tolerance"]["abs"], "inf",
            "{case}"
        );
    }
}
