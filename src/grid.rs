//! A study's grid: the values each axis takes (lists, linear ranges, powers of two), their cartesian
//! product with zipped groups, and where-filters over the points.

use serde::{Deserialize, Serialize};

use crate::algos::ValueType;
use crate::vocab::{ParamValue, Params};

/// A TOML scalar as an axis value.
pub fn param_from_toml(value: &toml::Value) -> Result<ParamValue, String> {
    match value {
        toml::Value::Integer(i) => Ok(ParamValue::Int(*i)),
        toml::Value::Float(x) => Ok(ParamValue::Float(*x)),
        toml::Value::String(s) => Ok(ParamValue::Str(s.clone())),
        other => Err(format!(
            "expected a number or a string, found {}",
            other.type_str()
        )),
    }
}

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
                .map(param_from_toml)
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
                    // Every element must be an integer: `[5, 7.5, 10]` is a mistake, not [5, 10].
                    let bounds: Vec<Option<i64>> = match table.get("pow2") {
                        Some(toml::Value::Array(a)) => {
                            a.iter().map(toml::Value::as_integer).collect()
                        }
                        _ => vec![],
                    };
                    let [Some(lo), Some(hi)] = bounds[..] else {
                        let found = match table.get("pow2") {
                            Some(v) => v.to_string(),
                            None => String::new(),
                        };
                        return Err(format!(
                            "pow2 takes two integer exponents, e.g. {{ pow2 = [10, 28] }}; found {found}"
                        ));
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
            scalar => Ok(AxisValues(vec![param_from_toml(scalar)?])),
        }
    }
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

/// The deepest a where-filter may nest: parentheses, `not`, and each link of an `and`, `or` or
/// arithmetic chain count one level. Parsing, evaluating and dropping the filter recurse once per
/// level, so a generated filter 10,000 levels deep would overflow the stack; no study needs more.
pub const MAX_WHERE_DEPTH: usize = 200;

/// A where-filter that cannot be evaluated at a grid point: the byte offset in the filter's text
/// of the operator at fault, and why (division by zero, integer overflow).
pub type WhereError = (usize, String);

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

/// Arithmetic over numeric axes and literals (integer when both sides are integers), or a string
/// literal or string axis.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Int(i64),
    Float(f64),
    Str(String),
    Axis(String),
    /// `left op right`, with the byte offset of `op` in the filter's text for errors.
    Arith {
        left: Box<Operand>,
        op: char,
        right: Box<Operand>,
        at: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Int(i64),
    Float(f64),
    Str(String),
    Op(String),
    LParen,
    RParen,
}

/// As a message names it: `>=`, `(`, the number 5.
impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Ident(name) => write!(f, "`{name}`"),
            Token::Int(i) => write!(f, "the number {i}"),
            Token::Float(x) => write!(f, "the number {x}"),
            Token::Str(s) => write!(f, "the string {s:?}"),
            Token::Op(op) => write!(f, "`{op}`"),
            Token::LParen => write!(f, "`(`"),
            Token::RParen => write!(f, "`)`"),
        }
    }
}

impl WhereExpr {
    /// Parses a filter; `axis_type` says which names are axes and their types, so a typo or a
    /// string compared with a number is refused here. Errors carry a byte offset into `text`.
    pub fn parse(
        text: &str,
        axis_type: &dyn Fn(&str) -> Option<ValueType>,
    ) -> Result<WhereExpr, (usize, String)> {
        let tokens = tokenize(text)?;
        let mut parser = Parser {
            tokens,
            pos: 0,
            end: text.len(),
            nesting: 0,
            axis_type,
        };
        let (expr, _) = parser.or()?;
        if let Some((offset, token)) = parser.tokens.get(parser.pos) {
            return Err((
                *offset,
                format!("unexpected {token} after a complete expression"),
            ));
        }
        Ok(expr)
    }

    /// Whether the filter holds at `point`; an error where its arithmetic divides by zero or
    /// overflows there (such a filter is a mistake to show, not a silent `false`).
    pub fn matches(&self, point: &Params) -> Result<bool, WhereError> {
        Ok(match self {
            WhereExpr::Or(a, b) => a.matches(point)? || b.matches(point)?,
            WhereExpr::And(a, b) => a.matches(point)? && b.matches(point)?,
            WhereExpr::Not(a) => !a.matches(point)?,
            WhereExpr::Compare(a, op, b) => {
                let (x, y) = (a.eval(point)?, b.eval(point)?);
                let ord = match (&x, &y) {
                    (ParamValue::Int(i), ParamValue::Float(f)) => (*i as f64).total_cmp(f),
                    (ParamValue::Float(f), ParamValue::Int(i)) => f.total_cmp(&(*i as f64)),
                    _ => x.cmp(&y),
                };
                match op {
                    CmpOp::Eq => ord.is_eq(),
                    CmpOp::Ne => ord.is_ne(),
                    CmpOp::Lt => ord.is_lt(),
                    CmpOp::Le => ord.is_le(),
                    CmpOp::Gt => ord.is_gt(),
                    CmpOp::Ge => ord.is_ge(),
                }
            }
        })
    }
}

impl Operand {
    fn eval(&self, point: &Params) -> Result<ParamValue, WhereError> {
        match self {
            Operand::Int(i) => Ok(ParamValue::Int(*i)),
            Operand::Float(x) => Ok(ParamValue::Float(*x)),
            Operand::Str(s) => Ok(ParamValue::Str(s.clone())),
            Operand::Axis(name) => point
                .get(name)
                .cloned()
                .ok_or_else(|| (0, format!("axis `{name}` has no value at this point"))),
            Operand::Arith {
                left,
                op,
                right,
                at,
            } => {
                let (x, y) = (left.eval(point)?, right.eval(point)?);
                let at_point = || crate::vocab::describe_params(point);
                let divides_by_zero = matches!(op, '/' | '%')
                    && matches!(y, ParamValue::Int(0))
                        | matches!(y, ParamValue::Float(f) if f == 0.0);
                if divides_by_zero {
                    return Err((
                        *at,
                        format!("`{op}` divides by zero at the grid point {}", at_point()),
                    ));
                }
                let overflow = || {
                    (
                        *at,
                        format!(
                            "`{op}` overflows a 64-bit number at the grid point {} ({x} {op} {y})",
                            at_point()
                        ),
                    )
                };
                match (&x, &y) {
                    (ParamValue::Int(a), ParamValue::Int(b)) => {
                        let v = match op {
                            '+' => a.checked_add(*b),
                            '-' => a.checked_sub(*b),
                            '*' => a.checked_mul(*b),
                            '/' => a.checked_div(*b),
                            _ => a.checked_rem(*b),
                        };
                        v.map(ParamValue::Int).ok_or_else(overflow)
                    }
                    _ => {
                        let number = |v: &ParamValue| match v {
                            ParamValue::Int(i) => *i as f64,
                            ParamValue::Float(f) => *f,
                            // The parser refuses arithmetic on strings.
                            ParamValue::Str(_) => f64::NAN,
                        };
                        let (a, b) = (number(&x), number(&y));
                        let v = match op {
                            '+' => a + b,
                            '-' => a - b,
                            '*' => a * b,
                            '/' => a / b,
                            _ => a % b,
                        };
                        if v.is_finite() {
                            Ok(ParamValue::Float(v))
                        } else {
                            Err(overflow())
                        }
                    }
                }
            }
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, (usize, String)> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let start = i;
        // Whole characters, so a `≥` is reported as itself and not as its first byte.
        let c = text[i..].chars().next().unwrap_or(' ');
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
            let is_float = i + 1 < bytes.len() && bytes[i] == b'.' && bytes[i + 1].is_ascii_digit();
            if is_float {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_digit() {
                    i += 1;
                }
            }
            let digits = text[start..i].replace('_', "");
            if is_float {
                Token::Float(
                    digits
                        .parse()
                        .map_err(|_| (start, format!("bad number `{digits}`")))?,
                )
            } else {
                Token::Int(digits.parse().map_err(|_| {
                    (
                        start,
                        format!(
                            "integer `{digits}` does not fit in 64 bits (the largest is {})",
                            i64::MAX
                        ),
                    )
                })?)
            }
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
                let hint = match c {
                    '≥' => " (write `>=`)",
                    '≤' => " (write `<=`)",
                    '≠' => " (write `!=`)",
                    '×' => " (write `*`)",
                    '÷' => " (write `/`)",
                    '=' => " (write `==` to compare)",
                    '&' => " (write `and` or `&&`)",
                    '|' => " (write `or` or `||`)",
                    _ => "",
                };
                let shown = if c.is_control() {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                };
                return Err((start, format!("unexpected character `{shown}`{hint}")));
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
    /// Parentheses and `not`s open around the current token: each is one level of recursion.
    nesting: usize,
    axis_type: &'a dyn Fn(&str) -> Option<ValueType>,
}

type ParseResult<T> = Result<T, (usize, String)>;

/// A parsed piece and the depth of its tree (a leaf is 1).
type Parsed<T> = (T, usize);

fn too_deep(at: usize) -> (usize, String) {
    (
        at,
        format!(
            "the filter nests more than {MAX_WHERE_DEPTH} levels deep (parentheses, `not`, and each `and`, `or` or arithmetic operator in a chain count one level); simplify it"
        ),
    )
}

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

    /// The depth of a node over two subtrees, refused past the limit at the operator's offset.
    fn joined(at: usize, left: usize, right: usize) -> ParseResult<usize> {
        let depth = left.max(right) + 1;
        if depth > MAX_WHERE_DEPTH {
            return Err(too_deep(at));
        }
        Ok(depth)
    }

    fn or(&mut self) -> ParseResult<Parsed<WhereExpr>> {
        let (mut left, mut depth) = self.and()?;
        loop {
            let at = self.offset();
            if !self.eat_word(&["or", "||"]) {
                break;
            }
            let (right, right_depth) = self.and()?;
            depth = Self::joined(at, depth, right_depth)?;
            left = WhereExpr::Or(Box::new(left), Box::new(right));
        }
        Ok((left, depth))
    }

    fn and(&mut self) -> ParseResult<Parsed<WhereExpr>> {
        let (mut left, mut depth) = self.not()?;
        loop {
            let at = self.offset();
            if !self.eat_word(&["and", "&&"]) {
                break;
            }
            let (right, right_depth) = self.not()?;
            depth = Self::joined(at, depth, right_depth)?;
            left = WhereExpr::And(Box::new(left), Box::new(right));
        }
        Ok((left, depth))
    }

    fn not(&mut self) -> ParseResult<Parsed<WhereExpr>> {
        let at = self.offset();
        let is_not = self.eat_word(&["not", "!"]);
        let is_paren = !is_not && self.peek() == Some(&Token::LParen);
        if !is_not && !is_paren {
            return self.compare();
        }
        self.nesting += 1;
        if self.nesting > MAX_WHERE_DEPTH {
            return Err(too_deep(at));
        }
        let parsed = if is_not {
            let (inner, depth) = self.not()?;
            (WhereExpr::Not(Box::new(inner)), Self::joined(at, depth, 0)?)
        } else {
            self.pos += 1;
            let inner = self.or()?;
            if self.peek() != Some(&Token::RParen) {
                return Err((self.offset(), "expected `)`".into()));
            }
            self.pos += 1;
            inner
        };
        self.nesting -= 1;
        Ok(parsed)
    }

    fn compare(&mut self) -> ParseResult<Parsed<WhereExpr>> {
        let left_at = self.offset();
        let (left, left_is_str, left_depth) = self.sum()?;
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
        let (right, right_is_str, right_depth) = self.sum()?;
        if left_is_str != right_is_str {
            return Err((left_at, "compares a string with a number".into()));
        }
        let depth = Self::joined(op_at, left_depth, right_depth)?;
        Ok((WhereExpr::Compare(left, op, right), depth))
    }

    /// Returns the operand, whether it is a string, and its depth.
    fn sum(&mut self) -> ParseResult<(Operand, bool, usize)> {
        self.arithmetic("+-", Self::product)
    }

    fn product(&mut self) -> ParseResult<(Operand, bool, usize)> {
        self.arithmetic("*/%", Self::atom)
    }

    /// A left-associative chain of `operand`s joined by any of the operators in `ops`.
    fn arithmetic(
        &mut self,
        ops: &str,
        operand: fn(&mut Self) -> ParseResult<(Operand, bool, usize)>,
    ) -> ParseResult<(Operand, bool, usize)> {
        let mut left = operand(self)?;
        while let Some(Token::Op(op)) = self.peek() {
            let op = op.chars().next().unwrap_or(' ');
            if !ops.contains(op) {
                break;
            }
            let at = self.offset();
            self.pos += 1;
            let right = operand(self)?;
            if left.1 || right.1 {
                return Err((at, "arithmetic on a string".into()));
            }
            let zero = matches!(right.0, Operand::Int(0)) || right.0 == Operand::Float(0.0);
            if zero && (op == '/' || op == '%') {
                return Err((at, format!("`{op}` divides by zero")));
            }
            let depth = Self::joined(at, left.2, right.2)?;
            left = (
                Operand::Arith {
                    left: Box::new(left.0),
                    op,
                    right: Box::new(right.0),
                    at,
                },
                false,
                depth,
            );
        }
        Ok(left)
    }

    fn atom(&mut self) -> ParseResult<(Operand, bool, usize)> {
        let at = self.offset();
        let token = self.tokens.get(self.pos).map(|(_, t)| t.clone());
        self.pos += 1;
        match token {
            Some(Token::Int(i)) => Ok((Operand::Int(i), false, 1)),
            Some(Token::Float(x)) => Ok((Operand::Float(x), false, 1)),
            Some(Token::Str(s)) => Ok((Operand::Str(s), true, 1)),
            Some(Token::Ident(name)) => match (self.axis_type)(&name) {
                Some(kind) => Ok((Operand::Axis(name), kind == ValueType::Str, 1)),
                None => Err((at, format!("`{name}` is not an axis of this algorithm"))),
            },
            Some(Token::LParen) => Err((
                at,
                "parentheses group conditions, not arithmetic: write `n * 2 + 1`, not `n * (2 + 1)`"
                    .into(),
            )),
            Some(other) => Err((
                at,
                format!("expected an axis name, a number or a string, found {other}"),
            )),
            None => Err((at, "the expression ends too early".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_expressions_reject_unknown_axes_and_mixed_types() {
        let kind = |name: &str| match name {
            "n" => Some(ValueType::Int),
            "dtype" => Some(ValueType::Str),
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

    #[test]
    fn where_compares_integers_with_floats_and_does_float_arithmetic() {
        let kind = |name: &str| match name {
            "n" => Some(ValueType::Int),
            "a" => Some(ValueType::Float),
            _ => None,
        };
        let point: Params = [
            ("n".to_string(), ParamValue::Int(3)),
            ("a".to_string(), ParamValue::Float(2.5)),
        ]
        .into();
        let holds = |text: &str| {
            WhereExpr::parse(text, &kind)
                .unwrap()
                .matches(&point)
                .unwrap()
        };
        assert!(holds("a < n"));
        assert!(holds("a * 2 == 5"));
        assert!(holds("n / 2 == 1"), "integer division stays integer");
        assert!(!holds("a > 2.75"));
        assert!(holds("a >= 2.5 and n < 3.5"));
    }
}
