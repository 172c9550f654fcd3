//! cuBLAS on the device's one stream: one handle per `Device`, made the first time a launcher
//! asks (`Gpu::blas`), with its own workspace so that cuBLAS never allocates while a sample is
//! queued behind the held stream. Where libcublas cannot be loaded, asking for it is an error that
//! says so (cudarc would panic on the first call).
//!
//! Launchers describe each call once, when they are made (`Blas::syrk`, `Blas::gemm`,
//! `Blas::lower_product`, `Blas::saxpy`: the shapes and buffers checked against each other
//! there), and `BlasCall::launch` only queues it. A call
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

    /// C = op(A) op(B) into the column-major m x n matrix C, or added to it where `accumulate`
    /// (alpha 1, beta 0 or 1): op(X) is X, or X^T where `trans_x`; where A, B and C sit in their
    /// buffers, and how many products one call makes, is `layout` (in elements of what `inputs`
    /// says A and B hold).
    pub fn gemm<'a>(
        &'a self,
        (trans_a, trans_b): (bool, bool),
        (m, n, k): (usize, usize, usize),
        [a, b, c]: [&DeviceBuf; 3],
        layout: &GemmLayout,
        inputs: Inputs,
        accumulate: bool,
    ) -> Result<BlasCall<'a>> {
        let dtype = match inputs {
            Inputs::Bf16 if a.dtype != DType::F32 || b.dtype != DType::F32 => bail!(
                "bfloat16 A and B are held two to each element of a float32 buffer, not {} and {}",
                a.dtype,
                b.dtype
            ),
            Inputs::Bf16 => same_float_dtype(&[c])?,
            _ => same_float_dtype(&[a, b, c])?,
        };
        if inputs != Inputs::Native && dtype != DType::F32 {
            bail!("{inputs:?} tensor-core products write float32 matrices, not {dtype}");
        }
        if layout.count == 0 {
            bail!("a batch of 0 products");
        }
        let shape = |t: bool, rows: usize, cols: usize| if t { (cols, rows) } else { (rows, cols) };
        let shapes = [shape(trans_a, m, k), shape(trans_b, k, n), (m, n)];
        let mut matrices = [(0, 0, 0); 3];
        for (i, (name, buf)) in [("A", a), ("B", b), ("C", c)].into_iter().enumerate() {
            // The batch's last matrix must fit too.
            let last = (layout.count - 1)
                .checked_mul(layout.strides[i])
                .and_then(|x| x.checked_add(layout.offsets[i]))
                .ok_or_else(|| anyhow!("matrix {name}: batch offsets overflow"))?;
            let (rows, cols) = shapes[i];
            // bfloat16 A and B are held in buffers of 4-byte elements, two values to each.
            let element_bytes = match inputs {
                Inputs::Bf16 if i < 2 => 2,
                _ => buf.dtype.size_bytes() as usize,
            };
            let len = buf.len * buf.dtype.size_bytes() as usize / element_bytes;
            // The elements from the batch's last matrix on.
            check_shape(name, len.saturating_sub(last), rows, cols, layout.lds[i])?;
            let first = buf.ptr + (layout.offsets[i] * element_bytes) as u64;
            let stride = i64::try_from(layout.strides[i]).map_err(|_| {
                anyhow!(
                    "matrix {name}: batch stride {} overflows",
                    layout.strides[i]
                )
            })?;
            matrices[i] = (first, int(layout.lds[i])?, stride);
        }
        Ok(BlasCall {
            blas: self,
            op: Op::Gemm(GemmOp {
                dtype,
                inputs,
                accumulate,
                trans: (operation(trans_a), operation(trans_b)),
                mnk: (int(m)?, int(n)?, int(k)?),
                count: int(layout.count)?,
                a: matrices[0],
                b: matrices[1],
                c: matrices[2],
            }),
        })
    }

    /// The lower triangle of the column-major n x n matrix C = A^T B (or C + A^T B where
    /// `accumulate`), with A and B k x n: a few strided-batched GEMMs (`lower_triangle_blocks`),
    /// about half the products of one GEMM of the whole. The diagonal blocks are computed whole,
    /// so some of C's upper triangle is written too. `a`, `b` and `c` are (buffer, offset of the
    /// first element, leading dimension). Only meaningful where the caller knows C is symmetric
    /// (SYRK's product, or 3xTF32's sum of products), as cuBLAS's syrkx assumes too.
    pub fn lower_product<'a>(
        &'a self,
        (n, k): (usize, usize),
        a: (&DeviceBuf, usize, usize),
        b: (&DeviceBuf, usize, usize),
        c: (&DeviceBuf, usize, usize),
        inputs: Inputs,
        accumulate: bool,
    ) -> Result<Vec<BlasCall<'a>>> {
        lower_product_layouts((n, k), [(a.1, a.2), (b.1, b.2), (c.1, c.2)])
            .into_iter()
            .map(|((rows, cols), layout)| {
                self.gemm(
                    (true, false),
                    (rows, cols, k),
                    [a.0, b.0, c.0],
                    &layout,
                    inputs,
                    accumulate,
                )
            })
            .collect()
    }
}

/// What a GEMM's A and B hold and how they are multiplied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inputs {
    /// float32 or float64, as C, multiplied in that type (no tensor cores for float32).
    Native,
    /// float32, multiplied on the tensor cores as TF32 (10-bit mantissas) with float32
    /// accumulation (CUBLAS_COMPUTE_32F_FAST_TF32).
    Tf32,
    /// bfloat16 (8-bit mantissas), two to each element of a float32 buffer, multiplied on the
    /// tensor cores with float32 accumulation into a float32 C; offsets, leading dimensions and
    /// strides count bfloat16 values.
    Bf16,
}

/// Where a GEMM's matrices sit in their buffers (`offsets` of their first elements and leading
/// dimensions `lds`, in A, B, C order, in elements), and for a batch of `count` products, the
/// elements between one product's matrices and the next's (cublasGemmStridedBatchedEx).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemmLayout {
    pub offsets: [usize; 3],
    pub lds: [usize; 3],
    pub count: usize,
    pub strides: [usize; 3],
}

impl GemmLayout {
    /// One product of whole buffers.
    pub fn whole(lds: [usize; 3]) -> GemmLayout {
        GemmLayout {
            offsets: [0; 3],
            lds,
            count: 1,
            strides: [0; 3],
        }
    }
}

/// `lower_product`'s GEMMs of depth k: each batch's block size (rows, columns) and its layout,
/// from A, B and C's (offset, leading dimension).
fn lower_product_layouts(
    (n, k): (usize, usize),
    matrices: [(usize, usize); 3],
) -> Vec<((usize, usize), GemmLayout)> {
    let [(a, lda), (b, ldb), (c, ldc)] = matrices;
    lower_triangle_blocks(n, lower_leaf(k))
        .into_iter()
        .map(|batch| {
            let (row, col) = batch.first;
            let (row_step, col_step) = batch.step;
            // Block (row, col) of C is A[:, row..]^T B[:, col..].
            let layout = GemmLayout {
                offsets: [a + row * lda, b + col * ldb, c + row + col * ldc],
                lds: [lda, ldb, ldc],
                count: batch.count,
                strides: [row_step * lda, col_step * ldb, row_step + col_step * ldc],
            };
            (batch.size, layout)
        })
        .collect()
}

/// The side of the diagonal blocks `lower_product` computes whole, for products of depth k: big
/// enough that a batch of them keeps the GPU busy, small enough that they add little to the
/// half (1/16 at n = 8192 and 512). Measured on an H100 at n = 8192 (TF32): 1024 is the fastest
/// for the depth of 8192 (1.954 ms against 1.984 for 512 and 2.003 for 256), 512 for depths of
/// 1024 (3xTF32's, 4.88 ms against 5.03 for 1024).
fn lower_leaf(k: usize) -> usize {
    if k >= 4096 {
        1024
    } else {
        512
    }
}

/// `count` blocks of C of one `size` (rows, columns), the first at (row, column) `first`, each
/// `step` (rows, columns) after the one before.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BlockBatch {
    first: (usize, usize),
    size: (usize, usize),
    count: usize,
    step: (usize, usize),
}

/// The blocks that cover the lower triangle of an n x n matrix, by halving: a range of rows and
/// columns [lo, hi) is its lower half's block below its upper half (rows [mid, hi), columns
/// [lo, mid), mid rounded up to a multiple of 8) and the two halves' own triangles, down to
/// ranges of at most `leaf`, which are blocks of their own (diagonal blocks, whole). Blocks of
/// one level and one size at an even step form one batch: 5 batches for n = 8192 and a leaf of
/// 512.
fn lower_triangle_blocks(n: usize, leaf: usize) -> Vec<BlockBatch> {
    // Every block, (row, column) of its first element and (rows, columns), level after level
    // (the diagonal blocks last), in row order.
    type Block = ((usize, usize), (usize, usize));
    let mut levels: Vec<Vec<Block>> = Vec::new();
    let mut diagonal = Vec::new();
    let mut ranges = if n == 0 { vec![] } else { vec![(0, n)] };
    while !ranges.is_empty() {
        let mut level = Vec::new();
        let mut halves = Vec::new();
        for (lo, hi) in ranges {
            if hi - lo <= leaf.max(1) {
                diagonal.push(((lo, lo), (hi - lo, hi - lo)));
                continue;
            }
            // Halves split at a multiple of 8 rows where they can: cuBLAS's fast kernels need
            // 16-byte aligned matrices.
            let mid = lo + (hi - lo).div_ceil(2).next_multiple_of(8).min(hi - lo - 1);
            level.push(((mid, lo), (hi - mid, mid - lo)));
            halves.extend([(lo, mid), (mid, hi)]);
        }
        levels.push(level);
        ranges = halves;
    }
    // The leaves come from several levels where the halves differ in size: row order again.
    diagonal.sort_unstable();
    levels.push(diagonal);
    let mut batches: Vec<BlockBatch> = Vec::new();
    for level in levels {
        let mut open: Option<BlockBatch> = None;
        for (at, size) in level {
            if let Some(batch) = open.as_mut() {
                let last = (
                    batch.first.0 + (batch.count - 1) * batch.step.0,
                    batch.first.1 + (batch.count - 1) * batch.step.1,
                );
                // Blocks of a level are in row and column order (checked, not assumed: a block
                // before the last one starts a batch of its own).
                let step = at.0.checked_sub(last.0).zip(at.1.checked_sub(last.1));
                if let Some(step) = step
                    .filter(|&step| size == batch.size && (batch.count == 1 || step == batch.step))
                {
                    batch.step = step;
                    batch.count += 1;
                    continue;
                }
            }
            batches.extend(open.take());
            open = Some(BlockBatch {
                first: at,
                size,
                count: 1,
                step: (0, 0),
            });
        }
        batches.extend(open);
    }
    batches
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

/// Checks that `len` elements (from the matrix's first on) hold a column-major rows x cols matrix
/// with leading dimension `ld`.
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
        bail!(
            "matrix {name} ({rows} x {cols}, ld {ld}) needs {needed} elements from its first, its \
             buffer has {len} from there"
        );
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
    Gemm(GemmOp),
}

/// A batch of `count` products; each matrix is (first element's address, leading dimension,
/// elements between consecutive products).
#[derive(Clone, Copy)]
struct GemmOp {
    /// C's type.
    dtype: DType,
    inputs: Inputs,
    /// beta = 1 (C += A B) instead of 0.
    accumulate: bool,
    trans: (sys::cublasOperation_t, sys::cublasOperation_t),
    mnk: (c_int, c_int, c_int),
    count: c_int,
    a: (u64, c_int, i64),
    b: (u64, c_int, i64),
    c: (u64, c_int, i64),
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
            // SAFETY: as above.
            Op::Gemm(gemm) => unsafe { launch_gemm(h, &gemm) },
            Op::Saxpy { n, alpha, x, y } => check(
                unsafe { sys::cublasSaxpy_v2(h, n, &alpha, x as *const f32, 1, y as *mut f32, 1) },
                "cublasSaxpy",
            ),
        }
    }
}

/// Queues one `GemmOp`.
///
/// # Safety
/// As `BlasCall::launch`.
unsafe fn launch_gemm(h: sys::cublasHandle_t, op: &GemmOp) -> Result<()> {
    let (one32, one64) = (1f32, 1f64);
    let GemmOp {
        dtype,
        inputs,
        accumulate,
        trans: (ta, tb),
        mnk: (m, n, k),
        count,
        a: (a, lda, stride_a),
        b: (b, ldb, stride_b),
        c: (c, ldc, stride_c),
    } = *op;
    let (beta32, beta64) = if accumulate {
        (1f32, 1f64)
    } else {
        (0f32, 0f64)
    };
    match dtype {
        // The tensor cores' inputs and batches take the Ex entry point (a batch of one for a
        // single tensor-core product); plain single products, cuBLAS's own.
        _ if count > 1 || inputs != Inputs::Native => {
            use sys::cublasComputeType_t as Compute;
            use sys::cudaDataType::{CUDA_R_16BF, CUDA_R_32F, CUDA_R_64F};
            let (alpha, beta) = match dtype {
                DType::F64 => (
                    &one64 as *const f64 as *const c_void,
                    &beta64 as *const f64 as *const c_void,
                ),
                _ => (
                    &one32 as *const f32 as *const c_void,
                    &beta32 as *const f32 as *const c_void,
                ),
            };
            let (input_type, data_type, compute) = match (dtype, inputs) {
                (_, Inputs::Bf16) => (CUDA_R_16BF, CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F),
                (_, Inputs::Tf32) => (
                    CUDA_R_32F,
                    CUDA_R_32F,
                    Compute::CUBLAS_COMPUTE_32F_FAST_TF32,
                ),
                (DType::F64, _) => (CUDA_R_64F, CUDA_R_64F, Compute::CUBLAS_COMPUTE_64F),
                _ => (CUDA_R_32F, CUDA_R_32F, Compute::CUBLAS_COMPUTE_32F),
            };
            check(
                unsafe {
                    sys::cublasGemmStridedBatchedEx(
                        h,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        alpha,
                        a as *const c_void,
                        input_type,
                        lda,
                        stride_a,
                        b as *const c_void,
                        input_type,
                        ldb,
                        stride_b,
                        beta,
                        c as *mut c_void,
                        data_type,
                        ldc,
                        stride_c,
                        count,
                        compute,
                        sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
                    )
                },
                "cublasGemmStridedBatchedEx",
            )
        }
        DType::F32 => check(
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
                    &beta32,
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
                    &beta64,
                    c as *mut f64,
                    ldc,
                )
            },
            "cublasDgemm",
        ),
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

    /// Which (row, column) of an n x n matrix each batch of blocks covers, and how often.
    fn coverage(n: usize, leaf: usize) -> Vec<u32> {
        let mut covered = vec![0u32; n * n];
        for batch in lower_triangle_blocks(n, leaf) {
            for b in 0..batch.count {
                let (row, col) = (
                    batch.first.0 + b * batch.step.0,
                    batch.first.1 + b * batch.step.1,
                );
                for i in row..row + batch.size.0 {
                    for j in col..col + batch.size.1 {
                        covered[i * n + j] += 1;
                    }
                }
            }
        }
        covered
    }

    #[test]
    fn the_lower_triangle_blocks_cover_it_once_and_leave_the_upper_one_outside_the_leaves() {
        let small = [0, 1, 2, 3, 7, 8, 9, 17, 64, 100, 131, 257]
            .into_iter()
            .flat_map(|n| [1, 4, 8, 32].map(|leaf| (n, leaf)));
        // Halves of unequal sizes, whose leaves come from different levels.
        for (n, leaf) in small.chain([(1_032, 512), (2_056, 512)]) {
            let covered = coverage(n, leaf);
            for i in 0..n {
                for j in 0..n {
                    let times = covered[i * n + j];
                    if i >= j {
                        assert_eq!(times, 1, "n {n} leaf {leaf}: ({i}, {j}) {times} times");
                    } else {
                        // Above the diagonal only inside a diagonal block, at most a leaf.
                        assert!(times <= 1, "n {n} leaf {leaf}: ({i}, {j}) {times} times");
                        if times == 1 {
                            assert!(j - i < leaf, "n {n} leaf {leaf}: ({i}, {j})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_power_of_two_side_is_five_batches_of_about_half_the_products() {
        let batches = lower_triangle_blocks(8192, 512);
        assert_eq!(batches.len(), 5, "{batches:?}");
        assert_eq!(
            batches.iter().map(|b| b.count).collect::<Vec<_>>(),
            [1, 2, 4, 8, 16]
        );
        let area: usize = batches.iter().map(|b| b.count * b.size.0 * b.size.1).sum();
        // Half of 8192^2 (33.6M), plus the leaves' upper halves.
        assert_eq!(area, 8192 * 8192 / 2 + 16 * 512 * 512 / 2);
        // Off a power of two, every block still starts at a multiple of 8 rows and columns.
        for batch in lower_triangle_blocks(8191, 512) {
            let (at, step) = (batch.first, batch.step);
            assert!(
                [at.0, at.1, step.0, step.1].iter().all(|x| x % 8 == 0),
                "{batch:?}"
            );
        }
    }

    #[test]
    fn the_lower_product_layouts_compute_the_lower_triangle_of_a_t_b() {
        // A and B k x n inside larger buffers (offsets, leading dimensions above k), C n x n
        // with ldc > n: the batches' GEMMs done on the host, element by element, against A^T B.
        let (n, k) = (1_031, 5);
        let (a_at, lda, b_at, ldb, c_at, ldc) = (3, 7, 11, 6, 2, 1_040);
        let value = |seed: usize| ((seed * 7_919 + 13) % 101) as f64 - 50.0;
        let a: Vec<f64> = (0..a_at + lda * n).map(value).collect();
        let b: Vec<f64> = (0..b_at + ldb * n).map(|i| value(i + 5)).collect();
        let mut c = vec![f64::NAN; c_at + ldc * n];
        for ((rows, cols), layout) in
            lower_product_layouts((n, k), [(a_at, lda), (b_at, ldb), (c_at, ldc)])
        {
            for batch in 0..layout.count {
                let [oa, ob, oc] = [0, 1, 2].map(|m| layout.offsets[m] + batch * layout.strides[m]);
                for i in 0..rows {
                    for j in 0..cols {
                        let dot: f64 = (0..k)
                            .map(|l| a[oa + i * lda + l] * b[ob + j * ldb + l])
                            .sum();
                        c[oc + i + j * ldc] = dot;
                    }
                }
            }
        }
        for i in 0..n {
            for j in 0..=i {
                let want: f64 = (0..k)
                    .map(|l| a[a_at + i * lda + l] * b[b_at + j * ldb + l])
                    .sum();
                assert_eq!(c[c_at + i + j * ldc], want, "C({i}, {j})");
            }
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
