//! Reports of a results file: the terminal table (also as markdown and CSV), and plots.

pub mod plots;
pub mod table;
