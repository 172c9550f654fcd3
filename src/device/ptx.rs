//! Kernel parameter lists read from PTX text: each `.entry` (kernel) with its parameters in
//! order, their PTX type and size in bytes, and the check of a launch's declared arguments
//! against them. PTX declares every parameter's size, so a manifest whose argument list does not
//! match its kernel can be refused by `kbench check` with NVRTC alone, before any GPU is opened.
//!
//! Only what NVRTC emits for kernel parameters is understood: `.param` followed by optional
//! `.ptr`, state space and `.align N` attributes, one scalar type, and a name with an optional
//! array length (`.param .align 8 .b8 k_param_0[16]` is a 16-byte struct passed by value).
//! Device functions (`.func`) are skipped: they cannot be launched.

use std::fmt;

/// One kernel parameter as PTX declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxParam {
    /// PTX's own name for it (`saxpy_param_0`): the source's names are not kept.
    pub name: String,
    /// The element type with its dot (`.u64`, `.f32`, `.b8`).
    pub ptx_type: String,
    /// The type's size times the array length, if any: what the launch must pass.
    pub size_bytes: u64,
    /// The `.align N` attribute, where there is one.
    pub align_bytes: Option<u64>,
    /// Whether PTX marks it `.ptr` (it does not always: a plain pointer is often just `.u64`).
    pub is_pointer: bool,
}

/// One kernel (`.entry`) and its parameters in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtxEntry {
    /// The symbol: the source's name for an `extern "C"` kernel, else the mangled C++ name.
    pub name: String,
    pub params: Vec<PtxParam>,
}

impl PtxEntry {
    /// The parameters' sizes in bytes, in order.
    pub fn param_sizes_bytes(&self) -> Vec<u64> {
        self.params.iter().map(|p| p.size_bytes).collect()
    }
}

/// PTX text that this parser does not understand, with the entry it was reading.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read the parameters of kernel `{entry}` in the PTX: {reason}")]
pub struct PtxError {
    pub entry: String,
    pub reason: String,
}

/// Every kernel in `ptx`, in the order the PTX defines them.
pub fn entries(ptx: &str) -> Result<Vec<PtxEntry>, PtxError> {
    let text = strip_comments(ptx);
    let mut found = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = find_directive(rest, ".entry") {
        rest = &rest[at + ".entry".len()..];
        let (entry, after) = parse_entry(rest)?;
        found.push(entry);
        rest = after;
    }
    Ok(found)
}

/// The kernel `name` among `entries`, or a message naming those there are.
pub fn find_entry<'a>(entries: &'a [PtxEntry], name: &str) -> Result<&'a PtxEntry, String> {
    if let Some(entry) = entries.iter().find(|e| e.name == name) {
        return Ok(entry);
    }
    let names: Vec<String> = entries.iter().map(|e| format!("`{}`", e.name)).collect();
    let defined = if names.is_empty() {
        "it defines no kernel".to_string()
    } else {
        format!("it defines {}", names.join(", "))
    };
    Err(format!(
        "kernel `{name}` is not in the compiled PTX; {defined} (a C++ kernel's name is mangled \
         unless it is declared `extern \"C\"`)"
    ))
}

/// One argument a launch declares: its name in the manifest and its size in bytes (8 for a
/// buffer's pointer, 4 for an `int` or `float`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredArg<'a> {
    pub name: &'a str,
    pub size_bytes: u64,
}

/// Why a launch's arguments do not fit its kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgMismatch {
    #[error(
        "kernel `{kernel}` takes {} ({}); the launch passes {}",
        plural(param_sizes_bytes.len(), "parameter"),
        list_sizes(param_sizes_bytes),
        list_args(passed)
    )]
    Count {
        kernel: String,
        param_sizes_bytes: Vec<u64>,
        /// (name, size in bytes) of each argument passed.
        passed: Vec<(String, u64)>,
    },
    #[error(
        "kernel `{kernel}`'s parameter {position} ({ptx_type}) is {param_bytes} bytes; the launch \
         passes `{arg}` there, of {arg_bytes} bytes"
    )]
    Size {
        kernel: String,
        /// Counted from 1, as a reader counts.
        position: usize,
        ptx_type: String,
        param_bytes: u64,
        arg: String,
        arg_bytes: u64,
    },
}

/// Checks `args` against `entry`'s parameters: as many, each of the size PTX declares. The
/// first difference is the error (a count that differs makes every size after it moot).
pub fn check_args(entry: &PtxEntry, args: &[DeclaredArg]) -> Result<(), ArgMismatch> {
    if args.len() != entry.params.len() {
        return Err(ArgMismatch::Count {
            kernel: entry.name.clone(),
            param_sizes_bytes: entry.param_sizes_bytes(),
            passed: args
                .iter()
                .map(|a| (a.name.to_string(), a.size_bytes))
                .collect(),
        });
    }
    for (index, (param, arg)) in entry.params.iter().zip(args).enumerate() {
        if param.size_bytes != arg.size_bytes {
            return Err(ArgMismatch::Size {
                kernel: entry.name.clone(),
                position: index + 1,
                ptx_type: describe_type(param),
                param_bytes: param.size_bytes,
                arg: arg.name.to_string(),
                arg_bytes: arg.size_bytes,
            });
        }
    }
    Ok(())
}

fn plural(count: usize, word: &str) -> String {
    if count == 1 {
        format!("1 {word}")
    } else {
        format!("{count} {word}s")
    }
}

fn list_sizes(sizes_bytes: &[u64]) -> String {
    if sizes_bytes.is_empty() {
        return "none".to_string();
    }
    let sizes: Vec<String> = sizes_bytes.iter().map(u64::to_string).collect();
    format!("{} bytes", sizes.join(", "))
}

fn list_args(passed: &[(String, u64)]) -> String {
    if passed.is_empty() {
        return "none".to_string();
    }
    let args: Vec<String> = passed
        .iter()
        .map(|(name, bytes)| format!("`{name}` {bytes}"))
        .collect();
    format!("{} ({} bytes)", passed.len(), args.join(", "))
}

/// `.u32`, or `.b8[16]` for an array: how the type reads in a message.
fn describe_type(param: &PtxParam) -> String {
    let element = type_size_bytes(&param.ptx_type).unwrap_or(param.size_bytes);
    if element == param.size_bytes {
        param.ptx_type.clone()
    } else {
        format!("{}[{}]", param.ptx_type, param.size_bytes / element.max(1))
    }
}

/// The module's `__constant__` variables, with their sizes in bytes (`.const .align 4 .b8
/// d_filter[4356];` -> `d_filter`, 4356): what a custom study's `constant` buffers fill.
pub fn constants(ptx: &str) -> Vec<(String, u64)> {
    let text = strip_comments(ptx);
    let mut out = Vec::new();
    for statement in text.split(';') {
        let words: Vec<&str> = statement.split_whitespace().collect();
        // A module's first `.const` follows directives that end without a `;` (`.version 9.0`,
        // `.target sm_90`): the declaration starts at `.const`, wherever it is in the statement.
        let Some(start) = words.iter().position(|w| *w == ".const") else {
            continue;
        };
        let words = &words[start..];
        // `.const [.align N] .type name[count]` (an initialiser, ` = {...}`, may follow).
        let Some(declared) = words
            .iter()
            .position(|w| *w == "=")
            .map_or(words.last(), |i| {
                i.checked_sub(1).and_then(|j| words.get(j))
            })
        else {
            continue;
        };
        let Some(ptx_type) = words.iter().find(|w| type_size_bytes(w).is_some()) else {
            continue;
        };
        if let (Ok((name, count)), Some(size)) = (split_array(declared), type_size_bytes(ptx_type))
        {
            out.push((name.to_string(), count.saturating_mul(size)));
        }
    }
    out
}

/// The size of a PTX scalar type, `None` for one a kernel parameter cannot have.
fn type_size_bytes(ptx_type: &str) -> Option<u64> {
    Some(match ptx_type {
        ".b8" | ".s8" | ".u8" => 1,
        ".b16" | ".s16" | ".u16" | ".f16" | ".bf16" => 2,
        ".b32" | ".s32" | ".u32" | ".f32" | ".f16x2" | ".bf16x2" => 4,
        ".b64" | ".s64" | ".u64" | ".f64" => 8,
        ".b128" => 16,
        _ => return None,
    })
}

/// `text` with `//` and `/* */` comments replaced by a space (PTX has no string literals that
/// could hold them).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
            out.push(' ');
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
            out.push(' ');
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Where `directive` starts in `text` as a whole word (`.entry`, not `.entryx` or `x.entry`).
fn find_directive(text: &str, directive: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(offset) = text[from..].find(directive) {
        let at = from + offset;
        let before_ok = text[..at]
            .chars()
            .next_back()
            .is_none_or(char::is_whitespace);
        let after_ok = text[at + directive.len()..]
            .chars()
            .next()
            .is_none_or(|c| !is_identifier_char(c));
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + directive.len();
    }
    None
}

/// PTX identifiers: letters, digits, `_`, `$` and `%` (and `.` inside a name is not used by
/// NVRTC for symbols, so it ends one).
fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%')
}

/// Reads `name(params...)` after `.entry`; returns the entry and the text after it.
fn parse_entry(text: &str) -> Result<(PtxEntry, &str), PtxError> {
    let text = text.trim_start();
    let name_end = text
        .find(|c: char| !is_identifier_char(c))
        .unwrap_or(text.len());
    let name = text[..name_end].to_string();
    let error = |reason: String| PtxError {
        entry: if name.is_empty() {
            "?".to_string()
        } else {
            name.clone()
        },
        reason,
    };
    if name.is_empty() {
        return Err(error("`.entry` is not followed by a name".into()));
    }
    let after_name = text[name_end..].trim_start();
    // A kernel without parameters may be written without the parentheses.
    let Some(list) = after_name.strip_prefix('(') else {
        return Ok((
            PtxEntry {
                name,
                params: Vec::new(),
            },
            after_name,
        ));
    };
    let close = list
        .find(')')
        .ok_or_else(|| error("its parameter list has no closing `)`".into()))?;
    let mut params = Vec::new();
    for (index, declaration) in list[..close].split(',').enumerate() {
        if declaration.trim().is_empty() && index == 0 && !list[..close].contains(',') {
            break; // `name()`
        }
        params.push(parse_param(declaration).map_err(|reason| {
            error(format!(
                "parameter {} (`{}`): {reason}",
                index + 1,
                declaration.trim()
            ))
        })?);
    }
    Ok((PtxEntry { name, params }, &list[close + 1..]))
}

/// Reads one `.param [attributes] .type name[N]` declaration.
fn parse_param(declaration: &str) -> Result<PtxParam, String> {
    let mut tokens = declaration.split_whitespace().peekable();
    if tokens.next() != Some(".param") {
        return Err("it does not start with `.param`".into());
    }
    let (mut ptx_type, mut align_bytes, mut is_pointer) = (None, None, false);
    let mut name = None;
    while let Some(token) = tokens.next() {
        match token {
            ".ptr" => is_pointer = true,
            ".global" | ".const" | ".local" | ".shared" => {}
            ".align" => {
                let value = tokens.next().ok_or("`.align` has no value")?;
                align_bytes = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| format!("`.align {value}` is not a number"))?,
                );
            }
            t if t.starts_with('.') => {
                if type_size_bytes(t).is_none() {
                    return Err(format!("unknown type or attribute `{t}`"));
                }
                if ptx_type.replace(t.to_string()).is_some() {
                    return Err("it has two types".into());
                }
            }
            t => {
                if tokens.peek().is_some() {
                    return Err(format!(
                        "unexpected `{}` after the name",
                        tokens.collect::<Vec<_>>().join(" ")
                    ));
                }
                name = Some(t);
            }
        }
    }
    let ptx_type = ptx_type.ok_or("it has no type")?;
    let name = name.ok_or("it has no name")?;
    let (name, count) = split_array(name)?;
    let element_bytes = type_size_bytes(&ptx_type).unwrap_or(0);
    Ok(PtxParam {
        name: name.to_string(),
        size_bytes: element_bytes
            .checked_mul(count)
            .ok_or("its size overflows")?,
        ptx_type,
        align_bytes,
        is_pointer,
    })
}

/// `name[16]` -> (`name`, 16); `name` -> (`name`, 1); `name[4][2]` -> (`name`, 8).
fn split_array(token: &str) -> Result<(&str, u64), String> {
    let Some(open) = token.find('[') else {
        return Ok((token, 1));
    };
    let mut count: u64 = 1;
    for dimension in token[open..].split('[').skip(1) {
        let length = dimension
            .strip_suffix(']')
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| format!("`{token}` is not a name with an array length"))?;
        count = count
            .checked_mul(length)
            .ok_or("its array length overflows")?;
    }
    Ok((&token[..open], count))
}

impl fmt::Display for PtxEntry {
    /// `saxpy(.u64 8, .u64 8, .f32 4, .u32 4)`: a kernel as a message shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| format!("{} {}", describe_type(p), p.size_bytes))
            .collect();
        write!(f, "{}({})", self.name, params.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_variables_are_read_with_their_sizes() {
        let ptx =
            "// a comment .const .b8 nope[3];\n.version 9.0\n.target sm_90\n.address_size 64\n\n\
                   .const .align 4 .b8 d_filter[4356];\n\
                   .const .align 8 .f64 one;\n.const .align 4 .b8 _ZN2ns5innerE[16];\n\
                   .const .align 4 .u32 table[2][3] = {1, 2, 3, 4, 5, 6};\n\
                   .global .align 4 .b8 g[8];\n";
        assert_eq!(
            constants(ptx),
            [
                ("d_filter".to_string(), 4356),
                ("one".to_string(), 8),
                ("_ZN2ns5innerE".to_string(), 16),
                ("table".to_string(), 24),
            ]
        );
    }

    /// The kernels behind `NVRTC_PTX`, compiled again by the ignored test below.
    const KERNELS: &str = r#"
struct Pair { double a; double b; };
struct Small { char c; short s; };
__device__ __noinline__ float twice(float v) { return v * 2.0f; }
extern "C" __global__ void saxpy(float *y, const float *x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * twice(x[i]) + y[i];
}
extern "C" __global__ void with_struct(Pair p, double *out, unsigned long long n, Small s) {
  if (threadIdx.x == 0) out[0] = p.a + p.b + n + s.c + s.s;
}
extern "C" __global__ void no_params() { }
template <typename T> __global__ void scale(T *x, T f, unsigned char flag, short h) {
  x[threadIdx.x] *= f + flag + h;
}
template __global__ void scale<REAL>(REAL *, REAL, unsigned char, short);
"#;

    /// What NVRTC 13.0.88 printed for `KERNELS` with `-DREAL=double` (sm_90, `-lineinfo`),
    /// bodies cut.
    const NVRTC_PTX: &str = "//
// Generated by NVIDIA NVVM Compiler
//
// Compiler Build ID: CL-36424714
// Cuda compilation tools, release 13.0, V13.0.88
// Based on NVVM 7.0.1
//

.version 9.0
.target sm_90
.address_size 64

	// .globl	saxpy

.func  (.param .b32 func_retval0) _Z5twicef(
	.param .b32 _Z5twicef_param_0
)
{
	ret;
}
.visible .entry saxpy(
	.param .u64 saxpy_param_0,
	.param .u64 saxpy_param_1,
	.param .f32 saxpy_param_2,
	.param .u32 saxpy_param_3
)
{
	.reg .pred 	%p<2>;
	ld.param.u64 	%rd1, [saxpy_param_0];
	ret;
}
	// .globl	with_struct
.visible .entry with_struct(
	.param .align 8 .b8 with_struct_param_0[16],
	.param .u64 with_struct_param_1,
	.param .u64 with_struct_param_2,
	.param .align 2 .b8 with_struct_param_3[4]
)
{
	ret;
}
	// .globl	no_params
.visible .entry no_params()
{
	.loc	1 11 0
	ret;
}
	// .globl	_Z5scaleIdEvPT_S0_hs
.weak .entry _Z5scaleIdEvPT_S0_hs(
	.param .u64 _Z5scaleIdEvPT_S0_hs_param_0,
	.param .f64 _Z5scaleIdEvPT_S0_hs_param_1,
	.param .u8 _Z5scaleIdEvPT_S0_hs_param_2,
	.param .u16 _Z5scaleIdEvPT_S0_hs_param_3
)
{
	ret;
}
";

    fn names_and_sizes(entry: &PtxEntry) -> Vec<(&str, &str, u64)> {
        (entry.params.iter())
            .map(|p| (p.name.as_str(), p.ptx_type.as_str(), p.size_bytes))
            .collect()
    }

    #[test]
    fn reads_every_kernel_of_nvrtc_output_and_skips_device_functions() {
        let found = entries(NVRTC_PTX).unwrap();
        let names: Vec<&str> = found.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["saxpy", "with_struct", "no_params", "_Z5scaleIdEvPT_S0_hs"]
        );
        assert_eq!(
            names_and_sizes(&found[0]),
            [
                ("saxpy_param_0", ".u64", 8),
                ("saxpy_param_1", ".u64", 8),
                ("saxpy_param_2", ".f32", 4),
                ("saxpy_param_3", ".u32", 4)
            ]
        );
        assert_eq!(found[1].param_sizes_bytes(), [16, 8, 8, 4]);
        assert_eq!(found[1].params[0].align_bytes, Some(8));
        assert_eq!(found[1].params[3].align_bytes, Some(2));
        assert!(found[2].params.is_empty());
        assert_eq!(found[3].param_sizes_bytes(), [8, 8, 1, 2]);
        assert_eq!(
            found[1].to_string(),
            "with_struct(.b8[16] 16, .u64 8, .u64 8, .b8[4] 4)"
        );
    }

    #[test]
    #[ignore = "needs NVRTC (libnvrtc.so.13 on LD_LIBRARY_PATH)"]
    fn nvrtc_output_reads_as_the_embedded_copy_does() {
        crate::device::nvrtc::nvrtc_present().unwrap();
        let options = ["-DREAL=double".to_string()];
        let compile = |name: &str, source: &str, arch: &str, options: &[String]| {
            crate::device::nvrtc::compile_file(name, source, arch, options, &[]).map(|c| c.ptx)
        };
        let ptx = compile("kernels.cu", KERNELS, "sm_90", &options).unwrap();
        assert_eq!(entries(&ptx).unwrap(), entries(NVRTC_PTX).unwrap());
        let float = ["-DREAL=float".to_string()];
        let ptx = compile("kernels.cu", KERNELS, "sm_80", &float).unwrap();
        let found = entries(&ptx).unwrap();
        let scale = find_entry(&found, "_Z5scaleIfEvPT_S0_hs").unwrap();
        assert_eq!(scale.param_sizes_bytes(), [8, 4, 1, 2]);
        let err = compile("bad.cu", "__global__ void k() { x; }", "sm_90", &[]).unwrap_err();
        assert!(format!("{err:#}").contains("bad.cu(1)"), "{err:#}");
    }

    #[test]
    fn reads_pointer_attributes_and_a_kernel_without_parentheses() {
        let ptx = ".visible .entry k(\n\t.param .u64 .ptr .global .align 8 k_param_0,\n\
                   \t.param .u32 k_param_1 /* n */\n)\n{\n}\n.entry bare\n{\n}\n";
        let found = entries(ptx).unwrap();
        assert_eq!(found.len(), 2);
        let p = &found[0].params[0];
        assert_eq!(
            (
                p.is_pointer,
                p.align_bytes,
                p.size_bytes,
                p.ptx_type.as_str()
            ),
            (true, Some(8), 8, ".u64")
        );
        assert_eq!(found[0].param_sizes_bytes(), [8, 4]);
        assert_eq!(found[1].name, "bare");
        assert!(found[1].params.is_empty());
    }

    #[test]
    fn text_it_does_not_understand_is_an_error_naming_the_kernel() {
        let err = entries(".entry k(\n.param .pred k_param_0\n)\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read the parameters of kernel `k` in the PTX: parameter 1 (`.param .pred \
             k_param_0`): unknown type or attribute `.pred`"
        );
        let err = entries(".entry k(\n.param .u32 k_param_0\n").unwrap_err();
        assert!(err.to_string().contains("no closing `)`"), "{err}");
        let err = entries(".entry k(.param .b8 k_param_0[x])").unwrap_err();
        assert!(err.to_string().contains("array length"), "{err}");
        assert!(entries("// .entry in a comment only\n").unwrap().is_empty());
    }

    #[test]
    fn a_missing_kernel_is_named_with_those_there_are() {
        let found = entries(NVRTC_PTX).unwrap();
        assert_eq!(find_entry(&found, "saxpy").unwrap().name, "saxpy");
        let err = find_entry(&found, "scale").unwrap_err();
        assert!(
            err.starts_with(
                "kernel `scale` is not in the compiled PTX; it defines `saxpy`, `with_struct`, \
                 `no_params`, `_Z5scaleIdEvPT_S0_hs`"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_launch_with_too_few_arguments_is_refused_with_both_lists() {
        let found = entries(NVRTC_PTX).unwrap();
        let args = [
            DeclaredArg {
                name: "y",
                size_bytes: 8,
            },
            DeclaredArg {
                name: "x",
                size_bytes: 8,
            },
        ];
        let err = check_args(&found[0], &args).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel `saxpy` takes 4 parameters (8, 8, 4, 4 bytes); the launch passes 2 (`y` 8, \
             `x` 8 bytes)"
        );
        let err = check_args(&found[2], &args[..1]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "kernel `no_params` takes 0 parameters (none); the launch passes 1 (`y` 8 bytes)"
        );
    }

    #[test]
    fn an_argument_of_the_wrong_size_is_refused_at_its_position() {
        let found = entries(NVRTC_PTX).unwrap();
        let mut args = [
            DeclaredArg {
                name: "y",
                size_bytes: 8,
            },
            DeclaredArg {
                name: "x",
                size_bytes: 8,
            },
            DeclaredArg {
                name: "a",
                size_bytes: 4,
            },
            DeclaredArg {
                name: "n",
                size_bytes: 4,
            },
        ];
        assert_eq!(check_args(&found[0], &args), Ok(()));
        args[3].size_bytes = 8;
        assert_eq!(
            check_args(&found[0], &args).unwrap_err().to_string(),
            "kernel `saxpy`'s parameter 4 (.u32) is 4 bytes; the launch passes `n` there, of 8 \
             bytes"
        );
        let pair = [
            DeclaredArg {
                name: "p",
                size_bytes: 8,
            },
            DeclaredArg {
                name: "out",
                size_bytes: 8,
            },
            DeclaredArg {
                name: "n",
                size_bytes: 8,
            },
            DeclaredArg {
                name: "s",
                size_bytes: 4,
            },
        ];
        assert_eq!(
            check_args(&found[1], &pair).unwrap_err().to_string(),
            "kernel `with_struct`'s parameter 1 (.b8[16]) is 16 bytes; the launch passes `p` \
             there, of 8 bytes"
        );
    }
}
