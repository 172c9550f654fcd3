//! What a custom study's sources see defined, and how its launches name C++ kernels.
//!
//! kbench puts a `#define` in front of the sources for every int, block, choice and dtype axis,
//! under the axis's own name (`tile_size_x`, as Kernel Tuner defines a tunable parameter), and
//! for `BLOCK` and
//! `block_size_x` (the `block` axis), `block_size_y` and `block_size_z` (1 beside it) and `T`
//! (the `dtype` axis, as its C type). Size and float axes are the values kernels take as
//! arguments (a macro `n` or `a` would break a parameter `n` or `a`): they are not defined. `[custom] defines` adds more and may replace `BLOCK`, `T`
//! and the `block_size_*`; `undefine` leaves any of kbench's out. A launch's `kernel` is a C++
//! name expression (`softmax<BLOCK, T>`): its defines' and axes' names are replaced by their
//! values at each grid point, and NVRTC instantiates and names the kernel.

use crate::expr::Value;
use crate::vocab::DType;

use super::def::{AxisDecl, AxisKindDecl};

/// One of kbench's own defines: its name, the expression of the axes it stands for, and what
/// made it (for messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Made {
    pub name: String,
    pub expr: String,
    /// The axis it comes from (its index in the definition's axes).
    pub axis: usize,
    pub from: String,
}

/// kbench's defines for `axes`. An axis named like one of the others (`BLOCK`, `block_size_x`,
/// `T`) is that define: kbench does not make it a second time.
pub fn made_by_kbench(axes: &[AxisDecl]) -> Vec<Made> {
    let mut made: Vec<Made> = Vec::new();
    for (i, axis) in axes.iter().enumerate() {
        if !matches!(axis.kind, AxisKindDecl::Size | AxisKindDecl::Float { .. }) {
            made.push(Made {
                name: axis.name.clone(),
                expr: axis.name.clone(),
                axis: i,
                from: format!("the axis `{}`", axis.name),
            });
        }
    }
    let is_axis = |name: &str| axes.iter().any(|a| a.name == name);
    let mut derived = |name: &str, expr: &str, axis: usize, from: String| {
        if !is_axis(name) {
            made.push(Made {
                name: name.into(),
                expr: expr.into(),
                axis,
                from,
            });
        }
    };
    if let Some(i) = axes.iter().position(|a| a.kind == AxisKindDecl::Block) {
        let block = &axes[i].name;
        derived("BLOCK", block, i, format!("the block axis `{block}`"));
        derived(
            "block_size_x",
            block,
            i,
            format!("the block axis `{block}`"),
        );
        for name in ["block_size_y", "block_size_z"] {
            derived(
                name,
                "1",
                i,
                format!("the block axis `{block}` (1 beside it)"),
            );
        }
    }
    if let Some(i) = axes
        .iter()
        .position(|a| matches!(a.kind, AxisKindDecl::Dtype(_)))
    {
        derived(
            "T",
            &axes[i].name,
            i,
            format!("the dtype axis `{}`", axes[i].name),
        );
    }
    made
}

/// A define's value as C text: a dtype's C type, an integer, a float that reads back exactly, a
/// choice's name, or 0/1 for a condition.
pub fn c_text(value: &Value) -> String {
    match value {
        Value::Str(s) => DType::parse(s).map_or_else(|| s.clone(), |d| d.c_type().to_string()),
        Value::Int(v) => v.to_string(),
        Value::Float(x) => format!("{x:?}"),
        Value::Bool(b) => i32::from(*b).to_string(),
    }
}

/// The template parameters the sources declare, with the line of each (1-based): the names in
/// every `template < ... >` list (`typename T`, `int BLOCK = 256`, `class... Ts`) outside
/// comments.
pub fn template_parameters(text: &str) -> Vec<(String, usize)> {
    let text = &without_comments(text);
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut search_from = 0;
    while let Some(found) = text[search_from..].find("template") {
        let at = search_from + found;
        search_from = at + "template".len();
        let before_ok = at == 0 || !is_ident_byte(bytes[at - 1]);
        let after = text[search_from..].trim_start();
        if !before_ok || !after.starts_with('<') {
            continue;
        }
        let open = text.len() - after.len();
        let Some(list) = angle_list(&text[open..]) else {
            continue;
        };
        let line = text[..at].matches('\n').count() + 1;
        for parameter in split_top_level(list) {
            let declared = parameter.split('=').next().unwrap_or("").trim();
            let name: String = (declared.chars().rev())
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let is_name = name.chars().next().is_some_and(|c| !c.is_ascii_digit());
            if is_name && name.len() < declared.len() {
                out.push((name, line));
            }
        }
    }
    out
}

/// `text` with its `//` and `/* */` comments blanked out (newlines kept, so lines still count).
fn without_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            let end = after.find('\n').unwrap_or(after.len());
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").map_or(after.len(), |e| e + 2);
            out.extend(after[..end].chars().filter(|&c| c == '\n'));
            rest = &after[end..];
        } else {
            let c = rest.chars().next().unwrap_or_default();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The text inside the balanced `< ... >` that `text` starts with.
fn angle_list(text: &str) -> Option<&str> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' => depth += 1,
            '>' | ')' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(&text[1..i]);
                }
            }
            ';' | '{' => return None,
            _ => {}
        }
    }
    None
}

/// `text` split at the commas outside any brackets.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' | '[' | '{' => depth += 1,
            '>' | ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Whether `text` can name a kernel: a C++ name, qualified (`ns::k`) and with template arguments
/// (`k<BLOCK, T>`, `k<2 * TILE, float>`) where it has them; `Err` says what is wrong.
pub fn check_kernel_name(text: &str) -> Result<(), String> {
    let trimmed = text.trim();
    let starts_well =
        (trimmed.chars().next()).is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':');
    if !starts_well {
        return Err(format!("`{text}` does not name a kernel: give the function's name, or a C++ name expression such as `softmax<256, float>`"));
    }
    if let Some(bad) = trimmed
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || " _:<>,()*+-/%&.".contains(*c)))
    {
        return Err(format!(
            "`{text}` does not name a kernel: `{bad}` has no place in a C++ name expression"
        ));
    }
    let (mut angles, mut parens) = (0i32, 0i32);
    for c in trimmed.chars() {
        // Inside parentheses `<` and `>` compare (`k<(N > 2)>`); outside they are brackets.
        match c {
            '<' if parens == 0 => angles += 1,
            '>' if parens == 0 => angles -= 1,
            '(' => parens += 1,
            ')' => parens -= 1,
            _ => {}
        }
        if angles < 0 || parens < 0 {
            break;
        }
    }
    if angles != 0 || parens != 0 {
        return Err(format!(
            "`{text}` does not name a kernel: its `<` `>` or `(` `)` do not pair up"
        ));
    }
    Ok(())
}

/// `expression` with every identifier that `value` knows replaced by its text (defines and axes
/// by their values at a grid point): `softmax<BLOCK, T>` -> `softmax<256, __nv_bfloat16>`.
pub fn substitute(expression: &str, value: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(expression.len());
    let mut chars = expression.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_ascii_alphabetic() || c == '_' {
            let mut end = start + c.len_utf8();
            while let Some(&(i, next)) = chars.peek() {
                if !(next.is_ascii_alphanumeric() || next == '_') {
                    break;
                }
                end = i + next.len_utf8();
                chars.next();
            }
            let word = &expression[start..end];
            // `ns::T` names a member, not the define.
            let qualified = expression[..start].ends_with("::");
            match value(word).filter(|_| !qualified) {
                Some(text) => out.push_str(&text),
                None => out.push_str(word),
            }
        } else if c.is_ascii_digit() {
            // A number (`1e5`, `0x1F`, `256u`) stays as it is, letters and all.
            out.push(c);
            while let Some(&(_, next)) = chars.peek() {
                if !(next.is_ascii_alphanumeric() || next == '_' || next == '.') {
                    break;
                }
                out.push(next);
                chars.next();
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(name: &str, kind: AxisKindDecl) -> AxisDecl {
        AxisDecl {
            name: name.into(),
            kind,
            default: None,
            doc: String::new(),
        }
    }

    #[test]
    fn every_axis_but_a_size_or_float_is_defined_under_its_name_with_blocks_and_t() {
        let axes = [
            axis("n", AxisKindDecl::Size),
            axis("alpha", AxisKindDecl::Float { min: 0.0, max: 1.0 }),
            axis("block", AxisKindDecl::Block),
            axis("tile_size_x", AxisKindDecl::Int { min: 1, max: 8 }),
            axis("dtype", AxisKindDecl::Dtype(vec![DType::BF16])),
        ];
        let made = made_by_kbench(&axes);
        let names: Vec<(&str, &str)> = made
            .iter()
            .map(|m| (m.name.as_str(), m.expr.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                ("block", "block"),
                ("tile_size_x", "tile_size_x"),
                ("dtype", "dtype"),
                ("BLOCK", "block"),
                ("block_size_x", "block"),
                ("block_size_y", "1"),
                ("block_size_z", "1"),
                ("T", "dtype"),
            ]
        );
    }

    #[test]
    fn an_axis_named_like_a_define_kbench_makes_is_that_define() {
        let axes = [
            axis("block", AxisKindDecl::Block),
            axis("block_size_x", AxisKindDecl::Int { min: 1, max: 1024 }),
            axis("T", AxisKindDecl::Int { min: 1, max: 8 }),
            axis("dtype", AxisKindDecl::Dtype(vec![DType::F32])),
        ];
        let made = made_by_kbench(&axes);
        for name in ["block_size_x", "T"] {
            let of_name: Vec<&Made> = made.iter().filter(|m| m.name == name).collect();
            assert_eq!(of_name.len(), 1, "{name}");
            assert_eq!(of_name[0].expr, name, "{name}: the axis's own value");
        }
    }

    #[test]
    fn template_parameters_are_read_with_their_lines() {
        let text = "#include <x>\ntemplate <int BLOCK_SIZE, typename T = float>\n__global__ void k(T* x) {}\n\
                    template<class... Ts, int N = (3 > 2)> struct S;\nint templated = 1; // template <int NOT>\n\
                    /* template <int NOR>\n */ template <typename U> void f();\n";
        let params = template_parameters(text);
        assert_eq!(
            params,
            [
                ("BLOCK_SIZE".to_string(), 2),
                ("T".to_string(), 2),
                ("Ts".to_string(), 4),
                ("N".to_string(), 4),
                ("U".to_string(), 7),
            ]
        );
    }

    #[test]
    fn names_are_replaced_as_whole_words_and_numbers_stay() {
        let value = |w: &str| match w {
            "T" => Some("__nv_bfloat16".to_string()),
            "BLOCK" => Some("256".to_string()),
            "e5" => Some("WRONG".to_string()),
            _ => None,
        };
        assert_eq!(
            substitute("softmax<BLOCK, T>", &value),
            "softmax<256, __nv_bfloat16>"
        );
        assert_eq!(
            substitute("ns::T<BLOCK_2, 1e5, T>", &value),
            "ns::T<BLOCK_2, 1e5, __nv_bfloat16>"
        );
        assert_eq!(substitute("k", &value), "k");
    }

    #[test]
    fn kernel_names_are_checked_for_shape() {
        for good in [
            "saxpy",
            "softmax<256, __half>",
            "ns::k<2 * TILE, float>",
            "k<(N > 2)>",
        ] {
            assert_eq!(check_kernel_name(good), Ok(()), "{good}");
        }
        for bad in ["", "1k", "k<int", "k>", "k; system()", "k\"", "k{}"] {
            assert!(check_kernel_name(bad).is_err(), "{bad}");
        }
    }
}
