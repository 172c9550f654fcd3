//! Reading `.npy` files (NumPy's array format), the one way every reader in kbench does: a
//! custom study's `init = { npy }` inputs and `expected = "file.npy"` outputs, and a reference
//! command's outputs. Arrays come back flattened in C (row-major) order, kbench's buffers'
//! order, whatever order the file was written in (NumPy writes a transposed array column-major).
//! Writing is `HostData::write_npy`'s.

use std::path::Path;

use crate::vocab::{DType, HostData};

/// A `.npy` file's values as `dtype` exactly (a file of another dtype is refused: a buffer's
/// contents are not converted behind the user's back), in C order. A file over `max_bytes` is
/// refused. bfloat16 and the 8-bit floats, which NumPy has no dtype for, are read from a
/// float32 file whose every value is one of theirs (as `HostData::write_npy` writes them), or
/// from an unsigned integer file of their bit patterns whose name ends in `.bf16.npy`,
/// `.f8e4m3.npy` or `.f8e5m2.npy` (`bits_suffix`).
pub fn read_as(path: &Path, dtype: DType, max_bytes: u64) -> Result<HostData, String> {
    let opened = open(path, max_bytes)?;
    macro_rules! plain {
        ($($variant:ident $t:ty),*) => {
            match dtype {
                $(DType::$variant => opened
                    .plain::<$t>(DType::$variant.npy_descr().unwrap_or_default())
                    .map(HostData::$variant),)*
                _ => None,
            }
        };
    }
    let plain = plain!(I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64, F16 half::f16, F32 f32, F64 f64);
    if let Some(values) = plain {
        return Ok(values);
    }
    let npy = opened.into_file();
    let order = Layout::of(&npy);
    let unreadable = |e: std::io::Error| format!("does not hold {} values: {e}", dtype.name());
    match dtype {
        DType::BF16 => {
            let values = read_narrow(npy, path, dtype, |npy| {
                Ok(npy
                    .into_vec::<u16>()?
                    .into_iter()
                    .map(half::bf16::from_bits)
                    .collect())
            });
            return values.map(|v| HostData::BF16(order.to_c_order(v)));
        }
        DType::F8E4M3 => {
            let values = read_narrow(npy, path, dtype, |npy| {
                Ok(npy
                    .into_vec::<u8>()?
                    .into_iter()
                    .map(float8::F8E4M3::from_bits)
                    .collect())
            });
            return values.map(|v| HostData::F8E4M3(order.to_c_order(v)));
        }
        DType::F8E5M2 => {
            let values = read_narrow(npy, path, dtype, |npy| {
                Ok(npy
                    .into_vec::<u8>()?
                    .into_iter()
                    .map(float8::F8E5M2::from_bits)
                    .collect())
            });
            return values.map(|v| HostData::F8E5M2(order.to_c_order(v)));
        }
        _ => {}
    }
    macro_rules! read {
        ($($variant:ident $t:ty),*) => {
            match dtype {
                DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => unreachable!("read above"),
                $(DType::$variant => HostData::$variant(
                    order.to_c_order(npy.into_vec::<$t>().map_err(unreadable)?),
                ),)*
            }
        };
    }
    Ok(
        read!(I8 i8, U8 u8, I16 i16, U16 u16, I32 i32, U32 u32, I64 i64, U64 u64, F16 half::f16, F32 f32, F64 f64),
    )
}

/// A `.npy` file's header alone: its element type as NumPy writes it (`<f4`) and its element
/// count (the shape's product; a product that overflows is refused).
pub fn header(path: &Path) -> Result<(String, u64), String> {
    let file = crate::input_file::open_regular_file(path, "a .npy file")
        .map_err(|e| format!("cannot be read: {}", e.reason))?;
    // The header is at most 64 KiB by NumPy's format (version 1); the rest is not read.
    let mut head = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(&file, 1 << 16), &mut head)
        .map_err(|e| format!("cannot be read: {e}"))?;
    refuse_overflowing_shape(&head)?;
    let npy = npyz::NpyFile::new(std::io::Cursor::new(head))
        .map_err(|e| format!("is not a .npy file: {e}"))?;
    let count = (npy.shape().iter())
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .ok_or("has a shape whose element count overflows 64 bits")?;
    Ok((npy.dtype().descr().trim_matches('\'').to_string(), count))
}

/// Whether a file of NumPy element type `descr` (`<f4`, `|u1`) holds `dtype` values as
/// `read_as` reads them; `Err` says what it holds instead.
pub fn holds(descr: &str, dtype: DType, path: &Path) -> Result<(), String> {
    let kind_size = descr.trim_start_matches(['<', '>', '|', '=']);
    let wanted: &[&str] = match dtype {
        DType::I8 => &["i1"],
        DType::U8 => &["u1"],
        DType::I16 => &["i2"],
        DType::U16 => &["u2"],
        DType::I32 => &["i4"],
        DType::U32 => &["u4"],
        DType::I64 => &["i8"],
        DType::U64 => &["u8"],
        DType::F16 => &["f2"],
        DType::BF16 | DType::F8E4M3 | DType::F8E5M2 => {
            match (names_bits(path, dtype), dtype.size_bytes()) {
                (true, 1) => &["u1"],
                (true, _) => &["u2"],
                (false, _) => &["f4"],
            }
        }
        DType::F32 => &["f4"],
        DType::F64 => &["f8"],
    };
    if wanted.contains(&kind_size) {
        return Ok(());
    }
    let hint = match bits_suffix(dtype) {
        Some(suffix) => format!(" ({dtype} is read from float32 values, or from their uint{} bit patterns in a file named `*{suffix}`)", 8 * dtype.size_bytes()),
        None => String::new(),
    };
    Err(format!(
        "holds `{descr}` values, and the buffer is {dtype}{hint}"
    ))
}

/// The file name suffix that marks a uint16 `.npy` file as bfloat16 bit patterns.
pub const BF16_BITS_SUFFIX: &str = ".bf16.npy";

/// The file name suffix that marks an unsigned integer `.npy` file as bit patterns of `dtype`,
/// for the floats NumPy has no dtype for.
pub fn bits_suffix(dtype: DType) -> Option<&'static str> {
    match dtype {
        DType::BF16 => Some(BF16_BITS_SUFFIX),
        DType::F8E4M3 => Some(".f8e4m3.npy"),
        DType::F8E5M2 => Some(".f8e5m2.npy"),
        _ => None,
    }
}

/// Whether the file's name says it holds `dtype`'s bit patterns (see `bits_suffix`).
fn names_bits(path: &Path, dtype: DType) -> bool {
    let name = path.file_name().and_then(|n| n.to_str());
    (bits_suffix(dtype).zip(name)).is_some_and(|(suffix, name)| name.ends_with(suffix))
}

/// A float type NumPy has no dtype for: its bit patterns (`from_bits`) where the file is named
/// so, else float32 values that must each be one of the type's.
fn read_narrow<T: crate::vocab::Element + std::fmt::Display>(
    npy: npyz::NpyFile<std::io::Cursor<Vec<u8>>>,
    path: &Path,
    dtype: DType,
    from_bits: impl FnOnce(npyz::NpyFile<std::io::Cursor<Vec<u8>>>) -> std::io::Result<Vec<T>>,
) -> Result<Vec<T>, String> {
    let suffix = bits_suffix(dtype).unwrap_or_default();
    let bits = 8 * dtype.size_bytes();
    if names_bits(path, dtype) {
        return from_bits(npy).map_err(|e| {
            format!("does not hold uint{bits} values (a `{suffix}` file holds {dtype} bit patterns): {e}")
        });
    }
    let values = npy.into_vec::<f32>().map_err(|e| {
        format!("does not hold {dtype} values: give float32 values that are each a {dtype}, or their bit patterns as uint{bits} in a file named `*{suffix}` ({e})")
    })?;
    let mut out = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        let nearest = T::nearest(f64::from(v));
        let back = nearest.to_f64();
        if back != f64::from(v) && !(v.is_nan() && back.is_nan()) {
            return Err(format!(
                "holds {v} at index {i}, which is not a {dtype} value (the nearest is {nearest}): round the file to {dtype} first"
            ));
        }
        out.push(nearest);
    }
    Ok(out)
}

/// A `.npy` file's values as f64, in C order whatever order the file was written in; any
/// float, signed or unsigned integer dtype of either byte order. The error reads after the
/// file's name ("is not a .npy file: ...").
pub fn read_f64(path: &Path, max_bytes: u64) -> Result<Vec<f64>, String> {
    let opened = open(path, max_bytes)?;
    if let Some(values) = opened.plain::<f64>("<f8") {
        return Ok(values);
    }
    if let Some(values) = opened.plain::<f32>("<f4") {
        use rayon::prelude::*;
        return Ok(values.par_iter().map(|&v| f64::from(v)).collect());
    }
    let npy = opened.into_file();
    let order = Layout::of(&npy);
    let dtype = npy.dtype();
    let npyz::DType::Plain(type_str) = &dtype else {
        return Err(format!(
            "holds records ({}); kbench reads arrays of numbers",
            dtype.descr()
        ));
    };
    use npyz::TypeChar::{Float, Int, Uint};
    let unreadable = |e: std::io::Error| format!("cannot be read: {e}");
    let values: Vec<f64> = match (type_str.type_char(), type_str.size_field()) {
        (Float, 8) => npy.into_vec::<f64>().map_err(unreadable)?,
        (Float, 4) => widen(npy.into_vec::<f32>().map_err(unreadable)?),
        (Float, 2) => widen(npy.into_vec::<half::f16>().map_err(unreadable)?),
        (Int, 8) => npy
            .into_vec::<i64>()
            .map_err(unreadable)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        (Int, 4) => widen(npy.into_vec::<i32>().map_err(unreadable)?),
        (Int, 2) => widen(npy.into_vec::<i16>().map_err(unreadable)?),
        (Int, 1) => widen(npy.into_vec::<i8>().map_err(unreadable)?),
        (Uint, 8) => npy
            .into_vec::<u64>()
            .map_err(unreadable)?
            .into_iter()
            .map(|v| v as f64)
            .collect(),
        (Uint, 4) => widen(npy.into_vec::<u32>().map_err(unreadable)?),
        (Uint, 2) => widen(npy.into_vec::<u16>().map_err(unreadable)?),
        (Uint, 1) => widen(npy.into_vec::<u8>().map_err(unreadable)?),
        _ => {
            return Err(format!(
                "has dtype {type_str}; kbench reads float, int and uint arrays"
            ))
        }
    };
    Ok(order.to_c_order(values))
}

fn widen<T: Into<f64>>(values: Vec<T>) -> Vec<f64> {
    values.into_iter().map(Into::into).collect()
}

/// Reorders an array stored column-major (NumPy saves a transposed array so) into row-major.
fn fortran_to_c_order<T: Copy>(values: &[T], shape: &[u64]) -> Vec<T> {
    let mut out = Vec::with_capacity(values.len());
    let dims: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let mut index = vec![0usize; dims.len()];
    for _ in 0..values.len() {
        // The column-major offset of `index`: the first dimension varies fastest.
        let mut offset = 0;
        let mut stride = 1;
        for (i, d) in index.iter().zip(&dims) {
            offset += i * stride;
            stride *= d;
        }
        out.push(values[offset]);
        // The next row-major index: the last dimension varies fastest.
        for (i, d) in index.iter_mut().zip(&dims).rev() {
            *i += 1;
            if *i < *d {
                break;
            }
            *i = 0;
        }
    }
    out
}

/// The file's bytes, read as a whole through `input_file` (a FIFO or device left where a file
/// should be is refused, not waited on; nothing over `max_bytes` is read), and its header.
/// Errors read after the file's name.
fn open(path: &Path, max_bytes: u64) -> Result<Opened, String> {
    let bytes = crate::input_file::read_regular_file(path, "a .npy file", max_bytes)
        .map_err(|e| format!("cannot be read: {}", e.reason))?;
    refuse_overflowing_shape(&bytes)?;
    let mut rest: &[u8] = &bytes;
    let header =
        npyz::NpyHeader::from_reader(&mut rest).map_err(|e| format!("is not a .npy file: {e}"))?;
    let data_at = bytes.len() - rest.len();
    Ok(Opened {
        header,
        bytes,
        data_at,
    })
}

/// A `.npy` file read whole: its header, and its bytes with where the data starts.
struct Opened {
    header: npyz::NpyHeader,
    bytes: Vec<u8>,
    data_at: usize,
}

impl Opened {
    /// The values copied straight from the file's bytes where they are stored as `T` is in
    /// memory (NumPy's `descr` for it, in C order): one copy at memory speed, where decoding
    /// element by element took seconds for a 2^28-element answer.
    fn plain<T: bytemuck::Pod>(&self, descr: &str) -> Option<Vec<T>> {
        let header = &self.header;
        let c_order = header.order() == npyz::Order::C || header.shape().len() <= 1;
        // npyz gives the descr as the header writes it, quoted: `'<f4'`.
        if !c_order || header.dtype().descr().trim_matches('\'') != descr {
            return None;
        }
        let bytes = usize::try_from(header.len())
            .ok()?
            .checked_mul(std::mem::size_of::<T>())?;
        let data = self.bytes.get(self.data_at..)?.get(..bytes)?;
        Some(bytemuck::pod_collect_to_vec(data))
    }

    /// The file for npyz to decode, its reader at the data.
    fn into_file(self) -> npyz::NpyFile<std::io::Cursor<Vec<u8>>> {
        let mut data = std::io::Cursor::new(self.bytes);
        data.set_position(self.data_at as u64);
        npyz::NpyFile::with_header(self.header, data)
    }
}

const _: () = assert!(
    cfg!(target_endian = "little"),
    "`Opened::plain` reads little-endian files as memory"
);

/// npyz multiplies the header's shape out without a check (and panics where it overflows):
/// the shape is read here first, from the header's text, and a product past 64 bits refused.
fn refuse_overflowing_shape(bytes: &[u8]) -> Result<(), String> {
    // The header's text follows the magic, the version and its length (2 or 4 bytes).
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(1 << 16)]);
    let Some(after) = text.split("'shape'").nth(1) else {
        return Ok(());
    };
    let tuple = after
        .split('(')
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or("");
    let mut product: u64 = 1;
    for dimension in tuple.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let d: u64 = dimension
            .parse()
            .map_err(|_| format!("is not a .npy file: its shape holds `{dimension}`"))?;
        product = product
            .checked_mul(d)
            .ok_or("has a shape whose element count overflows 64 bits")?;
    }
    Ok(())
}

/// How a file's values are laid out: its shape, and whether column-major.
struct Layout {
    shape: Vec<u64>,
    fortran: bool,
}

impl Layout {
    fn of<R: std::io::Read>(npy: &npyz::NpyFile<R>) -> Layout {
        Layout {
            shape: npy.shape().to_vec(),
            fortran: npy.order() == npyz::Order::Fortran,
        }
    }

    fn to_c_order<T: Copy>(&self, values: Vec<T>) -> Vec<T> {
        if self.fortran && self.shape.len() > 1 {
            fortran_to_c_order(&values, &self.shape)
        } else {
            values
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_written_reads_back_straight_from_its_bytes_and_through_npyz() {
        let dir = tempfile::tempdir().unwrap();
        // Every type NumPy has a dtype for (bfloat16 and the 8-bit floats travel as float32).
        for dtype in DType::ALL.into_iter().filter(|d| d.npy_descr().is_some()) {
            // 67 values (a length no header padding lines up with), -60 .. 73 within the type.
            let values: Vec<f64> = (0..67).map(|i| (i * 2 - 60) as f64).collect();
            let values: Vec<f64> = match dtype.name().starts_with('u') {
                false => values,
                true => values.iter().map(|v| v.abs()).collect(),
            };
            let data = HostData::from_f64(dtype, &values);
            let path = dir.path().join(format!("{}.npy", dtype.name()));
            data.write_npy(&path).unwrap();
            let opened = open(&path, 1 << 20).unwrap();
            assert!(
                opened.data_at.is_multiple_of(64) && opened.data_at > 10,
                "{dtype:?}"
            );
            // The fast path's condition: npyz reads the header as the type kbench wrote.
            let written = opened.header.dtype().descr();
            assert_eq!(written.trim_matches('\''), dtype.npy_descr().unwrap());
            assert!(opened.plain::<u8>("nothing").is_none());
            let decoded = opened.into_file();
            assert_eq!(decoded.shape(), [67]);
            assert_eq!(read_as(&path, dtype, 1 << 20).unwrap(), data, "{dtype:?}");
            assert_eq!(read_f64(&path, 1 << 20).unwrap(), values, "{dtype:?}");
        }
    }

    /// The 2 x 3 matrix [[1, 2, 3], [4, 5, 6]] stored by columns, as `np.save` writes a
    /// transposed (Fortran-ordered) array.
    fn write_column_major<T: npyz::Serialize + npyz::AutoSerialize + Copy>(
        path: &Path,
        values: [T; 6],
    ) {
        use npyz::WriterBuilder;
        let mut writer = npyz::WriteOptions::<T>::new()
            .default_dtype()
            .shape(&[2, 3])
            .order(npyz::Order::Fortran)
            .writer(std::io::BufWriter::new(
                std::fs::File::create(path).unwrap(),
            ))
            .begin_nd()
            .unwrap();
        writer.extend(values).unwrap();
        writer.finish().unwrap();
    }

    #[test]
    fn a_column_major_file_reads_in_row_major_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.npy");
        write_column_major(&path, [1i64, 4, 2, 5, 3, 6]);
        assert_eq!(
            read_f64(&path, 1 << 20).unwrap(),
            [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        );
        write_column_major(&path, [1.5f32, 4.5, 2.5, 5.5, 3.5, 6.5]);
        assert_eq!(
            read_as(&path, DType::F32, 1 << 20).unwrap(),
            HostData::F32(vec![1.5, 2.5, 3.5, 4.5, 5.5, 6.5])
        );
    }

    #[test]
    fn a_file_of_another_dtype_is_refused_as_a_buffers_contents() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.npy");
        HostData::F64(vec![0.25; 5]).write_npy(&path).unwrap();
        let err = read_as(&path, DType::F32, 1 << 20).unwrap_err();
        assert!(err.starts_with("does not hold f32 values"), "{err}");
        assert_eq!(
            read_as(&path, DType::F64, 1 << 20).unwrap(),
            HostData::F64(vec![0.25; 5])
        );
        let err = read_as(&path, DType::F64, 100).unwrap_err();
        assert!(err.starts_with("cannot be read: "), "{err}");
        std::fs::write(&path, b"not numpy").unwrap();
        assert!(read_f64(&path, 1 << 20)
            .unwrap_err()
            .starts_with("is not a .npy file"));
    }

    #[test]
    fn the_8_bit_floats_travel_as_float32_or_as_their_named_bit_patterns() {
        let dir = tempfile::tempdir().unwrap();
        let e4m3 = |v: f64| float8::F8E4M3::from_f64(v);
        // CUDA's conversion: round to nearest even, saturate to the largest finite value.
        assert_eq!(e4m3(1000.0).to_f64(), 448.0);
        assert_eq!(e4m3(0.3).to_f64(), 0.3125);
        assert_eq!(e4m3(-2.2).to_f64(), -2.25);
        let values = HostData::F8E4M3([0.3, -2.2, 448.0, 0.0, 1e-3].map(e4m3).to_vec());
        let path = dir.path().join("q.npy");
        values.write_npy(&path).unwrap();
        assert_eq!(header(&path).unwrap(), ("<f4".to_string(), 5));
        assert_eq!(read_as(&path, DType::F8E4M3, 1 << 20).unwrap(), values);
        // A float32 value that no e4m3 holds is refused, with the nearest one named.
        HostData::F32(vec![0.25, 0.3]).write_npy(&path).unwrap();
        let err = read_as(&path, DType::F8E4M3, 1 << 20).unwrap_err();
        assert!(
            err.contains("holds 0.3 at index 1, which is not a f8e4m3 value"),
            "{err}"
        );
        // Bit patterns: uint8, in a file named *.f8e5m2.npy.
        let bits = dir.path().join("q.f8e5m2.npy");
        HostData::U8(vec![0x3C, 0xC0, 0x7B])
            .write_npy(&bits)
            .unwrap();
        assert!(holds("|u1", DType::F8E5M2, &bits).is_ok());
        let read = read_as(&bits, DType::F8E5M2, 1 << 20).unwrap().to_f64();
        assert_eq!(read, [1.0, -2.0, 57344.0]);
        let err = holds("|u1", DType::F8E4M3, &path).unwrap_err();
        assert!(
            err.contains("uint8 bit patterns in a file named `*.f8e4m3.npy`"),
            "{err}"
        );
    }
}
