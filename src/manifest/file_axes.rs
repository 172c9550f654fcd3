//! Where a file axis's paths and globs (`matrix = "datasets/*.mtx"`) become files. A manifest
//! being checked or run resolves them on disk, against the current folder, and keeps what each
//! named (`FileExpansion`): the results file records it with each file's digest
//! (`record::FileAxisRecord`). A manifest read back from a results file (`kbench report`,
//! `merge`, `run --resume`) takes the files the run recorded and never expands a glob again or
//! touches the filesystem, so a results file reads the same from any folder, and a hostile
//! file's `/**/*.mtx` walks nothing.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::Manifest;
use crate::record::{CaseResult, FileAxisRecord, RecordedFile, RecordedSource, ResultsDoc};
use crate::vocab::ParamValue;

/// The manifest a results file recorded, as its run planned it: its file axes take the files
/// the run recorded (nothing on disk is read), and a manifest that names another study than the
/// file's (an edited file) is refused, naming both. `results` names the file in messages.
pub fn parse_recorded(doc: &ResultsDoc, results: &Path) -> anyhow::Result<Manifest> {
    let files = FileSource::Recorded {
        files: &doc.manifest.files,
        cases: &doc.cases,
        manifest_absolute: doc.manifest.absolute.as_deref().map(Path::new),
        sources: &doc.manifest.sources,
    };
    let recorded_from = Path::new(&doc.manifest.path);
    let manifest =
        super::parse_with_files(recorded_from, &doc.manifest.toml, files).map_err(|mut e| {
            // Its line and column are in the embedded text, not in the file on disk (which may
            // have changed since, or be gone).
            e.path = PathBuf::from(format!(
                "(the manifest embedded in {}, recorded from {})",
                results.display(),
                recorded_from.display()
            ));
            let shown = e.to_string();
            anyhow::anyhow!(
                "the manifest embedded in results file {} no longer parses: {}",
                results.display(),
                shown.strip_prefix("error: ").unwrap_or(&shown)
            )
        })?;
    if manifest.study.name != doc.study.name {
        anyhow::bail!(
            "{}: the file holds study `{}`, but the manifest recorded in it is study `{}`: was \
             the file edited? (its cases are `{}`'s)",
            results.display(),
            doc.study.name,
            manifest.study.name,
            doc.study.name
        );
    }
    Ok(manifest)
}

/// What a results file records of `files`: each file with its size and digest, read now.
pub fn record_files(files: &[FileExpansion]) -> Result<Vec<FileAxisRecord>, String> {
    files
        .iter()
        .map(|e| {
            let recorded = e
                .paths
                .iter()
                .zip(&e.absolute)
                .map(|(path, absolute)| {
                    let (bytes, digest) = digest(absolute)?;
                    Ok(RecordedFile {
                        path: path.clone(),
                        absolute: absolute.display().to_string(),
                        bytes,
                        fnv1a64: digest,
                    })
                })
                .collect::<Result<_, String>>()?;
            Ok(FileAxisRecord {
                axis: e.axis.clone(),
                pattern: e.pattern.clone(),
                files: recorded,
            })
        })
        .collect()
}

/// Refuses a recorded file that is gone or changed since the run started: the cases still to
/// run (`run --resume`) would measure another input than the cases already recorded.
pub fn check_unchanged(files: &[FileAxisRecord]) -> Result<(), String> {
    for file in files.iter().flat_map(|r| &r.files) {
        unchanged(
            &file.absolute,
            (file.bytes, &file.fnv1a64),
            "",
            "read another input",
        )?;
    }
    Ok(())
}

/// Refuses the file at `absolute` unless its size and digest are still `recorded`; the error
/// names it (`what` before its path) and what resuming would do (`would`).
fn unchanged(absolute: &str, recorded: (u64, &str), what: &str, would: &str) -> Result<(), String> {
    let (bytes, digest) = digest(Path::new(absolute))?;
    if (bytes, digest.as_str()) != recorded {
        let (recorded_bytes, recorded_digest) = recorded;
        return Err(format!(
            "{what}{absolute} changed since the run started ({recorded_bytes} bytes, FNV-1a \
             {recorded_digest}; now {bytes} bytes, {digest}): the cases still to run would \
             {would} than the recorded ones; restore it, or start a new run"
        ));
    }
    Ok(())
}

/// What a results file records of a custom study's sources: each as the run read it.
pub fn record_sources(sources: &[crate::custom::def::SourceFile]) -> Vec<RecordedSource> {
    (sources.iter())
        .map(|s| RecordedSource {
            absolute: s.path.display().to_string(),
            bytes: s.text.len() as u64,
            fnv1a64: fnv1a64_hex(fnv1a64(FNV_OFFSET, s.text.as_bytes())),
            text: s.text.clone(),
        })
        .collect()
}

/// Refuses a recorded source that is gone or changed on disk: a resume compiles the sources on
/// disk (a results file is data, and its text is not run), which must be the ones the recorded
/// cases were measured with.
pub fn check_sources_unchanged(sources: &[RecordedSource]) -> Result<(), String> {
    for source in sources {
        unchanged(
            &source.absolute,
            (source.bytes, &source.fnv1a64),
            "source ",
            "time another kernel",
        )?;
    }
    Ok(())
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a 64 over `bytes`, continuing from `hash`.
fn fnv1a64(mut hash: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        hash = (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

fn fnv1a64_hex(hash: u64) -> String {
    format!("{hash:016x}")
}

/// A file's size and FNV-1a 64 digest (16 hex digits). Only regular files: a FIFO would block.
fn digest(path: &Path) -> Result<(u64, String), String> {
    let cannot = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    if !std::fs::metadata(path).map_err(cannot)?.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    let mut file = std::fs::File::open(path).map_err(cannot)?;
    let mut hash = FNV_OFFSET;
    let mut bytes: u64 = 0;
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(cannot)?;
        if n == 0 {
            break;
        }
        hash = fnv1a64(hash, &buffer[..n]);
        bytes += n as u64;
    }
    Ok((bytes, fnv1a64_hex(hash)))
}

/// The files one value of a file axis named.
#[derive(Debug, Clone, PartialEq)]
pub struct FileExpansion {
    pub axis: String,
    /// The manifest's value: a path or a glob.
    pub pattern: String,
    /// Each file as the cases' parameters name it (as the glob matched it).
    pub paths: Vec<String>,
    /// Each file's absolute path, in the order of `paths`: where a run from another folder
    /// (`run --resume`) reads it.
    pub absolute: Vec<PathBuf>,
}

/// Where a file axis's values are resolved.
#[derive(Debug, Clone, Copy)]
pub enum FileSource<'a> {
    /// On disk, relative to the current folder: a manifest being checked or run.
    Disk,
    /// As a results file recorded them. `files` empty: a file written before kbench recorded
    /// them, whose cases' parameters are then the only record (matched against the glob as
    /// text, not on disk). A custom study's sources are read from `sources` and its paths taken
    /// relative to `manifest_absolute`'s folder, where the results recorded them.
    Recorded {
        files: &'a [FileAxisRecord],
        cases: &'a [CaseResult],
        manifest_absolute: Option<&'a Path>,
        sources: &'a [RecordedSource],
    },
}

impl FileSource<'_> {
    /// Whether the files are on disk here (and must be checked there).
    pub fn on_disk(self) -> bool {
        matches!(self, FileSource::Disk)
    }

    /// The files `pattern` names as a value of `axis`; the error is the manifest's message.
    pub fn expand(
        self,
        axis: &str,
        pattern: &str,
        extensions: &[&str],
    ) -> Result<FileExpansion, String> {
        let expansion = |paths: Vec<String>, absolute: Vec<PathBuf>| FileExpansion {
            axis: axis.to_string(),
            pattern: pattern.to_string(),
            paths,
            absolute,
        };
        match self {
            FileSource::Disk => {
                let paths = super::expand_files(pattern, extensions)?;
                let absolute = paths
                    .iter()
                    .map(|p| std::path::absolute(p).unwrap_or_else(|_| PathBuf::from(p)))
                    .collect();
                Ok(expansion(paths, absolute))
            }
            FileSource::Recorded { files, .. } if !files.is_empty() => {
                let record = files
                    .iter()
                    .find(|r| r.axis == axis && r.pattern == pattern)
                    .ok_or_else(|| {
                        format!(
                            "the results file does not record which files `{pattern}` named \
                             (manifest.files has no entry for axis `{axis}`): was it edited?"
                        )
                    })?;
                let paths = record.files.iter().map(|f| f.path.clone()).collect();
                let absolute = record
                    .files
                    .iter()
                    .map(|f| f.absolute.clone().into())
                    .collect();
                Ok(expansion(paths, absolute))
            }
            FileSource::Recorded { cases, .. } => {
                let paths = files_in_cases(axis, pattern, cases)?;
                let absolute = paths.iter().map(PathBuf::from).collect();
                Ok(expansion(paths, absolute))
            }
        }
    }
}

/// An older results file's record of what `pattern` named: the values of `axis` in its cases
/// that are `pattern` or that the glob matches as text, in sorted order (a glob's own order).
fn files_in_cases(axis: &str, pattern: &str, cases: &[CaseResult]) -> Result<Vec<String>, String> {
    let glob = glob::Pattern::new(pattern).ok();
    let mut paths: Vec<String> = cases
        .iter()
        .filter_map(|c| match c.params.get(axis) {
            Some(ParamValue::Str(path)) => Some(path.clone()),
            _ => None,
        })
        .filter(|path| path == pattern || glob.as_ref().is_some_and(|g| g.matches(path)))
        .collect();
    paths.sort();
    paths.dedup();
    if paths.is_empty() {
        return Err(format!(
            "the results file records no file `{pattern}` named (written by a kbench that did not \
             record them, and none of its cases ran on one): it cannot be read without its files"
        ));
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_is_fnv1a_64_of_the_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.mtx");
        // FNV-1a 64 test vectors: "" and "a".
        std::fs::write(&path, "").unwrap();
        assert_eq!(digest(&path).unwrap(), (0, "cbf29ce484222325".to_string()));
        std::fs::write(&path, "a").unwrap();
        assert_eq!(digest(&path).unwrap(), (1, "af63dc4c8601ec8c".to_string()));
    }

    #[test]
    fn a_changed_file_is_refused_and_an_unchanged_one_passes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.mtx");
        std::fs::write(&path, "one").unwrap();
        let expansion = FileExpansion {
            axis: "matrix".into(),
            pattern: "*.mtx".into(),
            paths: vec!["m.mtx".into()],
            absolute: vec![path.clone()],
        };
        let recorded = record_files(&[expansion]).unwrap();
        assert_eq!(recorded[0].files[0].path, "m.mtx");
        assert!(check_unchanged(&recorded).is_ok());
        std::fs::write(&path, "two").unwrap();
        let e = check_unchanged(&recorded).unwrap_err();
        assert!(e.contains("changed since the run started"), "{e}");
    }
}
