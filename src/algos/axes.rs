//! Axes: what values each of an algorithm's parameters takes (`AxisKind`, `AxisDef`), the
//! checks a manifest's values pass, the defaults it may leave out, and `choice!`, which declares
//! a choice axis's enum so its names are written once.

use anyhow::Result;

use crate::vocab::{Backend, DType, ParamValue};

/// What values an axis takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AxisKind {
    /// An element count, >= 0.
    Size,
    /// Threads per block: a power of two from 32 to 1024.
    BlockSize,
    /// An integer within [min, max] (a custom study's `int` axis).
    Int { min: i64, max: i64 },
    /// A float within [min, max].
    Float { min: f64, max: f64 },
    /// One of the listed element types.
    Dtype(&'static [DType]),
    /// One of the listed names.
    Choice(&'static [&'static str]),
    /// A file, named by path or glob (expanded and checked when the manifest is read), or
    /// input the algorithm generates in its place.
    File(&'static FileAxis),
}

/// What a file axis takes: files of some extensions, each checked when the manifest is read so
/// that a malformed one is refused (at its own line) before anything runs, and, in their place,
/// named generated inputs ("hpcg:104").
#[derive(Debug)]
pub struct FileAxis {
    pub extensions: &'static [&'static str],
    /// Reads and validates one file; the error names the file and the line at fault.
    pub check_file: fn(&std::path::Path) -> Result<(), String>,
    /// `None`: the value is a path or glob. `Some(Ok)`: it names generated input. `Some(Err)`:
    /// it tries to (it has a generator's prefix) and is wrong.
    pub generated: fn(&str) -> Option<Result<(), String>>,
}

impl PartialEq for FileAxis {
    /// One axis is one static; two statics are two axes.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

/// The type an axis's values have in a where-filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueType {
    Int,
    Float,
    Str,
}

impl AxisKind {
    pub fn value_type(self) -> ValueType {
        match self {
            AxisKind::Size | AxisKind::BlockSize | AxisKind::Int { .. } => ValueType::Int,
            AxisKind::Float { .. } => ValueType::Float,
            AxisKind::Dtype(_) | AxisKind::Choice(_) | AxisKind::File(_) => ValueType::Str,
        }
    }

    /// Checks a value, and returns it as the axis holds it (an integer on a float axis becomes
    /// a float).
    pub fn check(self, value: &ParamValue) -> Result<ParamValue, String> {
        let found = |v: &ParamValue| match v {
            ParamValue::Int(i) => format!("the integer {i}"),
            ParamValue::Float(x) => format!("the float {x}"),
            ParamValue::Str(s) => format!("the string \"{s}\""),
        };
        match (self, value) {
            (AxisKind::Size, ParamValue::Int(n)) if *n >= 0 => Ok(value.clone()),
            (AxisKind::Size, ParamValue::Int(n)) => Err(format!("a size must be >= 0, got {n}")),
            (AxisKind::BlockSize, ParamValue::Int(b))
                if (32..=1024).contains(b) && (*b as u64).is_power_of_two() =>
            {
                Ok(value.clone())
            }
            (AxisKind::BlockSize, ParamValue::Int(b)) => Err(format!(
                "a block size must be a power of two from 32 to 1024, got {b}"
            )),
            (AxisKind::Int { min, max }, ParamValue::Int(i)) if (min..=max).contains(i) => {
                Ok(value.clone())
            }
            (AxisKind::Int { min, max }, ParamValue::Int(i)) => {
                Err(format!("expected an integer from {min} to {max}, got {i}"))
            }
            (AxisKind::Size | AxisKind::BlockSize | AxisKind::Int { .. }, v) => {
                Err(format!("expected an integer, found {}", found(v)))
            }
            (AxisKind::Float { min, max }, ParamValue::Int(_) | ParamValue::Float(_)) => {
                let x = match value {
                    ParamValue::Int(i) => *i as f64,
                    ParamValue::Float(x) => *x,
                    ParamValue::Str(_) => unreachable!("matched above"),
                };
                if x.is_finite() && (min..=max).contains(&x) {
                    Ok(ParamValue::Float(x))
                } else {
                    Err(format!("expected a number from {min} to {max}, got {x}"))
                }
            }
            (AxisKind::Float { .. }, v) => Err(format!("expected a number, found {}", found(v))),
            (AxisKind::Dtype(allowed), ParamValue::Str(s)) => match DType::parse(s) {
                Some(d) if allowed.contains(&d) => Ok(value.clone()),
                _ => Err(format!(
                    "unknown dtype `{s}`; this algorithm takes {}",
                    allowed
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            },
            (AxisKind::Dtype(_), v) => Err(format!(
                "expected a dtype name like \"f32\", found {}",
                found(v)
            )),
            (AxisKind::Choice(allowed), ParamValue::Str(s)) if allowed.contains(&s.as_str()) => {
                Ok(value.clone())
            }
            (AxisKind::Choice(allowed), v) => Err(format!(
                "expected one of {}, found {}",
                allowed.join(", "),
                found(v)
            )),
            (AxisKind::File(_), ParamValue::Str(_)) => Ok(value.clone()),
            (AxisKind::File(_), v) => Err(format!(
                "expected a file path, a glob or a generator, found {}",
                found(v)
            )),
        }
    }
}

/// A value an axis takes when the manifest leaves it out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AxisDefault {
    Int(i64),
    Float(f64),
    Str(&'static str),
}

impl AxisDefault {
    pub fn to_param(self) -> ParamValue {
        match self {
            AxisDefault::Int(i) => ParamValue::Int(i),
            AxisDefault::Float(x) => ParamValue::Float(x),
            AxisDefault::Str(s) => ParamValue::Str(s.to_string()),
        }
    }
}

#[derive(Debug)]
pub struct AxisDef {
    pub name: &'static str,
    pub kind: AxisKind,
    /// `None`: the manifest must give this axis.
    pub default: Option<AxisDefault>,
    /// `Some(backend)`: the axis means something only there (a CPU sum has no block size).
    pub only_for: Option<Backend>,
    pub doc: &'static str,
}

impl AxisDef {
    /// A required element count.
    pub const fn size(name: &'static str, doc: &'static str) -> AxisDef {
        AxisDef {
            name,
            kind: AxisKind::Size,
            default: None,
            only_for: None,
            doc,
        }
    }

    /// `dtype`, from `allowed`, defaulting to `default`.
    pub const fn dtype(allowed: &'static [DType], default: &'static str) -> AxisDef {
        AxisDef {
            name: "dtype",
            kind: AxisKind::Dtype(allowed),
            default: Some(AxisDefault::Str(default)),
            only_for: None,
            doc: "element type",
        }
    }

    /// `block`: threads per block of the CUDA kernels, 256 unless given.
    pub const BLOCK: AxisDef = AxisDef {
        name: "block",
        kind: AxisKind::BlockSize,
        default: Some(AxisDefault::Int(256)),
        only_for: Some(Backend::Cuda),
        doc: "threads per block",
    };

    /// One of `names` (a `choice!` enum's NAMES), defaulting to `default`.
    pub const fn choice(
        name: &'static str,
        names: &'static [&'static str],
        default: &'static str,
        doc: &'static str,
    ) -> AxisDef {
        AxisDef {
            name,
            kind: AxisKind::Choice(names),
            default: Some(AxisDefault::Str(default)),
            only_for: None,
            doc,
        }
    }

    /// A float from `min` to `max`, defaulting to `default`.
    pub const fn float(
        name: &'static str,
        default: f64,
        min: f64,
        max: f64,
        doc: &'static str,
    ) -> AxisDef {
        AxisDef {
            name,
            kind: AxisKind::Float { min, max },
            default: Some(AxisDefault::Float(default)),
            only_for: None,
            doc,
        }
    }

    pub fn applies_to(&self, backend: Backend) -> bool {
        self.only_for.is_none_or(|b| b == backend)
    }
}

/// Declares an enum for a choice axis: its variants, their names in manifests, serde, and
/// `NAMES` for the axis definition, so the names are written once.
#[macro_export]
macro_rules! choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident {
        $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
        $vis enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    choice! {
        enum Shape {
            Round = "round",
            Square = "square",
        }
    }

    #[test]
    fn choice_enums_name_their_values_once() {
        assert_eq!(Shape::NAMES, &["round", "square"]);
        assert_eq!(Shape::Square.name(), "square");
        let parsed: Shape = serde_json::from_str("\"round\"").unwrap();
        assert_eq!(parsed, Shape::Round);
        let kind = AxisKind::Choice(Shape::NAMES);
        assert!(kind.check(&ParamValue::Str("square".into())).is_ok());
        let err = kind.check(&ParamValue::Str("oval".into())).unwrap_err();
        assert!(err.contains("round, square"), "{err}");
        assert!(kind.check(&ParamValue::Int(3)).is_err());
    }

    #[test]
    fn float_axes_take_integers_as_floats_within_bounds() {
        let kind = AxisKind::Float {
            min: 0.0,
            max: 10.0,
        };
        assert_eq!(
            kind.check(&ParamValue::Int(2)).unwrap(),
            ParamValue::Float(2.0)
        );
        assert!(kind.check(&ParamValue::Float(10.5)).is_err());
        assert!(kind.check(&ParamValue::Float(f64::NAN)).is_err());
        assert!(kind.check(&ParamValue::Str("2".into())).is_err());
    }
}
