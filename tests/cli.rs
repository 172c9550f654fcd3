//! The command line end to end: exit codes, manifests refused before anything runs, and a real
//! run of experiments/reduction.toml whose JSON is read back and checked.

use crate::common;
use common::kbench;
use common::results_file_in;

use std::path::Path;

use serde_json::Value;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A small valid study; `extra` is appended.
fn study(name: &str, extra: &str) -> String {
    format!(
        "[study]\nname = \"{name}\"\nalgorithm = \"reduce\"\nseed = 5\n[grid]\nn = [1, 777, 100_003]\ndtype = [\"i32\", \"f32\"]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
         [[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [measure]\nwarmup = 1\nmin_samples = 3\nmax_samples = 5\n{extra}"
    )
}

fn stdout_json_lines(output: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(output)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each stdout line is JSON"))
        .collect()
}

#[test]
fn malformed_manifests_are_refused_with_exit_2_and_nothing_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let good = write(dir.path(), "good.toml", &study("good", ""));
    let typo = write(dir.path(), "typo.toml", &study("typo", "warmpu = 2\n"));
    let negative = write(
        dir.path(),
        "negative.toml",
        &study("negative", "").replace("n = [1, 777, 100_003]", "n = [-4]"),
    );
    let assert = kbench()
        .args(["run", &good, &typo, &negative, "--out-dir"])
        .arg(&out)
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("typo.toml:24:1"), "{stderr}");
    assert!(stderr.contains("unknown field `warmpu`"), "{stderr}");
    assert!(stderr.contains("negative.toml:6:5"), "{stderr}");
    assert!(stderr.contains("a size must be >= 0"), "{stderr}");
    assert!(
        !out.exists(),
        "a refused run must not measure or write anything"
    );

    kbench().args(["check", &typo]).assert().code(2);
    kbench()
        .args(["check", &good])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("18 cases, 3 variants"));
}

#[test]
fn bad_arguments_exit_2() {
    kbench().args(["run"]).assert().code(2);
    kbench()
        .args(["run", "no/such/dir/*.toml"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no manifest matches"));
    kbench()
        .args(["run", "missing.toml"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot read manifest"));
    kbench().args(["frobnicate"]).assert().code(2);
    for bad in [
        "--timeout-s=-1",
        "--timeout-s=nan",
        "--max-time-s=0",
        "--max-time-s=inf",
    ] {
        kbench()
            .args(["run", "experiments/reduction.toml", bad])
            .assert()
            .code(2)
            .stderr(predicates::str::contains("positive number of seconds"));
    }
}

#[test]
fn list_names_algorithms_variants_and_backends() {
    kbench()
        .arg("list")
        .assert()
        .success()
        .stdout(predicates::str::contains("reduce"))
        .stdout(predicates::str::contains("sequential, pairwise, threads"))
        .stdout(predicates::str::contains("reduce_fast"));
}

#[test]
fn a_wrong_answer_exits_1_saves_npy_files_and_keeps_the_other_cases() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // A zero tolerance fails the sequential f32 sum (it rounds), not the exact integer sums.
    let manifest = write(
        dir.path(),
        "strict.toml",
        &study("strict", "[accuracy]\nrel_tol = { f32 = 0.0 }\n"),
    );
    let assert = kbench()
        .args([
            "run",
            &manifest,
            "--json",
            "--save-outputs",
            "failed",
            "--out-dir",
        ])
        .arg(&out)
        .assert()
        .code(1);
    let docs = stdout_json_lines(&assert.get_output().stdout);
    assert_eq!(docs.len(), 1);
    let cases = docs[0]["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 18);
    let failed: Vec<&Value> = cases
        .iter()
        .filter(|c| c["status"] == "accuracy_failed")
        .collect();
    assert!(!failed.is_empty());
    for case in &failed {
        assert_eq!(case["params"]["dtype"], "f32", "{case}");
        assert!(case["outputs"][0]["accuracy"]["first_wrong"][0]["expected"].is_number());
        let files = case["saved_files"].as_array().unwrap();
        assert_eq!(files.len(), 3, "{case}");
        let folder = out.join("strict");
        let output = folder.join(
            files
                .iter()
                .find(|f| f.as_str().unwrap().ends_with("output.sum.npy"))
                .unwrap()
                .as_str()
                .unwrap(),
        );
        let bytes = std::fs::read(&output).unwrap();
        let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
        assert_eq!(npy.shape(), &[1]);
        let got: Vec<f32> = npy.into_vec().unwrap();
        assert_eq!(
            got[0] as f64,
            case["outputs"][0]["accuracy"]["first_wrong"][0]["got"]
                .as_f64()
                .unwrap()
        );
    }
    assert!(cases.iter().any(|c| c["status"] == "passed"));
    assert!(cases
        .iter()
        .filter(|c| c["status"] == "passed")
        .all(|c| c["saved_files"].as_array().unwrap().is_empty()));

    // The CSV export names statuses as the JSON does.
    let file = results_file_in(&out.join("strict"));
    let csv = kbench()
        .arg("report")
        .arg(&file)
        .args(["--format", "csv"])
        .assert()
        .code(0);
    let csv = String::from_utf8_lossy(&csv.get_output().stdout).to_string();
    // Each of the 18 rows has one of the JSON's statuses as a field.
    let statuses: Vec<&str> = csv
        .lines()
        .skip(1)
        .filter_map(|l| {
            ["passed", "accuracy_failed", "skipped", "timed_out", "error"]
                .into_iter()
                .find(|s| l.split(',').any(|field| field == *s))
        })
        .collect();
    assert_eq!(statuses.len(), 18, "{csv}");
    assert!(statuses.contains(&"accuracy_failed"), "{csv}");
    assert!(
        !csv.contains("accuracyfailed") && !csv.contains("timedout"),
        "{csv}"
    );
}

#[test]
fn reduction_study_prints_its_table_and_writes_json_with_every_case() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let assert = kbench()
        .args([
            "run",
            "experiments/reduction.toml",
            "--max-time-s",
            "0.05",
            "--min-samples",
            "3",
            "--out-dir",
        ])
        .arg(&out)
        .assert();
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let code = assert.get_output().status.code();
    // Without a GPU the CUDA cases are skipped; with one they run. Either way nothing fails.
    assert_eq!(
        code,
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&assert.get_output().stderr)
    );
    assert!(stdout.contains("81 cases"), "{stdout}");
    assert!(stdout.contains("│ cpu_pairwise"), "{stdout}");

    let files: Vec<_> = std::fs::read_dir(out.join("reduction"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 2);
    assert_eq!(doc["complete"], true);
    assert_eq!(doc["study"]["name"], "reduction");
    assert!(doc["manifest"]["toml"]
        .as_str()
        .unwrap()
        .contains("[[variant]]"));
    for key in ["host", "cpu_model", "kbench_version", "git_revision"] {
        assert!(
            doc["environment"][key]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{key}"
        );
    }
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 81);
    let gpu_present = !doc["environment"]["device"].is_null();
    for case in cases {
        match case["backend"].as_str().unwrap() {
            "cpu" => {
                assert_eq!(case["status"], "passed", "{case}");
                let samples = case["measurement"]["samples_s"].as_array().unwrap();
                assert!(!samples.is_empty());
                assert_eq!(
                    samples.len() as u64,
                    case["summary"]["samples"].as_u64().unwrap()
                );
                let median = case["summary"]["median_s"].as_f64().unwrap();
                assert!(median > 0.0 && case["gbytes_per_s"].as_f64().unwrap() > 0.0);
                assert!(case["outputs"][0]["accuracy"]["passed"].as_bool().unwrap());
            }
            _ if gpu_present => assert_eq!(case["status"], "passed", "{case}"),
            _ => {
                assert_eq!(case["status"], "skipped", "{case}");
                assert!(case["reason"].as_str().unwrap().contains("no CUDA driver"));
            }
        }
    }
}

#[test]
fn a_second_run_never_overwrites_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let manifest = write(dir.path(), "twice.toml", &study("twice", ""));
    for _ in 0..2 {
        kbench()
            .args(["run", &manifest, "--max-time-s", "0.01", "--out-dir"])
            .arg(&out)
            .assert()
            .code(0);
    }
    assert_eq!(std::fs::read_dir(out.join("twice")).unwrap().count(), 2);
}

#[test]
fn an_unwritable_output_folder_is_reported_before_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let manifest = write(dir.path(), "s.toml", &study("s", ""));
    kbench()
        .args(["run", &manifest, "--out-dir"])
        .arg(&blocker)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot create the output folder"));
}

#[test]
fn a_refuted_claim_exits_3_with_check_claims_and_report_judges_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The pairwise sum is no hundred times faster than the loop: refuted. The GPU claim is
    // skipped here (no GPU) or holds there: never refuted for want of a GPU.
    let claims = "[[claim]]\ntext = \"pairwise is 100x faster\"\nsource = \"t\"\nkind = \"faster\"\na = \"tree\"\nb = \"seq\"\nby = 100.0\nselect = { n = 100_003 }\n\
                  [[claim]]\ntext = \"the GPU sum is right\"\nsource = \"t\"\nkind = \"passes\"\na = \"gpu\"\n\
                  [[table]]\ntitle = \"Medians\"\nrows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\nselect = { dtype = \"f32\" }\n";
    let manifest = write(dir.path(), "c.toml", &study("claimed", claims));
    let run = |check: bool| {
        let mut cmd = kbench();
        cmd.args(["run", &manifest, "--out-dir"]).arg(&out);
        if check {
            cmd.arg("--check-claims");
        }
        cmd.assert()
    };
    let plain = run(false);
    assert_eq!(plain.get_output().status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&plain.get_output().stdout).to_string();
    assert!(
        stdout.contains("REFUTED      \"pairwise is 100x faster\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("Medians (median time; dtype = f32)"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("REFUTED      \"the GPU sum is right\""),
        "{stdout}"
    );
    assert_eq!(run(true).get_output().status.code(), Some(3));

    // The verdicts are kept in the JSON, and `report` judges the saved run again.
    let file = std::fs::read_dir(out.join("claimed"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(doc["claims"][0]["status"], "refuted");
    let report = kbench()
        .args([
            "report",
            file.to_str().unwrap(),
            "--tables",
            "--check-claims",
        ])
        .assert();
    assert_eq!(report.get_output().status.code(), Some(3));
    let text = String::from_utf8_lossy(&report.get_output().stdout).to_string();
    assert!(text.contains("pairwise is 100x faster"), "{text}");
    assert!(
        !text.contains("│ seq "),
        "--tables leaves out the table of every case: {text}"
    );
}

/// The visible width of a line (box-drawing characters and µ count one each).
fn width(line: &str) -> usize {
    line.chars().count()
}

#[test]
fn progress_is_one_plain_line_per_case_on_stderr_when_it_is_not_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(dir.path(), "p.toml", &study("progress", ""));
    // As in a CI log: stdout redirected to a file (JSON), stderr not a terminal.
    let assert = kbench()
        .args([
            "run",
            &manifest,
            "--json",
            "--max-time-s",
            "0.01",
            "--out-dir",
        ])
        .arg(dir.path().join("out"))
        .assert()
        .code(0);
    let output = assert.get_output();
    assert_eq!(stdout_json_lines(&output.stdout).len(), 1);
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 18, "{stderr}");
    for (i, line) in lines.iter().enumerate() {
        assert!(
            line.starts_with(&format!("[{}/18] progress: ", i + 1)),
            "{line}"
        );
        assert!(line.ends_with(" s)"), "{line}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("seq dtype=i32 n=777: passed")),
        "{stderr}"
    );
    // A skipped case (no GPU) says so; its reason is printed once, in the table.
    assert!(
        lines
            .iter()
            .all(|l| l.contains(": passed (") || l.contains(": skipped (")),
        "{stderr}"
    );
    // No progress bar's control characters in a log.
    assert!(
        !stderr.contains('\u{1b}') && !stderr.contains('\r'),
        "{stderr:?}"
    );
}

#[test]
fn tables_fit_80_columns_unless_wide() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let extra = "[report]\nbaseline = \"seq\"\n";
    let manifest = write(dir.path(), "w.toml", &study("wide", extra));
    let run = |args: &[&str]| {
        let assert = kbench()
            .args(["run", &manifest, "--max-time-s", "0.01", "--out-dir"])
            .arg(&out)
            .args(args)
            .env_remove("COLUMNS")
            .assert()
            .code(0);
        String::from_utf8_lossy(&assert.get_output().stdout).to_string()
    };
    let table_lines = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(['╭', '│', '├', '╰']))
            .map(String::from)
            .collect()
    };
    let narrow = run(&[]);
    let lines = table_lines(&narrow);
    assert!(lines.len() > 18, "{narrow}");
    assert!(lines.iter().all(|l| width(l) <= 80), "{narrow}");
    assert!(narrow.contains("(left out to fit 80 columns: "), "{narrow}");
    assert!(narrow.contains("--wide shows them"), "{narrow}");
    for kept in ["variant", "median", "speedup"] {
        assert!(lines[1].contains(kept), "{narrow}");
    }
    let wide = run(&["--wide"]);
    let lines = table_lines(&wide);
    assert!(lines.iter().any(|l| width(l) > 80), "{wide}");
    for all in ["95% CI", "GB/s", "samples", "rel err"] {
        assert!(lines[1].contains(all), "{all}: {wide}");
    }
    assert!(!wide.contains("left out to fit"), "{wide}");

    // `report` fits the width too: COLUMNS where set, 80 where stdout is no terminal.
    let file = std::fs::read_dir(out.join("wide"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let report = |columns: Option<&str>, args: &[&str]| {
        let mut cmd = kbench();
        cmd.arg("report")
            .arg(&file)
            .args(args)
            .env_remove("COLUMNS");
        if let Some(c) = columns {
            cmd.env("COLUMNS", c);
        }
        String::from_utf8_lossy(&cmd.assert().code(0).get_output().stdout).to_string()
    };
    let at_80 = report(None, &[]);
    assert!(
        table_lines(&at_80).iter().all(|l| width(l) <= 80),
        "{at_80}"
    );
    let at_60 = report(Some("60"), &[]);
    assert!(
        table_lines(&at_60).iter().all(|l| width(l) <= 60),
        "{at_60}"
    );
    assert!(at_60.contains("fit 60 columns"), "{at_60}");
    let at_200 = report(Some("200"), &[]);
    assert!(!at_200.contains("left out to fit"), "{at_200}");
    // The run's own table (the first of the two files) with every column.
    assert_eq!(
        table_lines(&report(None, &["--wide"]))[1],
        table_lines(&wide)[1]
    );
}

#[test]
fn help_wraps_at_the_terminal_width_without_breaking_words() {
    for command in ["run", "report", "compare", "kernels", "check"] {
        let help = |columns: &str| {
            let assert = kbench()
                .args([command, "--help"])
                .env("COLUMNS", columns)
                .assert()
                .success();
            String::from_utf8_lossy(&assert.get_output().stdout).to_string()
        };
        let narrow = help("80");
        let unwrapped = help("1000");
        assert!(narrow.lines().all(|l| width(l) <= 80), "{narrow}");
        assert!(unwrapped.lines().any(|l| width(l) > 80), "{unwrapped}");
        // Every word of the wrapped help is a word of the unwrapped one: none was cut in two.
        let words: std::collections::HashSet<&str> = unwrapped.split_whitespace().collect();
        for word in narrow.split_whitespace() {
            assert!(words.contains(word), "`{word}` is broken in:\n{narrow}");
        }
    }
}

#[test]
fn conflicting_or_missing_inputs_are_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let manifest = write(dir.path(), "s.toml", &study("s", ""));
    kbench()
        .args([
            "run",
            &manifest,
            "--min-samples",
            "50",
            "--max-samples",
            "10",
        ])
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--min-samples 50 is more than --max-samples 10",
        ));
    // One bound given against the manifest's other (min 3, max 5): it runs, and says what it did.
    let noted = kbench()
        .args([
            "run",
            &manifest,
            "--max-samples",
            "2",
            "--max-time-s",
            "0.01",
        ])
        .arg("--out-dir")
        .arg(dir.path().join("noted"))
        .assert()
        .code(0);
    let stderr = String::from_utf8_lossy(&noted.get_output().stderr).to_string();
    assert!(
        stderr.contains("--max-samples 2 is below its min_samples 3, which it keeps"),
        "{stderr}"
    );
    for command in [&["run", &manifest][..], &["kernels"][..]] {
        kbench()
            .args(command)
            .args(["--kernels-dir", "/nonexistent/kernels", "--out-dir"])
            .arg(&out)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(
                "--kernels-dir /nonexistent/kernels: no such folder",
            ));
    }
    // A folder without the study's kernel file: refused before running, GPU or not.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    kbench()
        .args(["run", &manifest, "--out-dir"])
        .arg(&out)
        .arg("--kernels-dir")
        .arg(&empty)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot read kernel source"));
    kbench()
        .args(["kernels", "--arch", "90", "--out-dir"])
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "--arch 90: expected an architecture",
        ));
    assert!(!out.exists(), "nothing may be measured or written");

    // A where-filter that keeps no grid point plans nothing: refused at its line.
    let none = write(
        dir.path(),
        "none.toml",
        &study("none", "").replacen("[[variant]]", "where = \"n > 1_000_000\"\n[[variant]]", 1),
    );
    let out_arg = format!("--out-dir={}", out.display());
    for args in [vec!["run", &none, &out_arg], vec!["check", &none]] {
        kbench()
            .args(args)
            .assert()
            .code(2)
            .stderr(predicates::str::contains("none.toml:8:10"))
            .stderr(predicates::str::contains("holds at no grid point"));
    }
    assert!(!out.exists());

    // `plots` into a folder that cannot be made names the folder.
    let results = dir.path().join("r");
    kbench()
        .args(["run", &manifest, "--max-time-s", "0.01", "--out-dir"])
        .arg(&results)
        .assert()
        .code(0);
    let file = std::fs::read_dir(results.join("s"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    kbench()
        .arg("report")
        .arg(&file)
        .args(["--plots", "/proc/nope"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("/proc/nope"));
}

#[test]
fn check_reports_every_manifest_and_counts_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let one = write(
        dir.path(),
        "one.toml",
        "[study]\nname = \"one\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [10]\n\
         [[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n",
    );
    let typo = write(dir.path(), "typo.toml", &study("typo", "warmpu = 2\n"));
    let assert = kbench().args(["check", &one, &typo]).assert().code(2);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    assert!(
        stdout.contains("study `one`, 1 case, 1 variant\n"),
        "the good manifest is reported beside the bad one: {stdout}"
    );
    assert!(String::from_utf8_lossy(&assert.get_output().stderr).contains("typo.toml:24:1"));
}

#[test]
fn a_where_syntax_error_names_the_token_not_its_rust_form() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "w.toml",
        &study("w", "").replacen("[[variant]]", "where = \"n >= >= 3\"\n[[variant]]", 1),
    );
    let assert = kbench().args(["check", &bad]).assert().code(2);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains("`>=`"), "{stderr}");
    assert!(!stderr.contains("Op("), "{stderr}");
}

#[test]
fn work_that_is_mostly_arithmetic_shows_gflops_and_no_rate_reads_zero() {
    // Durbin moves O(n) bytes for O(n^2) flops: its GB/s is tiny, its GFLOP/s is the measure.
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(
        dir.path(),
        "d.toml",
        "[study]\nname = \"durbin\"\nalgorithm = \"durbin\"\nseed = 1\n[grid]\nn = [100, 3000]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 1\nmin_samples = 3\nmax_samples = 3\n",
    );
    let assert = kbench()
        .args(["run", &manifest, "--wide", "--out-dir"])
        .arg(dir.path().join("out"))
        .assert()
        .code(0);
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
    let header = stdout
        .lines()
        .find(|l| l.contains("│ variant"))
        .unwrap_or_else(|| panic!("{stdout}"));
    let columns: Vec<&str> = header.split('│').map(str::trim).collect();
    let gbytes = columns.iter().position(|c| *c == "GB/s").unwrap();
    let gflops = columns.iter().position(|c| *c == "GFLOP/s").expect(&stdout);
    for row in stdout.lines().filter(|l| l.starts_with("│ seq")) {
        let cells: Vec<&str> = row.split('│').map(str::trim).collect();
        for at in [gbytes, gflops] {
            let rate: f64 = cells[at].parse().unwrap_or_else(|_| panic!("{row}"));
            assert!(rate > 0.0, "a rate reads zero: {row}");
            // Three significant digits, however small.
            let digits = cells[at].trim_start_matches(['0', '.']).replace('.', "");
            assert!(digits.len() >= 3, "{row}");
        }
    }
}

#[test]
fn progress_is_a_bar_on_a_terminal_stderr_even_with_stdout_redirected() {
    // util-linux's `script` gives the command a terminal; the command sends stdout to a file.
    let Some(script) = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        println!("skipped: `script` (util-linux) is not installed, so no terminal to test with");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let manifest = write(dir.path(), "t.toml", &study("term", ""));
    let stdout_file = dir.path().join("stdout.json");
    let command = format!(
        "{} run {manifest} --json --max-time-s 0.01 --out-dir {} > {}",
        env!("CARGO_BIN_EXE_kbench"),
        dir.path().join("out").display(),
        stdout_file.display()
    );
    let output = std::process::Command::new(script)
        .args(["-qec", &command, "/dev/null"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let terminal = String::from_utf8_lossy(&output.stdout).to_string();
    // The bar redraws itself (how often is up to indicatif) and is cleared at the end.
    assert!(terminal.contains("/18 cases, "), "{terminal:?}");
    assert!(terminal.contains("\r\u{1b}[2K"), "{terminal:?}");
    // The redirected stdout holds the JSON alone, and the terminal no per-case log lines.
    let json = std::fs::read(&stdout_file).unwrap();
    assert_eq!(stdout_json_lines(&json).len(), 1);
    assert!(!terminal.contains("[1/18]"), "{terminal:?}");
}
