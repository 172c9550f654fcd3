//! Results of a study with a file axis (`matrix = "datasets/*.mtx"`) read the same from any
//! folder: the run records the files its globs named (with their digests), and `report`,
//! `merge` and `run --resume` take that record, never the glob again. Also: a results file whose
//! recorded manifest names another study is refused, and plots of a study whose parameter
//! values hold `/` get file names without it. A custom study's results likewise: the run
//! records its sources (text and digest) and its manifest's folder, `report` and `merge` read
//! them from any folder once the `.cu` moved, and `run --resume` compiles only sources on disk
//! that match the record.

use crate::common;
use common::{read, results_file_in};

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

const STUDY: &str = "[study]\nname = \"sym\"\nalgorithm = \"symgs\"\nseed = 2\n[grid]\n\
    matrix = [\"datasets/*.mtx\", \"laplace2d:6\"]\ndtype = \"f64\"\n\
    [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
    [measure]\nwarmup = 0\nmin_samples = 2\nmax_samples = 2\n";

/// `kbench` run in `dir`, with a limit: a reader that walks the filesystem fails, not hangs.
fn kbench_in(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .env("COLUMNS", "200")
        .timeout(Duration::from_secs(60));
    cmd
}

/// A study folder with two Matrix Market files under `datasets/` and the manifest, and an empty
/// folder elsewhere.
fn folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (home, elsewhere) = (root.join("study"), root.join("elsewhere"));
    std::fs::create_dir_all(home.join("datasets")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in ["hpcg_4x4x4.mtx", "laplace2d_8x8.mtx"] {
        std::fs::copy(
            repo.join("datasets").join(file),
            home.join("datasets").join(file),
        )
        .unwrap();
    }
    std::fs::write(home.join("sym.toml"), STUDY).unwrap();
    (dir, home, elsewhere)
}

/// `kbench run sym.toml` in `home` (with `extra` arguments) into `home/<out>`; its results file.
fn run_in(home: &Path, out: &str, extra: &[&str]) -> PathBuf {
    kbench_in(home)
        .args(["run", "sym.toml", "--out-dir", out])
        .args(extra)
        .assert()
        .success();
    results_file_in(&home.join(out).join("sym"))
}

fn write(path: &Path, doc: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(doc).unwrap()).unwrap();
}

fn stderr(a: &assert_cmd::assert::Assert) -> String {
    String::from_utf8_lossy(&a.get_output().stderr).into_owned()
}

#[test]
fn the_run_records_each_file_its_glob_named_with_a_digest() {
    let (_dir, home, _) = folders();
    let doc = read(&run_in(&home, "out", &[]));
    let files = &doc["manifest"]["files"];
    assert_eq!(files.as_array().unwrap().len(), 1, "{files}");
    assert_eq!(files[0]["axis"], "matrix");
    assert_eq!(files[0]["pattern"], "datasets/*.mtx");
    let recorded: Vec<(String, String)> = (files[0]["files"].as_array().unwrap().iter())
        .map(|f| {
            assert_eq!(f["fnv1a64"].as_str().unwrap().len(), 16, "{f}");
            (
                f["path"].as_str().unwrap().into(),
                f["absolute"].as_str().unwrap().into(),
            )
        })
        .collect();
    let absolute = |f: &str| home.join(f).display().to_string();
    assert_eq!(
        recorded,
        [
            (
                "datasets/hpcg_4x4x4.mtx".to_string(),
                absolute("datasets/hpcg_4x4x4.mtx")
            ),
            (
                "datasets/laplace2d_8x8.mtx".to_string(),
                absolute("datasets/laplace2d_8x8.mtx")
            ),
        ]
    );
}

#[test]
fn report_merge_and_resume_work_from_another_folder() {
    let (_dir, home, elsewhere) = folders();
    let whole = run_in(&home, "out", &[]);
    let shard1 = run_in(&home, "out1", &["--shard", "1/2"]);
    let shard2 = run_in(&home, "out2", &["--shard", "2/2"]);

    let shown = kbench_in(&elsewhere)
        .arg("report")
        .arg(&whole)
        .assert()
        .success();
    let table = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
    assert!(table.contains("datasets/laplace2d_8x8.mtx"), "{table}");

    kbench_in(&elsewhere)
        .arg("merge")
        .args([&shard1, &shard2])
        .args(["-o", "merged.json"])
        .assert()
        .success();
    assert_eq!(read(&elsewhere.join("merged.json"))["complete"], true);
    kbench_in(&elsewhere)
        .args(["run", "--resume", "merged.json"])
        .assert()
        .success();

    // Two cases left to run, from elsewhere: they read the recorded files where they are.
    let mut doc = read(&whole);
    doc["cases"].as_array_mut().unwrap().truncate(1);
    doc["complete"] = false.into();
    doc["finished_at"] = Value::Null;
    let part = elsewhere.join("part.json");
    write(&part, &doc);
    kbench_in(&elsewhere)
        .args(["run", "--resume", "part.json"])
        .assert()
        .success();
    let done = read(&part);
    let statuses: Vec<(&str, &str)> = (done["cases"].as_array().unwrap().iter())
        .map(|c| {
            (
                c["params"]["matrix"].as_str().unwrap(),
                c["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [
            ("datasets/hpcg_4x4x4.mtx", "passed"),
            ("datasets/laplace2d_8x8.mtx", "passed"),
            ("laplace2d:6", "passed"),
        ]
    );
}

#[test]
fn a_resume_refuses_a_recorded_file_that_changed() {
    let (_dir, home, elsewhere) = folders();
    let mut doc = read(&run_in(&home, "out", &[]));
    doc["cases"].as_array_mut().unwrap().truncate(1);
    doc["complete"] = false.into();
    let part = elsewhere.join("part.json");
    write(&part, &doc);
    let mtx = home.join("datasets/laplace2d_8x8.mtx");
    let text = std::fs::read_to_string(&mtx).unwrap();
    std::fs::write(&mtx, format!("{text}\n")).unwrap();
    let refused = kbench_in(&elsewhere)
        .args(["run", "--resume", "part.json"])
        .assert()
        .code(2);
    let e = stderr(&refused);
    assert!(
        e.contains("laplace2d_8x8.mtx changed since the run started"),
        "{e}"
    );
    assert_eq!(read(&part)["cases"].as_array().unwrap().len(), 1);
}

/// A file written before kbench recorded its files takes them from its cases (the glob matched
/// as text); a hostile one whose manifest globs the whole filesystem walks nothing.
#[test]
fn older_and_hostile_files_never_expand_a_glob() {
    let (_dir, home, elsewhere) = folders();
    let mut doc = read(&run_in(&home, "out", &[]));
    doc["manifest"].as_object_mut().unwrap().remove("files");
    let older = elsewhere.join("older.json");
    write(&older, &doc);
    kbench_in(&elsewhere)
        .arg("report")
        .arg(&older)
        .assert()
        .success();

    let toml = doc["manifest"]["toml"]
        .as_str()
        .unwrap()
        .replace("datasets/*.mtx", "/**/*.mtx");
    doc["manifest"]["toml"] = toml.into();
    let hostile = elsewhere.join("hostile.json");
    write(&hostile, &doc);
    for command in [&["report"][..], &["run", "--resume"][..]] {
        let refused = kbench_in(&elsewhere)
            .args(command)
            .arg(&hostile)
            .assert()
            .code(2);
        let e = stderr(&refused);
        assert!(e.contains("records no file `/**/*.mtx` named"), "{e}");
    }
}

/// A results file whose recorded manifest was renamed to another study: refused by resume,
/// report and merge, naming both studies.
#[test]
fn a_results_file_renamed_to_another_study_is_refused() {
    let (_dir, home, elsewhere) = folders();
    let shard = run_in(&home, "out1", &["--shard", "1/2"]);
    let mut doc = read(&shard);
    let toml = doc["manifest"]["toml"]
        .as_str()
        .unwrap()
        .replace("name = \"sym\"", "name = \"other\"");
    doc["manifest"]["toml"] = toml.into();
    let renamed = elsewhere.join("renamed.json");
    write(&renamed, &doc);
    for command in [
        &["run", "--resume"][..],
        &["report"][..],
        &["merge", "-o", "m.json"][..],
    ] {
        let refused = kbench_in(&elsewhere)
            .args(command)
            .arg(&renamed)
            .assert()
            .code(2);
        let e = stderr(&refused);
        assert!(
            e.contains("holds study `sym`") && e.contains("is study `other`"),
            "{command:?}: {e}"
        );
    }
    assert_eq!(read(&renamed)["cases"], doc["cases"]);
}

/// `report --plots` of a study whose facets hold a matrix path: files named without its `/`.
#[test]
fn plots_of_a_matrix_path_with_a_slash_are_written() {
    let (_dir, home, elsewhere) = folders();
    let study = STUDY
        .replace("dtype = \"f64\"", "dtype = \"f64\"\nblock = [128, 256]")
        .replace(
            "name = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"",
            "name = \"lock\"\nbackend = \"cuda\"\nkernel = \"symgs_lock\"",
        );
    std::fs::write(home.join("sym.toml"), study).unwrap();
    std::fs::write(home.join("mock.toml"), "[device]\nname = \"H100 (test)\"\n").unwrap();
    kbench_in(&home)
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "sym.toml", "--out-dir", "out"])
        .assert()
        .success();
    let results = results_file_in(&home.join("out/sym"));
    kbench_in(&elsewhere)
        .arg("report")
        .arg(&results)
        .args(["--plots", "plots"])
        .assert()
        .success();
    let mut names: Vec<String> = std::fs::read_dir(elsewhere.join("plots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg") && n.starts_with("time"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "time-matrix_datasets_hpcg_4x4x4.mtx.svg",
            "time-matrix_datasets_laplace2d_8x8.mtx.svg",
            "time-matrix_laplace2d_6.svg",
        ]
    );
}

/// examples/reduction (a custom study: `reduction.toml` compiles `reduce.cu`) copied under a
/// fresh folder, run there on the mock device with one case per kernel left out: its results.
fn custom_results(root: &Path) -> (PathBuf, PathBuf) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let study = root.join("study");
    std::fs::create_dir_all(&study).unwrap();
    for file in ["reduction.toml", "reduce.cu"] {
        std::fs::copy(repo.join("examples/reduction").join(file), study.join(file)).unwrap();
    }
    std::fs::write(root.join("mock.toml"), "[timing]\nseed = 1\n").unwrap();
    kbench_in(root)
        .env("KBENCH_MOCK_GPU", root.join("mock.toml"))
        .args(["run", "study/reduction.toml", "--out-dir", "out"])
        .args(["--warmup", "0", "--min-samples", "3", "--max-samples", "3"])
        .assert()
        .success();
    (study, results_file_in(&root.join("out/custom_reduction")))
}

#[test]
fn a_custom_study_reads_from_its_recorded_sources_anywhere() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let (study, results) = custom_results(&root);
    let doc = read(&results);
    let source = &doc["manifest"]["sources"][0];
    assert_eq!(
        source["absolute"],
        study.join("reduce.cu").display().to_string()
    );
    let text = std::fs::read_to_string(study.join("reduce.cu")).unwrap();
    assert_eq!(source["text"], text.as_str());
    assert_eq!(source["bytes"], text.len());
    assert_eq!(
        doc["manifest"]["absolute"],
        study.join("reduction.toml").display().to_string()
    );
    let planned = doc["cases"].as_array().unwrap().len();

    // The study's folder gone: report and merge read the record, from another folder.
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::rename(&study, root.join("moved")).unwrap();
    let shown = kbench_in(&elsewhere)
        .arg("report")
        .arg(&results)
        .assert()
        .success();
    let table = String::from_utf8_lossy(&shown.get_output().stdout).into_owned();
    assert!(table.contains("interleaved"), "{table}");
    kbench_in(&elsewhere)
        .arg("merge")
        .arg(&results)
        .args(["-o", "merged.json"])
        .assert()
        .success();

    // A resume with cases left compiles the sources on disk: gone, or changed, it is refused.
    let mut part = doc.clone();
    part["cases"].as_array_mut().unwrap().truncate(1);
    part["complete"] = false.into();
    part["finished_at"] = Value::Null;
    let part_file = elsewhere.join("part.json");
    write(&part_file, &part);
    let resume = || {
        kbench_in(&elsewhere)
            .env("KBENCH_MOCK_GPU", root.join("mock.toml"))
            .args(["run", "--resume", "part.json"])
            .assert()
    };
    let gone = resume().code(2);
    assert!(stderr(&gone).contains("reduce.cu"), "{}", stderr(&gone));
    std::fs::rename(root.join("moved"), &study).unwrap();
    std::fs::write(study.join("reduce.cu"), format!("{text}// edited\n")).unwrap();
    let changed = resume().code(2);
    assert!(
        stderr(&changed).contains("changed since the run started"),
        "{}",
        stderr(&changed)
    );
    assert_eq!(read(&part_file)["cases"].as_array().unwrap().len(), 1);
    // Restored, it resumes from elsewhere and completes the file.
    std::fs::write(study.join("reduce.cu"), &text).unwrap();
    resume().success();
    let done = read(&part_file);
    assert_eq!(done["complete"], true);
    assert_eq!(done["cases"].as_array().unwrap().len(), planned);
}
