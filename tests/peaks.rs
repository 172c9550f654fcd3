//! Plausible peaks on the mock device (`KBENCH_MOCK_GPU`), end to end through `kbench run` and
//! `kbench report`: "% peak" divides by the measured peak matching a case's traffic (read, write,
//! copy or triad), a case faster than the memory's physical ceiling is flagged implausible and fails
//! every claim on its time, a results file written before any of this still reports (against the
//! copy peak), `[measure] fresh_inputs` copies the inputs over before every run and says so, and
//! each GPU case records the persisting-L2 reset.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn kbench(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .env("COLUMNS", "200");
    cmd
}

/// Read peak 3500, triad 3100, copy 3000, write 2500 GB/s; ceiling 4000 GB/s.
const MOCK: &str = r#"[device]
name = "peaks"
peak_gbytes_per_s = 4000.0
copy_gbytes_per_s = 3000.0
read_gbytes_per_s = 3500.0
write_gbytes_per_s = 2500.0
triad_gbytes_per_s = 3100.0

[timing]
launch_s = 0.0
gbytes_per_s = 2800.0
jitter = 0.0

[timing.variant.impossible]
gbytes_per_s = 5000.0

[timing.variant.past_peak]
gbytes_per_s = 3700.0

[timing.variant.past_ceiling]
gbytes_per_s = 4500.0
"#;

/// The variants "honest" and "impossible" (named for the mock's timings) of `algorithm`'s
/// `kernel` at n = 1,048,576; `extra`: lines of its `[measure]` table.
fn study(algorithm: &str, kernel: &str, extra: &str) -> String {
    study_of(algorithm, kernel, &["honest", "impossible"], extra)
}

/// `variants` (named for the mock's timings) of `algorithm`'s `kernel` at n = 1,048,576;
/// `extra`: lines of its `[measure]` table.
fn study_of(algorithm: &str, kernel: &str, variants: &[&str], extra: &str) -> String {
    let mut text = format!(
        "[study]\nname = \"peaks_{algorithm}\"\nalgorithm = \"{algorithm}\"\nseed = 1\n\n\
         [grid]\nn = [1_048_576]\nblock = 256\n"
    );
    for variant in variants {
        text.push_str(&format!(
            "\n[[variant]]\nname = \"{variant}\"\nbackend = \"cuda\"\nkernel = \"{kernel}\"\n"
        ));
    }
    text + &format!("\n[measure]\nwarmup = 2\nmin_samples = 5\nmax_samples = 5\n{extra}\n")
}

const CLAIMS: &str = r#"
[[claim]]
text = "the impossible variant beats the honest one"
source = "test"
kind = "faster"
a = "impossible"
b = "honest"

[[claim]]
text = "the impossible variant reaches half the peak"
source = "test"
kind = "reaches_peak"
a = "impossible"
share = 0.5

[[claim]]
text = "the honest variant reaches half the peak"
source = "test"
kind = "reaches_peak"
a = "honest"
share = 0.5
"#;

/// Runs `study` on `MOCK` in a new folder; returns the folder, the results file, its document
/// and what `run` printed.
fn run(study: &str, code: i32) -> (tempfile::TempDir, PathBuf, Value, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    let out = kbench(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(code);
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let study_dir = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(&study_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let doc = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    (dir, file, doc, stdout)
}

fn case<'a>(doc: &'a Value, variant: &str) -> &'a Value {
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["variant"] == variant)
        .unwrap()
}

/// The `% peak` cell of `variant`'s row in a table printed with `--wide` (or 200 columns).
fn percent_cell(table: &str, variant: &str) -> String {
    let header = table.lines().find(|l| l.contains("% peak")).unwrap();
    let column = header
        .split('│')
        .position(|h| h.trim() == "% peak")
        .unwrap();
    let row = table
        .lines()
        .find(|l| l.split('│').any(|c| c.trim() == variant))
        .unwrap_or_else(|| panic!("no row {variant} in\n{table}"));
    row.split('│').nth(column).unwrap().trim().to_string()
}

#[test]
fn a_read_only_kernel_is_held_to_the_read_peak_and_mixed_ones_to_the_nearest_mixed_peak() {
    let (_dir, _, reduce, printed) = run(&study("reduce", "reduce_fast", ""), 0);
    let honest = case(&reduce, "honest");
    assert_eq!(honest["peak_kind"], "read", "{honest}");
    assert_eq!(honest["peak_gbytes_per_s"], 3500.0);
    assert_eq!(honest["bytes_read"], 4 * 1_048_576);
    assert_eq!(honest["bytes_written"], 4);
    assert_eq!(honest["bytes_moved"], 4 * 1_048_576 + 4);
    // 2800 GB/s of a 3500 GB/s read peak: 80%, where the copy peak would say 93%.
    assert_eq!(percent_cell(&printed, "honest"), "80%", "{printed}");
    assert!(printed
        .contains("peaks, GB/s: copy 3000, read 3500, write 2500, triad 3100; ceiling 4000\n"));

    // SAXPY reads two bytes for each it writes: the triad's traffic.
    let (_dir, _, saxpy, printed) = run(&study("saxpy", "saxpy_vector", ""), 0);
    let honest = case(&saxpy, "honest");
    assert_eq!(honest["peak_kind"], "triad", "{honest}");
    assert_eq!(honest["peak_gbytes_per_s"], 3100.0);
    assert_eq!(percent_cell(&printed, "honest"), "90%", "{printed}");
    // A scan reads and writes as many bytes: the copy's traffic.
    let (_dir, _, scan, printed) = run(&study("scan", "scan_lookback", ""), 0);
    let honest = case(&scan, "honest");
    assert_eq!(honest["peak_kind"], "copy", "{honest}");
    assert_eq!(honest["peak_gbytes_per_s"], 3000.0);
    assert_eq!(percent_cell(&printed, "honest"), "93%", "{printed}");
    // The device record holds every peak.
    let device = &saxpy["environment"]["device"];
    assert_eq!(device["measured_read_gbytes_per_s"], 3500.0);
    assert_eq!(device["measured_write_gbytes_per_s"], 2500.0);
    assert_eq!(device["measured_triad_gbytes_per_s"], 3100.0);
    assert_eq!(device["measured_copy_gbytes_per_s"], 3000.0);
}

#[test]
fn a_write_only_kernel_is_held_to_the_write_peak() {
    let text = r#"[study]
name = "walks"
algorithm = "pearson_series"
seed = 1

[grid]
m = [64]
n = [4096]
dtype = "f32"

[[variant]]
name = "gpu"
backend = "cuda"
kernel = "k1_generate"

[measure]
warmup = 1
min_samples = 5
max_samples = 5
"#;
    let (_dir, _, doc, _) = run(text, 0);
    let gpu = case(&doc, "gpu");
    assert_eq!(gpu["peak_kind"], "write", "{gpu}");
    assert_eq!(gpu["peak_gbytes_per_s"], 2500.0);
    assert_eq!(gpu["bytes_read"], 0);
}

#[test]
fn a_case_faster_than_the_memory_is_implausible_and_fails_every_claim_on_it() {
    let text = study("reduce", "reduce_fast", "") + CLAIMS;
    let (dir, file, doc, printed) = run(&text, 0);
    let impossible = case(&doc, "impossible");
    assert_eq!(impossible["implausible"], true, "{impossible}");
    let reason = impossible["implausible_reason"].as_str().unwrap();
    assert!(reason.contains("ceiling of 4000 GB/s"), "{reason}");
    assert!(case(&doc, "honest").get("implausible").is_none());
    assert!(
        percent_cell(&printed, "impossible").contains("implausible"),
        "{printed}"
    );
    assert!(printed.contains("IMPLAUSIBLE: 5000 GB/s"), "{printed}");

    let claims = doc["claims"].as_array().unwrap();
    let status = |text: &str| {
        let claim = claims.iter().find(|c| c["text"] == text).unwrap();
        (claim["status"].clone(), claim["evidence"].to_string())
    };
    for text in [
        "the impossible variant beats the honest one",
        "the impossible variant reaches half the peak",
    ] {
        let (status, evidence) = status(text);
        assert_eq!(status, "refuted", "{text}: {evidence}");
        assert!(evidence.contains("impossible is implausible"), "{evidence}");
    }
    let (status, evidence) = status("the honest variant reaches half the peak");
    assert_eq!(status, "holds", "{evidence}");
    assert!(evidence.contains("of the read peak"), "{evidence}");

    // The HTML report flags it too.
    let html = dir.path().join("report.html");
    kbench(dir.path())
        .arg("report")
        .arg(&file)
        .arg("--html")
        .arg(&html)
        .assert()
        .success();
    let html = std::fs::read_to_string(html).unwrap();
    assert!(html.contains("implausible"), "{html}");

    // And the CSV export, in a column of its own.
    let flags = csv_column(dir.path(), &file, "implausible");
    assert!(
        flags.contains(&("impossible".into(), "true".into())),
        "{flags:?}"
    );
    assert!(
        flags.contains(&("honest".into(), "false".into())),
        "{flags:?}"
    );
}

/// Each case's variant and its value in `column` of `kbench report --format csv`.
fn csv_column(dir: &Path, file: &Path, column: &str) -> Vec<(String, String)> {
    let csv = kbench(dir)
        .arg("report")
        .arg(file)
        .args(["--format", "csv"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    let header = reader.headers().unwrap().clone();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (variant, value) = (at("variant"), at(column));
    reader
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r[variant].to_string(), r[value].to_string())
        })
        .collect()
}

#[test]
fn a_share_above_the_peak_is_flagged_with_its_cause_in_the_table_csv_and_json() {
    // SAXPY at 2^20 writes 4 MiB, which the L2 can hold when the timer stops: 3700 GB/s is
    // 119% of the triad's 3100, but 2467 GB/s counting its reads alone. 4500 GB/s is past the
    // 4000 GB/s ceiling counting every byte, not counting only the reads: flagged, not
    // implausible.
    let text = study_of(
        "saxpy",
        "saxpy_vector",
        &["honest", "past_peak", "past_ceiling"],
        "",
    );
    let (dir, file, doc, printed) = run(&text, 0);
    let past_peak = case(&doc, "past_peak");
    assert_eq!(past_peak["above_peak"]["cause"], "l2", "{past_peak}");
    let reason = past_peak["above_peak"]["reason"].as_str().unwrap();
    assert!(reason.contains("119.4% of the triad peak"), "{reason}");
    assert!(reason.contains("2467 GB/s"), "{reason}");
    assert_eq!(percent_cell(&printed, "past_peak"), "119% L2", "{printed}");
    let past_ceiling = case(&doc, "past_ceiling");
    assert!(past_ceiling.get("implausible").is_none(), "{past_ceiling}");
    assert_eq!(
        percent_cell(&printed, "past_ceiling"),
        "145% L2",
        "{printed}"
    );
    assert!(case(&doc, "honest").get("above_peak").is_none());
    assert_eq!(percent_cell(&printed, "honest"), "90%", "{printed}");
    assert!(
        printed.contains("% PEAK ABOVE 100% (L2): writes still in the L2"),
        "{printed}"
    );
    let flagged = csv_column(dir.path(), &file, "above_peak");
    let flagged: Vec<&str> = flagged.iter().map(|(_, v)| v.as_str()).collect();
    assert_eq!(flagged, ["", "l2", "l2"]);

    // A reduction reads everything it counts after the flush: past its read peak (3500) it
    // beat the peak kernel; past the ceiling it is implausible.
    let text = study_of("reduce", "reduce_fast", &["past_peak", "past_ceiling"], "");
    let (_dir, _, doc, printed) = run(&text, 0);
    assert_eq!(
        case(&doc, "past_peak")["above_peak"]["cause"],
        "beats_peak_kernel"
    );
    assert_eq!(
        percent_cell(&printed, "past_peak"),
        "106% >peak",
        "{printed}"
    );
    assert_eq!(case(&doc, "past_ceiling")["implausible"], true);
    assert!(printed.contains("% PEAK ABOVE 100% (>peak)"), "{printed}");
}

/// Removes every field a results file written before the peaks were split lacks.
fn strip_new_fields(doc: &mut Value) {
    let device = doc["environment"]["device"].as_object_mut().unwrap();
    for key in [
        "measured_read_gbytes_per_s",
        "measured_write_gbytes_per_s",
        "measured_triad_gbytes_per_s",
        "datasheet_memory_gbytes_per_s",
    ] {
        device.remove(key);
    }
    for case in doc["cases"].as_array_mut().unwrap() {
        let case = case.as_object_mut().unwrap();
        for key in [
            "bytes_read",
            "bytes_written",
            "peak_kind",
            "peak_gbytes_per_s",
            "implausible",
            "implausible_reason",
        ] {
            case.remove(key);
        }
        if let Some(timer) = case
            .get_mut("measurement")
            .and_then(|m| m.get_mut("gpu_timer"))
            .and_then(Value::as_object_mut)
        {
            timer.remove("persisting_l2_reset");
            timer.remove("fresh_input_copies");
        }
    }
}

#[test]
fn an_old_results_file_without_the_new_fields_still_reports_against_the_copy_peak() {
    let (dir, file, mut doc, _) = run(&study("reduce", "reduce_fast", ""), 0);
    strip_new_fields(&mut doc);
    let old = dir.path().join("old.json");
    std::fs::write(&old, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let out = kbench(dir.path())
        .arg("report")
        .arg(&old)
        .arg("--wide")
        .assert()
        .success();
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(table.contains("measured copy peak 3000 GB/s"), "{table}");
    // 2800 GB/s of the 3000 GB/s copy peak, as kbench reported before it split the peaks.
    assert_eq!(percent_cell(&table, "honest"), "93%", "{table}");
    // And the new file reads against the read peak.
    let out = kbench(dir.path())
        .arg("report")
        .arg(&file)
        .arg("--wide")
        .assert()
        .success();
    let table = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(percent_cell(&table, "honest"), "80%", "{table}");
}

#[test]
fn fresh_inputs_copy_the_inputs_over_before_every_run_and_are_recorded() {
    let (_dir, _, doc, _) = run(&study("saxpy", "saxpy_vector", "fresh_inputs = true"), 0);
    assert_eq!(doc["manifest"]["measure"]["fresh_inputs"], true);
    for variant in ["honest", "impossible"] {
        let c = case(&doc, variant);
        assert_eq!(c["status"], "passed", "{c}");
        let timer = &c["measurement"]["gpu_timer"];
        let samples = c["measurement"]["samples_s"].as_array().unwrap().len() as u64;
        let warmup = c["measurement"]["warmup_runs"].as_u64().unwrap();
        let copies = timer["fresh_input_copies"].as_u64().unwrap();
        assert!(
            copies >= samples + warmup,
            "{copies} copies for {samples} samples: {timer}"
        );
        assert_eq!(timer["persisting_l2_reset"], true, "{timer}");
    }
    // Without it: nothing copied, nothing recorded.
    let (_dir, _, doc, _) = run(&study("saxpy", "saxpy_vector", ""), 0);
    assert!(doc["manifest"]["measure"].get("fresh_inputs").is_none());
    let timer = &case(&doc, "honest")["measurement"]["gpu_timer"];
    assert!(timer.get("fresh_input_copies").is_none(), "{timer}");
    assert_eq!(timer["persisting_l2_reset"], true, "{timer}");
}

/// `kbench check` on `text` (with the custom reduction's kernels beside it): its error output.
fn check_error(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reduction");
    std::fs::copy(examples.join("reduce.cu"), dir.path().join("reduce.cu")).unwrap();
    std::fs::write(dir.path().join("study.toml"), text).unwrap();
    let out = kbench(dir.path())
        .args(["check", "study.toml"])
        .assert()
        .code(2);
    String::from_utf8(out.get_output().stderr.clone()).unwrap()
}

/// The line and column of `needle` in `text`, 1-based, as the error's `-->` names them.
fn place(text: &str, needle: &str) -> String {
    let at = text.find(needle).unwrap();
    let line = text[..at].lines().count() + usize::from(text[..at].ends_with('\n'));
    let column = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
    format!("study.toml:{line}:{column}")
}

#[test]
fn fresh_inputs_and_traffic_mistakes_are_refused_at_their_line_and_column() {
    let batch = study(
        "reduce",
        "reduce_fast",
        "mode = \"batch\"\nfresh_inputs = true",
    );
    let err = check_error(&batch);
    assert!(err.contains("measure.fresh_inputs"), "{err}");
    assert!(
        err.contains("cannot be kept with mode = \"batch\""),
        "{err}"
    );
    assert!(err.contains(&place(&batch, "true")), "{err}");

    let not_bool = study("reduce", "reduce_fast", "fresh_inputs = \"yes\"");
    let err = check_error(&not_bool);
    assert!(err.contains(&place(&not_bool, "\"yes\"")), "{err}");

    let custom = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reduction/reduction.toml"),
    )
    .unwrap();
    assert!(custom.contains("traffic = \"read\""));
    let sideways = custom.replace("traffic = \"read\"", "traffic = \"sideways\"");
    let err = check_error(&sideways);
    assert!(err.contains("custom.traffic"), "{err}");
    assert!(
        err.contains("unknown traffic `sideways`: one of `read`, `write`, `copy`"),
        "{err}"
    );
    assert!(err.contains(&place(&sideways, "\"sideways\"")), "{err}");
}

#[test]
fn a_custom_study_declaring_read_traffic_is_held_to_the_read_peak() {
    let dir = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/reduction");
    for file in ["reduce.cu", "reduction.toml"] {
        std::fs::copy(examples.join(file), dir.path().join(file)).unwrap();
    }
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    kbench(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "reduction.toml", "--out-dir", "out"])
        .args(["--warmup", "1", "--min-samples", "3", "--max-samples", "3"])
        .assert()
        .success();
    let study_dir = std::fs::read_dir(dir.path().join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let file = std::fs::read_dir(&study_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert!(!cases.is_empty());
    for case in cases.iter().filter(|c| c["backend"] == "cuda") {
        assert_eq!(case["peak_kind"], "read", "{case}");
        assert_eq!(case["bytes_written"], 0, "{case}");
        assert_eq!(case["bytes_read"], case["bytes_moved"], "{case}");
    }
}

#[test]
fn a_mock_read_peak_that_is_no_bandwidth_is_refused_at_its_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("study.toml"),
        study("reduce", "reduce_fast", ""),
    )
    .unwrap();
    let mock = MOCK.replace("read_gbytes_per_s = 3500.0", "read_gbytes_per_s = -1.0");
    std::fs::write(dir.path().join("mock.toml"), &mock).unwrap();
    let out = kbench(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(2);
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("`read_gbytes_per_s` is -1"), "{err}");
    assert!(err.contains("mock.toml:5:21"), "{err}");
}
