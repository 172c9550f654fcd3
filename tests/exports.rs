//! The output formats of src/report/export.rs: the CI dashboards' Bencher Metric Format,
//! github-action-benchmark input and PyTorch OSS benchmark database records, snapshot-tested on a
//! results file made deterministic (a real CPU run whose samples, clocks and host are then
//! fixed), the PyTorch records also against a JSON Schema of the database's table and with a GPU
//! (the mock device); `kbench run --export` and `kbench report --export` writing every format;
//! an export refused before anything runs; and `kbench run --results FILE`, which copies the
//! results file and never writes over one.

use crate::common;
use common::kbench;
use common::results_file_in;

use std::path::{Path, PathBuf};

use kbench::device::KernelSource;
use serde_json::Value;

const STUDY: &str = "[study]\nname = \"exported\"\nalgorithm = \"reduce\"\nseed = 7\n\
[grid]\nn = [1000, 4096]\ndtype = [\"i32\", \"f32\"]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
[[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
[measure]\nwarmup = 0\nmin_samples = 6\nmax_samples = 6\n";

/// A real run of `STUDY`, then every measured number and the environment fixed, so what the
/// exports print depends on nothing but the code. One case is given 3 samples: too few for a
/// 95% CI of the median, which the exports must then leave out.
fn deterministic_results(dir: &Path) -> PathBuf {
    let (_out, results) = common::run_study(STUDY, KernelSource::default());
    let mut doc = results.doc.clone();
    doc.started_at = "2026-01-01T00:00:00+00:00".into();
    doc.finished_at = Some("2026-01-01T00:01:00+00:00".into());
    let env = &mut doc.environment;
    env.host = "testhost".into();
    env.os = "linux".into();
    env.arch = "x86_64".into();
    env.cpu_model = "test cpu".into();
    env.cpu_threads = 2;
    env.kbench_version = "0.0.0".into();
    env.git_revision = "test".into();
    env.command_line = vec!["kbench".into(), "run".into()];
    env.gpu_unavailable = Some("no GPU in this test".into());
    for case in &mut doc.cases {
        case.wall_s = 0.0;
        let Some(measurement) = &mut case.measurement else {
            continue;
        };
        let base_s = 1e-6 * (case.index + 1) as f64;
        let count = if case.index == 0 { 3 } else { 6 };
        measurement.samples_s = (0..count)
            .map(|k| base_s * (1.0 + 0.01 * k as f64))
            .collect();
        let summary = kbench::stats::summarize(&measurement.samples_s);
        case.gbytes_per_s = Some(case.bytes_moved as f64 / summary.median_s / 1e9);
        case.summary = Some(summary);
    }
    let path = dir.join("exported.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// What `report --format` prints with every column (as files get them; on a terminal the
/// table leaves some out to fit).
fn report(results: &Path, format: &str) -> String {
    let out = kbench()
        .arg("report")
        .arg(results)
        .args(["--format", format, "--wide"])
        .assert()
        .success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn bencher_metric_format_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let results = deterministic_results(dir.path());
    let bmf = report(&results, "bmf");
    let parsed: Value = serde_json::from_str(&bmf).unwrap();
    // Every passed case, none of the skipped CUDA ones.
    assert_eq!(parsed.as_object().unwrap().len(), 8, "{bmf}");
    assert!(!bmf.contains("exported/gpu"), "{bmf}");
    insta::assert_snapshot!(bmf);
}

#[test]
fn github_action_benchmark_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let results = deterministic_results(dir.path());
    let gab = report(&results, "github-action-benchmark");
    let parsed: Value = serde_json::from_str(&gab).unwrap();
    let entries = parsed.as_array().unwrap();
    assert_eq!(entries.len(), 8, "{gab}");
    assert!(entries
        .iter()
        .all(|e| e["unit"] == "ns" && e["value"].is_number()));
    // The case with 3 samples has no interval.
    assert_eq!(
        entries.iter().filter(|e| e.get("range").is_none()).count(),
        1,
        "{gab}"
    );
    insta::assert_snapshot!(gab);
}

#[test]
fn report_exports_every_format_as_it_prints_it() {
    let dir = tempfile::tempdir().unwrap();
    let results = deterministic_results(dir.path());
    for format in kbench::report::export::names() {
        let path = dir.path().join("exports").join(format!("x.{format}"));
        kbench()
            .arg("report")
            .arg(&results)
            .arg("--export")
            .arg(format!("{format}={}", path.display()))
            .assert()
            .success()
            .stderr(predicates::str::contains(format!(
                "wrote {}",
                path.display()
            )));
        let written = std::fs::read_to_string(&path).unwrap();
        assert_eq!(written, report(&results, format), "{format}");
    }
    // The export may not replace the results it is made from.
    kbench()
        .arg("report")
        .arg(&results)
        .arg("--export")
        .arg(format!("json={}", results.display()))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("over the results file"));
    for bad in ["bmf", "nope=x.json", "bmf="] {
        kbench()
            .arg("report")
            .arg(&results)
            .args(["--export", bad])
            .assert()
            .code(2);
    }
}

#[test]
fn run_exports_each_study_and_refuses_a_shared_path_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("exported.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out = dir.path().join("out");
    let bmf = dir.path().join("bmf").join("{study}.json");
    let gab = dir.path().join("gab.json");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .arg("--export")
        .arg(format!("bmf={}", bmf.display()))
        .arg("--export")
        .arg(format!("github-action-benchmark={}", gab.display()))
        .assert()
        .success();
    let results = results_file_in(&out.join("exported"));
    let doc = kbench::results::load_results(&results).unwrap();
    let bmf: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("bmf").join("exported.json")).unwrap(),
    )
    .unwrap();
    let gab: Value = serde_json::from_str(&std::fs::read_to_string(&gab).unwrap()).unwrap();
    let passed: Vec<_> = doc.cases.iter().filter(|c| c.summary.is_some()).collect();
    assert_eq!(passed.len(), 8);
    for case in passed {
        let name = kbench::report::format::case_name(&doc, case);
        let median_ns = case.summary.as_ref().unwrap().median_s * 1e9;
        let in_bmf = bmf[&name]["latency"]["value"].as_f64().unwrap();
        assert!(
            (in_bmf - median_ns).abs() <= 1e-3,
            "{name}: {in_bmf} vs {median_ns}"
        );
        let entry = gab
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == name.as_str())
            .unwrap();
        assert_eq!(entry["value"].as_f64(), Some(in_bmf));
        let (lower, upper) = (
            bmf[&name]["latency"]["lower_value"].as_f64().unwrap(),
            bmf[&name]["latency"]["upper_value"].as_f64().unwrap(),
        );
        assert!(lower <= in_bmf && in_bmf <= upper, "{name}");
    }

    // Two studies, one path: refused before anything is measured.
    let second = dir.path().join("second.toml");
    std::fs::write(&second, STUDY.replace("exported", "second")).unwrap();
    let out2 = dir.path().join("out2");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg(&second)
        .arg("--out-dir")
        .arg(&out2)
        .arg("--export")
        .arg(format!("bmf={}", dir.path().join("one.json").display()))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("{study}"));
    assert!(!out2.exists(), "a refused run must not write anything");
}

#[test]
fn the_formats_the_docs_export_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = 0;
    for doc in [
        "docs/ci/gpu-benchmarks.yml",
        "README.md",
        "docs/results-format.md",
    ] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for (at, _) in text.match_indices("--export ") {
            let rest = &text[at + "--export ".len()..];
            let Some((name, _)) = rest.split_once('=') else {
                continue;
            };
            if name.starts_with(|c: char| c.is_ascii_lowercase()) && !name.contains(' ') {
                assert!(
                    kbench::report::export::find(name).is_some(),
                    "{doc} exports the unknown format `{name}`"
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 5, "only {seen} exports found in the docs");
}

/// The PyTorch OSS benchmark database's record, as its table `benchmark.oss_ci_benchmark_v3`
/// (pytorch/test-infra, clickhouse_db_schema/oss_ci_benchmark_v3/schema.sql) types it: every
/// `extra_info` a map of strings, `benchmark_values` numbers, the runners' counts unsigned
/// integers, and the names the wiki marks required present.
fn pytorch_record_schema() -> Value {
    let strings = serde_json::json!({
        "type": "object", "additionalProperties": { "type": "string" }
    });
    let count = serde_json::json!({ "type": "integer", "minimum": 0 });
    serde_json::json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["benchmark", "model", "metric", "runners"],
            "additionalProperties": false,
            "properties": {
                "benchmark": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string", "minLength": 1 },
                        "mode": { "type": "string" },
                        "dtype": { "type": "string" },
                        "extra_info": strings,
                    },
                },
                "model": {
                    "type": "object",
                    "required": ["name"],
                    "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string", "minLength": 1 },
                        "type": { "type": "string" },
                        "backend": { "type": "string" },
                        "origins": { "type": "array", "items": { "type": "string" } },
                        "extra_info": strings,
                    },
                },
                "metric": {
                    "type": "object",
                    "required": ["name", "benchmark_values"],
                    "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string", "minLength": 1 },
                        "benchmark_values": {
                            "type": "array", "minItems": 1, "items": { "type": "number" }
                        },
                        "target_value": { "type": "number" },
                        "extra_info": strings,
                    },
                },
                "runners": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "additionalProperties": false,
                        "properties": {
                            "name": { "type": "string" },
                            "type": { "type": "string" },
                            "cpu_info": { "type": "string" },
                            "cpu_count": count,
                            "mem_info": { "type": "string" },
                            "avail_mem_in_gb": count,
                            "gpu_info": { "type": "string" },
                            "gpu_count": count,
                            "gpu_mem_info": { "type": "string" },
                            "avail_gpu_mem_in_gb": count,
                            "extra_info": strings,
                        },
                    },
                },
            },
        },
    })
}

fn assert_pytorch_shape(records: &Value, text: &str) {
    let validator = jsonschema::validator_for(&pytorch_record_schema()).unwrap();
    let complaints: Vec<String> = validator
        .iter_errors(records)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(complaints.is_empty(), "{}\n{text}", complaints.join("\n"));
}

#[test]
fn pytorch_oss_benchmark_snapshot_has_the_database_shape() {
    let dir = tempfile::tempdir().unwrap();
    let results = deterministic_results(dir.path());
    let text = report(&results, "pytorch-oss-benchmark");
    let records: Value = serde_json::from_str(&text).unwrap();
    assert_pytorch_shape(&records, &text);
    let records = records.as_array().unwrap();
    // Each of the 8 passed cases: its median, and its GB/s.
    let metric = |name: &str| {
        records
            .iter()
            .filter(|r| r["metric"]["name"] == name)
            .count()
    };
    assert_eq!(
        (metric("median_ns"), metric("gbytes_per_s")),
        (8, 8),
        "{text}"
    );
    assert_eq!(records.len(), 16, "{text}");
    let doc = kbench::results::load_results(&results).unwrap();
    for case in doc.cases.iter().filter(|c| c.summary.is_some()) {
        let name = kbench::report::format::case_name(&doc, case);
        let median = (records.iter())
            .find(|r| r["model"]["name"] == name.as_str() && r["metric"]["name"] == "median_ns")
            .unwrap_or_else(|| panic!("no median of {name}"));
        let median_ns = case.summary.as_ref().unwrap().median_s * 1e9;
        let value = median["metric"]["benchmark_values"][0].as_f64().unwrap();
        assert!(
            (value - median_ns).abs() <= 1e-3,
            "{name}: {value} vs {median_ns}"
        );
        assert_eq!(median["benchmark"]["name"], "exported");
        assert_eq!(median["benchmark"]["mode"], "cpu");
        assert_eq!(median["model"]["backend"], "cpu");
        assert_eq!(median["runners"][0]["cpu_info"], "test cpu");
        assert_eq!(median["runners"][0]["gpu_count"], 0);
    }
    // The case with 3 samples has no interval; the others do.
    let with_ci = (records.iter())
        .filter(|r| r["metric"]["extra_info"].get("ci95_lower_ns").is_some())
        .count();
    assert_eq!(with_ci, 7, "{text}");
    assert!(
        !text.contains("exported/gpu"),
        "skipped cases have no time: {text}"
    );
    insta::assert_snapshot!(text);
}

/// A CUDA case's record names its GPU as the runner: the mock device, saying it is one.
#[test]
fn pytorch_oss_benchmark_names_the_gpu_a_case_ran_on() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("exported.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let mock = dir.path().join("mock.toml");
    std::fs::write(&mock, "[device]\nname = \"H100\"\nmemory_gib = 80.0\n").unwrap();
    let records = dir.path().join("pytorch.json");
    kbench()
        .env("KBENCH_MOCK_GPU", &mock)
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(dir.path().join("out"))
        .arg("--export")
        .arg(format!("pytorch-oss-benchmark={}", records.display()))
        .assert()
        .success();
    let text = std::fs::read_to_string(&records).unwrap();
    let records: Value = serde_json::from_str(&text).unwrap();
    assert_pytorch_shape(&records, &text);
    let gpu: Vec<&Value> = (records.as_array().unwrap().iter())
        .filter(|r| r["model"]["backend"] == "cuda")
        .collect();
    // The 4 GPU cases, each with its median and its GB/s.
    assert_eq!(gpu.len(), 8, "{text}");
    for r in gpu {
        let runner = &r["runners"][0];
        assert_eq!(runner["gpu_info"], "MOCK H100", "{r}");
        assert_eq!(runner["gpu_count"], 1);
        assert_eq!(runner["avail_gpu_mem_in_gb"], 80);
        assert!(runner["extra_info"]["mock"].is_string(), "{r}");
        assert_eq!(r["benchmark"]["mode"], "kernel");
        assert_eq!(r["model"]["type"], "cuda kernel");
    }
}

/// `run --results FILE`: the results file, copied once the study has run; an existing FILE is
/// refused before anything runs (nothing measured, nothing written) unless
/// `--overwrite-results`; several studies need `{study}` in FILE.
#[test]
fn run_results_copies_the_results_file_and_never_overwrites_one() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("exported.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let copy = dir.path().join("ci").join("new.json");
    let run = |out: &str, extra: &[&str]| {
        let mut cmd = kbench();
        cmd.arg("run")
            .arg(&manifest)
            .arg("--out-dir")
            .arg(dir.path().join(out))
            .arg("--results")
            .arg(&copy)
            .args(extra);
        cmd.assert()
    };
    run("out", &[]).success();
    let results = results_file_in(&dir.path().join("out").join("exported"));
    assert_eq!(common::read(&copy), common::read(&results));
    let before = std::fs::read_to_string(&copy).unwrap();

    run("again", &[])
        .code(2)
        .stderr(predicates::str::contains(format!(
            "--results {}: {} exists",
            copy.display(),
            copy.display()
        )))
        .stderr(predicates::str::contains("--overwrite-results"));
    assert!(
        !dir.path().join("again").exists(),
        "a refused run wrote something"
    );
    assert_eq!(std::fs::read_to_string(&copy).unwrap(), before);

    run("replaced", &["--overwrite-results"]).success();
    let replaced = results_file_in(&dir.path().join("replaced").join("exported"));
    assert_eq!(common::read(&copy), common::read(&replaced));

    // Two studies: one file each, named by `{study}`; one file for both is refused.
    let second = dir.path().join("second.toml");
    std::fs::write(&second, STUDY.replace("exported", "second")).unwrap();
    let each = dir.path().join("each-{study}.json");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg(&second)
        .arg("--out-dir")
        .arg(dir.path().join("two"))
        .arg("--results")
        .arg(&each)
        .assert()
        .success();
    for study in ["exported", "second"] {
        let copied = common::read(&dir.path().join(format!("each-{study}.json")));
        assert_eq!(copied["study"]["name"], study);
    }
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg(&second)
        .arg("--out-dir")
        .arg(dir.path().join("three"))
        .arg("--results")
        .arg(dir.path().join("both.json"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("put {study} in the path"));
    // --overwrite-results alone means nothing, and an empty path is no path: both refused
    // before anything runs.
    kbench()
        .args(["run", "experiments/reduction.toml", "--overwrite-results"])
        .assert()
        .code(2);
    kbench()
        .args(["run", "experiments/reduction.toml", "--results", ""])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("an empty path"));
}
