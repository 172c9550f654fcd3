#!/usr/bin/env python3
"""Issue 30's first-study effect: on a freshly started machine the first study's copy peak read
5% low. This prints, from the moment the process starts, a 1 GiB device-to-device copy's rate
(bytes read + written, CUDA events) every ~50 ms for SECONDS, beside NVML's SM and memory clocks,
P-state, power and temperatures, so the time it takes to settle (and whether it is time since
the GPU woke, or work done, or this process's allocations) can be read off.
    python3 scripts/lab/cold_start_probe.py SECONDS [LABEL]"""
import sys
import time

t0 = time.perf_counter()
import cupy as cp  # noqa: E402
import pynvml as nv  # noqa: E402

seconds = float(sys.argv[1])
label = sys.argv[2] if len(sys.argv) > 2 else "probe"
nv.nvmlInit()
h = nv.nvmlDeviceGetHandleByIndex(0)


def nvml_state():
    def get(f, *a):
        try:
            return f(h, *a)
        except nv.NVMLError:
            return None
    return {
        "sm_mhz": get(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_SM),
        "mem_mhz": get(nv.nvmlDeviceGetClockInfo, nv.NVML_CLOCK_MEM),
        "pstate": get(nv.nvmlDeviceGetPerformanceState),
        "power_w": (get(nv.nvmlDeviceGetPowerUsage) or 0) / 1000,
        "temp_c": get(nv.nvmlDeviceGetTemperature, nv.NVML_TEMPERATURE_GPU),
        "reasons": get(nv.nvmlDeviceGetCurrentClocksEventReasons),
    }


print(f"[{label}] {time.perf_counter() - t0:.2f} s after start, before CUDA: {nvml_state()}", flush=True)
nbytes = 1 << 30
src = cp.empty(nbytes, dtype=cp.uint8)
dst = cp.empty(nbytes, dtype=cp.uint8)
cp.cuda.runtime.memset(src.data.ptr, 1, nbytes)
start, stop = cp.cuda.Event(), cp.cuda.Event()
print(f"[{label}] {time.perf_counter() - t0:.2f} s: buffers ready: {nvml_state()}", flush=True)
t_start = time.perf_counter()
rates = []
while time.perf_counter() - t_start < seconds:
    start.record()
    for _ in range(5):
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, 3, 0)
    stop.record()
    stop.synchronize()
    ms = cp.cuda.get_elapsed_time(start, stop) / 5
    rates.append((time.perf_counter() - t_start, 2 * nbytes / ms / 1e6))
    if len(rates) % 10 == 1:
        s = nvml_state()
        print(f"[{label}] t={rates[-1][0]:6.2f} s copy {rates[-1][1]:7.1f} GB/s  sm {s['sm_mhz']} MHz "
              f"mem {s['mem_mhz']} MHz P{s['pstate']} {s['power_w']:.0f} W {s['temp_c']} C "
              f"reasons {s['reasons']:#x}", flush=True)
# The rate in windows of 0.5 s: where it settles.
for w in range(int(seconds / 0.5) + 1):
    inside = [r for t, r in rates if w * 0.5 <= t < (w + 1) * 0.5]
    if inside:
        inside.sort()
        print(f"[{label}] {w * 0.5:4.1f}-{w * 0.5 + 0.5:4.1f} s: median {inside[len(inside) // 2]:7.1f} GB/s "
              f"(min {inside[0]:.1f}, max {inside[-1]:.1f}, {len(inside)} samples)")
