// z = a x + y in float32, two ways: one element per thread, and four per thread in a
// grid-stride loop (a quarter of the blocks).

extern "C" __global__ void saxpy(const float* x, const float* y, float* z, float a,
                                 unsigned long long n) {
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) z[i] = a * x[i] + y[i];
}

extern "C" __global__ void saxpy_strided(const float* x, const float* y, float* z, float a,
                                         unsigned long long n) {
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += stride) {
        z[i] = a * x[i] + y[i];
    }
}
