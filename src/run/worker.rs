//! Case isolation: a study's cases run in a child process, `kbench worker` (hidden), one at a
//! time. The parent can then kill a run that never returns once it is well past the case's time
//! limit, and a kernel fault, which leaves the CUDA context unusable for the rest of its process,
//! costs only its own case: the next case starts a new worker with a fresh context.
//!
//! The protocol is JSON, one document per line. The parent writes the study (`StudyJob`, what its cases read of the manifest) and
//! then one `Case` per line to the worker's stdin; for each case the worker answers with the
//! stages it reaches (`Measuring`: its time limit starts; `Measured`) and then `Finished` with the
//! result, on the stdout it was started with, which it keeps for these answers alone. Its stderr
//! is passed through, and its last lines go into the reason when it dies. The worker runs in its
//! own process group, so Ctrl-C reaches only the parent, which kills it; and it dies with the
//! parent (`PR_SET_PDEATHSIG`), so a hung kernel cannot outlive a killed kbench.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::device::KernelSource;
use crate::measure::Deadline;
use crate::plan::Case;
use crate::record::{CaseResult, DeviceFingerprint, MeasureSettings};
use crate::run::case::{self, CaseSettings, CaseStage, SaveOutputs, WorkerStudy};
use crate::run::executor::mock::MockSpec;
use crate::run::executor::GpuState;

/// What a worker needs to run any case of one study.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StudyJob {
    /// What the cases read of the manifest.
    pub study: WorkerStudy,
    /// The measure settings with the command line's overrides applied.
    pub settings: MeasureSettings,
    pub save_outputs: Option<SaveOutputs>,
    /// Where `--save-outputs` puts its files: beside this results file.
    pub results_path: PathBuf,
    pub kernels_dir: Option<PathBuf>,
    /// A fault for the tests to inject (see `InjectedFault`).
    pub fault: Option<String>,
    /// The mock device CUDA cases run on instead of a GPU (KBENCH_MOCK_GPU).
    #[serde(default)]
    pub mock_gpu: Option<MockSpec>,
    /// Where the run's workers share their compiles and each GPU's peaks (see
    /// `nvrtc::share_compiles_in`, `peaks::share_peaks_in`).
    #[serde(default)]
    pub shared_compiles: Option<PathBuf>,
    /// Where its commands exchange their files (`reference_command::exchange_in`).
    #[serde(default)]
    pub exchange: Option<crate::reference_command::ExchangeRoots>,
}

/// A finished case, with what the worker learned about the GPU on the way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    pub result: CaseResult,
    pub device: Option<DeviceFingerprint>,
    /// Why CUDA cases cannot run here (no driver, no NVRTC, no device).
    pub gpu_unavailable: Option<String>,
    /// The case faulted and left the CUDA context unusable: this worker must not run another.
    pub gpu_broken: bool,
}

#[derive(Debug, Serialize, Deserialize)]
enum WorkerMessage {
    Reached(CaseStage),
    Finished(Box<WorkerReport>),
}

/// How one case ended, seen from the parent.
pub enum WorkerOutcome {
    Finished(Box<WorkerReport>),
    /// Ctrl-C or SIGTERM: the worker was killed and the case abandoned.
    Interrupted,
    /// Still running well past its time limit: the worker was killed. The reason says so.
    TimedOut(String),
    /// The worker did not get the case going (opening the GPU hung): it was killed.
    SetupHung(String),
    /// The worker exited, crashed or sent nonsense: the reason says how.
    Died(String),
}

/// How long a worker may take by default to get a case going (opening the GPU) before it counts
/// as hung.
pub const SETUP_LIMIT_S: f64 = 120.0;

/// How long past its time limit a case may go on measuring before its worker is killed. The
/// worker stops a case at the limit itself, before the next run, so this only catches a single
/// run (or the data's preparation) that overruns by this much.
fn kill_grace_s(timeout_s: f64) -> f64 {
    (timeout_s / 4.0).max(10.0)
}

/// How often the parent looks at the interrupt flag while a case runs.
const POLL: Duration = Duration::from_millis(50);

/// How long a worker past its deadline still has to answer before it is killed.
const LAST_CALL: Duration = Duration::from_secs(1);

/// Lines of the worker's stderr kept for the reason, should it die, and their kept length.
const STDERR_LINES_KEPT: usize = 12;
const STDERR_LINE_CHARS_KEPT: usize = 500;

/// The parent's handle on a running worker.
pub struct Worker {
    child: Child,
    /// Lines for the worker's stdin, written by a thread of its own (`stdin_writer`).
    stdin: Option<mpsc::Sender<Vec<u8>>>,
    /// Each line the worker writes on stdout, parsed; the channel closes when stdout does.
    messages: Receiver<Result<WorkerMessage, String>>,
    /// The last lines of the worker's stderr since its current case began.
    stderr_tail: Arc<Mutex<VecDeque<String>>>,
    stderr_thread: Option<JoinHandle<()>>,
    /// Where its reference and check commands keep their files: once it is killed, what its
    /// commands started is stopped there (`reference_command::reap_commands_of`).
    exchange: Option<crate::reference_command::ExchangeRoots>,
}

impl Worker {
    /// Starts `exe worker` and sends it the study; `visible_device` (a CUDA_VISIBLE_DEVICES
    /// value) gives it one GPU of several.
    pub fn spawn(exe: &Path, job: &StudyJob, visible_device: Option<&str>) -> Result<Worker> {
        Worker::spawn_wrapped(&[], exe, job, visible_device)
    }

    /// As `spawn`, with the worker started by `wrapper` (a program and its arguments, then the
    /// worker's command line): `compute-sanitizer ... kbench worker` for `run --sanitize`.
    pub fn spawn_wrapped(
        wrapper: &[std::ffi::OsString],
        exe: &Path,
        job: &StudyJob,
        visible_device: Option<&str>,
    ) -> Result<Worker> {
        let mut command = match wrapper.split_first() {
            None => {
                let mut command = Command::new(exe);
                name_kbench(&mut command);
                command
            }
            Some((program, arguments)) => {
                let mut command = Command::new(program);
                command.args(arguments).arg(exe);
                // Under the sanitizer, its tools interface is its own: CUPTI's profiler would
                // only fail to attach.
                command.env("KBENCH_CUPTI_PROFILER", "off");
                command
            }
        };
        // CUDA numbers the GPUs fastest first unless told otherwise; by PCI bus id, its numbers
        // (and the physical ordinals recorded) are `nvidia-smi`'s. A user's own order is kept.
        if std::env::var_os(crate::device::DEVICE_ORDER_ENV).is_none() {
            command.env(crate::device::DEVICE_ORDER_ENV, "PCI_BUS_ID");
        }
        if let Some(device) = visible_device {
            command.env("CUDA_VISIBLE_DEVICES", device);
        }
        command
            .arg("worker")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        isolate(&mut command);
        let mut child = command.spawn().with_context(|| {
            let words: Vec<String> = (wrapper.iter())
                .map(|word| word.to_string_lossy().into_owned())
                .chain([exe.display().to_string(), "worker".into()])
                .collect();
            format!("cannot start the worker process `{}`", words.join(" "))
        })?;

        let stdout = child.stdout.take().expect("stdout is piped");
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let message = serde_json::from_str(&line).map_err(|_| line);
                if sender.send(message).is_err() {
                    break;
                }
            }
        });

        // Passed through as it comes (a pipe left unread would stall the worker), and kept.
        let stderr = child.stderr.take().expect("stderr is piped");
        let stderr_tail = Arc::new(Mutex::new(VecDeque::new()));
        let tail = stderr_tail.clone();
        let stderr_thread = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(io::stderr().lock(), "{line}");
                let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                if tail.len() == STDERR_LINES_KEPT {
                    tail.pop_front();
                }
                tail.push_back(line.chars().take(STDERR_LINE_CHARS_KEPT).collect());
            }
        });

        let mut worker = Worker {
            stdin: child.stdin.take().map(stdin_writer),
            child,
            messages,
            stderr_tail,
            stderr_thread: Some(stderr_thread),
            exchange: job.exchange.clone(),
        };
        worker
            .send(job)
            .context("cannot send the study to the worker process")?;
        Ok(worker)
    }

    /// Runs `case` in the worker and waits for it, killing the worker when the case is interrupted,
    /// does not get going, or measures well past `timeout_s`.
    pub fn run_case(
        &mut self,
        case: &Case,
        timeout_s: f64,
        setup_limit_s: f64,
        interrupted: &AtomicBool,
    ) -> WorkerOutcome {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        if let Err(e) = self.send(case) {
            return WorkerOutcome::Died(
                self.death_reason(&format!("could not take the case ({e})")),
            );
        }
        let mut stage = None;
        let mut kill_at = Some(Deadline::after(setup_limit_s));
        // Past the deadline, the worker gets one last call before it is killed: an answer may
        // still be in the pipe, not yet read, if kbench itself was stopped (Ctrl-Z) meanwhile.
        let mut last_call = false;
        loop {
            if interrupted.load(Ordering::Relaxed) {
                self.kill();
                return WorkerOutcome::Interrupted;
            }
            let wait = match kill_at {
                _ if last_call => LAST_CALL,
                Some(deadline) => POLL.min(deadline.remaining()),
                None => POLL,
            };
            match self.messages.recv_timeout(wait) {
                Ok(Ok(WorkerMessage::Reached(reached))) => {
                    last_call = false;
                    kill_at = match reached {
                        CaseStage::Measuring => {
                            Some(Deadline::after(timeout_s + kill_grace_s(timeout_s)))
                        }
                        // Only checking the answer and saving it remain.
                        CaseStage::Measured => None,
                    };
                    stage = Some(reached);
                }
                Ok(Ok(WorkerMessage::Finished(report))) => return WorkerOutcome::Finished(report),
                Ok(Err(line)) => {
                    self.kill();
                    let line: String = line.chars().take(200).collect();
                    return WorkerOutcome::Died(format!(
                        "kbench bug: the worker process wrote something that is not a message, and was killed: {line}"
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return WorkerOutcome::Died(self.death_reason("died while running the case"))
                }
                Err(RecvTimeoutError::Timeout) if last_call => {
                    self.kill();
                    return match stage {
                        None => WorkerOutcome::SetupHung(format!(
                            "the worker process did not get the case going within {setup_limit_s} s (opening the GPU hung?) and was killed"
                        )),
                        Some(_) => WorkerOutcome::TimedOut(format!(
                            "still running {:.0} s past the case's time limit of {timeout_s} s (a run, or the data's preparation, did not return): its worker process was killed, and the samples it had taken with it",
                            kill_grace_s(timeout_s)
                        )),
                    };
                }
                Err(RecvTimeoutError::Timeout) => {
                    last_call = kill_at.is_some_and(|deadline| deadline.passed());
                }
            }
        }
    }

    fn send<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        let stdin = self
            .stdin
            .as_ref()
            .ok_or_else(|| io::Error::other("its stdin is closed"))?;
        let mut line = serde_json::to_vec(value)?;
        line.push(b'\n');
        stdin
            .send(line)
            .map_err(|_| io::Error::other("its stdin is closed"))
    }

    /// Closes the worker's stdin, which ends it, and waits for it (killing it after a while):
    /// a program it runs under (the sanitizer) writes its report as it exits.
    pub fn finish(mut self) {
        self.stdin = None;
        self.wait_or_kill(Duration::from_secs(60));
    }

    /// Kills the worker's whole process group, so nothing it started keeps its pipes open, and
    /// the commands it was running, which have groups of their own.
    fn kill(&mut self) {
        #[cfg(unix)]
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: a plain syscall; the group is the worker's own (see `isolate`).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(roots) = &self.exchange {
            crate::reference_command::reap_commands_of(roots, self.child.id());
        }
    }

    /// Waits for the worker to end (killing it if it will not) and says how it ended, with the
    /// last lines it wrote on stderr.
    fn death_reason(&mut self, what: &str) -> String {
        let ended = match self.wait_or_kill(Duration::from_secs(5)) {
            Some(status) => describe_exit(status),
            None => "it did not exit, so kbench killed it".into(),
        };
        if let Some(thread) = self.stderr_thread.take() {
            let _ = thread.join();
        }
        let tail = self.stderr_tail.lock().unwrap_or_else(|e| e.into_inner());
        let mut reason = format!("the worker process {what}: {ended}");
        if !tail.is_empty() {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            reason.push_str("; its last words: ");
            reason.push_str(&lines.join(" | "));
        }
        reason
    }

    /// The worker's exit status if it ends within `patience`; otherwise it is killed and None.
    fn wait_or_kill(&mut self, patience: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + patience;
        while Instant::now() < until {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        self.kill();
        None
    }
}

/// Writes each line sent to the worker's stdin, on a thread of its own, and closes it once the
/// sender is dropped: a worker, or the program it runs under (the sanitizer), that reads nothing
/// fills the pipe, and a write to a full pipe waits for ever; kbench's deadlines must still
/// tick. A write fails once the worker is killed, which ends the thread.
fn stdin_writer(mut stdin: ChildStdin) -> mpsc::Sender<Vec<u8>> {
    let (sender, lines) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for line in lines {
            if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
                break;
            }
        }
    });
    sender
}

impl Drop for Worker {
    /// Closing its stdin tells the worker to exit; one that does not is killed. A worker that
    /// died by itself (a crash) may have left a command's children running too.
    fn drop(&mut self) {
        self.stdin = None;
        self.wait_or_kill(Duration::from_secs(5));
        if let Some(roots) = &self.exchange {
            crate::reference_command::reap_commands_of(roots, self.child.id());
        }
    }
}

/// The worker shows as `kbench` in `ps`, whatever the executable's file is called.
#[cfg(unix)]
fn name_kbench(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.arg0("kbench");
}

#[cfg(not(unix))]
fn name_kbench(_command: &mut Command) {}

/// Puts the worker in its own process group, so a terminal's Ctrl-C (and Ctrl-Z) goes to the
/// parent alone, and has the kernel kill it when the parent dies.
#[cfg(target_os = "linux")]
fn isolate(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec, calls only prctl and getppid
    // (async-signal-safe) and allocates nothing.
    // The death signal comes when the *thread* that spawned the worker ends, not the process:
    // spawn workers from a thread that outlives them (run_study's caller does).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before the line above took effect.
            if libc::getppid() != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
fn isolate(command: &mut Command) {
    use std::os::unix::process::CommandExt;
    command.process_group(0);
}

#[cfg(not(unix))]
fn isolate(_command: &mut Command) {}

fn describe_exit(status: ExitStatus) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            let name = match signal {
                libc::SIGKILL => "SIGKILL: out of memory, or killed by someone",
                libc::SIGSEGV => "SIGSEGV: invalid memory access",
                libc::SIGABRT => "SIGABRT: aborted",
                libc::SIGBUS => "SIGBUS: bad memory access",
                libc::SIGILL => "SIGILL: illegal instruction",
                libc::SIGFPE => "SIGFPE: arithmetic error",
                libc::SIGTERM => "SIGTERM",
                _ => "",
            };
            return if name.is_empty() {
                format!("killed by signal {signal}")
            } else {
                format!("killed by signal {signal} ({name})")
            };
        }
    }
    match status.code() {
        Some(code) => format!("exit status {code}"),
        None => status.to_string(),
    }
}

/// `kbench worker`: reads the study and then cases from stdin, runs each, and answers on the
/// stdout it was started with. Returns when stdin closes.
pub fn worker_main() -> Result<()> {
    let mut answers = answers_channel().context("cannot set up the worker's stdout")?;
    let mut lines = io::stdin().lock().lines();
    let job: StudyJob = match lines.next() {
        Some(line) => serde_json::from_str(&line?).context("the study sent to the worker")?,
        None => return Ok(()),
    };
    if let Some(dir) = &job.shared_compiles {
        crate::device::nvrtc::share_compiles_in(dir.clone());
        crate::device::peaks::share_peaks_in(dir.clone());
    }
    if let Some(roots) = &job.exchange {
        crate::reference_command::exchange_in(roots.clone());
    }
    let mut gpu = GpuState::new(
        KernelSource {
            dir: job.kernels_dir.clone(),
        },
        job.mock_gpu.clone(),
    );
    let fault = job.fault.as_deref().map(InjectedFault::parse).transpose()?;
    for line in lines {
        let case: Case = serde_json::from_str(&line?).context("a case sent to the worker")?;
        if let Some(fault) = &fault {
            fault.strike(case.index, None);
        }
        let mut sent = Ok(());
        let mut on_stage = |stage: CaseStage| {
            if sent.is_ok() {
                sent = send_message(&mut answers, &WorkerMessage::Reached(stage));
            }
            if let Some(fault) = &fault {
                fault.strike(case.index, Some(stage));
            }
        };
        let settings = CaseSettings {
            measure: &job.settings,
            save_outputs: job.save_outputs,
            results_path: &job.results_path,
        };
        let result = case::run_case(&job.study, &case, &mut gpu, &settings, &mut on_stage);
        sent?;
        let gpu_report = gpu.report(result.status);
        let gpu_broken = gpu_report.broken;
        send_message(
            &mut answers,
            &WorkerMessage::Finished(Box::new(WorkerReport {
                result,
                device: gpu_report.device,
                gpu_unavailable: gpu_report.unavailable,
                gpu_broken,
            })),
        )?;
        if gpu_broken {
            break;
        }
    }
    Ok(())
}

fn send_message(answers: &mut std::fs::File, message: &WorkerMessage) -> io::Result<()> {
    let mut line = serde_json::to_vec(message)?;
    line.push(b'\n');
    answers.write_all(&line)
}

/// The stdout the worker was started with, for its answers alone: file descriptor 1 is pointed at
/// stderr, so a stray print from a library (the CUDA driver's included) cannot garble them.
#[cfg(unix)]
fn answers_channel() -> io::Result<std::fs::File> {
    use std::os::fd::{FromRawFd, OwnedFd};
    io::stdout().flush()?;
    // SAFETY: fcntl and dup2 on the process's own standard descriptors; the duplicate is owned
    // by the returned File alone.
    unsafe {
        let answers = libc::fcntl(libc::STDOUT_FILENO, libc::F_DUPFD_CLOEXEC, 3);
        if answers < 0 || libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(std::fs::File::from(OwnedFd::from_raw_fd(answers)))
    }
}

#[cfg(not(unix))]
fn answers_channel() -> io::Result<std::fs::File> {
    Err(io::Error::other("kbench workers need a Unix system"))
}

/// A fault for the tests to inject into a worker, `<kind>:<case index>` (`kbench run` takes it from
/// KBENCH_WORKER_FAULT). `stall` hangs before the case gets going, as a GPU that will not open;
/// `hang`, `abort` and `print` strike once the case's time limit has started: a kernel that never
/// returns, a crash, and a stray line on stdout from a chatty library.
struct InjectedFault {
    kind: FaultKind,
    case_index: usize,
}

enum FaultKind {
    Stall,
    Hang,
    Abort,
    Print,
}

impl InjectedFault {
    fn parse(spec: &str) -> Result<InjectedFault> {
        let parsed = spec.split_once(':').and_then(|(kind, index)| {
            Some(InjectedFault {
                kind: match kind {
                    "stall" => FaultKind::Stall,
                    "hang" => FaultKind::Hang,
                    "abort" => FaultKind::Abort,
                    "print" => FaultKind::Print,
                    _ => return None,
                },
                case_index: index.parse().ok()?,
            })
        });
        parsed.ok_or_else(|| {
            anyhow::anyhow!(
                "the injected fault is `{spec}`; expected stall, hang, abort or print, a colon, and a case index"
            )
        })
    }

    /// Strikes if this is the fault's case and moment: `stage` None is the case's start.
    fn strike(&self, case_index: usize, stage: Option<CaseStage>) {
        let moment = match self.kind {
            FaultKind::Stall => None,
            _ => Some(CaseStage::Measuring),
        };
        if case_index != self.case_index || stage != moment {
            return;
        }
        match self.kind {
            FaultKind::Stall | FaultKind::Hang => {
                eprintln!(
                    "kbench worker: hanging in case {case_index}, as the injected fault asks"
                );
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            FaultKind::Abort => {
                #[cfg(unix)]
                {
                    // A test's crash leaves no core file behind.
                    let none = libc::rlimit {
                        rlim_cur: 0,
                        rlim_max: 0,
                    };
                    // SAFETY: a plain syscall on a valid struct.
                    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &none) };
                }
                std::process::abort()
            }
            FaultKind::Print => println!("a stray line on stdout"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_crosses_from_the_worker_bit_for_bit() {
        let text = "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [3]\n\
                    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";
        let manifest = crate::manifest::parse(Path::new("t.toml"), text).unwrap();
        let case = &crate::plan::expand(&manifest).unwrap()[0];
        let mut result = case::new_result(&manifest, case);
        let samples_s = vec![1.0593499054713601e-9, 0.1 + 0.2, 7.0e-7 / 3.0];
        result.summary = Some(crate::stats::summarize(&samples_s));
        result.outputs = vec![crate::record::OutputCheck {
            name: "sum".into(),
            length: 2,
            accuracy: crate::verify::compare(
                &[f64::NAN, 1.0 / 3.0],
                &[1.0, 2.0 / 3.0],
                crate::vocab::Tolerance::EXACT,
            ),
        }];
        let message = WorkerMessage::Finished(Box::new(WorkerReport {
            result,
            device: None,
            gpu_unavailable: None,
            gpu_broken: false,
        }));
        let sent = serde_json::to_string(&message).unwrap();
        let received: WorkerMessage = serde_json::from_str(&sent).unwrap();
        assert_eq!(serde_json::to_string(&received).unwrap(), sent);
    }

    /// A program that starts no worker and reads nothing (a sanitizer that hangs before it
    /// runs the worker), sent a study bigger than a pipe holds: the case still gives up at its
    /// setup limit (writing the study into the full pipe waited for ever).
    #[test]
    fn a_worker_that_reads_nothing_is_given_up_at_the_setup_limit() {
        let text = "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [3]\n\
                    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";
        let manifest = crate::manifest::parse(Path::new("t.toml"), text).unwrap();
        let case = crate::plan::expand(&manifest).unwrap().remove(0);
        let job = StudyJob {
            study: case::WorkerStudy::of(&manifest),
            settings: manifest.measure.clone(),
            save_outputs: None,
            results_path: PathBuf::from("unused.json"),
            kernels_dir: None,
            // Four pipes' worth.
            fault: Some("x".repeat(256 << 10)),
            mock_gpu: None,
            shared_compiles: None,
            exchange: None,
        };
        let (done, outcome) = mpsc::channel();
        std::thread::spawn(move || {
            let wrapper = ["sh", "-c", "sleep 60", "sh"].map(std::ffi::OsString::from);
            let outcome = Worker::spawn_wrapped(&wrapper, Path::new("kbench"), &job, None).map(
                |mut worker| {
                    worker.run_case(&case, 1.0, 0.5, &std::sync::atomic::AtomicBool::new(false))
                },
            );
            let _ = done.send(outcome.map(|o| matches!(o, WorkerOutcome::SetupHung(_))));
        });
        let given_up = outcome.recv_timeout(Duration::from_secs(30));
        assert!(
            matches!(given_up, Ok(Ok(true))),
            "not given up at the setup limit: {given_up:?}"
        );
    }

    #[test]
    fn a_long_time_limit_gets_a_proportional_grace() {
        assert_eq!(kill_grace_s(1.0), 10.0);
        assert_eq!(kill_grace_s(120.0), 30.0);
    }

    #[cfg(unix)]
    #[test]
    fn exit_statuses_are_described_with_the_signal() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            describe_exit(ExitStatus::from_raw(libc::SIGKILL)),
            "killed by signal 9 (SIGKILL: out of memory, or killed by someone)"
        );
        assert_eq!(describe_exit(ExitStatus::from_raw(3 << 8)), "exit status 3");
    }
}
