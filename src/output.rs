//! What the commands print, written so that a reader who goes away ends no command: `kbench
//! schema | head -1` and `kbench run ... | head -1` must exit quietly, as cargo and ripgrep do,
//! not panic as `println!` does on a closed pipe ("failed printing to stdout: Broken pipe").
//!
//! Every command prints through `outln!` / `out!` (stdout) and `errln!` (stderr). A stream whose
//! reader has gone (`BrokenPipe`) is marked gone and later writes to it are dropped in silence;
//! the command goes on to its end. That is what keeps measured results safe: `kbench run` does
//! not stop mid-study when its stdout closes, every case still lands in the results file (and
//! `--results`, `--export`), and the exit status is the run's own. SIGPIPE stays ignored (Rust's
//! default), so no write kills the process either, workers included.
//!
//! Any other failure to write stdout (a full disk under `> file`) is said once on stderr and
//! turns a successful exit into exit 2 (`exit_status`), as an output that cannot be written is
//! everywhere else in kbench.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::exit::Exit;

/// stdout's reader has gone, or stdout cannot be written: nothing more is written to it.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);
/// The same for stderr.
static STDERR_GONE: AtomicBool = AtomicBool::new(false);
/// stdout failed otherwise than by its reader going away.
static STDOUT_FAILED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout, and flushes, so that a closed pipe is seen at this write (`outln!`).
pub fn stdout(args: fmt::Arguments) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = io::stdout().lock();
    let written = out.write_fmt(args).and_then(|()| out.flush());
    drop(out);
    if let Err(e) = written {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        if e.kind() != io::ErrorKind::BrokenPipe {
            STDOUT_FAILED.store(true, Ordering::Relaxed);
            stderr(format_args!("error: cannot write to stdout: {e}\n"));
        }
    }
}

/// Writes to stderr (`errln!`); a stderr that cannot be written is left alone from then on,
/// having nowhere else to say so.
pub fn stderr(args: fmt::Arguments) {
    if STDERR_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut err = io::stderr().lock();
    if err.write_fmt(args).and_then(|()| err.flush()).is_err() {
        STDERR_GONE.store(true, Ordering::Relaxed);
    }
}

/// Whether stdout's reader has gone (or stdout failed): output for it would be lost.
pub fn stdout_gone() -> bool {
    STDOUT_GONE.load(Ordering::Relaxed)
}

/// The status to exit with: the command's, except that a command that succeeded but could not
/// write its stdout (otherwise than to a reader that went away) failed to give its output.
pub fn exit_status(exit: Exit) -> Exit {
    if exit == Exit::Ok && STDOUT_FAILED.load(Ordering::Relaxed) {
        Exit::BadInput
    } else {
        exit
    }
}

/// `println!` that a closed stdout does not crash (see the module's header).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that a closed stdout does not crash.
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` that a closed stderr does not crash.
#[macro_export]
macro_rules! errln {
    () => {
        $crate::output::stderr(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}
