//! `kbench compare` and `kbench report` from the command line: the gate's exit codes on real
//! results files (one case slowed by editing its samples), baselines, and re-rendering.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn kbench() -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

const STUDY: &str = "[study]\nname = \"gate\"\nalgorithm = \"reduce\"\nseed = 9\n\
[grid]\nn = [1000, 100_003]\ndtype = [\"i32\", \"f64\"]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
[measure]\nwarmup = 1\nmin_samples = 20\nmax_samples = 20\n[report]\nbaseline = \"seq\"\n";

/// Runs the study once, saving it as baseline `main`; returns (out dir, results file).
fn run_once(dir: &Path) -> (PathBuf, PathBuf) {
    let manifest = dir.join("gate.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out = dir.join("out");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .args(["--save-baseline", "main"])
        .assert()
        .success();
    let result = std::fs::read_dir(out.join("gate"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    (out, result)
}

/// The case whose samples spread least (interquartile range over median).
fn steadiest_case(results: &Path) -> usize {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(results).unwrap()).unwrap();
    let spread = |case: &Value| {
        let mut s: Vec<f64> = case["measurement"]["samples_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        s.sort_by(f64::total_cmp);
        let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        (at(0.75) - at(0.25)) / at(0.5)
    };
    let cases = doc["cases"].as_array().unwrap();
    (0..cases.len())
        .min_by(|&a, &b| spread(&cases[a]).total_cmp(&spread(&cases[b])))
        .unwrap()
}

fn edited(from: &Path, to: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(to, serde_json::to_string(&doc).unwrap()).unwrap();
    to.to_path_buf()
}

#[test]
fn the_gate_passes_identical_runs_and_fails_a_slowed_case() {
    let dir = tempfile::tempdir().unwrap();
    let (out, base) = run_once(dir.path());

    // A file compared with itself: nothing slower, exit 0.
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&base)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("0 slower"));

    // The steadiest case made 10% slower, every sample: caught, exit 1; and the baseline name
    // resolves. (These are real CPU timings: a 1 µs case may spread by 20% on a busy machine,
    // where a 10% change is rightly inconclusive.)
    let steadiest = steadiest_case(&base);
    let slow = edited(&base, &dir.path().join("slow.json"), |doc| {
        for s in doc["cases"][steadiest]["measurement"]["samples_s"]
            .as_array_mut()
            .unwrap()
        {
            *s = Value::from(s.as_f64().unwrap() * 1.10);
        }
    });
    let assert = kbench()
        .arg("compare")
        .arg(&base)
        .arg(&slow)
        .args(["--json"])
        .assert()
        .code(1);
    let verdicts: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let slower: Vec<&Value> = verdicts["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "slower")
        .collect();
    assert_eq!(slower.len(), 1, "{verdicts}");
    kbench()
        .args(["compare", "--baseline", "main", "--out-dir"])
        .arg(&out)
        .arg(&slow)
        .assert()
        .code(1);

    // Made faster instead: improvements never fail.
    let fast = edited(&base, &dir.path().join("fast.json"), |doc| {
        for s in doc["cases"][steadiest]["measurement"]["samples_s"]
            .as_array_mut()
            .unwrap()
        {
            *s = Value::from(s.as_f64().unwrap() * 0.8);
        }
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&fast)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("1 faster"));

    // A case that now gives a wrong answer fails the gate; a case missing on one side is reported.
    let broken = edited(&base, &dir.path().join("broken.json"), |doc| {
        doc["cases"][0]["status"] = Value::from("accuracy_failed");
        doc["cases"][0]["reason"] = Value::from("wrong answer");
        doc["cases"].as_array_mut().unwrap().pop();
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&broken)
        .assert()
        .code(1)
        .stdout(predicates::str::contains("NEW FAILURE"))
        .stdout(predicates::str::contains("only in the baseline: tree"));
}

#[test]
fn several_baseline_runs_are_used_together() {
    let dir = tempfile::tempdir().unwrap();
    let (out, first) = run_once(dir.path());
    for _ in 0..2 {
        run_once(dir.path());
    }
    let runs = std::fs::read_dir(out.join("baselines/gate/main"))
        .unwrap()
        .count();
    assert_eq!(runs, 3);
    let assert = kbench()
        .args(["compare", "--json", "--baseline", "main", "--out-dir"])
        .arg(&out)
        .arg(&first)
        .assert();
    let verdicts: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(verdicts["baseline_runs"], 3);
    // The first run is one of the three: it cannot be slower than them all.
    assert!(
        verdicts["cases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["verdict"] != "slower"),
        "{verdicts}"
    );
    kbench()
        .args(["compare", "--baseline", "nothing", "--out-dir"])
        .arg(&out)
        .arg(&first)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no baseline"));
}

#[test]
fn runs_from_different_machines_are_refused_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = run_once(dir.path());
    let other = edited(&base, &dir.path().join("other.json"), |doc| {
        doc["environment"]["cpu_model"] = Value::from("Some Other CPU");
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&other)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("different CPUs"));
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&other)
        .arg("--allow-different-device")
        .assert()
        .code(0);
    let renamed = edited(&base, &dir.path().join("renamed.json"), |doc| {
        doc["study"]["name"] = Value::from("x")
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&renamed)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("different studies"));
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(dir.path().join("missing.json"))
        .assert()
        .code(2);
    std::fs::write(dir.path().join("junk.json"), "{}").unwrap();
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(dir.path().join("junk.json"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not a kbench results file"));
}

#[test]
fn report_rerenders_markdown_csv_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = run_once(dir.path());
    kbench()
        .arg("report")
        .arg(&base)
        .args(["--format", "markdown"])
        .assert()
        .success()
        .stdout(predicates::str::contains("| tree "));
    let csv = kbench()
        .arg("report")
        .arg(&base)
        .args(["--format", "csv"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&csv.get_output().stdout).to_string();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let median_col = headers.iter().position(|h| h == "median_s").unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 8);
    assert!(rows
        .iter()
        .all(|r| r[median_col].parse::<f64>().unwrap() > 0.0));

    let plots = dir.path().join("plots");
    kbench()
        .arg("report")
        .arg(&base)
        .arg("--plots")
        .arg(&plots)
        .assert()
        .success();
    for name in [
        "time-dtype_i32.png",
        "time-dtype_f64.svg",
        "speedup-dtype_f64.png",
    ] {
        let bytes = std::fs::read(plots.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(bytes.len() > 2000, "{name} is nearly empty");
    }
    let png = std::fs::read(plots.join("time-dtype_i32.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// The results file with its cases of `variant` recorded as `status` (without samples), as a run
/// records what it could not measure (no GPU) or what failed.
fn with_status(from: &Path, to: &Path, variant: &str, status: &str) -> PathBuf {
    edited(from, to, |doc| {
        for case in doc["cases"].as_array_mut().unwrap() {
            if case["variant"] == variant {
                case["status"] = Value::from(status);
                case["reason"] = Value::from("no CUDA driver (a test's edit)");
                case["summary"] = Value::Null;
                case["measurement"] = Value::Null;
            }
        }
    })
}

#[test]
fn compare_fits_80_columns_and_groups_what_it_did_not_compare_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = run_once(dir.path());
    let skipped = with_status(&base, &dir.path().join("skipped.json"), "tree", "skipped");
    let timed_out = with_status(&skipped, &dir.path().join("t.json"), "seq", "timed_out");
    for baselines in [1, 5] {
        let assert = kbench()
            .arg("compare")
            .args(std::iter::repeat_n(&skipped, baselines))
            .arg(&timed_out)
            .env_remove("COLUMNS")
            .assert();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
        assert!(
            stdout.lines().all(|l| l.chars().count() <= 80),
            "{baselines} baseline(s):\n{stdout}"
        );
        let not_compared: Vec<&str> = stdout
            .lines()
            .filter(|l| l.contains("not compared:"))
            .collect();
        assert_eq!(not_compared.len(), 1, "{stdout}");
        assert!(
            not_compared[0] == "not compared: 4 skipped in the baseline and the new run",
            "{stdout}"
        );
        // `seq` timed out in the new run: a new failure, listed below the table with its reason.
        assert!(stdout.contains("4 new failures"), "{stdout}");
        assert!(
            stdout.contains("new failure: seq dtype=i32 n=1000: no CUDA driver"),
            "{stdout}"
        );
        for rust_name in ["Skipped", "TimedOut", "Passed", "NotCompared"] {
            assert!(!stdout.contains(rust_name), "{rust_name}: {stdout}");
        }
        assert_eq!(assert.get_output().status.code(), Some(1));
    }
    // Both sides not passed, in different ways: one group per reason, counted.
    let assert = kbench()
        .arg("compare")
        .arg(&timed_out)
        .arg(&skipped)
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let line = stdout
        .lines()
        .find(|l| l.starts_with("not compared: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let mut groups: Vec<&str> = line["not compared: ".len()..].split("; ").collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            "4 skipped in the baseline and the new run",
            "4 timed out in the baseline"
        ],
        "{stdout}"
    );
    assert!(stdout.contains("no case was compared"), "{stdout}");
}
