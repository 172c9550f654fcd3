//! A run session as a library call, without a terminal: a request in, an outcome out, and what
//! a person would see recorded by a sink; the command-line overrides stored whole in the
//! results file and checked on resume.

use crate::common;

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use kbench::exit::Exit;
use kbench::record::{CaseResult, MeasureOverrides};
use kbench::report::export;
use kbench::run::session::{self, Request, Sink, Source, Stop, StudyStart};
use kbench::run::study::{Progress, RunOptions};

/// Every event a session sends, one line each.
#[derive(Default)]
struct Recorder {
    events: RefCell<Vec<String>>,
}

impl Recorder {
    fn say(&self, line: String) {
        self.events.borrow_mut().push(line);
    }

    fn lines(&self) -> Vec<String> {
        self.events.borrow().clone()
    }
}

impl Progress for Recorder {
    fn case_finished(&self, done: usize, total: usize, _study: &str, result: &CaseResult) {
        self.say(format!("case {done}/{total}: {}", result.status.name()));
    }
}

impl Sink for Recorder {
    fn study_started(&self, start: &StudyStart) {
        let name = &start.manifest.study.name;
        self.say(format!("started {name}: {} cases", start.cases));
    }
    fn cases_done(&self) {
        self.say("cases done".into());
    }
    fn study_finished(&self, report: &export::Report, _results_path: &Path) {
        self.say(format!("finished {}", report.doc.study.name));
    }
    fn baseline_saved(&self, name: &str, _path: &Path) {
        self.say(format!("baseline {name}"));
    }
    fn diagnostic(&self, text: &str) {
        self.say(text.to_string());
    }
}

/// A CPU-only study of 2 cases whose manifest asks for 1 sample.
fn write_study(dir: &Path) -> String {
    let path = dir.join("tiny.toml");
    std::fs::write(
        &path,
        "[study]\nname = \"tiny\"\nalgorithm = \"reduce\"\nseed = 5\n[grid]\nn = [777]\n\
         dtype = [\"i32\", \"f32\"]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [measure]\nwarmup = 0\nmin_samples = 1\nmax_samples = 1\n",
    )
    .unwrap();
    path.display().to_string()
}

fn request(source: Source, out_dir: &Path, overrides: MeasureOverrides) -> Request {
    Request {
        source,
        options: RunOptions {
            overrides,
            ..RunOptions::new(common::kbench_exe())
        },
        out_dir: out_dir.to_path_buf(),
        shard: None,
        cases: Vec::new(),
        exports: Vec::new(),
        save_baseline: Some("main".into()),
        check_claims: false,
    }
}

#[test]
fn a_session_runs_without_a_terminal_and_stores_its_overrides_whole() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = write_study(dir.path());
    let overrides = MeasureOverrides {
        min_samples: Some(3),
        ..MeasureOverrides::default()
    };
    let sink = Recorder::default();
    let outcome = session::run(
        &request(Source::Manifests(vec![manifest]), dir.path(), overrides),
        &sink,
    );
    assert_eq!(outcome.exit(), Exit::Ok, "{:?}", sink.lines());
    assert_eq!(outcome.studies.len(), 1);
    let study = &outcome.studies[0];
    assert_eq!((study.failed_cases, study.refuted_claims), (0, 0));
    let path: &PathBuf = &study.results_path;
    assert_eq!(
        sink.lines(),
        [
            "note: ".to_string()
                + &dir.path().join("tiny.toml").display().to_string()
                + ": --min-samples 3 raises its max_samples 1 to 3",
            "started tiny: 2 cases".into(),
            "case 1/2: passed".into(),
            "case 2/2: passed".into(),
            "cases done".into(),
            "baseline main".into(),
            "finished tiny".into(),
        ]
    );
    let doc = kbench::results::load_results(path).unwrap();
    assert_eq!(doc.manifest.overrides.min_samples, Some(3));
    assert_eq!(doc.manifest.overrides.max_samples, None);
    assert_eq!(doc.manifest.measure.max_samples, 3);
    assert!(doc
        .cases
        .iter()
        .all(|c| c.summary.as_ref().unwrap().samples == 3));

    // A resume with a different override is refused with one line per conflict; the file's
    // own values are no conflict.
    let conflicting = MeasureOverrides {
        min_samples: Some(3),
        warmup: Some(2),
        ..MeasureOverrides::default()
    };
    let sink = Recorder::default();
    let resumed = session::run(
        &request(Source::Resume(path.clone()), dir.path(), conflicting),
        &sink,
    );
    assert_eq!(resumed.stopped, Some(Stop::BadInput));
    assert_eq!(resumed.exit(), Exit::BadInput);
    let said = sink.lines().join("\n");
    assert!(
        said.contains("  --warmup 2, but the run measured with warmup = 0"),
        "{said}"
    );
    assert!(!said.contains("--min-samples"), "{said}");
}

#[test]
fn a_session_stops_on_a_bad_manifest_or_an_interrupt_before_running_anything() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[study]\nname = \"bad\"\n").unwrap();
    let sink = Recorder::default();
    let outcome = session::run(
        &request(
            Source::Manifests(vec![bad.display().to_string()]),
            dir.path(),
            MeasureOverrides::default(),
        ),
        &sink,
    );
    assert_eq!(outcome.exit(), Exit::BadInput);
    assert!(outcome.studies.is_empty());
    assert!(sink.lines()[0].contains("bad.toml"), "{:?}", sink.lines());

    let request = request(
        Source::Manifests(vec![write_study(dir.path())]),
        dir.path(),
        MeasureOverrides::default(),
    );
    request
        .options
        .interrupted
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let sink = Recorder::default();
    let outcome = session::run(&request, &sink);
    assert_eq!(outcome.exit(), Exit::Interrupted);
    assert!(
        sink.lines()[0].starts_with("interrupted while planning"),
        "{:?}",
        sink.lines()
    );
}
