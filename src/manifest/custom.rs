//! A custom study's `[custom]` table: its TOML shape (serde, and through schemars the JSON
//! Schema), and its checks, each mistake reported at its own line and column before anything
//! runs: names (axes, buffers, kernels) declared once, every expression parsed and naming only
//! axes (and a repeated launch's loop variable), buffers and arguments that exist, files that
//! exist, and, over the study's grid, every length, grid, block and argument evaluated
//! (`check_over_grid`), so a grid of 0, a block above 1024, a negative or overflowing length
//! is refused at the expression that gives it. The result is a `custom::CustomDef`. Apart from
//! parsing, `check_kernel_params` (run by `check` and before `run`) compiles the sources with
//! NVRTC and checks each launch's arguments against its kernel's PTX parameters.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use toml::Spanned;

use super::commands::{RawCheckCommand, RawReferenceCommand};
use super::{printable, where_source_span, FileSource, ManifestError, Validator};
use crate::custom::def::{
    ArgDecl, AxisDecl, AxisKindDecl, BufferDecl, CType, CustomDef, ElemType, Expected, Init,
    LaunchDecl, Program, Repeat, Role, SourceFile, ToleranceDecl, Traffic,
};
use crate::custom::schedule::{self, DefError};
use crate::expr::Expr;
use crate::grid::{grid_points, AxisValues, WhereExpr};
use crate::record::Variant;
use crate::vocab::{DType, ParamValue};

/// The most bytes one `.cu` source may have: NVRTC compiles it whole, and a device named as a
/// source must not be read until memory runs out.
const MAX_SOURCE_BYTES: u64 = 16 << 20;

/// A study's own kernels: sources, axes, buffers, kernel sequences, reference and work.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCustom {
    /// The `.cu` files, relative to the manifest, compiled together by NVRTC.
    #[schemars(with = "Vec<String>")]
    sources: Vec<Spanned<String>>,
    /// Folders searched for the sources' `#include`s, relative to the manifest.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    include_dirs: Vec<Spanned<String>>,
    /// Compile-time defines: name = expression of the axes (a dtype becomes its C type). kbench
    /// already defines every axis but a size axis under its own name, `BLOCK` and
    /// `block_size_x/y/z` (from a `block` axis) and `T` (from a `dtype` axis); these may
    /// replace the last ones.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    defines: BTreeMap<String, Spanned<String>>,
    /// kbench's own defines to leave out of the sources (a template parameter named `T`, say):
    /// a launch's kernel name still reads them.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    undefine: Vec<Spanned<String>>,
    /// NVRTC options for every kernel (`-use_fast_math`, `--maxrregcount=64`, `-std=c++20`).
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    compiler_options: Vec<Spanned<String>>,
    /// The study's axes, in the order the tables show them.
    #[serde(default)]
    #[schemars(with = "Vec<RawAxis>")]
    axis: Vec<Spanned<RawAxis>>,
    #[schemars(with = "Vec<RawBuffer>")]
    buffer: Vec<Spanned<RawBuffer>>,
    /// Kernel sequences: what a `[[variant]]`'s `kernel` names.
    #[schemars(with = "Vec<RawKernel>")]
    kernel: Vec<Spanned<RawKernel>>,
    /// The kernel sequence trusted to give the reference of every output checked against one.
    #[schemars(with = "Option<String>")]
    reference: Option<Spanned<String>>,
    /// A program of yours (a NumPy script, say) that computes the expected values of the
    /// outputs with `expected = "command"` (the default when no `reference` kernel is named)
    /// from the inputs, as `.npy` files: see the README.
    #[schemars(with = "Option<RawReferenceCommand>")]
    reference_command: Option<Spanned<RawReferenceCommand>>,
    /// A program of yours that judges each checked case's answer (its outputs, their
    /// references and the inputs, as `.npy` files) and exits 0 or 1: see the README. Outputs
    /// with `expected = "check_command"` (the default when there is no other reference) are
    /// judged by it alone.
    #[schemars(with = "Option<RawCheckCommand>")]
    check_command: Option<Spanned<RawCheckCommand>>,
    /// Bytes the kernels must move, as an expression (GB/s). Default 0.
    #[schemars(with = "Option<String>")]
    bytes: Option<Spanned<String>>,
    /// Floating-point operations, as an expression (GFLOP/s). Default 0.
    #[schemars(with = "Option<String>")]
    flops: Option<Spanned<String>>,
    /// Elements the kernels process, as an expression (elements per second beside GB/s).
    /// Default: none.
    #[schemars(with = "Option<String>")]
    elements: Option<Spanned<String>>,
    /// Which way `bytes` go: `read` (read alone), `write` (written alone) or `copy` (both, the
    /// default). "% peak" divides by the measured peak of that kind.
    #[schemars(with = "Option<RawTraffic>")]
    traffic: Option<Spanned<String>>,
}

/// `[custom] traffic`'s values, for the manifest schema.
#[derive(JsonSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
enum RawTraffic {
    Read,
    Write,
    Copy,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAxis {
    #[schemars(with = "String")]
    name: Spanned<String>,
    /// size (an element count), int, float, choice, dtype or block (threads per block).
    #[schemars(with = "String", extend("enum" = ["size", "int", "float", "choice", "dtype", "block"]))]
    kind: Spanned<String>,
    /// A choice's names, or a dtype axis's types (default: every type).
    #[serde(default)]
    #[schemars(with = "Option<Vec<String>>")]
    values: Option<Spanned<Vec<String>>>,
    #[schemars(with = "Option<f64>")]
    min: Option<Spanned<f64>>,
    #[schemars(with = "Option<f64>")]
    max: Option<Spanned<f64>>,
    /// The value when `[grid]` leaves the axis out.
    #[schemars(with = "Option<serde_json::Value>")]
    default: Option<Spanned<toml::Value>>,
    doc: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawBuffer {
    #[schemars(with = "String")]
    name: Spanned<String>,
    /// An element type (i8, u8, i16, u16, i32, u32, i64, u64, f8e4m3, f8e5m2, f16, bf16, f32,
    /// f64), or dtype
    /// (the case's).
    #[serde(rename = "type")]
    #[schemars(with = "String", extend("enum" = ["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f8e4m3", "f8e5m2", "f16", "bf16", "f32", "f64", "dtype"]))]
    elem: Spanned<String>,
    /// Elements, as an expression of the axes (`n`, `m * n`, `ceil_div(n, 256)`).
    #[schemars(with = "String")]
    length: Spanned<String>,
    /// Values of `type` an element holds (a vector type: 2 for float2, 4 for float4 or int4,
    /// 2 for half2): the buffer holds `length * width` values. Default 1.
    #[serde(default)]
    #[schemars(with = "Option<u32>", range(min = 1, max = 16))]
    width: Option<Spanned<u32>>,
    /// input (read), output (checked), inout (both), scratch (the kernels' own, zeroed once).
    #[schemars(with = "String", extend("enum" = ["input", "output", "inout", "scratch"]))]
    role: Spanned<String>,
    /// An input's contents: "zeros", "iota", { uniform = [lo, hi] }, { normal = [mean, std] },
    /// { constant = x }, { copy = "input" } (an input declared before it), { expr = "i % 7" }
    /// (of the index `i` and the axes) or { npy = "file.npy" }. Default: uniform in [0, 1) (integers: [-100, 100]
    /// within the type).
    #[schemars(with = "Option<serde_json::Value>")]
    init: Option<Spanned<toml::Value>>,
    /// An output's expected values: "reference" (the reference kernel's), "command" (the
    /// reference command's), a `.npy` file, or "check_command" (none: the check command alone
    /// judges it). Default: the reference kernel's if [custom] names one, else the reference
    /// command's, else the check command's.
    #[schemars(with = "Option<String>")]
    expected: Option<Spanned<String>>,
    /// An output's tolerance: "exact", or { rel = .., abs = .., rel_eps = .. } (rel_eps: a
    /// relative tolerance in units of the element type's epsilon).
    #[schemars(with = "Option<serde_json::Value>")]
    tolerance: Option<Spanned<toml::Value>>,
    /// An input's `__constant__` variable: its contents are copied there before the runs,
    /// outside the timing (Kernel Tuner's `cmem_args`).
    #[schemars(with = "Option<String>")]
    constant: Option<Spanned<String>>,
    /// How an output is judged beyond its tolerance: { max_mismatches = k } passes it with at
    /// most k elements outside the tolerance (NaN counts as outside).
    #[schemars(with = "Option<RawCheck>")]
    check: Option<Spanned<RawCheck>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    /// Elements that may fall outside the tolerance (default 0).
    #[serde(default)]
    max_mismatches: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    /// What a `[[variant]]`'s `kernel` names.
    #[schemars(with = "String")]
    name: Spanned<String>,
    /// The launches of one run, in order.
    #[schemars(with = "Vec<RawLaunch>")]
    launch: Vec<Spanned<RawLaunch>>,
    /// NVRTC options of this kernel sequence's compile, after [custom]'s.
    #[serde(default)]
    #[schemars(with = "Vec<String>")]
    compiler_options: Vec<Spanned<String>>,
    /// Timed only: its outputs are not checked (it may write none), and its cases say
    /// "unchecked" wherever they are shown. Default false.
    #[schemars(with = "Option<bool>")]
    unchecked: Option<Spanned<bool>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawLaunch {
    /// The `__global__` function: its name, or a C++ name expression whose defines and axes
    /// kbench fills in (`softmax<BLOCK, T>`).
    #[schemars(with = "String")]
    kernel: Spanned<String>,
    /// Blocks: an expression, or a list of up to 3 (x, y, z).
    #[schemars(with = "serde_json::Value")]
    grid: Spanned<toml::Value>,
    /// Threads per block: an expression, or a list of up to 3 (x, y, z); at most 1024 in all.
    #[schemars(with = "serde_json::Value")]
    block: Spanned<toml::Value>,
    /// Dynamic shared memory in bytes, as an expression.
    #[schemars(with = "Option<String>")]
    shared_bytes: Option<Spanned<String>>,
    /// The kernel's arguments, in order: { buffer = "x" } or { type = "int", value = "n" }.
    #[serde(default)]
    #[schemars(with = "Vec<RawArg>")]
    args: Vec<Spanned<RawArg>>,
    /// Repeats the launch while a condition holds (a multi-pass kernel), see the README.
    #[schemars(with = "Option<RawRepeat>")]
    repeat: Option<Spanned<RawRepeat>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawArg {
    /// A buffer's address (in a repeated launch also `@read` and `@write`).
    #[schemars(with = "Option<String>")]
    buffer: Option<Spanned<String>>,
    /// A scalar's C type: char, unsigned char, short, unsigned short, int, unsigned, long long,
    /// unsigned long long, __half, __nv_bfloat16, float, double (or int8_t .. uint64_t, size_t,
    /// half).
    #[serde(rename = "type")]
    #[schemars(with = "Option<String>", extend("enum" = ["char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned", "unsigned int", "long long", "unsigned long long", "__half", "half", "__nv_bfloat16", "nv_bfloat16", "float", "double", "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t"]))]
    ctype: Option<Spanned<String>>,
    /// A scalar's value: a number, or an expression of the axes in a string.
    #[schemars(with = "Option<serde_json::Value>")]
    value: Option<Spanned<toml::Value>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawRepeat {
    /// The loop variable, usable in the launch's expressions.
    #[schemars(with = "String")]
    var: Spanned<String>,
    /// Its value in the first pass.
    #[schemars(with = "String")]
    from: Spanned<String>,
    /// Its value in the next pass, from this one's.
    #[schemars(with = "String")]
    next: Spanned<String>,
    /// Another pass runs while this holds of the next value.
    #[serde(rename = "while")]
    #[schemars(with = "String")]
    while_: Spanned<String>,
    /// `@read` in the first pass (later passes read what the pass before wrote).
    #[schemars(with = "String")]
    read: Spanned<String>,
    /// `@write` in the last pass.
    #[schemars(with = "String")]
    write: Spanned<String>,
    /// The two buffers the passes before the last write, in turn.
    #[schemars(with = "[String; 2]")]
    swap: Spanned<Vec<String>>,
}

/// Where each checked expression of the definition is in the source, by its key
/// (`custom.buffer[1].length`), for the mistakes found over the grid.
#[derive(Debug, Default)]
pub(super) struct CustomSpans {
    exprs: HashMap<String, Range<usize>>,
    table: Range<usize>,
}

/// The names an expression may read: the axes, and a repeated launch's loop variable.
struct Scope<'a> {
    axes: &'a [String],
    extra: Option<&'a str>,
}

impl Validator<'_> {
    /// `[custom]`, checked into a definition, with the spans `check_over_grid` reports at.
    pub(super) fn validate_custom(
        &self,
        raw: Spanned<RawCustom>,
    ) -> Result<(CustomDef, CustomSpans), ManifestError> {
        let mut spans = CustomSpans {
            exprs: HashMap::new(),
            table: self.table_header_span(raw.span()),
        };
        let raw = raw.into_inner();
        let dir = self.manifest_dir();
        let sources = self.custom_sources(&raw, &dir)?;
        let include_dirs = (raw.include_dirs.iter())
            .map(|d| {
                let path = dir.join(d.get_ref());
                // A results file's reader needs none of the study's files.
                if path.is_dir() || !self.files.on_disk() {
                    Ok(path)
                } else {
                    Err(self.error(
                        d.span(),
                        "custom.include_dirs",
                        format!(
                            "no folder `{}` (include folders are relative to the manifest)",
                            path.display()
                        ),
                    ))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let axes = self.custom_axes(&raw.axis)?;
        let axis_names: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
        let scope = Scope {
            axes: &axis_names,
            extra: None,
        };

        let (defines, undefine) = self.custom_defines(&raw, &sources, &axes, &scope, &mut spans)?;
        let compiler_options = self.compiler_options(&raw.compiler_options, "custom")?;

        // An output without `expected` is checked against the reference kernel if [custom]
        // names one, else against the reference command if it declares one.
        let default_expected = match (&raw.reference, &raw.reference_command, &raw.check_command) {
            (None, Some(_), _) => Expected::Command,
            (None, None, Some(_)) => Expected::CheckCommand,
            _ => Expected::Reference,
        };
        let axis_dtypes: Option<Vec<DType>> = axes.iter().find_map(|a| match &a.kind {
            AxisKindDecl::Dtype(types) => Some(types.clone()),
            _ => None,
        });
        let buffers = self.custom_buffers(
            &raw.buffer,
            &dir,
            axis_dtypes.as_deref(),
            &scope,
            &default_expected,
            &mut spans,
        )?;
        let expected_at = |i: usize| {
            let b = raw.buffer[i].get_ref();
            b.expected.as_ref().map_or(b.name.span(), |e| e.span())
        };
        let reference_command = self.custom_reference_command(
            raw.reference_command.as_ref(),
            &buffers,
            &expected_at,
            &axis_names,
            &dir,
        )?;
        let check_command =
            self.custom_check_command(raw.check_command.as_ref(), &buffers, &expected_at, &dir)?;
        let kernels = self.custom_kernels(&raw.kernel, &buffers, &scope, &mut spans)?;
        self.outputs_or_unchecked(&raw, &buffers, &kernels)?;
        let reference = match &raw.reference {
            Some(r) if !kernels.iter().any(|k| &k.name == r.get_ref()) => {
                return Err(self.error(
                    r.span(),
                    "custom.reference",
                    format!(
                        "reference `{}` is not a kernel of [[custom.kernel]]; declared: {}",
                        r.get_ref(),
                        kernels
                            .iter()
                            .map(|k| k.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
            r => r.as_ref().map(|r| r.get_ref().clone()),
        };
        if reference.is_none() {
            if let Some((i, b)) = (raw.buffer.iter().enumerate()).find(|(i, _)| {
                buffers[*i].role.is_output() && buffers[*i].expected == Some(Expected::Reference)
            }) {
                return Err(self.error(b.get_ref().name.span(), format!("custom.buffer[{i}]"), format!(
                    "output `{}` is checked against the reference kernel, and [custom] names none: add `reference = \"<kernel>\"` or a `reference_command` to [custom], or `expected = \"file.npy\"` here",
                    b.get_ref().name.get_ref()
                )));
            }
        }
        let mut work =
            |value: &Option<Spanned<String>>, key: &str| -> Result<String, ManifestError> {
                match value {
                    Some(text) => {
                        self.expression(text, key, &scope, &mut spans)?;
                        Ok(text.get_ref().clone())
                    }
                    None => Ok("0".into()),
                }
            };
        let bytes = work(&raw.bytes, "custom.bytes")?;
        let flops = work(&raw.flops, "custom.flops")?;
        let elements = work(&raw.elements, "custom.elements")?;
        let traffic = match &raw.traffic {
            None => Traffic::Copy,
            Some(text) => Traffic::parse(text.get_ref()).ok_or_else(|| {
                self.error(
                    text.span(),
                    "custom.traffic",
                    format!(
                        "unknown traffic `{}`: one of {}",
                        text.get_ref(),
                        Traffic::NAMES.map(|n| format!("`{n}`")).join(", ")
                    ),
                )
            })?,
        };
        let def = CustomDef {
            title: String::new(),
            sources,
            include_dirs,
            defines,
            undefine,
            compiler_options,
            axes,
            buffers,
            kernels,
            reference,
            reference_command,
            check_command,
            bytes,
            flops,
            elements,
            traffic,
        };
        Ok((def, spans))
    }

    /// kbench's defines (`custom::defines::made_by_kbench`) and the manifest's, in that order,
    /// and the names `undefine` leaves out. A clash is refused: a manifest define named like an
    /// axis (already a define of its own name), a name `undefine` does not know, and a define
    /// the sources also declare as a template parameter.
    fn custom_defines(
        &self,
        raw: &RawCustom,
        sources: &[SourceFile],
        axes: &[AxisDecl],
        scope: &Scope,
        spans: &mut CustomSpans,
    ) -> Result<(Defines, Vec<String>), ManifestError> {
        let made = crate::custom::defines::made_by_kbench(axes);
        let mut defines: Vec<(String, String)> = Vec::new();
        for m in &made {
            if !raw.defines.contains_key(&m.name) {
                defines.push((m.name.clone(), m.expr.clone()));
            }
        }
        for (name, text) in &raw.defines {
            let key = format!("custom.defines.{name}");
            let key_span = self.key_span_of(text.span());
            if !is_identifier(name) {
                return Err(self.error(key_span, key, format!("`{name}` is not a C identifier")));
            }
            if made.iter().any(|m| &m.name == name && m.expr == *name) {
                return Err(self.error(key_span, key, format!("`{name}` is an axis, and kbench defines every int, block, choice and dtype axis under its own name already: leave this entry out, or give the define another name")));
            }
            self.expression(text, &key, scope, spans)?;
            defines.push((name.clone(), text.get_ref().clone()));
        }
        let mut undefine = Vec::new();
        for name in &raw.undefine {
            if !made.iter().any(|m| &m.name == name.get_ref()) {
                let known: Vec<&str> = made.iter().map(|m| m.name.as_str()).collect();
                return Err(self.error(
                    name.span(),
                    "custom.undefine",
                    format!(
                        "`{}` is not one of kbench's defines; they are: {}",
                        name.get_ref(),
                        if known.is_empty() {
                            "none".to_string()
                        } else {
                            known.join(", ")
                        }
                    ),
                ));
            }
            undefine.push(name.get_ref().clone());
        }
        self.template_clash(raw, sources, &defines, &undefine, &made)?;
        Ok((defines, undefine))
    }

    /// A define that the sources also declare as a template parameter would turn the template
    /// into nonsense (`template <typename float>`): refused, at the define, with the way out.
    fn template_clash(
        &self,
        raw: &RawCustom,
        sources: &[SourceFile],
        defines: &[(String, String)],
        undefine: &[String],
        made: &[crate::custom::defines::Made],
    ) -> Result<(), ManifestError> {
        // `sources` holds raw.sources' files, in order.
        for (source, file) in raw.sources.iter().zip(sources) {
            for (parameter, line) in crate::custom::defines::template_parameters(&file.text) {
                let defined = defines.iter().any(|(name, _)| *name == parameter);
                if !defined || undefine.contains(&parameter) {
                    continue;
                }
                let clash = format!("`{parameter}` is a template parameter in {} line {line}, and a define would replace it there", source.get_ref());
                if let Some(text) = raw.defines.get(&parameter) {
                    return Err(self.error(
                        self.key_span_of(text.span()),
                        format!("custom.defines.{parameter}"),
                        format!("{clash}: name the define otherwise"),
                    ));
                }
                if let Some(m) = made.iter().find(|m| m.name == parameter) {
                    let span = raw
                        .axis
                        .get(m.axis)
                        .map_or(0..0, |a| a.get_ref().name.span());
                    return Err(self.error(span, format!("custom.axis[{}].name", m.axis), format!("{clash} (kbench defines it from {}): add `undefine = [\"{parameter}\"]` to [custom] (a kernel name such as `k<{parameter}>` still reads it), or rename the template parameter", m.from)));
                }
            }
        }
        Ok(())
    }

    /// `compiler_options` of [custom] or of a kernel sequence (`table`): NVRTC's options, each
    /// one word starting with `-`; the architecture is kbench's to choose.
    fn compiler_options(
        &self,
        raw: &[Spanned<String>],
        table: &str,
    ) -> Result<Vec<String>, ManifestError> {
        let key = format!("{table}.compiler_options");
        let mut options = Vec::new();
        for option in raw {
            let text = option.get_ref();
            let fault = if !text.starts_with('-') {
                Some(format!("`{text}` is not an NVRTC option: options start with `-` (`-use_fast_math`, `--maxrregcount=64`)"))
            } else if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
                Some(format!(
                    "`{}` holds a space: give each option as its own string",
                    printable(text)
                ))
            } else if ["-arch", "--gpu-architecture", "--gpu-name", "-gpu-name"]
                .iter()
                .any(|a| text.starts_with(a))
            {
                Some(format!("`{text}`: kbench compiles for the GPU each case runs on; leave the architecture out"))
            } else {
                None
            };
            if let Some(message) = fault {
                return Err(self.error(option.span(), key, message));
            }
            options.push(text.clone());
        }
        Ok(options)
    }

    /// The folder paths in the manifest are relative to (absolute, so the worker needs none):
    /// for a manifest read back from a results file, the folder its run recorded.
    fn manifest_dir(&self) -> PathBuf {
        if let FileSource::Recorded {
            manifest_absolute: Some(path),
            ..
        } = self.files
        {
            if let Some(dir) = path.parent() {
                return dir.to_path_buf();
            }
        }
        let dir = self.path.parent().unwrap_or(Path::new(""));
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf())
    }

    fn custom_sources(
        &self,
        raw: &RawCustom,
        dir: &Path,
    ) -> Result<Vec<SourceFile>, ManifestError> {
        if raw.sources.is_empty() {
            return Err(self.error(
                self.header_span("custom").unwrap_or(0..0),
                "custom.sources",
                "[custom] needs at least one source file: sources = [\"kernels.cu\"]".into(),
            ));
        }
        raw.sources
            .iter()
            .map(|s| {
                let path = dir.join(s.get_ref());
                if let FileSource::Recorded { sources, .. } = self.files {
                    // A results file's study reads as recorded; an older file, which recorded
                    // none, from disk.
                    if !sources.is_empty() {
                        let absolute = path.display().to_string();
                        let Some(recorded) = sources.iter().find(|r| r.absolute == absolute) else {
                            return Err(self.error(
                                s.span(),
                                "custom.sources",
                                format!("the results file does not record source `{absolute}` (manifest.sources): was it edited?"),
                            ));
                        };
                        return Ok(SourceFile {
                            path,
                            text: recorded.text.clone(),
                        });
                    }
                }
                let text =
                    crate::input_file::read_regular_text(&path, "source file", MAX_SOURCE_BYTES)
                        .map_err(|e| {
                            self.error(
                                s.span(),
                                "custom.sources",
                                format!("{e} (sources are relative to the manifest)"),
                            )
                        })?;
                Ok(SourceFile { path, text })
            })
            .collect()
    }

    fn custom_axes(&self, raw: &[Spanned<RawAxis>]) -> Result<Vec<AxisDecl>, ManifestError> {
        let mut axes: Vec<AxisDecl> = Vec::new();
        for (i, spanned) in raw.iter().enumerate() {
            let a = spanned.get_ref();
            let key = |k: &str| format!("custom.axis[{i}].{k}");
            let name = a.name.get_ref();
            if !is_identifier(name)
                || matches!(
                    name.as_str(),
                    "and" | "or" | "not" | "ceil_div" | "min" | "max" | "sizeof"
                )
            {
                return Err(self.error(a.name.span(), key("name"), format!("`{name}` cannot name an axis: use letters, digits and `_`, not a word of the expressions")));
            }
            if axes.iter().any(|x| &x.name == name) {
                return Err(self.error(
                    a.name.span(),
                    key("name"),
                    format!("two axes are named `{name}`"),
                ));
            }
            let values = a.values.as_ref();
            let whole = a.kind.get_ref() == "int";
            for (bound, which) in [(&a.min, "min"), (&a.max, "max")] {
                let Some(bound) = bound else { continue };
                let x = *bound.get_ref();
                if x.is_nan() || (whole && !(x.is_finite() && x.fract() == 0.0)) {
                    let wanted = if whole { "a whole number" } else { "a number" };
                    return Err(self.error(
                        bound.span(),
                        key(which),
                        format!("`{which}` of axis `{name}` is {x}; it must be {wanted}"),
                    ));
                }
            }
            let bound = |v: &Option<Spanned<f64>>, d: f64| v.as_ref().map_or(d, |v| *v.get_ref());
            let kind = match a.kind.get_ref().as_str() {
                "size" => AxisKindDecl::Size,
                "block" => AxisKindDecl::Block,
                "int" => AxisKindDecl::Int {
                    min: bound(&a.min, i64::MIN as f64) as i64,
                    max: bound(&a.max, i64::MAX as f64) as i64,
                },
                "float" => AxisKindDecl::Float { min: bound(&a.min, f64::MIN), max: bound(&a.max, f64::MAX) },
                "choice" => match values {
                    Some(v) if !v.get_ref().is_empty() => {
                        // Its names are printed in tables and messages, and passed as defines.
                        if let Some(c) = v.get_ref().iter().flat_map(|n| n.chars()).find(|c| c.is_control()) {
                            return Err(self.error(v.span(), key("values"), format!("a name of choice axis `{name}` holds the control character {}: name its choices in plain text", c.escape_unicode())));
                        }
                        AxisKindDecl::Choice(v.get_ref().clone())
                    }
                    _ => return Err(self.error(a.kind.span(), key("values"), format!("choice axis `{name}` needs its names: values = [\"a\", \"b\"]"))),
                },
                "dtype" => {
                    if name != "dtype" {
                        return Err(self.error(a.name.span(), key("name"), "a dtype axis is named `dtype` (buffers of type \"dtype\" and the `T` define read it)".into()));
                    }
                    match values {
                        None => AxisKindDecl::Dtype(DType::ALL.to_vec()),
                        Some(v) => AxisKindDecl::Dtype(v.get_ref().iter().map(|s| DType::parse(s).ok_or_else(|| {
                            self.error(v.span(), key("values"), format!("unknown dtype `{s}`; known: {}", DType::names()))
                        })).collect::<Result<_, _>>()?),
                    }
                }
                other => return Err(self.error(a.kind.span(), key("kind"), format!("unknown axis kind `{other}`; known: size, int, float, choice, dtype, block"))),
            };
            if let (Some(min), Some(max)) = (&a.min, &a.max) {
                if min.get_ref() > max.get_ref() {
                    return Err(self.error(
                        max.span(),
                        key("max"),
                        format!("max ({}) is below min ({})", max.get_ref(), min.get_ref()),
                    ));
                }
            }
            let default = match &a.default {
                None if name == "block" => Some(ParamValue::Int(256)),
                None => None,
                Some(v) => Some(
                    crate::grid::param_from_toml(v.get_ref())
                        .and_then(|value| axis_value_fits(&kind, value))
                        .map_err(|m| {
                            self.error(
                                v.span(),
                                key("default"),
                                format!("default of axis `{name}`: {m}"),
                            )
                        })?,
                ),
            };
            axes.push(AxisDecl {
                name: name.clone(),
                kind,
                default,
                doc: a.doc.clone().unwrap_or_else(|| a.kind.get_ref().clone()),
            });
        }
        Ok(axes)
    }

    fn custom_buffers(
        &self,
        raw: &[Spanned<RawBuffer>],
        dir: &Path,
        axis_dtypes: Option<&[DType]>,
        scope: &Scope,
        default_expected: &Expected,
        spans: &mut CustomSpans,
    ) -> Result<Vec<BufferDecl>, ManifestError> {
        if raw.is_empty() {
            return Err(self.error(self.header_span("custom").unwrap_or(0..0), "custom.buffer", "[custom] declares no [[custom.buffer]]: a kernel needs at least one output to check".into()));
        }
        let mut buffers: Vec<BufferDecl> = Vec::new();
        for (i, spanned) in raw.iter().enumerate() {
            let b = spanned.get_ref();
            let key = |k: &str| format!("custom.buffer[{i}].{k}");
            let name = b.name.get_ref();
            if !is_identifier(name) {
                return Err(self.error(
                    b.name.span(),
                    key("name"),
                    format!("buffer name `{name}` must be letters, digits and `_`"),
                ));
            }
            if buffers.iter().any(|x| &x.name == name) {
                return Err(self.error(
                    b.name.span(),
                    key("name"),
                    format!("two buffers are named `{name}`"),
                ));
            }
            let elem = match b.elem.get_ref().as_str() {
                "dtype" if axis_dtypes.is_some() => ElemType::FromDtype,
                "dtype" => {
                    return Err(self.error(
                        b.elem.span(),
                        key("type"),
                        "type \"dtype\" follows the `dtype` axis, and [custom] declares none"
                            .into(),
                    ))
                }
                other => ElemType::Fixed(DType::parse(other).ok_or_else(|| {
                    self.error(
                        b.elem.span(),
                        key("type"),
                        format!(
                            "unknown element type `{other}`; known: {}, dtype",
                            DType::names()
                        ),
                    )
                })?),
            };
            let role = match b.role.get_ref().as_str() {
                "input" => Role::Input,
                "output" => Role::Output,
                "inout" => Role::InOut,
                "scratch" => Role::Scratch,
                other => {
                    return Err(self.error(
                        b.role.span(),
                        key("role"),
                        format!("unknown role `{other}`; known: input, output, inout, scratch"),
                    ))
                }
            };
            self.expression(&b.length, &key("length"), scope, spans)?;
            let init = self.buffer_init(b, i, elem, role, &buffers, dir, scope, spans)?;
            let not_output = |field: &str, span: Range<usize>| {
                self.error(
                    span,
                    key(field),
                    format!("`{field}` is for outputs; `{name}` is {}", b.role.get_ref()),
                )
            };
            let expected = match &b.expected {
                Some(e) if !role.is_output() => return Err(not_output("expected", e.span())),
                Some(e) if e.get_ref() == "reference" => Some(Expected::Reference),
                Some(e) if e.get_ref() == "command" => Some(Expected::Command),
                Some(e) if e.get_ref() == "check_command" => Some(Expected::CheckCommand),
                Some(e) => {
                    spans.exprs.insert(key("expected"), e.span());
                    Some(Expected::Npy(self.npy_file(e, &key("expected"), dir)?))
                }
                None if role.is_output() => Some(default_expected.clone()),
                None => None,
            };
            let tolerance = match &b.tolerance {
                Some(t) if !role.is_output() => return Err(not_output("tolerance", t.span())),
                Some(t) => Some(self.tolerance(t, &key("tolerance"))?),
                None => None,
            };
            let constant = self.buffer_constant(b, i, role, &buffers)?;
            let max_mismatches = match &b.check {
                Some(c) if !role.is_output() => return Err(not_output("check", c.span())),
                Some(c) => c.get_ref().max_mismatches,
                None => 0,
            };
            // A vector element is `width` values: every later use counts the values.
            let length = match &b.width {
                Some(w) if !(1..=16).contains(w.get_ref()) => {
                    return Err(self.error(
                        w.span(),
                        key("width"),
                        format!(
                            "`width` is the values an element holds (float4: 4), 1 to 16, not {}",
                            w.get_ref()
                        ),
                    ))
                }
                Some(w) if *w.get_ref() > 1 => {
                    format!("({}) * {}", b.length.get_ref(), w.get_ref())
                }
                _ => b.length.get_ref().clone(),
            };
            buffers.push(BufferDecl {
                name: name.clone(),
                elem,
                length,
                role,
                init,
                expected,
                tolerance,
                constant,
                max_mismatches,
            });
        }
        Ok(buffers)
    }

    /// A buffer's `init`, checked (an input's alone; a copy of an input declared before it, of
    /// its type; an expression of `i` and the axes), or the default for its type.
    #[allow(clippy::too_many_arguments)]
    fn buffer_init(
        &self,
        b: &RawBuffer,
        i: usize,
        elem: ElemType,
        role: Role,
        buffers: &[BufferDecl],
        dir: &Path,
        scope: &Scope,
        spans: &mut CustomSpans,
    ) -> Result<Init, ManifestError> {
        let key = |k: &str| format!("custom.buffer[{i}].{k}");
        let name = b.name.get_ref();
        Ok(match &b.init {
            Some(v) if !role.is_input() => {
                return Err(self.error(
                    v.span(),
                    key("init"),
                    format!(
                        "`init` sets an input's contents; a{} {} buffer has none to set",
                        if role == Role::Output { "n" } else { "" },
                        b.role.get_ref()
                    ),
                ))
            }
            Some(v) => {
                // Checked against the buffer's type at each grid point (`check_over_grid`).
                spans.exprs.insert(key("init"), v.span());
                let init = self.init(v, &key("init"), dir)?;
                match &init {
                    Init::Copy(from) => {
                        let source = buffers
                            .iter()
                            .find(|x| &x.name == from && x.role.is_input());
                        match source {
                            Some(source) if source.elem == elem => {}
                            Some(source) => return Err(self.error(v.span(), key("init"), format!("`{from}` is {}, and `{name}` is {}: a copy has its source's type", elem_name(source.elem), elem_name(elem)))),
                            None => return Err(self.error(v.span(), key("init"), format!("`copy` names `{from}`, which is no input declared before `{name}`"))),
                        }
                    }
                    Init::Offsets(text) => {
                        if matches!(elem, ElemType::Fixed(d) if d.is_float()) {
                            return Err(self.error(
                                v.span(),
                                key("init"),
                                format!(
                                    "`offsets` are integers, and `{name}` is {}",
                                    elem_name(elem)
                                ),
                            ));
                        }
                        let spanned = Spanned::new(v.span(), text.clone());
                        self.expression(&spanned, &key("init"), scope, spans)?;
                    }
                    Init::Expr(text) => {
                        let mut with_index: Vec<String> = scope.axes.to_vec();
                        with_index.push("i".into());
                        let inner = Scope {
                            axes: &with_index,
                            extra: None,
                        };
                        let spanned = Spanned::new(v.span(), text.clone());
                        self.expression(&spanned, &key("init"), &inner, spans)?;
                    }
                    _ => {}
                }
                init
            }
            None => match elem {
                // Integers: [-100, 100], within the type (u8: [0, 100]).
                ElemType::Fixed(d) if !d.is_float() => Init::Uniform {
                    low: d.integer_range().map_or(-100.0, |(low, _)| low.max(-100.0)),
                    high: 100.0,
                    sorted: false,
                },
                _ => Init::Uniform {
                    low: 0.0,
                    high: 1.0,
                    sorted: false,
                },
            },
        })
    }

    /// A buffer's `constant`: an input's alone, a C name, and no variable filled twice.
    fn buffer_constant(
        &self,
        b: &RawBuffer,
        i: usize,
        role: Role,
        buffers: &[BufferDecl],
    ) -> Result<Option<String>, ManifestError> {
        let key = |k: &str| format!("custom.buffer[{i}].{k}");
        let name = b.name.get_ref();
        let constant = match &b.constant {
            Some(c) if role != Role::Input => {
                return Err(self.error(c.span(), key("constant"), format!("`constant` fills a __constant__ variable from an input; `{name}` is {}", b.role.get_ref())))
            }
            Some(c) if !is_identifier(c.get_ref()) => {
                return Err(self.error(c.span(), key("constant"), format!("`{}` is not a __constant__ variable's name (letters, digits and `_`, declared at the sources' file scope)", printable(c.get_ref()))))
            }
            Some(c) => Some(c.get_ref().clone()),
            None => None,
        };
        if let Some(symbol) = &constant {
            if let Some(other) = buffers.iter().find(|x| x.constant.as_ref() == Some(symbol)) {
                return Err(self.error(
                    b.constant.as_ref().map_or(0..0, |c| c.span()),
                    key("constant"),
                    format!("buffer `{}` fills `{symbol}` already", other.name),
                ));
            }
        }
        Ok(constant)
    }

    fn npy_file(
        &self,
        value: &Spanned<String>,
        key: &str,
        dir: &Path,
    ) -> Result<PathBuf, ManifestError> {
        let path = dir.join(value.get_ref());
        if !self.files.on_disk() {
            return Ok(path);
        }
        if let Some(message) = crate::input_file::not_a_file_message(&path) {
            return Err(self.error(value.span(), key, message));
        }
        if path.extension().is_none_or(|e| e != "npy") || !path.is_file() {
            return Err(self.error(
                value.span(),
                key,
                format!(
                    "no .npy file `{}` (files are relative to the manifest)",
                    path.display()
                ),
            ));
        }
        Ok(path)
    }

    fn init(
        &self,
        value: &Spanned<toml::Value>,
        key: &str,
        dir: &Path,
    ) -> Result<Init, ManifestError> {
        let span = value.span();
        let bad = |m: &str| {
            self.error(span.clone(), key, format!("{m}; an init is \"zeros\", \"iota\", {{ uniform = [lo, hi] }}, {{ normal = [mean, std] }}, {{ constant = x }}, {{ sorted = [lo, hi] }}, {{ offsets = \"nnz\" }}, {{ copy = \"buffer\" }}, {{ expr = \"i % 7\" }} or {{ npy = \"file.npy\" }}"))
        };
        let pair = |v: &toml::Value| -> Option<(f64, f64)> {
            let a = v.as_array()?;
            let num = |x: &toml::Value| x.as_float().or_else(|| x.as_integer().map(|i| i as f64));
            match a.as_slice() {
                [x, y] => Some((num(x)?, num(y)?)),
                _ => None,
            }
        };
        match value.get_ref() {
            toml::Value::String(s) if s == "zeros" => Ok(Init::Zeros),
            toml::Value::String(s) if s == "iota" => Ok(Init::Iota),
            toml::Value::Table(t) if t.len() == 1 => {
                let (k, v) = t.iter().next().expect("one entry");
                match k.as_str() {
                    "uniform" | "sorted" => match pair(v) {
                        Some((low, high)) if low < high => Ok(Init::Uniform {
                            low,
                            high,
                            sorted: k == "sorted",
                        }),
                        _ => Err(bad(&format!("`{k}` takes [lo, hi] with lo < hi"))),
                    },
                    "offsets" => match v.as_str() {
                        Some(text) => Ok(Init::Offsets(text.to_string())),
                        None => Err(bad("`offsets` takes the total (the last offset) as an expression of the axes, in a string")),
                    },
                    "normal" => match pair(v) {
                        Some((mean, std_dev)) if std_dev >= 0.0 => {
                            Ok(Init::Normal { mean, std_dev })
                        }
                        _ => Err(bad("`normal` takes [mean, std] with std >= 0")),
                    },
                    "constant" => v
                        .as_float()
                        .or_else(|| v.as_integer().map(|i| i as f64))
                        .map(Init::Constant)
                        .ok_or_else(|| bad("`constant` takes a number")),
                    "copy" => match v.as_str() {
                        Some(name) => Ok(Init::Copy(name.to_string())),
                        None => Err(bad("`copy` takes the name of an input declared before this buffer")),
                    },
                    "expr" => match v.as_str() {
                        Some(text) => Ok(Init::Expr(text.to_string())),
                        None => Err(bad("`expr` takes an expression of `i` (the element's index) and the axes, in a string")),
                    },
                    "npy" => match v.as_str() {
                        Some(file) => {
                            let path = dir.join(file);
                            if !self.files.on_disk() {
                                Ok(Init::Npy(path))
                            } else if let Some(message) = crate::input_file::not_a_file_message(&path) {
                                Err(bad(&message))
                            } else if path.is_file() {
                                Ok(Init::Npy(path))
                            } else {
                                Err(bad(&format!("no .npy file `{}`", path.display())))
                            }
                        }
                        None => Err(bad("`npy` takes a file name")),
                    },
                    other => Err(bad(&format!("unknown init `{other}`"))),
                }
            }
            _ => Err(bad("unknown init")),
        }
    }

    fn tolerance(
        &self,
        value: &Spanned<toml::Value>,
        key: &str,
    ) -> Result<ToleranceDecl, ManifestError> {
        const KEYS: [&str; 3] = ["rel", "abs", "rel_eps"];
        let bad = || {
            self.error(
                value.span(),
                key,
                "a tolerance is \"exact\" or { rel = 1e-5, abs = 0.0, rel_eps = 4 } (numbers >= 0; rel_eps counts the element type's epsilons)".into(),
            )
        };
        match value.get_ref() {
            toml::Value::String(s) if s == "exact" => Ok(ToleranceDecl {
                rel: 0.0,
                abs: 0.0,
                rel_eps: 0.0,
            }),
            toml::Value::Table(t)
                if t.keys().all(|k| KEYS.contains(&k.as_str())) && !t.is_empty() =>
            {
                let get = |k: &str| -> Result<f64, ManifestError> {
                    match t.get(k) {
                        None => Ok(0.0),
                        Some(v) => {
                            match v.as_float().or_else(|| v.as_integer().map(|i| i as f64)) {
                                Some(x) if x.is_finite() && x >= 0.0 => Ok(x),
                                _ => Err(bad()),
                            }
                        }
                    }
                };
                Ok(ToleranceDecl {
                    rel: get("rel")?,
                    abs: get("abs")?,
                    rel_eps: get("rel_eps")?,
                })
            }
            _ => Err(bad()),
        }
    }

    fn custom_kernels(
        &self,
        raw: &[Spanned<RawKernel>],
        buffers: &[BufferDecl],
        scope: &Scope,
        spans: &mut CustomSpans,
    ) -> Result<Vec<Program>, ManifestError> {
        if raw.is_empty() {
            return Err(self.error(
                self.header_span("custom").unwrap_or(0..0),
                "custom.kernel",
                "[custom] declares no [[custom.kernel]]: what would the variants run?".into(),
            ));
        }
        let mut programs: Vec<Program> = Vec::new();
        for (i, spanned) in raw.iter().enumerate() {
            let k = spanned.get_ref();
            let name = k.name.get_ref();
            let key = format!("custom.kernel[{i}]");
            if !super::is_safe_name(name) {
                return Err(self.error(
                    k.name.span(),
                    format!("{key}.name"),
                    format!("kernel name `{name}` breaks the rule: {}", super::NAME_RULE),
                ));
            }
            if programs.iter().any(|p| &p.name == name) {
                return Err(self.error(
                    k.name.span(),
                    format!("{key}.name"),
                    format!("two kernels are named `{name}`"),
                ));
            }
            if k.launch.is_empty() {
                return Err(self.error(
                    k.name.span(),
                    format!("{key}.launch"),
                    format!("kernel `{name}` has no [[custom.kernel.launch]]"),
                ));
            }
            let launches = (k.launch.iter().enumerate())
                .map(|(j, l)| {
                    self.launch(
                        l.get_ref(),
                        &format!("{key}.launch[{j}]"),
                        buffers,
                        scope,
                        spans,
                    )
                })
                .collect::<Result<_, _>>()?;
            programs.push(Program {
                name: name.clone(),
                launches,
                compiler_options: self.compiler_options(&k.compiler_options, &key)?,
                unchecked: k.unchecked.as_ref().is_some_and(|u| *u.get_ref()),
            });
        }
        Ok(programs)
    }

    /// A study without outputs is timing alone: every kernel sequence must say so
    /// (`unchecked = true`). The reference sequence is never unchecked.
    fn outputs_or_unchecked(
        &self,
        raw: &RawCustom,
        buffers: &[BufferDecl],
        kernels: &[Program],
    ) -> Result<(), ManifestError> {
        let reference = raw.reference.as_ref().map(|r| r.get_ref());
        for (k, program) in kernels.iter().enumerate() {
            let unchecked = raw.kernel[k].get_ref().unchecked.as_ref();
            if let Some(flag) = unchecked.filter(|_| reference == Some(&program.name)) {
                return Err(self.error(flag.span(), format!("custom.kernel[{k}].unchecked"), format!(
                    "kernel `{}` is the study's reference: its outputs are what the others are checked against, so it cannot be unchecked",
                    program.name
                )));
            }
        }
        if buffers.iter().any(|b| b.role.is_output()) {
            return Ok(());
        }
        match kernels.iter().position(|k| !k.unchecked) {
            None => Ok(()),
            Some(k) => Err(self.error(raw.kernel[k].get_ref().name.span(), format!("custom.kernel[{k}]"), format!(
                "no buffer has role \"output\" or \"inout\", so kernel `{}` has nothing to check: declare its outputs, or say it is timed only with `unchecked = true`",
                kernels[k].name
            ))),
        }
    }

    fn launch(
        &self,
        l: &RawLaunch,
        key: &str,
        buffers: &[BufferDecl],
        scope: &Scope,
        spans: &mut CustomSpans,
    ) -> Result<LaunchDecl, ManifestError> {
        if let Err(message) = crate::custom::defines::check_kernel_name(l.kernel.get_ref()) {
            return Err(self.error(l.kernel.span(), format!("{key}.kernel"), message));
        }
        let buffer_exists = |name: &Spanned<String>, k: &str| -> Result<(), ManifestError> {
            if buffers.iter().any(|b| &b.name == name.get_ref()) {
                Ok(())
            } else {
                Err(self.error(
                    name.span(),
                    k,
                    format!(
                        "no buffer `{}`; declared: {}",
                        name.get_ref(),
                        buffers
                            .iter()
                            .map(|b| b.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ))
            }
        };
        let repeat = match &l.repeat {
            None => None,
            Some(r) => {
                let r = r.get_ref();
                let rkey = format!("{key}.repeat");
                let var = r.var.get_ref();
                if !is_identifier(var) || scope.axes.contains(var) {
                    return Err(self.error(
                        r.var.span(),
                        format!("{rkey}.var"),
                        format!("the loop variable `{var}` must be a new name (not an axis)"),
                    ));
                }
                self.expression(&r.from, &format!("{rkey}.from"), scope, spans)?;
                let inner = Scope {
                    axes: scope.axes,
                    extra: Some(var),
                };
                self.expression(&r.next, &format!("{rkey}.next"), &inner, spans)?;
                self.expression(&r.while_, &format!("{rkey}.while"), &inner, spans)?;
                buffer_exists(&r.read, &format!("{rkey}.read"))?;
                buffer_exists(&r.write, &format!("{rkey}.write"))?;
                let swap = r.swap.get_ref();
                let [a, b] = swap.as_slice() else {
                    return Err(self.error(
                        r.swap.span(),
                        format!("{rkey}.swap"),
                        "swap names two buffers the passes write in turn".into(),
                    ));
                };
                for s in [a, b] {
                    if !buffers.iter().any(|x| &x.name == s) {
                        return Err(self.error(
                            r.swap.span(),
                            format!("{rkey}.swap"),
                            format!("no buffer `{s}`"),
                        ));
                    }
                }
                if a == b {
                    return Err(self.error(
                        r.swap.span(),
                        format!("{rkey}.swap"),
                        "swap names the same buffer twice: a pass would read what it writes".into(),
                    ));
                }
                Some(Repeat {
                    var: var.clone(),
                    from: r.from.get_ref().clone(),
                    next: r.next.get_ref().clone(),
                    while_: r.while_.get_ref().clone(),
                    read: r.read.get_ref().clone(),
                    write: r.write.get_ref().clone(),
                    swap: [a.clone(), b.clone()],
                })
            }
        };
        let inner = Scope {
            axes: scope.axes,
            extra: repeat.as_ref().map(|r| r.var.as_str()),
        };
        let grid = self.dims(&l.grid, &format!("{key}.grid"), &inner, spans)?;
        let block = self.dims(&l.block, &format!("{key}.block"), &inner, spans)?;
        let shared_bytes = match &l.shared_bytes {
            Some(s) => {
                self.expression(s, &format!("{key}.shared_bytes"), &inner, spans)?;
                s.get_ref().clone()
            }
            None => "0".into(),
        };
        let mut args = Vec::new();
        for (i, a) in l.args.iter().enumerate() {
            let akey = format!("{key}.args[{i}]");
            let arg = a.get_ref();
            args.push(match (&arg.buffer, &arg.ctype, &arg.value) {
                (Some(name), None, None) => {
                    let pass_buffer = matches!(name.get_ref().as_str(), "@read" | "@write");
                    if pass_buffer && repeat.is_none() {
                        return Err(self.error(name.span(), akey, format!("`{}` is a repeated launch's buffer, and this launch has no `repeat`", name.get_ref())));
                    }
                    if !pass_buffer {
                        buffer_exists(name, &akey)?;
                    }
                    ArgDecl::Buffer(name.get_ref().clone())
                }
                (None, Some(t), Some(v)) => {
                    let ctype = CType::parse(t.get_ref()).ok_or_else(|| {
                        self.error(t.span(), format!("{akey}.type"), format!("unknown C type `{}`; known: {} (pointers are {{ buffer = \"name\" }})", t.get_ref(), CType::known()))
                    })?;
                    let text = match v.get_ref() {
                        toml::Value::String(s) => {
                            let spanned = Spanned::new(v.span(), s.clone());
                            self.expression(&spanned, &akey, &inner, spans)?;
                            s.clone()
                        }
                        toml::Value::Integer(i) => i.to_string(),
                        toml::Value::Float(x) => format!("{x:?}"),
                        _ => return Err(self.error(v.span(), format!("{akey}.value"), "an argument's value is a number or an expression in a string".into())),
                    };
                    ArgDecl::Scalar { ctype, expr: text }
                }
                _ => return Err(self.error(a.span(), akey, "an argument is { buffer = \"name\" } or { type = \"int\", value = \"expression\" }".into())),
            });
        }
        Ok(LaunchDecl {
            kernel: l.kernel.get_ref().clone(),
            grid,
            block,
            shared_bytes,
            args,
            repeat,
        })
    }

    /// A grid or block: one expression, or a list of up to three.
    fn dims(
        &self,
        value: &Spanned<toml::Value>,
        key: &str,
        scope: &Scope,
        spans: &mut CustomSpans,
    ) -> Result<Vec<String>, ManifestError> {
        let as_text = |v: &toml::Value| match v {
            toml::Value::String(s) => Some(s.clone()),
            toml::Value::Integer(i) => Some(i.to_string()),
            _ => None,
        };
        let bad = || {
            self.error(
                value.span(),
                key,
                "expected an expression in a string (or an integer), or a list of up to 3 of them"
                    .into(),
            )
        };
        let texts: Vec<String> = match value.get_ref() {
            toml::Value::Array(items) if (1..=3).contains(&items.len()) => items
                .iter()
                .map(as_text)
                .collect::<Option<_>>()
                .ok_or_else(bad)?,
            one => vec![as_text(one).ok_or_else(bad)?],
        };
        for (i, text) in texts.iter().enumerate() {
            let k = if texts.len() == 1 {
                key.to_string()
            } else {
                format!("{key}[{i}]")
            };
            // A list's elements share its span: a mistake is shown on the list.
            let spanned = if matches!(value.get_ref(), toml::Value::String(_)) {
                Spanned::new(value.span(), text.clone())
            } else {
                Spanned::new(value.span().start..value.span().start, text.clone())
            };
            self.expression(&spanned, &k, scope, spans)?;
        }
        // A fault of the whole (a block of too many threads) is shown on the value.
        spans.exprs.insert(key.to_string(), value.span());
        Ok(texts)
    }

    /// Parses an expression and checks the names it reads; records its span under `key`.
    fn expression(
        &self,
        text: &Spanned<String>,
        key: &str,
        scope: &Scope,
        spans: &mut CustomSpans,
    ) -> Result<Expr, ManifestError> {
        let at = |offset: usize| where_source_span(self.source, text.span(), offset);
        let expr =
            Expr::parse(text.get_ref()).map_err(|e| self.error(at(e.offset), key, e.message))?;
        for (name, offset) in expr.names() {
            if !scope.axes.iter().any(|a| a == name) && scope.extra != Some(name) {
                let known: Vec<&str> = scope
                    .axes
                    .iter()
                    .map(String::as_str)
                    .chain(scope.extra)
                    .collect();
                return Err(self.error(
                    at(offset),
                    key,
                    format!(
                        "unknown name `{name}` in the expression; it may use the axes ({})",
                        known.join(", ")
                    ),
                ));
            }
        }
        spans.exprs.insert(key.to_string(), text.span());
        Ok(expr)
    }

    /// The span of the key of the value at `span` (`NAME` in `NAME = "..."`).
    fn key_span_of(&self, span: Range<usize>) -> Range<usize> {
        self.key_span(&Spanned::new(span, toml::Value::Boolean(true)))
    }

    /// Each `.npy` file a buffer is filled from or checked against, read once (its header
    /// alone), for `check_over_grid` to compare with the buffer's type and length at each point.
    fn npy_headers(
        &self,
        def: &CustomDef,
        spans: &CustomSpans,
    ) -> Result<Vec<NpyHeader>, ManifestError> {
        let mut files = Vec::new();
        if !self.files.on_disk() {
            // Checked when the run started; a results file's reader needs none of them.
            return Ok(files);
        }
        for (i, b) in def.buffers.iter().enumerate() {
            let (key, path, typed) = match (&b.init, &b.expected) {
                (Init::Npy(path), _) if b.role.is_input() => {
                    (format!("custom.buffer[{i}].init"), path, true)
                }
                // An expected file may hold any numeric type: it is compared as float64.
                (_, Some(Expected::Npy(path))) => {
                    (format!("custom.buffer[{i}].expected"), path, false)
                }
                _ => continue,
            };
            let span = spans
                .exprs
                .get(&key)
                .cloned()
                .unwrap_or(spans.table.clone());
            let (descr, count) = crate::npy::header(path).map_err(|m| {
                self.error(span.clone(), key.clone(), format!("{} {m}", path.display()))
            })?;
            files.push(NpyHeader {
                buffer: i,
                key,
                descr: typed.then_some(descr),
                count,
                path: path.clone(),
            });
        }
        Ok(files)
    }

    /// Evaluates every length, define, work count and launch of the study's variants at each
    /// grid point (the first `MAX_CHECKED_POINTS` the filter keeps): a mistake that shows only
    /// at some sizes is refused here, at its expression, with the point.
    pub(super) fn check_over_grid(
        &self,
        def: &CustomDef,
        spans: &CustomSpans,
        axes: &[(String, AxisValues)],
        zip: &[Vec<String>],
        filter: Option<&WhereExpr>,
        variants: &[Variant],
    ) -> Result<Vec<String>, ManifestError> {
        let at = |e: DefError, point: &crate::vocab::Params| {
            let mut key = e.key.clone();
            let span = loop {
                if let Some(span) = spans.exprs.get(&key) {
                    break where_source_span(self.source, span.clone(), e.offset);
                }
                match key.rfind(['.', '[']) {
                    Some(i) => key.truncate(i),
                    None => break spans.table.clone(),
                }
            };
            self.error(
                span,
                e.key,
                format!(
                    "{} (at {})",
                    e.message,
                    crate::vocab::describe_params(point)
                ),
            )
        };
        let mut checked = 0;
        // Per kernel sequence: the points it cannot run, the points checked, the first fault.
        let mut unrunnable: Vec<UnrunnablePoints> = def
            .kernels
            .iter()
            .map(|_| UnrunnablePoints::default())
            .collect();
        let npy_files = self.npy_headers(def, spans)?;
        for point in grid_points(axes, zip) {
            if let Some(filter) = filter {
                if !filter.matches(&point).unwrap_or(false) {
                    continue;
                }
            }
            checked += 1;
            if checked > MAX_CHECKED_POINTS {
                break;
            }
            let names = |name: &str| point.get(name).map(schedule::param_value);
            for (i, b) in def.buffers.iter().enumerate() {
                schedule::eval_count(
                    &b.length,
                    &format!("custom.buffer[{i}].length"),
                    "the length",
                    isize::MAX as u64,
                    &names,
                )
                .map_err(|e| at(e, &point))?;
            }
            inputs_at(def, &npy_files, &point).map_err(|e| at(e, &point))?;
            for (name, text) in &def.defines {
                if let Some(e) =
                    schedule::eval(text, &format!("custom.defines.{name}"), &names).err()
                {
                    return Err(at(e, &point));
                }
            }
            let work = [
                ("custom.bytes", &def.bytes),
                ("custom.flops", &def.flops),
                ("custom.elements", &def.elements),
            ];
            for (key, text) in work {
                schedule::eval_count(text, key, key, u64::MAX, &names)
                    .map_err(|e| at(e, &point))?;
            }
            let mut used: Vec<&str> = (variants.iter().map(|v| v.implementation.as_str()))
                .chain(def.reference.as_deref())
                .collect();
            used.sort_unstable();
            used.dedup();
            for name in used {
                if let Some((k, program)) =
                    def.kernels.iter().enumerate().find(|(_, p)| p.name == name)
                {
                    let count = &mut unrunnable[k];
                    count.checked += 1;
                    match schedule::plan(program, &format!("custom.kernel[{k}]"), &point) {
                        Ok(_) => {}
                        Err(e) if e.unrunnable => {
                            count.skipped += 1;
                            count.first.get_or_insert((e, point.clone()));
                        }
                        Err(e) => return Err(at(e, &point)),
                    }
                }
            }
        }
        // Points no GPU can run are skipped when the study runs; a kernel no point of the grid
        // can run is a mistake.
        let mut notes = Vec::new();
        for (k, points) in unrunnable.into_iter().enumerate() {
            let (skipped, of) = (points.skipped, points.checked);
            let Some((e, point)) = points.first else {
                continue;
            };
            if skipped == of {
                return Err(at(e, &point));
            }
            notes.push(format!(
                "{skipped} of {of} grid points cannot run kernel `{}` and will be skipped: {} (first at {})",
                def.kernels[k].name,
                e.message,
                crate::vocab::describe_params(&point)
            ));
        }
        Ok(notes)
    }
}

/// The grid points `check_over_grid` evaluates at most: enough for any study a person writes,
/// bounded so that `check` stays quick on a generated one.
pub const MAX_CHECKED_POINTS: usize = 10_000;

/// The inputs at one grid point: each `init` fits the buffer's type there, a copy has its
/// source's length, and each `.npy` file holds the buffer's type and length.
fn inputs_at(
    def: &CustomDef,
    npy_files: &[NpyHeader],
    point: &crate::vocab::Params,
) -> Result<(), DefError> {
    let names = |name: &str| point.get(name).map(schedule::param_value);
    let dtype_at = |elem: ElemType| match elem {
        ElemType::Fixed(d) => Some(d),
        ElemType::FromDtype => schedule::case_dtype(point),
    };
    let fault = |key: String, message: String| DefError {
        key,
        offset: 0,
        message,
        unrunnable: false,
    };
    for (i, b) in def
        .buffers
        .iter()
        .enumerate()
        .filter(|(_, b)| b.role.is_input())
    {
        let key = format!("custom.buffer[{i}].init");
        if let Some(dtype) = dtype_at(b.elem) {
            init_fits(&b.init, dtype).map_err(|m| fault(key.clone(), m))?;
        }
        if let Init::Copy(from) = &b.init {
            let source = def.buffers.iter().find(|x| &x.name == from);
            let length =
                |text: &str| schedule::eval_count(text, &key, "the length", u64::MAX, &names);
            if let Some(source) = source {
                let (mine, theirs) = (length(&b.length)?, length(&source.length)?);
                if mine != theirs {
                    let message = format!(
                        "`{}` has {mine} elements and `{from}`, its copy's source, {theirs}",
                        b.name
                    );
                    return Err(fault(key, message));
                }
            }
        }
    }
    for file in npy_files {
        let b = &def.buffers[file.buffer];
        if let (Some(descr), Some(dtype)) = (&file.descr, dtype_at(b.elem)) {
            crate::npy::holds(descr, dtype, &file.path)
                .map_err(|m| fault(file.key.clone(), format!("{} {m}", file.path.display())))?;
        }
        let length = schedule::eval_count(&b.length, &file.key, "the length", u64::MAX, &names)?;
        if length != file.count {
            let message = format!(
                "{} holds {} elements, and buffer `{}` has {length}",
                file.path.display(),
                file.count,
                b.name
            );
            return Err(fault(file.key.clone(), message));
        }
    }
    Ok(())
}

/// Each define's name and expression, in the order they are written in front of the sources.
type Defines = Vec<(String, String)>;

/// The grid points of one kernel sequence no GPU can run, of those checked, and the first.
#[derive(Default)]
struct UnrunnablePoints {
    skipped: usize,
    checked: usize,
    first: Option<(DefError, crate::vocab::Params)>,
}

/// Where NVRTC's log quotes a source line that uses an axis kbench defines under its own name,
/// a line saying so: the sources may use the name themselves (a parameter or an array named
/// like the axis).
fn define_hint(log: &str, axis_defines: &[&str]) -> String {
    let quoted: Vec<&str> = log.lines().filter(|l| l.starts_with("  ")).collect();
    let uses = |name: &str| {
        quoted.iter().any(|line| {
            line.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|word| word == name)
        })
    };
    let clashing: Vec<&str> = axis_defines
        .iter()
        .copied()
        .filter(|name| uses(name))
        .collect();
    if clashing.is_empty() {
        return String::new();
    }
    format!(
        "\nnote: the lines above use {}, which kbench defines as a macro (every int, block, choice and dtype axis is defined under its own name): if the sources use the name themselves, add `undefine = [{}]` to [custom], or rename the axis",
        clashing.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
        clashing.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
    )
}

/// A buffer's element type as the manifest writes it.
fn elem_name(elem: ElemType) -> String {
    match elem {
        ElemType::Fixed(d) => d.name().to_string(),
        ElemType::FromDtype => "of type `dtype`".to_string(),
    }
}

/// A `.npy` file a buffer is filled from or checked against, as its header says.
struct NpyHeader {
    buffer: usize,
    key: String,
    /// The file's element type, where the buffer's values are read as it (an input's file).
    descr: Option<String>,
    count: u64,
    path: PathBuf,
}

/// Whether `init` can fill a buffer of `dtype`: its numbers finite, and within the type's range
/// (an integer type's `uniform` must hold an integer, its `constant` be one).
fn init_fits(init: &Init, dtype: DType) -> Result<(), String> {
    let numbers: Vec<f64> = match init {
        Init::Uniform { low, high, .. } => vec![*low, *high],
        Init::Normal { mean, std_dev } => vec![*mean, *std_dev],
        Init::Constant(c) => vec![*c],
        _ => return Ok(()),
    };
    if let Some(x) = numbers.iter().find(|x| !x.is_finite()) {
        return Err(format!("{x} is not a finite number"));
    }
    let (low, high) = match (dtype.integer_range(), dtype.float_max()) {
        (Some(range), _) => range,
        (None, Some(max)) => (-max, max),
        (None, None) => return Ok(()),
    };
    let outside = |x: f64| !(low..=high).contains(&x);
    match init {
        Init::Uniform {
            low: lo, high: hi, ..
        } if !dtype.is_float() && lo.ceil() > hi.floor() => Err(format!(
            "`uniform` [{lo}, {hi}] holds no integer, and the buffer is {dtype}"
        )),
        Init::Constant(c) if !dtype.is_float() && c.fract() != 0.0 => Err(format!(
            "`constant` {c} is not an integer, and the buffer is {dtype}"
        )),
        // An integer type draws the integers in [ceil(lo), floor(hi)].
        Init::Uniform {
            low: lo, high: hi, ..
        } if !dtype.is_float() && (outside(lo.ceil()) || outside(hi.floor())) => Err(format!(
            "`uniform` [{lo}, {hi}] draws integers outside what {dtype} holds ({low} to {high})"
        )),
        Init::Uniform {
            low: lo, high: hi, ..
        } if dtype.is_float() && (outside(*lo) || outside(*hi)) => Err(format!(
            "`uniform` [{lo}, {hi}] is outside what {dtype} holds ({low} to {high})"
        )),
        Init::Constant(c) if outside(*c) => Err(format!(
            "`constant` {c} is outside what {dtype} holds ({low} to {high})"
        )),
        _ => Ok(()),
    }
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The distinct define sets `check_kernel_params` compiles at most: a study's sources are
/// compiled once per set, and NVRTC takes a good fraction of a second for each.
pub const MAX_CHECKED_DEFINE_SETS: usize = 16;

/// The architecture the parameter check compiles for: PTX parameter lists do not depend on it,
/// and every GPU kbench runs on has sm_80 or above.
const PTX_CHECK_ARCH: &str = "sm_80";

/// Just the `[custom]` table of a manifest, read again for the spans of its launches: the
/// validated `Manifest` keeps the definition, not where each of its keys is.
#[derive(Deserialize)]
struct CustomOnly {
    custom: Option<RawCustom>,
}

/// A custom study's launches checked against its kernels' parameters as NVRTC compiles them:
/// for each distinct define set over the grid (the first `MAX_CHECKED_DEFINE_SETS`), the
/// sources compile (else NVRTC's log, naming the user's file and line), every launched kernel
/// is an entry of the PTX, and each launch passes as many arguments as it takes, each of its
/// parameter's size. Run by `check` and before `run` (not by `parse`, which reports and shards
/// use too). Where NVRTC cannot be loaded it prints one note and checks nothing: `check` must
/// work without CUDA.
pub fn check_kernel_params(m: &super::Manifest) -> Result<(), ManifestError> {
    let Some(def) = &m.custom else {
        return Ok(());
    };
    if let Err(why) = crate::device::nvrtc::nvrtc_present() {
        note_unchecked(&why);
        return Ok(());
    }
    let v = Validator::new(&m.path, &m.source, super::FileSource::Disk);
    // The manifest parsed once already, so this parse succeeds; without it there is no span.
    let Some(raw) = toml::from_str::<CustomOnly>(&m.source)
        .ok()
        .and_then(|doc| doc.custom)
    else {
        return Ok(());
    };
    for (file, point, k) in v.define_sets(def, m)? {
        let compiled = v.compile_entries(&raw, &file, &point)?;
        v.check_launches(&raw, k, &def.kernels[k], &compiled, &point)?;
        v.check_constants(&raw, def, &compiled.0.ptx, &point)?;
    }
    Ok(())
}

/// Says once per process that the kernels' parameters were not checked, and why.
fn note_unchecked(why: &str) {
    static NOTED: std::sync::Once = std::sync::Once::new();
    NOTED.call_once(|| {
        eprintln!("note: kernel arguments not checked against the kernels' parameters: {why}");
    });
}

impl Validator<'_> {
    /// The kernel file (the sources with a define set in front, and the options) of each
    /// kernel sequence a variant or the reference uses, at each distinct define set over the
    /// grid, with the first point that has it and the sequence's index: the same file the run
    /// compiles, made by the same code (`Custom::kernel_file`).
    fn define_sets(
        &self,
        def: &CustomDef,
        m: &super::Manifest,
    ) -> Result<Vec<(crate::device::KernelFile, crate::vocab::Params, usize)>, ManifestError> {
        let algorithm = crate::custom::Custom::new(def.clone());
        let at_custom = |e: anyhow::Error, point: &crate::vocab::Params| {
            self.error(
                self.header_span("custom").unwrap_or(0..0),
                "custom",
                format!("{e:#} (at {})", crate::vocab::describe_params(point)),
            )
        };
        let used: Vec<usize> = (def.kernels.iter().enumerate())
            .filter(|(_, k)| {
                m.variants.iter().any(|v| v.implementation == k.name)
                    || def.reference.as_deref() == Some(&k.name)
            })
            .map(|(k, _)| k)
            .collect();
        let mut sets: Vec<(crate::device::KernelFile, crate::vocab::Params, usize)> = Vec::new();
        let points = grid_points(&m.axes, &m.zip)
            .into_iter()
            .filter(|p| (m.filter.as_ref()).is_none_or(|f| f.matches(p).unwrap_or(false)));
        'points: for point in points.take(MAX_CHECKED_POINTS) {
            for &k in &used {
                let file = (algorithm.kernel_file(&point, &def.kernels[k].name))
                    .map_err(|e| at_custom(e, &point))?;
                if !sets.iter().any(|(f, _, j)| f.name == file.name && *j == k) {
                    sets.push((file, point.clone(), k));
                    if sets.len() == MAX_CHECKED_DEFINE_SETS {
                        break 'points;
                    }
                }
            }
        }
        Ok(sets)
    }

    /// `file` compiled to PTX as the run compiles it (its options and kernel names), with the
    /// kernels the PTX defines; a compile error is NVRTC's log at the `sources` key.
    fn compile_entries(
        &self,
        raw: &RawCustom,
        file: &crate::device::KernelFile,
        point: &crate::vocab::Params,
    ) -> Result<
        (
            crate::device::nvrtc::Compiled,
            Vec<crate::device::ptx::PtxEntry>,
        ),
        ManifestError,
    > {
        let sources_span = match (raw.sources.first(), raw.sources.last()) {
            (Some(first), Some(last)) => first.span().start..last.span().end,
            _ => self.header_span("custom").unwrap_or(0..0),
        };
        let fail = |message: String| {
            self.error(
                sources_span.clone(),
                "custom.sources",
                format!(
                    "{message}\n(compiled at {})",
                    crate::vocab::describe_params(point)
                ),
            )
        };
        let compiled = crate::device::nvrtc::compile_file(
            file.name,
            file.source,
            PTX_CHECK_ARCH,
            file.options,
            file.names,
        )
        .map_err(|e| {
            let message = format!("{e:#}");
            // A kernel name that does not instantiate is shown at the launch that names it.
            let launches = (raw.kernel.iter().enumerate()).flat_map(|(k, p)| {
                (p.get_ref().launch.iter().enumerate()).map(move |(j, l)| (k, j, l))
            });
            for (k, j, launch) in launches {
                let kernel = &launch.get_ref().kernel;
                if message.contains(&format!("the kernel `{}`", kernel.get_ref())) {
                    return self.error(
                        kernel.span(),
                        format!("custom.kernel[{k}].launch[{j}].kernel"),
                        format!(
                            "{message}\n(compiled at {})",
                            crate::vocab::describe_params(point)
                        ),
                    );
                }
            }
            let axis_defines: Vec<&str> = (raw.axis.iter().map(|a| a.get_ref()))
                .filter(|a| !matches!(a.kind.get_ref().as_str(), "size" | "float"))
                .map(|a| a.name.get_ref().as_str())
                .collect();
            fail(format!(
                "the sources do not compile: {message}{}",
                define_hint(&message, &axis_defines)
            ))
        })?;
        let entries =
            crate::device::ptx::entries(&compiled.ptx).map_err(|e| fail(e.to_string()))?;
        Ok((compiled, entries))
    }

    /// Each `constant` buffer names a `__constant__` variable of the compiled sources, and fits it
    /// at `point`.
    fn check_constants(
        &self,
        raw: &RawCustom,
        def: &CustomDef,
        ptx: &str,
        point: &crate::vocab::Params,
    ) -> Result<(), ManifestError> {
        let variables = crate::device::ptx::constants(ptx);
        let names = |name: &str| point.get(name).map(schedule::param_value);
        for (i, b) in def.buffers.iter().enumerate() {
            let Some(symbol) = &b.constant else { continue };
            let span = raw.buffer[i]
                .get_ref()
                .constant
                .as_ref()
                .map_or(0..0, |c| c.span());
            let key = format!("custom.buffer[{i}].constant");
            let at = crate::vocab::describe_params(point);
            let Some((_, size_bytes)) = variables.iter().find(|(name, _)| name == symbol) else {
                let declared: Vec<&str> = variables.iter().map(|(n, _)| n.as_str()).collect();
                return Err(self.error(span, key, format!("the sources declare no __constant__ variable `{symbol}` at file scope (they declare: {}) (at {at})", if declared.is_empty() { "none".into() } else { declared.join(", ") })));
            };
            let elem = match b.elem {
                ElemType::Fixed(d) => Some(d),
                ElemType::FromDtype => crate::custom::schedule::case_dtype(point),
            };
            let length =
                schedule::eval_count(&b.length, &key, "the length", u64::MAX, &names).unwrap_or(0);
            let bytes = length.saturating_mul(elem.map_or(0, DType::size_bytes));
            if bytes > *size_bytes {
                return Err(self.error(span, key, format!("buffer `{}` has {bytes} bytes, and `{symbol}` holds {size_bytes} (at {at})", b.name)));
            }
        }
        Ok(())
    }

    /// Each launch of `program` (the `k`th kernel sequence) against the kernels in `entries`:
    /// the kernel is there, and takes the arguments the launch passes.
    fn check_launches(
        &self,
        raw: &RawCustom,
        k: usize,
        program: &Program,
        (compiled, entries): &(
            crate::device::nvrtc::Compiled,
            Vec<crate::device::ptx::PtxEntry>,
        ),
        point: &crate::vocab::Params,
    ) -> Result<(), ManifestError> {
        use crate::device::ptx::{check_args, find_entry, ArgMismatch, DeclaredArg};
        let Some(raw_kernel) = raw.kernel.get(k) else {
            return Ok(());
        };
        let at = |span: Range<usize>, key: String, message: String| {
            self.error(
                span,
                key,
                format!("{message} (at {})", crate::vocab::describe_params(point)),
            )
        };
        for (j, (launch, raw_launch)) in (program.launches.iter())
            .zip(&raw_kernel.get_ref().launch)
            .enumerate()
        {
            let key = format!("custom.kernel[{k}].launch[{j}]");
            let raw_launch = raw_launch.get_ref();
            let entry =
                find_entry(entries, compiled.entry_name(&launch.kernel)).map_err(|message| {
                    at(raw_launch.kernel.span(), format!("{key}.kernel"), message)
                })?;
            let declared: Vec<DeclaredArg> = (launch.args.iter())
                .map(|arg| match arg {
                    ArgDecl::Buffer(name) => DeclaredArg {
                        name,
                        size_bytes: 8,
                    },
                    ArgDecl::Scalar { ctype, expr } => DeclaredArg {
                        name: expr,
                        size_bytes: ctype.size_bytes(),
                    },
                })
                .collect();
            match check_args(entry, &declared) {
                Ok(()) => {}
                Err(e @ ArgMismatch::Count { .. }) => {
                    let span = match (raw_launch.args.first(), raw_launch.args.last()) {
                        (Some(first), Some(last)) => first.span().start..last.span().end,
                        _ => raw_launch.kernel.span(),
                    };
                    return Err(at(span, format!("{key}.args"), e.to_string()));
                }
                Err(e @ ArgMismatch::Size { position, .. }) => {
                    let span = (raw_launch.args.get(position - 1))
                        .map_or(raw_launch.kernel.span(), |a| a.span());
                    let akey = format!("{key}.args[{}]", position - 1);
                    return Err(at(span, akey, e.to_string()));
                }
            }
        }
        Ok(())
    }
}

/// A value of an axis of `kind` (its `default`), as the grid's values are checked: an int axis
/// takes an integer within its bounds, a float axis a finite number within them, a choice one
/// of its names, and so on. The value as the axis holds it (an integer on a float axis is a
/// float).
fn axis_value_fits(kind: &AxisKindDecl, value: ParamValue) -> Result<ParamValue, String> {
    let value = match (kind, value) {
        (AxisKindDecl::Float { .. }, ParamValue::Int(i)) => ParamValue::Float(i as f64),
        (_, value) => value,
    };
    let shown = match &value {
        ParamValue::Str(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    let fits = match (kind, &value) {
        (AxisKindDecl::Size, ParamValue::Int(n)) => *n >= 0,
        (AxisKindDecl::Block, ParamValue::Int(b)) => {
            (1..=schedule::MAX_BLOCK_THREADS as i64).contains(b)
        }
        (AxisKindDecl::Int { min, max }, ParamValue::Int(i)) => (*min..=*max).contains(i),
        (AxisKindDecl::Float { min, max }, ParamValue::Float(x)) => {
            x.is_finite() && (*min..=*max).contains(x)
        }
        (AxisKindDecl::Choice(names), ParamValue::Str(s)) => names.contains(s),
        (AxisKindDecl::Dtype(types), ParamValue::Str(s)) => {
            DType::parse(s).is_some_and(|d| types.contains(&d))
        }
        _ => false,
    };
    if fits {
        return Ok(value);
    }
    Err(match kind {
        AxisKindDecl::Size => format!("{shown} is not a size (a whole number from 0)"),
        AxisKindDecl::Block => format!(
            "{shown} is not a block size (a whole number from 1 to {})",
            schedule::MAX_BLOCK_THREADS
        ),
        AxisKindDecl::Int { min, max } if (*min, *max) == (i64::MIN, i64::MAX) => {
            format!("{shown} is not a whole number")
        }
        AxisKindDecl::Int { min, max } => {
            format!("{shown} is not a whole number from {min} to {max}")
        }
        AxisKindDecl::Float { min, max } => {
            format!("{shown} is not a finite number from {min} to {max}")
        }
        AxisKindDecl::Choice(names) => format!("{shown} is not one of {}", names.join(", ")),
        AxisKindDecl::Dtype(types) => format!(
            "{shown} is not one of {}",
            types
                .iter()
                .map(|t| t.name())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}
