"""Is the level of a two-kernel reduction set by where its launches fall in the stream's command
queue? kbench's processes each sit at one of two levels about 1 us apart at n = 1000, and at
n = 1e6 a run's samples alternate between two levels about 1 us apart (docs/ci/gate.md); the
buffers (two_kernel_probe.py), the hold and the poison memset (hold_probe.py) are ruled out. A
process that queues the same commands every sample keeps its place in the queue's ring, or
steps through it with a short period, which would fit both.

This probe times reduce_optimized_i32's two launches (kernels/reduce.cu, block 256), cold
([flush, PAD event records, start, k1, k2, stop]), with PAD = 0..7 extra commands before the
start event, round-robin, and the same two launches captured once as a CUDA graph ([flush, start,
graph, stop]). If the level follows PAD within one process, the queue's layout makes it; if the
graph's medians agree across processes while the launches' do not, a graph removes it.

    for i in 1 2 3 4 5 6; do python3 scripts/lab/pad_probe.py --samples 40; done
    for i in 1 2 3 4; do python3 scripts/lab/pad_probe.py --blocks --samples 40; done

Measured on an H100 (2026-11-28; medians, with even / odd samples of each way):
  - round-robin, six processes: launched on the stream, every PAD's even samples 6.6-7.0 us and
    odd 7.5-7.9 us, medians 7.0-7.6 us (one disturbed process 9.5-13.8 us); the graph 5.71-5.89
    us, even and odd alike (5.79 in the disturbed process too);
  - --blocks (each way's samples in a row, with 0, 1 or 2 empty launches queued first), four
    processes: with none and with one, mostly one level per block (7.2-7.9 us); with two, even
    and odd 0.5-1.0 us apart in seven of eight blocks; the graph 5.86-6.08 us.
  The level follows the commands queued on the stream, not the pad alone; a graph removes it.
  (--n 1000003 needs a third launch: reduce_optimized's second pass then has 3907 partials for
  one block, and the check fails.)
"""

import argparse
import pathlib
import statistics

import cupy as cp

ROOT = pathlib.Path(__file__).resolve().parents[2]
PADS = range(8)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--blocks", action="store_true",
                   help="each way's samples one after another, with 0, 1 or 2 empty launches")
    a = p.parse_args()
    common = (ROOT / "kernels/common.cuh").read_text()
    reduce_mod = cp.RawModule(code=(ROOT / "kernels/reduce.cu").read_text()
                              .replace('#include "common.cuh"', common), options=("-std=c++17",))
    timer_mod = cp.RawModule(code=(ROOT / "kernels/timer.cu").read_text(), options=("-std=c++17",))
    k = reduce_mod.get_function("reduce_optimized_i32")
    flush = timer_mod.get_function("kbench_flush_l2")
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
    stream = cp.cuda.Stream(non_blocking=True)
    pad_events = [cp.cuda.Event(disable_timing=True) for _ in PADS]
    empty = cp.RawKernel('extern "C" __global__ void empty() {}', "empty")

    def launches():
        k((grid,), (block,), (x, part, cp.uint64(n)), shared_mem=block * 4)
        k((1,), (block,), (part, out, cp.uint64(grid)), shared_mem=block * 4)

    with stream:
        launches()
        stream.synchronize()
        stream.begin_capture()
        launches()
        graph = stream.end_capture()

    def sample(way):
        with stream:
            out.fill(-1)
            flush((sms * 8,), (256,), (flush_buf, cp.uint64(flush_buf.nbytes // 16), flush_buf))
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            if isinstance(way, str) and way.startswith("empty"):
                for _ in range(int(way[5:])):
                    empty((1,), (32,), ())
                start.record(stream)
                launches()
            elif way == "graph":
                start.record(stream)
                graph.launch(stream)
            else:
                for e in pad_events[:way]:
                    e.record(stream)
                start.record(stream)
                launches()
            stop.record(stream)
            stop.synchronize()
        assert int(out.view(cp.uint32)[0]) == want, f"{way}: wrong sum"
        return cp.cuda.get_elapsed_time(start, stop) * 1e3

    if a.blocks:
        blocks(sample, a.samples)
        return
    ways = [*PADS, "graph"]
    for _ in range(3):
        for way in ways:
            sample(way)
    times = {way: [] for way in ways}
    for _ in range(a.samples):
        for way in ways:
            times[way].append(sample(way))
    # Even and odd samples of each way apart: an alternation shows as two medians.
    print(f"n {n}  " + "  ".join(
        f"{'pad' + str(w) if w != 'graph' else 'graph'} {statistics.median(t):.2f}"
        f"({statistics.median(t[0::2]):.2f}/{statistics.median(t[1::2]):.2f})"
        for w, t in times.items()))


def blocks(sample, samples):
    """Each way's samples in a row (after 3 of its own): a way whose launches a sample are odd in
    number alternates if a per-launch toggle sets the level; an even number keeps one level."""
    for rep in range(2):
        for way in ("empty0", "empty1", "empty2", "graph"):
            for _ in range(3):
                sample(way)
            t = [sample(way) for _ in range(samples)]
            print(f"{way:>7} median {statistics.median(t):.2f}  even {statistics.median(t[0::2]):.2f}"
                  f"  odd {statistics.median(t[1::2]):.2f}")


if __name__ == "__main__":
    main()
