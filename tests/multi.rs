//! Issue 16 without a cluster: `run --shard`, `merge` (and its refusals), `--resume` of a shard
//! and of a merged file, and the refusals of `--shard` and `--devices`. tests/slurm.rs runs the
//! same through a real Slurm.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common;
use common::kbench;
use common::{case_set, read};

/// A CPU study of 16 cases, quick to run.
fn study(seed: u32) -> String {
    format!(
        "[study]\nname = \"multi\"\nalgorithm = \"reduce\"\nseed = {seed}\n[grid]\n\
         n = [1, 3, 5, 7, 100, 777, 1000, 4096]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
         [measure]\nwarmup = 0\nmin_samples = 3\nmax_samples = 3\n"
    )
}

/// `study` with a CUDA variant too: 24 cases, every third one CUDA.
fn with_gpu_variant(study: &str) -> String {
    study.replace(
        "[measure]",
        "[[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n[measure]",
    )
}

/// Lanes on GPUs 0 and 1.
fn two_lanes() -> Vec<kbench::run::lanes::LaneDevice> {
    (0..2)
        .map(|i| kbench::run::lanes::LaneDevice {
            visible: Some(i.to_string()),
            index: i,
            physical: true,
        })
        .collect()
}

fn write_manifest(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `manifest` with `extra` arguments into `out`, and returns the one results file written.
fn run_into(manifest: &Path, out: &Path, extra: &[&str]) -> PathBuf {
    kbench()
        .arg("run")
        .arg(manifest)
        .arg("--out-dir")
        .arg(out)
        .args(extra)
        .assert()
        .success();
    let files: Vec<PathBuf> = std::fs::read_dir(out.join("multi"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.into_iter().next().unwrap()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stdout).into_owned()
}

fn stderr(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&assert.get_output().stderr).into_owned()
}

#[test]
fn merged_shards_hold_the_unsharded_cases_and_resume_fills_a_missing_shard() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), "multi.toml", &study(1));
    let whole = read(&run_into(&manifest, &dir.path().join("whole"), &[]));
    assert_eq!(whole["cases"].as_array().unwrap().len(), 16);
    let shards: Vec<PathBuf> = (1..=3)
        .map(|k| {
            run_into(
                &manifest,
                &dir.path().join(format!("shard{k}")),
                &["--shard", &format!("{k}/3")],
            )
        })
        .collect();
    let mut sizes = 0;
    for (k, shard) in shards.iter().enumerate() {
        let doc = read(shard);
        assert_eq!(doc["shard"]["index"], k + 1);
        assert_eq!(doc["shard"]["count"], 3);
        assert_eq!(doc["complete"], true);
        assert_eq!(doc["planned_cases"], doc["cases"].as_array().unwrap().len());
        sizes += doc["planned_cases"].as_u64().unwrap();
    }
    assert_eq!(sizes, 16, "the shards split the plan");

    // All three: the unsharded run's cases, complete.
    let all = dir.path().join("all.json");
    let merged = kbench()
        .arg("merge")
        .args(&shards)
        .arg("-o")
        .arg(&all)
        .assert()
        .success();
    assert!(stdout(&merged).contains("16 of 16 planned cases"));
    let doc = read(&all);
    assert_eq!(case_set(&doc), case_set(&whole));
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["planned_cases"], 16);
    assert!(doc.get("shard").is_none());
    assert_eq!(doc["merged_from"].as_array().unwrap().len(), 3);

    // Shard 2 lost: exit 1, its cases listed by name, the file written; resume fills it.
    let partial = dir.path().join("partial.json");
    let merged = kbench()
        .arg("merge")
        .arg(&shards[0])
        .arg(&shards[2])
        .arg("-o")
        .arg(&partial)
        .assert()
        .code(1);
    let text = stdout(&merged);
    let lost = read(&shards[1]);
    let listed: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
    assert_eq!(
        listed.len(),
        lost["cases"].as_array().unwrap().len(),
        "{text}"
    );
    for case in lost["cases"].as_array().unwrap() {
        let name = format!("  {} ", case["variant"].as_str().unwrap());
        let n = format!("n={}", case["params"]["n"]);
        assert!(
            listed
                .iter()
                .any(|l| l.starts_with(&name) && l.contains(&n)),
            "{name}{n} is not listed:\n{text}"
        );
    }
    assert_eq!(read(&partial)["complete"], false);
    kbench()
        .args(["run", "--resume"])
        .arg(&partial)
        .assert()
        .success();
    let resumed = read(&partial);
    assert_eq!(case_set(&resumed), case_set(&whole));
    assert_eq!(resumed["complete"], true);
}

#[test]
fn a_shard_resumes_within_its_own_shard() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), "multi.toml", &study(1));
    let path = run_into(&manifest, &dir.path().join("out"), &["--shard", "2/3"]);
    let mut doc = read(&path);
    let full = case_set(&doc);
    // As if interrupted after its first case.
    doc["cases"].as_array_mut().unwrap().truncate(1);
    doc["complete"] = Value::Bool(false);
    std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
    kbench()
        .args(["run", "--resume"])
        .arg(&path)
        .assert()
        .success();
    assert_eq!(case_set(&read(&path)), full);
}

/// A results file whose recorded shard is not one (edited) is refused, exit 2 with the file and
/// the value, by `--resume`, `merge` and `report`: never a panic on a remainder by zero.
#[test]
fn a_recorded_shard_that_is_not_one_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), "multi.toml", &study(1));
    let path = run_into(&manifest, &dir.path().join("out"), &["--shard", "2/3"]);
    let mut doc = read(&path);
    doc["cases"].as_array_mut().unwrap().truncate(1);
    doc["complete"] = Value::Bool(false);
    for (index, count, words) in [
        (2, 0, "at least 1"),
        (0, 3, "numbered from 1"),
        (4, 3, "does not exist"),
    ] {
        doc["shard"] = serde_json::json!({"index": index, "count": count});
        std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
        let value = format!("\"index\": {index}, \"count\": {count}");
        let assert = kbench()
            .args(["run", "--resume"])
            .arg(&path)
            .assert()
            .code(2);
        let e = stderr(&assert);
        assert!(
            e.contains(words) && e.contains(&value) && e.contains(path.to_str().unwrap()),
            "{e}"
        );
        let merged = dir.path().join("merged.json");
        let assert = kbench()
            .arg("merge")
            .arg(&path)
            .arg("-o")
            .arg(&merged)
            .assert()
            .code(2);
        assert!(stderr(&assert).contains(words));
        assert!(!merged.exists());
    }
}

#[test]
fn merge_refuses_other_manifests_versions_overlaps_and_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let one = write_manifest(dir.path(), "one.toml", &study(1));
    let other = write_manifest(dir.path(), "other.toml", &study(2));
    let a = run_into(&one, &dir.path().join("a"), &["--shard", "1/2"]);
    let b = run_into(&one, &dir.path().join("b"), &["--shard", "2/2"]);
    let again = run_into(&one, &dir.path().join("again"), &["--shard", "1/2"]);
    let foreign = run_into(&other, &dir.path().join("c"), &["--shard", "2/2"]);
    let out = dir.path().join("merged.json");
    let refused = |files: &[&PathBuf], output: &Path, words: &[&str]| {
        let existed = output.exists();
        let assert = kbench()
            .arg("merge")
            .args(files)
            .arg("-o")
            .arg(output)
            .assert()
            .code(2);
        let e = stderr(&assert);
        for w in words {
            assert!(e.contains(w), "`{w}` not in: {e}");
        }
        assert!(
            existed || !output.exists(),
            "a refused merge wrote {}",
            output.display()
        );
    };
    refused(&[&a, &foreign], &out, &["different manifests"]);
    refused(&[&a, &again], &out, &["both hold case", "overlap"]);

    let mut doc = read(&b);
    doc["environment"]["kbench_version"] = Value::String("0.0.1".into());
    let old = dir.path().join("old.json");
    std::fs::write(&old, serde_json::to_string(&doc).unwrap()).unwrap();
    refused(&[&a, &old], &out, &["different kbench versions", "0.0.1"]);

    let mut doc = read(&b);
    doc["manifest"]["measure"]["min_samples"] = Value::from(7);
    let other_settings = dir.path().join("settings.json");
    std::fs::write(&other_settings, serde_json::to_string(&doc).unwrap()).unwrap();
    refused(&[&a, &other_settings], &out, &["different settings"]);

    // Never over an input, nor over any file.
    refused(&[&a, &b], &a, &["one of the files to merge"]);
    std::fs::write(&out, "taken").unwrap();
    refused(&[&a, &b], &out, &["exists", "never overwrites"]);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "taken");

    // A write that fails after `-o` was reserved (here a folder where its temporary file goes)
    // leaves no empty file behind, so the next merge into it is not refused as existing.
    let fresh = dir.path().join("fresh.json");
    let tmp = dir.path().join("fresh.json.tmp");
    std::fs::create_dir(&tmp).unwrap();
    refused(&[&a, &b], &fresh, &["cannot write"]);
    assert!(!fresh.exists(), "the reserved {} stayed", fresh.display());
    std::fs::remove_dir(&tmp).unwrap();
    kbench()
        .arg("merge")
        .args([&a, &b])
        .arg("-o")
        .arg(&fresh)
        .assert()
        .success();
}

#[test]
fn bad_shards_and_devices_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), "multi.toml", &study(1));
    let out = dir.path().join("out");
    for (flag, value, words) in [
        ("--shard", "0/3", "numbered from 1"),
        ("--shard", "4/3", "does not exist"),
        ("--shard", "1/0", "at least 1"),
        ("--shard", "x", "expected K/N"),
        ("--devices", "0,x", "expected `all` or device numbers"),
        ("--devices", "1,1", "named twice"),
        ("--devices", "99", "no device 99"),
    ] {
        let assert = kbench()
            .arg("run")
            .arg(&manifest)
            .arg("--out-dir")
            .arg(&out)
            .args([flag, value])
            .assert()
            .code(2);
        let e = stderr(&assert);
        assert!(e.contains(words), "{flag} {value}: {e}");
        assert!(!out.exists(), "{flag} {value} ran something");
    }
    kbench()
        .arg("run")
        .arg("--resume")
        .arg(dir.path().join("x.json"))
        .args(["--shard", "1/2"])
        .assert()
        .code(2);
}

/// Without a GPU, `--devices all` runs on one lane and skips the CUDA cases with the reason, as
/// a run without it does (with a GPU, tests/gpu.rs's multi-device commands cover it).
#[test]
fn devices_all_without_a_gpu_skips_cuda_cases_with_the_reason() {
    if kbench::device::count().is_ok_and(|n| n > 0) {
        eprintln!("skipped: this machine has a GPU (the test is of a machine without one)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = with_gpu_variant(&study(1));
    let manifest = write_manifest(dir.path(), "multi.toml", &text);
    let doc = read(&run_into(
        &manifest,
        &dir.path().join("out"),
        &["--devices", "all"],
    ));
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 24);
    for c in cases.iter().filter(|c| c["backend"] == "cuda") {
        assert_eq!(c["status"], "skipped", "{c}");
        assert!(c["reason"].as_str().unwrap().contains("CUDA"), "{c}");
        assert!(c.get("device").is_none());
    }
    assert!(cases
        .iter()
        .filter(|c| c["backend"] == "cpu")
        .all(|c| c["status"] == "passed"));
}

/// Two lanes with real workers (here without a GPU: each lane's CUDA cases are skipped by its
/// worker, the CPU cases run alone on lane 0): every case once, the file in plan order, and a
/// worker that crashes costs its case alone.
#[test]
fn two_lanes_run_every_case_once_and_a_crashed_worker_costs_only_its_case() {
    use kbench::run::study::RunOptions;
    let options = RunOptions {
        lanes: two_lanes(),
        // Case 4 is `tree` (CPU) at the second grid point: its worker aborts while measuring.
        worker_fault: Some("abort:4".into()),
        ..RunOptions::new(common::kbench_exe())
    };
    let text = with_gpu_variant(&study(1));
    let (_dir, results) = common::run_study_with(&text, &options);
    let doc = kbench::results::load_results(&results.path).unwrap();
    let indices: Vec<usize> = doc.cases.iter().map(|c| c.index).collect();
    assert_eq!(indices, (0..24).collect::<Vec<_>>());
    assert!(doc.complete);
    let gpus = kbench::device::count().unwrap_or(0);
    for c in &doc.cases {
        let status = c.status.name();
        match (c.index, c.backend) {
            (4, _) => {
                assert_eq!(status, "error");
                assert!(c.reason.as_deref().unwrap().contains("SIGABRT"), "{c:?}");
            }
            (_, kbench::vocab::Backend::Cpu) => assert_eq!(status, "passed", "{c:?}"),
            (_, kbench::vocab::Backend::Cuda) if gpus == 0 => {
                assert_eq!(status, "skipped", "{c:?}")
            }
            // Each lane has a GPU of its own.
            (_, kbench::vocab::Backend::Cuda) if gpus >= 2 => {
                assert_eq!(status, "passed", "{c:?}")
            }
            // One GPU: lane 1's worker sees none, and skips its cases with the reason.
            (_, kbench::vocab::Backend::Cuda) => assert!(
                status == "passed" || (status == "skipped" && c.reason.is_some()),
                "{c:?}"
            ),
        }
    }
}

/// Two lanes on the mock GPU, and opening it hangs in one lane's case: that lane takes no more
/// CUDA cases, the other runs them all, and the file does not say the GPU was unavailable.
#[test]
fn one_hung_gpu_of_two_leaves_the_file_without_gpu_unavailable() {
    use kbench::run::study::RunOptions;
    let dir = tempfile::tempdir().unwrap();
    let mock = dir.path().join("mock.toml");
    std::fs::write(
        &mock,
        "[device]\nname = \"H100 (test)\"\n[timing]\nseed = 1\nlaunch_s = 4e-6\ngbytes_per_s = 1500.0\n",
    )
    .unwrap();
    let options = RunOptions {
        lanes: two_lanes(),
        mock_gpu: Some(kbench::run::executor::mock::MockSpec::load(&mock).unwrap()),
        // Case 2 is `gpu` at the first grid point: its worker stalls before the case starts.
        worker_fault: Some("stall:2".into()),
        setup_limit_s: 1.0,
        ..RunOptions::new(common::kbench_exe())
    };
    let text = with_gpu_variant(&study(1));
    let (_dir, results) = common::run_study_with(&text, &options);
    let doc = kbench::results::load_results(&results.path).unwrap();
    assert_eq!(doc.cases.len(), 24);
    for c in &doc.cases {
        if c.index == 2 {
            assert_eq!(c.status.name(), "error", "{c:?}");
        } else {
            assert_eq!(c.status.name(), "passed", "{c:?}");
        }
    }
    assert_eq!(doc.environment.gpu_unavailable, None);
}

/// A GPU's fingerprint as a results file records it.
fn gpu(bus: &str, peak: f64) -> Value {
    serde_json::to_value(kbench::record::DeviceFingerprint {
        name: "NVIDIA H200".into(),
        host: String::new(),
        pci_bus_id: bus.into(),
        compute_capability: "9.0".into(),
        sm_count: 132,
        total_memory_bytes: 150_000_000_000,
        l2_cache_bytes: 60_000_000,
        sm_clock_mhz: 1980.0,
        memory_clock_mhz: 3201.0,
        memory_bus_width_bits: 6144,
        theoretical_memory_gbytes_per_s: 4916.0,
        driver_version: "13.0".into(),
        nvrtc_version: "13.0".into(),
        measured_copy_gbytes_per_s: peak,
        measured_read_gbytes_per_s: 0.0,
        measured_write_gbytes_per_s: 0.0,
        measured_triad_gbytes_per_s: 0.0,
        datasheet_memory_gbytes_per_s: None,
        host_to_device_gbytes_per_s: 50.0,
        device_to_host_gbytes_per_s: 50.0,
        event_overhead_s: 1e-6,
        cupti_unavailable: None,
        cupti_profiler_unavailable: None,
        nvml_unavailable: None,
        energy_unavailable: None,
        peaks_unmeasured: None,
        mock: None,
    })
    .unwrap()
}

/// Two hosts of one model have the same PCI bus ids: their GPUs stay two in a merge, each
/// with its own cases, and `compare` judges each run by the copy peaks it measured itself.
#[test]
fn gpus_of_identical_hosts_stay_apart_in_merge_report_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), "multi.toml", &study(1));
    let bus = "0000:18:00.0";
    let mut shards = Vec::new();
    for (k, peak) in [(1, 4000.0), (2, 3000.0)] {
        let path = run_into(
            &manifest,
            &dir.path().join(format!("s{k}")),
            &["--shard", &format!("{k}/2")],
        );
        let mut doc = read(&path);
        // As a file written before hosts were recorded: `environment.host` names them.
        doc["environment"]["host"] = Value::String(format!("node{k}"));
        doc["environment"]["device"] = gpu(bus, peak);
        doc["environment"]["devices"] = Value::Array(vec![gpu(bus, peak)]);
        for c in doc["cases"].as_array_mut().unwrap() {
            c["device"] = serde_json::json!({"index": 0, "physical": true, "pci_bus_id": bus});
        }
        std::fs::write(&path, serde_json::to_string(&doc).unwrap()).unwrap();
        shards.push((path, doc["cases"].as_array().unwrap().len()));
    }
    let merged = dir.path().join("merged.json");
    kbench()
        .arg("merge")
        .args(shards.iter().map(|(p, _)| p))
        .arg("-o")
        .arg(&merged)
        .assert()
        .success();
    let doc = read(&merged);
    let hosts: Vec<&str> = doc["environment"]["devices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["host"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, ["node1", "node2"]);
    let report = kbench()
        .arg("report")
        .arg(&merged)
        .arg("--wide")
        .assert()
        .success();
    let text = stdout(&report);
    for (k, (_, cases)) in shards.iter().enumerate() {
        let line = format!("node{} {bus} NVIDIA H200", k + 1);
        let counted = format!("{cases} cases");
        assert!(
            text.lines()
                .any(|l| l.contains(&line) && l.contains(&counted)),
            "no `{line} ... {counted}` in:\n{text}"
        );
    }

    // The baseline ran on node1, the new run on node2's GPU at the same bus id.
    let base = dir.path().join("base.json");
    let new = dir.path().join("new.json");
    let whole = run_into(&manifest, &dir.path().join("whole"), &[]);
    for (path, host, peak) in [(&base, "node1", 4000.0), (&new, "node2", 3000.0)] {
        let mut doc = read(&whole);
        doc["environment"]["host"] = Value::String(host.into());
        doc["environment"]["device"] = gpu(bus, peak);
        for c in doc["cases"].as_array_mut().unwrap() {
            c["device"] =
                serde_json::json!({"index": 0, "physical": true, "pci_bus_id": bus, "host": host});
        }
        std::fs::write(path, serde_json::to_string(&doc).unwrap()).unwrap();
    }
    let compared = kbench().arg("compare").arg(&base).arg(&new).assert();
    // Lines wider than 80 columns go on 4 spaces in: joined again.
    let text = stdout(&compared).replace("\n    ", " ");
    let moved: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("moved GPU: "))
        .collect();
    assert_eq!(moved.len(), 16, "{text}");
    assert!(
        moved[0].contains(&format!(
            "from node1 {bus} to node2 {bus} (copy peak -25.0%"
        )),
        "{text}"
    );
}

/// A run on two GPUs as `report` and `compare` read it: each GPU with its copy peak and cases,
/// and each case that moved GPU against the baseline named, with the GPUs' difference allowed.
#[test]
fn report_lists_each_gpu_and_compare_names_the_cases_that_moved() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_manifest(dir.path(), "multi.toml", &study(1));
    let base_path = run_into(&manifest, &dir.path().join("base"), &[]);
    let new_path = run_into(&manifest, &dir.path().join("new"), &[]);
    let (a, b) = ("0000:18:00.0", "0000:2a:00.0");
    let on = |case: &mut Value, bus: &str, index: u32| {
        case["device"] = serde_json::json!({"index": index, "physical": true, "pci_bus_id": bus});
    };
    let mut base = read(&base_path);
    base["environment"]["device"] = gpu(a, 4000.0);
    for c in base["cases"].as_array_mut().unwrap() {
        on(c, a, 0);
    }
    let mut new = read(&new_path);
    new["environment"]["device"] = gpu(a, 4000.0);
    new["environment"]["devices"] = Value::Array(vec![gpu(a, 4000.0), gpu(b, 3900.0)]);
    for (i, c) in new["cases"].as_array_mut().unwrap().iter_mut().enumerate() {
        if i % 2 == 0 {
            on(c, a, 0);
        } else {
            on(c, b, 1);
        }
    }
    std::fs::write(&base_path, serde_json::to_string(&base).unwrap()).unwrap();
    std::fs::write(&new_path, serde_json::to_string(&new).unwrap()).unwrap();

    let report = kbench()
        .arg("report")
        .arg(&new_path)
        .arg("--wide")
        .assert()
        .success();
    let text = stdout(&report);
    assert!(text.contains("devices: 2"), "{text}");
    assert!(
        text.contains(
            "0000:18:00.0 NVIDIA H200 (sm 9.0, 132 SMs): measured copy peak 4000 GB/s, 8 cases"
        ),
        "{text}"
    );
    assert!(text.contains("copy peaks differ by 2.6%"), "{text}");

    let compared = kbench()
        .arg("compare")
        .arg(&base_path)
        .arg(&new_path)
        .assert();
    // Lines wider than 80 columns go on 4 spaces in: joined again.
    let text = stdout(&compared).replace("\n    ", " ");
    let moved: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("moved GPU: "))
        .collect();
    assert_eq!(moved.len(), 8, "{text}");
    assert!(
        moved[0].contains(
            "from 0000:18:00.0 to 0000:2a:00.0 (copy peak -2.5%, allowed for in its verdict)"
        ),
        "{text}"
    );
}
