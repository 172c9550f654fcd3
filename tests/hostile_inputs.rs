//! Issue 33, readers and weak messages: every path kbench reads (manifests, Matrix Market
//! files, the mock device file, results files given to report, compare, merge and --resume)
//! refuses a FIFO, a device, a folder or a link to one at once, naming what it is; a matrix
//! replaced by a FIFO after `check` is refused at once; Matrix Market files and generators get
//! messages that say what is wrong; results files whose figures, indices or names no run
//! writes are refused naming them; an embedded manifest's error says where its text is.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::kbench;
use kbench::algos::csr::{check_file, MatrixSource};
use serde_json::Value;

/// A hang fails the test here rather than stalling it.
const QUICK: Duration = Duration::from_secs(20);

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

/// A FIFO, /dev/zero, a symlink to /dev/zero and a folder, each named `name` with its own
/// suffix in `dir`, and the words the refusal must hold.
fn hostile_paths(dir: &Path, name: &str) -> Vec<(PathBuf, &'static str)> {
    let fifo = dir.join(format!("fifo-{name}"));
    mkfifo(&fifo);
    let link = dir.join(format!("zero-{name}"));
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let folder = dir.join(format!("folder-{name}"));
    std::fs::create_dir(&folder).unwrap();
    vec![
        (fifo, "is a FIFO (named pipe), not a regular file"),
        (
            PathBuf::from("/dev/zero"),
            "is a character device, not a regular file",
        ),
        (link, "is a character device, not a regular file"),
        (folder, "is a folder, not a regular file"),
    ]
}

/// Runs `cmd` and returns its stderr, asserting exit 2 within QUICK.
fn refused_quickly(mut cmd: assert_cmd::Command, what: &str) -> String {
    let started = Instant::now();
    let output = cmd.timeout(QUICK).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(
        output.status.code(),
        Some(2),
        "{what}: expected exit 2 within {QUICK:?}, took {:?}; stderr:\n{stderr}",
        started.elapsed()
    );
    stderr
}

#[test]
fn check_refuses_a_manifest_that_is_a_fifo_device_or_folder_at_once() {
    let dir = tempfile::tempdir().unwrap();
    for (path, words) in hostile_paths(dir.path(), "study.toml") {
        let mut cmd = kbench();
        cmd.arg("check").arg(&path);
        let stderr = refused_quickly(cmd, &path.display().to_string());
        assert!(stderr.contains(words), "{}: {stderr}", path.display());
    }
}

fn symgs_manifest(matrix: &Path) -> String {
    format!(
        "[study]\nname = \"s\"\nalgorithm = \"symgs\"\nseed = 1\n[grid]\nmatrix = [\"{}\"]\n\
         [[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 0\nmin_samples = 1\nmax_samples = 1\nmax_time_s = 0.01\n",
        matrix.display()
    )
}

#[test]
fn a_matrix_that_is_a_fifo_device_or_folder_is_named_for_what_it_is_not_no_file() {
    let dir = tempfile::tempdir().unwrap();
    for (matrix, words) in hostile_paths(dir.path(), "m.mtx") {
        let manifest = dir.path().join("study.toml");
        std::fs::write(&manifest, symgs_manifest(&matrix)).unwrap();
        let mut cmd = kbench();
        cmd.arg("check").arg(&manifest);
        let stderr = refused_quickly(cmd, &matrix.display().to_string());
        let kind = words.split(", not").next().unwrap();
        assert!(
            stderr.contains(kind) && !stderr.contains("no file"),
            "{}: {stderr}",
            matrix.display()
        );
        // The reader itself, as a case's worker calls it.
        let e = check_file(&matrix).unwrap_err();
        assert!(e.contains(words), "{e}");
    }
}

const GENERAL: &str = "%%MatrixMarket matrix coordinate real general\n";
const TWO_BY_TWO: &str = "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 4.0\n2 2 4.0\n";

#[test]
fn a_matrix_replaced_by_a_fifo_after_check_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let matrix = dir.path().join("m.mtx");
    std::fs::write(&matrix, TWO_BY_TWO).unwrap();
    // Checked and planned while a file...
    let manifest = kbench::manifest::parse(Path::new("s.toml"), &symgs_manifest(&matrix)).unwrap();
    assert_eq!(manifest.study.name, "s");
    // ...then a FIFO, with no writer: reading it as a file would wait forever.
    std::fs::remove_file(&matrix).unwrap();
    mkfifo(&matrix);
    let (tx, rx) = std::sync::mpsc::channel();
    let source = MatrixSource::File(matrix.clone());
    std::thread::spawn(move || {
        let _ = tx.send((source.load(0).map(|_| ()), source.shape().map(|_| ())));
    });
    let (loaded, shape) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("loading a FIFO as a matrix blocked");
    for e in [loaded.unwrap_err(), shape.unwrap_err()] {
        assert_eq!(
            e,
            format!(
                "{}: it is a FIFO (named pipe), not a regular file",
                matrix.display()
            )
        );
    }
}

/// `text` as a Matrix Market file's error from `check_file`, with the file's path as `F`.
fn mtx_error(text: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.mtx");
    std::fs::write(&path, text).unwrap();
    let e = check_file(&path).unwrap_err();
    e.replace(&path.display().to_string(), "F")
}

#[test]
fn matrix_market_files_that_stop_early_start_with_a_bom_or_hold_nothing_say_so() {
    // The banner alone, with or without its newline: the size line is what is missing.
    for text in [GENERAL.to_string(), GENERAL.trim_end().to_string()] {
        assert_eq!(
            mtx_error(text.as_bytes()),
            "F:1: the file ends after the banner; expected the size line `rows columns \
             entries` next"
        );
    }
    let comments = format!("{GENERAL}% a comment\n%\n");
    assert_eq!(
        mtx_error(comments.as_bytes()),
        "F:3: the file ends after the banner and comments; expected the size line `rows \
         columns entries` next"
    );
    // A size of 0: refused, as generators refuse size 0.
    for size in ["0 0 0", "0 0 5", "3 0 0"] {
        let e = mtx_error(format!("{GENERAL}{size}\n").as_bytes());
        assert!(
            e.starts_with(&format!(
                "F:2: the size line `{size}` declares a matrix with no rows"
            )),
            "{e}"
        );
    }
    // A BOM before the banner: named, not "expected X, found X".
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(TWO_BY_TWO.as_bytes());
    let e = mtx_error(&bom);
    assert!(
        e.starts_with("F:1: the line starts with a byte order mark (U+FEFF"),
        "{e}"
    );
    assert!(!e.contains("found"), "{e}");
}

#[test]
fn generators_past_the_32_bit_limit_are_refused_by_check() {
    for (generator, rows) in [
        ("hpcg:2000", "8000000000 rows"),
        ("laplace2d:50000", "2500000000 rows"),
        ("random:3000000000x3", "3000000000 rows"),
        ("hpcg:1300x1300x1301", "2198690000 rows"),
    ] {
        let text = symgs_manifest(Path::new(generator));
        let e = kbench::manifest::parse(Path::new("s.toml"), &text).unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (6, Some("grid.matrix")), "{e}");
        assert!(
            e.message.contains(generator)
                && e.message.contains(rows)
                && e.message.contains("below 2^31"),
            "{generator}: {e}"
        );
    }
    // Just under the limit in rows and entries: accepted without building it.
    let text = symgs_manifest(Path::new("hpcg:400x400x100"));
    kbench::manifest::parse(Path::new("s.toml"), &text).unwrap();
}

#[test]
fn a_mock_device_file_that_is_a_fifo_or_device_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("study.toml");
    std::fs::write(&manifest, tiny_study("m")).unwrap();
    for (mock, words) in hostile_paths(dir.path(), "mock.toml") {
        let mut cmd = kbench();
        cmd.env("KBENCH_MOCK_GPU", &mock)
            .arg("run")
            .arg(&manifest)
            .arg("--out-dir")
            .arg(dir.path().join("out"));
        let stderr = refused_quickly(cmd, &mock.display().to_string());
        assert!(
            stderr.contains("cannot read the mock device file") && stderr.contains(words),
            "{}: {stderr}",
            mock.display()
        );
    }
}

fn tiny_study(name: &str) -> String {
    format!(
        "[study]\nname = \"{name}\"\nalgorithm = \"reduce\"\nseed = 3\n\
         [grid]\nn = [10, 20, 30]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 0\nmin_samples = 1\nmax_samples = 1\nmax_time_s = 0.01\n"
    )
}

/// A finished run of `tiny_study` in `dir`: its results file.
fn run_tiny(dir: &Path) -> PathBuf {
    let manifest = dir.join("tiny.toml");
    std::fs::write(&manifest, tiny_study("tiny")).unwrap();
    let status = Command::new(common::kbench_exe())
        .env_remove("KBENCH_MOCK_GPU")
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(dir.join("out"))
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    std::fs::read_dir(dir.join("out/tiny"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
}

#[test]
fn report_compare_merge_and_resume_refuse_a_fifo_device_or_folder_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let good = run_tiny(dir.path());
    for (path, words) in hostile_paths(dir.path(), "r.json") {
        let commands: Vec<(&str, Vec<PathBuf>)> = vec![
            ("report", vec![path.clone()]),
            ("compare", vec![good.clone(), path.clone()]),
            ("compare", vec![path.clone(), good.clone()]),
            (
                "merge",
                vec![
                    path.clone(),
                    good.clone(),
                    "-o".into(),
                    dir.path().join("all.json"),
                ],
            ),
            ("run", vec!["--resume".into(), path.clone()]),
        ];
        for (command, args) in commands {
            let mut cmd = kbench();
            cmd.arg(command).args(&args);
            let what = format!("{command} {args:?}");
            let stderr = refused_quickly(cmd, &what);
            assert!(stderr.contains(words), "{what}: {stderr}");
        }
    }
}

/// `good` with `edit` applied, written beside it as `name`.
fn edited(good: &Path, name: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(good).unwrap()).unwrap();
    edit(&mut doc);
    let path = good.with_file_name(name);
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    path
}

/// An edit of a results file's JSON.
type Edit = Box<dyn FnOnce(&mut Value)>;

#[test]
fn results_files_with_figures_indices_or_names_no_run_writes_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let good = run_tiny(dir.path());
    kbench().arg("report").arg(&good).assert().success();
    let median = |value: f64| {
        move |doc: &mut Value| doc["cases"][1]["summary"]["median_s"] = Value::from(value)
    };
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "negative",
            Box::new(median(-1.0)),
            "median_s = -1e0 (negative)",
        ),
        ("zero", Box::new(median(0.0)), "median_s = 0e0 (zero)"),
        (
            "subnormal",
            Box::new(median(1e-310)),
            "median_s = 1e-310 (subnormal",
        ),
        (
            "huge",
            Box::new(median(1e308)),
            "median_s = 1e308 (more than a year)",
        ),
        (
            "negative sample",
            Box::new(|doc: &mut Value| {
                doc["cases"][0]["measurement"]["samples_s"][0] = Value::from(-2.5)
            }),
            "a sample = -2.5e0 (negative)",
        ),
        (
            "duplicate index",
            Box::new(|doc: &mut Value| doc["cases"][2]["index"] = doc["cases"][0]["index"].clone()),
            "case index 0 is in the file twice",
        ),
        (
            "huge index",
            Box::new(|doc: &mut Value| doc["cases"][2]["index"] = Value::from(1u64 << 60)),
            "has index 1152921504606846976, beyond any plan",
        ),
        (
            "ESC in a variant",
            Box::new(|doc: &mut Value| doc["cases"][1]["variant"] = Value::from("seq\u{1b}[2J")),
            "cases[1].variant holds the control character \\u{1b}",
        ),
        (
            "BEL in the study's title",
            Box::new(|doc: &mut Value| doc["study"]["title"] = Value::from("t\u{7}")),
            "study.title holds the control character \\u{7}",
        ),
    ];
    for (what, edit, words) in cases {
        let bad = edited(&good, &format!("{}.json", what.replace(' ', "-")), edit);
        for command in ["report", "compare"] {
            let mut cmd = kbench();
            cmd.arg(command);
            if command == "compare" {
                cmd.arg(&good);
            }
            cmd.arg(&bad);
            let stderr = refused_quickly(cmd, what);
            assert!(
                stderr.contains(&bad.display().to_string()) && stderr.contains(words),
                "{what} ({command}): {stderr}"
            );
        }
    }
}

#[test]
fn a_reason_with_control_characters_is_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let good = run_tiny(dir.path());
    let bad = edited(&good, "reason.json", |doc| {
        doc["cases"][0]["status"] = Value::from("error");
        doc["cases"][0]["reason"] = Value::from("boom \u{1b}[31mred");
    });
    let doc = kbench::results::load_results(&bad).unwrap();
    assert_eq!(doc.cases[0].reason.as_deref(), Some("boom \\u{1b}[31mred"));
}

#[test]
fn an_embedded_manifest_that_no_longer_parses_is_named_as_embedded_once() {
    let dir = tempfile::tempdir().unwrap();
    let good = run_tiny(dir.path());
    let bad = edited(&good, "embedded.json", |doc| {
        let toml = doc["manifest"]["toml"]
            .as_str()
            .unwrap()
            .replace("seed = 3", "seed = \"x\"");
        doc["manifest"]["toml"] = Value::from(toml);
    });
    let mut cmd = kbench();
    cmd.arg("report").arg(&bad);
    let stderr = refused_quickly(cmd, "report");
    assert!(!stderr.contains("error: error:"), "{stderr}");
    let embedded = format!(
        "the manifest embedded in results file {} no longer parses",
        bad.display()
    );
    assert!(
        stderr.starts_with(&format!("error: {embedded}")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "(the manifest embedded in {}, recorded from",
            bad.display()
        )) && stderr.contains("tiny.toml):4:"),
        "{stderr}"
    );
}
