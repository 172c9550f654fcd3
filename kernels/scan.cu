// scan.cu: exclusive scan of int32 and find_repeats (seed 001), compiled at run time by NVRTC.
// Both algorithms (src/algos/scan.rs, src/algos/find_repeats.rs) build on the same block scans
// and the same single-pass look-back, so they share this file.
//
// Sums are taken modulo 2^32 (unsigned arithmetic, stored back as int), as the CPU reference does.
//
// Launch contracts (B = blockDim.x, a power of two in 32..1024; n = element count):
//
//   scan_blelloch(const int* in, int* out, int* block_sums, n)
//   scan_blelloch_padded(same)
//       grid = max(1, ceil(n / (2B))), dynamic shared = 2B ints (+ 2B/32 for the padded one).
//       The seed's work-efficient scan: each block scans 2B elements in shared memory (up-sweep,
//       clear, down-sweep) into out, exclusively, and writes its total to block_sums[blockIdx.x].
//       in may equal out (each block reads its segment before writing it).
//   scan_add_offsets(int* out, const int* offsets, n)
//       grid = max(1, ceil(n / (2B))): adds offsets[blockIdx.x] to out's 2B-element segment.
//     The host scans block_sums the same way, level by level, then adds each level's scanned
//     sums back down.
//
//   scan_lookback(const int* in, int* out, unsigned long long* tile_counter,
//                 unsigned long long* tile_status, n, unsigned long long first_tile,
//                 unsigned int epoch)
//       grid = max(1, ceil(n / (ITEMS * B))), dynamic shared = the tile, ITEMS * B ints, plus an
//       eighth for padding (above 48 KiB, from B = 512, the host raises the limit). Single pass
//       with decoupled look-back (Merrill & Garland 2016): each block takes the next tile from tile_counter
//       (tile = atomicAdd - first_tile, so tiles start in order and no block waits on one that
//       is not running), publishes its tile's total, learns the total of all earlier tiles from
//       their published status, and writes its outputs. tile_status holds grid words; a word
//       counts only if it carries this launch's epoch, so nothing needs clearing between
//       launches: the host passes first_tile = launches so far * grid and epoch = launches so
//       far (mod 2^30). `in` and `out` must be 16-byte aligned (whole allocations).
//
//   repeats_seed_flags(const int* a, int* flags, n)
//       grid = max(1, ceil(n / B)): flags[i] = 1 if i + 1 < n and a[i] == a[i+1], else 0.
//   repeats_seed_scatter(const int* flags, const int* positions, int* indices, int* count, n)
//       grid = max(1, ceil(n / B)): indices[positions[i]] = i where flags[i]; count[0] = the
//       number of flags (positions is the exclusive scan of flags).
//   repeats_fused(const int* a, int* indices, int* count, unsigned long long* tile_counter,
//                 unsigned long long* tile_status, n, unsigned long long first_tile,
//                 unsigned int epoch)
//       As scan_lookback, over the flags computed on the fly: one pass reads a, gathers each
//       tile's indices in shared memory, writes them as one contiguous run, and writes the count.
//       grid and dynamic shared as scan_lookback.

#include "common.cuh"

// Elements per thread in the single-pass kernels: eight 16-byte vectors. The host's ITEMS
// (src/algos/scan.rs) must match; the lab (scripts/lab/scan_lab.py) tries others.
#ifndef ITEMS
#define ITEMS 32
#endif
static_assert(ITEMS % 4 == 0 && ITEMS <= 64, "whole 16-byte vectors; repeats_fused's 64-bit flags");

// ---------------------------------------------------------------------------------------------
// The seed's work-efficient scan (GPU Gems 3, ch. 39), with and without its bank-conflict padding.

#define LOG_BANKS 5
#define PAD(i) ((i) >> LOG_BANKS)

template <bool PADDED>
__device__ __forceinline__ unsigned int slot(unsigned int i) {
    return PADDED ? i + PAD(i) : i;
}

template <bool PADDED>
__device__ __forceinline__ void blelloch(const int* __restrict__ in, int* out, int* __restrict__ block_sums,
                                         unsigned long long n) {
    unsigned int* temp = reinterpret_cast<unsigned int*>(dyn_smem);
    const unsigned int t = threadIdx.x;
    const unsigned int m = 2 * blockDim.x;  // elements per block
    const unsigned long long base = (unsigned long long)blockIdx.x * m;
    const unsigned int ai = t, bi = t + blockDim.x;
    temp[slot<PADDED>(ai)] = base + ai < n ? (unsigned int)in[base + ai] : 0u;
    temp[slot<PADDED>(bi)] = base + bi < n ? (unsigned int)in[base + bi] : 0u;

    unsigned int offset = 1;
    for (unsigned int d = m >> 1; d > 0; d >>= 1) {  // up-sweep: build sums in place
        __syncthreads();
        if (t < d) {
            const unsigned int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
            temp[slot<PADDED>(b)] += temp[slot<PADDED>(a)];
        }
        offset <<= 1;
    }
    __syncthreads();
    if (t == 0) {
        block_sums[blockIdx.x] = (int)temp[slot<PADDED>(m - 1)];
        temp[slot<PADDED>(m - 1)] = 0;  // clear the last element
    }
    for (unsigned int d = 1; d < m; d <<= 1) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            const unsigned int a = offset * (2 * t + 1) - 1, b = offset * (2 * t + 2) - 1;
            const unsigned int x = temp[slot<PADDED>(a)];
            temp[slot<PADDED>(a)] = temp[slot<PADDED>(b)];
            temp[slot<PADDED>(b)] += x;
        }
    }
    __syncthreads();
    if (base + ai < n) out[base + ai] = (int)temp[slot<PADDED>(ai)];
    if (base + bi < n) out[base + bi] = (int)temp[slot<PADDED>(bi)];
}

extern "C" __global__ void __launch_bounds__(1024)
scan_blelloch(const int* in, int* out, int* __restrict__ block_sums, unsigned long long n) {
    blelloch<false>(in, out, block_sums, n);
}

extern "C" __global__ void __launch_bounds__(1024)
scan_blelloch_padded(const int* in, int* out, int* __restrict__ block_sums, unsigned long long n) {
    blelloch<true>(in, out, block_sums, n);
}

extern "C" __global__ void __launch_bounds__(1024)
scan_add_offsets(int* __restrict__ out, const int* __restrict__ offsets, unsigned long long n) {
    const unsigned long long base = (unsigned long long)blockIdx.x * 2 * blockDim.x;
    const unsigned int add = (unsigned int)offsets[blockIdx.x];
    for (unsigned int k = threadIdx.x; k < 2 * blockDim.x; k += blockDim.x) {
        if (base + k < n) out[base + k] = (int)((unsigned int)out[base + k] + add);
    }
}

// ---------------------------------------------------------------------------------------------
// Single pass with decoupled look-back.

#define STATUS_AGGREGATE 1ull  // the tile's own total is published
#define STATUS_PREFIX 2ull     // the total of the tile and all before it is published
#define EPOCH_MASK 0x3fffffffu

// A status word: [epoch: 30 bits][flag: 2 bits][value: 32 bits], written and read whole.
__device__ __forceinline__ unsigned long long status_word(unsigned int epoch, unsigned long long flag,
                                                          unsigned int value) {
    return ((unsigned long long)(epoch & EPOCH_MASK) << 34) | (flag << 32) | value;
}

// Lab hooks (scripts/lab/scan_lab.py), compiled out otherwise: LAB_COUNTS counts look-back
// events into lab_counts; LAB_NO_LOOKBACK skips the look-back (wrong sums: a bound on speed).
#ifdef LAB_COUNTS
__device__ unsigned long long lab_counts[4];  // look-backs, rereads, windows moved, cycles
#define LAB_COUNT(i, v) atomicAdd(&lab_counts[i], (unsigned long long)(v))
#else
#define LAB_COUNT(i, v)
#endif

// The sum of every tile before `tile`, from their published status; called by all of warp 0.
// Each lane looks at one of the 32 tiles before the window's end. The nearest tile with a prefix
// ends the look-back once every tile nearer than it has published something (else the window is
// read again); with no prefix in the window, its 32 aggregates are added and it moves back.
// (Wider windows, each lane reading 2 or 4 words, were slower on an H100: scripts/lab/scan_lab.py.)
__device__ __forceinline__ unsigned int look_back(const volatile unsigned long long* status,
                                                  unsigned long long tile, unsigned int epoch) {
    const unsigned int lane = threadIdx.x & 31u;
#ifdef LAB_NO_LOOKBACK
    return 0;
#endif
#ifdef LAB_COUNTS
    const long long started = clock64();
    if (lane == 0) LAB_COUNT(0, 1);
#endif
    unsigned int exclusive = 0;
    long long end = (long long)tile - 1;  // the window is end, end - 1, ..., end - 31
    while (end >= 0) {
        const long long at = end - (long long)lane;
        const unsigned long long s = at >= 0 ? status[at] : status_word(epoch, STATUS_PREFIX, 0);
        const unsigned long long flag =
            ((unsigned int)(s >> 34) == (epoch & EPOCH_MASK)) ? ((s >> 32) & 3ull) : 0ull;
        const unsigned int prefixes = __ballot_sync(0xffffffffu, flag == STATUS_PREFIX);
        const unsigned int missing = __ballot_sync(0xffffffffu, flag == 0);
        // Lanes up to the nearest prefix (all 32 without one) must have published.
        const unsigned int needed =
            prefixes ? 0xffffffffu >> (32 - __ffs(prefixes)) : 0xffffffffu;
        if (missing & needed) {
            if (lane == 0) LAB_COUNT(1, 1);
            __nanosleep(32);
            continue;
        }
        exclusive += warp_sum((1u << lane) & needed ? (unsigned int)s : 0u);
        if (prefixes) break;
        if (lane == 0) LAB_COUNT(2, 1);
        end -= 32;
    }
#ifdef LAB_COUNTS
    if (lane == 0) LAB_COUNT(3, clock64() - started);
#endif
    return exclusive;
}

// Everything a block of the single-pass kernels does between its thread totals and its outputs:
// scans the thread totals across the block, publishes the tile's aggregate, looks back (warp 0),
// publishes the tile's prefix. Every thread calls local_work(its offset within the tile) while
// warp 0 waits on the look-back (warp 0 itself after it), so that the work that does not need the
// earlier tiles' total is off the path that does. Returns the total of all earlier tiles, the
// same in every thread, and sets *tile_total to that plus this tile's total.
template <typename LocalWork>
__device__ __forceinline__ unsigned int tile_prefix(unsigned int thread_total,
                                                    volatile unsigned long long* status,
                                                    unsigned long long tile, unsigned int epoch,
                                                    unsigned int* tile_total, LocalWork local_work) {
    __shared__ unsigned int warp_totals[32];
    __shared__ unsigned int tile_exclusive;
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned int warps = blockDim.x >> 5;
    const unsigned int inclusive = warp_inclusive_scan(thread_total);
    if (lane == 31) warp_totals[warp] = inclusive;
    __syncthreads();
    // Every warp scans the warp totals itself: no second barrier before the local work.
    const unsigned int over_warps = warp_inclusive_scan(lane < warps ? warp_totals[lane] : 0u);
    const unsigned int aggregate = __shfl_sync(0xffffffffu, over_warps, warps - 1);
    const unsigned int warp_before = __shfl_sync(0xffffffffu, over_warps, (warp + 31) & 31u);
    const unsigned int in_tile = (warp == 0 ? 0u : warp_before) + inclusive - thread_total;
    if (warp == 0) {
        if (lane == 0 && tile > 0) status[tile] = status_word(epoch, STATUS_AGGREGATE, aggregate);
        const unsigned int before = tile > 0 ? look_back(status, tile, epoch) : 0u;
        if (lane == 0) {
            status[tile] = status_word(epoch, STATUS_PREFIX, before + aggregate);
            tile_exclusive = before;
        }
    }
    local_work(in_tile);
    __syncthreads();
    *tile_total = tile_exclusive + aggregate;
    return tile_exclusive;
}

// The next tile for this block, the same for all its threads.
__device__ __forceinline__ unsigned long long next_tile(unsigned long long* counter,
                                                        unsigned long long first_tile) {
    __shared__ unsigned long long tile;
    if (threadIdx.x == 0) tile = atomicAdd(counter, 1ull) - first_tile;
    __syncthreads();
    return tile;
}

// A tile's ITEMS * B ints pass through shared memory on the way in and out, so that global memory
// is read and written with 16-byte accesses contiguous across the block (vector v of the tile is
// loaded by thread v % B), while each thread scans ITEMS consecutive elements. Both patterns must
// put 8 neighbouring threads (one phase of a 16-byte access) in 8 different 16-byte bank groups.
// With an odd number of vectors a thread (ITEMS / 4) they do as they are; with an even number, one
// 16-byte slot of padding every 8 makes them.
#define TILE_PADDED ((ITEMS / 4) % 2 == 0)
__device__ __forceinline__ unsigned int padded_vector(unsigned int v) {
    return TILE_PADDED ? v + (v >> 3) : v;
}

// A 16-byte copy from global into shared memory that does not pass through registers (cp.async,
// sm_80 and later), so the bytes a block has in flight do not limit how many blocks fit an SM.
__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
    const unsigned int to = (unsigned int)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global) : "memory");
}

// Loads the tile starting at tile_base into shared memory (zeros past n).
__device__ __forceinline__ void load_tile(const int* __restrict__ in, int4* tile,
                                          unsigned long long tile_base, unsigned long long n) {
    const unsigned int vectors = ITEMS / 4 * blockDim.x;
    if (tile_base + 4ull * vectors <= n) {
        const int4* src = reinterpret_cast<const int4*>(in + tile_base);
#pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            const unsigned int v = q * blockDim.x + threadIdx.x;
            copy_async_16(tile + padded_vector(v), src + v);
        }
        asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
    } else {
        for (unsigned int v = threadIdx.x; v < vectors; v += blockDim.x) {
            const unsigned long long i = tile_base + 4ull * v;
            int4 x;
            x.x = i < n ? in[i] : 0;
            x.y = i + 1 < n ? in[i + 1] : 0;
            x.z = i + 2 < n ? in[i + 2] : 0;
            x.w = i + 3 < n ? in[i + 3] : 0;
            tile[padded_vector(v)] = x;
        }
    }
    __syncthreads();
}

// Vector q of this thread's ITEMS consecutive elements of the tile in shared memory.
__device__ __forceinline__ int4& thread_vector(int4* tile, int q) {
    return tile[padded_vector(threadIdx.x * (ITEMS / 4) + q)];
}

extern "C" __global__ void __launch_bounds__(1024)
scan_lookback(const int* __restrict__ in, int* __restrict__ out, unsigned long long* tile_counter,
              unsigned long long* tile_status, unsigned long long n, unsigned long long first_tile,
              unsigned int epoch) {
    int4* tile_smem = reinterpret_cast<int4*>(dyn_smem);
    const unsigned long long tile = next_tile(tile_counter, first_tile);
    const unsigned long long tile_base = tile * ITEMS * blockDim.x;
    load_tile(in, tile_smem, tile_base, n);
    // The thread's elements are read from shared memory twice (sum, then scan) rather than held
    // in ITEMS registers, which would cost the occupancy the tiles need.
    unsigned int total = 0;
#pragma unroll
    for (int q = 0; q < ITEMS / 4; ++q) {
        const int4 x = thread_vector(tile_smem, q);
        total += (unsigned int)x.x + (unsigned int)x.y + (unsigned int)x.z + (unsigned int)x.w;
    }
    // While warp 0 looks back, each thread rewrites its elements as their exclusive sums within
    // the tile; the earlier tiles' total is added on the way out.
    unsigned int tile_total;
    const unsigned int before = tile_prefix(total, tile_status, tile, epoch, &tile_total,
                                            [&](unsigned int running) {
#pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            const int4 x = thread_vector(tile_smem, q);
            int4 y;
            y.x = (int)running; running += (unsigned int)x.x;
            y.y = (int)running; running += (unsigned int)x.y;
            y.z = (int)running; running += (unsigned int)x.z;
            y.w = (int)running; running += (unsigned int)x.w;
            thread_vector(tile_smem, q) = y;
        }
    });
    const unsigned int vectors = ITEMS / 4 * blockDim.x;
    if (tile_base + 4ull * vectors <= n) {
        int4* dst = reinterpret_cast<int4*>(out + tile_base);
#pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            const unsigned int w = q * blockDim.x + threadIdx.x;
            const int4 y = tile_smem[padded_vector(w)];
            __stcs(dst + w, make_int4((int)((unsigned int)y.x + before), (int)((unsigned int)y.y + before),
                                      (int)((unsigned int)y.z + before), (int)((unsigned int)y.w + before)));
        }
    } else {
        for (unsigned int w = threadIdx.x; w < vectors; w += blockDim.x) {
            const int4 y = tile_smem[padded_vector(w)];
            const unsigned long long i = tile_base + 4ull * w;
            if (i < n) out[i] = (int)((unsigned int)y.x + before);
            if (i + 1 < n) out[i + 1] = (int)((unsigned int)y.y + before);
            if (i + 2 < n) out[i + 2] = (int)((unsigned int)y.z + before);
            if (i + 3 < n) out[i + 3] = (int)((unsigned int)y.w + before);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// find_repeats.

extern "C" __global__ void __launch_bounds__(1024)
repeats_seed_flags(const int* __restrict__ a, int* __restrict__ flags, unsigned long long n) {
    for (unsigned long long i = grid_thread(); i < n; i += grid_threads()) {
        flags[i] = (i + 1 < n && a[i] == a[i + 1]) ? 1 : 0;
    }
}

extern "C" __global__ void __launch_bounds__(1024)
repeats_seed_scatter(const int* __restrict__ flags, const int* __restrict__ positions,
                int* __restrict__ indices, int* __restrict__ count, unsigned long long n) {
    if (grid_thread() == 0 && n == 0) count[0] = 0;
    for (unsigned long long i = grid_thread(); i < n; i += grid_threads()) {
        if (flags[i]) indices[positions[i]] = (int)i;
        if (i == n - 1) count[0] = positions[i] + flags[i];
    }
}

extern "C" __global__ void __launch_bounds__(1024)
repeats_fused(const int* __restrict__ a, int* __restrict__ indices, int* __restrict__ count,
              unsigned long long* tile_counter, unsigned long long* tile_status, unsigned long long n,
              unsigned long long first_tile, unsigned int epoch) {
    int4* tile_smem = reinterpret_cast<int4*>(dyn_smem);
    const unsigned long long tile = next_tile(tile_counter, first_tile);
    const unsigned long long tile_base = tile * ITEMS * blockDim.x;
    const unsigned long long first = tile_base + (unsigned long long)threadIdx.x * ITEMS;
    load_tile(a, tile_smem, tile_base, n);
    // The element after this thread's last: the next thread's first, or past the tile's end.
    int after;
    if (threadIdx.x + 1 < blockDim.x) {
        after = reinterpret_cast<const int*>(tile_smem)[4 * padded_vector((threadIdx.x + 1) * (ITEMS / 4))];
    } else {
        after = first + ITEMS < n ? __ldg(a + first + ITEMS) : 0;
    }
    unsigned long long flags = 0;  // bit j: element first + j repeats in the next one
    int4 x = thread_vector(tile_smem, 0);
#pragma unroll
    for (int q = 0; q < ITEMS / 4; ++q) {
        const int next = q + 1 < ITEMS / 4 ? thread_vector(tile_smem, q + 1).x : after;
        flags |= (unsigned long long)(x.x == x.y) << (4 * q);
        flags |= (unsigned long long)(x.y == x.z) << (4 * q + 1);
        flags |= (unsigned long long)(x.z == x.w) << (4 * q + 2);
        flags |= (unsigned long long)(x.w == next) << (4 * q + 3);
        if (q + 1 < ITEMS / 4) x = thread_vector(tile_smem, q + 1);
    }
    // The last element (index n - 1) has no successor, and nothing past it repeats. `>=`, not
    // `>`: a thread whose elements end exactly at n compared its last with the padding's 0.
    if (first + ITEMS >= n) flags &= first + 1 >= n ? 0ull : (1ull << (n - 1 - first)) - 1ull;
    // While warp 0 looks back, each thread puts its indices at their places within the tile, in
    // shared memory: the tile's elements have all been read (tile_prefix's first barrier), so its
    // space is free, and the indices leave as one contiguous, coalesced run instead of each
    // thread's scattered few.
    int* gathered = reinterpret_cast<int*>(dyn_smem);
    unsigned int tile_total;
    const unsigned int before = tile_prefix(__popcll(flags), tile_status, tile, epoch, &tile_total,
                                            [&](unsigned int k) {
        for (; flags; flags &= flags - 1) gathered[k++] = (int)(first + __ffsll(flags) - 1);
    });
    for (unsigned int w = threadIdx.x; w < tile_total - before; w += blockDim.x) {
        indices[before + w] = gathered[w];
    }
    if (threadIdx.x == 0 && tile == gridDim.x - 1) count[0] = (int)tile_total;
}
