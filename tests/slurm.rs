//! `kbench slurm` against a real Slurm (no mock): a CPU study as a job array of 4 shards plus
//! the merge job, and the same with one array task cancelled, then `--resume` of the merged file.
//! Needs a running cluster that runs jobs on this host (`scripts/slurm-local.sh` starts one;
//! CI runs it): those tests are ignored by a plain `cargo test` (reported as ignored, with the
//! reason), and fail, saying why, where they are asked for (`--include-ignored`, as CI does) and
//! Slurm cannot run them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command as Process;
use std::time::{Duration, Instant};

mod common;
use common::kbench;
use common::results_file_in;
use common::{case_set, read};

/// Why Slurm cannot run the tests here, if it cannot.
fn slurm_missing() -> Option<String> {
    let sinfo = match Process::new("sinfo").args(["-h", "-o", "%t"]).output() {
        Ok(out) => out,
        Err(e) => {
            return Some(format!(
                "`sinfo` cannot run ({e}): Slurm is not installed (sudo bash scripts/slurm-local.sh installs and starts it)"
            ))
        }
    };
    let states = String::from_utf8_lossy(&sinfo.stdout).to_string();
    if !sinfo.status.success() {
        return Some(format!(
            "`sinfo` failed: slurmctld is not running ({}); sudo bash scripts/slurm-local.sh starts it",
            String::from_utf8_lossy(&sinfo.stderr).trim()
        ));
    }
    if !states
        .lines()
        .any(|s| ["idle", "mix", "alloc"].contains(&s.trim()))
    {
        return Some(format!(
            "no Slurm node is up (sinfo says {:?}); sudo bash scripts/slurm-local.sh starts one",
            states.trim()
        ));
    }
    None
}

/// A test that needs Slurm runs only when asked for (it is `#[ignore]`d), so a missing Slurm
/// fails it: it never passes without running.
macro_rules! require_slurm {
    () => {
        if let Some(why) = slurm_missing() {
            panic!("Slurm cannot run this test: {why}");
        }
    };
}

/// 16 CPU cases, a second or two in all.
const STUDY: &str = "[study]\nname = \"sharded\"\nalgorithm = \"reduce\"\nseed = 3\n[grid]\n\
    n = [1, 3, 5, 7, 100, 777, 1000, 4096]\n\
    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
    [[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
    [measure]\nwarmup = 0\nmin_samples = 3\nmax_samples = 3\n";

/// The manifest, and the cases of an unsharded run of it.
fn setup(dir: &Path) -> (PathBuf, BTreeSet<String>) {
    let manifest = dir.join("sharded.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out = dir.join("whole");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .success();
    let file = results_file_in(&out.join("sharded"));
    (manifest, case_set(&read(&file)))
}

fn slurm_scripts(manifest: &Path, folder: &Path) {
    let assert = kbench()
        .arg("slurm")
        .arg(manifest)
        .args(["--shards", "4", "--time", "5:00", "--out"])
        .arg(folder)
        .assert()
        .success();
    let text = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(
        text.contains("submit.sh") && text.contains("sbatch"),
        "{text}"
    );
}

/// Runs a command and returns its stdout, trimmed; panics with its stderr if it fails.
fn sh(program: &str, args: &[&str]) -> String {
    let out = Process::new(program).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Waits (up to 4 minutes) until Slurm has no job of `ids` pending or running.
fn wait_for(ids: &[&str]) {
    let list = ids.join(",");
    let until = Instant::now() + Duration::from_secs(240);
    loop {
        let out = Process::new("squeue")
            .args(["-h", "-j", &list, "-o", "%i %T"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        // squeue forgets finished jobs (and says so with an error for an unknown id).
        if text.trim().is_empty() {
            return;
        }
        assert!(
            Instant::now() < until,
            "Slurm jobs {list} still queued after 4 minutes:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn job_id(parsable: &str) -> String {
    parsable.split(';').next().unwrap().to_string()
}

/// Runs `submit.sh` in `folder`, waits for its jobs, and returns the merge job's id.
fn submit_and_wait(folder: &Path) -> String {
    let submitted = sh("bash", &[folder.join("submit.sh").to_str().unwrap()]);
    // "shards: job 12 (array 1-4); merge: job 13"
    let ids: Vec<String> = submitted
        .lines()
        .next()
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(String::from)
        .collect();
    wait_for(&[&ids[0], &ids[3]]);
    ids[3].clone()
}

/// The file merge job `merge` wrote, which must exist, and the job's log.
fn merge_output(folder: &Path, merge: &str) -> (PathBuf, String) {
    let merged = folder.join(format!("sharded-merged-{merge}.json"));
    let log =
        std::fs::read_to_string(folder.join(format!("logs/merge-{merge}.out"))).unwrap_or_default();
    assert!(
        merged.exists(),
        "no {}; merge log:\n{log}",
        merged.display()
    );
    (merged, log)
}

/// The file merge job `merge` wrote, which must hold the cases of the unsharded run, complete.
fn merged_whole(folder: &Path, merge: &str, whole: &BTreeSet<String>) -> serde_json::Value {
    let (merged, log) = merge_output(folder, merge);
    let doc = read(&merged);
    assert_eq!(&case_set(&doc), whole, "merge log:\n{log}");
    assert_eq!(doc["complete"], true);
    doc
}

#[test]
#[ignore = "needs a running Slurm (sudo bash scripts/slurm-local.sh); CI runs it with --include-ignored"]
fn a_study_as_a_job_array_of_four_shards_merges_into_the_unsharded_cases() {
    require_slurm!();
    let dir = tempfile::tempdir().unwrap();
    let (manifest, whole) = setup(dir.path());
    let folder = dir.path().join("slurm");
    slurm_scripts(&manifest, &folder);
    let merge = submit_and_wait(&folder);
    let doc = merged_whole(&folder, &merge, &whole);
    let shards: BTreeSet<u64> = doc["merged_from"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["shard"]["index"].as_u64().unwrap())
        .collect();
    assert_eq!(shards, (1..=4).collect());
}

#[test]
#[ignore = "needs a running Slurm (sudo bash scripts/slurm-local.sh); CI runs it with --include-ignored"]
fn a_cancelled_array_task_is_reported_missing_and_resume_fills_it() {
    require_slurm!();
    let dir = tempfile::tempdir().unwrap();
    let (manifest, whole) = setup(dir.path());
    let folder = dir.path().join("slurm");
    slurm_scripts(&manifest, &folder);
    let array_script = folder.join("sharded.array.sbatch");
    let merge_script = folder.join("sharded.merge.sbatch");
    // Held, so task 2 is cancelled before it can start: its shard never runs.
    let array = job_id(&sh(
        "sbatch",
        &["--parsable", "--hold", array_script.to_str().unwrap()],
    ));
    sh("scancel", &[&format!("{array}_2")]);
    sh("scontrol", &["release", &array]);
    let merge = job_id(&sh(
        "sbatch",
        &[
            "--parsable",
            &format!("--dependency=afterany:{array}"),
            merge_script.to_str().unwrap(),
        ],
    ));
    wait_for(&[&array, &merge]);
    let (merged, log) = merge_output(&folder, &merge);

    // What shard 2 holds, from a local run of it.
    let out = dir.path().join("shard2");
    kbench()
        .arg("run")
        .arg(&manifest)
        .args(["--shard", "2/4", "--out-dir"])
        .arg(&out)
        .assert()
        .success();
    let shard2 = results_file_in(&out.join("sharded"));
    let lost = read(&shard2)["cases"].as_array().unwrap().len();
    assert!(lost > 0, "shard 2 of 4 holds no case: choose another study");
    assert!(
        log.contains(&format!("missing {lost} case")),
        "the merge does not report shard 2's {lost} cases missing:\n{log}"
    );
    let doc = read(&merged);
    assert_eq!(doc["complete"], false);
    assert_eq!(doc["cases"].as_array().unwrap().len() + lost, whole.len());

    kbench()
        .args(["run", "--resume"])
        .arg(&merged)
        .assert()
        .success();
    let doc = read(&merged);
    assert_eq!(case_set(&doc), whole);
    assert_eq!(doc["complete"], true);
}

/// The scripts submitted a second time into the same folder (as a requeued task reruns): each
/// array task finds its shard's complete file and leaves it be, so the second merge takes the
/// same four files, with no overlap.
#[test]
#[ignore = "needs a running Slurm (sudo bash scripts/slurm-local.sh); CI runs it with --include-ignored"]
fn a_second_submission_into_the_same_folder_merges_again() {
    require_slurm!();
    let dir = tempfile::tempdir().unwrap();
    let (manifest, whole) = setup(dir.path());
    let folder = dir.path().join("slurm");
    slurm_scripts(&manifest, &folder);
    let mut merges = Vec::new();
    for _ in 0..2 {
        merges.push(submit_and_wait(&folder));
        if merges.len() == 1 {
            // Shard 2's file as a task killed after its first case leaves it: the next
            // submission's task 2 resumes it.
            let shard2 = results_file_in(&folder.join("results/shard-2/sharded"));
            let mut doc = read(&shard2);
            doc["cases"].as_array_mut().unwrap().truncate(1);
            doc["complete"] = false.into();
            doc["finished_at"] = serde_json::Value::Null;
            std::fs::write(&shard2, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
    }
    for merge in &merges {
        merged_whole(&folder, merge, &whole);
    }
    let log = std::fs::read_to_string(folder.join("logs/shard-1.out")).unwrap();
    assert!(log.contains("is complete"), "{log}");
    let log = std::fs::read_to_string(folder.join("logs/shard-2.out")).unwrap();
    assert!(log.contains("resuming"), "{log}");
}

/// Without Slurm: an array task run by hand (bash, SLURM_ARRAY_TASK_ID set) twice leaves one
/// results file in its shard's folder, and resumes one left incomplete.
#[test]
fn an_array_task_run_again_keeps_one_file_per_shard() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("sharded.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let folder = dir.path().join("slurm");
    slurm_scripts(&manifest, &folder);
    let array = folder.join("sharded.array.sbatch");
    let task = || {
        let out = Process::new("bash")
            .arg(&array)
            .env("SLURM_ARRAY_TASK_ID", "2")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let files = || -> Vec<PathBuf> {
        std::fs::read_dir(folder.join("results/shard-2/sharded"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect()
    };
    task();
    let first = files();
    assert_eq!(first.len(), 1, "{first:?}");
    let full = case_set(&read(&first[0]));
    assert!(task().contains("is complete"));
    assert_eq!(files(), first);
    // As a task killed after its first case leaves the file.
    let mut doc = read(&first[0]);
    doc["cases"].as_array_mut().unwrap().truncate(1);
    doc["complete"] = false.into();
    doc["finished_at"] = serde_json::Value::Null;
    std::fs::write(&first[0], serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    assert!(task().contains("resuming"));
    assert_eq!(files(), first);
    let doc = read(&first[0]);
    assert_eq!(case_set(&doc), full);
    assert_eq!(doc["complete"], true);
}

/// `kbench slurm` warns that tasks without --gpus-per-task get no GPU for a study with CUDA
/// variants, and refuses a bad manifest as `run` does: `error:` with its place, exit 2.
#[test]
fn slurm_warns_of_cuda_tasks_without_gpus_and_refuses_bad_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("gpu.toml");
    let text = STUDY.replace(
        "[measure]",
        "[[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n[measure]",
    );
    std::fs::write(&manifest, text).unwrap();
    let slurm = |manifest: &Path, extra: &[&str]| {
        kbench()
            .arg("slurm")
            .arg(manifest)
            .args(["--shards", "2", "--out"])
            .arg(dir.path().join("out"))
            .args(extra)
            .assert()
    };
    let stderr = |a: &assert_cmd::assert::Assert| {
        String::from_utf8_lossy(&a.get_output().stderr).into_owned()
    };
    let e = stderr(&slurm(&manifest, &[]).success());
    assert!(
        e.contains("warning:") && e.contains("--gpus-per-task N"),
        "{e}"
    );
    let e = stderr(&slurm(&manifest, &["--gpus-per-task", "1"]).success());
    assert!(!e.contains("warning"), "{e}");
    let cpu = dir.path().join("cpu.toml");
    std::fs::write(&cpu, STUDY).unwrap();
    let e = stderr(&slurm(&cpu, &[]).success());
    assert!(!e.contains("warning"), "{e}");

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, STUDY.replace("seed = 3", "seed = \"three\"")).unwrap();
    let e = stderr(&slurm(&bad, &[]).code(2));
    assert!(
        e.starts_with("error: ") && e.contains(&format!("--> {}:", bad.display())),
        "{e}"
    );
}
