//! `kbench kernels`: every kernel file compiled with NVRTC for each architecture (no GPU
//! needed), the PTX written out, and, where ptxas is found, each kernel's registers and spills
//! (`report::ptxas`).

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
    if let Some(manifest) = args.manifest.clone() {
        return custom_kernels(&manifest, args);
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
    let ptxas = args.ptxas.or_else(|| crate::env::find_on_path("ptxas"));
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
    print_report(ptxas.is_some(), &reports)
}

/// `kbench kernels <manifest>`: a custom study's kernels as each variant and the reference compile
/// them, at each distinct define set over the grid (the first 16), for each architecture: the PTX
/// written out and, with ptxas, each kernel's registers, spills, stack and shared memory, named
/// as the manifest names it and with its define set.
fn custom_kernels(path: &std::path::Path, args: KernelsArgs) -> Exit {
    let m = match crate::manifest::load(path) {
        Ok(m) => m,
        Err(e) => return bad_input(anyhow::anyhow!("{e}")),
    };
    let Some(def) = &m.custom else {
        return bad_input(anyhow::anyhow!(
            "{}: study `{}` is not a custom study (`algorithm = \"custom\"`): `kbench kernels` without a manifest reports kbench's own kernels",
            path.display(),
            m.study.name
        ));
    };
    if let Err(e) = nvrtc::nvrtc_present() {
        errln!("error: {e}");
        return Exit::CompileFailed;
    }
    if let Err(e) = std::fs::create_dir_all(&args.out_dir) {
        errln!("error: cannot create {}: {e}", args.out_dir.display());
        return Exit::BadInput;
    }
    let algorithm = crate::custom::Custom::new(def.clone());
    let used: Vec<&str> = (def.kernels.iter().map(|k| k.name.as_str()))
        .filter(|k| {
            m.variants.iter().any(|v| v.implementation == *k) || def.reference.as_deref() == Some(k)
        })
        .collect();
    let points = crate::grid::grid_points(&m.axes, &m.zip)
        .into_iter()
        .filter(|p| (m.filter.as_ref()).is_none_or(|f| f.matches(p).unwrap_or(false)));
    let mut files: Vec<(crate::device::KernelFile, String)> = Vec::new();
    'points: for point in points.take(crate::manifest::MAX_CHECKED_POINTS) {
        for kernel in &used {
            match algorithm.kernel_file(&point, kernel) {
                Ok(file) if !files.iter().any(|(f, _)| f.name == file.name) => {
                    files.push((file, crate::vocab::describe_params(&point)));
                    if files.len() == crate::manifest::MAX_CHECKED_DEFINE_SETS {
                        break 'points;
                    }
                }
                Ok(_) => {}
                Err(e) => return bad_input(e),
            }
        }
    }
    let ptxas = args.ptxas.or_else(|| crate::env::find_on_path("ptxas"));
    let mut reports = Vec::new();
    for (index, (file, at)) in files.iter().enumerate() {
        for arch in &args.archs {
            let compiled =
                match nvrtc::compile_file(file.name, file.source, arch, file.options, file.names) {
                    Ok(c) => c,
                    Err(e) => {
                        errln!("error: {e:#}\n(compiled at {at})");
                        return Exit::CompileFailed;
                    }
                };
            let ptx_path = args
                .out_dir
                .join(format!("{}.{index}.{arch}.ptx", m.study.name));
            if let Err(e) = std::fs::write(&ptx_path, &compiled.ptx) {
                errln!("error: cannot write {}: {e}", ptx_path.display());
                return Exit::BadInput;
            }
            outln!(
                "compiled {} at {at} for {arch} -> {}",
                m.study.name,
                ptx_path.display()
            );
            let Some(ptxas) = &ptxas else { continue };
            match nvrtc::ptxas_report(ptxas, &ptx_path, arch) {
                Ok(found) => reports.extend(found.into_iter().map(|mut r| {
                    // The manifest's name for the kernel, and the point it was compiled at.
                    let written = (compiled.lowered.iter())
                        .find(|(_, lowered)| *lowered == r.kernel)
                        .map_or(r.kernel.clone(), |(written, _)| written.clone());
                    r.kernel = format!("{written} [{at}]");
                    r
                })),
                Err(e) => {
                    errln!("error: {e:#}");
                    return Exit::CompileFailed;
                }
            }
        }
    }
    print_report(ptxas.is_some(), &reports)
}

/// The register/spill table of `reports`, or why there is none (no ptxas).
fn print_report(with_ptxas: bool, reports: &[nvrtc::PtxasReport]) -> Exit {
    if !with_ptxas {
        outln!("ptxas not found (pass --ptxas or put it on PATH): no register/spill report");
        return Exit::Ok;
    }
    out!(
        "{}",
        ptxas_table::render(reports, super::table_width(false))
    );
    Exit::Ok
}
