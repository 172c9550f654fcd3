//! `kbench report`: a finished run re-rendered in any format `report::export` lists, with its
//! claims judged again (by the manifest recorded in it, or a newer one of the same study), and
//! the HTML page, exports and plots as asked.

use super::{bad_input, table_width};
use crate::cli::ReportArgs;
use crate::exit::Exit;
use crate::manifest;
use crate::record::ClaimStatus;
use crate::report::export::{self, Export};
use crate::results;

/// Re-renders a finished run: the chosen format on stdout, exports, HTML and plots as asked;
/// `ClaimsRefuted` with `--check-claims` when a claim is refuted.
pub fn report(args: ReportArgs) -> Exit {
    let mut doc = match results::load_results(&args.results) {
        Ok(d) => d,
        Err(e) => return bad_input(e),
    };
    // The manifest recorded in the results says which tables to draw and which claims to judge;
    // the claims are judged again, so a run saved by an older kbench gets today's verdicts.
    let parsed = match &args.manifest {
        Some(path) => manifest::load(path).map_err(|e| anyhow::anyhow!("{e}")),
        None => crate::results_check::parse_embedded_manifest(&args.results, &doc),
    };
    let manifest = match parsed {
        Ok(m) if m.study.name == doc.study.name => m,
        Ok(m) => {
            return bad_input(anyhow::anyhow!(
                "{} is study `{}`, the results are study `{}`",
                m.path.display(),
                m.study.name,
                doc.study.name
            ))
        }
        Err(e) => return bad_input(e),
    };
    doc.claims = crate::claims::judge_all(&manifest, &doc);
    let axes = manifest.algorithm.spec().axis_names();
    let report = export::Report {
        doc: &doc,
        manifest: &manifest,
        declared_only: args.tables,
        width: table_width(args.wide),
    };
    let format = export::find(&args.format).expect("clap checked the format's name");
    match (format.render)(&report) {
        Ok(text) => print!("{text}"),
        Err(e) => return bad_input(e),
    }
    let html = args.html.iter().map(|path| Export {
        format: export::find("html").expect("html is a format"),
        path: path.display().to_string(),
    });
    // Files get every column, whatever the terminal's width.
    let report = export::Report {
        width: None,
        ..report
    };
    for e in args.export.iter().cloned().chain(html) {
        match e.write(&report, &args.results) {
            Ok(path) => eprintln!("wrote {}", path.display()),
            Err(e) => return bad_input(e),
        }
    }
    if let Some(dir) = &args.plots {
        match crate::report::plots::write_plots(&doc, &axes, dir) {
            Ok(paths) => paths
                .iter()
                .for_each(|p| eprintln!("wrote {}", p.display())),
            Err(e) => {
                return bad_input(e.context(format!("cannot draw plots into {}", dir.display())))
            }
        }
    }
    let refuted = doc.claims.iter().any(|v| v.status == ClaimStatus::Refuted);
    if refuted && args.check_claims {
        Exit::ClaimsRefuted
    } else {
        Exit::Ok
    }
}
