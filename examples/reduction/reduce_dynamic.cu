// The same two kernels as kbench's built-in `reduce_naive` and `reduce_optimized`, written as a
// user would copy them: shared memory sized at launch (the manifest's `shared_bytes`) rather than
// at compile time, and __launch_bounds__(1024). With the seed's compile-time arrays
// (reduce.cu), nvcc knows the block size and lays the kernel out differently; at a thousand
// elements, where a run is two launches of a few microseconds, that difference shows. With the
// same code, the same times: see README.md.
//
// T (the element type) comes from the manifest's `dtype` axis as a define.

extern __shared__ __align__(16) unsigned char dynamic_shared[];

// Two elements per thread, interleaved addressing (`t % stride`); 2 * blockDim elements of
// shared memory.
extern "C" __global__ void __launch_bounds__(1024)
reduce_naive_dynamic(const T* __restrict__ in, T* __restrict__ out, unsigned long long n) {
    T* partialSum = reinterpret_cast<T*>(dynamic_shared);
    const unsigned int t = threadIdx.x;
    const unsigned long long start = 2ull * blockIdx.x * blockDim.x;
    const unsigned long long i0 = start + t;
    const unsigned long long i1 = start + blockDim.x + t;
    partialSum[t] = (i0 < n) ? in[i0] : T(0);
    partialSum[blockDim.x + t] = (i1 < n) ? in[i1] : T(0);
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

// One element per thread, sequential addressing; blockDim elements of shared memory.
extern "C" __global__ void __launch_bounds__(1024)
reduce_interleaved_dynamic(const T* __restrict__ in, T* __restrict__ out, unsigned long long n) {
    T* sh = reinterpret_cast<T*>(dynamic_shared);
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
