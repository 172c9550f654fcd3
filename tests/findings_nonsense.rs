//! Declared tables and claims that can never hold data are refused at their line: an empty
//! selection, a variant compared with itself, no or repeated variants, a peak table or a row
//! by `block` over CPU variants, published figures that are not figures, and control
//! characters in a reference's label or a claim's source.

use std::path::Path;

use kbench::manifest::{parse, ManifestError};

/// A study with a CPU and a CUDA variant over two sizes (lines 1 to 14).
const TWO: &str =
    "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [1000, 2000]\n\
[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n";
/// A study with one CPU variant at one size (lines 1 to 10).
const CPU_ONLY: &str =
    "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [1000]\n\
[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";
/// Lines 15 to 17 after TWO.
const CLAIM: &str = "[[claim]]\ntext = \"t\"\nsource = \"s\"\n";
/// Lines 15 and 16 after TWO.
const TABLE: &str = "[[table]]\ntitle = \"t\"\n";
/// A table by variant and n, then its reference's first lines (21 to 23 after TWO + TABLE).
const BY_N: &str = "rows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n";
const REFERENCE: &str = "[[table.reference]]\nlabel = \"seed\"\nsource = \"p\"\nunit = \"ms\"\n";

fn error(text: &str) -> ManifestError {
    match parse(Path::new("bad.toml"), text) {
        Ok(_) => panic!("accepted a manifest that can never hold data:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn tables_and_claims_that_can_never_hold_data_are_refused_at_their_line() {
    // (what, manifest, line, key, words)
    let cases: Vec<(&str, String, usize, &str, &str)> = vec![
        ("claim selecting no value", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"c\"\nb = \"g\"\nselect = {{ n = [] }}\n"), 21, "claim[0].select.n", "`n = []` keeps no value"),
        ("table selecting no value", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"dtype\"\nvalue = \"median\"\nselect = {{ n = [] }}\n"), 20, "table[0].select.n", "keeps no value"),
        ("a variant faster than itself", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"g\"\nb = \"g\"\n"), 20, "claim[0].b", "never faster than itself"),
        ("table over no variant", format!("{TWO}{TABLE}{BY_N}variants = []\n"), 20, "table[0].variants", "names no variant"),
        ("passes over no variant", format!("{TWO}{CLAIM}kind = \"passes\"\nvariants = []\n"), 19, "claim[0].variants", "names no variant"),
        ("table naming a variant twice", format!("{TWO}{TABLE}{BY_N}variants = [\"g\", \"c\", \"g\"]\n"), 20, "table[0].variants", "`g` is listed twice"),
        ("passes naming a variant twice", format!("{TWO}{CLAIM}kind = \"passes\"\nvariants = [\"c\", \"c\"]\n"), 19, "claim[0].variants", "`c` is listed twice"),
        ("peak table listing a CPU variant", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"percent_of_peak\"\nvariants = [\"g\", \"c\"]\n"), 20, "table[0].variants", "`c` is not a CUDA variant"),
        ("peak table of a CPU-only study", format!("{CPU_ONLY}{TABLE}rows = \"variant\"\ncolumns = \"dtype\"\nvalue = \"percent_of_peak\"\n"), 15, "table[0].value", "`c` is not a CUDA variant"),
        ("rows by block over a CPU variant", format!("{TWO}{TABLE}rows = \"block\"\ncolumns = \"n\"\nvalue = \"median\"\nvariants = [\"c\"]\n"), 17, "table[0].rows", "no variant shown has the axis `block`"),
        ("columns by block in a CPU-only study", format!("{CPU_ONLY}{TABLE}rows = \"variant\"\ncolumns = \"block\"\nvalue = \"median\"\n"), 14, "table[0].columns", "no variant shown has the axis `block`"),
        ("a CPU variant's trend along block", format!("{TWO}{CLAIM}kind = \"rises\"\na = \"c\"\nquantity = \"median\"\nalong = \"block\"\n"), 21, "claim[0].along", "no variant shown has the axis `block`"),
        ("reference figure nan", format!("{TWO}{TABLE}{BY_N}{REFERENCE}values = {{ 1000 = nan }}\n"), 24, "table[0].reference[0].values", "is NaN"),
        ("reference figure inf", format!("{TWO}{TABLE}{BY_N}{REFERENCE}values = {{ 2000 = inf }}\n"), 24, "table[0].reference[0].values", "is inf"),
        ("reference figure negative", format!("{TWO}{TABLE}{BY_N}{REFERENCE}values = {{ 1000 = 2.0, 2000 = -3.5 }}\n"), 24, "table[0].reference[0].values", "`2000` is -3.5"),
        ("reference time of zero", format!("{TWO}{TABLE}{BY_N}{REFERENCE}values = {{ 1000 = 0.0 }}\n"), 24, "table[0].reference[0].values", "finite number above 0"),
        ("ESC in a reference label", format!("{TWO}{TABLE}{BY_N}[[table.reference]]\nlabel = \"a\\u001b[31mred\"\nsource = \"p\"\nunit = \"ms\"\nvalues = {{ 1000 = 1.0 }}\n"), 21, "table[0].reference[0].label", "control character \\u{1b}"),
        ("BEL in a reference source", format!("{TWO}{TABLE}{BY_N}[[table.reference]]\nlabel = \"a\"\nsource = \"p\\u0007\"\nunit = \"ms\"\nvalues = {{ 1000 = 1.0 }}\n"), 22, "table[0].reference[0].source", "control character \\u{7}"),
        ("ESC in a claim's source", format!("{TWO}[[claim]]\ntext = \"t\"\nsource = \"s\\u001b[2J\"\nkind = \"passes\"\na = \"c\"\n"), 17, "claim[0].source", "control character \\u{1b}"),
    ];
    let mut failures = Vec::new();
    for (what, text, line, key, words) in cases {
        let e = error(&text);
        if e.line != line || e.key.as_deref() != Some(key) || !e.message.contains(words) {
            failures.push(format!(
                "{what}: expected line {line} key {key} containing {words:?}, got\n{e}\n  key={:?}",
                e.key
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn tables_and_claims_that_can_hold_data_are_still_accepted() {
    let accepted = [
        // A peak table over all variants: the CUDA one fills its cells.
        format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"percent_of_peak\"\n"),
        // Rows by block with a CUDA variant shown.
        format!("{TWO}{TABLE}rows = \"block\"\ncolumns = \"n\"\nvalue = \"median\"\nvariants = [\"g\"]\n"),
        // An exact error of 0 is a figure.
        format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"max_rel_err\"\n[[table.reference]]\nlabel = \"l\"\nsource = \"p\"\nunit = \"1\"\nvalues = {{ 1000 = 0.0, 2000 = 1e-7 }}\n"),
        format!("{TWO}{CLAIM}kind = \"faster\"\na = \"g\"\nb = \"c\"\nselect = {{ n = [1000] }}\n"),
        format!("{TWO}{CLAIM}kind = \"passes\"\nvariants = [\"c\", \"g\"]\n"),
        format!("{TWO}{CLAIM}kind = \"falls\"\na = \"g\"\nquantity = \"median\"\nalong = \"block\"\n"),
    ];
    for text in accepted {
        if let Err(e) = parse(Path::new("ok.toml"), &text) {
            panic!("refused a table or claim that can hold data:\n{text}\n{e}");
        }
    }
}
