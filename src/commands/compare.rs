//! `kbench compare`: a new run of a study against one or more baseline runs (listed, or saved
//! under a name with `run --save-baseline`), a verdict per case (`crate::compare`), drawn as a
//! table (`report::compare_table`) or printed as JSON.

use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{bad_input, compare_retest, table_width};
use crate::cli::CompareArgs;
use crate::compare::{self, CompareSettings};
use crate::exit::Exit;
use crate::outln;
use crate::report::compare_table;
use crate::results;

/// Compares a new run with its baseline runs; `Regressed` if a case got slower or newly fails.
pub fn compare(args: CompareArgs) -> Exit {
    let Some((new_path, listed_bases)) = args.files.split_last() else {
        unreachable!("clap requires at least one file")
    };
    match (&args.baseline, listed_bases) {
        (None, []) => {
            return bad_input(anyhow::anyhow!(
                "give the baseline results file(s) and then the new one, or --baseline NAME and the new file"
            ))
        }
        (Some(_), [_, ..]) => {
            return bad_input(anyhow::anyhow!(
                "with --baseline, give only the new results file"
            ))
        }
        _ => {}
    }
    let new = match results::load_results(new_path) {
        Ok(doc) => doc,
        Err(e) => return bad_input(e),
    };
    let base_paths = match &args.baseline {
        None => listed_bases.to_vec(),
        Some(name) => {
            match baseline_runs(&results::baseline_dir(&args.out_dir, &new.study.name, name)) {
                Ok(runs) => runs,
                Err(e) => return bad_input(e),
            }
        }
    };
    let mut bases = Vec::new();
    for path in &base_paths {
        match results::load_results(path).and_then(|b| {
            compare::check_comparable(&b, &new, args.allow_different_device).map(|()| b)
        }) {
            Ok(b) => bases.push(b),
            Err(e) => return bad_input(e),
        }
    }
    let defaults = new.manifest.compare;
    let settings = CompareSettings {
        min_effect: args.min_effect.unwrap_or(defaults.min_effect),
        fdr: args.fdr.unwrap_or(defaults.fdr),
        allow_different_device: args.allow_different_device,
    };
    if !(settings.min_effect > 0.0
        && settings.min_effect < 1.0
        && settings.fdr > 0.0
        && settings.fdr < 1.0)
    {
        return bad_input(anyhow::anyhow!(
            "--min-effect and --fdr must be between 0 and 1"
        ));
    }
    let mut result = compare::compare(&bases, &new, &settings);
    let mut retest_lines = String::new();
    if args.retest {
        retest_lines = retest(&mut result, &bases, new_path, &new, &settings, &args);
    }
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&result).expect("comparison serializes")
        );
    } else {
        let mut text = match base_paths.as_slice() {
            [one] => format!(
                "comparing {}\nwith the baseline {}\n",
                new_path.display(),
                one.display()
            ),
            several => {
                let mut text = format!(
                    "comparing {}\nwith {} baseline runs:\n",
                    new_path.display(),
                    several.len()
                );
                several
                    .iter()
                    .for_each(|p| text.push_str(&format!("  {}\n", p.display())));
                text
            }
        };
        if bases.len() == 1 {
            text.push_str(
                "note: one baseline run shows no run-to-run variation, so verdicts rest on\n",
            );
            text.push_str("its samples alone; save 3 or more baseline runs\n");
        }
        text.push_str(&retest_lines);
        text.push_str(&compare_table::render(&result, table_width(args.wide)));
        text.push('\n');
        crate::report::style::print(&text);
    }
    if result.regressed() {
        Exit::Regressed
    } else {
        Exit::Ok
    }
}

/// `--retest`: the cases called slower are run again and judged against the same baselines
/// (`compare_retest`, `compare::apply_retest`). Returns the lines that say what ran; a retest
/// that cannot run leaves the verdicts as they are, and says why on stderr.
fn retest(
    result: &mut compare::Comparison,
    bases: &[crate::record::ResultsDoc],
    new_path: &Path,
    new: &crate::record::ResultsDoc,
    settings: &CompareSettings,
    args: &CompareArgs,
) -> String {
    let slower: Vec<String> = result
        .cases
        .iter()
        .filter(|c| c.verdict == compare::Verdict::Slower)
        .map(|c| format!("{} {}", c.variant, c.params))
        .collect();
    if slower.is_empty() {
        return "retest: no case called slower, nothing to run again\n".into();
    }
    let run = compare_retest::run_retest(new_path, new, &slower, args.kernels_dir.as_deref());
    match run {
        Ok(run) => {
            let judged = compare::compare(bases, &run.doc, settings);
            let file = run.results_path.display().to_string();
            compare::apply_retest(result, &judged, &file, settings);
            let confirmed = result.retest.as_ref().map_or(0, |r| r.confirmed);
            format!(
                "retest: {} case(s) called slower were run again ({}): {confirmed} confirmed\n  {file}\n",
                slower.len(),
                run.manifest_note
            )
        }
        Err(e) => {
            crate::errln!("warning: --retest: {e:#}; the verdicts stand unconfirmed");
            String::new()
        }
    }
}

/// The results files saved under one baseline name, oldest first.
fn baseline_runs(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut runs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("no baseline at {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    runs.sort();
    if runs.is_empty() {
        anyhow::bail!("the baseline folder {} holds no results", dir.display());
    }
    Ok(runs)
}
