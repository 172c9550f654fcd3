// scan.cu: exclusive scan of int32 and find_repeats (seed 001), compiled at run time by NVRTC.
// Both algorithms (src/algos/scan.rs, src/algos/find_repeats.rs) build on the same block scans
// and the same single-pass look-back, so they share this file.
//
// Sums are taken modulo 2^32 (unsigned arithmetic, stored back as int), as the CPU reference does.
//
// Launch contracts (B = blockDim.x, a power of two in 32..1024 unless said; n = element count):
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
//                 unsigned long long* tile_status, n, unsigned int items,
//                 unsigned long long first_ticket, unsigned int epoch)
//       B = 64..1024, a multiple of 32: warp 0 looks back, the other W = B - 32 threads work.
//       A tile is items * W elements (items a multiple of 4, at most 64); tiles = max(1,
//       ceil(n / (items * W))); dynamic shared = STAGES tiles of ints; grid = at most as many
//       blocks as fit the GPU at once, at most tiles (a persistent grid: see for_each_tile).
//       Single pass with decoupled look-back (Merrill & Garland 2016): blocks take tiles in
//       order from tile_counter, publish each tile's total, learn the total of all earlier tiles
//       from their published status, and write the outputs. tile_status holds `tiles` words; a
//       word counts only if it carries this launch's epoch, so nothing needs clearing between
//       launches: the host passes first_ticket = the tickets drawn by earlier launches (each
//       draws tiles + grid) and epoch = launches so far (mod 2^30). `in` and `out` must be
//       16-byte aligned (whole allocations).
//
//   repeats_seed_flags(const int* a, int* flags, n)
//       grid = max(1, ceil(n / B)): flags[i] = 1 if i + 1 < n and a[i] == a[i+1], else 0.
//   repeats_seed_scatter(const int* flags, const int* positions, int* indices, int* count, n)
//       grid = max(1, ceil(n / B)): indices[positions[i]] = i where flags[i]; count[0] = the
//       number of flags (positions is the exclusive scan of flags).
//   repeats_fused(const int* a, int* indices, int* count, unsigned long long* tile_counter,
//                 unsigned long long* tile_status, n, unsigned int items,
//                 unsigned long long first_ticket, unsigned int epoch)
//       As scan_lookback, over the flags computed on the fly: one pass reads a, gathers each
//       tile's indices in shared memory, writes them as one contiguous run, and writes the count.
//       Block, items, grid and dynamic shared as scan_lookback.
//   repeats_direct: as repeats_fused (without items), read into registers by several blocks an
//       SM; its contract is with its code at the end of this file.

#include "common.cuh"

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
// events into lab_counts; LAB_NO_LOOKBACK skips the look-back (wrong sums: a bound on speed);
// LAB_NO_BACK keeps repeats_fused from storing its indices (a bound too).
#ifdef LAB_COUNTS
__device__ unsigned long long lab_counts[4];  // look-backs, rereads, windows moved, cycles
#define LAB_COUNT(i, v) atomicAdd(&lab_counts[i], (unsigned long long)(v))
#else
#define LAB_COUNT(i, v)
#endif

// How long warp 0 sleeps before it reads a window again whose tiles have not all published.
#define LOOK_BACK_SLEEP_NS 32

// The sum of every tile before `tile`, from their published status; called by all of warp 0.
// Each lane looks at one of the 32 tiles before the window's end. The nearest tile with a prefix
// ends the look-back once every tile nearer than it has published something (else the window is
// read again); with no prefix in the window, its 32 aggregates are added and it moves back.
// (Wider windows, each lane reading 2 or 4 words, were slower on an H100: scripts/lab/scan_lab.py.)
__device__ __forceinline__ unsigned int look_back(const volatile unsigned long long* status,
                                                  unsigned long long tile, unsigned int epoch,
                                                  unsigned int sleep_ns) {
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
            __nanosleep(sleep_ns);
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

// Warp 0's part of a tile: the total of every tile before it into `before` (shared), and the
// tile's own prefix (that total plus its `aggregate`) published for the tiles after it.
__device__ __forceinline__ void look_back_and_publish(volatile unsigned long long* status,
                                                      unsigned long long tile, unsigned int epoch,
                                                      unsigned int aggregate, unsigned int& before,
                                                      unsigned int sleep_ns) {
    const unsigned int total = tile > 0 ? look_back(status, tile, epoch, sleep_ns) : 0u;
    if (threadIdx.x == 0) {
        if (tile > 0) status[tile] = status_word(epoch, STATUS_PREFIX, total + aggregate);
        before = total;
    }
}

// The single-pass kernels' blocks are one look-back warp (warp 0) and W = blockDim.x - 32 worker
// threads. A tile is `items` consecutive elements for each worker (items a multiple of 4, at most
// 64: repeats_fused keeps a worker's flags in one 64-bit word, and its tile's offsets in 16 bits,
// so items * W < 65536; the host chooses it, see src/algos/scan.rs). Each block loops over tiles
// taken in order from a counter, holding STAGES of them in shared memory, and for each tile in
// turn:
//   front (workers): once loaded, sum each worker's elements, scan the sums across the workers,
//     publish the tile's total (its aggregate), and rewrite the tile in place as what each
//     element needs only its own tile for (the sums within the tile; find_repeats' indices);
//   look back (warp 0): learn the total of all earlier tiles from their published status and
//     publish the tile's own prefix;
//   back (workers): write the tile's outputs with the earlier tiles' total added.
// The front of the next tile runs while warp 0 looks back for this one, and a tile's aggregate is
// published one tile ahead of its look-back, so the look-back waits on tiles that are loaded,
// not on other blocks' look-backs; the next STAGES - 2 tiles are loading meanwhile.
// (scan_lookback runs this loop, for_each_tile; repeats_fused runs its own, further down.)
#ifndef STAGES
#define STAGES 2
#endif
static_assert(STAGES >= 2 && STAGES <= 6, "a tile in front, a tile at the back, the rest loading");

// Named barrier 1: the workers alone (barrier 0 is __syncthreads).
__device__ __forceinline__ void sync_workers() {
    asm volatile("bar.sync 1, %0;\n" ::"r"(blockDim.x - 32) : "memory");
}

// The front of a tile, called by every worker with its thread_total: scans the totals across the
// workers, publishes the tile's aggregate (a prefix for tile 0), and calls local_work(the worker's
// offset within the tile) once every worker has read its elements. Returns the aggregate.
template <typename LocalWork>
__device__ __forceinline__ unsigned int tile_front(unsigned int thread_total,
                                                   volatile unsigned long long* status,
                                                   unsigned long long tile, unsigned int epoch,
                                                   LocalWork local_work) {
    __shared__ unsigned int warp_totals[32];
    const unsigned int lane = threadIdx.x & 31u, warp = (threadIdx.x >> 5) - 1;  // worker warp
    const unsigned int warps = (blockDim.x >> 5) - 1;
    const unsigned int inclusive = warp_inclusive_scan(thread_total);
    if (lane == 31) warp_totals[warp] = inclusive;
    sync_workers();
    // Every warp scans the warp totals itself: no second barrier before the local work.
    const unsigned int over_warps = warp_inclusive_scan(lane < warps ? warp_totals[lane] : 0u);
    const unsigned int aggregate = __shfl_sync(0xffffffffu, over_warps, warps - 1);
    const unsigned int warp_before = __shfl_sync(0xffffffffu, over_warps, (warp + 31) & 31u);
    if (threadIdx.x == 32) {
        status[tile] = status_word(epoch, tile == 0 ? STATUS_PREFIX : STATUS_AGGREGATE, aggregate);
    }
    local_work((warp == 0 ? 0u : warp_before) + inclusive - thread_total);
    return aggregate;
}

// A tile's items * W ints pass through shared memory on the way in and out, so that global memory
// is read and written with 16-byte accesses contiguous across the workers (vector v of the tile is
// loaded by worker v % W), while each worker scans `items` consecutive elements. With an odd
// number of vectors a worker (items / 4), both patterns put 8 neighbouring threads (one phase of a
// 16-byte access) in 8 different 16-byte bank groups; the host chooses such an items, and an even
// one would be slower, not wrong.

// The tiles of n elements, items a worker: max(1, ceil(n / (items * W))), as the host counts them.
__device__ __forceinline__ unsigned long long tile_count(unsigned long long n, unsigned int items) {
    const unsigned long long tile_ints = (unsigned long long)items * (blockDim.x - 32);
    return n == 0 ? 1 : (n + tile_ints - 1) / tile_ints;
}

// This thread's index among the workers (threads 32 and up).
__device__ __forceinline__ unsigned int worker() {
    return threadIdx.x - 32;
}

// Vector q of this worker's `items` consecutive elements of the tile in shared memory.
__device__ __forceinline__ int4& worker_vector(int4* tile, unsigned int items, unsigned int q) {
    return tile[worker() * (items / 4) + q];
}

// A 16-byte copy from global into shared memory that does not pass through registers (cp.async,
// sm_80 and later): it is in flight while the thread goes on.
__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
    const unsigned int to = (unsigned int)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(global) : "memory");
}

// Closes this thread's cp.async copies issued since the last commit into one group (empty or
// not), which cp.async.wait_group counts.
__device__ __forceinline__ void cp_async_commit() {
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// The vector of elements i .. i + 3 where it runs past n: the elements below n, zeros after.
__device__ __forceinline__ int4 vector_before_end(const int* __restrict__ in, unsigned long long i,
                                                  unsigned long long n) {
    int4 x;
    x.x = i < n ? in[i] : 0;
    x.y = i + 1 < n ? in[i + 1] : 0;
    x.z = i + 2 < n ? in[i + 2] : 0;
    x.w = i + 3 < n ? in[i + 3] : 0;
    return x;
}

// Called by the workers: starts loading tile `tile` into `stage` (zeros past n; nothing when the
// tile is past the last) and commits it as one cp.async group, empty or not, so that groups and
// stages stay in step.
__device__ __forceinline__ void start_load(const int* __restrict__ in, int4* stage, unsigned int items,
                                           unsigned long long tile, unsigned long long tiles,
                                           unsigned long long n) {
    if (tile < tiles) {
        const unsigned int workers = blockDim.x - 32, vectors = items / 4 * workers;
        const unsigned long long tile_base = tile * vectors * 4;
        const int4* src = reinterpret_cast<const int4*>(in + tile_base);
        if (tile_base + 4ull * vectors <= n) {
            for (unsigned int v = worker(); v < vectors; v += workers) copy_async_16(stage + v, src + v);
        } else {
            for (unsigned int v = worker(); v < vectors; v += workers) {
                const unsigned long long i = tile_base + 4ull * v;
                if (i + 4 <= n) {
                    copy_async_16(stage + v, src + v);
                } else {
                    stage[v] = vector_before_end(in, i, n);
                }
            }
        }
    }
    cp_async_commit();
}

// The loop every block of the single-pass kernels runs (a persistent grid: at most as many blocks
// as fit the GPU at once). Tickets come from the counter in order (tile = atomicAdd -
// first_ticket), so a tile only waits on tiles that running blocks hold. Every block draws
// exactly one ticket past the last tile, so a launch advances the counter by tile_count +
// gridDim.x.
//   front(stage, tile) -> aggregate: by the workers, around tile_front;
//   back(stage, tile, before, aggregate): by the workers, once the earlier tiles' total is known;
//     the stage refills after it.
template <typename Front, typename Back>
__device__ __forceinline__ void for_each_tile(const int* __restrict__ in, unsigned long long n,
                                              unsigned int items, unsigned long long* counter,
                                              unsigned long long first_ticket,
                                              volatile unsigned long long* status, unsigned int epoch,
                                              Front front, Back back) {
    __shared__ unsigned long long stage_tile[STAGES];
    __shared__ unsigned int stage_aggregate[STAGES], stage_before[STAGES];
    const unsigned int stage_vectors = items / 4 * (blockDim.x - 32);
    const unsigned long long tiles = tile_count(n, items);
    int4* stages = reinterpret_cast<int4*>(dyn_smem);
    const bool is_worker = threadIdx.x >= 32;
    const bool drawer = threadIdx.x == blockDim.x - 1;  // a worker draws the tickets
    bool exhausted = false;  // the drawer has drawn past the last tile: it draws no more
    if (drawer) {
        for (int s = 0; s < STAGES; ++s) {
            const unsigned long long t = exhausted ? tiles : atomicAdd(counter, 1ull) - first_ticket;
            exhausted = t >= tiles;
            stage_tile[s] = t;
        }
    }
    __syncthreads();
    if (stage_tile[0] >= tiles) return;
    if (is_worker) {
        for (int s = 0; s < STAGES; ++s) {
            start_load(in, stages + s * stage_vectors, items, stage_tile[s], tiles, n);
        }
        asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 1) : "memory");
        sync_workers();
        const unsigned int aggregate = front(stages, stage_tile[0]);
        if (threadIdx.x == 32) stage_aggregate[0] = aggregate;
    }
    __syncthreads();
    for (unsigned int s = 0;;) {
        const unsigned int next = s + 1 == STAGES ? 0 : s + 1;
        const unsigned long long tile = stage_tile[s], next_tile = stage_tile[next];
        // The refill's ticket is drawn now and first used after the tile, behind its work.
        unsigned long long ticket = 0;
        if (drawer && !exhausted) ticket = atomicAdd(counter, 1ull);
        if (!is_worker) {
            look_back_and_publish(status, tile, epoch, stage_aggregate[s], stage_before[s], LOOK_BACK_SLEEP_NS);
        } else if (next_tile < tiles) {
            asm volatile("cp.async.wait_group %0;\n" ::"n"(STAGES - 2) : "memory");
            sync_workers();  // every worker's copies into the next stage have landed
            const unsigned int aggregate = front(stages + next * stage_vectors, next_tile);
            if (threadIdx.x == 32) stage_aggregate[next] = aggregate;
        }
        __syncthreads();
        // The stage's next tile, drawn above, for the refill: published to the workers by the
        // barrier before the refill, to warp 0 by the block's barrier.
        auto next_ticket = [&]() {
            if (drawer) {
                const unsigned long long t = exhausted ? tiles : ticket - first_ticket;
                exhausted = t >= tiles;
                stage_tile[s] = t;
            }
        };
        if (is_worker) back(stages + s * stage_vectors, tile, stage_before[s], stage_aggregate[s]);
        next_ticket();
        __syncthreads();  // the stage is free, and its next tile known
        if (is_worker) start_load(in, stages + s * stage_vectors, items, stage_tile[s], tiles, n);
        if (next_tile >= tiles) break;  // tickets rise stage by stage: the rest are past the end
        s = next;
    }
}

extern "C" __global__ void __launch_bounds__(1024, 1)
scan_lookback(const int* __restrict__ in, int* __restrict__ out, unsigned long long* tile_counter,
              unsigned long long* tile_status, unsigned long long n, unsigned int items,
              unsigned long long first_ticket, unsigned int epoch) {
    const unsigned int workers = blockDim.x - 32, vectors = items / 4 * workers;
    auto front = [&](int4* tile_smem, unsigned long long tile) {
        // The worker's elements are read from shared memory twice (sum, then scan) rather than
        // held in registers.
        unsigned int total = 0;
        for (unsigned int q = 0; q < items / 4; ++q) {
            const int4 x = worker_vector(tile_smem, items, q);
            total += (unsigned int)x.x + (unsigned int)x.y + (unsigned int)x.z + (unsigned int)x.w;
        }
        // Each worker rewrites its elements as their exclusive sums within the tile.
        return tile_front(total, tile_status, tile, epoch, [&](unsigned int running) {
            for (unsigned int q = 0; q < items / 4; ++q) {
                const int4 x = worker_vector(tile_smem, items, q);
                int4 y;
                y.x = (int)running; running += (unsigned int)x.x;
                y.y = (int)running; running += (unsigned int)x.y;
                y.z = (int)running; running += (unsigned int)x.z;
                y.w = (int)running; running += (unsigned int)x.w;
                worker_vector(tile_smem, items, q) = y;
            }
        });
    };
    auto back = [&](const int4* tile_smem, unsigned long long tile, unsigned int before, unsigned int) {
        const unsigned long long tile_base = tile * vectors * 4;
        if (tile_base + 4ull * vectors <= n) {
            int4* dst = reinterpret_cast<int4*>(out + tile_base);
            for (unsigned int v = worker(); v < vectors; v += workers) {
                const int4 y = tile_smem[v];
                __stcs(dst + v, make_int4((int)((unsigned int)y.x + before), (int)((unsigned int)y.y + before),
                                          (int)((unsigned int)y.z + before), (int)((unsigned int)y.w + before)));
            }
        } else {
            for (unsigned int v = worker(); v < vectors; v += workers) {
                const int4 y = tile_smem[v];
                const unsigned long long i = tile_base + 4ull * v;
                if (i < n) out[i] = (int)((unsigned int)y.x + before);
                if (i + 1 < n) out[i + 1] = (int)((unsigned int)y.y + before);
                if (i + 2 < n) out[i + 2] = (int)((unsigned int)y.z + before);
                if (i + 3 < n) out[i + 3] = (int)((unsigned int)y.w + before);
            }
        }
    };
    for_each_tile(in, n, items, tile_counter, first_ticket, tile_status, epoch, front, back);
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

// A worker's repeat flags (bit j: element j of its `items` repeats in the next one), from its
// items / 4 vectors in shared memory and the element after them. Unrolled for the tile shapes the
// host chooses, so that the vectors are read together: with `items` known only at run time the
// loop read them one at a time, and the front took about 2.9 us of a tile's 5.2 (H200,
// scripts/lab/scan_lab.py at 2^28 and 60 x 480; unrolled, 455-462 us against 485-489 in one call).
template <unsigned int WORKER_ITEMS>  // 0: `items` is known only at run time
__device__ __forceinline__ unsigned long long repeat_flags_of(const int4* mine, unsigned int items,
                                                              int after) {
    const unsigned int vectors = (WORKER_ITEMS ? WORKER_ITEMS : items) / 4;
    unsigned int lo = 0, hi = 0;
#pragma unroll
    for (unsigned int q = 0; q < vectors; ++q) {
        const int4 x = mine[q];
        const int next = q + 1 < vectors ? mine[q + 1].x : after;
        const unsigned int nibble = (unsigned int)(x.x == x.y) | (unsigned int)(x.y == x.z) << 1 |
                                    (unsigned int)(x.z == x.w) << 2 | (unsigned int)(x.w == next) << 3;
        if (q < 8) lo |= nibble << (4 * q); else hi |= nibble << (4 * q - 32);
    }
    return (unsigned long long)hi << 32 | lo;
}

__device__ __forceinline__ unsigned long long repeat_flags(const int4* mine, unsigned int items, int after) {
    switch (items) {  // every choice of the host's (ITEMS_CHOICES in src/algos/scan.rs)
    case 60: return repeat_flags_of<60>(mine, items, after);
    case 52: return repeat_flags_of<52>(mine, items, after);
    case 44: return repeat_flags_of<44>(mine, items, after);
    case 36: return repeat_flags_of<36>(mine, items, after);
    case 28: return repeat_flags_of<28>(mine, items, after);
    case 20: return repeat_flags_of<20>(mine, items, after);
    case 12: return repeat_flags_of<12>(mine, items, after);
    case 4: return repeat_flags_of<4>(mine, items, after);
    default: return repeat_flags_of<0>(mine, items, after);  // another items the contract allows
    }
}

// repeats_fused's loop (two stages, whatever STAGES says): as for_each_tile, except that a tile's
// stage is refilled right after its front, before the tile's look-back and back, whenever its
// indices fit in the workers' registers (HELD a worker, as 16-bit offsets within the tile, two to
// a register): the front gathers them in the stage, each worker takes its share into registers,
// and the stage starts loading the tile after next while the block still looks back for, and
// writes, the tiles before. A tile with more indices keeps them in its stage and refills it after
// its back, as for_each_tile does.
//
// cp.async groups complete in order, so every iteration commits two groups, empty or not: F
// after the front (an early refill) and K after the back (a late one). The tile the next front
// needs is followed by three committed groups if its load was early, else it is the last group.
#define HELD 8

__device__ __forceinline__ void cp_async_wait(bool three_pending) {
    if (three_pending) {
        asm volatile("cp.async.wait_group 3;\n" ::: "memory");
    } else {
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    }
}

extern "C" __global__ void __launch_bounds__(1024, 1)
repeats_fused(const int* __restrict__ a, int* __restrict__ indices, int* __restrict__ count,
              unsigned long long* tile_counter, unsigned long long* tile_status, unsigned long long n,
              unsigned int items, unsigned long long first_ticket, unsigned int epoch) {
    __shared__ unsigned long long stage_tile[2], stage_next[2];
    __shared__ unsigned int stage_aggregate[2], stage_before[2];
    __shared__ bool refilled_early[2];
    const unsigned int workers = blockDim.x - 32;
    const unsigned int stage_vectors = items / 4 * workers;
    const unsigned long long tile_ints = (unsigned long long)items * workers;
    const unsigned long long tiles = tile_count(n, items);
    int4* stages = reinterpret_cast<int4*>(dyn_smem);
    volatile unsigned long long* status = tile_status;
    const bool is_worker = threadIdx.x >= 32;
    const bool drawer = threadIdx.x == blockDim.x - 1;
    bool exhausted = false;
    auto draw = [&]() {
        const unsigned long long t = exhausted ? tiles : atomicAdd(tile_counter, 1ull) - first_ticket;
        exhausted = t >= tiles;
        return t;
    };
    // The element after `tile`, for its last worker (0 past n, and for the other workers).
    auto after_tile = [&](unsigned long long tile) {
        return worker() + 1 == workers && (tile + 1) * tile_ints < n ? __ldg(a + (tile + 1) * tile_ints) : 0;
    };
    // The front of `tile` in `stage` (by the workers): flags, the tile's aggregate published, its
    // indices gathered at the stage's start. Returns the aggregate.
    auto front = [&](int4* tile_smem, unsigned long long tile, int after_last) {
        const unsigned long long first = (tile * workers + worker()) * items;
        // The element after this worker's last: the next worker's first, or the tile's next.
        const int after = worker() + 1 < workers ? tile_smem[(worker() + 1) * (items / 4)].x : after_last;
        unsigned long long flags = repeat_flags(tile_smem + worker() * (items / 4), items, after);
        // The last element (index n - 1) has no successor, and nothing past it repeats. `>=`, not
        // `>`: a worker whose elements end exactly at n compared its last with the padding's 0.
        if (first + items >= n) flags &= first + 1 >= n ? 0ull : (1ull << (n - 1 - first)) - 1ull;
        // Each worker puts its indices at their places within the tile, in shared memory: the
        // tile's elements have all been read (tile_front's barrier), so its stage is free, and the
        // indices leave as one contiguous, coalesced run instead of each worker's scattered few.
        int* gathered = reinterpret_cast<int*>(tile_smem);
        return tile_front(__popcll(flags), status, tile, epoch, [&](unsigned int k) {
            for (; flags; flags &= flags - 1) gathered[k++] = (int)(first + __ffsll(flags) - 1);
        });
    };
    // After a front (by the workers): the tile's indices into `held` and the stage refilled with
    // its next tile, where they fit; else nothing (an empty group). Commits group F.
    auto after_front = [&](int s, unsigned int found, unsigned int (&held)[HELD / 2]) {
        const bool early = found <= HELD * workers;
        sync_workers();  // the gathered indices are all written
        if (early) {
            const int* gathered = reinterpret_cast<const int*>(stages + s * stage_vectors);
            const unsigned int base = (unsigned int)(stage_tile[s] * tile_ints);
#pragma unroll
            for (unsigned int k = 0; k < HELD; k += 2) {
                const unsigned int w0 = worker() + k * workers, w1 = w0 + workers;
                const unsigned int lo = w0 < found ? (unsigned int)gathered[w0] - base : 0u;
                const unsigned int hi = w1 < found ? (unsigned int)gathered[w1] - base : 0u;
                held[k / 2] = lo | (hi << 16);
            }
            sync_workers();  // every worker has its share: the stage is free
            start_load(a, stages + s * stage_vectors, items, stage_next[s], tiles, n);
        } else {
            cp_async_commit();
        }
        if (threadIdx.x == 32) {
            stage_aggregate[s] = found;
            refilled_early[s] = early;
        }
    };
    unsigned int held_front[HELD / 2] = {}, held_back[HELD / 2];  // unused after a late refill
    if (drawer) {
        stage_tile[0] = draw();
        stage_tile[1] = draw();
        stage_next[0] = draw();
    }
    if (threadIdx.x == 0) refilled_early[1] = true;  // its load sits where an early one would
    __syncthreads();
    if (stage_tile[0] >= tiles) return;
    if (is_worker) {
        // Groups: T0, T1 (in F's place), an empty K, then F after T0's front, an empty K.
        start_load(a, stages, items, stage_tile[0], tiles, n);
        start_load(a, stages + stage_vectors, items, stage_tile[1], tiles, n);
        cp_async_commit();
        asm volatile("cp.async.wait_group 2;\n" ::: "memory");
        sync_workers();
        const unsigned int found = front(stages, stage_tile[0], after_tile(stage_tile[0]));
        after_front(0, found, held_front);
        cp_async_commit();
#pragma unroll
        for (int k = 0; k < HELD / 2; ++k) held_back[k] = held_front[k];
    }
    __syncthreads();
    for (int s = 0;;) {
        const int next = s ^ 1;
        const unsigned long long tile = stage_tile[s], next_tile = stage_tile[next];
        if (!is_worker) {
            look_back_and_publish(status, tile, epoch, stage_aggregate[s], stage_before[s], LOOK_BACK_SLEEP_NS);
        } else {
            if (drawer) stage_next[next] = draw();  // the refill after next_tile's front
            if (next_tile < tiles) {
                cp_async_wait(refilled_early[next]);
                sync_workers();  // every worker's copies into the next stage have landed
                const unsigned int found = front(stages + next * stage_vectors, next_tile, after_tile(next_tile));
                after_front(next, found, held_front);
            } else {
                cp_async_commit();
            }
        }
        __syncthreads();
        if (is_worker) {
            const unsigned int before = stage_before[s], found = stage_aggregate[s];
#ifndef LAB_NO_BACK
            if (refilled_early[s]) {
                const unsigned int base = (unsigned int)(tile * tile_ints);
#pragma unroll
                for (unsigned int k = 0; k < HELD; ++k) {
                    const unsigned int w = worker() + k * workers;
                    const unsigned int offset = (held_back[k / 2] >> (16 * (k & 1))) & 0xffffu;
                    if (w < found) indices[before + w] = (int)(base + offset);
                }
            } else {
                const int* gathered = reinterpret_cast<const int*>(stages + s * stage_vectors);
                for (unsigned int w = worker(); w < found; w += workers) indices[before + w] = gathered[w];
            }
#endif
            if (refilled_early[s]) {
                cp_async_commit();
            } else {
                sync_workers();  // the stage's indices are written: it is free
                start_load(a, stages + s * stage_vectors, items, stage_next[s], tiles, n);
            }
            if (worker() == 0 && tile == tiles - 1) count[0] = (int)(before + found);
#pragma unroll
            for (int k = 0; k < HELD / 2; ++k) held_back[k] = held_front[k];
        }
        if (threadIdx.x == 32) stage_tile[s] = stage_next[s];
        __syncthreads();
        if (next_tile >= tiles) break;
        s = next;
    }
}

// ---------------------------------------------------------------------------------------------
// repeats_direct: find_repeats with the input read straight into registers (as reduce_fast reads)
// by several blocks an SM, instead of through repeats_fused's two large stages (one block an SM).
// Warp 0 of a block looks back; each of the other W = blockDim.x / 32 - 1 warps owns
// DIRECT_ROUNDS * 512 consecutive elements of a tile (tile = W * DIRECT_ROUNDS * 512 elements) and
// reads them a round of 512 at a time: 16 bytes a lane, four loads, contiguous across the warp.
// Each round passes through the warp's shared memory once (transposed, so that a lane holds 16
// consecutive elements and its flags are 16 consecutive bits), and its flags are kept there.
// Warp 0 and the workers meet only through named barriers, as producer and consumer: the workers
// arrive at A(i) once tile i's totals are written and go on reading; warp 0 waits at A(i), looks
// back for tile i, and arrives at B(i) with each worker warp's first index. A worker waits at
// B(i) only when it has read tile i + 2, and then writes tile i's indices. So the look-back of a
// tile has two tiles' reading to finish in, and the workers never wait for one that is late.
// On an H200 at 2^28 with 10% repeats: 300.3 us at block 512, 92.0% of the copy, against CUB's
// 801.1 in one call of find_repeats_bench.toml; in the lab harness 313-316 us against 337-339
// for the kernel before it, which met warp 0 at every tile with __syncthreads and ran 3 blocks of
// 256 an SM with 80 registers (README, find_repeats). Up to about 1.7e7 elements repeats_fused is
// faster: here a tile is 28,672 (block 256) or 61,440 (512) elements, too few to fill the GPU.
//
//   repeats_direct(const int* a, int* indices, int* count, unsigned long long* tile_counter,
//                  unsigned long long* tile_status, n, unsigned long long first_ticket,
//                  unsigned int epoch)
//       B = 64..1024, a multiple of 32; built with 64 registers a thread, so that four blocks of
//       256 (or two of 512) fit an SM. Tiles = max(1, ceil(n / tile)); dynamic shared = W *
//       DIRECT_WARP_INTS ints; grid as scan_lookback (persistent, at most the blocks that fit at
//       once, at most tiles); counter, status, first_ticket and epoch as scan_lookback, except
//       that a block draws its tickets ahead (up to four beyond the tile in hand), still exactly
//       one past the last tile.
#define DIRECT_ROUNDS 8
#define DIRECT_ROUND_INTS 512                         // a warp's round: 4 vectors of 16 bytes a lane
#define DIRECT_GATHER_INTS (2 * DIRECT_ROUND_INTS)    // a worker warp's gather, in ints
#define DIRECT_FLAG_WORDS (DIRECT_ROUNDS / 2)         // a lane's flags: 16 bits a round
#define DIRECT_HELD_TILES 4                           // tiles whose flags a worker warp keeps
// A worker warp's shared memory, in ints: its gather (and a round's transpose), then its flags of
// DIRECT_HELD_TILES tiles, [tile % 4][word][lane].
#define DIRECT_WARP_INTS (DIRECT_GATHER_INTS + DIRECT_HELD_TILES * DIRECT_FLAG_WORDS * 32)
// Warp 0 may lag two tiles, so it waits longer between reads of a window than the other kernels'
// look-backs, and leaves L2 to the bulk traffic: 256 against 32 ns was 313-316 against 318-321 us
// at 2^28, block 512 (H200, lab harness, one call).
#define DIRECT_LOOK_BACK_SLEEP_NS 256
static_assert(DIRECT_ROUNDS % 2 == 0, "two rounds of flags a register");

// One round of a warp: its four vectors, the element after it (0 past n), and whether the round
// and that element are all below n.
struct DirectRound {
    int4 v[4];
    int after;
    bool full;
};

// Loads the round that starts at element `first` (vector j of a lane at first + 4 (32 j + lane)).
__device__ __forceinline__ void direct_load(DirectRound& round, const int* __restrict__ a,
                                            unsigned long long n, unsigned long long first) {
    const unsigned int lane = threadIdx.x & 31u;
    const int4* src = reinterpret_cast<const int4*>(a + first);
    round.full = first + DIRECT_ROUND_INTS < n;
    if (round.full) {
#pragma unroll
        for (int j = 0; j < 4; ++j) round.v[j] = __ldg(src + j * 32 + lane);
        round.after = __ldg(a + first + DIRECT_ROUND_INTS);
    } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const unsigned long long i = first + (j * 32 + lane) * 4ull;
            if (i + 4 <= n) {
                round.v[j] = src[j * 32 + lane];
            } else {
                round.v[j] = vector_before_end(a, i, n);
            }
        }
        round.after = 0;
    }
}

// The 16-byte slot of vector v (0..127) of a round in the warp's shared memory: XOR-swizzled so
// that the stores (lanes at consecutive vectors) and the reads (lanes 4 vectors apart) each hit 8
// different 16-byte bank groups in a quarter warp.
__device__ __forceinline__ unsigned int direct_slot(unsigned int v) {
    return v ^ ((v >> 3) & 7u);
}

// The round's flags of this lane: bit b when element first + 16 lane + b equals the next one
// (and that one is below n). `transpose` is the warp's shared memory.
__device__ __forceinline__ unsigned int direct_flags(const DirectRound& round, int4* transpose,
                                                     unsigned long long n, unsigned long long first) {
    const unsigned int lane = threadIdx.x & 31u;
#pragma unroll
    for (int j = 0; j < 4; ++j) transpose[direct_slot(j * 32 + lane)] = round.v[j];
    __syncwarp();
    int e[17];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int4 x = transpose[direct_slot(lane * 4 + q)];
        e[4 * q] = x.x;
        e[4 * q + 1] = x.y;
        e[4 * q + 2] = x.z;
        e[4 * q + 3] = x.w;
    }
    __syncwarp();  // read before the next use of the warp's shared memory overwrites it
    const int next_lane_first = __shfl_down_sync(0xffffffffu, e[0], 1);
    e[16] = lane == 31 ? round.after : next_lane_first;
    unsigned int flags = 0;
#pragma unroll
    for (int b = 0; b < 16; ++b) flags |= (unsigned int)(e[b] == e[b + 1]) << b;
    if (!round.full) {
        const unsigned long long mine = first + lane * 16ull;
        const unsigned long long with_next = mine + 1 >= n ? 0 : n - 1 - mine;  // elements with a successor
        flags &= with_next >= 16 ? 0xffffu : (1u << with_next) - 1u;
    }
    return flags;
}

// The first element of this worker warp's part of `tile` (its round r starts DIRECT_ROUND_INTS r
// further on).
__device__ __forceinline__ unsigned long long direct_part(unsigned long long tile) {
    const unsigned int workers = blockDim.x / 32 - 1, worker_warp = threadIdx.x / 32 - 1;
    return (tile * workers + worker_warp) * (DIRECT_ROUNDS * DIRECT_ROUND_INTS);
}

// The worker warp's indices of its part of `tile`, from its lanes' flags, written from
// indices[run] on: each round's gathered in the warp's shared memory at their places (one scan
// over the lanes counts three rounds, 10 bits a round: at most 16 a lane, 512 a warp), and written
// as one contiguous run when another round might not fit, and at the end.
__device__ __forceinline__ void direct_store(int* __restrict__ indices, int* gathered,
                                             const unsigned int (&flags)[DIRECT_FLAG_WORDS],
                                             unsigned int run, unsigned long long tile) {
    const unsigned int lane = threadIdx.x & 31u;
    unsigned int fill = 0;
    auto round_flags = [&](int r) { return (flags[r / 2] >> (16 * (r & 1))) & 0xffffu; };
#pragma unroll
    for (int r0 = 0; r0 < DIRECT_ROUNDS; r0 += 3) {
        unsigned int packed = 0;
#pragma unroll
        for (int k = 0; k < 3 && r0 + k < DIRECT_ROUNDS; ++k) packed |= __popc(round_flags(r0 + k)) << (10 * k);
        const unsigned int inclusive = warp_inclusive_scan(packed);
        const unsigned int warp_counts = __shfl_sync(0xffffffffu, inclusive, 31);
        const unsigned int lanes_before = inclusive - packed;
#pragma unroll
        for (int k = 0; k < 3 && r0 + k < DIRECT_ROUNDS; ++k) {
            const int r = r0 + k;
            unsigned int f = round_flags(r);
            unsigned int at = fill + ((lanes_before >> (10 * k)) & 0x3ffu);
            const int mine = (int)(direct_part(tile) + r * DIRECT_ROUND_INTS + lane * 16u);
            for (; f; f &= f - 1) gathered[at++] = mine + __ffs(f) - 1;
            fill += (warp_counts >> (10 * k)) & 0x3ffu;
            if (r + 1 == DIRECT_ROUNDS || fill > DIRECT_GATHER_INTS - DIRECT_ROUND_INTS) {
                __syncwarp();
#ifndef LAB_NO_BACK
                for (unsigned int w = lane; w < fill; w += 32) indices[run + w] = gathered[w];
#endif
                __syncwarp();  // written out before the next round's gather overwrites it
                run += fill;
                fill = 0;
            }
        }
    }
}

// Named barriers 1..8 (0 is __syncthreads), four of each kind so that the up to three tiles in
// flight between warp 0 and the workers never share one: A(i), the workers' totals of tile i are
// in warp_totals; B(i), warp 0 has written tile i's run_start.
__device__ __forceinline__ unsigned int totals_barrier(unsigned int i) { return 1 + (i & 3); }
__device__ __forceinline__ unsigned int starts_barrier(unsigned int i) { return 5 + (i & 3); }
__device__ __forceinline__ void barrier_arrive(unsigned int id) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(blockDim.x) : "memory");
}
__device__ __forceinline__ void barrier_wait(unsigned int id) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(blockDim.x) : "memory");
}

// Tickets: slot t % 8 holds a block's t-th ticket. Warp 0 draws four ahead (in its tile i, the
// ticket of tile i + 4), so that a worker at tile i, which has passed B(i - 3), finds tile i + 1's
// ticket (to read its first round at the end of tile i). Slots are reused eight tickets later,
// after every warp is done with them.
extern "C" __global__ void __launch_bounds__(1024, 1)
repeats_direct(const int* __restrict__ a, int* __restrict__ indices, int* __restrict__ count,
               unsigned long long* tile_counter, unsigned long long* tile_status, unsigned long long n,
               unsigned long long first_ticket, unsigned int epoch) {
    __shared__ unsigned long long tile_slot[8];
    __shared__ unsigned int warp_totals[4][32];  // [tile % 4][worker warp]
    __shared__ unsigned int run_start[4][32];    // [tile % 4][worker warp]: its first index
    volatile unsigned long long* status = tile_status;
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    const unsigned int workers = blockDim.x / 32 - 1;
    const unsigned long long tile_ints = (unsigned long long)workers * DIRECT_ROUNDS * DIRECT_ROUND_INTS;
    const unsigned long long tiles = n == 0 ? 1 : (n + tile_ints - 1) / tile_ints;
    auto draw = [&]() { return atomicAdd(tile_counter, 1ull) - first_ticket; };
    if (threadIdx.x == 0) {  // draws until it has drawn one past the last tile
        tile_slot[0] = draw();
        for (int t = 1; t < 4; ++t) tile_slot[t] = tile_slot[t - 1] < tiles ? draw() : tiles;
    }
    __syncthreads();
    if (tile_slot[0] >= tiles) return;
    if (warp == 0) {
        for (unsigned int i = 0;; ++i) {
            const unsigned long long tile = tile_slot[i & 7], next = tile_slot[(i + 1) & 7],
                                     last_drawn = tile_slot[(i + 3) & 7];
            barrier_wait(totals_barrier(i));
            unsigned long long ticket = tiles;
            if (lane == 0 && last_drawn < tiles) ticket = draw();
            const unsigned int total = lane < workers ? warp_totals[i & 3][lane] : 0u;
            const unsigned int through = warp_inclusive_scan(total);
            const unsigned int aggregate = __shfl_sync(0xffffffffu, through, 31);
            if (lane == 0) status[tile] = status_word(epoch, tile == 0 ? STATUS_PREFIX : STATUS_AGGREGATE, aggregate);
            unsigned int before = 0;  // set by lane 0
            look_back_and_publish(status, tile, epoch, aggregate, before, DIRECT_LOOK_BACK_SLEEP_NS);
            before = __shfl_sync(0xffffffffu, before, 0);
            if (lane < workers) run_start[i & 3][lane] = before + through - total;
            if (lane == 0) {
                tile_slot[(i + 4) & 7] = ticket;
                if (tile == tiles - 1) count[0] = (int)(before + aggregate);
            }
            barrier_arrive(starts_barrier(i));
            if (next >= tiles) return;
        }
    }
    const unsigned int worker_warp = warp - 1;
    int* gathered = reinterpret_cast<int*>(dyn_smem) + worker_warp * DIRECT_WARP_INTS;
    int4* transpose = reinterpret_cast<int4*>(gathered);  // a round's, between the gathers
    unsigned int* held = reinterpret_cast<unsigned int*>(gathered + DIRECT_GATHER_INTS);
    auto held_word = [&](unsigned int i, int word) -> unsigned int& {
        return held[((i & 3) * DIRECT_FLAG_WORDS + word) * 32 + lane];
    };
    auto store = [&](unsigned int i) {  // tile i's indices, once warp 0 has found where they go
        barrier_wait(starts_barrier(i));
        unsigned int flags[DIRECT_FLAG_WORDS];
#pragma unroll
        for (int w = 0; w < DIRECT_FLAG_WORDS; ++w) flags[w] = held_word(i, w);
        direct_store(indices, gathered, flags, run_start[i & 3][worker_warp], tile_slot[i & 7]);
    };
    DirectRound round;
    direct_load(round, a, n, direct_part(tile_slot[0]));
    for (unsigned int i = 0;; ++i) {
        const unsigned long long tile = tile_slot[i & 7], next = tile_slot[(i + 1) & 7];
        unsigned int mine = 0;
#pragma unroll
        for (int r = 0; r < DIRECT_ROUNDS; ++r) {
            const unsigned long long first = direct_part(tile) + r * DIRECT_ROUND_INTS;
            if (r > 0) direct_load(round, a, n, first);
            const unsigned int f = direct_flags(round, transpose, n, first);
            // The next tile's first round leaves now, to arrive during the stores.
            if (r + 1 == DIRECT_ROUNDS && next < tiles) direct_load(round, a, n, direct_part(next));
            // Kept in shared memory, not registers: 64 registers a thread hold no more.
            reinterpret_cast<unsigned short*>(&held_word(i, r / 2))[r & 1] = (unsigned short)f;
            mine += __popc(f);
        }
        const unsigned int warp_total = warp_sum(mine);
        if (lane == 0) warp_totals[i & 3][worker_warp] = warp_total;
        __syncwarp();
        barrier_arrive(totals_barrier(i));
        if (i >= 2) store(i - 2);
        if (next >= tiles) {
            // The tiles not written yet: this one and the one before (or tile 0 alone).
            for (unsigned int j = i < 2 ? 0 : i - 1; j <= i; ++j) store(j);
            return;
        }
    }
}
