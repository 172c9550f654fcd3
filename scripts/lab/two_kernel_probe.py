"""Do the two-kernel reductions at n = 1000 sit at one of two levels about 1 us apart (per case,
each case's own buffers, and per process) because of the GPU's address translation? The
cold-L2 flush (a 2x-L2 read) also evicts the TLB and page-table entries of the case's buffers, so
each 2 MiB page the two kernels touch (input, partials, output) might cost a page walk.

One process times reduce_optimized_i32 (kernels/reduce.cu, block 256, n = 1000: 4 blocks into
partials, then one block into out) cold: [flush, start event, k1, k2, stop event], on fresh
buffer sets of three layouts, round-robin: x, partials and out placed in one 8 MiB allocation so
that they span one, two or three of its 2 MiB pages. (Separate small cudaMallocs land in one page
whatever lies between them: the driver sub-allocates small buffers.) It prints each set's median
with the 2 MiB page of each buffer, and each layout's spread.

    python3 scripts/lab/two_kernel_probe.py --sets 6 --samples 60

Measured on an H100 (2026-11-28, three processes): one page 7.45-7.53 us, two 7.45-7.58, three
7.61-7.81 (medians of 6 sets each). Three pages cost 0.1-0.3 us, not 1 us: translation is not
the two levels."""

import argparse
import pathlib
import statistics

import cupy as cp

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = 2 << 20


def module():
    common = (ROOT / "kernels/common.cuh").read_text()
    src = (ROOT / "kernels/reduce.cu").read_text().replace('#include "common.cuh"', common)
    timer = (ROOT / "kernels/timer.cu").read_text().replace('#include "common.cuh"', common)
    return (cp.RawModule(code=src, options=("-std=c++17",)),
            cp.RawModule(code=timer, options=("-std=c++17",)))


class Raw:
    """cudaMalloc without CuPy's pool, so that placement is the driver's."""

    def __init__(self, nbytes):
        self.ptr = cp.cuda.runtime.malloc(nbytes)
        self.nbytes = nbytes

    def free(self):
        cp.cuda.runtime.free(self.ptr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sets", type=int, default=6)
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--n", type=int, default=1000)
    a = p.parse_args()
    reduce_mod, timer_mod = module()
    k = reduce_mod.get_function("reduce_optimized_i32")
    flush = timer_mod.get_function("kbench_flush_l2")
    props = cp.cuda.runtime.getDeviceProperties(0)
    l2 = props["l2CacheSize"]
    flush_buf = cp.zeros(2 * l2 // 4, dtype=cp.int32)
    sms = props["multiProcessorCount"]
    n, block = a.n, 256
    grid = (n + block - 1) // block
    rng = __import__("numpy").random.default_rng(7)
    host_x = rng.integers(-1000, 1000, size=n, dtype="int32")
    want = int(host_x.astype("int64").sum()) & 0xFFFFFFFF

    keep = []  # allocations held until the end, so that no set reuses another's pages

    def make(layout):
        """x, partials and out at offsets in one 8 MiB allocation (2 MiB-aligned), spanning one,
        two or three of its 2 MiB pages."""
        buf = Raw(4 * PAGE)
        keep.append(buf)
        base = buf.ptr
        offsets = {"one": (0, 4096, 8192), "two": (0, PAGE + 4096, PAGE + 8192),
                   "three": (0, PAGE + 4096, 2 * PAGE + 8192)}[layout]
        return tuple(base + o for o in offsets)

    def sample(x, part, out, which):
        flush((sms * 8,), (256,), (flush_buf, cp.uint64(flush_buf.nbytes // 16), flush_buf))
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        if which in ("both", "k1"):
            k((grid,), (block,), (cp.uint64(x), cp.uint64(part), cp.uint64(n)),
              shared_mem=block * 4)
        if which in ("both", "k2"):
            k((1,), (block,), (cp.uint64(part), cp.uint64(out), cp.uint64(grid)),
              shared_mem=block * 4)
        stop.record()
        stop.synchronize()
        return cp.cuda.get_elapsed_time(start, stop) * 1e3

    sets = []
    for i in range(a.sets):
        for layout in ("one", "two", "three"):
            x, part, out = make(layout)
            cp.cuda.runtime.memcpy(x, host_x.ctypes.data, 4 * n, 1)
            sets.append((layout, x, part, out, {"both": [], "k1": [], "k2": []}))
    for _ in range(3):
        for s in sets:
            sample(*s[1:4], "both")
    for _ in range(a.samples):
        for s in sets:
            for which in ("both", "k1", "k2"):
                s[4][which].append(sample(*s[1:4], which))
    by_layout = {}
    for layout, x, part, out, times in sets:
        got = cp.zeros(1, dtype=cp.uint32)
        cp.cuda.runtime.memcpy(got.data.ptr, out, 4, 3)
        assert int(got[0]) == want, f"{layout}: sum {int(got[0])} != {want}"
        med = {w: statistics.median(t) for w, t in times.items()}
        pages = (x // PAGE, part // PAGE, out // PAGE)
        print(f"{layout:>6}  pages {len(set(pages))} ({', '.join(hex(q) for q in pages)})  "
              f"both {med['both']:.2f} us  k1 {med['k1']:.2f}  k2 {med['k2']:.2f}")
        by_layout.setdefault(layout, []).append(med["both"])
    for layout, meds in by_layout.items():
        print(f"{layout:>6}: median of sets {statistics.median(meds):.2f} us, "
              f"range {min(meds):.2f} .. {max(meds):.2f}")


if __name__ == "__main__":
    main()
