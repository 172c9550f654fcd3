// timer.cu: the stream hold kbench's timer queues before a sample (see src/device/timer.rs).
// One thread spins until the host writes 1 to flag[0], so that the L2 flush, the start event, the
// case's kernels and the stop event, all queued behind it, run back to back once the host lets go
// (NVBench's blocking kernel). If the host has not let go after timeout_ns (it blocked while
// queueing, e.g. on a full launch queue), the kernel gives up, sets flag[1] and returns, so the
// stream can never deadlock; the host then refuses the sample.

extern "C" __global__ void kbench_hold_stream(volatile unsigned int* flag,
                                              unsigned long long timeout_ns) {
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (flag[0] == 0) {
        unsigned long long now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) {
            flag[1] = 1;
            return;
        }
        __nanosleep(200);
    }
}

// The cold-L2 flush before a sample: a read, through L2, of a zeroed buffer twice the L2's size.
// Reading evicts what the last sample left in L2 and leaves it holding clean lines only, as a
// profiler's cache control does; a write (cudaMemset) would instead leave L2 full of dirty lines,
// whose write-back then lands inside the next timed kernel (measured on an H100: reduce_fast over
// 64 MB took 32.3 us after a memset flush, against Nsight Compute's 26.1 us).
// n16 counts 16-byte vectors; `sink` is written only if the buffer is not all zeros, which it is,
// so the loads cannot be optimized away.
extern "C" __global__ void kbench_flush_l2(const int4* __restrict__ buffer, unsigned long long n16,
                                           int* sink) {
    int acc = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const int4 v = __ldcg(buffer + i);
        acc |= v.x | v.y | v.z | v.w;
    }
    if (acc != 0) *sink = acc;
}

// The read-only peak measured when a device opens (src/device/peaks.rs): 16-byte loads over a
// large zeroed buffer, as reduce_fast reads (kernels/reduce.cu): a block takes chunks of 4 * B
// consecutive vectors, load k of thread t being vector base + k * B + t, so each warp-wide load
// is 512 contiguous bytes and four loads a thread are in flight before any use. `sink` is written
// only if the buffer is not all zeros, which it is, so the loads stay and nothing else is written.
// n16 counts 16-byte vectors.
#define KBENCH_PEAK_UNROLL 4

extern "C" __global__ void __launch_bounds__(1024) kbench_peak_read(const int4* __restrict__ buffer,
                                                                   unsigned long long n16,
                                                                   int* sink) {
    const unsigned long long chunk = (unsigned long long)KBENCH_PEAK_UNROLL * blockDim.x;
    const unsigned long long grid_stride = chunk * gridDim.x;
    unsigned long long base = (unsigned long long)blockIdx.x * chunk;
    int acc = 0;
    for (; base + chunk <= n16; base += grid_stride) {
        int4 v[KBENCH_PEAK_UNROLL];
#pragma unroll
        for (int k = 0; k < KBENCH_PEAK_UNROLL; ++k) v[k] = __ldg(buffer + base + k * blockDim.x + threadIdx.x);
#pragma unroll
        for (int k = 0; k < KBENCH_PEAK_UNROLL; ++k) acc |= v[k].x | v[k].y | v[k].z | v[k].w;
    }
    for (int k = 0; k < KBENCH_PEAK_UNROLL; ++k) {
        const unsigned long long j = base + k * blockDim.x + threadIdx.x;
        if (j < n16) {
            const int4 v = __ldg(buffer + j);
            acc |= v.x | v.y | v.z | v.w;
        }
    }
    if (acc != 0) *sink = acc;
}

// The write-only peak: 16-byte stores of `value` over a large buffer, in the read kernel's
// pattern, nothing read.
extern "C" __global__ void __launch_bounds__(1024) kbench_peak_write(int4* __restrict__ buffer,
                                                                    unsigned long long n16,
                                                                    int value) {
    const unsigned long long chunk = (unsigned long long)KBENCH_PEAK_UNROLL * blockDim.x;
    const unsigned long long grid_stride = chunk * gridDim.x;
    unsigned long long base = (unsigned long long)blockIdx.x * chunk;
    const int4 v = make_int4(value, value, value, value);
    for (; base + chunk <= n16; base += grid_stride) {
#pragma unroll
        for (int k = 0; k < KBENCH_PEAK_UNROLL; ++k) buffer[base + k * blockDim.x + threadIdx.x] = v;
    }
    for (int k = 0; k < KBENCH_PEAK_UNROLL; ++k) {
        const unsigned long long j = base + k * blockDim.x + threadIdx.x;
        if (j < n16) buffer[j] = v;
    }
}

// The peak of two reads and one write (STREAM's triad, SAXPY's y = a * x + y): b = a + b over
// two zeroed buffers of n16 16-byte vectors each, one vector of each a thread over a grid that
// covers them (no grid-stride loop: for this traffic on an H100 a full grid of one vector a
// thread ran 7% faster than grid-stride loops, scripts/lab/saxpy_variants.py). Zeros stay zeros,
// so the buffers stay as they were.
extern "C" __global__ void __launch_bounds__(1024) kbench_peak_triad(const int4* __restrict__ a,
                                                                    int4* __restrict__ b,
                                                                    unsigned long long n16) {
    const unsigned long long j = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (j < n16) {
        const int4 va = a[j], vb = b[j];
        b[j] = make_int4(va.x + vb.x, va.y + vb.y, va.z + vb.z, va.w + vb.w);
    }
}
