//! What one run of a custom kernel sequence launches at one grid point, worked out on the host
//! with no GPU: each launch's kernel, grid, block, shared bytes and arguments (buffers by name,
//! scalars by value), the repeated launches unrolled into their passes. The launcher (`launch`)
//! maps the names to device buffers; the manifest's check runs the same code over the grid, so
//! a grid of 0 is refused at its line before anything runs, and a point whose block or grid no
//! GPU can run (1200 threads) is counted, and skipped when the study runs.

use crate::device::{Arg, Dims};
use crate::expr::{Expr, ExprError, Value};
use crate::vocab::{DType, ParamValue, Params};

use super::def::{ArgDecl, CType, LaunchDecl, Program};

/// A mistake found evaluating a definition's expression at a grid point: the expression's key in
/// the manifest (`kernel[0].launch[1].grid`), the byte offset in its text, and what is wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct DefError {
    pub key: String,
    pub offset: usize,
    pub message: String,
    /// The expression is sound, and asks for what no GPU can run (a block of 1200 threads): the
    /// point is skipped, not the manifest refused.
    pub unrunnable: bool,
}

impl std::fmt::Display for DefError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}`: {}", self.key, self.message)
    }
}

impl std::error::Error for DefError {}

/// Evaluates the expression `text` (the definition's, at `key`) with `names`.
pub fn eval(
    text: &str,
    key: &str,
    names: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value, DefError> {
    let at = |e: ExprError| DefError {
        key: key.to_string(),
        offset: e.offset,
        message: e.message,
        unrunnable: false,
    };
    Expr::parse(text).map_err(at)?.eval(names).map_err(at)
}

/// `eval` of a count (a length, a grid): an integer from 0 to `max`.
pub fn eval_count(
    text: &str,
    key: &str,
    what: &str,
    max: u64,
    names: &dyn Fn(&str) -> Option<Value>,
) -> Result<u64, DefError> {
    let fail = |offset: usize, message: String| DefError {
        key: key.to_string(),
        offset,
        message,
        unrunnable: false,
    };
    let expr = Expr::parse(text).map_err(|e| fail(e.offset, e.message))?;
    let count = expr
        .eval_count(names, what)
        .map_err(|e| fail(e.offset, e.message))?;
    if count > max {
        return Err(fail(
            0,
            format!("{what} is {count}, above the limit of {max}"),
        ));
    }
    Ok(count)
}

/// A grid point's values as an expression reads them.
pub fn param_value(value: &ParamValue) -> Value {
    match value {
        ParamValue::Int(i) => Value::Int(*i),
        ParamValue::Float(x) => Value::Float(*x),
        ParamValue::Str(s) => Value::Str(s.clone()),
    }
}

/// The case's `dtype`, if it has one.
pub fn case_dtype(params: &Params) -> Option<DType> {
    match params.get("dtype") {
        Some(ParamValue::Str(s)) => DType::parse(s),
        _ => None,
    }
}

/// An argument of a planned launch.
#[derive(Debug, Clone, PartialEq)]
pub enum PlannedArg {
    Buffer(String),
    Value(Arg),
}

/// One launch, ready to queue.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedLaunch {
    pub kernel: String,
    pub dims: Dims,
    pub args: Vec<PlannedArg>,
}

/// The most passes a repeated launch may take: a condition that never ends is a mistake.
pub const MAX_PASSES: usize = 64;
/// Threads per block, at most (every CUDA device kbench runs on).
pub const MAX_BLOCK_THREADS: u64 = 1024;
/// A block's and a grid's largest x, y and z (every CUDA device kbench runs on).
const MAX_BLOCK: [u64; 3] = [1024, 1024, 64];
const MAX_GRID: [u64; 3] = [i32::MAX as u64, 65535, 65535];

/// The launches of `program` at `params`; `key` is the program's key (`kernel[0]`).
pub fn plan(program: &Program, key: &str, params: &Params) -> Result<Vec<PlannedLaunch>, DefError> {
    let mut out = Vec::new();
    for (i, launch) in program.launches.iter().enumerate() {
        let key = format!("{key}.launch[{i}]");
        match &launch.repeat {
            None => out.push(plan_one(launch, &key, params, None)?),
            Some(_) => out.extend(plan_repeat(launch, &key, params)?),
        }
    }
    Ok(out)
}

/// The passes of a repeated launch (see `def::Repeat`).
fn plan_repeat(
    launch: &LaunchDecl,
    key: &str,
    params: &Params,
) -> Result<Vec<PlannedLaunch>, DefError> {
    let Some(repeat) = &launch.repeat else {
        return Ok(Vec::new());
    };
    let base = |name: &str| params.get(name).map(param_value);
    let rkey = format!("{key}.repeat");
    let mut value = eval(&repeat.from, &format!("{rkey}.from"), &base)?;
    let mut values = vec![value.clone()];
    loop {
        let with = |name: &str| {
            if name == repeat.var {
                Some(value.clone())
            } else {
                base(name)
            }
        };
        let next = eval(&repeat.next, &format!("{rkey}.next"), &with)?;
        let with_next = |name: &str| {
            if name == repeat.var {
                Some(next.clone())
            } else {
                base(name)
            }
        };
        let again = match eval(&repeat.while_, &format!("{rkey}.while"), &with_next)? {
            Value::Bool(b) => b,
            other => {
                return Err(DefError {
                    key: format!("{rkey}.while"),
                    offset: 0,
                    message: format!("`while` must be a condition such as `len > 1`, not {other}"),
                    unrunnable: false,
                })
            }
        };
        if !again {
            break;
        }
        if values.len() >= MAX_PASSES {
            return Err(DefError {
                key: format!("{rkey}.while"),
                offset: 0,
                message: format!(
                    "the launch repeats more than {MAX_PASSES} times at {}: does `next` bring `{}` closer to ending `while`?",
                    crate::vocab::describe_params(params),
                    repeat.var
                ),
                unrunnable: false,
            });
        }
        value = next;
        values.push(value.clone());
    }
    let passes = values.len();
    let mut out = Vec::new();
    let mut read = repeat.read.clone();
    for (k, value) in values.into_iter().enumerate() {
        let write = if k + 1 == passes {
            repeat.write.clone()
        } else {
            repeat.swap[k % 2].clone()
        };
        let pass = Pass {
            var: &repeat.var,
            value,
            read: read.clone(),
            write: write.clone(),
        };
        out.push(plan_one(launch, key, params, Some(&pass))?);
        read = write;
    }
    Ok(out)
}

/// One pass of a repeated launch: its loop variable's value and its ping-pong buffers.
struct Pass<'a> {
    var: &'a str,
    value: Value,
    read: String,
    write: String,
}

fn plan_one(
    launch: &LaunchDecl,
    key: &str,
    params: &Params,
    pass: Option<&Pass>,
) -> Result<PlannedLaunch, DefError> {
    let names = |name: &str| match pass {
        Some(p) if p.var == name => Some(p.value.clone()),
        _ => params.get(name).map(param_value),
    };
    // Each dimension as a count that fits the launch's 32 bits; the GPU's own limits after.
    let dims3 = |exprs: &[String], field: &str, max: [u64; 3]| -> Result<[u32; 3], DefError> {
        let mut v = [1u32; 3];
        for (i, text) in exprs.iter().enumerate() {
            let k = if exprs.len() == 1 {
                format!("{key}.{field}")
            } else {
                format!("{key}.{field}[{i}]")
            };
            let n = eval_count(text, &k, field, u32::MAX as u64, &names)?;
            if n == 0 {
                return Err(DefError {
                    key: k,
                    offset: 0,
                    message: format!(
                        "{field} is 0 at {}: a launch needs at least 1 (use max(1, ...))",
                        crate::vocab::describe_params(params)
                    ),
                    unrunnable: false,
                });
            }
            if n > max[i] {
                let axis = ["x", "y", "z"][i];
                return Err(DefError {
                    key: k,
                    offset: 0,
                    message: format!(
                        "the {field}'s {axis} is {n}, above the {} a GPU takes",
                        max[i]
                    ),
                    unrunnable: true,
                });
            }
            v[i] = n as u32;
        }
        Ok(v)
    };
    let [gx, gy, gz] = dims3(&launch.grid, "grid", MAX_GRID)?;
    let [bx, by, bz] = dims3(&launch.block, "block", MAX_BLOCK)?;
    let threads = bx as u64 * by as u64 * bz as u64;
    if threads > MAX_BLOCK_THREADS {
        return Err(DefError {
            key: format!("{key}.block"),
            offset: 0,
            message: format!(
                "the block has {threads} threads, above the {MAX_BLOCK_THREADS} a GPU runs"
            ),
            unrunnable: true,
        });
    }
    let (grid, block) = ((gx, gy, gz), (bx, by, bz));
    let shared_bytes = eval_count(
        &launch.shared_bytes,
        &format!("{key}.shared_bytes"),
        "shared_bytes",
        u32::MAX as u64,
        &names,
    )? as u32;
    let mut args = Vec::new();
    for (i, arg) in launch.args.iter().enumerate() {
        let akey = format!("{key}.args[{i}]");
        args.push(match arg {
            ArgDecl::Buffer(name) => PlannedArg::Buffer(match (name.as_str(), pass) {
                ("@read", Some(p)) => p.read.clone(),
                ("@write", Some(p)) => p.write.clone(),
                _ => name.clone(),
            }),
            ArgDecl::Scalar { ctype, expr } => {
                let value = eval(expr, &akey, &names)?;
                PlannedArg::Value(scalar(*ctype, &value).map_err(|message| DefError {
                    key: akey,
                    offset: 0,
                    message,
                    unrunnable: false,
                })?)
            }
        });
    }
    Ok(PlannedLaunch {
        kernel: launch.kernel.clone(),
        dims: crate::device::Dims {
            grid,
            block,
            shared_bytes,
        },
        args,
    })
}

/// A value passed as C type `ctype`: integers must fit it; a float is not passed as an integer;
/// a float passed as a 16-bit float is rounded to it.
pub fn scalar(ctype: CType, value: &Value) -> Result<Arg, String> {
    let doesnt_fit = |v: &dyn std::fmt::Display| format!("{v} does not fit a C `{}`", ctype.name());
    let float = match value {
        Value::Int(i) => Some(*i as f64),
        Value::Float(x) => Some(*x),
        _ => None,
    };
    match (ctype, value) {
        (CType::Char, Value::Int(i)) => {
            (i8::try_from(*i).map(|v| Arg::U8(v as u8))).map_err(|_| doesnt_fit(i))
        }
        (CType::UnsignedChar, Value::Int(i)) => {
            u8::try_from(*i).map(Arg::U8).map_err(|_| doesnt_fit(i))
        }
        (CType::Short, Value::Int(i)) => {
            (i16::try_from(*i).map(|v| Arg::U16(v as u16))).map_err(|_| doesnt_fit(i))
        }
        (CType::UnsignedShort, Value::Int(i)) => {
            u16::try_from(*i).map(Arg::U16).map_err(|_| doesnt_fit(i))
        }
        (CType::Int, Value::Int(i)) => i32::try_from(*i).map(Arg::I32).map_err(|_| doesnt_fit(i)),
        (CType::Unsigned, Value::Int(i)) => {
            u32::try_from(*i).map(Arg::U32).map_err(|_| doesnt_fit(i))
        }
        // The same 64 bits: a `long long` travels as its two's complement.
        (CType::LongLong, Value::Int(i)) => Ok(Arg::U64(*i as u64)),
        (CType::UnsignedLongLong, Value::Int(i)) => {
            u64::try_from(*i).map(Arg::U64).map_err(|_| doesnt_fit(i))
        }
        (CType::Half | CType::Bfloat16 | CType::Float | CType::Double, _) if float.is_some() => {
            let x = float.unwrap_or_default();
            let finite = |fits: bool| {
                if fits || !x.is_finite() {
                    Ok(())
                } else {
                    // 1e300, not its 301 digits.
                    Err(doesnt_fit(&format!("{x:e}")))
                }
            };
            match ctype {
                CType::Half => {
                    let h = half::f16::from_f64(x);
                    finite(h.is_finite())?;
                    Ok(Arg::U16(h.to_bits()))
                }
                CType::Bfloat16 => {
                    let b = half::bf16::from_f64(x);
                    finite(b.is_finite())?;
                    Ok(Arg::U16(b.to_bits()))
                }
                CType::Float => {
                    finite((x as f32).is_finite())?;
                    Ok(Arg::F32(x as f32))
                }
                _ => Ok(Arg::F64(x)),
            }
        }
        (_, v) => Err(format!("{v} cannot be passed as a C `{}`", ctype.name())),
    }
}
