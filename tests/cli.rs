//! The command line end to end: exit codes, manifests refused before anything runs, and a real
//! run of experiments/reduction.toml whose JSON is read back and checked.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

fn kbench() -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A small valid study; `extra` is appended.
fn study(name: &str, extra: &str) -> String {
    format!(
        "[study]\nname = \"{name}\"\nalgorithm = \"reduce\"\nseed = 5\n[grid]\nn = [1, 777, 100_003]\ndtype = [\"i32\", \"f32\"]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
         [[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [measure]\nwarmup = 1\nmin_samples = 3\nmax_samples = 5\n{extra}"
    )
}

fn stdout_json_lines(output: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(output)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each stdout line is JSON"))
        .collect()
}

#[test]
fn malformed_manifests_are_refused_with_exit_2_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let good = write(dir.path(), "good.toml", &study("good", ""));
    let typo = write(dir.path(), "typo.toml", &study("typo", "warmpu = 2\n"));
    let negative = write(
        dir.path(),
        "negative.toml",
        &study("negative", "").replace("n = [1, 777, 100_003]", "n = [-4]"),
    );
    let assert = kbench()
        .args(["run", &good, &typo, &negative, "--out-dir"])
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("typo.toml:24:1"), "{stderr}");
    assert!(stderr.contains("unknown field `warmpu`"), "{stderr}");
    assert!(stderr.contains("negative.toml:6:5"), "{stderr}");
    assert!(stderr.contains("a size must be >= 0"), "{stderr}");
    assert!(
        !out.exists(),
        "a refused run must not measure or write anything"
    );

    kbench().args(["check", &typo]).assert().code(2);
    kbench()
        .args(["check", &good])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("18 cases (3 variants)"));
}

#[test]
fn bad_arguments_exit_2() {
    kbench().args(["run"]).assert().code(2);
    kbench()
        .args(["run", "no/such/dir/*.toml"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no manifest matches"));
    kbench()
        .args(["run", "missing.toml"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot read manifest"));
    kbench().args(["frobnicate"]).assert().code(2);
    for bad in [
        "--timeout-s=-1",
        "--timeout-s=nan",
        "--max-time-s=0",
        "--max-time-s=inf",
    ] {
        kbench()
            .args(["run", "experiments/reduction.toml", bad])
            .assert()
            .code(2)
            .stderr(predicates::str::contains("positive number of seconds"));
    }
}

#[test]
fn list_names_algorithms_variants_and_backends() {
    kbench()
        .arg("list")
        .assert()
        .success()
        .stdout(predicates::str::contains("reduce"))
        .stdout(predicates::str::contains("sequential, pairwise, threads"))
        .stdout(predicates::str::contains("reduce_fast"));
}

#[test]
fn a_wrong_answer_exits_1_saves_npy_files_and_keeps_the_other_cases() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A zero tolerance fails the sequential f32 sum (it rounds), not the exact integer sums.
    let manifest = write(
        dir.path(),
        "strict.toml",
        &study("strict", "[accuracy]\nrel_tol = { f32 = 0.0 }\n"),
    );
    let assert = kbench()
        .args([
            "run",
            &manifest,
            "--json",
            "--save-outputs",
            "failed",
            "--out-dir",
        ])
        .arg(&out)
        .assert()
        .code(1);
    let docs = stdout_json_lines(&assert.get_output().stdout);
    assert_eq!(docs.len(), 1);
    let cases = docs[0]["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 18);
    let failed: Vec<&Value> = cases
        .iter()
        .filter(|c| c["status"] == "accuracy_failed")
        .collect();
    assert!(!failed.is_empty());
    for case in &failed {
        assert_eq!(case["params"]["dtype"], "f32", "{case}");
        assert!(case["outputs"][0]["accuracy"]["first_wrong"][0]["expected"].is_number());
        let files = case["saved_files"].as_array().unwrap();
        assert_eq!(files.len(), 3, "{case}");
        let folder = out.join("strict");
        let output = folder.join(
            files
                .iter()
                .find(|f| f.as_str().unwrap().ends_with("output.sum.npy"))
                .unwrap()
                .as_str()
                .unwrap(),
        );
        let bytes = std::fs::read(&output).unwrap();
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        assert_eq!(npy.shape(), &[1]);
        let got: Vec<f32> = npy.into_vec().unwrap();
        assert_eq!(
            got[0] as f64,
            case["outputs"][0]["accuracy"]["first_wrong"][0]["got"]
                .as_f64()
                .unwrap()
        );
    }
    assert!(cases.iter().any(|c| c["status"] == "passed"));
    assert!(cases
        .iter()
        .filter(|c| c["status"] == "passed")
        .all(|c| c["saved_files"].as_array().unwrap().is_empty()));
}

#[test]
fn reduction_study_prints_its_table_and_writes_json_with_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let assert = kbench()
        .args([
            "run",
            "experiments/reduction.toml",
            "--max-time-s",
            "0.05",
            "--min-samples",
            "3",
            "--out-dir",
        ])
        .arg(&out)
        .assert();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let code = assert.get_output().status.code();
    // Without a GPU the CUDA cases are skipped; with one they run. Either way nothing fails.
    assert_eq!(
        code,
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&assert.get_output().stderr)
    );
    assert!(stdout.contains("81 cases"), "{stdout}");
    assert!(stdout.contains("│ cpu_pairwise"), "{stdout}");

    let files: Vec<_> = std::fs::read_dir(out.join("reduction"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 2);
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["study"]["name"], "reduction");
    assert!(doc["manifest"]["toml"]
        .as_str()
        .unwrap()
        .contains("[[variant]]"));
    for key in ["host", "cpu_model", "kbench_version", "git_revision"] {
        assert!(
            doc["environment"][key]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{key}"
        );
    }
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 81);
    let gpu_present = !doc["environment"]["device"].is_null();
    for case in cases {
        match case["backend"].as_str().unwrap() {
            "cpu" => {
                assert_eq!(case["status"], "passed", "{case}");
                let samples = case["measurement"]["samples_s"].as_array().unwrap();
                assert!(!samples.is_empty());
                assert_eq!(
                    samples.len() as u64,
                    case["summary"]["samples"].as_u64().unwrap()
                );
                let median = case["summary"]["median_s"].as_f64().unwrap();
                assert!(median > 0.0 && case["gbytes_per_s"].as_f64().unwrap() > 0.0);
                assert!(case["outputs"][0]["accuracy"]["passed"].as_bool().unwrap());
            }
            _ if gpu_present => assert_eq!(case["status"], "passed", "{case}"),
            _ => {
                assert_eq!(case["status"], "skipped", "{case}");
                assert!(case["reason"].as_str().unwrap().contains("no CUDA driver"));
            }
        }
    }
}

#[test]
fn a_second_run_never_overwrites_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let manifest = write(dir.path(), "twice.toml", &study("twice", ""));
    for _ in 0..2 {
        kbench()
            .args(["run", &manifest, "--max-time-s", "0.01", "--out-dir"])
            .arg(&out)
            .assert()
            .code(0);
    }
    assert_eq!(std::fs::read_dir(out.join("twice")).unwrap().count(), 2);
}

#[test]
fn an_unwritable_output_folder_is_reported_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let manifest = write(dir.path(), "s.toml", &study("s", ""));
    kbench()
        .args(["run", &manifest, "--out-dir"])
        .arg(&blocker)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot create the output folder"));
}

#[test]
fn a_refuted_claim_exits_3_with_check_claims_and_report_judges_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The pairwise sum is no hundred times faster than the loop: refuted. The GPU claim is
    // skipped here (no GPU) or holds there: never refuted for want of a GPU.
    let claims = "[[claim]]\ntext = \"pairwise is 100x faster\"\nsource = \"t\"\nkind = \"faster\"\na = \"tree\"\nb = \"seq\"\nby = 100.0\nselect = { n = 100_003 }\n\
                  [[claim]]\ntext = \"the GPU sum is right\"\nsource = \"t\"\nkind = \"passes\"\na = \"gpu\"\n\
                  [[table]]\ntitle = \"Medians\"\nrows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\nselect = { dtype = \"f32\" }\n";
    let manifest = write(dir.path(), "c.toml", &study("claimed", claims));
    let run = |check: bool| {
        let mut cmd = kbench();
        cmd.args(["run", &manifest, "--out-dir"]).arg(&out);
        if check {
            cmd.arg("--check-claims");
        }
        cmd.assert()
    };
    let plain = run(false);
    assert_eq!(plain.get_output().status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&plain.get_output().stdout).to_string();
    assert!(
        stdout.contains("REFUTED      \"pairwise is 100x faster\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("Medians (median time; dtype = f32)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("REFUTED      \"the GPU sum is right\""),
        "{stdout}"
    );
    assert_eq!(run(true).get_output().status.code(), Some(3));

    // The verdicts are kept in the JSON, and `report` judges the saved run again.
    let file = std::fs::read_dir(out.join("claimed"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["claims"][0]["status"], "refuted");
    let report = kbench()
        .args([
            "report",
            file.to_str().unwrap(),
            "--tables",
            "--check-claims",
        ])
        .assert();
    assert_eq!(report.get_output().status.code(), Some(3));
    let text = String::from_utf8_lossy(&report.get_output().stdout).to_string();
    assert!(text.contains("pairwise is 100x faster"), "{text}");
    assert!(
        !text.contains("│ seq "),
        "--tables leaves out the table of every case: {text}"
    );
}
