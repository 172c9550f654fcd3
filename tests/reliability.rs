//! Nothing measured is lost: an interrupted run keeps every finished case and resumes to the same
//! set of cases as an uninterrupted one; a case over its time limit, or too big for the machine,
//! is recorded and the study goes on.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn kbench_path() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kbench"))
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn case_keys(doc: &Value) -> BTreeSet<String> {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{} {} {}", c["index"], c["variant"], c["params"]))
        .collect()
}

/// Writes `manifest` into a fresh folder and runs it with `--json`: the exit code and the document.
fn run_json(name: &str, manifest: &str) -> (Option<i32>, Value) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.toml"));
    std::fs::write(&path, manifest).unwrap();
    let output = Command::new(kbench_path())
        .arg("run")
        .arg(&path)
        .arg("--json")
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    (
        output.status.code(),
        serde_json::from_slice(&output.stdout).unwrap(),
    )
}

/// 24 CPU cases of about 0.1 s each: long enough to interrupt in the middle.
const SLOW_STUDY: &str = "[study]\nname = \"slow\"\nalgorithm = \"reduce\"\nseed = 3\n\
[grid]\nn = [1_000_000, 1_100_000, 1_200_000, 1_300_000]\ndtype = [\"i32\", \"f32\", \"f64\"]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
[measure]\nwarmup = 0\nmin_samples = 100\nmax_samples = 100\nmax_time_s = 0.1\n";

fn results_file(out: &Path, study: &str) -> Option<PathBuf> {
    std::fs::read_dir(out.join(study))
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "json"))
}

#[test]
fn an_interrupted_run_resumes_to_the_same_cases_as_an_uninterrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("slow.toml");
    std::fs::write(&manifest, SLOW_STUDY).unwrap();

    // Uninterrupted, for reference.
    let full_out = dir.path().join("full");
    let status = Command::new(kbench_path())
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&full_out)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let full = read_json(&results_file(&full_out, "slow").unwrap());
    assert_eq!(full["cases"].as_array().unwrap().len(), 24);

    // Interrupted with SIGINT once a few cases are in.
    let out = dir.path().join("out");
    let child = Command::new(kbench_path())
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    loop {
        // The file is reserved empty an instant before its first complete write: read it as 0.
        let done = results_file(&out, "slow")
            .and_then(|p| serde_json::from_str::<Value>(&std::fs::read_to_string(p).ok()?).ok())
            .map_or(0, |doc| doc["cases"].as_array().map_or(0, Vec::len));
        if done >= 4 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run made no progress"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("--resume"), "{stderr}");

    let path = results_file(&out, "slow").unwrap();
    let partial = read_json(&path);
    let done = partial["cases"].as_array().unwrap().len();
    assert!((4..24).contains(&done), "{done} cases");
    assert_eq!(partial["complete"], false);
    assert!(partial["cases"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["status"] == "passed"));

    // Resume: only the missing cases run, into the same file.
    let resumed = Command::new(kbench_path())
        .arg("run")
        .arg("--resume")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    assert!(
        String::from_utf8_lossy(&resumed.stdout).contains(&format!("{} cases to run", 24 - done))
    );
    let finished = read_json(&path);
    assert_eq!(finished["complete"], true);
    assert_eq!(finished["resumed_at"].as_array().unwrap().len(), 1);
    assert_eq!(case_keys(&finished), case_keys(&full));
    // Cases measured before the interrupt are kept as they were.
    for (before, after) in partial["cases"]
        .as_array()
        .unwrap()
        .iter()
        .zip(finished["cases"].as_array().unwrap())
    {
        assert_eq!(before, after);
    }
    // A complete file has nothing left to run.
    let again = Command::new(kbench_path())
        .arg("run")
        .arg("--resume")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&again.stdout).contains("0 cases to run"));
}

#[test]
fn a_case_over_its_time_limit_is_recorded_as_timed_out_and_the_study_goes_on() {
    let (code, doc) = run_json(
        "limit",
        "[study]\nname = \"limit\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [100_003]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
         [measure]\nmin_samples = 1000000\nmax_samples = 1000000\nmax_time_s = 1000.0\ntimeout_s = 0.2\n",
    );
    assert_eq!(code, Some(1), "a timed-out case fails the run");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(
        cases.len(),
        2,
        "the second case ran after the first timed out"
    );
    for c in cases {
        assert_eq!(c["status"], "timed_out", "{c}");
        assert!(c["reason"]
            .as_str()
            .unwrap()
            .contains("time limit of 0.2 s"));
        assert!(
            !c["measurement"]["samples_s"].as_array().unwrap().is_empty(),
            "samples are kept"
        );
        assert_eq!(c["accuracy"]["passed"], true);
    }
}

#[test]
fn sizes_beyond_the_machine_are_refused_with_the_numbers_and_the_rest_runs() {
    let (code, doc) = run_json(
        "huge",
        "[study]\nname = \"huge\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [1_099_511_627_776, 4_611_686_018_427_387_904, 1000]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n[measure]\nmax_time_s = 0.05\n",
    );
    assert_eq!(code, Some(1));
    let cases = doc["cases"].as_array().unwrap();
    let reason = |i: usize| cases[i]["reason"].as_str().unwrap_or_default().to_string();
    assert_eq!(cases[0]["status"], "error");
    assert!(
        reason(0).contains("GiB of host memory") && reason(0).contains("4096.00 GiB"),
        "{}",
        reason(0)
    );
    assert_eq!(cases[1]["status"], "error");
    assert!(reason(1).contains("overflows"), "{}", reason(1));
    assert_eq!(cases[2]["status"], "passed");
}
