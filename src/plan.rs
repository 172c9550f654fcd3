//! The plan: a study's grid axes (lists, linear ranges, powers of two), zipped groups and
//! where-filter, expanded with its variants into the list of cases to run.
//!
//! Grid points are filtered on the full grid first; each variant then sees the projection of
//! each point onto the axes that apply to its backend (a CPU variant has no `block`), without
//! duplicates, and with its own `params` replacing the grid's values.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::algos::AxisKind;
use crate::manifest::{Manifest, Variant};

/// One axis value: sizes and block sizes are integers, dtypes and choices are strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Int(i64),
    Str(String),
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Str(s) => f.write_str(s),
        }
    }
}

/// The parameters of one case, by axis name.
pub type Params = BTreeMap<String, ParamValue>;

/// The expanded values of one axis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AxisValues(pub Vec<ParamValue>);

/// The most values one axis may expand to; a typo like `step = 1` over 1e9 should not eat memory.
const MAX_AXIS_VALUES: i64 = 100_000;

impl AxisValues {
    /// Accepts `[1, 2, 3]`, a single value, `{ pow2 = [lo, hi] }` (2^lo .. 2^hi, both included)
    /// and `{ start = a, stop = b, step = s }` (a, a+s, ... up to and including b).
    pub fn from_toml(value: &toml::Value) -> Result<AxisValues, String> {
        match value {
            toml::Value::Array(items) => items
                .iter()
                .map(ParamValue::from_toml)
                .collect::<Result<_, _>>()
                .map(AxisValues),
            toml::Value::Table(table) => {
                let int = |key: &str| -> Result<i64, String> {
                    match table.get(key) {
                        Some(toml::Value::Integer(i)) => Ok(*i),
                        Some(other) => Err(format!(
                            "`{key}` must be an integer, found {}",
                            other.type_str()
                        )),
                        None => Err(format!("missing `{key}`")),
                    }
                };
                let keys: Vec<&str> = table.keys().map(String::as_str).collect();
                if keys == ["pow2"] {
                    let bounds: Vec<i64> = match table.get("pow2") {
                        Some(toml::Value::Array(a)) => {
                            a.iter().filter_map(toml::Value::as_integer).collect()
                        }
                        _ => vec![],
                    };
                    let [lo, hi] = bounds[..] else {
                        return Err("pow2 takes two exponents, e.g. { pow2 = [10, 28] }".into());
                    };
                    if !(0..=62).contains(&lo) || !(lo..=62).contains(&hi) {
                        return Err(format!(
                            "pow2 exponents must satisfy 0 <= lo <= hi <= 62, got [{lo}, {hi}]"
                        ));
                    }
                    Ok(AxisValues(
                        (lo..=hi).map(|e| ParamValue::Int(1i64 << e)).collect(),
                    ))
                } else {
                    let mut sorted = keys.clone();
                    sorted.sort_unstable();
                    if sorted != ["start", "step", "stop"] && sorted != ["start", "stop"] {
                        return Err(format!(
                            "an axis table is {{ pow2 = [lo, hi] }} or {{ start, stop, step }}; found keys {keys:?}"
                        ));
                    }
                    let (start, stop) = (int("start")?, int("stop")?);
                    let step = if table.contains_key("step") {
                        int("step")?
                    } else {
                        1
                    };
                    if step <= 0 {
                        return Err(format!("step must be positive, got {step}"));
                    }
                    if stop < start {
                        return Err(format!("stop ({stop}) is below start ({start})"));
                    }
                    let count = (stop - start) / step + 1;
                    if count > MAX_AXIS_VALUES {
                        return Err(format!(
                            "range expands to {count} values; the limit is {MAX_AXIS_VALUES}"
                        ));
                    }
                    Ok(AxisValues(
                        (0..count)
                            .map(|k| ParamValue::Int(start + k * step))
                            .collect(),
                    ))
                }
            }
            scalar => Ok(AxisValues(vec![ParamValue::from_toml(scalar)?])),
        }
    }
}

/// One unit of work: a variant at one grid point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    /// Position in the plan; stable for a given manifest.
    pub index: usize,
    pub variant: usize,
    pub params: Params,
}

/// Expands a validated manifest into its cases: grid points outermost, variants innermost, so the
/// variants of one point run side by side.
pub fn expand(manifest: &Manifest) -> Vec<Case> {
    let mut cases = Vec::new();
    let per_variant: Vec<Vec<Params>> = manifest
        .variants
        .iter()
        .map(|v| variant_points(manifest, v))
        .collect();
    // Interleave: for each point of the full grid order, every variant that has it.
    let mut order: Vec<(usize, usize)> = Vec::new();
    let longest = per_variant.iter().map(Vec::len).max().unwrap_or(0);
    for p in 0..longest {
        for (v, points) in per_variant.iter().enumerate() {
            if p < points.len() {
                order.push((v, p));
            }
        }
    }
    for (v, p) in order {
        cases.push(Case {
            index: cases.len(),
            variant: v,
            params: per_variant[v][p].clone(),
        });
    }
    cases
}

/// The points one variant runs: its overrides applied, filtered, projected onto its axes, deduplicated.
fn variant_points(manifest: &Manifest, variant: &Variant) -> Vec<Params> {
    let axes: Vec<(String, AxisValues)> = manifest
        .axes
        .iter()
        .map(|(name, values)| {
            let values = variant.params.get(name).unwrap_or(values).clone();
            (name.clone(), values)
        })
        .collect();
    let mut points = Vec::new();
    for point in grid_points(&axes, &manifest.zip) {
        if let Some(filter) = &manifest.filter {
            if !filter.matches(&point) {
                continue;
            }
        }
        let projected: Params = point
            .into_iter()
            .filter(|(name, _)| {
                manifest
                    .algorithm
                    .axis(name)
                    .is_some_and(|a| a.applies_to(variant.backend))
            })
            .collect();
        if !points.contains(&projected) {
            points.push(projected);
        }
    }
    points
}

/// The cartesian product of the axes, with zipped axes advancing together. The first axis varies
/// slowest.
pub fn grid_points(axes: &[(String, AxisValues)], zip: &[Vec<String>]) -> Vec<Params> {
    // Each "dimension" is a group of axes that advance together: a zip group, or one free axis.
    let mut dims: Vec<Vec<&(String, AxisValues)>> = Vec::new();
    for axis in axes {
        match zip.iter().position(|g| g.contains(&axis.0)) {
            Some(g) => match dims.iter_mut().find(|d| zip[g].contains(&d[0].0)) {
                Some(dim) => dim.push(axis),
                None => dims.push(vec![axis]),
            },
            None => dims.push(vec![axis]),
        }
    }
    let mut points = vec![Params::new()];
    for dim in dims {
        let len = dim[0].1 .0.len();
        let mut next = Vec::with_capacity(points.len() * len);
        for point in &points {
            for k in 0..len {
                let mut p = point.clone();
                for (name, values) in &dim {
                    p.insert(name.clone(), values.0[k].clone());
                }
                next.push(p);
            }
        }
        points = next;
    }
    points
}

// ---- where-filters: `n >= block and dtype != "i32"` ----

/// A parsed where-filter over axis values.
#[derive(Debug, Clone, PartialEq)]
pub enum WhereExpr {
    Or(Box<WhereExpr>, Box<WhereExpr>),
    And(Box<WhereExpr>, Box<WhereExpr>),
    Not(Box<WhereExpr>),
    Compare(Operand, CmpOp, Operand),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Integer arithmetic over axes and literals, or a string literal or string axis.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Int(i64),
    Str(String),
    Axis(String),
    Arith(Box<Operand>, char, Box<Operand>),
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Int(i64),
    Str(String),
    Op(String),
    LParen,
    RParen,
}

impl WhereExpr {
    /// Parses a filter; `axis_kind` says which names are axes and their kinds, so a typo or a
    /// string compared with a number is refused here. Errors carry a byte offset into `text`.
    pub fn parse(
        text: &str,
        axis_kind: &dyn Fn(&str) -> Option<AxisKind>,
    ) -> Result<WhereExpr, (usize, String)> {
        let tokens = tokenize(text)?;
        let mut parser = Parser {
            tokens,
            pos: 0,
            end: text.len(),
            axis_kind,
        };
        let expr = parser.or()?;
        if let Some((offset, token)) = parser.tokens.get(parser.pos) {
            return Err((
                *offset,
                format!("unexpected {token:?} after a complete expression"),
            ));
        }
        Ok(expr)
    }

    pub fn matches(&self, point: &Params) -> bool {
        match self {
            WhereExpr::Or(a, b) => a.matches(point) || b.matches(point),
            WhereExpr::And(a, b) => a.matches(point) && b.matches(point),
            WhereExpr::Not(a) => !a.matches(point),
            WhereExpr::Compare(a, op, b) => match (a.eval(point), b.eval(point)) {
                (Some(x), Some(y)) => {
                    let ord = x.cmp(&y);
                    match op {
                        CmpOp::Eq => ord.is_eq(),
                        CmpOp::Ne => ord.is_ne(),
                        CmpOp::Lt => ord.is_lt(),
                        CmpOp::Le => ord.is_le(),
                        CmpOp::Gt => ord.is_gt(),
                        CmpOp::Ge => ord.is_ge(),
                    }
                }
                // Arithmetic that overflows or divides by zero matches nothing.
                _ => false,
            },
        }
    }
}

impl Operand {
    fn eval(&self, point: &Params) -> Option<ParamValue> {
        match self {
            Operand::Int(i) => Some(ParamValue::Int(*i)),
            Operand::Str(s) => Some(ParamValue::Str(s.clone())),
            Operand::Axis(name) => point.get(name).cloned(),
            Operand::Arith(a, op, b) => {
                let (ParamValue::Int(x), ParamValue::Int(y)) = (a.eval(point)?, b.eval(point)?)
                else {
                    return None;
                };
                let v = match op {
                    '+' => x.checked_add(y),
                    '-' => x.checked_sub(y),
                    '*' => x.checked_mul(y),
                    '/' => x.checked_div(y),
                    _ => x.checked_rem(y),
                }?;
                Some(ParamValue::Int(v))
            }
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, (usize, String)> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i] as char;
        let start = i;
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let token = if c.is_ascii_alphabetic() || c == '_' {
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            Token::Ident(text[start..i].to_string())
        } else if c.is_ascii_digit() {
            while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                i += 1;
            }
            let digits = text[start..i].replace('_', "");
            Token::Int(
                digits
                    .parse()
                    .map_err(|_| (start, format!("integer `{digits}` is too large")))?,
            )
        } else if c == '"' || c == '\'' {
            i += 1;
            while i < bytes.len() && bytes[i] as char != c {
                i += 1;
            }
            if i == bytes.len() {
                return Err((start, "unterminated string".into()));
            }
            i += 1;
            Token::Str(text[start + 1..i - 1].to_string())
        } else if c == '(' {
            i += 1;
            Token::LParen
        } else if c == ')' {
            i += 1;
            Token::RParen
        } else {
            let two = text.get(i..i + 2).unwrap_or("");
            let op = if ["==", "!=", "<=", ">=", "&&", "||"].contains(&two) {
                two
            } else if "<>+-*/%!".contains(c) {
                &text[i..i + 1]
            } else {
                return Err((start, format!("unexpected character `{c}`")));
            };
            i += op.len();
            Token::Op(op.to_string())
        };
        tokens.push((start, token));
    }
    Ok(tokens)
}

struct Parser<'a> {
    tokens: Vec<(usize, Token)>,
    pos: usize,
    end: usize,
    axis_kind: &'a dyn Fn(&str) -> Option<AxisKind>,
}

type ParseResult<T> = Result<T, (usize, String)>;

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos).map(|(_, t)| t)
    }

    fn offset(&self) -> usize {
        self.tokens.get(self.pos).map_or(self.end, |(o, _)| *o)
    }

    fn eat_word(&mut self, words: &[&str]) -> bool {
        let hit = match self.peek() {
            Some(Token::Ident(w)) | Some(Token::Op(w)) => words.contains(&w.as_str()),
            _ => false,
        };
        if hit {
            self.pos += 1;
        }
        hit
    }

    fn or(&mut self) -> ParseResult<WhereExpr> {
        let mut left = self.and()?;
        while self.eat_word(&["or", "||"]) {
            left = WhereExpr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> ParseResult<WhereExpr> {
        let mut left = self.not()?;
        while self.eat_word(&["and", "&&"]) {
            left = WhereExpr::And(Box::new(left), Box::new(self.not()?));
        }
        Ok(left)
    }

    fn not(&mut self) -> ParseResult<WhereExpr> {
        if self.eat_word(&["not", "!"]) {
            return Ok(WhereExpr::Not(Box::new(self.not()?)));
        }
        if self.peek() == Some(&Token::LParen) {
            self.pos += 1;
            let inner = self.or()?;
            if self.peek() != Some(&Token::RParen) {
                return Err((self.offset(), "expected `)`".into()));
            }
            self.pos += 1;
            return Ok(inner);
        }
        self.compare()
    }

    fn compare(&mut self) -> ParseResult<WhereExpr> {
        let left_at = self.offset();
        let (left, left_is_str) = self.sum()?;
        let op_at = self.offset();
        let op = match self.peek() {
            Some(Token::Op(op)) => match op.as_str() {
                "==" => CmpOp::Eq,
                "!=" => CmpOp::Ne,
                "<" => CmpOp::Lt,
                "<=" => CmpOp::Le,
                ">" => CmpOp::Gt,
                ">=" => CmpOp::Ge,
                _ => {
                    return Err((
                        op_at,
                        format!("expected a comparison (==, !=, <, <=, >, >=), found `{op}`"),
                    ))
                }
            },
            _ => return Err((op_at, "expected a comparison (==, !=, <, <=, >, >=)".into())),
        };
        self.pos += 1;
        let (right, right_is_str) = self.sum()?;
        if left_is_str != right_is_str {
            return Err((left_at, "compares a string with a number".into()));
        }
        Ok(WhereExpr::Compare(left, op, right))
    }

    /// Returns the operand and whether it is a string.
    fn sum(&mut self) -> ParseResult<(Operand, bool)> {
        let mut left = self.product()?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = op.chars().next().unwrap_or(' ');
            if op != '+' && op != '-' {
                break;
            }
            let at = self.offset();
            self.pos += 1;
            let right = self.product()?;
            if left.1 || right.1 {
                return Err((at, "arithmetic on a string".into()));
            }
            left = (
                Operand::Arith(Box::new(left.0), op, Box::new(right.0)),
                false,
            );
        }
        Ok(left)
    }

    fn product(&mut self) -> ParseResult<(Operand, bool)> {
        let mut left = self.atom()?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = op.chars().next().unwrap_or(' ');
            if !"*/%".contains(op) {
                break;
            }
            let at = self.offset();
            self.pos += 1;
            let right = self.atom()?;
            if left.1 || right.1 {
                return Err((at, "arithmetic on a string".into()));
            }
            left = (
                Operand::Arith(Box::new(left.0), op, Box::new(right.0)),
                false,
            );
        }
        Ok(left)
    }

    fn atom(&mut self) -> ParseResult<(Operand, bool)> {
        let at = self.offset();
        let token = self.tokens.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        match token {
            Some(Token::Int(i)) => Ok((Operand::Int(i), false)),
            Some(Token::Str(s)) => Ok((Operand::Str(s), true)),
            Some(Token::Ident(name)) => match (self.axis_kind)(&name) {
                Some(kind) => Ok((Operand::Axis(name), !kind.is_integer())),
                None => Err((at, format!("`{name}` is not an axis of this algorithm"))),
            },
            Some(other) => Err((
                at,
                format!("expected an axis name, a number or a string, found {other:?}"),
            )),
            None => Err((at, "the expression ends too early".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn manifest(grid: &str, variants: &str) -> Manifest {
        let text = format!(
            "[study]\nname = \"t\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\n{grid}\n{variants}"
        );
        crate::manifest::parse(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{e}"))
    }

    const GPU: &str = "[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n";
    const CPU: &str = "[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";

    fn ints(cases: &[Case], axis: &str) -> Vec<i64> {
        cases
            .iter()
            .map(|c| match &c.params[axis] {
                ParamValue::Int(i) => *i,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn pow2_and_ranges_expand_inclusively() {
        let m = manifest("n = { pow2 = [3, 6] }", GPU);
        assert_eq!(ints(&expand(&m), "n"), [8, 16, 32, 64]);
        let m = manifest("n = { start = 10, stop = 30, step = 7 }", GPU);
        assert_eq!(ints(&expand(&m), "n"), [10, 17, 24]);
        let m = manifest("n = 5", GPU);
        assert_eq!(ints(&expand(&m), "n"), [5]);
    }

    #[test]
    fn the_product_runs_the_first_axis_slowest_and_variants_innermost() {
        let m = manifest(
            "n = [1, 2]\ndtype = [\"f32\", \"f64\"]",
            &format!("{CPU}{GPU}"),
        );
        let cases = expand(&m);
        let got: Vec<(usize, i64, String)> = cases
            .iter()
            .map(|c| {
                (
                    c.variant,
                    ints(std::slice::from_ref(c), "n")[0],
                    c.params["dtype"].to_string(),
                )
            })
            .collect();
        let want = [
            (0, 1, "f32"),
            (1, 1, "f32"),
            (0, 1, "f64"),
            (1, 1, "f64"),
            (0, 2, "f32"),
            (1, 2, "f32"),
            (0, 2, "f64"),
            (1, 2, "f64"),
        ];
        assert_eq!(got, want.map(|(v, n, d)| (v, n, d.to_string())));
        assert_eq!(
            cases.iter().map(|c| c.index).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
    }

    #[test]
    fn zipped_axes_advance_together() {
        let m = manifest(
            "n = [100, 200, 300]\nblock = [32, 64, 128]\nzip = [[\"n\", \"block\"]]",
            GPU,
        );
        let cases = expand(&m);
        assert_eq!(ints(&cases, "n"), [100, 200, 300]);
        assert_eq!(ints(&cases, "block"), [32, 64, 128]);
    }

    #[test]
    fn where_filters_the_grid() {
        let m = manifest("n = [16, 64, 256, 1000]\nblock = [32, 128]\nwhere = \"n >= block and n % 2 == 0 and not (n == 1000)\"", GPU);
        let cases = expand(&m);
        let pairs: Vec<(i64, i64)> = ints(&cases, "n")
            .into_iter()
            .zip(ints(&cases, "block"))
            .collect();
        assert_eq!(pairs, [(64, 32), (256, 32), (256, 128)]);
        let m = manifest(
            "n = [1, 2]\ndtype = [\"f32\", \"i32\"]\nwhere = 'dtype != \"i32\" || n == 2'",
            GPU,
        );
        assert_eq!(expand(&m).len(), 3);
    }

    #[test]
    fn cpu_variants_drop_gpu_axes_without_duplicates() {
        let m = manifest(
            "n = [10, 20]\nblock = [32, 64, 128]",
            &format!("{CPU}{GPU}"),
        );
        let cases = expand(&m);
        let cpu: Vec<&Case> = cases.iter().filter(|c| c.variant == 0).collect();
        assert_eq!(cpu.len(), 2);
        assert!(cpu.iter().all(|c| !c.params.contains_key("block")));
        assert_eq!(cases.iter().filter(|c| c.variant == 1).count(), 6);
    }

    #[test]
    fn variant_params_override_the_grid() {
        let variants = format!("{GPU}params = {{ block = [1024] }}\n[[variant]]\nname = \"h\"\nbackend = \"cuda\"\nkernel = \"reduce_naive\"\n");
        let m = manifest("n = [10]\nblock = [32, 64]", &variants);
        let cases = expand(&m);
        let blocks: Vec<(usize, i64)> = cases
            .iter()
            .map(|c| (c.variant, ints(std::slice::from_ref(c), "block")[0]))
            .collect();
        assert_eq!(blocks, [(0, 1024), (1, 32), (1, 64)]);
    }

    #[test]
    fn where_expressions_reject_unknown_axes_and_mixed_types() {
        let kind = |name: &str| match name {
            "n" => Some(AxisKind::Size),
            "dtype" => Some(AxisKind::Dtype(&[])),
            _ => None,
        };
        assert_eq!(
            WhereExpr::parse("n > 1 and blok < 2", &kind).unwrap_err().0,
            10
        );
        assert!(WhereExpr::parse("dtype > 3", &kind)
            .unwrap_err()
            .1
            .contains("string with a number"));
        assert!(WhereExpr::parse("n >", &kind).is_err());
        assert!(WhereExpr::parse("(n > 1", &kind)
            .unwrap_err()
            .1
            .contains("`)`"));
        assert!(WhereExpr::parse("n > 1 n", &kind).is_err());
    }
}
