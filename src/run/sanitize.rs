//! `kbench run --sanitize[=TOOL]`: each CUDA case, once measured, runs once more under NVIDIA's
//! compute-sanitizer (memcheck by default; racecheck, initcheck or synccheck on request), in a
//! worker of its own, outside the timing. A case the sanitizer reports errors for fails with the
//! first of them and the path of the whole report; a clean one records that it was checked.
//!
//! Why a second run rather than the timed one under the sanitizer: the sanitizer slows kernels by
//! 10-100x and serialises them, so times taken under it mean nothing. The guard zones of custom
//! studies (`device::guard`) catch small overruns the sanitizer cannot see (they fall inside the
//! zone's own allocation); the sanitizer catches what the zones cannot: reads out of bounds,
//! writes far past a buffer, races on shared memory, uninitialised reads.
//!
//! The sanitizer's own output goes to a log file (`--log-file`), never to the worker's stdout,
//! which carries the worker protocol.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::plan::Case;
use crate::record::{CaseResult, CaseStatus, MeasureSettings, SanitizerCheck};
use crate::run::worker::{StudyJob, Worker, WorkerOutcome};

/// Where to find compute-sanitizer when it is not on PATH (a test points this at a fake).
pub const SANITIZER_ENV: &str = "KBENCH_COMPUTE_SANITIZER";

/// How many of the sanitizer's error lines go into a failed case's reason.
const ERROR_LINES_KEPT: usize = 8;

/// How much longer than the manifest's time limit a case may take under the sanitizer.
const SLOWDOWN_ALLOWED: f64 = 10.0;

/// compute-sanitizer's tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SanitizerTool {
    /// Out-of-bounds and misaligned accesses, leaks, API errors.
    Memcheck,
    /// Shared-memory data races.
    Racecheck,
    /// Reads of device memory never written.
    Initcheck,
    /// Invalid uses of __syncthreads and warp synchronisation.
    Synccheck,
}

impl SanitizerTool {
    pub fn name(self) -> &'static str {
        match self {
            SanitizerTool::Memcheck => "memcheck",
            SanitizerTool::Racecheck => "racecheck",
            SanitizerTool::Initcheck => "initcheck",
            SanitizerTool::Synccheck => "synccheck",
        }
    }
}

/// A found compute-sanitizer and the tool to run.
#[derive(Debug, Clone)]
pub struct Sanitizer {
    pub program: PathBuf,
    pub tool: SanitizerTool,
}

impl Sanitizer {
    /// compute-sanitizer from KBENCH_COMPUTE_SANITIZER, PATH, CUDA_HOME or /usr/local/cuda*, or
    /// an error naming where it looked.
    pub fn find(tool: SanitizerTool) -> Result<Sanitizer> {
        let program = match std::env::var_os(SANITIZER_ENV) {
            Some(path) => {
                let path = PathBuf::from(path);
                if !path.is_file() {
                    bail!(
                        "{SANITIZER_ENV}={} names no file: --sanitize needs compute-sanitizer",
                        path.display()
                    );
                }
                path
            }
            None => search_install().ok_or_else(|| {
                anyhow::anyhow!(
                    "--sanitize needs NVIDIA's compute-sanitizer, and it is not on PATH, in \
                     $CUDA_HOME/bin or in /usr/local/cuda*/bin (install the CUDA toolkit, or set \
                     {SANITIZER_ENV} to its path)"
                )
            })?,
        };
        Ok(Sanitizer { program, tool })
    }

    /// Runs `case` once more under the sanitizer and returns what it found; the worker's own
    /// verdict on the case (its answer, its guard zones) stays the timed run's. None: Ctrl-C
    /// stopped it, and the case is left unfinished, for `--resume` to run again.
    pub fn check_case(
        &self,
        worker_exe: &Path,
        job: &StudyJob,
        visible_device: Option<&str>,
        case: &Case,
        setup_limit_s: f64,
        halt: &AtomicBool,
    ) -> Option<SanitizerCheck> {
        let (log_file, shown_log_file) = log_path(&job.results_path, case.index, self.tool);
        let mut check = SanitizerCheck {
            tool: self.tool.name().to_string(),
            errors: None,
            report: Vec::new(),
            log_file: shown_log_file,
            failure: None,
        };
        if let Err(e) = log_file.parent().map_or(Ok(()), std::fs::create_dir_all) {
            check.failure = Some(format!("cannot create the sanitizer's log folder: {e}"));
            return Some(check);
        }
        let job = sanitizer_job(job);
        let wrapper = self.wrapper(&log_file);
        // `/proc/self/exe` would name the sanitizer itself once it runs the worker.
        let worker_exe = worker_exe
            .canonicalize()
            .unwrap_or_else(|_| worker_exe.to_path_buf());
        let outcome =
            Worker::spawn_wrapped(&wrapper, &worker_exe, &job, visible_device).map(|mut worker| {
                let outcome = worker.run_case(case, job.settings.timeout_s, setup_limit_s, halt);
                // The sanitizer writes its summary when the worker exits.
                worker.finish();
                outcome
            });
        match outcome {
            Err(e) => check.failure = Some(format!("could not start it: {e:#}")),
            Ok(WorkerOutcome::Finished(_)) => read_log(&log_file, &mut check),
            Ok(WorkerOutcome::Interrupted) => return None,
            Ok(WorkerOutcome::TimedOut(reason))
            | Ok(WorkerOutcome::SetupHung(reason))
            | Ok(WorkerOutcome::Died(reason)) => {
                // A kernel fault kills the worker; the sanitizer's report says where.
                read_log(&log_file, &mut check);
                check.failure = Some(reason);
            }
        }
        Some(check)
    }

    /// `compute-sanitizer --tool T --log-file F ...`, before the worker's own command line.
    fn wrapper(&self, log_file: &Path) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec![self.program.clone().into()];
        for arg in ["--tool", self.tool.name(), "--print-limit", "100"] {
            args.push(arg.into());
        }
        if self.tool == SanitizerTool::Memcheck {
            // Device-side allocations are the study's own buffers; leaks of kbench's pool are not
            // the kernel's fault, so only accesses are checked.
            args.extend(["--leak-check".into(), "no".into()]);
        }
        args.push("--log-file".into());
        args.push(log_file.as_os_str().to_owned());
        args
    }
}

/// Applies a sanitizer's findings to a measured case: errors (or a run that did not finish)
/// fail it, with the first error lines and the report's path in the reason.
pub fn apply(result: &mut CaseResult, check: SanitizerCheck) {
    let failed = check.failure.is_some() || check.errors != Some(0);
    if failed && result.status != CaseStatus::Skipped {
        let mut reason = match (&check.failure, check.errors) {
            (Some(failure), _) => format!(
                "the compute-sanitizer {} run did not finish: {failure}",
                check.tool
            ),
            (None, Some(n)) => format!(
                "compute-sanitizer {} found {n} error{}",
                check.tool,
                if n == 1 { "" } else { "s" }
            ),
            (None, None) => format!("compute-sanitizer {} wrote no error summary", check.tool),
        };
        for line in &check.report {
            reason.push_str("\n  ");
            reason.push_str(line);
        }
        reason.push_str(&format!("\n  (whole report: {})", check.log_file));
        // The case's own reason (a wrong answer, say) comes first.
        result.reason = Some(match result.reason.take() {
            Some(own) => format!("{own}\n{reason}"),
            None => reason,
        });
        result.status = CaseStatus::Error;
    }
    result.sanitizer = Some(check);
}

/// The job the sanitized worker runs: one run of each case (its answer and guard zones are
/// checked as always), no CUPTI (the sanitizer holds the tools interface), nothing saved, and
/// the time limit stretched for the sanitizer's slowdown.
fn sanitizer_job(job: &StudyJob) -> StudyJob {
    let settings = MeasureSettings {
        warmup: 0,
        min_samples: 1,
        max_samples: 1,
        max_time_s: 1e-3,
        timeout_s: job.settings.timeout_s * SLOWDOWN_ALLOWED,
        // An energy window under the sanitizer would take its slowdown many times over.
        energy: false,
        ..job.settings.clone()
    };
    StudyJob {
        settings,
        save_outputs: None,
        ..job.clone()
    }
}

/// `<results stem>-sanitizer/case-0007-memcheck.log`, beside the results file: the path, and
/// the path relative to the results file's folder (as the results record it).
fn log_path(results_path: &Path, index: usize, tool: SanitizerTool) -> (PathBuf, String) {
    let name = format!("case-{index:04}-{}.log", tool.name());
    let (folder, relative) = crate::results::beside(results_path, "sanitizer", &name);
    (folder.join(&relative), relative.display().to_string())
}

fn read_log(log_file: &Path, check: &mut SanitizerCheck) {
    match std::fs::read_to_string(log_file)
        .with_context(|| format!("cannot read the sanitizer's report {}", log_file.display()))
    {
        Ok(text) => {
            let (errors, report) = parse_report(&text);
            check.errors = errors;
            check.report = report;
        }
        Err(e) => check.failure = Some(format!("{e:#}")),
    }
}

/// The error count of compute-sanitizer's summary, and its first error lines (the `=========`
/// prefix taken off, blank ones, the banner and the summaries left out). None: no summary (the
/// sanitizer did not finish). memcheck, initcheck and synccheck end with `ERROR SUMMARY: N
/// errors`; racecheck with `RACECHECK SUMMARY: H hazards displayed (N errors, W warnings)`.
pub fn parse_report(text: &str) -> (Option<u64>, Vec<String>) {
    let mut errors = None;
    let mut lines = Vec::new();
    for line in text.lines() {
        let Some(body) = line.strip_prefix("=========") else {
            continue;
        };
        let body = body.trim();
        if let Some(summary) = body.strip_prefix("ERROR SUMMARY:") {
            errors = first_number(summary);
            continue;
        }
        if let Some((_, summary)) = body.split_once("SUMMARY:") {
            // `... displayed (N errors, W warnings)`; an ERROR SUMMARY, where there is one, says
            // the same.
            let counts = summary.split_once('(').map_or("", |(_, counts)| counts);
            errors = errors.or_else(|| first_number(counts));
            continue;
        }
        if body.is_empty() || body.starts_with("COMPUTE-SANITIZER") {
            continue;
        }
        if lines.len() < ERROR_LINES_KEPT {
            lines.push(body.to_string());
        }
    }
    (errors, lines)
}

fn first_number(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

fn search_install() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let cuda_home = std::env::var_os("CUDA_HOME").map(|home| PathBuf::from(home).join("bin"));
    let installed = glob::glob("/usr/local/cuda*/bin")
        .map(|paths| paths.flatten().collect::<Vec<_>>())
        .unwrap_or_default();
    let folders = on_path.into_iter().chain(cuda_home).chain(installed);
    folders
        .map(|folder| folder.join("compute-sanitizer"))
        .find(|candidate| candidate.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_gives_its_error_count_and_first_errors() {
        let text = "========= COMPUTE-SANITIZER\n\
            ========= Invalid __global__ write of size 4 bytes\n\
            =========     at over+0x90 in reduce.cu:7\n\
            =========     by thread (31,0,0) in block (3,0,0)\n\
            =========\n\
            ========= ERROR SUMMARY: 3 errors\n";
        let (errors, lines) = parse_report(text);
        assert_eq!(errors, Some(3));
        assert_eq!(
            lines,
            [
                "Invalid __global__ write of size 4 bytes",
                "at over+0x90 in reduce.cu:7",
                "by thread (31,0,0) in block (3,0,0)"
            ]
        );
        let (errors, lines) =
            parse_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n");
        assert_eq!((errors, lines.len()), (Some(0), 0));
        let racecheck = "========= COMPUTE-SANITIZER\n\
            ========= Error: Race reported between Write access at copy_race+0x70 in g.cu:5\n\
            =========     and Read access at copy_race+0x90 in g.cu:7 [248 hazards]\n\
            ========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n";
        let (errors, lines) = parse_report(racecheck);
        assert_eq!(errors, Some(1));
        assert_eq!(lines.len(), 2);
        let clean = "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n";
        assert_eq!(parse_report(clean), (Some(0), vec![]));
        // Cut short (the worker was killed): no summary.
        assert_eq!(parse_report("========= Invalid read\n").0, None);
    }

    #[test]
    fn the_report_lies_beside_the_results_file() {
        let (log, shown) = log_path(Path::new("out/s/2026.json"), 7, SanitizerTool::Racecheck);
        assert_eq!(
            log,
            Path::new("out/s/2026-sanitizer/case-0007-racecheck.log")
        );
        assert_eq!(shown, "2026-sanitizer/case-0007-racecheck.log");
    }
}
