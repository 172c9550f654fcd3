//! Optional NVIDIA libraries that cudarc loads at run time (CUPTI, cuBLAS, cuSPARSE). cudarc opens
//! a library by its usual names (dlopen by soname) on first use and panics where it cannot, so
//! each is looked for here first: by cudarc's names, then by path where CUDA installs it and where
//! pip packages (PyTorch's wheels) keep it. A copy loaded by path stays loaded for the process's
//! life, so cudarc's dlopen by soname then finds it.

use std::path::{Path, PathBuf};

/// Where to look for one library.
pub struct Search<'a> {
    /// What the user calls it in messages: "CUPTI", "cuBLAS".
    pub label: &'a str,
    /// cudarc's own check (it tries to dlopen the library by its usual names).
    pub present: unsafe fn() -> bool,
    /// An environment variable that may hold the library's path.
    pub env_var: &'a str,
    /// Glob patterns of the library's file, most likely first.
    pub patterns: Vec<String>,
    /// Globs of libraries it needs, relative to its own folder, loaded from there first (libcublas
    /// needs libcublasLt of the same release beside it; libcusparse, libnvJitLink, which CUDA 12's
    /// pip wheels keep in a sibling package: `../../nvjitlink/lib/libnvJitLink.so*`).
    pub companions: &'a [&'a str],
}

/// The site-packages folders of the Python installs pip packages usually land in, each with a
/// trailing `/`: PyTorch's virtual environments under /opt, the system's and the user's.
pub fn python_site_dirs() -> Vec<String> {
    let mut dirs = vec![
        "/opt/*/.venv/lib/python3*/site-packages/".to_string(),
        "/opt/*/venv/lib/python3*/site-packages/".to_string(),
        "/usr/local/lib/python3*/dist-packages/".to_string(),
        "/usr/local/lib/python3*/site-packages/".to_string(),
        "/usr/lib/python3/dist-packages/".to_string(),
    ];
    if let Some(env) = std::env::var_os("VIRTUAL_ENV") {
        dirs.insert(
            0,
            format!("{}/lib/python3*/site-packages/", env.to_string_lossy()),
        );
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(format!(
            "{}/.local/lib/python3*/site-packages/",
            home.to_string_lossy()
        ));
    }
    dirs
}

/// The library's candidate paths: the environment variable's, then every pattern's matches.
fn candidates(search: &Search) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os(search.env_var) {
        paths.push(path.into());
    }
    for pattern in &search.patterns {
        paths.extend(glob::glob(pattern).into_iter().flatten().flatten());
    }
    paths
}

/// The files matching `companion`, a glob relative to `dir` (it may climb out with `..`).
fn companion_paths(dir: &Path, companion: &str) -> Vec<PathBuf> {
    let pattern = format!("{}/{companion}", dir.display());
    glob::glob(&pattern)
        .into_iter()
        .flatten()
        .flatten()
        .collect()
}

/// Loads, for each of `companions`, the first file matching it that loads (best effort: the
/// library may find them on its own).
fn load_companions(dir: &Path, companions: &[&str]) {
    for companion in companions {
        for path in companion_paths(dir, companion) {
            // SAFETY: loading an NVIDIA library runs no initialisation that depends on the caller.
            if let Ok(library) = unsafe { libloading::Library::new(&path) } {
                // Kept loaded for the process's life (see the module's doc).
                std::mem::forget(library);
                break;
            }
        }
    }
}

/// Makes the library loadable by cudarc, or says why it is not.
pub fn load(search: &Search) -> Result<(), String> {
    // SAFETY: only tries to dlopen the library by its usual names.
    if unsafe { (search.present)() } {
        return Ok(());
    }
    let paths = candidates(search);
    for path in &paths {
        if let Some(dir) = path.parent() {
            load_companions(dir, search.companions);
        }
        // SAFETY: as above.
        if let Ok(library) = unsafe { libloading::Library::new(path) } {
            std::mem::forget(library);
            // SAFETY: as above.
            if unsafe { (search.present)() } {
                return Ok(());
            }
        }
    }
    Err(format!(
        "{} not found: not by its usual names, nor at {} ({} file{} tried); set {} to its path, or add its folder to LD_LIBRARY_PATH",
        search.label,
        search
            .patterns
            .first()
            .map_or("its usual places", String::as_str),
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        search.env_var
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe fn never() -> bool {
        false
    }

    #[test]
    fn a_missing_library_is_an_error_naming_it_and_the_variable_not_a_panic() {
        let search = Search {
            label: "libnothing",
            present: never,
            env_var: "KBENCH_TEST_NO_SUCH_LIB",
            patterns: vec!["/nonexistent-kbench-dir/libnothing.so*".into()],
            companions: &["libnothingLt.so*"],
        };
        let err = load(&search).unwrap_err();
        assert!(err.contains("libnothing not found"), "{err}");
        assert!(err.contains("KBENCH_TEST_NO_SUCH_LIB"), "{err}");
        assert!(err.contains("0 files tried"), "{err}");
    }

    #[test]
    fn companions_are_found_beside_the_library_or_in_a_sibling_package() {
        // CUDA 12's wheels: nvidia/cusparse/lib beside nvidia/nvjitlink/lib; CUDA 13's: one folder.
        let site = tempfile::tempdir().unwrap();
        let nvidia = site.path().join("nvidia");
        for dir in ["cusparse/lib", "nvjitlink/lib", "cu13/lib"] {
            std::fs::create_dir_all(nvidia.join(dir)).unwrap();
        }
        for file in [
            "nvjitlink/lib/libnvJitLink.so.12",
            "cu13/lib/libnvJitLink.so.13",
        ] {
            std::fs::write(nvidia.join(file), b"").unwrap();
        }
        let sibling = "../../nvjitlink/lib/libnvJitLink.so*";
        let found = companion_paths(&nvidia.join("cusparse/lib"), sibling);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].ends_with("nvjitlink/lib/libnvJitLink.so.12"));
        assert!(companion_paths(&nvidia.join("cusparse/lib"), "libnvJitLink.so*").is_empty());
        let beside = companion_paths(&nvidia.join("cu13/lib"), "libnvJitLink.so*");
        assert_eq!(beside, vec![nvidia.join("cu13/lib/libnvJitLink.so.13")]);
    }

    #[test]
    fn pip_folders_include_torch_virtual_environments() {
        assert!(python_site_dirs()
            .iter()
            .any(|d| d.starts_with("/opt/*/.venv/lib/python3*")));
    }
}
