// sum.cu: the sum of n values into one double, with two knobs for `kbench tune`: BLOCK (threads
// per block, from the block axis) and ITEMS (elements each thread adds before its block reduces,
// from the items axis). Few items mean many blocks and many atomic adds on one address; many
// items at a large block mean few blocks, too few to fill the GPU at the smaller sizes.

// The output starts at zero before the blocks add into it (outputs are poisoned before a run).
extern "C" __global__ void zero(double* out) { *out = 0.0; }

// Adds `acc` over the block into `out`: a warp's shuffles, then the first warp over the warps.
__device__ void block_add(double acc, double* out) {
    __shared__ double partial[32];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (blockDim.x + 31) / 32 ? partial[lane] : 0.0;
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, off);
        if (lane == 0) atomicAdd(out, acc);
    }
}

// The reference: a grid-stride loop, 256 threads a block, whatever the knobs.
extern "C" __global__ void sum_reference(const T* x, double* out, long long n) {
    double acc = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc += x[i];
    block_add(acc, out);
}

// The tuned kernel: each thread adds ITEMS elements BLOCK apart (coalesced), then the block adds
// its sum into the output.
extern "C" __global__ void sum_tuned(const T* x, double* out, long long n) {
    long long base = (long long)blockIdx.x * BLOCK * ITEMS + threadIdx.x;
    double acc = 0.0;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        long long i = base + (long long)k * BLOCK;
        if (i < n) acc += x[i];
    }
    block_add(acc, out);
}
