//! A mutation fuzzer over the manifest parser and planner: the shipped experiments and a few
//! small studies, mutated (bytes flipped, lines dropped or repeated, TOML tokens and extreme
//! numbers inserted), must be accepted or refused with an error, never panic.
//!
//! A second, grammar-aware fuzzer writes `where` filters from the filter's grammar (deep
//! nesting, long chains, overflowing arithmetic, division by zero, non-ASCII and control
//! characters) into every kind of TOML string (escaped, literal, multi-line, with line-ending
//! backslashes), with titles in the same spirit: each must be planned or refused with an error
//! located inside the manifest (inside the filter's own lines when the filter is at fault) and
//! printable; a stack overflow would abort the test.
//!
//! Each runs for KBENCH_FUZZ_SECONDS (default 3; `KBENCH_FUZZ_SECONDS=600 cargo test --release
//! --test it fuzz_manifest:: -- --nocapture` for ten minutes) and writes any input that fails to
//! target/fuzz-failures/.

use crate::common;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TOKENS: &[&str] = &[
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    ",",
    ".",
    "\n",
    " ",
    "#",
    "-1",
    "0",
    "1.5",
    "1e309",
    "nan",
    "inf",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551616",
    "pow2",
    "start",
    "stop",
    "step",
    "zip",
    "where",
    "n",
    "block",
    "dtype",
    "f32",
    "i32",
    "f64",
    "\"f16\"",
    "and",
    "or",
    "not",
    "%",
    "/ 0",
    "* 9223372036854775807",
    "params",
    "scope",
    "\"program\"",
    "[[variant]]",
    "[grid]",
    "[measure]",
    "[study]",
    "[report]",
    "[compare]",
    "[accuracy]",
    "rel_tol",
    "baseline",
    "kernel",
    "impl",
    "backend",
    "\"cuda\"",
    "\"cpu\"",
    "==",
    ">=",
    "(",
    ")",
    "\"n >= block\"",
    "{ pow2 = [0, 62] }",
    "{ start = -5, stop = 5 }",
    "timeout_s",
    "min_effect",
    "\u{0}",
    "é",
];

fn seeds() -> Vec<String> {
    let pattern = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/**/*.toml");
    let mut seeds: Vec<String> = glob::glob(pattern.to_str().unwrap())
        .unwrap()
        .map(|path| std::fs::read_to_string(path.unwrap()).unwrap())
        .collect();
    seeds.push(
        "[study]\nname = \"f\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [1, 2, 3]\nblock = [32, 64, 128]\n\
         zip = [[\"n\", \"block\"]]\nwhere = \"n * block % 3 != 1 or dtype == 'f32'\"\n\
         [[variant]]\nname = \"v\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nparams = { block = [1024, 512, 256] }\n\
         [accuracy]\nrel_tol = { f32 = 1e-3 }\n[compare]\nfdr = 0.1\n"
            .to_string(),
    );
    seeds
}

fn mutate(text: &str, rng: &mut ChaCha8Rng) -> String {
    let mut s = text.to_string();
    for _ in 0..rng.random_range(1..=4) {
        let at = |s: &str, rng: &mut ChaCha8Rng| {
            let mut i = rng.random_range(0..=s.len());
            while !s.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        match rng.random_range(0..5) {
            0 => {
                let i = at(&s, rng);
                let c = rng.random_range(0x20u8..0x7f) as char;
                let end = s[i..].chars().next().map_or(i, |ch| i + ch.len_utf8());
                s.replace_range(i..end, &c.to_string());
            }
            1 | 2 => {
                let mut lines: Vec<&str> = s.lines().collect();
                if !lines.is_empty() {
                    let k = rng.random_range(0..lines.len());
                    if rng.random_bool(0.5) {
                        lines.remove(k);
                    } else {
                        lines.insert(k, lines[k]);
                    }
                }
                s = lines.join("\n");
            }
            _ => {
                let i = at(&s, rng);
                s.insert_str(i, TOKENS[rng.random_range(0..TOKENS.len())]);
            }
        }
    }
    s
}

/// How long each fuzzer runs: KBENCH_FUZZ_SECONDS (or KBENCH_FUZZ_SECS), else 3 s.
fn fuzz_seconds() -> u64 {
    ["KBENCH_FUZZ_SECONDS", "KBENCH_FUZZ_SECS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(3)
}

#[test]
fn mutated_manifests_never_panic_the_parser_or_planner() {
    let seconds = fuzz_seconds();
    let seed: u64 = std::env::var("KBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let seeds = seeds();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut accepted, mut planned_cases) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    while Instant::now() < deadline {
        let text = mutate(&seeds[rng.random_range(0..seeds.len())], &mut rng);
        runs += 1;
        let outcome = common::expecting_panics(|| {
            catch_unwind(AssertUnwindSafe(|| {
                match kbench::manifest::parse(Path::new("fuzz.toml"), &text) {
                    Ok(m) => match kbench::plan::expand(&m) {
                        Ok(cases) => Some(cases.len()),
                        // Rendering an error or a plan must not panic either.
                        Err(e) => {
                            let _ = e.to_string();
                            None
                        }
                    },
                    Err(e) => {
                        let _ = e.to_string();
                        None
                    }
                }
            }))
        });
        match outcome {
            Ok(Some(n)) => {
                accepted += 1;
                planned_cases += n as u64;
            }
            Ok(None) => {}
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
                failures.push((text, message.unwrap_or_default()));
            }
        }
    }
    println!("fuzzed {runs} manifests in {seconds} s: {accepted} accepted ({planned_cases} cases planned), {} refused, {} panics", runs - accepted, failures.len());
    save_and_fail(&failures, "panic", "inputs panicked");
    assert!(
        accepted > 0 && accepted < runs,
        "the mutations should give both valid and invalid manifests"
    );
}

// ---- The grammar-aware fuzzer ----

const AXES: &[&str] = &["n", "block", "dtype", "blok", "é", "N"];
const STRINGS: &[&str] = &[
    "f32", "i32", "é", "≥", "\\", "\"", "'", "a b", "", "\u{1}", "日本",
];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "1000",
    "9223372036854775807",
    "9223372036854775808",
    "4611686018427387904",
    "1.5",
    "0.0",
    "1_000",
];
const JUNK: &[&str] = &[
    "≥", "≠", "=", "&", "|", "\t", "\u{7}", "🚀", "((", ")", "not", "and", "",
];

fn operand(rng: &mut ChaCha8Rng, depth: usize) -> String {
    match rng.random_range(0..10) {
        0..=3 => AXES[rng.random_range(0..AXES.len())].to_string(),
        4..=5 => NUMBERS[rng.random_range(0..NUMBERS.len())].to_string(),
        6 => {
            let q = if rng.random_bool(0.5) { '\'' } else { '"' };
            format!("{q}{}{q}", STRINGS[rng.random_range(0..STRINGS.len())])
        }
        _ if depth > 0 => {
            let op = ["+", "-", "*", "/", "%"][rng.random_range(0..5)];
            format!(
                "{} {op} {}",
                operand(rng, depth - 1),
                operand(rng, depth - 1)
            )
        }
        _ => "n".to_string(),
    }
}

fn filter(rng: &mut ChaCha8Rng, depth: usize) -> String {
    let cmp = ["==", "!=", "<", "<=", ">", ">="];
    match rng.random_range(0..12) {
        0..=3 if depth > 0 => {
            let join = ["and", "or", "&&", "||"][rng.random_range(0..4)];
            format!(
                "{} {join} {}",
                filter(rng, depth - 1),
                filter(rng, depth - 1)
            )
        }
        4 if depth > 0 => format!("not {}", filter(rng, depth - 1)),
        5 if depth > 0 => format!("({})", filter(rng, depth - 1)),
        // Deep nesting and long chains, around the limit and far past it.
        6 => {
            let levels = [10, 150, 199, 200, 201, 500, 20_000][rng.random_range(0..7)];
            match rng.random_range(0..4) {
                0 => format!("{}n > 1{}", "(".repeat(levels), ")".repeat(levels)),
                1 => format!("{}n > 1", "not ".repeat(levels)),
                2 => vec!["n > 1"; levels].join(" and "),
                _ => format!("n{} > 1", " * n".repeat(levels)),
            }
        }
        7 => JUNK[rng.random_range(0..JUNK.len())].to_string() + &filter(rng, 0),
        _ => format!(
            "{} {} {}",
            operand(rng, 3),
            cmp[rng.random_range(0..cmp.len())],
            operand(rng, 3)
        ),
    }
}

/// `text` as a TOML string of a random kind; `None` when that kind cannot hold it.
fn toml_string(text: &str, rng: &mut ChaCha8Rng) -> Option<String> {
    let escaped = |rng: &mut ChaCha8Rng, multi_line: bool| {
        let mut out = String::new();
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\t' if rng.random_bool(0.5) => out.push_str("\\t"),
                ' ' if multi_line && rng.random_bool(0.05) => out.push_str(" \\\n   "),
                c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
                c if !c.is_ascii() && rng.random_bool(0.3) => {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
                c => out.push(c),
            }
        }
        out
    };
    let plain = !text.chars().any(|c| c.is_control() && c != '\t');
    let triple = "'".repeat(3);
    match rng.random_range(0..4) {
        0 => Some(format!("\"{}\"", escaped(rng, false))),
        1 => Some(format!("\"\"\"\n{}\"\"\"", escaped(rng, true))),
        2 if plain && !text.contains('\'') => Some(format!("'{text}'")),
        3 if plain && !text.contains(&triple) && !text.ends_with('\'') => {
            Some(format!("{triple}\n{text}{triple}"))
        }
        _ => None,
    }
}

fn generated_manifest(rng: &mut ChaCha8Rng) -> String {
    let depth = rng.random_range(0..6);
    let where_text = filter(rng, depth);
    let where_toml = loop {
        if let Some(s) = toml_string(&where_text, rng) {
            break s;
        }
    };
    let title = STRINGS[rng.random_range(0..STRINGS.len())];
    let title = toml_string(title, rng).unwrap_or_else(|| "\"t\"".into());
    let n = [
        "[0, 1, 2, 1000]",
        "[1, 3]",
        "{ pow2 = [0, 10] }",
        "[5, 4611686018427387904]",
        "{ start = 0, stop = 300 }",
    ][rng.random_range(0..5)];
    let prefix = "é ".repeat(rng.random_range(0..3));
    format!(
        "# {prefix}fuzz\n[study]\nname = \"fz\"\ntitle = {title}\nalgorithm = \"reduce\"\nseed = 1\n\
         [grid]\nn = {n}\nblock = [32, 1024]\ndtype = [\"i32\", \"f32\"]\nwhere = {where_toml}\n\
         [[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n"
    )
}

/// An error's kind: its message with the specifics (numbers, quoted names, points) taken out.
fn error_kind(message: &str) -> String {
    let mut kind = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '`' => {
                quoted = !quoted;
                if quoted {
                    kind.push_str("`_`");
                }
            }
            _ if quoted => {}
            c if c.is_ascii_digit() => {
                if !kind.ends_with('#') {
                    kind.push('#');
                }
            }
            c => kind.push(c),
        }
    }
    kind.split(" at the grid point")
        .next()
        .unwrap_or("")
        .to_string()
}

/// Checks one generated manifest: whether it was planned, or why the parser or planner
/// misbehaved.
fn check_generated(
    text: &str,
    kinds: &mut std::collections::BTreeSet<String>,
) -> Result<bool, String> {
    let e = match kbench::manifest::parse(Path::new("fuzz.toml"), text) {
        Ok(m) => match kbench::plan::expand(&m) {
            Ok(_) => return Ok(true),
            Err(e) => e,
        },
        Err(e) => e,
    };
    let rendered = e.to_string();
    kinds.insert(error_kind(&e.message));
    if rendered
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(format!("raw control character in the error:\n{rendered:?}"));
    }
    let lines: Vec<&str> = text.lines().collect();
    let Some(line) = lines.get(e.line - 1) else {
        return Err(format!(
            "error at line {} of {}:\n{rendered}",
            e.line,
            lines.len()
        ));
    };
    if e.column > line.chars().count() + 1 {
        return Err(format!(
            "error at column {} of a {}-character line:\n{rendered}",
            e.column,
            line.chars().count()
        ));
    }
    if e.key.as_deref() == Some("grid.where") {
        // The filter's own lines: from `where =` to the line before `[[variant]]`.
        let first = lines
            .iter()
            .position(|l| l.starts_with("where = "))
            .unwrap()
            + 1;
        let last = lines.iter().position(|l| *l == "[[variant]]").unwrap();
        if !(first..=last).contains(&e.line) {
            return Err(format!(
                "a filter error outside the filter (lines {first}..{last}):\n{rendered}"
            ));
        }
    }
    Ok(false)
}

#[test]
fn generated_filters_in_every_kind_of_toml_string_are_planned_or_refused_in_place() {
    let seconds = fuzz_seconds();
    let seed: u64 = std::env::var("KBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xf11e2);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut accepted) = (0u64, 0u64);
    let mut kinds = std::collections::BTreeSet::new();
    let mut failures: Vec<(String, String)> = Vec::new();
    while Instant::now() < deadline && failures.len() < 20 {
        let text = generated_manifest(&mut rng);
        runs += 1;
        match catch_unwind(AssertUnwindSafe(|| check_generated(&text, &mut kinds))) {
            Ok(Ok(true)) => accepted += 1,
            Ok(Ok(false)) => {}
            Ok(Err(why)) => failures.push((text, why)),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                failures.push((text, format!("panic: {message}")));
            }
        }
    }
    println!(
        "generated {runs} manifests in {seconds} s: {accepted} planned, {} refused, {} distinct error kinds, {} failures",
        runs - accepted,
        kinds.len(),
        failures.len()
    );
    if std::env::var_os("KBENCH_FUZZ_KINDS").is_some() {
        for kind in &kinds {
            println!("  {kind}");
        }
    }
    save_and_fail(&failures, "generated", "generated manifests misbehaved");
    assert!(
        accepted > 0 && accepted < runs,
        "the generator should give both valid and invalid manifests"
    );
}

/// Saves each failing input (text, message) as target/fuzz-failures/<prefix>-<i>.toml and fails
/// with the first one; does nothing when there is none.
fn save_and_fail(failures: &[(String, String)], prefix: &str, what: &str) {
    if failures.is_empty() {
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, (text, _)) in failures.iter().enumerate() {
        std::fs::write(dir.join(format!("{prefix}-{i}.toml")), text).unwrap();
    }
    panic!(
        "{} {what} (saved in {}); first: {}\n{}",
        failures.len(),
        dir.display(),
        failures[0].1,
        failures[0].0
    );
}
