// Row softmax, one block a row, as written for any element type and block size: the template
// is instantiated by kbench's launch `kernel = "softmax<BLOCK, T>"` (bf16 or float at each grid
// point, 128 .. 384 threads). The row's maximum and its sum of exponentials come from CUB's
// BlockReduce, in float; the output is rounded to T once.
#include <cuda_bf16.h>
#include <cub/block/block_reduce.cuh>

template <int BLOCK_SIZE, typename T>
__global__ void softmax(const T* __restrict__ x, T* __restrict__ y, int cols) {
    using Reduce = cub::BlockReduce<float, BLOCK_SIZE>;
    __shared__ typename Reduce::TempStorage scratch;
    __shared__ float row_max, row_sum;
    const T* in = x + (size_t)blockIdx.x * cols;
    T* out = y + (size_t)blockIdx.x * cols;

    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE) m = fmaxf(m, static_cast<float>(in[c]));
    float block_max = Reduce(scratch).Reduce(m, cuda::maximum<>{});
    if (threadIdx.x == 0) row_max = block_max;
    __syncthreads();  // also frees `scratch` for the second reduction

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE) s += __expf(static_cast<float>(in[c]) - row_max);
    float block_sum = Reduce(scratch).Sum(s);
    if (threadIdx.x == 0) row_sum = block_sum;
    __syncthreads();

    float scale = 1.0f / row_sum;
    for (int c = threadIdx.x; c < cols; c += BLOCK_SIZE)
        out[c] = static_cast<T>(__expf(static_cast<float>(in[c]) - row_max) * scale);
}
