#!/usr/bin/env python3
"""Where the ~2.4 us between CUDA events and CUPTI's kernel time comes from (H100, 2026-11-23).
Queues sequences behind torch.cuda._sleep (a spin that holds the stream while the host queues),
times them with events, and reads each kernel's own duration from the profiler (CUPTI)."""
import statistics, torch
from torch.profiler import profile, ProfilerActivity

x = torch.rand(65536, device="cuda"); y = torch.empty_like(x)
flush = torch.empty(100 << 20, dtype=torch.uint8, device="cuda")
def K(): torch.add(x, 1.0, out=y)
g = torch.cuda.CUDAGraph()
s = torch.cuda.Stream()
with torch.cuda.stream(s):
    K(); torch.cuda.synchronize()
    with torch.cuda.graph(g): K()
torch.cuda.synchronize()

def timed(seq, reps=200, hold=True, pre=None):
    out = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        if hold: torch.cuda._sleep(2_000_000)
        if pre: pre()
        a.record(); seq(); b.record(); b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)

cases = {
    "held: start K stop": (lambda: K(), True, None),
    "held: memset; start K stop": (lambda: K(), True, lambda: y.zero_()),
    "held: flush(zero_ 100MB); start K stop": (lambda: K(), True, lambda: flush.zero_()),
    "held: start stop (empty)": (lambda: None, True, None),
    "held: start K K stop": (lambda: (K(), K()), True, None),
    "held: start graph(K) stop": (lambda: g.replay(), True, None),
    "unheld: start K stop": (lambda: K(), False, None),
}
for name, (seq, hold, pre) in cases.items():
    print(f"{name:42s} {timed(seq, hold=hold, pre=pre):8.2f} us")
with profile(activities=[ProfilerActivity.CUDA]) as p:
    for _ in range(50): K()
    torch.cuda.synchronize()
ks = [e.device_time for e in p.events() if e.device_type.name == "CUDA" and "add" in e.name.lower()]
print(f"{'CUPTI: K alone (median device time)':42s} {statistics.median(ks):8.2f} us over {len(ks)}")
