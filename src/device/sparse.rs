//! cuSPARSE on the device's one stream: one handle per `Device`, made the first time a launcher
//! asks (`Gpu::sparse`). Where libcusparse cannot be loaded, asking for it is an error that says
//! so (cudarc would panic on the first call).
//!
//! Launchers describe each call once, when they are made (`Sparse::spmv`, `Sparse::spsv`: the
//! matrix and vectors checked against each other there, the descriptors made, the library's
//! buffer sized and allocated, its analysis done), and `SparseCall::launch` only queues it. A
//! call holds its buffers' addresses, as a kernel's `Arg`s do: the launcher keeps the buffers
//! alive. Matrices are square, CSR, with 32-bit row offsets and column indices from zero.

use std::ffi::{c_void, CStr};
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use cudarc::cusparse::sys;
use cudarc::driver::CudaStream;

use super::DeviceBuf;
use crate::vocab::DType;

/// Whether libcusparse can be loaded (it is looked for where CUDA and pip put it, with the
/// libnvJitLink it needs); `Err` says why not.
pub fn cusparse_present() -> Result<(), String> {
    let mut patterns = Vec::new();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        patterns.push(format!("{}/lib64/libcusparse.so*", home.to_string_lossy()));
    }
    for site in super::libs::python_site_dirs() {
        // PyTorch's CUDA 13 wheels keep every library in nvidia/cu13/lib; CUDA 12's, one package
        // a library.
        patterns.push(format!("{site}nvidia/cu13/lib/libcusparse.so*"));
        patterns.push(format!("{site}nvidia/cusparse/lib/libcusparse.so*"));
    }
    patterns.extend([
        "/usr/local/cuda/lib64/libcusparse.so*".to_string(),
        "/usr/local/cuda*/lib64/libcusparse.so*".to_string(),
        "/usr/local/cuda*/targets/*/lib/libcusparse.so*".to_string(),
        "/usr/lib/x86_64-linux-gnu/libcusparse.so*".to_string(),
    ]);
    super::libs::load(&super::libs::Search {
        label: "cuSPARSE (libcusparse.so)",
        present: sys::is_culib_present,
        env_var: "KBENCH_CUSPARSE_LIB",
        patterns,
        // libcusparse links libnvJitLink of its release: beside it in CUDA's lib64 and in CUDA
        // 13's wheels, in its own package in CUDA 12's.
        companions: &["libnvJitLink.so*", "../../nvjitlink/lib/libnvJitLink.so*"],
    })
}

fn check(status: sys::cusparseStatus_t, what: &str) -> Result<()> {
    if status == sys::cusparseStatus_t::CUSPARSE_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a static NUL-terminated string for any status.
    let text = unsafe { CStr::from_ptr(sys::cusparseGetErrorString(status)) };
    Err(anyhow!("{what}: {status:?} ({})", text.to_string_lossy()))
}

/// A cuSPARSE handle bound to the device's stream.
pub struct Sparse {
    handle: sys::cusparseHandle_t,
    /// The device's stream, waited on after a triangular solve's analysis.
    stream: Arc<CudaStream>,
}

impl Sparse {
    /// A handle on `stream` (scalars passed from the host, cuSPARSE's default), or why none can
    /// be made.
    pub(super) fn new(stream: &Arc<CudaStream>) -> Result<Sparse, String> {
        cusparse_present()?;
        let made = (|| -> Result<Sparse> {
            stream
                .context()
                .bind_to_thread()
                .map_err(super::driver_error)?;
            let mut handle: sys::cusparseHandle_t = std::ptr::null_mut();
            // SAFETY: writes one handle; the library is loaded (checked above).
            check(
                unsafe { sys::cusparseCreate(&mut handle) },
                "cusparseCreate",
            )?;
            let sparse = Sparse {
                handle,
                stream: stream.clone(),
            };
            // SAFETY: `handle` is live; the stream is the device's and outlives it.
            check(
                unsafe { sys::cusparseSetStream(handle, stream.cu_stream() as sys::cudaStream_t) },
                "cusparseSetStream",
            )?;
            Ok(sparse)
        })();
        made.map_err(|e| format!("cuSPARSE unusable: {e:#}"))
    }

    /// y = alpha A x + beta y (cusparseSpMV, CUSPARSE_SPMV_CSR_ALG1, computed in the values'
    /// type). A's arrays must be on the device, or queued there before this call: it queues
    /// cusparseSpMV_preprocess, which reads them. A's structure must not change afterwards.
    pub fn spmv<'a>(
        &'a self,
        a: &CsrRef,
        x: &DeviceBuf,
        y: &DeviceBuf,
        alpha: f64,
        beta: f64,
    ) -> Result<SparseCall<'a>> {
        let dtype = check_operands(
            a.n,
            operand(a.row_ptr),
            operand(a.col),
            operand(a.val),
            operand(x),
            operand(y),
        )?;
        let mut call = SparseCall::new(self, Op::Spmv, dtype, alpha, beta);
        call.describe(a, x, y)?;
        let (h, op, alg) = (self.handle, NON_TRANSPOSE, SPMV_ALG);
        let mut bytes = 0usize;
        // SAFETY: the descriptors are live and describe buffers checked against each other; the
        // scalars are host values read before the call returns.
        check(
            unsafe {
                sys::cusparseSpMV_bufferSize(
                    h,
                    op,
                    call.alpha(),
                    call.mat,
                    call.x,
                    call.beta(),
                    call.y,
                    call.compute,
                    alg,
                    &mut bytes,
                )
            },
            "cusparseSpMV_bufferSize",
        )?;
        call.buffer = Some(buffer(&self.stream, bytes)?);
        // SAFETY: as above; the buffer holds `bytes` and lives as long as the call.
        check(
            unsafe {
                sys::cusparseSpMV_preprocess(
                    h,
                    op,
                    call.alpha(),
                    call.mat,
                    call.x,
                    call.beta(),
                    call.y,
                    call.compute,
                    alg,
                    call.buffer_ptr(),
                )
            },
            "cusparseSpMV_preprocess",
        )?;
        Ok(call)
    }

    /// Solves T y = x, T the `triangle` of A with its diagonal (non-unit), alpha 1
    /// (cusparseSpSV_solve, its analysis done here, once). x and y are distinct buffers.
    ///
    /// Make it once A's row offsets, column indices and values are on the device (or queued
    /// there before this call): the analysis reads them, and this call waits for the stream
    /// until it has run. The values must not change afterwards (the analysis may keep what it
    /// derived from them).
    pub fn spsv<'a>(
        &'a self,
        a: &CsrRef,
        triangle: Triangle,
        x: &DeviceBuf,
        y: &DeviceBuf,
    ) -> Result<SparseCall<'a>> {
        let dtype = check_operands(
            a.n,
            operand(a.row_ptr),
            operand(a.col),
            operand(a.val),
            operand(x),
            operand(y),
        )?;
        let mut call = SparseCall::new(self, Op::Spsv(std::ptr::null_mut()), dtype, 1.0, 0.0);
        call.describe(a, x, y)?;
        let mut fill = match triangle {
            Triangle::Lower => sys::cusparseFillMode_t::CUSPARSE_FILL_MODE_LOWER,
            Triangle::Upper => sys::cusparseFillMode_t::CUSPARSE_FILL_MODE_UPPER,
        };
        let mut diag = sys::cusparseDiagType_t::CUSPARSE_DIAG_TYPE_NON_UNIT;
        let mut descr: sys::cusparseSpSVDescr_t = std::ptr::null_mut();
        // SAFETY (both attributes and the descriptor): the matrix descriptor is live; each
        // attribute is read from a live value of the size given; the descriptor is written once
        // and destroyed by the call's Drop.
        unsafe {
            check(
                sys::cusparseSpMatSetAttribute(
                    call.mat,
                    sys::cusparseSpMatAttribute_t::CUSPARSE_SPMAT_FILL_MODE,
                    &mut fill as *mut _ as *mut c_void,
                    std::mem::size_of_val(&fill),
                ),
                "cusparseSpMatSetAttribute (fill mode)",
            )?;
            check(
                sys::cusparseSpMatSetAttribute(
                    call.mat,
                    sys::cusparseSpMatAttribute_t::CUSPARSE_SPMAT_DIAG_TYPE,
                    &mut diag as *mut _ as *mut c_void,
                    std::mem::size_of_val(&diag),
                ),
                "cusparseSpMatSetAttribute (diagonal type)",
            )?;
            check(
                sys::cusparseSpSV_createDescr(&mut descr),
                "cusparseSpSV_createDescr",
            )?;
        }
        call.op = Op::Spsv(descr);
        let (h, op, alg) = (self.handle, NON_TRANSPOSE, SPSV_ALG);
        let mut bytes = 0usize;
        // SAFETY: the descriptors are live and describe buffers checked against each other; alpha
        // is a host value read before the call returns.
        check(
            unsafe {
                sys::cusparseSpSV_bufferSize(
                    h,
                    op,
                    call.alpha(),
                    call.mat,
                    call.x,
                    call.y,
                    call.compute,
                    alg,
                    descr,
                    &mut bytes,
                )
            },
            "cusparseSpSV_bufferSize",
        )?;
        call.buffer = Some(buffer(&self.stream, bytes)?);
        // SAFETY: as above; the buffer holds `bytes` and lives as long as the call (the solve
        // reads it, through the SpSV descriptor).
        check(
            unsafe {
                sys::cusparseSpSV_analysis(
                    h,
                    op,
                    call.alpha(),
                    call.mat,
                    call.x,
                    call.y,
                    call.compute,
                    alg,
                    descr,
                    call.buffer_ptr(),
                )
            },
            "cusparseSpSV_analysis",
        )?;
        self.stream.synchronize().map_err(super::driver_error)?;
        Ok(call)
    }
}

impl Drop for Sparse {
    fn drop(&mut self) {
        // SAFETY: the handle came from cusparseCreate and is destroyed once (every call borrows
        // the handle, so none outlives it); an error (a context broken by a faulting kernel) is
        // ignored, the process is going anyway.
        let _ = unsafe { sys::cusparseDestroy(self.handle) };
    }
}

const NON_TRANSPOSE: sys::cusparseOperation_t =
    sys::cusparseOperation_t::CUSPARSE_OPERATION_NON_TRANSPOSE;
const SPMV_ALG: sys::cusparseSpMVAlg_t = sys::cusparseSpMVAlg_t::CUSPARSE_SPMV_CSR_ALG1;
const SPSV_ALG: sys::cusparseSpSVAlg_t = sys::cusparseSpSVAlg_t::CUSPARSE_SPSV_ALG_DEFAULT;

/// A square CSR matrix on the device, borrowed: `row_ptr` (i32, n + 1 offsets from zero, the
/// last one nnz), `col` (i32, nnz column indices, sorted within each row), `val` (f32 or f64, nnz
/// values).
pub struct CsrRef<'b> {
    pub n: usize,
    pub row_ptr: &'b DeviceBuf,
    pub col: &'b DeviceBuf,
    pub val: &'b DeviceBuf,
}

/// Which triangle of a matrix a triangular solve uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Triangle {
    Lower,
    Upper,
}

/// What the checks need of a buffer: its element type, length and address.
#[derive(Clone, Copy, Debug)]
struct Operand {
    dtype: DType,
    len: usize,
    addr: u64,
}

fn operand(buf: &DeviceBuf) -> Operand {
    Operand {
        dtype: buf.dtype,
        len: buf.len,
        addr: buf.ptr,
    }
}

/// Checks an n x n CSR matrix and the vectors x and y against each other and against cuSPARSE's
/// 32-bit indices, before any library call; returns the values' type.
fn check_operands(
    n: usize,
    row_ptr: Operand,
    col: Operand,
    val: Operand,
    x: Operand,
    y: Operand,
) -> Result<DType> {
    let dtype = val.dtype;
    if dtype == DType::I32 {
        bail!("cuSPARSE calls take float32 or float64 values, not {dtype}");
    }
    for (name, buf, want) in [
        ("row offsets", row_ptr, DType::I32),
        ("column indices", col, DType::I32),
        ("x", x, dtype),
        ("y", y, dtype),
    ] {
        if buf.dtype != want {
            bail!(
                "CSR call with {dtype} values: {name} must be {want}, not {}",
                buf.dtype
            );
        }
    }
    if n == 0 {
        bail!("cuSPARSE calls need a matrix of at least one row");
    }
    let max = i32::MAX as usize;
    if n > max {
        bail!("{n} rows exceed cuSPARSE's 32-bit indices");
    }
    let nnz = col.len;
    if nnz > max {
        bail!("{nnz} nonzeros exceed cuSPARSE's 32-bit indices");
    }
    if row_ptr.len != n + 1 {
        bail!(
            "a {n}-row CSR matrix has {} row offsets, not {}",
            row_ptr.len,
            n + 1
        );
    }
    if val.len != nnz {
        bail!(
            "CSR matrix with {nnz} column indices but {} values",
            val.len
        );
    }
    for (name, buf) in [("x", x), ("y", y)] {
        if buf.len != n {
            bail!(
                "vector {name} has {} elements, the matrix {n} rows",
                buf.len
            );
        }
    }
    if x.addr == y.addr {
        bail!("x and y must be distinct buffers");
    }
    Ok(dtype)
}

/// A zeroed device buffer of at least `bytes` for the library's own use (four-byte elements:
/// the driver aligns every allocation far beyond what cuSPARSE needs).
fn buffer(stream: &Arc<CudaStream>, bytes: usize) -> Result<DeviceBuf> {
    DeviceBuf::zeroed(stream, DType::I32, bytes.div_ceil(4))
}

fn data_type(dtype: DType) -> sys::cudaDataType {
    match dtype {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        _ => sys::cudaDataType::CUDA_R_64F,
    }
}

/// The call's host scalars, in its values' type: alpha and beta.
enum Scalars {
    F32([f32; 2]),
    F64([f64; 2]),
}

enum Op {
    Spmv,
    /// The analysis's descriptor (null until made).
    Spsv(sys::cusparseSpSVDescr_t),
}

/// One cuSPARSE call, its operands checked and its setup done, ready to queue. It owns its
/// descriptors, the library's buffer and the host scalars the call reads.
pub struct SparseCall<'a> {
    sparse: &'a Sparse,
    op: Op,
    compute: sys::cudaDataType,
    scalars: Scalars,
    /// The descriptors: null until made, destroyed by Drop where made.
    mat: sys::cusparseSpMatDescr_t,
    x: sys::cusparseConstDnVecDescr_t,
    y: sys::cusparseDnVecDescr_t,
    /// The library's buffer (SpMV's preprocessed data, SpSV's analysis), freed after the
    /// descriptors (fields drop after `Drop::drop`).
    buffer: Option<DeviceBuf>,
}

impl<'a> SparseCall<'a> {
    fn new(sparse: &'a Sparse, op: Op, dtype: DType, alpha: f64, beta: f64) -> SparseCall<'a> {
        SparseCall {
            sparse,
            op,
            compute: data_type(dtype),
            scalars: match dtype {
                DType::F32 => Scalars::F32([alpha as f32, beta as f32]),
                _ => Scalars::F64([alpha, beta]),
            },
            mat: std::ptr::null_mut(),
            x: std::ptr::null(),
            y: std::ptr::null_mut(),
            buffer: None,
        }
    }

    /// Makes the matrix's and the vectors' descriptors (operands already checked).
    fn describe(&mut self, a: &CsrRef, x: &DeviceBuf, y: &DeviceBuf) -> Result<()> {
        let (n, nnz) = (a.n as i64, a.col.len as i64);
        let index = sys::cusparseIndexType_t::CUSPARSE_INDEX_32I;
        // SAFETY (all three): each writes one descriptor, destroyed by Drop; the addresses are
        // of live buffers whose types and lengths were checked against n and nnz.
        unsafe {
            check(
                sys::cusparseCreateCsr(
                    &mut self.mat,
                    n,
                    n,
                    nnz,
                    a.row_ptr.ptr as *mut c_void,
                    a.col.ptr as *mut c_void,
                    a.val.ptr as *mut c_void,
                    index,
                    index,
                    sys::cusparseIndexBase_t::CUSPARSE_INDEX_BASE_ZERO,
                    self.compute,
                ),
                "cusparseCreateCsr",
            )?;
            check(
                sys::cusparseCreateConstDnVec(&mut self.x, n, x.ptr as *const c_void, self.compute),
                "cusparseCreateConstDnVec (x)",
            )?;
            check(
                sys::cusparseCreateDnVec(&mut self.y, n, y.ptr as *mut c_void, self.compute),
                "cusparseCreateDnVec (y)",
            )?;
        }
        Ok(())
    }

    fn alpha(&self) -> *const c_void {
        match &self.scalars {
            Scalars::F32(s) => &s[0] as *const f32 as *const c_void,
            Scalars::F64(s) => &s[0] as *const f64 as *const c_void,
        }
    }

    fn beta(&self) -> *const c_void {
        match &self.scalars {
            Scalars::F32(s) => &s[1] as *const f32 as *const c_void,
            Scalars::F64(s) => &s[1] as *const f64 as *const c_void,
        }
    }

    fn buffer_ptr(&self) -> *mut c_void {
        self.buffer
            .as_ref()
            .map_or(std::ptr::null_mut(), |b| b.ptr as *mut c_void)
    }

    /// Queues the call on the device's stream.
    ///
    /// # Safety
    /// The buffers it was made with must live until the call has run on the device (the borrow
    /// keeps them alive on the host side only), and nothing else may write them meanwhile.
    pub unsafe fn launch(&self) -> Result<()> {
        let h = self.sparse.handle;
        // SAFETY (both): the descriptors are live and were checked against the buffers when the
        // call was made, the scalars are host values in the call (cuSPARSE's default pointer
        // mode) read before the call returns, the library's buffer lives as long as the call, and
        // the caller keeps the operands alive.
        match self.op {
            Op::Spmv => check(
                unsafe {
                    sys::cusparseSpMV(
                        h,
                        NON_TRANSPOSE,
                        self.alpha(),
                        self.mat,
                        self.x,
                        self.beta(),
                        self.y,
                        self.compute,
                        SPMV_ALG,
                        self.buffer_ptr(),
                    )
                },
                "cusparseSpMV",
            ),
            Op::Spsv(descr) => check(
                unsafe {
                    sys::cusparseSpSV_solve(
                        h,
                        NON_TRANSPOSE,
                        self.alpha(),
                        self.mat,
                        self.x,
                        self.y,
                        self.compute,
                        SPSV_ALG,
                        descr,
                    )
                },
                "cusparseSpSV_solve",
            ),
        }
    }
}

impl Drop for SparseCall<'_> {
    fn drop(&mut self) {
        // SAFETY: each descriptor was made once by this call and is destroyed once, where made;
        // errors are ignored as in `Sparse`'s Drop.
        unsafe {
            if let Op::Spsv(descr) = self.op {
                if !descr.is_null() {
                    let _ = sys::cusparseSpSV_destroyDescr(descr);
                }
            }
            if !self.mat.is_null() {
                let _ = sys::cusparseDestroySpMat(self.mat);
            }
            if !self.x.is_null() {
                let _ = sys::cusparseDestroyDnVec(self.x);
            }
            if !self.y.is_null() {
                let _ = sys::cusparseDestroyDnVec(self.y);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(dtype: DType, len: usize, addr: u64) -> Operand {
        Operand { dtype, len, addr }
    }

    /// A 4-row matrix with 10 nonzeros in `dtype`, x and y of 4 at distinct addresses.
    fn operands(dtype: DType) -> (usize, Operand, Operand, Operand, Operand, Operand) {
        (
            4,
            op(DType::I32, 5, 0x100),
            op(DType::I32, 10, 0x200),
            op(dtype, 10, 0x300),
            op(dtype, 4, 0x400),
            op(dtype, 4, 0x500),
        )
    }

    fn checked(o: (usize, Operand, Operand, Operand, Operand, Operand)) -> Result<DType> {
        check_operands(o.0, o.1, o.2, o.3, o.4, o.5)
    }

    fn error(o: (usize, Operand, Operand, Operand, Operand, Operand)) -> String {
        checked(o).unwrap_err().to_string()
    }

    #[test]
    fn consistent_operands_give_the_values_type() {
        assert_eq!(checked(operands(DType::F32)).unwrap(), DType::F32);
        assert_eq!(checked(operands(DType::F64)).unwrap(), DType::F64);
    }

    #[test]
    fn element_types_are_checked() {
        let mut o = operands(DType::F64);
        o.3.dtype = DType::I32;
        assert!(
            error(o).contains("float32 or float64 values"),
            "{}",
            error(o)
        );
        let mut o = operands(DType::F64);
        o.4.dtype = DType::F32;
        assert!(error(o).contains("x must be f64, not f32"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.5.dtype = DType::F64;
        assert!(error(o).contains("y must be f32"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.1.dtype = DType::F32;
        assert!(error(o).contains("row offsets must be i32"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.2.dtype = DType::F64;
        assert!(
            error(o).contains("column indices must be i32"),
            "{}",
            error(o)
        );
    }

    #[test]
    fn lengths_are_checked_against_n_and_nnz() {
        let mut o = operands(DType::F32);
        o.1.len = 4;
        assert!(error(o).contains("4 row offsets, not 5"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.3.len = 9;
        assert!(
            error(o).contains("10 column indices but 9 values"),
            "{}",
            error(o)
        );
        let mut o = operands(DType::F32);
        o.4.len = 5;
        assert!(error(o).contains("vector x has 5 elements"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.5.len = 3;
        assert!(error(o).contains("vector y has 3 elements"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.0 = 0;
        o.1.len = 1;
        assert!(error(o).contains("at least one row"), "{}", error(o));
        // No nonzeros is a valid matrix (SpMV then scales y).
        let mut o = operands(DType::F32);
        o.2.len = 0;
        o.3.len = 0;
        assert_eq!(checked(o).unwrap(), DType::F32);
    }

    #[test]
    fn sizes_beyond_32_bit_indices_are_refused() {
        let big = 1usize << 31;
        let mut o = operands(DType::F32);
        o.2.len = big;
        o.3.len = big;
        assert!(error(o).contains("nonzeros exceed"), "{}", error(o));
        let mut o = operands(DType::F32);
        o.0 = big;
        o.1.len = big + 1;
        o.4.len = big;
        o.5.len = big;
        assert!(error(o).contains("rows exceed"), "{}", error(o));
        // The largest sizes that fit pass.
        let max = i32::MAX as usize;
        let mut o = operands(DType::F32);
        (o.0, o.1.len, o.4.len, o.5.len) = (max, max + 1, max, max);
        (o.2.len, o.3.len) = (max, max);
        assert_eq!(checked(o).unwrap(), DType::F32);
    }

    #[test]
    fn x_and_y_must_be_distinct() {
        let mut o = operands(DType::F64);
        o.5.addr = o.4.addr;
        assert!(error(o).contains("distinct"), "{}", error(o));
    }

    #[test]
    fn a_machine_without_cusparse_gets_a_reason_not_a_panic() {
        // Here or on a GPU machine: either cuSPARSE loads, or the reason names the variable.
        if let Err(reason) = cusparse_present() {
            assert!(
                reason.contains("cuSPARSE") && reason.contains("KBENCH_CUSPARSE_LIB"),
                "{reason}"
            );
        }
    }

    /// A g x g grid's 5-point matrix in CSR, both triangles stored and unequal (-1 above the
    /// diagonal, -0.5 below, 4.5 on it), column indices sorted.
    fn grid_matrix(g: usize) -> (Vec<i32>, Vec<i32>, Vec<f64>) {
        let (mut row_ptr, mut col, mut val) = (vec![0], Vec::new(), Vec::new());
        for i in 0..g * g {
            let (r, c) = (i / g, i % g);
            let mut row = vec![(i, 4.5)];
            if r > 0 {
                row.push((i - g, -0.5));
            }
            if c > 0 {
                row.push((i - 1, -0.5));
            }
            if c + 1 < g {
                row.push((i + 1, -1.0));
            }
            if r + 1 < g {
                row.push((i + g, -1.0));
            }
            row.sort_by_key(|e| e.0);
            for (j, v) in row {
                col.push(j as i32);
                val.push(v);
            }
            row_ptr.push(col.len() as i32);
        }
        (row_ptr, col, val)
    }

    /// y = T^-1 x on the host, T the triangle of the CSR matrix with its diagonal.
    fn host_solve(rp: &[i32], col: &[i32], val: &[f64], lower: bool, x: &[f64]) -> Vec<f64> {
        let n = x.len();
        let mut y = vec![0.0; n];
        let rows: Vec<usize> = if lower {
            (0..n).collect()
        } else {
            (0..n).rev().collect()
        };
        for i in rows {
            let (mut s, mut d) = (x[i], 0.0);
            for k in rp[i] as usize..rp[i + 1] as usize {
                let j = col[k] as usize;
                if j == i {
                    d = val[k];
                } else if (j < i) == lower {
                    s -= val[k] * y[j];
                }
            }
            y[i] = s / d;
        }
        y
    }

    #[test]
    #[ignore = "needs a CUDA GPU"]
    fn spmv_and_both_triangular_solves_match_the_host_on_a_full_unsymmetric_matrix() {
        use crate::vocab::HostData;
        let ctx = cudarc::driver::CudaContext::new(0).unwrap();
        // SAFETY: before any buffer exists, as in Device::open.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().unwrap();
        let sparse = Sparse::new(&stream).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut loaded: Vec<&str> = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .filter(|p| p.contains("cusparse") || p.contains("nvJitLink"))
            .collect();
        loaded.dedup();
        println!("loaded: {loaded:?}");
        let g = 300;
        let n = g * g;
        let (rp, col, val) = grid_matrix(g);
        let x: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0)
            .collect();
        let y0: Vec<f64> = (0..n).map(|i| (i % 13) as f64 - 6.0).collect();
        let buf = |host: HostData| {
            let b = DeviceBuf::zeroed(&stream, host.dtype(), host.len()).unwrap();
            b.copy_from_host(&host).unwrap();
            b
        };
        let (rp_d, col_d) = (
            buf(HostData::I32(rp.clone())),
            buf(HostData::I32(col.clone())),
        );
        for dtype in [DType::F64, DType::F32] {
            let host = |v: &[f64]| match dtype {
                DType::F32 => HostData::F32(v.iter().map(|&e| e as f32).collect()),
                _ => HostData::F64(v.to_vec()),
            };
            let back = |b: &DeviceBuf| {
                let mut h = host(&vec![0.0; n]);
                b.copy_to_host(&mut h).unwrap();
                match h {
                    HostData::F32(v) => v.into_iter().map(f64::from).collect::<Vec<_>>(),
                    HostData::F64(v) => v,
                    _ => unreachable!(),
                }
            };
            let tol = if dtype == DType::F32 { 1e-4 } else { 1e-12 };
            let close = |got: &[f64], want: &[f64], what: &str| {
                let err = got
                    .iter()
                    .zip(want)
                    .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
                    .fold(0.0, f64::max);
                println!("{dtype} {what}: max relative error {err:.2e}");
                assert!(err < tol, "{dtype} {what}: {err}");
            };
            let (val_d, x_d, y_d) = (buf(host(&val)), buf(host(&x)), buf(host(&y0)));
            let a = CsrRef {
                n,
                row_ptr: &rp_d,
                col: &col_d,
                val: &val_d,
            };
            let (alpha, beta) = (2.0, 0.5);
            let mut want = y0.clone();
            for i in 0..n {
                let ax: f64 = (rp[i] as usize..rp[i + 1] as usize)
                    .map(|k| val[k] * x[col[k] as usize])
                    .sum();
                want[i] = alpha * ax + beta * y0[i];
            }
            let spmv = sparse.spmv(&a, &x_d, &y_d, alpha, beta).unwrap();
            for round in 0..2 {
                y_d.copy_from_host(&host(&y0)).unwrap();
                // SAFETY: the buffers outlive the call, read back below.
                unsafe { spmv.launch() }.unwrap();
                close(&back(&y_d), &want, &format!("spmv, launch {round}"));
            }
            for triangle in [Triangle::Lower, Triangle::Upper] {
                let lower = triangle == Triangle::Lower;
                let want = host_solve(&rp, &col, &val, lower, &x);
                let spsv = sparse.spsv(&a, triangle, &x_d, &y_d).unwrap();
                for round in 0..2 {
                    y_d.copy_from_host(&host(&y0)).unwrap();
                    // SAFETY: as above.
                    unsafe { spsv.launch() }.unwrap();
                    close(
                        &back(&y_d),
                        &want,
                        &format!("spsv {triangle:?}, launch {round}"),
                    );
                }
                // In a CUDA graph, as kbench's graph scope replays launches.
                y_d.copy_from_host(&host(&y0)).unwrap();
                stream.synchronize().unwrap();
                use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
                stream
                    .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
                    .unwrap();
                // SAFETY: as above.
                let captured = unsafe { spsv.launch() };
                let graph = stream.end_capture(CUgraphInstantiate_flags(0)).unwrap();
                captured.unwrap();
                graph.expect("a captured solve").launch().unwrap();
                close(&back(&y_d), &want, &format!("spsv {triangle:?}, graph"));
            }
            // Timing, for scale: 20 solves and 20 products queued back to back.
            let spsv = sparse.spsv(&a, Triangle::Lower, &x_d, &y_d).unwrap();
            for (what, call) in [("spmv", &spmv), ("spsv lower", &spsv)] {
                stream.synchronize().unwrap();
                let t = std::time::Instant::now();
                for _ in 0..20 {
                    // SAFETY: as above.
                    unsafe { call.launch() }.unwrap();
                }
                stream.synchronize().unwrap();
                println!(
                    "{dtype} {what}: {:.1} us a call (n {n})",
                    t.elapsed().as_secs_f64() / 20.0 * 1e6
                );
            }
        }
    }
}
