//! `kbench compare --retest`: the cases the gate would call slower are measured again in a fresh
//! `kbench run` process of this same binary (`run --case NAME` for each), and judged against the
//! same baselines by the same run-level test (`compare::apply_retest`): a slowdown that a
//! transient disturbance of the host made (a burst of other work during one case) is not
//! reproduced and does not fail the gate; a real one is.
//!
//! The retest runs the manifest the new run recorded: from its path where that file still holds
//! the recorded text (custom kernels need their sources beside it), else from the text embedded
//! in the results, written into the retest folder. The measurement overrides the new run was
//! given (`--max-time-s` ...) are given again. Its results are kept, never overwritten, in
//! `retest/` beside the new results file (`<new>-retest-<N>.json`): a folder of runs that
//! `kbench history` reads is not touched (it reads a folder's own files, not its subfolders').

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::record::ResultsDoc;

/// What a retest ran and where its results are.
pub struct RetestRun {
    pub results_path: PathBuf,
    pub doc: ResultsDoc,
    /// Where the manifest came from: its recorded path, or the embedded text.
    pub manifest_note: String,
}

/// Runs the cases named `cases` (`variant params`) of the study `new` recorded, in a fresh
/// process of this binary, and loads what it measured.
pub fn run_retest(
    new_path: &Path,
    new: &ResultsDoc,
    cases: &[String],
    kernels_dir: Option<&Path>,
) -> Result<RetestRun> {
    let folder = new_path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("retest");
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create the retest folder {}", folder.display()))?;
    let stem = new_path
        .file_stem()
        .map_or("run".into(), |s| s.to_string_lossy().into_owned());
    let (results_path, number) = free_name(&folder, &stem)?;
    let (manifest, manifest_note) = manifest_to_run(new, &folder, &stem, number)?;

    let exe = super::run::worker_exe()?;
    let mut command = Command::new(exe);
    command
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&folder)
        .arg("--results")
        .arg(&results_path);
    for case in cases {
        command.arg("--case").arg(case);
    }
    command.args(new.manifest.overrides.args());
    if let Some(dir) = kernels_dir {
        command.arg("--kernels-dir").arg(dir);
    }
    let output = command
        .output()
        .context("cannot start the retest's `kbench run`")?;
    // Exit 1 (a case failed) still writes the results; 2 and above do not.
    let code = output.status.code().unwrap_or(-1);
    if !(0..=1).contains(&code) || !results_path.is_file() {
        bail!(
            "the retest's `kbench run` failed (exit {code}): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let doc = crate::results::load_results(&results_path)?;
    Ok(RetestRun {
        results_path,
        doc,
        manifest_note,
    })
}

/// `<folder>/<stem>-retest-<N>.json` with the first N from 1 that no file has yet.
fn free_name(folder: &Path, stem: &str) -> Result<(PathBuf, u32)> {
    for number in 1..10_000 {
        let path = folder.join(format!("{stem}-retest-{number}.json"));
        if !path.exists() {
            return Ok((path, number));
        }
    }
    bail!(
        "the retest folder {} holds 10000 retests of {stem} already",
        folder.display()
    )
}

/// The manifest to run: the recorded path if that file still holds the recorded text, else
/// the embedded text written into the retest folder.
fn manifest_to_run(
    new: &ResultsDoc,
    folder: &Path,
    stem: &str,
    number: u32,
) -> Result<(PathBuf, String)> {
    let recorded = PathBuf::from(&new.manifest.path);
    if std::fs::read_to_string(&recorded).is_ok_and(|text| text == new.manifest.toml) {
        return Ok((recorded, format!("manifest {}", new.manifest.path)));
    }
    let written = folder.join(format!("{stem}-retest-{number}.toml"));
    std::fs::write(&written, &new.manifest.toml)
        .with_context(|| format!("cannot write {}", written.display()))?;
    let why = if recorded.exists() {
        "changed since the run"
    } else {
        "not found"
    };
    Ok((
        written,
        format!(
            "manifest {} {why}: ran the text recorded in the results",
            new.manifest.path
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::MeasureOverrides;
    use crate::vocab::Launch;

    #[test]
    fn overrides_are_given_again_as_flags_and_names_never_repeat() {
        let overrides = MeasureOverrides {
            max_time_s: Some(0.25),
            min_samples: Some(3),
            processes: Some(4),
            launch: Some(Launch::Graph),
            ..MeasureOverrides::default()
        };
        assert_eq!(
            overrides.args(),
            [
                "--min-samples",
                "3",
                "--max-time-s",
                "0.25",
                "--processes",
                "4",
                "--launch",
                "graph"
            ]
        );
        assert!(MeasureOverrides::default().args().is_empty());
        let dir = tempfile::tempdir().unwrap();
        let (first, n) = free_name(dir.path(), "20261124T1").unwrap();
        assert_eq!(n, 1);
        std::fs::write(&first, "{}").unwrap();
        let (second, n) = free_name(dir.path(), "20261124T1").unwrap();
        assert_eq!(
            (n, second.file_name().unwrap()),
            (2, "20261124T1-retest-2.json".as_ref())
        );
    }
}
