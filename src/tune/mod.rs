//! `kbench tune`: finds the fastest correct configuration of a kernel's knobs at each problem
//! point of a study, and says whether it is really the fastest. A manifest's `[tune]` table
//! (`spec`) marks grid axes as tunable; the other axes are the problem, tuned independently at
//! each of their points (`space`). A strategy (`strategy`: exhaustive, random, simulated
//! annealing, Bayesian optimisation) proposes configurations within a budget; each is one
//! kbench case, run by `kbench run`'s machinery (`session`), checked for correctness and
//! journaled as it finishes (`journal`, for `--resume`). The fastest few are then re-measured
//! interleaved and the winner decided statistically (`decide`); `output` writes the results,
//! the report with its convergence plots, and the header and manifest exports.

pub mod decide;
pub mod gp;
pub mod journal;
pub mod output;
pub mod session;
pub mod space;
pub mod spec;
pub mod strategy;
