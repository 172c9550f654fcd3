// durbin.cu: the Durbin-Levinson recursion for kbench, compiled at run time by NVRTC.
// Every kernel exists as <name>_f32 (float) and <name>_f64 (double).
//
// The recursion (src/algos/durbin.rs has the CPU versions and the reference), for k = 0 .. n-1,
// where y^(k) has k + 1 elements and the output is y^(n-1):
//   k = 0: alpha_0 = -r[0] (form 0, PolyBench 4.2) or r[0] (form 1, PolyBench 3.2, the seed's); beta_0 = 1
//   k > 0: dot_k = sum_{i<k} r[k-1-i] * y^(k-1)[i]
//          form 0: beta_k = (1 - alpha_{k-1}^2) * beta_{k-1};            alpha_k = -(r[k] + dot_k) / beta_k
//          form 1: beta_k = beta_{k-1} - alpha_{k-1}^2 * beta_{k-1};     alpha_k = -(r[k] + dot_k) * beta_k
//          y^(k)[i] = y^(k-1)[i] + alpha_k * y^(k-1)[k-1-i]  (i < k);     y^(k)[k] = alpha_k
//
// Launch contracts (B = blockDim.x, a power of two in 32..1024; T = float or double; k, n unsigned int;
// form 0 or 1; every pointer a whole device allocation):
//
//   durbin_atomic_<t>(const T* r, const T* y_old, T* state, k)                      k >= 1
//       grid = ceil(k / B), dynamic shared = B * sizeof(T). The seed's first kernel: each block sums
//       its share of dot_k with a shared-memory tree and atomicAdds it into state[4*(k&1)].
//   durbin_atomic_update_<t>(const T* r, const T* y_old, T* y_new, T* state, k, form)   k >= 0
//       grid = ceil((k + 1) / B), no dynamic shared. The seed's second kernel: alpha_k and beta_k from
//       state, then y_new = y^(k) from y_old = y^(k-1). Block 0 stores alpha_k, beta_k in state slot
//       k&1 and zeroes the sum of slot (k+1)&1, which the next durbin_atomic adds into.
//     The host launches update(0), then atomic(k), update(k) for k = 1 .. n-1. state has 8 elements,
//     two slots of (sum, alpha, beta, unused) so that what one launch reads is never what it writes.
//     y_old and y_new are distinct buffers of >= n elements (ping-pong).
//
//   durbin_twopass_<t>(const T* r, const T* y_old, T* y_new, const T* parts_in, T* parts_out,
//                      T* state, k, form)                                            k >= 0
//   durbin_graph_<t>(same arguments)
//       grid = ceil((k + 1) / B), no dynamic shared. One launch per step, no atomics: every block sums
//       the ceil(k / B) partials of dot_k that launch k-1 wrote to parts_in (the same fixed order in
//       every block, so all blocks get the same alpha_k bit for bit), computes y^(k) into y_new, and
//       writes its partial of dot_{k+1} = sum_{i<=k} r[k-i] * y^(k)[i] to parts_out[blockIdx.x].
//       state has 4 elements, two slots of (alpha, beta); block 0 writes slot k&1, all read slot
//       (k-1)&1. parts_in and parts_out are distinct buffers of >= ceil(n / B) elements, swapped
//       every step. durbin_graph is the same code under its own name: the host captures its n
//       launches once into a CUDA graph and replays that.
//
//   durbin_persistent_<t>(const T* r, T* out, n, form, mode)
//       grid = 1: one block runs all n steps. mode 2: y and r in dynamic shared memory,
//       dynamic shared = 2 * n * sizeof(T); mode 1: y in shared memory and r read from global,
//       dynamic shared = n * sizeof(T); mode 0: y updated in place in `out`, dynamic shared = 0.
//       Above 48 KiB the host must raise the function's dynamic shared limit first.
//
// Sums accumulate in T. The output is written completely by every variant (n >= 1).

#include "common.cuh"

// Slot layout of the multi-launch variants' `state` buffer.
#define ATOMIC_SLOT 4
#define ATOMIC_SUM 0
#define ATOMIC_ALPHA 1
#define ATOMIC_BETA 2
#define STEP_SLOT 2
#define STEP_ALPHA 0
#define STEP_BETA 1

// alpha_0: the two PolyBench versions start with opposite signs.
template <typename T>
__device__ __forceinline__ T first_alpha(int form, T r0) {
    return form == 0 ? -r0 : r0;
}

// beta_k from alpha_{k-1} and beta_{k-1}, each form with its own PolyBench expression.
template <typename T>
__device__ __forceinline__ T next_beta(int form, T alpha, T beta) {
    return form == 0 ? (T(1) - alpha * alpha) * beta : beta - alpha * alpha * beta;
}

// alpha_k from r[k] + dot_k and beta_k.
template <typename T>
__device__ __forceinline__ T next_alpha(int form, T r_plus_dot, T beta) {
    return form == 0 ? -r_plus_dot / beta : -r_plus_dot * beta;
}

// ---------------------------------------------------------------------------------------------
// 1. The seed's two kernels per step, with its races fixed. The seed reset the sum and updated
// beta from every thread of every block at the start of the first kernel, so a block that started
// late could wipe out sums already added, and beta was updated once per thread instead of once per
// step. Here nothing a launch reads is written in the same launch: the sum and (alpha, beta) are
// double-buffered by step parity, and the second kernel zeroes the next step's sum.

template <typename T>
__device__ __forceinline__ void atomic_dot(const T* __restrict__ r, const T* __restrict__ y_old,
                                           T* __restrict__ state, unsigned int k) {
    T* partial = reinterpret_cast<T*>(dyn_smem);  // blockDim entries
    const unsigned int t = threadIdx.x;
    const unsigned int i = blockIdx.x * blockDim.x + t;
    partial[t] = (i < k) ? r[k - 1 - i] * y_old[i] : T(0);
    __syncthreads();
    // The seed's tree: sequential addressing, one barrier per level.
    for (unsigned int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride) {
            partial[t] += partial[t + stride];
        }
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(state + ATOMIC_SLOT * (k & 1u) + ATOMIC_SUM, partial[0]);
    }
}

template <typename T>
__device__ __forceinline__ void atomic_update(const T* __restrict__ r, const T* __restrict__ y_old,
                                              T* __restrict__ y_new, T* __restrict__ state,
                                              unsigned int k, int form) {
    T alpha, beta;
    if (k == 0) {
        alpha = first_alpha(form, r[0]);
        beta = T(1);
    } else {
        const T* prev = state + ATOMIC_SLOT * ((k - 1) & 1u);
        const T dot = state[ATOMIC_SLOT * (k & 1u) + ATOMIC_SUM];
        beta = next_beta(form, prev[ATOMIC_ALPHA], prev[ATOMIC_BETA]);
        alpha = next_alpha(form, r[k] + dot, beta);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        state[ATOMIC_SLOT * (k & 1u) + ATOMIC_ALPHA] = alpha;
        state[ATOMIC_SLOT * (k & 1u) + ATOMIC_BETA] = beta;
        state[ATOMIC_SLOT * ((k + 1) & 1u) + ATOMIC_SUM] = T(0);
    }
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < k) {
        y_new[i] = y_old[i] + alpha * y_old[k - 1 - i];
    } else if (i == k) {
        y_new[k] = alpha;
    }
}

// ---------------------------------------------------------------------------------------------
// 2. One launch per step, no atomics (also the body of the graph variant). The kernel boundary is
// the grid-wide barrier between steps; the dot product for the next step is fused into the update
// (each thread multiplies the element it just wrote), so one launch does what the seed's two did.

template <typename T>
__device__ __forceinline__ void twopass_step(const T* __restrict__ r, const T* __restrict__ y_old,
                                             T* __restrict__ y_new, const T* __restrict__ parts_in,
                                             T* __restrict__ parts_out, T* __restrict__ state,
                                             unsigned int k, int form) {
    const unsigned int B = blockDim.x;
    const unsigned int lane = threadIdx.x & 31u;
    T alpha, beta;
    if (k == 0) {
        alpha = first_alpha(form, r[0]);
        beta = T(1);
    } else {
        // Launch k-1 covered k elements with ceil(k / B) blocks. Every warp sums them itself,
        // lane-strided and then by butterfly, so no barrier is needed to share the result.
        const unsigned int parts = (k + B - 1) / B;
        T dot = T(0);
        for (unsigned int p = lane; p < parts; p += 32) {
            dot += parts_in[p];
        }
        dot = warp_sum(dot);
        const T* prev = state + STEP_SLOT * ((k - 1) & 1u);
        beta = next_beta(form, prev[STEP_ALPHA], prev[STEP_BETA]);
        alpha = next_alpha(form, r[k] + dot, beta);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        state[STEP_SLOT * (k & 1u) + STEP_ALPHA] = alpha;
        state[STEP_SLOT * (k & 1u) + STEP_BETA] = beta;
    }
    const unsigned int i = blockIdx.x * B + threadIdx.x;
    T term = T(0);
    if (i < k) {
        const T y = y_old[i] + alpha * y_old[k - 1 - i];
        y_new[i] = y;
        term = r[k - i] * y;
    } else if (i == k) {
        y_new[k] = alpha;
        term = r[0] * alpha;
    }
    const T partial = block_sum(term);
    if (threadIdx.x == 0) {
        parts_out[blockIdx.x] = partial;
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Persistent: one block runs every step, so the 2n launches (and their grid-wide barriers)
// become one barrier per step inside a block.
//
// y is updated in place: the thread that owns the pair (p, k-1-p) reads both elements and writes
// both, so no other thread reads what it overwrites within a step; the middle element of an odd k
// pairs with itself. The same pass multiplies each new element by its r for dot_{k+1}
// (r[k-p] for y[p], r[p+1] for y[k-1-p]). Per step: the pair loop, a warp butterfly, one barrier,
// then every thread sums the 32 warp partials itself (slots of absent warps hold zeros) with a
// fixed tree, the same in every thread; so the barrier that publishes the partials is the only
// one, and it also orders this step's y writes before the next step's reads. The tree reads the
// partials as 16-byte vectors and has 5 levels of adds, where a second butterfly would chain 5
// shuffles. The partials are double-buffered by step parity because a fast warp may write the
// next step's partials while a slow one still reads this step's.
// 1 / beta_{k+1} is computed as soon as alpha_k is known, off the critical path through the
// reduction, so form 0 multiplies where the CPU divides (a difference of about one rounding).

// The sum of the 32 values at p, in a fixed order.
template <typename T>
__device__ __forceinline__ T sum32(const T* p) {
    T quad[8];
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        quad[g] = (p[4 * g] + p[4 * g + 1]) + (p[4 * g + 2] + p[4 * g + 3]);
    }
    return ((quad[0] + quad[1]) + (quad[2] + quad[3])) + ((quad[4] + quad[5]) + (quad[6] + quad[7]));
}

template <typename T, bool Y_SHARED, bool R_SHARED>
__device__ __forceinline__ void persistent(const T* __restrict__ r_global, T* __restrict__ out,
                                           unsigned int n, int form, T (*warp_partials)[32]) {
    const unsigned int B = blockDim.x;
    const unsigned int t = threadIdx.x;
    const unsigned int lane = t & 31u;
    T* smem = reinterpret_cast<T*>(dyn_smem);
    T* y = Y_SHARED ? smem : out;
    const T* r = R_SHARED ? smem + n : r_global;
    if (R_SHARED) {
        for (unsigned int i = t; i < n; i += B) {
            smem[n + i] = r_global[i];
        }
        __syncthreads();
    }

    // The slots of absent warps stay zero. A loop, because a block of 32 threads has fewer
    // threads than the two buffers have slots.
    for (unsigned int i = t; i < 64; i += B) {
        warp_partials[i >> 5][i & 31u] = T(0);
    }
    T alpha = first_alpha(form, r[0]);
    T beta = T(1);
    if (t == 0) {
        y[0] = alpha;
    }
    T dot = r[0] * alpha;  // dot_1
    T beta_next = next_beta(form, alpha, beta);
    T inv_beta_next = T(1) / beta_next;
    __syncthreads();

    for (unsigned int k = 1; k < n; ++k) {
        beta = beta_next;
        alpha = form == 0 ? -(r[k] + dot) * inv_beta_next : -(r[k] + dot) * beta;
        beta_next = next_beta(form, alpha, beta);
        inv_beta_next = T(1) / beta_next;

        T part = T(0);
        const unsigned int pairs = k >> 1;
        unsigned int p = t;
        // Two pairs per iteration, all four loads issued before any store: the compiler cannot
        // reorder loads above stores to y by itself, and a thread's elements are all distinct.
        for (; p + B < pairs; p += 2 * B) {
            const unsigned int q = p + B;
            const unsigned int jp = k - 1 - p;
            const unsigned int jq = k - 1 - q;
            const T yp = y[p], yjp = y[jp], yq = y[q], yjq = y[jq];
            const T np = yp + alpha * yjp, njp = yjp + alpha * yp;
            const T nq = yq + alpha * yjq, njq = yjq + alpha * yq;
            y[p] = np;
            y[jp] = njp;
            y[q] = nq;
            y[jq] = njq;
            part += r[k - p] * np + r[p + 1] * njp;
            part += r[k - q] * nq + r[q + 1] * njq;
        }
        if (p < pairs) {
            const unsigned int jp = k - 1 - p;
            const T yp = y[p], yjp = y[jp];
            const T np = yp + alpha * yjp, njp = yjp + alpha * yp;
            y[p] = np;
            y[jp] = njp;
            part += r[k - p] * np + r[p + 1] * njp;
        }
        if ((k & 1u) && t == pairs % B) {  // the middle element, k-1-m == m
            const unsigned int m = pairs;
            const T ym = y[m] + alpha * y[m];
            y[m] = ym;
            part += r[k - m] * ym;
        }
        if (t == 0) {
            y[k] = alpha;
        }

        part = warp_sum(part);
        if (lane == 0) {
            warp_partials[k & 1u][t >> 5] = part;
        }
        __syncthreads();
        dot = sum32(warp_partials[k & 1u]) + r[0] * alpha;
    }

    if (Y_SHARED) {
        for (unsigned int i = t; i < n; i += B) {
            out[i] = y[i];
        }
    }
}

template <typename T>
__device__ __forceinline__ void persistent_dispatch(const T* __restrict__ r, T* __restrict__ out,
                                                    unsigned int n, int form, int mode) {
    // Declared here rather than in `persistent`, where each of the three instantiations would
    // get its own copy.
    __shared__ __align__(16) T warp_partials[2][32];
    if (mode == 2) {
        persistent<T, true, true>(r, out, n, form, warp_partials);
    } else if (mode == 1) {
        persistent<T, true, false>(r, out, n, form, warp_partials);
    } else {
        persistent<T, false, false>(r, out, n, form, warp_partials);
    }
}

// ---------------------------------------------------------------------------------------------
// extern "C" entry points: one set per element type.

#define KBENCH_DURBIN_KERNELS(SUFFIX, T)                                                          \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    durbin_atomic_##SUFFIX(const T* __restrict__ r, const T* __restrict__ y_old,                  \
                           T* __restrict__ state, unsigned int k) {                               \
        atomic_dot<T>(r, y_old, state, k);                                                        \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    durbin_atomic_update_##SUFFIX(const T* __restrict__ r, const T* __restrict__ y_old,           \
                                  T* __restrict__ y_new, T* __restrict__ state, unsigned int k,   \
                                  int form) {                                                     \
        atomic_update<T>(r, y_old, y_new, state, k, form);                                        \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    durbin_twopass_##SUFFIX(const T* __restrict__ r, const T* __restrict__ y_old,                 \
                            T* __restrict__ y_new, const T* __restrict__ parts_in,                \
                            T* __restrict__ parts_out, T* __restrict__ state, unsigned int k,     \
                            int form) {                                                           \
        twopass_step<T>(r, y_old, y_new, parts_in, parts_out, state, k, form);                    \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024)                                            \
    durbin_graph_##SUFFIX(const T* __restrict__ r, const T* __restrict__ y_old,                   \
                          T* __restrict__ y_new, const T* __restrict__ parts_in,                  \
                          T* __restrict__ parts_out, T* __restrict__ state, unsigned int k,       \
                          int form) {                                                             \
        twopass_step<T>(r, y_old, y_new, parts_in, parts_out, state, k, form);                    \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024, 1)                                         \
    durbin_persistent_##SUFFIX(const T* __restrict__ r, T* __restrict__ out, unsigned int n,      \
                               int form, int mode) {                                              \
        persistent_dispatch<T>(r, out, n, form, mode);                                            \
    }

KBENCH_DURBIN_KERNELS(f32, float)
KBENCH_DURBIN_KERNELS(f64, double)
