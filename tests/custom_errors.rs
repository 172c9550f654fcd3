//! Malformed custom studies (`algorithm = "custom"`, a `[custom]` table): each is refused before
//! anything runs, with a message naming the fault, at the line of the fault.

use std::path::Path;

const KERNEL_SOURCE: &str = "extern \"C\" __global__ void scale(const T* x, T* y, int n) {}\n";

/// A valid custom study; each case below breaks one thing in it.
const BASE: &str = r#"[study]
name = "c"
algorithm = "custom"
seed = 1

[grid]
n = [1000, 4096]
dtype = ["f32"]
block = [128, 256]

[custom]
sources = ["k.cu"]
reference = "simple"
bytes = "2 * n * sizeof(dtype)"
flops = "n"

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
init = { uniform = [-1.0, 1.0] }

[[custom.buffer]]
name = "y"
type = "dtype"
length = "n"
role = "output"
tolerance = { rel = 1e-6 }

[[custom.buffer]]
name = "tmp"
type = "f32"
length = "ceil_div(n, block)"
role = "scratch"

[[custom.kernel]]
name = "simple"

[[custom.kernel.launch]]
kernel = "scale"
grid = "ceil_div(n, block)"
block = "block"
shared_bytes = "0"
args = [{ buffer = "x" }, { buffer = "y" }, { type = "int", value = "n" }]

[[variant]]
name = "simple"
backend = "cuda"
kernel = "simple"
"#;

/// (what is wrong, text replaced, replacement, a fragment of the message, a fragment of the
/// line the error must point at).
const CASES: &[(&str, &str, &str, &str, &str)] = &[
    ("missing source file", "sources = [\"k.cu\"]", "sources = [\"nope.cu\"]", "cannot read source file", "sources ="),
    ("no sources", "sources = [\"k.cu\"]", "sources = []", "at least one source file", "[custom]"),
    ("missing include folder", "sources = [\"k.cu\"]", "sources = [\"k.cu\"]\ninclude_dirs = [\"inc\"]", "no folder", "include_dirs"),
    ("misspelt key in [custom]", "flops = \"n\"", "flops = \"n\"\nsoucres = [\"k.cu\"]", "unknown field `soucres`", "soucres"),
    ("custom table under another algorithm", "algorithm = \"custom\"", "algorithm = \"reduce\"", "set `algorithm = \"custom\"`", "[custom]"),
    ("unknown axis in a length", "length = \"ceil_div(n, block)\"", "length = \"ceil_div(m, block)\"", "unknown name `m`", "ceil_div(m"),
    ("syntax error in a length", "length = \"ceil_div(n, block)\"", "length = \"ceil_div(n, block\"", "expected `,` or `)`", "ceil_div(n, block\""),
    ("unknown function", "length = \"ceil_div(n, block)\"", "length = \"ceildiv(n, block)\"", "unknown function `ceildiv`", "ceildiv"),
    ("negative length", "length = \"ceil_div(n, block)\"", "length = \"n - 5000\"", "below 0", "n - 5000"),
    ("overflowing length", "length = \"ceil_div(n, block)\"", "length = \"n * 9223372036854775807\"", "overflows", "9223372036854775807"),
    ("grid of 0", "grid = \"ceil_div(n, block)\"", "grid = \"n / 5000\"", "grid is 0", "n / 5000"),
    ("block above 1024", "block = \"block\"\nshared", "block = \"block * 8\"\nshared", "above the limit of 1024", "block * 8"),
    ("block of 0", "block = \"block\"\nshared", "block = \"block - block\"\nshared", "block is 0", "block - block"),
    ("3-d block above 1024", "block = \"block\"\nshared", "block = [\"block\", \"8\"]\nshared", "threads, above 1024", "block = [\"block\""),
    ("unknown buffer in a launch", "{ buffer = \"y\" }", "{ buffer = \"z\" }", "no buffer `z`", "buffer = \"z\""),
    ("reference naming no kernel", "reference = \"simple\"", "reference = \"simplest\"", "reference `simplest` is not a kernel", "reference ="),
    ("duplicate buffer", "name = \"tmp\"", "name = \"x\"", "two buffers are named `x`", "name = \"x\"\ntype = \"f32\""),
    ("duplicate axis", "name = \"block\"\nkind = \"block\"", "name = \"n\"\nkind = \"block\"", "two axes are named `n`", "name = \"n\"\nkind = \"block\""),
    ("duplicate kernel", "[[variant]]", "[[custom.kernel]]\nname = \"simple\"\n\n[[custom.kernel.launch]]\nkernel = \"scale\"\ngrid = \"1\"\nblock = \"32\"\n\n[[variant]]", "two kernels are named `simple`", "name = \"simple\"\n\n[[custom.kernel.launch]]\nkernel = \"scale\"\ngrid = \"1\""),
    ("unknown axis kind", "kind = \"size\"", "kind = \"sizes\"", "unknown axis kind `sizes`", "kind = \"sizes\""),
    ("choice without values", "kind = \"size\"", "kind = \"choice\"", "needs its names", "kind = \"choice\""),
    ("unknown element type", "type = \"f32\"", "type = \"f16\"", "unknown element type `f16`", "type = \"f16\""),
    ("unknown role", "role = \"scratch\"", "role = \"temp\"", "unknown role `temp`", "role = \"temp\""),
    ("init on an output", "tolerance = { rel = 1e-6 }", "init = \"zeros\"", "`init` sets an input's contents", "init = \"zeros\""),
    ("bad init", "init = { uniform = [-1.0, 1.0] }", "init = { uniform = [1.0, -1.0] }", "lo < hi", "uniform = [1.0"),
    ("missing .npy init", "init = { uniform = [-1.0, 1.0] }", "init = { npy = \"x.npy\" }", "no .npy file", "npy = "),
    ("missing expected .npy", "tolerance = { rel = 1e-6 }", "expected = \"y.npy\"", "no .npy file", "expected ="),
    ("bad tolerance", "tolerance = { rel = 1e-6 }", "tolerance = { rel = -1 }", "a tolerance is", "tolerance ="),
    ("tolerance on an input", "init = { uniform = [-1.0, 1.0] }", "tolerance = \"exact\"", "`tolerance` is for outputs", "tolerance = \"exact\""),
    ("unknown C type", "{ type = \"int\", value = \"n\" }", "{ type = \"size\", value = \"n\" }", "unknown C type `size`", "type = \"size\""),
    ("argument neither buffer nor scalar", "{ type = \"int\", value = \"n\" }", "{ value = \"n\" }", "an argument is", "{ value = \"n\" }"),
    ("argument too big for int", "{ type = \"int\", value = \"n\" }", "{ type = \"int\", value = \"n * 1000000000\" }", "does not fit a C `int`", "n * 1000000000"),
    ("@read outside a repeat", "{ buffer = \"x\" }", "{ buffer = \"@read\" }", "has no `repeat`", "@read"),
    ("repeat swapping one buffer", "shared_bytes = \"0\"", "shared_bytes = \"0\"\nrepeat = { var = \"len\", from = \"n\", next = \"ceil_div(len, block)\", while = \"len > 1\", read = \"x\", write = \"y\", swap = [\"tmp\", \"tmp\"] }", "the same buffer twice", "repeat ="),
    ("repeat that never ends", "shared_bytes = \"0\"", "shared_bytes = \"0\"\nrepeat = { var = \"len\", from = \"n\", next = \"len\", while = \"len > 1\", read = \"x\", write = \"y\", swap = [\"tmp\", \"x\"] }", "repeats more than 64 times", "repeat ="),
    ("loop variable named like an axis", "shared_bytes = \"0\"", "shared_bytes = \"0\"\nrepeat = { var = \"n\", from = \"n\", next = \"n\", while = \"n > 1\", read = \"x\", write = \"y\", swap = [\"tmp\", \"x\"] }", "must be a new name", "repeat ="),
    ("variant naming an unknown kernel", "kernel = \"simple\"\n", "kernel = \"fancy\"\n", "has no cuda kernel `fancy`", "kernel = \"fancy\""),
    ("no output buffer", "role = \"output\"\ntolerance = { rel = 1e-6 }", "role = \"input\"", "no buffer has role \"output\"", "[[custom.buffer]]"),
    ("dtype buffer without a dtype axis", "name = \"dtype\"\nkind = \"dtype\"", "name = \"m\"\nkind = \"size\"\ndefault = 3", "type \"dtype\" follows the `dtype` axis", "type = \"dtype\""),
    ("unknown name in bytes", "bytes = \"2 * n * sizeof(dtype)\"", "bytes = \"2 * n * sizeof(dtyp)\"", "unknown name `dtyp`", "bytes ="),
    ("comparison written with =", "flops = \"n\"", "flops = \"n = 1\"", "write `==`", "flops ="),
    ("define that is not an identifier", "flops = \"n\"", "flops = \"n\"\ndefines = { 2X = \"n\" }", "not a C identifier", "defines ="),
    ("axis not in the study in [grid]", "block = [128, 256]", "block = [128, 256]\nitems = [4]", "`items` is not an axis of algorithm `custom`", "items = [4]"),
    ("block axis value that is not a block", "block = [128, 256]", "block = [128, 2048]", "power of two from 32 to 1024", "block = [128, 2048]"),
    ("output expecting a reference command none declares", "tolerance = { rel = 1e-6 }", "expected = \"command\"", "checked against the reference command, and [custom] declares none", "expected = \"command\""),
    ("reference command without a program", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [] }", "names no program", "reference_command ="),
    ("reference command naming a missing script", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"./ref.sh\"] }", "no program", "reference_command ="),
    ("reference command with a time limit of 0", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"python3\", \"ref.py\"], timeout_s = 0 }", "must be a positive number of seconds", "reference_command ="),
    ("reference command no output uses", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"python3\", \"ref.py\"] }", "no output is checked against the reference command", "reference_command ="),
    ("misspelt key in reference_command", "flops = \"n\"", "flops = \"n\"\nreference_command = { args = [\"python3\"] }", "unknown field `args`", "reference_command ="),
];

fn line_of(text: &str, needle: &str) -> usize {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not in the manifest"));
    text[..at].matches('\n').count() + 1
}

#[test]
fn the_base_custom_study_is_valid() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), KERNEL_SOURCE).unwrap();
    let path = dir.path().join("m.toml");
    let manifest = kbench::manifest::parse(&path, BASE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(manifest.algorithm.spec().kernels, ["simple"]);
    assert!(manifest.custom.is_some());
}

#[test]
fn malformed_custom_studies_are_refused_at_the_faults_line() {
    assert!(CASES.len() >= 30, "{} cases", CASES.len());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), KERNEL_SOURCE).unwrap();
    let path = dir.path().join("m.toml");
    let mut failures = Vec::new();
    for (what, from, to, message, line_needle) in CASES {
        assert!(
            BASE.contains(from),
            "{what}: `{from}` is not in the base manifest"
        );
        let text = BASE.replacen(from, to, 1);
        let expected_line = line_of(&text, line_needle);
        match kbench::manifest::parse(Path::new(&path), &text) {
            Ok(_) => failures.push(format!("{what}: accepted")),
            Err(e) => {
                let shown = e.to_string();
                if !e.message.contains(message) || e.line != expected_line {
                    failures.push(format!(
                        "{what}: expected line {expected_line} and `{message}`, got line {}:\n{shown}",
                        e.line
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
