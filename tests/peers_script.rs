//! scripts/peers.py's own checks (`peers.self_test()`), which need no GPU and no nvcc: the bench
//! manifests' axes as the CUB harness reads them, the harness's output lines, a fake harness's
//! rows into the table, and the harness's build with a fake nvcc (the fallback from
//! `-arch=native`, the cache, a build error reported once).

use std::process::Command;

#[test]
fn peers_self_test_passes_without_a_gpu() {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("python3")
        .current_dir(root)
        .args([
            "-c",
            "import sys; sys.path.insert(0, 'scripts'); import peers; peers.self_test()",
        ])
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "peers.self_test failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(" 0 failed"), "no tally in:\n{stdout}");
}
