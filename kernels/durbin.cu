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
//   durbin_schur_<t>_j<J>(const T* r, T* out, n, unsigned long long* step_ns)         pb42 only
//       grid = 1, no dynamic shared: one block runs all n steps with the whole state in registers,
//       J slots a thread, so B * J >= n + 2 (J from the list at the end of this file, each with its
//       largest block in __launch_bounds__; src/algos/durbin.rs keeps the same table). B is a
//       multiple of 32. step_ns is null, or n + 1 elements: %globaltimer at the start of each step
//       and at the end.
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
// 4. Schur: no dot products. Levinson's y is the polynomial A_k(z) = 1 + sum_i y[i] z^(i+1), and
// with its reverse B_k(z) = z^k A_k(1/z) one step is
//     A_{k+1} = A_k + alpha_k z B_k,        B_{k+1} = z B_k + alpha_k A_k,
// coefficient by coefficient a'_s = a_s + alpha b_{s-1}, b'_s = b_{s-1} + alpha a_s. The dot
// product r[k] + dot_k is f_k(k+1), where f_k(j) = sum_l a_l c_{j-l} and g_k(j) = sum_l b_l c_{j-l}
// (c_0 = 1, c_j = r[j-1]) follow the same two lines (Schur's algorithm):
//     f_{k+1}(j) = f_k(j) + alpha g_k(j-1),  g_{k+1}(j) = g_k(j-1) + alpha f_k(j).
// Step k needs a_s, b_s for s <= k+1 and f_k(j), g_k(j-1) for j >= k+2, so one row of n + 2 slots
// (x, w) holds both: slot s is (a_s, b_s) for s <= k+1 and (f(s-1), g(s-1)) above, and every slot
// takes x' = x + alpha w_{s-1}, w' = w_{s-1} + alpha x. Where the halves meet, slot k+1's x must
// be a_{k+1} = 0 before step k; it holds f_k(k), which Levinson's alpha makes zero up to rounding
// (for k >= 1; slot 1 starts at 0). That holds for pb42 alone: pb32's alpha is not Levinson's, so
// the kernel computes only pb42 (the host's `supports`). Initially slot 0 is (1, 1), slot 1
// (0, 1), and slot s >= 2 (r[s-2], r[s-2]).
//
// Each thread holds J consecutive slots in registers; the row starts at -pad (slots below 0 stay
// zero, so they need no test), so every thread holds exactly J and the slot before a thread's
// first is its left neighbour's last: a shuffle in the warp, and for lane 0 the previous warp's
// last w, published before the step's barrier. alpha_{k+1} needs f_{k+1}(k+2), slot k+3's x after
// step k, from its owner through shared memory; the barrier is the step's only one. A step is
// 2 B J fused multiply-adds (at least 2 (n + 2)) spread over the block, no reduction, and two
// shared-memory values.
// beta comes from the scalar recurrence, as in the other kernels.

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    return ns;
}

// 1 / b without the IEEE division's slow-path call, whose calling convention costs registers
// around it: the hardware's approximation and Newton steps (two for double, one for float), within
// an ulp or two of the division for the normal, positive beta of a stable recursion.
__device__ __forceinline__ double reciprocal(double b) {
    double r;
    asm("rcp.approx.ftz.f64 %0, %1;" : "=d"(r) : "d"(b));
    r = fma(r, fma(-b, r, 1.0), r);
    return fma(r, fma(-b, r, 1.0), r);
}

__device__ __forceinline__ float reciprocal(float b) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
    return fmaf(r, fmaf(-b, r, 1.0f), r);
}

// *dst = a[i], i known only at run time: a switch, so the one thread concerned jumps to its
// case (a loop of comparisons would put a select per register in its step). The cases only read
// the registers: a case that wrote one made the compiler copy every register at the join.
#define KBENCH_CASES_8(M, B) M(B + 0) M(B + 1) M(B + 2) M(B + 3) M(B + 4) M(B + 5) M(B + 6) M(B + 7)
#define KBENCH_STORE_CASE(q)          \
    case q:                           \
        *dst = a[(q) < N ? (q) : 0]; \
        break;

template <typename T, int N>
__device__ __forceinline__ void store_at(const T (&a)[N], int i, T* dst) {
    static_assert(N <= 64, "store_at has 64 cases");
    switch (i) {
        KBENCH_CASES_8(KBENCH_STORE_CASE, 0)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 8)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 16)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 24)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 32)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 40)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 48)
        KBENCH_CASES_8(KBENCH_STORE_CASE, 56)
        default:
            break;
    }
}
#undef KBENCH_STORE_CASE
#undef KBENCH_CASES_8

template <typename T, int J>
__device__ __forceinline__ void schur(const T* __restrict__ r, T* __restrict__ out, unsigned int n,
                                      unsigned long long* __restrict__ step_ns) {
    constexpr int form = 0;  // pb42 (see above)
    __shared__ T f_next[2];      // f_{k+1}(k+2), by step parity (step 0 needs none)
    __shared__ T edge_w[2][32];  // each warp's last w, by step parity
    const unsigned int B = blockDim.x;
    const unsigned int t = threadIdx.x;
    const unsigned int lane = t & 31u;
    const unsigned int warp = t >> 5;
    const int pad = (int)(B * J) - (int)(n + 2);  // >= 0: the host's contract
    const int first = (int)(t * J) - pad;         // the slot of x[0], w[0]

    T x[J], w[J];
#pragma unroll
    for (int q = 0; q < J; ++q) {
        const int s = first + q;
        const T v = s < 0 ? T(0) : (s <= 1 ? T(1) : r[s - 2]);
        x[q] = s == 1 ? T(0) : v;  // a_1 = 0; f_0(0) is never read
        w[q] = v;
    }
    if (lane == 31u) {
        edge_w[0][warp] = w[J - 1];
    }
    T alpha = first_alpha(form, r[0]);
    T beta = T(1);
    T beta_next = next_beta(form, alpha, beta);
    T inv_beta_next = reciprocal(beta_next);
    __syncthreads();

    for (unsigned int k = 0; k < n; ++k) {
        if (step_ns != nullptr && t == 0) {
            step_ns[k] = global_ns();
        }
        const unsigned int now = k & 1u;
        const unsigned int next = now ^ 1u;
        if (k > 0) {
            const T f = f_next[now];
            beta = beta_next;
            alpha = -f * inv_beta_next;
            beta_next = next_beta(form, alpha, beta);
            inv_beta_next = reciprocal(beta_next);
        }
        T left = __shfl_up_sync(0xffffffffu, w[J - 1], 1);
        if (lane == 0) {
            left = warp == 0 ? T(0) : edge_w[now][warp - 1];
        }
        // From the top down, so w[q - 1] is still this step's input when slot q reads it.
#pragma unroll
        for (int q = J - 1; q >= 0; --q) {
            const T w_left = q > 0 ? w[q - 1] : left;
            const T xq = x[q];
            x[q] = xq + alpha * w_left;
            w[q] = w_left + alpha * xq;
        }
        // alpha_{k+1}'s numerator f_{k+1}(k+2) is slot k+3's x, register `at` of its thread.
        const int at = (int)k + 3 - first;
        if (at >= 0 && at < J) {
            store_at(x, at, &f_next[next]);
        }
        if (lane == 31u) {
            edge_w[next][warp] = w[J - 1];
        }
        __syncthreads();
    }
    if (step_ns != nullptr && t == 0) {
        step_ns[n] = global_ns();
    }

#pragma unroll
    for (int q = 0; q < J; ++q) {
        const int s = first + q;
        if (s >= 1 && s <= (int)n) {
            out[s - 1] = x[q];
        }
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

// durbin_schur's slots a thread, each with the largest block at which ptxas (sm_90) fits its
// 2 J values of T a thread, and the rest, in registers without spilling (64 Ki registers a block):
// the launch bounds give ptxas that budget.
#define KBENCH_DURBIN_SCHUR(SUFFIX, T, J, MAX_BLOCK)                                             \
    extern "C" __global__ void __launch_bounds__(MAX_BLOCK, 1)                                    \
    durbin_schur_##SUFFIX##_j##J(const T* __restrict__ r, T* __restrict__ out, unsigned int n,    \
                                 unsigned long long* __restrict__ step_ns) {                      \
        schur<T, J>(r, out, n, step_ns);                                                          \
    }

KBENCH_DURBIN_SCHUR(f32, float, 1, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 2, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 4, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 8, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 10, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 12, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 16, 1024)
KBENCH_DURBIN_SCHUR(f32, float, 20, 512)
KBENCH_DURBIN_SCHUR(f32, float, 24, 512)
KBENCH_DURBIN_SCHUR(f32, float, 32, 512)
KBENCH_DURBIN_SCHUR(f32, float, 40, 256)
KBENCH_DURBIN_SCHUR(f32, float, 48, 256)
KBENCH_DURBIN_SCHUR(f64, double, 1, 1024)
KBENCH_DURBIN_SCHUR(f64, double, 2, 1024)
KBENCH_DURBIN_SCHUR(f64, double, 4, 1024)
KBENCH_DURBIN_SCHUR(f64, double, 8, 1024)
KBENCH_DURBIN_SCHUR(f64, double, 10, 512)
KBENCH_DURBIN_SCHUR(f64, double, 12, 512)
KBENCH_DURBIN_SCHUR(f64, double, 16, 512)
KBENCH_DURBIN_SCHUR(f64, double, 20, 256)
KBENCH_DURBIN_SCHUR(f64, double, 24, 256)
KBENCH_DURBIN_SCHUR(f64, double, 32, 256)
KBENCH_DURBIN_SCHUR(f64, double, 40, 256)
