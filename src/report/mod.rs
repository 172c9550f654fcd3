//! Reports of a results file: the terminal table of every case (also as markdown and CSV), the
//! tables and claims a manifest declares, plots, and the formats `export` lists (JSON, the CI
//! dashboards' Bencher and github-action-benchmark formats, an HTML page).

pub mod bmf;
pub mod export;
pub mod format;
pub mod gab;
pub mod html;
pub mod plots;
pub mod table;
pub mod tables;
