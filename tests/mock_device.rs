//! The mock device (`KBENCH_MOCK_GPU`, src/run/executor/mock.rs), end to end through `kbench run`, the
//! worker processes, the results file and `kbench report` / `compare`: every output format and
//! compare's table snapshot-tested (with what differs between runs and machines redacted), and
//! the CUDA control flow (scripted skips, a kernel fault and the replaced worker, a hang killed
//! at the time limit, a compile error, out of memory, a wrong answer) on a machine without a GPU.

use crate::common;
use common::results_file_in;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

/// `kbench` run in `dir`, where the manifests, the mock files and `out/` are, with the mock
/// device `mock` (a file in `dir`) if given.
fn kbench(dir: &Path, mock: Option<&str>) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    // Tables fit 80 columns unless --wide, whatever the terminal running the tests is.
    cmd.current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .env("COLUMNS", "80");
    if let Some(mock) = mock {
        cmd.env("KBENCH_MOCK_GPU", mock);
    }
    cmd
}

/// Two CUDA variants of the reduction, three sizes, two dtypes; a declared table and claims.
const STUDY: &str = r#"[study]
name = "mocked"
title = "The reduction on the mock device"
algorithm = "reduce"
seed = 4

[grid]
n = [1_000, 4_096, 100_003]
dtype = ["i32", "f32"]
block = 256

[[variant]]
name = "optimized"
backend = "cuda"
kernel = "reduce_optimized"

[[variant]]
name = "fast"
backend = "cuda"
kernel = "reduce_fast"

[measure]
warmup = 1
min_samples = 10
max_samples = 10

[report]
baseline = "optimized"

[[table]]
title = "Median time by size, float32"
rows = "n"
columns = "variant"
value = "median"
select = { dtype = "f32" }

[[claim]]
text = "the fast kernel beats the optimized one"
source = "the mock's time model"
kind = "faster"
a = "fast"
b = "optimized"
"#;

/// The device and time model the snapshots are taken on; int32 at n = 1000 is skipped.
const MOCK: &str = r#"[device]
name = "H100 (test)"
memory_gib = 80.0
peak_gbytes_per_s = 3350.0
copy_gbytes_per_s = 3000.0

[timing]
seed = 11
launch_s = 4e-6
gbytes_per_s = 1500.0
jitter = 0.02

[timing.variant.fast]
launch_s = 3e-6
gbytes_per_s = 2500.0

[[event]]
params = { n = 1000, dtype = "i32" }
skip = "scripted: no int32 at n = 1000 on this device"
"#;

/// The same device after a change that cut `fast`'s bandwidth from 2500 to 1600 GB/s: a few
/// percent slower at the largest size, where the bytes outweigh the launch.
const MOCK_SLOWER: &str = r#"[device]
name = "H100 (test)"

[timing]
seed = 12
launch_s = 4e-6
gbytes_per_s = 1500.0
jitter = 0.02

[timing.variant.fast]
launch_s = 3e-6
gbytes_per_s = 1600.0

[[event]]
params = { n = 1000, dtype = "i32" }
skip = "scripted: no int32 at n = 1000 on this device"
"#;

/// Writes `files` into a new temporary folder.
fn folder(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

/// `kbench run study.toml --out-dir out/<sub>` on the mock `mock`; returns the results file
/// (relative to `dir`), its document, and what run printed on stdout.
fn run(dir: &Path, study: &str, mock: &str, sub: &str, code: i32) -> (PathBuf, Value, String) {
    let out = kbench(dir, Some(mock))
        .args(["run", study, "--out-dir"])
        .arg(format!("out/{sub}"))
        .assert()
        .code(code);
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let study_dir = dir.join("out").join(sub);
    let name = std::fs::read_dir(&study_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let results = results_file_in(&name.path());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let relative = results.strip_prefix(dir).unwrap().to_path_buf();
    (relative, doc, stdout)
}

/// `text` with what differs between runs and machines replaced by placeholders: the results
/// files' names (timestamps), the times the runs started and finished, the host, CPU, build and
/// command line, and the temporary folder.
fn redact(text: &str, docs: &[&Value], dir: &Path) -> String {
    let mut text = text.replace(&dir.display().to_string(), "[dir]");
    for (k, doc) in docs.iter().enumerate() {
        let env = &doc["environment"];
        let command: Vec<&str> = env["command_line"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        for (value, name) in [
            (doc["started_at"].as_str(), "started_at"),
            (doc["finished_at"].as_str(), "finished_at"),
            (Some(&*command.join(" ")), "command line"),
            (env["cpu_model"].as_str(), "cpu"),
            (env["git_revision"].as_str(), "git revision"),
        ] {
            if let Some(value) = value.filter(|v| !v.is_empty()) {
                text = text.replace(value, &format!("[{name} {k}]"));
            }
        }
        // The HTML report writes the times for people, to the second: a run's start and end
        // may read the same.
        for name in ["started_at", "finished_at"] {
            if let Some(value) = doc[name].as_str() {
                let shown = kbench::report::html::human_time(value);
                text = text.replace(&shown, &format!("[time {k}]"));
            }
        }
        let host = env["host"].as_str().unwrap();
        text = text.replace(&format!(">{host}<"), ">[host]<");
    }
    // Results files are named by the time they were started: 20260101T000000Z.json.
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("Z.json") {
        let start = at.saturating_sub(15);
        let stamp = &rest[start..at];
        let digits = stamp.bytes().filter(u8::is_ascii_digit).count();
        if stamp.len() == 15 && stamp.as_bytes()[8] == b'T' && digits == 14 {
            out.push_str(&rest[..start]);
            out.push_str("[stamp].json");
        } else {
            out.push_str(&rest[..at + 6]);
        }
        rest = &rest[at + 6..];
    }
    out.push_str(rest);
    redact_time_lines(&out)
}

/// Where the time went is this machine's: the lines are kept, their seconds are not.
fn redact_time_lines(out: &str) -> String {
    let lines = out.lines().map(|line| {
        let seconds = match (line.find("time: "), line.find(" was sampling")) {
            (Some(from), Some(to)) => Some((from + "time: ".len(), to)),
            _ => line
                .strip_prefix("  the rest: ")
                .map(|rest| (line.len() - rest.len(), line.len())),
        };
        match seconds {
            Some((from, to)) => format!("{}[redacted]{}", &line[..from], &line[to..]),
            None => line.to_string(),
        }
    });
    lines.collect::<Vec<_>>().join("\n") + if out.ends_with('\n') { "\n" } else { "" }
}

/// The JSON document with its volatile fields replaced.
fn redacted_json(doc: &Value) -> String {
    let mut doc = doc.clone();
    for key in ["started_at", "finished_at"] {
        doc[key] = "[redacted]".into();
    }
    doc["manifest"]["absolute"] = "[redacted: the manifest's temporary folder]".into();
    let env = &mut doc["environment"];
    for key in [
        "host",
        "boot_id",
        "cpu_model",
        "cpu_threads",
        "kbench_version",
        "git_revision",
        "command_line",
    ] {
        env[key] = "[redacted]".into();
    }
    // The host's load differs from run to run, and is tested in src/env.rs and tests/gate.rs.
    env.as_object_mut().unwrap().remove("load");
    env["device"]["mock"] = "[redacted: names the mock file's temporary path]".into();
    // Each GPU names its host.
    env["device"]["host"] = "[redacted]".into();
    for d in env["devices"].as_array_mut().into_iter().flatten() {
        d["host"] = "[redacted]".into();
    }
    for case in doc["cases"].as_array_mut().unwrap() {
        case["wall_s"] = "[redacted]".into();
        // Its stages are named; their seconds are this machine's.
        for seconds in case["overhead"]
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            *seconds = "[redacted]".into();
        }
        if case["device"].is_object() {
            case["device"]["host"] = "[redacted]".into();
        }
    }
    serde_json::to_string_pretty(&doc).unwrap()
}

/// `kbench report RESULTS ARGS...` in `dir`.
fn report(dir: &Path, results: &Path, args: &[&str]) -> String {
    let out = kbench(dir, None)
        .arg("report")
        .arg(results)
        .args(args)
        .assert()
        .success();
    redact_time_lines(&String::from_utf8(out.get_output().stdout.clone()).unwrap())
}

/// The HTML report with each inline chart cut to its first line and its size (the charts are
/// checked by `the_plots_are_drawn_from_the_mock_results`), and without the style sheet.
fn html_excerpt(html: &str) -> String {
    let mut out = Vec::new();
    let mut in_svg = 0;
    let mut in_style = false;
    for line in html.lines() {
        if line.starts_with("<style") {
            in_style = true;
            out.push("<style>[the style sheet]</style>".to_string());
        }
        if in_style {
            in_style = !line.starts_with("</style>");
            continue;
        }
        if line.starts_with("<svg") {
            in_svg = 1;
            out.push(line.to_string());
            continue;
        }
        if in_svg > 0 {
            if line.starts_with("</svg>") {
                out.push(format!("  [{in_svg} lines of chart]"));
                out.push(line.to_string());
                in_svg = 0;
            } else {
                in_svg += 1;
            }
            continue;
        }
        out.push(line.to_string());
    }
    out.join("\n")
}

#[test]
fn every_format_and_compare_on_the_mock_device_snapshot() {
    let dir = folder(&[
        ("study.toml", STUDY),
        ("mock.toml", MOCK),
        ("slower.toml", MOCK_SLOWER),
    ]);
    let d = dir.path();
    let (base, base_doc, printed) = run(d, "study.toml", "mock.toml", "base", 0);
    let (new, new_doc, _) = run(d, "study.toml", "slower.toml", "new", 0);
    let docs = [&base_doc, &new_doc];

    // Unmistakably not a measurement.
    let device = &base_doc["environment"]["device"];
    assert_eq!(device["name"], "MOCK H100 (test)");
    assert!(device["mock"].as_str().unwrap().contains("mock.toml"));

    // Deterministic: the same file and study give the same samples, bit for bit.
    let (_, again, _) = run(d, "study.toml", "mock.toml", "again", 0);
    let samples = |doc: &Value| -> Vec<Value> {
        doc["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["measurement"]["samples_s"].clone())
            .collect()
    };
    assert_eq!(samples(&base_doc), samples(&again));

    insta::assert_snapshot!("run_prints", redact(&printed, &docs, d));
    insta::assert_snapshot!("table", report(d, &base, &["--wide"]));
    insta::assert_snapshot!("table_80_columns", report(d, &base, &[]));
    insta::assert_snapshot!("declared_tables", report(d, &base, &["--tables"]));
    for format in ["markdown", "csv", "bmf", "github-action-benchmark"] {
        insta::assert_snapshot!(format, report(d, &base, &["--format", format, "--wide"]));
    }
    let json: Value = serde_json::from_str(&report(d, &base, &["--format", "json"])).unwrap();
    insta::assert_snapshot!("json", redacted_json(&json));
    let html = report(d, &base, &["--format", "html"]);
    insta::assert_snapshot!("html", redact(&html_excerpt(&html), &docs, d));

    let compared = kbench(d, None)
        .arg("compare")
        .arg(&base)
        .arg(&new)
        .assert()
        .code(1);
    let compared = String::from_utf8(compared.get_output().stdout.clone()).unwrap();
    insta::assert_snapshot!("compare", redact(&compared, &docs, d));
}

#[test]
fn the_plots_are_drawn_from_the_mock_results() {
    let dir = folder(&[("study.toml", STUDY), ("mock.toml", MOCK)]);
    let d = dir.path();
    let (base, _, _) = run(d, "study.toml", "mock.toml", "base", 0);
    report(d, &base, &["--plots", "plots"]);
    let mut svgs: Vec<PathBuf> = std::fs::read_dir(d.join("plots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "svg"))
        .collect();
    svgs.sort();
    let names: Vec<String> = svgs
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(!svgs.is_empty());
    for svg in &svgs {
        let text = std::fs::read_to_string(svg).unwrap();
        assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
        // Both variants are drawn and named, and the axes have labelled ticks.
        for variant in ["optimized", "fast"] {
            assert!(text.contains(variant), "{}: no {variant}", svg.display());
        }
        let ticks = text.matches("<text").count();
        assert!(ticks >= 8, "{}: {ticks} texts", svg.display());
        // Every PNG beside it too.
        assert!(svg.with_extension("png").exists(), "{names:?}");
    }
    insta::assert_snapshot!("plot_files", names.join("\n"));
}

/// Runs `study` on the mock `mock`, expecting exit `code`; returns the cases.
fn cases_of(study: &str, mock: &str, extra: &[&str], code: i32) -> (Vec<Value>, String) {
    let dir = folder(&[("study.toml", study), ("mock.toml", mock)]);
    let out = kbench(dir.path(), Some("mock.toml"))
        .args(["run", "study.toml", "--out-dir", "out"])
        .args(extra)
        .assert()
        .code(code);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    let study_dir = dir.path().join("out");
    let name = std::fs::read_dir(&study_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let results = results_file_in(&name.path());
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(results).unwrap()).unwrap();
    (doc["cases"].as_array().unwrap().clone(), stderr)
}

/// Two CUDA variants and a CPU one, over four sizes: the CUDA cases alternate between them.
const FLOW: &str = r#"[study]
name = "flow"
algorithm = "reduce"
seed = 1
[grid]
n = [1000, 2000, 3000, 4000]
dtype = "f32"
[[variant]]
name = "a"
backend = "cuda"
kernel = "reduce_optimized"
[[variant]]
name = "b"
backend = "cuda"
kernel = "reduce_fast"
[[variant]]
name = "cpu"
backend = "cpu"
impl = "sequential"
[measure]
warmup = 1
min_samples = 3
max_samples = 3
"#;

/// (variant, n, status, reason) of each case.
fn outcomes(cases: &[Value]) -> Vec<(String, i64, String, String)> {
    cases
        .iter()
        .map(|c| {
            (
                c["variant"].as_str().unwrap().to_string(),
                c["params"]["n"].as_i64().unwrap(),
                c["status"].as_str().unwrap().to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn status_of(cases: &[Value], variant: &str, n: i64) -> (String, String) {
    let found = outcomes(cases)
        .into_iter()
        .find(|(v, m, _, _)| v == variant && *m == n)
        .unwrap_or_else(|| panic!("no case {variant} n={n}"));
    (found.2, found.3)
}

#[test]
fn a_kernel_fault_fails_its_case_and_a_fresh_worker_runs_the_rest() {
    let mock = "[[event]]\nvariant = \"a\"\nparams = { n = 2000 }\nfault = \"kernel fault\"\n\
                [[event]]\nvariant = \"cpu\"\nfault = \"hang\"\n";
    let (cases, stderr) = cases_of(FLOW, mock, &[], 1);
    // The mock runs CUDA cases alone: an event for a CPU variant (or a misspelt one) is said to
    // strike nothing.
    assert!(
        stderr.contains("note: mock.toml:5: this mock event strikes none of the CUDA cases to run"),
        "{stderr}"
    );
    assert!(!stderr.contains("mock.toml:1:"), "{stderr}");
    let (status, reason) = status_of(&cases, "a", 2000);
    assert_eq!(status, "error");
    assert!(reason.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{reason}");
    // The faulted context stays broken in its process (a later case there would fail with
    // "faulted earlier"): every later case passing shows it ran in a new worker.
    for (variant, n, status, reason) in outcomes(&cases) {
        if (variant.as_str(), n) != ("a", 2000) {
            assert_eq!(status, "passed", "{variant} n={n}: {reason}");
        }
    }
    assert_eq!(cases.len(), 12);
}

#[test]
fn scripted_skips_compile_errors_and_out_of_memory_fail_only_their_cases() {
    let mock = "[device]\nmemory_gib = 1.7e-5\n\
        [[event]]\nvariant = \"a\"\nparams = { n = 1000 }\nskip = \"scripted: not on this device\"\n\
        [[event]]\nvariant = \"b\"\nparams = { n = [1000, 2000] }\nfault = \"compile error\"\n\
        [[event]]\nvariant = \"a\"\nparams = { n = 2000 }\nfault = \"out of memory\"\n\
        [[event]]\nvariant = \"a\"\nparams = { n = 3000 }\nfault = \"wrong answer\"\n";
    let (cases, _) = cases_of(FLOW, mock, &[], 1);
    let (status, reason) = status_of(&cases, "a", 1000);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("skipped", "scripted: not on this device")
    );
    for n in [1000, 2000] {
        let (status, reason) = status_of(&cases, "b", n);
        assert_eq!(status, "error");
        assert!(
            reason.contains("NVRTC failed to compile kernels/reduce.cu")
                && reason.contains("error: a compile error scripted"),
            "{reason}"
        );
    }
    let (status, reason) = status_of(&cases, "a", 2000);
    assert_eq!(status, "error");
    assert!(reason.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{reason}");
    // The answer is checked for real: the mock's one wrong element is caught.
    let (status, reason) = status_of(&cases, "a", 3000);
    assert_eq!(status, "accuracy_failed");
    assert!(
        reason.starts_with("wrong answer: `sum`: 1 of 1 elements"),
        "{reason}"
    );
    // 4000 float32s and a quarter more for scratch do not fit in 17.8 KiB: skipped, with the
    // numbers.
    for variant in ["a", "b"] {
        let (status, reason) = status_of(&cases, variant, 4000);
        assert_eq!(status, "skipped", "{variant}");
        assert!(
            reason.starts_with(
                "too big for the device: needs about 0.00 GiB, 0.00 GiB of MOCK GPU is free"
            ),
            "{reason}"
        );
    }
    // The study went on: the CPU cases and b at 3000 ran.
    assert_eq!(status_of(&cases, "b", 3000).0, "passed");
    for n in [1000, 2000, 3000, 4000] {
        assert_eq!(status_of(&cases, "cpu", n).0, "passed");
    }
}

#[test]
fn a_hang_is_killed_at_the_time_limit_and_the_study_goes_on() {
    let mock = "[[event]]\nvariant = \"b\"\nparams = { n = 1000 }\nfault = \"hang\"\n";
    let (cases, stderr) = cases_of(FLOW, mock, &["--timeout-s", "0.5"], 1);
    let (status, reason) = status_of(&cases, "b", 1000);
    assert_eq!(status, "timed_out");
    assert!(reason.contains("its worker process was killed"), "{reason}");
    assert!(
        stderr.contains("the mock device hangs this case"),
        "{stderr}"
    );
    for (variant, n, status, reason) in outcomes(&cases) {
        if (variant.as_str(), n) != ("b", 1000) {
            assert_eq!(status, "passed", "{variant} n={n}: {reason}");
        }
    }
}

#[test]
fn a_malformed_mock_file_is_refused_with_its_place_before_anything_runs() {
    let dir = folder(&[
        ("study.toml", FLOW),
        ("mock.toml", "[timing]\nseed = 1\ngbytes_per_s = \"fast\"\n"),
    ]);
    let out = kbench(dir.path(), Some("mock.toml"))
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("mock.toml:3:16"), "{stderr}");
    assert!(stderr.contains("mock device file"), "{stderr}");
    assert!(!dir.path().join("out").exists());
    let out = kbench(dir.path(), Some("missing.toml"))
        .args(["run", "study.toml", "--out-dir", "out"])
        .assert()
        .code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("missing.toml") && stderr.contains("cannot read the mock device file"),
        "{stderr}"
    );
}

/// A declared table of eight columns with a long reference label, and a claim with a long text:
/// wider than 80 columns.
const WIDE: &str = r#"[study]
name = "wide"
algorithm = "reduce"
seed = 2
[grid]
n = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
dtype = ["f32", "f64"]
[[variant]]
name = "optimized"
backend = "cuda"
kernel = "reduce_optimized"
[[variant]]
name = "fast"
backend = "cuda"
kernel = "reduce_fast"
[measure]
warmup = 0
min_samples = 6
max_samples = 6
[[table]]
title = "Median time of the fast kernel by size and element type, on the mock device with its default time model"
rows = "dtype"
columns = "n"
value = "median"
variants = ["fast"]
[[table.reference]]
label = "a published figure, under a label longer than an 80-column terminal has room for beside a column"
source = "made up for the test"
unit = "us"
values = { 1000 = 3.5, 8000 = 4.0 }
[[claim]]
text = "the fast kernel beats the optimized one at every size and element type the study runs, by any margin at all"
source = "a claim long enough to need two lines on an 80-column terminal, with its source"
kind = "faster"
a = "fast"
b = "optimized"
"#;

#[test]
fn declared_tables_and_claims_fit_80_columns_unless_wide() {
    let dir = folder(&[("study.toml", WIDE), ("mock.toml", MOCK)]);
    let d = dir.path();
    let (results, _, printed) = run(d, "study.toml", "mock.toml", "w", 0);
    let widest = |text: &str| text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let fitted = report(d, &results, &["--tables"]);
    assert!(widest(&fitted) <= 80, "{fitted}");
    assert!(widest(&printed) <= 80, "{printed}");
    // Nothing is lost: every size is in one of the parts.
    assert!(fitted.contains("(part 1 of 2: n 1000, "), "{fitted}");
    for n in ["1000", "5000", "8000"] {
        assert!(fitted.contains(&format!(" {n} ")), "{n}: {fitted}");
    }
    insta::assert_snapshot!("wide_tables_at_80_columns", fitted);
    let wide = report(d, &results, &["--tables", "--wide"]);
    assert!(widest(&wide) > 100, "{wide}");
    assert!(!wide.contains("(part "), "{wide}");
}

/// SAXPY (elementwise, so its transfers split into chunks) in every scope the CUDA executor
/// has: the kernel alone, transfers from pageable and from pinned memory, pinned over two
/// streams chunk by chunk, and the whole program.
const SCOPES: &str = r#"[study]
name = "scopes"
algorithm = "saxpy"
seed = 3
[grid]
n = [1_000, 100_000]
a = 2.0
block = 256
[[variant]]
name = "kernel"
backend = "cuda"
kernel = "saxpy_naive"
[[variant]]
name = "pageable"
backend = "cuda"
kernel = "saxpy_naive"
scope = "transfers"
[[variant]]
name = "pinned"
backend = "cuda"
kernel = "saxpy_naive"
scope = "transfers"
host_memory = "pinned"
[[variant]]
name = "streams"
backend = "cuda"
kernel = "saxpy_naive"
scope = "transfers"
host_memory = "pinned"
streams = 2
[[variant]]
name = "program"
backend = "cuda"
kernel = "saxpy_naive"
scope = "program"
[measure]
warmup = 1
min_samples = 8
max_samples = 8
"#;

/// The mock of the snapshots with the profiler on, so that kernel-scope runs are profiled.
const MOCK_PROFILED: &str = r#"[device]
name = "H100 (test)"
host_link_gbytes_per_s = 25.0
profiler = true

[timing]
seed = 11
launch_s = 4e-6
gbytes_per_s = 1500.0
jitter = 0.02
"#;

/// Each case's outcome, summary and GPU timer record, as the results file has them (the
/// samples are the mock's, deterministic to the bit).
fn scope_records(cases: &[Value]) -> String {
    let records: Vec<Value> = cases
        .iter()
        .map(|c| {
            let s = &c["summary"];
            let t = &c["measurement"]["gpu_timer"];
            serde_json::json!({
                "case": format!("{} n={}", c["variant"].as_str().unwrap(), c["params"]["n"]),
                "status": c["status"],
                "scope": c["scope"],
                "host_memory": c["host_memory"],
                "samples": s["samples"],
                "median_s": s["median_s"],
                "min_s": s["min_s"],
                "max_s": s["max_s"],
                "gpu_timer": {
                    "method": t["method"],
                    "unblocked_reason": t["unblocked_reason"],
                    "runs_per_sample": t["runs_per_sample"],
                    "cold_l2": t["cold_l2"],
                    "profiler_samples_s": t["profiler_samples_s"],
                    "profiler_kernels_per_run": t["profiler_kernels_per_run"],
                    "profiler_vs_events": t["profiler_vs_events"],
                    "profiler_skipped": t["profiler_skipped"],
                    "timers_disagree": t["timers_disagree"],
                },
            })
        })
        .collect();
    serde_json::to_string_pretty(&records).unwrap()
}

/// The median of `variant` at `n`, in µs.
fn median_us(cases: &[Value], variant: &str, n: i64) -> f64 {
    let case = cases
        .iter()
        .find(|c| c["variant"] == variant && c["params"]["n"] == n)
        .unwrap_or_else(|| panic!("no case {variant} n={n}"));
    case["summary"]["median_s"].as_f64().unwrap() * 1e6
}

#[test]
fn the_mock_runs_every_scope_through_the_cuda_executor() {
    let (cases, _) = cases_of(SCOPES, MOCK_PROFILED, &[], 0);
    assert_eq!(cases.len(), 10);
    // The time model, through each scope (the jitter is 2%): a run is 4 µs + 12 bytes an
    // element at 1500 GB/s; transfers add x in and y in and out (12 bytes an element) at
    // 25 GB/s; program scope adds 50 µs for allocating and freeing; two streams run 8 chunks of
    // 256-element multiples, each its own launch (the mock does not overlap them).
    let near = |got: f64, want: f64| (got / want - 1.0).abs() <= 0.02;
    for (n, kernel_us, link_us) in [(1_000, 4.008, 0.48), (100_000, 4.8, 48.0)] {
        let at = |variant| median_us(&cases, variant, n);
        assert!(near(at("kernel"), kernel_us), "{n}: {}", at("kernel"));
        assert!(near(at("pageable"), kernel_us + link_us), "{n}");
        assert!(near(at("pinned"), kernel_us + link_us), "{n}");
        assert!(near(at("program"), kernel_us + link_us + 50.0), "{n}");
    }
    // 1000 elements: four chunks of 256 (the last 232); 100,000: eight of 12,544 (the last
    // 12,192).
    assert!(near(
        median_us(&cases, "streams", 1_000),
        4.0 * 4.0 + 0.008 + 0.48
    ));
    assert!(near(
        median_us(&cases, "streams", 100_000),
        8.0 * 4.0 + 0.8 + 48.0
    ));
    insta::assert_snapshot!("scopes", scope_records(&cases));
}

/// The reduction's kernels in batch mode: a few single runs size the batch, whose samples are
/// hot runs back to back; the profiler skips them and says why.
const BATCH: &str = r#"[study]
name = "batch"
algorithm = "reduce"
seed = 5
[grid]
n = [1_000, 1_000_000]
dtype = "f32"
block = 256
[[variant]]
name = "optimized"
backend = "cuda"
kernel = "reduce_optimized"
[[variant]]
name = "fast"
backend = "cuda"
kernel = "reduce_fast"
[measure]
warmup = 1
min_samples = 6
max_samples = 6
mode = "batch"
batch_min_window_s = 100e-6
"#;

#[test]
fn the_mock_runs_batch_mode_through_the_cuda_executor() {
    let (cases, _) = cases_of(BATCH, MOCK_PROFILED, &[], 0);
    assert_eq!(cases.len(), 4);
    for case in &cases {
        let timer = &case["measurement"]["gpu_timer"];
        assert_eq!(timer["method"], "batch_events", "{case}");
        assert_eq!(timer["cold_l2"], false, "{case}");
        let skipped = timer["profiler_skipped"].as_str().unwrap();
        assert!(skipped.starts_with("batch mode"), "{skipped}");
    }
    // 4 µs + 4 KB at 1500 GB/s a run: about 25 runs fill the 100 µs window (the fastest of
    // three jittered runs sizes it); a run of 1,000,000 elements (about 6.7 µs) needs about 15.
    for case in &cases {
        let runs = case["measurement"]["gpu_timer"]["runs_per_sample"]
            .as_u64()
            .unwrap();
        let expected = match case["params"]["n"].as_i64().unwrap() {
            1_000 => 25..=26,
            _ => 15..=16,
        };
        assert!(expected.contains(&runs), "{runs}: {case}");
    }
    insta::assert_snapshot!("batch", scope_records(&cases));
}

/// The mock with its stand-in tracer: a traced run takes 2% longer (`TRACING_COST`).
const MOCK_TRACED: &str = r#"[device]
name = "H100 (test)"
host_link_gbytes_per_s = 25.0
profiler = true
tracer = true

[timing]
seed = 11
launch_s = 4e-6
gbytes_per_s = 1500.0
jitter = 0.0
"#;

#[test]
fn kernel_samples_run_untraced_and_cupti_times_traced_runs_of_its_own() {
    let (traced, _) = cases_of(SCOPES, MOCK_TRACED, &[], 0);
    let (untraced, _) = cases_of(
        SCOPES,
        MOCK_PROFILED
            .replace("jitter = 0.02", "jitter = 0.0")
            .as_str(),
        &[],
        0,
    );
    for n in [1_000, 100_000] {
        // The samples are the untraced device's, to the bit: tracing did not touch them.
        assert_eq!(
            median_us(&traced, "kernel", n),
            median_us(&untraced, "kernel", n)
        );
        let case = (traced.iter())
            .find(|c| c["variant"] == "kernel" && c["params"]["n"] == n)
            .unwrap();
        let timer = &case["measurement"]["gpu_timer"];
        let count = |key: &str| timer[key].as_array().map_or(0, Vec::len);
        // 8 samples, so 8 traced runs (no more than the samples), each with its span.
        assert_eq!(count("traced_events_s"), 8, "{timer}");
        assert_eq!(count("cupti_samples_s"), 8, "{timer}");
        let slowdown = timer["tracing_slowdown"].as_f64().unwrap();
        assert!((slowdown - 0.02).abs() < 1e-9, "{slowdown}");
        // CUPTI against the events of its own runs (its span is 1% under them), not against
        // the untraced samples (from which it would be 1% over).
        let cupti_vs_events = timer["cupti_vs_events"].as_f64().unwrap();
        assert!((cupti_vs_events + 0.01).abs() < 1e-9, "{cupti_vs_events}");
        assert_eq!(timer["timers_disagree"], false);
    }
    // Without a tracer, nothing is traced.
    let timer = &untraced[0]["measurement"]["gpu_timer"];
    assert!(timer.get("traced_events_s").is_none() && timer.get("tracing_slowdown").is_none());
}
