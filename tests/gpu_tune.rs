//! GPU test of `kbench tune` on the example kernel (examples/tune/sum.cu) at one size: the
//! exhaustive strategy evaluates all 48 configurations on the GPU, every one gives the right
//! answer (the kernel is correct for every knob), and the winner is decided by re-measurement
//! and is the fastest evaluated configuration or statistically tied with it. Needs a CUDA GPU:
//! ignored by a plain `cargo test`, run on the GPU machine with `--include-ignored`, where a
//! missing GPU fails it.

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_example_kernel_tunes_on_the_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tune");
    std::fs::copy(example.join("sum.cu"), dir.path().join("sum.cu")).unwrap();
    let manifest = std::fs::read_to_string(example.join("tune.toml")).unwrap();
    let one_size = manifest.replace("n = [1_048_576, 8_388_608, 67_108_864]", "n = [1_048_576]");
    assert_ne!(one_size, manifest, "the example's sizes moved");
    std::fs::write(dir.path().join("tune.toml"), one_size).unwrap();
    let out = Command::new(common::kbench_exe())
        .current_dir(dir.path())
        .env_remove("KBENCH_MOCK_GPU")
        .args([
            "tune",
            "tune.toml",
            "--strategy",
            "exhaustive",
            "--json",
            "--max-time-s",
            "0.2",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let problem = &doc["problems"][0];
    let evaluations = problem["evaluations"].as_array().unwrap();
    assert_eq!(evaluations.len(), 48);
    for e in evaluations {
        assert_eq!(e["status"], "passed", "{e}");
    }
    let winner = &problem["winner"];
    let best = (evaluations.iter())
        .min_by(|a, b| {
            a["median_s"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["median_s"].as_f64().unwrap())
        })
        .unwrap();
    let kind = winner["verdict"]["kind"].as_str().unwrap();
    assert!(
        winner["values"] == best["values"] || kind != "separated",
        "the winner {} is not the fastest evaluated {} yet separated",
        winner["values"],
        best["values"]
    );
    assert!(winner["rounds"].as_u64().unwrap() >= 2, "{winner}");
}
