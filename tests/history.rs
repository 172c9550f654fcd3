//! `kbench history` from the command line, on copies of one real run of a CPU study whose
//! medians are set run by run (a seeded 0.5% wobble, then 20% slower from run 11), given out of
//! order: the change is found at the run it began and confirmed after two runs (exit 1), one
//! slow run is only suspected (exit 0), a short history is insufficient data, the HTML page
//! charts every case with the change marked, and a slowdown that began with a move to another
//! machine is put down to the machine.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{json, Value};

fn kbench() -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

const STUDY: &str = "[study]\nname = \"trend\"\nalgorithm = \"reduce\"\nseed = 9\n\
[grid]\nn = [1000, 100_003]\ndtype = [\"i32\"]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[measure]\nwarmup = 0\nmin_samples = 5\nmax_samples = 5\n";

/// 16 runs: the real one's medians times a wobble, 20% slower from run 11 (index 10) on; each
/// file named so that the names sort in another order than the runs.
fn history(dir: &Path) -> Vec<PathBuf> {
    let manifest = dir.join("trend.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out = dir.join("out");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .success();
    let run = std::fs::read_dir(out.join("trend"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(run).unwrap()).unwrap();
    let wobble = [
        0.3, -0.4, 0.5, -0.2, 0.1, -0.5, 0.4, 0.0, -0.3, 0.2, 0.1, -0.2, 0.3, 0.0, -0.1, 0.2,
    ];
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    (0..16)
        .map(|i| {
            let mut doc = doc.clone();
            let factor = (1.0 + wobble[i] / 100.0) * if i >= 10 { 1.2 } else { 1.0 };
            for case in doc["cases"].as_array_mut().unwrap() {
                let median = case["summary"]["median_s"].as_f64().unwrap();
                case["summary"]["median_s"] = json!(median * factor);
            }
            doc["started_at"] = json!(format!("2026-11-{:02}T10:00:00+00:00", i + 1));
            // Names that sort backwards: the history must go by the recorded start time.
            let path = runs.join(format!("run-{:02}.json", 99 - i));
            std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
            path
        })
        .collect()
}

fn judged(files: &[PathBuf], code: i32) -> Value {
    let out = kbench()
        .arg("history")
        .args(files)
        .arg("--json")
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn a_slowdown_is_confirmed_at_the_run_it_began_suspected_before_and_charted() {
    let dir = tempfile::tempdir().unwrap();
    let files = history(dir.path());

    // All 16, by folder: confirmed at run index 10, exit 1.
    let out = kbench()
        .arg("history")
        .arg(dir.path().join("runs"))
        .arg("--json")
        .arg("--html")
        .arg(dir.path().join("history.html"))
        .assert()
        .code(1);
    let all: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(all["runs"].as_array().unwrap().len(), 16);
    assert!(all["runs"][0]["started_at"]
        .as_str()
        .unwrap()
        .starts_with("2026-11-01"));
    let cases = all["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for case in cases {
        assert_eq!(case["verdict"], "regression_confirmed", "{case}");
        let changes = case["changes"].as_array().unwrap();
        assert_eq!(changes.len(), 1, "{case}");
        assert_eq!(changes[0]["run"], 10, "{case}");
        assert_eq!(changes[0]["confirmed"], true);
        let ratio = changes[0]["ratio"].as_f64().unwrap();
        assert!((ratio - 1.2).abs() < 0.01, "{ratio}");
    }
    let html = std::fs::read_to_string(dir.path().join("history.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
    assert!(html.contains("regression confirmed"));
    assert!(
        html.contains("+20.0% from run 11"),
        "the change is marked on the chart"
    );

    // The first 11 runs, given in reverse: one slow run is suspected, not confirmed; exit 0.
    let mut first_11: Vec<PathBuf> = files[..11].to_vec();
    first_11.reverse();
    let eleven = judged(&first_11, 0);
    for case in eleven["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "suspected_regression", "{case}");
        assert_eq!(case["changes"][0]["run"], 10, "{case}");
    }
    // The first 12: confirmed.
    let twelve = judged(&files[..12], 1);
    assert_eq!(twelve["cases"][0]["verdict"], "regression_confirmed");
    // The first 10: stable. The last 6 alone (--last 6): stable at the new level.
    assert_eq!(judged(&files[..10], 0)["cases"][0]["verdict"], "stable");
    let out = kbench()
        .arg("history")
        .args(&files)
        .args(["--last", "6", "--json"])
        .assert()
        .code(0);
    let last: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(last["cases"][0]["verdict"], "stable");
    // Three runs: insufficient data.
    assert_eq!(
        judged(&files[..3], 0)["cases"][0]["verdict"],
        "insufficient_data"
    );
    // --confirm-runs 3: twelve runs (two slow) are still only suspected.
    let out = kbench()
        .arg("history")
        .args(&files[..12])
        .args(["--confirm-runs", "3", "--json"])
        .assert()
        .code(0);
    let three: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(three["cases"][0]["verdict"], "suspected_regression");

    // The table.
    let out = kbench()
        .arg("history")
        .args(&files)
        .arg("--wide")
        .assert()
        .code(1);
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(table.contains("REGRESSION CONFIRMED"), "{table}");
    assert!(table.contains("+20.0%"), "{table}");
    assert!(table.contains("2 regression confirmed"), "{table}");
}

/// The 16 runs with their boot set: `boot(i)` for run i.
fn with_boots(files: &[PathBuf], dir: &Path, boot: impl Fn(usize) -> String) -> Vec<PathBuf> {
    files
        .iter()
        .enumerate()
        .map(|(i, file)| {
            let mut doc: Value =
                serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
            // kbench records the boot of the machine a run ran on (Linux).
            assert!(
                doc["environment"]["boot_id"].is_string(),
                "{}",
                doc["environment"]
            );
            doc["environment"]["boot_id"] = json!(boot(i));
            let path = dir.join(format!("booted-{i:02}.json"));
            std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
            path
        })
        .collect()
}

#[test]
fn a_slowdown_that_began_with_a_move_to_another_machine_is_put_down_to_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    let files = history(dir.path());
    // Runs 11 to 16 on another machine (another boot), where they are all 20% slower: not a
    // regression the gate can tell from the move; exit 0.
    let moved = with_boots(&files, dir.path(), |i| {
        if i < 10 { "boot-a" } else { "boot-b" }.to_string()
    });
    let judged_moved = judged(&moved, 0);
    for case in judged_moved["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "machine_changed", "{case}");
        assert_eq!(case["changes"][0]["run"], 10, "{case}");
        assert_eq!(case["changes"][0]["machine_changed"], true, "{case}");
    }
    assert!(judged_moved["runs"][10]["machine"]
        .as_str()
        .unwrap()
        .ends_with(" boot-b"));
    let out = kbench().arg("history").args(&moved).assert().code(0);
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(table.contains("2 changed with the machine"), "{table}");
    // Every run on a machine of its own (ephemeral runners): the slowdown is a regression.
    let ephemeral = with_boots(&files, dir.path(), |i| format!("boot-{i}"));
    for case in judged(&ephemeral, 1)["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "regression_confirmed", "{case}");
    }
}

#[test]
fn a_history_of_two_studies_or_an_empty_folder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = history(dir.path());
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    doc["study"]["name"] = json!("other");
    let other = dir.path().join("other.json");
    std::fs::write(&other, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = kbench()
        .arg("history")
        .arg(&files[1])
        .arg(&other)
        .assert()
        .code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("different studies") || err.contains("mixes studies"),
        "{err}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = kbench().arg("history").arg(&empty).assert().code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("holds no results files"), "{err}");
    // A start time that is not a time.
    doc["study"]["name"] = json!("trend");
    doc["started_at"] = json!("yesterday");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = kbench()
        .arg("history")
        .arg(&files[1])
        .arg(&bad)
        .assert()
        .code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("`yesterday` is not an RFC 3339 time"), "{err}");
}

/// A copied file is the same run (its start and host): counted once, said on stderr, so one
/// slow run copied three times is a suspected regression, not a confirmed one. The same run
/// with other cases (an edited copy) is refused.
#[test]
fn copies_of_one_run_count_once_and_an_edited_copy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let files = history(dir.path());
    // In start order: runs 1 to 10 steady, then run 11, 20% slower, and three copies of it.
    let mut given: Vec<PathBuf> = files[..11].to_vec();
    for n in 0..3 {
        let copy = dir.path().join(format!("copy-{n}.json"));
        std::fs::copy(&files[10], &copy).unwrap();
        given.push(copy);
    }
    let out = kbench()
        .arg("history")
        .args(&given)
        .arg("--json")
        .assert()
        .code(0);
    let doc: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(doc["runs"].as_array().unwrap().len(), 11);
    assert_eq!(doc["copies"].as_array().unwrap().len(), 3);
    for case in doc["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "suspected_regression", "{case}");
    }
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert_eq!(err.matches("(a copy): counted once").count(), 3, "{err}");

    let mut edited: Value =
        serde_json::from_str(&std::fs::read_to_string(&files[10]).unwrap()).unwrap();
    edited["cases"][0]["summary"]["median_s"] = json!(1.0);
    let edited_path = dir.path().join("edited.json");
    std::fs::write(&edited_path, serde_json::to_string(&edited).unwrap()).unwrap();
    let out = kbench()
        .arg("history")
        .args(&files[..11])
        .arg(&edited_path)
        .assert()
        .code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        err.contains("hold one run") && err.contains("different cases"),
        "{err}"
    );
}
