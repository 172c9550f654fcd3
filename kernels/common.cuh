// common.cuh: what every kbench kernel file shares. A kernel file includes it with
//   #include "common.cuh"
// and kbench splices it in before NVRTC compiles the file (no include path at run time).

#pragma once

// Dynamic shared memory, sized by the host at launch. One untyped declaration serves every kernel
// and template instantiation: typed `extern __shared__ T x[]` declarations with different T would
// clash.
extern __shared__ __align__(16) unsigned char dyn_smem[];

// This thread's index in the whole grid (1-D), and the grid's thread count: the grid-stride loop
//   for (unsigned long long i = grid_thread(); i < n; i += grid_threads()) ...
__device__ __forceinline__ unsigned long long grid_thread() {
    return (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ unsigned long long grid_threads() {
    return (unsigned long long)gridDim.x * blockDim.x;
}

// Butterfly sum over the warp: every lane ends with the same value, bit for bit, because each
// step adds the same two numbers in every lane pair (a + b == b + a in IEEE arithmetic). Lane 0
// adds in the same order as the shuffle-down tree. All 32 lanes must call it.
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int off = 16; off > 0; off >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, off);
    }
    return v;
}

// Sum of v over the block (blockDim.x a multiple of 32), valid in every lane of warp 0. One
// barrier inside; a second call in the same kernel needs a __syncthreads() between the two, so
// that warp 0 has read the first call's partials before they are overwritten.
template <typename T>
__device__ __forceinline__ T block_sum(T v) {
    __shared__ T warp_partials[32];
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned int warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) {
        warp_partials[warp] = v;
    }
    __syncthreads();
    T total = T(0);
    if (warp == 0) {
        total = warp_sum(lane < (blockDim.x >> 5) ? warp_partials[lane] : T(0));
    }
    return total;
}

// Inclusive prefix sum over the warp (Kogge-Stone with shuffles): lane i gets v_0 + ... + v_i.
template <typename T>
__device__ __forceinline__ T warp_inclusive_scan(T v) {
    const unsigned int lane = threadIdx.x & 31u;
    for (int off = 1; off < 32; off <<= 1) {
        const T other = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= (unsigned int)off) v += other;
    }
    return v;
}
