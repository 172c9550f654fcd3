//! Text for a terminal of limited width: lines wrapped at spaces with a hanging indent,
//! measured in the columns a terminal gives each character (`µ` one, a CJK character two).

/// The columns `text` takes on a terminal (`µ` one, a CJK character two).
pub fn columns(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` as lines of at most `width` columns (None: one line), broken at spaces, each line
/// after the first starting with `indent`; the spaces within a line are kept, and a word longer
/// than a line is left whole.
pub fn wrap(text: &str, width: Option<usize>, indent: &str) -> String {
    let Some(width) = width else {
        return format!("{text}\n");
    };
    // Each word with the spaces before it.
    let mut pieces: Vec<(String, String)> = Vec::new();
    let mut spaces = String::new();
    let mut word = String::new();
    for c in text.chars() {
        if c == ' ' {
            if !word.is_empty() {
                pieces.push((std::mem::take(&mut spaces), std::mem::take(&mut word)));
            }
            spaces.push(c);
        } else {
            word.push(c);
        }
    }
    pieces.push((spaces, word));
    let mut out = String::new();
    let mut line = String::new();
    let mut len = 0;
    for (k, (spaces, word)) in pieces.into_iter().enumerate() {
        let grown = len + columns(&spaces) + columns(&word);
        if k > 0 && grown > width && len > columns(indent) {
            out.push_str(line.trim_end());
            out.push('\n');
            line = format!("{indent}{word}");
            len = columns(indent) + columns(&word);
        } else {
            line.push_str(&spaces);
            line.push_str(&word);
            len = grown;
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrapping_breaks_at_spaces_and_keeps_the_spaces_within_a_line() {
        assert_eq!(wrap("a  b c", None, "  "), "a  b c\n");
        assert_eq!(
            wrap("  HOLDS   \"x y\"", Some(80), "    "),
            "  HOLDS   \"x y\"\n"
        );
        assert_eq!(
            wrap("  one two three four", Some(12), "    "),
            "  one two\n    three\n    four\n"
        );
        // Columns, not characters: a CJK character takes two, `µ` one.
        assert_eq!(wrap("漢字 漢字", Some(5), ""), "漢字\n漢字\n");
        assert_eq!(wrap("4.2 µs 5.1 µs", Some(13), ""), "4.2 µs 5.1 µs\n");
        // A word longer than a line stays whole, on its own line.
        assert_eq!(
            wrap("ab averyveryverylongword cd", Some(8), ""),
            "ab\naveryveryverylongword\ncd\n"
        );
    }
}
