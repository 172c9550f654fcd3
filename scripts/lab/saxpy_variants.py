"""Which SAXPY kernel shape beats torch's `y.add_(x, alpha=a)` (issue 31: saxpy_vector read 0.98x
of it at 2^28)? Times, in one process and as kbench times a kernel (y restored from a pristine
copy, kbench's read flush of twice the L2 from kernels/timer.cu, events around one launch, the
median of the samples), kernels/saxpy.cu's saxpy_vector itself beside variants of it:
  vecV-hint-bB:  V float4 of x and of y a thread, loads/stores with `hint` (cs: __ldcs/__stcs as
                 saxpy_vector; plain; lu: __ldlu loads and __stcs stores), block B;
  stride-V-kK:   a grid of K blocks a multiprocessor looping over the vectors, V a trip;
and torch's add_ and cuBLAS's saxpy (cupy.cublas.axpy), each checked against the host.
    python3 scripts/lab/saxpy_variants.py [samples]"""
import os
import statistics
import sys

import cupy as cp
import cupy.cublas
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "../../kernels")

LOAD = {"cs": "__ldcs", "plain": "", "lu": "__ldlu"}
STORE = {"cs": "__stcs", "plain": "", "lu": "__stcs"}


def variant_source(name, vectors, hint):
    load, store = LOAD[hint], STORE[hint]
    ld = (lambda p: f"{load}({p})") if load else (lambda p: f"*({p})")
    st = (lambda p, v: f"{store}({p}, {v})") if store else (lambda p, v: f"*({p}) = {v}")
    return f"""
extern "C" __global__ void __launch_bounds__(1024)
{name}(const float* __restrict__ x, float* __restrict__ y, float a, unsigned long long n) {{
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const unsigned long long vectors = n / 4;
    const unsigned long long base = (unsigned long long)blockIdx.x * {vectors} * blockDim.x + threadIdx.x;
    float4 xv[{vectors}], yv[{vectors}];
#pragma unroll
    for (int k = 0; k < {vectors}; ++k) {{
        const unsigned long long v = base + (unsigned long long)k * blockDim.x;
        if (v < vectors) {{ xv[k] = {ld("x4 + v")}; yv[k] = {ld("y4 + v")}; }}
    }}
#pragma unroll
    for (int k = 0; k < {vectors}; ++k) {{
        const unsigned long long v = base + (unsigned long long)k * blockDim.x;
        if (v < vectors) {{
            float4 r = make_float4(a * xv[k].x + yv[k].x, a * xv[k].y + yv[k].y,
                                   a * xv[k].z + yv[k].z, a * xv[k].w + yv[k].w);
            {st("y4 + v", "r")};
        }}
    }}
    if (blockIdx.x == gridDim.x - 1) {{
        const unsigned long long i = vectors * 4 + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }}
}}
"""


def stride_source(name, vectors):
    return f"""
extern "C" __global__ void __launch_bounds__(1024)
{name}(const float* __restrict__ x, float* __restrict__ y, float a, unsigned long long n) {{
    const float4* x4 = reinterpret_cast<const float4*>(x);
    float4* y4 = reinterpret_cast<float4*>(y);
    const unsigned long long vectors = n / 4;
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x * {vectors};
    for (unsigned long long base = (unsigned long long)blockIdx.x * {vectors} * blockDim.x + threadIdx.x;
         base < vectors; base += step) {{
        float4 xv[{vectors}], yv[{vectors}];
#pragma unroll
        for (int k = 0; k < {vectors}; ++k) {{
            const unsigned long long v = base + (unsigned long long)k * blockDim.x;
            if (v < vectors) {{ xv[k] = __ldcs(x4 + v); yv[k] = __ldcs(y4 + v); }}
        }}
#pragma unroll
        for (int k = 0; k < {vectors}; ++k) {{
            const unsigned long long v = base + (unsigned long long)k * blockDim.x;
            if (v < vectors) {{
                float4 r = make_float4(a * xv[k].x + yv[k].x, a * xv[k].y + yv[k].y,
                                       a * xv[k].z + yv[k].z, a * xv[k].w + yv[k].w);
                __stcs(y4 + v, r);
            }}
        }}
    }}
    if (blockIdx.x == 0) {{
        const unsigned long long i = vectors * 4 + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];
    }}
}}
"""


def main():
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms, l2 = props["multiProcessorCount"], props["l2CacheSize"]
    with open(os.path.join(KERNELS, "timer.cu")) as f:
        flush_kernel = cp.RawModule(code=f.read()).get_function("kbench_flush_l2")
    with open(os.path.join(KERNELS, "saxpy.cu")) as f:
        kb = cp.RawModule(code=f.read(), options=(f"-I{os.path.abspath(KERNELS)}", "-std=c++17"))
    flush = cp.zeros(2 * l2 // 4, dtype=cp.int32)
    sink = cp.zeros(1, dtype=cp.int32)
    n16 = cp.uint64(flush.nbytes // 16)

    kernels = {}  # label -> (function, block, vectors a thread, grid or None)
    kernels["saxpy_vector-b256 (kbench)"] = (kb.get_function("saxpy_vector"), 256, 2, None)
    kernels["saxpy_vector-b512 (kbench)"] = (kb.get_function("saxpy_vector"), 512, 2, None)
    src, names = "", []
    for vectors in (1, 2, 4):
        for hint in ("cs", "plain", "lu"):
            name = f"vec{vectors}_{hint}"
            src += variant_source(name, vectors, hint)
            names.append((name, vectors, hint))
    for vectors in (1, 2, 4):
        src += stride_source(f"stride{vectors}", vectors)
    mod = cp.RawModule(code=src, options=("-std=c++17",))
    for name, vectors, hint in names:
        for block in (256, 512) if hint == "cs" else (256,):
            kernels[f"vec{vectors}-{hint}-b{block}"] = (mod.get_function(name), block, vectors, None)
    for vectors in (1, 2, 4):
        for per_sm in (4, 8, 16):
            kernels[f"stride{vectors}-k{per_sm}-b512"] = (mod.get_function(f"stride{vectors}"), 512, vectors, sms * per_sm)

    print(f"device: {props['name'].decode()}, {sms} SMs, L2 {l2 >> 20} MiB; median of {samples}")
    for n in (2**20 + 3, 2**24, 2**28):
        x = cp.random.rand(n, dtype=cp.float32)
        y0 = cp.random.rand(n, dtype=cp.float32)
        y = y0.copy()
        a = 2.0
        want = 2.0 * cp.asnumpy(x).astype(np.float64) + cp.asnumpy(y0)
        xt, yt = torch.as_tensor(x, device="cuda"), torch.as_tensor(y, device="cuda")
        calls = {}
        for label, (fn, block, vectors, grid) in kernels.items():
            g = grid or max(1, -(-(n // 4) // (vectors * block)))
            calls[label] = (lambda fn=fn, g=g, block=block: fn((g,), (block,), (x, y, cp.float32(a), cp.uint64(n))))
        alpha = cp.asarray(a, dtype=cp.float32)
        calls["torch y.add_(x, alpha=a)"] = lambda: yt.add_(xt, alpha=a)
        calls["cuBLAS saxpy (cupy.cublas.axpy)"] = lambda: cupy.cublas.axpy(alpha, x, y)
        results = []
        for label, call in calls.items():
            times = []
            for s in range(samples + 3):
                cp.copyto(y, y0)
                flush_kernel((sms * 8,), (512,), (flush, n16, sink))
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record()
                call()
                e1.record()
                e1.synchronize()
                if s >= 3:
                    times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
            err = float(np.max(np.abs(cp.asnumpy(y) - want) / (1 + np.abs(want))))
            median_us = statistics.median(times)
            results.append((median_us, label, err, min(times)))
        torch_us = next(m for m, label, _, _ in results if label.startswith("torch"))
        print(f"\nn = {n}: bytes moved {12 * n / 1e9:.3f} GB")
        for median_us, label, err, fastest in sorted(results):
            flag = "" if err < 1e-6 else f"  WRONG (max rel err {err:.2e})"
            print(f"  {label:34s} {median_us:10.2f} us (min {fastest:9.2f})  {12 * n / median_us / 1e3:7.1f} GB/s"
                  f"  torch/this {torch_us / median_us:.3f}{flag}", flush=True)
        del x, y, y0, xt, yt


if __name__ == "__main__":
    main()
