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
    ("block above 1024 at every point", "block = \"block\"\nshared", "block = \"block * 16\"\nshared", "above the 1024 a GPU takes", "block * 16"),
    ("block of 0", "block = \"block\"\nshared", "block = \"block - block\"\nshared", "block is 0", "block - block"),
    ("2-d block above 1024 threads at every point", "block = \"block\"\nshared", "block = [\"block\", \"16\"]\nshared", "threads, above the 1024 a GPU runs", "block = [\"block\""),
    ("unknown buffer in a launch", "{ buffer = \"y\" }", "{ buffer = \"z\" }", "no buffer `z`", "buffer = \"z\""),
    ("reference naming no kernel", "reference = \"simple\"", "reference = \"simplest\"", "reference `simplest` is not a kernel", "reference ="),
    ("duplicate buffer", "name = \"tmp\"", "name = \"x\"", "two buffers are named `x`", "name = \"x\"\ntype = \"f32\""),
    ("duplicate axis", "name = \"block\"\nkind = \"block\"", "name = \"n\"\nkind = \"block\"", "two axes are named `n`", "name = \"n\"\nkind = \"block\""),
    ("duplicate kernel", "[[variant]]", "[[custom.kernel]]\nname = \"simple\"\n\n[[custom.kernel.launch]]\nkernel = \"scale\"\ngrid = \"1\"\nblock = \"32\"\n\n[[variant]]", "two kernels are named `simple`", "name = \"simple\"\n\n[[custom.kernel.launch]]\nkernel = \"scale\"\ngrid = \"1\""),
    ("unknown axis kind", "kind = \"size\"", "kind = \"sizes\"", "unknown axis kind `sizes`", "kind = \"sizes\""),
    ("choice without values", "kind = \"size\"", "kind = \"choice\"", "needs its names", "kind = \"choice\""),
    ("unknown element type", "type = \"f32\"", "type = \"f8\"", "unknown element type `f8`", "type = \"f8\""),
    ("unknown role", "role = \"scratch\"", "role = \"temp\"", "unknown role `temp`", "role = \"temp\""),
    ("init on an output", "tolerance = { rel = 1e-6 }", "init = \"zeros\"", "`init` sets an input's contents", "init = \"zeros\""),
    ("bad init", "init = { uniform = [-1.0, 1.0] }", "init = { uniform = [1.0, -1.0] }", "lo < hi", "uniform = [1.0"),
    ("vector width of 0", "role = \"scratch\"", "role = \"scratch\"\nwidth = 0", "`width` is the values an element holds (float4: 4), 1 to 16, not 0", "width = 0"),
    ("sorted init the wrong way round", "init = { uniform = [-1.0, 1.0] }", "init = { sorted = [1.0, -1.0] }", "`sorted` takes [lo, hi] with lo < hi", "sorted = [1.0"),
    ("offsets into a float buffer", "name = \"tmp\"\ntype = \"f32\"\nlength = \"ceil_div(n, block)\"\nrole = \"scratch\"", "name = \"tmp\"\ntype = \"f32\"\nlength = \"ceil_div(n, block)\"\nrole = \"input\"\ninit = { offsets = \"n\" }", "`offsets` are integers, and `tmp` is f32", "offsets ="),
    ("offsets of an unknown axis", "name = \"tmp\"\ntype = \"f32\"\nlength = \"ceil_div(n, block)\"\nrole = \"scratch\"", "name = \"tmp\"\ntype = \"i32\"\nlength = \"ceil_div(n, block)\"\nrole = \"input\"\ninit = { offsets = \"nnz\" }", "unknown name `nnz`", "offsets ="),
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
    ("no output buffer", "role = \"output\"\ntolerance = { rel = 1e-6 }", "role = \"input\"", "no buffer has role \"output\" or \"inout\", so kernel `simple` has nothing to check", "name = \"simple\"\n\n[[custom.kernel.launch]]"),
    ("unchecked reference kernel", "name = \"simple\"\n\n[[custom.kernel.launch]]", "name = \"simple\"\nunchecked = true\n\n[[custom.kernel.launch]]", "kernel `simple` is the study's reference", "unchecked = true"),
    ("unchecked that is not a boolean", "name = \"simple\"\n\n[[custom.kernel.launch]]", "name = \"simple\"\nunchecked = \"yes\"\n\n[[custom.kernel.launch]]", "expected a boolean", "unchecked ="),
    ("output judged by a check command none declares", "tolerance = { rel = 1e-6 }", "expected = \"check_command\"", "judged by the check command, and [custom] declares none", "expected = \"check_command\""),
    ("check command that is not executable", "flops = \"n\"", "flops = \"n\"\ncheck_command = { argv = [\"./k.cu\"] }", "is not executable: `chmod +x` it", "check_command ="),
    ("check command not on PATH", "flops = \"n\"", "flops = \"n\"\ncheck_command = { argv = [\"kbench-no-such-checker\", \"check.py\"] }", "no program `kbench-no-such-checker` on PATH", "check_command ="),
    ("check command told axes", "flops = \"n\"", "flops = \"n\"\ncheck_command = { argv = [\"python3\"], axes = [\"n\"] }", "unknown field `axes`", "check_command ="),
    ("reference command not on PATH", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"kbench-no-such-python\", \"ref.py\"] }", "no program `kbench-no-such-python` on PATH", "reference_command ="),
    ("per_variant that is not a boolean", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"python3\"], per_variant = 1 }", "expected a boolean", "reference_command ="),
    ("dtype buffer without a dtype axis", "name = \"dtype\"\nkind = \"dtype\"", "name = \"m\"\nkind = \"size\"\ndefault = 3", "type \"dtype\" follows the `dtype` axis", "type = \"dtype\""),
    ("unknown name in bytes", "bytes = \"2 * n * sizeof(dtype)\"", "bytes = \"2 * n * sizeof(dtyp)\"", "unknown name `dtyp`", "bytes ="),
    ("comparison written with =", "flops = \"n\"", "flops = \"n = 1\"", "write `==`", "flops ="),
    ("define that is not an identifier", "flops = \"n\"", "flops = \"n\"\ndefines = { 2X = \"n\" }", "not a C identifier", "defines ="),
    ("axis not in the study in [grid]", "block = [128, 256]", "block = [128, 256]\nitems = [4]", "`items` is not an axis of algorithm `custom`", "items = [4]"),
    ("block axis value that is not a block", "block = [128, 256]", "block = [128, 2048]", "expected an integer from 1 to 1024, got 2048", "block = [128, 2048]"),
    ("output expecting a reference command none declares", "tolerance = { rel = 1e-6 }", "expected = \"command\"", "checked against the reference command, and [custom] declares none", "expected = \"command\""),
    ("reference command without a program", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [] }", "names no program", "reference_command ="),
    ("reference command naming a missing script", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"./ref.sh\"] }", "no program", "reference_command ="),
    ("reference command with a time limit of 0", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"python3\", \"ref.py\"], timeout_s = 0 }", "must be a positive number of seconds", "reference_command ="),
    ("reference command no output uses", "flops = \"n\"", "flops = \"n\"\nreference_command = { argv = [\"python3\", \"ref.py\"] }", "no output is checked against the reference command", "reference_command ="),
    ("int axis default that is a string", "name = \"block\"\nkind = \"block\"", "name = \"block\"\nkind = \"block\"\n\n[[custom.axis]]\nname = \"k\"\nkind = \"int\"\ndefault = \"x\"", "default of axis `k`: \"x\" is not a whole number", "default = \"x\""),
    ("int axis default outside its bounds", "name = \"block\"\nkind = \"block\"", "name = \"block\"\nkind = \"block\"\n\n[[custom.axis]]\nname = \"k\"\nkind = \"int\"\nmin = 1\nmax = 4\ndefault = 9", "9 is not a whole number from 1 to 4", "default = 9"),
    ("choice axis default not among its names", "name = \"block\"\nkind = \"block\"", "name = \"block\"\nkind = \"block\"\n\n[[custom.axis]]\nname = \"k\"\nkind = \"choice\"\nvalues = [\"a\", \"b\"]\ndefault = \"c\"", "\"c\" is not one of a, b", "default = \"c\""),
    ("int axis min that is NaN", "name = \"block\"\nkind = \"block\"", "name = \"block\"\nkind = \"block\"\n\n[[custom.axis]]\nname = \"k\"\nkind = \"int\"\nmin = nan\ndefault = 1", "`min` of axis `k` is NaN; it must be a whole number", "min = nan"),
    ("int axis max that is not whole", "name = \"block\"\nkind = \"block\"", "name = \"block\"\nkind = \"block\"\n\n[[custom.axis]]\nname = \"k\"\nkind = \"int\"\nmax = 2.5\ndefault = 1", "`max` of axis `k` is 2.5", "max = 2.5"),
    ("choice name with a control character", "name = \"block\"\nkind = \"block\"", "name = \"block\"\nkind = \"block\"\n\n[[custom.axis]]\nname = \"k\"\nkind = \"choice\"\nvalues = [\"a\\u001b[31m\", \"b\"]\ndefault = \"b\"", "holds the control character \\u{1b}", "values = [\"a"),
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

#[test]
fn expressions_nested_past_the_bound_are_refused_at_their_line_not_by_a_stack_overflow() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), KERNEL_SOURCE).unwrap();
    let path = dir.path().join("m.toml");
    let nested = format!("{}n{}", "(".repeat(10_000), ")".repeat(10_000));
    let flat = vec!["n"; 30_000].join(" + ");
    for (key, hostile) in [("flops", nested), ("bytes", flat)] {
        let from = format!("{key} = \"");
        let text = BASE.replacen(&from, &format!("{key} = \"{hostile} + "), 1);
        let e = kbench::manifest::parse(&path, &text).unwrap_err();
        assert!(e.message.contains("nests more than 256 levels deep"), "{e}");
        assert_eq!(e.line, line_of(&text, &from), "{e}");
    }
}

/// A template kernel whose parameters are `BLOCK_SIZE` and `T`, and one named `Elem`: what the
/// define clashes below are found in.
const TEMPLATE_SOURCE: &str =
    "template <int BLOCK_SIZE, typename T>\n__global__ void tiled(const T* x, T* y, int n) {}\n\
template <typename Elem> __global__ void other(Elem* x) {}\n";

/// The faults of a user's kernel as written (element types, C++ names, defines, compiler
/// options, constant memory, values the types cannot hold, `.npy` files checked at `check`),
/// each in the same shape as `CASES`.
const KERNEL_AS_WRITTEN_CASES: &[(&str, &str, &str, &str, &str)] = &[
    ("unknown dtype in the dtype axis", "name = \"dtype\"\nkind = \"dtype\"", "name = \"dtype\"\nkind = \"dtype\"\nvalues = [\"f32\", \"fp8\"]", "unknown dtype `fp8`; known: i8, u8", "values ="),
    ("unknown dtype in [grid]", "dtype = [\"f32\"]", "dtype = [\"f32\", \"f128\"]", "unknown dtype `f128`", "dtype = [\"f32\", \"f128\"]"),
    ("unknown element type of a fixed buffer", "type = \"f32\"", "type = \"float16\"", "unknown element type `float16`; known: i8, u8, i16", "type = \"float16\""),
    ("tolerance with an unknown key", "tolerance = { rel = 1e-6 }", "tolerance = { rel_ulps = 4 }", "rel_eps counts the element type's epsilons", "tolerance ="),
    ("negative rel_eps", "tolerance = { rel = 1e-6 }", "tolerance = { rel_eps = -2 }", "a tolerance is", "tolerance ="),
    ("kernel name with a statement after it", "kernel = \"scale\"", "kernel = \"scale; system()\"", "has no place in a C++ name expression", "kernel = \"scale; system()\""),
    ("kernel name with unpaired brackets", "kernel = \"scale\"", "kernel = \"scale<BLOCK, T\"", "do not pair up", "kernel = \"scale<BLOCK, T\""),
    ("kernel name starting with a digit", "kernel = \"scale\"", "kernel = \"2scale\"", "does not name a kernel", "kernel = \"2scale\""),
    ("empty kernel name", "kernel = \"scale\"", "kernel = \"\"", "does not name a kernel", "kernel = \"\""),
    ("kernel name with a quote", "kernel = \"scale\"", "kernel = \"scale<'a'>\"", "has no place", "kernel = \"scale<"),
    ("define named like an axis", "flops = \"n\"", "flops = \"n\"\ndefines = { block = \"256\" }", "`block` is an axis, and kbench defines every int, block, choice and dtype axis", "defines ="),
    ("undefine of a name kbench does not define", "flops = \"n\"", "flops = \"n\"\nundefine = [\"TILE\"]", "`TILE` is not one of kbench's defines; they are: dtype, block, BLOCK", "undefine ="),
    ("undefine as a string", "flops = \"n\"", "flops = \"n\"\nundefine = \"T\"", "expected an array, found the string \"T\"", "undefine ="),
    ("compiler options as a string", "flops = \"n\"", "flops = \"n\"\ncompiler_options = \"-O3\"", "expected an array, found the string \"-O3\"", "compiler_options ="),
    ("dtype axis's T a template parameter of the sources", "sources = [\"k.cu\"]", "sources = [\"t.cu\"]", "`T` is a template parameter in t.cu line 1, and a define would replace it there (kbench defines it from the dtype axis `dtype`): add `undefine = [\"T\"]`", "name = \"dtype\"\nkind = \"dtype\""),
    ("a define named like a template parameter", "sources = [\"k.cu\"]", "sources = [\"t.cu\"]\nundefine = [\"T\"]\ndefines = { Elem = \"1\" }", "`Elem` is a template parameter in t.cu line 3", "defines ="),
    ("compiler option without a dash", "flops = \"n\"", "flops = \"n\"\ncompiler_options = [\"use_fast_math\"]", "is not an NVRTC option", "compiler_options ="),
    ("two compiler options in one string", "flops = \"n\"", "flops = \"n\"\ncompiler_options = [\"-lineinfo -use_fast_math\"]", "holds a space: give each option as its own string", "compiler_options ="),
    ("compiler option naming the architecture", "flops = \"n\"", "flops = \"n\"\ncompiler_options = [\"--gpu-architecture=sm_80\"]", "leave the architecture out", "compiler_options ="),
    ("kernel sequence's compiler option without a dash", "name = \"simple\"\n\n[[custom.kernel.launch]]", "name = \"simple\"\ncompiler_options = [\"O3\"]\n\n[[custom.kernel.launch]]", "`O3` is not an NVRTC option", "compiler_options = [\"O3\"]"),
    ("constant on an output", "tolerance = { rel = 1e-6 }", "constant = \"coeffs\"", "`constant` fills a __constant__ variable from an input; `y` is output", "constant = \"coeffs\""),
    ("constant on a scratch buffer", "role = \"scratch\"", "role = \"scratch\"\nconstant = \"coeffs\"", "`tmp` is scratch", "constant = \"coeffs\""),
    ("constant that is not a name", "init = { uniform = [-1.0, 1.0] }", "init = { uniform = [-1.0, 1.0] }\nconstant = \"ns::coeffs\"", "is not a __constant__ variable's name", "constant = \"ns::coeffs\""),
    ("two buffers filling one constant", "[[custom.kernel]]", "[[custom.buffer]]\nname = \"x2\"\ntype = \"f32\"\nlength = \"16\"\nrole = \"input\"\nconstant = \"coeffs\"\n\n[[custom.buffer]]\nname = \"x3\"\ntype = \"f32\"\nlength = \"16\"\nrole = \"input\"\nconstant = \"coeffs\"  # again\n\n[[custom.kernel]]", "buffer `x2` fills `coeffs` already", "constant = \"coeffs\"  # again"),
    ("uint8 input drawn below 0", "name = \"x\"\ntype = \"dtype\"", "name = \"x\"\ntype = \"u8\"", "draws integers outside what u8 holds (0 to 255)", "init = { uniform = [-1.0, 1.0] }"),
    ("integer input whose range holds no integer", "init = { uniform = [-1.0, 1.0] }", "init = { uniform = [0.2, 0.8] }", "holds no integer, and the buffer is i32", "init = { uniform = [0.2, 0.8] }"),
    ("integer constant that is not an integer", "init = { uniform = [-1.0, 1.0] }", "init = { constant = 2.5 }", "`constant` 2.5 is not an integer, and the buffer is i32", "init = { constant = 2.5 }"),
    ("int8 constant out of range", "init = { uniform = [-1.0, 1.0] }", "init = { constant = 300 }", "`constant` 300 is outside what i8 holds", "init = { constant = 300 }"),
    ("float16 input beyond its largest value", "init = { uniform = [-1.0, 1.0] }", "init = { uniform = [0.0, 1e6] }", "is outside what f16 holds", "init = { uniform = [0.0, 1e6] }"),
    ("NaN in a normal init", "init = { uniform = [-1.0, 1.0] }", "init = { normal = [nan, 1.0] }", "NaN is not a finite number", "init = { normal = [nan"),
    ("infinite constant init", "init = { uniform = [-1.0, 1.0] }", "init = { constant = inf }", "inf is not a finite number", "init = { constant = inf }"),
    ("block of 0 in a 2-d block", "block = \"block\"\nshared", "block = [\"block\", \"0\"]\nshared", "block is 0", "block = [\"block\", \"0\"]"),
    ("block z above 64 at every point", "block = \"block\"\nshared", "block = [\"2\", \"2\", \"128\"]\nshared", "the block's z is 128, above the 64 a GPU takes", "block = [\"2\""),
    ("grid y above 65535 at every point", "grid = \"ceil_div(n, block)\"", "grid = [\"1\", \"70000\"]", "the grid's y is 70000, above the 65535 a GPU takes", "grid = [\"1\""),
    ("a block of 1025 threads", "block = \"block\"\nshared", "block = \"1025\"\nshared", "the block's x is 1025, above the 1024 a GPU takes", "block = \"1025\""),
    ("__half argument beyond its range", "{ type = \"int\", value = \"n\" }", "{ type = \"__half\", value = \"70000.0\" }", "does not fit a C `__half`", "70000.0"),
    ("char argument beyond its range", "{ type = \"int\", value = \"n\" }", "{ type = \"char\", value = \"300\" }", "300 does not fit a C `char`", "value = \"300\""),
    ("unsigned char argument below 0", "{ type = \"int\", value = \"n\" }", "{ type = \"uint8_t\", value = \"0 - 1\" }", "-1 does not fit a C `unsigned char`", "0 - 1"),
    ("float argument beyond float's range", "{ type = \"int\", value = \"n\" }", "{ type = \"float\", value = \"1e300 * 1.0\" }", "1e300 does not fit a C `float`", "1e300"),
    ("npy input of another type", "init = { uniform = [-1.0, 1.0] }", "init = { npy = \"x_f64.npy\" }", "holds `<f8` values, and the buffer is f32", "init = { npy"),
    ("npy input of another length", "init = { uniform = [-1.0, 1.0] }", "init = { npy = \"x_f32_10.npy\" }", "holds 10 elements, and buffer `x` has 1000", "init = { npy"),
    ("expected npy of another length", "tolerance = { rel = 1e-6 }", "expected = \"x_f32_10.npy\"", "holds 10 elements, and buffer `y` has 1000", "expected ="),
    ("bf16 input from bit patterns without the .bf16 tag", "init = { uniform = [-1.0, 1.0] }", "init = { npy = \"x_u16.npy\" }", "holds `<u2` values, and the buffer is bf16 (bf16 is read from float32 values, or from their uint16 bit patterns in a file named `*.bf16.npy`)", "init = { npy"),
    ("npy whose shape overflows", "init = { uniform = [-1.0, 1.0] }", "init = { npy = \"huge.npy\" }", "element count overflows 64 bits", "init = { npy"),
    ("npy that is not NumPy's", "init = { uniform = [-1.0, 1.0] }", "init = { npy = \"text.npy\" }", "is not a .npy file", "init = { npy"),
];

/// The `.npy` files `KERNEL_AS_WRITTEN_CASES` name, written into `dir`.
fn write_npy_files(dir: &Path) {
    use kbench::vocab::HostData;
    HostData::F64(vec![0.5; 1000])
        .write_npy(&dir.join("x_f64.npy"))
        .unwrap();
    HostData::F32(vec![0.5; 10])
        .write_npy(&dir.join("x_f32_10.npy"))
        .unwrap();
    HostData::U16(vec![0x3f80; 1000])
        .write_npy(&dir.join("x_u16.npy"))
        .unwrap();
    std::fs::write(dir.join("text.npy"), "not numpy").unwrap();
    // A valid header whose shape's product is 2^80 elements.
    let header =
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }";
    let padded = format!("{header:<117}\n");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((padded.len() as u16).to_le_bytes());
    bytes.extend(padded.as_bytes());
    std::fs::write(dir.join("huge.npy"), bytes).unwrap();
}

/// Which type each case needs its buffer `x` or the dtype axis to have: the base's f32, or the
/// type the case is about.
fn retyped(what: &str, text: String) -> String {
    let with =
        |dtype: &str| text.replacen("dtype = [\"f32\"]", &format!("dtype = [\"{dtype}\"]"), 1);
    match what {
        "integer input whose range holds no integer"
        | "integer constant that is not an integer" => with("i32"),
        "int8 constant out of range" => with("i8"),
        "float16 input beyond its largest value" => with("f16"),
        "bf16 input from bit patterns without the .bf16 tag" => with("bf16"),
        _ => text,
    }
}

#[test]
fn a_kernel_as_written_is_refused_at_the_faults_line_when_malformed() {
    assert!(
        KERNEL_AS_WRITTEN_CASES.len() >= 40,
        "{} cases",
        KERNEL_AS_WRITTEN_CASES.len()
    );
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), KERNEL_SOURCE).unwrap();
    std::fs::write(dir.path().join("t.cu"), TEMPLATE_SOURCE).unwrap();
    write_npy_files(dir.path());
    let path = dir.path().join("m.toml");
    let mut failures = Vec::new();
    for (what, from, to, message, line_needle) in KERNEL_AS_WRITTEN_CASES {
        assert!(
            BASE.contains(from),
            "{what}: `{from}` is not in the base manifest"
        );
        let text = retyped(what, BASE.replacen(from, to, 1));
        let expected_line = line_of(&text, line_needle);
        match kbench::manifest::parse(Path::new(&path), &text) {
            Ok(_) => failures.push(format!("{what}: accepted")),
            Err(e) => {
                if !e.message.contains(message) || e.line != expected_line {
                    failures.push(format!(
                        "{what}: expected line {expected_line} and `{message}`, got line {}:\n{e}",
                        e.line
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_grid_with_some_points_no_gpu_runs_is_accepted_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("k.cu"), KERNEL_SOURCE).unwrap();
    let path = dir.path().join("m.toml");
    // 128 x 8 threads run; 256 x 8 do not.
    let text = BASE.replacen(
        "block = \"block\"\nshared",
        "block = [\"block\", \"8\"]\nshared",
        1,
    );
    let manifest = kbench::manifest::parse(&path, &text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        manifest.notes,
        ["2 of 4 grid points cannot run kernel `simple` and will be skipped: the block has 2048 threads, above the 1024 a GPU runs (first at block=256 dtype=f32 n=1000)"]
    );
}
