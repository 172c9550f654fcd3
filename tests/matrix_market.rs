//! Matrix Market files through `kbench::algos::csr`: every fault a file can have is refused
//! naming the file, the line and what is wrong (never a panic); the banner's qualifiers
//! (`symmetric`, `pattern`, `integer`) are honoured; every file in datasets/ loads.

use std::path::{Path, PathBuf};

use kbench::algos::csr::{check_file, Csr, MatrixSource};

const GENERAL: &str = "%%MatrixMarket matrix coordinate real general";
const SYMMETRIC: &str = "%%MatrixMarket matrix coordinate real symmetric";

/// `text` written to `matrix.mtx` in a fresh temporary directory (removed with the TempDir).
fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("matrix.mtx");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn load(text: &str) -> Csr {
    let (_dir, path) = write(text);
    MatrixSource::File(path.clone())
        .load(0)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The error `text` gets, from `load` and from `check_file` alike.
fn error(text: &str) -> (PathBuf, String) {
    let (_dir, path) = write(text);
    let err = MatrixSource::File(path.clone()).load(0).unwrap_err();
    assert_eq!(check_file(&path).unwrap_err(), err);
    (path, err)
}

/// Checks that `text` is refused at `line` of its file, with `phrase` in the message.
fn refused_at(text: &str, line: usize, phrase: &str) -> String {
    let (path, err) = error(text);
    let prefix = format!("{}:{line}: ", path.display());
    assert!(
        err.starts_with(&prefix),
        "expected `{prefix}...`, got `{err}`"
    );
    assert!(err.contains(phrase), "expected `{phrase}` in `{err}`");
    err
}

/// Checks that `text` is refused naming its file and no line, with `phrase` in the message.
fn refused_without_line(text: &str, phrase: &str) -> String {
    let (path, err) = error(text);
    let prefix = format!("{}: ", path.display());
    assert!(
        err.starts_with(&prefix),
        "expected `{prefix}...`, got `{err}`"
    );
    assert!(err.contains(phrase), "expected `{phrase}` in `{err}`");
    err
}

/// A 3 x 3 file: the banner, then `lines` (size line and entries).
fn general(lines: &str) -> String {
    format!("{GENERAL}\n{lines}")
}

#[test]
fn a_zero_index_is_refused_at_its_line_the_seeds_fault() {
    let text = general("% 0-based, as the seed's file\n3 3 3\n1 1 4\n0 2 1\n3 3 4\n");
    refused_at(
        &text,
        5,
        "index 0 in `0 2 1`: Matrix Market indices start at 1",
    );
    refused_at(&general("3 3 2\n1 1 4\n2 0 1\n"), 4, "indices start at 1");
}

#[test]
fn a_negative_index_is_a_syntax_error_at_its_line() {
    let err = refused_at(
        &general("3 3 3\n1 1 4\n-1 2 3.0\n3 3 4\n"),
        4,
        "expected an index",
    );
    assert!(
        err.contains("column 1") && err.contains("`-1 2 3.0`"),
        "{err}"
    );
    refused_at(
        &general("3 3 2\n1 1 4\n2 -2 1\n"),
        4,
        "column 3: expected an index",
    );
}

#[test]
fn an_index_beyond_the_size_line_is_named_with_the_limit() {
    let text = general("3 3 3\n1 1 4\n4 1 1\n3 3 4\n");
    refused_at(
        &text,
        4,
        "row index 4 is beyond the 3 rows of the size line (line 2)",
    );
    let text = general("3 3 3\n1 1 4\n1 7 1\n3 3 4\n");
    refused_at(&text, 4, "column index 7 is beyond the 3 columns");
    // Past usize: nalgebra-sparse would panic on it; refused like any other.
    let text = general("3 3 2\n1 1 4\n99999999999999999999999 1 1\n");
    refused_at(
        &text,
        4,
        "row index 99999999999999999999999 is beyond the 3 rows",
    );
    let text = general("3 3 2\n1 1 4\n2 99999999999999999999999 1\n");
    refused_at(&text, 4, "column index 99999999999999999999999 is beyond");
    let text = general("3 3 2\n1 1 4\n2 99999999999999999999999-1\n");
    refused_at(&text, 4, "column index 99999999999999999999999 is beyond");
}

#[test]
fn a_size_line_that_lies_about_the_entries_is_refused_at_the_size_line() {
    // Truncated: the body ends early.
    let text = general("% a comment\n3 3 5\n1 1 4\n2 2 4\n3 3 4\n");
    refused_at(
        &text,
        3,
        "the size line promises 5 entries, the body holds 3",
    );
    // The other way.
    let text = general("3 3 2\n1 1 4\n2 2 4\n\n3 3 4\n");
    refused_at(
        &text,
        2,
        "the size line promises 2 entries, the body holds 3",
    );
}

#[test]
fn a_body_line_cut_mid_entry_is_refused_at_its_line() {
    let err = refused_at(
        &general("3 3 3\n1 1 4\n2 2\n3 3 4\n"),
        4,
        "an entry here is `row column value`; this line has 2 fields: `2 2`",
    );
    assert!(err.contains("`row column value`"), "{err}");
    // Cut as the file ends, without a newline.
    refused_at(
        &general("3 3 3\n1 1 4\n2 2 4\n3 3"),
        5,
        "this line has 2 fields: `3 3`",
    );
    // Cut mid-number.
    refused_at(
        &general("3 3 3\n1 1 4\n2 2 4.5e\n3 3 4\n"),
        4,
        "expected a number",
    );
    // The grammar reads `2 26` as 2, 2, 6 and `2 2-1` as 2, 2, -1; the fields written are
    // what counts.
    refused_at(
        &general("30 30 3\n1 1 4\n2 24\n3 3 4\n"),
        4,
        "this line has 2 fields: `2 24`",
    );
    refused_at(
        &general("3 3 3\n1 1 4\n2 2-1\n3 3 4\n"),
        4,
        "2 fields: `2 2-1`",
    );
    // Two entries run together.
    refused_at(
        &general("3 3 2\n1 1 4 2 2 4\n3 3 4\n"),
        3,
        "this line has 6 fields: `1 1 4 2 2 4`",
    );
}

#[test]
fn a_non_square_matrix_is_refused_at_the_size_line() {
    let text = general("% rectangular\n3 4 3\n1 1 4\n2 2 4\n3 3 4\n");
    refused_at(
        &text,
        3,
        "the size line `3 4 3` is not square; SYMGS needs a square matrix",
    );
    let text = format!("{SYMMETRIC}\n3 4 3\n1 1 4\n2 2 4\n3 3 4\n");
    refused_at(&text, 2, "`3 4 3` is not square");
}

#[test]
fn a_zero_or_missing_diagonal_is_refused() {
    refused_at(
        &general("3 3 3\n1 1 4\n2 2 0\n3 3 4\n"),
        4,
        "the diagonal entry of row 2 is 0",
    );
    // Duplicates that cancel: the last of them is named.
    refused_at(
        &general("3 3 4\n1 1 4\n2 2 1.5\n3 3 4\n2 2 -1.5\n"),
        6,
        "row 2 is 0 (duplicates summed)",
    );
    refused_without_line(
        &general("3 3 3\n1 1 4\n3 2 1\n3 3 4\n"),
        "row 2 has no diagonal entry",
    );
    refused_without_line(&general("3 3 0\n"), "row 1 has no diagonal entry");
    // A size line promising 2^31 - 1 rows in a file of a few bytes: named, not allocated for.
    refused_without_line(
        &general("2147483647 2147483647 2\n1 1 4\n3 3 4\n"),
        "row 2 has no diagonal entry",
    );
}

#[test]
fn non_finite_values_are_refused_at_their_line() {
    // The grammar takes `NaN` and `inf` (and 1e999 overflows to inf); they are refused here.
    for value in ["NaN", "inf", "-inf", "1e999"] {
        let text = general(&format!("3 3 3\n1 1 4\n2 2 {value}\n3 3 4\n"));
        refused_at(&text, 4, "is not a finite number");
    }
    // Its grammar does not take `nan`: a syntax error at the value.
    refused_at(
        &general("3 3 3\n1 1 4\n2 2 nan\n3 3 4\n"),
        4,
        "column 5: expected a number",
    );
    // Finite entries whose sum is not.
    refused_without_line(
        &general("3 3 4\n1 1 1e308\n1 1 1e308\n2 2 4\n3 3 4\n"),
        "row 1, column 1 sum to a non-finite value",
    );
}

#[test]
fn unsupported_banners_are_refused_at_line_1() {
    for (banner, phrase) in [
        (
            "coordinate complex general",
            "complex matrices are not read",
        ),
        ("array real general", "dense (`array`) files are not read"),
        (
            "coordinate real skew-symmetric",
            "skew-symmetric matrix has a zero diagonal",
        ),
        (
            "coordinate complex hermitian",
            "hermitian (complex) matrices are not read",
        ),
    ] {
        let text = format!("%%MatrixMarket matrix {banner}\n3 3 3\n1 1 4\n2 2 4\n3 3 4\n");
        refused_at(&text, 1, phrase);
    }
}

#[test]
fn a_symmetric_file_with_an_entry_above_the_diagonal_is_refused_at_its_line() {
    let text = format!("{SYMMETRIC}\n3 3 4\n1 1 4\n2 1 -1\n1 3 -1\n3 3 4\n");
    refused_at(
        &text,
        5,
        "`1 3 -1` lies above the diagonal: a symmetric file stores the lower triangle only",
    );
}

#[test]
fn a_missing_or_garbled_banner_is_refused_at_its_line() {
    refused_at("3 3 3\n1 1 4\n2 2 4\n3 3 4\n", 1, "expected the banner");
    let expected = "expected the banner `%%MatrixMarket matrix coordinate real|integer|pattern \
                    general|symmetric`, found nothing";
    refused_at("", 1, expected);
    for banner in [
        "%MatrixMarket matrix coordinate real general",
        "%%MatrixMarket matrix coordinate real",
        "%%MatrixMarket matrix coordinate real general extra",
        "%%MatrixMarket vector coordinate real general",
        "%%MatrixMarket matrix coordinate float general",
        "%%MatrixMarket matrix sparse real general",
        "%%MatrixMarket matrix coordinate real upper",
    ] {
        let text = format!("\n{banner}\n3 3 3\n1 1 4\n2 2 4\n3 3 4\n");
        refused_at(&text, 2, &format!("found `{banner}`"));
    }
    // Words run together: the grammar's implicit whitespace would take it, this reader does not.
    refused_at(
        "%%MatrixMarket matrixcoordinate real general\n1 1 1\n1 1 1\n",
        1,
        "expected the banner",
    );
    // Two spaces after %%MatrixMarket: the crate's grammar wants one.
    let text = "%%MatrixMarket  matrix coordinate real general\n1 1 1\n1 1 1\n";
    let err = refused_at(text, 1, "column 1: expected the banner");
    assert!(!err.contains("comments"), "{err}");
}

#[test]
fn other_malformed_files_are_refused_at_their_line() {
    // Comments belong to the header.
    refused_at(
        &general("3 3 3\n1 1 4\n% late\n2 2 4\n3 3 4\n"),
        4,
        "comments belong between the banner and the size line",
    );
    // nalgebra-sparse takes no blank line between the comments and the size line.
    refused_at(
        &general("% c\n\n3 3 3\n1 1 4\n2 2 4\n3 3 4\n"),
        3,
        "found a blank line (this reader takes no blank line before the size line)",
    );
    refused_at(
        &general("3 3\n1 1 4\n"),
        2,
        "expected the size line `rows columns entries`, found `3 3`",
    );
    refused_at(&general("3 3 1 1\n1 1 4\n"), 2, "found `3 3 1 1`");
    refused_at(&general("3 x 3\n1 1 4\n"), 2, "expected");
    // A value that is not an integer in an integer file, or too big for 64 bits.
    let integer = "%%MatrixMarket matrix coordinate integer general\n2 2 2\n1 1 2\n";
    refused_at(
        &format!("{integer}2 2 2.5\n"),
        4,
        "`2.5` is not a 64-bit integer (the banner says integer): `2 2 2.5`",
    );
    refused_at(
        &format!("{integer}2 2 99999999999999999999\n"),
        4,
        "not a 64-bit integer",
    );
    // A value in a pattern file.
    let pattern = "%%MatrixMarket matrix coordinate pattern general\n2 2 2\n1 1\n";
    refused_at(
        &format!("{pattern}2 2 5\n"),
        4,
        "an entry here is `row column`; this line has 3 fields: `2 2 5`",
    );
    // Sizes beyond 32-bit indices.
    refused_at(
        &general("3000000000 3000000000 1\n1 1 1\n"),
        2,
        "the size line `3000000000 3000000000 1` does not fit the 32-bit indices of CSR here: \
         rows and entries must stay below 2^31 = 2147483648",
    );
    refused_at(
        &general("2 2 99999999999999999999999\n1 1 1\n"),
        2,
        "`2 2 99999999999999999999999` does not fit",
    );
    // Not UTF-8.
    let (_dir, path) = write("");
    std::fs::write(
        &path,
        b"%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 \xff\n",
    )
    .unwrap();
    let err = check_file(&path).unwrap_err();
    assert_eq!(err, format!("{}:3: not UTF-8 text", path.display()));
    // Missing file.
    let missing = path.with_file_name("absent.mtx");
    let err = check_file(&missing).unwrap_err();
    assert!(
        err.starts_with(&format!("{}: ", missing.display())),
        "{err}"
    );
}

#[test]
fn a_file_too_big_for_memory_is_refused_before_it_is_read() {
    if !Path::new("/proc/meminfo").exists() {
        return;
    }
    // A sparse file of 4 TiB: its length is all that is looked at.
    let (_dir, path) = write("");
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(4 << 40)
        .unwrap();
    let err = refused_without_line_at(&path);
    assert!(
        err.contains("this 4096.00 GiB file takes about")
            && err.contains("GiB is available (MemAvailable)"),
        "{err}"
    );
}

fn refused_without_line_at(path: &Path) -> String {
    let err = check_file(path).unwrap_err();
    assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
    err
}

// ---- What files mean ----

#[test]
fn a_symmetric_file_means_both_triangles() {
    let csr = MatrixSource::parse("hpcg:3x2x2").unwrap().load(0).unwrap();
    let lower = csr.to_matrix_market(true).unwrap();
    let both = csr.to_matrix_market(false).unwrap();
    assert!(lower.starts_with(SYMMETRIC) && both.starts_with(GENERAL));
    assert!(lower.lines().count() < both.lines().count());
    assert_eq!(load(&lower), csr);
    assert_eq!(load(&both), csr);
    // The seed read such a file as lower triangular; here the upper triangle is there.
    let small = load(&format!("{SYMMETRIC}\n2 2 3\n1 1 4\n2 1 -1.5\n2 2 4\n"));
    assert_eq!(small.row(0), (&[0, 1][..], &[4.0, -1.5][..]));
    assert_eq!(small.row(1), (&[0, 1][..], &[-1.5, 4.0][..]));
    // Writing a matrix that is not symmetric as symmetric is refused.
    let skewed = load(&general("2 2 3\n1 1 4\n1 2 1\n2 2 4\n"));
    assert!(skewed.to_matrix_market(true).is_err());
}

#[test]
fn pattern_entries_are_one_and_integers_are_read_as_values() {
    let pattern =
        load("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 4\n1 1\n2 2\n3 1\n3 3\n");
    assert_eq!(pattern.row_ptr, vec![0, 2, 3, 5]);
    assert_eq!(pattern.col, vec![0, 2, 1, 0, 2]);
    assert_eq!(pattern.val, vec![1.0; 5]);
    let integer =
        load("%%MatrixMarket matrix coordinate integer general\n2 2 3\n1 1 7\n2 1 -3\n2 2 +12\n");
    assert_eq!(integer.val, vec![7.0, -3.0, 12.0]);
    // Banner words in any case.
    let upper = load("%%MATRIXMARKET MATRIX COORDINATE REAL GENERAL\n1 1 1\n1 1 2.5\n");
    assert_eq!(upper.val, vec![2.5]);
}

#[test]
fn duplicates_are_summed_comments_and_blank_lines_skipped() {
    let text = "\n  \n%%MatrixMarket matrix coordinate real general\r\n\
                % a comment\n  % an indented one\n%\n\
                2 2 4\n1 1 1.5\n\n   \n2 2 -3.E+2  \n\t1 1 .5\r\n2 1 1e-1\n\n";
    let csr = load(text);
    assert_eq!(csr.row_ptr, vec![0, 1, 3]);
    assert_eq!(csr.col, vec![0, 0, 1]);
    assert_eq!(csr.val, vec![2.0, 0.1, -300.0]);
    // Duplicates in a symmetric file: one stored triangle, summed, then mirrored.
    let sym = load(&format!("{SYMMETRIC}\n2 2 4\n1 1 1\n2 1 2\n2 1 3\n2 2 9\n"));
    assert_eq!(sym.val, vec![1.0, 5.0, 5.0, 9.0]);
}

#[test]
fn a_files_shape_comes_from_its_size_line() {
    let (_d1, general_path) = write(&general("% c\n3 3 4\n1 1 4\n2 2 4\n3 3 4\n3 1 1\n"));
    assert_eq!(MatrixSource::File(general_path).shape().unwrap(), (3, 4));
    let text = format!("{SYMMETRIC}\n3 3 4\n1 1 4\n2 2 4\n3 3 4\n3 1 1\n");
    let (_d2, symmetric_path) = write(&text);
    let source = MatrixSource::File(symmetric_path);
    assert_eq!(source.shape().unwrap(), (3, 8));
    assert_eq!(source.load(0).unwrap().nnz(), 5);
    // Faults in the header are refused there too, with their line.
    for (text, line, phrase) in [
        (general("3 4 3\n"), 2, "SYMGS needs a square matrix"),
        (general("% c\n3 3\n"), 3, "expected the size line"),
        (
            "%%MatrixMarket matrix array real general\n3 3\n".to_string(),
            1,
            "dense",
        ),
        ("hello\n".to_string(), 1, "expected the banner"),
    ] {
        let (_dir, path) = write(&text);
        let err = MatrixSource::File(path.clone()).shape().unwrap_err();
        assert!(
            err.starts_with(&format!("{}:{line}: ", path.display())),
            "{err}"
        );
        assert!(err.contains(phrase), "{err}");
    }
    let (_dir, path) = write(&general("% only comments\n"));
    let err = MatrixSource::File(path.clone()).shape().unwrap_err();
    assert_eq!(
        err,
        format!("{}: no size line in the first 2 lines", path.display())
    );
}

/// How long nalgebra-sparse's reading takes: its pest parser, not the disk, sets the pace.
#[test]
#[ignore = "a timing: cargo test --release --test it matrix_market::reading_a_large -- --ignored"]
fn reading_a_large_file_timing() {
    let csr = MatrixSource::parse("hpcg:64").unwrap().load(0).unwrap();
    let (_dir, path) = write(&csr.to_matrix_market(true).unwrap());
    let bytes = std::fs::metadata(&path).unwrap().len();
    let start = std::time::Instant::now();
    let read = MatrixSource::File(path).load(0).unwrap();
    let seconds = start.elapsed().as_secs_f64();
    assert_eq!(read, csr);
    println!(
        "read {:.1} MB ({} nonzeros) in {seconds:.2} s: {:.1} MB/s",
        bytes as f64 / 1e6,
        read.nnz(),
        bytes as f64 / 1e6 / seconds
    );
}

// ---- datasets/ ----

fn datasets() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("datasets")
}

fn dataset(name: &str) -> Csr {
    MatrixSource::File(datasets().join(name)).load(0).unwrap()
}

#[test]
fn every_dataset_loads_within_its_shape() {
    let mut loaded = 0;
    for entry in std::fs::read_dir(datasets()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "mtx") {
            let source = MatrixSource::File(path.clone());
            let csr = source.load(0).unwrap_or_else(|e| panic!("{e}"));
            let (rows, bound) = source.shape().unwrap();
            assert_eq!(csr.n, rows, "{}", path.display());
            assert!(csr.nnz() <= bound, "{}", path.display());
            assert!(
                std::fs::metadata(&path).unwrap().len() < 50_000,
                "{}",
                path.display()
            );
            loaded += 1;
        }
    }
    assert!(loaded >= 5, "{loaded} datasets");
}

#[test]
fn datasets_are_what_the_readme_says() {
    let generated = |value: &str| MatrixSource::parse(value).unwrap().load(0).unwrap();
    assert_eq!(dataset("hpcg_4x4x4.mtx"), generated("hpcg:4"));
    assert_eq!(dataset("laplace2d_8x8.mtx"), generated("laplace2d:8"));
    // The structure of laplace2d:6, every entry 1.
    let mut ones = generated("laplace2d:6");
    ones.val.fill(1.0);
    assert_eq!(dataset("pattern_laplace2d_6x6.mtx"), ones);
    // Tridiagonal: 4 on the diagonal, -1 below, -2 above.
    let tri = dataset("integer_tridiagonal_12.mtx");
    assert_eq!((tri.n, tri.nnz()), (12, 34));
    for i in 0..12 {
        for (&j, &v) in tri.row(i).0.iter().zip(tri.row(i).1) {
            let expected = match j as i64 - i as i64 {
                -1 => -1.0,
                0 => 4.0,
                1 => -2.0,
                _ => panic!("({i}, {j}) off the three diagonals"),
            };
            assert_eq!(v, expected);
        }
    }
    // NIST's example: the 5 x 5 matrix of "The Matrix Market Exchange Formats: Initial Design".
    let nist = dataset("nist_example_5x5.mtx");
    assert_eq!(nist.diagonal(), vec![1.0, 10.5, 0.015, -280.0, 12.0]);
    assert_eq!(nist.row(0), (&[0, 3][..], &[1.0, 6.0][..]));
    assert_eq!(nist.row(3), (&[1, 3, 4][..], &[250.5, -280.0, 33.32][..]));
    assert_eq!(nist.nnz(), 8);
}

/// Rewrites the generated datasets (the README says how each is made).
#[test]
#[ignore = "writes datasets/: cargo test --test it matrix_market::write_datasets -- --ignored"]
fn write_datasets() {
    let generated = |value: &str| MatrixSource::parse(value).unwrap().load(0).unwrap();
    let with_comment = |text: String, comment: &str| {
        let (banner, rest) = text.split_once('\n').unwrap();
        format!("{banner}\n% {comment}\n{rest}")
    };
    let save = |name: &str, text: String| std::fs::write(datasets().join(name), text).unwrap();
    save(
        "hpcg_4x4x4.mtx",
        with_comment(
            generated("hpcg:4").to_matrix_market(true).unwrap(),
            "kbench's hpcg:4 (HPCG's 27-point stencil on 4x4x4), lower triangle",
        ),
    );
    save(
        "laplace2d_8x8.mtx",
        with_comment(
            generated("laplace2d:8").to_matrix_market(false).unwrap(),
            "kbench's laplace2d:8 (the 5-point Laplacian on 8x8), every entry",
        ),
    );
    let lower = generated("laplace2d:6").to_matrix_market(true).unwrap();
    let mut pattern = String::from("%%MatrixMarket matrix coordinate pattern symmetric\n");
    pattern.push_str("% the structure of kbench's laplace2d:6, lower triangle; every entry 1\n");
    let mut lines = lower.lines().skip(1);
    pattern.push_str(&format!("{}\n", lines.next().unwrap()));
    for entry in lines {
        let (row_column, _value) = entry.rsplit_once(' ').unwrap();
        pattern.push_str(&format!("{row_column}\n"));
    }
    save("pattern_laplace2d_6x6.mtx", pattern);
    let mut tri = String::from("%%MatrixMarket matrix coordinate integer general\n");
    tri.push_str("% tridiagonal, not symmetric: 4 on the diagonal, -1 below, -2 above\n12 12 34\n");
    for i in 1..=12 {
        for (j, v) in [(i - 1, -1), (i, 4), (i + 1, -2)] {
            if (1..=12).contains(&j) {
                tri.push_str(&format!("{i} {j} {v}\n"));
            }
        }
    }
    save("integer_tridiagonal_12.mtx", tri);
}

/// Every file one edit away from a valid one (cut at a byte, a byte deleted, or replaced by a
/// digit, a long number, a sign, a space, a newline, a comment mark, a letter or a point) loads
/// or is refused naming the file, and a line the file has where it names one: never a panic.
#[test]
fn files_one_edit_from_valid_ones_never_panic() {
    let small = MatrixSource::parse("hpcg:2x2x1").unwrap().load(0).unwrap();
    let valid = [
        small.to_matrix_market(true).unwrap(),
        std::fs::read_to_string(datasets().join("nist_example_5x5.mtx")).unwrap(),
        "%%MatrixMarket matrix coordinate pattern symmetric\n% c\n3 3 4\n1 1\n2 2\n3 1\n3 3\n"
            .to_string(),
        "%%MatrixMarket matrix coordinate integer general\n2 2 3\n1 1 7\n2 1 -3\n2 2 12\n"
            .to_string(),
    ];
    let (_dir, path) = write("");
    let prefix = format!("{}:", path.display());
    let (mut loaded, mut refused_with_line, mut refused_without) = (0, 0, 0);
    for text in &valid {
        let bytes = text.as_bytes();
        let mut edits: Vec<Vec<u8>> = Vec::new();
        for at in 0..bytes.len() {
            edits.push(bytes[..at].to_vec());
            edits.push([&bytes[..at], &bytes[at + 1..]].concat());
            for insert in [
                "0",
                "99999999999999999999999",
                "-",
                " ",
                "\n",
                "%",
                "x",
                ".",
            ] {
                edits.push([&bytes[..at], insert.as_bytes(), &bytes[at + 1..]].concat());
            }
        }
        for edit in edits {
            std::fs::write(&path, &edit).unwrap();
            let lines = edit.split(|&b| b == b'\n').count();
            match check_file(&path) {
                Ok(()) => loaded += 1,
                Err(err) => {
                    let rest = err.strip_prefix(&prefix).unwrap_or_else(|| panic!("{err}"));
                    match rest
                        .split_once(": ")
                        .and_then(|(l, _)| l.parse::<usize>().ok())
                    {
                        Some(line) => {
                            assert!((1..=lines).contains(&line), "line {line} of {lines}: {err}");
                            refused_with_line += 1;
                        }
                        None => {
                            assert!(rest.starts_with(' '), "{err}");
                            refused_without += 1;
                        }
                    }
                }
            }
        }
    }
    println!("{loaded} loaded, {refused_with_line} refused at a line, {refused_without} without");
    assert!(loaded > 0 && refused_with_line > refused_without);
}
