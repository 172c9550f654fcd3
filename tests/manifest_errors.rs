//! Every mistake in a manifest is refused with the file, line, column and key at fault.

use std::path::Path;

use kbench::manifest::{parse, ManifestError};

const STUDY: &str = "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n";
const GRID: &str = "[grid]\nn = [1000]\n";
const VARIANT: &str = "[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n";

fn error(text: &str) -> ManifestError {
    match parse(Path::new("bad.toml"), text) {
        Ok(_) => panic!("accepted a bad manifest:\n{text}"),
        Err(e) => e,
    }
}

/// What is wrong, the manifest, and the line, column, key and words its error must show.
type Case = (
    &'static str,
    String,
    usize,
    usize,
    Option<&'static str>,
    &'static str,
);

fn cases() -> Vec<Case> {
    vec![
        ("typo in a key", format!("{STUDY}{GRID}{VARIANT}[measure]\nwarmpu = 3\n"), 12, 1, Some("measure.warmpu"), "unknown field `warmpu`"),
        ("unknown table", format!("{STUDY}{GRID}{VARIANT}[mesure]\n"), 11, 2, Some("mesure"), "unknown field `mesure`"),
        ("wrong type", format!("{STUDY}{GRID}{VARIANT}[measure]\nwarmup = \"three\"\n"), 12, 10, Some("measure.warmup"), "expected a whole number from 0 to 4294967295, found the string \"three\""),
        ("negative count", format!("{STUDY}{GRID}{VARIANT}[measure]\nmin_samples = -1\n"), 12, 15, Some("measure.min_samples"), "expected a whole number from 0 to 4294967295, found -1"),
        ("unknown algorithm", format!("[study]\nname = \"s\"\nalgorithm = \"reduse\"\nseed = 1\n{GRID}{VARIANT}"), 3, 13, Some("study.algorithm"), "unknown algorithm `reduse`"),
        ("missing seed", format!("[study]\nname = \"s\"\nalgorithm = \"reduce\"\n{GRID}{VARIANT}"), 1, 1, Some("study"), "missing field `seed`"),
        ("unknown axis", format!("{STUDY}[grid]\nn = [1]\nsize = [2]\n{VARIANT}"), 7, 1, Some("grid.size"), "not an axis"),
        ("negative size", format!("{STUDY}[grid]\nn = [10, -5]\n{VARIANT}"), 6, 5, Some("grid.n"), "must be >= 0"),
        ("empty axis", format!("{STUDY}[grid]\nn = []\n{VARIANT}"), 6, 5, Some("grid.n"), "no values"),
        ("unknown dtype", format!("{STUDY}[grid]\nn = [1]\ndtype = [\"f16\"]\n{VARIANT}"), 7, 9, Some("grid.dtype"), "unknown dtype `f16`"),
        ("bad block size", format!("{STUDY}[grid]\nn = [1]\nblock = [100]\n{VARIANT}"), 7, 9, Some("grid.block"), "power of two"),
        ("streams without pinned transfers", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nscope = \"transfers\"\nstreams = 4\n"), 12, 11, Some("variant[0].streams"), "host_memory = \"pinned\""),
        ("a single stream", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nscope = \"transfers\"\nhost_memory = \"pinned\"\nstreams = 1\n"), 13, 11, Some("variant[0].streams"), "2 to 16"),
        ("bad pow2", format!("{STUDY}[grid]\nn = {{ pow2 = [10] }}\n{VARIANT}"), 6, 5, Some("grid.n"), "two integer exponents"),
        ("zero step", format!("{STUDY}[grid]\nn = {{ start = 1, stop = 9, step = 0 }}\n{VARIANT}"), 6, 5, Some("grid.n"), "step must be positive"),
        ("zip of unequal axes", format!("{STUDY}[grid]\nn = [1, 2]\nblock = [32]\nzip = [[\"n\", \"block\"]]\n{VARIANT}"), 8, 7, Some("grid.zip"), "equal lengths"),
        ("where naming no axis", format!("{STUDY}[grid]\nn = [1]\nwhere = \"n > blok\"\n{VARIANT}"), 7, 14, Some("grid.where"), "`blok` is not an axis"),
        ("unknown backend", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"gpu\"\nkernel = \"reduce_fast\"\n"), 9, 11, Some("variant.backend"), "unknown variant `gpu`"),
        ("unknown kernel", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fastest\"\n"), 10, 10, Some("variant[0].kernel"), "no cuda kernel `reduce_fastest`"),
        ("impl on a cuda variant", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nimpl = \"sequential\"\n"), 10, 8, Some("variant[0].impl"), "not `impl`"),
        ("duplicate variant", format!("{STUDY}{GRID}{VARIANT}{VARIANT}"), 12, 8, Some("variant[1].name"), "two variants are named `c`"),
        ("baseline naming no variant", format!("{STUDY}{GRID}{VARIANT}[report]\nbaseline = \"gpu\"\n"), 12, 12, Some("report.baseline"), "not the name of a variant"),
        ("bad tolerance", format!("{STUDY}{GRID}{VARIANT}[accuracy]\nrel_tol = {{ f32 = -1.0 }}\n"), 12, 19, Some("accuracy.rel_tol.f32"), ">= 0"),
        ("tolerance for an unknown dtype", format!("{STUDY}{GRID}{VARIANT}[accuracy]\nrel_tol = {{ f16 = 1e-3 }}\n"), 12, 13, Some("accuracy.rel_tol.f16"), "unknown field `f16`"),
        ("bad scope", format!("{STUDY}{GRID}{VARIANT}[measure]\nscope = \"all\"\n"), 12, 9, Some("measure.scope"), "unknown variant `all`"),
        ("no processes", format!("{STUDY}{GRID}{VARIANT}[measure]\nprocesses = 0\n"), 12, 13, Some("measure.processes"), "processes must be from 1 to 64"),
        ("too many processes", format!("{STUDY}{GRID}{VARIANT}[measure]\nprocesses = 4000000000\n"), 12, 13, Some("measure.processes"), "processes must be from 1 to 64"),
        ("a fraction of a process", format!("{STUDY}{GRID}{VARIANT}[measure]\nprocesses = 2.5\n"), 12, 13, Some("measure.processes"), "expected a whole number from 0 to 4294967295, found 2.5"),
        ("negative processes", format!("{STUDY}{GRID}{VARIANT}[measure]\nprocesses = -3\n"), 12, 13, Some("measure.processes"), "found -3"),
        ("min above max samples", format!("{STUDY}{GRID}{VARIANT}[measure]\nmin_samples = 10\nmax_samples = 5\n"), 13, 15, Some("measure.max_samples"), "below min_samples"),
        ("variant override of an unknown axis", format!("{STUDY}{GRID}[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nparams = {{ threads = 64 }}\n"), 11, 12, Some("variant[0].params.threads"), "not an axis"),
        ("study name that is a path", format!("[study]\nname = \"../etc\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}"), 2, 8, Some("study.name"), "1 to 100 ASCII letters, digits, `_`, `-` or `.`, not starting with `.`"),
        ("broken TOML", format!("{STUDY}[grid\nn = [1]\n"), 5, 6, None, ""),
    ]
}

#[test]
fn each_malformed_manifest_names_line_column_and_key() {
    let mut failures = Vec::new();
    for (what, text, line, column, key, words) in cases() {
        let e = error(&text);
        let ok = e.line == line
            && e.column == column
            && key.is_none_or(|k| e.key.as_deref().is_some_and(|got| got.starts_with(k)))
            && e.message.contains(words)
            && e.to_string().contains(&format!("bad.toml:{line}:{column}"));
        if !ok {
            failures.push(format!("{what}: expected {line}:{column} key {key:?} containing {words:?}, got\n{e}\n  key={:?}", e.key));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_rendered_error_shows_the_line_and_a_caret() {
    let e = error(&format!("{STUDY}{GRID}{VARIANT}[measure]\nwarmpu = 3\n"));
    let text = e.to_string();
    assert!(text.contains("12 | warmpu = 3"), "{text}");
    assert!(
        text.contains("   | ^^^^^^\n") || text.ends_with("   | ^^^^^^"),
        "{text}"
    );
}

#[test]
fn a_valid_manifest_is_accepted() {
    let m = parse(Path::new("ok.toml"), &format!("{STUDY}{GRID}{VARIANT}")).unwrap();
    assert_eq!(m.study.name, "s");
    assert_eq!(m.variants.len(), 1);
}

#[test]
fn every_shipped_experiment_is_valid() {
    // From the source tree; a bundled copy of this test (scripts/gpu-bundle.sh) runs elsewhere,
    // from the repository root (scripts/gpu-tests.sh goes there).
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = if built_in.is_dir() {
        built_in
    } else {
        Path::new(".")
    };
    // experiments/ and its folders (the timer sweep's manifests live in one).
    let pattern = root.join("experiments/**/*.toml");
    for path in glob::glob(pattern.to_str().unwrap()).unwrap() {
        let path = path.unwrap();
        if let Err(e) = kbench::manifest::load(&path) {
            panic!("{e}");
        }
    }
}

#[test]
fn more_malformed_manifests_are_refused_with_their_location() {
    // (manifest, line, column, key, words)
    let cases: Vec<Case> = vec![
        ("zip of an unknown axis", format!("{STUDY}[grid]\nn = [1]\nzip = [[\"n\", \"m\"]]\n{VARIANT}"), 7, 7, Some("grid.zip"), "not an axis"),
        ("unterminated string in where", format!("{STUDY}[grid]\nn = [1]\nwhere = \"dtype == 'f32\"\n{VARIANT}"), 7, 19, Some("grid.where"), "unterminated string"),
        ("pow2 exponent too large", format!("{STUDY}[grid]\nn = {{ pow2 = [1, 63] }}\n{VARIANT}"), 6, 5, Some("grid.n"), "<= 62"),
        ("range stop below start", format!("{STUDY}[grid]\nn = {{ start = 10, stop = 1 }}\n{VARIANT}"), 6, 5, Some("grid.n"), "below start"),
        ("duplicate key", format!("{STUDY}[grid]\nn = [1]\nn = [2]\n{VARIANT}"), 7, 1, None, "duplicate key"),
        ("float size", format!("{STUDY}[grid]\nn = [1.5]\n{VARIANT}"), 6, 5, Some("grid.n"), "expected an integer, found the float 1.5"),
        ("kernel on a cpu variant", format!("{STUDY}{GRID}[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nkernel = \"reduce_fast\"\n"), 10, 10, Some("variant[0].kernel"), "not `kernel`"),
        ("empty study name", format!("[study]\nname = \"\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}"), 2, 8, Some("study.name"), "breaks the rule: 1 to 100"),
        ("negative time limit", format!("{STUDY}{GRID}{VARIANT}[measure]\ntimeout_s = -3.0\n"), 12, 13, Some("measure.timeout_s"), "positive number of seconds"),
        ("min effect above 1", format!("{STUDY}{GRID}{VARIANT}[compare]\nmin_effect = 2.0\n"), 12, 14, Some("compare.min_effect"), "between 0 and 1"),
        ("variant name with a path", format!("{STUDY}{GRID}[[variant]]\nname = \"../../etc\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n"), 8, 8, Some("variant[0].name"), "names output files"),
        ("seed that is not a number", format!("[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = \"x\"\n{GRID}{VARIANT}"), 4, 8, Some("study.seed"), "expected a whole number from 0 to 18446744073709551615, found the string \"x\""),
        ("unknown key in a variant", format!("{STUDY}{GRID}[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\nthreads = 4\n"), 11, 1, Some("variant.threads"), "unknown field `threads`"),
        ("a grid too large to plan", format!("{STUDY}[grid]\nn = {{ start = 1, stop = 9999 }}\nblock = {{ pow2 = [5, 10] }}\ndtype = [\"i32\", \"f32\", \"f64\"]\n[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n"), 5, 1, Some("grid"), "(n: 9999 x dtype: 3 x block: 6 values, over 1 variant(s)"),
    ];
    let mut failures = Vec::new();
    for (what, text, line, column, key, words) in cases {
        let e = error(&text);
        let ok = e.line == line
            && e.column == column
            && key.is_none_or(|k| e.key.as_deref().is_some_and(|got| got.starts_with(k)))
            && e.message.contains(words);
        if !ok {
            failures.push(format!("{what}: expected {line}:{column} key {key:?} containing {words:?}, got\n{e}\n  key={:?}", e.key));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// A study with a CPU and a CUDA variant over two sizes, for the tables' and claims' errors.
const TWO: &str =
    "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [1000, 2000]\n\
[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n\
[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n";
const CLAIM: &str = "[[claim]]\ntext = \"t\"\nsource = \"s\"\n";
const TABLE: &str = "[[table]]\ntitle = \"t\"\n";

#[test]
fn tables_and_claims_that_name_what_the_study_lacks_are_refused_at_their_line() {
    let cases: Vec<Case> = vec![
        ("claim naming no variant", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"c\"\nb = \"gpu\"\n"), 20, 5, Some("claim[0].b"), "`gpu` is not a variant"),
        ("claim of an unknown kind", format!("{TWO}{CLAIM}kind = \"quicker\"\na = \"c\"\n"), 18, 8, Some("claim[0].kind"), "unknown kind `quicker`"),
        ("claim missing its second variant", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"c\"\n"), 15, 1, Some("claim[0].b"), "needs `b`"),
        ("claim selecting an unknown axis", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"c\"\nb = \"g\"\nselect = {{ size = 1000 }}\n"), 21, 10, Some("claim[0].select.size"), "not an axis"),
        ("claim selecting a value never run", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"c\"\nb = \"g\"\nselect = {{ n = 3000 }}\n"), 21, 10, Some("claim[0].select.n"), "never runs n = 3000"),
        ("claim selecting a dtype never run", format!("{TWO}{CLAIM}kind = \"passes\"\na = \"c\"\nselect = {{ dtype = \"f64\" }}\n"), 20, 10, Some("claim[0].select.dtype"), "never runs dtype = f64"),
        ("trend along no axis", format!("{TWO}{CLAIM}kind = \"rises\"\na = \"g\"\nquantity = \"gbytes_per_s\"\nalong = \"size\"\n"), 21, 9, Some("claim[0].along"), "neither `variant` nor an axis"),
        ("trend of an unknown quantity", format!("{TWO}{CLAIM}kind = \"falls\"\na = \"g\"\nquantity = \"speed\"\nalong = \"n\"\n"), 20, 12, Some("claim[0].quantity"), "unknown quantity `speed`"),
        ("peak of a CPU variant", format!("{TWO}{CLAIM}kind = \"reaches_peak\"\na = \"c\"\nshare = 0.9\n"), 15, 1, Some("claim[0].a"), "names a CUDA variant"),
        ("negative factor", format!("{TWO}{CLAIM}kind = \"faster\"\na = \"c\"\nb = \"g\"\nby = -2.0\n"), 21, 6, Some("claim[0].by"), "positive number"),
        ("table over no axis", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"size\"\nvalue = \"median\"\n"), 18, 11, Some("table[0].columns"), "neither `variant` nor an axis"),
        ("table of an unknown value", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"speed\"\n"), 19, 9, Some("table[0].value"), "unknown value `speed`"),
        ("speedup table without a baseline", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"speedup\"\n"), 19, 9, Some("table[0].value"), "needs `baseline"),
        ("table whose cells hold several cases", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"dtype\"\nvalue = \"median\"\n"), 15, 1, Some("table[0].select"), "axis `n` takes several values"),
        ("reference in the wrong unit", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n[[table.reference]]\nlabel = \"seed\"\nsource = \"p\"\nunit = \"GB/s\"\nvalues = {{ 1000 = 1.0 }}\n"), 23, 8, Some("table[0].reference[0].unit"), "given in \"s\" or \"ms\""),
        ("reference for a column the table lacks", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n[[table.reference]]\nlabel = \"seed\"\nsource = \"p\"\nunit = \"ms\"\nvalues = {{ 5000 = 1.0 }}\n"), 24, 10, Some("table[0].reference[0].values"), "`5000` is not a column"),
        ("table listing no such variant", format!("{TWO}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\nvariants = [\"c\", \"h\"]\n"), 20, 12, Some("table[0].variants"), "`h` is not a variant"),
    ];
    let mut failures = Vec::new();
    for (what, text, line, column, key, words) in cases {
        let e = error(&text);
        let ok = e.line == line
            && e.column == column
            && key.is_none_or(|k| e.key.as_deref() == Some(k))
            && e.message.contains(words);
        if !ok {
            failures.push(format!("{what}: expected {line}:{column} key {key:?} containing {words:?}, got\n{e}\n  key={:?}", e.key));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_table_by_variant_may_leave_out_an_axis_each_variant_fixes() {
    // dtype takes two values in the study, but each variant one: a (variant, n) cell is one case.
    let fixed = "[study]\nname = \"s\"\nalgorithm = \"reduce\"\nseed = 1\n[grid]\nn = [1000, 2000]\n\
dtype = [\"f32\", \"f64\"]\n\
[[variant]]\nname = \"a\"\nbackend = \"cpu\"\nimpl = \"sequential\"\nparams = { dtype = [\"f32\"] }\n\
[[variant]]\nname = \"b\"\nbackend = \"cpu\"\nimpl = \"pairwise\"\nparams = { dtype = [\"f64\"] }\n";
    let table = format!("{fixed}{TABLE}rows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n");
    parse(Path::new("ok.toml"), &table).unwrap();
    // A variant left on the grid's two dtypes puts two cases in its cells.
    let loose = format!(
        "{fixed}[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"threads\"\n{TABLE}\
         rows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n"
    );
    assert!(error(&loose)
        .message
        .contains("axis `dtype` takes several values"));
}

#[test]
fn a_malformed_matrix_file_or_generator_is_refused_when_the_manifest_is_read() {
    let dir = std::env::temp_dir().join(format!("kbench-symgs-manifest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The seed's fault: a column index 0 (its col_ind = -1) on the file's line 4.
    let bad = dir.join("bad.mtx");
    std::fs::write(
        &bad,
        "%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 4.0\n2 0 -1.0\n2 2 4.0\n",
    )
    .unwrap();
    let good = dir.join("good.mtx");
    std::fs::write(
        &good,
        "%%MatrixMarket matrix coordinate real symmetric\n2 2 3\n1 1 4.0\n2 1 -1.0\n2 2 4.0\n",
    )
    .unwrap();
    let manifest = |matrix: &str| {
        format!(
            "[study]\nname = \"s\"\nalgorithm = \"symgs\"\nseed = 1\n[grid]\nmatrix = [{matrix}]\n\
             [[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n"
        )
    };
    let e = error(&manifest(&format!("\"hpcg:4\", \"{}\"", bad.display())));
    assert_eq!((e.line, e.key.as_deref()), (6, Some("grid.matrix")), "{e}");
    let file_line = format!("{}:4:", bad.display());
    assert!(e.message.contains(&file_line), "{e}");
    assert!(e.message.contains("start at 1"), "{e}");
    let e = error(&manifest("\"hpcg:4x4\""));
    assert_eq!(e.line, 6, "{e}");
    assert!(e.message.contains("hpcg"), "{e}");
    let m = parse(
        Path::new("ok.toml"),
        &manifest(&format!(
            "\"hpcg:3\", \"laplace2d:5\", \"{}\"",
            good.display()
        )),
    )
    .unwrap();
    let matrices = &m.axes.iter().find(|(name, _)| name == "matrix").unwrap().1;
    assert_eq!(matrices.0.len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_case_cap_counts_only_the_axes_each_backend_keeps() {
    // 60,000 sizes x 2 block sizes: the CPU variant has no block, so it plans 60,000 cases, under
    // the 100,000 cap; a CUDA variant over every size would plan 120,000.
    // (A CUDA variant at one size keeps `block` meaningful.)
    let grid = "[grid]\nn = { start = 1, stop = 60_000, step = 1 }\nblock = [32, 64]\n";
    let one_size = "[[variant]]\nname = \"g1\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\nparams = { n = [1] }\n";
    parse(
        Path::new("ok.toml"),
        &format!("{STUDY}{grid}{VARIANT}{one_size}"),
    )
    .unwrap_or_else(|e| panic!("refused a 60,002-case study: {e}"));
    let cuda = "[[variant]]\nname = \"g\"\nbackend = \"cuda\"\nkernel = \"reduce_fast\"\n";
    let e = error(&format!("{STUDY}{grid}{cuda}"));
    assert!(e.message.contains("120000 cases"), "{e}");
}

#[test]
fn errors_without_a_place_show_none_and_a_missing_axis_points_at_its_table() {
    let e = error(&format!("{STUDY}[grid]\ndtype = \"f32\"\n{VARIANT}"));
    assert_eq!((e.line, e.column), (5, 1), "{e}");
    assert!(e.message.contains("must give axis `n`"), "{e}");
    assert!(e.to_string().contains("bad.toml:5:1\n"), "{e}");
    // No variant at all: nothing in the file to point at, so no `:1:1` pointing nowhere.
    let e = error(&format!("{STUDY}{GRID}"));
    assert!(e.message.contains("no [[variant]]"), "{e}");
    assert!(e.to_string().ends_with(" --> bad.toml"), "{e}");
}

/// Parses and plans: the mistakes only planning finds are manifest errors too.
fn plan_error(text: &str) -> ManifestError {
    match parse(Path::new("bad.toml"), text) {
        Err(e) => e,
        Ok(m) => match kbench::plan::expand(&m) {
            Ok(cases) => panic!("planned {} cases of a bad manifest:\n{text}", cases.len()),
            Err(e) => e,
        },
    }
}

/// The column (1-based, in characters) where `needle` starts on line `line` of `text`.
fn column_of(text: &str, line: usize, needle: &str) -> usize {
    let l = text.lines().nth(line - 1).unwrap();
    l[..l.find(needle).unwrap()].chars().count() + 1
}

#[test]
fn where_errors_after_escapes_or_in_multi_line_strings_point_at_the_right_character() {
    // Each `where` has its mistake (`blok`) after escapes and non-ASCII text: an offset that
    // ignores them lands inside `é` or `≥` (a panic) or on the wrong column.
    let cases = [
        r#"where = "dtype == \"f32\" and n\t>= 1 and \"é\" != dtype and blok > 1""#,
        r#"where = "dtype == '\u00e9\u00e9' or blok > 1""#,
        "where = \"\"\"\nn >= 1 and dtype == 'é' and blok > 1\"\"\"",
        "where = \"\"\"n > 1 and \\\n    dtype == \"é\" and blok > 1\"\"\"",
        "where = '''\n'é' == dtype and blok > 1'''",
        "where = '\"é\" == dtype and blok > 1'",
    ];
    for (k, filter) in cases.iter().enumerate() {
        let text = format!("{STUDY}[grid]\nn = [1]\n{filter}\n{VARIANT}");
        let e = error(&text);
        let blok_line = 7 + filter.split("blok").next().unwrap().matches('\n').count();
        let blok_column = column_of(&text, blok_line, "blok");
        assert!(e.message.contains("`blok` is not an axis"), "case {k}: {e}");
        assert_eq!(
            (e.line, e.column),
            (blok_line, blok_column),
            "case {k}: {e}"
        );
        // The caret sits under `blok` in the rendered error.
        let rendered = e.to_string();
        let caret_line = rendered.lines().last().unwrap();
        let caret_at = caret_line.split(" | ").nth(1).unwrap();
        assert_eq!(
            caret_at.chars().take_while(|c| *c != '^').count(),
            blok_column - 1,
            "case {k}:\n{rendered}"
        );
    }
    // A mistake that is an escape's own character is reported at the escape.
    let e = error(&format!(
        "{STUDY}[grid]\nn = [1]\nwhere = \"n \\u2265 1\"\n{VARIANT}"
    ));
    assert_eq!((e.line, e.column), (7, 12), "{e}");
    assert!(
        e.message.contains("unexpected character `≥` (write `>=`)"),
        "{e}"
    );
}

#[test]
fn deep_filters_are_refused_not_a_stack_overflow() {
    for filter in [
        format!("{}n > 1{}", "(".repeat(10_000), ")".repeat(10_000)),
        format!("{}n > 1", "not ".repeat(30_000)),
        format!("{}n > 1", "! ".repeat(30_000)),
        vec!["n > 1"; 20_000].join(" and "),
        vec!["n > 1"; 20_000].join(" || "),
        format!("n{} > 1", " + n".repeat(20_000)),
    ] {
        let e = error(&format!(
            "{STUDY}[grid]\nn = [1]\nwhere = \"{filter}\"\n{VARIANT}"
        ));
        assert_eq!((e.line, e.key.as_deref()), (7, Some("grid.where")), "{e}");
        assert!(e.message.contains("nests more than 200 levels"), "{e}");
    }
    // Within the limit is fine.
    let fine = format!("{}n > 1{}", "(".repeat(150), ")".repeat(150));
    let m = parse(
        Path::new("ok.toml"),
        &format!("{STUDY}[grid]\nn = [1, 2]\nwhere = \"{fine}\"\n{VARIANT}"),
    )
    .unwrap();
    assert_eq!(kbench::plan::expand(&m).unwrap().len(), 1);
}

#[test]
fn nonsense_that_only_planning_finds_is_refused_at_its_line() {
    let cases: Vec<Case> = vec![
        ("division by zero at a point", format!("{STUDY}[grid]\nn = [0, 2]\nwhere = \"100 / n > 1\"\n{VARIANT}"), 7, 14, Some("grid.where"), "`/` divides by zero at the grid point"),
        ("modulo by zero at a point", format!("{STUDY}[grid]\nn = [2, 0]\nwhere = \"n > 1 or 7 % n == 1\"\n{VARIANT}"), 7, 21, Some("grid.where"), "`%` divides by zero"),
        ("division by a literal zero", format!("{STUDY}[grid]\nn = [2]\nwhere = \"n / 0 == 1\"\n{VARIANT}"), 7, 12, Some("grid.where"), "`/` divides by zero"),
        ("integer overflow", format!("{STUDY}[grid]\nn = [10, 100000000]\nwhere = \"n*n*n*n*n > 0\"\n{VARIANT}"), 7, 13, Some("grid.where"), "`*` overflows a 64-bit number"),
        ("a filter that never holds", format!("{STUDY}[grid]\nn = [1, 2]\nwhere = \"n != n\"\n{VARIANT}"), 7, 10, Some("grid.where"), "holds at no grid point"),
        ("a negative size", format!("{STUDY}[grid]\nn = [1, 2]\nwhere = \"n < 0\"\n{VARIANT}"), 7, 10, Some("grid.where"), "holds at no grid point"),
        ("a variant left with no point", format!("{STUDY}[grid]\nn = [1, 2]\nwhere = \"dtype == 'f32'\"\n[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\nparams = {{ dtype = [\"f64\"] }}\n[[variant]]\nname = \"d\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n"), 9, 8, Some("variant[0].name"), "variant `c` runs at no grid point"),
        ("a size no machine holds", format!("{STUDY}[grid]\nn = [1, {}]\n{VARIANT}", 1i64 << 62), 6, 5, Some("grid.n"), "past the 2^57 bytes"),
        ("a size no machine holds, in a variant", format!("{STUDY}[grid]\nn = [1]\n{VARIANT}params = {{ n = {{ pow2 = [60, 60] }} }}\n"), 11, 16, Some("variant[0].params.n"), "could never run"),
        ("pow2 with a string", format!("{STUDY}[grid]\nn = {{ pow2 = [5, 10, \"junk\"] }}\n{VARIANT}"), 6, 5, Some("grid.n"), "two integer exponents"),
        ("pow2 with a float", format!("{STUDY}[grid]\nn = {{ pow2 = [5, 7.5, 10] }}\n{VARIANT}"), 6, 5, Some("grid.n"), "two integer exponents"),
        ("scope on a cpu variant", format!("{STUDY}{GRID}{VARIANT}scope = \"kernel\"\n"), 11, 9, Some("variant[0].scope"), "a cpu variant times its computation alone"),
        ("host memory on a cpu variant", format!("{STUDY}{GRID}{VARIANT}host_memory = \"pinned\"\n"), 11, 15, Some("variant[0].host_memory"), "would be ignored"),
        ("block in a cpu-only grid", format!("{STUDY}[grid]\nn = [1]\nblock = [64]\n{VARIANT}"), 7, 9, Some("grid.block"), "applies only to cuda variants"),
        ("block in a cpu variant", format!("{STUDY}{GRID}{VARIANT}params = {{ block = [64] }}\n"), 11, 12, Some("variant[0].params.block"), "applies only to cuda variants"),
        ("measure scope in a cpu-only study", format!("{STUDY}{GRID}{VARIANT}[measure]\nscope = \"program\"\n"), 12, 9, Some("measure.scope"), "no cuda variant"),
        ("float tolerance in an integer study", format!("{STUDY}[grid]\nn = [1]\ndtype = [\"i32\"]\n{VARIANT}[accuracy]\nrel_tol = {{ f64 = 1e-9 }}\n"), 13, 19, Some("accuracy.rel_tol.f64"), "no case of this study is f64"),
        ("a single [variant]", format!("{STUDY}{GRID}[variant]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n"), 7, 1, Some("variant"), "write `[[variant]]`"),
        ("a struct name in serde's words", format!("{STUDY}{GRID}{VARIANT}[accuracy]\nrel_tol = 3\n"), 12, 11, Some("accuracy.rel_tol"), "expected a table, found 3"),
        ("an enum in serde's words", format!("{STUDY}{GRID}{VARIANT}[measure]\nscope = 3\n"), 12, 9, Some("measure.scope"), "expected a name in quotes"),
        ("a long study name", format!("[study]\nname = \"{}\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}", "a".repeat(101)), 2, 8, Some("study.name"), "1 to 100 ASCII letters"),
        ("a hidden study name", format!("[study]\nname = \".s\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}"), 2, 8, Some("study.name"), "not starting with `.`"),
        ("a control character in the title", format!("[study]\nname = \"s\"\ntitle = \"ok\\u001b[2J\"\nalgorithm = \"reduce\"\nseed = 1\n{GRID}{VARIANT}"), 3, 9, Some("study.title"), "control character \\u{1b}"),
        ("float tolerance in a study of a fixed integer type", "[study]\nname = \"s\"\nalgorithm = \"scan\"\nseed = 1\n[grid]\nn = [1]\n[[variant]]\nname = \"c\"\nbackend = \"cpu\"\nimpl = \"sequential\"\n[accuracy]\nrel_tol = { f32 = 1e-6 }\n".to_string(), 12, 19, Some("accuracy.rel_tol.f32"), "no case of this study is f32 (its dtypes: i32)"),
        ("a control character in a table title", format!("{STUDY}{GRID}{VARIANT}[[table]]\ntitle = \"a\\u0007b\"\nrows = \"variant\"\ncolumns = \"n\"\nvalue = \"median\"\n"), 12, 9, Some("table[0].title"), "control character \\u{7}"),
        ("a control character in a claim", format!("{STUDY}{GRID}{VARIANT}[[claim]]\ntext = \"x\\u001b[2J\"\nsource = \"s\"\nkind = \"passes\"\nvariants = [\"c\"]\n"), 12, 8, Some("claim[0].text"), "control character \\u{1b}"),
        ("a Unicode operator", format!("{STUDY}[grid]\nn = [1]\nwhere = \"n ≥ 1\"\n{VARIANT}"), 7, 12, Some("grid.where"), "unexpected character `≥` (write `>=`)"),
    ];
    let mut failures = Vec::new();
    for (what, text, line, column, key, words) in cases {
        let e = plan_error(&text);
        let ok = e.line == line
            && e.column == column
            && key.is_none_or(|k| e.key.as_deref() == Some(k))
            && e.message.contains(words);
        if !ok {
            failures.push(format!("{what}: expected {line}:{column} key {key:?} containing {words:?}, got\n{e}\n  key={:?}", e.key));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn errors_never_print_control_characters_raw() {
    let e = error(&format!(
        "[study]\nname = \"s\"\nalgorithm = \"red\\u0007uce\"\nseed = 1\n{GRID}{VARIANT}"
    ));
    let text = e.to_string();
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("\\u{7}"), "{text}");
}

#[test]
fn unreadable_manifests_are_refused_with_their_location() {
    let dir = tempfile::tempdir().unwrap();
    // A Latin-1 byte on line 7: reported there, not at 1:1.
    let latin1 = dir.path().join("latin1.toml");
    let mut bytes = format!("{STUDY}{GRID}# caf").into_bytes();
    bytes.extend([0xe9, b'\n']);
    bytes.extend(VARIANT.as_bytes());
    std::fs::write(&latin1, bytes).unwrap();
    let e = kbench::manifest::load(&latin1).unwrap_err();
    assert_eq!((e.line, e.column), (7, 6), "{e}");
    assert!(
        e.message.contains("not UTF-8") && e.message.contains("0xe9"),
        "{e}"
    );
    // Too large: refused without reading it all.
    let huge = dir.path().join("huge.toml");
    let title = "x".repeat(2 << 20);
    std::fs::write(
        &huge,
        format!("[study]\nname = \"s\"\ntitle = \"{title}\"\n"),
    )
    .unwrap();
    let e = kbench::manifest::load(&huge).unwrap_err();
    assert!(e.message.contains("larger than 1 MiB"), "{e}");
    // Not a file: a FIFO would block forever, /dev/zero would fill memory.
    for path in [Path::new("/dev/zero"), dir.path()] {
        let e = kbench::manifest::load(path).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
    }
    let fifo = dir.path().join("fifo.toml");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let e = kbench::manifest::load(&fifo).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
    } else {
        println!("mkfifo is not installed: the FIFO case is not checked");
    }
}
