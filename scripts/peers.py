#!/usr/bin/env python3
"""The peers kbench's studies are measured against: what a user would pick instead (CUB through
CuPy, PyTorch, SciPy on the host), timed on the GPU machine in the same command as kbench, so that
ratios compare like with like.

    python3 scripts/peers.py [--only reduce,durbin] [--json FILE] [--quick]

How each figure is taken, as kbench takes its own: CUDA events around one call, the L2 cache
flushed (a write over twice its size) before each call and outside the events, 3 warm-up calls,
the median of 20 timed calls (5 for long ones). Host peers: the median of 5 wall-clock calls after
one warm-up. Bandwidth counts the fewest bytes an operation must move (each input read once, each
output written once), as kbench's studies count them.

A study adds its peers with one function decorated by @peer("study").
"""
import argparse
import json
import statistics
import sys
import time

PEERS = {}
# Studies whose peers need no GPU.
HOST_ONLY = {"durbin"}
# Studies with host peers beside their GPU ones: run without a GPU too (their function checks).
HOST_TOO = {"pearson_matrix", "symgs"}


def peer(study):
    """Registers a function that measures the peers of `study`."""
    def register(fn):
        PEERS.setdefault(study, []).append(fn)
        return fn
    return register


class Gpu:
    """Event timing with a cold L2 before every call."""

    def __init__(self):
        import torch
        self.torch = torch
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
        self.name = torch.cuda.get_device_name(0)

    def median_ms(self, fn, reps=20, warmup=3):
        torch = self.torch
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            self.flush.zero_()
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        return statistics.median(times)


def host_median_ms(fn, reps=5, warmup=1):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


class Table:
    def __init__(self):
        self.rows = []

    def add(self, study, what, n, ms, nbytes=None, flops=None, note=None):
        r = {"study": study, "peer": what, "n": n, "median_ms": ms}
        line = f"{study:8s} {what:48s} n={n:<11} {ms:11.5f} ms"
        if nbytes:
            r["gbytes_per_s"] = nbytes / ms / 1e6
            line += f" {r['gbytes_per_s']:9.1f} GB/s"
        if flops:
            r["gflops_per_s"] = flops / ms / 1e6
            line += f" {r['gflops_per_s']:9.1f} GFLOP/s"
        if note:
            r["note"] = note
            line += f"  {note}"
        self.rows.append(r)
        print(line, flush=True)


@peer("device")
def device_copy(gpu, table, quick):
    torch = gpu.torch
    n = 1 << (24 if quick else 28)
    x = torch.rand(n, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)
    table.add("device", "copy f32 (torch copy_), bytes read + written", n,
              gpu.median_ms(lambda: y.copy_(x)), 8 * n)


@peer("reduce")
def reduce_peers(gpu, table, quick):
    import cupy as cp
    torch = gpu.torch
    n = 1 << (24 if quick else 28)
    x = torch.rand(n, device="cuda", dtype=torch.float32)
    cx = cp.asarray(x)
    table.add("reduce", "cupy.sum f32 (CUB)", n, gpu.median_ms(lambda: cx.sum()), 4 * n)
    table.add("reduce", "torch.sum f32", n, gpu.median_ms(lambda: x.sum()), 4 * n)
    xd = torch.rand(n // 2, device="cuda", dtype=torch.float64)
    table.add("reduce", "torch.sum f64", n // 2, gpu.median_ms(lambda: xd.sum()), 8 * (n // 2))


@peer("saxpy")
def saxpy_peers(gpu, table, quick):
    import cupy as cp
    import cupy.cublas
    torch = gpu.torch
    n = 1 << (24 if quick else 28)
    x = torch.rand(n, device="cuda", dtype=torch.float32)
    y = torch.rand(n, device="cuda", dtype=torch.float32)
    table.add("saxpy", "torch y.add_(x, alpha=a) f32 (in place)", n,
              gpu.median_ms(lambda: y.add_(x, alpha=2.0)), 12 * n)
    cx, cy = cp.asarray(x), cp.asarray(y)
    a = cp.asarray(2.0, dtype=cp.float32)
    table.add("saxpy", "cupy.cublas.axpy f32 (cuBLAS saxpy)", n,
              gpu.median_ms(lambda: cupy.cublas.axpy(a, cx, cy)), 12 * n)
    # The host copies alone, from and to page-locked memory: what an overlapped SAXPY with
    # transfers can at best hide its kernel behind.
    xh = torch.empty(n, dtype=torch.float32).pin_memory()
    yh = torch.empty(n, dtype=torch.float32).pin_memory()
    def copies():
        x.copy_(xh, non_blocking=True)
        y.copy_(yh, non_blocking=True)
        yh.copy_(y, non_blocking=True)
    table.add("saxpy", "host copies alone: x, y in, y out (pinned)", n,
              gpu.median_ms(copies, reps=5), 12 * n)


@peer("scan")
def scan_peers(gpu, table, quick):
    import cupy as cp
    torch = gpu.torch
    n = 1 << (24 if quick else 28)
    x = torch.randint(0, 10, (n,), device="cuda", dtype=torch.int32)
    table.add("scan", "torch.cumsum i32 (CUB inclusive scan)", n,
              gpu.median_ms(lambda: torch.cumsum(x, 0, dtype=torch.int32)), 8 * n)
    cx = cp.asarray(x)
    table.add("scan", "cupy.cumsum i32 (CUB inclusive scan)", n,
              gpu.median_ms(lambda: cp.cumsum(cx, dtype=cp.int32)), 8 * n)


@peer("find_repeats")
def find_repeats_peers(gpu, table, quick):
    import cupy as cp
    import numpy as np
    torch = gpu.torch
    n = 1 << (24 if quick else 28)
    # 10% of elements repeat their predecessor, as find_repeats_bench.toml's input.
    rng = np.random.default_rng(28)
    fresh = rng.integers(0, 1 << 30, n, dtype=np.int32)
    repeat = rng.random(n) < 0.1
    repeat[0] = False
    a = fresh.copy()
    idx = np.arange(n)
    last_fresh = np.maximum.accumulate(np.where(repeat, 0, idx))
    a = fresh[last_fresh]
    found = int(np.count_nonzero(a[:-1] == a[1:]))
    ta = torch.from_numpy(a).cuda()
    ca = cp.asarray(ta)
    nbytes = 4 * (n + found + 1)
    table.add("find_repeats", "torch: (a[:-1] == a[1:]).nonzero()", n,
              gpu.median_ms(lambda: torch.nonzero(ta[:-1] == ta[1:]).flatten()), nbytes)
    table.add("find_repeats", "cupy.flatnonzero(a[:-1] == a[1:]) (CUB select)", n,
              gpu.median_ms(lambda: cp.flatnonzero(ca[:-1] == ca[1:])), nbytes)


@peer("durbin")
def durbin_peers(gpu, table, quick):
    import numpy as np
    import scipy.linalg as sl
    for n in ([100, 1000] if quick else [100, 1000, 10000]):
        r = 0.9 ** np.arange(1, n + 1)
        c = np.concatenate([[1.0], r[:-1]])
        table.add("durbin", "scipy.linalg.solve_toeplitz f64 (host CPU)", n,
                  host_median_ms(lambda: sl.solve_toeplitz(c, -r)), 16 * n, 2.0 * n * n)


@peer("pearson_matrix")
def pearson_matrix_peers(gpu, table, quick):
    """The full M x M Pearson matrix of M random walks of N values, as
    experiments/pearson_matrix_bench.toml (M = N = 8192): torch.corrcoef in float32 with TF32 off
    (the goal's yardstick), with TF32 on, and in float64; numpy.corrcoef (float64) on the host.
    Work and bytes as kbench counts them: M (M + 1) N flops (the distinct coefficients' products
    and adds; a full GEMM does twice that), the series read and r written once. Each float32
    result's largest |r - r64| against torch's float64 of the same series is in the note."""
    import numpy as np
    m = n = 2048 if quick else 8192
    size = f"{m}x{n}"
    flops = m * (m + 1) * n
    # kbench's series: every walk starts at 100 and moves by up to 1% a step (u uniform in
    # [-1, 1)); the draws differ from kbench's Philox ones, the magnitudes do not.
    rng = np.random.default_rng(8192)
    steps = 1.0 + 0.01 * rng.uniform(-1.0, 1.0, size=(m, n - 1))
    walks = 100.0 * np.concatenate([np.ones((m, 1)), np.cumprod(steps, axis=1)], axis=1)
    if gpu is not None:
        torch = gpu.torch

        def tf32(on):
            torch.backends.cuda.matmul.allow_tf32 = on
            torch.backends.cudnn.allow_tf32 = on
            torch.set_float32_matmul_precision("high" if on else "highest")

        x64 = torch.from_numpy(walks).cuda()
        x32 = x64.float()
        r64 = torch.corrcoef(x64)
        tf32(False)
        err = (torch.corrcoef(x32).double() - r64).abs().max().item()
        table.add("pearson_matrix", "torch.corrcoef f32 (TF32 off)", size,
                  gpu.median_ms(lambda: torch.corrcoef(x32), reps=20), 4 * (m * n + m * m), flops,
                  note=f"max |r - r64| = {err:.2e}")
        tf32(True)
        err = (torch.corrcoef(x32).double() - r64).abs().max().item()
        table.add("pearson_matrix", "torch.corrcoef f32 (TF32 on)", size,
                  gpu.median_ms(lambda: torch.corrcoef(x32), reps=20), 4 * (m * n + m * m), flops,
                  note=f"max |r - r64| = {err:.2e}")
        tf32(False)
        table.add("pearson_matrix", "torch.corrcoef f64", size,
                  gpu.median_ms(lambda: torch.corrcoef(x64), reps=10), 8 * (m * n + m * m), flops)
        del x32, x64, r64
        torch.cuda.empty_cache()
    table.add("pearson_matrix", "numpy.corrcoef f64 (host CPU)", size,
              host_median_ms(lambda: np.corrcoef(walks), reps=3), 8 * (m * n + m * m), flops)


def hpcg_matrix(nx):
    """HPCG's 27-point matrix on an nx^3 grid (26 on the diagonal, -1 per neighbour), in CSR, as
    kbench's `hpcg:NX` generator makes it (row x + nx (y + nx z))."""
    import scipy.sparse as sp
    t = sp.diags([1.0, 1.0, 1.0], [-1, 0, 1], shape=(nx, nx))
    k = sp.kron(sp.kron(t, t), t, format="csr")
    return (27.0 * sp.identity(nx ** 3, format="csr") - k).tocsr()


@peer("symgs")
def symgs_peers(gpu, table, quick):
    """One symmetric Gauss-Seidel application (forward sweep, then backward) on HPCG's 27-point
    matrix, as experiments/symgs_bench.toml (104^3 = 1,124,864 rows) in float64, written as its
    two triangular solves: (D + L) y = r - U x, then (D + U) x = r - L y. Host: SciPy's
    spsolve_triangular, and pyamg's symmetric Gauss-Seidel where pyamg is installed. GPU:
    CuPy's spsolve_triangular (cuSPARSE; it analyses the matrix at every call, kbench's cuSPARSE
    variant once). Bytes as kbench counts them: the matrix, r and x read and x written, twice."""
    import numpy as np
    import scipy.sparse as sp
    import scipy.sparse.linalg as sla
    nx = 32 if quick else 104
    a = hpcg_matrix(nx)
    n, nnz = a.shape[0], a.nnz
    nbytes = 2 * (nnz * 12 + (n + 1) * 4 + 3 * n * 8)
    flops = 4 * nnz
    size = f"hpcg:{nx}"
    rng = np.random.default_rng(2)
    r = rng.uniform(-1.0, 1.0, n)
    x0 = rng.uniform(-1.0, 1.0, n)
    lower = sp.tril(a, format="csr")
    upper = sp.triu(a, format="csr")
    strict_lower = sp.tril(a, -1, format="csr")
    strict_upper = sp.triu(a, 1, format="csr")

    def scipy_symgs():
        y = sla.spsolve_triangular(lower, r - strict_upper @ x0, lower=True)
        return sla.spsolve_triangular(upper, r - strict_lower @ y, lower=False)

    table.add("symgs", "scipy spsolve_triangular x2 f64 (host CPU)", size,
              host_median_ms(scipy_symgs, reps=3), nbytes, flops)
    try:
        import pyamg.relaxation.relaxation as relax
    except ImportError:
        relax = None
    if relax is not None:
        def pyamg_symgs():
            x = x0.copy()
            relax.gauss_seidel(a, x, r, iterations=1, sweep="symmetric")
        table.add("symgs", "pyamg gauss_seidel symmetric f64 (host CPU)", size,
                  host_median_ms(pyamg_symgs), nbytes, flops)
    if gpu is not None:
        import cupy as cp
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as csla
        lo, up = csp.csr_matrix(lower), csp.csr_matrix(upper)
        slo, sup = csp.csr_matrix(strict_lower), csp.csr_matrix(strict_upper)
        cr, cx = cp.asarray(r), cp.asarray(x0)

        def cupy_symgs():
            y = csla.spsolve_triangular(lo, cr - sup @ cx, lower=True)
            return csla.spsolve_triangular(up, cr - slo @ y, lower=False)

        table.add("symgs", "cupyx spsolve_triangular x2 f64 (cuSPARSE)", size,
                  gpu.median_ms(cupy_symgs, reps=5), nbytes, flops)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated studies (default: all)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    a = ap.parse_args()
    only = {s for s in a.only.split(",") if s}
    unknown = only - set(PEERS)
    if unknown:
        ap.error(f"unknown studies {sorted(unknown)}; known: {sorted(PEERS)}")
    try:
        gpu = Gpu()
        print("device:", gpu.name, flush=True)
    except Exception as e:  # no torch or no GPU: host peers only
        print("no GPU peers:", e, flush=True)
        gpu = None
    table = Table()
    # The device copy is every bandwidth ratio's denominator: always measured.
    studies = ["device"] + [s for s in PEERS if s != "device" and (not only or s in only)]
    for study in studies:
        for fn in PEERS[study]:
            if gpu is None and study not in HOST_ONLY | HOST_TOO:
                continue
            fn(gpu, table, a.quick)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": gpu.name if gpu else None, "peers": table.rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
