// reduce.cu: sum reductions for kbench, compiled at run time by NVRTC.
// Every kernel exists as <name>_i32 (int), <name>_f32 (float) and <name>_f64 (double).
//
// Launch contracts (B = blockDim.x, a power of two in 32..1024; n = element count; sizeof(T) = 4, 4, 8):
//
//   reduce_naive_<t>(const T* in, T* out, n)
//       grid = max(1, ceil(n / (2*B))), dynamic shared = 2*B*sizeof(T).
//   reduce_optimized_<t>(const T* in, T* out, n)
//       grid = max(1, ceil(n / B)),     dynamic shared = B*sizeof(T).
//   reduce_unrolled_<t>(const T* in, T* out, n)
//       grid = max(1, ceil(n / (2*B))), dynamic shared = B*sizeof(T).
//     These three write one partial sum per block to out[blockIdx.x]. They are multi-pass: the host
//     relaunches on out (n = grid of the previous pass, into a second buffer) until one element is left.
//     `in` is never written; `out` must not overlap `in`. n == 0 with grid 1 writes out[0] = 0.
//
//   reduce_fast_<t>(const T* in, T* partials, unsigned int* blocks_done, T* out, n)
//       one launch; grid = max(1, min(SMs * (2048 / B), ceil(n / (B * FAST_ELEMS_PER_ITER)))), where
//       FAST_ELEMS_PER_ITER = 16 for int/float and 8 for double (4 vectors of 16 bytes per thread);
//       dynamic shared = 0. `in` must be 16-byte aligned (cudaMalloc gives 256). partials has room
//       for grid elements. *blocks_done must be 0 before the FIRST launch (cudaMemset once); the
//       kernel leaves it 0 again (a grid of one block never touches it). The sum lands in out[0].
//       The result is deterministic for a given (grid, B): the summation order does not depend on
//       which block finishes last.
//
#include "common.cuh"

// int sums wrap modulo 2^32: they are accumulated in unsigned int (defined wraparound) and
// converted back to int only when stored. float sums are accumulated in float, double in double.

// ---------------------------------------------------------------------------------------------
// Per-type traits: the accumulator type (unsigned int for int so that overflow is defined), the
// 16-byte vector type for reduce_fast, and the conversions.

template <typename T> struct Traits;

template <> struct Traits<int> {
    typedef unsigned int Acc;
    typedef int4 Vec;
    static const unsigned int VEC = 4;
    static __device__ __forceinline__ Acc to_acc(int x) { return (unsigned int)x; }
    // unsigned -> int of a value above INT_MAX is two's complement on every CUDA target
    // (and defined as such from C++20 on); this is the "reinterpret" step.
    static __device__ __forceinline__ int from_acc(Acc x) { return (int)x; }
    static __device__ __forceinline__ Acc vec_sum(int4 v) {
        return ((unsigned int)v.x + (unsigned int)v.y) + ((unsigned int)v.z + (unsigned int)v.w);
    }
};

template <> struct Traits<float> {
    typedef float Acc;
    typedef float4 Vec;
    static const unsigned int VEC = 4;
    static __device__ __forceinline__ Acc to_acc(float x) { return x; }
    static __device__ __forceinline__ float from_acc(Acc x) { return x; }
    static __device__ __forceinline__ Acc vec_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }
};

template <> struct Traits<double> {
    typedef double Acc;
    typedef double2 Vec;
    static const unsigned int VEC = 2;
    static __device__ __forceinline__ Acc to_acc(double x) { return x; }
    static __device__ __forceinline__ double from_acc(Acc x) { return x; }
    static __device__ __forceinline__ Acc vec_sum(double2 v) { return v.x + v.y; }
};


// ---------------------------------------------------------------------------------------------
// 1. Naive: the report's kernel (interleaved addressing, `t % stride`, divergent warps and
// shared-memory bank conflicts are the point of it). Fixed: the tail is zero-filled instead of
// skipped, and the input stays read-only (partials go to `out`).

template <typename T>
__device__ __forceinline__ void reduce_naive(const T* __restrict__ in, T* __restrict__ out,
                                             unsigned long long n) {
    typedef typename Traits<T>::Acc Acc;
    Acc* partialSum = reinterpret_cast<Acc*>(dyn_smem);  // 2 * blockDim entries

    const unsigned int t = threadIdx.x;
    const unsigned long long start = 2ull * blockIdx.x * blockDim.x;
    const unsigned long long i0 = start + t;
    const unsigned long long i1 = start + blockDim.x + t;
    partialSum[t] = (i0 < n) ? Traits<T>::to_acc(in[i0]) : Acc(0);
    partialSum[blockDim.x + t] = (i1 < n) ? Traits<T>::to_acc(in[i1]) : Acc(0);

    for (unsigned int stride = 1; stride <= blockDim.x; stride *= 2) {
        __syncthreads();
        if (t % stride == 0) {
            partialSum[2 * t] += partialSum[2 * t + stride];
        }
    }
    // Thread 0 made the last update of partialSum[0] itself, so no barrier is needed here.
    if (t == 0) {
        out[blockIdx.x] = Traits<T>::from_acc(partialSum[0]);
    }
}

// ---------------------------------------------------------------------------------------------
// 2. Optimized: the report's sequential addressing (contiguous active threads, no modulo, no bank
// conflicts), one element per thread.

template <typename T>
__device__ __forceinline__ void reduce_optimized(const T* __restrict__ in, T* __restrict__ out,
                                                 unsigned long long n) {
    typedef typename Traits<T>::Acc Acc;
    Acc* sh = reinterpret_cast<Acc*>(dyn_smem);  // blockDim entries

    const unsigned int t = threadIdx.x;
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + t;
    sh[t] = (i < n) ? Traits<T>::to_acc(in[i]) : Acc(0);
    __syncthreads();

    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            sh[t] += sh[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = Traits<T>::from_acc(sh[0]);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Unrolled ("K2 intense optimized"): first add during the load (two elements per thread),
// block steps unrolled by hand, last warp without __syncthreads.
//
// The report's last-warp code relied on implicit warp lockstep through a volatile pointer, which
// Volta's independent thread scheduling no longer guarantees: a lane could read sh[t + 16] before
// the owning lane has written it. Here every warp step is followed by __syncwarp(). Each step is
// also limited to lanes t < off: those read only [off, 2*off) and write only [0, off), so a step
// never reads what the same step writes, and nothing past sh[blockDim - 1] is read (the unguarded
// pattern reads up to sh[63], outside the allocation when blockDim == 32).
// `v` mirrors sh[t] in a register so each step costs one shared load.

template <typename T>
__device__ __forceinline__ void reduce_unrolled(const T* __restrict__ in, T* __restrict__ out,
                                                unsigned long long n) {
    typedef typename Traits<T>::Acc Acc;
    Acc* sh = reinterpret_cast<Acc*>(dyn_smem);  // blockDim entries

    const unsigned int t = threadIdx.x;
    const unsigned int B = blockDim.x;
    const unsigned long long i = 2ull * blockIdx.x * B + t;

    Acc v = (i < n) ? Traits<T>::to_acc(in[i]) : Acc(0);
    if (i + B < n) {
        v += Traits<T>::to_acc(in[i + B]);
    }
    sh[t] = v;
    __syncthreads();

    if (B >= 1024 && t < 512) { sh[t] = v = v + sh[t + 512]; }
    __syncthreads();
    if (B >= 512 && t < 256) { sh[t] = v = v + sh[t + 256]; }
    __syncthreads();
    if (B >= 256 && t < 128) { sh[t] = v = v + sh[t + 128]; }
    __syncthreads();
    if (B >= 128 && t < 64) { sh[t] = v = v + sh[t + 64]; }
    __syncthreads();

    if (t < 32) {  // the whole first warp: every __syncwarp() below has all 32 lanes
        volatile Acc* vs = sh;
        if (B >= 64) { vs[t] = v = v + vs[t + 32]; }
        __syncwarp();
        if (t < 16) { vs[t] = v = v + vs[t + 16]; }
        __syncwarp();
        if (t < 8) { vs[t] = v = v + vs[t + 8]; }
        __syncwarp();
        if (t < 4) { vs[t] = v = v + vs[t + 4]; }
        __syncwarp();
        if (t < 2) { vs[t] = v = v + vs[t + 2]; }
        __syncwarp();
        if (t < 1) { v = v + vs[t + 1]; }
        if (t == 0) {
            out[blockIdx.x] = Traits<T>::from_acc(v);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. Fast: one launch, grid-stride over 16-byte vectors, shuffles, last-block-done.
//
// Why 4 vectors per thread per iteration (FAST_UNROLL): by Little's law the H200 needs about
// 4.8 TB/s * ~700 ns = ~3.4 MB in flight, i.e. ~25 KB per SM (132 SMs). One 16-byte load per
// thread at 2048 threads/SM would be 32 KB in theory, but a thread has nothing in flight while
// it adds and loops, and latency rises under load. Four independent 16-byte loads issued back to
// back give 64 B per thread, 128 KB per SM at full occupancy (~5x margin), still with ~50% margin
// at 1024 threads/SM. The four loaded vectors take 16 registers; __launch_bounds__(1024, 2) caps
// the kernel at 32 registers so that 2048 threads fit on an SM (the host's grid assumes it).
// More unroll would need more registers and only shrinks the loop count further.
// Each of the 4 vectors feeds its own accumulator, so the adds form 4 independent chains.

#define FAST_UNROLL 4

template <typename T>
__device__ __forceinline__ void reduce_fast(const T* __restrict__ in, T* __restrict__ partials,
                                            unsigned int* __restrict__ blocks_done,
                                            T* __restrict__ out, unsigned long long n) {
    typedef typename Traits<T>::Acc Acc;
    typedef typename Traits<T>::Vec Vec;
    const unsigned int VEC = Traits<T>::VEC;

    const unsigned int t = threadIdx.x;
    const unsigned int B = blockDim.x;
    const Vec* __restrict__ vin = reinterpret_cast<const Vec*>(in);

    // A chunk is FAST_UNROLL * B consecutive vectors: load k of thread t is vector
    // base + k * B + t, so each warp-wide load is 512 contiguous bytes.
    const unsigned long long nvec = n / VEC;
    const unsigned long long chunk = (unsigned long long)FAST_UNROLL * B;
    const unsigned long long grid_stride = chunk * gridDim.x;
    unsigned long long base = (unsigned long long)blockIdx.x * chunk;

    Acc acc[FAST_UNROLL];
    for (int k = 0; k < FAST_UNROLL; ++k) acc[k] = Acc(0);

    // Whole chunks: no bounds checks, all loads issued before any add.
    for (; base + chunk <= nvec; base += grid_stride) {
        Vec v[FAST_UNROLL];
#pragma unroll
        for (int k = 0; k < FAST_UNROLL; ++k) v[k] = __ldg(vin + base + (unsigned long long)k * B + t);
#pragma unroll
        for (int k = 0; k < FAST_UNROLL; ++k) acc[k] += Traits<T>::vec_sum(v[k]);
    }
    // At most one chunk (the one holding vector nvec - 1) is partial; only one block gets it.
    if (base < nvec) {
#pragma unroll
        for (int k = 0; k < FAST_UNROLL; ++k) {
            const unsigned long long j = base + (unsigned long long)k * B + t;
            if (j < nvec) acc[k] += Traits<T>::vec_sum(__ldg(vin + j));
        }
    }
    // The last n % VEC elements (fewer than one vector) go to the first threads of block 0.
    const unsigned long long tail = nvec * VEC;
    if (blockIdx.x == 0 && t < n - tail) {
        acc[0] += Traits<T>::to_acc(__ldg(in + tail + t));
    }

    static_assert(FAST_UNROLL == 4, "the pairwise combine below assumes 4 accumulators");
    Acc sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    sum = block_sum(sum);

    // One block (small n): its sum is the answer. Skipping the ticket and the second pass over
    // the partials took n = 4096 at block 256 from 4.54 to 2.9 us on an H100.
    if (gridDim.x == 1) {
        if (t == 0) out[0] = Traits<T>::from_acc(sum);
        return;
    }

    // Last-block-done: the block that takes the last ticket sums all partials. The ticket is
    // one acquire-release atomic: its release makes this block's partial visible device-wide
    // before the ticket can be seen, its acquire (in the last block) orders the partial reads
    // after every earlier ticket. It replaced __threadfence(), atomicAdd and a second fence,
    // whose sequentially consistent fences cost about 0.4 us a launch (H100, n = 8192 to 1M).
    __shared__ bool is_last;
    if (t == 0) {
        partials[blockIdx.x] = Traits<T>::from_acc(sum);
        unsigned int ticket;
        asm volatile("atom.add.acq_rel.gpu.u32 %0, [%1], 1;"
                     : "=r"(ticket)
                     : "l"(blocks_done)
                     : "memory");
        is_last = (ticket == gridDim.x - 1);
    }
    __syncthreads();
    if (!is_last) return;

    // Fixed order (by index, fixed per thread) so the result does not depend on which block
    // came last. __ldcg reads through L2: other blocks wrote these during this launch, so the
    // non-coherent __ldg path must not be used.
    Acc v = Acc(0);
    for (unsigned int b = t; b < gridDim.x; b += B) {
        v += Traits<T>::to_acc(__ldcg(partials + b));
    }
    v = block_sum(v);
    if (t == 0) {
        out[0] = Traits<T>::from_acc(v);
        *blocks_done = 0u;  // ready for the next launch (kernel boundaries order it)
    }
}

// ---------------------------------------------------------------------------------------------
// extern "C" entry points: one set per element type.

#define KBENCH_REDUCE_KERNELS(SUFFIX, T)                                                          \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    reduce_naive_##SUFFIX(const T* __restrict__ in, T* __restrict__ out, unsigned long long n) {  \
        reduce_naive<T>(in, out, n);                                                              \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    reduce_optimized_##SUFFIX(const T* __restrict__ in, T* __restrict__ out,                      \
                              unsigned long long n) {                                             \
        reduce_optimized<T>(in, out, n);                                                          \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    reduce_unrolled_##SUFFIX(const T* __restrict__ in, T* __restrict__ out,                       \
                             unsigned long long n) {                                              \
        reduce_unrolled<T>(in, out, n);                                                           \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024, 2)                                         \
    reduce_fast_##SUFFIX(const T* __restrict__ in, T* __restrict__ partials,                      \
                         unsigned int* __restrict__ blocks_done, T* __restrict__ out,             \
                         unsigned long long n) {                                                  \
        reduce_fast<T>(in, partials, blocks_done, out, n);                                        \
    }

KBENCH_REDUCE_KERNELS(i32, int)
KBENCH_REDUCE_KERNELS(f32, float)
KBENCH_REDUCE_KERNELS(f64, double)
