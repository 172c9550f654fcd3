// A 256-bin histogram of bytes (uint8) or of floats in [0, 256) (float32, its twin), two ways:
// atomics straight into the global bins, and a block-private copy in shared memory added to
// the bins once a block. The element type is the template's: kbench instantiates
// `histogram_global<T>` with unsigned char or float from the dtype axis. The bins must start at
// zero before each run: they are an `inout` buffer, reset from its zeros before every run.

__device__ __forceinline__ unsigned bin_of(unsigned char v) { return v; }
__device__ __forceinline__ unsigned bin_of(float v) { return min(255u, (unsigned)v); }

template <typename T>
__global__ void histogram_global(const T* data, unsigned* bins, unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += stride)
        atomicAdd(&bins[bin_of(data[i])], 1u);
}

template <typename T>
__global__ void histogram_shared(const T* data, unsigned* bins, unsigned long long n) {
    __shared__ unsigned local[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
    __syncthreads();
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += stride)
        atomicAdd(&local[bin_of(data[i])], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b] != 0) atomicAdd(&bins[b], local[b]);
}
