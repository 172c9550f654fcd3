//! Reports of a results file: the terminal table of every case (also as markdown and CSV), the
//! tables and claims a manifest declares, plots, and the formats `export` lists (JSON, the CI
//! dashboards' Bencher, github-action-benchmark and PyTorch OSS benchmark formats, an HTML
//! page); and the tables of two other commands, `compare`'s verdicts (`compare_table`) and
//! `kernels`' ptxas report (`ptxas`); the per-step latency kernels measure inside themselves
//! (`steps`); colour on the terminal (`style`) and text wrapped to its
//! width (`text`).

pub mod bmf;
pub mod case_table;
pub mod compare_table;
pub mod declared_tables;
pub mod export;
pub mod format;
pub mod gab;
pub mod history_html;
pub mod history_table;
pub mod html;
pub mod plots;
pub mod ptxas;
pub mod pytorch;
pub mod steps;
pub mod style;
pub mod text;
