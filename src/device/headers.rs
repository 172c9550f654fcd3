//! CUDA's own headers for a user's kernels (`<cuda_fp16.h>`, `<cuda_bf16.h>`, and CCCL's
//! `<cub/...>`, `<cuda/std/...>`, `<thrust/...>`), found without configuration. NVRTC searches
//! no folder of its own, so kbench gives it the headers of the toolkit it most likely came
//! with, looked for in this order:
//!
//! 1. `$KBENCH_CUDA_INCLUDE` (a folder holding `cuda_fp16.h`), where set;
//! 2. the `include/` beside the NVRTC library kbench loaded (pip's `nvidia-cuda-nvrtc` and the
//!    toolkit both keep it there: `.../cu13/lib/libnvrtc.so.13`, `.../cu13/include`);
//! 3. `$CUDA_HOME/include`, `$CUDA_PATH/include`;
//! 4. `/usr/local/cuda/include`, then `/usr/local/cuda-*/include`, newest first;
//! 5. pip's `nvidia/cu13/include` (and CUDA 12's `nvidia/cuda_runtime/include`) in the usual
//!    site-packages folders.
//!
//! CCCL is the `cccl/` folder inside the toolkit's include folder (CUDA 13, and pip's
//! `nvidia-cuda-cccl`), or the toolkit's include folder itself where it holds `cub/` (CUDA 12).
//! What was found is printed by `check --verbose` and recorded in each case's kernel file name.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable that names the toolkit's include folder outright.
pub const INCLUDE_ENV: &str = "KBENCH_CUDA_INCLUDE";

/// The headers found, and where each came from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CudaHeaders {
    /// The folder holding `cuda_fp16.h`, and how it was found ("beside NVRTC", ...).
    pub toolkit: Option<(PathBuf, &'static str)>,
    /// The folder holding `cub/` and `cuda/std/`.
    pub cccl: Option<PathBuf>,
}

impl CudaHeaders {
    /// The folders to search, CCCL's first (its `<cuda/std/...>` must not be shadowed).
    pub fn include_dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.cccl.iter().cloned().collect();
        if let Some((toolkit, _)) = &self.toolkit {
            if !dirs.contains(toolkit) {
                dirs.push(toolkit.clone());
            }
        }
        dirs
    }

    /// One line for `check --verbose`.
    pub fn describe(&self) -> String {
        let toolkit = match &self.toolkit {
            Some((dir, how)) => format!("{} ({how})", dir.display()),
            None => format!("not found (set {INCLUDE_ENV} to the folder holding cuda_fp16.h)"),
        };
        let cccl = match &self.cccl {
            Some(dir) => dir.display().to_string(),
            None => "not found (pip install nvidia-cuda-cccl beside NVRTC)".to_string(),
        };
        format!("CUDA headers: {toolkit}; CCCL: {cccl}")
    }
}

/// The headers of this machine, looked for once per process.
pub fn cuda_headers() -> &'static CudaHeaders {
    static FOUND: OnceLock<CudaHeaders> = OnceLock::new();
    FOUND.get_or_init(|| {
        let env = |name: &str| std::env::var_os(name).map(PathBuf::from);
        find(&candidates(env(INCLUDE_ENV), nvrtc_library(), &env))
    })
}

/// The folders that may hold the toolkit's headers, in the order they are tried.
fn candidates(
    explicit: Option<PathBuf>,
    nvrtc: Option<PathBuf>,
    env: &dyn Fn(&str) -> Option<PathBuf>,
) -> Vec<(PathBuf, &'static str)> {
    let mut out: Vec<(PathBuf, &'static str)> = Vec::new();
    if let Some(dir) = explicit {
        out.push((dir, INCLUDE_ENV));
    }
    if let Some(lib) = nvrtc {
        if let Some(parent) = lib.parent().and_then(Path::parent) {
            out.push((parent.join("include"), "beside NVRTC"));
        }
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = env(var) {
            out.push((
                home.join("include"),
                if var == "CUDA_HOME" {
                    "$CUDA_HOME"
                } else {
                    "$CUDA_PATH"
                },
            ));
        }
    }
    out.push(("/usr/local/cuda/include".into(), "/usr/local/cuda"));
    let mut versioned: Vec<PathBuf> = glob::glob("/usr/local/cuda-*/include")
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    versioned.sort_by_key(|p| std::cmp::Reverse(version_key(p)));
    out.extend(versioned.into_iter().map(|p| (p, "/usr/local/cuda-*")));
    for site in super::libs::python_site_dirs() {
        for layout in ["nvidia/cu13/include", "nvidia/cuda_runtime/include"] {
            let pattern = format!("{site}{layout}");
            for dir in glob::glob(&pattern).into_iter().flatten().flatten() {
                out.push((dir, "pip's nvidia packages"));
            }
        }
    }
    out
}

/// `cuda-12.4` sorts below `cuda-12.10`.
fn version_key(path: &Path) -> Vec<u32> {
    let name = path
        .parent()
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("");
    name.trim_start_matches("cuda-")
        .split('.')
        .map(|part| part.parse().unwrap_or(0))
        .collect()
}

/// The first candidate holding `cuda_fp16.h`, and CCCL beside it (or in a later candidate).
fn find(candidates: &[(PathBuf, &'static str)]) -> CudaHeaders {
    let toolkit = (candidates.iter())
        .find(|(dir, _)| dir.join("cuda_fp16.h").is_file())
        .cloned();
    let cccl_in = |dir: &Path| -> Option<PathBuf> {
        [dir.join("cccl"), dir.to_path_buf()]
            .into_iter()
            .find(|d| d.join("cub").is_dir() && d.join("cuda").is_dir())
    };
    let cccl = (toolkit.iter().map(|(dir, _)| dir))
        .chain(candidates.iter().map(|(dir, _)| dir))
        .find_map(|dir| cccl_in(dir));
    CudaHeaders { toolkit, cccl }
}

/// The NVRTC library this process loaded, from the process's memory map (cudarc opens it by
/// its soname, wherever the loader finds it): None where it is not loaded or cannot be read.
fn nvrtc_library() -> Option<PathBuf> {
    // Loads the library if nothing has yet; a machine without NVRTC has no headers beside it.
    super::nvrtc::nvrtc_present().ok()?;
    super::nvrtc::nvrtc_version().ok()?;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            Path::new(path)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libnvrtc.so"))
        })
        .map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake toolkit: `include/cuda_fp16.h`, and CCCL in `include/cccl` when asked.
    fn toolkit(root: &Path, with_cccl: bool) -> PathBuf {
        let include = root.join("include");
        std::fs::create_dir_all(&include).unwrap();
        std::fs::write(include.join("cuda_fp16.h"), "").unwrap();
        if with_cccl {
            std::fs::create_dir_all(include.join("cccl/cub")).unwrap();
            std::fs::create_dir_all(include.join("cccl/cuda/std")).unwrap();
        }
        include
    }

    #[test]
    fn the_headers_beside_nvrtc_come_before_cuda_home_and_cccl_is_found_inside_them() {
        let dir = tempfile::tempdir().unwrap();
        let pip = toolkit(&dir.path().join("pip/cu13"), true);
        let home = toolkit(&dir.path().join("home"), false);
        let lib = dir.path().join("pip/cu13/lib/libnvrtc.so.13");
        let env = |name: &str| (name == "CUDA_HOME").then(|| dir.path().join("home"));
        let found = find(&candidates(None, Some(lib), &env));
        assert_eq!(found.toolkit, Some((pip.clone(), "beside NVRTC")));
        assert_eq!(found.cccl, Some(pip.join("cccl")));
        assert_eq!(found.include_dirs(), [pip.join("cccl"), pip]);
        // Without NVRTC's folder, $CUDA_HOME's; its CCCL is missing, and nothing else has one.
        let found = find(&candidates(None, None, &env));
        assert_eq!(found.toolkit, Some((home, "$CUDA_HOME")));
        assert!(
            found.describe().contains("CCCL: not found"),
            "{}",
            found.describe()
        );
    }

    #[test]
    fn the_environment_variable_wins_and_a_folder_without_the_header_is_passed_over() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let chosen = toolkit(&dir.path().join("chosen"), false);
        let env = |_: &str| None;
        let found = find(&candidates(Some(empty), None, &env));
        assert_ne!(found.toolkit.as_ref().map(|t| t.1), Some(INCLUDE_ENV));
        let found = find(&candidates(Some(chosen.clone()), None, &env));
        assert_eq!(found.toolkit, Some((chosen, INCLUDE_ENV)));
    }

    #[test]
    fn newer_toolkits_sort_first() {
        let key = |s: &str| version_key(Path::new(s));
        assert!(key("/usr/local/cuda-12.10/include") > key("/usr/local/cuda-12.4/include"));
        assert!(key("/usr/local/cuda-13.0/include") > key("/usr/local/cuda-12.10/include"));
    }
}
