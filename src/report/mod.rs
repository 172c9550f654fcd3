//! Reports: the results file (JSON, written as cases finish) and the terminal table.

pub mod json;
pub mod table;
