//! A custom study's definition as data: what `manifest::custom` reads out of a manifest's
//! `[custom]` table, checked, and what the worker receives (inside `WorkerStudy`) to rebuild the
//! algorithm without reading the manifest again. Expressions are kept as their text (parsed
//! again, cheaply, where they are used); source files as their text, read once.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::vocab::{DType, ParamValue, Tolerance};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CustomDef {
    pub title: String,
    /// The user's sources, in order (concatenated, each behind a `#line` directive).
    pub sources: Vec<SourceFile>,
    /// Folders NVRTC searches for the sources' `#include`s (absolute).
    pub include_dirs: Vec<PathBuf>,
    /// Compile-time defines: name and expression (a dtype value becomes its C type), kbench's
    /// own (`custom::defines`) and then the manifest's.
    pub defines: Vec<(String, String)>,
    /// Those of `defines` left out of the sources (`[custom] undefine`); a launch's kernel name
    /// still reads them.
    #[serde(default)]
    pub undefine: Vec<String>,
    /// NVRTC options for every kernel sequence (`-use_fast_math`, `--maxrregcount=64`).
    #[serde(default)]
    pub compiler_options: Vec<String>,
    pub axes: Vec<AxisDecl>,
    pub buffers: Vec<BufferDecl>,
    /// The launch sequences a `[[variant]]`'s `kernel` names.
    pub kernels: Vec<Program>,
    /// The kernel sequence whose outputs are the reference of every output checked against one.
    pub reference: Option<String>,
    /// The user's program that computes the expected values of every output checked against
    /// `Expected::Command`, from the inputs as `.npy` files.
    pub reference_command: Option<CommandDecl>,
    /// The user's program that judges each checked case's answer from its outputs, their
    /// references and the inputs as `.npy` files: exit 0 passes it, exit 1 fails it.
    #[serde(default)]
    pub check_command: Option<CommandDecl>,
    /// Bytes moved and flops, as expressions: GB/s and GFLOP/s.
    pub bytes: String,
    pub flops: String,
    /// Elements processed, as an expression: elements/s ("0": not declared).
    #[serde(default = "no_elements")]
    pub elements: String,
    /// Which way `bytes` go: the peak "% peak" divides by.
    #[serde(default)]
    pub traffic: Traffic,
}

/// `[custom] traffic`: whether the kernels' bytes are read, written, or both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Traffic {
    /// Read alone (a reduction): "% peak" is of the measured read peak.
    Read,
    /// Written alone (a fill, a generator): of the write peak.
    Write,
    /// Both (the default): of the copy peak.
    #[default]
    Copy,
}

impl Traffic {
    pub const NAMES: [&'static str; 3] = ["read", "write", "copy"];

    pub fn parse(name: &str) -> Option<Traffic> {
        match name {
            "read" => Some(Traffic::Read),
            "write" => Some(Traffic::Write),
            "copy" => Some(Traffic::Copy),
            _ => None,
        }
    }

    /// `bytes` split into (read, written): all one way, or half each for copy.
    pub fn split(self, bytes: u64) -> (u64, u64) {
        match self {
            Traffic::Read => (bytes, 0),
            Traffic::Write => (0, bytes),
            Traffic::Copy => (bytes - bytes / 2, bytes / 2),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceFile {
    /// Absolute, as NVRTC's messages name it.
    pub path: PathBuf,
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AxisDecl {
    pub name: String,
    pub kind: AxisKindDecl,
    pub default: Option<ParamValue>,
    pub doc: String,
}

/// The kinds of axis a custom study declares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum AxisKindDecl {
    Size,
    Int { min: i64, max: i64 },
    Float { min: f64, max: f64 },
    Choice(Vec<String>),
    Dtype(Vec<DType>),
    Block,
}

/// A buffer's element type: fixed, or the case's `dtype`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum ElemType {
    Fixed(DType),
    FromDtype,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    Input,
    Output,
    InOut,
    Scratch,
}

impl Role {
    pub fn is_output(self) -> bool {
        matches!(self, Role::Output | Role::InOut)
    }
    pub fn is_input(self) -> bool {
        matches!(self, Role::Input | Role::InOut)
    }
}

/// A buffer's contents before a run (inputs and in-out buffers; scratch starts zeroed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Init {
    /// Uniform in [low, high) from the study's seed (integers: [low, high]); `sorted`: the
    /// draws in ascending order (sorted keys, a search's haystack).
    Uniform {
        low: f64,
        high: f64,
        #[serde(default)]
        sorted: bool,
    },
    Normal {
        mean: f64,
        std_dev: f64,
    },
    /// 0, 1, 2, ...
    Iota,
    Constant(f64),
    Zeros,
    /// A `.npy` file (absolute path), of the buffer's type and length.
    Npy(PathBuf),
    /// The values of an input declared before it (a kernel that works in place on a copy of
    /// another input, a stencil's output border).
    Copy(String),
    /// An expression of the element's index `i` and the axes, for each element (`i % 7`,
    /// `i * 3` for the row offsets of a CSR matrix of three a row).
    Expr(String),
    /// Offsets into an array of the expression's length (CSR row pointers): the first element
    /// 0, the last the total, the ones between ascending draws from [0, total].
    Offsets(String),
}

/// What an output is checked against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Expected {
    /// The reference kernel sequence's output.
    Reference,
    /// A `.npy` file of the expected values (absolute path).
    Npy(PathBuf),
    /// What the study's reference command writes (`CustomDef::reference_command`).
    Command,
    /// Nothing element by element: the study's check command alone judges it
    /// (`CustomDef::check_command`).
    CheckCommand,
}

fn no_elements() -> String {
    "0".into()
}

/// An external command as the manifest declares it: the reference command (run by
/// `crate::reference_command::run`) or the check command (`crate::reference_command::check`),
/// outside the timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandDecl {
    /// The program and its arguments, run without a shell. A program named by a path (one
    /// with a `/`) is made absolute against the manifest's folder.
    pub argv: Vec<String>,
    /// The manifest's folder (absolute): the command runs there.
    pub working_dir: PathBuf,
    /// Past this the command is stopped and the case fails.
    pub timeout_s: f64,
    /// The axes its answer depends on, and all `$KBENCH_PARAMS` holds; None: every axis.
    #[serde(default)]
    pub axes: Option<Vec<String>>,
    /// Run for every case, told its variant (`$KBENCH_VARIANT`, `$KBENCH_KERNEL`), rather than
    /// once for all the variants of a grid point.
    #[serde(default)]
    pub per_variant: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferDecl {
    pub name: String,
    pub elem: ElemType,
    pub length: String,
    pub role: Role,
    pub init: Init,
    /// Outputs: what they are checked against, and within what.
    pub expected: Option<Expected>,
    pub tolerance: Option<ToleranceDecl>,
    /// The `__constant__` variable an input fills before the runs (`d_filter`).
    #[serde(default)]
    pub constant: Option<String>,
    /// An output passes with at most this many elements outside its tolerance.
    #[serde(default)]
    pub max_mismatches: u64,
}

/// An output's tolerance as the manifest gives it: relative and absolute, and a relative part in
/// units of the element type's epsilon (`rel_eps = 4`: four of its epsilons), which a buffer of
/// type `dtype` settles per case.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ToleranceDecl {
    pub rel: f64,
    pub abs: f64,
    pub rel_eps: f64,
}

impl ToleranceDecl {
    /// The tolerance for an output of `dtype` (an integer type has no epsilon: `rel_eps` adds
    /// nothing to it).
    pub fn for_type(self, dtype: DType) -> Tolerance {
        Tolerance {
            rel: self.rel + self.rel_eps * dtype.epsilon().unwrap_or(0.0),
            abs: self.abs,
        }
    }
}

/// One kernel sequence: what one run of a variant launches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub name: String,
    pub launches: Vec<LaunchDecl>,
    /// NVRTC options of this sequence's compile, after the study's.
    #[serde(default)]
    pub compiler_options: Vec<String>,
    /// Timed only: its outputs are not checked (it may write none), and its cases say so.
    #[serde(default)]
    pub unchecked: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchDecl {
    /// The `__global__` function: its name, or a C++ name expression (`softmax<BLOCK, T>`).
    pub kernel: String,
    /// x, y, z (missing ones are 1).
    pub grid: Vec<String>,
    pub block: Vec<String>,
    pub shared_bytes: String,
    pub args: Vec<ArgDecl>,
    pub repeat: Option<Repeat>,
}

/// A launch repeated while a condition holds: the multi-pass construct. Pass k sees `var`
/// (`from`, then `next` of the pass before); another pass follows while `while_` holds of the
/// next value. `@read` is `read` in the first pass and what the pass before wrote after it;
/// `@write` is `write` in the last pass and `swap[0]`, `swap[1]`, `swap[0]` .. before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    pub var: String,
    pub from: String,
    pub next: String,
    pub while_: String,
    pub read: String,
    pub write: String,
    pub swap: [String; 2],
}

/// A kernel argument: a buffer's address, or a scalar of a C type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ArgDecl {
    Buffer(String),
    Scalar { ctype: CType, expr: String },
}

/// The scalar C types an argument may have, and how each is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CType {
    Char,
    UnsignedChar,
    Short,
    UnsignedShort,
    Int,
    Unsigned,
    LongLong,
    UnsignedLongLong,
    Half,
    Bfloat16,
    Float,
    Double,
}

impl CType {
    pub const NAMES: [(&'static str, CType); 12] = [
        ("char", CType::Char),
        ("unsigned char", CType::UnsignedChar),
        ("short", CType::Short),
        ("unsigned short", CType::UnsignedShort),
        ("int", CType::Int),
        ("unsigned", CType::Unsigned),
        ("long long", CType::LongLong),
        ("unsigned long long", CType::UnsignedLongLong),
        ("__half", CType::Half),
        ("__nv_bfloat16", CType::Bfloat16),
        ("float", CType::Float),
        ("double", CType::Double),
    ];

    /// The other spellings each takes: `int32_t`, `size_t`, `half`, ...
    const ALIASES: [(&'static str, &'static str); 13] = [
        ("signed char", "char"),
        ("int8_t", "char"),
        ("uint8_t", "unsigned char"),
        ("int16_t", "short"),
        ("uint16_t", "unsigned short"),
        ("int32_t", "int"),
        ("unsigned int", "unsigned"),
        ("uint32_t", "unsigned"),
        ("int64_t", "long long"),
        ("uint64_t", "unsigned long long"),
        ("size_t", "unsigned long long"),
        ("half", "__half"),
        ("nv_bfloat16", "__nv_bfloat16"),
    ];

    pub fn parse(name: &str) -> Option<CType> {
        let name = (Self::ALIASES.iter())
            .find(|(alias, _)| *alias == name)
            .map_or(name, |(_, canonical)| canonical);
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
    }

    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("?", |(n, _)| n)
    }

    /// The names a manifest may give, for messages.
    pub fn known() -> String {
        Self::NAMES.map(|(n, _)| n).join(", ")
    }

    /// The bytes a scalar of this type is passed in.
    pub fn size_bytes(self) -> u64 {
        match self {
            CType::Char | CType::UnsignedChar => 1,
            CType::Short | CType::UnsignedShort | CType::Half | CType::Bfloat16 => 2,
            CType::Int | CType::Unsigned | CType::Float => 4,
            CType::LongLong | CType::UnsignedLongLong | CType::Double => 8,
        }
    }
}
