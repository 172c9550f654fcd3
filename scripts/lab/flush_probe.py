#!/usr/bin/env python3
"""Issue 30: why does kbench time a writing kernel (SAXPY) 2-4% above Nsight Compute at 2^24
and 2^28, when both its timers agree? This times one SAXPY kernel with CUDA events after
different preparations, to find which one matches ncu (whose cache control empties L2 before
the kernel), and with `ncu` prints ncu's own time of the same kernel:
    python3 scripts/lab/flush_probe.py N            # the table
    ncu --cache-control all --clock-control none --metrics gpu__time_duration.sum \
        -k regex:saxpy python3 scripts/lab/flush_probe.py N --ncu
"""
import sys
import time

import cupy as cp

SRC = r"""
extern "C" __global__ void saxpy(const float4* __restrict__ x, float4* __restrict__ y, float a,
                                 unsigned long long n4) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        float4 u = x[i], v = y[i];
        v.x = a * u.x + v.x; v.y = a * u.y + v.y; v.z = a * u.z + v.z; v.w = a * u.w + v.w;
        y[i] = v;
    }
}
extern "C" __global__ void flush_read(const int4* __restrict__ b, unsigned long long n16, int* sink) {
    int acc = 0;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const int4 v = __ldcg(b + i);
        acc |= v.x | v.y | v.z | v.w;
    }
    if (acc != 0) *sink = acc;
}
extern "C" __global__ void flush_write(int4* __restrict__ b, unsigned long long n16) {
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n16;
         i += (unsigned long long)gridDim.x * blockDim.x)
        b[i] = make_int4(0, 0, 0, 0);
}
"""
mod = cp.RawModule(code=SRC)
saxpy, flush_read, flush_write = (mod.get_function(k) for k in ("saxpy", "flush_read", "flush_write"))
n = int(sys.argv[1])
ncu_mode = "--ncu" in sys.argv
dev = cp.cuda.Device()
sms = dev.attributes["MultiProcessorCount"]
l2 = dev.attributes["L2CacheSize"]
x = cp.random.random(n, dtype=cp.float32)
y0 = cp.random.random(n, dtype=cp.float32)
y = y0.copy()
flush_a = cp.zeros(4 * l2 // 4, dtype=cp.int32)
flush_b = cp.zeros(4 * l2 // 4, dtype=cp.int32)
flush_big = cp.zeros(16 * l2 // 4, dtype=cp.int32)
sink = cp.zeros(1, dtype=cp.int32)
n4 = n // 4
grid_saxpy = (min((n4 + 255) // 256, sms * 16),)


def run_saxpy():
    saxpy(grid_saxpy, (256,), (x, y, cp.float32(2.0), cp.uint64(n4)))


def fread(buf):
    flush_read((sms * 8,), (256,), (buf, cp.uint64(buf.nbytes // 16), sink))


def fwrite(buf):
    flush_write((sms * 8,), (256,), (buf, cp.uint64(buf.nbytes // 16)))


def reset():
    cp.cuda.runtime.memcpyAsync(y.data.ptr, y0.data.ptr, y.nbytes, 3, 0)


if ncu_mode:
    for _ in range(5):
        reset()
        fread(flush_a)
        cp.cuda.runtime.deviceSynchronize()
        run_saxpy()
        cp.cuda.runtime.deviceSynchronize()
    sys.exit(0)

start, stop = cp.cuda.Event(), cp.cuda.Event()
alternate = [flush_a, flush_b]


def prep(kind, i):
    if kind == "reset, flush (kbench now)":
        reset(); fread(flush_a)
    elif kind == "flush, reset (kbench before)":
        fread(flush_a); reset()
    elif kind == "reset, flush, 2 ms idle":
        reset(); fread(flush_a); cp.cuda.runtime.deviceSynchronize(); time.sleep(0.002)
    elif kind == "reset, flush 16x L2":
        reset(); fread(flush_big)
    elif kind == "reset, flush twice":
        reset(); fread(flush_a); fread(flush_b)
    elif kind == "reset, flush alternating buffers":
        reset(); fread(alternate[i % 2])
    elif kind == "reset, write flush, read flush":
        reset(); fwrite(flush_b); fread(flush_a)
    elif kind == "reset, idle 2 ms, flush":
        reset(); cp.cuda.runtime.deviceSynchronize(); time.sleep(0.002); fread(flush_a)
    elif kind == "no reset, flush":
        fread(flush_a)
    elif kind == "reset only (hot)":
        reset()


kinds = ["reset, flush (kbench now)", "flush, reset (kbench before)", "reset, flush, 2 ms idle",
         "reset, flush 16x L2", "reset, flush twice", "reset, flush alternating buffers",
         "reset, write flush, read flush", "reset, idle 2 ms, flush", "no reset, flush",
         "reset only (hot)"]
times = {k: [] for k in kinds}
for _ in range(3):
    reset(); fread(flush_a); run_saxpy()
cp.cuda.runtime.deviceSynchronize()
for i in range(25):
    for k in kinds:  # interleaved, so drift hits every kind alike
        prep(k, i)
        start.record()
        run_saxpy()
        stop.record()
        stop.synchronize()
        times[k].append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
print(f"saxpy n = {n}: median of 25 (µs, CUDA events, includes the events' ~1.3 µs)")
for k in kinds:
    t = sorted(times[k])
    print(f"  {k:34s} {t[len(t) // 2]:10.2f}  (min {t[0]:.2f}, max {t[-1]:.2f})")
