//! kbench's exit statuses, one enum for every command, so a status is named where it is decided
//! and numbered here alone (README.md's "Exit codes" lists the same numbers):
//!
//! - 0: every case passed (skipped cases included); the command did what was asked.
//! - 1: some case failed (wrong answer, runtime error, time limit); `compare`: a case got slower
//!   or newly fails; `merge`: planned cases are missing (the merged file is written all the
//!   same); `kernels`: a kernel does not compile.
//! - 2: bad input (manifest, arguments) or an output that cannot be written.
//! - 3: a claim was refuted (only with `--check-claims`, and only when no case failed).
//! - 130: interrupted (the results file holds every finished case: `run --resume` it).

use std::process::ExitCode;

/// How a kbench command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok,
    /// A case failed: wrong answer, runtime error, time limit.
    CasesFailed,
    /// `compare`: a case got slower, or fails where it passed.
    Regressed,
    /// `merge`: planned cases are in no shard's file.
    CasesMissing,
    /// `kernels`: a kernel does not compile, or ptxas refuses it.
    CompileFailed,
    /// A manifest, an argument or a file read is wrong, or an output cannot be written.
    BadInput,
    /// `--check-claims`: a claim of the manifest is refuted.
    ClaimsRefuted,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

impl Exit {
    /// The process's exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::CasesFailed | Exit::Regressed | Exit::CasesMissing | Exit::CompileFailed => 1,
            Exit::BadInput => 2,
            Exit::ClaimsRefuted => 3,
            // As a shell reports a process ended by SIGINT.
            Exit::Interrupted => 130,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn the_codes_are_the_ones_the_readme_documents() {
        let codes: Vec<u8> = [
            Exit::Ok,
            Exit::CasesFailed,
            Exit::Regressed,
            Exit::CasesMissing,
            Exit::CompileFailed,
            Exit::BadInput,
            Exit::ClaimsRefuted,
            Exit::Interrupted,
        ]
        .map(Exit::code)
        .to_vec();
        assert_eq!(codes, [0, 1, 1, 1, 1, 2, 3, 130]);
    }
}
