//! Reports of a results file: the terminal table of every case (also as markdown and CSV), the
//! tables and claims a manifest declares, and plots.

pub mod plots;
pub mod table;
pub mod tables;
