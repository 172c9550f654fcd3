//! A full disk under a SYMGS study (issue 30): on the GPU machine, with its disk filled by
//! `--save-outputs all`, `kbench run` of a `symgs` study exited 101 (a panic) within a second
//! where every other study exited 2 with the message. Here a SYMGS study (its Matrix Market file
//! axis, CPU and CUDA variants, every array saved) runs with its output folder and TMPDIR on a
//! small tmpfs that is full or nearly so, and must exit 2 naming the disk, never panic: on the
//! mock device without a GPU, and on the GPU itself (ignored here; run on the GPU machine with
//! `--include-ignored`). Both need mount namespaces (`unshare --user --map-root-user --mount`),
//! or root: where neither works the test fails saying so, rather than pass untested.

use crate::common;

use std::path::Path;
use std::process::Command;

/// The shipped SYMGS study's variants on its small matrices: every Matrix Market file of
/// `datasets/`, a generated 2-D Laplacian, both dtypes and orders.
fn symgs_study(repo: &Path) -> String {
    format!(
        r#"[study]
name = "symgs_full_disk"
algorithm = "symgs"
seed = 2

[grid]
matrix = ["{repo}/datasets/*.mtx", "laplace2d:100"]
dtype = ["f32", "f64"]
order = ["natural", "colour"]
block = 256

[[variant]]
name = "sequential"
backend = "cpu"
impl = "sequential"

[[variant]]
name = "colours_threads"
backend = "cpu"
impl = "colours_threads"

[[variant]]
name = "lock"
backend = "cuda"
kernel = "symgs_lock"

[[variant]]
name = "levels"
backend = "cuda"
kernel = "symgs_levels"

[[variant]]
name = "colours"
backend = "cuda"
kernel = "symgs_colours"

[[variant]]
name = "cusparse"
backend = "cuda"
kernel = "symgs_cusparse"

[measure]
warmup = 1
min_samples = 3
max_samples = 3

[[claim]]
text = "every variant matches the sequential sweep of its row order"
source = "issue 15"
kind = "passes"
variants = ["sequential", "colours_threads", "lock", "levels", "colours", "cusparse"]
"#,
        repo = repo.display()
    )
}

/// Runs the study with `--save-outputs all`, its output folder and TMPDIR on a tmpfs of 1 MiB
/// with `free_kib` KiB left, for each of `free_kib`; `mock`: the mock device file, if any.
/// Asserts each run exits 2 saying the disk is full.
fn assert_full_disk_exits_2(free_kib: &[u32], mock: Option<&str>) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("symgs.toml");
    std::fs::write(&manifest, symgs_study(repo)).unwrap();
    let mock_file = dir.path().join("mock.toml");
    if let Some(mock) = mock {
        std::fs::write(&mock_file, mock).unwrap();
    }
    for &free in free_kib {
        let mount = tempfile::tempdir().unwrap();
        let script = format!(
            "mount -t tmpfs -o size=1024k kbench-full \"$MNT\" || exit 97\n\
             dd if=/dev/zero of=\"$MNT/fill\" bs=1k count={} 2>/dev/null\n\
             TMPDIR=\"$MNT\" \"$KBENCH\" run \"$MANIFEST\" --out-dir \"$MNT/out\" --save-outputs all",
            1024 - free
        );
        let mut command = Command::new("unshare");
        command.args([
            "--user",
            "--map-root-user",
            "--mount",
            "bash",
            "-c",
            &script,
        ]);
        command
            .env("KBENCH", common::kbench_exe())
            .env("MANIFEST", &manifest)
            .env("MNT", mount.path())
            .env_remove("KBENCH_MOCK_GPU");
        if mock.is_some() {
            command.env("KBENCH_MOCK_GPU", &mock_file);
        }
        let output = command.output().expect("unshare runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_ne!(
            output.status.code(),
            Some(97),
            "no tmpfs could be mounted in a mount namespace here: {stderr}"
        );
        assert_eq!(
            output.status.code(),
            Some(2),
            "{free} KiB free: exit {:?}\n{stderr}",
            output.status
        );
        assert!(
            stderr.contains("No space left on device") && !stderr.contains("panicked"),
            "{free} KiB free:\n{stderr}"
        );
    }
}

/// Full, a few KiB (the results file fits, its journal or the first arrays do not), and enough
/// for some cases' arrays.
const FREE_KIB: [u32; 4] = [0, 16, 128, 768];

#[test]
fn a_symgs_study_on_a_full_disk_exits_2_on_the_mock_device() {
    assert_full_disk_exits_2(&FREE_KIB, Some("[device]\nname = \"H100 (full disk)\"\n"));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_symgs_study_on_a_full_disk_exits_2_on_the_gpu() {
    assert_full_disk_exits_2(&FREE_KIB, None);
}
