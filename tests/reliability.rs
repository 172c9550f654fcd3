//! Nothing measured is lost: an interrupted run keeps every finished case and resumes to the same
//! set of cases as an uninterrupted one; a case over its time limit, or too big for the machine,
//! is recorded and the study goes on.

use crate::common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kbench::record::CaseStatus;
use kbench::report::case_table;
use kbench::run::study::RunOptions;
use serde_json::Value;

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The cases of `partial` begin `finished`, unchanged.
fn assert_cases_kept(partial: &Value, finished: &Value) {
    let before = partial["cases"].as_array().unwrap();
    let after = finished["cases"].as_array().unwrap();
    assert_eq!(before[..], after[..before.len()]);
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
    let output = Command::new(common::kbench_exe())
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
    // Output captured (the progress lines are not the test log's), and shown if it fails.
    let run = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&full_out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let full = read_json(&results_file(&full_out, "slow").unwrap());
    assert_eq!(full["cases"].as_array().unwrap().len(), 24);

    // Interrupted with SIGINT once a few cases are in.
    let out = dir.path().join("out");
    let child = Command::new(common::kbench_exe())
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
        // Finished cases are in its journal until the run compacts it; the reader reads both.
        let done = results_file(&out, "slow")
            .and_then(|p| kbench::results::load_results(&p).ok())
            .map_or(0, |doc| doc.cases.len());
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
    let resumed = Command::new(common::kbench_exe())
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
    assert_cases_kept(&partial, &finished);
    // A complete file has nothing left to run.
    let again = Command::new(common::kbench_exe())
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
        assert_eq!(c["outputs"][0]["accuracy"]["passed"], true);
    }
}

#[test]
fn sizes_beyond_the_machine_are_refused_with_the_numbers_and_the_rest_runs() {
    let (code, doc) = run_json(
        "huge",
        "[study]\nname = \"huge\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [1_099_511_627_776, 1000]\n\
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
    assert_eq!(cases[1]["status"], "passed");
    // A size no machine can hold (its bytes overflow 64 bits) is refused before anything runs.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("overflow.toml");
    std::fs::write(
        &path,
        "[study]\nname = \"overflow\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [4_611_686_018_427_387_904, 1000]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n",
    )
    .unwrap();
    let output = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&path)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("overflow.toml:6:5") && stderr.contains("could never run"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists());

    // Durbin's sequential form keeps two n x n matrices: 1.44 TB of them at n = 300,000.
    let (code, doc) = run_json(
        "matrices",
        "[study]\nname = \"matrices\"\nalgorithm = \"durbin\"\nseed = 3\n[grid]\nn = [300_000, 100]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n[measure]\nmax_time_s = 0.05\n",
    );
    assert_eq!(code, Some(1));
    let cases = doc["cases"].as_array().unwrap();
    let reason = cases[0]["reason"].as_str().unwrap_or_default();
    assert_eq!(cases[0]["status"], "error");
    assert!(reason.contains("GiB of host memory"), "{reason}");
    assert_eq!(cases[1]["status"], "passed");
}

/// Three quick CPU cases with a 0.5 s time limit; `KBENCH_WORKER_FAULT` makes one misbehave.
const FAULT_STUDY: &str = "[study]\nname = \"fault\"\nalgorithm = \"reduce\"\nseed = 3\n\
[grid]\nn = [1000, 1001, 1002]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[measure]\nwarmup = 0\nmin_samples = 10\nmax_samples = 10\ntimeout_s = 0.5\n";

/// Runs FAULT_STUDY with `fault` injected into its workers: the exit code, the document, and
/// how long the run took.
fn run_with_fault(fault: &str) -> (Option<i32>, Value, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fault.toml");
    std::fs::write(&path, FAULT_STUDY).unwrap();
    let started = Instant::now();
    let output = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&path)
        .arg("--json")
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .env("KBENCH_WORKER_FAULT", fault)
        .output()
        .unwrap();
    let took = started.elapsed();
    let doc = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)));
    (output.status.code(), doc, took)
}

fn statuses(doc: &Value) -> Vec<String> {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_run_that_never_returns_is_killed_and_the_study_goes_on() {
    let (code, doc, took) = run_with_fault("hang:1");
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&doc), ["passed", "timed_out", "passed"]);
    let reason = doc["cases"][1]["reason"].as_str().unwrap();
    assert!(
        reason.contains("past the case's time limit of 0.5 s") && reason.contains("killed"),
        "{reason}"
    );
    // Killed 10 s after its 0.5 s limit, not left to hang.
    assert!(took < Duration::from_secs(40), "{took:?}");
    // The table counts the timed-out case as failed.
    let table = case_table::render(
        &serde_json::from_value(doc).unwrap(),
        &["n"],
        case_table::TableStyle::Terminal,
    );
    assert!(
        table.contains("3 cases: 2 passed, 1 failed, 0 skipped"),
        "{table}"
    );
}

#[test]
fn a_worker_that_crashes_fails_only_its_case() {
    let (code, doc, _) = run_with_fault("abort:0");
    assert_eq!(code, Some(1));
    assert_eq!(statuses(&doc), ["error", "passed", "passed"]);
    let reason = doc["cases"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("SIGABRT"), "{reason}");
}

#[test]
fn a_stray_print_in_a_worker_does_not_garble_its_answers() {
    let (code, doc, _) = run_with_fault("print:1");
    assert_eq!(code, Some(0));
    assert_eq!(statuses(&doc), ["passed", "passed", "passed"]);
}

#[test]
fn a_gpu_that_hangs_while_opening_costs_one_case_and_the_cuda_cases_after_it_are_skipped() {
    let text =
        "[study]\nname = \"stall\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [1000, 1001]\n\
                [[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
                [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
                [measure]\nwarmup = 0\nmin_samples = 10\nmax_samples = 10\n";
    // The worker stalls before case 0 gets going, as one stuck opening the GPU would.
    let options = RunOptions {
        setup_limit_s: 1.0,
        worker_fault: Some("stall:0".into()),
        ..RunOptions::new(common::kbench_exe())
    };
    // Asserts that the study ran to its end.
    let (_out, results) = common::run_study_with(text, &options);
    let got: Vec<(&str, CaseStatus)> = results
        .doc
        .cases
        .iter()
        .map(|c| (c.variant.as_str(), c.status))
        .collect();
    assert_eq!(
        got,
        [
            ("gpu", CaseStatus::Error),
            ("seq", CaseStatus::Passed),
            ("gpu", CaseStatus::Skipped),
            ("seq", CaseStatus::Passed),
        ]
    );
    let reason = |i: usize| results.doc.cases[i].reason.clone().unwrap_or_default();
    assert!(reason(0).contains("within 1 s"), "{}", reason(0));
    assert!(
        reason(2).contains("opening the GPU hung in case #0"),
        "{}",
        reason(2)
    );
}

#[cfg(target_os = "linux")]
#[test]
fn a_case_that_finished_while_kbench_was_stopped_is_not_killed_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stop.toml");
    // One case of about 0.5 s with a 1 s limit: kbench is stopped (as by Ctrl-Z) for longer than
    // the limit and its grace while the worker finishes it.
    std::fs::write(
        &path,
        "[study]\nname = \"stop\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\nn = [1_000_000]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 0\nmin_samples = 500\nmax_samples = 500\nmax_time_s = 0.5\ntimeout_s = 1.0\n",
    )
    .unwrap();
    let mut child = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&path)
        .arg("--json")
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while children(child.id()).is_empty() {
        assert!(started.elapsed() < Duration::from_secs(30), "no worker");
        std::thread::sleep(Duration::from_millis(5));
    }
    let signal = |name: &str| {
        assert!(Command::new("kill")
            .args([name, &child.id().to_string()])
            .status()
            .unwrap()
            .success())
    };
    signal("-STOP");
    std::thread::sleep(Duration::from_secs(12));
    signal("-CONT");
    let mut stdout = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut stdout).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(statuses(&doc), ["passed"], "{}", doc["cases"][0]["reason"]);
}

/// The pids of `pid`'s children, from the parent field of every /proc/<pid>/stat.
fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // After the command's `(name)`: state, then the parent's pid.
        let after_name = stat.rsplit(')').next().unwrap();
        if after_name.split_whitespace().nth(1) == Some(&pid.to_string()) {
            found.push(child);
        }
    }
    found
}

/// True once `pid` has exited (gone, or a zombie nobody has reaped yet).
fn exited(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(')')
            .next()
            .unwrap()
            .trim_start()
            .starts_with('Z')
    })
}

/// A hung worker started by a test: killed when the test ends, passed or not.
struct HungWorker(u32);

impl Drop for HungWorker {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.0.to_string()])
            .stderr(Stdio::null())
            .status();
    }
}

/// Starts FAULT_STUDY with case 0 hanging, and returns once the worker says it hangs: the kbench
/// process, with the rest of its stderr still to read, and its worker.
fn start_hanging_run(dir: &Path) -> (std::process::Child, HungWorker) {
    let path = dir.join("fault.toml");
    std::fs::write(
        &path,
        FAULT_STUDY.replace("timeout_s = 0.5", "timeout_s = 1000.0"),
    )
    .unwrap();
    let mut child = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&path)
        .arg("--out-dir")
        .arg(dir.join("out"))
        .env("KBENCH_WORKER_FAULT", "hang:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("hanging in case 0") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "kbench ended before its worker hung"
        );
    }
    // Keep draining kbench's stderr, so it never blocks on it.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let [worker] = children(child.id())[..] else {
        panic!("not one worker: {:?}", children(child.id()));
    };
    (child, HungWorker(worker))
}

fn wait_until_exited(pid: u32) -> bool {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if exited(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[cfg(target_os = "linux")]
#[test]
fn ctrl_c_during_a_hung_case_stops_at_once_and_takes_the_worker_along() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, worker) = start_hanging_run(dir.path());
    let interrupted_at = Instant::now();
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(interrupted_at.elapsed() < Duration::from_secs(5));
    assert!(wait_until_exited(worker.0), "the worker outlived kbench");
    let doc = read_json(&results_file(&dir.path().join("out"), "fault").unwrap());
    assert_eq!(doc["cases"].as_array().unwrap().len(), 0);
}

#[cfg(target_os = "linux")]
#[test]
fn a_worker_dies_with_a_killed_kbench() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, worker) = start_hanging_run(dir.path());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(wait_until_exited(worker.0), "the worker outlived kbench");
}

/// 40 quick CPU cases: their results file outgrows a 48 KiB disk part of the way through.
const MANY_CASES_STUDY: &str = "[study]\nname = \"many\"\nalgorithm = \"reduce\"\nseed = 3\n\
[grid]\nn = { start = 1000, stop = 1039, step = 1 }\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[measure]\nwarmup = 0\nmin_samples = 10\nmax_samples = 10\n";

/// How a test gets a disk that fills up: a real one where unprivileged mount namespaces are
/// allowed (a small tmpfs, ENOSPC), else a file-size limit (EFBIG), which fails the same writes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum SmallDisk {
    Tmpfs,
    FileSizeLimit,
}

fn small_disk() -> SmallDisk {
    let probe = tempfile::tempdir().unwrap();
    let mounts = Command::new("unshare")
        .args([
            "--user",
            "--map-root-user",
            "--mount",
            "mount",
            "-t",
            "tmpfs",
        ])
        .args(["-o", "size=64k", "kbench-probe"])
        .arg(probe.path())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if mounts {
        SmallDisk::Tmpfs
    } else {
        eprintln!(
            "no unprivileged mount namespaces here: a file-size limit stands in for a full disk"
        );
        SmallDisk::FileSizeLimit
    }
}

/// Runs `kbench run <manifest>` with its output folder on a disk of `kib` KiB (already full when
/// `full`); what the run left there is copied to `keep`. Returns the exit code, stdout and stderr.
fn run_on_small_disk(
    disk: SmallDisk,
    kib: u32,
    full: bool,
    manifest: &Path,
    keep: &Path,
) -> (Option<i32>, String, String) {
    let mount = tempfile::tempdir().unwrap();
    let script = match disk {
        SmallDisk::Tmpfs => format!(
            "mount -t tmpfs -o size={kib}k kbench-small \"$MNT\" || exit 97\n\
             {}\n\
             \"$KBENCH\" run \"$MANIFEST\" --out-dir \"$MNT/out\"; rc=$?\n\
             cp -r \"$MNT/out\" \"$KEEP/\" 2>/dev/null\n\
             exit $rc",
            if full {
                "dd if=/dev/zero of=\"$MNT/fill\" bs=4k 2>/dev/null"
            } else {
                ""
            }
        ),
        SmallDisk::FileSizeLimit => format!(
            "trap '' XFSZ\nulimit -f {}\n\
             \"$KBENCH\" run \"$MANIFEST\" --out-dir \"$KEEP/out\"",
            if full { 0 } else { kib / 2 }
        ),
    };
    let mut command = match disk {
        SmallDisk::Tmpfs => {
            let mut c = Command::new("unshare");
            c.args([
                "--user",
                "--map-root-user",
                "--mount",
                "bash",
                "-c",
                &script,
            ]);
            c
        }
        SmallDisk::FileSizeLimit => {
            let mut c = Command::new("bash");
            c.args(["-c", &script]);
            c
        }
    };
    let output = command
        .env("KBENCH", common::kbench_exe())
        .env("MANIFEST", manifest)
        .env("MNT", mount.path())
        .env("KEEP", keep)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs MANY_CASES_STUDY on a 48 KiB disk (already full when `full`) and checks that it stopped
/// with exit 2 saying the disk is full. Returns the temporary folder (to keep it alive), the
/// folder holding what the run left, stdout and stderr.
fn run_many_cases_on_a_small_disk(full: bool) -> (tempfile::TempDir, PathBuf, String, String) {
    let disk = small_disk();
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("many.toml");
    std::fs::write(&manifest, MANY_CASES_STUDY).unwrap();
    let keep = dir.path().join("keep");
    std::fs::create_dir(&keep).unwrap();
    let (code, stdout, stderr) = run_on_small_disk(disk, 48, full, &manifest, &keep);
    assert_eq!(code, Some(2), "{disk:?}: {stderr}");
    let disk_full = stderr.contains("No space left on device") || stderr.contains("File too large");
    assert!(stderr.contains("cannot write") && disk_full, "{stderr}");
    (dir, keep, stdout, stderr)
}

#[test]
fn a_disk_that_fills_mid_run_stops_it_with_a_clear_error_and_keeps_every_finished_case() {
    let (_dir, keep, _stdout, stderr) = run_many_cases_on_a_small_disk(false);
    assert!(stderr.contains("results so far are in"), "{stderr}");
    let out = keep.join("out");
    let path = results_file(&out, "many").unwrap();
    // The file could not take the cases' compaction on a full disk: its journal holds them, and
    // the reader reads both (no temporary file left beside them).
    let partial = serde_json::to_value(kbench::results::load_results(&path).unwrap()).unwrap();
    let done = partial["cases"].as_array().unwrap().len();
    assert!((1..40).contains(&done), "{done} cases");
    assert_eq!(partial["complete"], false);
    let leftovers: BTreeSet<String> = std::fs::read_dir(out.join("many"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| !name.ends_with(".cases.jsonl"))
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");

    // With room again, the run resumes to all 40 cases, the earlier ones as they were.
    let resumed = Command::new(common::kbench_exe())
        .arg("run")
        .arg("--resume")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0));
    let finished = read_json(&path);
    assert_eq!(finished["complete"], true);
    assert_eq!(finished["cases"].as_array().unwrap().len(), 40);
    assert_cases_kept(&partial, &finished);
    assert!(!kbench::results::journal_path(&path).exists());
}

#[test]
fn a_full_disk_is_reported_before_measuring() {
    let (_dir, keep, stdout, _stderr) = run_many_cases_on_a_small_disk(true);
    assert!(!stdout.contains("cases to run"), "{stdout}");
    // Nothing is left behind: no empty results file.
    assert_eq!(results_file(&keep.join("out"), "many"), None);
}

/// A tiny CPU study for the results-file tests: `cases` sizes, one sample each.
fn tiny_study(name: &str, cases: usize) -> String {
    format!(
        "[study]\nname = \"{name}\"\nalgorithm = \"reduce\"\nseed = 3\n\
         [grid]\nn = {{ start = 1, stop = {cases} }}\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 0\nmin_samples = 1\nmax_samples = 1\nmax_time_s = 0.01\n"
    )
}

/// Runs `tiny_study` into `dir/out` and returns its results file.
fn run_tiny(dir: &Path, name: &str, cases: usize, extra: &[&str]) -> PathBuf {
    let manifest = dir.join(format!("{name}.toml"));
    std::fs::write(&manifest, tiny_study(name, cases)).unwrap();
    let run = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(dir.join("out"))
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    results_file(&dir.join("out"), name).unwrap()
}

fn resume(path: &Path, extra: &[&str]) -> std::process::Output {
    Command::new(common::kbench_exe())
        .arg("run")
        .arg("--resume")
        .arg(path)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn resuming_a_file_whose_manifest_nests_too_deep_is_refused_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_tiny(dir.path(), "deep", 2, &[]);
    let mut doc = read_json(&path);
    let deep = format!("{}n > 1{}", "(".repeat(10_000), ")".repeat(10_000));
    let toml = doc["manifest"]["toml"]
        .as_str()
        .unwrap()
        .replace("[grid]\n", &format!("[grid]\nwhere = \"{deep}\"\n"));
    doc["manifest"]["toml"] = Value::String(toml);
    doc["complete"] = Value::Bool(false);
    doc["cases"] = Value::Array(vec![]);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = resume(&path, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("nests more than 200 levels"), "{stderr}");
}

/// The results file with its cases cut to the first `keep`, as an interrupted run leaves it.
fn cut_to(path: &Path, keep: usize) -> Value {
    let mut doc = read_json(path);
    doc["cases"].as_array_mut().unwrap().truncate(keep);
    doc["complete"] = Value::Bool(false);
    doc["finished_at"] = Value::Null;
    std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    doc
}

#[test]
fn cases_are_appended_to_a_journal_not_rewritten_with_the_whole_file() {
    let dir = tempfile::tempdir().unwrap();
    let manifest =
        kbench::manifest::parse(Path::new("t.toml"), &tiny_study("journal", 50)).unwrap();
    let cases = kbench::plan::expand(&manifest).unwrap();
    let mut results = kbench::results::ResultsFile::create(
        dir.path(),
        &manifest,
        cases.len(),
        manifest.measure.clone(),
        None,
    )
    .unwrap();
    let empty = std::fs::read(&results.path).unwrap();
    let journal = kbench::results::journal_path(&results.path);
    let template = {
        let (_dir, done) = common::run_study(&tiny_study("one", 1), Default::default());
        done.doc.cases[0].clone()
    };
    for case in &cases[..49] {
        let mut result = template.clone();
        result.index = case.index;
        result.params = case.params.clone();
        results.push(result).unwrap();
    }
    // 49 of 50 cases: the JSON file is as created, the journal holds one line per case, and a
    // reader sees all 49.
    assert_eq!(std::fs::read(&results.path).unwrap(), empty);
    let lines = std::fs::read_to_string(&journal).unwrap();
    assert_eq!(lines.lines().count(), 49);
    assert_eq!(
        kbench::results::load_results(&results.path)
            .unwrap()
            .cases
            .len(),
        49
    );
    // A torn last line (a kill mid-append) is skipped by readers.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap()
        .write_all(b"{\"index\": 49, \"vari")
        .unwrap();
    assert_eq!(
        kbench::results::load_results(&results.path)
            .unwrap()
            .cases
            .len(),
        49
    );
    results.compact().unwrap();
    // The last case completes the study: one JSON file holds everything, the journal is gone.
    let mut last = template.clone();
    last.index = cases[49].index;
    last.params = cases[49].params.clone();
    results.push(last).unwrap();
    let path = results.path.clone();
    drop(results);
    let doc = read_json(&path);
    assert_eq!(doc["cases"].as_array().unwrap().len(), 50);
    assert_eq!(doc["complete"], Value::Bool(true));
    assert!(!journal.exists());
    assert!(!path.with_extension("json.tmp").exists());
}

#[test]
fn a_killed_run_leaves_every_finished_case_readable_and_resumable() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("killed.toml");
    std::fs::write(&manifest, tiny_study("killed", 3000)).unwrap();
    // A line of progress per case: not for the test log.
    let mut child = Command::new(common::kbench_exe())
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let path = loop {
        let found = results_file(&dir.path().join("out"), "killed");
        let journaled = found
            .as_ref()
            .map(|p| kbench::results::journal_path(p))
            .and_then(|j| std::fs::read_to_string(j).ok());
        if journaled.is_some_and(|j| j.lines().count() >= 20) {
            break found.unwrap();
        }
        assert!(Instant::now() < deadline, "no cases journaled within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    };
    child.kill().unwrap(); // SIGKILL: no handler runs
    child.wait().unwrap();
    let partial = kbench::results::load_results(&path).unwrap();
    assert!(partial.cases.len() >= 20 && !partial.complete);
    let out = resume(&path, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = read_json(&path);
    assert_eq!(doc["cases"].as_array().unwrap().len(), 3000);
    assert_eq!(doc["complete"], Value::Bool(true));
    let leftovers: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(leftovers.len(), 1, "{leftovers:?}");
}

#[test]
fn resume_measures_with_the_original_runs_settings_or_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    // The manifest says 1 sample; the run was made with 3.
    let path = run_tiny(
        dir.path(),
        "settings",
        4,
        &["--min-samples", "3", "--max-samples", "3"],
    );
    cut_to(&path, 2);
    let out = resume(&path, &["--min-samples", "5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--min-samples 5, but the run measured with min_samples = 3"),
        "{stderr}"
    );
    let out = resume(&path, &["--min-samples", "3"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = read_json(&path);
    let samples: Vec<u64> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["summary"]["samples"].as_u64().unwrap())
        .collect();
    assert_eq!(samples, [3, 3, 3, 3]);
    assert_eq!(doc["manifest"]["measure"]["min_samples"], 3);
}

#[test]
fn resume_refuses_duplicated_or_foreign_cases() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_tiny(dir.path(), "dup", 4, &[]);
    let mut doc = cut_to(&path, 3);
    let first = doc["cases"][0].clone();
    doc["cases"].as_array_mut().unwrap().push(first);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = resume(&path, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is in the file twice"), "{stderr}");

    doc["cases"].as_array_mut().unwrap().pop();
    doc["cases"][1]["params"]["n"] = Value::from(99);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    let out = resume(&path, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("is not in the plan of its own manifest"),
        "{stderr}"
    );
}

#[test]
fn a_results_file_being_written_cannot_be_resumed_at_the_same_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = run_tiny(dir.path(), "locked", 3, &[]);
    cut_to(&path, 1);
    // Another kbench holding the file, as a run or resume in progress does.
    let journal = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(kbench::results::journal_path(&path))
        .unwrap();
    journal.try_lock().unwrap();
    let out = resume(&path, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("another kbench is writing"), "{stderr}");
    assert_eq!(read_json(&path)["cases"].as_array().unwrap().len(), 1);
    journal.unlock().unwrap();
    let out = resume(&path, &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(read_json(&path)["cases"].as_array().unwrap().len(), 3);
}

/// Not a check: measures the time spent writing results for `KBENCH_WRITE_CASES` (default
/// 20,000) cases through the journal, and through the old whole-file rewrite for a tenth of
/// them. `cargo test --release --test it reliability::measure_results_writing -- --ignored --nocapture`
#[test]
#[ignore]
fn measure_results_writing() {
    let count: usize = std::env::var("KBENCH_WRITE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let template = {
        let (_dir, done) = common::run_study(&tiny_study("one", 1), Default::default());
        done.doc.cases[0].clone()
    };
    let manifest = kbench::manifest::parse(Path::new("t.toml"), &tiny_study("w", count)).unwrap();
    let cases = kbench::plan::expand(&manifest).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut results = kbench::results::ResultsFile::create(
        dir.path(),
        &manifest,
        count,
        manifest.measure.clone(),
        None,
    )
    .unwrap();
    let started = Instant::now();
    for case in &cases {
        let mut result = template.clone();
        result.index = case.index;
        result.params = case.params.clone();
        results.push(result).unwrap();
    }
    let journal_s = started.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&results.path).unwrap().len();
    println!("journal: {count} cases written in {journal_s:.2} s ({bytes} bytes at the end)");
    // The old design: the whole file rewritten after every case.
    let old_count = count / 10;
    let mut doc = results.doc.clone();
    doc.cases.clear();
    let path = dir.path().join("old.json");
    let started = Instant::now();
    for case in &results.doc.cases[..old_count] {
        doc.cases.push(case.clone());
        kbench::results::write_json_atomically(&path, &doc).unwrap();
    }
    let old_s = started.elapsed().as_secs_f64();
    println!(
        "rewrite per case: {old_count} cases written in {old_s:.2} s (quadratic: about {:.0} s for {count})",
        old_s * 100.0
    );
}
