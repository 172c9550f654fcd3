//! kbench: GPU kernel experiments declared in TOML manifests.
//!
//! The command line on top: `cli` (its clap grammar), `commands` (what each command does,
//! returning an `exit::Exit`, printing through `output`, which a closed pipe does not crash); `kbench run`'s work is `run::session`, a library call that tests
//! make without a terminal.
//!
//! The pipeline, one module per stage, each depending only on those before it:
//! `manifest` (parse, validate) -> `plan` (grid x variants into cases) -> `run` (a session runs
//! each study's cases in `worker` processes, where `case` runs one: `measure`, `verify`,
//! `stats`) -> `results` (the results file) -> `compare` (the regression gate) and `claims` (a
//! report's conclusions, judged) -> `report` (tables, markdown, CSV, plots).
//!
//! Below the stages: `vocab` (shared types), `figure` (a number that need not be finite, as
//! JSON holds it), `record` (the results file's types), `numerics`,
//! `device` (kbench's safe layer over CUDA, and the GPU timer), `algos` (the algorithms and the
//! seam they plug into), `grid` (axis values and where-filters), `env`, `json_schema` (the
//! JSON Schemas of the manifest and results formats), `reference_command` (a user's program
//! computing a case's expected outputs, through `.npy` files), `draws` (random buffers drawn on
//! every core, reproducibly) and `stage_clock` (where a case's time goes).

pub mod algos;
pub mod changepoint;
pub mod claims;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod custom;
pub mod device;
pub mod draws;
pub mod env;
pub mod exit;
pub mod expr;
pub mod figure;
pub mod grid;
pub mod history;
pub mod input_file;
pub mod json_schema;
pub mod manifest;
pub mod measure;
pub mod npy;
pub mod numerics;
pub mod output;
pub mod plan;
pub mod record;
pub mod reference_command;
pub mod report;
pub mod results;
pub mod results_check;
pub mod run;
pub mod shard;
pub mod slurm;
pub mod stage_clock;
pub mod stats;
pub mod tune;
pub mod verify;
pub mod vocab;

use std::path::PathBuf;

/// Expands command-line arguments into manifest paths: globs are expanded (a pattern matching
/// nothing is an error), plain paths are kept as given.
pub fn expand_manifest_args(args: &[String]) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for arg in args {
        if arg.contains(['*', '?', '[']) {
            let matches = glob::glob(arg).map_err(|e| format!("bad glob pattern `{arg}`: {e}"))?;
            let before = paths.len();
            for entry in matches {
                paths.push(entry.map_err(|e| format!("cannot read a match of `{arg}`: {e}"))?);
            }
            if paths.len() == before {
                return Err(format!("no manifest matches `{arg}`"));
            }
        } else {
            paths.push(PathBuf::from(arg));
        }
    }
    Ok(paths)
}
