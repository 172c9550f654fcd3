//! `kbench compare --retest` and `kbench run --case` on the mock device: a case called slower
//! because one run of it was disturbed (its samples scaled in the new results file, as a burst
//! of other work on the host does) is run again in a fresh process, is not reproduced and no
//! longer fails the gate; a real slowdown (the mock's time model made slower for one case) is
//! run again, confirmed and fails it. The retest's results are kept, one new file per retest.
//! The baselines are one real mock run, copied ten times with a fixed run-to-run wobble.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{json, Value};

const STUDY: &str = r#"[study]
name = "retested"
algorithm = "reduce"
seed = 4

[grid]
n = [4_096, 100_003]
dtype = "f32"
block = 256

[[variant]]
name = "optimized"
backend = "cuda"
kernel = "reduce_optimized"

[[variant]]
name = "fast"
backend = "cuda"
kernel = "reduce_fast"

[measure]
warmup = 1
min_samples = 10
max_samples = 10
"#;

const MOCK: &str = r#"[device]
name = "H100 (test)"

[timing]
seed = 11
launch_s = 4e-6
gbytes_per_s = 1500.0
jitter = 0.01
"#;

/// The same device after a change that makes `fast` at n = 100003 30% slower.
const MOCK_SLOWER: &str = r#"[device]
name = "H100 (test)"

[timing]
seed = 11
launch_s = 4e-6
gbytes_per_s = 1500.0
jitter = 0.01

[[event]]
variant = "fast"
params = { n = 100003 }
time_factor = 1.3
"#;

/// The case the tests slow down, as `compare` names it.
const SLOWED: &str = "fast block=256 dtype=f32 n=100003";

fn kbench(dir: &Path, mock: &str) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(dir)
        .env("KBENCH_MOCK_GPU", dir.join(mock))
        .env("COLUMNS", "120");
    cmd
}

/// A folder with the study and both mock files.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        ("study.toml", STUDY),
        ("mock.toml", MOCK),
        ("mock_slower.toml", MOCK_SLOWER),
    ] {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// Runs the study on `mock` into `out_dir`; returns its results file.
fn run(dir: &Path, mock: &str, out_dir: &str, extra: &[&str]) -> PathBuf {
    kbench(dir, mock)
        .args(["run", "study.toml", "--out-dir", out_dir])
        .args(extra)
        .assert()
        .success();
    let study = dir.join(out_dir).join("retested");
    std::fs::read_dir(&study)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// A copy of `from` at `to`, every sample scaled by `factor`, and those of the case `only`
/// (variant, n) scaled by `only_factor` on top.
fn scaled(from: &Path, to: &Path, factor: f64, only: (&str, u64, f64)) {
    let mut doc = read(from);
    for case in doc["cases"].as_array_mut().unwrap() {
        let hit = case["variant"] == only.0 && case["params"]["n"] == only.1;
        let f = factor * if hit { only.2 } else { 1.0 };
        for s in case["measurement"]["samples_s"].as_array_mut().unwrap() {
            *s = json!(s.as_f64().unwrap() * f);
        }
        let median = case["summary"]["median_s"].as_f64().unwrap();
        case["summary"]["median_s"] = json!(median * f);
    }
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::write(to, serde_json::to_string(&doc).unwrap()).unwrap();
}

/// Ten baselines from one real run: a fixed wobble of about 0.7% run to run.
fn baselines(dir: &Path, real: &Path) -> Vec<PathBuf> {
    let wobble = [
        1.0, 1.008, 0.993, 1.004, 0.996, 1.011, 0.99, 1.002, 0.997, 1.006,
    ];
    (0..10)
        .map(|i| {
            let path = dir.join(format!("base/{i:02}.json"));
            scaled(real, &path, wobble[i], ("none", 0, 1.0));
            path
        })
        .collect()
}

fn compare(dir: &Path, mock: &str, bases: &[PathBuf], new: &Path, extra: &[&str]) -> (i32, Value) {
    let out = kbench(dir, mock)
        .arg("compare")
        .args(bases)
        .arg(new)
        .args(extra)
        .arg("--json")
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), json)
}

fn case<'a>(result: &'a Value, name: &str) -> &'a Value {
    result["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            format!(
                "{} {}",
                c["variant"].as_str().unwrap(),
                c["params"].as_str().unwrap()
            ) == name
        })
        .unwrap_or_else(|| panic!("no case {name} in {result}"))
}

#[test]
fn a_one_off_disturbed_slowdown_is_not_confirmed_by_the_retest() {
    let dir = setup();
    let d = dir.path();
    let real = run(d, "mock.toml", "out", &[]);
    let bases = baselines(d, &real);
    // The new run: the same binary, one case three times slower in this run only.
    let new = d.join("new/20261124T000000Z.json");
    scaled(&real, &new, 1.0, ("fast", 100_003, 3.0));

    let (code, plain) = compare(d, "mock.toml", &bases, &new, &[]);
    assert_eq!(
        code, 1,
        "without --retest the disturbed case fails the gate"
    );
    assert_eq!(case(&plain, SLOWED)["verdict"], "slower");

    let (code, retested) = compare(d, "mock.toml", &bases, &new, &["--retest"]);
    assert_eq!(code, 0, "{retested:#}");
    let c = case(&retested, SLOWED);
    assert_eq!(c["verdict"], "inconclusive");
    let note = c["note"].as_str().unwrap();
    assert!(note.starts_with("not reproduced: +199.8% then "), "{note}");
    assert!(note.ends_with(" on retest"), "{note}");
    assert_eq!(c["retest"]["confirmed"], false);
    assert!(c["detectable_change"].as_f64().unwrap() > 0.0, "{c}");
    assert_eq!(retested["retest"]["retested"], 1);
    assert_eq!(retested["retest"]["confirmed"], 0);
    // Only the slower case was run again, into a file of its own beside the new run.
    let first = d.join("new/retest/20261124T000000Z-retest-1.json");
    assert_eq!(retested["retest"]["file"], first.display().to_string());
    let cases: Vec<String> = read(&first)["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} n={}", c["variant"].as_str().unwrap(), c["params"]["n"]))
        .collect();
    assert_eq!(cases, ["fast n=100003"]);
    // The table says so, and names the retest's file.
    let out = kbench(d, "mock.toml")
        .arg("compare")
        .args(&bases)
        .arg(&new)
        .arg("--retest")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "retest: 1 case(s) called slower were run again (manifest study.toml): 0 confirmed"
        ),
        "{text}"
    );
    assert!(text.contains("20261124T000000Z-retest-2.json"), "{text}");
    assert!(
        text.contains(&format!("retest: {SLOWED}: not reproduced: +199.8% then ")),
        "{text}"
    );
    assert!(text.contains("0 slower,"), "{text}");
    // A further retest keeps the earlier ones' results.
    let before = std::fs::read_to_string(&first).unwrap();
    let (_, again) = compare(d, "mock.toml", &bases, &new, &["--retest"]);
    let second = d.join("new/retest/20261124T000000Z-retest-3.json");
    assert_eq!(again["retest"]["file"], second.display().to_string());
    assert_eq!(std::fs::read_to_string(&first).unwrap(), before);
}

#[test]
fn a_real_slowdown_is_confirmed_by_the_retest_even_from_the_embedded_manifest() {
    let dir = setup();
    let d = dir.path();
    let real = run(d, "mock.toml", "out", &[]);
    let bases = baselines(d, &real);
    let new = run(d, "mock_slower.toml", "slow", &[]);
    // The manifest is gone: the retest runs the text embedded in the results.
    std::fs::remove_file(d.join("study.toml")).unwrap();

    let out = kbench(d, "mock_slower.toml")
        .arg("compare")
        .args(&bases)
        .arg(&new)
        .arg("--retest")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("retest: 1 case(s) called slower were run again (manifest study.toml not found: ran the text recorded in the results): 1 confirmed"),
        "{text}"
    );
    assert!(text.contains("-retest-1.json"), "{text}");

    let (code, result) = compare(d, "mock_slower.toml", &bases, &new, &["--retest"]);
    assert_eq!(code, 1);
    let c = case(&result, SLOWED);
    assert_eq!(c["verdict"], "slower");
    assert_eq!(c["retest"]["confirmed"], true);
    let note = c["note"].as_str().unwrap();
    assert!(
        note.starts_with("confirmed on retest: +29.9% then +29."),
        "{note}"
    );
    // Nothing else was called slower, so nothing else ran again.
    assert_eq!(result["retest"]["retested"], 1);
}

#[test]
fn run_case_runs_only_the_named_cases_and_refuses_an_unknown_name() {
    let dir = setup();
    let d = dir.path();
    let file = run(
        d,
        "mock.toml",
        "out",
        &[
            "--case",
            SLOWED,
            "--case",
            "optimized block=256 dtype=f32 n=4096",
        ],
    );
    let doc = read(&file);
    let mut names: Vec<String> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} n={}", c["variant"].as_str().unwrap(), c["params"]["n"]))
        .collect();
    names.sort();
    assert_eq!(names, ["fast n=100003", "optimized n=4096"]);
    assert_eq!(doc["planned_cases"], 2);

    let refused = kbench(d, "mock.toml")
        .args([
            "run",
            "study.toml",
            "--out-dir",
            "other",
            "--case",
            "fast n=100003",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("--case `fast n=100003`: no planned case has that name")
            && err.contains("e.g. `optimized block=256 dtype=f32 n=4096`"),
        "{err}"
    );
    assert!(!d.join("other").join("retested").exists(), "nothing ran");
}

#[test]
fn baselines_whose_samples_alternate_say_so_beside_the_detectable_change() {
    let dir = setup();
    let d = dir.path();
    let real = run(d, "mock.toml", "out", &[]);
    // Ten baselines in which `optimized` at n = 100003 alternates 7% apart sample to sample and
    // its run medians wander 4% (as a per-process level does): undecided, with a reason.
    let wander = [1.0, 1.04, 0.96, 1.03, 0.97, 1.02, 0.98, 1.05, 0.95, 1.01];
    let bases: Vec<PathBuf> = (0..10)
        .map(|i| {
            let mut doc = read(&real);
            for case in doc["cases"].as_array_mut().unwrap() {
                if case["variant"] != "optimized" || case["params"]["n"] != 100_003 {
                    continue;
                }
                let samples = case["measurement"]["samples_s"].as_array_mut().unwrap();
                for (k, s) in samples.iter_mut().enumerate() {
                    let level = if k % 2 == 0 { 1.035 } else { 0.965 };
                    *s = json!(s.as_f64().unwrap() * level * wander[i]);
                }
            }
            let path = d.join(format!("base/{i:02}.json"));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
            path
        })
        .collect();
    let (code, result) = compare(d, "mock.toml", &bases, &real, &[]);
    assert_eq!(code, 0);
    let c = case(&result, "optimized block=256 dtype=f32 n=100003");
    assert_eq!(c["verdict"], "inconclusive", "{c}");
    assert_eq!(c["sample_levels"]["kind"], "alternate", "{c}");
    assert_eq!(c["sample_levels"]["runs"], 10, "{c}");
    let median = c["base_median_s"].as_f64().unwrap();
    let gap = c["sample_levels"]["gap_s"].as_f64().unwrap();
    assert!((gap / median - 0.07).abs() < 0.01, "{gap} at {median}");
    // The steady cases have no such finding.
    assert!(case(&result, SLOWED).get("sample_levels").is_none());
    let out = kbench(d, "mock.toml")
        .arg("compare")
        .args(&bases)
        .arg(&real)
        .arg("--wide")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("two levels in the samples (a run's median may sit on either or between): optimized block=256 dtype=f32 n=100003 (samples alternate between two levels"),
        "{text}"
    );
    assert!(text.contains("apart, in 10 of 10 baseline runs)"), "{text}");
}
