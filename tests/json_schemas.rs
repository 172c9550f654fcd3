//! The JSON Schemas of the two file formats: the checked-in copies are what `kbench schema`
//! prints; every shipped manifest names and passes the manifest schema, and the schema refuses
//! the type errors of the malformed-manifest corpus (tests/manifest_errors.rs) that kbench
//! refuses; a real results file passes the results schema; results without a known
//! `schema_version` are refused by name.

use crate::common;
use common::kbench;
use common::results_file_in;

use std::path::{Path, PathBuf};

use serde_json::Value;

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn printed_schema(of: &str) -> String {
    let out = kbench().args(["schema", of]).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn manifest_schema() -> Value {
    serde_json::from_str(&printed_schema("manifest")).unwrap()
}

fn toml_as_json(text: &str) -> Value {
    let value: toml::Value = toml::from_str(text).expect("valid TOML");
    serde_json::to_value(value).unwrap()
}

/// The schema's complaints about `instance`, one line each.
fn complaints(validator: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

#[test]
fn the_checked_in_schemas_are_what_kbench_schema_prints() {
    for (of, file) in [
        ("manifest", "schema/manifest.schema.json"),
        ("results", "schema/results.schema.json"),
    ] {
        let checked_in = std::fs::read_to_string(repo(file)).unwrap_or_default();
        assert!(
            checked_in == printed_schema(of),
            "{file} is not what `kbench schema {of}` prints: run `cargo run -- schema {of} > {file}`"
        );
    }
    kbench()
        .args(["schema", "nonsense"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("manifest, results"));
}

#[test]
fn the_manifest_schema_is_draft_04_and_types_what_serde_reads() {
    let schema = manifest_schema();
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-04/schema#");
    if let Err(e) = jsonschema::draft4::meta::validate(&schema) {
        panic!("not a valid draft-04 schema: {e}");
    }
    let text = schema.to_string();
    for later in [
        "\"const\"",
        "\"$defs\"",
        "\"exclusiveMinimum\":0",
        "\"format\":\"uint32\"",
    ] {
        assert!(!text.contains(later), "draft 04 has no {later}");
    }
    // Keys serde reads are there, typed from the algorithms' specs where serde takes raw TOML.
    let props = &schema["properties"];
    assert!(props["grid"]["properties"]["n"].is_object(), "{props}");
    assert!(props["grid"]["properties"]["where"].is_object());
    // Open to a custom study's own axes, closed to the built-ins' for the others.
    assert!(props["grid"]["additionalProperties"].is_object());
    assert_eq!(
        schema["anyOf"][1]["properties"]["grid"]["additionalProperties"],
        false
    );
    let algorithms = &schema["definitions"]["RawStudy"]["properties"]["algorithm"]["enum"];
    assert!(
        algorithms.as_array().unwrap().contains(&"reduce".into()),
        "{algorithms}"
    );
}

/// The `#:schema` line a manifest under experiments/ gives: the schema relative to its folder.
fn schema_line(manifest: &Path) -> String {
    let folder = manifest.parent().unwrap().strip_prefix(repo("")).unwrap();
    let up = "../".repeat(folder.components().count());
    format!("#:schema {up}schema/manifest.schema.json")
}

#[test]
fn every_shipped_manifest_names_the_schema_and_passes_it() {
    let schema = manifest_schema();
    let validator = jsonschema::draft4::new(&schema).unwrap();
    let mut checked = 0;
    let pattern = repo("experiments/**/*.toml");
    for path in glob::glob(pattern.to_str().unwrap()).unwrap() {
        let path = path.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // Taplo and Tombi read a `#:schema` header directive relative to the document's file.
        assert_eq!(
            text.lines().next(),
            Some(schema_line(&path).as_str()),
            "{}: the first line should name the schema",
            path.display()
        );
        let errors = complaints(&validator, &toml_as_json(&text));
        assert!(
            errors.is_empty(),
            "{}:\n{}",
            path.display(),
            errors.join("\n")
        );
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} manifests found");
}

const STUDY: &str = "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n";
const GRID: &str = "[grid]\nn = [1000]\n";
const VARIANT: &str = "[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";

/// The malformed manifests of tests/manifest_errors.rs whose fault is a key's type or value:
/// kbench refuses each, and so must the schema (an editor flags it as it is typed).
fn type_errors() -> Vec<(&'static str, String)> {
    vec![
        ("typo in a key", format!("{STUDY}{GRID}{VARIANT}[measure]\nwarmpu = 3\n")),
        ("unknown table", format!("{STUDY}{GRID}{VARIANT}[mesure]\n")),
        ("wrong type", format!("{STUDY}{GRID}{VARIANT}[measure]\nwarmup = \"three\"\n")),
        ("negative count", format!("{STUDY}{GRID}{VARIANT}[measure]\nmin_samples = -1\n")),
        ("zero samples", format!("{STUDY}{GRID}{VARIANT}[measure]\nmin_samples = 0\n")),
        ("unknown algorithm", format!("[study]\nname = \"s\"\nalgorithm = \"reduse\"\nseed = 1\n{GRID}{VARIANT}")),
        ("missing seed", format!("[study]\nname = \"s\"\nalgorithm = \"reduce\"\n{GRID}{VARIANT}")),
        ("seed that is not a number", format!("[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = \"x\"\n{GRID}{VARIANT}")),
        ("unknown axis", format!("{STUDY}[grid]\nn = [1]\nsize = [2]\n{VARIANT}")),
        ("negative size", format!("{STUDY}[grid]\nn = [10, -5]\n{VARIANT}")),
        ("empty axis", format!("{STUDY}[grid]\nn = []\n{VARIANT}")),
        ("float size", format!("{STUDY}[grid]\nn = [1.5]\n{VARIANT}")),
        ("unknown dtype", format!("{STUDY}[grid]\nn = [1]\ndtype = [\"f16\"]\n{VARIANT}")),
        ("bad block size", format!("{STUDY}[grid]\nn = [1]\nblock = [100]\n{VARIANT}")),
        ("bad pow2", format!("{STUDY}[grid]\nn = {{ pow2 = [10] }}\n{VARIANT}")),
        ("pow2 exponent too large", format!("{STUDY}[grid]\nn = {{ pow2 = [1, 63] }}\n{VARIANT}")),
        ("zero step", format!("{STUDY}[grid]\nn = {{ start = 1, stop = 9, step = 0 }}\n{VARIANT}")),
        ("where that is not a string", format!("{STUDY}[grid]\nn = [1]\nwhere = 3\n{VARIANT}")),
        ("unknown backend", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"gpu\"\nkernel = \"reduce_fast\"\n")),
        ("unknown kernel", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fastest\"\n")),
        ("unknown key in a variant", format!("{STUDY}{GRID}[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\nthreads = 4\n")),
        ("variant override of an unknown axis", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nparams = {{ threads = 64 }}\n")),
        ("study name that is a path", format!("[study]\nname = \"../etc\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}")),
        ("empty study name", format!("[study]\nname = \"\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}")),
        ("variant name with a path", format!("{STUDY}{GRID}[[variant]]\nname = \"../../etc\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n")),
        ("bad tolerance", format!("{STUDY}{GRID}{VARIANT}[accuracy]\nrel_tol = {{ f32 = -1.0 }}\n")),
        ("tolerance for an unknown dtype", format!("{STUDY}{GRID}{VARIANT}[accuracy]\nrel_tol = {{ f16 = 1e-3 }}\n")),
        ("bad scope", format!("{STUDY}{GRID}{VARIANT}[measure]\nscope = \"all\"\n")),
        ("negative time limit", format!("{STUDY}{GRID}{VARIANT}[measure]\ntimeout_s = -3.0\n")),
        ("zero time budget", format!("{STUDY}{GRID}{VARIANT}[measure]\nmax_time_s = 0.0\n")),
        ("target CI of 1", format!("{STUDY}{GRID}{VARIANT}[measure]\ntarget_rel_ci = 1.0\n")),
        ("min effect above 1", format!("{STUDY}{GRID}{VARIANT}[compare]\nmin_effect = 2.0\n")),
        ("unknown table value", format!("{STUDY}{GRID}{VARIANT}[[table]]\ntitle = \"t\"\nrows = \"variant\"\ncolumns = \"n\"\nvalue = \"speed\"\n")),
        ("table rows over no axis", format!("{STUDY}{GRID}{VARIANT}[[table]]\ntitle = \"t\"\nrows = \"variants\"\ncolumns = \"n\"\nvalue = \"median\"\n")),
        ("unknown reference unit", format!("{STUDY}{GRID}{VARIANT}[[table]]\ntitle = \"t\"\nrows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n[[table.reference]]\nlabel = \"l\"\nsource = \"s\"\nunit = \"minutes\"\nvalues = {{ 1000 = 1.0 }}\n")),
        ("unknown claim kind", format!("{STUDY}{GRID}{VARIANT}[[claim]]\ntext = \"t\"\nsource = \"s\"\nkind = \"quicker\"\na = \"c\"\n")),
        ("negative claim factor", format!("{STUDY}{GRID}{VARIANT}[[claim]]\ntext = \"t\"\nsource = \"s\"\nkind = \"faster\"\na = \"c\"\nb = \"c\"\nby = -2.0\n")),
    ]
}

#[test]
fn the_schema_refuses_the_type_errors_that_kbench_refuses() {
    let validator = jsonschema::draft4::new(&manifest_schema()).unwrap();
    let good = format!("{STUDY}{GRID}{VARIANT}");
    assert!(kbench::manifest::parse(Path::new("good.toml"), &good).is_ok());
    let errors = complaints(&validator, &toml_as_json(&good));
    assert!(errors.is_empty(), "the valid manifest: {errors:?}");

    let mut failures = Vec::new();
    for (what, text) in type_errors() {
        if kbench::manifest::parse(Path::new("bad.toml"), &text).is_ok() {
            failures.push(format!("{what}: kbench accepts it, so it is no error"));
        }
        if validator.is_valid(&toml_as_json(&text)) {
            failures.push(format!("{what}: the schema accepts\n{text}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_real_results_file_passes_the_results_schema() {
    let schema: Value = serde_json::from_str(&printed_schema("results")).unwrap();
    if let Err(e) = jsonschema::draft7::meta::validate(&schema) {
        panic!("not a valid draft-07 schema: {e}");
    }
    let validator = jsonschema::draft7::new(&schema).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("tiny.toml");
    // A CPU variant that passes, one that fails its accuracy check (NaN-free but wrong with a
    // zero tolerance), and a CUDA variant skipped without a GPU: every shape a case takes.
    std::fs::write(
        &manifest,
        "[study]\nname = \"tiny\"\nalgorithm = \"reduce\"\nseed = 3\n\
         [grid]\nn = [1000, 100_003]\ndtype = [\"i32\", \"f32\"]\n\
         [[variant]]\nname = \"seq\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
         [[variant]]\nname = \"gpu\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n\
         [measure]\nwarmup = 1\nmin_samples = 6\nmax_samples = 8\n\
         [accuracy]\nrel_tol = { f32 = 0.0 }\n\
         [[claim]]\ntext = \"sums are exact\"\nsource = \"test\"\nkind = \"passes\"\nvariants = [\"seq\"]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    kbench()
        .arg("run")
        .arg(&manifest)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .code(1);
    let results = results_file_in(&out.join("tiny"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let statuses: Vec<&str> = doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["status"].as_str().unwrap())
        .collect();
    for status in ["passed", "accuracy_failed", "skipped"] {
        assert!(statuses.contains(&status), "{statuses:?}");
    }
    let errors = complaints(&validator, &doc);
    assert!(errors.is_empty(), "{}", errors.join("\n"));

    // The schema can fail: a results file with a case's status misspelt, or a field missing.
    let mut broken = doc.clone();
    broken["cases"][0]["status"] = "pased".into();
    assert!(!validator.is_valid(&broken));
    let mut broken = doc.clone();
    broken.as_object_mut().unwrap().remove("environment");
    assert!(!validator.is_valid(&broken));

    // A file without a schema_version, or with a later one, is refused by name.
    let mut old = doc.clone();
    old.as_object_mut().unwrap().remove("schema_version");
    let old_path = dir.path().join("old.json");
    std::fs::write(&old_path, old.to_string()).unwrap();
    kbench()
        .arg("report")
        .arg(&old_path)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("has no schema_version"));
    let mut newer = doc.clone();
    newer["schema_version"] = 99.into();
    let newer_path = dir.path().join("newer.json");
    std::fs::write(&newer_path, newer.to_string()).unwrap();
    kbench()
        .arg("report")
        .arg(&newer_path)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("schema_version 99"));
}

/// A custom study names its own axes and kernels: the examples pass the schema, and a built-in
/// study naming an axis that is not its algorithm's still does not (see `type_errors`).
#[test]
fn every_custom_example_passes_the_schema() {
    let schema = manifest_schema();
    let validator = jsonschema::draft4::new(&schema).unwrap();
    let mut checked = 0;
    for dir in std::fs::read_dir(repo("examples")).unwrap() {
        for entry in std::fs::read_dir(dir.unwrap().path()).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let errors = complaints(&validator, &toml_as_json(&text));
            assert!(
                errors.is_empty(),
                "{}:\n{}",
                path.display(),
                errors.join("\n")
            );
            checked += 1;
        }
    }
    assert!(checked >= 2, "only {checked} example manifests found");
}
