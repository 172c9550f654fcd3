// The seed reduction's (004) two kernels, as a user writes them: one element type T and the
// block size BLOCK come from the manifest's axes (`dtype`, `block`) as defines.
//
// Both write one partial sum per block into out[blockIdx.x]; the manifest repeats the launch on
// the partials until one block is left (its `repeat` table).

// Naive: interleaved addressing, `t % stride` (divergent warps, bank conflicts), two elements
// per thread, 2 * BLOCK elements of shared memory.
extern "C" __global__ void reduce_naive(const T* __restrict__ in, T* __restrict__ out,
                                        unsigned long long n) {
    __shared__ T partialSum[2 * BLOCK];
    const unsigned int t = threadIdx.x;
    const unsigned long long start = 2ull * blockIdx.x * blockDim.x;
    partialSum[t] = (start + t < n) ? in[start + t] : T(0);
    partialSum[blockDim.x + t] = (start + blockDim.x + t < n) ? in[start + blockDim.x + t] : T(0);
    for (unsigned int stride = 1; stride <= blockDim.x; stride *= 2) {
        __syncthreads();
        if (t % stride == 0) {
            partialSum[2 * t] += partialSum[2 * t + stride];
        }
    }
    if (t == 0) {
        out[blockIdx.x] = partialSum[0];
    }
}

// Interleaved (the seed's "optimized"): sequential addressing, contiguous active threads, one
// element per thread.
extern "C" __global__ void reduce_interleaved(const T* __restrict__ in, T* __restrict__ out,
                                              unsigned long long n) {
    __shared__ T sh[BLOCK];
    const unsigned int t = threadIdx.x;
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + t;
    sh[t] = (i < n) ? in[i] : T(0);
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) {
            sh[t] += sh[t + s];
        }
        __syncthreads();
    }
    if (t == 0) {
        out[blockIdx.x] = sh[0];
    }
}
