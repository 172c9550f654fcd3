//! `kbench kernels`: every kernel file compiled with NVRTC for each architecture (no GPU
//! needed), the PTX written out, and, where ptxas is found, each kernel's registers and spills
//! (`report::ptxas`).

use std::path::PathBuf;

use super::{bad_input, check_kernels_dir};
use crate::cli::KernelsArgs;
use crate::device::{nvrtc, KernelSource};
use crate::exit::Exit;
use crate::report::ptxas as ptxas_table;
use crate::{errln, out, outln};

/// NVRTC's architectures are named `sm_90`, `compute_90` (or `sm_90a`).
fn check_arch(arch: &str) -> anyhow::Result<()> {
    let number = arch
        .strip_prefix("sm_")
        .or_else(|| arch.strip_prefix("compute_"))
        .map(|n| n.strip_suffix('a').unwrap_or(n));
    match number {
        Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Ok(()),
        _ => anyhow::bail!("--arch {arch}: expected an architecture such as sm_90 or compute_80"),
    }
}

/// Compiles every kernel file for each architecture into `--out-dir`, and with ptxas prints
/// each kernel's registers and spills; `CompileFailed` if a kernel does not compile.
pub fn kernels(args: KernelsArgs) -> Exit {
    let checked = check_kernels_dir(args.kernels_dir.as_deref())
        .and_then(|()| args.archs.iter().try_for_each(|a| check_arch(a)))
        .and_then(|()| match &args.ptxas {
            Some(p) if !p.is_file() => anyhow::bail!("--ptxas {}: no such file", p.display()),
            _ => Ok(()),
        });
    if let Err(e) = checked {
        return bad_input(e);
    }
    let source = KernelSource {
        dir: args.kernels_dir,
    };
    // A source that cannot be read is bad input; one that does not compile fails (exit 1).
    for file in crate::algos::kernel_files() {
        if let Err(e) = source.read(&file) {
            return bad_input(e);
        }
    }
    let compiled = match nvrtc::compile_all(&source, &crate::algos::kernel_files(), &args.archs) {
        Ok(c) => c,
        Err(e) => {
            errln!("error: {e:#}");
            return Exit::CompileFailed;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.out_dir) {
        errln!("error: cannot create {}: {e}", args.out_dir.display());
        return Exit::BadInput;
    }
    let ptxas = args.ptxas.or_else(|| find_on_path("ptxas"));
    let mut reports = Vec::new();
    for nvrtc::CompiledFile { file, arch, ptx } in &compiled {
        let path = args
            .out_dir
            .join(format!("{}.{arch}.ptx", file.trim_end_matches(".cu")));
        if let Err(e) = std::fs::write(&path, ptx) {
            errln!("error: cannot write {}: {e}", path.display());
            return Exit::BadInput;
        }
        outln!("compiled {file} for {arch} -> {}", path.display());
        if let Some(ptxas) = &ptxas {
            match nvrtc::ptxas_report(ptxas, &path, arch) {
                Ok(r) => reports.extend(r),
                Err(e) => {
                    errln!("error: {e:#}");
                    return Exit::CompileFailed;
                }
            }
        }
    }
    if ptxas.is_none() {
        outln!("ptxas not found (pass --ptxas or put it on PATH): no register/spill report");
        return Exit::Ok;
    }
    out!(
        "{}",
        ptxas_table::render(&reports, super::table_width(false))
    );
    Exit::Ok
}

/// `program` in a folder of PATH, as a shell would find it.
fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}
