//! Every example in the docs runs (issue 32), so the docs cannot drift from kbench: each fenced
//! block of README.md and docs/*.md is taken out and checked by its language and by the marker,
//! an HTML comment on the line before its fence:
//!
//! - ```toml: a whole manifest, which `kbench check` must accept, in a folder holding the files
//!   of the `<!-- file: NAME -->` blocks before it in the same document (a custom study's `.cu`).
//!   `<!-- mock-device -->`: a mock device file (KBENCH_MOCK_GPU), which its loader must accept.
//!   `<!-- fragment -->`: part of a manifest, which must be TOML at least.
//! - ```sh: run by `bash -euo pipefail` in a sandbox (the repository's experiments, datasets,
//!   examples and scripts; `kbench` on PATH; `cargo run [flags] --` read as `kbench`), and must
//!   exit 0. `<!-- mock-gpu -->`: on the mock device, with each `experiments/*_bench.toml` shrunk
//!   (the same study, variants, tables and claims; the smallest size and 3 samples) so ten runs
//!   take seconds. `<!-- not-run: why -->`: not run (a GPU, Slurm or the network needed, or the
//!   test command itself), and the reason must be given.
//! - ```cuda: only as a `<!-- file: NAME -->` block.
//! - ``` (no language): output and layouts, shown and not run.
//!
//! A block of any other language or marker fails the test, so no new kind of example slips past.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fenced block of a markdown file.
#[derive(Debug)]
struct Block {
    /// `README.md:85`: where its fence opens.
    at: String,
    lang: String,
    /// The marker's text (`mock-gpu`, `file: scale.cu`, ...), if the line before the fence is
    /// an HTML comment.
    marker: Option<String>,
    text: String,
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, then docs/*.md in name order: the documents whose examples must run.
fn documents() -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.insert(0, repo().join("README.md"));
    docs
}

/// The fenced blocks of `path`, in order.
fn blocks(path: &Path) -> Vec<Block> {
    let name = path.strip_prefix(repo()).unwrap().display().to_string();
    let text = std::fs::read_to_string(path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let marker = (i > 0)
            .then(|| lines[i - 1].trim())
            .and_then(|l| l.strip_prefix("<!--")?.strip_suffix("-->"))
            .map(|m| m.trim().to_string());
        let end = (i + 1..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("{name}:{}: a fence that is never closed", i + 1));
        found.push(Block {
            at: format!("{name}:{}", i + 1),
            lang: lang.trim().to_string(),
            marker,
            text: lines[i + 1..end].join("\n") + "\n",
        });
        i = end + 1;
    }
    found
}

fn every_block() -> Vec<(PathBuf, Vec<Block>)> {
    documents()
        .into_iter()
        .map(|d| (d.clone(), blocks(&d)))
        .collect()
}

/// A `<!-- not-run: why -->` marker's reason, if the block has one.
fn not_run(block: &Block) -> Option<&str> {
    block
        .marker
        .as_deref()?
        .strip_prefix("not-run:")
        .map(str::trim)
}

fn file_name(block: &Block) -> Option<&str> {
    block
        .marker
        .as_deref()?
        .strip_prefix("file:")
        .map(str::trim)
}

#[test]
fn every_block_of_the_docs_is_of_a_kind_this_test_runs() {
    let mut unknown = Vec::new();
    let mut counted = 0;
    for (_, blocks) in every_block() {
        for b in &blocks {
            counted += 1;
            let known = match (b.lang.as_str(), b.marker.as_deref()) {
                ("toml", None | Some("mock-device" | "fragment")) => true,
                ("sh", None | Some("mock-gpu")) => true,
                ("sh" | "toml", Some(_)) => not_run(b).is_some_and(|why| !why.is_empty()),
                ("cuda", Some(_)) => file_name(b).is_some(),
                ("", None) => true,
                _ => false,
            };
            if !known {
                unknown.push(format!("{}: ```{} {:?}", b.at, b.lang, b.marker));
            }
        }
    }
    assert!(
        counted >= 12,
        "only {counted} blocks found: is the parser right?"
    );
    assert!(
        unknown.is_empty(),
        "blocks this test would not run (see its header for the markers):\n{}",
        unknown.join("\n")
    );
}

#[test]
fn every_manifest_in_the_docs_passes_kbench_check() {
    let mut checked = 0;
    for (_, blocks) in every_block() {
        let dir = tempfile::tempdir().unwrap();
        for (k, b) in blocks.iter().enumerate() {
            if let Some(name) = file_name(b) {
                std::fs::write(dir.path().join(name), &b.text).unwrap();
                continue;
            }
            if b.lang != "toml" || not_run(b).is_some() {
                continue;
            }
            match b.marker.as_deref() {
                Some("fragment") => {
                    if let Err(e) = b.text.parse::<toml::Table>() {
                        panic!("{}: not TOML: {e}\n{}", b.at, b.text);
                    }
                }
                Some("mock-device") => {
                    let path = dir.path().join(format!("mock{k}.toml"));
                    std::fs::write(&path, &b.text).unwrap();
                    if let Err(e) = kbench::run::executor::mock::MockSpec::load(&path) {
                        panic!("{}: the mock device refuses it:\n{e}", b.at);
                    }
                }
                _ => {
                    let path = dir.path().join(format!("example{k}.toml"));
                    std::fs::write(&path, &b.text).unwrap();
                    let out = common::kbench().arg("check").arg(&path).output().unwrap();
                    assert!(
                        out.status.success(),
                        "{}: `kbench check` refuses it:\n{}",
                        b.at,
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
            checked += 1;
        }
    }
    // README: the manifest reference, the custom study, the mock device file.
    assert!(checked >= 3, "only {checked} TOML blocks checked");
}

/// A folder to run the docs' commands in: the repository's inputs linked in, `kbench` on PATH,
/// and (for the mock device) each benchmark manifest shrunk.
struct Sandbox {
    dir: tempfile::TempDir,
    bin: PathBuf,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        for linked in ["datasets", "examples", "kernels", "schema", "scripts"] {
            std::os::unix::fs::symlink(repo().join(linked), dir.path().join(linked)).unwrap();
        }
        // A folder of its own, so that a mock run's manifests can be swapped for small ones.
        let experiments = dir.path().join("experiments");
        std::fs::create_dir(&experiments).unwrap();
        for entry in std::fs::read_dir(repo().join("experiments")).unwrap() {
            let path = entry.unwrap().path();
            std::os::unix::fs::symlink(&path, experiments.join(path.file_name().unwrap())).unwrap();
        }
        let bin = dir.path().join(".bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(common::kbench_exe(), bin.join("kbench")).unwrap();
        Sandbox { dir, bin }
    }

    /// Each `experiments/*_bench.toml` replaced by the same study at n = 65,536 (the grid's, each
    /// variant's own sizes, and the sizes its tables and claims select) with 3 samples a case,
    /// for the mock device.
    fn shrink_benchmarks(&self) {
        let experiments = self.dir.path().join("experiments");
        for entry in std::fs::read_dir(&experiments).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            if !name.ends_with("_bench.toml") {
                continue;
            }
            let mut manifest: toml::Table =
                std::fs::read_to_string(&path).unwrap().parse().unwrap();
            let small = toml::Value::Integer(65_536);
            let grid = manifest["grid"].as_table_mut().unwrap();
            if let Some(n) = grid.get_mut("n") {
                *n = small.clone();
            }
            for (list, key) in [
                ("variant", "params"),
                ("table", "select"),
                ("claim", "select"),
            ] {
                let Some(items) = manifest.get_mut(list).and_then(|v| v.as_array_mut()) else {
                    continue;
                };
                for item in items {
                    let n = (item.get_mut(key).and_then(|t| t.as_table_mut()))
                        .and_then(|t| t.get_mut("n"));
                    if let Some(n) = n {
                        *n = small.clone();
                    }
                }
            }
            let measure = manifest
                .entry("measure")
                .or_insert(toml::Value::Table(toml::Table::new()))
                .as_table_mut()
                .unwrap();
            for (key, value) in [("warmup", 0), ("min_samples", 3), ("max_samples", 3)] {
                measure.insert(key.into(), toml::Value::Integer(value));
            }
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, toml::to_string(&manifest).unwrap()).unwrap();
        }
    }

    /// Runs `script` with bash in the sandbox; returns its output, or panics saying what failed.
    fn run(&self, at: &str, script: &str, mock_gpu: bool) -> String {
        let script = as_kbench(script);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new("bash");
        cmd.args(["-euo", "pipefail", "-c", &script])
            .current_dir(self.dir.path())
            .env("PATH", path)
            .env_remove("KBENCH_MOCK_GPU");
        if mock_gpu {
            let mock = self.dir.path().join(".mock-gpu.toml");
            std::fs::write(&mock, "[device]\nname = \"H100\"\n").unwrap();
            cmd.env("KBENCH_MOCK_GPU", mock);
        }
        let out = cmd.output().unwrap();
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{at}: the docs' command exits {:?}:\n{script}\n--- its output:\n{printed}",
            out.status.code()
        );
        printed
    }
}

/// `cargo run --release -- run x.toml` as the built kbench runs it: `kbench run x.toml`.
fn as_kbench(script: &str) -> String {
    let mut out = String::new();
    let mut rest = script;
    while let Some(at) = rest.find("cargo run") {
        let Some(args) = rest[at..].find(" -- ") else {
            break;
        };
        out.push_str(&rest[..at]);
        out.push_str("kbench ");
        rest = &rest[at + args + " -- ".len()..];
    }
    out.push_str(rest);
    out
}

#[test]
fn cargo_run_in_the_docs_is_read_as_the_built_kbench() {
    assert_eq!(
        as_kbench("cargo run --release -- run a.toml\ncargo run -- schema manifest > s.json\n"),
        "kbench run a.toml\nkbench schema manifest > s.json\n"
    );
}

#[test]
fn every_command_block_of_the_docs_runs_or_says_why_not() {
    let mut ran = Vec::new();
    let mut not_ran = Vec::new();
    for (_, blocks) in every_block() {
        for b in blocks.iter().filter(|b| b.lang == "sh") {
            if let Some(why) = not_run(b) {
                not_ran.push(format!("{}: {why}", b.at));
                continue;
            }
            let sandbox = Sandbox::new();
            let mock_gpu = b.marker.as_deref() == Some("mock-gpu");
            if mock_gpu {
                sandbox.shrink_benchmarks();
            }
            sandbox.run(&b.at, &b.text, mock_gpu);
            ran.push(b.at.clone());
        }
    }
    // The first of the two commands, and the CI recipe on the mock device, at least.
    assert!(ran.len() >= 2, "ran only {ran:?}; not run: {not_ran:?}");
    println!(
        "ran: {ran:?}\nnot run, each with its reason:\n{}",
        not_ran.join("\n")
    );
}

/// The README's first section keeps the two commands a newcomer starts with, verbatim.
#[test]
fn the_readme_keeps_the_two_commands() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("The two commands"))
        .expect("a section `The two commands`");
    for command in [
        "```sh\ncargo run --release -- run experiments/reduction.toml\n```",
        "```sh\ncargo test --locked\n```",
    ] {
        assert!(section.contains(command), "{command} is not in:\n{section}");
    }
}

/// "Adding an algorithm" names the command that regenerates the editors' schema, the one
/// tests/json_schemas.rs prints when the checked-in file is stale, and that command writes
/// exactly the checked-in file.
#[test]
fn the_readme_says_how_to_regenerate_the_manifest_schema() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let command = "cargo run -- schema manifest > schema/manifest.schema.json";
    let adding = readme
        .split("\n## ")
        .find(|s| s.starts_with("Adding an algorithm"))
        .expect("a section `Adding an algorithm`");
    assert!(adding.contains(command), "{adding}");
    let test = std::fs::read_to_string(repo().join("tests/json_schemas.rs")).unwrap();
    assert!(
        test.contains("run `cargo run -- schema {of} > {file}`"),
        "tests/json_schemas.rs no longer says the command the README gives"
    );
    let sandbox = Sandbox::new();
    let written = sandbox.dir.path().join("written");
    std::fs::create_dir(&written).unwrap();
    sandbox.run(
        "README.md (Adding an algorithm)",
        &command.replace("schema/", "written/"),
        false,
    );
    assert_eq!(
        std::fs::read_to_string(written.join("manifest.schema.json")).unwrap(),
        std::fs::read_to_string(repo().join("schema/manifest.schema.json")).unwrap()
    );
}
