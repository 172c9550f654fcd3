//! The results file: `out/<study>/<timestamp>.json`, a schema-versioned record of the manifest,
//! the environment, and every case with its statistics and raw samples.
//!
//! Each finished case is appended as one JSON line to a journal beside it,
//! `<timestamp>.cases.jsonl`, so writing a case costs the same at the 20,000th case as at the
//! first. The journal is folded into the JSON file (written to a temporary file, then renamed
//! over it: a reader never sees half a file) when the study completes, is interrupted, records
//! its device, or is resumed; `load_results` reads both, so a file whose run was killed still
//! shows every finished case, and a torn last line (a kill mid-append) is ignored.
//!
//! The file's name is reserved with `create_new`, so an earlier run's file is never
//! overwritten; the run that writes it holds an exclusive lock on its journal, so a second
//! `--resume` of the same file is refused instead of running the same cases again.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use crate::input_file::{read_regular_file, read_regular_text};
use crate::manifest::Manifest;
use crate::record::{
    CaseResult, DeviceFingerprint, ManifestRecord, MeasureOverrides, MeasureSettings, ResultsDoc,
    ShardRecord, SCHEMA_VERSION,
};
use crate::results_check;
use crate::vocab::HostData;

pub struct ResultsFile {
    pub path: PathBuf,
    pub doc: ResultsDoc,
    journal: Journal,
    /// When the journal was last flushed to the disk (see `push`).
    journal_synced: Instant,
}

/// The journal, open for appending and locked for as long as this run writes the file.
struct Journal {
    file: File,
    path: PathBuf,
}

/// An emptied journal is removed when the run lets the file go; one that still holds cases
/// (an error before compacting) is kept for `load_results` and `--resume`.
impl Drop for Journal {
    fn drop(&mut self) {
        if self.file.metadata().is_ok_and(|m| m.len() == 0) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// How often the journal is flushed to the disk. A killed kbench loses no appended case (the
/// kernel holds them); a power cut loses at most this much of the study. Flushing after every
/// case instead costs an fsync each: about 3.5 ms here, 70 s of a 20,000-case study.
const JOURNAL_SYNC_INTERVAL: Duration = Duration::from_secs(1);

/// The journal of finished cases beside a results file: `<stamp>.json` -> `<stamp>.cases.jsonl`.
pub fn journal_path(results: &Path) -> PathBuf {
    results.with_extension("cases.jsonl")
}

/// Opens (creating it if need be) and locks the journal of `results`: refused while another
/// kbench writes the same file.
fn lock_journal(results: &Path) -> Result<Journal> {
    let path = journal_path(results);
    // O_NONBLOCK: a FIFO in the journal's place must be refused, not wait for a reader.
    let journal = OpenOptions::new()
        .create(true)
        .append(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let metadata = journal
        .metadata()
        .with_context(|| format!("cannot open {}", path.display()))?;
    if let Some(kind) = crate::input_file::not_a_file_kind(&metadata) {
        bail!(
            "cannot open the journal {}: it is {kind}, not a regular file",
            path.display()
        );
    }
    match journal.try_lock() {
        Ok(()) => Ok(Journal {
            file: journal,
            path,
        }),
        Err(fs::TryLockError::WouldBlock) => bail!(
            "another kbench is writing {} (a run or a resume of it is still going): wait for it to finish",
            results.display()
        ),
        Err(fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", path.display()))
        }
    }
}

impl ResultsFile {
    /// Reserves a new results file for `manifest` under `out_dir` and writes the empty record, so
    /// an unwritable output folder is reported before anything is measured. `measure` is what
    /// the cases will be measured with; no command-line override is recorded (see
    /// `create_overridden`).
    pub fn create(
        out_dir: &Path,
        manifest: &Manifest,
        planned_cases: usize,
        measure: MeasureSettings,
        shard: Option<ShardRecord>,
    ) -> Result<ResultsFile> {
        let mut file = ResultsFile::reserve_new(out_dir, manifest, planned_cases, measure, shard)?;
        file.write_or_give_up()?;
        Ok(file)
    }

    /// As `create`, for a run with the command line's `overrides`: the cases are measured with
    /// the manifest's settings with them applied, and the file records both.
    pub fn create_overridden(
        out_dir: &Path,
        manifest: &Manifest,
        planned_cases: usize,
        overrides: &MeasureOverrides,
        shard: Option<ShardRecord>,
    ) -> Result<ResultsFile> {
        let measure = overrides.apply(&manifest.measure);
        let mut file = ResultsFile::reserve_new(out_dir, manifest, planned_cases, measure, shard)?;
        file.doc.manifest.overrides = overrides.clone();
        file.write_or_give_up()?;
        Ok(file)
    }

    /// The new file's name reserved and its journal locked; nothing written yet.
    fn reserve_new(
        out_dir: &Path,
        manifest: &Manifest,
        planned_cases: usize,
        measure: MeasureSettings,
        shard: Option<ShardRecord>,
    ) -> Result<ResultsFile> {
        // Read before anything is written: a file axis's file gone since `check` leaves no file.
        let files = crate::manifest::record_files(&manifest.files).map_err(anyhow::Error::msg)?;
        let dir = out_dir.join(&manifest.study.name);
        fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create the output folder {}", dir.display()))?;
        let now = chrono::Utc::now();
        let stamp = now.format("%Y%m%dT%H%M%SZ").to_string();
        let path = reserve(&dir, &stamp)?;
        let journal = match lock_journal(&path) {
            Ok(journal) => journal,
            Err(e) => {
                let _ = fs::remove_file(&path);
                return Err(e);
            }
        };
        Ok(ResultsFile {
            path,
            doc: ResultsDoc {
                schema_version: SCHEMA_VERSION,
                study: manifest.study.clone(),
                manifest: ManifestRecord {
                    path: manifest.path.display().to_string(),
                    toml: manifest.source.clone(),
                    variants: manifest.variants.clone(),
                    measure,
                    overrides: MeasureOverrides::default(),
                    baseline: manifest.report.baseline.clone(),
                    compare: manifest.compare,
                    files,
                    absolute: std::path::absolute(&manifest.path)
                        .ok()
                        .map(|p| p.display().to_string()),
                    sources: (manifest.custom.as_ref())
                        .map(|c| crate::manifest::record_sources(&c.sources))
                        .unwrap_or_default(),
                },
                environment: crate::record::Environment {
                    // A study's own kernels include CUDA's headers from where kbench found them.
                    cuda_headers: (manifest.custom.is_some())
                        .then(|| crate::device::headers::cuda_headers().describe()),
                    ..crate::env::detect()
                },
                started_at: now.to_rfc3339(),
                resumed_at: Vec::new(),
                finished_at: None,
                complete: planned_cases == 0,
                planned_cases,
                cases: Vec::new(),
                claims: Vec::new(),
                shard,
                merged_from: Vec::new(),
            },
            journal,
            journal_synced: Instant::now(),
        })
    }

    /// Writes a new file's first record; one that cannot be written is removed, with its
    /// journal, so a failed start leaves nothing behind.
    fn write_or_give_up(&mut self) -> Result<()> {
        let written = self.write();
        if written.is_err() {
            let _ = fs::remove_file(&self.path);
            let _ = fs::remove_file(journal_path(&self.path));
        }
        written
    }

    /// An unfinished results file, to be completed by `kbench run --resume`: locked, and read
    /// with its journal (folded into the file when the resumed run compacts it).
    pub fn resume(path: &Path) -> Result<ResultsFile> {
        let journal = lock_journal(path)?;
        let mut doc = load_results(path)?;
        doc.resumed_at.push(chrono::Utc::now().to_rfc3339());
        crate::env::restart_load(&mut doc.environment);
        if doc.cases.len() >= doc.planned_cases && !doc.complete {
            doc.complete = true;
            doc.finished_at = Some(chrono::Utc::now().to_rfc3339());
            crate::env::finish_load(&mut doc.environment);
        }
        // A line torn by a kill or a full disk would glue itself to the next one appended.
        let journaled = fs::read(journal_path(path)).unwrap_or_default();
        let whole_lines = journaled
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        if whole_lines < journaled.len() {
            journal
                .file
                .set_len(whole_lines as u64)
                .with_context(|| format!("cannot repair {}", journal_path(path).display()))?;
        }
        let file = ResultsFile {
            path: path.to_path_buf(),
            doc,
            journal,
            journal_synced: Instant::now(),
        };
        // A run killed while renaming leaves its temporary file: the lock says no one writes it.
        let _ = fs::remove_file(path.with_extension("json.tmp"));
        Ok(file)
    }

    /// Records a finished case: one line appended to the journal (the JSON file as a whole is
    /// rewritten only when the study completes).
    pub fn push(&mut self, case: CaseResult) -> Result<()> {
        let mut line = serde_json::to_vec(&case).context("a case result serializes")?;
        line.push(b'\n');
        self.doc.cases.push(case);
        let journal = journal_path(&self.path);
        // One write call per line: a kill leaves at most a torn last line, which readers skip.
        self.journal
            .file
            .write_all(&line)
            .with_context(|| format!("cannot write {}", journal.display()))?;
        if self.journal_synced.elapsed() >= JOURNAL_SYNC_INTERVAL {
            self.journal
                .file
                .sync_data()
                .with_context(|| format!("cannot write {}", journal.display()))?;
            self.journal_synced = Instant::now();
        }
        if self.doc.cases.len() == self.doc.planned_cases {
            self.doc.complete = true;
            self.doc.finished_at = Some(chrono::Utc::now().to_rfc3339());
            crate::env::finish_load(&mut self.doc.environment);
            self.compact()?;
        }
        Ok(())
    }

    /// Records a GPU a case opened: the first is `environment.device` too; each other one (by
    /// its host and PCI bus id: a resume may run on another host) is added to
    /// `environment.devices`.
    pub fn set_device(&mut self, device: &DeviceFingerprint) -> Result<()> {
        let env = &mut self.doc.environment;
        // A file from before `devices` was recorded names its one GPU in `device` alone.
        if env.devices.is_empty() {
            env.devices.extend(env.device.clone());
        }
        let key = device.key(&env.host);
        if env.devices.iter().any(|d| d.key(&env.host) == key) {
            return Ok(());
        }
        env.devices.push(device.clone());
        if env.device.is_none() {
            env.device = Some(device.clone());
        }
        self.compact()
    }

    pub fn set_gpu_unavailable(&mut self, reason: &str) -> Result<()> {
        if self.doc.environment.gpu_unavailable.as_deref() != Some(reason) {
            self.doc.environment.gpu_unavailable = Some(reason.to_string());
            self.compact()?;
        }
        Ok(())
    }

    /// Records the claims' verdicts and writes the file.
    pub fn set_claims(&mut self, claims: Vec<crate::record::ClaimVerdict>) -> Result<()> {
        self.doc.claims = claims;
        self.compact()
    }

    /// Folds the journal into the JSON file: the whole record is written and renamed into place,
    /// then the journal emptied. A kill between the two leaves cases in both, which
    /// `load_results` reads once.
    pub fn compact(&mut self) -> Result<()> {
        // Cases run on several GPUs finish out of order; the file keeps them in plan order.
        self.doc.cases.sort_by_key(|c| c.index);
        self.write()?;
        let journal = journal_path(&self.path);
        self.journal
            .file
            .set_len(0)
            .with_context(|| format!("cannot empty {}", journal.display()))
    }

    fn write(&self) -> Result<()> {
        write_json_atomically(&self.path, &self.doc)
    }
}

/// Where a run keeps `name` of its `what` beside the results file: `<stem>-<what>/<name>`, as a
/// path relative to the results file's folder (what the results record), and that folder.
pub fn beside(results_path: &Path, what: &str, name: &str) -> (PathBuf, PathBuf) {
    let folder = results_path.parent().unwrap_or(Path::new("."));
    let stem = results_path
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy();
    let relative = PathBuf::from(format!("{stem}-{what}")).join(name);
    (folder.to_path_buf(), relative)
}

/// Writes a case's arrays as `.npy` files in `<results stem>-outputs/case-<index>-<variant>/`
/// beside the results file and returns their paths relative to the results file's folder.
pub fn save_arrays(
    results_path: &Path,
    index: usize,
    variant: &str,
    arrays: &[(String, &HostData)],
) -> Result<Vec<String>> {
    let (folder, relative) = beside(
        results_path,
        "outputs",
        &format!("case-{index:04}-{variant}"),
    );
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

/// The most bytes a results file (or its journal) may have: MAX_CASES cases with their samples
/// fit in far less; a device or a runaway file is refused instead of read until memory runs out.
pub const MAX_RESULTS_BYTES: u64 = 2 << 30;

/// Reads a results file, with the cases its journal holds that the file does not yet.
pub fn load_results(path: &std::path::Path) -> Result<ResultsDoc> {
    let text = read_regular_text(path, "a results file", MAX_RESULTS_BYTES)?;
    // The version is checked before the fields, so a file of another version is refused for
    // that, not for the first field that changed.
    let value = serde_json::from_str::<serde_json::Value>(&text)
        .with_context(|| format!("{} is not JSON", path.display()))?;
    let version = value.get("schema_version").map(|v| v.as_u64());
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
    results_check::check_strings(&value, "").map_err(|e| anyhow!("{}: {e}", path.display()))?;
    drop(value);
    let mut doc: ResultsDoc = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a kbench results file", path.display()))?;
    // An edited file must not reach `shard::select` (a remainder by zero) or name no shard.
    if let Some(shard) = doc.shard {
        if let Err(why) = shard.check() {
            bail!(
                "{}: \"shard\": {{\"index\": {}, \"count\": {}}} is not a shard: {why}; was the file edited?",
                path.display(),
                shard.index,
                shard.count
            );
        }
    }
    let journal = journal_path(path);
    match fs::metadata(&journal) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            results_check::check_cases(&path.display().to_string(), &mut doc)?;
            return Ok(doc);
        }
        _ => {}
    }
    let lines = read_regular_file(&journal, "a results journal", MAX_RESULTS_BYTES)?;
    // Cases the file already holds came back from a compaction the journal outlived.
    let in_file: HashSet<usize> = doc.cases.iter().map(|c| c.index).collect();
    let complete_lines = match lines.iter().rposition(|b| *b == b'\n') {
        Some(last) => &lines[..=last],
        // No complete line: at most one torn by a kill.
        None => &[][..],
    };
    for (number, line) in complete_lines.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        let case: CaseResult = serde_json::from_slice(line).with_context(|| {
            format!(
                "{}:{}: not a case result (the journal of {})",
                journal.display(),
                number + 1,
                path.display()
            )
        })?;
        if !in_file.contains(&case.index) {
            doc.cases.push(case);
        }
    }
    // Cases run on several GPUs are journaled as they finish, out of plan order.
    doc.cases.sort_by_key(|c| c.index);
    results_check::check_cases(&path.display().to_string(), &mut doc)?;
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
