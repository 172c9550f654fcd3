//! A custom study's external commands: programs of the user's (a NumPy script, say), run
//! outside the timing.
//!
//! - The reference command (`run`) computes a case's expected outputs from its inputs. Each
//!   input is written as `<name>.npy` into a fresh temporary folder named by `KBENCH_INPUTS`;
//!   the command writes each expected output as `<name>.npy` into the folder named by
//!   `KBENCH_OUTPUTS`; kbench reads them back as f64, any numeric dtype and shape (flattened in C
//!   order, as kbench's buffers are).
//! - The check command (`check`) judges a case's answer: it finds the inputs, the kernel's
//!   outputs and their references as `.npy` files in the folders `KBENCH_INPUTS`,
//!   `KBENCH_OUTPUTS` and `KBENCH_REFERENCES`, and exits 0 (right) or 1 (wrong, saying why).
//!
//! Both run in the manifest's folder with a time limit. A command that fails, runs too long,
//! or writes a missing or unreadable file is an error saying which, with the end of what it
//! printed on stderr.

use std::fs;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::record::CheckVerdict;
use crate::vocab::HostData;

/// The folder holding the inputs, as the command's environment names it.
pub const INPUTS_ENV: &str = "KBENCH_INPUTS";
/// The folder the command writes its outputs into.
pub const OUTPUTS_ENV: &str = "KBENCH_OUTPUTS";
/// A custom study's case parameters (axis name to value), as one JSON object.
pub const PARAMS_ENV: &str = "KBENCH_PARAMS";
/// The folder holding each output's reference (float64), for the check command.
pub const REFERENCES_ENV: &str = "KBENCH_REFERENCES";
/// The case's variant, as `[[variant]] name` gives it (a check command, a per-variant
/// reference command).
pub const VARIANT_ENV: &str = "KBENCH_VARIANT";
/// The kernel sequence the case's variant runs (`[[custom.kernel]] name`).
pub const KERNEL_ENV: &str = "KBENCH_KERNEL";

/// The most of the command's stderr (or a check's message) kbench quotes: its last lines, up
/// to this many.
const STDERR_TAIL_LINES: usize = 20;
const STDERR_TAIL_CHARS: usize = 2000;

/// How to run the user's command.
#[derive(Debug, Clone, PartialEq)]
pub struct ReferenceCommand {
    /// What it is, for its errors: "reference command" or "check command".
    pub what: &'static str,
    /// The program and its arguments, run without a shell.
    pub argv: Vec<String>,
    /// Where it runs: the manifest's folder, so that its paths read as the manifest's do.
    pub working_dir: PathBuf,
    /// Past this the command (and everything it started) is killed.
    pub time_limit: Duration,
    /// More environment variables for it (a custom study passes the case's axis values).
    pub env: Vec<(String, String)>,
    /// Where the command's outputs are kept for other processes of the run (`[measure]
    /// processes`): a folder whose outputs, once there, are read instead of running the command
    /// again. None: nothing is kept.
    pub shared: Option<PathBuf>,
}

/// An output the command must write: `<name>.npy` holding `len` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedOutput<'a> {
    pub name: &'a str,
    pub len: usize,
}

/// Why the reference command gave no expected outputs.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReferenceError {
    #[error("the reference command is empty: it needs at least a program")]
    EmptyCommand,
    #[error("`{0}` cannot be an array's file name (use letters, digits, `_`, `-` and `.`)")]
    BadName(String),
    #[error("cannot prepare the reference command's files: {0}")]
    Io(String),
    #[error("cannot start the {what} `{command}`: {reason}")]
    Spawn {
        what: &'static str,
        command: String,
        reason: String,
    },
    #[error("the {what} `{command}` failed ({status}){}", quote(stderr_tail))]
    Failed {
        what: &'static str,
        command: String,
        /// `exit code 3` or `killed by signal 9`.
        status: String,
        stderr_tail: String,
    },
    #[error(
        "the {what} `{command}` ran past its time limit of {limit_s} s and was stopped{}",
        quote(stderr_tail)
    )]
    TimedOut {
        what: &'static str,
        command: String,
        limit_s: f64,
        stderr_tail: String,
    },
    #[error(
        "the reference command `{command}` wrote no `{name}.npy` into ${OUTPUTS_ENV} (it wrote {})",
        list_files(written)
    )]
    MissingOutput {
        command: String,
        name: String,
        written: Vec<String>,
    },
    #[error("the reference command's `{name}.npy` {reason}")]
    BadOutput { name: String, reason: String },
}

fn quote(stderr_tail: &str) -> String {
    if stderr_tail.is_empty() {
        "; it printed nothing on stderr".to_string()
    } else {
        format!("; its stderr ends with:\n{stderr_tail}")
    }
}

fn list_files(written: &[String]) -> String {
    if written.is_empty() {
        "nothing".to_string()
    } else {
        let names: Vec<String> = written.iter().map(|n| format!("`{n}`")).collect();
        names.join(", ")
    }
}

/// Runs `command` on `inputs` and returns the values of each of `outputs`, in their order.
/// The temporary folder is removed afterwards, whatever happened.
pub fn run(
    command: &ReferenceCommand,
    inputs: &[(&str, &HostData)],
    outputs: &[ExpectedOutput],
) -> Result<Vec<Vec<f64>>, ReferenceError> {
    if command.argv.is_empty() {
        return Err(ReferenceError::EmptyCommand);
    }
    let names = (inputs.iter().map(|(name, _)| *name)).chain(outputs.iter().map(|o| o.name));
    for name in names {
        check_name(name)?;
    }
    let io = |e: std::io::Error| ReferenceError::Io(e.to_string());
    if let Some(kept) = command.shared.as_deref().filter(|kept| kept.is_dir()) {
        return (outputs.iter())
            .map(|expected| read_output(command, kept, expected))
            .collect();
    }
    let exchanged_bytes = (inputs.iter().map(|(_, d)| d.as_bytes().len() as u64))
        .chain(outputs.iter().map(|o| o.len as u64 * 8))
        .sum();
    // Beside the kept outputs where they are kept, so that they are moved there, not copied.
    let kept_beside = command.shared.as_deref().and_then(Path::parent);
    let folder = command_folder("reference", exchanged_bytes, kept_beside).map_err(io)?;
    let inputs_dir = write_arrays(folder.path(), "inputs", inputs)?;
    let outputs_dir = write_arrays(folder.path(), "outputs", &[])?;
    let folders = [(INPUTS_ENV, &*inputs_dir), (OUTPUTS_ENV, &*outputs_dir)];
    let status = run_to_completion(command, folder.path(), &folders)?;
    if !status.success() {
        return Err(failed(command, status, folder.path()));
    }
    let values = (outputs.iter())
        .map(|expected| read_output(command, &outputs_dir, expected))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(kept) = &command.shared {
        // Another process may have kept the same outputs meanwhile: either copy will do.
        let _ = fs::rename(&outputs_dir, kept);
    }
    Ok(values)
}

/// An array name that makes a plain file name in the folder (no path, no hidden file).
fn check_name(name: &str) -> Result<(), ReferenceError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(allowed) {
        return Err(ReferenceError::BadName(name.to_string()));
    }
    Ok(())
}

/// Runs the check `command` on a case's `inputs`, its `outputs` and their `references`, each
/// written as `<name>.npy` into a folder of its own. Exit 0 says the answer is right and exit
/// 1 that it is wrong, with the end of what it printed (stderr, else stdout); another exit
/// code, a signal or the time limit is an error. The temporary folder is removed afterwards,
/// whatever happened.
pub fn check(
    command: &ReferenceCommand,
    inputs: &[(&str, &HostData)],
    outputs: &[(&str, &HostData)],
    references: &[(&str, &HostData)],
) -> Result<CheckVerdict, ReferenceError> {
    if command.argv.is_empty() {
        return Err(ReferenceError::EmptyCommand);
    }
    let io = |e: std::io::Error| ReferenceError::Io(e.to_string());
    let exchanged_bytes = (inputs.iter().chain(outputs).chain(references))
        .map(|(_, d)| d.as_bytes().len() as u64)
        .sum();
    let folder = command_folder("check", exchanged_bytes, None).map_err(io)?;
    let sets = [
        (INPUTS_ENV, "inputs", inputs),
        (OUTPUTS_ENV, "outputs", outputs),
        (REFERENCES_ENV, "references", references),
    ];
    let mut folders = Vec::new();
    for (env, subfolder, arrays) in sets {
        folders.push((env, write_arrays(folder.path(), subfolder, arrays)?));
    }
    let folders: Vec<(&str, &Path)> = folders.iter().map(|(e, d)| (*e, d.as_path())).collect();
    let status = run_to_completion(command, folder.path(), &folders)?;
    match status.code() {
        Some(0) => Ok(CheckVerdict {
            passed: true,
            message: None,
        }),
        Some(1) => {
            let said = match output_tail(&folder.path().join("stderr.txt")) {
                tail if tail.is_empty() => output_tail(&folder.path().join("stdout.txt")),
                tail => tail,
            };
            let message = match said.is_empty() {
                true => format!(
                    "the check command `{}` exited 1 and printed nothing",
                    command.argv.join(" ")
                ),
                false => said,
            };
            Ok(CheckVerdict {
                passed: false,
                message: Some(message),
            })
        }
        _ => Err(failed(command, status, folder.path())),
    }
}

/// The folders a run's commands exchange their files in: made by the run's own process and
/// removed with it, so that a worker killed in the middle of a command (a case's time limit,
/// Ctrl-C) leaves no inputs behind in the system's folders.
#[derive(Debug)]
pub struct ExchangeFolders {
    memory: Option<tempfile::TempDir>,
    disk: tempfile::TempDir,
}

/// Where the folders of `ExchangeFolders` are, as the workers are told.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ExchangeRoots {
    /// In `/dev/shm`, where there is one.
    pub memory: Option<PathBuf>,
    pub disk: PathBuf,
}

impl ExchangeFolders {
    /// None where no temporary folder can be made: the commands then use the system's.
    pub fn create() -> Option<ExchangeFolders> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("kbench-exchange-");
        let disk = builder.tempdir().ok()?;
        let memory = (Path::new(SHM).is_dir())
            .then(|| builder.tempdir_in(SHM).ok())
            .flatten();
        Some(ExchangeFolders { memory, disk })
    }

    pub fn roots(&self) -> ExchangeRoots {
        ExchangeRoots {
            memory: self.memory.as_ref().map(|d| d.path().to_path_buf()),
            disk: self.disk.path().to_path_buf(),
        }
    }
}

const SHM: &str = "/dev/shm";

/// The file in a command's folder that names its process group.
const PROCESS_GROUP_FILE: &str = "process-group";

/// A fresh folder for one run of a command (`what`: "reference" or "check"), in `parent`
/// where given, else where `exchange_parent` puts `bytes`. Its name, `kbench-reference-<g>-...`,
/// holds the worker's process group `g` (the one its run made for it, which a program the
/// worker runs under shares), so that the run can find the folders of a worker it killed.
fn command_folder(
    what: &str,
    bytes: u64,
    parent: Option<&Path>,
) -> std::io::Result<tempfile::TempDir> {
    // SAFETY: getpgrp cannot fail.
    let group = unsafe { libc::getpgrp() };
    let prefix = format!("kbench-{what}-{group}-");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix);
    match parent {
        Some(parent) => fs::create_dir_all(parent).and_then(|()| builder.tempdir_in(parent)),
        None => builder.tempdir_in(exchange_parent(bytes)),
    }
}

/// Stops the commands a killed worker (process group `worker_group`) left running, with all
/// they started, and removes their folders. A command's own process dies with its worker
/// (PR_SET_PDEATHSIG); what it started is in the command's process group, which only this
/// can stop. The group's number was written while the command ran and the worker was killed
/// moments ago, so it names that group still (a group's number is not reused while any of
/// its processes lives).
pub fn reap_commands_of(roots: &ExchangeRoots, worker_group: u32) {
    let prefixes = ["reference", "check"].map(|what| format!("kbench-{what}-{worker_group}-"));
    let folders = (roots.memory.iter().chain([&roots.disk]))
        .filter_map(|root| fs::read_dir(root).ok())
        .flatten()
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            prefixes.iter().any(|p| name.starts_with(p.as_str()))
        });
    for folder in folders {
        let group = fs::read_to_string(folder.path().join(PROCESS_GROUP_FILE))
            .ok()
            .and_then(|text| text.trim().parse::<libc::pid_t>().ok())
            .filter(|&group| group > 1);
        if let Some(group) = group {
            // SAFETY: a plain syscall on the command's own process group.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = fs::remove_dir_all(folder.path());
    }
}

static EXCHANGE_ROOTS: std::sync::OnceLock<ExchangeRoots> = std::sync::OnceLock::new();

/// This process's commands exchange their files under `roots` (a worker, told by its run).
pub fn exchange_in(roots: ExchangeRoots) {
    let _ = EXCHANGE_ROOTS.set(roots);
}

/// Where a command's files go: memory (`/dev/shm`) where it has room for twice `bytes`, else
/// disk; under the run's folders where it made them. Gigabytes of `.npy` written to a disk and
/// read back cost seconds of writeback a case (SAXPY's 2^28-element inputs and answer: 4 GiB).
fn exchange_parent(bytes: u64) -> PathBuf {
    let (memory, disk) = match EXCHANGE_ROOTS.get() {
        Some(roots) => (roots.memory.clone(), roots.disk.clone()),
        None => (
            Some(PathBuf::from(SHM)).filter(|shm| shm.is_dir()),
            std::env::temp_dir(),
        ),
    };
    let free_bytes = |path: &Path| {
        let path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).ok()?;
        // SAFETY: statvfs writes into the zeroed struct it is given; the path is NUL-terminated.
        let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::statvfs(path.as_ptr(), &mut stats) } == 0;
        ok.then(|| stats.f_bavail as u64 * stats.f_frsize as u64)
    };
    match memory {
        Some(memory) if free_bytes(&memory).is_some_and(|free| free / 2 >= bytes) => memory,
        _ => disk,
    }
}

/// A folder `name` made in `folder`, holding each of `arrays` as `<name>.npy`.
fn write_arrays(
    folder: &Path,
    name: &str,
    arrays: &[(&str, &HostData)],
) -> Result<PathBuf, ReferenceError> {
    let dir = folder.join(name);
    fs::create_dir(&dir).map_err(|e| ReferenceError::Io(e.to_string()))?;
    for (name, data) in arrays {
        check_name(name)?;
        let path = dir.join(format!("{name}.npy"));
        data.write_npy(&path)
            .map_err(|e| ReferenceError::Io(format!("writing {}: {e:#}", path.display())))?;
    }
    Ok(dir)
}

/// The error of a command that exited with `status`, quoting its stderr.
fn failed(command: &ReferenceCommand, status: ExitStatus, folder: &Path) -> ReferenceError {
    ReferenceError::Failed {
        what: command.what,
        command: command.argv.join(" "),
        status: describe_status(status),
        stderr_tail: output_tail(&folder.join("stderr.txt")),
    }
}

/// Runs the command to its end (or its time limit) with each of `folders` named by its
/// environment variable, and stdout and stderr in files in `folder` (files, not pipes, so a
/// chatty command cannot block on a full pipe). How it exited is the caller's to judge.
fn run_to_completion(
    command: &ReferenceCommand,
    folder: &Path,
    folders: &[(&str, &Path)],
) -> Result<ExitStatus, ReferenceError> {
    let shown = command.argv.join(" ");
    let io = |e: std::io::Error| ReferenceError::Io(e.to_string());
    let stderr_path = folder.join("stderr.txt");
    let stdout = fs::File::create(folder.join("stdout.txt")).map_err(io)?;
    let stderr = fs::File::create(&stderr_path).map_err(io)?;
    let mut program = Command::new(&command.argv[0]);
    program
        .args(&command.argv[1..])
        .current_dir(&command.working_dir)
        .envs(folders.iter().map(|(k, v)| (k, v)))
        .envs(command.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        // Its own process group, so that a time-out stops what it started too (a shell's
        // children, a Python's subprocesses).
        .process_group(0);
    // Killed with the worker (a case's time limit, Ctrl-C): the death signal comes when the
    // thread that started it ends, and this one waits for it below.
    // SAFETY: the closure runs in the forked child before exec and calls only prctl
    // (async-signal-safe); it allocates nothing.
    unsafe {
        program.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = program.spawn().map_err(|e| ReferenceError::Spawn {
        what: command.what,
        command: shown.clone(),
        reason: format!("{e} (run in {})", command.working_dir.display()),
    })?;
    // For the run's process to stop what the command started, should this worker be killed
    // (`reap_commands_of`).
    let _ = fs::write(folder.join(PROCESS_GROUP_FILE), child.id().to_string());
    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        if let Some(status) = child.try_wait().map_err(io)? {
            return Ok(status);
        }
        if started.elapsed() >= command.time_limit {
            // SAFETY: kill(2) on the process group this function created; the child is not
            // reaped yet, so the group's id cannot have been reused.
            unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
            let _ = child.wait();
            return Err(ReferenceError::TimedOut {
                what: command.what,
                command: shown,
                limit_s: command.time_limit.as_secs_f64(),
                stderr_tail: output_tail(&stderr_path),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// The last lines of the file at `path` (empty if it cannot be read), read from its last
/// 64 KiB alone: a command may print gigabytes.
fn output_tail(path: &Path) -> String {
    use std::io::{Seek, SeekFrom};
    const READ_BYTES: u64 = 64 << 10;
    let mut bytes = Vec::new();
    let read = fs::File::open(path).and_then(|mut f| {
        let length = f.metadata()?.len();
        f.seek(SeekFrom::Start(length.saturating_sub(READ_BYTES)))?;
        f.take(READ_BYTES).read_to_end(&mut bytes)
    });
    if read.is_err() {
        return String::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let tail = lines[lines.len().saturating_sub(STDERR_TAIL_LINES)..].join("\n");
    let skip = tail.chars().count().saturating_sub(STDERR_TAIL_CHARS);
    tail.chars().skip(skip).collect()
}

/// Reads `<name>.npy` from the outputs folder and checks its length.
fn read_output(
    command: &ReferenceCommand,
    outputs_dir: &Path,
    expected: &ExpectedOutput,
) -> Result<Vec<f64>, ReferenceError> {
    let path = outputs_dir.join(format!("{}.npy", expected.name));
    if !path.exists() {
        let mut written: Vec<String> = fs::read_dir(outputs_dir)
            .map(|entries| {
                (entries.flatten())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        written.sort();
        return Err(ReferenceError::MissingOutput {
            command: command.argv.join(" "),
            name: expected.name.to_string(),
            written,
        });
    }
    let bad = |reason: String| ReferenceError::BadOutput {
        name: expected.name.to_string(),
        reason,
    };
    // The data (8 bytes at most an element) and a header of a few KiB: anything longer is not
    // this output.
    let max_bytes = (expected.len as u64)
        .saturating_mul(8)
        .saturating_add(1 << 20);
    let values = crate::npy::read_f64(&path, max_bytes).map_err(bad)?;
    if values.len() != expected.len {
        return Err(bad(format!(
            "holds {} values; the output has {}",
            values.len(),
            expected.len
        )));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(script: &str, dir: &Path, limit_ms: u64) -> ReferenceCommand {
        ReferenceCommand {
            what: "reference command",
            argv: vec!["sh".into(), "-c".into(), script.into()],
            working_dir: dir.to_path_buf(),
            time_limit: Duration::from_millis(limit_ms),
            env: Vec::new(),
            shared: None,
        }
    }

    fn x() -> HostData {
        HostData::F32(vec![1.0, 2.5, -3.0, 4.0])
    }

    #[test]
    fn an_input_copied_to_an_output_reads_back_as_f64() {
        let dir = tempfile::tempdir().unwrap();
        let copy = command(
            r#"cp "$KBENCH_INPUTS/x.npy" "$KBENCH_OUTPUTS/y.npy" && cp "$KBENCH_INPUTS/n.npy" "$KBENCH_OUTPUTS/m.npy""#,
            dir.path(),
            10_000,
        );
        let n = HostData::I32(vec![7, -8]);
        let outputs = [
            ExpectedOutput { name: "y", len: 4 },
            ExpectedOutput { name: "m", len: 2 },
        ];
        let got = run(&copy, &[("x", &x()), ("n", &n)], &outputs).unwrap();
        assert_eq!(got, [vec![1.0, 2.5, -3.0, 4.0], vec![7.0, -8.0]]);
    }

    #[test]
    fn the_command_runs_in_the_manifests_folder() {
        let dir = tempfile::tempdir().unwrap();
        HostData::F64(vec![0.5; 3])
            .write_npy(&dir.path().join("expected.npy"))
            .unwrap();
        let copy = command(
            r#"cp expected.npy "$KBENCH_OUTPUTS/y.npy""#,
            dir.path(),
            10_000,
        );
        let got = run(&copy, &[], &[ExpectedOutput { name: "y", len: 3 }]).unwrap();
        assert_eq!(got, [vec![0.5; 3]]);
    }

    #[test]
    fn a_failing_command_is_reported_with_its_exit_code_and_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let fail = command(
            "echo working; echo 'boom: no such array' >&2; exit 3",
            dir.path(),
            10_000,
        );
        let err = run(
            &fail,
            &[("x", &x())],
            &[ExpectedOutput { name: "y", len: 4 }],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the reference command `sh -c echo working; echo 'boom: no such array' >&2; exit 3` \
             failed (exit code 3); its stderr ends with:\nboom: no such array"
        );
        let silent = command("kill -9 $$", dir.path(), 10_000);
        let err = run(&silent, &[], &[]).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("failed (killed by signal 9); it printed nothing on stderr"),
            "{err}"
        );
    }

    #[test]
    fn a_command_past_its_time_limit_is_stopped_with_what_it_started() {
        let dir = tempfile::tempdir().unwrap();
        let slow = command("echo thinking >&2; sleep 30; echo done", dir.path(), 300);
        let started = Instant::now();
        let err = run(&slow, &[], &[ExpectedOutput { name: "y", len: 1 }]).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(
            err,
            ReferenceError::TimedOut {
                what: "reference command",
                command: "sh -c echo thinking >&2; sleep 30; echo done".into(),
                limit_s: 0.3,
                stderr_tail: "thinking".into()
            }
        );
        assert!(err.to_string().contains("ran past its time limit of 0.3 s"));
    }

    #[test]
    fn a_missing_or_unreadable_or_short_output_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let expected = [ExpectedOutput { name: "y", len: 4 }];
        let nothing = command(r#"echo hi > "$KBENCH_OUTPUTS/Y.txt""#, dir.path(), 10_000);
        assert_eq!(
            run(&nothing, &[("x", &x())], &expected)
                .unwrap_err()
                .to_string(),
            "the reference command `sh -c echo hi > \"$KBENCH_OUTPUTS/Y.txt\"` wrote no `y.npy` \
             into $KBENCH_OUTPUTS (it wrote `Y.txt`)"
        );
        let garbage = command(
            r#"echo nonsense > "$KBENCH_OUTPUTS/y.npy""#,
            dir.path(),
            10_000,
        );
        let err = run(&garbage, &[("x", &x())], &expected).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the reference command's `y.npy` is not a .npy file"),
            "{err}"
        );
        let short = [ExpectedOutput { name: "y", len: 5 }];
        let copy = command(
            r#"cp "$KBENCH_INPUTS/x.npy" "$KBENCH_OUTPUTS/y.npy""#,
            dir.path(),
            10_000,
        );
        assert_eq!(
            run(&copy, &[("x", &x())], &short).unwrap_err().to_string(),
            "the reference command's `y.npy` holds 4 values; the output has 5"
        );
    }

    #[test]
    fn bad_commands_and_names_are_refused_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        let mut empty = command("", dir.path(), 1000);
        empty.argv.clear();
        assert_eq!(run(&empty, &[], &[]), Err(ReferenceError::EmptyCommand));
        let copy = command("true", dir.path(), 1000);
        assert_eq!(
            run(&copy, &[("../x", &x())], &[]),
            Err(ReferenceError::BadName("../x".into()))
        );
        let missing = ReferenceCommand {
            argv: vec!["kbench-no-such-program".into()],
            ..copy
        };
        let err = run(&missing, &[], &[]).unwrap_err().to_string();
        assert!(
            err.starts_with("cannot start the reference command `kbench-no-such-program`"),
            "{err}"
        );
    }

    #[test]
    fn a_command_that_prints_without_end_is_quoted_by_its_last_lines_alone() {
        let dir = tempfile::tempdir().unwrap();
        // 64 MiB on stderr, then the line that says why.
        let chatty = command(
            "head -c 67108864 /dev/zero | tr '\\0' 'x' >&2; echo >&2; echo 'the real reason' >&2; exit 4",
            dir.path(),
            60_000,
        );
        let err = run(&chatty, &[], &[]).unwrap_err().to_string();
        assert!(
            err.ends_with("x\nthe real reason"),
            "{}",
            &err[err.len().saturating_sub(200)..]
        );
        assert!(err.len() < 3 * STDERR_TAIL_CHARS, "{} bytes", err.len());
    }

    #[test]
    fn a_check_command_reads_inputs_outputs_and_references_and_exits_0_or_1() {
        let dir = tempfile::tempdir().unwrap();
        // Right when the output file equals the reference file, byte for byte; wrong
        // otherwise, saying so on stdout (stderr is empty).
        let same = command(
            r#"test -f "$KBENCH_INPUTS/x.npy" && cmp -s "$KBENCH_OUTPUTS/y.npy" "$KBENCH_REFERENCES/y.npy" || { echo "y differs"; exit 1; }"#,
            dir.path(),
            10_000,
        );
        let y = HostData::F64(vec![2.0, 5.0, -6.0]);
        let other = HostData::F64(vec![2.0, 5.0, -6.5]);
        let judge =
            |output: &HostData| check(&same, &[("x", &x())], &[("y", output)], &[("y", &y)]);
        let wrong = |message: &str| CheckVerdict {
            passed: false,
            message: Some(message.into()),
        };
        let right = CheckVerdict {
            passed: true,
            message: None,
        };
        assert_eq!(judge(&y), Ok(right));
        assert_eq!(judge(&other), Ok(wrong("y differs")));
        // Exit 2 (or a crash) is no verdict: the case is an error, not a wrong answer.
        let broken = ReferenceCommand {
            what: "check command",
            ..command(
                "echo 'no module named numpy' >&2; exit 2",
                dir.path(),
                10_000,
            )
        };
        let err = check(&broken, &[], &[], &[]).unwrap_err().to_string();
        assert!(
            err.starts_with("the check command `sh -c echo")
                && err.contains("failed (exit code 2)")
                && err.ends_with("no module named numpy"),
            "{err}"
        );
        let silent = command("exit 1", dir.path(), 10_000);
        assert_eq!(
            check(&silent, &[], &[], &[]),
            Ok(wrong(
                "the check command `sh -c exit 1` exited 1 and printed nothing"
            ))
        );
    }
}
