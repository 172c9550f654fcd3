//! The study manifest: TOML parsed strictly into typed settings, with every mistake reported as
//! `file:line:column`, the key at fault and the offending source line, before anything runs.
//!
//! Parsing happens in two steps. serde (with `deny_unknown_fields`) catches unknown keys and wrong
//! types; then `validate` checks what serde cannot (unknown algorithm, kernel or dtype, negative
//! sizes, empty axes, a baseline that names no variant) using the spans `toml::Spanned` keeps.

use std::collections::BTreeMap;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

mod commands;
mod custom;
mod file_axes;
pub use custom::{check_kernel_params, MAX_CHECKED_DEFINE_SETS, MAX_CHECKED_POINTS};
pub use file_axes::{
    check_sources_unchanged, check_unchanged, parse_recorded, record_files, record_sources,
    FileExpansion, FileSource,
};
mod findings;
mod json_schema;
pub mod tune_table;

pub use findings::{
    selected, Check, ClaimSpec, Dimension, Quantity, ReferenceRow, Select, TableSpec, Unit,
};
pub use json_schema::manifest_schema;

use crate::algos::{self, AlgorithmRef, AxisDef, AxisKind, Spec};
use crate::grid::{AxisValues, WhereExpr};
use crate::record::{CompareDefaults, MeasureSettings, Study, Variant, MAX_PROCESSES};
use crate::vocab::{
    Backend, CacheMode, DType, HostMemory, Launch, ParamValue, Scope, TimingMode,
    ToleranceOverrides,
};

/// A mistake in a manifest, located in its source.
#[derive(Debug, Clone)]
pub struct ManifestError {
    pub path: PathBuf,
    pub line: usize,
    pub column: usize,
    /// The dotted key at fault, when one is known (`measure.warmup`, `variant[2].kernel`).
    pub key: Option<String>,
    pub message: String,
    source_line: String,
    underline_len: usize,
}

impl ManifestError {
    pub fn new(
        path: &Path,
        source: &str,
        span: Range<usize>,
        key: Option<String>,
        message: String,
    ) -> Self {
        // A span from a string's decoded value, or any slip, must not split a character.
        let start = floor_char_boundary(source, span.start);
        let end = floor_char_boundary(source, span.end.max(start));
        let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = source[start..]
            .find('\n')
            .map_or(source.len(), |i| start + i);
        let line = source[..line_start].matches('\n').count() + 1;
        let column = source[line_start..start].chars().count() + 1;
        let source_line = source[line_start..line_end]
            .trim_end_matches('\r')
            .to_string();
        let underline_len = source[start..end.min(line_end).max(start)]
            .chars()
            .count()
            .max(1);
        ManifestError {
            path: path.to_path_buf(),
            line,
            column,
            key,
            message,
            source_line,
            underline_len,
        }
    }

    /// An error about the file as a whole (unreadable, or an empty document).
    pub fn whole_file(path: &Path, message: String) -> Self {
        ManifestError {
            path: path.to_path_buf(),
            line: 1,
            column: 1,
            key: None,
            message,
            source_line: String::new(),
            underline_len: 0,
        }
    }
}

/// Rendered the way cargo renders TOML errors: message, location, the line and a caret.
impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = printable(&self.message);
        match &self.key {
            Some(key) => writeln!(f, "error: {message} (key `{}`)", printable(key))?,
            None => writeln!(f, "error: {message}")?,
        }
        // An error about the whole file has no position to show: no `:1:1` that points nowhere.
        if self.underline_len == 0 {
            return write!(f, " --> {}", self.path.display());
        }
        write!(
            f,
            " --> {}:{}:{}",
            self.path.display(),
            self.line,
            self.column
        )?;
        {
            let gutter = " ".repeat(self.line.to_string().len());
            writeln!(f)?;
            writeln!(f, "{gutter} |")?;
            writeln!(f, "{} | {}", self.line, printable_line(&self.source_line))?;
            // Tabs are kept under tabs so the caret lands under its column in a terminal.
            let pad: String = self
                .source_line
                .chars()
                .take(self.column - 1)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            write!(f, "{gutter} | {pad}{}", "^".repeat(self.underline_len))?;
        }
        Ok(())
    }
}

impl std::error::Error for ManifestError {}

/// The largest char boundary at or before `offset` (clamped to the text).
fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut at = offset.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Text from a manifest as it may be printed to a terminal: control characters (an escape
/// sequence in a title) are written as `\u{1b}`, never sent raw.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// A source line under which carets are drawn: each control character (tabs aside) becomes one
/// replacement character, so the columns stay where they were.
fn printable_line(line: &str) -> String {
    line.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

/// The most bytes a manifest may have: a study is a page of TOML, and a file past this (or a
/// device such as /dev/zero) is a mistake, not something to read until memory runs out.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The algorithm a manifest names and, for a custom study, its definition with the spans of its
/// keys.
type FoundAlgorithm = (
    AlgorithmRef,
    Option<(crate::custom::CustomDef, custom::CustomSpans)>,
);

/// A validated study, ready to plan.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub path: PathBuf,
    pub source: String,
    pub study: Study,
    pub algorithm: AlgorithmRef,
    /// Axes in the algorithm's declared order; axes the manifest leaves out take the algorithm's default.
    pub axes: Vec<(String, AxisValues)>,
    pub zip: Vec<Vec<String>>,
    pub filter: Option<WhereExpr>,
    pub variants: Vec<Variant>,
    pub measure: MeasureSettings,
    pub accuracy: ToleranceOverrides,
    pub report: ReportSettings,
    pub compare: CompareDefaults,
    /// Tables to print after a run (`[[table]]`).
    pub tables: Vec<TableSpec>,
    /// Conclusions to check against the results (`[[claim]]`).
    pub claims: Vec<ClaimSpec>,
    /// Where its parts are in `source`, for the mistakes only planning finds.
    pub spans: SourceSpans,
    /// A custom study's definition (`algorithm = "custom"`), which `algorithm` was built from
    /// and which the workers rebuild it from.
    pub custom: Option<crate::custom::CustomDef>,
    /// The files each value of a file axis named (`matrix = "datasets/*.mtx"`): on disk when
    /// the manifest was read from a file, else as its results file recorded them.
    pub files: Vec<FileExpansion>,
    /// Read back from a results file (`FileSource::Recorded`): planning reads no file then (the
    /// run that recorded it checked each case's size when it planned).
    pub files_recorded: bool,
    /// What `check` says beside its verdict: how many grid points no GPU can run (skipped when
    /// the study runs), and why.
    pub notes: Vec<String>,
}

/// Where parts of a manifest are in its source: the plan reports a filter that divides by zero
/// or a size that cannot run at the line that sets it.
#[derive(Debug, Clone, Default)]
pub struct SourceSpans {
    /// The `[grid]` header, or the file's start when there is none.
    pub grid: Range<usize>,
    /// The `where` string, quotes included.
    pub where_value: Option<Range<usize>>,
    /// Each grid axis's value.
    pub axes: BTreeMap<String, Range<usize>>,
    /// Each variant's name, in variant order.
    pub variant_names: Vec<Range<usize>>,
    /// Each variant's `params` values, in variant order.
    pub variant_params: Vec<BTreeMap<String, Range<usize>>>,
}

impl Manifest {
    /// A mistake at `span` of this manifest's source.
    pub fn error_at(&self, span: Range<usize>, key: &str, message: String) -> ManifestError {
        ManifestError::new(
            &self.path,
            &self.source,
            span,
            Some(key.to_string()),
            message,
        )
    }

    /// A mistake at byte `offset` of the `where` filter's text (as the filter reports them).
    pub fn where_error(&self, offset: usize, message: String) -> ManifestError {
        let span = match &self.spans.where_value {
            Some(value) => where_source_span(&self.source, value.clone(), offset),
            None => 0..0,
        };
        self.error_at(span, "grid.where", message)
    }

    /// The span of axis `axis` as variant number `variant` sees it, and its key: the variant's
    /// own `params` value, else the grid's, else the `[grid]` header (an axis at its default).
    pub fn axis_span(&self, variant: usize, axis: &str) -> (Range<usize>, String) {
        if let Some(span) = self
            .spans
            .variant_params
            .get(variant)
            .and_then(|p| p.get(axis))
        {
            return (span.clone(), format!("variant[{variant}].params.{axis}"));
        }
        match self.spans.axes.get(axis) {
            Some(span) => (span.clone(), format!("grid.{axis}")),
            None => (self.spans.grid.clone(), "grid".to_string()),
        }
    }
}

/// The span in `source` of byte `offset` of a string value whose literal (quotes included) is at
/// `literal`: TOML escapes (`\t`, `\"`, `\u00e9`), line-ending backslashes and the newline that
/// opens a `"""` string make the value's offsets differ from the source's.
fn where_source_span(source: &str, literal: Range<usize>, offset: usize) -> Range<usize> {
    let Some(text) = source.get(literal.clone()) else {
        return literal.start..literal.start;
    };
    let at = literal.start + string_value_offset_in_literal(text, offset);
    let len = source[at..].chars().next().map_or(0, char::len_utf8);
    at..at + len
}

/// Where the `offset`-th byte of a TOML string's value is in its `literal` as written.
fn string_value_offset_in_literal(literal: &str, offset: usize) -> usize {
    let delimiter = ["\"\"\"", "'''", "\"", "'"]
        .into_iter()
        .find(|d| literal.starts_with(d))
        .unwrap_or("");
    let basic = delimiter.starts_with('"');
    let multi_line = delimiter.len() == 3;
    let mut i = delimiter.len();
    if multi_line {
        // A newline right after the opening delimiter is not part of the value.
        if literal[i..].starts_with("\r\n") {
            i += 2;
        } else if literal[i..].starts_with('\n') {
            i += 1;
        }
    }
    let body_end = literal.len().saturating_sub(delimiter.len()).max(i);
    let mut decoded = 0;
    while i < body_end && decoded < offset {
        let Some(c) = literal[i..].chars().next() else {
            break;
        };
        if !(basic && c == '\\') {
            decoded += c.len_utf8();
            i += c.len_utf8();
            continue;
        }
        let escape = literal[i + 1..].chars().next().unwrap_or(' ');
        let hex_digits = match escape {
            'u' => 4,
            'U' => 8,
            'x' => 2,
            _ => 0,
        };
        if hex_digits > 0 {
            let code = literal
                .get(i + 2..i + 2 + hex_digits)
                .and_then(|h| u32::from_str_radix(h, 16).ok());
            decoded += code.and_then(char::from_u32).map_or(1, char::len_utf8);
            i += 2 + hex_digits;
        } else if multi_line && escape.is_whitespace() {
            // A line-ending backslash: it and the whitespace after it (newlines too) vanish.
            i += 1;
            while i < body_end && literal[i..].starts_with([' ', '\t', '\r', '\n']) {
                i += 1;
            }
        } else {
            decoded += 1;
            i += 1 + escape.len_utf8();
        }
    }
    floor_char_boundary(literal, i.min(body_end))
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReportSettings {
    pub baseline: Option<String>,
}

// ---- The TOML shape, as serde sees it (and, through schemars, the JSON Schema editors use:
// a `Spanned<T>` is typed as `T`, raw TOML values by the functions in `json_schema`). ----

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    study: RawStudy,
    #[serde(default)]
    #[schemars(schema_with = "json_schema::grid")]
    grid: Option<Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    /// The code timed over the grid: a CPU implementation or a CUDA kernel, one table each.
    #[serde(rename = "variant", default)]
    #[schemars(with = "Vec<RawVariant>")]
    variants: Vec<Spanned<RawVariant>>,
    #[serde(default)]
    measure: RawMeasure,
    #[serde(default)]
    accuracy: RawAccuracy,
    #[serde(default)]
    report: RawReport,
    #[serde(default)]
    compare: RawCompare,
    /// Tables to print after a run, with published figures beside kbench's.
    #[serde(rename = "table", default)]
    #[schemars(with = "Vec<findings::RawTable>")]
    tables: Vec<Spanned<findings::RawTable>>,
    /// Conclusions of a report, checked against the run.
    #[serde(rename = "claim", default)]
    #[schemars(with = "Vec<findings::RawClaim>")]
    claims: Vec<Spanned<findings::RawClaim>>,
    /// A study's own kernels (with `study.algorithm = "custom"`).
    #[serde(default)]
    #[schemars(with = "Option<custom::RawCustom>")]
    custom: Option<Spanned<custom::RawCustom>>,
    /// What `kbench tune` tunes (`kbench run` and `check` take the table and leave it alone).
    #[serde(default)]
    #[schemars(with = "Option<tune_table::RawTune>")]
    #[allow(dead_code)] // read and checked by `tune::spec::load`, which keeps its spans
    tune: Option<tune_table::RawTune>,
}

/// What `kbench compare` uses for this study unless its command line says otherwise.
#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawCompare {
    /// Smallest relative change of a median that counts (0.03 = 3%).
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    min_effect: Option<Spanned<f64>>,
    /// False-discovery rate across the study's cases.
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    fdr: Option<Spanned<f64>>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawStudy {
    /// Names the output folder: letters, digits, `_`, `-` and `.` (not first).
    #[schemars(schema_with = "json_schema::safe_name")]
    name: Spanned<String>,
    #[schemars(with = "Option<String>")]
    title: Option<Spanned<String>>,
    /// `kbench list` shows the algorithms.
    #[schemars(schema_with = "json_schema::algorithm")]
    algorithm: Spanned<String>,
    /// Seeds the inputs: the same seed, the same data.
    seed: u64,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    /// Names output files: letters, digits, `_`, `-` and `.` (not first).
    #[schemars(schema_with = "json_schema::safe_name")]
    name: Spanned<String>,
    backend: Backend,
    /// A CPU variant's implementation.
    #[serde(rename = "impl")]
    #[serde(default)]
    #[schemars(schema_with = "json_schema::cpu_impl")]
    implementation: Option<Spanned<String>>,
    /// A CUDA variant's kernel.
    #[serde(default)]
    #[schemars(schema_with = "json_schema::kernel")]
    kernel: Option<Spanned<String>>,
    /// Axis values that replace the grid's for this variant.
    #[serde(default)]
    #[schemars(schema_with = "json_schema::params")]
    params: BTreeMap<String, Spanned<toml::Value>>,
    #[schemars(with = "Option<Scope>")]
    scope: Option<Spanned<Scope>>,
    #[schemars(with = "Option<HostMemory>")]
    host_memory: Option<Spanned<HostMemory>>,
    /// Transfers split into chunks over this many streams, copies and kernels overlapped
    /// (pinned transfers of an elementwise kernel).
    #[schemars(with = "Option<u32>", range(min = 2, max = 16))]
    streams: Option<Spanned<u32>>,
}

#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawMeasure {
    /// Untimed runs before the samples.
    warmup: Option<u32>,
    #[schemars(with = "Option<u32>", range(min = 1))]
    min_samples: Option<Spanned<u32>>,
    #[schemars(with = "Option<u32>", range(min = 1))]
    max_samples: Option<Spanned<u32>>,
    /// Time budget per case, in seconds.
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    max_time_s: Option<Spanned<f64>>,
    /// Sampling stops once the median's 95% CI is this narrow, relative (0.01 = 1%).
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    target_rel_ci: Option<Spanned<f64>>,
    #[schemars(with = "Option<Scope>")]
    scope: Option<Spanned<Scope>>,
    cache: Option<CacheMode>,
    mode: Option<TimingMode>,
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    batch_min_window_s: Option<Spanned<f64>>,
    /// A case still running after this many seconds is recorded as timed out.
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    timeout_s: Option<Spanned<f64>>,
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0, "exclusiveMaximum" = 1))]
    timer_tolerance: Option<Spanned<f64>>,
    #[schemars(with = "Option<f64>", extend("exclusiveMinimum" = 0))]
    timer_tolerance_s: Option<Spanned<f64>>,
    /// CUDA cases: after the samples, run the case's work back to back for about 0.1 s and read
    /// NVML's energy counter around it (joules per run, power). On by default where NVML is.
    energy: Option<bool>,
    /// Every kernel-scope sample runs on inputs no earlier run saw: copied over from a pristine
    /// copy before it, outside the timing and before the L2 flush (for kernels that might cache
    /// results across runs). Not with `mode = "batch"`.
    #[schemars(with = "Option<bool>")]
    fresh_inputs: Option<Spanned<bool>>,
    /// Measure each case in this many worker processes (default 1), each with its own set-up,
    /// warm-up and share of the samples: a process's own level (an offset of unknown cause)
    /// then averages out over the processes, as no number of samples inside one process can.
    #[schemars(with = "Option<u32>", range(min = 1, max = 64))]
    processes: Option<Spanned<u32>>,
    /// How kernel-scope runs are launched: "stream" (default), one launch after another as the
    /// algorithm issues them; "graph", captured once per case into a CUDA graph that every run
    /// replays (steadier for runs of several short kernels; a launcher that cannot be replayed
    /// is launched on the stream, and its record says why).
    launch: Option<Launch>,
}

#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawAccuracy {
    #[serde(default)]
    rel_tol: RawTolerances,
    #[serde(default)]
    abs_tol: RawTolerances,
}

/// Per floating-point dtype; integer outputs are always exact.
#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawTolerances {
    #[schemars(with = "Option<f64>", range(min = 0))]
    f32: Option<Spanned<f64>>,
    #[schemars(with = "Option<f64>", range(min = 0))]
    f64: Option<Spanned<f64>>,
}

#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
struct RawReport {
    /// The variant the others' speedups are over.
    #[serde(default)]
    #[schemars(schema_with = "json_schema::safe_name")]
    baseline: Option<Spanned<String>>,
}

/// Reads and validates one manifest file.
pub fn load(path: &Path) -> Result<Manifest, ManifestError> {
    let source = read_source(path)?;
    parse(path, &source)
}

/// A manifest's text: a regular file (a FIFO would block `check` forever), at most
/// `MAX_MANIFEST_BYTES`, in UTF-8 (a bad byte is reported at its own line and column).
pub fn read_source(path: &Path) -> Result<String, ManifestError> {
    let bytes = crate::input_file::read_regular_file(path, "manifest", MAX_MANIFEST_BYTES)
        .map_err(|e| ManifestError::whole_file(path, e.to_string()))?;
    String::from_utf8(bytes).map_err(|e| {
        let valid_up_to = e.utf8_error().valid_up_to();
        let bytes = e.into_bytes();
        // The text before the bad byte is valid: locate it there, and show the line up to it.
        let before = String::from_utf8_lossy(&bytes[..valid_up_to]).into_owned();
        let bad = bytes[valid_up_to];
        ManifestError::new(
            path,
            &before,
            before.len()..before.len(),
            None,
            format!("the manifest is not UTF-8 text: byte 0x{bad:02x} is not valid here (save the file as UTF-8)"),
        )
    })
}

/// Parses and validates manifest text; `path` is used only in error messages. A file axis's
/// paths and globs are resolved on disk, against the current folder.
pub fn parse(path: &Path, source: &str) -> Result<Manifest, ManifestError> {
    parse_with_files(path, source, FileSource::Disk)
}

/// As `parse`, with a file axis's values resolved from `files` (a results file's record).
pub fn parse_with_files(
    path: &Path,
    source: &str,
    files: FileSource,
) -> Result<Manifest, ManifestError> {
    let raw: RawManifest = toml::from_str(source).map_err(|e| serde_error(path, source, e))?;
    Validator::new(path, source, files).validate(raw)
}

fn serde_error(path: &Path, source: &str, error: toml::de::Error) -> ManifestError {
    // Without its input, the error's Display ends with "in `the.key`": the only public way to the key.
    let mut keyless = error.clone();
    keyless.set_input(None);
    let rendered = keyless.to_string();
    let key = rendered
        .lines()
        .find_map(|l| l.strip_prefix("in `").and_then(|k| k.strip_suffix('`')))
        .map(str::to_string);
    let message = error.message().trim().to_string();
    // For an unknown key, the key at fault is the unknown one, not the table holding it.
    let unknown = message
        .strip_prefix("unknown field `")
        .and_then(|rest| rest.split('`').next())
        .map(str::to_string);
    let key = match (key, unknown) {
        (Some(table), Some(field)) => Some(format!("{table}.{field}")),
        (None, Some(field)) => Some(field),
        (key, None) => key,
    };
    match error.span() {
        Some(span) => {
            let start = floor_char_boundary(source, span.start);
            let line_start = source[..start].rfind('\n').map_or(0, |i| i + 1);
            let line = source[line_start..].lines().next().unwrap_or("");
            let message = plain_serde_message(&message, key.as_deref(), line);
            ManifestError::new(path, source, span, key, message)
        }
        None => {
            let mut e = ManifestError::whole_file(path, message);
            e.key = key;
            e
        }
    }
}

/// serde's message in the manifest's words: `expected struct RawMeasure`, `u32` or `a sequence`
/// name kbench's insides, not what to write. `line` is the source line the error points at.
fn plain_serde_message(message: &str, key: Option<&str>, line: &str) -> String {
    const ARRAYS_OF_TABLES: [&str; 3] = ["variant", "table", "claim"];
    const TABLES: [&str; 7] = [
        "study", "grid", "measure", "accuracy", "report", "compare", "tune",
    ];
    let header = line.trim_start();
    match key {
        Some(k)
            if ARRAYS_OF_TABLES.contains(&k)
                && header.starts_with('[')
                && !header.starts_with("[[") =>
        {
            return format!("`[{k}]` declares a single table, but each {k} is an entry of an array of tables: write `[[{k}]]` (two brackets)");
        }
        Some(k) if TABLES.contains(&k) && header.starts_with("[[") => {
            return format!("`[[{k}]]` declares an array of tables, but a study has one {k}: write `[{k}]` (one bracket)");
        }
        _ => {}
    }
    if message == "wanted string or table" {
        return "expected a name in quotes (a string)".into();
    }
    let parts = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "));
    let Some((found, expected)) = parts else {
        return message.to_string();
    };
    let found = match found {
        "map" => "a table".to_string(),
        "sequence" => "an array".to_string(),
        other => {
            // `integer `3``, `floating point `1.5``, `boolean `true``: the value alone.
            let value = other.split('`').nth(1);
            match (other.strip_prefix("string "), value) {
                (Some(text), _) => format!("the string {text}"),
                (None, Some(value)) => value.to_string(),
                (None, None) => other.to_string(),
            }
        }
    };
    let expected = match expected {
        e if e.starts_with("struct ") => "a table".to_string(),
        "a sequence" => "an array".to_string(),
        "a map" => "a table".to_string(),
        "u32" => format!("a whole number from 0 to {}", u32::MAX),
        "u64" => format!("a whole number from 0 to {}", u64::MAX),
        "f64" => "a number".to_string(),
        "a string" => "a string in quotes".to_string(),
        other => other.to_string(),
    };
    format!("expected {expected}, found {found}")
}

struct Validator<'a> {
    path: &'a Path,
    source: &'a str,
    files: FileSource<'a>,
    /// What each file axis value named, as validation meets them.
    expansions: std::cell::RefCell<Vec<FileExpansion>>,
}

impl<'a> Validator<'a> {
    fn new(path: &'a Path, source: &'a str, files: FileSource<'a>) -> Validator<'a> {
        Validator {
            path,
            source,
            files,
            expansions: Default::default(),
        }
    }

    /// Refuses control characters (tabs aside) in text kbench prints to terminals: titles, the
    /// claims' quoted sentences.
    fn plain_text(
        &self,
        text: &Spanned<String>,
        key: &str,
        what: &str,
    ) -> Result<(), ManifestError> {
        match text.get_ref().chars().find(|c| c.is_control() && *c != '\t') {
            None => Ok(()),
            Some(c) => Err(self.error(
                text.span(),
                key,
                format!(
                    "{what} holds the control character {}; it is printed to terminals, so write it as plain text",
                    c.escape_unicode()
                ),
            )),
        }
    }

    fn error(&self, span: Range<usize>, key: impl Into<String>, message: String) -> ManifestError {
        ManifestError::new(self.path, self.source, span, Some(key.into()), message)
    }

    /// The checks serde cannot make, in the order a reader meets the sections: study, grid,
    /// measure, variants, accuracy, report, then what depends on all of them (the case count,
    /// compare, tables, claims). The first mistake found is the one reported.
    fn validate(&self, mut raw: RawManifest) -> Result<Manifest, ManifestError> {
        let (study, (found, custom)) = self.validate_study(raw.study, raw.custom.take())?;
        let spec = found.spec();

        let grid_span = raw
            .grid
            .as_ref()
            .map_or(0..0, |g| self.table_header_span(g.span()));
        let grid = raw.grid.map(Spanned::into_inner).unwrap_or_default();
        let axis_spans: BTreeMap<String, Range<usize>> = grid
            .iter()
            .map(|(name, value)| (name.clone(), value.span()))
            .collect();
        let (axes, zip, filter, filter_span) = self.validate_grid(spec, grid)?;
        let measure_scope = raw.measure.scope.as_ref().map(Spanned::span);
        let measure = self.validate_measure(raw.measure)?;
        let (variant_names, variant_params) = variant_spans(&raw.variants);
        let variants = self.validate_variants(spec, &axes, &zip, raw.variants, measure.scope)?;
        let notes = match &custom {
            Some((def, spans)) => {
                self.check_over_grid(def, spans, &axes, &zip, filter.as_ref(), &variants)?
            }
            None => Vec::new(),
        };
        self.refuse_backend_settings_no_variant_uses(spec, &variants, &axis_spans, measure_scope)?;
        let accuracy =
            self.validate_accuracy(raw.accuracy, study_dtypes(spec, &axes, &variants))?;
        let baseline = self.validate_baseline(raw.report.baseline, &variants)?;
        self.refuse_too_many_cases(spec, &axes, &zip, &variants, &grid_span)?;
        let compare = self.validate_compare(raw.compare)?;

        let shape = findings::StudyShape {
            spec,
            axes: &axes,
            variants: &variants,
        };
        let tables = self.validate_tables(&shape, raw.tables)?;
        let claims = self.validate_claims(&shape, raw.claims)?;

        Ok(Manifest {
            path: self.path.to_path_buf(),
            source: self.source.to_string(),
            study,
            algorithm: found,
            axes,
            zip,
            filter,
            variants,
            measure,
            accuracy,
            report: ReportSettings { baseline },
            compare,
            tables,
            claims,
            spans: SourceSpans {
                grid: grid_span,
                where_value: filter_span,
                axes: axis_spans,
                variant_names,
                variant_params,
            },
            custom: custom.map(|(def, _)| def),
            files: self.expansions.take(),
            files_recorded: !self.files.on_disk(),
            notes,
        })
    }

    /// The `[study]` table, and the algorithm it names (which every later check consults).
    fn validate_study(
        &self,
        raw: RawStudy,
        custom: Option<Spanned<custom::RawCustom>>,
    ) -> Result<(Study, FoundAlgorithm), ManifestError> {
        let (found, custom) = self.find_algorithm(&raw, custom)?;
        let name = raw.name.get_ref();
        if !is_safe_name(name) {
            return Err(self.error(
                raw.name.span(),
                "study.name",
                format!(
                    "study name `{name}` breaks the rule: {NAME_RULE} (it names the output folder)"
                ),
            ));
        }
        if let Some(title) = &raw.title {
            self.plain_text(title, "study.title", "the title")?;
        }
        let study = Study {
            name: name.clone(),
            title: raw.title.map(Spanned::into_inner).unwrap_or_default(),
            algorithm: found.spec().name.to_string(),
            seed: raw.seed,
        };
        Ok((study, (found, custom)))
    }

    /// The study's algorithm: a built-in by name, or, for `algorithm = "custom"`, one built
    /// from the manifest's `[custom]` table (with its definition and the spans of its keys).
    fn find_algorithm(
        &self,
        study: &RawStudy,
        custom: Option<Spanned<custom::RawCustom>>,
    ) -> Result<FoundAlgorithm, ManifestError> {
        let name = study.algorithm.get_ref();
        if name == crate::custom::CUSTOM {
            let Some(raw) = custom else {
                return Err(self.error(
                    study.algorithm.span(),
                    "study.algorithm",
                    "algorithm \"custom\" runs the manifest's own kernels, which a [custom] table declares: add one (see the README's \"Benchmark your own kernel\")".into(),
                ));
            };
            let (mut def, spans) = self.validate_custom(raw)?;
            def.title = study
                .title
                .as_ref()
                .map_or(String::new(), |t| t.get_ref().clone());
            let built = crate::custom::Custom::new(def.clone());
            return Ok((
                AlgorithmRef::Owned(std::sync::Arc::new(built)),
                Some((def, spans)),
            ));
        }
        if let Some(raw) = custom {
            return Err(self.error(
                self.table_header_span(raw.span()),
                "custom",
                format!("[custom] declares a study's own kernels, and this study's algorithm is `{name}`: set `algorithm = \"custom\"` or remove the table"),
            ));
        }
        let found = algos::find(name).ok_or_else(|| {
            self.error(
                study.algorithm.span(),
                "study.algorithm",
                format!(
                    "unknown algorithm `{name}`; known: {}, or custom (your own kernels)",
                    algos::names().join(", ")
                ),
            )
        })?;
        Ok((found, None))
    }

    /// `report.baseline` must name one of the variants.
    fn validate_baseline(
        &self,
        baseline: Option<Spanned<String>>,
        variants: &[Variant],
    ) -> Result<Option<String>, ManifestError> {
        match baseline {
            Some(b) if !variants.iter().any(|v| &v.name == b.get_ref()) => Err(self.error(
                b.span(),
                "report.baseline",
                format!("baseline `{}` is not the name of a variant", b.get_ref()),
            )),
            b => Ok(b.map(Spanned::into_inner)),
        }
    }

    /// A grid too large to run is refused before anything runs, naming the axes that multiply.
    fn refuse_too_many_cases(
        &self,
        spec: &Spec,
        axes: &[(String, AxisValues)],
        zip: &[Vec<String>],
        variants: &[Variant],
        grid_span: &Range<usize>,
    ) -> Result<(), ManifestError> {
        let cases = cases_before_where(spec, axes, zip, variants);
        if cases <= MAX_CASES {
            return Ok(());
        }
        let factors: Vec<String> = axes
            .iter()
            .filter(|(name, _)| !zip.iter().any(|g| g.contains(name) && g[0] != *name))
            .filter(|(_, values)| values.0.len() > 1)
            .map(|(name, values)| format!("{name}: {}", values.0.len()))
            .collect();
        let over = if cases == u64::MAX {
            "more than 2^64".to_string()
        } else {
            cases.to_string()
        };
        Err(self.error(
            grid_span.clone(),
            "grid",
            format!(
                "the grid expands to {over} cases before `where` ({} values, over {} variant(s) and their `params`); the limit is {MAX_CASES}: shorten an axis",
                factors.join(" x "),
                variants.len()
            ),
        ))
    }

    /// `[compare]`: each setting a fraction strictly between 0 and 1, or the default.
    fn validate_compare(&self, raw: RawCompare) -> Result<CompareDefaults, ManifestError> {
        let defaults = CompareDefaults::default();
        let fraction = |value: Option<Spanned<f64>>, key: &str, default: f64| match value {
            Some(v) if !(*v.get_ref() > 0.0 && *v.get_ref() < 1.0) => Err(self.error(
                v.span(),
                key,
                format!("{key} must be between 0 and 1, got {}", v.get_ref()),
            )),
            v => Ok(v.map_or(default, Spanned::into_inner)),
        };
        Ok(CompareDefaults {
            min_effect: fraction(raw.min_effect, "compare.min_effect", defaults.min_effect)?,
            fdr: fraction(raw.fdr, "compare.fdr", defaults.fdr)?,
        })
    }

    /// The header line of a table (`[grid]`) whose span toml gives as `span`; the span itself
    /// when the header is not found before it (an inline or dotted table).
    fn table_header_span(&self, span: Range<usize>) -> Range<usize> {
        let start = floor_char_boundary(self.source, span.start);
        let line_end = self.source[start..]
            .find('\n')
            .map_or(self.source.len(), |i| start + i);
        start..line_end
    }

    /// Settings that a study's variants would all ignore are refused, not silently dropped: an
    /// axis meant for one backend (`block`) or `scope` / `host_memory` in a study or a variant
    /// with no CUDA code. The user meant something by them; a warning would scroll away in a
    /// batch job, so the run does not start until the line is removed or a variant uses it.
    fn refuse_backend_settings_no_variant_uses(
        &self,
        spec: &Spec,
        variants: &[Variant],
        axis_spans: &BTreeMap<String, Range<usize>>,
        measure_scope: Option<Range<usize>>,
    ) -> Result<(), ManifestError> {
        let has = |backend: Backend| variants.iter().any(|v| v.backend == backend);
        for (name, span) in axis_spans {
            let Some(backend) = spec.axis(name).and_then(|a| a.only_for) else {
                continue;
            };
            if !has(backend) {
                return Err(self.error(
                    span.clone(),
                    format!("grid.{name}"),
                    format!("axis `{name}` applies only to {backend} variants, and this study has none: remove it or add a {backend} variant"),
                ));
            }
        }
        if let Some(span) = measure_scope {
            if !has(Backend::Cuda) {
                return Err(self.error(
                    span,
                    "measure.scope",
                    "`scope` says what a CUDA case times, and this study has no cuda variant (CPU cases time the computation alone): remove it".into(),
                ));
            }
        }
        Ok(())
    }

    #[allow(clippy::type_complexity)]
    fn validate_grid(
        &self,
        spec: &Spec,
        mut grid: BTreeMap<String, Spanned<toml::Value>>,
    ) -> Result<
        (
            Vec<(String, AxisValues)>,
            Vec<Vec<String>>,
            Option<WhereExpr>,
            Option<Range<usize>>,
        ),
        ManifestError,
    > {
        let zip_value = grid.remove("zip");
        let where_value = grid.remove("where");

        for (key, value) in &grid {
            if spec.axis(key).is_none() {
                return Err(self.error(
                    self.key_span(value),
                    format!("grid.{key}"),
                    format!(
                        "`{key}` is not an axis of algorithm `{}`; its axes: {}",
                        spec.name,
                        spec.axis_names().join(", ")
                    ),
                ));
            }
        }

        let mut axes = Vec::new();
        for def in spec.axes {
            let values = match grid.get(def.name) {
                Some(value) => self.axis_values(&format!("grid.{}", def.name), def, value)?,
                None => match def.default {
                    Some(default) => AxisValues(vec![default.to_param()]),
                    None => {
                        let message = format!("[grid] must give axis `{}` ({})", def.name, def.doc);
                        return Err(match self.header_span("grid") {
                            Some(span) => self.error(span, "grid", message),
                            None => ManifestError::whole_file(self.path, message),
                        });
                    }
                },
            };
            axes.push((def.name.to_string(), values));
        }

        let mut zip = Vec::new();
        if let Some(zip_value) = zip_value {
            let span = zip_value.span();
            let groups: Vec<Vec<String>> = zip_value.into_inner().try_into().map_err(|_| {
                self.error(
                    span.clone(),
                    "grid.zip",
                    "zip must be a list of lists of axis names, e.g. [[\"n\", \"block\"]]".into(),
                )
            })?;
            let mut seen = Vec::new();
            for group in groups {
                if group.len() < 2 {
                    return Err(self.error(
                        span,
                        "grid.zip",
                        "each zip group needs at least two axes".into(),
                    ));
                }
                let mut len = None;
                for name in &group {
                    let Some((_, values)) = axes.iter().find(|(a, _)| a == name) else {
                        return Err(self.error(
                            span,
                            "grid.zip",
                            format!("zip names `{name}`, which is not an axis"),
                        ));
                    };
                    if seen.contains(name) {
                        return Err(self.error(
                            span,
                            "grid.zip",
                            format!("axis `{name}` is zipped twice"),
                        ));
                    }
                    seen.push(name.clone());
                    match len {
                        None => len = Some(values.0.len()),
                        Some(l) if l != values.0.len() => {
                            return Err(self.error(
                                span,
                                "grid.zip",
                                format!("zipped axes must have equal lengths; `{name}` has {} values, the group's first has {l}", values.0.len()),
                            ))
                        }
                        Some(_) => {}
                    }
                }
                zip.push(group);
            }
        }

        let filter = match where_value {
            None => None,
            Some(value) => {
                let span = value.span();
                let toml::Value::String(text) = value.get_ref() else {
                    return Err(self.error(
                        span,
                        "grid.where",
                        "where must be a string, e.g. \"n >= block\"".into(),
                    ));
                };
                let expr =
                    WhereExpr::parse(text, &|name| spec.axis(name).map(|a| a.kind.value_type()))
                        .map_err(|(offset, message)| {
                            let at = where_source_span(self.source, span.clone(), offset);
                            self.error(at, "grid.where", message)
                        })?;
                Some((expr, span))
            }
        };
        let (filter, filter_span) = filter.unzip();
        Ok((axes, zip, filter, filter_span))
    }

    /// The span of a table's `[name]` header line, if the manifest has one.
    fn header_span(&self, name: &str) -> Option<Range<usize>> {
        let header = format!("[{name}]");
        let mut offset = 0;
        for line in self.source.split_inclusive('\n') {
            let start = offset + (line.len() - line.trim_start().len());
            offset += line.len();
            if line.trim().starts_with(&header) {
                return Some(start..start + header.len());
            }
        }
        None
    }

    /// The span of the key in `key = value` (also inside an inline table), for errors about the
    /// key itself.
    fn key_span(&self, value: &Spanned<toml::Value>) -> Range<usize> {
        let start = value.span().start;
        let line_start = self.source[..start].rfind('\n').map_or(0, |i| i + 1);
        let before = self.source[line_start..start].trim_end();
        let before = before.strip_suffix('=').unwrap_or(before).trim_end();
        let key_start = before.rfind([' ', '\t', '{', ',']).map_or(0, |i| i + 1);
        line_start + key_start..line_start + before.len()
    }

    fn axis_values(
        &self,
        key: &str,
        def: &AxisDef,
        value: &Spanned<toml::Value>,
    ) -> Result<AxisValues, ManifestError> {
        let kind = def.kind;
        let span = value.span();
        let values = AxisValues::from_toml(value.get_ref())
            .map_err(|message| self.error(span.clone(), key, message))?;
        if values.0.is_empty() {
            return Err(self.error(span, key, "axis has no values".into()));
        }
        let mut checked = Vec::new();
        for v in &values.0 {
            let v = kind
                .check(v)
                .map_err(|message| self.error(span.clone(), key, message))?;
            match (kind, v) {
                (AxisKind::File(axis), ParamValue::Str(value)) => match (axis.generated)(&value) {
                    Some(generated) => {
                        generated.map_err(|message| self.error(span.clone(), key, message))?;
                        checked.push(ParamValue::Str(value));
                    }
                    None => {
                        let files = (self.files)
                            .expand(def.name, &value, axis.extensions)
                            .map_err(|message| self.error(span.clone(), key, message))?;
                        // Recorded files were checked when the run read them; a reader of
                        // its results has no business on the disk.
                        if self.files.on_disk() {
                            for path in &files.paths {
                                (axis.check_file)(Path::new(path))
                                    .map_err(|message| self.error(span.clone(), key, message))?;
                            }
                        }
                        checked.extend(files.paths.iter().cloned().map(ParamValue::Str));
                        let mut expansions = self.expansions.borrow_mut();
                        if !expansions.contains(&files) {
                            expansions.push(files);
                        }
                    }
                },
                (_, v) => checked.push(v),
            }
        }
        Ok(AxisValues(checked))
    }

    fn validate_measure(&self, raw: RawMeasure) -> Result<MeasureSettings, ManifestError> {
        let d = MeasureSettings::default();
        let min_samples = raw
            .min_samples
            .as_ref()
            .map_or(d.min_samples, |s| *s.get_ref());
        let max_samples = raw
            .max_samples
            .as_ref()
            .map_or(d.max_samples.max(min_samples), |s| *s.get_ref());
        if let Some(s) = &raw.min_samples {
            if *s.get_ref() == 0 {
                return Err(self.error(
                    s.span(),
                    "measure.min_samples",
                    "min_samples must be at least 1".into(),
                ));
            }
        }
        if let Some(s) = &raw.max_samples {
            if max_samples < min_samples {
                return Err(self.error(
                    s.span(),
                    "measure.max_samples",
                    format!("max_samples ({max_samples}) is below min_samples ({min_samples})"),
                ));
            }
        }
        let positive_seconds = |value: &Option<Spanned<f64>>, key: &str, default: f64| match value {
            Some(s) if !(s.get_ref().is_finite() && *s.get_ref() > 0.0) => Err(self.error(
                s.span(),
                key,
                format!(
                    "{} must be a positive number of seconds",
                    key.trim_start_matches("measure.")
                ),
            )),
            s => Ok(s.as_ref().map_or(default, |s| *s.get_ref())),
        };
        let max_time_s = positive_seconds(&raw.max_time_s, "measure.max_time_s", d.max_time_s)?;
        let timeout_s = positive_seconds(&raw.timeout_s, "measure.timeout_s", d.timeout_s)?;
        let batch_min_window_s = positive_seconds(
            &raw.batch_min_window_s,
            "measure.batch_min_window_s",
            d.batch_min_window_s,
        )?;
        let timer_tolerance = match &raw.timer_tolerance {
            Some(s) if !(*s.get_ref() > 0.0 && *s.get_ref() < 1.0) => {
                return Err(self.error(
                    s.span(),
                    "measure.timer_tolerance",
                    "timer_tolerance must be between 0 and 1 (0.02 = 2%)".into(),
                ))
            }
            s => s.as_ref().map_or(d.timer_tolerance, |s| *s.get_ref()),
        };
        let timer_tolerance_s = positive_seconds(
            &raw.timer_tolerance_s,
            "measure.timer_tolerance_s",
            d.timer_tolerance_s,
        )?;
        let target_rel_ci = match &raw.target_rel_ci {
            Some(s) if !(*s.get_ref() > 0.0 && *s.get_ref() < 1.0) => {
                return Err(self.error(
                    s.span(),
                    "measure.target_rel_ci",
                    "target_rel_ci must be between 0 and 1 (0.01 = 1%)".into(),
                ))
            }
            s => s.as_ref().map_or(d.target_rel_ci, |s| *s.get_ref()),
        };
        let processes = match &raw.processes {
            Some(k) if !(1..=MAX_PROCESSES).contains(k.get_ref()) => {
                return Err(self.error(
                    k.span(),
                    "measure.processes",
                    format!("processes must be from 1 to {MAX_PROCESSES} (1: every case in one worker process; each process holds a CUDA context on the GPU)"),
                ))
            }
            k => k.as_ref().map_or(d.processes, |k| *k.get_ref()),
        };
        let mode = raw.mode.unwrap_or(d.mode);
        let fresh_inputs = match &raw.fresh_inputs {
            Some(f) if *f.get_ref() && mode == TimingMode::Batch => {
                return Err(self.error(
                    f.span(),
                    "measure.fresh_inputs",
                    "fresh_inputs cannot be kept with mode = \"batch\": a batch sample runs the kernel several times on the same inputs; use mode = \"single\"".into(),
                ))
            }
            f => f.as_ref().is_some_and(|f| *f.get_ref()),
        };
        Ok(MeasureSettings {
            warmup: raw.warmup.unwrap_or(d.warmup),
            fresh_inputs,
            min_samples,
            max_samples,
            max_time_s,
            target_rel_ci,
            scope: raw.scope.map_or(d.scope, Spanned::into_inner),
            cache: raw.cache.unwrap_or(d.cache),
            mode,
            batch_min_window_s,
            timeout_s,
            timer_tolerance,
            timer_tolerance_s,
            energy: raw.energy.unwrap_or(d.energy),
            processes,
            launch: raw.launch.unwrap_or(d.launch),
        })
    }

    fn validate_variants(
        &self,
        spec: &Spec,
        axes: &[(String, AxisValues)],
        zip: &[Vec<String>],
        raw: Vec<Spanned<RawVariant>>,
        default_scope: Scope,
    ) -> Result<Vec<Variant>, ManifestError> {
        if raw.is_empty() {
            return Err(ManifestError::whole_file(
                self.path,
                "the study has no [[variant]]: add at least one".into(),
            ));
        }
        let mut variants: Vec<Variant> = Vec::new();
        for (i, spanned) in raw.into_iter().enumerate() {
            let span = spanned.span();
            let raw = spanned.into_inner();
            self.check_variant_name(i, &raw.name, &variants)?;
            let implementation = self.variant_code(i, span, spec, &raw)?;
            let params = self.variant_params(i, spec, axes, zip, &raw)?;
            self.refuse_cuda_settings_on_cpu(i, &raw)?;
            let scope = raw.scope.as_ref().map_or(default_scope, |s| *s.get_ref());
            let host_memory = raw
                .host_memory
                .as_ref()
                .map(|h| *h.get_ref())
                .unwrap_or_default();
            let streams = self.variant_streams(i, &raw, scope, host_memory)?;
            variants.push(Variant {
                name: raw.name.into_inner(),
                backend: raw.backend,
                implementation,
                params,
                scope,
                host_memory,
                streams,
            });
        }
        Ok(variants)
    }

    /// A variant's name names output files, so it must be safe there and unlike any earlier one's.
    fn check_variant_name(
        &self,
        i: usize,
        name: &Spanned<String>,
        earlier: &[Variant],
    ) -> Result<(), ManifestError> {
        if !is_safe_name(name.get_ref()) {
            return Err(self.error(
                name.span(),
                variant_key(i, "name"),
                format!(
                    "variant name `{}` breaks the rule: {NAME_RULE} (it names output files)",
                    name.get_ref()
                ),
            ));
        }
        if earlier.iter().any(|v| &v.name == name.get_ref()) {
            return Err(self.error(
                name.span(),
                variant_key(i, "name"),
                format!("two variants are named `{}`", name.get_ref()),
            ));
        }
        Ok(())
    }

    /// The code a variant times: a CPU variant's `impl` or a CUDA variant's `kernel`, one the
    /// algorithm has. `span`: the whole `[[variant]]` table, for a missing field.
    fn variant_code(
        &self,
        i: usize,
        span: Range<usize>,
        spec: &Spec,
        raw: &RawVariant,
    ) -> Result<String, ManifestError> {
        let (implementation, known, wrong) = match raw.backend {
            Backend::Cpu => (
                &raw.implementation,
                &spec.cpu_impls,
                raw.kernel.as_ref().map(|k| (k, "kernel")),
            ),
            Backend::Cuda => (
                &raw.kernel,
                &spec.kernels,
                raw.implementation.as_ref().map(|k| (k, "impl")),
            ),
        };
        if let Some((value, field)) = wrong {
            return Err(self.error(
                value.span(),
                variant_key(i, field),
                format!(
                    "a {} variant names its code with `{}`, not `{field}`",
                    raw.backend,
                    if field == "kernel" { "impl" } else { "kernel" }
                ),
            ));
        }
        let field = if raw.backend == Backend::Cpu {
            "impl"
        } else {
            "kernel"
        };
        let Some(implementation) = implementation else {
            return Err(self.error(
                span,
                variant_key(i, field),
                format!(
                    "a {} variant must set `{field}`; one of: {}",
                    raw.backend,
                    known.join(", ")
                ),
            ));
        };
        if !known.contains(&implementation.get_ref().as_str()) {
            return Err(self.error(
                implementation.span(),
                variant_key(i, field),
                format!(
                    "algorithm `{}` has no {} {field} `{}`; known: {}",
                    spec.name,
                    raw.backend,
                    implementation.get_ref(),
                    known.join(", ")
                ),
            ));
        }
        Ok(implementation.get_ref().clone())
    }

    /// A variant's own axis values (`params`), which replace the grid's for it: each an axis of
    /// the algorithm for this backend, and a zipped axis keeping its group's length.
    fn variant_params(
        &self,
        i: usize,
        spec: &Spec,
        axes: &[(String, AxisValues)],
        zip: &[Vec<String>],
        raw: &RawVariant,
    ) -> Result<BTreeMap<String, Vec<ParamValue>>, ManifestError> {
        let mut params = BTreeMap::new();
        for (name, value) in &raw.params {
            let param_key = variant_key(i, &format!("params.{name}"));
            let Some(def) = spec.axis(name) else {
                return Err(self.error(
                    self.key_span(value),
                    param_key,
                    format!("`{name}` is not an axis of algorithm `{}`", spec.name),
                ));
            };
            if let Some(backend) = def.only_for.filter(|b| *b != raw.backend) {
                return Err(self.error(
                    self.key_span(value),
                    param_key,
                    format!("axis `{name}` applies only to {backend} variants; this {} variant would ignore it", raw.backend),
                ));
            }
            let values = self.axis_values(&param_key, def, value)?;
            let grid_len = axes
                .iter()
                .find(|(a, _)| a == name)
                .map_or(0, |(_, v)| v.0.len());
            if zip.iter().any(|g| g.contains(name)) && values.0.len() != grid_len {
                return Err(self.error(
                    value.span(),
                    param_key,
                    format!("`{name}` is zipped in the grid, so an override needs {grid_len} values, not {}", values.0.len()),
                ));
            }
            params.insert(name.clone(), values.0);
        }
        Ok(params)
    }

    /// `scope` and `host_memory` say how a CUDA case is timed; on a CPU variant they would be
    /// silently ignored, so they are refused.
    fn refuse_cuda_settings_on_cpu(&self, i: usize, raw: &RawVariant) -> Result<(), ManifestError> {
        if raw.backend != Backend::Cpu {
            return Ok(());
        }
        let cuda_only = [
            raw.scope.as_ref().map(|s| (s.span(), "scope")),
            raw.host_memory.as_ref().map(|h| (h.span(), "host_memory")),
        ];
        match cuda_only.into_iter().flatten().next() {
            None => Ok(()),
            Some((span, field)) => Err(self.error(
                span,
                variant_key(i, field),
                format!("`{field}` says how a CUDA case is timed; a cpu variant times its computation alone, so it would be ignored: remove it"),
            )),
        }
    }

    /// How many streams a variant's transfers are split over: 1 unless `streams` is set, which
    /// only a pinned-memory CUDA variant timing its transfers can use.
    fn variant_streams(
        &self,
        i: usize,
        raw: &RawVariant,
        scope: Scope,
        host_memory: HostMemory,
    ) -> Result<u32, ManifestError> {
        let Some(streams) = &raw.streams else {
            return Ok(1);
        };
        let count = *streams.get_ref();
        let why = if !(2..=MAX_STREAMS).contains(&count) {
            Some(format!("`streams` is 2 to {MAX_STREAMS}, not {count}"))
        } else if raw.backend != Backend::Cuda
            || scope != Scope::Transfers
            || host_memory != HostMemory::Pinned
        {
            Some(
                "`streams` overlaps copies and kernels chunk by chunk, which needs \
                 backend = \"cuda\", scope = \"transfers\" and host_memory = \"pinned\""
                    .to_string(),
            )
        } else {
            None
        };
        match why {
            Some(why) => Err(self.error(streams.span(), variant_key(i, "streams"), why)),
            None => Ok(count),
        }
    }

    /// `dtypes`: the element types the study's cases take, where the algorithm says (a dtype axis,
    /// or one fixed type); a tolerance for a float type no case has would do nothing, and is
    /// refused.
    fn validate_accuracy(
        &self,
        raw: RawAccuracy,
        dtypes: Option<Vec<DType>>,
    ) -> Result<ToleranceOverrides, ManifestError> {
        let check = |value: &Option<Spanned<f64>>,
                     key: &str|
         -> Result<Option<f64>, ManifestError> {
            let dtype = if key.ends_with("f32") {
                DType::F32
            } else {
                DType::F64
            };
            match (value, &dtypes) {
                (Some(v), _) if !(v.get_ref().is_finite() && *v.get_ref() >= 0.0) => Err(self.error(
                    v.span(),
                    key,
                    "a tolerance must be a finite number >= 0".into(),
                )),
                (Some(v), Some(dtypes)) if !dtypes.contains(&dtype) => Err(self.error(
                    v.span(),
                    key,
                    format!(
                        "no case of this study is {} (its dtypes: {}), so this tolerance would do nothing; integers are always compared exactly",
                        dtype.name(),
                        dtypes.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
                    ),
                )),
                (v, _) => Ok(v.as_ref().map(|v| *v.get_ref())),
            }
        };
        Ok(ToleranceOverrides {
            rel_tol_f32: check(&raw.rel_tol.f32, "accuracy.rel_tol.f32")?,
            rel_tol_f64: check(&raw.rel_tol.f64, "accuracy.rel_tol.f64")?,
            abs_tol_f32: check(&raw.abs_tol.f32, "accuracy.abs_tol.f32")?,
            abs_tol_f64: check(&raw.abs_tol.f64, "accuracy.abs_tol.f64")?,
        })
    }
}

/// The dotted key of field `field` of variant number `i`, as errors name it (`variant[2].kernel`).
fn variant_key(i: usize, field: &str) -> String {
    format!("variant[{i}].{field}")
}

/// The element types a study's cases take, when its algorithm has a `dtype` axis: the grid's, and
/// every variant's own.
fn study_dtypes(
    spec: &Spec,
    axes: &[(String, AxisValues)],
    variants: &[Variant],
) -> Option<Vec<DType>> {
    if spec
        .axis("dtype")
        .filter(|a| matches!(a.kind, AxisKind::Dtype(_)))
        .is_none()
    {
        return spec.fixed_dtype.map(|d| vec![d]);
    }
    let grid = axes
        .iter()
        .filter(|(name, _)| name == "dtype")
        .flat_map(|(_, v)| &v.0);
    let own = variants
        .iter()
        .filter_map(|v| v.params.get("dtype"))
        .flatten();
    let mut dtypes: Vec<DType> = grid
        .chain(own)
        .filter_map(|v| match v {
            ParamValue::Str(s) => DType::parse(s),
            _ => None,
        })
        .collect();
    dtypes.sort_by_key(|d| d.name());
    dtypes.dedup();
    Some(dtypes)
}

/// Where each variant's name and each of its `params` sit in the source, kept for the errors the
/// plan finds later (a variant that runs at no grid point, a value its code cannot take).
#[allow(clippy::type_complexity)]
fn variant_spans(
    variants: &[Spanned<RawVariant>],
) -> (Vec<Range<usize>>, Vec<BTreeMap<String, Range<usize>>>) {
    let names = variants.iter().map(|v| v.get_ref().name.span()).collect();
    let params = variants
        .iter()
        .map(|v| {
            v.get_ref()
                .params
                .iter()
                .map(|(name, value)| (name.clone(), value.span()))
                .collect()
        })
        .collect();
    (names, params)
}

/// How many cases the grid expands to over every variant, before `where` drops any; saturating,
/// so `u64::MAX` means "more than 2^64".
fn cases_before_where(
    spec: &Spec,
    axes: &[(String, AxisValues)],
    zip: &[Vec<String>],
    variants: &[Variant],
) -> u64 {
    let mut cases: u64 = 0;
    for variant in variants {
        let mut product: u64 = 1;
        for (name, values) in axes {
            // A zipped axis other than its group's first adds no factor, nor does an axis
            // of the other backend (a CPU sum has no `block`): the plan drops it.
            let other_backend = spec
                .axis(name)
                .and_then(|a| a.only_for)
                .is_some_and(|b| b != variant.backend);
            if other_backend || zip.iter().any(|g| g.contains(name) && g[0] != *name) {
                continue;
            }
            let len = variant.params.get(name).map_or(values.0.len(), Vec::len);
            product = product.saturating_mul(len as u64);
        }
        cases = cases.saturating_add(product);
    }
    cases
}

/// The files a file axis names: a path, or a glob matching at least one file, each with one of
/// the axis's extensions.
fn expand_files(pattern: &str, extensions: &[&str]) -> Result<Vec<String>, String> {
    let paths: Vec<PathBuf> = if pattern.contains(['*', '?', '[']) {
        let matches =
            glob::glob(pattern).map_err(|e| format!("bad glob pattern `{pattern}`: {e}"))?;
        let paths: Vec<PathBuf> = matches
            .filter_map(Result::ok)
            .filter(|p| p.is_file())
            .collect();
        if paths.is_empty() {
            return Err(format!("no file matches `{pattern}`"));
        }
        paths
    } else {
        let path = PathBuf::from(pattern);
        // Symlinks followed: a link to /dev/zero is a device, not "no file".
        match std::fs::metadata(&path) {
            Err(_) => {
                return Err(format!(
                    "no file `{pattern}` (paths are relative to the current folder)"
                ))
            }
            Ok(metadata) => {
                if let Some(kind) = crate::input_file::not_a_file_kind(&metadata) {
                    return Err(format!("`{pattern}` is {kind}, not a regular file"));
                }
            }
        }
        vec![path]
    };
    for path in &paths {
        let ok = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| extensions.contains(&e));
        if !ok {
            return Err(format!(
                "`{}` is not a {} file",
                path.display(),
                extensions.join(" or ")
            ));
        }
    }
    Ok(paths.into_iter().map(|p| p.display().to_string()).collect())
}

/// `is_safe_name`'s rule, as error messages state it.
pub const NAME_RULE: &str =
    "1 to 100 ASCII letters, digits, `_`, `-` or `.`, not starting with `.`";

/// Names that become file and folder names: no separators, no `..`, nothing hidden.
pub fn is_safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

/// The most cases one study may plan: a typo in a range should be an error, not an hour of work
/// or an exhausted memory.
pub const MAX_CASES: u64 = 100_000;

/// The most streams a variant may split its copies and kernels over.
pub const MAX_STREAMS: u32 = 16;
