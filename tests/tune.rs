//! `kbench tune` end to end on the mock device (`KBENCH_MOCK_GPU`), whose time model is told
//! to depend on the tuned axes (`time_factor` events) and to give a wrong answer at the fastest
//! configuration: the exhaustive winner is the best of `kbench run` over the same grid, the
//! wrong configuration never wins, a budget is kept and nothing is evaluated twice, an
//! interrupted tune resumes to the same evaluations as one left alone, the exports are usable,
//! and bad `[tune]` tables are refused at their line.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kbench::tune::journal::Evaluation;
use kbench::tune::session;
use serde_json::Value;

/// The example's kernel (examples/tune), at small sizes: 6 blocks x 4 items = 24
/// configurations at each of 2 sizes.
const STUDY_HEAD: &str = r#"[study]
name = "tune_mock"
algorithm = "custom"
seed = 11

[grid]
n = [1_024, 4_096]
dtype = "f32"
block = [32, 64, 128, 256, 512, 1024]
items = [1, 2, 4, 8]

[tune]
axes = ["block", "items"]
strategy = "bayes"
budget = { evaluations = 8 }
seed = 5
top = 3
rounds = 3

"#;

fn study() -> String {
    format!("{STUDY_HEAD}{}", common::TUNE_SUM_CUSTOM)
}

/// Times that depend on both axes, best at block 256 x items 4 (0.9 x 0.95 of the model), and
/// a wrong answer at block 512 x items 8, which would be twice as fast as anything.
const MOCK: &str = r#"[timing]
seed = 2
launch_s = 2e-5
jitter = 0.01
[[event]]
params = { block = [32] }
time_factor = 1.6
[[event]]
params = { block = [64] }
time_factor = 1.3
[[event]]
params = { block = [128] }
time_factor = 1.1
[[event]]
params = { block = [256] }
time_factor = 0.9
[[event]]
params = { block = [1024] }
time_factor = 1.2
[[event]]
params = { items = [1] }
time_factor = 1.3
[[event]]
params = { items = [2] }
time_factor = 1.1
[[event]]
params = { items = [4] }
time_factor = 0.95
[[event]]
params = { block = [512], items = [8] }
fault = "wrong answer"
[[event]]
params = { block = [512], items = [8] }
time_factor = 0.4
"#;

/// Fixed sample counts: the mock's samples, and so every median, the same in every run.
const MEASURE: [&str; 8] = [
    "--warmup",
    "0",
    "--min-samples",
    "8",
    "--max-samples",
    "8",
    "--max-time-s",
    "600",
];

/// A folder with the study (its `[tune]` replaced by `tune`, if given), the kernel and the
/// mock device.
fn setup(tune: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tune/sum.cu");
    std::fs::copy(kernel, dir.path().join("sum.cu")).unwrap();
    let study = match tune {
        Some(t) => {
            let start = STUDY_HEAD.find("[tune]").unwrap();
            format!("{}{t}\n{}", &STUDY_HEAD[..start], common::TUNE_SUM_CUSTOM)
        }
        None => study(),
    };
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    dir
}

fn kbench(dir: &Path) -> Command {
    let mut cmd = Command::new(common::kbench_exe());
    cmd.current_dir(dir)
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .env("COLUMNS", "100");
    cmd
}

fn tune(dir: &Path, extra: &[&str]) -> Output {
    kbench(dir)
        .args(["tune", "study.toml", "--out-dir", "out"])
        .args(MEASURE)
        .args(extra)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The folders of the tunes under `out/tune_mock`.
fn tune_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir.join("out/tune_mock"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs
}

fn tune_doc(tune_dir: &Path) -> Value {
    common::read(&tune_dir.join("tune.json"))
}

/// `block=256 items=4` of an object of axis values.
fn label(values: &Value) -> String {
    format!("block={} items={}", values["block"], values["items"])
}

/// Each problem point's winner, by n.
fn winners(doc: &Value) -> BTreeMap<i64, String> {
    (doc["problems"].as_array().unwrap().iter())
        .map(|p| {
            (
                p["params"]["n"].as_i64().unwrap(),
                label(&p["winner"]["values"]),
            )
        })
        .collect()
}

#[test]
fn exhaustive_picks_the_best_of_kbench_run_and_never_a_wrong_answer() {
    let dir = setup(None);
    let out = tune(dir.path(), &["--strategy", "exhaustive"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = tune_doc(&tune_dirs(dir.path())[0]);
    for p in doc["problems"].as_array().unwrap() {
        let evaluations = p["evaluations"].as_array().unwrap();
        assert_eq!(
            evaluations.len(),
            24,
            "exhaustive evaluates every configuration"
        );
        let wrong = (evaluations.iter())
            .find(|e| label(&e["values"]) == "block=512 items=8")
            .unwrap();
        assert_eq!(wrong["status"], "accuracy_failed");
        assert!(wrong["reason"].as_str().unwrap().contains("wrong answer"));
    }

    // `kbench run` over the same grid: the fastest passing case per size.
    let run = kbench(dir.path())
        .args(["run", "study.toml", "--out-dir", "run", "--json"])
        .args(MEASURE)
        .output()
        .unwrap();
    // The wrong answer fails the run (exit 1), as it should.
    assert_eq!(run.status.code(), Some(1), "{}", text(&run.stderr));
    let results = common::read(&common::results_file_in(&dir.path().join("run/tune_mock")));
    let mut best: BTreeMap<i64, (f64, String)> = BTreeMap::new();
    for case in results["cases"].as_array().unwrap() {
        if case["status"] != "passed" {
            continue;
        }
        let n = case["params"]["n"].as_i64().unwrap();
        let median = case["summary"]["median_s"].as_f64().unwrap();
        if best.get(&n).is_none_or(|(m, _)| median < *m) {
            best.insert(n, (median, label(&case["params"])));
        }
    }
    let from_run: BTreeMap<i64, String> = best.into_iter().map(|(n, (_, l))| (n, l)).collect();
    assert_eq!(winners(&doc), from_run);
    assert!(
        from_run.values().all(|w| w == "block=256 items=4"),
        "{from_run:?}"
    );
    // The winner is separated from the runner-up (10% apart, 1% jitter).
    for p in doc["problems"].as_array().unwrap() {
        assert_eq!(
            p["winner"]["verdict"]["kind"], "separated",
            "{}",
            p["winner"]
        );
    }
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("block=256 items=4  ") && stdout.contains("<- winner"),
        "{stdout}"
    );
    assert!(stdout.contains("separated from"), "{stdout}");
}

#[test]
fn bayes_keeps_its_budget_evaluates_nothing_twice_and_finds_the_best() {
    let dir = setup(None);
    let out = tune(dir.path(), &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = tune_doc(&tune_dirs(dir.path())[0]);
    assert_eq!(doc["tune"]["strategy"], "bayes");
    for p in doc["problems"].as_array().unwrap() {
        let evaluations = p["evaluations"].as_array().unwrap();
        assert_eq!(evaluations.len(), 8);
        let distinct: BTreeSet<String> = evaluations.iter().map(|e| label(&e["values"])).collect();
        assert_eq!(distinct.len(), 8, "a configuration evaluated twice");
        // The best so far never rises, and ends at the best evaluated median.
        let best: Vec<f64> = (p["best_so_far_s"].as_array().unwrap().iter())
            .filter_map(Value::as_f64)
            .collect();
        assert!(best.windows(2).all(|w| w[1] <= w[0]));
        // On this separable landscape, 8 of 24 evaluations reach the optimum (the exhaustive
        // test shows it is block 256 x items 4).
        assert_eq!(
            label(&p["winner"]["values"]),
            "block=256 items=4",
            "{}",
            p["winner"]
        );
    }
    // The report holds a convergence plot per problem point.
    let html = std::fs::read_to_string(tune_dirs(dir.path())[0].join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 2);
}

#[test]
fn an_interrupted_tune_resumes_without_evaluating_anything_twice() {
    let dir = setup(None);
    let child = kbench(dir.path())
        .args([
            "tune",
            "study.toml",
            "--out-dir",
            "out",
            "--budget-evaluations",
            "10",
        ])
        .args(MEASURE)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let journal = loop {
        let journal = tune_dirs(dir.path())
            .first()
            .map(|d| d.join("journal.jsonl"));
        let lines = journal.as_ref().map_or(0, |j| {
            std::fs::read_to_string(j).map_or(0, |t| t.lines().count())
        });
        // The first line says what is tuned; then one per evaluation.
        if lines >= 5 {
            break journal.unwrap();
        }
        assert!(started.elapsed() < Duration::from_secs(60), "no progress");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let interrupted = child.wait_with_output().unwrap();
    let stderr = text(&interrupted.stderr);
    assert_eq!(interrupted.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("kbench tune --resume"), "{stderr}");
    let before = std::fs::read_to_string(&journal).unwrap();
    let journaled = before.lines().count() - 1;
    assert!((4..20).contains(&journaled), "{journaled} evaluations");
    let tune_dir = journal.parent().unwrap().to_path_buf();
    assert!(!tune_dir.join("tune.json").exists());

    let resumed = kbench(dir.path())
        .args(["tune", "--resume"])
        .arg(&tune_dir)
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed.stderr));
    // The resume appended to the journal, which holds each evaluation once: 10 per point.
    let after = std::fs::read_to_string(&journal).unwrap();
    assert!(
        after.starts_with(&before),
        "the resume rewrote journaled evaluations"
    );
    let evaluations: Vec<Evaluation> = (after.lines().skip(1))
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|mut v| {
            v.as_object_mut().unwrap().remove("line");
            serde_json::from_value(v).unwrap()
        })
        .collect();
    assert_eq!(evaluations.len(), 20);
    let keys: BTreeSet<(usize, usize)> =
        evaluations.iter().map(|e| (e.problem, e.config)).collect();
    assert_eq!(keys.len(), 20, "an evaluation journaled twice");
    // Each evaluation, before and after the interrupt, is what the strategy proposes from the
    // ones before it and the seed: the resume replayed the journal into the same state.
    let manifest = kbench::manifest::load(&dir.path().join("study.toml")).unwrap();
    let spec = kbench::tune::spec::load(&manifest).unwrap();
    let cases = kbench::plan::expand(&manifest).unwrap();
    let problems = kbench::tune::space::problems(&manifest, &cases, &spec.axes);
    for (p, problem) in problems.iter().enumerate() {
        let history: Vec<Evaluation> = (evaluations.iter())
            .filter(|e| e.problem == p)
            .cloned()
            .collect();
        for i in 0..history.len() {
            let proposed = kbench::tune::strategy::propose(
                spec.strategy,
                &problem.space(),
                &session::observed(&history[..i]),
                1,
                session::problem_seed(spec.seed, p),
            );
            assert_eq!(
                proposed,
                vec![history[i].config],
                "problem {p}, evaluation {i}"
            );
        }
    }
    let doc = tune_doc(&tune_dir);
    assert_eq!(winners(&doc).len(), 2);
}

#[test]
fn the_exports_hold_the_winners_and_the_manifest_plans_only_them() {
    let dir = setup(None);
    let out = tune(
        dir.path(),
        &[
            "--strategy",
            "exhaustive",
            "--export-header",
            "tuned.h",
            "--export-manifest",
            "tuned.toml",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = std::fs::read_to_string(dir.path().join("tuned.h")).unwrap();
    assert!(
        header.contains("kbench_tuned_tune_mock_winners[]"),
        "{header}"
    );
    assert!(
        header.contains(r#"{"tuned", "f32", 1024, 256, 4}"#),
        "{header}"
    );
    assert!(
        header.contains(r#"{"tuned", "f32", 4096, 256, 4}"#),
        "{header}"
    );
    let check = kbench(dir.path())
        .args(["check", "tuned.toml"])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(
        text(&check.stdout).contains("2 cases"),
        "{}",
        text(&check.stdout)
    );
    let manifest = std::fs::read_to_string(dir.path().join("tuned.toml")).unwrap();
    assert!(!manifest.contains("[tune]"));
}

#[test]
fn a_study_of_one_size_gets_defines_in_its_header() {
    let dir = setup(None);
    let study = std::fs::read_to_string(dir.path().join("study.toml")).unwrap();
    std::fs::write(
        dir.path().join("study.toml"),
        study.replace("n = [1_024, 4_096]", "n = [1_024]"),
    )
    .unwrap();
    let out = tune(
        dir.path(),
        &["--strategy", "exhaustive", "--export-header", "tuned.h"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let header = std::fs::read_to_string(dir.path().join("tuned.h")).unwrap();
    assert!(
        header.contains("#define KBENCH_TUNED_BLOCK 256\n"),
        "{header}"
    );
    assert!(
        header.contains("#define KBENCH_TUNED_ITEMS 4\n"),
        "{header}"
    );
}

/// Each bad `[tune]` table, the line and key refused, and a piece of the message.
#[test]
fn bad_tune_tables_are_refused_at_their_line() {
    let cases: [(&str, &str, &str, &str); 12] = [
        (
            "axes = [\"block\", \"itms\"]",
            "study.toml:13:",
            "tune.axes[1]",
            "unknown axis `itms`",
        ),
        (
            "axes = []",
            "study.toml:13:",
            "tune.axes",
            "no axis to tune",
        ),
        (
            "axes = [\"block\", \"block\"]",
            "study.toml:13:",
            "tune.axes[1]",
            "named twice",
        ),
        (
            "axes = [\"block\"]\nstrategy = \"genetic\"\nbudget = { evaluations = 3 }",
            "study.toml:14:",
            "tune.strategy",
            "unknown strategy `genetic`",
        ),
        (
            "axes = [\"block\"]\nbudget = { evaluations = 0 }",
            "study.toml:14:",
            "tune.budget.evaluations",
            "at least 1",
        ),
        (
            "axes = [\"block\"]\nbudget = { time_s = -2.0 }",
            "study.toml:14:",
            "tune.budget.time_s",
            "above 0",
        ),
        (
            "axes = [\"block\"]",
            "study.toml:12:",
            "tune.budget",
            "needs a budget",
        ),
        (
            "axes = [\"block\"]\nbudget = { evaluations = 3 }\ntie_within = 1.5",
            "study.toml:15:",
            "tune.tie_within",
            "between 0 and 1",
        ),
        (
            "axes = [\"block\"]\nbudget = { evaluations = 3 }\nrounds = 4\nmin_rounds = 6",
            "study.toml:16:14",
            "tune.min_rounds",
            "`min_rounds` is 6; it must be from 2 (a paired interval needs two rounds) to `rounds` (4)",
        ),
        (
            "axes = [\"block\"]\nbudget = { evaluations = 3 }\nmin_rounds = 1",
            "study.toml:15:14",
            "tune.min_rounds",
            "`min_rounds` is 1",
        ),
        (
            "axes = [\"block\"]\nbudget = { evaluations = 3 }\nrounds = 1",
            "study.toml:15:10",
            "tune.rounds",
            "`rounds` is 1; it must be from 2 to 100",
        ),
        (
            "axes = [\"block\"]\nbudget = { evaluations = 3 }\nstrategey = \"random\"",
            "study.toml:15:",
            "tune.strategey",
            "unknown field",
        ),
    ];
    for (table, at, key, message) in cases {
        let dir = setup(Some(&format!("[tune]\n{table}\n")));
        let out = tune(dir.path(), &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{table}: {stderr}");
        assert!(stderr.contains(at), "{table}: not at {at}: {stderr}");
        assert!(
            stderr.contains(&format!("key `{key}`")),
            "{table}: no key {key}: {stderr}"
        );
        assert!(stderr.contains(message), "{table}: {stderr}");
        assert!(
            tune_dirs(dir.path()).is_empty(),
            "{table}: a refused tune left a folder"
        );
    }
}

/// A built-in study whose grid leaves `block` to its default.
const BUILTIN: &str = "[study]\nname = \"tune_reduce\"\nalgorithm = \"reduce\"\nseed = 1\n\n[grid]\nn = [1000]\n\n[tune]\naxes = [\"block\"]\nstrategy = \"exhaustive\"\n\n[[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_optimized\"\n";

#[test]
fn an_axis_the_grid_does_not_list_is_refused_and_a_manifest_without_tune_too() {
    let dir = setup(None);
    std::fs::write(dir.path().join("builtin.toml"), BUILTIN).unwrap();
    let out = kbench(dir.path())
        .args(["tune", "builtin.toml", "--out-dir", "out"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("builtin.toml:10:9"), "{stderr}");
    assert!(stderr.contains("axis `block` is not in [grid]"), "{stderr}");
    assert!(stderr.contains("key `tune.axes[0]`"), "{stderr}");

    let without = study().replace("[tune]\naxes = [\"block\", \"items\"]\nstrategy = \"bayes\"\nbudget = { evaluations = 8 }\nseed = 5\ntop = 3\nrounds = 3\n", "");
    assert!(!without.contains("[tune]"));
    std::fs::write(dir.path().join("plain.toml"), without).unwrap();
    let out = kbench(dir.path())
        .args(["tune", "plain.toml", "--out-dir", "out"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("has no [tune] table"),
        "{}",
        text(&out.stderr)
    );
    // `kbench check` (and so `run`) takes a manifest with a [tune] table.
    let check = kbench(dir.path())
        .args(["check", "study.toml"])
        .output()
        .unwrap();
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
}

/// A built-in algorithm tuned over its block size on the mock: every block evaluated, the
/// fastest (the mock makes 256 fastest) the winner.
#[test]
fn a_built_in_algorithm_is_tuned_over_its_block_size() {
    let dir = setup(None);
    std::fs::write(
        dir.path().join("builtin.toml"),
        BUILTIN.replace(
            "n = [1000]",
            "n = [1000, 5000]\nblock = [64, 128, 256, 512]",
        ),
    )
    .unwrap();
    let out = kbench(dir.path())
        .args(["tune", "builtin.toml", "--out-dir", "out"])
        .args(MEASURE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tune_dir = std::fs::read_dir(dir.path().join("out/tune_reduce"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc = tune_doc(&tune_dir);
    for p in doc["problems"].as_array().unwrap() {
        assert_eq!(p["evaluations"].as_array().unwrap().len(), 4);
        assert_eq!(p["winner"]["values"]["block"], 256, "{}", p["winner"]);
    }
}

/// A time budget: no new configuration once a problem point's evaluations took that long, so a
/// budget shorter than any case evaluates one configuration per point (the model-based search
/// proposes one at a time), which wins alone.
#[test]
fn a_time_budget_stops_the_search_and_a_lone_configuration_wins_alone() {
    let dir = setup(None);
    let out = tune(dir.path(), &["--budget-time-s", "1e-9"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let doc = tune_doc(&tune_dirs(dir.path())[0]);
    assert_eq!(doc["tune"]["budget"]["time_s"], 1e-9);
    for p in doc["problems"].as_array().unwrap() {
        assert_eq!(p["evaluations"].as_array().unwrap().len(), 1);
        assert_eq!(p["winner"]["verdict"]["kind"], "alone", "{}", p["winner"]);
        assert_eq!(p["winner"]["rounds"], 0);
    }
    assert!(text(&out.stdout).contains("the only correct configuration"));
}

/// On a machine without a GPU (and no mock), every CUDA case is skipped: no winner, said with
/// the reason, exit 1.
#[test]
fn without_a_gpu_there_is_no_winner_and_the_reason_is_given() {
    let dir = setup(None);
    let out = kbench(dir.path())
        .env_remove("KBENCH_MOCK_GPU")
        .env("CUDA_VISIBLE_DEVICES", "")
        .args([
            "tune",
            "study.toml",
            "--out-dir",
            "out",
            "--budget-evaluations",
            "2",
        ])
        .args(MEASURE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("no winner: no correct configuration among the 2 evaluated"),
        "{stdout}"
    );
}

/// The mock device's `time_factor` must be a positive number, refused at its line otherwise.
#[test]
fn a_mock_time_factor_below_zero_is_refused_at_its_line() {
    let dir = setup(None);
    std::fs::write(
        dir.path().join("mock.toml"),
        "[[event]]\nparams = { block = [64] }\ntime_factor = -1.0\n",
    )
    .unwrap();
    let out = tune(dir.path(), &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("mock.toml:3:15"), "{stderr}");
    assert!(stderr.contains("`time_factor` is -1"), "{stderr}");
}

/// `--devices`: the evaluations of a batch are spread over the lanes, one worker per GPU (two
/// lanes on the mock device here), and each is still evaluated once.
#[test]
fn evaluations_are_spread_over_the_lanes() {
    use kbench::run::lanes::LaneDevice;
    use kbench::run::study::RunOptions;
    use kbench::tune::session::{TuneOverrides, TuneRequest, TuneSource};
    use kbench::tune::spec::StrategyKind;

    let dir = setup(None);
    let mock = kbench::run::executor::mock::MockSpec::load(&dir.path().join("mock.toml")).unwrap();
    let options = RunOptions {
        lanes: (0..2)
            .map(|i| LaneDevice {
                visible: Some(i.to_string()),
                index: i,
                physical: true,
            })
            .collect(),
        mock_gpu: Some(mock),
        ..RunOptions::new(common::kbench_exe())
    };
    let request = TuneRequest {
        source: TuneSource::Manifest(dir.path().join("study.toml")),
        overrides: TuneOverrides {
            strategy: Some(StrategyKind::Exhaustive),
            ..TuneOverrides::default()
        },
        options,
        out_dir: dir.path().join("out"),
        export_header: None,
        export_manifest: None,
        json: true,
    };
    assert_eq!(session::run(&request), kbench::exit::Exit::Ok);
    let tune_dir = &tune_dirs(dir.path())[0];
    let evaluations = common::results_file_in(&tune_dir.join("evaluations/tune_mock"));
    let doc = common::read(&evaluations);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 48);
    let per_gpu = |gpu: u64| {
        (cases.iter())
            .filter(|c| c["device"]["index"] == gpu)
            .count()
    };
    assert!(
        per_gpu(0) > 0 && per_gpu(1) > 0,
        "GPU 0: {}, GPU 1: {}",
        per_gpu(0),
        per_gpu(1)
    );
    assert_eq!(per_gpu(0) + per_gpu(1), 48);
}

/// `tune --processes 2`: every configuration evaluated, and every round of the top ones, was
/// measured in two worker processes (two process medians a passed case; a wrong answer names
/// its process), as `run --processes 2` does.
#[test]
fn tune_measures_every_evaluation_and_round_in_the_processes_asked() {
    let dir = setup(None);
    let out = tune(dir.path(), &["--processes", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tune_dir = &tune_dirs(dir.path())[0];
    let mut files = Vec::new();
    for sub in ["evaluations/tune_mock", "rounds/tune_mock"] {
        for entry in std::fs::read_dir(tune_dir.join(sub)).unwrap() {
            files.push(entry.unwrap().path());
        }
    }
    assert!(files.len() >= 2, "{files:?}");
    let mut cases = 0;
    for file in &files {
        let doc = common::read(file);
        for case in doc["cases"].as_array().unwrap() {
            if case["status"] == "passed" {
                let medians = case["measurement"]["process_medians_s"].as_array();
                assert_eq!(medians.map(Vec::len), Some(2), "{}: {case}", file.display());
                cases += 1;
            } else {
                // The mock's wrong configuration fails in the first of its two processes.
                let reason = case["reason"].as_str().unwrap_or_default();
                assert!(
                    reason.starts_with("in process 1 of 2: wrong answer"),
                    "{reason}"
                );
            }
        }
    }
    assert!(cases > 0);
}

/// A finished tune's journal (a budget of 2 at each of the 2 problem points, 2 rounds) in a
/// folder of its own, `tune.json` left behind: what `--resume` reads.
fn journal_of_a_finished_tune(dir: &Path) -> (PathBuf, String) {
    let out = tune(dir, &["--budget-evaluations", "2", "--strategy", "random"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let tune_dir = &tune_dirs(dir)[0];
    let copy = dir.join("journal-only");
    std::fs::create_dir(&copy).unwrap();
    let journal = std::fs::read_to_string(tune_dir.join("journal.jsonl")).unwrap();
    (copy, journal)
}

/// A journal is a file: each setting and evaluation a resume replays is checked against the
/// manifest, and an edited one refused with the journal's path (and line) rather than run
/// (`min_rounds = 0` panicked, `rounds = 100000` re-measured without end, `top = 0` gave a false
/// "no winner", a duplicated evaluation or a negative median went into the decision).
#[test]
fn an_edited_journal_is_refused_and_a_tune_resumes_from_any_folder() {
    let dir = setup(Some(
        "[tune]\naxes = [\"block\", \"items\"]\nstrategy = \"random\"\nbudget = { evaluations = 2 }\nrounds = 2\n",
    ));
    let (copy, journal) = journal_of_a_finished_tune(dir.path());
    let resume = |journal: &str| {
        std::fs::write(copy.join("journal.jsonl"), journal).unwrap();
        // From a folder that is neither the study's nor the tune's.
        let elsewhere = tempfile::tempdir().unwrap();
        let out = Command::new(common::kbench_exe())
            .current_dir(elsewhere.path())
            .env("KBENCH_MOCK_GPU", dir.path().join("mock.toml"))
            .args(["tune", "--resume"])
            .arg(&copy)
            .output()
            .unwrap();
        (out.status.code(), text(&out.stderr))
    };
    let edit_start = |edit: &dyn Fn(&mut Value)| {
        let mut lines: Vec<String> = journal.lines().map(str::to_string).collect();
        let mut start: Value = serde_json::from_str(&lines[0]).unwrap();
        edit(&mut start);
        lines[0] = start.to_string();
        lines.join("\n") + "\n"
    };
    let edit_evaluation = |n: usize, edit: &dyn Fn(&mut Value)| {
        let mut lines: Vec<String> = journal.lines().map(str::to_string).collect();
        let mut evaluation: Value = serde_json::from_str(&lines[n]).unwrap();
        edit(&mut evaluation);
        lines[n] = evaluation.to_string();
        lines.join("\n") + "\n"
    };
    let edits: Vec<(&str, String, &str)> = vec![
        (
            "min_rounds 0",
            edit_start(&|s| s["spec"]["min_rounds"] = 0.into()),
            "`min_rounds` is 0",
        ),
        (
            "rounds 100000",
            edit_start(&|s| s["spec"]["rounds"] = 100_000.into()),
            "`rounds` is 100000 where the manifest's is 2",
        ),
        (
            "top 0",
            edit_start(&|s| s["spec"]["top"] = 0.into()),
            "`top` is 0 where the manifest's is 3",
        ),
        (
            "negative tie_within",
            edit_start(&|s| s["spec"]["tie_within"] = (-0.5).into()),
            "`tie_within` is -0.5",
        ),
        (
            "edited axes",
            edit_start(&|s| s["spec"]["axes"] = serde_json::json!(["block"])),
            "tuned axes",
        ),
        (
            "no budget",
            edit_start(&|s| s["spec"]["budget"] = serde_json::json!({"evaluations": 0})),
            "a budget of 0 evaluations",
        ),
        (
            "negative median",
            edit_evaluation(1, &|e| e["median_s"] = (-1.0).into()),
            "journal.jsonl:2: case #",
        ),
        (
            "edited values",
            edit_evaluation(2, &|e| e["values"]["block"] = 3.into()),
            "journal.jsonl:3: the evaluation of case #",
        ),
        (
            "duplicate",
            format!("{journal}{}\n", journal.lines().nth(1).unwrap()),
            "is evaluated twice",
        ),
    ];
    for (what, edited, expected) in edits {
        let (code, stderr) = resume(&edited);
        assert_eq!(code, Some(2), "{what}: {stderr}");
        assert!(stderr.contains(expected), "{what}: {stderr}");
        assert!(stderr.contains("journal"), "{what}: {stderr}");
    }
    // Untouched, the journal resumes from elsewhere: the manifest's path was recorded whole.
    let (code, stderr) = resume(&journal);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(copy.join("tune.json").exists());
    // And a finished tune is not decided again over its results.
    let (code, stderr) = resume(&journal);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("finished: its results are in"), "{stderr}");
}
