//! A grammar-aware fuzzer over the inputs besides the manifest's core (tests/fuzz_manifest.rs
//! has that): Matrix Market files and generator names, declared tables and claims, mock device
//! files, results files (read, reported, compared, judged by `history`, resumed), custom
//! studies and their expressions, `.npy` headers and tune journals. Each surface has a structured generator (the format's own pieces:
//! banners, size lines, entries; table and claim keys; mock sections; a results file's JSON
//! nodes) that writes hostile values into valid seeds, plus byte mutations of the seeds.
//!
//! Every input is read by the library reader on a thread of its own with a time limit
//! (`PER_INPUT`), so a panic (caught) and a hang (the thread outlives its limit) are both
//! counted, never lost; one input in `CLI_EVERY` also goes through the `kbench` binary
//! (`check`, `report`, `compare`, a mock `run`), where a panic is exit 101 and a crash a
//! signal. The test fails on any panic, crash or hang, and writes the input to
//! target/fuzz-failures/.
//!
//! Each surface runs for KBENCH_FUZZ_SECS (or KBENCH_FUZZ_SECONDS; default 3):
//! `KBENCH_FUZZ_SECS=600 cargo test --test it fuzz_inputs:: -- --nocapture --test-threads 4` for ten
//! minutes (the surfaces at once), which prints the inputs tried, accepted, refused, and
//! the panics, crashes and hangs.

use crate::common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// The most one input may take in the library reader, or in the binary.
const PER_INPUT: Duration = Duration::from_secs(20);
/// One input in this many also goes through the binary.
const CLI_EVERY: u64 = 25;

fn fuzz_seconds() -> u64 {
    ["KBENCH_FUZZ_SECS", "KBENCH_FUZZ_SECONDS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(3)
}

fn rng_for(surface: u64) -> ChaCha8Rng {
    let seed: u64 = std::env::var("KBENCH_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed);
    ChaCha8Rng::seed_from_u64(seed ^ surface)
}

fn pick<'a, T: ?Sized>(rng: &mut ChaCha8Rng, items: &[&'a T]) -> &'a T {
    items[rng.random_range(0..items.len())]
}

/// What a surface's fuzzing found.
#[derive(Default)]
struct Tally {
    tried: u64,
    accepted: u64,
    refused: u64,
    cli_runs: u64,
    /// (input, what happened): panics, crashes (a signal or exit 101) and hangs.
    failures: Vec<(String, String)>,
    hangs: u64,
    crashes: u64,
    panics: u64,
}

impl Tally {
    /// Runs `read` on its own thread within PER_INPUT: Ok(true) accepted, Ok(false) refused
    /// (its message rendered), a panic or a hang recorded against `input`.
    fn library(&mut self, input: &str, read: impl FnOnce() -> Result<(), String> + Send + 'static) {
        self.tried += 1;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let outcome = common::expecting_panics(|| catch_unwind(AssertUnwindSafe(read)));
            let _ = tx.send(outcome.map_err(|panic| {
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default()
            }));
        });
        match rx.recv_timeout(PER_INPUT) {
            Ok(Ok(Ok(()))) => self.accepted += 1,
            Ok(Ok(Err(message))) if message.trim().is_empty() => {
                self.failures
                    .push((input.to_string(), "a refusal with no message".into()));
            }
            Ok(Ok(Err(_))) => self.refused += 1,
            Ok(Err(panic)) => {
                self.panics += 1;
                self.failures
                    .push((input.to_string(), format!("panic: {panic}")));
            }
            Err(_) => {
                self.hangs += 1;
                self.failures
                    .push((input.to_string(), format!("hang: over {PER_INPUT:?}")));
            }
        }
    }

    /// Runs the binary within PER_INPUT: any exit code but 101 is an answer; 101 (a panic), a
    /// signal (a crash) or the time limit is a failure recorded against `input`.
    fn binary(&mut self, input: &str, command: Command) {
        self.binary_within(input, command, PER_INPUT);
    }

    /// `binary` with its own time limit, for a run whose cases may rightly wait out their
    /// time limits (a mock file that scripts `hang`).
    fn binary_within(&mut self, input: &str, mut command: Command, limit: Duration) {
        self.cli_runs += 1;
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kbench starts");
        // Read as it comes: an error quoting a long input fills a pipe left unread, and the
        // binary would wait on it for ever.
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let stderr = std::thread::spawn(move || {
            use std::io::Read;
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let stderr = stderr.join().unwrap_or_default();
        let what = match status {
            None => {
                self.hangs += 1;
                format!("hang: {command:?} over {limit:?}")
            }
            Some(s) if s.code() == Some(101) || s.code().is_none() => {
                self.crashes += 1;
                format!("crash: {command:?} ended with {s}:\n{stderr}")
            }
            Some(_) => return,
        };
        self.failures.push((input.to_string(), what));
    }

    /// Prints the figures and fails on any panic, crash or hang, saving the inputs.
    fn finish(self, surface: &str, seconds: u64) {
        println!(
            "fuzzed {surface} for {seconds} s: {} inputs tried ({} through the binary), {} \
             accepted, {} refused, {} panics, {} crashes, {} hangs",
            self.tried,
            self.cli_runs,
            self.accepted,
            self.refused,
            self.panics,
            self.crashes,
            self.hangs
        );
        if !self.failures.is_empty() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/fuzz-failures");
            std::fs::create_dir_all(&dir).unwrap();
            for (k, (input, what)) in self.failures.iter().enumerate() {
                let path = dir.join(format!("{surface}-{k}.txt"));
                std::fs::write(&path, format!("{what}\n----\n{input}")).unwrap();
            }
            panic!(
                "{surface}: {} inputs panicked, crashed or hung (saved in {}); the first: {}",
                self.failures.len(),
                dir.display(),
                self.failures[0].1
            );
        }
        assert!(
            self.tried > 0 && self.refused > 0,
            "{surface}: the generator gives only one kind"
        );
    }
}

/// Byte-level mutations: flips, deletions, repeats, insertions of `tokens`.
fn mutate_bytes(text: &str, tokens: &[&str], rng: &mut ChaCha8Rng) -> String {
    let mut s = text.to_string();
    for _ in 0..rng.random_range(1..=4) {
        let mut i = rng.random_range(0..=s.len());
        while !s.is_char_boundary(i) {
            i -= 1;
        }
        match rng.random_range(0..4) {
            0 => {
                let end = s[i..].chars().next().map_or(i, |c| i + c.len_utf8());
                let c = rng.random_range(0x20u8..0x7f) as char;
                s.replace_range(i..end, &c.to_string());
            }
            1 => {
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
            2 => {
                let end = (i + rng.random_range(0..8)).min(s.len());
                let mut end = end;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s.replace_range(i..end.max(i), "");
            }
            _ => s.insert_str(i, pick(rng, tokens)),
        }
    }
    s
}

fn kbench() -> Command {
    let mut cmd = Command::new(common::kbench_exe());
    cmd.env_remove("KBENCH_MOCK_GPU");
    cmd
}

// ---- Matrix Market files and generators ----

const NUMBERS: &[&str] = &[
    "0",
    "1",
    "2",
    "3",
    "-1",
    "4.0",
    "-0.0",
    "1e-50",
    "1e308",
    "1e309",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "2147483647",
    "2147483648",
    "4294967296",
    "18446744073709551616",
    "1.5",
    "0x10",
    "1e",
    "+3",
    "٣",
    "",
];

fn banner(rng: &mut ChaCha8Rng) -> String {
    let start = pick(
        rng,
        &[
            "%%MatrixMarket",
            "%%matrixmarket",
            "%MatrixMarket",
            "\u{feff}%%MatrixMarket",
            "",
        ],
    );
    let object = pick(rng, &["matrix", "vector", ""]);
    let format = pick(rng, &["coordinate", "array", "Coordinate", ""]);
    let field = pick(
        rng,
        &["real", "integer", "pattern", "complex", "double", ""],
    );
    let symmetry = pick(
        rng,
        &["general", "symmetric", "skew-symmetric", "hermitian", ""],
    );
    let sep = pick(rng, &[" ", "\t", "  "]);
    [start, object, format, field, symmetry].join(sep)
}

fn matrix_market(rng: &mut ChaCha8Rng) -> String {
    let mut lines = Vec::new();
    if rng.random_bool(0.9) {
        lines.push(banner(rng));
    }
    for _ in 0..rng.random_range(0..3) {
        lines.push(pick(rng, &["%", "% comment", "", "  % indented", "%%"]).to_string());
    }
    let n: u64 = *pick(rng, &[&0u64, &1, &2, &3, &5, &2147483647, &2147483648]);
    let size_ok = rng.random_bool(0.7);
    let entries = rng.random_range(0..12u64);
    if rng.random_bool(0.95) {
        lines.push(if size_ok {
            format!("{n} {n} {entries}")
        } else {
            (0..rng.random_range(0..5))
                .map(|_| pick(rng, NUMBERS))
                .collect::<Vec<_>>()
                .join(" ")
        });
    }
    for _ in 0..entries + rng.random_range(0..2) {
        let index = |rng: &mut ChaCha8Rng| match rng.random_range(0..4) {
            0 => pick(rng, NUMBERS).to_string(),
            _ => rng.random_range(1..=n.clamp(1, 6)).to_string(),
        };
        let fields: Vec<String> = (0..rng.random_range(1..=4))
            .map(|k| match k {
                0 | 1 => index(rng),
                _ => pick(rng, NUMBERS).to_string(),
            })
            .collect();
        lines.push(fields.join(pick(rng, &[" ", "\t", "  "])));
        if rng.random_bool(0.05) {
            lines.push(String::new());
        }
    }
    let end = pick(rng, &["\n", "\r\n", "\n"]);
    let mut text = lines.join(end);
    if rng.random_bool(0.8) {
        text.push_str(end);
    }
    text
}

fn generator_name(rng: &mut ChaCha8Rng) -> String {
    let name = pick(rng, &["hpcg", "laplace2d", "random", "hpgc", "Random"]);
    let size = |rng: &mut ChaCha8Rng| {
        pick(
            rng,
            &[
                "0",
                "1",
                "2",
                "7",
                "40",
                "1300",
                "2000",
                "50000",
                "3000000000",
                "18446744073709551616",
                "-3",
                "",
            ],
        )
        .to_string()
    };
    let sizes: Vec<String> = (0..rng.random_range(1..=4)).map(|_| size(rng)).collect();
    format!("{name}:{}", sizes.join("x"))
}

#[test]
fn fuzz_matrix_market_files_and_generators() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(1);
    let datasets = Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets");
    let seeds: Vec<String> = std::fs::read_dir(&datasets)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "mtx"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let k = tally.tried;
        if rng.random_range(0..10) == 0 {
            let name = generator_name(&mut rng);
            let input = name.clone();
            tally.library(&input, move || {
                let source = kbench::algos::csr::MatrixSource::parse(&name)?;
                source.check_generated_size()?;
                // Small ones are built too; the size check keeps this cheap.
                if source.shape()?.1 < 200_000 {
                    source.load(1)?;
                }
                Ok(())
            });
            continue;
        }
        let text = match rng.random_range(0..3) {
            0 => mutate_bytes(
                pick(
                    &mut rng,
                    &seeds.iter().map(String::as_str).collect::<Vec<_>>(),
                ),
                &[
                    "\u{feff}",
                    "%",
                    "\n",
                    " ",
                    "0",
                    "-1",
                    "nan",
                    "1e309",
                    "\t",
                    "99999999999999999999",
                ],
                &mut rng,
            ),
            _ => matrix_market(&mut rng),
        };
        let path = dir.path().join(format!("m{k}.mtx"));
        std::fs::write(&path, &text).unwrap();
        let read = path.clone();
        tally.library(&text, move || {
            kbench::algos::csr::check_file(&read)?;
            kbench::algos::csr::MatrixSource::File(read)
                .shape()
                .map(|_| ())
        });
        if k % CLI_EVERY == 0 {
            let manifest = dir.path().join(format!("m{k}.toml"));
            std::fs::write(
                &manifest,
                format!(
                    "[study]\nname = \"m\"\nalgorithm = \"symgs\"\nseed = 1\n[grid]\nmatrix = [\"{}\"]\n\
                     [[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n",
                    path.display()
                ),
            )
            .unwrap();
            let mut cmd = kbench();
            cmd.arg("check").arg(&manifest);
            tally.binary(&text, cmd);
        }
        let _ = std::fs::remove_file(&path);
    }
    tally.finish("matrix-market", seconds);
}

// ---- Tables and claims ----

/// A study with a CPU and two CUDA variants over n and dtype, at one block size.
const STUDY: &str = "[study]\nname = \"fz\"\nalgorithm = \"reduce\"\nseed = 1\n\
[grid]\nn = [1000, 2000]\ndtype = [\"f32\", \"f64\"]\nblock = [256]\n\
[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
[[variant]]\nname = \"h\"\nbackend = \"cuda\"\nkernel = \"reduce_naive\"\n\
[measure]\nwarmup = 0\nmin_samples = 2\nmax_samples = 2\nmax_time_s = 0.01\n";

/// Valid names appear several times: most pieces are valid, so many tables and claims parse
/// and reach the report, and one bad piece in a few is what is refused.
const VARIANTS: &[&str] = &[
    "\"c\"", "\"g\"", "\"h\"", "\"g\"", "\"h\"", "\"c\"", "\"g\"", "\"h\"", "\"x\"", "\"\"",
];
const DIMENSIONS: &[&str] = &[
    "\"variant\"",
    "\"n\"",
    "\"dtype\"",
    "\"block\"",
    "\"variant\"",
    "\"n\"",
    "\"dtype\"",
    "\"block\"",
    "\"size\"",
    "\"\"",
];
const QUANTITIES: &[&str] = &[
    "\"median\"",
    "\"mean\"",
    "\"min\"",
    "\"gbytes_per_s\"",
    "\"gflops_per_s\"",
    "\"percent_of_peak\"",
    "\"speedup\"",
    "\"share_within_tolerance\"",
    "\"max_rel_err\"",
    "\"speed\"",
];
const TEXTS: &[&str] = &[
    "\"plain\"",
    "\"plain\"",
    "\"plain\"",
    "\"plain\"",
    "\"plain\"",
    "\"plain\"",
    "\"plain\"",
    "\"\"",
    "\"esc \\u001b[31m\"",
    "\"bell \\u0007\"",
    "\"tab\\t\"",
    "\"日本\"",
    "\"new\\nline\"",
    "'literal'",
    "\"\\u009b\"",
];
const FIGURES: &[&str] = &[
    "1.0", "2.5", "0.5", "1.0", "2.5", "0.5", "0.0", "-0.0", "-3.5", "nan", "inf", "-inf", "1e308",
    "1e-320", "5e-324", "2", "\"1\"",
];

fn list(rng: &mut ChaCha8Rng, items: &[&str]) -> String {
    let n = rng.random_range(0..4);
    let chosen: Vec<&str> = (0..n).map(|_| pick(rng, items)).collect();
    format!("[{}]", chosen.join(", "))
}

fn select(rng: &mut ChaCha8Rng) -> String {
    let axis = pick(rng, &["n", "dtype", "dtype", "block", "n", "dtype", "size"]);
    let values = match axis {
        "dtype" => &["\"f32\"", "\"f64\"", "\"i32\""][..],
        "block" => &["128", "256", "64"][..],
        _ => &["1000", "2000", "3000", "-1"][..],
    };
    let value = if rng.random_bool(0.5) {
        list(rng, values)
    } else {
        pick(rng, values).to_string()
    };
    format!("select = {{ {axis} = {value} }}\n")
}

fn table(rng: &mut ChaCha8Rng) -> String {
    let mut t = format!("[[table]]\ntitle = {}\n", pick(rng, TEXTS));
    t += &format!(
        "rows = {}\ncolumns = {}\nvalue = {}\n",
        pick(rng, DIMENSIONS),
        pick(rng, DIMENSIONS),
        pick(rng, QUANTITIES)
    );
    if rng.random_bool(0.5) {
        t += &format!("variants = {}\n", list(rng, VARIANTS));
    }
    if rng.random_bool(0.3) {
        t += &format!("baseline = {}\n", pick(rng, VARIANTS));
    }
    if rng.random_bool(0.6) {
        t += &select(rng);
    }
    for _ in 0..rng.random_range(0..3) {
        let columns = pick(rng, &["1000", "2000", "g", "c", "f32", "9"]);
        t += &format!(
            "[[table.reference]]\nlabel = {}\nsource = {}\nunit = {}\nvalues = {{ {columns} = {} }}\n",
            pick(rng, TEXTS), pick(rng, TEXTS),
            pick(rng, &["\"ms\"", "\"s\"", "\"GB/s\"", "\"%\"", "\"x\"", "\"1\"", "\"furlongs\""]),
            pick(rng, FIGURES)
        );
    }
    t
}

fn claim(rng: &mut ChaCha8Rng) -> String {
    let kind = pick(
        rng,
        &[
            "\"faster\"",
            "\"reaches_peak\"",
            "\"passes\"",
            "\"rises\"",
            "\"falls\"",
            "\"better\"",
        ],
    );
    let mut c = format!(
        "[[claim]]\ntext = {}\nsource = {}\nkind = {kind}\n",
        pick(rng, TEXTS),
        pick(rng, TEXTS)
    );
    for (key, p) in [("a", 0.9), ("b", 0.6)] {
        if rng.random_bool(p) {
            c += &format!("{key} = {}\n", pick(rng, VARIANTS));
        }
    }
    if rng.random_bool(0.2) {
        c += &format!("variants = {}\n", list(rng, VARIANTS));
    }
    if rng.random_bool(0.3) {
        c += &format!("by = {}\n", pick(rng, FIGURES));
    }
    if rng.random_bool(0.3) {
        c += &format!("share = {}\n", pick(rng, FIGURES));
    }
    if rng.random_bool(0.4) {
        c += &format!(
            "quantity = {}\nalong = {}\n",
            pick(rng, QUANTITIES),
            pick(rng, DIMENSIONS)
        );
    }
    if rng.random_bool(0.5) {
        c += &select(rng);
    }
    c
}

/// A mock GPU for the CUDA variants: figures for every quantity without a GPU.
const MOCK: &str =
    "[device]\nname = \"fuzz\"\npeak_gbytes_per_s = 3000.0\ncopy_gbytes_per_s = 2500.0\n\
[timing]\nseed = 1\nlaunch_s = 4e-6\ngbytes_per_s = 1500.0\njitter = 0.02\n";

/// Runs `manifest` (in `dir`) on the mock device: its results file.
fn run_on_mock(dir: &Path, name: &str, manifest: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, manifest).unwrap();
    std::fs::write(dir.join("mock.toml"), MOCK).unwrap();
    let out = dir.join("out");
    let status = kbench()
        .env("KBENCH_MOCK_GPU", dir.join("mock.toml"))
        .arg("run")
        .arg(&path)
        .arg("--out-dir")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.code().is_some_and(|c| c <= 1), "{status}");
    std::fs::read_dir(out.join(name))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap()
}

#[test]
fn fuzz_tables_and_claims() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(2);
    let dir = tempfile::tempdir().unwrap();
    let results = run_on_mock(dir.path(), "fz", STUDY);
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let mut text = STUDY.to_string();
        for _ in 0..rng.random_range(1..=3) {
            text += &if rng.random_bool(0.5) {
                table(&mut rng)
            } else {
                claim(&mut rng)
            };
        }
        if rng.random_range(0..8) == 0 {
            text = mutate_bytes(
                &text,
                &["[[table]]", "[[claim]]", "=", "\"", "[]", "nan", "\u{1b}"],
                &mut rng,
            );
        }
        let input = text.clone();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = accepted.clone();
        tally.library(&input, move || {
            let m =
                kbench::manifest::parse(Path::new("fz.toml"), &text).map_err(|e| e.to_string())?;
            flag.store(true, std::sync::atomic::Ordering::Relaxed);
            kbench::plan::expand(&m)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        // Accepted tables and claims are drawn and judged against a real run's results.
        if accepted.load(std::sync::atomic::Ordering::Relaxed) && tally.tried % 4 == 0
            || tally.tried % CLI_EVERY == 0
        {
            let manifest = dir.path().join("fuzzed.toml");
            std::fs::write(&manifest, &input).unwrap();
            let mut cmd = kbench();
            cmd.arg("report")
                .arg(&results)
                .arg("--manifest")
                .arg(&manifest);
            tally.binary(&input, cmd);
        }
    }
    tally.finish("tables-and-claims", seconds);
}

// ---- Mock device files ----

fn mock_value(rng: &mut ChaCha8Rng) -> String {
    pick(
        rng,
        &[
            "1.0",
            "0.0",
            "-1.0",
            "nan",
            "inf",
            "1e308",
            "1e-320",
            "3000.0",
            "4e-6",
            "0.02",
            "2.0",
            "18446744073709551615",
            "-1",
            "\"fast\"",
            "true",
            "[]",
            "{}",
        ],
    )
    .to_string()
}

fn mock_file(rng: &mut ChaCha8Rng) -> String {
    let mut text = String::new();
    if rng.random_bool(0.8) {
        text += "[device]\n";
        for key in [
            "name",
            "compute_capability",
            "sm_count",
            "memory_gib",
            "peak_gbytes_per_s",
            "copy_gbytes_per_s",
            "host_link_gbytes_per_s",
            "profiler",
            "colour",
        ] {
            if rng.random_bool(0.3) {
                let value = match key {
                    "name" | "compute_capability" => pick(rng, TEXTS).to_string(),
                    _ => mock_value(rng),
                };
                text += &format!("{key} = {value}\n");
            }
        }
    }
    let model = |rng: &mut ChaCha8Rng, text: &mut String| {
        for key in ["seed", "launch_s", "gbytes_per_s", "gflops_per_s", "jitter"] {
            if rng.random_bool(0.5) {
                *text += &format!("{key} = {}\n", mock_value(rng));
            }
        }
    };
    if rng.random_bool(0.8) {
        text += "[timing]\n";
        model(rng, &mut text);
        if rng.random_bool(0.4) {
            text += &format!(
                "[timing.variant.{}]\n",
                pick(rng, &["g", "h", "c", "nobody", "\"a b\""])
            );
            model(rng, &mut text);
        }
    }
    for _ in 0..rng.random_range(0..3) {
        text += "[[event]]\n";
        if rng.random_bool(0.6) {
            text += &format!("variant = {}\n", pick(rng, VARIANTS));
        }
        if rng.random_bool(0.6) {
            let value = pick(
                rng,
                &["1000", "[1000, 2000]", "\"f32\"", "[]", "-1", "1e308", "{}"],
            );
            text += &format!(
                "params = {{ {} = {value} }}\n",
                pick(rng, &["n", "dtype", "block", "size"])
            );
        }
        match rng.random_range(0..3) {
            0 => text += &format!("skip = {}\n", pick(rng, TEXTS)),
            1 => {
                text += &format!(
                    "fault = {}\n",
                    pick(
                        rng,
                        &[
                            "\"kernel fault\"",
                            "\"compile error\"",
                            "\"out of memory\"",
                            "\"wrong answer\"",
                            "\"hang\"",
                            "\"melt\""
                        ]
                    )
                )
            }
            _ => {}
        }
    }
    text
}

/// A study the mock runs fast: two CUDA variants at one size. A case the mock file scripts to
/// `hang` is killed 10 s past its 2 s time limit, as designed: `MOCK_RUN_LIMIT` allows both
/// cases that, and a run past it is a hang of kbench's own.
const MOCK_STUDY: &str = "[study]\nname = \"mk\"\nalgorithm = \"reduce\"\nseed = 1\n\
[grid]\nn = [1000]\n\
[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
[[variant]]\nname = \"h\"\nbackend = \"cuda\"\nkernel = \"reduce_naive\"\n\
[measure]\nwarmup = 0\nmin_samples = 2\nmax_samples = 2\nmax_time_s = 0.01\ntimeout_s = 2\n";

/// Two cases of 2 s + 10 s before the kill, and the workers' starts on a loaded machine.
const MOCK_RUN_LIMIT: Duration = Duration::from_secs(60);

#[test]
fn fuzz_mock_device_files() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(3);
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("mk.toml");
    std::fs::write(&study, MOCK_STUDY).unwrap();
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let text = match rng.random_range(0..4) {
            0 => mutate_bytes(
                MOCK,
                &["[[event]]", "=", "nan", "-", "\"", "\u{0}", "[timing]"],
                &mut rng,
            ),
            _ => mock_file(&mut rng),
        };
        let path = dir.path().join("mock.toml");
        let input = text.clone();
        let parsed = path.clone();
        tally.library(&input, move || {
            kbench::run::executor::mock::MockSpec::parse(&parsed, &text)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if tally.tried % CLI_EVERY == 0 {
            std::fs::write(&path, &input).unwrap();
            let mut cmd = kbench();
            cmd.env("KBENCH_MOCK_GPU", &path)
                .arg("run")
                .arg(&study)
                .arg("--out-dir")
                .arg(dir.path().join("out"));
            tally.binary_within(&input, cmd, MOCK_RUN_LIMIT);
        }
    }
    tally.finish("mock-device", seconds);
}

// ---- Results files ----

/// A JSON value a results file should not hold there.
fn hostile_json(rng: &mut ChaCha8Rng) -> Value {
    match rng.random_range(0..12) {
        0 => Value::from(-1.0),
        1 => Value::from(0.0),
        2 => Value::from(1e-310),
        3 => Value::from(1e308),
        4 => Value::from(u64::MAX),
        5 => Value::from(i64::MIN),
        6 => Value::from("esc \u{1b}[2J"),
        7 => Value::from(""),
        8 => Value::Null,
        9 => Value::from(vec![Value::from(1.0); 3]),
        10 => serde_json::json!({"x": 1}),
        _ => Value::from(true),
    }
}

/// Replaces, deletes or duplicates one node of `node`, walking down at most `depth` levels at
/// random.
fn mutate_json(node: &mut Value, rng: &mut ChaCha8Rng, depth: usize) {
    if depth == 0 {
        *node = hostile_json(rng);
        return;
    }
    match node {
        Value::Object(map) if !map.is_empty() => {
            let key = map
                .keys()
                .nth(rng.random_range(0..map.len()))
                .unwrap()
                .clone();
            if rng.random_range(0..6) == 0 {
                map.remove(&key);
                return;
            }
            mutate_json(map.get_mut(&key).unwrap(), rng, depth - 1);
        }
        Value::Array(items) if !items.is_empty() => {
            let k = rng.random_range(0..items.len());
            if rng.random_range(0..6) == 0 {
                let copy = items[k].clone();
                items.push(copy);
                return;
            }
            mutate_json(&mut items[k], rng, depth - 1);
        }
        _ => *node = hostile_json(rng),
    }
}

#[test]
fn fuzz_results_files() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(4);
    let dir = tempfile::tempdir().unwrap();
    let good = run_on_mock(dir.path(), "fz", STUDY);
    let seed_text = std::fs::read_to_string(&good).unwrap();
    let seed: Value = serde_json::from_str(&seed_text).unwrap();
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let text = if rng.random_range(0..5) == 0 {
            mutate_bytes(
                &seed_text,
                &["-", "0", "e308", "\"", ",", "null", "[", "\\u001b"],
                &mut rng,
            )
        } else {
            let mut doc = seed.clone();
            for _ in 0..rng.random_range(1..=3) {
                let depth = rng.random_range(1..8);
                mutate_json(&mut doc, &mut rng, depth);
            }
            serde_json::to_string(&doc).unwrap()
        };
        let path = dir.path().join(format!("r{}.json", tally.tried));
        std::fs::write(&path, &text).unwrap();
        let read = path.clone();
        tally.library(&text, move || {
            kbench::results::load_results(&read)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        });
        if tally.tried % CLI_EVERY == 0 {
            let mut cmd = kbench();
            cmd.arg("report").arg(&path);
            tally.binary(&text, cmd);
            let mut cmd = kbench();
            cmd.arg("compare").arg(&good).arg(&path);
            tally.binary(&text, cmd);
            let mut cmd = kbench();
            cmd.arg("history").arg(&good).arg(&path);
            tally.binary(&text, cmd);
            // A resume of an edited file runs at most its missing cases, on the mock.
            let mut cmd = kbench();
            cmd.env("KBENCH_MOCK_GPU", dir.path().join("mock.toml"))
                .args(["run", "--resume"])
                .arg(&path);
            tally.binary(&text, cmd);
        }
        let _ = std::fs::remove_file(&path);
    }
    tally.finish("results-files", seconds);
}

// ---- Custom manifests and their expressions ----

/// Expressions from the grammar's hostile corners: deep nesting, long chains, overflowing and
/// dividing arithmetic, unknown names, control characters.
fn hostile_expression(rng: &mut ChaCha8Rng) -> String {
    match rng.random_range(0..8) {
        0 => {
            let depth = rng.random_range(100..20_000);
            format!("{}n{}", "(".repeat(depth), ")".repeat(depth))
        }
        1 => vec!["n"; rng.random_range(100..40_000)].join(" + "),
        2 => "9223372036854775807 * 9223372036854775807".into(),
        3 => "n / 0 + n % 0".into(),
        4 => "ceil_div(n, 0)".into(),
        5 => "min(n) + max() + sizeof(nothing)".into(),
        6 => "n \u{1b}[2J".into(),
        _ => pick(rng, NUMBERS).to_string(),
    }
}

/// The shipped custom studies (examples/*/*.toml), each copied with its folder so its sources,
/// `.npy` files and scripts resolve, then mutated: bytes, and expressions from the grammar in
/// place of a quoted value. Each must be checked and planned, or refused with an error.
#[test]
fn fuzz_custom_manifests_and_expressions() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(5);
    let work = tempfile::tempdir().unwrap();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seeds: Vec<(PathBuf, String)> = Vec::new();
    for entry in std::fs::read_dir(&examples).unwrap() {
        let folder = entry.unwrap().path();
        let copy = work.path().join(folder.file_name().unwrap());
        std::fs::create_dir(&copy).unwrap();
        for file in std::fs::read_dir(&folder).unwrap() {
            let file = file.unwrap().path();
            std::fs::copy(&file, copy.join(file.file_name().unwrap())).unwrap();
            if file.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&file).unwrap();
                if text.contains("algorithm = \"custom\"") {
                    seeds.push((copy.join(file.file_name().unwrap()), text));
                }
            }
        }
    }
    assert!(seeds.len() >= 5, "{} custom examples", seeds.len());
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let (path, seed) = &seeds[rng.random_range(0..seeds.len())];
        let text = if rng.random_range(0..2) == 0 {
            mutate_bytes(
                seed,
                &[
                    "\"", "=", "[", "]", "{", "}", "n", "-1", "1e308", "nan", "(", ")", "*",
                ],
                &mut rng,
            )
        } else {
            // A quoted value replaced by an expression (lengths, grids, bytes, args, defines).
            let quotes: Vec<usize> = seed.match_indices("= \"").map(|(i, _)| i + 3).collect();
            let start = quotes[rng.random_range(0..quotes.len())];
            let end = start + seed[start..].find('"').unwrap_or(0);
            format!(
                "{}{}{}",
                &seed[..start],
                hostile_expression(&mut rng),
                &seed[end..]
            )
        };
        let (read_path, read_text) = (path.clone(), text.clone());
        tally.library(&text, move || {
            let manifest =
                kbench::manifest::parse(&read_path, &read_text).map_err(|e| e.to_string())?;
            kbench::plan::expand(&manifest)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        if tally.tried % CLI_EVERY == 0 {
            let mutated = path.with_file_name("fuzzed.toml");
            std::fs::write(&mutated, &text).unwrap();
            let mut cmd = kbench();
            cmd.arg("check").arg(&mutated);
            tally.binary(&text, cmd);
        }
    }
    tally.finish("custom-manifests", seconds);
}

// ---- .npy headers ----

/// A `.npy` file of `count` values of NumPy type `descr` (version 1.0 header, padded to 64).
fn npy_file(descr: &str, count: usize, element_bytes: usize) -> Vec<u8> {
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({count},), }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend((0..count * element_bytes).map(|i| (i % 7) as u8));
    bytes
}

/// `.npy` files of every type kbench reads, their headers mutated (descr, shape, order, the
/// header length, bytes): each is read as the buffer type it claims, or refused with an error.
#[test]
fn fuzz_npy_headers() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(6);
    let dir = tempfile::tempdir().unwrap();
    let types: &[(&str, usize)] = &[
        ("<f4", 4),
        ("<f8", 8),
        ("<i4", 4),
        ("<u1", 1),
        ("<f2", 2),
        ("<u2", 2),
        ("|i1", 1),
        ("<i8", 8),
    ];
    let shapes = [
        "(7,)",
        "(0,)",
        "()",
        "(3, 5)",
        "(18446744073709551615, 2)",
        "(-1,)",
        "(4294967296, 4294967296)",
        "(1,",
        "('a',)",
    ];
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let (descr, size) = types[rng.random_range(0..types.len())];
        let mut bytes = npy_file(descr, 7, size);
        match rng.random_range(0..5) {
            0 => {
                let text = String::from_utf8_lossy(&bytes).replace("(7,)", pick(&mut rng, &shapes));
                bytes = text.into_bytes();
            }
            1 => {
                let other = pick(
                    &mut rng,
                    &["<c16", ">f4", "O", "<U3", "", "<f16", "|b1", "<M8"],
                );
                let text = String::from_utf8_lossy(&bytes).replace(descr, other);
                bytes = text.into_bytes();
            }
            2 => {
                let k = rng.random_range(8..10);
                bytes[k] = rng.random();
            }
            3 => bytes.truncate(rng.random_range(0..bytes.len())),
            _ => {
                let k = rng.random_range(10..bytes.len().min(80));
                bytes[k] = rng.random();
            }
        }
        let path = dir.path().join(format!("f{}.npy", tally.tried));
        std::fs::write(&path, &bytes).unwrap();
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(128)]).into_owned();
        let read = path.clone();
        tally.library(&shown, move || {
            let (descr, _) = kbench::npy::header(&read)?;
            for dtype in kbench::vocab::DType::ALL {
                if kbench::npy::holds(&descr, dtype, &read).is_ok() {
                    kbench::npy::read_as(&read, dtype, 1 << 20)?;
                }
            }
            kbench::npy::read_f64(&read, 1 << 20).map(|_| ())
        });
        let _ = std::fs::remove_file(&path);
    }
    tally.finish("npy-headers", seconds);
}

// ---- Tune journals ----

/// A tune's journal, its lines mutated (a field replaced, removed or duplicated; a line
/// repeated, dropped or torn): `Journal::resume` reads it or refuses it, and one in
/// `CLI_EVERY` is resumed by the binary on the mock, which must end with an answer.
#[test]
fn fuzz_tune_journals() {
    let seconds = fuzz_seconds();
    let mut rng = rng_for(7);
    let dir = tempfile::tempdir().unwrap();
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tune/sum.cu");
    std::fs::copy(kernel, dir.path().join("sum.cu")).unwrap();
    let study = format!(
        "[study]\nname = \"fzt\"\nalgorithm = \"custom\"\nseed = 1\n[grid]\nn = [1024]\n\
         dtype = \"f32\"\nblock = [64, 128, 256]\nitems = [1, 2]\n[tune]\naxes = [\"block\", \"items\"]\n\
         strategy = \"random\"\nbudget = {{ evaluations = 3 }}\nrounds = 2\n\n{}",
        common::TUNE_SUM_CUSTOM
    );
    std::fs::write(dir.path().join("study.toml"), study).unwrap();
    std::fs::write(dir.path().join("mock.toml"), MOCK).unwrap();
    let tuned = kbench()
        .current_dir(dir.path())
        .env("KBENCH_MOCK_GPU", "mock.toml")
        .args(["tune", "study.toml", "--out-dir", "out", "--warmup", "0"])
        .args(["--min-samples", "3", "--max-samples", "3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(tuned.success(), "{tuned}");
    let tune_dir = std::fs::read_dir(dir.path().join("out/fzt"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .next()
        .unwrap();
    let seed = std::fs::read_to_string(tune_dir.join("journal.jsonl")).unwrap();
    let lines: Vec<&str> = seed.lines().collect();
    let mut tally = Tally::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    while Instant::now() < deadline {
        let mut mutated: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        let k = rng.random_range(0..mutated.len());
        match rng.random_range(0..5) {
            0 => {
                let copy = mutated[k].clone();
                mutated.push(copy);
            }
            1 => {
                mutated.remove(k);
            }
            2 => {
                let cut = rng.random_range(0..mutated[k].len());
                mutated[k].truncate(cut);
            }
            _ => {
                let mut line: Value = serde_json::from_str(&mutated[k]).unwrap();
                let depth = rng.random_range(1..5);
                mutate_json(&mut line, &mut rng, depth);
                mutated[k] = line.to_string();
            }
        }
        let text = mutated.join("\n") + "\n";
        let folder = dir.path().join(format!("j{}", tally.tried));
        std::fs::create_dir(&folder).unwrap();
        std::fs::write(folder.join("journal.jsonl"), &text).unwrap();
        let read = folder.clone();
        tally.library(&text, move || {
            kbench::tune::journal::Journal::resume(&read)
                .map(|_| ())
                .map_err(|e| format!("{e:#}"))
        });
        if tally.tried % CLI_EVERY == 0 {
            let mut cmd = kbench();
            cmd.current_dir(dir.path())
                .env("KBENCH_MOCK_GPU", "mock.toml")
                .args(["tune", "--resume"])
                .arg(&folder);
            tally.binary(&text, cmd);
        }
        let _ = std::fs::remove_dir_all(&folder);
    }
    tally.finish("tune-journals", seconds);
}
