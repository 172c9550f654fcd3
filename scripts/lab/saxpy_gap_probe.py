"""Why SAXPY naive and cuBLAS read 2.4-4.2% above Nsight Compute at 2^24 and 2^28 while
saxpy_vector does not (issue 30). Times one-element-per-thread SAXPY kernels (plain loads and
stores, as saxpy_naive; streaming __ldcs/__stcs, as saxpy_vector) with CUDA events, one launch a
sample, after each of the sequences kbench could put before a timed launch:
  memset-flush:  a 200 MB memset (L2 left full of dirty lines);
  read-flush:    a 200 MB read through L2 (kbench's kbench_flush_l2, from kernels/timer.cu:
                 clean lines);
  reset+read:    y copied back from a pristine copy (kbench's in-place output reset), then the
                 read flush, queued back to back as kbench queues them;
  reset,wait:    the same with the host waiting for the copy before the flush is queued;
and back to back (20 launches, no flush; the time a launch). Prints each median."""
import os
import statistics
import sys

import cupy as cp

SRC = r"""
extern "C" __global__ void probe_plain(const float* __restrict__ x, float* __restrict__ y, float a, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" __global__ void probe_streaming(const float* __restrict__ x, float* __restrict__ y, float a, unsigned long long n) {
    unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) __stcs(y + i, a * __ldcs(x + i) + __ldcs(y + i));
}
"""
mod = cp.RawModule(code=SRC)
# kbench's own flush kernel, from its source.
TIMER_CU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../kernels/timer.cu")
with open(TIMER_CU) as f:
    timer_module = cp.RawModule(code=f.read())
samples = int(sys.argv[1]) if len(sys.argv) > 1 else 20
flush = cp.zeros(200 * 2**20 // 4, dtype=cp.float32)
sink = cp.zeros(1, dtype=cp.int32)
read_flush = timer_module.get_function("kbench_flush_l2")
n16 = cp.uint64(flush.nbytes // 16)


def sequences(y, y0):
    def reset():
        cp.cuda.runtime.memcpyAsync(y.data.ptr, y0.data.ptr, y.nbytes, cp.cuda.runtime.memcpyDeviceToDevice, 0)
    return {
        "memset-flush": lambda: flush.fill(0),
        "read-flush": lambda: read_flush((1056,), (512,), (flush, n16, sink)),
        "reset+read": lambda: (reset(), read_flush((1056,), (512,), (flush, n16, sink))),
        "reset,wait": lambda: (reset(), cp.cuda.Device().synchronize(),
                               read_flush((1056,), (512,), (flush, n16, sink))),
    }


for n in [2**24, 2**28]:
    x = cp.random.rand(n, dtype=cp.float32)
    y0 = cp.random.rand(n, dtype=cp.float32)
    y = y0.copy()
    block = 256
    grid = (n + block - 1) // block
    for name in ["probe_plain", "probe_streaming"]:
        k = mod.get_function(name)
        args = (x, y, cp.float32(2.0), cp.uint64(n))
        for _ in range(3):
            k((grid,), (block,), args)
        line = f"{name:16s} n=2^{n.bit_length() - 1}:"
        for label, before in sequences(y, y0).items():
            times = []
            for _ in range(samples):
                before()
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record()
                k((grid,), (block,), args)
                e1.record()
                e1.synchronize()
                times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
            line += f"  {label} {statistics.median(times):8.2f}"
        back = []
        for _ in range(max(3, samples // 4)):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            for _ in range(20):
                k((grid,), (block,), args)
            e1.record()
            e1.synchronize()
            back.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3 / 20)
        print(line + f"  back-to-back {statistics.median(back):8.2f} us", flush=True)
    del x, y, y0
