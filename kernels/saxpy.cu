// saxpy.cu: y = a * x + y in float32 for kbench (seed 001), compiled at run time by NVRTC.
//
// Launch contracts (B = blockDim.x, a power of two in 32..1024; n = element count; x and y whole
// allocations, so 16-byte aligned and not overlapping):
//
//   saxpy_naive(const float* x, float* y, float a, n)
//       grid = max(1, ceil(n / B)): the seed's kernel, one element per thread.
//   saxpy_vector(const float* x, float* y, float a, n)
//       grid = max(1, ceil(n / (VECTORS * 4 * B))): each thread loads VECTORS float4 of x and of y
//       before it computes and writes them back with 16-byte stores, plain loads and stores. The
//       n % 4 elements past the last whole vector go to the last block. Measured on an H100
//       (scripts/lab/saxpy_variants.py, cold L2, block 256, 2^28): one float4 a thread with plain
//       accesses 1045.6 us, two 1049.7 us, four 1048.8 us; with streaming hints (__ldcs/__stcs)
//       1066.8, 1072.6 and 1071.5 us, torch's add_ 1050.9 us in the same process. One a thread
//       was also the fastest at 2^24 and 2^20 + 3.

#include "common.cuh"

#define VECTORS 1

extern "C" __global__ void __launch_bounds__(1024)
saxpy_naive(const float* __restrict__ x, float* __restrict__ y, float a, unsigned long long n) {
    const unsigned long long i = grid_thread();
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void __launch_bounds__(1024)
saxpy_vector(const float* __restrict__ x, float* __restrict__ y, float a, unsigned long long n) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const unsigned long long vectors = n / 4;
    // Vector k of thread t of block b: (b * VECTORS + k) * B + t, so each warp-wide access is
    // 512 contiguous bytes.
    const unsigned long long base = (unsigned long long)blockIdx.x * VECTORS * blockDim.x + threadIdx.x;
    float4 xv[VECTORS], yv[VECTORS];
#pragma unroll
    for (int k = 0; k < VECTORS; ++k) {
        const unsigned long long v = base + (unsigned long long)k * blockDim.x;
        if (v < vectors) {
            xv[k] = x4[v];
            yv[k] = y4[v];
        }
    }
#pragma unroll
    for (int k = 0; k < VECTORS; ++k) {
        const unsigned long long v = base + (unsigned long long)k * blockDim.x;
        if (v < vectors) {
            float4 r;
            r.x = a * xv[k].x + yv[k].x;
            r.y = a * xv[k].y + yv[k].y;
            r.z = a * xv[k].z + yv[k].z;
            r.w = a * xv[k].w + yv[k].w;
            y4[v] = r;
        }
    }
    // The tail: fewer than 4 elements, in the last block.
    if (blockIdx.x == gridDim.x - 1) {
        const unsigned long long i = vectors * 4 + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }
}
