// pearson.cu: seed 003's first two steps. K1 generates M random walks of N values (one thread a
// series); K2 takes each series' mean, in the seed's three forms (global memory, shared memory,
// shared memory unrolled) and with warp shuffles, by one block or several blocks a series.
//
// K1's contract: out holds m * n elements; element j of series i goes to i * stride_i +
// j * stride_j: (n, 1) for the "series" layout, (1, m) for "interleaved". Step j (1 <= j < n)
// multiplies by fma(fraction, u, 1) with u = (w >> 8) * 2^-23 - 1 and w word (j - 1) % 4 of
// Philox4x32-10 at counter ((j - 1) / 4, i, 0, 0) and key (key[0], key[1]), the case seed's low
// and high words: exactly what src/algos/random_walk.rs computes, so the CPU reference matches
// bit for bit.
//
// K2's contract: x holds m series of n elements, series-major. The grid has m * B blocks
// (B = blocks_per_series); block b of series i sums elements [b * chunk, min((b + 1) * chunk, n))
// and writes that sum times `scale` to out[i * B + b]. With B = 1, out is the means and scale 1/n;
// with B > 1, out is the partials (scale 1) and k2_finish adds each series' B of them. blockDim.x
// is a power of two from 32 to 1024; the shared-memory kernels take blockDim.x elements of
// dynamic shared memory. k2_global needs scratch of (chunk + 1) / 2 elements per block.
//
// Accumulation is in the element type, as the seed's: float sums lose accuracy as n grows, which
// is what its accuracy table shows.

#include "common.cuh"

// ---- K1: series generation ----

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
    const unsigned int M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
    const unsigned int W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k.x += W0;
            k.y += W1;
        }
        const unsigned int hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
        const unsigned int hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

template <typename T>
__device__ __forceinline__ T uniform_pm1(unsigned int w) {
    // (w >> 8) * 2^-23 is exact, and so is subtracting 1: the same value in f32 and f64.
    return (T)(w >> 8) * (T)(1.0 / 8388608.0) - (T)1;
}

template <typename T>
__device__ __forceinline__ T fused(T a, T b, T c);
template <>
__device__ __forceinline__ float fused(float a, float b, float c) { return __fmaf_rn(a, b, c); }
template <>
__device__ __forceinline__ double fused(double a, double b, double c) { return __fma_rn(a, b, c); }

template <typename T>
__device__ __forceinline__ T mul(T a, T b);
template <>
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
template <>
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }

template <typename T>
__device__ void k1_generate(T* __restrict__ out, unsigned int m, unsigned long long n,
                            unsigned long long stride_j, unsigned long long stride_i, T start,
                            T fraction, const unsigned int* __restrict__ key_words) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m || n == 0) {
        return;
    }
    const uint2 key = make_uint2(key_words[0], key_words[1]);
    T* series = out + (unsigned long long)i * stride_i;
    T value = start;
    series[0] = value;
    for (unsigned long long step = 0; step + 1 < n; step += 4) {
        const uint4 r = philox4x32_10(make_uint4((unsigned int)(step / 4), i, 0u, 0u), key);
        const unsigned int w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const unsigned long long j = step + q + 1;
            if (j < n) {
                value = mul(value, fused(fraction, uniform_pm1<T>(w[q]), (T)1));
                series[j * stride_j] = value;
            }
        }
    }
}

// ---- K2: per-series means ----

// The elements this block sums: a pointer to them and their count. (The grid has at least one
// block; with m = 0 that block returns at once, see K2_GUARD.)
template <typename T>
__device__ __forceinline__ unsigned long long k2_chunk(const T* x, unsigned long long n,
                                                       unsigned long long chunk,
                                                       unsigned int blocks_per_series,
                                                       const T** first) {
    const unsigned long long series = blockIdx.x / blocks_per_series;
    const unsigned long long begin = (blockIdx.x % blocks_per_series) * chunk;
    *first = x + series * n + begin;
    return begin >= n ? 0 : min(chunk, n - begin);
}

// The seed's K2 without its child kernel: a pairwise tree in global memory, halving the values
// left at each level (each thread adding several pairs while values outnumber threads), a
// barrier between levels. The first level reads the series and writes the block's scratch, so
// the input survives for the next run.
template <typename T>
__device__ void k2_global(const T* __restrict__ x, T* __restrict__ scratch, T* __restrict__ out,
                          unsigned long long n, unsigned long long chunk,
                          unsigned int blocks_per_series, T scale) {
    const T* xs;
    unsigned long long len = k2_chunk(x, n, chunk, blocks_per_series, &xs);
    T* w = scratch + (unsigned long long)blockIdx.x * ((chunk + 1) / 2);
    if (len <= 1) {
        if (threadIdx.x == 0) {
            out[blockIdx.x] = len == 1 ? xs[0] * scale : (T)0;
        }
        return;
    }
    unsigned long long half = (len + 1) / 2;
    for (unsigned long long k = threadIdx.x; k < half; k += blockDim.x) {
        w[k] = k + half < len ? xs[k] + xs[k + half] : xs[k];
    }
    __syncthreads();
    for (len = half; len > 1; len = half) {
        half = (len + 1) / 2;
        for (unsigned long long k = threadIdx.x; k + half < len; k += blockDim.x) {
            w[k] += w[k + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = w[0] * scale;
    }
}

// Each thread's strided share of the block's elements, coalesced: thread t adds t, t + blockDim,
// ... (four independent partial sums, so four loads are in flight).
template <typename T>
__device__ __forceinline__ T k2_thread_sum(const T* xs, unsigned long long len) {
    const unsigned long long step = blockDim.x;
    T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    unsigned long long k = threadIdx.x;
    for (; k + 3 * step < len; k += 4 * step) {
        a0 += xs[k];
        a1 += xs[k + step];
        a2 += xs[k + 2 * step];
        a3 += xs[k + 3 * step];
    }
    for (; k < len; k += step) {
        a0 += xs[k];
    }
    return (a0 + a1) + (a2 + a3);
}

// The seed's K2 intense: the threads' sums into shared memory, then an interleaved tree there
// with a barrier at every level.
template <typename T>
__device__ void k2_shared(const T* __restrict__ x, T* __restrict__ out, unsigned long long n,
                          unsigned long long chunk, unsigned int blocks_per_series, T scale) {
    T* s = reinterpret_cast<T*>(dyn_smem);
    const T* xs;
    const unsigned long long len = k2_chunk(x, n, chunk, blocks_per_series, &xs);
    s[threadIdx.x] = k2_thread_sum(xs, len);
    __syncthreads();
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) {
            s[threadIdx.x] += s[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        out[blockIdx.x] = s[0] * scale;
    }
}

// The seed's K2 intense optimized: the tree unrolled (barriers down to 64 values), the last warp
// without barriers. The seed's warp step relied on volatile and implicit warp lockstep, which
// Volta and later do not give; here each step reads, syncs the warp, then writes.
template <typename T>
__device__ void k2_unrolled(const T* __restrict__ x, T* __restrict__ out, unsigned long long n,
                            unsigned long long chunk, unsigned int blocks_per_series, T scale) {
    T* s = reinterpret_cast<T*>(dyn_smem);
    const T* xs;
    const unsigned long long len = k2_chunk(x, n, chunk, blocks_per_series, &xs);
    const unsigned int t = threadIdx.x, size = blockDim.x;
    s[t] = k2_thread_sum(xs, len);
    __syncthreads();
    if (size >= 1024 && t < 512) s[t] += s[t + 512];
    __syncthreads();
    if (size >= 512 && t < 256) s[t] += s[t + 256];
    __syncthreads();
    if (size >= 256 && t < 128) s[t] += s[t + 128];
    __syncthreads();
    if (size >= 128 && t < 64) s[t] += s[t + 64];
    __syncthreads();
    if (t < 32) {
        T v = s[t];
        if (size >= 64) v += s[t + 32];
#pragma unroll
        for (unsigned int off = 16; off > 0; off >>= 1) {
            s[t] = v;
            __syncwarp();
            if (t < off) v += s[t + off];
            __syncwarp();
        }
        if (t == 0) {
            out[blockIdx.x] = v * scale;
        }
    }
}

// Warp shuffles: each warp's sum in registers, then the warps' sums (common.cuh's block_sum).
template <typename T>
__device__ void k2_shuffle(const T* __restrict__ x, T* __restrict__ out, unsigned long long n,
                           unsigned long long chunk, unsigned int blocks_per_series, T scale) {
    const T* xs;
    const unsigned long long len = k2_chunk(x, n, chunk, blocks_per_series, &xs);
    const T total = block_sum(k2_thread_sum(xs, len));
    if (threadIdx.x == 0) {
        out[blockIdx.x] = total * scale;
    }
}

// Several blocks a series: each series' partials, added in order, times scale (1/n).
template <typename T>
__device__ void k2_finish(const T* __restrict__ partials, T* __restrict__ means, unsigned int m,
                          unsigned int blocks_per_series, T scale) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) {
        return;
    }
    T sum = 0;
    for (unsigned int b = 0; b < blocks_per_series; ++b) {
        sum += partials[(unsigned long long)i * blocks_per_series + b];
    }
    means[i] = sum * scale;
}

// extern "C" entry points: one set per element type. The K2 kernels share one signature (the
// scratch is k2_global's alone); blocks past m * B return at once.
#define KBENCH_K2_KERNEL(NAME, SUFFIX, T, CALL)                                                    \
    extern "C" __global__ void __launch_bounds__(1024)                                             \
    NAME##_##SUFFIX(const T* x, T* scratch, T* out, unsigned int m, unsigned long long n,          \
                    unsigned long long chunk, unsigned int blocks_per_series, T scale) {           \
        if (blockIdx.x >= (unsigned long long)m * blocks_per_series) return;                       \
        CALL;                                                                                      \
    }

#define KBENCH_PEARSON_KERNELS(SUFFIX, T)                                                          \
    extern "C" __global__ void __launch_bounds__(1024)                                             \
    k1_generate_##SUFFIX(T* out, unsigned int m, unsigned long long n,                             \
                         unsigned long long stride_j, unsigned long long stride_i, T start,        \
                         T fraction,                                                               \
                         const unsigned int* key) {                                                \
        k1_generate<T>(out, m, n, stride_j, stride_i, start, fraction, key);                       \
    }                                                                                              \
    KBENCH_K2_KERNEL(k2_global, SUFFIX, T,                                                         \
                     k2_global<T>(x, scratch, out, n, chunk, blocks_per_series, scale))            \
    KBENCH_K2_KERNEL(k2_shared, SUFFIX, T,                                                         \
                     k2_shared<T>(x, out, n, chunk, blocks_per_series, scale))                     \
    KBENCH_K2_KERNEL(k2_unrolled, SUFFIX, T,                                                       \
                     k2_unrolled<T>(x, out, n, chunk, blocks_per_series, scale))                   \
    KBENCH_K2_KERNEL(k2_shuffle, SUFFIX, T,                                                        \
                     k2_shuffle<T>(x, out, n, chunk, blocks_per_series, scale))                    \
    extern "C" __global__ void __launch_bounds__(1024)                                             \
    k2_finish_##SUFFIX(const T* partials, T* means, unsigned int m,                                \
                       unsigned int blocks_per_series, T scale) {                                  \
        k2_finish<T>(partials, means, m, blocks_per_series, scale);                                \
    }

KBENCH_PEARSON_KERNELS(f32, float)
KBENCH_PEARSON_KERNELS(f64, double)
