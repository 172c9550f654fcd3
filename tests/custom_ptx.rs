//! A custom study's launches checked against its kernels' PTX parameters (`kbench check`, and
//! before `kbench run`): a launch with an argument too few or of the wrong size, a kernel the
//! sources do not define, and sources that do not compile are refused at the manifest's line;
//! the examples pass. Every test needs NVRTC (no GPU): CI runs them with `--include-ignored`.

use std::path::{Path, PathBuf};

use kbench::manifest::{self, ManifestError};

/// The kernel the base study launches: `T` and `BLOCK` come from its axes.
const KERNEL_SOURCE: &str = "extern \"C\" __global__ void scale(const T* x, T* y, int n) {\n  \
    int i = blockIdx.x * BLOCK + threadIdx.x;\n  if (i < n) y[i] = 2 * x[i];\n}\n";

/// A valid custom study; each test breaks one thing in it.
const BASE: &str = r#"[study]
name = "c"
algorithm = "custom"
seed = 1

[grid]
n = [1000, 4096]
dtype = ["f32", "f64"]
block = [128, 256]

[custom]
sources = ["k.cu"]
reference = "simple"
bytes = "2 * n * sizeof(dtype)"

[[custom.axis]]
name = "n"
kind = "size"

[[custom.axis]]
name = "dtype"
kind = "dtype"

[[custom.axis]]
name = "block"
kind = "block"

[[custom.buffer]]
name = "x"
type = "dtype"
length = "n"
role = "input"

[[custom.buffer]]
name = "y"
type = "dtype"
length = "n"
role = "output"

[[custom.kernel]]
name = "simple"

[[custom.kernel.launch]]
kernel = "scale"
grid = "ceil_div(n, block)"
block = "block"
args = [{ buffer = "x" }, { buffer = "y" }, { type = "int", value = "n" }]

[[variant]]
name = "simple"
backend = "cuda"
kernel = "simple"
"#;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn line_of(text: &str, needle: &str) -> usize {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not in the manifest"));
    text[..at].matches('\n').count() + 1
}

/// The base study with `from` replaced by `to` (and `source` as its `.cu` file, named
/// `source_name`), loaded and checked against its kernels' parameters.
fn check(
    from: &str,
    to: &str,
    source_name: &str,
    source: &str,
) -> (String, Result<(), ManifestError>) {
    assert!(BASE.contains(from), "`{from}` is not in the base manifest");
    let text = BASE
        .replacen(from, to, 1)
        .replace("\"k.cu\"", &format!("\"{source_name}\""));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(source_name), source).unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, &text).unwrap();
    let m = manifest::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let checked = manifest::check_kernel_params(&m);
    (text, checked)
}

/// Asserts the check failed with `message` in its message, at the line holding `line_needle`.
fn assert_refused(
    text: &str,
    checked: Result<(), ManifestError>,
    message: &str,
    line_needle: &str,
) {
    let e = checked.expect_err("the manifest was accepted");
    assert!(e.message.contains(message), "expected `{message}` in:\n{e}");
    assert_eq!(e.line, line_of(text, line_needle), "{e}");
}

#[test]
#[ignore = "needs NVRTC"]
fn the_base_study_passes() {
    let (_, checked) = check("", "", "k.cu", KERNEL_SOURCE);
    checked.unwrap_or_else(|e| panic!("{e}"));
}

#[test]
#[ignore = "needs NVRTC"]
fn a_launch_with_an_argument_too_few_is_refused_at_its_args() {
    let (text, checked) = check(
        ", { type = \"int\", value = \"n\" }]",
        "]",
        "k.cu",
        KERNEL_SOURCE,
    );
    assert_refused(
        &text,
        checked,
        "kernel `scale` takes 3 parameters (8, 8, 4 bytes); the launch passes 2",
        "args = ",
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn an_int_where_the_kernel_takes_a_double_is_refused_at_the_argument() {
    let source = KERNEL_SOURCE.replace("int n)", "double n)");
    let (text, checked) = check("", "", "k.cu", &source);
    assert_refused(
        &text,
        checked,
        "kernel `scale`'s parameter 3 (.f64) is 8 bytes; the launch passes `n` there, of 4 bytes",
        "args = ",
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn a_kernel_the_sources_do_not_define_is_refused_at_its_name() {
    let (text, checked) = check(
        "kernel = \"scale\"",
        "kernel = \"scal\"",
        "k.cu",
        KERNEL_SOURCE,
    );
    assert_refused(
        &text,
        checked,
        "the kernel `scal` is not a __global__ function of the sources",
        "kernel = \"scal\"",
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn a_source_that_does_not_compile_shows_nvrtcs_log_with_the_users_file_and_line() {
    // Line 3 of the user's file lacks its semicolon: NVRTC finds out at line 4.
    let source = KERNEL_SOURCE.replace("2 * x[i];", "2 * x[i]");
    let (text, checked) = check("", "", "reduce.cu", &source);
    let e = checked.expect_err("the manifest was accepted");
    assert!(e.message.contains("the sources do not compile"), "{e}");
    assert!(
        e.message.contains("reduce.cu(4): error: expected a \";\""),
        "{e}"
    );
    assert_eq!(e.line, line_of(&text, "sources = "), "{e}");
}

#[test]
#[ignore = "needs NVRTC"]
fn the_examples_pass() {
    for example in [
        "examples/reduction/reduction.toml",
        "examples/transpose/transpose.toml",
        "examples/histogram_u8/histogram.toml",
        // CUB's BlockReduce: CCCL's headers must be found beside NVRTC (.ci/run puts them there).
        "examples/softmax_bf16/softmax.toml",
    ] {
        let m = manifest::load(&repo(example)).unwrap_or_else(|e| panic!("{e}"));
        manifest::check_kernel_params(&m).unwrap_or_else(|e| panic!("{example}: {e}"));
    }
}

/// A C++ template kernel, a `__constant__` array, and a kernel whose parameter is named like an
/// int axis: what the kernel-as-written checks below run on.
const TEMPLATE_SOURCE: &str = "__constant__ float coeffs[16];\n\
template <int BLOCK_SIZE, typename E>\n\
__global__ void tscale(const E* x, E* y, int n) {\n  \
    int i = blockIdx.x * BLOCK_SIZE + threadIdx.x;\n  if (i < n) y[i] = coeffs[i % 16] * x[i];\n}\n";

#[test]
#[ignore = "needs NVRTC"]
fn a_template_instance_is_launched_by_its_name_and_its_arguments_checked() {
    let named = "kernel = \"tscale<BLOCK, T>\"";
    let (_, checked) = check("kernel = \"scale\"", named, "t.cu", TEMPLATE_SOURCE);
    checked.unwrap_or_else(|e| panic!("{e}"));
    // The instance's parameters are checked as an extern "C" kernel's are.
    let (text, checked) = check(
        "kernel = \"scale\"\ngrid = \"ceil_div(n, block)\"\nblock = \"block\"\nargs = [{ buffer = \"x\" }, { buffer = \"y\" }, { type = \"int\", value = \"n\" }]",
        "kernel = \"tscale<BLOCK, T>\"\ngrid = \"ceil_div(n, block)\"\nblock = \"block\"\nargs = [{ buffer = \"x\" }, { buffer = \"y\" }]",
        "t.cu",
        TEMPLATE_SOURCE,
    );
    assert_refused(
        &text,
        checked,
        "takes 3 parameters (8, 8, 4 bytes); the launch passes 2",
        "args = ",
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn a_name_that_does_not_instantiate_is_refused_at_the_launch() {
    let (text, checked) = check(
        "kernel = \"scale\"",
        "kernel = \"tscale<BLOCK, T, 3>\"",
        "t.cu",
        TEMPLATE_SOURCE,
    );
    assert_refused(
        &text,
        checked,
        "the kernel `tscale<BLOCK, T, 3>` (`tscale<128, float, 3>` at this point) does not name a __global__ function the sources define or can instantiate",
        "kernel = \"tscale",
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn a_constant_the_sources_lack_or_cannot_hold_is_refused_at_the_buffer() {
    let buffer = "[[custom.kernel]]";
    let constant = |symbol: &str, length: u32| {
        format!("[[custom.buffer]]\nname = \"c\"\ntype = \"f32\"\nlength = \"{length}\"\nrole = \"input\"\nconstant = \"{symbol}\"\n\n[[custom.kernel]]")
    };
    let source = format!("{TEMPLATE_SOURCE}{KERNEL_SOURCE}");
    let (_, checked) = check(buffer, &constant("coeffs", 16), "t.cu", &source);
    checked.unwrap_or_else(|e| panic!("{e}"));
    let (text, checked) = check(buffer, &constant("filter", 16), "t.cu", &source);
    assert_refused(&text, checked, "the sources declare no __constant__ variable `filter` at file scope (they declare: coeffs)", "constant = ");
    let (text, checked) = check(buffer, &constant("coeffs", 17), "t.cu", &source);
    assert_refused(
        &text,
        checked,
        "buffer `c` has 68 bytes, and `coeffs` holds 64",
        "constant = ",
    );
}

#[test]
#[ignore = "needs NVRTC"]
fn a_parameter_named_like_an_int_axis_gets_the_way_out_in_the_message() {
    // The int axis `stride` is `#define stride 2`, which turns the parameter into `int 2`.
    let source = "extern \"C\" __global__ void scale(const T* x, T* y, int stride) {}\n";
    let (text, checked) = check(
        "[[custom.buffer]]",
        "[[custom.axis]]\nname = \"stride\"\nkind = \"int\"\ndefault = 2\n\n[[custom.buffer]]",
        "k.cu",
        source,
    );
    assert_refused(
        &text,
        checked,
        "add `undefine = [\"stride\"]` to [custom]",
        "sources = ",
    );
}

/// A run's workers share their compiles: once a process shares them in a folder, a compile of
/// the same file, options and names is read from there (here, a planted PTX proves it is read),
/// and a different define set is compiled anew.
#[test]
#[ignore = "needs NVRTC"]
fn compiles_shared_in_a_folder_are_read_back_rather_than_made_again() {
    use kbench::device::nvrtc;
    let dir = tempfile::tempdir().unwrap();
    nvrtc::share_compiles_in(dir.path().to_path_buf());
    let source = "extern \"C\" __global__ void shared_compile_probe(float* y) { y[0] = K; }\n";
    let options = ["-DK=3".to_string()];
    // The folder is this process's: the other tests of this binary keep their compiles there
    // too, so the probe's are told apart by their contents.
    let probes = || -> Vec<std::path::PathBuf> {
        (std::fs::read_dir(dir.path()).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .filter(|p| {
                let text = std::fs::read_to_string(p).unwrap_or_default();
                text.contains("shared_compile_probe") || text.contains("// planted")
            })
            .collect()
    };
    let first = nvrtc::compile_file("probe.cu", source, "sm_80", &options, &[]).unwrap();
    assert!(first.ptx.contains("shared_compile_probe"));
    let kept = probes();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let planted = kbench::device::nvrtc::Compiled {
        ptx: "// planted".into(),
        lowered: Vec::new(),
    };
    std::fs::write(&kept[0], serde_json::to_vec(&planted).unwrap()).unwrap();
    let again = nvrtc::compile_file("probe.cu", source, "sm_80", &options, &[]).unwrap();
    assert_eq!(again.ptx, "// planted");
    let other = ["-DK=4".to_string()];
    let fresh = nvrtc::compile_file("probe.cu", source, "sm_80", &other, &[]).unwrap();
    assert!(fresh.ptx.contains("shared_compile_probe"));
    assert_eq!(probes().len(), 2);
}
