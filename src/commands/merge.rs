//! `kbench merge`: the results files of a study's shards joined into one new file.

use super::{bad_input, count};
use crate::cli::MergeArgs;
use crate::exit::Exit;
use crate::outln;
use crate::shard;

/// The shards' files joined into a new one; `CasesMissing` when planned cases are missing
/// (listed by name; the file is written, for `run --resume`), `BadInput` when refused.
pub fn merge(args: MergeArgs) -> Exit {
    let merged = match shard::merge_files(&args.files, &args.output) {
        Ok(m) => m,
        Err(e) => return bad_input(e),
    };
    let doc = &merged.doc;
    outln!(
        "merged {} into {}: {} of {} planned cases",
        count(args.files.len(), "file", "files"),
        args.output.display(),
        doc.cases.len(),
        doc.planned_cases
    );
    if merged.missing.is_empty() {
        return Exit::Ok;
    }
    outln!(
        "missing {} (no shard's file holds them):",
        count(merged.missing.len(), "case", "cases")
    );
    for name in &merged.missing {
        outln!("  {name}");
    }
    outln!(
        "run them into the merged file with `kbench run --resume {}`",
        args.output.display()
    );
    Exit::CasesMissing
}
