//! A mutation fuzzer over the manifest parser and planner: the shipped experiments and a few
//! small studies, mutated (bytes flipped, lines dropped or repeated, TOML tokens and extreme
//! numbers inserted), must be accepted or refused with an error, never panic.
//!
//! It runs for KBENCH_FUZZ_SECONDS (default 3; `KBENCH_FUZZ_SECONDS=600 cargo test --release
//! --test fuzz_manifest -- --nocapture` for ten minutes) and writes any input that panics to
//! target/fuzz-failures/.

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
    let mut seeds: Vec<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments"))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
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

#[test]
fn mutated_manifests_never_panic_the_parser_or_planner() {
    let seconds: u64 = std::env::var("KBENCH_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let seed: u64 = std::env::var("KBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let seeds = seeds();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut runs, mut accepted, mut planned_cases) = (0u64, 0u64, 0u64);
    let mut failures = Vec::new();
    // The panic message is what matters; keep the default hook from printing each one.
    std::panic::set_hook(Box::new(|_| {}));
    while Instant::now() < deadline {
        let text = mutate(&seeds[rng.random_range(0..seeds.len())], &mut rng);
        runs += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
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
        }));
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
    let _ = std::panic::take_hook();
    println!("fuzzed {runs} manifests in {seconds} s: {accepted} accepted ({planned_cases} cases planned), {} refused, {} panics", runs - accepted, failures.len());
    if !failures.is_empty() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
        std::fs::create_dir_all(&dir).unwrap();
        for (i, (text, _)) in failures.iter().enumerate() {
            std::fs::write(dir.join(format!("panic-{i}.toml")), text).unwrap();
        }
        panic!(
            "{} inputs panicked (saved in {}); first: {}\n{}",
            failures.len(),
            dir.display(),
            failures[0].1,
            failures[0].0
        );
    }
    assert!(
        accepted > 0 && accepted < runs,
        "the mutations should give both valid and invalid manifests"
    );
}
