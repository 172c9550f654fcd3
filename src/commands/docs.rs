//! The commands that describe kbench itself rather than a study: `schema` (the JSON Schemas of
//! manifests and results files), `completions` (a shell's completion script) and `man` (the man
//! pages), the last two generated from the clap definition in `cli`.

use std::path::Path;

use clap::CommandFactory;

use super::bad_input;
use crate::cli::{Cli, SchemaOf};
use crate::exit::Exit;
use crate::{out, outln};

/// `kbench schema`: prints the JSON Schema of manifests or of results files.
pub fn schema(of: SchemaOf) -> Exit {
    let schema = match of {
        SchemaOf::Manifest => crate::manifest::manifest_schema(),
        SchemaOf::Results => crate::record::json_schema(),
    };
    outln!(
        "{}",
        serde_json::to_string_pretty(&schema).expect("a schema serializes")
    );
    Exit::Ok
}

/// `kbench completions`: prints `shell`'s completion script.
pub fn completions(shell: clap_complete::Shell) -> Exit {
    // Into memory first: clap_complete panics on a write error, and stdout may be a closed pipe.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "kbench", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    Exit::Ok
}

/// `kbench man`: kbench.1 and kbench-<command>.1 in `dir`.
pub fn man_pages(dir: &Path) -> Exit {
    let written =
        std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(Cli::command(), dir));
    match written {
        Ok(()) => {
            outln!(
                "wrote the man pages to {} (read one with `man {}/kbench.1`)",
                dir.display(),
                dir.display()
            );
            Exit::Ok
        }
        Err(e) => bad_input(anyhow::anyhow!(
            "cannot write the man pages to {}: {e}",
            dir.display()
        )),
    }
}
