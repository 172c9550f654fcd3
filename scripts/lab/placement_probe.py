"""Does where a buffer lands in device memory change how fast a kernel reads it?

One process allocates `--buffers` buffers of `n` floats (with odd-sized spacers between them,
so each lands on different physical pages), then times the same read kernel on each, round-robin,
cold L2 (a 256 MiB write before every sample), with CUDA events. It prints each buffer's median and
the spread of the medians, and, for comparison, the spread of one buffer's median between halves
of its samples. Run it in a few fresh processes: if buffers in one process differ as much as
processes differ, the between-run spread of a kernel's median is the placement of its buffers.

    python3 scripts/lab/placement_probe.py --n 1000003 --buffers 12 --samples 60
"""

import argparse
import json
import statistics

import cupy as cp

READ_SUM = cp.RawKernel(
    r"""
extern "C" __global__ void read_sum(const float* x, unsigned long long n, float* out) {
    float acc = 0.0f;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        acc += x[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffff, acc, o);
    if ((threadIdx.x & 31) == 0) atomicAdd(out, acc);
}
""",
    "read_sum",
)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=1_000_003)
    p.add_argument("--buffers", type=int, default=12)
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--label", default="")
    a = p.parse_args()
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    flush = cp.empty(64 * 1024 * 1024, dtype=cp.float32)
    buffers, spacers = [], []
    for b in range(a.buffers):
        spacers.append(cp.empty(1_048_576 * (b % 5 + 1) + 4099 * b, dtype=cp.uint8))
        buffers.append(cp.random.random(a.n, dtype=cp.float32))
    out = cp.zeros(1, dtype=cp.float32)
    grid, block = sms * 8, 256
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times_us = [[] for _ in buffers]
    for s in range(a.samples + 3):
        for b, x in enumerate(buffers):
            flush.fill(s)
            start.record()
            READ_SUM((grid,), (block,), (x, cp.uint64(a.n), out))
            stop.record()
            stop.synchronize()
            if s >= 3:
                times_us[b].append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
    medians = [statistics.median(t) for t in times_us]
    halves = [
        abs(statistics.median(t[: len(t) // 2]) / statistics.median(t[len(t) // 2 :]) - 1)
        for t in times_us
    ]
    lo, hi = min(medians), max(medians)
    print(
        f"{a.label} n={a.n}: buffer medians {lo:.2f}..{hi:.2f} us, spread {100 * (hi / lo - 1):.1f}%, "
        f"cv {100 * statistics.stdev(medians) / statistics.mean(medians):.2f}%, "
        f"mean {statistics.mean(medians):.2f} us; within a buffer, halves differ by "
        f"{100 * statistics.median(halves):.2f}% (median)"
    )
    print(json.dumps({"label": a.label, "n": a.n, "medians_us": [round(m, 3) for m in medians]}))


if __name__ == "__main__":
    main()
