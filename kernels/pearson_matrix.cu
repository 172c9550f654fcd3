// pearson_matrix.cu: the full M x M Pearson coefficient matrix of M series of N values (seed 003,
// section 1.1, steps 2-5), compiled at run time by NVRTC. Every kernel exists as <name>_f32
// (float) and <name>_f64 (double). A variant's own step is named after it (corr_syrk_<t> is
// SYRK's mirror, corr_gemm_<t> the normalisation before cuBLAS, corr_tiled_stats_<t> the tiled
// kernel's first step).
//
// r[i][j] = sum_k z_ik z_jk, with z_i = (x_i - mean_i) / ||x_i - mean_i||: the centred, normalised
// series (steps 2-3), whose products (step 4) are the coefficients (step 5). Means and norms are
// accumulated in double for either input type: the kernels that compute them read memory at full
// bandwidth whatever they add in, and in double the only float32 roundings left are z's own and
// the products' accumulation (the seed's float sums of 8192 values already missed in the 5th
// digit). x is M x N, series after series (row i at x + i * N); r is M x M, row-major, both
// triangles written. All sizes are unsigned int; offsets are computed in 64 bits.
//
// Launch contracts (B = blockDim):
//
//   corr_gemm_<t>(const T* x, T* z, m, n, ldz)
//       grid = m, B = 256. z (m rows of ldz >= n) gets the centred, normalised series, row after
//       row, zeros in columns n .. ldz-1. Used by corr_gemm and corr_syrk before cuBLAS.
//   corr_tf32_<t>(const T* x, T* z, m, n, ldz)
//       as corr_gemm_<t>, each z rounded to the nearest TF32 value (10-bit mantissa, ties away
//       from zero), so that tensor cores, which drop the low 13 bits of what they are given,
//       multiply correctly rounded inputs. kbench launches the float32 one only.
//   corr_3xtf32_<t>(const T* x, T* zb, unsigned short* w16, m, n, ldz)
//       grid = m, B = 256. z split in two, z = big + small: zb (m rows of ldz) gets big, z
//       rounded to TF32; w16 (m rows of 3 ldz bfloat16 values) gets [big, small, big] rounded
//       to bfloat16; zeros in columns n .. ldz-1 of each. cuBLAS then multiplies w16's first two
//       segments by its last two (big small^T + small big^T) and zb by itself (big big^T).
//       kbench launches the float32 one only.
//   corr_syrk_<t>(const T* src, ld, T* r, m)
//       grid = nt (nt + 1) / 2 with nt = ceil(m / 32), B = (32, 8). Copies the upper triangle
//       of src (m x m, row stride ld; j >= i, which a lower-triangle SYRK leaves in column-major
//       terms) to r's upper triangle and into its lower one: r[i][j] = r[j][i] = src[i][j] for
//       j >= i. Reads the upper triangle only. src may be r itself (ld = m): the mirror in place.
//   corr_tiled_stats_<t>(const T* x, double* mean, double* inv_norm, m, n)
//       grid = m, B = 256. mean[i] and 1 / ||x_i - mean_i||.
//   corr_tiled_transpose_<t>(const T* x, const double* mean, const double* inv_norm, T* zt,
//                            m, n, mp)
//       grid = (mp / 32, np / 32), B = (32, 8), mp a multiple of 128 (>= m), np a multiple of
//       32 (>= n). zt (np rows of mp) = z transposed: zt[k][i] = z_ik, zeros where i >= m or
//       k >= n.
//   corr_tiled_<t>(const T* zt, T* r, m, mp, np)
//       grid = nb (nb + 1) / 2 with nb = mp / 128, B = 256. One block per 128 x 128 tile on or
//       below the diagonal of r = Z Z^T: shared-memory tiles of zt, double-buffered, each
//       thread 8 x 8 products in registers; writes r[i][j] and, off the diagonal, r[j][i].
//       zt as corr_tiled_transpose_<t> leaves it (zero padding: no bounds checks on loads).
//
#include "common.cuh"

// ---------------------------------------------------------------------------------------------
// Per-type traits: the 16-byte vector and its element count.

template <typename T> struct Vec16;
template <> struct Vec16<float> {
    typedef float4 type;
    static const int WIDTH = 4;
};
template <> struct Vec16<double> {
    typedef double2 type;
    static const int WIDTH = 2;
};

// Four consecutive elements (16-byte aligned for float, 16-byte aligned pairs for double).
__device__ __forceinline__ void load4(float* dst, const float* src) {
    const float4 v = *reinterpret_cast<const float4*>(src);
    dst[0] = v.x; dst[1] = v.y; dst[2] = v.z; dst[3] = v.w;
}
__device__ __forceinline__ void load4(double* dst, const double* src) {
    const double2 a = reinterpret_cast<const double2*>(src)[0];
    const double2 b = reinterpret_cast<const double2*>(src)[1];
    dst[0] = a.x; dst[1] = a.y; dst[2] = b.x; dst[3] = b.y;
}
__device__ __forceinline__ void store4(float* dst, float a, float b, float c, float d) {
    *reinterpret_cast<float4*>(dst) = make_float4(a, b, c, d);
}
__device__ __forceinline__ void store4(double* dst, double a, double b, double c, double d) {
    reinterpret_cast<double2*>(dst)[0] = make_double2(a, b);
    reinterpret_cast<double2*>(dst)[1] = make_double2(c, d);
}

// The nearest TF32 value (ties away from zero, as cvt.rna.tf32.f32): the 13 low mantissa bits
// rounded off. |z| <= 1 here, so the carry never reaches the exponent's top.
__device__ __forceinline__ float round_tf32(float x) {
    return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xFFFFE000u);
}

// ---------------------------------------------------------------------------------------------
// Steps 2-3: mean and centred norm of one series, by one block.

// The block's sum of v, in every thread (every warp adds the same partials in the same order).
__device__ __forceinline__ double block_sum_all(double v) {
    __shared__ double partials[32];
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    double total = warp_sum(lane < (blockDim.x >> 5) ? partials[lane] : 0.0);
    __syncthreads();  // partials may be reused by the next call
    return total;
}

// Two passes over the series (the second from L1/L2): the mean, then the centred sum of squares,
// so that no cancellation between sum(x^2) and n mean^2 can occur.
template <typename T>
__device__ __forceinline__ void series_stats(const T* __restrict__ row, unsigned int n,
                                             double& mean, double& inv_norm) {
    double s = 0.0;
    for (unsigned int k = threadIdx.x; k < n; k += blockDim.x) s += (double)row[k];
    mean = block_sum_all(s) / (double)n;
    double q = 0.0;
    for (unsigned int k = threadIdx.x; k < n; k += blockDim.x) {
        const double d = (double)row[k] - mean;
        q += d * d;
    }
    inv_norm = 1.0 / sqrt(block_sum_all(q));
}

template <typename T> __device__ __forceinline__ T to_z(double v, bool tf32);
template <> __device__ __forceinline__ float to_z<float>(double v, bool tf32) {
    return tf32 ? round_tf32((float)v) : (float)v;
}
template <> __device__ __forceinline__ double to_z<double>(double v, bool tf32) {
    return tf32 ? (double)round_tf32((float)v) : v;
}

template <typename T>
__device__ __forceinline__ void normalize_rows(const T* __restrict__ x, T* __restrict__ z,
                                               unsigned int n, unsigned int ldz, bool tf32) {
    const unsigned int i = blockIdx.x;
    const T* row = x + (unsigned long long)i * n;
    double mean, inv_norm;
    series_stats(row, n, mean, inv_norm);
    T* out = z + (unsigned long long)i * ldz;
    for (unsigned int k = threadIdx.x; k < ldz; k += blockDim.x) {
        out[k] = k < n ? to_z<T>(((double)row[k] - mean) * inv_norm, tf32) : T(0);
    }
}

// The nearest bfloat16 value's bits (ties to even; |x| <= 1, so no overflow and no NaN).
__device__ __forceinline__ unsigned short bf16_bits(float x) {
    const unsigned int u = __float_as_uint(x);
    return (unsigned short)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// 3xTF32's operands: z = big + small + O(2^-20 |z|), big the nearest TF32 value (into zb, rows of
// ldz) and small = z - big, whose products with big are 2^-11 of r's terms, so that bfloat16
// carries them: row i of w16 is [big, small, big] in bfloat16 (3 ldz values), and the product
// of its first two segments with its last two is big small^T + small big^T.
template <typename T>
__device__ __forceinline__ void split_rows(const T* __restrict__ x, T* __restrict__ zb,
                                           unsigned short* __restrict__ w16, unsigned int n,
                                           unsigned int ldz) {
    const unsigned int i = blockIdx.x;
    const T* row = x + (unsigned long long)i * n;
    double mean, inv_norm;
    series_stats(row, n, mean, inv_norm);
    T* big_out = zb + (unsigned long long)i * ldz;
    unsigned short* w = w16 + (unsigned long long)i * 3 * ldz;
    for (unsigned int k = threadIdx.x; k < ldz; k += blockDim.x) {
        const float z = k < n ? (float)(((double)row[k] - mean) * inv_norm) : 0.0f;
        const float big = round_tf32(z);
        const unsigned short big16 = bf16_bits(big);
        big_out[k] = (T)big;
        w[k] = big16;
        w[ldz + k] = bf16_bits(z - big);
        w[2 * ldz + k] = big16;
    }
}

template <typename T>
__device__ __forceinline__ void stats(const T* __restrict__ x, double* __restrict__ mean,
                                      double* __restrict__ inv_norm, unsigned int n) {
    const unsigned int i = blockIdx.x;
    double mu, inv;
    series_stats(x + (unsigned long long)i * n, n, mu, inv);
    if (threadIdx.x == 0) {
        mean[i] = mu;
        inv_norm[i] = inv;
    }
}

// z transposed through a 32 x 32 shared tile: rows of x read along k, rows of zt written along i,
// both coalesced.
template <typename T>
__device__ __forceinline__ void transpose(const T* __restrict__ x, const double* __restrict__ mean,
                                          const double* __restrict__ inv_norm, T* __restrict__ zt,
                                          unsigned int m, unsigned int n, unsigned int mp) {
    __shared__ T tile[32][33];
    const unsigned int i0 = blockIdx.x * 32, k0 = blockIdx.y * 32;
    const unsigned int tx = threadIdx.x, ty = threadIdx.y;
    for (unsigned int r = ty; r < 32; r += 8) {
        const unsigned int i = i0 + r, k = k0 + tx;
        T v = T(0);
        if (i < m && k < n) {
            v = (T)(((double)x[(unsigned long long)i * n + k] - mean[i]) * inv_norm[i]);
        }
        tile[r][tx] = v;
    }
    __syncthreads();
    for (unsigned int r = ty; r < 32; r += 8) {
        zt[(unsigned long long)(k0 + r) * mp + i0 + tx] = tile[tx][r];
    }
}

// Block t of a triangular grid: the t-th pair (bi, bj), bj <= bi, in row order.
__device__ __forceinline__ void triangle_pair(unsigned long long t, unsigned int& bi,
                                              unsigned int& bj) {
    unsigned long long i = (unsigned long long)((sqrt(8.0 * (double)t + 1.0) - 1.0) * 0.5);
    while ((i + 1) * (i + 2) / 2 <= t) ++i;
    while (i * (i + 1) / 2 > t) --i;
    bi = (unsigned int)i;
    bj = (unsigned int)(t - i * (i + 1) / 2);
}

// ---------------------------------------------------------------------------------------------
// The mirror after a lower-triangle SYRK or `Blas::lower_product` (column-major lower = row-major
// upper), in place or from a scratch matrix with an aligned row stride.

template <typename T>
__device__ __forceinline__ void mirror(const T* src, unsigned int ld, T* r, unsigned int m) {
    __shared__ T tile[32][33];
    unsigned int ti, tj;
    triangle_pair(blockIdx.x, ti, tj);
    const unsigned int tx = threadIdx.x, ty = threadIdx.y;
    // Source: rows tj*32.., columns ti*32.. (on or above the diagonal), copied to r where the
    // source is not r itself.
    for (unsigned int y = ty; y < 32; y += 8) {
        const unsigned int row = tj * 32 + y, col = ti * 32 + tx;
        if (row < m && col < m && col >= row) {
            const T v = src[(unsigned long long)row * ld + col];
            tile[y][tx] = v;
            if (src != r) r[(unsigned long long)row * m + col] = v;
        }
    }
    __syncthreads();
    // Destination: rows ti*32.., columns tj*32.., strictly below the diagonal.
    for (unsigned int y = ty; y < 32; y += 8) {
        const unsigned int row = ti * 32 + y, col = tj * 32 + tx;
        if (row < m && col < row) r[(unsigned long long)row * m + col] = tile[tx][y];
    }
}

// ---------------------------------------------------------------------------------------------
// Step 4-5, kbench's own: Z Z^T over the lower triangle of 128 x 128 tiles.
//
// 256 threads as 16 x 16; thread (ty, tx) holds rows {ty*4 .. ty*4+3, 64+ty*4 .. 64+ty*4+3} and
// the same columns of tx: the two halves 64 apart keep its shared-memory reads 16-byte vectors
// that a warp reads without bank conflicts (one broadcast for A, 256 contiguous bytes for B).
// Per k-slab of BK rows the block loads BK x 128 of zt for each side (16-byte vectors, each
// thread VECS of them), into the shared buffer the others are not reading; one barrier a slab.

#define TILE 128
#define THREADS 256

template <typename T, int BK>
__device__ __forceinline__ void tiles(const T* __restrict__ zt, T* __restrict__ r, unsigned int m,
                                      unsigned int mp, unsigned int np) {
    typedef typename Vec16<T>::type Vec;
    const int W = Vec16<T>::WIDTH;
    const int VECS_PER_ROW = TILE / W;
    const int VECS = BK * TILE / W / THREADS;
    __shared__ __align__(16) T As[2][BK][TILE];
    __shared__ __align__(16) T Bs[2][BK][TILE];

    unsigned int bi, bj;
    triangle_pair(blockIdx.x, bi, bj);
    const unsigned int tid = threadIdx.x;
    const unsigned int tx = tid & 15u, ty = tid >> 4;
    const T* a_src = zt + (unsigned long long)bi * TILE;
    const T* b_src = zt + (unsigned long long)bj * TILE;

    Vec a_stage[VECS], b_stage[VECS];
#define KB_LOAD(k0)                                                                        \
    _Pragma("unroll") for (int s = 0; s < VECS; ++s) {                                     \
        const int v = tid + s * THREADS;                                                   \
        const unsigned long long off =                                                     \
            (unsigned long long)((k0) + v / VECS_PER_ROW) * mp + (v % VECS_PER_ROW) * W;   \
        a_stage[s] = __ldg(reinterpret_cast<const Vec*>(a_src + off));                     \
        b_stage[s] = __ldg(reinterpret_cast<const Vec*>(b_src + off));                     \
    }
#define KB_STORE(buf)                                                                      \
    _Pragma("unroll") for (int s = 0; s < VECS; ++s) {                                     \
        const int v = tid + s * THREADS;                                                   \
        *reinterpret_cast<Vec*>(&As[buf][v / VECS_PER_ROW][(v % VECS_PER_ROW) * W]) =      \
            a_stage[s];                                                                    \
        *reinterpret_cast<Vec*>(&Bs[buf][v / VECS_PER_ROW][(v % VECS_PER_ROW) * W]) =      \
            b_stage[s];                                                                    \
    }

    T acc[8][8];
#pragma unroll
    for (int a = 0; a < 8; ++a)
#pragma unroll
        for (int b = 0; b < 8; ++b) acc[a][b] = T(0);

    const unsigned int slabs = np / BK;
    KB_LOAD(0u);
    KB_STORE(0);
    __syncthreads();
    for (unsigned int kt = 0; kt < slabs; ++kt) {
        const int buf = kt & 1;
        if (kt + 1 < slabs) {
            KB_LOAD((kt + 1) * BK);
        }
#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            T a[8], b[8];
            load4(a, &As[buf][kk][ty * 4]);
            load4(a + 4, &As[buf][kk][64 + ty * 4]);
            load4(b, &Bs[buf][kk][tx * 4]);
            load4(b + 4, &Bs[buf][kk][64 + tx * 4]);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
        }
        if (kt + 1 < slabs) {
            KB_STORE(buf ^ 1);
        }
        __syncthreads();
    }
#undef KB_LOAD
#undef KB_STORE

    // r[i][j] for the tile, four columns at a time (16-byte stores when rows stay aligned,
    // m % W == 0); off the diagonal also r[j][i], four rows of a column at a time. On the
    // diagonal the tile holds both triangles itself, bit for bit symmetric: acc[i][j] and
    // acc[j][i] add the same products in the same order.
    const bool vector_rows = (m % W) == 0;
#pragma unroll
    for (int a = 0; a < 8; ++a) {
        const unsigned int i = bi * TILE + (a >> 2) * 64 + ty * 4 + (a & 3);
        if (i >= m) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const unsigned int j = bj * TILE + h * 64 + tx * 4;
            T* dst = r + (unsigned long long)i * m + j;
            const T* v = &acc[a][h * 4];
            if (vector_rows && j + 3 < m) {
                store4(dst, v[0], v[1], v[2], v[3]);
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if (j + c < m) dst[c] = v[c];
            }
        }
    }
    if (bi == bj) return;
#pragma unroll
    for (int b = 0; b < 8; ++b) {
        const unsigned int j = bj * TILE + (b >> 2) * 64 + tx * 4 + (b & 3);
        if (j >= m) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const unsigned int i = bi * TILE + h * 64 + ty * 4;
            T* dst = r + (unsigned long long)j * m + i;
            if (vector_rows && i + 3 < m) {
                store4(dst, acc[h * 4][b], acc[h * 4 + 1][b], acc[h * 4 + 2][b],
                       acc[h * 4 + 3][b]);
            } else {
#pragma unroll
                for (int c = 0; c < 4; ++c)
                    if (i + c < m) dst[c] = acc[h * 4 + c][b];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Entry points. The tile kernels' register budgets: float, two blocks an SM (at most 128
// registers a thread: 64 accumulators, 16 operands, 16 staged loads); double, one block (the 64
// accumulators alone take 128 registers).

#define ENTRIES(T, SUFFIX, BK, MIN_BLOCKS)                                                        \
    extern "C" __global__ void __launch_bounds__(256)                                             \
        corr_gemm_##SUFFIX(const T* __restrict__ x, T* __restrict__ z, unsigned int m,            \
                           unsigned int n, unsigned int ldz) {                                    \
        normalize_rows<T>(x, z, n, ldz, false);                                                   \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(256)                                             \
        corr_tf32_##SUFFIX(const T* __restrict__ x, T* __restrict__ z, unsigned int m,            \
                           unsigned int n, unsigned int ldz) {                                    \
        normalize_rows<T>(x, z, n, ldz, true);                                                    \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(256)                                             \
        corr_3xtf32_##SUFFIX(const T* __restrict__ x, T* __restrict__ zb,                         \
                             unsigned short* __restrict__ w16, unsigned int m, unsigned int n,    \
                             unsigned int ldz) {                                                  \
        split_rows<T>(x, zb, w16, n, ldz);                                                        \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(256)                                             \
        corr_syrk_##SUFFIX(const T* src, unsigned int ld, T* r, unsigned int m) {                 \
        mirror<T>(src, ld, r, m);                                                                 \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(256)                                             \
        corr_tiled_stats_##SUFFIX(const T* __restrict__ x, double* __restrict__ mean,             \
                                  double* __restrict__ inv_norm, unsigned int m, unsigned int n) { \
        stats<T>(x, mean, inv_norm, n);                                                           \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(256) corr_tiled_transpose_##SUFFIX(              \
        const T* __restrict__ x, const double* __restrict__ mean,                                 \
        const double* __restrict__ inv_norm, T* __restrict__ zt, unsigned int m, unsigned int n,  \
        unsigned int mp) {                                                                        \
        transpose<T>(x, mean, inv_norm, zt, m, n, mp);                                            \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)                             \
        corr_tiled_##SUFFIX(const T* __restrict__ zt, T* __restrict__ r, unsigned int m,          \
                            unsigned int mp, unsigned int np) {                                   \
        tiles<T, BK>(zt, r, m, mp, np);                                                           \
    }

ENTRIES(float, f32, 16, 2)
ENTRIES(double, f64, 8, 1)
