//! Colour on the terminal: the verdict words of kbench's own text output (SLOWER, FASTER,
//! REFUTED, HOLDS, FAIL, ...) coloured as cargo and hyperfine colour theirs, red for bad news,
//! green for good, yellow for neither.
//!
//! Colour is added to text already drawn (tables included), word by word, and written through
//! `anstream`, which removes it again unless colour is on: `--color always`, or `--color auto`
//! (the default) with stdout a terminal and `NO_COLOR` unset. Since escapes take no columns on a
//! terminal, a coloured table lines up exactly as the plain one; and since only the functions
//! here print colour, it never reaches JSON, CSV, markdown or HTML, which are written elsewhere.

use std::io::Write as _;

use anstyle::{AnsiColor, Style};

/// `--color`: when to colour stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// When stdout is a terminal and `NO_COLOR` is not set.
    Auto,
    Always,
    Never,
}

/// Makes `when` the choice for everything printed through this module (called once, by `main`).
pub fn set_color(when: ColorWhen) {
    let choice = match when {
        ColorWhen::Auto => anstream::ColorChoice::Auto,
        ColorWhen::Always => anstream::ColorChoice::Always,
        ColorWhen::Never => anstream::ColorChoice::Never,
    };
    choice.write_global();
}

const BAD: Style = AnsiColor::Red.on_default().bold();
const GOOD: Style = AnsiColor::Green.on_default().bold();
const UNSURE: Style = AnsiColor::Yellow.on_default().bold();
const QUIET: Style = AnsiColor::Yellow.on_default();

/// The words coloured, longest first so `NEW FAILURE` wins over `FAIL`; each matches only as a
/// whole word (`FAILED` is not `FAIL` + `ED`).
const WORDS: &[(&str, Style)] = &[
    ("NEW FAILURE", BAD),
    ("INCONCLUSIVE", UNSURE),
    ("NOT MEASURED", UNSURE),
    ("TIMED OUT", BAD),
    ("REFUTED", BAD),
    ("SLOWER", BAD),
    ("FASTER", GOOD),
    ("FAILED", BAD),
    ("ERROR", BAD),
    ("HOLDS", GOOD),
    ("FAIL", BAD),
    ("PASS", GOOD),
    ("skipped", QUIET),
    ("warning", QUIET),
];

/// `text` with each verdict word wrapped in its colour's escapes (always: `print` removes them
/// where colour is off).
pub fn paint(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let at_word_start = out
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric() && c != '_');
        let word = WORDS.iter().find(|(word, _)| {
            at_word_start
                && rest.starts_with(word)
                && rest[word.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !c.is_alphanumeric() && c != '_')
        });
        match word {
            Some((word, style)) => {
                out.push_str(&format!("{}{word}{}", style.render(), style.render_reset()));
                rest = &rest[word.len()..];
            }
            None => {
                let c = rest.chars().next().expect("rest is not empty");
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

/// Prints `text` on stdout, its verdict words coloured where colour is on (anstream decides:
/// `--color`, NO_COLOR, and whether stdout is a terminal), through `output` like every other
/// print, so a closed pipe (`kbench report ... | head`) ends the output quietly.
pub fn print(text: &str) {
    let choice = anstream::AutoStream::choice(&std::io::stdout());
    let mut shown = anstream::AutoStream::new(Vec::new(), choice);
    // Writing to memory cannot fail.
    let _ = shown.write_all(paint(text).as_bytes());
    let shown = shown.into_inner();
    crate::output::stdout(format_args!("{}", String::from_utf8_lossy(&shown)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_verdict_words_are_coloured() {
        let painted = paint("HOLDS, REFUTED; FAILED not FAILURE; HOLDSX NEW FAILURE");
        assert!(painted.contains(&format!("{}HOLDS{}", GOOD.render(), GOOD.render_reset())));
        assert!(painted.contains(&format!("{}REFUTED", BAD.render())));
        assert!(painted.contains(&format!("{}FAILED", BAD.render())));
        assert!(painted.contains("not FAILURE;"), "{painted:?}");
        assert!(painted.contains(" HOLDSX "), "{painted:?}");
        assert!(painted.contains(&format!("{}NEW FAILURE", BAD.render())));
        // Without its escapes, the text is unchanged.
        assert_eq!(
            anstream::adapter::strip_str(&painted).to_string(),
            "HOLDS, REFUTED; FAILED not FAILURE; HOLDSX NEW FAILURE"
        );
    }
}
