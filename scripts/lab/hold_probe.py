"""Where do the two levels of the two-kernel reductions at n = 1000 come from? kbench's kernel
samples (src/device/timer.rs) queue, behind a spin kernel that holds the stream: the outputs'
poison memset, the L2 flush, the start event, the run's launches, the stop event; then the host
lets go. kbench's processes each sit at one of two levels about 1 us apart at n = 1000;
two_kernel_probe.py, which queues no hold and no memset, sees no such levels.

This probe queues reduce_optimized_i32's two launches (kernels/reduce.cu, block 256, n = 1000)
in four ways, round-robin, one sample each in turn:
  kbench:    hold, memset(out), flush, start, k1, k2, stop, release (what kbench queues);
  no_memset: hold, flush, start, k1, k2, stop, release;
  settle:    hold, memset(out), flush, an empty kernel, start, k1, k2, stop, release;
  no_hold:   memset(out), flush, start, k1, k2, stop.
Run it in several processes: a way whose per-process medians split into two levels while
another's do not names what to change in kbench's queue.

    for i in 1 2 3 4 5 6; do python3 scripts/lab/hold_probe.py --samples 80; done

Measured on an H100 (2026-11-28, 8 processes, medians of 80): kbench 6.62-7.10 us, no_memset
6.46-6.91, settle 7.49-7.90, no_hold 6.46-6.91. Processes sit at levels about 0.4 us (6%) apart,
and every way moves with its process: neither the hold nor the memset makes the level, and an
empty kernel before the start event only adds its own time. What sets a process's level is still
unknown.
"""

import argparse
import ctypes
import pathlib
import statistics

import cupy as cp

ROOT = pathlib.Path(__file__).resolve().parents[2]
WAYS = ("kbench", "no_memset", "settle", "no_hold")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=80)
    p.add_argument("--n", type=int, default=1000)
    a = p.parse_args()
    common = (ROOT / "kernels/common.cuh").read_text()
    reduce_mod = cp.RawModule(code=(ROOT / "kernels/reduce.cu").read_text()
                              .replace('#include "common.cuh"', common), options=("-std=c++17",))
    timer_mod = cp.RawModule(code=(ROOT / "kernels/timer.cu").read_text(), options=("-std=c++17",))
    k = reduce_mod.get_function("reduce_optimized_i32")
    flush = timer_mod.get_function("kbench_flush_l2")
    hold = timer_mod.get_function("kbench_hold_stream")
    empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")
    props = cp.cuda.runtime.getDeviceProperties(0)
    flush_buf = cp.zeros(2 * props["l2CacheSize"] // 4, dtype=cp.int32)
    sms = props["multiProcessorCount"]
    n, block = a.n, 256
    grid = (n + block - 1) // block
    rng = __import__("numpy").random.default_rng(7)
    x = cp.asarray(rng.integers(-1000, 1000, size=n, dtype="int32"))
    want = int(cp.asnumpy(x).astype("int64").sum()) & 0xFFFFFFFF
    part = cp.empty(grid, dtype=cp.int32)
    out = cp.empty(1, dtype=cp.int32)
    # Mapped pinned memory; with unified addressing its device pointer is the host pointer.
    flag_host = cp.cuda.runtime.hostAlloc(8, 2)  # cudaHostAllocMapped
    flag_dev = flag_host
    flag = (ctypes.c_uint * 2).from_address(flag_host)
    stream = cp.cuda.Stream(non_blocking=True)

    def sample(way):
        with stream:
            flag[0], flag[1] = 0, 0
            if way != "no_hold":
                hold((1,), (1,), (cp.uint64(flag_dev), cp.uint64(2_000_000_000)))
            if way != "no_memset":
                cp.cuda.runtime.memsetAsync(out.data.ptr, 0xFF, 4, stream.ptr)
            flush((sms * 8,), (256,), (flush_buf, cp.uint64(flush_buf.nbytes // 16), flush_buf))
            if way == "settle":
                empty((1,), (32,), ())
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            k((grid,), (block,), (x, part, cp.uint64(n)), shared_mem=block * 4)
            k((1,), (block,), (part, out, cp.uint64(grid)), shared_mem=block * 4)
            stop.record(stream)
            flag[0] = 1
            stop.synchronize()
            assert flag[1] == 0, "the hold gave up"
        return cp.cuda.get_elapsed_time(start, stop) * 1e3

    # Every kernel once, unheld: a first launch loads its module, which waits for the stream (a
    # deadlock behind a hold until it gives up).
    with stream:
        flag[0] = 1
        hold((1,), (1,), (cp.uint64(flag_dev), cp.uint64(2_000_000_000)))
        flush((sms * 8,), (256,), (flush_buf, cp.uint64(flush_buf.nbytes // 16), flush_buf))
        empty((1,), (32,), ())
        k((grid,), (block,), (x, part, cp.uint64(n)), shared_mem=block * 4)
        stream.synchronize()
    for _ in range(5):
        for way in WAYS:
            sample(way)
    times = {way: [] for way in WAYS}
    for _ in range(a.samples):
        for way in WAYS:
            times[way].append(sample(way))
    assert int(out.view(cp.uint32)[0]) == want, "wrong sum"
    print("  ".join(f"{way} {statistics.median(t):.2f} us" for way, t in times.items()))


if __name__ == "__main__":
    main()
