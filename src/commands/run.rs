//! `kbench run`: the command line and the environment made into a session request, and the
//! terminal as the session's sink (a progress bar on a terminal, else a line per case; tables
//! or JSON on stdout). The run itself is `run::session`.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{bad_input, check_kernels_dir, count, table_width};
use crate::cli::RunArgs;
use crate::device::KernelSource;
use crate::exit::Exit;
use crate::record::CaseResult;
use crate::report::case_table;
use crate::report::export::{self, Export};
use crate::run::executor::mock::{self, MockSpec};
use crate::run::lanes;
use crate::run::sanitize::Sanitizer;
use crate::run::session::{self, Request, Sink, Source, StudyStart};
use crate::run::study::{case_line, Progress, RunOptions};
use crate::{errln, out, outln};

/// Runs the studies the command line names, on the terminal.
pub fn run(args: RunArgs) -> Exit {
    let options = match run_options(&args) {
        Ok(options) => options,
        Err(exit) => return exit,
    };
    let request = Request {
        source: match args.resume {
            Some(path) => Source::Resume(path),
            None => Source::Manifests(args.manifests),
        },
        options,
        out_dir: args.out_dir,
        shard: args.shard,
        cases: args.cases,
        exports: (args.export.into_iter())
            .chain(
                (args.results.as_deref())
                    .map(|path| Export::results_copy(path, args.overwrite_results)),
            )
            .collect(),
        save_baseline: args.save_baseline,
        check_claims: args.check_claims,
    };
    let terminal = Terminal::new(args.json, table_width(args.wide));
    session::run(&request, &terminal).exit()
}

/// The options every study runs with, from the command line and the environment, checked
/// before anything is loaded (a refusal is said here).
fn run_options(args: &RunArgs) -> Result<RunOptions, Exit> {
    args.overrides
        .check()
        .map_err(|e| bad_input(anyhow::anyhow!(e)))?;
    check_kernels_dir(args.kernels_dir.as_deref()).map_err(bad_input)?;
    let worker_exe = worker_exe().map_err(bad_input)?;
    let lanes = match &args.devices {
        None => None,
        Some(selection) => Some(
            lanes::resolve(
                selection,
                std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
                crate::device::count(),
            )
            .map_err(|e| bad_input(anyhow::anyhow!(e)))?,
        ),
    };
    let mut options = RunOptions {
        kernels: KernelSource {
            dir: args.kernels_dir.clone(),
        },
        mock_gpu: mock_gpu()?,
        save_outputs: args.save_outputs,
        interrupted: interrupt_flag(),
        overrides: args.overrides.clone(),
        worker_fault: std::env::var("KBENCH_WORKER_FAULT").ok(),
        sanitizer: match args.sanitize {
            Some(tool) => Some(Sanitizer::find(tool).map_err(bad_input)?),
            None => None,
        },
        ..RunOptions::new(worker_exe)
    };
    // Without --devices, the one lane RunOptions::new gives.
    if let Some(lanes) = lanes {
        options.lanes = lanes;
    }
    Ok(options)
}

/// The executable the workers run: /proc/self/exe still starts this kbench if its file is
/// replaced (a rebuild) mid-run.
pub(super) fn worker_exe() -> anyhow::Result<PathBuf> {
    let proc_self = PathBuf::from("/proc/self/exe");
    if proc_self.exists() {
        return Ok(proc_self);
    }
    std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find the kbench executable: {e}"))
}

/// The mock device KBENCH_MOCK_GPU names (for tests and machines without a GPU), checked before
/// anything runs.
pub(super) fn mock_gpu() -> Result<Option<MockSpec>, Exit> {
    match std::env::var_os(mock::MOCK_ENV) {
        Some(path) if !path.is_empty() => match MockSpec::load(Path::new(&path)) {
            Ok(spec) => Ok(Some(spec)),
            Err(e) => {
                // Formatted with the file and line, as a manifest's error.
                errln!("{e}");
                Err(Exit::BadInput)
            }
        },
        _ => Ok(None),
    }
}

/// Set on the first Ctrl-C or SIGTERM, so the case in progress is abandoned (its worker killed)
/// and the results file keeps every finished case; a second one exits at once (the file is always
/// complete JSON, since each write is a rename).
pub(super) fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let handler_flag = flag.clone();
    let installed = ctrlc::set_handler(move || {
        // The bar is wiped first, so neither message is drawn over it nor left under it.
        if let Some(bar) = ACTIVE_BAR.lock().ok().and_then(|b| b.clone()) {
            bar.finish_and_clear();
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if handler_flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
        errln!("interrupt: abandoning the current case, then stopping (again to quit now)");
    });
    if let Err(e) = installed {
        errln!("warning: cannot catch Ctrl-C: {e}");
    }
    flag
}

/// The running study's bar, for the Ctrl-C handler to clear (it runs on a thread of its own).
static ACTIVE_BAR: std::sync::Mutex<Option<ProgressBar>> = std::sync::Mutex::new(None);

/// The bar's look: the cases done, the time taken and the time left, then the last finished case
/// cut to what is left of the terminal's width (`wide_msg`), so the line never wraps.
fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("{bar:20} {pos}/{len} cases, {elapsed} (ETA {eta}) {wide_msg}")
        .expect("valid template")
}

/// The session's output on a terminal: results on stdout (tables, or one JSON document per
/// study with `--json`); progress and diagnostics on stderr, whatever stdout is: a bar on a
/// terminal, else (a CI log) a line per finished case.
struct Terminal {
    json: bool,
    /// The tables' width (None: every column).
    width: Option<usize>,
    /// stderr is a terminal: draw a bar.
    interactive: bool,
    /// The running study's bar.
    bar: RefCell<Option<ProgressBar>>,
}

impl Terminal {
    fn new(json: bool, width: Option<usize>) -> Terminal {
        Terminal {
            json,
            width,
            interactive: std::io::stderr().is_terminal(),
            bar: RefCell::new(None),
        }
    }
}

impl Progress for Terminal {
    fn case_finished(&self, done: usize, total: usize, study: &str, result: &CaseResult) {
        if !self.interactive {
            errln!("{}", case_line(done, total, study, result));
        }
        if let Some(bar) = self.bar.borrow().as_ref() {
            bar.case_finished(done, total, study, result);
        }
    }
}

impl Sink for Terminal {
    fn study_started(&self, start: &StudyStart) {
        if !self.json {
            out!(
                "{}",
                crate::report::text::wrap(
                    &format!(
                        "study `{}` ({}): {} to run{} -> {}",
                        start.manifest.study.name,
                        start.manifest.path.display(),
                        count(start.cases, "case", "cases"),
                        on_what(start),
                        start.results_path.display()
                    ),
                    self.width,
                    "    "
                )
            );
        }
        let bar = ProgressBar::new(start.cases as u64);
        if self.interactive {
            bar.set_style(bar_style());
        } else {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(mut active) = ACTIVE_BAR.lock() {
            *active = Some(bar.clone());
        }
        *self.bar.borrow_mut() = Some(bar);
    }

    fn cases_done(&self) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            bar.finish_and_clear();
        }
        if let Ok(mut active) = ACTIVE_BAR.lock() {
            *active = None;
        }
    }

    fn study_finished(&self, report: &export::Report, results_path: &Path) {
        if self.json {
            outln!(
                "{}",
                serde_json::to_string(report.doc).expect("results serialize")
            );
            return;
        }
        let on_terminal = export::Report {
            width: self.width,
            ..*report
        };
        crate::report::style::print(&export::tables(
            &on_terminal,
            case_table::TableStyle::Terminal,
        ));
        outln!("results: {}\n", results_path.display());
    }

    fn baseline_saved(&self, name: &str, path: &Path) {
        if !self.json {
            outln!("added to baseline `{name}`: {}", path.display());
        }
    }

    fn diagnostic(&self, text: &str) {
        errln!("{text}");
    }
}

/// ` (shard 2/4) on GPUs 0, 1`: what part of the plan runs where, for the run's first line.
fn on_what(start: &StudyStart) -> String {
    let mut out = String::new();
    if let Some(s) = start.shard {
        out.push_str(&format!(" (shard {}/{})", s.index, s.count));
    }
    if !start.gpus.is_empty() {
        let numbers: Vec<String> = start.gpus.iter().map(|g| g.to_string()).collect();
        out.push_str(&format!(" on GPUs {}", numbers.join(", ")));
    }
    out
}

/// `kbench worker` (hidden): the other end of a run, running the cases `run_study` sends it on
/// stdin (see `run::worker`).
pub fn worker() -> Exit {
    match crate::run::worker::worker_main() {
        Ok(()) => Exit::Ok,
        Err(e) => {
            errln!("kbench worker: {e:#}");
            Exit::BadInput
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use indicatif::{ProgressBar, ProgressDrawTarget, TermLike};

    /// A terminal of 80 columns that records what is drawn on it.
    #[derive(Debug, Clone, Default)]
    struct Recorded(Arc<Mutex<Vec<String>>>);

    impl TermLike for Recorded {
        fn width(&self) -> u16 {
            80
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.0.lock().unwrap().push(s.to_string());
            Ok(())
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            self.write_line(s)
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_bar_fits_80_columns_and_shows_the_time_left() {
        let term = Recorded::default();
        let bar = ProgressBar::with_draw_target(
            Some(81),
            ProgressDrawTarget::term_like(Box::new(term.clone())),
        );
        bar.set_style(super::bar_style());
        bar.set_message(format!(
            "threads {}",
            "matrix=datasets/bcsstk13.mtx dtype=f64 ".repeat(4)
        ));
        bar.inc(27);
        bar.tick();
        let drawn = term.0.lock().unwrap().clone();
        let lines: Vec<&str> = drawn.iter().flat_map(|l| l.lines()).collect();
        assert!(lines.iter().any(|l| l.contains("27/81 cases")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("ETA")), "{lines:?}");
        for line in &lines {
            let width = console_width(line);
            assert!(width <= 80, "{width} columns: {line}");
        }
    }

    fn console_width(line: &str) -> usize {
        unicode_width::UnicodeWidthStr::width(
            anstream::adapter::strip_str(line).to_string().as_str(),
        )
    }
}
