//! Square sparse matrices in CSR form for the SYMGS study (seed 002): the `Csr` type, where a
//! case's matrix comes from (`MatrixSource`: a Matrix Market file or a generator: HPCG's
//! 27-point stencil, the 2-D 5-point Laplacian, a random diagonally dominant matrix), and the
//! checks that refuse a malformed file naming its path and line.
//!
//! Matrix Market text is parsed by nalgebra-sparse. This module only picks the scalar type from
//! the banner, refuses the numbers that crate would panic on, and, when it reports a fault
//! without a line, finds the line: once the crate has accepted the syntax, the data lines are
//! exactly the non-comment, non-blank lines after the size line, split on spaces and tabs (the
//! grammar's whitespace). The grammar needs no whitespace between tokens (it reads `2 26` as
//! 2, 2, 6), so a line whose fields are not the entry's is refused too.

use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use nalgebra_sparse::io::{load_coo_from_matrix_market_str, MatrixMarketError};
use nalgebra_sparse::io::{MatrixMarketErrorKind, MatrixMarketScalar};
use nalgebra_sparse::CooMatrix;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::input_file;

/// The most rows, and the most stored nonzeros, a `Csr` holds: its indices are i32, what the
/// kernels take.
pub const MAX_INDEX: usize = i32::MAX as usize;

/// Reading a file holds its text, pest's token queue (10 tokens of some 40 bytes a data line)
/// and the crate's triplets (24 bytes an entry, twice off the diagonal of a symmetric file) at
/// once: the peak resident memory measured was 28 to 32 times the file's bytes (hpcg:32 and
/// hpcg:64 written general and symmetric, 6 to 58 MB).
const READ_BYTES_PER_FILE_BYTE: u64 = 32;

/// The most bytes a Matrix Market file may have: 2^31 entries of some 30 bytes each.
const MAX_FILE_BYTES: u64 = 64 << 30;

/// A Matrix Market file, in messages about reading one.
const WHAT: &str = "a Matrix Market file";

/// The most bytes `shape` reads looking for the size line.
const HEAD_BYTES: u64 = 16 << 20;

/// What a manifest may write for a matrix, for error messages.
const FORMS: &str = "a Matrix Market file path, or hpcg:N (an N x N x N grid) or hpcg:NXxNYxNZ, \
                     laplace2d:N or laplace2d:NXxNY, random:NxPER_ROW (every size >= 1)";

/// A square sparse matrix in CSR form: each row's column indices ascending and unique
/// (duplicates in a file are summed), every diagonal entry present and nonzero, all values
/// finite.
#[derive(Debug, Clone, PartialEq)]
pub struct Csr {
    pub n: usize,
    pub row_ptr: Vec<i32>,
    pub col: Vec<i32>,
    pub val: Vec<f64>,
}

impl Csr {
    pub fn nnz(&self) -> usize {
        self.val.len()
    }

    /// Columns and values of row i.
    pub fn row(&self, i: usize) -> (&[i32], &[f64]) {
        let (start, end) = (self.row_ptr[i] as usize, self.row_ptr[i + 1] as usize);
        (&self.col[start..end], &self.val[start..end])
    }

    pub fn diagonal(&self) -> Vec<f64> {
        (0..self.n)
            .map(|i| {
                let (cols, vals) = self.row(i);
                cols.binary_search(&(i as i32)).map_or(0.0, |k| vals[k])
            })
            .collect()
    }

    /// Builds from triplets (0-based), summing duplicates in the order given, checking
    /// square/diagonal/finite. Errors as String (rows 0-based). The reader and the random
    /// generator share its assembly; HPCG and the Laplacian are built in CSR order directly.
    pub fn from_triplets(
        n: usize,
        rows: &[usize],
        cols: &[usize],
        vals: &[f64],
    ) -> Result<Csr, String> {
        if rows.len() != cols.len() || rows.len() != vals.len() {
            return Err(format!(
                "{} rows, {} columns and {} values: one of each a triplet",
                rows.len(),
                cols.len(),
                vals.len()
            ));
        }
        if let Some(fault) = fewer_entries_than_rows(n, rows, cols) {
            return Err(fault.zero_based(n));
        }
        let csr = assemble(n, vals.len(), |k| (rows[k], cols[k], vals[k]))
            .map_err(|f| f.zero_based(n))?;
        check_diagonal(&csr).map_err(|f| f.zero_based(n))?;
        Ok(csr)
    }

    /// Whether A equals its transpose, values included.
    pub fn is_symmetric(&self) -> bool {
        (0..self.n).all(|i| {
            let (cols, vals) = self.row(i);
            cols.iter().zip(vals).all(|(&j, &v)| {
                let (cols_j, vals_j) = self.row(j as usize);
                cols_j
                    .binary_search(&(i as i32))
                    .is_ok_and(|k| vals_j[k] == v)
            })
        })
    }

    /// The matrix as Matrix Market text, `coordinate real`: `general` writes every entry,
    /// `symmetric` the lower triangle only (refused if the matrix is not symmetric). Values
    /// round-trip exactly.
    pub fn to_matrix_market(&self, symmetric: bool) -> Result<String, String> {
        if symmetric && !self.is_symmetric() {
            return Err("the matrix is not symmetric; write it as general".into());
        }
        let kept = |i: usize, j: i32| !symmetric || j as usize <= i;
        let entries: usize = (0..self.n)
            .map(|i| self.row(i).0.iter().filter(|&&j| kept(i, j)).count())
            .sum();
        let storage = if symmetric { "symmetric" } else { "general" };
        let mut text = format!(
            "%%MatrixMarket matrix coordinate real {storage}\n{} {} {entries}\n",
            self.n, self.n
        );
        for i in 0..self.n {
            let (cols, vals) = self.row(i);
            for (&j, &v) in cols.iter().zip(vals) {
                if kept(i, j) {
                    text.push_str(&format!("{} {} {}\n", i + 1, j + 1, number_text(v)));
                }
            }
        }
        Ok(text)
    }
}

/// A value as the Matrix Market grammar reads it back bit for bit: integers plainly, others in
/// Rust's shortest round-trip exponent form (`1.05e1`).
fn number_text(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:e}")
    }
}

/// What `assemble` or `check_diagonal` found wrong, before it is told in the caller's terms
/// (0-based triplets, or a file's lines).
#[derive(Debug)]
enum Fault {
    TooLarge { n: usize, nnz: usize },
    OutOfRange { k: usize, row: usize, col: usize },
    NotFinite { k: usize, value: f64 },
    SumNotFinite { row: usize, col: usize },
    NoDiagonal { row: usize },
    ZeroDiagonal { row: usize },
}

impl Fault {
    /// The message for 0-based triplets of an n x n matrix.
    fn zero_based(&self, n: usize) -> String {
        match *self {
            Fault::TooLarge { n, nnz } => too_large(n, nnz),
            Fault::OutOfRange { k, row, col } => {
                format!("triplet {k}: (row {row}, column {col}) lies outside the {n} x {n} matrix")
            }
            Fault::NotFinite { k, value } => {
                format!("triplet {k}: the value {value} is not finite")
            }
            Fault::SumNotFinite { row, col } => {
                format!("the entries at (row {row}, column {col}) sum to a non-finite value")
            }
            Fault::NoDiagonal { row } => format!("row {row} (0-based) has no diagonal entry"),
            Fault::ZeroDiagonal { row } => format!("row {row}'s (0-based) diagonal entry is 0"),
        }
    }
}

fn too_large(n: usize, nnz: usize) -> String {
    format!(
        "{n} rows and {nnz} stored nonzeros do not fit the 32-bit indices of CSR here: \
         both must stay below 2^31 = {}",
        MAX_INDEX + 1
    )
}

/// CSR from `len` triplets, `entry(k)` giving triplet k (0-based row, column, value): rows by
/// counting, each row sorted by column, duplicates summed in the order given. The diagonal is
/// not checked (the random generator sets it afterwards).
fn assemble(
    n: usize,
    len: usize,
    entry: impl Fn(usize) -> (usize, usize, f64),
) -> Result<Csr, Fault> {
    if n > MAX_INDEX {
        return Err(Fault::TooLarge { n, nnz: len });
    }
    // starts[i]: where row i's entries go; the counts first, then their running sum.
    let mut starts = vec![0usize; n + 1];
    for k in 0..len {
        let (row, col, value) = entry(k);
        if row >= n || col >= n {
            return Err(Fault::OutOfRange { k, row, col });
        }
        if !value.is_finite() {
            return Err(Fault::NotFinite { k, value });
        }
        starts[row + 1] += 1;
    }
    for i in 0..n {
        starts[i + 1] += starts[i];
    }
    let mut next = starts[..n].to_vec();
    let mut col = vec![0i32; len];
    let mut val = vec![0f64; len];
    for k in 0..len {
        let (row, c, v) = entry(k);
        col[next[row]] = c as i32;
        val[next[row]] = v;
        next[row] += 1;
    }
    drop(next);

    // Sort each row (stably: duplicates are summed in the order given) and compact it forward
    // over the scattered entries; `starts[i]` becomes row i's start after compaction.
    let mut pairs: Vec<(i32, f64)> = Vec::new();
    let mut end = 0;
    for i in 0..n {
        let (from, to) = (starts[i], starts[i + 1]);
        pairs.clear();
        pairs.extend(
            col[from..to]
                .iter()
                .copied()
                .zip(val[from..to].iter().copied()),
        );
        pairs.sort_by_key(|&(c, _)| c);
        starts[i] = end;
        for &(c, v) in &pairs {
            if end > starts[i] && col[end - 1] == c {
                val[end - 1] += v;
            } else {
                col[end] = c;
                val[end] = v;
                end += 1;
            }
        }
        if let Some(k) = (starts[i]..end).find(|&k| !val[k].is_finite()) {
            return Err(Fault::SumNotFinite {
                row: i,
                col: col[k] as usize,
            });
        }
    }
    starts[n] = end;
    if end > MAX_INDEX {
        return Err(Fault::TooLarge { n, nnz: end });
    }
    col.truncate(end);
    val.truncate(end);
    Ok(Csr {
        n,
        row_ptr: starts.iter().map(|&p| p as i32).collect(),
        col,
        val,
    })
}

/// Every row has a nonzero diagonal entry: SYMGS divides by it.
fn check_diagonal(csr: &Csr) -> Result<(), Fault> {
    for row in 0..csr.n {
        let (cols, vals) = csr.row(row);
        match cols.binary_search(&(row as i32)) {
            Err(_) => return Err(Fault::NoDiagonal { row }),
            Ok(k) if vals[k] == 0.0 => return Err(Fault::ZeroDiagonal { row }),
            Ok(_) => {}
        }
    }
    Ok(())
}

// ---- Sources ----

/// Where a case's matrix comes from: a manifest axis value.
#[derive(Debug, Clone, PartialEq)]
pub enum MatrixSource {
    File(PathBuf),
    Hpcg { nx: usize, ny: usize, nz: usize },
    Laplace2d { nx: usize, ny: usize },
    Random { n: usize, per_row: usize },
}

impl MatrixSource {
    /// "hpcg:104" (a cube) or "hpcg:16x16x32"; "laplace2d:1000" (square) or
    /// "laplace2d:300x200"; "random:100000x27" (n rows, about per_row nonzeros a row including
    /// the diagonal). A value with a `name:` prefix that is not one of these, or a bad size, is
    /// an Err explaining the accepted forms. Anything without such a prefix is a file path:
    /// Ok(File).
    pub fn parse(value: &str) -> Result<MatrixSource, String> {
        let Some((name, size)) = value.split_once(':').filter(|(name, _)| is_name(name)) else {
            return Ok(MatrixSource::File(PathBuf::from(value)));
        };
        let bad = |why: &str| Err(format!("matrix `{value}`: {why}; expected {FORMS}"));
        if !["hpcg", "laplace2d", "random"].contains(&name) {
            return bad(&format!(
                "no generator `{name}` (a file whose name has a colon: write it ./{value})"
            ));
        }
        let Some(sizes) = size
            .split('x')
            .map(|s| match is_digits(s) {
                true => s.parse::<usize>().ok().filter(|&v| v >= 1),
                false => None,
            })
            .collect::<Option<Vec<usize>>>()
        else {
            return bad(&format!("`{size}` is not sizes >= 1 joined by x"));
        };
        match (name, &sizes[..]) {
            ("hpcg", &[n]) => Ok(MatrixSource::Hpcg {
                nx: n,
                ny: n,
                nz: n,
            }),
            ("hpcg", &[nx, ny, nz]) => Ok(MatrixSource::Hpcg { nx, ny, nz }),
            ("laplace2d", &[n]) => Ok(MatrixSource::Laplace2d { nx: n, ny: n }),
            ("laplace2d", &[nx, ny]) => Ok(MatrixSource::Laplace2d { nx, ny }),
            ("random", &[n, per_row]) if per_row > n => bad(&format!(
                "a row of {n} columns cannot hold {per_row} nonzeros"
            )),
            ("random", &[n, per_row]) => Ok(MatrixSource::Random { n, per_row }),
            _ => bad(&format!("{} sizes do not fit {name}", sizes.len())),
        }
    }

    /// Rows and an upper bound of the stored nonzeros after expansion, cheaply: generators by
    /// formula (exact for hpcg and laplace2d), files from the header line only (symmetric:
    /// 2*entries). For footprint checks before anything is read.
    pub fn shape(&self) -> Result<(usize, usize), String> {
        let overflow = || format!("{self}: the size overflows");
        // Pairs (x, x') with |x - x'| <= 1 along one dimension of n points: n + 2(n - 1).
        let neighbours = |n: usize| 3 * n - 2;
        match *self {
            MatrixSource::File(ref path) => file_shape(path),
            MatrixSource::Hpcg { nx, ny, nz } => {
                let rows = nx.checked_mul(ny).and_then(|r| r.checked_mul(nz));
                let nnz = neighbours(nx)
                    .checked_mul(neighbours(ny))
                    .and_then(|p| p.checked_mul(neighbours(nz)));
                rows.zip(nnz).ok_or_else(overflow)
            }
            MatrixSource::Laplace2d { nx, ny } => {
                // The diagonal, and each neighbour pair along x and along y, both ways.
                let rows = nx.checked_mul(ny).ok_or_else(overflow)?;
                let pairs_x = (nx - 1).checked_mul(ny).ok_or_else(overflow)?;
                let pairs_y = (ny - 1).checked_mul(nx).ok_or_else(overflow)?;
                let nnz = pairs_x
                    .checked_add(pairs_y)
                    .and_then(|p| p.checked_mul(2))
                    .and_then(|p| p.checked_add(rows));
                Ok((rows, nnz.ok_or_else(overflow)?))
            }
            MatrixSource::Random { n, per_row } => {
                let nnz = n
                    .checked_mul(random_picks(n, per_row))
                    .and_then(|e| e.checked_mul(2))
                    .and_then(|e| e.checked_add(n));
                Ok((n, nnz.ok_or_else(overflow)?))
            }
        }
    }

    /// Refuses a generator whose matrix would pass the 32-bit indices of CSR here: `check`
    /// (plan time) says so, as it does for a file's size line, rather than the run.
    pub fn check_generated_size(&self) -> Result<(), String> {
        let (rows, nnz) = self.shape()?;
        if rows > MAX_INDEX || nnz > MAX_INDEX {
            return Err(format!("{self}: {}", too_large(rows, nnz)));
        }
        Ok(())
    }

    /// The matrix. `seed` drives the random generator only (same seed, same matrix).
    pub fn load(&self, seed: u64) -> Result<Csr, String> {
        if let MatrixSource::File(path) = self {
            return read_file(path);
        }
        self.check_generated_size()?;
        Ok(match *self {
            MatrixSource::Hpcg { nx, ny, nz } => hpcg(nx, ny, nz),
            MatrixSource::Laplace2d { nx, ny } => laplace2d(nx, ny),
            MatrixSource::Random { n, per_row } => random(n, per_row, seed),
            MatrixSource::File(_) => unreachable!("read above"),
        })
    }
}

impl fmt::Display for MatrixSource {
    /// The form `parse` reads.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatrixSource::File(path) => write!(f, "{}", path.display()),
            MatrixSource::Hpcg { nx, ny, nz } if nx == ny && ny == nz => write!(f, "hpcg:{nx}"),
            MatrixSource::Hpcg { nx, ny, nz } => write!(f, "hpcg:{nx}x{ny}x{nz}"),
            MatrixSource::Laplace2d { nx, ny } if nx == ny => write!(f, "laplace2d:{nx}"),
            MatrixSource::Laplace2d { nx, ny } => write!(f, "laplace2d:{nx}x{ny}"),
            MatrixSource::Random { n, per_row } => write!(f, "random:{n}x{per_row}"),
        }
    }
}

/// A generator's name: a letter, then letters, digits, `_` or `-` (so `data/a:b.mtx` is a path).
fn is_name(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphabetic())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

// ---- Generators ----

/// HPCG's problem (GenerateProblem_ref): the 27-point stencil on an nx x ny x nz grid, row
/// x + nx (y + ny z), 26 on the diagonal and -1 for each neighbour inside the box. Built row by
/// row in CSR order: with z outermost, the columns come out ascending.
fn hpcg(nx: usize, ny: usize, nz: usize) -> Csr {
    let n = nx * ny * nz;
    let nnz = (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2);
    let mut row_ptr = Vec::with_capacity(n + 1);
    let mut col = Vec::with_capacity(nnz);
    let mut val = Vec::with_capacity(nnz);
    row_ptr.push(0);
    // The neighbours' coordinates along one dimension of `len` points, the point's own included.
    let around = |p: usize, len: usize| p.saturating_sub(1)..=(p + 1).min(len - 1);
    for z in 0..nz {
        for y in 0..ny {
            for x in 0..nx {
                let row = x + nx * (y + ny * z);
                for z2 in around(z, nz) {
                    for y2 in around(y, ny) {
                        for x2 in around(x, nx) {
                            let c = x2 + nx * (y2 + ny * z2);
                            col.push(c as i32);
                            val.push(if c == row { 26.0 } else { -1.0 });
                        }
                    }
                }
                row_ptr.push(col.len() as i32);
            }
        }
    }
    Csr {
        n,
        row_ptr,
        col,
        val,
    }
}

/// The 2-D 5-point Laplacian on an nx x ny grid, row x + nx y: 4 on the diagonal, -1 for each
/// neighbour inside the grid, in ascending column order.
fn laplace2d(nx: usize, ny: usize) -> Csr {
    let n = nx * ny;
    let mut row_ptr = Vec::with_capacity(n + 1);
    let mut col = Vec::with_capacity(5 * n);
    let mut val = Vec::with_capacity(5 * n);
    row_ptr.push(0);
    for y in 0..ny {
        for x in 0..nx {
            let row = x + nx * y;
            let mut push = |c: usize, v: f64| {
                col.push(c as i32);
                val.push(v);
            };
            if y > 0 {
                push(row - nx, -1.0);
            }
            if x > 0 {
                push(row - 1, -1.0);
            }
            push(row, 4.0);
            if x + 1 < nx {
                push(row + 1, -1.0);
            }
            if y + 1 < ny {
                push(row + nx, -1.0);
            }
            row_ptr.push(col.len() as i32);
        }
    }
    Csr {
        n,
        row_ptr,
        col,
        val,
    }
}

/// Random columns each row picks for `random`: (per_row - 1) / 2, each adding an entry to its
/// row and one to the column's row; none where there is no other column.
fn random_picks(n: usize, per_row: usize) -> usize {
    if n < 2 {
        0
    } else {
        per_row.saturating_sub(1) / 2
    }
}

/// A random symmetric, strictly diagonally dominant (so positive definite) matrix: each row i
/// picks (per_row - 1) / 2 columns j != i uniformly and adds (i, j) and (j, i) with one value
/// uniform in [-1, 1) (picks that meet are summed); the diagonal is 1 + the sum of its row's
/// |off-diagonals|. ChaCha8 seeded by `seed`, as kbench's other inputs: the same on every
/// platform and version.
fn random(n: usize, per_row: usize, seed: u64) -> Csr {
    let picks = random_picks(n, per_row);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut edges: Vec<(u32, u32, f64)> = Vec::with_capacity(n * picks);
    for i in 0..n {
        for _ in 0..picks {
            // Uniform over the n - 1 columns other than i.
            let mut j = rng.random_range(0..n - 1);
            if j >= i {
                j += 1;
            }
            edges.push((i as u32, j as u32, rng.random_range(-1.0..1.0)));
        }
    }
    // Triplets 0..n: the diagonal, set below; then each edge both ways.
    let entry = |k: usize| match k.checked_sub(n) {
        None => (k, k, 0.0),
        Some(e) => {
            let (i, j, v) = edges[e / 2];
            match e % 2 {
                0 => (i as usize, j as usize, v),
                _ => (j as usize, i as usize, v),
            }
        }
    };
    let mut csr = assemble(n, n + 2 * edges.len(), entry)
        .unwrap_or_else(|f| unreachable!("the generator's own triplets: {f:?}"));
    for i in 0..n {
        let (start, end) = (csr.row_ptr[i] as usize, csr.row_ptr[i + 1] as usize);
        let mut off_diagonal = 0.0;
        let mut diagonal_at = start;
        for k in start..end {
            if csr.col[k] as usize == i {
                diagonal_at = k;
            } else {
                off_diagonal += csr.val[k].abs();
            }
        }
        csr.val[diagonal_at] = 1.0 + off_diagonal;
    }
    csr
}

// ---- Matrix Market files ----

/// Reads and validates a whole Matrix Market file (what `load` does for a File), for the
/// manifest to refuse a malformed file before anything runs.
pub fn check_file(path: &Path) -> Result<(), String> {
    read_file(path).map(|_| ())
}

/// How a file's values are read, from its banner.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Real,
    Integer,
    /// Structure only: every stored entry is 1.0.
    Pattern,
}

impl Field {
    /// A data line's fields.
    fn entry_form(self) -> &'static str {
        match self {
            Field::Real | Field::Integer => "`row column value`",
            Field::Pattern => "`row column`",
        }
    }
}

/// The fields of a line, split as the grammar does: on spaces and tabs.
fn fields(line: &str) -> impl Iterator<Item = &str> {
    line.split([' ', '\t']).filter(|f| !f.is_empty())
}

fn is_blank(line: &str) -> bool {
    line.trim_matches([' ', '\t', '\r']).is_empty()
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// An index or size field's value; one too long for u64 reads as u64::MAX (out of any range).
fn digits_value(s: &str) -> u64 {
    s.parse().unwrap_or(u64::MAX)
}

/// The text's banner, size line and data lines (1-based line number, text), as the grammar
/// reads them once it has accepted the text: blank lines, the banner, comment lines, the size
/// line, then entries among blank lines.
#[allow(clippy::type_complexity)]
fn sections(
    text: &str,
) -> (
    Option<(usize, &str)>,
    Option<(usize, &str)>,
    impl Iterator<Item = (usize, &str)>,
) {
    let mut lines = (1..).zip(text.lines()).skip_while(|&(_, l)| is_blank(l));
    let banner = lines.next();
    let mut lines = lines.skip_while(|&(_, l)| l.trim_start_matches([' ', '\t']).starts_with('%'));
    let size = lines.next();
    (banner, size, lines.filter(|&(_, l)| !is_blank(l)))
}

/// The first data line whose fields `bad` refuses.
fn find_data_line(text: &str, bad: impl Fn(&[&str]) -> bool) -> Option<(usize, &str)> {
    let mut buffer = Vec::new();
    sections(text).2.find(|&(_, line)| {
        buffer.clear();
        buffer.extend(fields(line));
        bad(&buffer)
    })
}

/// What a banner says, as far as reading goes.
#[derive(Debug, Clone, Copy)]
struct Banner {
    field: Field,
    /// One triangle stored, meaning both.
    symmetric: bool,
}

/// The banner line's meaning, or why it is refused. Only `coordinate`, `real`/`integer`/
/// `pattern`, `general`/`symmetric` are read: SYMGS needs a real matrix with a nonzero
/// diagonal.
fn read_banner(line: &str) -> Result<Banner, String> {
    let words: Vec<String> = fields(line).map(|w| w.to_ascii_lowercase()).collect();
    let expected = || {
        let found = line.trim_matches([' ', '\t', '\r']);
        let found = match found.is_empty() {
            true => "nothing".to_string(),
            false => format!("`{found}`"),
        };
        format!(
            "expected the banner `%%MatrixMarket matrix coordinate real|integer|pattern \
             general|symmetric`, found {found}"
        )
    };
    let refused = |why: &str| Err(format!("{why}; {}", expected()));
    // Invisible in the line shown: without naming it, the message reads expected == found.
    if line.starts_with('\u{feff}') {
        return Err(
            "the line starts with a byte order mark (U+FEFF, bytes EF BB BF) before \
                    `%%MatrixMarket`: save the file as UTF-8 without a BOM"
                .to_string(),
        );
    }
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let ["%%matrixmarket", "matrix", sparsity, field, storage] = words[..] else {
        return Err(expected());
    };
    match sparsity {
        "coordinate" => {}
        "array" => return refused("dense (`array`) files are not read"),
        _ => return Err(expected()),
    }
    let symmetric = match storage {
        "general" => false,
        "symmetric" => true,
        "skew-symmetric" => {
            return refused("a skew-symmetric matrix has a zero diagonal (SYMGS divides by it)")
        }
        "hermitian" => return refused("hermitian (complex) matrices are not read"),
        _ => return Err(expected()),
    };
    let field = match field {
        "real" => Field::Real,
        "integer" => Field::Integer,
        "pattern" => Field::Pattern,
        "complex" => return refused("complex matrices are not read (SYMGS here is real)"),
        _ => return Err(expected()),
    };
    Ok(Banner { field, symmetric })
}

/// The size line's rows, columns and entries, if it is three integers.
fn size_numbers(line: &str) -> Option<[u64; 3]> {
    let numbers: Vec<&str> = fields(line).collect();
    match numbers[..] {
        [r, c, e] if is_digits(r) && is_digits(c) && is_digits(e) => {
            Some([digits_value(r), digits_value(c), digits_value(e)])
        }
        _ => None,
    }
}

/// A size line's refusals: not square, or beyond 32-bit indices.
fn check_size_line(
    shown: &str,
    size_no: usize,
    size_line: &str,
    [rows, cols, entries]: [u64; 3],
) -> Result<(), String> {
    let size_line = size_line.trim();
    if rows == 0 || cols == 0 {
        return Err(format!(
            "{shown}:{size_no}: the size line `{size_line}` declares a matrix with no rows or \
             columns; SYMGS needs at least 1 row (as the generators need every size >= 1)"
        ));
    }
    if rows != cols {
        return Err(format!(
            "{shown}:{size_no}: the size line `{size_line}` is not square; SYMGS needs a square \
             matrix"
        ));
    }
    if rows > MAX_INDEX as u64 || entries > MAX_INDEX as u64 {
        return Err(format!(
            "{shown}:{size_no}: the size line `{size_line}` does not fit the 32-bit indices of \
             CSR here: rows and entries must stay below 2^31 = {}",
            MAX_INDEX + 1
        ));
    }
    Ok(())
}

/// Refuses, before nalgebra-sparse reads the text, a non-square or too large size line and any
/// index beyond the size line: the crate would panic on a number beyond usize (it unwraps its
/// parse), and a CSR here indexes with i32. A text that does not have this shape is left to
/// the crate's grammar.
fn check_sizes(text: &str, shown: &str) -> Result<(), String> {
    let (_, size, data) = sections(text);
    let Some((size_no, size_line)) = size else {
        return Ok(());
    };
    let Some([rows, cols, entries]) = size_numbers(size_line) else {
        return Ok(());
    };
    check_size_line(shown, size_no, size_line, [rows, cols, entries])?;
    for (no, line) in data {
        let mut indices = fields(line);
        for what in ["row", "column"] {
            // pest's index token is the field's leading digits: in `2 19-1` the column is 19.
            let index = indices.next().map(|f| {
                let digits = f.bytes().take_while(u8::is_ascii_digit).count();
                &f[..digits]
            });
            match index {
                Some(index) if !index.is_empty() && digits_value(index) > rows => {
                    return Err(format!(
                        "{shown}:{no}: {what} index {index} is beyond the {rows} {what}s of the \
                         size line (line {size_no})"
                    ))
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Refuses a file that reading would not leave room for: about READ_BYTES_PER_FILE_BYTE times
/// its size against MemAvailable (where /proc/meminfo is readable).
fn check_memory(bytes: u64, shown: &str) -> Result<(), String> {
    let Some(available) = crate::env::host_memory_headroom_bytes() else {
        return Ok(());
    };
    let needed = bytes.saturating_mul(READ_BYTES_PER_FILE_BYTE);
    if needed > available {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        return Err(format!(
            "{shown}: reading this {:.2} GiB file takes about {:.2} GiB of memory; {:.2} GiB \
             is available (MemAvailable)",
            gib(bytes),
            gib(needed),
            gib(available)
        ));
    }
    Ok(())
}

/// The text of a regular file (a FIFO, device or folder is refused at once, naming what it
/// is: a matrix replaced by a FIFO after `check` must not hold its case), once its size is
/// known to fit in memory; or where it is not UTF-8.
fn read_text(path: &Path, shown: &str) -> Result<String, String> {
    let refused = |e: input_file::InputError| format!("{shown}: {}", e.reason);
    let file = input_file::open_regular_file(path, WHAT).map_err(refused)?;
    let size_bytes = file.metadata().map_err(|e| format!("{shown}: {e}"))?.len();
    check_memory(size_bytes, shown)?;
    let bytes = input_file::read_opened(file, path, WHAT, MAX_FILE_BYTES).map_err(refused)?;
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        format!("{shown}:{line}: not UTF-8 text")
    })
}

/// A file's matrix: banner, sizes, then nalgebra-sparse's reading, then CSR and its checks.
fn read_file(path: &Path) -> Result<Csr, String> {
    let shown = path.display().to_string();
    let text = read_text(path, &shown)?;
    let (banner, size, _) = sections(&text);
    let (banner_no, banner) = banner.unwrap_or((1, ""));
    let field = read_banner(banner)
        .map_err(|why| format!("{shown}:{banner_no}: {why}"))?
        .field;
    if size.is_none() {
        // The crate would point at the line after the last, "found a blank line".
        let last_no = text.lines().count().max(banner_no);
        return Err(format!(
            "{shown}:{last_no}: the file ends after the banner{}; expected the size line \
             `rows columns entries` next",
            if last_no > banner_no {
                " and comments"
            } else {
                ""
            }
        ));
    }
    check_sizes(&text, &shown)?;
    let explain = |e: MatrixMarketError| explain(&text, &shown, field, e);
    let built = match field {
        Field::Real => to_csr(&load_coo::<f64>(&text).map_err(explain)?, |&v| v),
        Field::Integer => to_csr(&load_coo::<i64>(&text).map_err(explain)?, |&v| v as f64),
        Field::Pattern => to_csr(&load_coo::<()>(&text).map_err(explain)?, |_| 1.0),
    };
    // The grammar needs no whitespace between tokens: it reads `2 26` as 2, 2, 6 and `2 1-1` as
    // 2, 1, -1. An entry is the fields written, so such a line is refused.
    if let Some((no, what)) = malformed_line(&text, field) {
        return Err(format!("{shown}:{no}: {what}"));
    }
    built
        .and_then(|csr| check_diagonal(&csr).map(|()| csr))
        .map_err(|fault| locate_fault(&text, &shown, fault))
}

fn load_coo<T: MatrixMarketScalar>(text: &str) -> Result<CooMatrix<T>, MatrixMarketError> {
    load_coo_from_matrix_market_str::<T>(text)
}

fn to_csr<T>(coo: &CooMatrix<T>, value: impl Fn(&T) -> f64) -> Result<Csr, Fault> {
    let (rows, cols, values) = (coo.row_indices(), coo.col_indices(), coo.values());
    if let Some(fault) = fewer_entries_than_rows(coo.nrows(), rows, cols) {
        return Err(fault);
    }
    assemble(coo.nrows(), values.len(), |k| {
        (rows[k], cols[k], value(&values[k]))
    })
}

/// With fewer entries than rows some row has no diagonal entry: named here, before `assemble`
/// allocates for every row a size line may promise (2^31 of them in a file of a few bytes).
fn fewer_entries_than_rows(n: usize, rows: &[usize], cols: &[usize]) -> Option<Fault> {
    if n <= rows.len() {
        return None;
    }
    let mut diagonal: Vec<usize> = (0..rows.len())
        .filter(|&k| rows[k] == cols[k])
        .map(|k| rows[k])
        .collect();
    diagonal.sort_unstable();
    diagonal.dedup();
    let row = (0..diagonal.len())
        .find(|&i| diagonal[i] != i)
        .unwrap_or(diagonal.len());
    Some(Fault::NoDiagonal { row })
}

/// A fault found after the crate's reading, in the file's terms (1-based, with its line where
/// one line holds it).
fn locate_fault(text: &str, shown: &str, fault: Fault) -> String {
    match fault {
        Fault::NotFinite { value, .. } => {
            let at = find_data_line(text, |f| {
                f.get(2)
                    .and_then(|v| v.parse::<f64>().ok())
                    .is_some_and(|v| !v.is_finite())
            });
            match at {
                Some((no, line)) => format!(
                    "{shown}:{no}: the value in `{}` is not a finite number",
                    line.trim()
                ),
                None => format!("{shown}: a value is {value}, not a finite number"),
            }
        }
        Fault::SumNotFinite { row, col } => format!(
            "{shown}: the entries at row {}, column {} sum to a non-finite value",
            row + 1,
            col + 1
        ),
        Fault::NoDiagonal { row } => format!(
            "{shown}: row {} has no diagonal entry; SYMGS divides by it",
            row + 1
        ),
        Fault::ZeroDiagonal { row } => {
            let diagonal = (row + 1) as u64;
            let mut last = None;
            let mut buffer = Vec::new();
            for (no, line) in sections(text).2 {
                buffer.clear();
                buffer.extend(fields(line));
                if let [r, c, ..] = buffer[..] {
                    if digits_value(r) == diagonal && digits_value(c) == diagonal {
                        last = Some(no);
                    }
                }
            }
            let what = format!(
                "the diagonal entry of row {} is 0 (duplicates summed); SYMGS divides by it",
                row + 1
            );
            match last {
                Some(no) => format!("{shown}:{no}: {what}"),
                None => format!("{shown}: {what}"),
            }
        }
        Fault::TooLarge { n, nnz } => format!("{shown}: {}", too_large(n, nnz)),
        Fault::OutOfRange { row, col, .. } => format!(
            "{shown}: the entry at row {}, column {} lies outside the matrix",
            row + 1,
            col + 1
        ),
    }
}

/// nalgebra-sparse's error, with the file and line it concerns. Its syntax errors carry pest's
/// line; the others are located here from the condition they report.
fn explain(text: &str, shown: &str, field: Field, error: MatrixMarketError) -> String {
    let size = sections(text).1;
    let at = |line: usize, what: String| format!("{shown}:{line}: {what}");
    let located = |found: Option<(usize, &str)>, what: &dyn Fn(&str) -> String| {
        found.map(|(no, line)| at(no, what(line.trim())))
    };
    let message = match error.kind() {
        MatrixMarketErrorKind::ParsingError => {
            let syntax = syntax_position(error.message()).map(|(line, column, expected)| {
                (line, syntax_message(text, line, column, expected))
            });
            match syntax {
                // pest names the whole document at 1:1 where it could not end it: a line with
                // a field too many, found here.
                Some((line, what)) if !what.contains("expected Document") => Some(at(line, what)),
                _ => malformed_line(text, field)
                    .or(syntax)
                    .map(|(no, what)| at(no, what)),
            }
        }
        MatrixMarketErrorKind::TypeMismatch => {
            malformed_line(text, field).map(|(no, what)| at(no, what))
        }
        MatrixMarketErrorKind::EntryMismatch => size.and_then(|(no, line)| {
            let promised = fields(line).nth(2)?;
            let held = sections(text).2.count();
            Some(at(
                no,
                format!("the size line promises {promised} entries, the body holds {held}"),
            ))
        }),
        MatrixMarketErrorKind::ZeroError => located(
            find_data_line(text, |f| f.iter().take(2).any(|i| digits_value(i) == 0)),
            &|line| format!("index 0 in `{line}`: Matrix Market indices start at 1"),
        ),
        MatrixMarketErrorKind::NotLowerTriangle => located(
            find_data_line(text, |f| match f {
                [r, c, ..] => digits_value(c) > digits_value(r),
                _ => false,
            }),
            &|line| {
                format!(
                    "`{line}` lies above the diagonal: a symmetric file stores the lower \
                     triangle only (row >= column)"
                )
            },
        ),
        MatrixMarketErrorKind::SparseFormatError(_) => check_sizes(text, shown).err(),
        _ => None,
    };
    let crate_words = error
        .message()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    message.unwrap_or_else(|| format!("{shown}: {crate_words}"))
}

/// (line, column, what was expected) of pest's syntax error as nalgebra-sparse words it:
/// "Can't parse the data.\n Error:  --> 4:1\n  |\n4 | -1 2 3.0\n  | ^---\n  |\n  = expected
/// Dimension".
fn syntax_position(message: &str) -> Option<(usize, usize, &str)> {
    let rest = &message[message.find("--> ")? + 4..];
    let (line, rest) = rest.split_once(':')?;
    let column: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let expected = message.rsplit_once("= ")?.1.trim();
    let expected = expected.strip_prefix("expected ").unwrap_or(expected);
    Some((line.trim().parse().ok()?, column.parse().ok()?, expected))
}

/// A syntax error in words: what the grammar's rule at that point means, and the line.
fn syntax_message(text: &str, line: usize, column: usize, expected: &str) -> String {
    let found = text
        .lines()
        .nth(line.saturating_sub(1))
        .unwrap_or("")
        .trim_end();
    let wanted = match expected {
        "Header" => {
            "the banner `%%MatrixMarket matrix coordinate real|integer|pattern general|symmetric`"
        }
        "Shape" => "the size line `rows columns entries`",
        "Entry" => "an entry `row column value`",
        "Dimension" => "an index or size (digits, indices from 1)",
        "Real" => "a number",
        other => other,
    };
    let hint = if expected == "Shape" && is_blank(found) {
        " (this reader takes no blank line before the size line)"
    } else if expected == "Entry" && found.trim_start().starts_with('%') {
        " (comments belong between the banner and the size line)"
    } else {
        ""
    };
    let found = match is_blank(found) {
        true => "a blank line".to_string(),
        false => format!("`{found}`"),
    };
    format!("column {column}: expected {wanted}, found {found}{hint}")
}

/// The first line the crate's reading of entries refuses: a size line that is not three
/// integers, or a data line without the banner's fields or whose value does not read as its
/// type. For the faults the crate reports without a line.
fn malformed_line(text: &str, field: Field) -> Option<(usize, String)> {
    if let Some((no, line)) = sections(text).1 {
        if size_numbers(line).is_none() {
            return Some((
                no,
                format!(
                    "expected the size line `rows columns entries`, found `{}`",
                    line.trim()
                ),
            ));
        }
    }
    let width = if field == Field::Pattern { 2 } else { 3 };
    let problem = |f: &[&str]| {
        if f.len() != width {
            return Some(format!(
                "an entry here is {}; this line has {} fields",
                field.entry_form(),
                f.len()
            ));
        }
        if let Some(index) = f[..2].iter().find(|i| !is_digits(i)) {
            return Some(format!("`{index}` is not an index (digits, from 1)"));
        }
        match (field, f.get(2)) {
            (Field::Real, Some(v)) if v.parse::<f64>().is_err() => {
                Some(format!("`{v}` is not a number"))
            }
            (Field::Integer, Some(v)) if v.parse::<i64>().is_err() => Some(format!(
                "`{v}` is not a 64-bit integer (the banner says integer)"
            )),
            _ => None,
        }
    };
    let (no, line) = find_data_line(text, |f| problem(f).is_some())?;
    let found: Vec<&str> = fields(line).collect();
    let what = problem(&found)?;
    Some((no, format!("{what}: `{}`", line.trim())))
}

/// The rows and stored-nonzero bound of a file from its banner and size line alone, reading at
/// most HEAD_BYTES.
fn file_shape(path: &Path) -> Result<(usize, usize), String> {
    let shown = path.display().to_string();
    let file =
        input_file::open_regular_file(path, WHAT).map_err(|e| format!("{shown}: {}", e.reason))?;
    let mut reader = BufReader::new(file.take(HEAD_BYTES));
    let mut banner: Option<Banner> = None;
    let mut line_no = 0;
    let mut bytes = Vec::new();
    // The lines as `sections` walks them: blank lines, the banner, comments, the size line.
    let (size_no, size_line) = loop {
        bytes.clear();
        let read = reader
            .read_until(b'\n', &mut bytes)
            .map_err(|e| format!("{shown}: {e}"))?;
        if read == 0 {
            let what = if banner.is_none() {
                "banner"
            } else {
                "size line"
            };
            return Err(format!("{shown}: no {what} in the first {line_no} lines"));
        }
        line_no += 1;
        let line = std::str::from_utf8(&bytes)
            .map_err(|_| format!("{shown}:{line_no}: not UTF-8 text"))?
            .trim_end_matches(['\n', '\r']);
        if banner.is_none() {
            if !is_blank(line) {
                banner =
                    Some(read_banner(line).map_err(|why| format!("{shown}:{line_no}: {why}"))?);
            }
        } else if !line.trim_start_matches([' ', '\t']).starts_with('%') {
            break (line_no, line.to_string());
        }
    };
    let Some([rows, cols, entries]) = size_numbers(&size_line) else {
        return Err(format!(
            "{shown}:{size_no}: expected the size line `rows columns entries`, found `{}`",
            size_line.trim()
        ));
    };
    check_size_line(&shown, size_no, &size_line, [rows, cols, entries])?;
    let symmetric = banner.is_some_and(|b| b.symmetric);
    let bound = if symmetric {
        entries.checked_mul(2)
    } else {
        Some(entries)
    };
    match (usize::try_from(rows), bound.map(usize::try_from)) {
        (Ok(rows), Some(Ok(bound))) => Ok((rows, bound)),
        _ => Err(format!(
            "{shown}:{size_no}: the size line's numbers overflow"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HPCG's matrix built the slow, obvious way: every pair of grid points at most one step
    /// apart along each axis, through `from_triplets`.
    fn hpcg_reference(nx: usize, ny: usize, nz: usize) -> Csr {
        let point = |i: usize| (i % nx, (i / nx) % ny, i / (nx * ny));
        let n = nx * ny * nz;
        let (mut rows, mut cols, mut vals) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..n {
            for j in 0..n {
                let (a, b) = (point(i), point(j));
                if a.0.abs_diff(b.0) <= 1 && a.1.abs_diff(b.1) <= 1 && a.2.abs_diff(b.2) <= 1 {
                    rows.push(i);
                    cols.push(j);
                    vals.push(if i == j { 26.0 } else { -1.0 });
                }
            }
        }
        Csr::from_triplets(n, &rows, &cols, &vals).unwrap()
    }

    fn load(value: &str) -> Csr {
        MatrixSource::parse(value).unwrap().load(7).unwrap()
    }

    fn row_lengths(csr: &Csr) -> Vec<usize> {
        (0..csr.n).map(|i| csr.row(i).0.len()).collect()
    }

    #[test]
    fn hpcg_small_grids_have_the_stencil_hpcg_generates() {
        let one = load("hpcg:1");
        assert_eq!(
            one,
            Csr {
                n: 1,
                row_ptr: vec![0, 1],
                col: vec![0],
                val: vec![26.0]
            }
        );
        let two = load("hpcg:2");
        assert_eq!(row_lengths(&two), vec![8; 8]);
        assert_eq!(two.diagonal(), vec![26.0; 8]);
        assert_eq!(two.val.iter().filter(|&&v| v == -1.0).count(), 8 * 7);
        let three = load("hpcg:3");
        let centre = 1 + 3 * (1 + 3);
        assert_eq!(
            three.row(centre).0,
            (0..27).collect::<Vec<i32>>().as_slice()
        );
        assert_eq!(three.row(centre).1.iter().sum::<f64>(), 0.0);
        for (nx, ny, nz) in [(1, 1, 1), (2, 2, 2), (3, 4, 5), (5, 1, 2), (1, 6, 1)] {
            let value = format!("hpcg:{nx}x{ny}x{nz}");
            assert_eq!(load(&value), hpcg_reference(nx, ny, nz), "{value}");
        }
    }

    #[test]
    fn hpcg_nonzeros_follow_the_closed_form() {
        // Along each axis of n points, n + 2(n - 1) = 3n - 2 pairs at most one step apart.
        for (nx, ny, nz) in [(1, 1, 1), (2, 3, 4), (7, 5, 3), (16, 16, 32)] {
            let source = MatrixSource::Hpcg { nx, ny, nz };
            let csr = source.load(0).unwrap();
            let expected = (3 * nx - 2) * (3 * ny - 2) * (3 * nz - 2);
            assert_eq!(csr.nnz(), expected, "{source}");
            assert_eq!(
                source.shape().unwrap(),
                (nx * ny * nz, expected),
                "{source}"
            );
            assert!(csr.is_symmetric());
        }
        let big = MatrixSource::parse("hpcg:104").unwrap();
        assert_eq!(big.shape().unwrap(), (1_124_864, 29_791_000));
        let csr = big.load(0).unwrap();
        assert_eq!((csr.n, csr.nnz()), (1_124_864, 29_791_000));
        assert_eq!(*csr.row_ptr.last().unwrap(), 29_791_000);
    }

    #[test]
    #[ignore = "a timing: cargo test --release --lib hpcg_104_builds -- --ignored --nocapture"]
    fn hpcg_104_builds_in_well_under_two_seconds() {
        let source = MatrixSource::parse("hpcg:104").unwrap();
        let mut best_s = f64::INFINITY;
        for _ in 0..3 {
            let start = std::time::Instant::now();
            let csr = source.load(0).unwrap();
            best_s = best_s.min(start.elapsed().as_secs_f64());
            assert_eq!(csr.nnz(), 29_791_000);
        }
        println!("hpcg:104 built in {best_s:.3} s (best of 3)");
        assert!(best_s < 2.0, "{best_s} s");
    }

    #[test]
    fn laplace2d_is_the_five_point_stencil() {
        for (nx, ny) in [(1, 1), (1, 5), (4, 1), (3, 3), (8, 5)] {
            let source = MatrixSource::Laplace2d { nx, ny };
            let csr = source.load(0).unwrap();
            assert_eq!(
                source.shape().unwrap(),
                (nx * ny, 5 * nx * ny - 2 * nx - 2 * ny)
            );
            assert_eq!(csr.nnz(), source.shape().unwrap().1);
            assert!(csr.is_symmetric());
            assert_eq!(csr.diagonal(), vec![4.0; nx * ny]);
            // Each row: 4 minus one per neighbour, and the neighbours are the grid's.
            for i in 0..csr.n {
                let (cols, vals) = csr.row(i);
                let (x, y) = (i % nx, i / nx);
                let inside = [x > 0, x + 1 < nx, y > 0, y + 1 < ny];
                assert_eq!(cols.len(), 1 + inside.iter().filter(|&&b| b).count());
                assert!(cols.windows(2).all(|w| w[0] < w[1]));
                assert!(cols.iter().zip(vals).all(|(&j, &v)| {
                    let (jx, jy) = (j as usize % nx, j as usize / nx);
                    (j as usize == i && v == 4.0)
                        || (x.abs_diff(jx) + y.abs_diff(jy) == 1 && v == -1.0)
                }));
            }
        }
        assert_eq!(load("laplace2d:1000").nnz(), 5 * 1_000_000 - 4 * 1000);
    }

    #[test]
    fn random_is_symmetric_dominant_and_seeded() {
        let source = MatrixSource::parse("random:2000x27").unwrap();
        let a = source.load(1).unwrap();
        assert!(a.is_symmetric());
        for i in 0..a.n {
            let (cols, vals) = a.row(i);
            assert!(cols.windows(2).all(|w| w[0] < w[1]));
            assert!(vals.iter().all(|v| v.is_finite()));
            let off: f64 = cols
                .iter()
                .zip(vals)
                .filter(|&(&j, _)| j as usize != i)
                .map(|(_, v)| v.abs())
                .sum();
            assert_eq!(a.diagonal()[i], 1.0 + off, "row {i}");
        }
        // About 27 a row: 13 picks of its own and about 13 from other rows.
        let mean = a.nnz() as f64 / a.n as f64;
        assert!((26.0..=27.0).contains(&mean), "{mean}");
        assert!(a.nnz() <= source.shape().unwrap().1);
        assert_eq!(source.load(1).unwrap(), a);
        assert_ne!(source.load(2).unwrap(), a);
        // Off-diagonal values lie in [-1, 1) (a pair picked twice sums two).
        assert!(a.val.iter().all(|&v| v >= -2.0));
        // Too small to pick: the identity.
        let one = load("random:1x1");
        assert_eq!((one.n, one.val.clone()), (1, vec![1.0]));
        assert_eq!(load("random:5x1").val, vec![1.0; 5]);
        assert!(load("random:2x2").is_symmetric());
    }

    #[test]
    fn shapes_bound_what_loads() {
        for value in [
            "hpcg:1",
            "hpcg:4x3x2",
            "laplace2d:7",
            "laplace2d:2x9",
            "random:1x1",
            "random:10x10",
            "random:300x9",
            "random:300x8",
        ] {
            let source = MatrixSource::parse(value).unwrap();
            let (rows, bound) = source.shape().unwrap();
            let csr = source.load(3).unwrap();
            assert_eq!(csr.n, rows, "{value}");
            assert!(csr.nnz() <= bound, "{value}: {} > {bound}", csr.nnz());
        }
    }

    #[test]
    fn parse_takes_the_documented_forms_and_refuses_others() {
        let ok = |v: &str| MatrixSource::parse(v).unwrap();
        assert_eq!(
            ok("hpcg:104"),
            MatrixSource::Hpcg {
                nx: 104,
                ny: 104,
                nz: 104
            }
        );
        assert_eq!(
            ok("hpcg:16x16x32"),
            MatrixSource::Hpcg {
                nx: 16,
                ny: 16,
                nz: 32
            }
        );
        assert_eq!(
            ok("laplace2d:1000"),
            MatrixSource::Laplace2d { nx: 1000, ny: 1000 }
        );
        assert_eq!(
            ok("laplace2d:300x200"),
            MatrixSource::Laplace2d { nx: 300, ny: 200 }
        );
        assert_eq!(
            ok("random:100000x27"),
            MatrixSource::Random {
                n: 100000,
                per_row: 27
            }
        );
        for path in [
            "datasets/a.mtx",
            "a.mtx",
            "/tmp/x:y.mtx",
            "./hpcg:4",
            "data/b:c",
        ] {
            assert_eq!(ok(path), MatrixSource::File(path.into()));
        }
        for value in [
            "hpcg:104",
            "hpcg:16x16x32",
            "laplace2d:300x200",
            "random:100000x27",
        ] {
            assert_eq!(ok(value).to_string(), value);
        }
        for (value, phrase) in [
            ("hpcg:0", "sizes >= 1"),
            ("hpcg:", "sizes >= 1"),
            ("hpcg:4x4", "2 sizes do not fit hpcg"),
            ("hpcg:-4", "sizes >= 1"),
            ("hpcg:+4", "sizes >= 1"),
            ("hpcg:4.5", "sizes >= 1"),
            ("hpcg:99999999999999999999999", "sizes >= 1"),
            ("laplace2d:2x2x2", "3 sizes do not fit laplace2d"),
            ("random:100", "1 sizes do not fit random"),
            ("random:10x11", "cannot hold 11"),
            ("random:0x1", "sizes >= 1"),
            ("HPCG:4", "no generator `HPCG`"),
            ("poisson:4", "no generator `poisson`"),
        ] {
            let err = MatrixSource::parse(value).unwrap_err();
            assert!(err.contains(phrase), "{value}: {err}");
            assert!(
                err.contains(&format!("`{value}`")) && err.contains("hpcg:NXxNYxNZ"),
                "{err}"
            );
        }
        // Sizes that parse but overflow or pass 32-bit indices are refused by shape and load.
        let huge = ok("hpcg:9999999999");
        assert!(huge.shape().unwrap_err().contains("overflows"));
        let err = ok("hpcg:1300").load(0).unwrap_err();
        assert!(err.contains("2^31"), "{err}");
    }

    #[test]
    fn from_triplets_sorts_sums_and_checks() {
        let csr = Csr::from_triplets(
            3,
            &[2, 0, 1, 0, 2, 0],
            &[2, 2, 1, 0, 0, 2],
            &[5.0, 1.0, 3.0, 4.0, -1.0, 0.5],
        )
        .unwrap();
        assert_eq!(csr.row_ptr, vec![0, 2, 3, 5]);
        assert_eq!(csr.col, vec![0, 2, 1, 0, 2]);
        assert_eq!(csr.val, vec![4.0, 1.5, 3.0, -1.0, 5.0]);
        assert_eq!(csr.diagonal(), vec![4.0, 3.0, 5.0]);
        assert!(!csr.is_symmetric());
        let empty = Csr::from_triplets(0, &[], &[], &[]).unwrap();
        assert_eq!(
            (empty.n, empty.row_ptr.clone(), empty.nnz()),
            (0, vec![0], 0)
        );

        let err =
            |n, r: &[usize], c: &[usize], v: &[f64]| Csr::from_triplets(n, r, c, v).unwrap_err();
        assert!(err(2, &[0], &[0], &[1.0]).contains("row 1 (0-based) has no diagonal"));
        let zero = err(2, &[0, 1, 1], &[0, 1, 1], &[1.0, 2.0, -2.0]);
        assert!(
            zero.contains("row 1's (0-based) diagonal entry is 0"),
            "{zero}"
        );
        assert!(err(2, &[0, 2], &[0, 1], &[1.0, 1.0])
            .contains("triplet 1: (row 2, column 1) lies outside the 2 x 2"));
        assert!(err(1, &[0], &[0], &[f64::NAN]).contains("triplet 0: the value NaN is not finite"));
        let sum = err(1, &[0, 0], &[0, 0], &[f64::MAX, f64::MAX]);
        assert!(sum.contains("sum to a non-finite value"), "{sum}");
        assert!(err(1, &[0, 0], &[0], &[1.0]).contains("2 rows, 1 columns and 1 values"));
    }
}
