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

use crate::common;
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

/// The `#SBATCH` options of a batch script as sbatch reads them (Slurm's src/sbatch/opt.c,
/// `_opt_batch_script` and `_get_argument`): the lines from the top up to the first command,
/// each `#SBATCH` line's words split at white space outside quotes, a backslash escaping the next
/// character, an unquoted `#` ending the line.
fn sbatch_options(script: &str) -> Vec<String> {
    let mut options = Vec::new();
    for line in script.lines().skip(1) {
        let line = line.trim_start();
        if line.is_empty() {
            continue;
        }
        if !line.starts_with('#') {
            break;
        }
        let Some(rest) = line.strip_prefix("#SBATCH") else {
            continue;
        };
        let chars: Vec<char> = rest.chars().collect();
        let mut i = 0;
        'words: while i < chars.len() {
            while i < chars.len() && chars[i].is_whitespace() {
                i += 1;
            }
            let (mut word, mut quote) = (String::new(), None);
            while i < chars.len() && (quote.is_some() || !chars[i].is_whitespace()) {
                let c = chars[i];
                i += 1;
                match (c, quote) {
                    ('\\', _) if i < chars.len() => {
                        word.push(chars[i]);
                        i += 1;
                    }
                    (c, Some(q)) if c == q => quote = None,
                    (c, Some(_)) => word.push(c),
                    ('"' | '\'', None) => quote = Some(c),
                    ('#', None) => {
                        if !word.is_empty() {
                            options.push(word);
                        }
                        break 'words;
                    }
                    (c, None) => word.push(c),
                }
            }
            assert!(quote.is_none(), "sbatch: unmatched quote in {line:?}");
            if !word.is_empty() {
                options.push(word);
            }
        }
    }
    options
}

/// A fake `sbatch` first on PATH: it records its arguments, one call a line, in `sbatch.log`
/// beside it, answers a job id as `--parsable` does, and runs nothing.
fn fake_sbatch(dir: &Path) -> PathBuf {
    let bin = dir.join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let sbatch = bin.join("sbatch");
    std::fs::write(
        &sbatch,
        "#!/bin/bash\nlog=\"$(dirname \"$0\")/sbatch.log\"\nprintf '%s\\x1f' \"$@\" >> \"$log\"\n\
         printf '\\n' >> \"$log\"\necho \"$(( $(wc -l < \"$log\") + 40 ));fake-cluster\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&sbatch, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// Every file named PWNED under `dir`: a hostile name's command that ran.
fn pwned(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "PWNED") {
                found.push(path.clone());
            }
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            }
        }
    }
    found
}

/// Runs `script` with bash in `cwd` with `env`, as Slurm would; returns its output.
fn run_script(script: &Path, cwd: &Path, env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Process::new("bash");
    command.arg(script).current_dir(cwd);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().unwrap()
}

/// The folder names an attacker (or an unlucky CI variable) could give: each must reach the
/// scripts as data, never as shell.
const HOSTILE: [&str; 7] = [
    "with space",
    "$(touch PWNED)",
    "`touch PWNED`",
    "\";touch PWNED;\"",
    "it's 'quoted'",
    "#hash 100%",
    "a\\b$HOME${IFS}touch${IFS}PWNED",
];

/// `kbench slurm` for a manifest in a folder named `name` and `--out` named `name`, then
/// `bash submit.sh` under the fake sbatch and every script run as Slurm would run it: no command
/// hidden in a name runs, the `#SBATCH` lines keep their array and folders, and the shards merge
/// into the unsharded cases.
fn hostile_names_reach_the_scripts_as_data(name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (manifest, whole) = setup(&std::fs::canonicalize(dir.path()).unwrap());
    let home = dir.path().canonicalize().unwrap().join(name);
    std::fs::create_dir_all(&home).unwrap();
    let manifest = {
        let moved = home.join("sharded.toml");
        std::fs::rename(&manifest, &moved).unwrap();
        moved
    };
    let out = home.join(format!("out {name}"));
    let written = kbench()
        .current_dir(&home)
        .arg("slurm")
        .arg(&manifest)
        .args(["--shards", "2", "--out"])
        .arg(&out)
        .assert();
    let stderr = String::from_utf8_lossy(&written.get_output().stderr).into_owned();
    if name.contains('\\') {
        // A backslash in --out would turn off %a and %j in the log files' names: refused.
        written.code(2);
        assert!(stderr.contains("backslash"), "{stderr}");
        return;
    }
    written.success();
    let out = out.canonicalize().unwrap();
    let array = out.join("sharded.array.sbatch");
    let merge = out.join("sharded.merge.sbatch");

    let bin = fake_sbatch(dir.path());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let submitted = run_script(&out.join("submit.sh"), dir.path(), &[("PATH", &path)]);
    let said = String::from_utf8_lossy(&submitted.stdout).into_owned();
    assert!(
        submitted.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&submitted.stderr)
    );
    let calls: Vec<Vec<String>> = std::fs::read_to_string(bin.join("sbatch.log"))
        .unwrap()
        .lines()
        .map(|l| {
            l.split('\x1f')
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect()
        })
        .collect();
    assert_eq!(
        calls,
        [
            vec!["--parsable".to_string(), array.display().to_string()],
            vec![
                "--parsable".to_string(),
                "--dependency=afterany:41".to_string(),
                merge.display().to_string()
            ],
        ]
    );
    assert!(
        said.contains(&format!(
            "merged results: {}/sharded-merged-42.json",
            out.display()
        )),
        "{said}"
    );

    let options = sbatch_options(&std::fs::read_to_string(&array).unwrap());
    let chdir = format!("--chdir={}", out.display());
    let logs = format!("{}/logs", out.display().to_string().replace('%', "%%"));
    for expected in [
        "--array=1-2".to_string(),
        "--job-name=kbench-sharded".to_string(),
        chdir.clone(),
        format!("--output={logs}/shard-%a.out"),
    ] {
        assert!(options.contains(&expected), "{expected} not in {options:?}");
    }
    let options = sbatch_options(&std::fs::read_to_string(&merge).unwrap());
    assert!(options.contains(&chdir), "{options:?}");
    assert!(
        options.contains(&format!("--output={logs}/merge-%j.out")),
        "{options:?}"
    );

    // As Slurm runs them: in --chdir, each task with its id, then the merge with its job id.
    for task in ["1", "2"] {
        let ran = run_script(&array, &out, &[("SLURM_ARRAY_TASK_ID", task)]);
        assert!(
            ran.status.success(),
            "{}",
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    let ran = run_script(&merge, &out, &[("SLURM_JOB_ID", "42")]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let doc = read(&out.join("sharded-merged-42.json"));
    assert_eq!(case_set(&doc), whole);
    assert_eq!(pwned(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn hostile_folder_and_out_names_never_run_under_a_fake_sbatch() {
    for name in HOSTILE {
        hostile_names_reach_the_scripts_as_data(name);
    }
}

/// A newline in the manifest's folder would end the scripts' header comment and start a command
/// (and end sbatch's reading of `#SBATCH` lines): refused, with no script written.
#[test]
fn a_control_character_in_a_path_is_refused_before_any_script() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("x\ntouch PWNED\n#");
    std::fs::create_dir_all(&home).unwrap();
    let manifest = home.join("sharded.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    for (manifest, out) in [
        (manifest.clone(), dir.path().join("out")),
        (dir.path().join("plain.toml"), dir.path().join("o\nu t")),
    ] {
        std::fs::write(dir.path().join("plain.toml"), STUDY).unwrap();
        let refused = kbench()
            .current_dir(dir.path())
            .arg("slurm")
            .arg(&manifest)
            .args(["--shards", "2", "--out"])
            .arg(&out)
            .assert()
            .code(2);
        let e = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
        assert!(e.contains("control character"), "{e}");
        assert!(!out.join("submit.sh").exists());
    }
    assert_eq!(pwned(dir.path()), Vec::<PathBuf>::new());
}

/// The README's symgs pattern: a file axis globbed relative to the folder `kbench slurm` ran
/// in. The array tasks run in --out (Slurm's --chdir), yet each runs its shard on the same
/// files, and the merge (in --out too) reads the shards' recorded files.
#[test]
fn a_file_axis_study_runs_as_array_tasks_under_chdir() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("study");
    std::fs::create_dir_all(home.join("datasets")).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in ["hpcg_4x4x4.mtx", "laplace2d_8x8.mtx"] {
        std::fs::copy(
            repo.join("datasets").join(file),
            home.join("datasets").join(file),
        )
        .unwrap();
    }
    std::fs::write(
        home.join("sym.toml"),
        "[study]\nname = \"sym\"\nalgorithm = \"symgs\"\nseed = 2\n[grid]\n\
         matrix = [\"datasets/*.mtx\", \"laplace2d:6\"]\ndtype = [\"f32\", \"f64\"]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 0\nmin_samples = 2\nmax_samples = 2\n",
    )
    .unwrap();
    let out = dir.path().canonicalize().unwrap().join("slurm");
    kbench()
        .current_dir(&home)
        .args(["slurm", "sym.toml", "--shards", "3", "--out"])
        .arg(&out)
        .assert()
        .success();
    for task in ["1", "2", "3"] {
        let ran = run_script(
            &out.join("sym.array.sbatch"),
            &out,
            &[("SLURM_ARRAY_TASK_ID", task)],
        );
        assert!(
            ran.status.success(),
            "task {task}: {}",
            String::from_utf8_lossy(&ran.stderr)
        );
    }
    let ran = run_script(
        &out.join("sym.merge.sbatch"),
        &out,
        &[("SLURM_JOB_ID", "7")],
    );
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let doc = read(&out.join("sym-merged-7.json"));
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["cases"].as_array().unwrap().len(), 6);
    assert_eq!(
        doc["manifest"]["files"][0]["files"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}
