//! Reports: the results file (JSON, written as cases finish), the terminal table (also as
//! markdown and CSV), and plots.

pub mod json;
pub mod plots;
pub mod table;
