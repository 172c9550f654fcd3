//! The small expression language of a custom study's manifest (`[custom]`): buffer lengths,
//! launch grids and blocks, shared bytes, arguments, loop conditions, bytes and flops, all
//! written as expressions of the study's axes (`ceil_div(n, 2 * block)`).
//!
//! What it has: integers (64-bit, signed) and floats, strings (a `dtype` or choice axis's value),
//! `+ - * / %` (integer `/` rounds toward zero, as C's), comparisons, `&&` / `||` / `!` (also
//! `and`, `or`, `not`), parentheses, and the functions `ceil_div(a, b)`, `min(a, b, ..)`,
//! `max(a, b, ..)` and `sizeof(t)` (the bytes of an element type: a dtype axis, or `i32`, `f32`,
//! `f64`). Names are the axes' (and, inside a repeated launch, its loop variable).
//!
//! Why its own: a mistake must be reported at its line and column like every manifest error, so
//! every error carries the byte offset in the expression's text; an integer that overflows is an
//! error, never a wrapped length.

use std::fmt;

/// A value an expression takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl Value {
    fn kind(&self) -> &'static str {
        match self {
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Bool(_) => "a condition (true or false)",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "\"{s}\""),
            Value::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// A mistake in an expression: the byte offset in its text where it is, and what it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ExprError {
    pub offset: usize,
    pub message: String,
}

fn error<T>(offset: usize, message: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError {
        offset,
        message: message.into(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

/// A parsed expression; each node keeps the offset it was written at.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Int(i64),
    Float(f64),
    Str(String),
    Name(String),
    Neg(Box<Expr>),
    Not(Box<Expr>),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    node: Node,
    offset: usize,
    /// Levels of the tree below and at this node (a leaf is 1), at most `MAX_DEPTH`: evaluating
    /// and dropping a tree recurse through it.
    depth: usize,
}

/// The deepest an expression may nest: parentheses, calls, signs and each operator of a chain
/// count one level. Far above what a length or a launch needs, far below what overflows the
/// stack of the recursive parser, evaluator and drop.
pub const MAX_DEPTH: usize = 256;

impl Expr {
    /// A node over `children`, refused past `MAX_DEPTH` at `offset`.
    fn over(node: Node, offset: usize) -> Result<Expr, ExprError> {
        let below = match &node {
            Node::Neg(e) | Node::Not(e) => e.depth,
            Node::Bin(_, a, b) => a.depth.max(b.depth),
            Node::Call(_, args) => args.iter().map(|a| a.depth).max().unwrap_or(0),
            _ => 0,
        };
        if below >= MAX_DEPTH {
            return too_deep(offset);
        }
        Ok(Expr {
            node,
            offset,
            depth: below + 1,
        })
    }
}

fn too_deep<T>(offset: usize) -> Result<T, ExprError> {
    error(
        offset,
        format!("the expression nests more than {MAX_DEPTH} levels deep (parentheses, calls, signs and each operator in a chain count one level); simplify it"),
    )
}

/// Element types `sizeof` knows, by name.
fn type_size(name: &str) -> Option<i64> {
    if let Some(dtype) = crate::vocab::DType::parse(name) {
        return Some(dtype.size_bytes() as i64);
    }
    match name {
        "char" => Some(1),
        "short" | "half" => Some(2),
        "int" | "float" | "unsigned" => Some(4),
        "double" => Some(8),
        _ => None,
    }
}

const FUNCTIONS: [&str; 4] = ["ceil_div", "min", "max", "sizeof"];

impl Expr {
    /// Parses `text`; the error's offset is where in `text` the mistake is.
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let tokens = lex(text)?;
        let mut parser = Parser {
            tokens,
            at: 0,
            nesting: 0,
            end: text.len(),
        };
        let expr = parser.or()?;
        match parser.peek() {
            None => Ok(expr),
            Some((offset, token)) => error(
                offset,
                format!("unexpected `{}` after a complete expression", token.text()),
            ),
        }
    }

    /// Every name the expression reads (not the functions it calls), with its offset.
    pub fn names(&self) -> Vec<(&str, usize)> {
        let mut out = Vec::new();
        self.collect_names(&mut out);
        out
    }

    fn collect_names<'a>(&'a self, out: &mut Vec<(&'a str, usize)>) {
        match &self.node {
            Node::Name(name) => out.push((name, self.offset)),
            Node::Neg(e) | Node::Not(e) => e.collect_names(out),
            Node::Bin(_, a, b) => {
                a.collect_names(out);
                b.collect_names(out);
            }
            // `sizeof(f32)` names a type, not an axis.
            Node::Call(f, args) if f == "sizeof" => {
                for arg in args {
                    if !matches!(&arg.node, Node::Name(n) if type_size(n).is_some()) {
                        arg.collect_names(out);
                    }
                }
            }
            Node::Call(_, args) => args.iter().for_each(|a| a.collect_names(out)),
            Node::Int(_) | Node::Float(_) | Node::Str(_) => {}
        }
    }

    /// The expression's value, names looked up in `names`.
    pub fn eval(&self, names: &dyn Fn(&str) -> Option<Value>) -> Result<Value, ExprError> {
        let at = self.offset;
        match &self.node {
            Node::Int(i) => Ok(Value::Int(*i)),
            Node::Float(x) => Ok(Value::Float(*x)),
            Node::Str(s) => Ok(Value::Str(s.clone())),
            Node::Name(name) => {
                names(name).map_or_else(|| error(at, format!("unknown name `{name}`")), Ok)
            }
            Node::Neg(e) => match e.eval(names)? {
                Value::Int(i) => i
                    .checked_neg()
                    .map(Value::Int)
                    .map_or_else(|| error(at, "the negation overflows"), Ok),
                Value::Float(x) => Ok(Value::Float(-x)),
                other => error(at, format!("cannot negate {}", other.kind())),
            },
            Node::Not(e) => match e.eval(names)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                other => error(at, format!("`!` needs a condition, not {}", other.kind())),
            },
            Node::Bin(op, a, b) => binary(*op, at, a.eval(names)?, b.eval(names)?),
            Node::Call(f, args) => self.call(f, args, names),
        }
    }

    fn call(
        &self,
        f: &str,
        args: &[Expr],
        names: &dyn Fn(&str) -> Option<Value>,
    ) -> Result<Value, ExprError> {
        let at = self.offset;
        if f == "sizeof" {
            let [arg] = args else {
                return error(at, "sizeof takes one element type, e.g. sizeof(dtype)");
            };
            let name = match (&arg.node, arg.eval(names)) {
                (_, Ok(Value::Str(s))) => s,
                (Node::Name(n), _) => n.clone(),
                (_, Ok(v)) => {
                    return error(
                        arg.offset,
                        format!("sizeof needs an element type, not {}", v.kind()),
                    )
                }
                (_, Err(e)) => return Err(e),
            };
            return type_size(&name).map(Value::Int).map_or_else(
                || {
                    error(
                        arg.offset,
                        format!(
                            "sizeof: `{name}` is not an element type ({})",
                            crate::vocab::DType::names()
                        ),
                    )
                },
                Ok,
            );
        }
        let values = args
            .iter()
            .map(|a| a.eval(names))
            .collect::<Result<Vec<_>, _>>()?;
        match f {
            "ceil_div" => {
                let [a, b] = values.as_slice() else {
                    return error(at, "ceil_div takes two integers: ceil_div(n, d)");
                };
                let (Value::Int(a), Value::Int(b)) = (a, b) else {
                    return error(at, "ceil_div takes two integers");
                };
                if *b <= 0 {
                    return error(
                        args[1].offset,
                        format!("ceil_div by {b}: the divisor must be above 0"),
                    );
                }
                if *a < 0 {
                    return error(
                        args[0].offset,
                        format!("ceil_div of {a}: the dividend must be 0 or more"),
                    );
                }
                Ok(Value::Int(a / b + i64::from(a % b != 0)))
            }
            "min" | "max" => {
                if values.len() < 2 {
                    return error(at, format!("{f} takes two or more numbers"));
                }
                let mut best = values[0].clone();
                for (v, arg) in values.iter().zip(args).skip(1) {
                    let less = match binary(BinOp::Lt, arg.offset, v.clone(), best.clone())? {
                        Value::Bool(b) => b,
                        _ => false,
                    };
                    if less == (f == "min") && v != &best {
                        best = v.clone();
                    }
                }
                Ok(best)
            }
            _ => error(
                at,
                format!("unknown function `{f}`; known: {}", FUNCTIONS.join(", ")),
            ),
        }
    }

    /// The value as a non-negative integer that fits `u64` (a length, a count), or an error
    /// naming `what`.
    pub fn eval_count(
        &self,
        names: &dyn Fn(&str) -> Option<Value>,
        what: &str,
    ) -> Result<u64, ExprError> {
        match self.eval(names)? {
            Value::Int(i) if i >= 0 => Ok(i as u64),
            Value::Int(i) => error(self.offset, format!("{what} is {i}, below 0")),
            other => error(
                self.offset,
                format!("{what} must be an integer, not {} ({other})", other.kind()),
            ),
        }
    }

    /// The value as a condition.
    pub fn eval_bool(&self, names: &dyn Fn(&str) -> Option<Value>) -> Result<bool, ExprError> {
        match self.eval(names)? {
            Value::Bool(b) => Ok(b),
            other => error(
                self.offset,
                format!(
                    "expected a condition such as `len > 1`, found {}",
                    other.kind()
                ),
            ),
        }
    }
}

fn binary(op: BinOp, at: usize, a: Value, b: Value) -> Result<Value, ExprError> {
    use BinOp::*;
    let overflow = || ExprError {
        offset: at,
        message: "the arithmetic overflows 64-bit integers".into(),
    };
    match (op, a, b) {
        (And, Value::Bool(x), Value::Bool(y)) => Ok(Value::Bool(x && y)),
        (Or, Value::Bool(x), Value::Bool(y)) => Ok(Value::Bool(x || y)),
        (And | Or, x, y) => error(
            at,
            format!(
                "`&&` and `||` join conditions, not {} and {}",
                x.kind(),
                y.kind()
            ),
        ),
        (Eq | Ne, Value::Str(x), Value::Str(y)) => Ok(Value::Bool((x == y) == (op == Eq))),
        (Eq | Ne, Value::Bool(x), Value::Bool(y)) => Ok(Value::Bool((x == y) == (op == Eq))),
        (_, Value::Int(x), Value::Int(y)) => match op {
            Add => x.checked_add(y).map(Value::Int).ok_or_else(overflow),
            Sub => x.checked_sub(y).map(Value::Int).ok_or_else(overflow),
            Mul => x.checked_mul(y).map(Value::Int).ok_or_else(overflow),
            Div | Rem if y == 0 => error(at, "division by zero"),
            Div => x.checked_div(y).map(Value::Int).ok_or_else(overflow),
            Rem => x.checked_rem(y).map(Value::Int).ok_or_else(overflow),
            _ => Ok(Value::Bool(compare(op, x.cmp(&y)))),
        },
        (_, x @ (Value::Int(_) | Value::Float(_)), y @ (Value::Int(_) | Value::Float(_))) => {
            let (x, y) = (as_f64(&x), as_f64(&y));
            let value = match op {
                Add => x + y,
                Sub => x - y,
                Mul => x * y,
                Div => x / y,
                Rem => x % y,
                _ => {
                    let Some(order) = x.partial_cmp(&y) else {
                        return error(at, "cannot compare NaN");
                    };
                    return Ok(Value::Bool(compare(op, order)));
                }
            };
            if value.is_finite() {
                Ok(Value::Float(value))
            } else {
                error(at, format!("the result is {value}, not a finite number"))
            }
        }
        (_, x, y) => error(
            at,
            format!(
                "cannot apply `{}` to {} and {}",
                op_text(op),
                x.kind(),
                y.kind()
            ),
        ),
    }
}

fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Float(x) => *x,
        _ => f64::NAN,
    }
}

fn compare(op: BinOp, order: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::*;
    match op {
        BinOp::Eq => order == Equal,
        BinOp::Ne => order != Equal,
        BinOp::Lt => order == Less,
        BinOp::Le => order != Greater,
        BinOp::Gt => order == Greater,
        BinOp::Ge => order != Less,
        _ => false,
    }
}

fn op_text(op: BinOp) -> &'static str {
    use BinOp::*;
    match op {
        Add => "+",
        Sub => "-",
        Mul => "*",
        Div => "/",
        Rem => "%",
        Eq => "==",
        Ne => "!=",
        Lt => "<",
        Le => "<=",
        Gt => ">",
        Ge => ">=",
        And => "&&",
        Or => "||",
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Int(i64),
    Float(f64),
    Str(String),
    Name(String),
    Op(&'static str),
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Int(i) => i.to_string(),
            Token::Float(x) => x.to_string(),
            Token::Str(s) => format!("\"{s}\""),
            Token::Name(n) => n.clone(),
            Token::Op(o) => o.to_string(),
        }
    }
}

const OPERATORS: [&str; 19] = [
    "==", "!=", "<=", ">=", "&&", "||", "+", "-", "*", "/", "%", "<", ">", "(", ")", ",", "!", "=",
    "&",
];

fn lex(text: &str) -> Result<Vec<(usize, Token)>, ExprError> {
    let mut tokens = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit()
            || (c == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || bytes[i] == b'.'
                    || bytes[i] == b'_'
                    || ((bytes[i] == b'-' || bytes[i] == b'+')
                        && matches!(bytes[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            let word: String = text[start..i].chars().filter(|&c| c != '_').collect();
            let token = if word.contains(['.', 'e', 'E']) {
                match word.parse::<f64>() {
                    Ok(x) if x.is_finite() => Token::Float(x),
                    _ => return error(start, format!("`{}` is not a number", &text[start..i])),
                }
            } else {
                match word.parse::<i64>() {
                    Ok(n) => Token::Int(n),
                    Err(_) => {
                        return error(
                            start,
                            format!("`{}` is not an integer that fits 64 bits", &text[start..i]),
                        )
                    }
                }
            };
            tokens.push((start, token));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            let token = match word {
                "and" => Token::Op("&&"),
                "or" => Token::Op("||"),
                "not" => Token::Op("!"),
                _ => Token::Name(word.to_string()),
            };
            tokens.push((start, token));
        } else if c == b'"' || c == b'\'' {
            let start = i;
            let Some(len) = text[i + 1..].find(c as char) else {
                return error(start, "a string is not closed");
            };
            tokens.push((start, Token::Str(text[i + 1..i + 1 + len].to_string())));
            i += len + 2;
        } else {
            let Some(op) = OPERATORS.iter().find(|op| text[i..].starts_with(**op)) else {
                let ch = text[i..].chars().next().unwrap_or(' ');
                return error(i, format!("unexpected character `{ch}`"));
            };
            match *op {
                "=" => return error(i, "`=` is not a comparison: write `==`"),
                "&" => return error(i, "`&` is not an operator here: write `&&` (and)"),
                _ => {}
            }
            tokens.push((i, Token::Op(op)));
            i += op.len();
        }
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
    /// Parentheses, calls and signs open around the parse (see `nested`).
    nesting: usize,
    /// The text's length: where "the expression ends too soon" is reported.
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<(usize, &Token)> {
        self.tokens.get(self.at).map(|(o, t)| (*o, t))
    }

    fn eat(&mut self, op: &str) -> Option<usize> {
        match self.peek() {
            Some((offset, Token::Op(o))) if *o == op => {
                self.at += 1;
                Some(offset)
            }
            _ => None,
        }
    }

    fn binary_level(
        &mut self,
        ops: &[(&'static str, BinOp)],
        next: fn(&mut Parser) -> Result<Expr, ExprError>,
        chain: bool,
    ) -> Result<Expr, ExprError> {
        let mut left = next(self)?;
        loop {
            let Some(&(text, op)) = ops
                .iter()
                .find(|(text, _)| self.peek().is_some_and(|(_, t)| *t == Token::Op(text)))
            else {
                return Ok(left);
            };
            let offset = self.eat(text).unwrap_or(self.end);
            let right = next(self)?;
            left = Expr::over(Node::Bin(op, Box::new(left), Box::new(right)), offset)?;
            if !chain {
                return Ok(left);
            }
        }
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        self.binary_level(&[("||", BinOp::Or)], Parser::and, true)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        self.binary_level(&[("&&", BinOp::And)], Parser::comparison, true)
    }

    fn comparison(&mut self) -> Result<Expr, ExprError> {
        use BinOp::*;
        let ops = [
            ("==", Eq),
            ("!=", Ne),
            ("<=", Le),
            (">=", Ge),
            ("<", Lt),
            (">", Gt),
        ];
        self.binary_level(&ops, Parser::sum, false)
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        self.binary_level(
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            Parser::product,
            true,
        )
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        let ops = [("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Rem)];
        self.binary_level(&ops, Parser::unary, true)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        if let Some(offset) = self.eat("-") {
            let inner = self.nested(offset, Parser::unary)?;
            // A negative literal is a literal: `-9223372036854775808` aside, it cannot overflow.
            return Expr::over(Node::Neg(Box::new(inner)), offset);
        }
        if let Some(offset) = self.eat("!") {
            let inner = self.nested(offset, Parser::unary)?;
            return Expr::over(Node::Not(Box::new(inner)), offset);
        }
        self.primary()
    }

    /// `parse` one level further down, refused past `MAX_DEPTH` levels at `offset` before it
    /// recurses (`((((...` builds no tree until its innermost value).
    fn nested(
        &mut self,
        offset: usize,
        parse: fn(&mut Parser) -> Result<Expr, ExprError>,
    ) -> Result<Expr, ExprError> {
        if self.nesting >= MAX_DEPTH {
            return too_deep(offset);
        }
        self.nesting += 1;
        let parsed = parse(self);
        self.nesting -= 1;
        parsed
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        let Some((offset, token)) = self.peek() else {
            return error(self.end, "the expression ends too soon: a value is missing");
        };
        let token = token.clone();
        self.at += 1;
        let node = match token {
            Token::Int(i) => Node::Int(i),
            Token::Float(x) => Node::Float(x),
            Token::Str(s) => Node::Str(s),
            Token::Name(name) if self.eat("(").is_some() => {
                if !FUNCTIONS.contains(&name.as_str()) {
                    return error(
                        offset,
                        format!("unknown function `{name}`; known: {}", FUNCTIONS.join(", ")),
                    );
                }
                let mut args = Vec::new();
                if self.eat(")").is_none() {
                    loop {
                        args.push(self.nested(offset, Parser::or)?);
                        if self.eat(")").is_some() {
                            break;
                        }
                        if self.eat(",").is_none() {
                            let at = self.peek().map_or(self.end, |(o, _)| o);
                            return error(
                                at,
                                format!("expected `,` or `)` in the call of `{name}`"),
                            );
                        }
                    }
                }
                Node::Call(name, args)
            }
            Token::Name(name) => Node::Name(name),
            Token::Op("(") => {
                let inner = self.nested(offset, Parser::or)?;
                if self.eat(")").is_none() {
                    let at = self.peek().map_or(self.end, |(o, _)| o);
                    return error(at, "expected `)`");
                }
                return Ok(inner);
            }
            Token::Op(op) => return error(offset, format!("expected a value, found `{op}`")),
        };
        Expr::over(node, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str) -> Result<Value, ExprError> {
        let names = |name: &str| match name {
            "n" => Some(Value::Int(1000)),
            "block" => Some(Value::Int(256)),
            "dtype" => Some(Value::Str("f64".into())),
            "alpha" => Some(Value::Float(0.5)),
            _ => None,
        };
        Expr::parse(text)?.eval(&names)
    }

    #[test]
    fn arithmetic_follows_precedence_and_c_integer_division() {
        assert_eq!(eval("1 + 2 * 3").unwrap(), Value::Int(7));
        assert_eq!(eval("(1 + 2) * 3").unwrap(), Value::Int(9));
        assert_eq!(eval("7 / 2").unwrap(), Value::Int(3));
        assert_eq!(eval("-7 % 3").unwrap(), Value::Int(-1));
        assert_eq!(eval("ceil_div(n, 2 * block)").unwrap(), Value::Int(2));
        assert_eq!(eval("ceil_div(0, 8)").unwrap(), Value::Int(0));
        assert_eq!(eval("max(1, ceil_div(n, 512), 0)").unwrap(), Value::Int(2));
        assert_eq!(eval("min(n, 3)").unwrap(), Value::Int(3));
        assert_eq!(eval("(n + 1) * sizeof(dtype)").unwrap(), Value::Int(8008));
        assert_eq!(eval("sizeof(f32)").unwrap(), Value::Int(4));
        assert_eq!(eval("2 * alpha * n").unwrap(), Value::Float(1000.0));
        assert_eq!(eval("1_000 + 1e3").unwrap(), Value::Float(2000.0));
    }

    #[test]
    fn conditions_compare_and_combine() {
        assert_eq!(eval("n > 1 && block <= 1024").unwrap(), Value::Bool(true));
        assert_eq!(
            eval("n < 1 or dtype == \"f64\"").unwrap(),
            Value::Bool(true)
        );
        assert_eq!(eval("not (n >= 1000)").unwrap(), Value::Bool(false));
    }

    #[test]
    fn nesting_is_bounded_where_it_is_written_and_not_before() {
        // Just within the bound, on a test thread's 2 MiB stack: parsed, evaluated, dropped.
        let deepest = format!(
            "{}n{}",
            "(-".repeat(MAX_DEPTH / 2 - 1),
            ")".repeat(MAX_DEPTH / 2 - 1)
        );
        assert_eq!(eval(&deepest).unwrap(), Value::Int(-1000));
        let chain = vec!["n"; MAX_DEPTH].join(" + ");
        assert_eq!(eval(&chain).unwrap(), Value::Int(1000 * MAX_DEPTH as i64));
        // Far past it, as a hostile manifest writes: refused with an offset, no overflow.
        let nested = format!("{}n{}", "(".repeat(10_000), ")".repeat(10_000));
        let e = eval(&nested).unwrap_err();
        assert_eq!(e.offset, MAX_DEPTH);
        assert!(
            e.message.contains("nests more than 256 levels deep"),
            "{e:?}"
        );
        let long = vec!["n"; 30_000].join("+");
        let e = eval(&long).unwrap_err();
        assert_eq!(e.offset, 2 * MAX_DEPTH - 1);
        let calls = format!("{}n{}", "max(1, ".repeat(5_000), ")".repeat(5_000));
        assert!(eval(&calls)
            .unwrap_err()
            .message
            .contains("nests more than"));
        let signs = format!("{}n", "-".repeat(5_000));
        assert!(eval(&signs)
            .unwrap_err()
            .message
            .contains("nests more than"));
    }

    #[test]
    fn mistakes_carry_their_offset() {
        let e = eval("n * 2 + m").unwrap_err();
        assert_eq!((e.offset, e.message.as_str()), (8, "unknown name `m`"));
        let e = eval("n * (2 + 3").unwrap_err();
        assert_eq!(e.offset, 10);
        let e = eval("ceil_dv(n, 2)").unwrap_err();
        assert!(e.message.contains("unknown function `ceil_dv`"), "{e:?}");
        let e = eval("9223372036854775807 + n").unwrap_err();
        assert_eq!(e.offset, 20);
        assert!(e.message.contains("overflows"));
        let e = eval("n / (block - 256)").unwrap_err();
        assert!(e.message.contains("division by zero"));
        let e = eval("n = 3").unwrap_err();
        assert_eq!(e.offset, 2);
        let e = eval("n +").unwrap_err();
        assert_eq!(e.offset, 3);
        let e = eval("dtype + 1").unwrap_err();
        assert!(e.message.contains("a string"), "{e:?}");
        let e = eval("ceil_div(n, 0)").unwrap_err();
        assert_eq!(e.offset, 12);
    }

    #[test]
    fn names_are_listed_but_type_names_in_sizeof_are_not() {
        let e = Expr::parse("ceil_div(n, b) * sizeof(f32) + sizeof(dtype)").unwrap();
        let names: Vec<&str> = e.names().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["n", "b", "dtype"]);
    }
}
