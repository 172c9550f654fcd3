//! GPU tests of a user's kernel as written: the bf16 softmax (a C++ template on the block size
//! and element type, with CUB's BlockReduce and CUDA's own headers) and the uint8 histogram
//! examples pass every case on the GPU, beside their f32 twins; a `__constant__` variable is
//! filled from its buffer; and a launch the kernel cannot run (more threads than its
//! `__launch_bounds__`) is skipped with its reason while the rest of the study passes. Needs a
//! CUDA GPU: ignored by a plain `cargo test`, run on the GPU machine with `--include-ignored`,
//! where a missing GPU fails it.

use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `kbench run manifest` in `dir` with a few samples a case; the results document's cases.
fn run(dir: &Path, manifest: &Path) -> Vec<Value> {
    let out = Command::new(common::kbench_exe())
        .current_dir(dir)
        .env_remove("KBENCH_MOCK_GPU")
        .arg("run")
        .arg(manifest)
        .args(["--out-dir", "out", "--warmup", "1", "--min-samples", "3"])
        .args(["--max-samples", "3"])
        .output()
        .unwrap();
    println!("{}", String::from_utf8_lossy(&out.stdout));
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    let study_dir = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let doc = common::read(&common::results_file_in(&study_dir));
    assert!(
        doc["environment"]["device"].is_object(),
        "ran without a GPU"
    );
    doc["cases"].as_array().unwrap().clone()
}

fn example(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_bf16_softmax_and_the_uint8_histogram_pass_beside_their_f32_twins() {
    for (manifest, cases_expected, narrow) in [
        ("examples/softmax_bf16/softmax.toml", 36, "bf16"),
        ("examples/histogram_u8/histogram.toml", 48, "u8"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let cases = run(dir.path(), &example(manifest));
        assert_eq!(cases.len(), cases_expected, "{manifest}");
        for case in &cases {
            assert_eq!(case["status"], "passed", "{manifest}: {case}");
        }
        for dtype in [narrow, "f32"] {
            let of_type = cases
                .iter()
                .filter(|c| c["params"]["dtype"] == dtype)
                .count();
            assert_eq!(of_type, cases_expected / 2, "{manifest}: {dtype}");
        }
    }
}

/// `scaled` multiplies by the 16 coefficients of a `__constant__` array, `scaled_ref` by the
/// same 16 passed as a buffer (the reference); `bounded` is declared for at most 128 threads a
/// block and launched with 128 and 256.
const SOURCE: &str = r#"
__constant__ float coeffs[16];
__global__ void scaled(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * coeffs[i % 16];
}
__global__ void scaled_ref(const float* x, const float* c, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * c[i % 16];
}
__global__ void __launch_bounds__(128) bounded(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * coeffs[i % 16];
}
"#;

const MANIFEST: &str = r#"
[study]
name = "constants"
algorithm = "custom"
seed = 3

[grid]
n = [1, 1000, 65537]
block = [128, 256]

[custom]
sources = ["constants.cu"]
reference = "reference"

[[custom.axis]]
name = "n"
kind = "size"

[[custom.axis]]
name = "block"
kind = "block"

[[custom.buffer]]
name = "x"
type = "f32"
length = "n"
role = "input"
init = { uniform = [-1.0, 1.0] }

[[custom.buffer]]
name = "c"
type = "f32"
length = "16"
role = "input"
init = { uniform = [0.5, 2.0] }
constant = "coeffs"

[[custom.buffer]]
name = "y"
type = "f32"
length = "n"
role = "output"
tolerance = "exact"

[[custom.kernel]]
name = "reference"
[[custom.kernel.launch]]
kernel = "scaled_ref"
grid = "ceil_div(n, block)"
block = "block"
args = [{ buffer = "x" }, { buffer = "c" }, { buffer = "y" }, { type = "int", value = "n" }]

[[custom.kernel]]
name = "scaled"
[[custom.kernel.launch]]
kernel = "scaled"
grid = "ceil_div(n, block)"
block = "block"
args = [{ buffer = "x" }, { buffer = "y" }, { type = "int", value = "n" }]

[[custom.kernel]]
name = "bounded"
[[custom.kernel.launch]]
kernel = "bounded"
grid = "ceil_div(n, block)"
block = "block"
args = [{ buffer = "x" }, { buffer = "y" }, { type = "int", value = "n" }]

[[variant]]
name = "scaled"
backend = "cuda"
kernel = "scaled"

[[variant]]
name = "bounded"
backend = "cuda"
kernel = "bounded"
"#;

#[test]
#[ignore = "needs a CUDA GPU"]
fn a_constant_array_is_filled_and_a_block_beyond_the_launch_bounds_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("constants.cu"), SOURCE).unwrap();
    std::fs::write(dir.path().join("constants.toml"), MANIFEST).unwrap();
    let cases = run(dir.path(), &dir.path().join("constants.toml"));
    assert_eq!(cases.len(), 12);
    for case in &cases {
        let bounded_too_big = case["variant"] == "bounded" && case["params"]["block"] == 256;
        if bounded_too_big {
            assert_eq!(case["status"], "skipped", "{case}");
            let reason = case["reason"].as_str().unwrap();
            assert!(
                reason.contains("runs at most 128 threads a block"),
                "{reason}"
            );
        } else {
            assert_eq!(case["status"], "passed", "{case}");
        }
    }
}
