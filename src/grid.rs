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
    Arith(Box<Operand>, char, Box<Operand>),
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
            axis_type,
        };
        let expr = parser.or()?;
        if let Some((offset, token)) = parser.tokens.get(parser.pos) {
            return Err((
                *offset,
                format!("unexpected {token} after a complete expression"),
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
            Operand::Float(x) => Some(ParamValue::Float(*x)),
            Operand::Str(s) => Some(ParamValue::Str(s.clone())),
            Operand::Axis(name) => point.get(name).cloned(),
            Operand::Arith(a, op, b) => match (a.eval(point)?, b.eval(point)?) {
                (ParamValue::Int(x), ParamValue::Int(y)) => {
                    let v = match op {
                        '+' => x.checked_add(y),
                        '-' => x.checked_sub(y),
                        '*' => x.checked_mul(y),
                        '/' => x.checked_div(y),
                        _ => x.checked_rem(y),
                    }?;
                    Some(ParamValue::Int(v))
                }
                (x, y) => {
                    let number = |v: ParamValue| match v {
                        ParamValue::Int(i) => Some(i as f64),
                        ParamValue::Float(f) => Some(f),
                        ParamValue::Str(_) => None,
                    };
                    let (x, y) = (number(x)?, number(y)?);
                    let v = match op {
                        '+' => x + y,
                        '-' => x - y,
                        '*' => x * y,
                        '/' => x / y,
                        _ => x % y,
                    };
                    v.is_finite().then_some(ParamValue::Float(v))
                }
            },
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
                Token::Int(
                    digits
                        .parse()
                        .map_err(|_| (start, format!("integer `{digits}` is too large")))?,
                )
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
    axis_type: &'a dyn Fn(&str) -> Option<ValueType>,
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
        self.arithmetic("+-", Self::product)
    }

    fn product(&mut self) -> ParseResult<(Operand, bool)> {
        self.arithmetic("*/%", Self::atom)
    }

    /// A left-associative chain of `operand`s joined by any of the operators in `ops`.
    fn arithmetic(
        &mut self,
        ops: &str,
        operand: fn(&mut Self) -> ParseResult<(Operand, bool)>,
    ) -> ParseResult<(Operand, bool)> {
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
            Some(Token::Float(x)) => Ok((Operand::Float(x), false)),
            Some(Token::Str(s)) => Ok((Operand::Str(s), true)),
            Some(Token::Ident(name)) => match (self.axis_type)(&name) {
                Some(kind) => Ok((Operand::Axis(name), kind == ValueType::Str)),
                None => Err((at, format!("`{name}` is not an axis of this algorithm"))),
            },
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
        let holds = |text: &str| WhereExpr::parse(text, &kind).unwrap().matches(&point);
        assert!(holds("a < n"));
        assert!(holds("a * 2 == 5"));
        assert!(holds("n / 2 == 1"), "integer division stays integer");
        assert!(!holds("a > 2.75"));
        assert!(holds("a >= 2.5 and n < 3.5"));
    }
}
