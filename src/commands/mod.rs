//! What each `kbench` command does, one module per command (`run` is a thin adapter over the
//! library's run session, `run::session`): each takes its parsed arguments from `cli` and
//! returns its `Exit`, saying on stdout and stderr what a person needs. The helpers here are
//! shared by several commands.

pub mod check;
pub mod compare;
pub mod compare_retest;
pub mod docs;
pub mod history;
pub mod kernels;
pub mod merge;
pub mod report;
pub mod run;
pub mod slurm;
pub mod tune;

use std::path::Path;

use crate::errln;
use crate::exit::Exit;
use crate::report::case_table;

/// Says `error` and exits as bad input.
pub fn bad_input(error: anyhow::Error) -> Exit {
    errln!("error: {error:#}");
    Exit::BadInput
}

/// "1 case", "18 cases".
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The width a terminal table must fit: none with `--wide`.
pub fn table_width(wide: bool) -> Option<usize> {
    (!wide).then(case_table::terminal_width)
}

/// A `--kernels-dir` must be a folder that is there, GPU or not: a typo is not a run without
/// kernels.
pub fn check_kernels_dir(dir: Option<&Path>) -> anyhow::Result<()> {
    match dir {
        Some(dir) if !dir.is_dir() => anyhow::bail!(
            "--kernels-dir {}: {}",
            dir.display(),
            if dir.exists() {
                "not a folder"
            } else {
                "no such folder"
            }
        ),
        _ => Ok(()),
    }
}
