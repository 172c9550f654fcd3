//! GPU test of `kbench tune` on the example kernel (examples/tune/sum.cu) at one size: the
//! exhaustive strategy evaluates all 48 configurations on the GPU, every one gives the right
//! answer (the kernel is correct for every knob), and the verdict is checked against
//! independent evidence, not against the evaluation phase: `kbench run` of a manifest holding
//! only the winner and the runner-up, in 8 fresh processes, gives each process's paired
//! difference ln(runner-up) - ln(winner), and so a 99% t interval of the runner-up's slowdown.
//!
//! - separated: the independent interval must reach the verdict's (both estimate the same
//!   slowdown; each misses with a chance of at most 1-2.5%, so a correct verdict fails this
//!   with a chance of ~1% or less), and must not lie wholly below 0 (the runner-up faster);
//! - tie: the independent interval must not lie wholly outside +-(tie_within + 3%);
//! - whatever the verdict: the runner-up must not be shown faster than the winner by more
//!   than 3%.
//!
//! Needs a CUDA GPU: ignored by a plain `cargo test`, run on the GPU machine with
//! `--include-ignored`, where a missing GPU fails it.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Fresh `kbench run` processes of the two configurations.
const CHECK_RUNS: usize = 8;
/// The independent interval's two-sided confidence.
const CHECK_CONFIDENCE: f64 = 0.99;
/// How far outside a tie's band, or below 0, the independent evidence may put the pair.
const SLACK: f64 = 0.03;

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_example_kernel_tunes_on_the_gpu_and_independent_runs_agree_with_the_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tune");
    std::fs::copy(example.join("sum.cu"), dir.path().join("sum.cu")).unwrap();
    let manifest = std::fs::read_to_string(example.join("tune.toml")).unwrap();
    let one_size = manifest.replace("n = [1_048_576, 8_388_608, 67_108_864]", "n = [1_048_576]");
    assert_ne!(one_size, manifest, "the example's sizes moved");
    std::fs::write(dir.path().join("tune.toml"), &one_size).unwrap();
    let out = kbench(dir.path())
        .args(["tune", "tune.toml", "--strategy", "exhaustive", "--json"])
        .args(["--max-time-s", "0.2"])
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
    let verdict = &winner["verdict"];
    let min_rounds = doc["tune"]["min_rounds"].as_u64().unwrap();
    assert!(winner["rounds"].as_u64().unwrap() >= min_rounds, "{winner}");
    for c in winner["contenders"].as_array().unwrap() {
        assert!(c["round_cv"].as_f64().is_some(), "{c}");
    }
    let kind = verdict["kind"].as_str().unwrap();
    let runner_up = &winner["runner_up_values"];
    assert!(runner_up.is_object(), "{winner}");

    // The independent check: the two configurations alone, in fresh processes.
    let pair = restrict(&one_size, &winner["values"], runner_up);
    std::fs::write(dir.path().join("pair.toml"), pair).unwrap();
    let mut differences = Vec::new();
    for k in 0..CHECK_RUNS {
        let results = format!("check-{k}.json");
        let run = kbench(dir.path())
            .args([
                "run",
                "pair.toml",
                "--out-dir",
                "check",
                "--results",
                &results,
            ])
            .args(["--max-time-s", "0.2"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(0), "{stderr}");
        let results = common::read(&dir.path().join(&results));
        let median_of = |values: &Value| {
            (results["cases"].as_array().unwrap().iter())
                .find(|c| same(&c["params"], values))
                .and_then(|c| c["summary"]["median_s"].as_f64())
                .unwrap_or_else(|| panic!("no median for {values} in {results}"))
        };
        differences.push(median_of(runner_up).ln() - median_of(&winner["values"]).ln());
    }
    let (lo, hi) = t_interval(&differences, CHECK_CONFIDENCE);
    let (lo, hi) = (lo.exp_m1(), hi.exp_m1());
    let faster_in = differences.iter().filter(|d| **d > 0.0).count();
    eprintln!(
        "verdict: {kind}, {}; independent: runner-up slower by {:+.2}% .. {:+.2}% (99%), the winner faster in {faster_in} of {CHECK_RUNS} processes",
        verdict_interval(verdict),
        lo * 100.0,
        hi * 100.0
    );
    let tie_within = verdict["tie_within"].as_f64().unwrap();
    match kind {
        "separated" => {
            let v_lo = verdict["runner_up_slower_by_ci"][0].as_f64().unwrap();
            let v_hi = verdict["runner_up_slower_by_ci"][1].as_f64().unwrap();
            assert!(
                hi >= v_lo && lo <= v_hi,
                "separated by {}, but independent runs put the runner-up at {:+.2}% .. {:+.2}%",
                verdict_interval(verdict),
                lo * 100.0,
                hi * 100.0
            );
            assert!(
                hi > 0.0,
                "independent runs show the runner-up faster: {lo} .. {hi}"
            );
        }
        "tie" => assert!(
            lo <= tie_within + SLACK && hi >= -(tie_within + SLACK),
            "a tie, but independent runs separate the two: {:+.2}% .. {:+.2}%",
            lo * 100.0,
            hi * 100.0
        ),
        "unresolved" => {}
        other => panic!("unexpected verdict {other}: {winner}"),
    }
    assert!(
        hi >= -SLACK,
        "independent runs show the runner-up faster than the winner by more than 3%: {:+.2}% .. {:+.2}%",
        lo * 100.0,
        hi * 100.0
    );
}

fn kbench(dir: &Path) -> Command {
    let mut command = Command::new(common::kbench_exe());
    command.current_dir(dir).env_remove("KBENCH_MOCK_GPU");
    command
}

/// The manifest with its grid restricted to two configurations (a `where` over the tuned axes).
fn restrict(manifest: &str, a: &Value, b: &Value) -> String {
    let (ab, ai, bb, bi) = (&a["block"], &a["items"], &b["block"], &b["items"]);
    let list = |x: &Value, y: &Value| {
        if x == y {
            format!("[{x}]")
        } else {
            format!("[{x}, {y}]")
        }
    };
    let block_line = "block = [32, 64, 128, 256, 512, 1024]\n";
    let items_line = "items = [1, 2, 3, 4, 6, 8, 12, 16]";
    assert!(
        manifest.contains(block_line) && manifest.contains(items_line),
        "the example's grid moved"
    );
    manifest.replace(block_line, "").replace(
        items_line,
        &format!(
            "block = {}\nitems = {}\nwhere = \"(block == {ab} and items == {ai}) or (block == {bb} and items == {bi})\"",
            list(ab, bb),
            list(ai, bi)
        ),
    )
}

/// Whether a case's parameters hold these tuned values.
fn same(params: &Value, values: &Value) -> bool {
    (values.as_object().unwrap().iter()).all(|(k, v)| &params[k] == v)
}

/// The two-sided t interval of the mean of `xs`.
fn t_interval(xs: &[f64], confidence: f64) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = StudentsT::new(0.0, 1.0, n - 1.0).unwrap();
    let q = t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0);
    let half = q * (var / n).sqrt();
    (mean - half, mean + half)
}

fn verdict_interval(verdict: &Value) -> String {
    let pct = |v: &Value| format!("{:+.2}%", v.as_f64().unwrap_or(f64::NAN) * 100.0);
    format!(
        "{} .. {} ({:.1}%, {} rounds)",
        pct(&verdict["runner_up_slower_by_ci"][0]),
        pct(&verdict["runner_up_slower_by_ci"][1]),
        verdict["confidence"].as_f64().unwrap_or(f64::NAN) * 100.0,
        verdict["rounds"]
    )
}
