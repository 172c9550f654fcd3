//! kbench into a pipe its reader closes (`kbench schema | head -1`): every command exits 0 with
//! nothing on stderr, as cargo and ripgrep do, where `println!` used to panic ("failed printing
//! to stdout: Broken pipe", exit 101). A run whose stdout closes mid-study still measures every
//! case into its results file and `--results`; a stdout that fails otherwise (a full disk)
//! exits 2 saying so. Each test spawns kbench with its stdout (or stderr) a pipe whose reader is
//! closed, either before kbench writes at all (so the first write surely fails) or, as `head -1`
//! does, after the first line.

use crate::common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// Four CPU cases that take a second or so, so that a reader gone after the first line is gone
/// before the tables are printed.
const STUDY: &str = "[study]\nname = \"piped\"\nalgorithm = \"reduce\"\nseed = 5\n\
[grid]\nn = [1_000_000, 2_000_000]\ndtype = \"f32\"\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
[measure]\nwarmup = 1\nmin_samples = 40\nmax_samples = 40\n";

fn kbench() -> Command {
    let mut cmd = Command::new(common::kbench_exe());
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("KBENCH_MOCK_GPU");
    cmd
}

/// Runs `cmd` with stdout a pipe whose reader is already closed.
fn into_closed_stdout(mut cmd: Command) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let child = cmd.stdout(writer).stderr(Stdio::piped()).spawn().unwrap();
    // The command holds the only writer now: nothing here keeps the pipe open.
    drop(cmd);
    child.wait_with_output().unwrap()
}

fn assert_quiet_success(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{what}: {stderr}"
    );
}

#[test]
fn printing_commands_exit_quietly_into_a_closed_pipe() {
    for args in [
        &["schema"][..],
        &["schema", "results"],
        &["completions", "bash"],
        &["list"],
        &["--help"],
    ] {
        let mut cmd = kbench();
        cmd.args(args);
        let out = into_closed_stdout(cmd);
        assert_quiet_success(&out, &args.join(" "));
        assert!(out.stderr.is_empty(), "{args:?}: {:?}", out.stderr);
    }
}

/// The issue's own commands, through a shell with `pipefail`: kbench's status, not head's.
#[test]
fn head_dash_one_of_each_printing_command_is_quiet() {
    let exe = common::kbench_exe();
    for args in [
        "schema",
        "completions bash",
        "list",
        "check experiments/reduction.toml",
    ] {
        let out = Command::new("bash")
            .args(["-o", "pipefail", "-c"])
            .arg(format!("'{}' {args} | head -1", exe.display()))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert_quiet_success(&out, args);
        assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 1);
    }
}

/// The study's results file, read whole, and the one `--results` wrote.
fn assert_every_case_saved(out_dir: &Path, copy: &Path) {
    let file = common::results_file_in(&out_dir.join("piped"));
    let doc = common::read(&file);
    assert_eq!(doc["cases"].as_array().unwrap().len(), 4, "{doc}");
    assert_eq!(doc["complete"], true);
    assert_eq!(common::read(copy), doc, "--results is the results file");
}

#[test]
fn a_run_whose_stdout_is_closed_measures_and_saves_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("piped.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out_dir = dir.path().join("out");
    let copy = dir.path().join("results.json");
    let mut cmd = kbench();
    cmd.arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out_dir)
        .arg("--results")
        .arg(&copy);
    let out = into_closed_stdout(cmd);
    assert_quiet_success(&out, "run");
    assert_every_case_saved(&out_dir, &copy);
}

#[test]
fn a_run_read_by_head_dash_one_measures_and_saves_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("piped.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out_dir = dir.path().join("out");
    let copy = dir.path().join("results.json");
    let mut child = kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out_dir)
        .arg("--results")
        .arg(&copy)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here, as head exits after its line, long before the tables come.
    assert!(first.starts_with("study `piped`"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_quiet_success(&out, "run | head -1");
    assert_every_case_saved(&out_dir, &copy);
}

#[test]
fn a_run_whose_stderr_is_closed_measures_and_saves_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("piped.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out_dir = dir.path().join("out");
    let copy = dir.path().join("results.json");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out_dir)
        .arg("--results")
        .arg(&copy)
        .stdout(Stdio::piped())
        .stderr(writer)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("results: "));
    assert_every_case_saved(&out_dir, &copy);
}

/// Not a reader gone but a write that fails: said, and exit 2 (the output was not given).
#[test]
fn a_stdout_that_cannot_be_written_exits_2_saying_so() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        panic!("this test needs /dev/full (Linux)");
    };
    let out = kbench()
        .arg("schema")
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: cannot write to stdout: No space left on device"),
        "{stderr}"
    );
}
