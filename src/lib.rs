//! kbench: GPU kernel experiments declared in TOML manifests.
//!
//! The pipeline, one module per stage: `manifest` (parse, validate) -> `plan` (grid x variants
//! into cases) -> `execute` (each study's cases in a `worker` process, on the cpu | cuda
//! backends, via `measure`) -> `verify` (accuracy against a float64 reference) -> `stats`
//! (summaries) -> `report` (table, JSON, markdown, CSV, plots); `compare` judges two results
//! files for the regression gate.

pub mod algos;
pub mod backend;
pub mod compare;
pub mod env;
pub mod execute;
pub mod manifest;
pub mod measure;
pub mod plan;
pub mod report;
pub mod stats;
pub mod verify;
pub mod worker;

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
