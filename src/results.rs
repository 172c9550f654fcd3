//! The results file: `out/<study>/<timestamp>.json`, a schema-versioned record of the manifest,
//! the environment, and every case with its statistics and raw samples.
//!
//! The file is rewritten after every case through a temporary file and a rename, so it is always
//! complete, valid JSON; its name is reserved with `create_new`, so an earlier run's file is never
//! overwritten.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::manifest::Manifest;
use crate::schema::{
    CaseResult, DeviceFingerprint, ManifestRecord, MeasureSettings, ResultsDoc, SCHEMA_VERSION,
};
use crate::vocab::HostData;

pub struct ResultsFile {
    pub path: PathBuf,
    pub doc: ResultsDoc,
}

impl ResultsFile {
    /// Reserves a new results file for `manifest` under `out_dir` and writes the empty record, so
    /// an unwritable output folder is reported before anything is measured.
    pub fn create(
        out_dir: &Path,
        manifest: &Manifest,
        planned_cases: usize,
        measure: MeasureSettings,
    ) -> Result<ResultsFile> {
        let dir = out_dir.join(&manifest.study.name);
        fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create the output folder {}", dir.display()))?;
        let now = chrono::Utc::now();
        let stamp = now.format("%Y%m%dT%H%M%SZ").to_string();
        let path = reserve(&dir, &stamp)?;
        let file = ResultsFile {
            path,
            doc: ResultsDoc {
                schema_version: SCHEMA_VERSION,
                study: manifest.study.clone(),
                manifest: ManifestRecord {
                    path: manifest.path.display().to_string(),
                    toml: manifest.source.clone(),
                    variants: manifest.variants.clone(),
                    measure,
                    baseline: manifest.report.baseline.clone(),
                    compare: manifest.compare,
                },
                environment: crate::env::detect(),
                started_at: now.to_rfc3339(),
                resumed_at: Vec::new(),
                finished_at: None,
                complete: planned_cases == 0,
                planned_cases,
                cases: Vec::new(),
                claims: Vec::new(),
            },
        };
        if let Err(e) = file.write() {
            let _ = fs::remove_file(&file.path);
            return Err(e);
        }
        Ok(file)
    }

    /// An unfinished results file, to be completed by `kbench run --resume`.
    pub fn reopen(path: PathBuf, mut doc: ResultsDoc) -> ResultsFile {
        doc.resumed_at.push(chrono::Utc::now().to_rfc3339());
        ResultsFile { path, doc }
    }

    pub fn push(&mut self, case: CaseResult) -> Result<()> {
        self.doc.cases.push(case);
        if self.doc.cases.len() == self.doc.planned_cases {
            self.doc.complete = true;
            self.doc.finished_at = Some(chrono::Utc::now().to_rfc3339());
        }
        self.write()
    }

    pub fn set_device(&mut self, device: &DeviceFingerprint) {
        if self.doc.environment.device.is_none() {
            self.doc.environment.device = Some(device.clone());
        }
    }

    pub fn set_gpu_unavailable(&mut self, reason: &str) {
        self.doc.environment.gpu_unavailable = Some(reason.to_string());
    }

    /// Records the claims' verdicts and writes the file.
    pub fn set_claims(&mut self, claims: Vec<crate::schema::ClaimVerdict>) -> Result<()> {
        self.doc.claims = claims;
        self.write()
    }

    fn write(&self) -> Result<()> {
        write_json_atomically(&self.path, &self.doc)
    }
}

/// Writes a case's arrays as `.npy` files in `<results stem>-outputs/case-<index>-<variant>/`
/// beside the results file and returns their paths relative to the results file's folder.
pub fn save_arrays(
    results_path: &Path,
    index: usize,
    variant: &str,
    arrays: &[(String, &HostData)],
) -> Result<Vec<String>> {
    let folder = results_path.parent().unwrap_or(Path::new("."));
    let stem = results_path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy();
    let relative =
        PathBuf::from(format!("{stem}-outputs")).join(format!("case-{index:04}-{variant}"));
    let dir = folder.join(&relative);
    fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, data) in arrays {
        let file = relative.join(format!("{name}.npy"));
        data.write_npy(&folder.join(&file))
            .with_context(|| format!("cannot write {}", file.display()))?;
        written.push(file.display().to_string());
    }
    Ok(written)
}

/// Writes `value` as pretty JSON to a temporary file beside `path`, then renames it over `path`,
/// so a reader never sees a half-written file.
pub fn write_json_atomically<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    let written = (|| -> std::io::Result<()> {
        let mut f = io::BufWriter::new(fs::File::create(&tmp)?);
        serde_json::to_writer_pretty(&mut f, value)?;
        f.write_all(b"\n")?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()
    })();
    if let Err(e) = written {
        // On a full disk the partial copy would hold space the next write needs.
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", tmp.display()));
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot move {} into place", tmp.display()))?;
    Ok(())
}

/// Where `kbench run --save-baseline NAME` keeps a study's baseline runs, one file per run.
pub fn baseline_dir(out_dir: &Path, study: &str, name: &str) -> PathBuf {
    out_dir.join("baselines").join(study).join(name)
}

/// Reads a results file.
pub fn load_results(path: &std::path::Path) -> Result<ResultsDoc> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    // The version is checked before the fields, so a file of another version is refused for
    // that, not for the first field that changed.
    let version = serde_json::from_str::<serde_json::Value>(&text)
        .with_context(|| format!("{} is not JSON", path.display()))?
        .get("schema_version")
        .map(|v| v.as_u64());
    match version {
        Some(Some(v)) if v == u64::from(SCHEMA_VERSION) => {}
        Some(Some(v)) => bail!(
            "{} has results schema_version {v}, this kbench reads {SCHEMA_VERSION} (docs/results-format.md); \
             read it with the kbench that wrote it ({})",
            path.display(),
            if v > u64::from(SCHEMA_VERSION) { "a newer one" } else { "an older one" }
        ),
        Some(None) => bail!("{}: schema_version is not a whole number", path.display()),
        None => bail!(
            "{} has no schema_version: it is not a kbench results file, or one written before \
             results were versioned, which this kbench cannot read (docs/results-format.md)",
            path.display()
        ),
    }
    let doc: ResultsDoc = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a kbench results file", path.display()))?;
    Ok(doc)
}

/// Creates `<dir>/<stamp>.json`, or `<stamp>-2.json` and so on if taken: never an existing file.
fn reserve(dir: &Path, stamp: &str) -> Result<PathBuf> {
    for attempt in 1.. {
        let name = if attempt == 1 {
            format!("{stamp}.json")
        } else {
            format!("{stamp}-{attempt}.json")
        };
        let path = dir.join(name);
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", path.display())),
        }
    }
    unreachable!("the loop returns")
}
