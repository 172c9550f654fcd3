//! The `[tune]` table of a study manifest: which grid axes are tuned (the others are the
//! problem, tuned independently at each of their points), the search strategy, its budget and
//! seed, and how the winner is decided (`top`, `rounds`, `min_rounds`, `tie_within`).
//!
//! `manifest.rs` accepts the table's shape (`manifest::tune_table::RawTune`, so `kbench run` and `check` take a tuning
//! manifest, and the JSON Schema lists it); what only a study can tell (an axis the algorithm
//! lacks, one the grid does not list, a budget of zero) is checked here, with the file, line,
//! column and key, as every other manifest error.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::manifest::tune_table::{RawBudget, RawTune};
use crate::manifest::{Manifest, ManifestError};

/// How the next configuration is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StrategyKind {
    /// Every configuration, in grid order.
    Exhaustive,
    /// Configurations in a random order (without replacement).
    Random,
    /// Simulated annealing over neighbouring grid values.
    Anneal,
    /// Bayesian optimisation: a Gaussian process over the axes' indices, expected improvement.
    Bayes,
}

impl StrategyKind {
    pub const NAMES: [&'static str; 4] = ["bayes", "anneal", "random", "exhaustive"];

    pub fn parse(name: &str) -> Option<StrategyKind> {
        match name {
            "exhaustive" => Some(StrategyKind::Exhaustive),
            "random" => Some(StrategyKind::Random),
            "anneal" => Some(StrategyKind::Anneal),
            "bayes" => Some(StrategyKind::Bayes),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            StrategyKind::Exhaustive => "exhaustive",
            StrategyKind::Random => "random",
            StrategyKind::Anneal => "anneal",
            StrategyKind::Bayes => "bayes",
        }
    }
}

/// How much a strategy may spend at each problem point.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    /// At most this many configurations evaluated.
    Evaluations(usize),
    /// No new configuration once the evaluations' wall time reaches this.
    TimeS(f64),
    /// Every configuration (exhaustive without a budget).
    Everything,
}

/// A checked `[tune]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneSpec {
    pub axes: Vec<String>,
    pub strategy: StrategyKind,
    pub budget: Budget,
    pub seed: u64,
    pub top: usize,
    /// The most re-measurement rounds.
    pub rounds: usize,
    /// The rounds before any verdict (a journal written before this setting existed resumes
    /// with the least, 2).
    #[serde(default = "least_min_rounds")]
    pub min_rounds: usize,
    pub tie_within: f64,
}

fn least_min_rounds() -> usize {
    2
}

/// The manifest's text as serde sees it for this module: the `[tune]` table only.
#[derive(Deserialize)]
struct TuneOnly {
    tune: Option<Spanned<RawTune>>,
}

/// The study's `[tune]` table, checked against its grid; an error (at its line) where it has
/// none or a mistake.
pub fn load(manifest: &Manifest) -> Result<TuneSpec, ManifestError> {
    let path = &manifest.path;
    let source = manifest.source.as_str();
    let at = |span: Range<usize>, key: &str, message: String| {
        ManifestError::new(path, source, span, Some(key.to_string()), message)
    };
    // The manifest parsed already, so this parse cannot fail on its shape.
    let only: TuneOnly = toml::from_str(source)
        .map_err(|e| ManifestError::whole_file(path, e.message().to_string()))?;
    let Some(raw) = only.tune else {
        return Err(ManifestError::whole_file(
            path,
            "the manifest has no [tune] table: add one naming the tuned axes, e.g. `[tune] axes = [\"block\"]`".into(),
        ));
    };
    let header = raw.span();
    let raw = raw.into_inner();
    let axes = check_axes(manifest, &raw.axes, &at)?;
    let strategy = match &raw.strategy {
        None => StrategyKind::Bayes,
        Some(name) => StrategyKind::parse(name.get_ref()).ok_or_else(|| {
            at(
                name.span(),
                "tune.strategy",
                format!(
                    "unknown strategy `{}`; expected one of {}",
                    name.get_ref(),
                    StrategyKind::NAMES.join(", ")
                ),
            )
        })?,
    };
    let budget = check_budget(
        raw.budget.as_ref(),
        strategy,
        header.start..header.start,
        &at,
    )?;
    let top = whole_in(raw.top.as_ref(), "tune.top", 1, 100, 3, &at)?;
    let rounds = whole_in(
        raw.rounds.as_ref(),
        "tune.rounds",
        2,
        100,
        DEFAULT_ROUNDS,
        &at,
    )?;
    let min_rounds = check_min_rounds(raw.min_rounds.as_ref(), rounds, &at)?;
    let tie_within = match &raw.tie_within {
        None => 0.01,
        Some(t) => {
            let x = *t.get_ref();
            if !(x > 0.0 && x < 1.0) {
                return Err(at(
                    t.span(),
                    "tune.tie_within",
                    format!("`tie_within` is {x}; it must be a share between 0 and 1 (0.01 = 1%)"),
                ));
            }
            x
        }
    };
    Ok(TuneSpec {
        axes,
        strategy,
        budget,
        seed: raw.seed.unwrap_or(1),
        top,
        rounds,
        min_rounds,
        tie_within,
    })
}

/// The most re-measurement rounds by default, and the rounds before a verdict.
const DEFAULT_ROUNDS: usize = 10;
const DEFAULT_MIN_ROUNDS: usize = 5;

/// `min_rounds`: from 2 (a paired interval needs two rounds) to `rounds`; by default 5, or
/// `rounds` where that is fewer.
fn check_min_rounds(
    value: Option<&Spanned<i64>>,
    rounds: usize,
    at: &At,
) -> Result<usize, ManifestError> {
    let Some(v) = value else {
        return Ok(DEFAULT_MIN_ROUNDS.min(rounds));
    };
    let x = *v.get_ref();
    if x < 2 || x > rounds as i64 {
        return Err(at(
            v.span(),
            "tune.min_rounds",
            format!("`min_rounds` is {x}; it must be from 2 (a paired interval needs two rounds) to `rounds` ({rounds})"),
        ));
    }
    Ok(x as usize)
}

type At<'a> = dyn Fn(Range<usize>, &str, String) -> ManifestError + 'a;

/// The tuned axes: each an axis of the algorithm, listed in `[grid]`, named once.
fn check_axes(
    manifest: &Manifest,
    axes: &Spanned<Vec<Spanned<String>>>,
    at: &At,
) -> Result<Vec<String>, ManifestError> {
    if axes.get_ref().is_empty() {
        return Err(at(
            axes.span(),
            "tune.axes",
            "no axis to tune: name at least one grid axis, e.g. `axes = [\"block\"]`".into(),
        ));
    }
    let known: Vec<&str> = manifest.axes.iter().map(|(n, _)| n.as_str()).collect();
    let mut names: Vec<String> = Vec::new();
    for (i, axis) in axes.get_ref().iter().enumerate() {
        let name = axis.get_ref();
        let key = format!("tune.axes[{i}]");
        if !known.contains(&name.as_str()) {
            return Err(at(
                axis.span(),
                &key,
                format!(
                    "unknown axis `{name}`; the study's axes are {}",
                    known.join(", ")
                ),
            ));
        }
        if !manifest.spans.axes.contains_key(name) {
            return Err(at(
                axis.span(),
                &key,
                format!("axis `{name}` is not in [grid]: list the values to try there, e.g. `{name} = [..]`"),
            ));
        }
        if names.contains(name) {
            return Err(at(
                axis.span(),
                &key,
                format!("axis `{name}` is named twice"),
            ));
        }
        names.push(name.clone());
    }
    Ok(names)
}

/// The budget: exactly one of `evaluations` (at least 1) and `time_s` (above 0); none only for
/// the exhaustive strategy.
fn check_budget(
    budget: Option<&Spanned<RawBudget>>,
    strategy: StrategyKind,
    header: Range<usize>,
    at: &At,
) -> Result<Budget, ManifestError> {
    let Some(budget) = budget else {
        return match strategy {
            StrategyKind::Exhaustive => Ok(Budget::Everything),
            _ => Err(at(
                header,
                "tune.budget",
                format!(
                    "strategy `{}` needs a budget: `budget = {{ evaluations = N }}` or `budget = {{ time_s = S }}`",
                    strategy.name()
                ),
            )),
        };
    };
    match (&budget.get_ref().evaluations, &budget.get_ref().time_s) {
        (Some(n), None) => {
            let count = *n.get_ref();
            if count < 1 {
                return Err(at(
                    n.span(),
                    "tune.budget.evaluations",
                    format!("a budget of {count} evaluations; it must be at least 1"),
                ));
            }
            Ok(Budget::Evaluations(count as usize))
        }
        (None, Some(t)) => {
            let s = *t.get_ref();
            if !(s.is_finite() && s > 0.0) {
                return Err(at(
                    t.span(),
                    "tune.budget.time_s",
                    format!("a budget of {s} seconds; it must be a finite number above 0"),
                ));
            }
            Ok(Budget::TimeS(s))
        }
        _ => Err(at(
            budget.span(),
            "tune.budget",
            "a budget is one of `evaluations = N` or `time_s = S`, not both or neither".into(),
        )),
    }
}

/// A whole number setting in `lo..=hi`, or its default.
fn whole_in(
    value: Option<&Spanned<i64>>,
    key: &str,
    lo: i64,
    hi: i64,
    default: usize,
    at: &At,
) -> Result<usize, ManifestError> {
    match value {
        None => Ok(default),
        Some(v) if (lo..=hi).contains(v.get_ref()) => Ok(*v.get_ref() as usize),
        Some(v) => Err(at(
            v.span(),
            key,
            format!(
                "`{}` is {}; it must be from {lo} to {hi}",
                key.trim_start_matches("tune."),
                v.get_ref()
            ),
        )),
    }
}
