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

// The cold-L2 flush before a sample: a read, through L2, of a zeroed buffer four times the L2's size.
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
// large zeroed buffer, four independent loads in flight per thread per iteration; `sink` is
// written only if the buffer is not all zeros, which it is, so the loads stay and nothing else is
// written. n16 counts 16-byte vectors.
extern "C" __global__ void kbench_peak_read(const int4* __restrict__ buffer, unsigned long long n16,
                                            int* sink) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    int acc = 0;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const int4 a = buffer[i];
        const int4 b = buffer[i + stride];
        const int4 c = buffer[i + 2 * stride];
        const int4 d = buffer[i + 3 * stride];
        acc |= (a.x | a.y | a.z | a.w) | (b.x | b.y | b.z | b.w) | (c.x | c.y | c.z | c.w) |
               (d.x | d.y | d.z | d.w);
    }
    for (; i < n16; i += stride) {
        const int4 v = buffer[i];
        acc |= v.x | v.y | v.z | v.w;
    }
    if (acc != 0) *sink = acc;
}

// The write-only peak: 16-byte stores of `value` over a large buffer, four per thread per
// iteration, nothing read.
extern "C" __global__ void kbench_peak_write(int4* __restrict__ buffer, unsigned long long n16,
                                             int value) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int4 v = make_int4(value, value, value, value);
    for (; i + 3 * stride < n16; i += 4 * stride) {
        buffer[i] = v;
        buffer[i + stride] = v;
        buffer[i + 2 * stride] = v;
        buffer[i + 3 * stride] = v;
    }
    for (; i < n16; i += stride) buffer[i] = v;
}
