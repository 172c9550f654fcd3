//! A run session, `kbench run`'s work as a library call: a `Request` in (manifests or a results
//! file to resume, and the options), an `Outcome` out (the studies run, their failed cases and
//! refuted claims, or why the session stopped), and everything a person would see said through
//! a `Sink` (a terminal's bar, tables and notes; a test's record), so a session runs without a
//! terminal.
//!
//! Every manifest is loaded and planned, and every results file created, before the first case
//! runs: a mistake in the third manifest stops the run before the first is measured. Each study
//! then runs (`study::run_study`), its claims are judged, its exports and baseline written, and
//! its tables or JSON handed to the sink.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::{bail, Context};

use crate::claims;
use crate::exit::Exit;
use crate::manifest::{self, Manifest};
use crate::plan::{self, Case};
use crate::record::{ClaimStatus, MeasureOverrides, ShardRecord};
use crate::report::export::{self, Export};
use crate::results::{self, ResultsFile};
use crate::run::study::{self, Progress, RunOptions, StudyEnd};
use crate::shard;
use crate::vocab::Backend;

/// What to run.
pub enum Source {
    /// Manifest files or glob patterns, as `kbench run` takes them.
    Manifests(Vec<String>),
    /// An interrupted run's results file: the cases it lacks are run into it.
    Resume(PathBuf),
}

/// A session's request: what to run, how, and where the results go.
pub struct Request {
    pub source: Source,
    /// How every study's cases run (workers, lanes, kernels, the measurement overrides, the
    /// interrupt flag).
    pub options: RunOptions,
    /// Each study's results go to `<out_dir>/<study>/<timestamp>.json`.
    pub out_dir: PathBuf,
    pub shard: Option<ShardRecord>,
    /// `--case NAME`: only the cases so named (`shard::case_name`); empty: every case.
    pub cases: Vec<String>,
    /// Also written for each study as it finishes.
    pub exports: Vec<Export>,
    /// Each study's results are also added to this baseline.
    pub save_baseline: Option<String>,
    /// A refuted claim fails the session (exit 3) when no case failed.
    pub check_claims: bool,
}

/// Where a session's output goes. `case_finished` (from `Progress`) comes while a study runs,
/// between `study_started` and `cases_done`.
pub trait Sink: Progress {
    /// A study is about to run its cases.
    fn study_started(&self, start: &StudyStart);
    /// The study's cases are done, or stopped: no more `case_finished` for it.
    fn cases_done(&self);
    /// The study's results, complete, judged and saved.
    fn study_finished(&self, report: &export::Report, results_path: &Path);
    /// The study's results were added to the baseline `name`, as `path`.
    fn baseline_saved(&self, name: &str, path: &Path);
    /// A note, warning or error for the person running it, whole (`error: ...`).
    fn diagnostic(&self, text: &str);
}

/// What a study is about to run, for the sink's first line of it.
pub struct StudyStart<'a> {
    pub manifest: &'a Manifest,
    /// The cases still to run (a resumed study's missing ones).
    pub cases: usize,
    pub results_path: &'a Path,
    pub shard: Option<ShardRecord>,
    /// The GPUs the cases run on, by their numbers; one lane: no GPU named.
    pub gpus: Vec<u32>,
}

/// What a session did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The studies that ran to their end, in order.
    pub studies: Vec<StudyOutcome>,
    /// Why the session stopped before its end, if it did (the sink has said why).
    pub stopped: Option<Stop>,
    check_claims: bool,
}

/// A study that ran to its end.
#[derive(Debug)]
pub struct StudyOutcome {
    pub study: String,
    pub results_path: PathBuf,
    pub failed_cases: usize,
    pub refuted_claims: usize,
}

/// Why a session stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A manifest, the resumed file or an output was wrong or could not be written.
    BadInput,
    /// Ctrl-C or SIGTERM: the results file holds every finished case.
    Interrupted,
}

impl Outcome {
    /// The exit status: a stop first, then failed cases, then (with `check_claims`) refuted
    /// claims.
    pub fn exit(&self) -> Exit {
        let failed = self.studies.iter().any(|s| s.failed_cases > 0);
        let refuted = self.studies.iter().any(|s| s.refuted_claims > 0);
        match self.stopped {
            Some(Stop::BadInput) => Exit::BadInput,
            Some(Stop::Interrupted) => Exit::Interrupted,
            None if failed => Exit::CasesFailed,
            None if refuted && self.check_claims => Exit::ClaimsRefuted,
            None => Exit::Ok,
        }
    }
}

/// Runs the request's studies one after another, saying everything through `sink`.
pub fn run(request: &Request, sink: &dyn Sink) -> Outcome {
    let mut outcome = Outcome {
        check_claims: request.check_claims,
        ..Outcome::default()
    };
    let studies = match prepare(request, sink) {
        Ok(studies) => studies,
        Err(stop) => {
            outcome.stopped = Some(stop);
            return outcome;
        }
    };
    for study in studies {
        match run_one(request, study, sink) {
            Ok(done) => outcome.studies.push(done),
            Err(stop) => {
                outcome.stopped = Some(stop);
                break;
            }
        }
    }
    outcome
}

/// A study ready to run: its manifest, the cases still to run and the results file they go to.
struct Prepared {
    manifest: Manifest,
    cases: Vec<Case>,
    results: ResultsFile,
}

/// Says `error` and stops the session as bad input.
fn refuse(sink: &dyn Sink, error: anyhow::Error) -> Stop {
    sink.diagnostic(&format!("error: {error:#}"));
    Stop::BadInput
}

/// Every study of the request, loaded, checked and with its results file created.
fn prepare(request: &Request, sink: &dyn Sink) -> Result<Vec<Prepared>, Stop> {
    let args = match &request.source {
        Source::Resume(path) => {
            let resumed = resume_study(path, &request.options.overrides).and_then(|study| {
                check_exports_free(request, &study.manifest)?;
                Ok(vec![study])
            });
            return resumed.map_err(|e| refuse(sink, e));
        }
        Source::Manifests(args) => args,
    };
    let loaded = load_all(args, &request.options.interrupted, sink)?;
    check_before_running(request, &loaded).map_err(|e| refuse(sink, e))?;
    note_idle_mock_events(request, &loaded, sink);
    let named: Vec<(&Manifest, &[Case])> = loaded.iter().map(|(m, c)| (m, c.as_slice())).collect();
    shard::check_named(&named, &request.cases).map_err(|e| refuse(sink, e))?;
    let mut studies = Vec::new();
    for (manifest, cases) in loaded {
        let cases = shard::select(&manifest, cases, request.shard);
        let cases = shard::select_named(&manifest, cases, &request.cases);
        if cases.is_empty() && !request.cases.is_empty() {
            // `--case` names none of this study's cases: it has nothing to run.
            continue;
        }
        let overrides = &request.options.overrides;
        let measure = overrides.apply(&manifest.measure);
        if let Some(note) = overrides.sample_count_note(&manifest.measure, &measure) {
            sink.diagnostic(&format!("note: {}: {note}", manifest.path.display()));
        }
        let created = ResultsFile::create_overridden(
            &request.out_dir,
            &manifest,
            cases.len(),
            overrides,
            request.shard,
        );
        let results = created.map_err(|e| refuse(sink, e))?;
        studies.push(Prepared {
            manifest,
            cases,
            results,
        });
    }
    Ok(studies)
}

/// What can be refused before any results file exists: a `--kernels-dir` source a study needs
/// that cannot be read (GPU or not), one export path for several studies, and a `--results`
/// file that exists.
fn check_before_running(request: &Request, loaded: &[(Manifest, Vec<Case>)]) -> anyhow::Result<()> {
    let kernels = &request.options.kernels;
    if kernels.dir.is_some() {
        for (manifest, _) in loaded {
            let uses_cuda = manifest.variants.iter().any(|v| v.backend == Backend::Cuda);
            if uses_cuda {
                kernels.read(&manifest.algorithm.spec().kernel_file)?;
            }
        }
    }
    let shared = request.exports.iter().find(|e| !e.path.contains("{study}"));
    if let (Some(e), 2..) = (shared, loaded.len()) {
        bail!(
            "{}: {} studies would write the same file; put {{study}} in the path",
            e.requested_as(),
            loaded.len()
        );
    }
    for (manifest, _) in loaded {
        check_exports_free(request, manifest)?;
    }
    Ok(())
}

/// A `--results` file that is there already is refused before anything runs: results measured
/// before are never written over (unless `--overwrite-results`).
fn check_exports_free(request: &Request, manifest: &Manifest) -> anyhow::Result<()> {
    (request.exports.iter()).try_for_each(|e| e.check_free(&manifest.study.name))
}

/// A mock device's scripted event that matches none of the CUDA cases to run is most likely a
/// misspelt variant or parameter: noted, not refused.
fn note_idle_mock_events(request: &Request, loaded: &[(Manifest, Vec<Case>)], sink: &dyn Sink) {
    let Some(mock) = &request.options.mock_gpu else {
        return;
    };
    let cuda_cases = (loaded.iter()).flat_map(|(manifest, cases)| {
        (cases.iter())
            .map(|case| (&manifest.variants[case.variant], &case.params))
            .filter(|(variant, _)| variant.backend == Backend::Cuda)
            .map(|(variant, params)| (variant.name.as_str(), params))
    });
    for line in mock.idle_events(cuda_cases) {
        sink.diagnostic(&format!(
            "note: {}:{line}: this mock event strikes none of the CUDA cases to run",
            mock.path.display()
        ));
    }
}

/// Runs one study's cases, then judges its claims and writes its exports and baseline.
fn run_one(request: &Request, study: Prepared, sink: &dyn Sink) -> Result<StudyOutcome, Stop> {
    let Prepared {
        manifest,
        cases,
        mut results,
    } = study;
    let lanes = &request.options.lanes;
    sink.study_started(&StudyStart {
        manifest: &manifest,
        cases: cases.len(),
        results_path: &results.path,
        shard: results.doc.shard,
        gpus: match lanes.len() {
            1 => Vec::new(),
            _ => lanes.iter().map(|l| l.index).collect(),
        },
    });
    let ran = study::run_study(&manifest, &cases, &request.options, &mut results, sink);
    sink.cases_done();
    match ran {
        Ok(StudyEnd::Finished) => {}
        Ok(StudyEnd::Interrupted) => return Err(interrupted(&mut results, sink)),
        Err(e) => {
            sink.diagnostic(&format!("error: {e:#}"));
            // On a full disk this may fail too: the journal then keeps the cases.
            let _ = results.compact();
            sink.diagnostic(&format!("results so far are in {}", results.path.display()));
            return Err(Stop::BadInput);
        }
    }
    let failed_cases = results.doc.cases.iter().filter(|c| c.failed()).count();
    let verdicts = claims::judge_all(&manifest, &results.doc);
    let refuted_claims = (verdicts.iter())
        .filter(|v| v.status == ClaimStatus::Refuted)
        .count();
    results.set_claims(verdicts).map_err(|e| refuse(sink, e))?;
    let report = export::Report {
        doc: &results.doc,
        manifest: &manifest,
        declared_only: false,
        width: None,
    };
    for e in &request.exports {
        match e.write(&report, &results.path) {
            Ok(path) => sink.diagnostic(&format!("wrote {}", path.display())),
            Err(err) => {
                sink.diagnostic(&format!("error: {err:#}"));
                sink.diagnostic(&format!("the results are in {}", results.path.display()));
                return Err(Stop::BadInput);
            }
        }
    }
    if let Some(name) = &request.save_baseline {
        let path = save_baseline(&request.out_dir, name, &results).map_err(|e| refuse(sink, e))?;
        sink.baseline_saved(name, &path);
    }
    sink.study_finished(&report, &results.path);
    Ok(StudyOutcome {
        study: manifest.study.name.clone(),
        results_path: results.path.clone(),
        failed_cases,
        refuted_claims,
    })
}

/// An interrupted study's file folded into one (the journal holds every finished case
/// already), and how to finish it.
fn interrupted(results: &mut ResultsFile, sink: &dyn Sink) -> Stop {
    if let Err(e) = results.compact() {
        sink.diagnostic(&format!(
            "warning: {e:#} (the cases stay in {})",
            results::journal_path(&results.path).display()
        ));
    }
    sink.diagnostic(&format!(
        "interrupted: {} of {} cases are in {}; finish with `kbench run --resume {}`",
        results.doc.cases.len(),
        results.doc.planned_cases,
        results.path.display(),
        results.path.display()
    ));
    Stop::Interrupted
}

/// Adds a finished study's results to the baseline `name`; returns the copy's path.
fn save_baseline(out_dir: &Path, name: &str, results: &ResultsFile) -> anyhow::Result<PathBuf> {
    let dir = results::baseline_dir(out_dir, &results.doc.study.name, name);
    let path = dir.join(results.path.file_name().expect("results files have a name"));
    std::fs::create_dir_all(&dir)
        .map_err(anyhow::Error::from)
        .and_then(|()| results::write_json_atomically(&path, &results.doc))
        .with_context(|| format!("cannot save baseline {}", path.display()))?;
    Ok(path)
}

/// Loads and plans every manifest before anything runs; says every error, not just the first.
/// Planning stops soon after `interrupted` is set.
fn load_all(
    args: &[String],
    interrupted: &AtomicBool,
    sink: &dyn Sink,
) -> Result<Vec<(Manifest, Vec<Case>)>, Stop> {
    let paths = crate::expand_manifest_args(args).map_err(|e| refuse(sink, anyhow::anyhow!(e)))?;
    let mut studies = Vec::new();
    let mut failed = false;
    for path in paths {
        match load_and_plan(&path, interrupted) {
            Ok(study) => studies.push(study),
            Err(NotPlanned::Interrupted) => {
                sink.diagnostic(&format!(
                    "interrupted while planning {}: nothing was run",
                    path.display()
                ));
                return Err(Stop::Interrupted);
            }
            Err(NotPlanned::Error(e)) => {
                sink.diagnostic(&format!("{e}\n"));
                failed = true;
            }
        }
    }
    if failed {
        return Err(Stop::BadInput);
    }
    Ok(studies)
}

/// Why a manifest gives no study.
pub enum NotPlanned {
    /// Its error, formatted with the file and line.
    Error(String),
    Interrupted,
}

/// One manifest and its cases (planning refuses a manifest that plans no case, since a run of
/// it would measure nothing and say it passed).
pub fn load_and_plan(
    path: &Path,
    interrupted: &AtomicBool,
) -> Result<(Manifest, Vec<Case>), NotPlanned> {
    let m = manifest::load(path).map_err(|e| NotPlanned::Error(e.to_string()))?;
    // A custom study's launches against its kernels' parameters (NVRTC, no GPU), before anything runs.
    manifest::check_kernel_params(&m).map_err(|e| NotPlanned::Error(e.to_string()))?;
    match plan::plan(&m, interrupted) {
        Ok(cases) => Ok((m, cases)),
        Err(plan::PlanError::Interrupted) => Err(NotPlanned::Interrupted),
        Err(plan::PlanError::Manifest(e)) => Err(NotPlanned::Error(e.to_string())),
    }
}

/// A results file is data: resuming it runs a custom study's reference or check command only
/// where the manifest it was recorded from is on disk and says exactly what the file embeds, so
/// an edited (or a stranger's) results file cannot name a program to run.
fn refuse_commands_not_on_disk(
    manifest: &Manifest,
    doc: &crate::record::ResultsDoc,
    results: &Path,
) -> anyhow::Result<()> {
    let Some(def) = &manifest.custom else {
        return Ok(());
    };
    let commands: Vec<String> = [&def.reference_command, &def.check_command]
        .into_iter()
        .flatten()
        .map(|c| format!("`{}`", c.argv.join(" ")))
        .collect();
    if commands.is_empty() {
        return Ok(());
    }
    let recorded_from = Path::new(doc.manifest.absolute.as_ref().unwrap_or(&doc.manifest.path));
    let why = match std::fs::read_to_string(recorded_from) {
        Ok(text) if text == doc.manifest.toml => return Ok(()),
        Ok(_) => "differs from the one embedded in the results".to_string(),
        Err(e) => format!("cannot be read ({e})"),
    };
    bail!(
        "cannot resume {}: its study runs {}, and the manifest it was recorded from, {}, {why}; \
         a results file is data, so resuming runs only the commands a manifest on disk names: \
         restore that manifest as it was, or start a new run",
        results.display(),
        commands.join(" and "),
        recorded_from.display()
    )
}

/// An interrupted study: its manifest (as recorded in the results), the cases it has no result
/// for, and its results file, locked and reopened to be completed. The cases still to run are
/// measured with the settings the file records (the original run's, command-line overrides
/// included); an override on the resume's own command line that differs is refused, so one file
/// never holds two settings.
fn resume_study(path: &Path, overrides: &MeasureOverrides) -> anyhow::Result<Prepared> {
    let results = ResultsFile::resume(path)?;
    let doc = &results.doc;
    let mut manifest = manifest::parse_recorded(doc, path)?;
    let recorded = &doc.manifest.measure;
    let conflicts = overrides.conflicts(recorded);
    if !conflicts.is_empty() {
        bail!(
            "{} was measured with other settings than this resume asks for:\n{}\nresume without them (the file's settings are used), or start a new run",
            path.display(),
            conflicts.join("\n")
        );
    }
    manifest.measure = recorded.clone();
    let plan = plan::expand(&manifest)?;
    let planned = shard::select(&manifest, plan.clone(), doc.shard).len();
    if doc.planned_cases != planned {
        bail!(
            "{} plans {} cases, but its own manifest plans {planned}{}: was the file edited, or written by another kbench?",
            path.display(),
            doc.planned_cases,
            doc.shard.map_or(String::new(), |s| format!(" in shard {}/{}", s.index, s.count))
        );
    }
    let mut done = HashSet::new();
    for case in &doc.cases {
        plan::check_recorded(&manifest, &plan, case, path)?;
        if !done.insert(case.index) {
            bail!(
                "{}: {} is in the file twice; was the file edited or merged?",
                path.display(),
                plan::describe_recorded(case)
            );
        }
    }
    let cases: Vec<Case> = shard::select(&manifest, plan, doc.shard)
        .into_iter()
        .filter(|c| !done.contains(&c.index))
        .collect();
    if !cases.is_empty() {
        manifest::check_unchanged(&doc.manifest.files)
            .and_then(|()| manifest::check_sources_unchanged(&doc.manifest.sources))
            .map_err(|e| anyhow::anyhow!("cannot resume {}: {e}", path.display()))?;
        refuse_commands_not_on_disk(&manifest, doc, path)?;
    }
    Ok(Prepared {
        manifest,
        cases,
        results,
    })
}
