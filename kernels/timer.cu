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
