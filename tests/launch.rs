//! `[measure] launch = "graph"` / `--launch graph`: kernel-scope runs replayed from a CUDA graph,
//! on the mock device (whose stand-in launcher can always be replayed: the GPU half, with a
//! launcher that cannot, is in tests/gpu.rs). The setting is recorded, each case's timer says
//! how its runs were launched, the profiler is not used on graph launches, bad values are
//! refused with their place, and compare refuses to judge runs launched differently.

use crate::common;

use std::path::Path;

use serde_json::Value;

const MOCK: &str = "[device]\nprofiler = true\n[timing]\nseed = 5\njitter = 0.0\n";

fn manifest(measure: &str) -> String {
    format!(
        "[study]\nname = \"launch\"\nalgorithm = \"reduce\"\nseed = 4\n\
         [grid]\nn = [1000, 4099]\ndtype = \"f32\"\n\
         [measure]\nwarmup = 1\nmin_samples = 5\nmax_samples = 5\n{measure}\n\
         [[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_optimized\"\n\
         [[variant]]\nname = \"cpu\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n"
    )
}

/// `kbench run` in `dir` with `args`: the exit code and, where one was written, the results.
fn run(dir: &Path, text: &str, results: &str, args: &[&str]) -> (i32, String, Option<Value>) {
    let (out, doc) = common::run_on_mock(dir, text, MOCK, results, args, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap(), stderr, doc)
}

fn timer(case: &Value) -> &Value {
    &case["measurement"]["gpu_timer"]
}

#[test]
fn graph_launches_are_recorded_per_case_and_not_profiled() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, doc) = run(dir.path(), &manifest("launch = \"graph\""), "g.json", &[]);
    assert_eq!(code, 0, "{stderr}");
    let doc = doc.unwrap();
    assert_eq!(doc["manifest"]["measure"]["launch"], "graph");
    let gpu: Vec<&Value> = (doc["cases"].as_array().unwrap().iter())
        .filter(|c| c["backend"] == "cuda")
        .collect();
    assert_eq!(gpu.len(), 2);
    for case in gpu {
        assert_eq!(case["status"], "passed");
        let timer = timer(case);
        assert_eq!(timer["launched_as_graph"], true, "{timer}");
        assert!(timer["graph_refused"].is_null(), "{timer}");
        let why = timer["profiler_skipped"].as_str().unwrap_or_default();
        assert!(why.contains("CUDA graph"), "{timer}");
    }

    // The HTML report's settings say so.
    let html = common::kbench()
        .current_dir(dir.path())
        .args(["report", "g.json", "--format", "html"])
        .output()
        .unwrap();
    let html = String::from_utf8_lossy(&html.stdout);
    assert!(html.contains("kernel-scope runs replayed from CUDA graphs"));

    // The same study launched on the stream: nothing about graphs, and profiled.
    let (code, stderr, doc) = run(dir.path(), &manifest(""), "s.json", &[]);
    assert_eq!(code, 0, "{stderr}");
    let doc = doc.unwrap();
    assert!(doc["manifest"]["measure"].get("launch").is_none());
    for case in doc["cases"].as_array().unwrap() {
        if case["backend"] == "cuda" {
            assert!(timer(case).get("launched_as_graph").is_none(), "{case}");
            assert!(!timer(case)["profiler_samples_s"]
                .as_array()
                .unwrap()
                .is_empty());
        }
    }

    // Compare refuses to judge one against the other (exit 2), naming the setting.
    let out = common::kbench()
        .current_dir(dir.path())
        .args(["compare", "s.json", "g.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("stream in the baseline, graph in the new run"),
        "{stderr}"
    );
}

#[test]
fn the_command_line_overrides_the_manifests_launch_and_is_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--launch", "graph"];
    let (code, stderr, doc) = run(dir.path(), &manifest(""), "o.json", &args);
    assert_eq!(code, 0, "{stderr}");
    let doc = doc.unwrap();
    assert_eq!(doc["manifest"]["measure"]["launch"], "graph");
    assert_eq!(doc["manifest"]["overrides"]["launch"], "graph");
    let gpu = (doc["cases"].as_array().unwrap().iter()).find(|c| c["backend"] == "cuda");
    assert_eq!(timer(gpu.unwrap())["launched_as_graph"], true);
}

#[test]
fn a_bad_launch_value_is_refused_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let (code, stderr, doc) = run(dir.path(), &manifest("launch = \"graphs\""), "b.json", &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(doc.is_none());
    assert!(stderr.contains("study.toml:12:10"), "{stderr}");
    assert!(stderr.contains("unknown variant `graphs`"), "{stderr}");
    assert!(stderr.contains("measure.launch"), "{stderr}");
}
