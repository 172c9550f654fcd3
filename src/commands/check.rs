//! `kbench check` (every manifest loaded and planned, nothing run) and `kbench list` (the
//! algorithms kbench knows: axes, CPU implementations, kernels).

use std::sync::atomic::AtomicBool;

use super::{bad_input, count};
use crate::exit::Exit;
use crate::run::session::{load_and_plan, NotPlanned};
use crate::{errln, outln};

/// `kbench check`: each manifest's case and variant counts, or its errors; exit 2 if any fails.
/// With `verbose`, a custom study's line also says which CUDA headers its kernels compile with.
pub fn check(args: &[String], verbose: bool) -> Exit {
    let paths = match crate::expand_manifest_args(args) {
        Ok(paths) => paths,
        Err(e) => return bad_input(anyhow::anyhow!("{e}")),
    };
    // Every manifest is reported, the good ones too, whatever the others hold. No Ctrl-C
    // handler here: the default one ends `check` at once, planning included.
    let mut failed = false;
    for path in paths {
        match load_and_plan(&path, &AtomicBool::new(false)) {
            Ok((m, cases)) => {
                outln!(
                    "ok: {}: study `{}`, {}, {}",
                    m.path.display(),
                    m.study.name,
                    count(cases.len(), "case", "cases"),
                    count(m.variants.len(), "variant", "variants")
                );
                for note in &m.notes {
                    outln!("  note: {note}");
                }
                if verbose && m.custom.is_some() {
                    outln!("  {}", crate::device::headers::cuda_headers().describe());
                }
            }
            Err(NotPlanned::Error(e)) => {
                errln!("{e}\n");
                failed = true;
            }
            Err(NotPlanned::Interrupted) => unreachable!("check sets no interrupt flag"),
        }
    }
    if failed {
        Exit::BadInput
    } else {
        Exit::Ok
    }
}

/// `kbench list`: every algorithm with its axes, CPU implementations and kernels, wrapped at
/// the terminal's width (80 columns in a pipe) with hanging indents.
pub fn list() -> Exit {
    let width = super::table_width(false);
    let wrap = crate::report::text::wrap;
    let mut out = String::new();
    for algorithm in crate::algos::all() {
        let spec = algorithm.spec();
        out.push_str(&wrap(
            &format!("{} ({})", spec.name, spec.title),
            width,
            "    ",
        ));
        out.push_str("  axes:\n");
        for axis in spec.axes {
            let default = axis.default.map_or("required".to_string(), |d| {
                format!("default {}", d.to_param())
            });
            let only = axis
                .only_for
                .map_or(String::new(), |b| format!(", {b} only"));
            let line = format!("    {:<8} {} ({default}{only})", axis.name, axis.doc);
            out.push_str(&wrap(&line, width, &" ".repeat(13)));
        }
        let indent = " ".repeat(16);
        out.push_str(&wrap(
            &format!("  cpu impls:    {}", spec.cpu_impls.join(", ")),
            width,
            &indent,
        ));
        out.push_str(&wrap(
            &format!(
                "  cuda kernels: {} (kernels/{})",
                spec.kernels.join(", "),
                spec.kernel_file.name
            ),
            width,
            &indent,
        ));
    }
    crate::report::style::print(&out);
    Exit::Ok
}
