//! `[measure] processes = K` / `--processes K`: each case measured in K worker processes, on the
//! mock device (KBENCH_MOCK_GPU) and the CPU. The mock's `worker_jitter` gives every process its
//! own level of each case's time (drawn from the process's id and clock), as a GPU's buffer
//! placement and clocks do; so K processes really ran a case when its K process medians differ.

use crate::common;

use std::process::{Command, Output};

use serde_json::Value;

/// A CUDA variant and a CPU one at `n`; `measure` is the `[measure]` table's body.
fn manifest(n: &str, measure: &str) -> String {
    format!(
        r#"[study]
name = "processes"
algorithm = "reduce"
seed = 4

[grid]
n = {n}
dtype = "f32"

[measure]
{measure}

[[variant]]
name = "gpu"
backend = "cuda"
kernel = "reduce_optimized"

[[variant]]
name = "cpu"
backend = "cpu"
impl = "sequential"
"#
    )
}

/// A mock whose samples of a case in one process are all alike (no sample jitter) and whose
/// processes' levels differ by up to +-`worker_jitter`.
fn mock(worker_jitter: f64, events: &str) -> String {
    format!("[timing]\nseed = 3\njitter = 0.0\nworker_jitter = {worker_jitter}\n{events}")
}

/// `kbench run` of this manifest on this mock, with `args`; its output and results document.
fn run(manifest: &str, mock: &str, args: &[&str]) -> (Output, Value) {
    run_in_env(manifest, mock, args, &[])
}

/// As `run`, with the worker fault `fault` injected (KBENCH_WORKER_FAULT).
fn run_with_fault(manifest: &str, mock: &str, fault: &str) -> (Output, Value) {
    run_in_env(manifest, mock, &[], &[("KBENCH_WORKER_FAULT", fault)])
}

fn run_in_env(manifest: &str, mock: &str, args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (out, doc) = common::run_on_mock(dir.path(), manifest, mock, "r.json", args, env);
    let doc = doc.unwrap_or_else(|| panic!("no results: {}", String::from_utf8_lossy(&out.stderr)));
    (out, doc)
}

fn cases(doc: &Value) -> &Vec<Value> {
    doc["cases"].as_array().unwrap()
}

fn floats(value: &Value) -> Vec<f64> {
    (value
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {value}"))
        .iter())
    .map(|x| x.as_f64().unwrap())
    .collect()
}

#[test]
fn three_processes_each_measure_every_case_at_their_own_level() {
    let measure = "warmup = 1\nmin_samples = 7\nmax_samples = 7\nprocesses = 3";
    let (out, doc) = run(
        &manifest("[1000, 2000, 3000]", measure),
        &mock(0.3, ""),
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(doc["manifest"]["measure"]["processes"], 3, "recorded");
    assert_eq!(cases(&doc).len(), 6);
    for case in cases(&doc) {
        let what = format!("{} {}", case["variant"], case["params"]);
        assert_eq!(case["status"], "passed", "{what}");
        let m = &case["measurement"];
        let samples_s = floats(&m["samples_s"]);
        // 7 samples over 3 processes: 3 each (rounded up).
        assert_eq!(samples_s.len(), 9, "{what}");
        assert_eq!(case["summary"]["samples"], 9, "{what}");
        assert_eq!(m["warmup_runs"], 3, "one warm-up in each process: {what}");
        let medians_s = floats(&m["process_medians_s"]);
        assert_eq!(medians_s.len(), 3, "{what}");
        // Each process's samples, one after another: its median is its own samples'.
        for (part, median_s) in samples_s.chunks(3).zip(&medians_s) {
            let mut part = part.to_vec();
            part.sort_by(f64::total_cmp);
            assert_eq!(part[1], *median_s, "{what}");
        }
        // The case's median is over all 9 samples, not one process's.
        let mut sorted = samples_s.clone();
        sorted.sort_by(f64::total_cmp);
        assert_eq!(case["summary"]["median_s"].as_f64(), Some(sorted[4]));
        if case["backend"] == "cuda" {
            // One process draws one level per case: three levels are three processes.
            let mut levels = medians_s.clone();
            levels.sort_by(f64::total_cmp);
            levels.dedup();
            assert_eq!(levels.len(), 3, "{what}: {medians_s:?}");
        }
    }
}

#[test]
fn the_flag_overrides_the_manifest_and_one_process_is_todays_record() {
    let measure = "warmup = 0\nmin_samples = 5\nmax_samples = 5";
    let (_, doc) = run(&manifest("[1000]", measure), &mock(0.3, ""), &[]);
    let text = doc.to_string();
    assert!(
        !text.contains("process_medians_s") && !text.contains("\"processes\":"),
        "one process: as before: {text}"
    );
    for case in cases(&doc) {
        assert_eq!(floats(&case["measurement"]["samples_s"]).len(), 5);
    }

    let (_, doc) = run(
        &manifest("[1000]", measure),
        &mock(0.3, ""),
        &["--processes", "2"],
    );
    assert_eq!(doc["manifest"]["overrides"]["processes"], 2);
    let html = report_html(&doc);
    assert!(html.contains("each case in 2 worker processes"), "{html}");
    assert_eq!(doc["manifest"]["measure"]["processes"], 2);
    for case in cases(&doc) {
        let m = &case["measurement"];
        assert_eq!(floats(&m["samples_s"]).len(), 6, "3 in each of 2");
        assert_eq!(floats(&m["process_medians_s"]).len(), 2);
    }
}

/// `kbench report --format html` of a results document.
fn report_html(doc: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    let out = Command::new(common::kbench_exe())
        .args(["report", "--format", "html"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_count_of_processes_outside_1_to_64_is_refused_on_the_command_line() {
    for count in ["0", "65"] {
        let out = common::kbench()
            .args(["run", "experiments/reduction.toml", "--processes", count])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--processes") && stderr.contains("1..=64"),
            "{stderr}"
        );
    }
}

#[test]
fn a_part_that_fails_fails_the_case_and_says_which_process() {
    let wrong = "[[event]]\nvariant = \"gpu\"\nparams = { n = [2000] }\nfault = \"wrong answer\"\n";
    let measure = "warmup = 0\nmin_samples = 3\nmax_samples = 3\nprocesses = 3";
    let (out, doc) = run(&manifest("[1000, 2000]", measure), &mock(0.1, wrong), &[]);
    assert_eq!(out.status.code(), Some(1), "a failed case");
    for case in cases(&doc) {
        let failing = case["variant"] == "gpu" && case["params"]["n"] == 2000;
        if failing {
            assert_eq!(case["status"], "accuracy_failed");
            let reason = case["reason"].as_str().unwrap();
            assert!(
                reason.starts_with("in process 1 of 3: wrong answer"),
                "{reason}"
            );
        } else {
            assert_eq!(case["status"], "passed", "{case}");
        }
    }

    // A worker that dies in a case costs that case alone: the next gets a new worker.
    let (out, doc) = run_with_fault(
        &manifest("[1000, 2000]", measure),
        &mock(0.1, ""),
        "abort:1",
    );
    assert_eq!(out.status.code(), Some(1));
    let died = &cases(&doc)[1];
    let reason = died["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("in process 1 of 3: the worker process died"),
        "{reason}"
    );
    for (i, case) in cases(&doc).iter().enumerate() {
        if i != 1 {
            assert_eq!(case["status"], "passed", "{case}");
        }
    }
}

/// Each CUDA case's median relative to its time without any process level, over 128 sizes.
fn relative_medians(processes: &str, worker_jitter: f64) -> Vec<f64> {
    let sizes = "{ start = 1000, stop = 128000, step = 1000 }";
    // 8 samples: one process's 8, or 2 in each of 4.
    let measure = "warmup = 0\nmin_samples = 8\nmax_samples = 8";
    let (out, doc) = run(
        &manifest(sizes, measure).replace(
            "[[variant]]\nname = \"cpu\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n",
            "",
        ),
        &mock(worker_jitter, ""),
        &["--processes", processes],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cases(&doc).iter())
        .map(|c| c["summary"]["median_s"].as_f64().unwrap())
        .collect()
}

/// With a +-20% level per process, a case's median over 4 processes strays less from the
/// level-free time than one process's does.
///
/// Each process draws each case's level afresh (from the case's parameters and the process),
/// so the 128 cases of a run are 128 independent draws: one process's median strays by U x 20%,
/// U uniform on [-1, 1] (mean square 1/3); 4 processes' by the mean of the middle two of 4 such
/// draws (mean square 2/15). Over 128 cases the two mean squares differ by 6.7 standard
/// deviations of their difference (simulated: in 200,000 trials of 128 cases, K = 4's was never
/// the larger, and one process's never below 0.008), so this test fails by chance far less than
/// once in a million runs.
#[test]
fn more_processes_narrow_the_spread_of_a_case_median() {
    let level_free_s = relative_medians("1", 0.0);
    let mean_square = |medians_s: Vec<f64>| {
        assert_eq!(medians_s.len(), level_free_s.len());
        let n = medians_s.len() as f64;
        (medians_s.iter().zip(&level_free_s))
            .map(|(m, t)| (m / t - 1.0).powi(2))
            .sum::<f64>()
            / n
    };
    let one = mean_square(relative_medians("1", 0.2));
    let four = mean_square(relative_medians("4", 0.2));
    // Expected: 0.2^2 / 3 = 0.0133 and 0.2^2 x 2 / 15 = 0.0053.
    assert!(
        four < one,
        "mean square deviation with 4 processes {four:.5}, with 1 {one:.5}"
    );
    // And one process's spread is there to narrow: not a mock without levels.
    assert!(one > 0.004, "{one}");
}
