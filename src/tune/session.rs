//! A tune, start to end: the manifest loaded and planned, its `[tune]` table checked, the plan
//! grouped into problem points (`space`), then rounds of evaluation: each problem point's
//! strategy proposes its next configurations, and all the proposals of a round run as one batch
//! through the machinery `kbench run` uses (`run::study::run_study`: worker processes, the
//! correctness checks, time limits, the GPU or the mock device, `--devices` lanes), each
//! evaluation journaled as it finishes. Once every budget is spent, the winners are decided
//! (`decide`: the top few re-measured in rounds, each round in a fresh worker) and the
//! results written (`output`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};

use super::decide::{self, Contender, Rule, Verdict};
use super::journal::{self, Evaluation, Journal, Start};
use super::output::{self, Decided, ProblemResult, TuneDoc, Winner};
use super::space::{self, Problem};
use super::spec::{self, Budget, StrategyKind, TuneSpec};
use super::strategy::{self, Observed};
use crate::errln;
use crate::exit::Exit;
use crate::manifest::Manifest;
use crate::plan::Case;
use crate::record::{CaseResult, CaseStatus};
use crate::results::ResultsFile;
use crate::run::session::{load_and_plan, NotPlanned};
use crate::run::study::{self, case_line, Progress, RunOptions, StudyEnd};

/// What to tune.
pub enum TuneSource {
    Manifest(PathBuf),
    /// A tune's folder (or a file in it) to finish.
    Resume(PathBuf),
}

/// The command line's say over the manifest's `[tune]`.
#[derive(Debug, Clone, Default)]
pub struct TuneOverrides {
    pub strategy: Option<StrategyKind>,
    pub budget: Option<Budget>,
    pub seed: Option<u64>,
}

/// A tune's request.
pub struct TuneRequest {
    pub source: TuneSource,
    pub overrides: TuneOverrides,
    pub options: RunOptions,
    /// The tune's folder goes under `<out_dir>/<study>/`.
    pub out_dir: PathBuf,
    pub export_header: Option<PathBuf>,
    pub export_manifest: Option<PathBuf>,
    /// Also print the tune results document on stdout.
    pub json: bool,
}

/// How many configurations of one problem point the exhaustive and random strategies send in
/// one batch: enough to keep every lane busy, few enough that a time budget is not overrun by
/// much.
const BATCH_PER_PROBLEM: usize = 16;

/// A tune in progress.
struct Tune {
    manifest: Manifest,
    spec: TuneSpec,
    problems: Vec<Problem>,
    dir: PathBuf,
    journal: Journal,
    start: Start,
    /// Each problem point's evaluations, in the order made.
    history: Vec<Vec<Evaluation>>,
    /// The kbench results files the evaluations and re-measurements went to.
    results_files: Vec<PathBuf>,
}

/// Runs the tune; says everything on stdout and stderr, and returns the exit status.
pub fn run(request: &TuneRequest) -> Exit {
    let mut tune = match prepare(request) {
        Ok(tune) => tune,
        Err(e) => {
            errln!("{e}");
            return Exit::BadInput;
        }
    };
    errln!(
        "tuning `{}` ({}): {} problem points, {} configurations, strategy {} -> {}",
        tune.manifest.study.name,
        tune.manifest.path.display(),
        tune.problems.len(),
        tune.problems.iter().map(|p| p.configs.len()).sum::<usize>(),
        tune.spec.strategy.name(),
        tune.dir.display()
    );
    // The evaluations and re-measurements of a problem point share its reference answer, in
    // a folder that goes with the tune: a re-measurement's fresh worker does not run a
    // reference command again.
    let mut options = request.options.clone();
    options.shared_references = (tempfile::Builder::new().prefix(".references-"))
        .tempdir_in(&tune.dir)
        .ok()
        .map(std::sync::Arc::new);
    let ended = evaluate(&mut tune, &options).and_then(|end| match end {
        StudyEnd::Finished => decide_all(&mut tune, &options),
        StudyEnd::Interrupted => Ok((StudyEnd::Interrupted, Vec::new())),
    });
    match ended {
        Err(e) => {
            errln!("error: {e:#}");
            errln!(
                "the evaluations so far are journaled in {}",
                tune.dir.display()
            );
            Exit::BadInput
        }
        Ok((StudyEnd::Interrupted, _)) => {
            let done: usize = tune.history.iter().map(Vec::len).sum();
            errln!(
                "interrupted: {done} evaluations are journaled in {}; finish with `kbench tune --resume {}`",
                tune.dir.display(),
                tune.dir.display()
            );
            Exit::Interrupted
        }
        Ok((StudyEnd::Finished, winners)) => finish(&tune, request, winners),
    }
}

/// The manifest and `[tune]` loaded and checked, the tune's folder and journal made (or, to
/// resume, reopened and replayed).
fn prepare(request: &TuneRequest) -> Result<Tune> {
    let (manifest_path, resumed) = match &request.source {
        TuneSource::Manifest(path) => (path.clone(), None),
        TuneSource::Resume(path) => {
            let dir = tune_dir_of(path);
            let decided = dir.join(output::TUNE_JSON);
            if decided.exists() {
                bail!(
                    "the tune in {} finished: its results are in {}; start a new tune to tune again",
                    dir.display(),
                    decided.display()
                );
            }
            let (journal, start, evaluations) = Journal::resume(&dir)?;
            (
                start.manifest_path.clone(),
                Some((dir, journal, start, evaluations)),
            )
        }
    };
    let (manifest, cases) = load(&manifest_path, &request.options)?;
    let mut spec = spec::load(&manifest).map_err(|e| anyhow!("{e}"))?;
    apply_overrides(&mut spec, &request.overrides);
    let problems = space::problems(&manifest, &cases, &spec.axes);
    let Some((dir, journal, start, evaluations)) = resumed else {
        let dir = new_tune_dir(&request.out_dir, &manifest.study.name, spec.strategy)?;
        let start = Start {
            // Absolute, so that the tune resumes from any folder.
            manifest_path: std::path::absolute(&manifest.path).unwrap_or(manifest.path.clone()),
            manifest_toml: manifest.source.clone(),
            spec: spec.clone(),
            overrides: request.options.overrides.clone(),
            started_at: chrono::Utc::now().to_rfc3339(),
        };
        let journal = Journal::create(&dir, &start)?;
        let history = vec![Vec::new(); problems.len()];
        return Ok(Tune {
            manifest,
            spec,
            problems,
            dir,
            journal,
            start,
            history,
            results_files: Vec::new(),
        });
    };
    check_resumable(&manifest, &start, request)?;
    let spec = journal::checked_spec(&journal.path, &start.spec, &spec)?;
    journal::check_evaluations(&journal.path, &evaluations, &problems)?;
    let mut history = vec![Vec::new(); problems.len()];
    for e in evaluations {
        history[e.problem].push(e);
    }
    Ok(Tune {
        manifest,
        spec,
        problems,
        dir,
        journal,
        start,
        history,
        results_files: Vec::new(),
    })
}

/// The manifest, checked and planned as `kbench run` does.
fn load(path: &Path, options: &RunOptions) -> Result<(Manifest, Vec<Case>)> {
    match load_and_plan(path, &options.interrupted) {
        Ok(loaded) => Ok(loaded),
        Err(NotPlanned::Error(e)) => Err(anyhow!("{e}")),
        Err(NotPlanned::Interrupted) => Err(anyhow!("interrupted while planning: nothing ran")),
    }
}

fn apply_overrides(spec: &mut TuneSpec, overrides: &TuneOverrides) {
    if let Some(strategy) = overrides.strategy {
        spec.strategy = strategy;
        // Exhaustive asked for on the command line means every configuration, unless the
        // command line also gives a budget.
        if strategy == StrategyKind::Exhaustive && overrides.budget.is_none() {
            spec.budget = Budget::Everything;
        }
    }
    if let Some(budget) = overrides.budget {
        spec.budget = budget;
    }
    if let Some(seed) = overrides.seed {
        spec.seed = seed;
    }
}

/// A resume continues the same tune: the manifest as it was, the settings it started with.
fn check_resumable(manifest: &Manifest, start: &Start, request: &TuneRequest) -> Result<()> {
    if manifest.source != start.manifest_toml {
        bail!(
            "{} changed since the tune started: resuming would mix two studies; start a new tune",
            manifest.path.display()
        );
    }
    let o = &request.overrides;
    if o.strategy.is_some() || o.budget.is_some() || o.seed.is_some() {
        bail!("a resumed tune keeps the strategy, budget and seed it started with: resume without --strategy, --budget-* or --seed");
    }
    if !request.options.overrides.is_empty() && request.options.overrides != start.overrides {
        bail!("a resumed tune is measured with the settings it started with: resume without --warmup, --min-samples, --max-samples, --max-time-s or --timeout-s");
    }
    Ok(())
}

/// `--resume` takes the tune's folder or any file in it.
fn tune_dir_of(path: &Path) -> PathBuf {
    if path.is_file() {
        path.parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
    } else {
        path.to_path_buf()
    }
}

/// `<out_dir>/<study>/tune-<stamp>-<strategy>`, never an existing folder.
fn new_tune_dir(out_dir: &Path, study: &str, strategy: StrategyKind) -> Result<PathBuf> {
    let parent = out_dir.join(study);
    std::fs::create_dir_all(&parent)
        .with_context(|| format!("cannot create the output folder {}", parent.display()))?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    for n in 1..1000 {
        let suffix = if n == 1 {
            String::new()
        } else {
            format!("-{n}")
        };
        let dir = parent.join(format!("tune-{stamp}-{}{suffix}", strategy.name()));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    bail!(
        "cannot find a free name for the tune's folder in {}",
        parent.display()
    )
}

/// The seed of problem point `p`'s strategy.
pub fn problem_seed(seed: u64, p: usize) -> u64 {
    seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ (p as u64)
}

/// How many more configurations problem point `p` may evaluate.
fn budget_left(budget: Budget, history: &[Evaluation]) -> usize {
    match budget {
        Budget::Everything => usize::MAX,
        Budget::Evaluations(n) => n.saturating_sub(history.len()),
        Budget::TimeS(limit) => {
            let spent: f64 = history.iter().map(|e| e.wall_s).sum();
            if spent < limit {
                usize::MAX
            } else {
                0
            }
        }
    }
}

/// A problem point's history as its strategy sees it.
pub fn observed(history: &[Evaluation]) -> Vec<Observed> {
    (history.iter())
        .map(|e| Observed {
            config: e.config,
            time_s: e.median_s,
        })
        .collect()
}

/// Evaluates in batches until every problem point's budget is spent or its space exhausted.
fn evaluate(tune: &mut Tune, options: &RunOptions) -> Result<StudyEnd> {
    let mut results = ResultsFile::create_overridden(
        &tune.dir.join("evaluations"),
        &tune.manifest,
        tune.problems.iter().map(|p| p.configs.len()).sum(),
        &options.overrides,
        None,
    )?;
    tune.results_files.push(results.path.clone());
    loop {
        let mut batch: Vec<(usize, usize)> = Vec::new();
        for (p, problem) in tune.problems.iter().enumerate() {
            let left = budget_left(tune.spec.budget, &tune.history[p]);
            let want = match tune.spec.strategy {
                StrategyKind::Exhaustive | StrategyKind::Random => left.min(BATCH_PER_PROBLEM),
                StrategyKind::Anneal | StrategyKind::Bayes => left.min(1),
            };
            if want == 0 {
                continue;
            }
            let seed = problem_seed(tune.spec.seed, p);
            let history = observed(&tune.history[p]);
            let proposed =
                strategy::propose(tune.spec.strategy, &problem.space(), &history, want, seed);
            batch.extend(proposed.into_iter().map(|c| (p, c)));
        }
        if batch.is_empty() {
            results.compact()?;
            return Ok(StudyEnd::Finished);
        }
        let end = run_batch(tune, &batch, options, &mut results, Record::Evaluation)?;
        if end == StudyEnd::Interrupted {
            let _ = results.compact();
            return Ok(end);
        }
    }
}

/// What a batch's finished cases are for.
#[derive(Clone, Copy, PartialEq)]
enum Record {
    /// Journaled and added to the problem points' histories.
    Evaluation,
    /// Re-measurements: kept for the decision, not journaled.
    Remeasure,
}

/// Receives a batch's cases as they finish: journals evaluations at once, and keeps every
/// result for the caller.
struct BatchProgress<'a> {
    /// Case index -> (problem point, configuration).
    of_case: HashMap<usize, (usize, usize)>,
    problems: &'a [Problem],
    journal: RefCell<&'a mut Journal>,
    record: Record,
    finished: RefCell<Vec<(usize, usize, CaseResult)>>,
    /// The first journal write that failed.
    error: RefCell<Option<anyhow::Error>>,
}

impl Progress for BatchProgress<'_> {
    fn case_finished(&self, done: usize, total: usize, study: &str, result: &CaseResult) {
        errln!("{}", case_line(done, total, study, result));
        let Some(&(p, c)) = self.of_case.get(&result.index) else {
            return;
        };
        if self.record == Record::Evaluation {
            let values = self.problems[p].configs[c].values.clone();
            let evaluation = Evaluation::of(p, c, values, result);
            if let Err(e) = self.journal.borrow_mut().record(&evaluation) {
                self.error.borrow_mut().get_or_insert(e);
            }
        }
        self.finished.borrow_mut().push((p, c, result.clone()));
    }
}

/// Runs one batch of evaluations (problem point, configuration) through `run_study`, adds each
/// finished one to its point's history, and returns how the batch ended.
fn run_batch(
    tune: &mut Tune,
    batch: &[(usize, usize)],
    options: &RunOptions,
    results: &mut ResultsFile,
    record: Record,
) -> Result<StudyEnd> {
    let (end, finished) = run_cases(tune, batch, options, results, record)?;
    if record == Record::Evaluation {
        for (p, c, result) in finished {
            let values = tune.problems[p].configs[c].values.clone();
            tune.history[p].push(Evaluation::of(p, c, values, &result));
        }
    }
    Ok(end)
}

type Finished = Vec<(usize, usize, CaseResult)>;

/// The batch's cases run, returning each finished one with its problem point and configuration.
fn run_cases(
    tune: &mut Tune,
    batch: &[(usize, usize)],
    options: &RunOptions,
    results: &mut ResultsFile,
    record: Record,
) -> Result<(StudyEnd, Finished)> {
    let cases: Vec<Case> = (batch.iter())
        .map(|&(p, c)| tune.problems[p].configs[c].case.clone())
        .collect();
    let progress = BatchProgress {
        of_case: (batch.iter())
            .map(|&(p, c)| (tune.problems[p].configs[c].case.index, (p, c)))
            .collect(),
        problems: &tune.problems,
        journal: RefCell::new(&mut tune.journal),
        record,
        finished: RefCell::new(Vec::new()),
        error: RefCell::new(None),
    };
    let end = study::run_study(&tune.manifest, &cases, options, results, &progress)?;
    if let Some(e) = progress.error.into_inner() {
        return Err(e);
    }
    Ok((end, progress.finished.into_inner()))
}

/// The decision rule of the tune's `[tune]` table.
fn rule_of(spec: &TuneSpec) -> Rule {
    Rule {
        min_rounds: spec.min_rounds,
        max_rounds: spec.rounds,
        tie_within: spec.tie_within,
    }
}

/// Re-measures every problem point's top configurations in rounds and decides the winners. In
/// each round every contender runs once, interleaved (the order rotates from round to round),
/// in a fresh worker that the point's contenders share for the round (its own `run_study`, so
/// its own process: a new process per round is what the rounds need, and the contenders of a
/// pair then meet the same process's state), all on the first lane's GPU: the rounds compare
/// configurations, not processes or GPUs. A point takes rounds until its decision is settled
/// (`decide::settled`).
fn decide_all(tune: &mut Tune, options: &RunOptions) -> Result<(StudyEnd, Vec<Decided>)> {
    let rule = rule_of(&tune.spec);
    let mut contenders: Vec<Vec<Contender>> = (0..tune.problems.len())
        .map(|p| top_configs(tune, p))
        .collect();
    let mut dropped: Vec<Vec<(usize, String)>> = vec![Vec::new(); tune.problems.len()];
    let mut one_lane = options.clone();
    one_lane.lanes.truncate(1);
    for round in 0..rule.max_rounds {
        let active: Vec<usize> = (0..tune.problems.len())
            .filter(|&p| contenders[p].len() > 1 && !decide::settled(&contenders[p], &rule))
            .collect();
        if active.is_empty() {
            break;
        }
        let cases: usize = active.iter().map(|&p| contenders[p].len()).sum();
        let mut results = ResultsFile::create_overridden(
            &tune.dir.join("rounds"),
            &tune.manifest,
            cases,
            &options.overrides,
            None,
        )?;
        tune.results_files.push(results.path.clone());
        errln!(
            "re-measuring, round {}: {cases} cases, a fresh worker for each problem point",
            round + 1
        );
        for &p in &active {
            let k = contenders[p].len();
            let order: Vec<usize> = (0..k)
                .map(|i| contenders[p][(i + round) % k].config)
                .collect();
            let batch: Vec<(usize, usize)> = order.iter().map(|&c| (p, c)).collect();
            let (end, finished) =
                run_cases(tune, &batch, &one_lane, &mut results, Record::Remeasure)?;
            if end == StudyEnd::Interrupted {
                let _ = results.compact();
                return Ok((end, Vec::new()));
            }
            let medians = (order.iter())
                .map(|&c| {
                    let result = finished.iter().find(|f| f.1 == c).map(|f| &f.2);
                    (c, round_median(result))
                })
                .collect();
            add_round(&mut contenders[p], &mut dropped[p], medians);
        }
        results.compact()?;
    }
    let decided = (0..tune.problems.len())
        .map(|p| winner_of(tune, p, &contenders[p], &rule, &dropped[p]))
        .collect();
    Ok((StudyEnd::Finished, decided))
}

/// The configurations a problem point re-measures (`strategy::contenders`), with no rounds yet.
fn top_configs(tune: &Tune, p: usize) -> Vec<Contender> {
    let history = observed(&tune.history[p]);
    let space = tune.problems[p].space();
    (strategy::contenders(tune.spec.strategy, &space, &history, tune.spec.top).into_iter())
        .map(|config| Contender {
            config,
            round_medians_s: Vec::new(),
        })
        .collect()
}

/// A re-measured case's median, or why it has none (a wrong answer that comes and goes, a
/// fault, a case that did not finish).
fn round_median(result: Option<&CaseResult>) -> Result<f64, String> {
    let Some(result) = result else {
        return Err("re-measurement did not finish".into());
    };
    match (&result.summary, result.status) {
        (Some(s), CaseStatus::Passed) if s.median_s.is_finite() && s.median_s > 0.0 => {
            Ok(s.median_s)
        }
        _ => {
            let reason = (result.reason.clone()).unwrap_or_else(|| result.status.name().into());
            Err(format!("re-measurement {}: {reason}", result.status.name()))
        }
    }
}

/// A round's medians added to the contenders'; a contender whose re-measurement failed is
/// out, with the reason (its earlier rounds go with it, so the rounds stay paired).
fn add_round(
    contenders: &mut Vec<Contender>,
    dropped: &mut Vec<(usize, String)>,
    medians: Vec<(usize, Result<f64, String>)>,
) {
    for (config, median) in medians {
        let Some(at) = contenders.iter().position(|k| k.config == config) else {
            continue;
        };
        match median {
            Ok(m) => contenders[at].round_medians_s.push(m),
            Err(why) => {
                dropped.push((config, why));
                contenders.remove(at);
            }
        }
    }
}

/// The winner of problem point `p` from its rounds (or, with a single correct configuration,
/// its evaluation).
fn winner_of(
    tune: &Tune,
    p: usize,
    contenders: &[Contender],
    rule: &Rule,
    dropped: &[(usize, String)],
) -> Decided {
    let history = &tune.history[p];
    let verdict = match contenders {
        [] if !dropped.is_empty() => {
            return Err(format!(
                "every contender failed its re-measurement (e.g. {})",
                dropped[0].1.lines().next().unwrap_or("")
            ))
        }
        [] => return Err(no_winner_reason(history)),
        [only] if only.round_medians_s.is_empty() => {
            let e = (history.iter()).find(|e| e.config == only.config);
            let e = e.ok_or("the winner has no evaluation")?;
            let median = e.median_s.ok_or("the winner has no median")?;
            Verdict::alone(only.config, median, rule)
        }
        _ => decide::decide(contenders, rule).ok_or("no contender has a round")?,
    };
    Ok(Winner::new(&tune.problems[p], verdict, contenders, dropped))
}

/// Why a problem point has no winner: every configuration failed or was skipped.
fn no_winner_reason(history: &[Evaluation]) -> String {
    let first = (history.iter()).find_map(|e| e.reason.clone());
    format!(
        "no correct configuration among the {} evaluated{}",
        history.len(),
        first.map_or(String::new(), |r| format!(
            " (e.g. {})",
            r.lines().next().unwrap_or("")
        ))
    )
}

/// The tune's results written and printed; exit 0 when every problem point has a winner, 1
/// when some has none.
fn finish(tune: &Tune, request: &TuneRequest, winners: Vec<Decided>) -> Exit {
    let problems: Vec<ProblemResult> = (tune.problems.iter().enumerate())
        .zip(winners)
        .map(|((p, problem), winner)| ProblemResult::new(problem, &tune.history[p], winner))
        .collect();
    let doc = TuneDoc::new(
        &tune.manifest,
        &tune.start,
        &tune.spec,
        problems,
        &tune.results_files,
    );
    let written = output::write_all(
        &doc,
        &tune.dir,
        &tune.manifest,
        request.export_header.as_deref(),
        request.export_manifest.as_deref(),
    );
    match written {
        Ok(paths) => {
            output::print(&doc, request.json);
            for path in paths {
                errln!("wrote {}", path.display());
            }
        }
        Err(e) => {
            errln!("error: {e:#}");
            return Exit::BadInput;
        }
    }
    if doc.problems.iter().any(|p| p.winner.is_none()) {
        Exit::CasesFailed
    } else {
        Exit::Ok
    }
}
