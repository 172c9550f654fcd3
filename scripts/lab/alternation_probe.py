"""Why do multi-kernel reductions alternate between two times, sample after sample?

kbench's samples of reduce_optimized and reduce_unrolled at n = 1,000,003 (three launches a run,
cold L2) alternate even/odd between two levels about 0.9 us apart; reduce_fast (one launch) does
not. This times a three-pass tree sum (the same shape: 1954 blocks, then 4, then 1) and a
one-pass sum, after different preparations, and prints the even- and odd-sample medians:

  read-flush xF  read F x L2 through L2 (kbench's flush is x2: clean lines)
  read-flush2    the x2 read, twice
  write-flush    write a 4 x L2 buffer (dirty lines)
  poison+flush   a memset of the output, then the x2 read (kbench's order)
  none           nothing (warm)

    python3 scripts/lab/alternation_probe.py

On an H100 (2026-11-24, two processes), the three-pass sum alternated by 0.9-1.1 us after two
commands (read-flush2; poison+flush, kbench's order) and by 0.03-0.35 us after one (any flush
size from 1 to 4 x L2, or a write flush), but once by 1.15 us after a single 1 x L2 read: the
alternation follows the command stream ahead of the timed launches, not the flush's size or
kind. The odd samples of read-flush2 are the faster ones (11.55 against 12.48 us).
"""

import statistics
import time

import cupy as cp

SRC = r"""
extern "C" __global__ void tree_pass(const float* in, float* out, unsigned long long n) {
    __shared__ float s[256];
    unsigned long long i = blockIdx.x * 512ull + threadIdx.x;
    float v = 0.0f;
    if (i < n) v += in[i];
    if (i + 256 < n) v += in[i + 256];
    s[threadIdx.x] = v;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
extern "C" __global__ void read_flush(const int4* b, unsigned long long n16, int* sink) {
    int acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) { int4 v = __ldcg(b + i); acc |= v.x | v.y | v.z | v.w; }
    if (acc != 0) *sink = acc;
}
extern "C" __global__ void write_flush(int4* b, unsigned long long n16) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) b[i] = make_int4(0, 0, 0, 0);
}
"""
mod = cp.RawModule(code=SRC)
tree, rflush, wflush = (mod.get_function(k) for k in ("tree_pass", "read_flush", "write_flush"))


def main():
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    l2 = cp.cuda.Device().attributes["L2CacheSize"]
    n = 1_000_003
    x = cp.random.random(n, dtype=cp.float32)
    a = cp.zeros(4096, dtype=cp.float32)
    b = cp.zeros(16, dtype=cp.float32)
    out = cp.zeros(1, dtype=cp.float32)
    flush = cp.zeros(4 * l2 // 4, dtype=cp.int32)  # 4 x L2; a prep reads part
    n16 = cp.uint64(flush.size // 4)
    grid_flush = (sms * 8,)

    def passes(k):
        g1 = (n + 511) // 512
        tree((g1,), (256,), (x, a, cp.uint64(n)))
        if k == 1:
            return
        g2 = (g1 + 511) // 512
        tree((g2,), (256,), (a, b, cp.uint64(g1)))
        tree((1,), (256,), (b, out, cp.uint64(g2)))

    def read_flush(fraction):
        count = cp.uint64(int(flush.size // 4 * fraction))
        return lambda: rflush(grid_flush, (256,), (flush, count, flush))

    prep = {f"read-flush x{f:.2f}": read_flush(f / 4) for f in (1.0, 1.5, 2.0, 3.0, 4.0)}
    prep.update({
        "read-flush2": lambda: (read_flush(0.5)(), read_flush(0.5)()),
        "write-flush": lambda: wflush(grid_flush, (256,), (flush, n16)),
        "poison+flush": lambda: (out.fill(float("nan")), read_flush(0.5)()),
        "none": lambda: None,
    })
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    for launches in (3,):
        for name, p in prep.items():
            t = []
            for s in range(205):
                p()
                start.record()
                passes(launches)
                stop.record()
                stop.synchronize()
                if s >= 5:
                    t.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
            even, odd = statistics.median(t[0::2]), statistics.median(t[1::2])
            print(f"{launches} launch(es), {name:16s}: median {statistics.median(t):6.2f} us, "
                  f"even {even:6.2f}, odd {odd:6.2f}, |even-odd| {abs(even - odd):5.2f} us")


if __name__ == "__main__":
    main()
