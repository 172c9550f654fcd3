//! The `[tune]` table's shape as serde reads it (and the JSON Schema shows it), spans kept for
//! the errors. `manifest` accepts it, so `kbench run` and `check` take a tuning manifest;
//! `tune::spec` checks what it says against the study.

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

/// `[tune]` as written (serde's shape; spans kept for the errors).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawTune {
    /// The grid axes tuned: their values in `[grid]`, restricted by the grid's `where`.
    #[schemars(with = "Vec<String>")]
    pub axes: Spanned<Vec<Spanned<String>>>,
    /// `bayes` (default), `anneal`, `random` or `exhaustive`.
    #[schemars(with = "Option<String>")]
    pub strategy: Option<Spanned<String>>,
    /// `{ evaluations = N }` or `{ time_s = S }`, per problem point.
    #[schemars(with = "Option<RawBudget>")]
    pub budget: Option<Spanned<RawBudget>>,
    /// Seeds the strategy's random choices: the same seed, the same proposals.
    pub seed: Option<u64>,
    /// How many of the fastest correct configurations are re-measured to decide the winner.
    #[schemars(with = "Option<i64>", range(min = 1))]
    pub top: Option<Spanned<i64>>,
    /// The most interleaved re-measurement rounds (a fresh worker each round).
    #[schemars(with = "Option<i64>", range(min = 2, max = 100))]
    pub rounds: Option<Spanned<i64>>,
    /// The rounds run before any verdict (at least 2, at most `rounds`).
    #[schemars(with = "Option<i64>", range(min = 2, max = 100))]
    pub min_rounds: Option<Spanned<i64>>,
    /// A tie: the interval of the paired difference lies within +- this share (0.01 = 1%).
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    pub tie_within: Option<Spanned<f64>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    /// Configurations evaluated per problem point.
    #[schemars(with = "Option<i64>", range(min = 1))]
    pub evaluations: Option<Spanned<i64>>,
    /// Seconds of evaluation per problem point.
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    pub time_s: Option<Spanned<f64>>,
}
