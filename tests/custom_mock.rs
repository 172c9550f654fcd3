//! Custom studies (`algorithm = "custom"`) end to end without a GPU: every example in
//! `examples/` passes `kbench check`, and runs on the mock device (`KBENCH_MOCK_GPU`), whose
//! timing comes from the study's declared bytes and flops; the tables are snapshot-tested.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use serde_json::Value;

const MOCK: &str = "[device]\nname = \"H100\"\n\n[timing]\nseed = 3\nlaunch_s = 4e-6\ngbytes_per_s = 2000.0\njitter = 0.02\n";

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn kbench(dir: &Path) -> Command {
    let mut cmd = Command::cargo_bin("kbench").unwrap();
    cmd.current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .env("COLUMNS", "80");
    cmd
}

/// The table `kbench run` printed: its box-drawn lines alone (paths and times of day left out).
fn table(stdout: &str) -> String {
    stdout
        .lines()
        .filter(|l| l.starts_with(['╭', '│', '├', '╰']) || l.contains(" cases: "))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Runs `example` on the mock; returns what it printed and its results document.
fn run_on_mock(example: &str) -> (String, Value) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    let out = kbench(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run"])
        .arg(repo(example))
        .args(["--out-dir", "out"])
        // A fixed number of samples: the snapshot must not depend on how fast this machine is.
        .args([
            "--warmup",
            "1",
            "--min-samples",
            "10",
            "--max-samples",
            "10",
            "--max-time-s",
            "600",
        ])
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    (stdout, read_json(&results_in(&dir.path().join("out"))))
}

/// The results file of the one study run with `--out-dir out_dir`.
fn results_in(out_dir: &Path) -> PathBuf {
    let study_dir = std::fs::read_dir(out_dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_dir(&study_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn every_example_passes_kbench_check() {
    let mut checked = 0;
    for entry in std::fs::read_dir(repo("examples")).unwrap() {
        let folder = entry.unwrap().path();
        for file in std::fs::read_dir(&folder).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                kbench(&folder)
                    .arg("check")
                    .arg(&path)
                    .assert()
                    .success()
                    .stdout(predicates::str::contains("ok: "));
                checked += 1;
            }
        }
        assert!(folder.join("README.md").is_file(), "{}", folder.display());
    }
    assert!(checked >= 2, "{checked}");
}

#[test]
fn the_custom_reduction_runs_on_the_mock_device_timed_from_its_declared_bytes() {
    let (stdout, doc) = run_on_mock("examples/reduction/reduction.toml");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 12);
    for case in cases {
        assert_eq!(case["status"], "passed", "{case}");
        // bytes = (n + 1) * sizeof(dtype)
        let n = case["params"]["n"].as_u64().unwrap();
        let size = if case["params"]["dtype"] == "f64" {
            8
        } else {
            4
        };
        assert_eq!(case["bytes_moved"].as_u64().unwrap(), (n + 1) * size);
        assert_eq!(case["flops"].as_u64().unwrap(), n - 1);
    }
    insta::assert_snapshot!("custom_reduction_table", table(&stdout));
}

#[test]
fn the_custom_transpose_runs_on_the_mock_device() {
    let (stdout, doc) = run_on_mock("examples/transpose/transpose.toml");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 9);
    assert!(cases.iter().all(|c| c["status"] == "passed"));
    insta::assert_snapshot!("custom_transpose_table", table(&stdout));
}

/// A study whose output is checked against an external reference command (a shell script that
/// copies the input, so no NumPy is needed), written into `dir`; `script` is the command.
fn copy_study(dir: &Path, script: &str) -> PathBuf {
    copy_study_of(dir, script, 1)
}

/// `copy_study` with `variants` variants of the one kernel (`copy`, `copy_2`, ...).
fn copy_study_of(dir: &Path, script: &str, variants: usize) -> PathBuf {
    std::fs::write(
        dir.join("copy.cu"),
        "extern \"C\" __global__ void copy(const float* x, float* y, int n) {\n    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) y[i] = x[i];\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("ref.sh"), script).unwrap();
    let manifest = r#"[study]
name = "copy"
algorithm = "custom"
seed = 1

[grid]
n = [1000, 5000]

[custom]
sources = ["copy.cu"]
reference_command = { argv = ["sh", "ref.sh"], timeout_s = 30 }
bytes = "8 * n"

[[custom.axis]]
name = "n"
kind = "size"

[[custom.buffer]]
name = "x"
type = "f32"
length = "n"
role = "input"

[[custom.buffer]]
name = "y"
type = "f32"
length = "n"
role = "output"
tolerance = "exact"

[[custom.kernel]]
name = "copy"

[[custom.kernel.launch]]
kernel = "copy"
grid = "ceil_div(n, 256)"
block = "256"
args = [{ buffer = "x" }, { buffer = "y" }, { type = "int", value = "n" }]

[[variant]]
name = "copy"
backend = "cuda"
kernel = "copy"
"#;
    let more = (2..=variants).map(|v| {
        format!("\n[[variant]]\nname = \"copy_{v}\"\nbackend = \"cuda\"\nkernel = \"copy\"\n")
    });
    let manifest: String = std::iter::once(manifest.to_string()).chain(more).collect();
    let path = dir.join("copy.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

/// `kbench <command> <path>` in the manifest's folder on the mock device (its file written
/// there), into `out`, with 1 warm-up run and 3 samples a case.
fn on_mock(command: &str, path: &Path) -> Command {
    let dir = path.parent().unwrap();
    std::fs::write(dir.join("mock.toml"), MOCK).unwrap();
    let mut kbench = kbench(dir);
    kbench
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .arg(command)
        .arg(path)
        .args(["--out-dir", "out", "--warmup", "1", "--min-samples", "3"])
        .args(["--max-samples", "3"]);
    kbench
}

/// Runs the manifest at `path` on the mock device; returns its results document.
fn run_manifest_on_mock(path: &Path) -> Value {
    // A failed case changes the exit code; the results file is what is checked.
    on_mock("run", path).output().unwrap();
    read_json(&results_in(&path.parent().unwrap().join("out")))
}

#[test]
fn outputs_are_checked_against_the_reference_commands_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_study(
        dir.path(),
        "echo \"$KBENCH_PARAMS\" >> params.log\ncp \"$KBENCH_INPUTS/x.npy\" \"$KBENCH_OUTPUTS/y.npy\"\n",
    );
    kbench(dir.path())
        .arg("check")
        .arg(&path)
        .assert()
        .success();
    let doc = run_manifest_on_mock(&path);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert!(cases.iter().all(|c| c["status"] == "passed"), "{doc}");
    // Where the kernels' CUDA headers came from is recorded, found or not.
    let headers = doc["environment"]["cuda_headers"].as_str().unwrap();
    assert!(headers.starts_with("CUDA headers: "), "{headers}");
    // Once per case, in the manifest's folder, with the case's axis values.
    let log = std::fs::read_to_string(dir.path().join("params.log")).unwrap();
    assert_eq!(log, "{\"n\":1000}\n{\"n\":5000}\n");
}

/// A reference command that takes a while (0.4 s a run) and logs each run's parameters.
const SLOW_COPY: &str = "sleep 0.4\necho \"$KBENCH_PARAMS\" >> params.log\ncp \"$KBENCH_INPUTS/x.npy\" \"$KBENCH_OUTPUTS/y.npy\"\n";

/// Runs the study at `path` on the mock with `extra` arguments; returns the results and the
/// wall time.
fn timed_run_on_mock(path: &Path, extra: &[&str]) -> (Value, f64) {
    let dir = path.parent().unwrap();
    let _ = std::fs::remove_dir_all(dir.join("out"));
    let started = std::time::Instant::now();
    on_mock("run", path).args(extra).assert().success();
    let wall_s = started.elapsed().as_secs_f64();
    let results = results_in(&dir.join("out"));
    let doc = read_json(&results);
    // What the processes shared goes with the run.
    let left: Vec<_> = std::fs::read_dir(results.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    (doc, wall_s)
}

#[test]
fn the_reference_command_runs_once_per_grid_point_for_every_variant_and_process() {
    let one = tempfile::tempdir().unwrap();
    let (doc, one_variant_s) = timed_run_on_mock(&copy_study_of(one.path(), SLOW_COPY, 1), &[]);
    assert_eq!(doc["cases"].as_array().unwrap().len(), 2);
    let three = tempfile::tempdir().unwrap();
    let path = copy_study_of(three.path(), SLOW_COPY, 3);
    let (doc, three_variants_s) = timed_run_on_mock(&path, &[]);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    assert!(cases.iter().all(|c| c["status"] == "passed"), "{doc}");
    let log = std::fs::read_to_string(three.path().join("params.log")).unwrap();
    assert_eq!(log, "{\"n\":1000}\n{\"n\":5000}\n");
    // The first case of a point pays for the command; its overhead says so, the others' not.
    let reference_s: Vec<f64> = (cases.iter())
        .map(|c| c["overhead"]["reference_s"].as_f64().unwrap())
        .collect();
    assert!(
        reference_s[0] >= 0.35 && reference_s[3] >= 0.35,
        "{reference_s:?}"
    );
    assert!(
        reference_s[1] < 0.1 && reference_s[2] < 0.1,
        "{reference_s:?}"
    );
    assert!(
        three_variants_s <= 1.5 * one_variant_s,
        "3 variants took {three_variants_s:.2} s, 1 variant {one_variant_s:.2} s"
    );

    // Three processes a case: still once per point, through the run's shared folder.
    std::fs::remove_file(three.path().join("params.log")).unwrap();
    let (doc, _) = timed_run_on_mock(&path, &["--processes", "3"]);
    assert!(
        doc["cases"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["status"] == "passed"),
        "{doc}"
    );
    let log = std::fs::read_to_string(three.path().join("params.log")).unwrap();
    assert_eq!(log, "{\"n\":1000}\n{\"n\":5000}\n");
}

/// `copy_study` tuned over a block axis, its reference command told it depends on `n` alone
/// (`axes`), with `edit` applied to the manifest's text.
fn tuned_copy_study(dir: &Path, edit: impl Fn(String) -> String) -> PathBuf {
    let path = copy_study_of(dir, SLOW_COPY, 1);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("n = [1000, 5000]", "n = [1000, 5000]\nblock = [64, 128, 256]")
        .replace("timeout_s = 30 }", "timeout_s = 30, axes = [\"n\"] }")
        .replace(
            "[[custom.buffer]]\nname = \"x\"",
            "[[custom.axis]]\nname = \"block\"\nkind = \"block\"\n\n[[custom.buffer]]\nname = \"x\"",
        )
        .replace("block = \"256\"", "block = \"block\"");
    std::fs::write(&path, edit(text)).unwrap();
    path
}

#[test]
fn configurations_of_one_problem_share_one_run_of_a_reference_command_told_its_axes() {
    let dir = tempfile::tempdir().unwrap();
    let path = tuned_copy_study(dir.path(), |text| text);
    let (doc, _) = timed_run_on_mock(&path, &[]);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    assert!(cases.iter().all(|c| c["status"] == "passed"), "{doc}");
    // Once per problem, and told only the axes it depends on.
    let log = std::fs::read_to_string(dir.path().join("params.log")).unwrap();
    assert_eq!(log, "{\"n\":1000}\n{\"n\":5000}\n");

    // Axes the study has not, or an input that reads an axis left out, are refused.
    for (edit, message) in [
        (
            ("axes = [\"n\"]", "axes = [\"m\"]"),
            "no axis `m`: the study's axes are n, block",
        ),
        (
            ("axes = [\"n\"]", "axes = [\"n\", \"n\"]"),
            "axis `n` is named twice",
        ),
        (
            (
                "role = \"input\"",
                "role = \"input\"\ninit = { expr = \"i % block\" }",
            ),
            "buffer `x`'s init reads axis `block`, which these axes leave out",
        ),
    ] {
        let bad = tempfile::tempdir().unwrap();
        let path = tuned_copy_study(bad.path(), |text| text.replace(edit.0, edit.1));
        kbench(bad.path())
            .arg("check")
            .arg(&path)
            .assert()
            .code(2)
            .stderr(
                predicates::str::contains(message)
                    .and(predicates::str::contains("custom.reference_command.axes")),
            );
    }
}

#[test]
fn max_mismatches_passes_an_output_with_that_many_wrong_elements_and_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let copy = "cp \"$KBENCH_INPUTS/x.npy\" \"$KBENCH_OUTPUTS/y.npy\"\n";
    let path = copy_study(dir.path(), copy);
    // The mock's scripted wrong answer gets one element of each output wrong.
    let wrong_once = format!("{MOCK}\n[[event]]\nfault = \"wrong answer\"\n");
    let run = |manifest: &str| -> Value {
        std::fs::write(&path, manifest).unwrap();
        std::fs::write(dir.path().join("wrong.toml"), &wrong_once).unwrap();
        let _ = std::fs::remove_dir_all(dir.path().join("out"));
        kbench(dir.path())
            .env("KBENCH_MOCK_GPU", "wrong.toml")
            .arg("run")
            .arg(&path)
            .args([
                "--out-dir",
                "out",
                "--min-samples",
                "3",
                "--max-samples",
                "3",
            ])
            .output()
            .unwrap();
        read_json(&results_in(&dir.path().join("out")))
    };
    let text = std::fs::read_to_string(&path).unwrap();
    let strict = run(&text);
    let case = &strict["cases"][0];
    assert_eq!(case["status"], "accuracy_failed", "{case}");
    assert!(case["reason"]
        .as_str()
        .unwrap()
        .contains("1 of 1000 elements outside"));

    let one_allowed = text.replace(
        "tolerance = \"exact\"",
        "tolerance = \"exact\"\ncheck = { max_mismatches = 1 }",
    );
    let lenient = run(&one_allowed);
    for case in lenient["cases"].as_array().unwrap() {
        assert_eq!(case["status"], "passed", "{case}");
        let accuracy = &case["outputs"][0]["accuracy"];
        assert_eq!(accuracy["wrong_elements"], 1);
        assert_eq!(accuracy["mismatches_allowed"], 1);
    }

    // On an input it means nothing, and is refused where it stands.
    let on_input = text.replace(
        "role = \"input\"",
        "role = \"input\"\ncheck = { max_mismatches = 1 }",
    );
    std::fs::write(&path, on_input).unwrap();
    kbench(dir.path())
        .arg("check")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "`check` is for outputs; `x` is input (key `custom.buffer[0].check`)",
        ));
}

#[test]
fn declared_elements_give_elements_per_second_in_the_json_the_table_and_the_csv() {
    let dir = tempfile::tempdir().unwrap();
    let copy = "cp \"$KBENCH_INPUTS/x.npy\" \"$KBENCH_OUTPUTS/y.npy\"\n";
    let path = copy_study(dir.path(), copy);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace(
            "bytes = \"8 * n\"",
            "bytes = \"8 * n\"\nelements = \"2 * n\"",
        ),
    )
    .unwrap();
    let doc = run_manifest_on_mock(&path);
    for case in doc["cases"].as_array().unwrap() {
        assert_eq!(case["status"], "passed", "{case}");
        let n = case["params"]["n"].as_f64().unwrap();
        assert_eq!(case["elements"].as_f64().unwrap(), 2.0 * n);
        let median_s = case["summary"]["median_s"].as_f64().unwrap();
        let rate = case["elements_per_s"].as_f64().unwrap();
        assert!(
            (rate - 2.0 * n / median_s).abs() <= 1e-9 * rate,
            "{rate} {median_s}"
        );
    }
    let results = results_in(&dir.path().join("out"));
    let table = kbench(dir.path())
        .arg("report")
        .arg(&results)
        .args(["--wide"])
        .assert()
        .success();
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    assert!(table.contains("Gelem/s"), "{table}");
    let csv = kbench(dir.path())
        .arg("report")
        .arg(&results)
        .args(["--format", "csv"])
        .assert()
        .success();
    let csv = String::from_utf8(csv.get_output().stdout.clone()).unwrap();
    assert!(
        csv.lines().next().unwrap().ends_with(",elements_per_s"),
        "{csv}"
    );
}

#[test]
fn a_failing_reference_command_fails_its_cases_with_its_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_study(dir.path(), "echo 'no numpy here' >&2\nexit 3\n");
    let doc = run_manifest_on_mock(&path);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    for case in cases {
        assert_eq!(case["status"], "error", "{case}");
        let reason = case["reason"].as_str().unwrap();
        assert!(
            reason.contains("failed (exit code 3)") && reason.contains("no numpy here"),
            "{reason}"
        );
    }
}

#[test]
fn the_numpy_reference_example_runs_where_numpy_is_installed() {
    let numpy = std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !numpy {
        // CI installs NumPy (.ci/run): there a missing one is a failure, not a skip.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true and python3 has no NumPy: .ci/run should have installed it"
        );
        eprintln!("skipped: python3 with NumPy is not installed");
        return;
    }
    let (_, doc) = run_on_mock("examples/numpy_reference/saxpy.toml");
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 6);
    assert!(cases.iter().all(|c| c["status"] == "passed"), "{doc}");
}

/// The README's smallest custom study, as a newcomer copies it into a blank folder: its `.cu`
/// and `.toml` blocks (the first of each under "Benchmark your own kernel") pass `kbench check`
/// and run on the mock device, every case checked against the reference kernel.
#[test]
fn the_readmes_smallest_custom_study_runs_from_a_blank_folder() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let section = &readme[readme.find("## Benchmark your own kernel").unwrap()..];
    let block = |fence: &str| -> String {
        let start = section.find(fence).unwrap() + fence.len();
        let end = start + section[start..].find("```").unwrap();
        section[start..end].to_string()
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("scale.cu"), block("```cuda\n")).unwrap();
    std::fs::write(dir.path().join("scale.toml"), block("```toml\n")).unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    kbench(dir.path())
        .args(["check", "scale.toml"])
        .assert()
        .success();
    kbench(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "scale.toml", "--out-dir", "out", "--json"])
        .args(["--min-samples", "3", "--max-samples", "3"])
        .assert()
        .success()
        .stdout(predicates::str::contains("\"status\":\"passed\""))
        .stdout(predicates::str::contains("\"status\":\"error\"").not())
        .stdout(predicates::str::contains("\"status\":\"accuracy_failed\"").not())
        .stdout(predicates::str::contains("\"status\":\"skipped\"").not());
}

/// A study of every kind of input a kernel as written needs, on the mock device: a uint8 input,
/// a copy of it, a bfloat16 one, an index expression (CSR row offsets of three a row), and a 2-D
/// block that some points cannot run. The reference command checks what it received (it exits 1
/// on any difference, failing the case), so the inputs' values are what is tested; the points
/// with a block of 1536 threads are skipped with their reason, the rest pass.
#[test]
fn inputs_of_every_new_kind_reach_the_reference_and_unrunnable_points_are_skipped() {
    if std::process::Command::new("python3")
        .args(["-c", "import numpy"])
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI=true and python3 has no NumPy: .ci/run should have installed it"
        );
        eprintln!("skipped: python3 with NumPy is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), "#include <cuda_bf16.h>\n#include <cuda_fp8.h>\n__global__ void k(const __nv_fp8_e4m3* q, const unsigned char* b, const unsigned char* c, const __nv_bfloat16* h, const long long* rows, const int* ptr, const float* keys, const float4* v, float* y, int n) {}\n").unwrap();
    std::fs::write(
        dir.path().join("reference.py"),
        r#"import json, os, sys
import numpy as np
i, o = os.environ["KBENCH_INPUTS"], os.environ["KBENCH_OUTPUTS"]
n = json.loads(os.environ["KBENCH_PARAMS"])["n"]
b, c = np.load(os.path.join(i, "b.npy")), np.load(os.path.join(i, "c.npy"))
h, rows = np.load(os.path.join(i, "h.npy")), np.load(os.path.join(i, "rows.npy"))
problems = []
if b.dtype != np.uint8 or len(b) != n or (n > 100 and len(np.unique(b)) < 200): problems.append(f"b: {b.dtype} {b[:8]}")
if not np.array_equal(b, c): problems.append("c is not a copy of b")
if h.dtype != np.float32 or not np.array_equal(h.view(np.uint32) & 0xFFFF, np.zeros(n, np.uint32)): problems.append(f"h: {h.dtype}, not bfloat16 values as float32")
if not np.array_equal(rows, 3 * np.arange(n + 1)): problems.append(f"rows: {rows[:5]}")
ptr, keys = np.load(os.path.join(i, "ptr.npy")), np.load(os.path.join(i, "keys.npy"))
if ptr.dtype != np.int32 or len(ptr) != n + 1 or ptr[0] != 0 or ptr[-1] != 5 * n or np.any(np.diff(ptr) < 0): problems.append(f"ptr: {ptr[:5]} .. {ptr[-2:]}")
if n > 100 and len(np.unique(np.diff(ptr))) < 3: problems.append("ptr: evenly spaced")
if len(keys) != n or np.any(np.diff(keys) < 0) or keys.min() < -2 or keys.max() >= 2: problems.append(f"keys: {keys[:5]}")
q = np.load(os.path.join(i, "q.npy")).astype(np.float64)
m, e = np.frexp(q)
# e4m3: 4 significant bits (normals), multiples of 2^-9 (subnormals), at most 448.
if len(q) != n or np.any(np.abs(q) > 448) or not np.all((m * 16 == np.round(m * 16)) | (q * 512 == np.round(q * 512))) or (n > 100 and len(np.unique(q)) < 20): problems.append(f"q: {q[:8]}")
v = np.load(os.path.join(i, "v.npy"))
if v.dtype != np.float32 or len(v) != 4 * n or (n > 100 and len(np.unique(v)) < 4 * n - 5): problems.append(f"v: {v.dtype} {len(v)}")
if problems: sys.exit("; ".join(problems))
np.save(os.path.join(o, "y.npy"), b.astype(np.float32) + h)
"#,
    )
    .unwrap();
    let manifest = r#"[study]
name = "inputs"
algorithm = "custom"
seed = 4

[grid]
n = [1, 1009]
bx = [32, 48]
by = [16, 32]

[custom]
sources = ["k.cu"]
reference_command = { argv = ["python3", "reference.py"] }

[[custom.axis]]
name = "n"
kind = "size"
[[custom.axis]]
name = "bx"
kind = "int"
min = 1
max = 1024
[[custom.axis]]
name = "by"
kind = "int"
min = 1
max = 1024

[[custom.buffer]]
name = "q"
type = "f8e4m3"
length = "n"
role = "input"
init = { normal = [0.0, 100.0] }
[[custom.buffer]]
name = "b"
type = "u8"
length = "n"
role = "input"
init = { uniform = [0, 255] }
[[custom.buffer]]
name = "c"
type = "u8"
length = "n"
role = "input"
init = { copy = "b" }
[[custom.buffer]]
name = "h"
type = "bf16"
length = "n"
role = "input"
init = { normal = [0.0, 3.0] }
[[custom.buffer]]
name = "rows"
type = "i64"
length = "n + 1"
role = "input"
init = { expr = "3 * i" }
[[custom.buffer]]
name = "ptr"
type = "i32"
length = "n + 1"
role = "input"
init = { offsets = "5 * n" }
[[custom.buffer]]
name = "keys"
type = "f32"
length = "n"
role = "input"
init = { sorted = [-2.0, 2.0] }
[[custom.buffer]]
name = "v"
type = "f32"
width = 4
length = "n"
role = "input"
[[custom.buffer]]
name = "y"
type = "f32"
length = "n"
role = "output"
tolerance = { rel_eps = 4 }

[[custom.kernel]]
name = "k"
[[custom.kernel.launch]]
kernel = "k"
grid = "ceil_div(n, bx * by)"
block = ["bx", "by"]
args = [{ buffer = "q" }, { buffer = "b" }, { buffer = "c" }, { buffer = "h" }, { buffer = "rows" }, { buffer = "ptr" }, { buffer = "keys" }, { buffer = "v" }, { buffer = "y" }, { type = "int", value = "n" }]

[[variant]]
name = "k"
backend = "cuda"
kernel = "k"
"#;
    std::fs::write(dir.path().join("inputs.toml"), manifest).unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    kbench(dir.path())
        .args(["check", "inputs.toml"])
        .assert()
        .success()
        .stdout(predicates::str::contains(
            "2 of 8 grid points cannot run kernel `k` and will be skipped: the block has 1536 threads",
        ));
    let out = kbench(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "inputs.toml", "--out-dir", "out", "--json"])
        .args(["--min-samples", "3", "--max-samples", "3"])
        .assert()
        .success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let doc: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let threads =
            case["params"]["bx"].as_i64().unwrap() * case["params"]["by"].as_i64().unwrap();
        if threads > 1024 {
            assert_eq!(case["status"], "skipped", "{case}");
            assert!(
                case["reason"].as_str().unwrap().contains("1536 threads"),
                "{case}"
            );
        } else {
            assert_eq!(case["status"], "passed", "{case}");
        }
    }
}

/// What a per-variant reference command and a check command heard, one line a run each: the
/// variant, its kernel sequence and the case's parameters. The check command finds the three
/// folders and fails `copy_2`'s every answer.
const LOGGING_REFERENCE: &str = "echo \"reference $KBENCH_VARIANT $KBENCH_KERNEL $KBENCH_PARAMS\" >> runs.log\ncp \"$KBENCH_INPUTS/x.npy\" \"$KBENCH_OUTPUTS/y.npy\"\n";
const CHECK: &str = "echo \"check $KBENCH_VARIANT $KBENCH_KERNEL $KBENCH_PARAMS\" >> runs.log\ntest -f \"$KBENCH_INPUTS/x.npy\" && test -f \"$KBENCH_OUTPUTS/y.npy\" && test -f \"$KBENCH_REFERENCES/y.npy\" || exit 2\nif [ \"$KBENCH_VARIANT\" = copy_2 ]; then echo \"copy_2 is never right\" >&2; exit 1; fi\n";

#[test]
fn a_check_command_judges_each_answer_and_a_per_variant_reference_command_is_told_the_variant() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_study_of(dir.path(), LOGGING_REFERENCE, 2);
    std::fs::write(dir.path().join("check.sh"), CHECK).unwrap();
    let text = std::fs::read_to_string(&path).unwrap().replace(
        "timeout_s = 30 }",
        "timeout_s = 30, per_variant = true }\ncheck_command = { argv = [\"sh\", \"check.sh\"] }",
    );
    std::fs::write(&path, text).unwrap();
    kbench(dir.path())
        .arg("check")
        .arg(&path)
        .assert()
        .success();
    let doc = run_manifest_on_mock(&path);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let verdict = &case["check_command"];
        if case["variant"] == "copy" {
            assert_eq!(case["status"], "passed", "{case}");
            assert_eq!(verdict["passed"], true, "{case}");
        } else {
            assert_eq!(case["status"], "accuracy_failed", "{case}");
            assert_eq!(verdict["passed"], false, "{case}");
            assert_eq!(verdict["message"], "copy_2 is never right");
            assert_eq!(
                case["reason"],
                "wrong answer: the check command says: copy_2 is never right"
            );
        }
        // Every element of `y` passed the reference before the command had its say.
        assert_eq!(case["outputs"][0]["accuracy"]["passed"], true, "{case}");
    }
    // The reference ran for each variant at each point, told which; the check after each.
    let log = std::fs::read_to_string(dir.path().join("runs.log")).unwrap();
    let expected: Vec<String> = ["{\"n\":1000}", "{\"n\":5000}"]
        .iter()
        .flat_map(|p| {
            ["copy", "copy_2"].map(|v| format!("reference {v} copy {p}\ncheck {v} copy {p}\n"))
        })
        .collect();
    assert_eq!(log, expected.concat());

    // Judged by the command alone: no reference, no element compared.
    std::fs::write(
        dir.path().join("check.sh"),
        "test -f \"$KBENCH_OUTPUTS/y.npy\" && ! test -f \"$KBENCH_REFERENCES/y.npy\"\n",
    )
    .unwrap();
    let alone = std::fs::read_to_string(&path).unwrap().replace(
        "reference_command = { argv = [\"sh\", \"ref.sh\"], timeout_s = 30, per_variant = true }\n",
        "",
    );
    std::fs::write(&path, alone).unwrap();
    let _ = std::fs::remove_dir_all(dir.path().join("out"));
    let doc = run_manifest_on_mock(&path);
    for case in doc["cases"].as_array().unwrap() {
        assert_eq!(case["status"], "passed", "{case}");
        assert_eq!(case["check_command"]["passed"], true, "{case}");
        assert_eq!(case["outputs"], serde_json::json!([]), "{case}");
    }
}

#[test]
fn malformed_check_commands_are_refused_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = copy_study(dir.path(), "true\n");
    std::fs::write(dir.path().join("check.sh"), "exit 0\n").unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let with_check = |command: &str| {
        text.replace(
            "reference_command = { argv = [\"sh\", \"ref.sh\"], timeout_s = 30 }",
            &format!("check_command = {command}"),
        )
    };
    for (manifest, message) in [
        (
            with_check("{ argv = [\"./check.sh\"] }"),
            "check.sh` is not executable: `chmod +x` it, or name its interpreter first ([\"python3\", \"./check.sh\"]) (key `custom.check_command.argv`)",
        ),
        (
            with_check("{ argv = [\"kbench-no-such-checker\"] }"),
            "no program `kbench-no-such-checker` on PATH",
        ),
        (with_check("{ argv = [] }"), "`argv` names no program"),
        (
            with_check("{ argv = [\"sh\", \"check.sh\"], timeout_s = 0.0 }"),
            "`timeout_s` must be a positive number of seconds, not 0 (key `custom.check_command.timeout_s`)",
        ),
        (
            with_check("{ argv = [\"sh\", \"check.sh\"], per_variant = true }"),
            "unknown field `per_variant`",
        ),
        (
            with_check("{ argv = [\"sh\", \"check.sh\"] }")
                .replace("check_command = {", "# check_command = {")
                .replace("tolerance = \"exact\"", "expected = \"check_command\""),
            "output `y` is judged by the check command, and [custom] declares none",
        ),
    ] {
        std::fs::write(&path, manifest).unwrap();
        kbench(dir.path())
            .arg("check")
            .arg(&path)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(message).and(predicates::str::contains("copy.toml:")));
    }
}

/// `copy_study` whose `y` is the kernels' scratch and whose kernel sequence is timed only:
/// nothing to check.
fn timing_only_study(dir: &Path) -> (PathBuf, String) {
    let path = copy_study_of(dir, "true\n", 2);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace(
            "reference_command = { argv = [\"sh\", \"ref.sh\"], timeout_s = 30 }\n",
            "",
        )
        .replace(
            "role = \"output\"\ntolerance = \"exact\"",
            "role = \"scratch\"",
        );
    (path, text)
}

#[test]
fn a_timing_only_kernel_sequence_runs_unchecked_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (path, text) = timing_only_study(dir.path());
    // Without `unchecked`, a study with nothing to check is refused at its kernel.
    std::fs::write(&path, &text).unwrap();
    kbench(dir.path())
        .arg("check")
        .arg(&path)
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "no buffer has role \"output\" or \"inout\", so kernel `copy` has nothing to check: declare its outputs, or say it is timed only with `unchecked = true` (key `custom.kernel[0]`)",
        ));
    let unchecked = text.replace(
        "name = \"copy\"\n\n[[custom.kernel.launch]]",
        "name = \"copy\"\nunchecked = true\n\n[[custom.kernel.launch]]",
    );
    std::fs::write(&path, &unchecked).unwrap();
    on_mock("run", &path)
        .args(["--export", "csv=table.csv"])
        .assert()
        .success();
    let doc = read_json(&results_in(&dir.path().join("out")));
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        assert_eq!(case["status"], "passed", "{case}");
        assert_eq!(case["unchecked"], true, "{case}");
        assert_eq!(case["outputs"], serde_json::json!([]), "{case}");
    }
    let csv = std::fs::read_to_string(dir.path().join("table.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",unchecked"), "{csv}");
    assert!(csv.lines().nth(1).unwrap().ends_with(",true"), "{csv}");
    let table = kbench(dir.path())
        .arg("report")
        .arg(results_in(&dir.path().join("out")))
        .assert()
        .success();
    let table = String::from_utf8(table.get_output().stdout.clone()).unwrap();
    assert!(
        table.contains("4 cases: 4 passed (4 unchecked: timed only), 0 failed"),
        "{table}"
    );
    assert!(table.contains("unchecked │"), "{table}");
}

#[test]
fn resuming_runs_only_the_commands_the_manifest_on_disk_names() {
    let dir = tempfile::tempdir().unwrap();
    let copy = "echo ran >> runs.log\ncp \"$KBENCH_INPUTS/x.npy\" \"$KBENCH_OUTPUTS/y.npy\"\n";
    let path = copy_study(dir.path(), copy);
    run_manifest_on_mock(&path);
    let results = results_in(&dir.path().join("out"));
    let mut doc = read_json(&results);
    // As if interrupted after its first case.
    doc["cases"].as_array_mut().unwrap().truncate(1);
    doc["complete"] = Value::Bool(false);
    let resume = |doc: &Value| {
        std::fs::write(&results, serde_json::to_string(doc).unwrap()).unwrap();
        kbench(dir.path())
            .env("KBENCH_MOCK_GPU", "mock.toml")
            .args(["run", "--resume"])
            .arg(&results)
            .assert()
    };
    // An edited results file names another program: refused, and nothing runs.
    let mut edited = doc.clone();
    let toml = edited["manifest"]["toml"].as_str().unwrap().to_string();
    edited["manifest"]["toml"] = Value::String(toml.replace(
        "argv = [\"sh\", \"ref.sh\"]",
        "argv = [\"sh\", \"-c\", \"touch pwned\"]",
    ));
    resume(&edited).code(2).stderr(
        predicates::str::contains(
            "its study runs `sh -c touch pwned`, and the manifest it was recorded from",
        )
        .and(predicates::str::contains(
            "differs from the one embedded in the results; a results file is data, so resuming runs only the commands a manifest on disk names",
        )),
    );
    assert!(!dir.path().join("pwned").exists());
    // So is a manifest changed on disk since the run.
    let on_disk = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, on_disk.replace("timeout_s = 30", "timeout_s = 31")).unwrap();
    resume(&doc)
        .code(2)
        .stderr(predicates::str::contains("differs from the one embedded"));
    // The manifest as it was: the resume runs the command for the case left.
    std::fs::write(&path, &on_disk).unwrap();
    std::fs::remove_file(dir.path().join("runs.log")).unwrap();
    resume(&doc).success();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("runs.log")).unwrap(),
        "ran\n"
    );
    assert_eq!(read_json(&results)["cases"].as_array().unwrap().len(), 2);
}

#[test]
fn a_tunes_fresh_workers_share_the_reference_commands_answer() {
    let dir = tempfile::tempdir().unwrap();
    let path = tuned_copy_study(dir.path(), |text| {
        format!("{text}\n[tune]\naxes = [\"block\"]\nstrategy = \"random\"\nbudget = {{ evaluations = 3 }}\ntop = 2\nrounds = 2\nmin_rounds = 2\n")
    });
    on_mock("tune", &path).assert().success();
    // Two problems (n = 1000, 5000), each evaluated and re-measured in several fresh workers:
    // the command ran once for each.
    let log = std::fs::read_to_string(dir.path().join("params.log")).unwrap();
    assert_eq!(log, "{\"n\":1000}\n{\"n\":5000}\n");
}

/// Ctrl-C while a reference command runs: the run stops, what the command started (here a
/// shell's child, in the command's own process group) is gone with its worker, and the folder
/// of the case's inputs it was given is removed (18 of 25 interrupt trials left both behind).
#[test]
fn an_interrupted_run_leaves_no_reference_command_or_its_inputs_behind() {
    let dir = tempfile::tempdir().unwrap();
    copy_study(
        dir.path(),
        "sleep 60 &\necho \"$! $KBENCH_INPUTS\" > ref.pid.part && mv ref.pid.part ref.pid\nwait\n",
    );
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    let mut child = std::process::Command::new(crate::common::kbench_exe())
        .current_dir(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["run", "copy.toml", "--out-dir", "out"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = dir.path().join("ref.pid");
    let started = std::time::Instant::now();
    while !pid_file.exists() {
        assert!(
            started.elapsed().as_secs() < 60,
            "the reference command never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let said = std::fs::read_to_string(&pid_file).unwrap();
    let (pid, inputs) = said.trim().split_once(' ').unwrap();
    let inputs = PathBuf::from(inputs);
    assert!(inputs.is_dir(), "{}", inputs.display());
    // SAFETY: a signal to the kbench this test started.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    // A zombie (state Z) is dead, waiting only to be reaped.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    let ended = std::time::Instant::now();
    while alive() && ended.elapsed().as_secs() < 5 {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !alive(),
        "the reference command's child (pid {pid}) outlived the run"
    );
    let folder = inputs.parent().unwrap();
    assert!(!folder.exists(), "{} was left behind", folder.display());
}
