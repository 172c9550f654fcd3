//! The regression gate against ten baseline runs, from the command line: a host-bound case of a
//! run made under more load than the baselines is not called slower, the same slowdown without
//! the load is; the undecided cases state the change they could have detected, in the table and
//! the JSON. The baselines are one real run of a CPU study, copied ten times with a seeded
//! run-to-run wobble of its samples, and the host load of each copy written in.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::{json, Value};

fn kbench() -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

const STUDY: &str = "[study]\nname = \"gate\"\nalgorithm = \"reduce\"\nseed = 9\n\
[grid]\nn = [1000, 100_003]\ndtype = [\"i32\", \"f64\"]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[measure]\nwarmup = 1\nmin_samples = 20\nmax_samples = 20\n";

/// One real run of the study; returns its results file.
fn run_once(dir: &Path) -> PathBuf {
    let manifest = dir.join("gate.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out = dir.join("out");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .success();
    std::fs::read_dir(out.join("gate"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
}

/// A copy of `from` with every sample scaled by `factor` and the host's load over the run set
/// to `other_busy_cpus` (of 2 CPUs).
fn variant_of(from: &Path, to: PathBuf, factor: f64, other_busy_cpus: f64) -> PathBuf {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    for case in doc["cases"].as_array_mut().unwrap() {
        for s in case["measurement"]["samples_s"].as_array_mut().unwrap() {
            *s = json!(s.as_f64().unwrap() * factor);
        }
        let median = case["summary"]["median_s"].as_f64().unwrap();
        case["summary"]["median_s"] = json!(median * factor);
    }
    let sample =
        json!({"loadavg_1m": other_busy_cpus, "busy_ticks": 0, "total_ticks": 0, "own_ticks": 0});
    doc["environment"]["load"] = json!({
        "cpu_count": 2,
        "start": sample,
        "end": sample,
        "other_busy_cpus": other_busy_cpus,
    });
    std::fs::write(&to, serde_json::to_string(&doc).unwrap()).unwrap();
    to
}

/// Ten baselines whose medians wander by about 0.5% run to run (a fixed pattern), on a host
/// with 0.1 CPUs busy with other work.
fn baselines(dir: &Path, run: &Path) -> Vec<PathBuf> {
    let wobble = [0.0, 0.6, -0.4, 0.3, -0.7, 0.5, -0.2, 0.1, -0.5, 0.4];
    wobble
        .iter()
        .enumerate()
        .map(|(i, w)| variant_of(run, dir.join(format!("base{i}.json")), 1.0 + w / 100.0, 0.1))
        .collect()
}

fn compare_json(bases: &[PathBuf], new: &Path, code: i32) -> Value {
    let out = kbench()
        .arg("compare")
        .args(bases)
        .arg(new)
        .arg("--json")
        .assert()
        .code(code);
    serde_json::from_slice(&out.get_output().stdout).unwrap()
}

#[test]
fn a_run_under_load_is_not_called_slower_the_same_run_without_load_is() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_once(dir.path());
    let bases = baselines(dir.path(), &run);

    // 20% slower with no more load than the baselines saw: every case slower, exit 1.
    let quiet = variant_of(&run, dir.path().join("quiet.json"), 1.2, 0.15);
    let judged = compare_json(&bases, &quiet, 1);
    let cases = judged["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        assert_eq!(case["verdict"], "slower", "{case}");
        assert!(case.get("loaded").is_none(), "{case}");
    }
    assert_eq!(judged["load"]["loaded"], false);

    // The same 20% with 1.5 of 2 CPUs busy with other work: loaded, inconclusive, exit 0.
    let busy = variant_of(&run, dir.path().join("busy.json"), 1.2, 1.5);
    let judged = compare_json(&bases, &busy, 0);
    assert_eq!(judged["load"]["loaded"], true);
    assert_eq!(judged["load"]["new_other_busy_cpus"], 1.5);
    assert_eq!(judged["load"]["baseline_max_other_busy_cpus"], 0.1);
    for case in judged["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "inconclusive", "{case}");
        assert_eq!(case["loaded"], true, "{case}");
        assert!(case["note"].as_str().unwrap().contains("load"), "{case}");
        assert!(case["detectable_change"].as_f64().unwrap() > 0.0, "{case}");
    }
    let table = kbench()
        .arg("compare")
        .args(&bases)
        .arg(&busy)
        .arg("--wide")
        .assert()
        .code(0);
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    assert!(table.contains("detectable"), "{table}");
    assert!(table.contains("% loaded"), "{table}");
    assert!(
        table.contains("other processes kept 1.5 CPUs busy during the new run, at most 0.1"),
        "{table}"
    );
    assert!(!table.contains("SLOWER"), "{table}");
}

#[test]
fn an_undecided_case_states_its_detectable_change_and_a_noisy_one_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_once(dir.path());
    // Baselines that swing by about 20% run to run.
    let swing = [0.0, 25.0, -15.0, 10.0, -20.0, 30.0, -5.0, 15.0, -25.0, 5.0];
    let bases: Vec<PathBuf> = swing
        .iter()
        .enumerate()
        .map(|(i, w)| {
            variant_of(
                &run,
                dir.path().join(format!("b{i}.json")),
                1.0 + w / 100.0,
                0.1,
            )
        })
        .collect();
    let new = variant_of(&run, dir.path().join("new.json"), 1.05, 0.1);
    let judged = compare_json(&bases, &new, 0);
    for case in judged["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "inconclusive", "{case}");
        let spread = case["baseline_spread"].as_f64().unwrap();
        assert!(spread > 0.1, "{case}");
        assert!(
            case["detectable_change"].as_f64().unwrap() > spread,
            "{case}"
        );
        assert!(
            case["note"]
                .as_str()
                .unwrap()
                .starts_with("noisy on this host: baselines spread"),
            "{case}"
        );
    }
    let table = kbench()
        .arg("compare")
        .args(&bases)
        .arg(&new)
        .arg("--wide")
        .assert()
        .code(0);
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    assert!(table.contains("% noisy"), "{table}");
    assert!(
        table.contains("noisy on this host (baselines spread over 10% run to run)"),
        "{table}"
    );
    assert!(
        table.contains("detectable change: 4 undecided cases"),
        "{table}"
    );
}

#[test]
fn a_baseline_on_a_saturated_host_makes_the_host_bound_cases_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_once(dir.path());
    let mut bases = baselines(dir.path(), &run);
    // One baseline with 0.9 of the 2 CPUs busy with other work: a single-threaded case had no
    // CPU of its own for part of it (saturated: above 2 - 1 - 0.25).
    bases[4] = variant_of(&run, dir.path().join("base4.json"), 0.995, 0.9);
    let quiet = variant_of(&run, dir.path().join("quiet.json"), 1.2, 0.1);
    let judged = compare_json(&bases, &quiet, 0);
    assert_eq!(judged["load"]["saturated_runs"], 1);
    assert_eq!(judged["load"]["cpu_count"], 2);
    assert_eq!(judged["load"]["loaded"], true);
    for case in judged["cases"].as_array().unwrap() {
        assert_eq!(case["verdict"], "inconclusive", "{case}");
        assert_eq!(case["loaded"], true, "{case}");
    }
}
