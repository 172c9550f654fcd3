//! Records the git revision kbench was built from, for the results' environment fingerprint.
//!
//! Nothing here may write to the repository: `git describe --dirty` refreshes and rewrites
//! .git/index, which this script watches, so every build would make the next one rebuild kbench.
//! The revision comes from `rev-parse`, and dirtiness from `status --no-optional-locks`, which
//! compares the files without saving the refreshed index.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("--no-optional-locks")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn main() {
    let revision = match git(&["rev-parse", "--short", "HEAD"]) {
        Some(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|changes| !changes.is_empty());
            format!("{hash}{}", if dirty { "-dirty" } else { "" })
        }
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=KBENCH_GIT_REVISION={revision}");
    // Where the files live: in a worktree (or a submodule) .git is a file naming another folder,
    // and a path that does not exist would make cargo run this script on every build.
    // logs/HEAD grows with every commit and checkout (a branch's ref may sit in packed-refs).
    for name in ["HEAD", "index", "logs/HEAD"] {
        if let Some(path) = git(&["rev-parse", "--git-path", name]).map(PathBuf::from) {
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    // An edited source makes the build dirty without touching git's files.
    for path in ["build.rs", "Cargo.toml", "src", "kernels"] {
        println!("cargo:rerun-if-changed={path}");
    }
}
