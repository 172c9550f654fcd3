//! Kernel sources and their compilation: every algorithm's `.cu` file (embedded in the binary by
//! its registration, or read from `--kernels-dir`), with `kernels/common.cuh` spliced in where the
//! file includes it, compiled to PTX by NVRTC (no GPU needed); and ptxas's resource report.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use cudarc::nvrtc::{self, Ptx};
use serde::{Deserialize, Serialize};

/// The header every kernel file shares (warp and block reductions, grid-stride helpers).
pub const COMMON_HEADER: &str = include_str!("../../kernels/common.cuh");
const COMMON_HEADER_NAME: &str = "common.cuh";

/// Where kernel sources come from: the copies built into kbench, or a directory the user named.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSource {
    pub dir: Option<PathBuf>,
}

/// One kernel file as an algorithm registers it (its name in `kernels/` and its embedded text),
/// or a custom study's sources at one define set: the text, the NVRTC options (include folders,
/// the study's compiler options) and the C++ name expressions its launches name.
#[derive(Debug, Clone, Copy)]
pub struct KernelFile {
    /// A built-in's file name, or the user's first source's absolute path and the define set:
    /// modules are cached by it.
    pub name: &'static str,
    pub source: &'static str,
    /// NVRTC options after kbench's own (`--include-path=...`, `-use_fast_math`).
    pub options: &'static [String],
    /// Each launched kernel as the manifest writes it and as NVRTC instantiates it at this define
    /// set (`softmax<BLOCK, T>`, `softmax<256, __nv_bfloat16>`).
    pub names: &'static [(String, String)],
}

impl KernelSource {
    /// The file's text, ready for NVRTC: `#include "common.cuh"` replaced by the header. A
    /// user's own file (a custom study's) is complete as it is: `--kernels-dir` does not apply.
    pub fn read(&self, file: &KernelFile) -> Result<String> {
        if file.is_users_own() {
            return Ok(file.source.to_string());
        }
        let (text, header) = match &self.dir {
            Some(dir) => {
                let path = dir.join(file.name);
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("cannot read kernel source {}", path.display()))?;
                let header_path = dir.join(COMMON_HEADER_NAME);
                let header = if header_path.exists() {
                    std::fs::read_to_string(&header_path).with_context(|| {
                        format!("cannot read kernel header {}", header_path.display())
                    })?
                } else {
                    COMMON_HEADER.to_string()
                };
                (text, header)
            }
            None => (file.source.to_string(), COMMON_HEADER.to_string()),
        };
        Ok(splice_header(&text, &header, file.name))
    }

    pub fn describe(&self, file: &KernelFile) -> String {
        if file.is_users_own() {
            return file.name.to_string();
        }
        match &self.dir {
            Some(dir) => dir.join(file.name).display().to_string(),
            None => format!("kernels/{} (embedded)", file.name),
        }
    }
}

impl KernelFile {
    /// A built-in algorithm's file: no options, and `extern "C"` kernels named as they are.
    pub const fn embedded(name: &'static str, source: &'static str) -> KernelFile {
        KernelFile {
            name,
            source,
            options: &[],
            names: &[],
        }
    }

    /// A custom study's sources, named by the absolute path of their first file (a built-in's
    /// name is a file name in `kernels/`): its text is already complete, defines and `#line`
    /// directives included.
    pub fn is_users_own(&self) -> bool {
        self.name.starts_with('/')
    }
}

/// Replaces the line `#include "common.cuh"` with the header, with `#line` directives so that
/// NVRTC's messages name the right file and line.
fn splice_header(text: &str, header: &str, file_name: &str) -> String {
    let mut out = String::with_capacity(text.len() + header.len() + 128);
    for (index, line) in text.lines().enumerate() {
        if line.trim() == format!("#include \"{COMMON_HEADER_NAME}\"") {
            out.push_str(&format!("#line 1 \"{COMMON_HEADER_NAME}\"\n"));
            out.push_str(header);
            if !header.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!("#line {} \"{file_name}\"\n", index + 2));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Whether NVRTC can be loaded; `Err` holds the reason to show.
pub fn nvrtc_present() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err("NVRTC not found: libnvrtc.so.13 could not be loaded (install the CUDA toolkit, or `pip install nvidia-cuda-nvrtc` and add its lib directory to LD_LIBRARY_PATH)".into())
    }
}

pub fn nvrtc_version() -> Result<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: writes two ints; the library was checked present by the caller.
    unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| anyhow!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

/// Compiles one kernel file to PTX for `arch` (e.g. "sm_90"). The error carries NVRTC's log.
pub fn compile(file_label: &str, source: &str, arch: &str) -> Result<Ptx> {
    let compiled = compile_file(file_label, source, arch, &[], &[])?;
    Ok(Ptx::from_src(compiled.ptx))
}

/// A kernel file as NVRTC compiled it: the PTX, and each name expression's lowered (mangled)
/// name, by the expression as the manifest wrote it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Compiled {
    pub ptx: String,
    pub lowered: Vec<(String, String)>,
}

impl Compiled {
    /// The PTX entry name of a kernel as a launch names it: its lowered name where it was
    /// given as a name expression, else the name itself (an `extern "C"` kernel's).
    pub fn entry_name<'a>(&'a self, kernel: &'a str) -> &'a str {
        (self.lowered.iter())
            .find(|(written, _)| written == kernel)
            .map_or(kernel, |(_, lowered)| lowered.as_str())
    }
}

/// The options kbench compiles every file with, before the file's own (`extra_options`): the
/// architecture, C++17 (unless the file's options name a standard) and line information.
fn base_options(arch: &str, extra_options: &[String]) -> Vec<String> {
    let mut options = vec![
        format!("--gpu-architecture={arch}"),
        "-lineinfo".to_string(),
    ];
    let names_standard =
        (extra_options.iter()).any(|o| o.starts_with("-std") || o.starts_with("--std"));
    if !names_standard {
        options.push("--std=c++17".to_string());
    }
    options.extend_from_slice(extra_options);
    options
}

/// Compiles `source` for `arch` with `extra_options` after kbench's own (`-DBLOCK=256`,
/// `--include-path=...`, `-use_fast_math`), and asks NVRTC for the lowered name of each
/// `(as written, to instantiate)` name expression in `names` (`softmax<BLOCK, T>`,
/// `softmax<256, __nv_bfloat16>`): C++ kernels are launched by the name NVRTC gives them. The
/// error carries NVRTC's log; a name expression that does not instantiate is named in it.
///
/// Where this process shares compiles (`share_compiles_in`), a compile another process of the
/// run made of the same file, options and architecture is read rather than made again.
pub fn compile_file(
    file_label: &str,
    source: &str,
    arch: &str,
    extra_options: &[String],
    names: &[(String, String)],
) -> Result<Compiled> {
    let shared = SHARED_COMPILES.get().map(|dir| {
        let key = (file_label, source, arch, extra_options, names);
        // Two hashes of 64 bits: a collision between a run's compiles is out of reach.
        let mut sip = std::hash::DefaultHasher::new();
        let mut fnv = fnv::FnvHasher::default();
        key.hash(&mut sip);
        key.hash(&mut fnv);
        dir.join(format!("{:016x}{:016x}.json", sip.finish(), fnv.finish()))
    });
    let kept = shared.as_deref().and_then(|path| {
        let text = std::fs::read(path).ok()?;
        serde_json::from_slice::<Compiled>(&text).ok()
    });
    if let Some(compiled) = kept {
        return Ok(compiled);
    }
    let compiled = compile_now(file_label, source, arch, extra_options, names)?;
    if let Some(path) = shared {
        super::keep_for_other_workers(&path, &compiled);
    }
    Ok(compiled)
}

/// The folder this process shares compiles through (see `share_compiles_in`).
static SHARED_COMPILES: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `compile_file` keep each compile in `dir` and read those other processes kept there:
/// a run's worker processes (`[measure] processes`, `--devices`, a tune's re-measurements, a
/// worker started after a fault) compile each define set once between them. The folder is the
/// run's own (made and removed by the process that starts the workers), so a header edited
/// between runs is compiled afresh. Set once per process; later calls change nothing.
pub fn share_compiles_in(dir: PathBuf) {
    let _ = SHARED_COMPILES.set(dir);
}

/// `compile_file`'s work: NVRTC itself.
fn compile_now(
    file_label: &str,
    source: &str,
    arch: &str,
    extra_options: &[String],
    names: &[(String, String)],
) -> Result<Compiled> {
    use cudarc::nvrtc::result;
    use std::ffi::{CStr, CString};
    let nul = |what: &str| anyhow!("{file_label}: {what} holds a NUL byte");
    let source_c = CString::new(source).map_err(|_| nul("the source"))?;
    let label_c = CString::new(file_label).map_err(|_| nul("the file name"))?;
    let names_c = (names.iter())
        .map(|(_, instance)| CString::new(instance.as_str()).map_err(|_| nul("a kernel name")))
        .collect::<Result<Vec<_>>>()?;
    let options = base_options(arch, extra_options);
    let prog = result::create_program(&source_c, Some(&label_c))
        .map_err(|e| anyhow!("NVRTC failed on {file_label}: {e:?}"))?;
    // SAFETY: `prog` is live until `destroy_program` at the end, and every string it was given
    // (`source_c`, `label_c`, `names_c`) outlives it; the log, PTX and lowered names are copied
    // out before it is destroyed.
    let outcome = unsafe {
        let mut added = Ok(());
        for name in &names_c {
            added = added.and(nvrtc::sys::nvrtcAddNameExpression(prog, name.as_ptr()).result());
        }
        let compiled = added.and_then(|()| result::compile_program(prog, &options));
        match compiled {
            Err(e) => {
                let log = result::get_program_log(prog).unwrap_or_default();
                let log = CStr::from_ptr(log.as_ptr()).to_string_lossy().into_owned();
                Err(compile_failure(file_label, arch, e, &log, names))
            }
            Ok(()) => lowered_names(prog, &names_c, names).and_then(|lowered| {
                let ptx = result::get_ptx(prog).map_err(|e| anyhow!("nvrtcGetPTX: {e:?}"))?;
                let ptx = CStr::from_ptr(ptx.as_ptr()).to_string_lossy().into_owned();
                Ok(Compiled { ptx, lowered })
            }),
        }
    };
    // SAFETY: created above, destroyed once.
    let _ = unsafe { result::destroy_program(prog) };
    outcome
}

/// Each name expression's lowered name, by the expression as written.
///
/// # Safety
/// `prog` must be a live program compiled with `names_c` added as name expressions.
unsafe fn lowered_names(
    prog: nvrtc::sys::nvrtcProgram,
    names_c: &[std::ffi::CString],
    names: &[(String, String)],
) -> Result<Vec<(String, String)>> {
    let mut lowered = Vec::new();
    for (c_name, (written, instance)) in names_c.iter().zip(names) {
        let mut out: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: as this function's; NVRTC writes a pointer into the program's own memory.
        unsafe { nvrtc::sys::nvrtcGetLoweredName(prog, c_name.as_ptr(), &mut out) }
            .result()
            .map_err(|e| anyhow!("NVRTC has no lowered name for `{instance}`: {e:?}"))?;
        // SAFETY: NVRTC returned a NUL-terminated string that lives as long as `prog`.
        let name = unsafe { std::ffi::CStr::from_ptr(out) };
        lowered.push((written.clone(), name.to_string_lossy().into_owned()));
    }
    Ok(lowered)
}

/// NVRTC's log as kbench reports it: a kernel name that did not instantiate (NVRTC reports it
/// in its own `__nv_name_map` file, one line a name) is named as the manifest wrote it.
fn compile_failure(
    file_label: &str,
    arch: &str,
    e: cudarc::nvrtc::result::NvrtcError,
    log: &str,
    names: &[(String, String)],
) -> anyhow::Error {
    if log.trim().is_empty() {
        return anyhow!("NVRTC failed on {file_label} for {arch}: {e:?}");
    }
    let mut notes = Vec::new();
    // NVRTC reports a name in its own `__nv_name_map` file, quoting the name it was given.
    let in_name_map = log.contains("__nv_name_map(");
    for (written, instance) in names.iter().filter(|_| in_name_map) {
        if !log.contains(&format!("nv_mangled_name {instance}\n")) {
            continue;
        }
        let note = if written == instance {
            format!("the kernel `{written}` is not a __global__ function of the sources (give its C++ name as written, or an extern \"C\" one's)")
        } else {
            format!("the kernel `{written}` (`{instance}` at this point) does not name a __global__ function the sources define or can instantiate")
        };
        if !notes.contains(&note) {
            notes.push(note);
        }
    }
    let notes: String = notes.iter().map(|n| format!("{n}\n")).collect();
    anyhow!(
        "{notes}NVRTC failed to compile {file_label} for {arch}:\n{}",
        log.trim_end()
    )
}

/// One kernel file compiled for one architecture.
pub struct CompiledFile {
    pub file: &'static str,
    pub arch: String,
    pub ptx: String,
}

/// Compiles `files` for each architecture without a GPU: the CI check.
pub fn compile_all(
    kernels: &KernelSource,
    files: &[KernelFile],
    archs: &[String],
) -> Result<Vec<CompiledFile>> {
    nvrtc_present().map_err(|e| anyhow!(e))?;
    let mut out = Vec::new();
    for file in files {
        let src = kernels.read(file)?;
        for arch in archs {
            let ptx = compile(&kernels.describe(file), &src, arch)?;
            out.push(CompiledFile {
                file: file.name,
                arch: arch.clone(),
                ptx: ptx.to_src(),
            });
        }
    }
    Ok(out)
}

/// One kernel's resources as ptxas reports them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PtxasReport {
    pub kernel: String,
    pub arch: String,
    pub registers: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    pub stack_bytes: u32,
    pub shared_bytes: u32,
}

/// Assembles PTX with `ptxas -v` and parses its per-kernel report (ptxas writes it to stderr).
pub fn ptxas_report(ptxas: &Path, ptx_path: &Path, arch: &str) -> Result<Vec<PtxasReport>> {
    let out = std::process::Command::new(ptxas)
        .args([&format!("-arch={arch}"), "-v"])
        .arg(ptx_path)
        .args(["-o", "/dev/null"])
        .output()
        .with_context(|| format!("cannot run {}", ptxas.display()))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("ptxas failed on {}:\n{text}", ptx_path.display());
    }
    Ok(parse_ptxas(&text, arch))
}

pub fn parse_ptxas(text: &str, arch: &str) -> Vec<PtxasReport> {
    let number_before = |line: &str, word: &str| -> u32 {
        line.split(',')
            .find(|part| part.contains(word))
            .and_then(|part| part.split_whitespace().find_map(|w| w.parse().ok()))
            .unwrap_or(0)
    };
    let mut reports: Vec<PtxasReport> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let kernel = rest.split('\'').next().unwrap_or_default().to_string();
            reports.push(PtxasReport {
                kernel,
                arch: arch.to_string(),
                registers: 0,
                spill_store_bytes: 0,
                spill_load_bytes: 0,
                stack_bytes: 0,
                shared_bytes: 0,
            });
        } else if let Some(r) = reports.last_mut() {
            if line.contains("bytes stack frame") {
                r.stack_bytes = number_before(line, "stack frame");
                r.spill_store_bytes = number_before(line, "spill stores");
                r.spill_load_bytes = number_before(line, "spill loads");
            } else if line.contains("Used") && line.contains("registers") {
                r.registers = line
                    .split("Used ")
                    .nth(1)
                    .and_then(|s| s.split_whitespace().next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                r.shared_bytes = number_before(line, "bytes smem");
            }
        }
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_verbose_output() {
        let text = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'block_sum' for 'sm_90'\n\
ptxas info    : Function properties for block_sum\n\
    256 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 2048 bytes smem\n\
ptxas info    : Compiling entry function 'saxpy' for 'sm_90'\n\
ptxas info    : Function properties for saxpy\n\
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 10 registers, used 0 barriers\n";
        let r = parse_ptxas(text, "sm_90");
        assert_eq!(r.len(), 2);
        assert_eq!(
            r[0],
            PtxasReport {
                kernel: "block_sum".into(),
                arch: "sm_90".into(),
                registers: 32,
                spill_store_bytes: 8,
                spill_load_bytes: 4,
                stack_bytes: 256,
                shared_bytes: 2048
            }
        );
        assert_eq!(
            (r[1].kernel.as_str(), r[1].registers, r[1].shared_bytes),
            ("saxpy", 10, 0)
        );
    }

    #[test]
    fn the_common_header_is_spliced_in_with_line_directives() {
        let text = "// a\n#include \"common.cuh\"\nint x;\n";
        let out = splice_header(text, "int h;\n", "k.cu");
        assert_eq!(
            out,
            "// a\n#line 1 \"common.cuh\"\nint h;\n#line 3 \"k.cu\"\nint x;\n"
        );
    }
}
