// symgs.cu: one symmetric Gauss-Seidel application (a forward sweep, then a backward sweep) on a
// CSR matrix for kbench (seed 002), compiled at run time by NVRTC.
//
// The sweep, as HPCG's ComputeSYMGS_ref: forward for i = 0..n-1, then backward for i = n-1..0,
//   x_i = (r_i - sum_{j != i} a_ij x_j) / a_ii
// with the newest x_j. Rows a sweep visits before row i (j < i forward, j > i backward) give new
// values; the others give the values from before the sweep. The kernels that update rows out of
// order keep those two apart: the forward sweep reads the old x and writes y, the backward sweep
// reads y and writes x, so x ends as the sequential sweep's result up to rounding.
//
// Matrices: row_ptr (n + 1 ints), col (ascending in each row), val; diag holds a_ii (nonzero).
// Every index is 32-bit (kbench refuses matrices with 2^31 or more rows or nonzeros, and sliced
// ELL storage of 2^31 or more entries).
//
// Launch contracts (T = float or double, by the entry's suffix):
//
//   symgs_lock_<t>(row_ptr, col, val, diag, r, x_old, x_new, locks, thread_done, not_done,
//                  n, chunk_begin, chunk_end, epoch, backward)
//       The seed's scheme: thread t of the grid owns LOCK_LINES consecutive lines of the sweep
//       order from chunk_begin (a multiple of LOCK_LINES); line l is row l forward, row n-1-l
//       backward. A row whose earlier rows are not all locked (locks[j] == epoch) is skipped
//       and *not_done set; the host relaunches the chunk until a pass leaves *not_done at 0.
//       grid = ceil((chunk_end - chunk_begin) / (LOCK_LINES * B)). locks: n, thread_done:
//       ceil(n / LOCK_LINES) unsigned ints, holding earlier epochs (never this one) at start.
//   symgs_levels_<t>(row_ptr, col, val, inv_diag, r, x_old, x_new, order, n, backward)
//       Level-scheduled and free of barriers; inv_diag holds 1 / a_ii (so that a row ends
//       in a product, not a division). `order` lists the rows by level (a row's earlier
//       neighbours all lie in lower levels, so before it in `order`); warp w of the grid takes
//       positions w, w + W, ... in turn and waits until each earlier neighbour's value is no
//       longer the pending NaN, x_new having been filled with it (symgs_pending) before the
//       launch. The smallest unfinished position never waits on an unfinished one, so the sweep
//       cannot deadlock provided every warp of the grid is resident at once: B = LEVELS_BLOCK,
//       and no more blocks than fit the SMs together (at most LEVELS_BLOCKS_PER_SM an SM, which
//       the launch bounds make fit; the host asks the driver).
//   symgs_levels_wide_<t>(the same arguments, but diag holding a_ii itself in inv_diag's place)
//       The same sweep with a half-warp a row (two rows a warp, two entries a lane a step),
//       for levels at least as wide as the resident warps, where rows in flight, not the chain
//       of levels, set the time (the host chooses: symgs.rs's level_sweep_shape). Same launch
//       contract, on sm_70 or later: the two halves of a warp can wait on each other's rows.
//   symgs_pending_<t>(v, n)
//       v[0..n) = the pending NaN (all bits set). grid = ceil(n / B).
//   symgs_colours_<t>(slice_ptr, slice_width, ell_col, ell_val, diag, r, x, first_slice,
//                     first_row, rows)
//       One colour of a multicolour sweep, in place: rows first_row .. first_row + rows - 1
//       (a colour's rows are contiguous and no two are neighbours, so none reads another's
//       value), stored as sliced ELL: slice s (of SLICE rows, the colour's slices numbered from
//       first_slice) holds slice_width[s] entries a row, entry k of its row `lane` at
//       slice_ptr[s] + k * SLICE + lane, the diagonal left out and padding pointing at the row
//       itself with value 0. Thread = row; grid = ceil(rows / B), B a multiple of SLICE.
//   symgs_cusparse_<t>(src, dst, n)
//       dst = src, for cuSPARSE's sweep (its right-hand side starts as r). grid = ceil(n / B).

#include "common.cuh"

#define LOCK_LINES 8
#define LEVELS_BLOCK 256
#define LEVELS_BLOCKS_PER_SM 8
#define SLICE 32

// Acquire and release at GPU scope: a flag read with ld_acquire that shows a row done makes
// that row's value (stored before its flag, with st_release) visible to the loads after it.
__device__ __forceinline__ unsigned int ld_acquire(const unsigned int* p) {
    unsigned int v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_release(unsigned int* p, unsigned int v) {
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <typename T>
__device__ void lock_sweep(const int* __restrict__ row_ptr, const int* __restrict__ col,
                           const T* __restrict__ val, const T* __restrict__ diag,
                           const T* __restrict__ r, const T* __restrict__ x_old, T* x_new,
                           unsigned int* locks, unsigned int* thread_done, int* not_done, int n,
                           int chunk_begin, int chunk_end, unsigned int epoch, int backward) {
    const long long first = chunk_begin + (long long)grid_thread() * LOCK_LINES;
    if (first >= chunk_end) return;
    const long long slot = first / LOCK_LINES;
    if (thread_done[slot] == epoch) return;
    bool all_done = true;
    const long long last = min(first + LOCK_LINES, (long long)chunk_end);
    for (long long line = first; line < last; ++line) {
        const int i = backward ? n - 1 - (int)line : (int)line;
        if (ld_acquire(&locks[i]) == epoch) continue;
        T sum = T(0);
        bool ready = true;
        for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) {
            const int j = col[k];
            if (j == i) continue;
            const bool updated_first = backward ? j > i : j < i;
            T v;
            if (updated_first) {
                if (ld_acquire(&locks[j]) != epoch) {
                    ready = false;
                    break;
                }
                v = __ldcg(&x_new[j]);
            } else {
                v = x_old[j];
            }
            sum += val[k] * v;
        }
        if (!ready) {
            all_done = false;
            *(volatile int*)not_done = 1;
            continue;
        }
        x_new[i] = (r[i] - sum) / diag[i];
        st_release(&locks[i], epoch);
    }
    if (all_done) thread_done[slot] = epoch;
}

// The value a row holds until the sweep has computed it: a NaN no arithmetic produces (CUDA's
// NaNs are 0x7FFFFFFF and 0x7FFFFFFFFFFFFFFF), so one load says both whether a row is done
// and its value, and a row is published by one store, without a fence.
__device__ __forceinline__ float ld_value(const float* p) {
    unsigned int bits;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(bits) : "l"(p) : "memory");
    return __uint_as_float(bits);
}
__device__ __forceinline__ double ld_value(const double* p) {
    unsigned long long bits;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(bits) : "l"(p) : "memory");
    return __longlong_as_double((long long)bits);
}
__device__ __forceinline__ bool is_pending(float v) { return __float_as_uint(v) == 0xFFFFFFFFu; }
__device__ __forceinline__ bool is_pending(double v) {
    return (unsigned long long)__double_as_longlong(v) == 0xFFFFFFFFFFFFFFFFull;
}
__device__ __forceinline__ void st_value(float* p, float v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(__float_as_uint(v)) : "memory");
}
__device__ __forceinline__ void st_value(double* p, double v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p),
                 "l"((unsigned long long)__double_as_longlong(v))
                 : "memory");
}

// Waiting lanes back off between polls: polling flat out, thousands of lanes hammer the few lines
// being waited on and slow the rows that would end the wait (a sweep of HPCG 104^3 took 30x
// longer with every resident warp polling). symgs_levels on HPCG 104^3 in the natural order
// (float64, H200, 2026-11-28, A B A B in one call): 16 ns 1.361 and 1.360 ms, 32 ns 1.366 and
// 1.366 ms. symgs_levels_wide in colour order read 568-572 us with either 32 or 64 ns (H100).
#define POLL_SLEEP_NS 16

// Waits until the row behind p has its value.
template <typename T>
__device__ __forceinline__ T wait_for_value(const T* p, T v) {
    while (is_pending(v)) {
        __nanosleep(POLL_SLEEP_NS);
        v = ld_value(p);
    }
    return v;
}

// Entry k of row i: its coefficient, and either its first poll (a row the sweep updates
// first) or its value from before the sweep. A step's loads (32 entries of a row) are all issued
// before any lane waits, and r and the diagonal (or its reciprocal) at the row's start: a load
// placed after a wait cannot pass the wait's volatile load, and put DRAM round trips on every
// level's critical path (HPCG 104^3 has 722 levels a sweep; in float64 the sweep pair took
// 2.43 ms with them there, 2.03 ms without). Rows longer than a step load their next step
// after this one's waits.
template <typename T>
struct Entry {
    T a, v;
    int j;
    bool waits;
};

template <typename T>
__device__ __forceinline__ Entry<T> load_entry(const int* __restrict__ col,
                                               const T* __restrict__ val,
                                               const T* __restrict__ x_old, const T* x_new, int i,
                                               int k, int end, int backward) {
    Entry<T> e;
    e.j = k < end ? __ldg(&col[k]) : i;
    e.waits = e.j != i && (backward ? e.j > i : e.j < i);
    e.a = e.j != i ? __ldg(&val[k]) : T(0);
    e.v = e.waits ? ld_value(&x_new[e.j]) : e.j != i ? __ldg(&x_old[e.j]) : T(0);
    return e;
}

// x_i = (r_i - sum) / a_ii as r_i / a_ii - sum / a_ii, the division done while the row's loads
// are in flight, so that only the sum and one FMA follow them (a float64 division is a dozen
// dependent operations). The reference divides. The error is a few units in the last place of
// r_i / a_ii, not of x_i: where r_i and the sum nearly cancel, x_i's relative error grows, while
// its absolute error stays far inside the sweep's tolerance (absolute, rel x the largest |x|)
// unless |r_i / a_ii| exceeds |x|'s largest by 10^5 (float64) or 10^3 (float32). Finishing with
// (r_i - sum) * (1 / a_ii) bounds it by x_i's units, as levels_sweep does.
// The wide kernel uses it: HPCG 104^3 in colour order, float64, 550 -> 481 us a sweep pair (H200).
// In levels_sweep the same change made the natural order 49% slower (2.05 -> 3.06 ms, when its
// lanes still waited each in its own loop), which is not understood; levels_sweep is given
// 1 / a_ii instead (made on the host with the schedule).
// The reverse does not hold either: the wide kernel given 1 / a_ii, with or without this peeled
// step, took 652-659 us against this form's 570-573 (H100, 2026-11-28), also not understood.
template <typename T>
struct RowEnd {
    T inv_diag, r_scaled;
    __device__ __forceinline__ T finish(T sum) const { return fma(-sum, inv_diag, r_scaled); }
};

// An empty volatile asm that claims to change v: volatile asms keep their order, so NVVM computes
// v before the waits' volatile loads (ld_value) that follow instead of sinking it after them (the
// PTX shows the rcp there; ptxas does not move it across the wait loop's branches).
__device__ __forceinline__ void computed_here(float& v) { asm volatile("" : "+f"(v)); }
__device__ __forceinline__ void computed_here(double& v) { asm volatile("" : "+d"(v)); }

template <typename T>
__device__ __forceinline__ RowEnd<T> row_end_of(T r_i, T diag_i) {
    T inv_diag = T(1) / diag_i;
    T r_scaled = r_i * inv_diag;
    computed_here(inv_diag);
    computed_here(r_scaled);
    return RowEnd<T>{inv_diag, r_scaled};
}

// The entry's term a_ij x_j, waiting for x_j where the sweep updates row j first.
template <typename T>
__device__ __forceinline__ T term(const Entry<T>& e, const T* x_new) {
    return e.a * (e.waits ? wait_for_value(&x_new[e.j], e.v) : e.v);
}

// A warp a row: lane l takes entries begin + l, + 32, ... The terms whose values are at hand
// at the first load are summed across the warp at once; the warp then polls for the others as
// one, a ballot a round, and adds each round's arrivals with one more reduction. Lanes that
// wait each in its own loop (wait_for_value, as levels_sweep_wide's do) diverge, and the
// scheduler then runs the diverged loops one after another (a reading, not profiled). HPCG
// 104^3 in the natural order, float64, took 1.949 ms that way and 1.366 ms this way (H200,
// 2026-11-28, A B A B in one call). Adding a lone arrival by one shuffle from its lane, instead
// of a reduction, made no difference.
template <typename T>
__device__ void levels_sweep(const int* __restrict__ row_ptr, const int* __restrict__ col,
                             const T* __restrict__ val, const T* __restrict__ inv_diag,
                             const T* __restrict__ r, const T* __restrict__ x_old, T* x_new,
                             const int* __restrict__ order, int n, int backward) {
    const unsigned int lane = threadIdx.x & 31u;
    const long long warps = grid_threads() / 32;
    for (long long p = grid_thread() / 32; p < n; p += warps) {
        const int i = order[p];
        const int end = row_ptr[i + 1];
        const T r_i = r[i];
        const T inv_diag_i = inv_diag[i];
        T sum = T(0);
        for (int k = row_ptr[i] + (int)lane; k - (int)lane < end; k += 32) {
            const Entry<T> e = load_entry(col, val, x_old, x_new, i, k, end, backward);
            bool pending = e.waits && is_pending(e.v);
            sum += warp_sum(pending ? T(0) : e.a * e.v);
            unsigned int awaited = __ballot_sync(0xFFFFFFFFu, pending);
            while (awaited != 0u) {
                __nanosleep(POLL_SLEEP_NS);
                T arrived = T(0);
                if (pending) {
                    const T v = ld_value(&x_new[e.j]);
                    pending = is_pending(v);
                    if (!pending) arrived = e.a * v;
                }
                const unsigned int still = __ballot_sync(0xFFFFFFFFu, pending);
                if (still != awaited) sum += warp_sum(arrived);
                awaited = still;
            }
        }
        if (lane == 0) st_value(&x_new[i], (r_i - sum) * inv_diag_i);
    }
}

// A half-warp a row: lane l of the half takes entries begin + l and begin + l + 16, then + 32,
// so that a row of up to 32 entries (HPCG's 27) is one step with every load in flight at once.
// The two halves of a warp run their rows apart (each sums with its own shuffle mask). Where a
// level ends between them, the second half's row may wait on the first half's: that needs the
// independent thread scheduling of sm_70 and later (kbench builds for sm_80 and sm_90), under
// which a spinning half cannot starve the other. A waiting half also slows the other, which is
// why this layout is for wide levels only, where rows rarely wait.
// Its lanes wait each in its own loop: polling as one half, as levels_sweep's warp does, made
// HPCG 104^3 in colour order slower (float64: 475 -> 582 us; greedy colouring 363 -> 410 us;
// H200, 2026-11-28) and spilled 28 bytes in float64.
template <typename T>
__device__ void levels_sweep_wide(const int* __restrict__ row_ptr, const int* __restrict__ col,
                                  const T* __restrict__ val, const T* __restrict__ diag,
                                  const T* __restrict__ r, const T* __restrict__ x_old, T* x_new,
                                  const int* __restrict__ order, int n, int backward) {
    const unsigned int lane = threadIdx.x & 15u;
    const unsigned int half_mask = 0xFFFFu << (threadIdx.x & 16u);
    const long long halves = grid_threads() / 16;
    for (long long p = grid_thread() / 16; p < n; p += halves) {
        const int i = order[p];
        const int end = row_ptr[i + 1];
        const T r_i = r[i];
        const T diag_i = diag[i];
        // The first step (all of a row of up to 32 entries): its loads, the division while they
        // are in flight, then the waits.
        int k = row_ptr[i] + (int)lane;
        const Entry<T> first0 = load_entry(col, val, x_old, x_new, i, k, end, backward);
        const Entry<T> first1 = load_entry(col, val, x_old, x_new, i, k + 16, end, backward);
        const RowEnd<T> row_end = row_end_of(r_i, diag_i);
        T sum = term(first0, x_new) + term(first1, x_new);
        for (k += 32; k < end; k += 32) {
            const Entry<T> e0 = load_entry(col, val, x_old, x_new, i, k, end, backward);
            const Entry<T> e1 = load_entry(col, val, x_old, x_new, i, k + 16, end, backward);
            sum += term(e0, x_new) + term(e1, x_new);
        }
        for (int off = 8; off > 0; off >>= 1) sum += __shfl_xor_sync(half_mask, sum, off);
        if (lane == 0) st_value(&x_new[i], row_end.finish(sum));
    }
}

template <typename T>
__device__ void colours_sweep(const int* __restrict__ slice_ptr,
                              const int* __restrict__ slice_width,
                              const int* __restrict__ ell_col, const T* __restrict__ ell_val,
                              const T* __restrict__ diag, const T* __restrict__ r, T* x,
                              int first_slice, int first_row, int rows) {
    const int local = (int)grid_thread();
    if (local >= rows) return;
    const int s = first_slice + local / SLICE;
    const int lane = local % SLICE;
    const int row = first_row + local;
    const long long base = (long long)slice_ptr[s] + lane;
    const int width = slice_width[s];
    // Two accumulators: two independent chains of loads and fused multiply-adds in flight.
    T sum0 = T(0), sum1 = T(0);
    int k = 0;
    for (; k + 1 < width; k += 2) {
        const long long e0 = base + (long long)k * SLICE;
        const long long e1 = e0 + SLICE;
        sum0 += __ldcs(&ell_val[e0]) * __ldg(&x[__ldcs(&ell_col[e0])]);
        sum1 += __ldcs(&ell_val[e1]) * __ldg(&x[__ldcs(&ell_col[e1])]);
    }
    if (k < width) {
        const long long e = base + (long long)k * SLICE;
        sum0 += __ldcs(&ell_val[e]) * __ldg(&x[__ldcs(&ell_col[e])]);
    }
    x[row] = (r[row] - (sum0 + sum1)) / diag[row];
}

__device__ __forceinline__ float pending_f32() { return __uint_as_float(0xFFFFFFFFu); }
__device__ __forceinline__ double pending_f64() {
    return __longlong_as_double((long long)0xFFFFFFFFFFFFFFFFull);
}

#define KBENCH_SYMGS_KERNELS(SUFFIX, T)                                                            \
    extern "C" __global__ void __launch_bounds__(1024) symgs_lock_##SUFFIX(                       \
        const int* row_ptr, const int* col, const T* val, const T* diag, const T* r,               \
        const T* x_old, T* x_new, unsigned int* locks, unsigned int* thread_done, int* not_done,   \
        int n, int chunk_begin, int chunk_end, unsigned int epoch, int backward) {                 \
        lock_sweep<T>(row_ptr, col, val, diag, r, x_old, x_new, locks, thread_done, not_done, n,   \
                      chunk_begin, chunk_end, epoch, backward);                                    \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(LEVELS_BLOCK, LEVELS_BLOCKS_PER_SM)               \
        symgs_levels_##SUFFIX(const int* row_ptr, const int* col, const T* val,                    \
                              const T* inv_diag, const T* r, const T* x_old, T* x_new,             \
                              const int* order, int n, int backward) {                             \
        levels_sweep<T>(row_ptr, col, val, inv_diag, r, x_old, x_new, order, n, backward);         \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(LEVELS_BLOCK, LEVELS_BLOCKS_PER_SM)               \
        symgs_levels_wide_##SUFFIX(const int* row_ptr, const int* col, const T* val,               \
                                   const T* diag, const T* r, const T* x_old, T* x_new,            \
                                   const int* order, int n, int backward) {                        \
        levels_sweep_wide<T>(row_ptr, col, val, diag, r, x_old, x_new, order, n, backward);        \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(1024) symgs_pending_##SUFFIX(T* v, int n) {      \
        const long long i = grid_thread();                                                         \
        if (i < n) v[i] = pending_##SUFFIX();                                                      \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(1024) symgs_colours_##SUFFIX(                    \
        const int* slice_ptr, const int* slice_width, const int* ell_col, const T* ell_val,  \
        const T* diag, const T* r, T* x, int first_slice, int first_row, int rows) {               \
        colours_sweep<T>(slice_ptr, slice_width, ell_col, ell_val, diag, r, x, first_slice,        \
                         first_row, rows);                                                         \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(1024) symgs_cusparse_##SUFFIX(const T* src, T* dst,  \
                                                                           int n) {                \
        const long long i = grid_thread();                                                         \
        if (i < n) dst[i] = src[i];                                                                \
    }

KBENCH_SYMGS_KERNELS(f32, float)
KBENCH_SYMGS_KERNELS(f64, double)
