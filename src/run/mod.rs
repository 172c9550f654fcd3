//! Running studies: a `session` (`kbench run`'s work: a request in, an outcome out) runs each
//! study with `study`, which runs its cases over `lanes` (one per GPU, or one), each case in a
//! `worker` process, where `case` measures it through its backend's `executor`;
//! `sanitize` runs each CUDA case once more under compute-sanitizer; `processes` splits a case
//! over several workers (`[measure] processes`) and merges their reports.

pub mod case;
pub mod executor;
pub mod lanes;
pub mod processes;
pub mod sanitize;
pub mod session;
pub mod study;
pub mod worker;
