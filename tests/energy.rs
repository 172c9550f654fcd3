//! Energy and clocks per CUDA case (issue 30), end to end on the mock device (`KBENCH_MOCK_GPU`
//! with `power_w`: its stand-in for NVML): the results file's energy record and clocks in their
//! units, the `--wide` table's columns (and their absence without `--wide`), the CSV columns, the
//! HTML report; and the paths without energy: no NVML (the fingerprint says why, once), NVML
//! without the energy counter, and `[measure] energy = false`.

use crate::common;
use common::results_file_in;

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

/// A reduction in kernel scope and the same in transfers scope, at two sizes.
const STUDY: &str = r#"[study]
name = "energy"
algorithm = "reduce"
seed = 3

[grid]
n = [4_096, 1_000_003]
dtype = "f32"
block = 256

[[variant]]
name = "kernel"
backend = "cuda"
kernel = "reduce_fast"

[[variant]]
name = "transfers"
backend = "cuda"
kernel = "reduce_fast"
scope = "transfers"

[measure]
warmup = 1
min_samples = 6
max_samples = 6
"#;

const POWER_W: f64 = 350.0;

/// The mock with a stand-in for NVML at 350 W.
const MOCK_NVML: &str = r#"[device]
name = "H100 (energy)"
power_w = 350.0

[timing]
launch_s = 4e-6
gbytes_per_s = 2000.0
jitter = 0.01
"#;

/// No `power_w`: no NVML, as on a machine without libnvidia-ml.
const MOCK_NO_NVML: &str = r#"[device]
name = "H100 (no NVML)"
"#;

/// NVML there, its energy counter not.
const MOCK_NO_COUNTER: &str = r#"[device]
name = "H100 (no counter)"
power_w = 350.0
energy_counter = false
"#;

fn kbench(dir: &Path, mock: &str) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(dir)
        .env("KBENCH_MOCK_GPU", mock)
        .env("COLUMNS", "200");
    cmd
}

/// `kbench run` of `study` (text) on the mock `mock` (text) in a new folder: the folder, the
/// results file's path and its document.
fn run(study: &str, mock: &str) -> (tempfile::TempDir, std::path::PathBuf, Value) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    std::fs::write(dir.path().join("mock.toml"), mock).unwrap();
    kbench(dir.path(), "mock.toml")
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(0);
    let results = results_file_in(&dir.path().join("out/energy"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    (dir, results, doc)
}

fn cases(doc: &Value) -> &Vec<Value> {
    doc["cases"].as_array().unwrap()
}

fn gpu_timer(case: &Value) -> &Value {
    &case["measurement"]["gpu_timer"]
}

/// `kbench report` of the results file with `args`, its stdout.
fn report(dir: &Path, results: &Path, args: &[&str]) -> String {
    let out = kbench(dir, "mock.toml")
        .arg("report")
        .arg(results)
        .args(args)
        .assert()
        .code(0);
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn every_cuda_case_records_joules_per_run_power_and_clocks_in_their_units() {
    let (_dir, _, doc) = run(STUDY, MOCK_NVML);
    let device = &doc["environment"]["device"];
    assert_eq!(device["nvml_unavailable"], Value::Null);
    assert!(device.get("energy_unavailable").is_none(), "{device}");
    assert!(
        device["mock"].as_str().unwrap().contains("energy"),
        "the synthetic energy is marked as such: {device}"
    );
    assert_eq!(cases(&doc).len(), 4);
    for case in cases(&doc) {
        assert_eq!(case["status"], "passed", "{case}");
        let energy = &gpu_timer(case)["energy"];
        let median_s = case["summary"]["median_s"].as_f64().unwrap();
        let runs = energy["runs"].as_u64().unwrap();
        let window_s = energy["window_s"].as_f64().unwrap();
        let energy_mj = energy["energy_mj"].as_u64().unwrap();
        let power_w = energy["power_w"].as_f64().unwrap();
        let joules_per_run = energy["joules_per_run"].as_f64().unwrap();
        // The window spans about 0.1 s of runs (the mock's runs are as long as its samples).
        assert!((1..=20_000).contains(&runs), "{energy}");
        assert!(
            (runs as f64 * median_s - window_s).abs() <= 0.05 * window_s,
            "{runs} runs of {median_s} s against a window of {window_s} s"
        );
        assert!(window_s >= 0.09 || runs == 20_000, "{energy}");
        // Millijoules, watts and joules: 350 W over the window.
        assert!(
            (energy_mj as f64 / 1e3 / window_s - POWER_W).abs() < 1.0,
            "{energy}"
        );
        assert!((power_w - POWER_W).abs() < 1.0, "{energy}");
        assert!(
            (joules_per_run - energy_mj as f64 / 1e3 / runs as f64).abs() <= 1e-12,
            "{energy}"
        );
        assert!(
            (joules_per_run / (POWER_W * median_s) - 1.0).abs() < 0.05,
            "{joules_per_run} J a run, {median_s} s a run"
        );
        let clocks = &gpu_timer(case)["clocks"];
        let sm_median = clocks["sm_clock_median_mhz"].as_u64().unwrap();
        assert!((1900..=1980).contains(&sm_median), "{clocks}");
        assert!(clocks["sm_clock_min_mhz"].as_u64().unwrap() <= sm_median);
        assert!(clocks["memory_clock_median_mhz"].as_u64().unwrap() > 1000);
        assert_eq!(clocks["throttle_reasons"], serde_json::json!([]));
        assert!(gpu_timer(case).get("energy_skipped").is_none());
    }
}

#[test]
fn the_wide_table_csv_and_html_show_energy_and_the_narrow_table_does_not() {
    let (dir, results, _) = run(STUDY, MOCK_NVML);
    let d = dir.path();
    let wide = report(d, &results, &["--wide"]);
    for column in ["J/run", "W", "SM MHz"] {
        assert!(
            wide.lines().any(|l| l.contains(&format!(" {column} "))),
            "no `{column}` column:\n{wide}"
        );
    }
    assert!(wide.contains(" mJ ") || wide.contains(" µJ "), "{wide}");
    // 200 columns wide, and still not: energy is for the wide table.
    let narrow = report(d, &results, &[]);
    assert!(!narrow.contains("J/run"), "{narrow}");
    assert!(!narrow.contains("SM MHz"), "{narrow}");

    let csv = report(d, &results, &["--format", "csv"]);
    let mut rows = csv.lines();
    let header: Vec<&str> = rows.next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (j, w) = (column("joules_per_run"), column("power_w"));
    column("sm_clock_median_mhz");
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        let joules: f64 = cells[j].parse().unwrap();
        let watts: f64 = cells[w].parse().unwrap();
        assert!(joules > 0.0 && (watts - POWER_W).abs() < 1.0, "{row}");
    }

    let html = report(d, &results, &["--format", "html"]);
    assert!(html.contains("<th>J/run</th>"), "{html}");
    assert!(html.contains("<th>SM MHz</th>"));
}

#[test]
fn without_nvml_the_fields_are_absent_and_the_reason_is_recorded_once() {
    let (dir, results, doc) = run(STUDY, MOCK_NO_NVML);
    let device = &doc["environment"]["device"];
    assert_eq!(device["nvml_unavailable"], "the mock device has no NVML");
    for case in cases(&doc) {
        assert_eq!(case["status"], "passed");
        let timer = gpu_timer(case);
        assert!(timer.get("energy").is_none(), "{timer}");
        assert!(timer.get("energy_skipped").is_none(), "{timer}");
        assert_eq!(timer["clocks"], Value::Null);
    }
    let wide = report(dir.path(), &results, &["--wide"]);
    assert!(
        !wide.contains("J/run") && !wide.contains("SM MHz"),
        "{wide}"
    );
    let csv = report(dir.path(), &results, &["--format", "csv"]);
    assert!(!csv.contains("joules_per_run"), "{csv}");
}

#[test]
fn nvml_without_the_energy_counter_keeps_the_clocks_and_says_why_there_is_no_energy() {
    let (_dir, _, doc) = run(STUDY, MOCK_NO_COUNTER);
    let device = &doc["environment"]["device"];
    assert_eq!(device["nvml_unavailable"], Value::Null);
    assert!(
        device["energy_unavailable"]
            .as_str()
            .unwrap()
            .contains("no energy counter"),
        "{device}"
    );
    for case in cases(&doc) {
        let timer = gpu_timer(case);
        assert!(timer.get("energy").is_none(), "{timer}");
        assert!(timer["clocks"]["sm_clock_median_mhz"].as_u64().is_some());
    }
}

#[test]
fn energy_false_in_the_manifest_turns_the_window_off_and_is_recorded() {
    let study = format!("{STUDY}energy = false\n");
    let (_dir, _, doc) = run(&study, MOCK_NVML);
    let measure = &doc["manifest"]["measure"];
    assert_eq!(measure["energy"], false, "{measure}");
    for case in cases(&doc) {
        let timer = gpu_timer(case);
        assert!(timer.get("energy").is_none(), "{timer}");
        assert!(timer.get("energy_skipped").is_none(), "{timer}");
        // The clocks are read after every sample all the same.
        assert!(timer["clocks"]["sm_clock_median_mhz"].as_u64().is_some());
    }
}

#[test]
fn a_window_that_would_not_fit_in_the_time_limit_is_skipped_and_says_why() {
    // 4 µs runs: a window of 20,000 runs (0.08 s), twice that is past a 0.15 s limit.
    let study = STUDY.replace("n = [4_096, 1_000_003]", "n = 4_096") + "timeout_s = 0.15\n";
    let (_dir, _, doc) = run(&study, MOCK_NVML);
    for case in cases(&doc) {
        assert_eq!(case["status"], "passed", "{case}");
        let timer = gpu_timer(case);
        assert!(timer.get("energy").is_none(), "{timer}");
        let why = timer["energy_skipped"].as_str().unwrap();
        assert!(
            why.contains("would not fit in the") && why.contains("time limit"),
            "{why}"
        );
    }
}
