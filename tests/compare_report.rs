//! `kbench compare` and `kbench report` from the command line: the gate's exit codes on real
//! results files (one case slowed by editing its samples), baselines, and re-rendering.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn kbench() -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    cmd
}

const STUDY: &str = "[study]\nname = \"gate\"\nalgorithm = \"reduce\"\nseed = 9\n\
[grid]\nn = [1000, 100_003]\ndtype = [\"i32\", \"f64\"]\n\
[[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"tree\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\n\
[measure]\nwarmup = 1\nmin_samples = 20\nmax_samples = 20\n[report]\nbaseline = \"seq\"\n";

/// Runs the study once, saving it as baseline `main`; returns (out dir, results file).
fn run_once(dir: &Path) -> (PathBuf, PathBuf) {
    let manifest = dir.join("gate.toml");
    std::fs::write(&manifest, STUDY).unwrap();
    let out = dir.join("out");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .args(["--save-baseline", "main"])
        .assert()
        .success();
    let result = std::fs::read_dir(out.join("gate"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    (out, result)
}

/// The case whose samples spread least (interquartile range over median).
fn steadiest_case(results: &Path) -> usize {
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(results).unwrap()).unwrap();
    let spread = |case: &Value| {
        let mut s: Vec<f64> = case["measurement"]["samples_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        s.sort_by(f64::total_cmp);
        let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize];
        (at(0.75) - at(0.25)) / at(0.5)
    };
    let cases = doc["cases"].as_array().unwrap();
    (0..cases.len())
        .min_by(|&a, &b| spread(&cases[a]).total_cmp(&spread(&cases[b])))
        .unwrap()
}

fn edited(from: &Path, to: &Path, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
    // Without the host's load: on a saturated test machine the gate would rightly judge these
    // CPU cases `loaded` (tests/gate.rs tests that); here the statistics are under test.
    doc["environment"].as_object_mut().unwrap().remove("load");
    edit(&mut doc);
    std::fs::write(to, serde_json::to_string(&doc).unwrap()).unwrap();
    to.to_path_buf()
}

#[test]
fn the_gate_passes_identical_runs_and_fails_a_slowed_case() {
    let dir = tempfile::tempdir().unwrap();
    let (out, base) = run_once(dir.path());

    // A file compared with itself: nothing slower, exit 0.
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&base)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("0 slower"));

    // The steadiest case made 10% slower, every sample: caught, exit 1; and the baseline name
    // resolves. (These are real CPU timings: a 1 µs case may spread by 20% on a busy machine,
    // where a 10% change is rightly inconclusive.)
    let steadiest = steadiest_case(&base);
    let slow = edited(&base, &dir.path().join("slow.json"), |doc| {
        for s in doc["cases"][steadiest]["measurement"]["samples_s"]
            .as_array_mut()
            .unwrap()
        {
            *s = Value::from(s.as_f64().unwrap() * 1.10);
        }
    });
    let assert = kbench()
        .arg("compare")
        .arg(&base)
        .arg(&slow)
        .args(["--json"])
        .assert()
        .code(1);
    let verdicts: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    let slower: Vec<&Value> = verdicts["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["verdict"] == "slower")
        .collect();
    assert_eq!(slower.len(), 1, "{verdicts}");
    kbench()
        .args(["compare", "--baseline", "main", "--out-dir"])
        .arg(&out)
        .arg(&slow)
        .assert()
        .code(1);

    // Made faster instead: improvements never fail.
    let fast = edited(&base, &dir.path().join("fast.json"), |doc| {
        for s in doc["cases"][steadiest]["measurement"]["samples_s"]
            .as_array_mut()
            .unwrap()
        {
            *s = Value::from(s.as_f64().unwrap() * 0.8);
        }
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&fast)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("1 faster"));

    // A case that now gives a wrong answer fails the gate; a case missing on one side is reported.
    let broken = edited(&base, &dir.path().join("broken.json"), |doc| {
        doc["cases"][0]["status"] = Value::from("accuracy_failed");
        doc["cases"][0]["reason"] = Value::from("wrong answer");
        doc["cases"].as_array_mut().unwrap().pop();
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&broken)
        .assert()
        .code(1)
        .stdout(predicates::str::contains("NEW FAILURE"))
        .stdout(predicates::str::contains("only in the baseline: tree"));
}

#[test]
fn several_baseline_runs_are_used_together() {
    let dir = tempfile::tempdir().unwrap();
    let (out, first) = run_once(dir.path());
    for _ in 0..2 {
        run_once(dir.path());
    }
    let runs = std::fs::read_dir(out.join("baselines/gate/main"))
        .unwrap()
        .count();
    assert_eq!(runs, 3);
    let assert = kbench()
        .args(["compare", "--json", "--baseline", "main", "--out-dir"])
        .arg(&out)
        .arg(&first)
        .assert();
    let verdicts: Value = serde_json::from_slice(&assert.get_output().stdout).unwrap();
    assert_eq!(verdicts["baseline_runs"], 3);
    // The first run is one of the three: it cannot be slower than them all.
    assert!(
        verdicts["cases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["verdict"] != "slower"),
        "{verdicts}"
    );
    kbench()
        .args(["compare", "--baseline", "nothing", "--out-dir"])
        .arg(&out)
        .arg(&first)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no baseline"));
}

#[test]
fn runs_from_different_machines_are_refused_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = run_once(dir.path());
    let other = edited(&base, &dir.path().join("other.json"), |doc| {
        doc["environment"]["cpu_model"] = Value::from("Some Other CPU");
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&other)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("different CPUs"));
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&other)
        .arg("--allow-different-device")
        .assert()
        .code(0);
    // Even with --allow-different-device: the processes a case ran in set the spread the gate
    // judges by.
    let three = edited(&base, &dir.path().join("three.json"), |doc| {
        doc["manifest"]["measure"]["processes"] = Value::from(3);
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&three)
        .arg("--allow-different-device")
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "different numbers of worker processes (1 in the baseline, 3 in the new run",
        ));
    let renamed = edited(&base, &dir.path().join("renamed.json"), |doc| {
        doc["study"]["name"] = Value::from("x")
    });
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(&renamed)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("different studies"));
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(dir.path().join("missing.json"))
        .assert()
        .code(2);
    std::fs::write(dir.path().join("junk.json"), "{}").unwrap();
    kbench()
        .arg("compare")
        .arg(&base)
        .arg(dir.path().join("junk.json"))
        .assert()
        .code(2)
        .stderr(predicates::str::contains("not a kbench results file"));
}

#[test]
fn report_rerenders_markdown_csv_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = run_once(dir.path());
    kbench()
        .arg("report")
        .arg(&base)
        .args(["--format", "markdown"])
        .assert()
        .success()
        .stdout(predicates::str::contains("| tree "));
    let csv = kbench()
        .arg("report")
        .arg(&base)
        .args(["--format", "csv"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&csv.get_output().stdout).to_string();
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let headers = reader.headers().unwrap().clone();
    let median_col = headers.iter().position(|h| h == "median_s").unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 8);
    assert!(rows
        .iter()
        .all(|r| r[median_col].parse::<f64>().unwrap() > 0.0));

    let plots = dir.path().join("plots");
    kbench()
        .arg("report")
        .arg(&base)
        .arg("--plots")
        .arg(&plots)
        .assert()
        .success();
    for name in [
        "time-dtype_i32.png",
        "time-dtype_f64.svg",
        "speedup-dtype_f64.png",
    ] {
        let bytes = std::fs::read(plots.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(bytes.len() > 2000, "{name} is nearly empty");
    }
    let png = std::fs::read(plots.join("time-dtype_i32.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}

/// The results file with its cases of `variant` recorded as `status` (without samples), as a run
/// records what it could not measure (no GPU) or what failed.
fn with_status(from: &Path, to: &Path, variant: &str, status: &str) -> PathBuf {
    edited(from, to, |doc| {
        for case in doc["cases"].as_array_mut().unwrap() {
            if case["variant"] == variant {
                case["status"] = Value::from(status);
                case["reason"] = Value::from("no CUDA driver (a test's edit)");
                case["summary"] = Value::Null;
                case["measurement"] = Value::Null;
            }
        }
    })
}

#[test]
fn compare_fits_80_columns_and_groups_what_it_did_not_compare_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_, base) = run_once(dir.path());
    let skipped = with_status(&base, &dir.path().join("skipped.json"), "tree", "skipped");
    let timed_out = with_status(&skipped, &dir.path().join("t.json"), "seq", "timed_out");
    for baselines in [1, 5] {
        let assert = kbench()
            .arg("compare")
            .args(std::iter::repeat_n(&skipped, baselines))
            .arg(&timed_out)
            .env_remove("COLUMNS")
            .assert();
        let stdout = String::from_utf8_lossy(&assert.get_output().stdout).to_string();
        assert!(
            stdout.lines().all(|l| l.chars().count() <= 80),
            "{baselines} baseline(s):\n{stdout}"
        );
        let not_compared: Vec<&str> = stdout
            .lines()
            .filter(|l| l.contains("not compared:"))
            .collect();
        assert_eq!(not_compared.len(), 1, "{stdout}");
        assert!(
            not_compared[0] == "not compared: 4 skipped in the baseline and the new run",
            "{stdout}"
        );
        // `seq` timed out in the new run: a new failure, listed below the table with its reason.
        assert!(stdout.contains("4 new failures"), "{stdout}");
        assert!(
            stdout.contains("new failure: seq dtype=i32 n=1000: no CUDA driver"),
            "{stdout}"
        );
        for rust_name in ["Skipped", "TimedOut", "Passed", "NotCompared"] {
            assert!(!stdout.contains(rust_name), "{rust_name}: {stdout}");
        }
        assert_eq!(assert.get_output().status.code(), Some(1));
    }
    // Both sides not passed, in different ways: one group per reason, counted.
    let assert = kbench()
        .arg("compare")
        .arg(&timed_out)
        .arg(&skipped)
        .assert()
        .code(0);
    // Lines wider than 80 columns continue on the next, 4 spaces in.
    let stdout = String::from_utf8_lossy(&assert.get_output().stdout).replace("\n    ", " ");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("not compared: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let mut groups: Vec<&str> = line["not compared: ".len()..].split("; ").collect();
    groups.sort();
    assert_eq!(
        groups,
        [
            "4 skipped in the baseline and the new run",
            "4 timed out in the baseline"
        ],
        "{stdout}"
    );
    assert!(stdout.contains("no case was compared"), "{stdout}");
}

// ---- Output that reads well: 80 columns, row order, folded skips, markdown, colour ----

/// A 5-axis study (durbin on the CPU, and a CUDA variant the mock device skips at every point,
/// as a machine without a GPU does), with a published figure in ms and a claim.
const WIDE_STUDY: &str = r#"[study]
name = "wide"
algorithm = "durbin"
seed = 1

[grid]
n = [100, 200]
dtype = "f64"
form = ["pb32", "pb42"]
init = ["random", "geometric"]
block = [256, 1024]

[[variant]]
name = "sequential"
backend = "cpu"
impl = "sequential"

[[variant]]
name = "reworked"
backend = "cpu"
impl = "reworked"

[[variant]]
name = "atomic"
backend = "cuda"
kernel = "durbin_atomic"

[measure]
warmup = 1
min_samples = 6
max_samples = 6

[[table]]
title = "Median time by size"
rows = "variant"
columns = "n"
value = "median"
select = { form = "pb32", init = "random", block = 256 }

[[table.reference]]
label = "paper: Sequential"
source = "a paper's table, as published"
unit = "ms"
values = { 100 = 4.2383 }

[[claim]]
text = "the reworked form is faster"
source = "the paper"
kind = "faster"
a = "reworked"
b = "sequential"
"#;

/// Every CUDA case skipped, as on a machine without a GPU (16 cases: folded on a terminal).
const NO_GPU_MOCK: &str = r#"[device]
name = "none (test)"

[[event]]
variant = "atomic"
skip = "no CUDA driver: libcuda.so could not be loaded (no NVIDIA GPU or driver on this machine)"
"#;

/// Runs `WIDE_STUDY` in `dir` on the mock; returns the results file and what `run` printed.
fn run_wide(dir: &Path) -> (PathBuf, String) {
    std::fs::write(dir.join("wide.toml"), WIDE_STUDY).unwrap();
    std::fs::write(dir.join("mock.toml"), NO_GPU_MOCK).unwrap();
    let out = dir.join("out");
    let run = kbench()
        .arg("run")
        .arg(dir.join("wide.toml"))
        .arg("--out-dir")
        .arg(&out)
        .env("KBENCH_MOCK_GPU", dir.join("mock.toml"))
        .env("COLUMNS", "80")
        .assert()
        .success();
    let printed = String::from_utf8_lossy(&run.get_output().stdout).to_string();
    let results = std::fs::read_dir(out.join("wide"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    (results, printed)
}

/// `kbench ARGS` at 80 columns with colour off; its stdout.
fn output(args: &[&std::ffi::OsStr]) -> String {
    let out = kbench()
        .args(args)
        .env("COLUMNS", "80")
        .env_remove("KBENCH_MOCK_GPU")
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some_and(|c| c <= 1),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Each line at most 80 columns wide, as a terminal counts them (`µ` is one column, `─` one).
fn assert_fits_80(what: &str, text: &str) {
    for line in text.lines() {
        let columns = unicode_width::UnicodeWidthStr::width(line);
        assert!(
            columns <= 80,
            "{what}: {columns} columns:\n{line}\n\n{text}"
        );
    }
}

#[test]
fn run_report_compare_and_list_fit_80_columns_and_fold_the_skipped_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (results, printed) = run_wide(dir.path());
    let r = results.as_os_str();
    assert_fits_80("run", &printed);
    let report = output(&["report".as_ref(), r]);
    assert_fits_80("report", &report);
    assert_fits_80("compare", &output(&["compare".as_ref(), r, r]));
    assert_fits_80("list", &output(&["list".as_ref()]));

    // The 16 skipped CUDA rows are one line under the table, said whole at word boundaries.
    // The rows of the first table, the cases' (the declared table's come after it).
    let table_rows = |text: &str, variant: &str| {
        text.lines()
            .take_while(|l| !l.starts_with('╰'))
            .filter(|l| l.starts_with("│ ") && l.contains(&format!(" {variant} ")))
            .count()
    };
    assert_eq!(table_rows(&report, "atomic"), 0, "{report}");
    assert_eq!(table_rows(&report, "sequential"), 8, "{report}");
    let unwrapped = report.replace("\n    ", " ");
    assert!(
        unwrapped.contains("skipped: no CUDA driver: libcuda.so could not be loaded (no NVIDIA GPU or driver on this machine) (16 cases, not listed in the table: --wide lists them)"),
        "{report}"
    );
    // --wide lists every row, in the grid's order: n (the first axis) never goes back down,
    // a CPU row at n = 200 never before a CUDA row at n = 100.
    let wide = output(&["report".as_ref(), r, "--wide".as_ref()]);
    assert_eq!(table_rows(&wide, "atomic"), 16, "{wide}");
    let cells = |l: &str| -> Vec<String> { l.split('│').map(|c| c.trim().to_string()).collect() };
    let header = wide
        .lines()
        .find(|l| l.starts_with("│ variant"))
        .map(cells)
        .unwrap();
    let n_at = header.iter().position(|h| h == "n").unwrap();
    let sizes: Vec<i64> = wide
        .lines()
        .take_while(|l| !l.starts_with('╰'))
        .filter(|l| l.starts_with("│ ") && !l.starts_with("│ variant"))
        .map(|l| cells(l)[n_at].parse().unwrap())
        .collect();
    assert_eq!(sizes.len(), 32, "{wide}");
    assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}\n{wide}");
}

#[test]
fn published_figures_are_printed_as_published_and_kept_exact_in_csv() {
    let dir = tempfile::tempdir().unwrap();
    let (results, _) = run_wide(dir.path());
    let r = results.as_os_str();
    for format in ["table", "markdown"] {
        let text = output(&["report".as_ref(), r, "--format".as_ref(), format.as_ref()]);
        assert!(text.contains("4.2383 ms"), "{format}:\n{text}");
    }
    let csv = output(&[
        "report".as_ref(),
        r,
        "--tables".as_ref(),
        "--format".as_ref(),
        "csv".as_ref(),
    ]);
    assert!(csv.contains(",4.2383e-3"), "{csv}");
    assert!(!csv.contains("4.2382999"), "{csv}");
}

/// The markdown export read by a real CommonMark parser with GitHub's tables: each table has
/// exactly its rows, and the notes under a table are paragraphs, not more rows.
#[test]
fn the_markdown_export_parses_into_the_tables_and_paragraphs_it_means() {
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

    let dir = tempfile::tempdir().unwrap();
    let (results, _) = run_wide(dir.path());
    let markdown = output(&[
        "report".as_ref(),
        results.as_os_str(),
        "--format".as_ref(),
        "markdown".as_ref(),
    ]);
    let mut tables: Vec<Vec<String>> = Vec::new();
    let mut paragraphs: Vec<String> = Vec::new();
    let mut text = String::new();
    for event in Parser::new_ext(&markdown, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Table(_)) => tables.push(Vec::new()),
            Event::Start(Tag::TableRow | Tag::TableHead | Tag::Paragraph) => text.clear(),
            Event::End(TagEnd::TableRow | TagEnd::TableHead) => {
                tables.last_mut().unwrap().push(std::mem::take(&mut text))
            }
            Event::End(TagEnd::Paragraph) => paragraphs.push(std::mem::take(&mut text)),
            Event::Text(t) | Event::Code(t) => {
                text.push_str(&t);
                text.push('|');
            }
            Event::SoftBreak => text.push(' '),
            _ => {}
        }
    }
    // Every case (32, the skipped ones too: files list them all), the declared table (the
    // published row and the three variants), the claim: each with its header.
    let rows: Vec<usize> = tables.iter().map(Vec::len).collect();
    assert_eq!(rows, [33, 5, 2], "{markdown}");
    for table in &tables {
        assert!(
            table
                .iter()
                .all(|row| !row.contains("skipped: ") && !row.contains("a paper's table")),
            "a note became a row:\n{markdown}"
        );
    }
    for note in [
        "skipped: no CUDA driver",
        "paper: Sequential: a paper's table, as published (in ms)",
        "32 cases: 16 passed, 0 failed, 16 skipped",
    ] {
        assert!(
            paragraphs.iter().any(|p| p.contains(note)),
            "`{note}` is not a paragraph of its own: {paragraphs:#?}\n{markdown}"
        );
    }
}

#[test]
fn verdicts_are_coloured_only_when_asked_or_on_a_terminal_and_widths_stay() {
    let dir = tempfile::tempdir().unwrap();
    let (results, _) = run_wide(dir.path());
    let r = results.as_os_str();
    let report = |color: Option<&str>, no_color: bool| {
        let mut cmd = kbench();
        cmd.arg("report").arg(r).env("COLUMNS", "80");
        cmd.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
        if let Some(c) = color {
            cmd.args(["--color", c]);
        }
        if no_color {
            cmd.env("NO_COLOR", "1");
        }
        String::from_utf8(cmd.output().unwrap().stdout).unwrap()
    };
    let always = report(Some("always"), false);
    let escapes =
        |word: &str| always.contains(&format!("m{word}\x1b[0m")) && always.contains("\x1b[1m");
    assert!(escapes("skipped"), "{always:?}");
    assert!(
        escapes("HOLDS") || escapes("REFUTED") || escapes("INCONCLUSIVE"),
        "{always:?}"
    );
    // Even with NO_COLOR, --color always is obeyed; without it, NO_COLOR and a pipe are plain.
    assert_eq!(report(Some("always"), true), always);
    let plain = report(Some("never"), false);
    assert!(!plain.contains('\x1b'), "{plain:?}");
    assert_eq!(report(None, false), plain, "a pipe gets no colour");
    assert_eq!(report(Some("auto"), true), plain);
    // The same text and columns once the escapes are taken out.
    assert_eq!(anstream::adapter::strip_str(&always).to_string(), plain);
    // Never in a machine or file format.
    for format in ["markdown", "csv", "json", "html"] {
        let mut cmd = kbench();
        let out = cmd
            .arg("report")
            .arg(r)
            .args(["--color", "always", "--format", format])
            .output()
            .unwrap();
        assert!(!out.stdout.contains(&0x1b), "{format}");
    }
    // compare's verdicts too.
    let compared = kbench()
        .args([
            "compare".as_ref(),
            r,
            r,
            "--color".as_ref(),
            "always".as_ref(),
        ])
        .output()
        .unwrap();
    let compared = String::from_utf8(compared.stdout).unwrap();
    assert!(compared.contains("SAME") || compared.contains("INCONCLUSIVE"));
    assert!(compared.contains("\x1b["), "{compared:?}");
}

/// symgs's sizes are matrices' names: no integer axis to plot against, so a bar per case.
#[test]
fn plots_are_drawn_for_a_study_without_an_integer_axis() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("symgs.toml");
    std::fs::write(
        &manifest,
        "[study]\nname = \"bars\"\nalgorithm = \"symgs\"\nseed = 3\n\
         [grid]\nmatrix = [\"laplace2d:30\", \"random:500x5\"]\ndtype = \"f64\"\n\
         [[variant]]\nname = \"sequential\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 1\nmin_samples = 6\nmax_samples = 6\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .success();
    let results = std::fs::read_dir(out.join("bars"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let plots = dir.path().join("plots");
    kbench()
        .arg("report")
        .arg(&results)
        .arg("--plots")
        .arg(&plots)
        .assert()
        .success();
    let svg = std::fs::read_to_string(plots.join("time-cases.svg")).unwrap();
    for label in ["sequential", "laplace2d:30", "random:500x5"] {
        assert!(svg.contains(label), "the chart lacks {label}");
    }
    assert!(svg.matches("<rect").count() >= 3, "no bars: {svg}");
    let png = std::fs::read(plots.join("time-cases.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}
