#!/usr/bin/env python3
"""Lab: kernels/scan.cu's single-pass kernels (scan_lookback, repeats_fused) run with other tile
shapes (elements a worker, workers, stages) and lab hooks, checked against CuPy and timed at 2^28
int32 beside a device copy, on the GPU machine:

    python3 scripts/lab/scan_lab.py [--n 268435456] [--shapes 60x480,60x480+counts,60x480+nolb]

A shape is ITEMSxWORKERS[xSTAGES] with flags (see Shape). Times are CUDA events around one launch, the median of 20
after 3 warm-ups; a share is the kernel's GB/s (the bytes it must move) over the copy's GB/s
(cudaMemcpy device to device, read + write). It is for choosing the defaults, not for reporting:
kbench's own run of experiments/scan_bench.toml is the measurement.
"""
import argparse
import pathlib
import statistics

import cupy as cp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def source(old=False, path="kernels/scan.cu"):
    common = (ROOT / "kernels/common.cuh").read_text()
    scan = (ROOT / ("scripts/lab/scan_baseline.cu" if old else path)).read_text()
    return scan.replace('#include "common.cuh"', common)


def median_ms(fn, reps=20, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


class Shape:
    """ITEMSxWORKERS[xSTAGES][+flag...]: ITEMS elements a worker, WORKERS workers beside the
    look-back warp, STAGES tiles in shared memory (STAGES in scan.cu; default 2). Flags: +counts
    (look-back event counts), +nolb (no look-back: a bound on speed, its sums are wrong), +old
    (scripts/lab/scan_baseline.cu, an earlier scan.cu for an A/B, from `git show
    REV:kernels/scan.cu > scripts/lab/scan_baseline.cu`, with the launch of 6acdae7 and before: one
    tile a block, ITEMSxBLOCK, no look-back warp), +occK (shared memory padded so that K blocks
    fit an SM). For a candidate kernel beside the tree's: +src=PATH (another scan.cu, a candidate's
    copy), +DNAME (passes -DNAME to NVRTC, the
    candidate's own lab hooks), +smem=BYTES (that much more dynamic shared memory a block, what the
    candidate keeps after its stages), +inexact (its results are wrong by design: not checked)."""

    def __init__(self, text):
        shape, *flags = text.split("+")
        self.items, self.workers, *stages = (int(x) for x in shape.split("x"))
        self.old = "old" in flags  # one tile a block, grid = tiles, no look-back warp
        self.stages = 1 if self.old else (stages[0] if stages else 2)
        self.block = self.workers + (0 if self.old else 32)
        self.name = text
        self.exact = "nolb" not in flags and "inexact" not in flags
        defines = {"nolb": "-DLAB_NO_LOOKBACK", "counts": "-DLAB_COUNTS"}
        defines.update({f: "-" + f for f in flags if f.startswith("D")})
        path = next((f[4:] for f in flags if f.startswith("src=")), "kernels/scan.cu")
        module = cp.RawModule(code=source(self.old, path), options=(
            "-std=c++17", f"-DITEMS={self.items}", f"-DSTAGES={self.stages}",
            *(defines[f] for f in flags if f in defines)))  # -DITEMS: the old kernels'
        self.counts = (cp.ndarray((4,), dtype=cp.uint64, memptr=module.get_global("lab_counts"))
                       if "counts" in flags else None)
        self.smem = self.items * self.workers * 4
        if self.old and self.items // 4 % 2 == 0:  # padded (TILE_PADDED in the old scan.cu)
            self.smem = self.smem * 9 // 8
        self.smem *= self.stages
        self.smem += sum(int(f[5:]) for f in flags if f.startswith("smem="))
        for f in flags:
            if f.startswith("occ"):
                self.smem = max(self.smem, 227 * 1024 // int(f[3:]) - 1024)
        self.kernels = {name: module.get_function(name)
                        for name in ("scan_lookback", "repeats_fused")}
        props = cp.cuda.runtime.getDeviceProperties(0)
        per_sm = min(props["maxThreadsPerMultiProcessor"] // self.block,
                     props["sharedMemPerMultiprocessor"] // (self.smem + 1024 + 256))
        self.resident = per_sm * props["multiProcessorCount"]
        print(f"{self.name}: {self.smem} B shared a block, {per_sm} blocks an SM")

    def run(self, name, n, args):
        """One launch over n elements; args are the kernel's leading pointers."""
        tiles = max(1, -(-n // (self.items * self.workers)))
        if getattr(self, "status_tiles", 0) < tiles:
            self.status = cp.zeros(tiles, dtype=cp.uint64)
            self.counter = cp.zeros(1, dtype=cp.uint64)
            self.status_tiles, self.launches, self.first_tile = tiles, 0, 0
        # The counter runs on over launches (no reset inside the timing): this launch's tiles are
        # numbered from the count of all tickets taken before (a persistent grid's blocks each
        # take one past the last tile).
        grid = tiles if self.old else min(tiles, self.resident)
        first_tile = self.first_tile
        self.first_tile += tiles if self.old else tiles + grid
        kernel = self.kernels[name]
        # Shapes of the same source and options share one compiled kernel in CuPy's cache, so the
        # shared-memory limit is set again before each launch.
        kernel.max_dynamic_shared_size_bytes = self.smem
        items = () if self.old else (cp.uint32(self.items),)
        kernel((grid,), (self.block,), (*args, self.counter, self.status, cp.uint64(n), *items,
                           cp.uint64(first_tile), cp.uint32(self.launches & 0x3FFFFFFF)),
                           shared_mem=self.smem)
        self.launches += 1


def check(shape, n, rng):
    a = cp.asarray(rng.integers(-1000, 1000, size=n, dtype="int32"))
    out = cp.empty(max(n, 1), dtype=cp.int32)
    shape.run("scan_lookback", n, (a, out))
    want = cp.concatenate([cp.zeros(1, cp.int64), cp.cumsum(a.astype(cp.int64))[:-1]])[:n]
    assert cp.array_equal(out[:n], (want & 0xFFFFFFFF).astype(cp.uint32).view(cp.int32)), \
        f"{shape.name}: scan wrong at n={n}"
    # A third of the elements repeat, and a tenth (each element equal to the one before with
    # probability 0.1); and tiles that hold their indices in registers (few repeats) next to tiles
    # that keep them in their stage (many): runs of half a tile to two tiles at 2% or 50%.
    tile = shape.items * shape.workers
    rates = np.empty(n)
    start = 0
    while start < n:
        length = int(rng.integers(tile // 2, 2 * tile + 1))
        rates[start:start + length] = rng.choice([0.02, 0.5])
        start += length
    for r in (cp.asarray(rng.integers(0, 3, size=n, dtype="int32")),
              cp.cumsum(cp.asarray(rng.random(n) >= 0.1, dtype=cp.int32), dtype=cp.int32),
              cp.cumsum(cp.asarray(rng.random(n) >= rates, dtype=cp.int32), dtype=cp.int32)):
        idx = cp.empty(max(n, 1), dtype=cp.int32)
        count = cp.zeros(1, dtype=cp.int32)
        shape.run("repeats_fused", n, (r, idx, count))
        want = cp.nonzero(r[:-1] == r[1:])[0].astype(cp.int32) if n > 1 else cp.zeros(0, cp.int32)
        got = int(count[0])
        assert got == want.size and cp.array_equal(idx[:got], want), \
            f"{shape.name}: find_repeats wrong at n={n}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 28)
    ap.add_argument("--shapes", default="60x480,60x480+counts,60x480+nolb,28x992,52x544")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(1)
    print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode(), "n =", n)
    shapes = [Shape(s) for s in args.shapes.split(",")]
    for shape in (s for s in shapes if s.exact):
        tile = shape.items * shape.workers
        for m in (1, 2, 7, 1000003, tile + 5, 3 * tile, 5 * shape.resident * tile + 4099):
            try:
                check(shape, m, rng)
            except cp.cuda.driver.CUDADriverError as e:
                raise SystemExit(f"{shape.name} at n={m}: {e}")
    print("all shapes correct at n = 1, 2, 7, 1000003, one tile + 5, three tiles, "
          "five tiles a block + 4099")

    x = cp.asarray(rng.integers(-1000, 1000, size=n, dtype="int32"))
    y = cp.empty(n, dtype=cp.int32)
    # 10% repeats: each element equals the one before with probability 0.1.
    rep = cp.cumsum(cp.asarray(rng.random(n) >= 0.1, dtype=cp.int32), dtype=cp.int32)
    idx = cp.empty(n, dtype=cp.int32)
    count = cp.zeros(1, dtype=cp.int32)
    shapes[0].run("repeats_fused", n, (rep, idx, count))
    repeats = int(count[0])
    nbytes = 4 * n
    for rnd in range(args.rounds):
        copy_ms = median_ms(lambda: y.data.copy_from_device_async(x.data, nbytes))
        copy_gbs = 2 * nbytes / copy_ms / 1e6
        print(f"round {rnd}: copy {copy_ms * 1e3:.1f} us, {copy_gbs:.0f} GB/s")
        for shape in shapes:
            if shape.counts is not None:
                shape.counts[:] = 0
            scan_ms = median_ms(lambda: shape.run("scan_lookback", n, (x, y)))
            if shape.counts is not None:
                looks, rereads, moved, cycles = (int(c) for c in shape.counts)
                print(f"  {shape.name:>16}  per look-back: {rereads / looks:.2f} rereads, "
                      f"{moved / looks:.2f} windows moved, {cycles / looks:.0f} cycles")
            rep_ms = median_ms(lambda: shape.run("repeats_fused", n, (rep, idx, count)))
            scan_gbs = 8 * n / scan_ms / 1e6
            rep_gbs = (4 * n + 4 * repeats + 4) / rep_ms / 1e6
            print(f"  {shape.name:>16}  scan {scan_ms * 1e3:7.1f} us {scan_gbs:5.0f} GB/s "
                  f"{scan_gbs / copy_gbs:6.1%}   repeats {rep_ms * 1e3:7.1f} us {rep_gbs:5.0f} GB/s "
                  f"{rep_gbs / copy_gbs:6.1%}")


if __name__ == "__main__":
    main()
