//! cuBLAS on the device's one stream: one handle per `Device`, made the first time a launcher
//! asks (`Gpu::blas`), with its own workspace so that cuBLAS never allocates while a sample is
//! queued behind the held stream. Where libcublas cannot be loaded, asking for it is an error that
//! says so (cudarc would panic on the first call).
//!
//! Launchers describe each call once, when they are made (`Blas::syrk`, `Blas::gemm`,
//! `Blas::saxpy`: the shapes
//! and buffers checked against each other there), and `BlasCall::launch` only queues it. A call
//! holds its buffers' addresses, as a kernel's `Arg`s do: the launcher keeps the buffers alive.
//! Matrices are column-major, as cuBLAS's are: a row-major M x N matrix with row stride ld is the
//! column-major N x M matrix with leading dimension ld.

use std::ffi::{c_int, c_void, CStr};
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use cudarc::cublas::sys;
use cudarc::driver::CudaStream;

use super::DeviceBuf;
use crate::vocab::DType;

/// cuBLAS's workspace: 32 MiB, what NVIDIA recommends for Hopper (4 MiB suffices before it).
const WORKSPACE_BYTES: usize = 32 << 20;

/// Whether libcublas can be loaded (it is looked for where CUDA and pip put it); `Err` says why
/// not.
pub fn cublas_present() -> Result<(), String> {
    let mut patterns = Vec::new();
    if let Some(home) = std::env::var_os("CUDA_HOME") {
        patterns.push(format!("{}/lib64/libcublas.so*", home.to_string_lossy()));
    }
    for site in super::libs::python_site_dirs() {
        // PyTorch's CUDA 13 wheels keep every library in nvidia/cu13/lib; CUDA 12's, one package
        // a library.
        patterns.push(format!("{site}nvidia/cu13/lib/libcublas.so*"));
        patterns.push(format!("{site}nvidia/cublas/lib/libcublas.so*"));
    }
    patterns.extend([
        "/usr/local/cuda/lib64/libcublas.so*".to_string(),
        "/usr/local/cuda*/lib64/libcublas.so*".to_string(),
        "/usr/local/cuda*/targets/*/lib/libcublas.so*".to_string(),
        "/usr/lib/x86_64-linux-gnu/libcublas.so*".to_string(),
    ]);
    super::libs::load(&super::libs::Search {
        label: "cuBLAS (libcublas.so)",
        present: sys::is_culib_present,
        env_var: "KBENCH_CUBLAS_LIB",
        patterns,
        companions: &["libcublasLt.so*"],
    })
}

fn check(status: sys::cublasStatus_t, what: &str) -> Result<()> {
    if status == sys::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        return Ok(());
    }
    // SAFETY: returns a static NUL-terminated string for any status.
    let text = unsafe { CStr::from_ptr(sys::cublasGetStatusString(status)) };
    Err(anyhow!("{what}: {status:?} ({})", text.to_string_lossy()))
}

/// A cuBLAS handle bound to the device's stream, with its workspace.
pub struct Blas {
    handle: sys::cublasHandle_t,
    /// Freed after the handle (fields drop after `Drop::drop`).
    _workspace: DeviceBuf,
}

impl Blas {
    /// A handle on `stream`, its math mode the default (no TF32 unless a call asks for it), or
    /// why none can be made.
    pub(super) fn new(stream: &Arc<CudaStream>) -> Result<Blas, String> {
        cublas_present()?;
        let made = (|| -> Result<Blas> {
            stream
                .context()
                .bind_to_thread()
                .map_err(super::driver_error)?;
            let workspace = DeviceBuf::zeroed(stream, DType::I32, WORKSPACE_BYTES / 4)?;
            let mut handle: sys::cublasHandle_t = std::ptr::null_mut();
            // SAFETY: writes one handle; the library is loaded (checked above).
            check(unsafe { sys::cublasCreate_v2(&mut handle) }, "cublasCreate")?;
            let blas = Blas {
                handle,
                _workspace: workspace,
            };
            // SAFETY (all three): `handle` is live; the stream and the workspace outlive it (the
            // workspace is a field dropped after the handle, the stream is the device's).
            unsafe {
                check(
                    sys::cublasSetStream_v2(handle, stream.cu_stream() as sys::cudaStream_t),
                    "cublasSetStream",
                )?;
                check(
                    sys::cublasSetWorkspace_v2(
                        handle,
                        blas._workspace.ptr as *mut c_void,
                        WORKSPACE_BYTES,
                    ),
                    "cublasSetWorkspace",
                )?;
                check(
                    sys::cublasSetMathMode(handle, sys::cublasMath_t::CUBLAS_DEFAULT_MATH),
                    "cublasSetMathMode",
                )?;
            }
            Ok(blas)
        })();
        made.map_err(|e| format!("cuBLAS unusable: {e:#}"))
    }

    /// C = op(A) op(A)^T into the lower triangle of the column-major n x n matrix C (ldc), alpha
    /// 1, beta 0: op(A) is A (n x k, lda) with `trans` false, A^T (A: k x n) with it true. The
    /// upper triangle is left as it was.
    #[allow(clippy::too_many_arguments)]
    pub fn syrk<'a>(
        &'a self,
        trans: bool,
        n: usize,
        k: usize,
        a: &DeviceBuf,
        lda: usize,
        c: &DeviceBuf,
        ldc: usize,
    ) -> Result<BlasCall<'a>> {
        let dtype = same_float_dtype(&[a, c])?;
        let (a_rows, a_cols) = if trans { (k, n) } else { (n, k) };
        check_shape("A", a.len, a_rows, a_cols, lda)?;
        check_shape("C", c.len, n, n, ldc)?;
        Ok(BlasCall {
            blas: self,
            op: Op::Syrk {
                dtype,
                trans: operation(trans),
                n: int(n)?,
                k: int(k)?,
                a: a.ptr,
                lda: int(lda)?,
                c: c.ptr,
                ldc: int(ldc)?,
            },
        })
    }

    /// C = op(A) op(B) into the column-major m x n matrix C (ldc), alpha 1, beta 0: op(X) is X,
    /// or X^T where `trans_x`. With `tf32` (f32 only), the products run on the tensor cores with
    /// TF32 inputs (10-bit mantissas) and float32 accumulation (CUBLAS_COMPUTE_32F_FAST_TF32);
    /// without, in plain float32 or float64.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<'a>(
        &'a self,
        (trans_a, trans_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        (a, lda): (&DeviceBuf, usize),
        (b, ldb): (&DeviceBuf, usize),
        (c, ldc): (&DeviceBuf, usize),
        tf32: bool,
    ) -> Result<BlasCall<'a>> {
        let dtype = same_float_dtype(&[a, b, c])?;
        if tf32 && dtype != DType::F32 {
            bail!("TF32 tensor-core products take float32 matrices, not {dtype}");
        }
        let shape = |t: bool, rows: usize, cols: usize| if t { (cols, rows) } else { (rows, cols) };
        let (ar, ac) = shape(trans_a, m, k);
        let (br, bc) = shape(trans_b, k, n);
        check_shape("A", a.len, ar, ac, lda)?;
        check_shape("B", b.len, br, bc, ldb)?;
        check_shape("C", c.len, m, n, ldc)?;
        Ok(BlasCall {
            blas: self,
            op: Op::Gemm {
                dtype,
                tf32,
                trans: (operation(trans_a), operation(trans_b)),
                mnk: (int(m)?, int(n)?, int(k)?),
                a: (a.ptr, int(lda)?),
                b: (b.ptr, int(ldb)?),
                c: (c.ptr, int(ldc)?),
            },
        })
    }
}

impl Blas {
    /// y = alpha x + y over the first n elements of two float32 vectors (cublasSaxpy, unit
    /// strides).
    pub fn saxpy<'a>(
        &'a self,
        n: usize,
        alpha: f32,
        x: &DeviceBuf,
        y: &DeviceBuf,
    ) -> Result<BlasCall<'a>> {
        if x.dtype != DType::F32 || y.dtype != DType::F32 {
            bail!(
                "saxpy takes float32 vectors, got {} and {}",
                x.dtype,
                y.dtype
            );
        }
        if x.len < n || y.len < n {
            bail!("saxpy of {n} elements: x has {}, y {}", x.len, y.len);
        }
        Ok(BlasCall {
            blas: self,
            op: Op::Saxpy {
                n: int(n)?,
                alpha,
                x: x.ptr,
                y: y.ptr,
            },
        })
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // SAFETY: the handle came from cublasCreate and is destroyed once; an error (a context
        // broken by a faulting kernel) is ignored, the process is going anyway.
        let _ = unsafe { sys::cublasDestroy_v2(self.handle) };
    }
}

fn operation(trans: bool) -> sys::cublasOperation_t {
    if trans {
        sys::cublasOperation_t::CUBLAS_OP_T
    } else {
        sys::cublasOperation_t::CUBLAS_OP_N
    }
}

fn int(x: usize) -> Result<c_int> {
    c_int::try_from(x).map_err(|_| anyhow!("{x} exceeds cuBLAS's 32-bit dimensions"))
}

fn same_float_dtype(buffers: &[&DeviceBuf]) -> Result<DType> {
    let dtype = buffers[0].dtype;
    if dtype == DType::I32 || buffers.iter().any(|b| b.dtype != dtype) {
        bail!(
            "cuBLAS takes matrices of one float type, got {}",
            buffers
                .iter()
                .map(|b| b.dtype.name())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(dtype)
}

/// Checks that `len` elements hold a column-major rows x cols matrix with leading dimension `ld`.
fn check_shape(name: &str, len: usize, rows: usize, cols: usize, ld: usize) -> Result<()> {
    if ld < rows.max(1) {
        bail!("matrix {name}: leading dimension {ld} < {rows} rows");
    }
    let needed = match cols {
        0 => 0,
        _ => ld
            .checked_mul(cols - 1)
            .and_then(|x| x.checked_add(rows))
            .ok_or_else(|| anyhow!("matrix {name}: size overflows"))?,
    };
    if needed > len {
        bail!("matrix {name} ({rows} x {cols}, ld {ld}) needs {needed} elements, its buffer has {len}");
    }
    Ok(())
}

enum Op {
    Syrk {
        dtype: DType,
        trans: sys::cublasOperation_t,
        n: c_int,
        k: c_int,
        a: u64,
        lda: c_int,
        c: u64,
        ldc: c_int,
    },
    Saxpy {
        n: c_int,
        alpha: f32,
        x: u64,
        y: u64,
    },
    Gemm {
        dtype: DType,
        tf32: bool,
        trans: (sys::cublasOperation_t, sys::cublasOperation_t),
        mnk: (c_int, c_int, c_int),
        a: (u64, c_int),
        b: (u64, c_int),
        c: (u64, c_int),
    },
}

/// One cuBLAS call, its shapes checked, ready to queue.
pub struct BlasCall<'a> {
    blas: &'a Blas,
    op: Op,
}

impl BlasCall<'_> {
    /// Queues the call on the device's stream.
    ///
    /// # Safety
    /// The buffers it was made with must live until the call has run on the device (the borrow
    /// keeps them alive on the host side only), and nothing else may write them meanwhile.
    pub unsafe fn launch(&self) -> Result<()> {
        let h = self.blas.handle;
        let (one32, zero32, one64, zero64) = (1f32, 0f32, 1f64, 0f64);
        let lower = sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER;
        // SAFETY (every call): the shapes were checked against the buffers when the call was made
        // (`check_shape`), the scalars are host values (the handle's default pointer mode) read
        // before the call returns, and the caller keeps the buffers alive.
        match self.op {
            Op::Syrk {
                dtype,
                trans,
                n,
                k,
                a,
                lda,
                c,
                ldc,
            } => match dtype {
                DType::F32 => check(
                    unsafe {
                        sys::cublasSsyrk_v2(
                            h,
                            lower,
                            trans,
                            n,
                            k,
                            &one32,
                            a as *const f32,
                            lda,
                            &zero32,
                            c as *mut f32,
                            ldc,
                        )
                    },
                    "cublasSsyrk",
                ),
                _ => check(
                    unsafe {
                        sys::cublasDsyrk_v2(
                            h,
                            lower,
                            trans,
                            n,
                            k,
                            &one64,
                            a as *const f64,
                            lda,
                            &zero64,
                            c as *mut f64,
                            ldc,
                        )
                    },
                    "cublasDsyrk",
                ),
            },
            Op::Gemm {
                dtype,
                tf32,
                trans: (ta, tb),
                mnk: (m, n, k),
                a: (a, lda),
                b: (b, ldb),
                c: (c, ldc),
            } => match (dtype, tf32) {
                (DType::F32, true) => {
                    let f32_type = sys::cudaDataType::CUDA_R_32F;
                    check(
                        unsafe {
                            sys::cublasGemmEx(
                                h,
                                ta,
                                tb,
                                m,
                                n,
                                k,
                                &one32 as *const f32 as *const c_void,
                                a as *const c_void,
                                f32_type,
                                lda,
                                b as *const c_void,
                                f32_type,
                                ldb,
                                &zero32 as *const f32 as *const c_void,
                                c as *mut c_void,
                                f32_type,
                                ldc,
                                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_FAST_TF32,
                                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
                            )
                        },
                        "cublasGemmEx (TF32)",
                    )
                }
                (DType::F32, false) => check(
                    unsafe {
                        sys::cublasSgemm_v2(
                            h,
                            ta,
                            tb,
                            m,
                            n,
                            k,
                            &one32,
                            a as *const f32,
                            lda,
                            b as *const f32,
                            ldb,
                            &zero32,
                            c as *mut f32,
                            ldc,
                        )
                    },
                    "cublasSgemm",
                ),
                _ => check(
                    unsafe {
                        sys::cublasDgemm_v2(
                            h,
                            ta,
                            tb,
                            m,
                            n,
                            k,
                            &one64,
                            a as *const f64,
                            lda,
                            b as *const f64,
                            ldb,
                            &zero64,
                            c as *mut f64,
                            ldc,
                        )
                    },
                    "cublasDgemm",
                ),
            },
            Op::Saxpy { n, alpha, x, y } => check(
                unsafe { sys::cublasSaxpy_v2(h, n, &alpha, x as *const f32, 1, y as *mut f32, 1) },
                "cublasSaxpy",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cublas_dimensions_are_32_bit() {
        assert_eq!(int(8192).unwrap(), 8192);
        assert!(int(1 << 31).is_err());
    }

    #[test]
    fn a_machine_without_cublas_gets_a_reason_not_a_panic() {
        // Here or on a GPU machine: either cuBLAS loads, or the reason names the variable.
        if let Err(reason) = cublas_present() {
            assert!(
                reason.contains("cuBLAS") && reason.contains("KBENCH_CUBLAS_LIB"),
                "{reason}"
            );
        }
    }

    #[test]
    fn matrix_shapes_are_checked_against_their_buffers() {
        // 3 x 4 with ld 5: the last column starts at 15 and ends at 18.
        assert!(check_shape("A", 18, 3, 4, 5).is_ok());
        let err = check_shape("A", 17, 3, 4, 5).unwrap_err().to_string();
        assert!(err.contains("needs 18 elements"), "{err}");
        assert!(check_shape("A", 100, 6, 4, 5).is_err(), "ld below the rows");
        assert!(check_shape("C", 0, 0, 0, 1).is_ok(), "empty");
    }
}
