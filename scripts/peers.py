#!/usr/bin/env python3
"""The peers kbench's studies are measured against: what a user would pick instead (CUB through
CuPy, PyTorch, SciPy on the host), timed on the GPU machine in the same command as kbench, so that
ratios compare like with like.

    python3 scripts/peers.py [--only reduce,durbin] [--json FILE] [--quick]

How each figure is taken, as kbench takes its own: CUDA events around one call, the L2 cache
flushed (a read over four times its size; kbench reads twice it) before each call and outside the events,
3 warm-up calls, the median of 20 timed calls (5 for long ones). Host peers: the median of 5
wall-clock calls after one warm-up. Bandwidth counts the fewest bytes an operation must move (each
input read once, each output written once), as kbench's studies count them.

CUB called directly (the strongest peer of the reduce, scan and find_repeats studies): the harness
scripts/cub_peers.cu, built here with nvcc once per source version and timed the same way, at
the sizes (and dtypes, repeats shares) of each study's bench manifest, experiments/*_bench.toml,
so that `kbench run experiments/scan_bench.toml && python3 scripts/peers.py --only scan` compare
the same sizes. Without nvcc, or if the build fails, the CUB rows are skipped with the reason.
The process exits 1 if the harness found a wrong answer.

A study adds its peers with one function decorated by @peer("study").
"""
import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

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
        # Four times the L2 (l2 int32s), zeroed: a read over it evicts what the last call left.
        self.flush = torch.zeros(l2, dtype=torch.int32, device="cuda")
        self.name = torch.cuda.get_device_name(0)

    def flush_l2(self):
        """Evicts what the last call left in L2 by READING the flush buffer (a reduction that
        writes one number), as kbench's kbench_flush_l2 does (kernels/timer.cu). A write flush
        (zero_()) would leave L2 full of dirty lines whose write-back then lands inside the next
        timed call: kbench measured reduce_fast over 64 MB 6 us slower after one."""
        self.flush.amax()

    def median_ms(self, fn, reps=20, warmup=3):
        torch = self.torch
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            self.flush_l2()  # queued before the start event: outside the timing
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
        # Wrong answers a peer reported (the CUB harness checks its own): main exits 1 if any.
        self.failures = []

    def add(self, study, what, n, ms, nbytes=None, flops=None, note=None, min_ms=None):
        r = {"study": study, "peer": what, "n": n, "median_ms": ms}
        if min_ms is not None:
            r["min_ms"] = min_ms
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


# ---- CUB called directly: scripts/cub_peers.cu built with nvcc ----

ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS = ROOT / "experiments"
# --quick runs the manifests' sizes up to this, or this size alone if there are none.
QUICK_N = 1 << 24
DTYPE_BYTES = {"i32": 4, "f32": 4, "f64": 8}


def axis_values(value, where):
    """A manifest's grid axis expanded as kbench expands it (src/grid.rs): a value, a list,
    { pow2 = [lo, hi] } (2^lo .. 2^hi) or { start, stop, step } (stop included, step 1 if left
    out). `where` names the axis in errors. A grid's `where` and `zip` are not applied."""
    if isinstance(value, list):
        return list(value)
    if not isinstance(value, dict):
        return [value]
    keys = sorted(value)
    if keys == ["pow2"]:
        bounds = value["pow2"]
        if (not isinstance(bounds, list) or len(bounds) != 2
                or not all(isinstance(b, int) for b in bounds) or not 0 <= bounds[0] <= bounds[1] <= 62):
            raise ValueError(f"{where}: pow2 takes two exponents 0 <= lo <= hi <= 62, found {bounds!r}")
        return [1 << e for e in range(bounds[0], bounds[1] + 1)]
    if keys in (["start", "stop"], ["start", "step", "stop"]):
        start, stop, step = value["start"], value["stop"], value.get("step", 1)
        if not all(isinstance(v, int) for v in (start, stop, step)) or step <= 0 or stop < start:
            raise ValueError(f"{where}: a range needs integers start <= stop and step > 0, found {value!r}")
        return list(range(start, stop + 1, step))
    raise ValueError(f"{where}: an axis table is {{ pow2 = [lo, hi] }} or {{ start, stop, step }}; "
                     f"found keys {keys}")


def bench_axis(manifest, axis, default=None, experiments=None):
    """The values of grid axis `axis` in the bench manifest `manifest` (a file name under
    experiments/), so that the CUB rows stay in step with the study kbench runs; `default` if
    the grid leaves the axis out (kbench's default), an error if there is none."""
    path = Path(experiments or EXPERIMENTS) / manifest
    with open(path, "rb") as f:
        grid = tomllib.load(f).get("grid", {})
    if axis not in grid:
        if default is None:
            raise ValueError(f"{path}: [grid] has no `{axis}`")
        return [default]
    return axis_values(grid[axis], f"{path}: grid.{axis}")


def bench_sizes(manifest, quick, experiments=None):
    """The manifest's sizes n (positive integers), or with --quick those up to QUICK_N."""
    sizes = bench_axis(manifest, "n", experiments=experiments)
    for n in sizes:
        if not isinstance(n, int) or isinstance(n, bool) or n < 2:
            raise ValueError(f"{manifest}: grid.n holds {n!r}; the CUB harness takes integers >= 2")
    if quick:
        sizes = [n for n in sizes if n <= QUICK_N] or [QUICK_N]
    return sizes


# What the harness prints per line, and the types they must have.
CUB_FIELDS = {"op": str, "dtype": str, "n": int, "median_ms": (int, float), "min_ms": (int, float),
              "reps": int, "check": str}


def parse_cub_lines(text):
    """The harness's rows: one JSON object a non-empty line, with CUB_FIELDS (and "found" for
    repeats). A malformed line is a ValueError naming it."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"CUB harness output line {number} is not JSON ({e}): {line[:200]!r}") from None
        if not isinstance(row, dict):
            raise ValueError(f"CUB harness output line {number} is not an object: {line[:200]!r}")
        for key, kind in CUB_FIELDS.items():
            if not isinstance(row.get(key), kind) or isinstance(row.get(key), bool):
                raise ValueError(f"CUB harness output line {number}: `{key}` is missing or not "
                                 f"{getattr(kind, '__name__', 'a number')}: {line[:200]!r}")
        if row["op"] == "repeats" and not isinstance(row.get("found"), int):
            raise ValueError(f"CUB harness output line {number}: a repeats row needs `found`: {line[:200]!r}")
        rows.append(row)
    return rows


def text_tail(text, lines=20):
    return "\n".join(text.strip().splitlines()[-lines:])


def find_nvcc():
    """nvcc on PATH, else the toolkit's usual place; None if neither."""
    found = shutil.which("nvcc")
    if found:
        return found
    fallback = Path("/usr/local/cuda/bin/nvcc")
    return str(fallback) if os.access(fallback, os.X_OK) else None


class HarnessUnavailable(Exception):
    """No CUB rows: why (no nvcc, the build's errors)."""


class CubHarness:
    """scripts/cub_peers.cu (CUB's DeviceReduce::Sum, DeviceScan::ExclusiveSum and
    DeviceSelect::If called directly), built with nvcc on first use, once per source version: the
    binary is cached under $TMPDIR (or /tmp) by a hash of the source and nvcc's path. Runs one
    child process per (op, dtype) over all sizes. If nvcc is missing or the build fails, every
    `run` returns no rows and the reason is printed once."""

    SOURCE = Path(__file__).resolve().with_name("cub_peers.cu")
    ARCHS = ("native", "sm_90")  # native is refused by an old nvcc, or without a visible GPU
    BUILD_TIMEOUT_S = 900

    def __init__(self, binary=None, nvcc=None, cache_dir=None, reps=20):
        self.binary = binary  # a harness already built (the self-test passes a fake one)
        self.nvcc = nvcc
        self.cache_dir = Path(cache_dir or os.environ.get("TMPDIR") or "/tmp") / "kbench-cub-peers"
        self.reps = reps
        self.reason = None  # why there are no CUB rows, once known

    def ready(self):
        """Builds the harness the first time; False (the reason printed once) if it cannot be."""
        if self.binary is None and self.reason is None:
            try:
                self.binary = self.build()
            except HarnessUnavailable as e:
                self.reason = str(e)
                print(f"no CUB rows: {self.reason}", flush=True)
        return self.binary is not None

    def build(self):
        nvcc = self.nvcc or find_nvcc()
        if nvcc is None:
            raise HarnessUnavailable("nvcc is neither on PATH nor in /usr/local/cuda/bin")
        key = hashlib.sha256(self.SOURCE.read_bytes() + nvcc.encode()).hexdigest()[:16]
        binary = self.cache_dir / f"cub_peers-{key}"
        if binary.exists():
            return binary
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        partial = self.cache_dir / f".cub_peers-{key}-{os.getpid()}"
        errors = []
        for arch in self.ARCHS:
            command = [nvcc, "-O3", "-std=c++17", f"-arch={arch}", "-o", str(partial), str(self.SOURCE)]
            print("building the CUB harness:", " ".join(command), flush=True)
            try:
                done = subprocess.run(command, capture_output=True, text=True,
                                      timeout=self.BUILD_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise HarnessUnavailable(f"{' '.join(command)}: {e}") from None
            if done.returncode == 0:
                os.replace(partial, binary)  # whole or not at all, for the next run's cache
                return binary
            errors.append(f"-arch={arch} (exit {done.returncode}):\n{text_tail(done.stderr + done.stdout)}")
            if "native" not in done.stderr + done.stdout:
                break  # an error in the source, not the architecture: the fallback would repeat it
        raise HarnessUnavailable("nvcc failed to build scripts/cub_peers.cu: " + "\n".join(errors))

    def run(self, op, dtype, sizes, extra=()):
        """The harness's rows for (op, dtype) at `sizes` (see parse_cub_lines), [] without a
        harness. A harness that stops early (a CUDA error) gives the rows before it, and the
        reason is printed."""
        if not self.ready():
            return []
        command = [str(self.binary), op, dtype, *map(str, sizes), "--reps", str(self.reps), *extra]
        try:
            done = subprocess.run(command, capture_output=True, text=True)
            rows = parse_cub_lines(done.stdout)
        except (OSError, ValueError) as e:
            print(f"no CUB rows for {op} {dtype}: {e}", flush=True)
            return []
        # Exit 1 is a wrong answer, which the rows' checks say; anything else is a failure.
        if done.returncode not in (0, 1) or len(rows) < len(sizes):
            print(f"CUB harness {' '.join(command[1:])} stopped (exit {done.returncode}) after "
                  f"{len(rows)} of {len(sizes)} sizes: {text_tail(done.stderr)}", flush=True)
        return rows


CUB = CubHarness()


def free_gpu_caches(torch):
    """Hands torch's and CuPy's cached blocks back to the device, so that the CUB harness (its
    own process) has room for its inputs."""
    import cupy as cp
    torch.cuda.empty_cache()
    cp.get_default_memory_pool().free_all_blocks()


def add_cub_rows(table, study, what, rows, nbytes):
    """One table row per harness row; `nbytes(row)` the bytes the operation must move. A wrong
    answer is in the row's note and in table.failures."""
    for row in rows:
        note = f"min {row['min_ms']:.5f} ms of {row['reps']}"
        if row["check"] != "ok":
            note += f"; {row['check']}"
            table.failures.append(f"{study} {what} n={row['n']}: {row['check']}")
        table.add(study, what, row["n"], row["median_ms"], nbytes(row), note=note, min_ms=row["min_ms"])


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
    del x, cx, xd
    free_gpu_caches(torch)
    sizes = bench_sizes("reduction_bench.toml", quick)
    for dtype in bench_axis("reduction_bench.toml", "dtype", default="f32"):
        size = DTYPE_BYTES[dtype]
        # x read once, the sum written once.
        add_cub_rows(table, "reduce", f"CUB DeviceReduce::Sum {dtype} (nvcc harness)",
                     CUB.run("reduce", dtype, sizes), lambda row: size * (row["n"] + 1))


@peer("saxpy")
def saxpy_peers(gpu, table, quick):
    import cupy as cp
    import cupy.cublas
    torch = gpu.torch
    a = cp.asarray(2.0, dtype=cp.float32)
    # Ascending, so that the last size is the largest, for the host copies below.
    for n in sorted(bench_sizes("saxpy_bench.toml", quick)):
        x = torch.rand(n, device="cuda", dtype=torch.float32)
        y = torch.rand(n, device="cuda", dtype=torch.float32)
        table.add("saxpy", "torch y.add_(x, alpha=a) f32 (in place)", n,
                  gpu.median_ms(lambda: y.add_(x, alpha=2.0)), 12 * n)
        cx, cy = cp.asarray(x), cp.asarray(y)
        table.add("saxpy", "cupy.cublas.axpy f32 (cuBLAS saxpy)", n,
                  gpu.median_ms(lambda: cupy.cublas.axpy(a, cx, cy)), 12 * n)
    # The host copies alone, from and to page-locked memory, at the largest size: what an
    # overlapped SAXPY with transfers can at best hide its kernel behind.
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
    del x, cx
    free_gpu_caches(torch)
    rows = CUB.run("scan", "i32", bench_sizes("scan_bench.toml", quick))
    add_cub_rows(table, "scan", "CUB DeviceScan::ExclusiveSum i32 (nvcc harness)", rows,
                 lambda row: 8 * row["n"])


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
    del ta, ca
    free_gpu_caches(torch)
    # The study's input and output, at the manifest's sizes and repeats shares: a read once, the
    # count and the repeats' indices written (as src/algos/find_repeats.rs counts them).
    sizes = bench_sizes("find_repeats_bench.toml", quick)
    for share in bench_axis("find_repeats_bench.toml", "repeats", default=0.1):
        rows = CUB.run("repeats", "i32", sizes, extra=("--repeats", repr(float(share))))
        add_cub_rows(table, "find_repeats",
                     f"CUB DeviceSelect::If, {share:.0%} repeats (nvcc harness)", rows,
                     lambda row: 4 * (row["n"] + row["found"] + 1))


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


FAKE_HARNESS = """#!/usr/bin/env python3
# A stand-in for the CUB harness: one row per size, the size 3 answered wrong, the size 5 a crash.
import json, sys
op, dtype, *rest = sys.argv[1:]
sizes = [int(a) for a in rest[:rest.index("--reps")]]
reps = int(rest[rest.index("--reps") + 1])
wrong = False
for n in sizes:
    if n == 5:
        sys.exit("cub_peers.cu:1: cudaMalloc failed: out of memory")
    row = {"op": op, "dtype": dtype, "n": n, "median_ms": n / 1e3, "min_ms": n / 2e3, "reps": reps,
           "check": "WRONG: sum 1, expected 2" if n == 3 else "ok"}
    if op == "repeats":
        row["found"] = n // 10
    print(json.dumps(row))
    wrong = wrong or n == 3
sys.exit(1 if wrong else 0)
"""

FAKE_NVCC = """#!/bin/sh
# A stand-in for nvcc: logs its arguments, refuses -arch=native, and "builds" the harness by
# copying the fake one to -o's path.
echo "$@" >> "$(dirname "$0")/calls"
case "$*" in *-arch=native*) echo "nvcc fatal : Value 'native' is not defined" >&2; exit 1;; esac
while [ "$1" != "-o" ]; do shift; done
cp "$(dirname "$0")/harness" "$2"
"""


def self_test():
    """Checks the CUB plumbing without a GPU or nvcc: the manifest axes, the harness's output
    parsing, a fake harness run into a table, and the build with a fake nvcc (the fallback from
    -arch=native, the cache). Run: python3 -c "import sys; sys.path.insert(0, 'scripts');
    import peers; peers.self_test()". Raises AssertionError at the first failure."""
    checks = 0

    def check(condition, what):
        nonlocal checks
        if not condition:
            raise AssertionError(what)
        checks += 1

    def raises(fn, words):
        try:
            fn()
        except ValueError as e:
            return all(w in str(e) for w in words)
        return False

    # Axes as kbench expands them.
    check(axis_values(7, "a") == [7], "a scalar axis")
    check(axis_values([1, 2], "a") == [1, 2], "a list axis")
    check(axis_values({"pow2": [10, 12]}, "a") == [1024, 2048, 4096], "a pow2 axis")
    check(axis_values({"start": 1, "stop": 7, "step": 3}, "a") == [1, 4, 7], "a range")
    check(axis_values({"start": 5, "stop": 7}, "a") == [5, 6, 7], "a range without step")
    check(raises(lambda: axis_values({"pow2": [12, 10]}, "x.toml: grid.n"), ["x.toml: grid.n", "pow2"]),
          "pow2 with lo > hi is refused")
    check(raises(lambda: axis_values({"from": 1}, "grid.n"), ["grid.n", "from"]), "an unknown table")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "m.toml").write_text('[grid]\nn = { pow2 = [12, 14] }\nrepeats = [0.1, 0.5]\n')
        Path(tmp, "bad.toml").write_text('[grid]\nn = [1000, "big"]\n')
        check(bench_sizes("m.toml", False, tmp) == [4096, 8192, 16384], "manifest sizes")
        check(bench_sizes("m.toml", True, tmp) == [4096, 8192, 16384], "--quick keeps small sizes")
        check(bench_axis("m.toml", "repeats", 0.1, tmp) == [0.1, 0.5], "manifest repeats")
        check(bench_axis("m.toml", "dtype", "f32", tmp) == ["f32"], "an axis left out: the default")
        check(raises(lambda: bench_axis("m.toml", "dtype", None, tmp), ["m.toml", "dtype"]),
              "an axis left out without a default")
        check(raises(lambda: bench_sizes("bad.toml", False, tmp), ["bad.toml", "big"]), "a size not an integer")
    # The real bench manifests (whatever sizes they hold now).
    for manifest in ("reduction_bench.toml", "scan_bench.toml", "find_repeats_bench.toml"):
        sizes = bench_sizes(manifest, False)
        check(sizes and all(isinstance(n, int) and n >= 2 for n in sizes), f"{manifest}'s sizes: {sizes}")
        check(all(n <= QUICK_N for n in bench_sizes(manifest, True)), f"{manifest}'s --quick sizes")
    check(set(bench_axis("reduction_bench.toml", "dtype", "f32")) <= set(DTYPE_BYTES), "reduce dtypes")

    # The harness's lines.
    good = ('{"op":"reduce","dtype":"f32","n":4096,"median_ms":0.012,"min_ms":0.011,"reps":20,"check":"ok"}\n\n'
            '{"op":"repeats","dtype":"i32","n":100,"median_ms":1,"min_ms":1,"reps":3,"check":"WRONG: x","found":9}\n')
    rows = parse_cub_lines(good)
    check([r["n"] for r in rows] == [4096, 100] and rows[1]["found"] == 9, "two good lines")
    check(raises(lambda: parse_cub_lines("{not json\n"), ["line 1", "not JSON"]), "a line not JSON")
    check(raises(lambda: parse_cub_lines(good.replace('"reps":20', '"reps":"20"')), ["line 1", "reps"]),
          "a field of the wrong type")
    check(raises(lambda: parse_cub_lines(good.replace(',"found":9', "")), ["line 3", "found"]),
          "a repeats row without found")
    check(raises(lambda: parse_cub_lines("[1, 2]\n"), ["line 1", "not an object"]), "a line not an object")

    with tempfile.TemporaryDirectory() as tmp:
        fake = Path(tmp, "harness")
        fake.write_text(FAKE_HARNESS)
        fake.chmod(0o755)
        # A run into the table: bytes from the row, a wrong answer noted and counted.
        harness = CubHarness(binary=fake, reps=7)
        table = Table()
        rows = harness.run("repeats", "i32", [100, 3], extra=("--repeats", "0.1"))
        add_cub_rows(table, "find_repeats", "CUB fake", rows, lambda row: 4 * (row["n"] + row["found"] + 1))
        check([r["n"] for r in table.rows] == [100, 3], "one table row per size")
        check(table.rows[0]["gbytes_per_s"] == 4 * (100 + 10 + 1) / 0.1 / 1e6, "bytes from the row's count")
        check(table.rows[0]["min_ms"] == 0.05 and all(r["peer"] == "CUB fake" for r in table.rows), "min_ms kept")
        check(len(table.failures) == 1 and "n=3" in table.failures[0] and "WRONG" in table.rows[1]["note"],
              "a wrong answer is a failure")
        # A harness that stops early gives the rows before it.
        check([r["n"] for r in harness.run("reduce", "f32", [10, 5, 20])] == [10], "rows before a crash")

        # The build: no nvcc at all, then a fake nvcc refusing -arch=native.
        Path(tmp, "no-nvcc").mkdir()
        missing = CubHarness(nvcc=str(Path(tmp, "no-nvcc", "nvcc")), cache_dir=tmp)
        check(not missing.ready() and missing.run("scan", "i32", [10]) == [], "a missing nvcc: no rows")
        nvcc_dir = Path(tmp, "nvcc")
        nvcc_dir.mkdir()
        shutil.copy(fake, nvcc_dir / "harness")
        nvcc = nvcc_dir / "nvcc"
        nvcc.write_text(FAKE_NVCC)
        nvcc.chmod(0o755)
        built = CubHarness(nvcc=str(nvcc), cache_dir=tmp, reps=2)
        rows = built.run("scan", "i32", [10, 20])
        check([(r["n"], r["reps"]) for r in rows] == [(10, 2), (20, 2)], "a built harness runs")
        calls = (nvcc_dir / "calls").read_text().splitlines()
        check(len(calls) == 2 and "-arch=native" in calls[0] and "-arch=sm_90" in calls[1]
              and "-O3 -std=c++17" in calls[1], f"native, then sm_90: {calls}")
        again = CubHarness(nvcc=str(nvcc), cache_dir=tmp)
        check(again.ready() and again.binary == built.binary, "the second harness reuses the build")
        check(len((nvcc_dir / "calls").read_text().splitlines()) == 2, "no second build")
        nvcc.write_text("#!/bin/sh\necho 'cub_peers.cu(1): error: identifier \"x\" is undefined' >&2\nexit 1\n")
        broken = CubHarness(nvcc=str(nvcc), cache_dir=Path(tmp, "elsewhere"))
        check(not broken.ready() and "is undefined" in broken.reason and "sm_90" not in broken.reason,
              f"a source error is reported once, without the fallback: {broken.reason}")
    print(f"self-test: {checks} passed, 0 failed")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated studies (default: all)")
    ap.add_argument("--json", help="also write the rows to this file")
    ap.add_argument("--quick", action="store_true", help="smaller sizes")
    ap.add_argument("--cub-reps", type=int, default=CUB.reps, metavar="R",
                    help=f"timed calls per size of the CUB harness (default {CUB.reps})")
    a = ap.parse_args()
    if a.cub_reps < 1:
        ap.error(f"--cub-reps must be at least 1, got {a.cub_reps}")
    CUB.reps = a.cub_reps
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
    if table.failures:
        print(f"{len(table.failures)} wrong answer(s):", *table.failures, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
