//! Exclusive scan of int32 (seed 001, problem 2): prefix[i] = x[0] + ... + x[i-1], modulo 2^32
//! as the GPU adds. Inputs uniform in 0..=9 (as the peers use); the reference is the same wrapping
//! scan on the CPU, so every element must match exactly. Each element moves 8 bytes.
//!
//! The launchers here (`Blelloch`, `LookBack`) also serve `find_repeats`, whose kernels share
//! `kernels/scan.cu`.

use std::sync::LazyLock;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::{
    Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice, OutputSpec, Spec,
};
use crate::device::{Arg, DeviceBuf, DeviceIo, Dims, Gpu, Kernel, KernelFile, Launcher};
use crate::vocab::{DType, HostData, Tolerance};

#[derive(Debug)]
pub struct Scan;

pub(super) const KERNEL_FILE: KernelFile = KernelFile::embedded("scan.cu", include_str!("../../kernels/scan.cu"));

static AXES: &[AxisDef] = &[AxisDef::size("n", "elements scanned"), AxisDef::BLOCK];

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "scan",
    title: "exclusive prefix sum of int32",
    axes: AXES,
    fixed_dtype: Some(DType::I32),
    kernel_file: KERNEL_FILE,
    test_grid: "n = [0, 1, 2, 31, 1000, 4_099, 65_537, 1_000_003]",
    gpu_test_grid: "n = [0, 1, 2, 31, 1000, 4_099, 65_537, 1_000_003, 16_777_259]\n\
                    block = [64, 128, 256, 1024]",
    ..Spec::implementing(Scan::CPU, Scan::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    pub n: usize,
    /// CUDA variants only.
    pub block: Option<u32>,
}

/// Tiles a block of the single-pass kernels holds in shared memory at once (STAGES in scan.cu).
const STAGES: u64 = 2;

/// The elements a worker of the single-pass kernels may take, largest first: whole 16-byte
/// vectors, an odd number of them (no shared-memory bank conflicts, see scan.cu), at most 60
/// (repeats_fused keeps a worker's flags in one 64-bit word). scan.cu's `repeat_flags` unrolls
/// its loop for each of them.
const ITEMS_CHOICES: [u32; 8] = [60, 52, 44, 36, 28, 20, 12, 4];

/// How a single-pass kernel (`scan_lookback`, `repeats_fused`) splits a block of `block` threads
/// and its tiles: one warp looks back, the other `workers` threads each take `items` consecutive
/// elements of a tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SinglePass {
    pub workers: u32,
    pub items: u32,
}

impl SinglePass {
    /// The largest tiles that let STAGES of them fit `shared_bytes` (what a block may use beside
    /// its static shared memory). Large tiles because the look-back chains tile after tile: fewer
    /// tiles a second keep it off the critical path (scripts/lab/scan_lab.py on an H100: tiles of
    /// ~110 KiB reached 93% of the copy's bandwidth, 32 KiB tiles 69%).
    pub(super) fn new(block: u32, shared_bytes: u64) -> Result<Self> {
        anyhow::ensure!(
            (64..=1024).contains(&block) && block.is_multiple_of(32),
            "the single-pass kernels need a block of 64 to 1024 threads, a multiple of 32 (one \
             warp looks back, the others work), not {block}"
        );
        let workers = block - 32;
        ITEMS_CHOICES
            .into_iter()
            .map(|items| Self { workers, items })
            .find(|shape| STAGES * shape.tile_bytes() <= shared_bytes)
            .with_context(|| {
                format!(
                    "{STAGES} tiles of {block} - 32 workers do not fit {shared_bytes} bytes of \
                     shared memory"
                )
            })
    }

    pub(super) fn tile_elements(&self) -> u64 {
        self.workers as u64 * self.items as u64
    }

    fn tile_bytes(&self) -> u64 {
        4 * self.tile_elements()
    }
}

/// `repeats_direct`'s rounds a worker warp takes of a tile, and the elements of a round
/// (DIRECT_ROUNDS and DIRECT_ROUND_INTS in scan.cu).
pub(super) const DIRECT_ROUNDS: u64 = 8;
pub(super) const DIRECT_ROUND_INTS: u64 = 512;
/// The shared memory of a worker warp of `repeats_direct`, in ints (DIRECT_WARP_INTS): its
/// gather, then 16 bits of flags a round for each lane, of DIRECT_HELD_TILES tiles.
const DIRECT_GATHER_INTS: u64 = 2 * DIRECT_ROUND_INTS;
const DIRECT_HELD_TILES: u64 = 4;
const DIRECT_WARP_INTS: u64 = DIRECT_GATHER_INTS + DIRECT_HELD_TILES * (DIRECT_ROUNDS / 2) * 32;

/// How a single-pass kernel lays out its tiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tiling {
    /// `scan_lookback`, `repeats_fused`: STAGES tiles in shared memory, `items` elements a worker
    /// thread (a kernel argument; see SinglePass).
    Staged,
    /// `repeats_direct`: DIRECT_ROUNDS rounds of DIRECT_ROUND_INTS elements a worker warp, read
    /// into registers; DIRECT_WARP_INTS ints of shared memory a worker warp.
    Direct,
}

impl Tiling {
    /// A tile's elements, the dynamic shared memory a block needs, and `items` where the kernel
    /// takes it, for blocks of `block` threads with `shared_bytes` of shared memory to use.
    pub(super) fn plan(self, block: u32, shared_bytes: u64) -> Result<(u64, u64, Option<u32>)> {
        match self {
            Tiling::Staged => {
                let shape = SinglePass::new(block, shared_bytes)?;
                Ok((shape.tile_elements(), STAGES * shape.tile_bytes(), Some(shape.items)))
            }
            Tiling::Direct => {
                anyhow::ensure!(
                    (64..=1024).contains(&block) && block.is_multiple_of(32),
                    "repeats_direct needs a block of 64 to 1024 threads, a multiple of 32 (one \
                     warp looks back, the others work), not {block}"
                );
                let worker_warps = (block / 32 - 1) as u64;
                Ok((
                    worker_warps * DIRECT_ROUNDS * DIRECT_ROUND_INTS,
                    worker_warps * DIRECT_WARP_INTS * 4,
                    None,
                ))
            }
        }
    }
}

impl Algorithm for Scan {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[CpuImpl::new("sequential", |_| Ok(cpu()))];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("scan_blelloch", |p, on| blelloch(p, on, false)),
        // Padded against shared-memory bank conflicts.
        KernelImpl::new("scan_blelloch_padded", |p, on| blelloch(p, on, true)),
        KernelImpl::new("scan_lookback", |p, on| {
            let block = block(p)?;
            let (x, prefix) = (on.io.input("x")?, on.io.output("prefix")?);
            let args = |tiles: &LookBackState| {
                vec![
                    x.arg(),
                    prefix.arg(),
                    tiles.counter.arg(),
                    tiles.status.arg(),
                ]
            };
            let look_back =
                LookBack::new(on.gpu, on.io, on.kernel, Tiling::Staged, block, p.n, args)?;
            Ok(Box::new(look_back))
        }),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// x, the prefix, its reference; the multi-pass kernels' block sums are a small fraction.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        (p.n as u64)
            .checked_mul(4 + 4 + 8 + 1)?
            .checked_add(1 << 20)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5CA_0001);
        let x: Vec<i32> = (0..p.n).map(|_| rng.random_range(0..=9)).collect();
        let mut reference = Vec::with_capacity(p.n);
        let mut sum = 0i32;
        for &v in &x {
            reference.push(sum as f64);
            sum = sum.wrapping_add(v);
        }
        let n = p.n as u64;
        Ok(CaseData {
            inputs: Buffers(vec![("x", HostData::I32(x))]),
            outputs: vec![OutputSpec::new(
                "prefix",
                DType::I32,
                reference,
                Tolerance::EXACT,
            )],
            bytes_read: n.checked_mul(4).context("the byte count overflows")?,
            bytes_written: 4 * n,
            flops: n,
            elements: 0,
            facts: Vec::new(),
        })
    }
}

/// The seed's sequential scan, wrapping as the GPU adds.
fn cpu() -> CpuRun {
    Box::new(|inputs, outputs| {
        let x = inputs.get::<i32>("x")?;
        let prefix = outputs.get_mut::<i32>("prefix")?;
        let mut sum = 0i32;
        for (out, &v) in prefix.iter_mut().zip(x) {
            *out = sum;
            sum = sum.wrapping_add(v);
        }
        Ok(())
    })
}

fn block(p: &Params) -> Result<u32> {
    p.block.context("scan's kernels need a block size")
}

/// A Blelloch kernel's launcher over the case's x and prefix.
fn blelloch<'a>(p: &Params, on: OnDevice<'a>, padded: bool) -> Result<Box<dyn Launcher + 'a>> {
    let (x, prefix) = (on.io.input("x")?, on.io.output("prefix")?);
    let args = [x.arg(), prefix.arg()];
    let scan = Blelloch::new(on.gpu, on.io, on.kernel, padded, block(p)?, args, p.n)?;
    Ok(Box::new(scan))
}

/// The seed's work-efficient scan of `len` ints from an input buffer into an output buffer (of
/// the case, or of the launcher that owns this one), level by level: each level scans blocks of
/// 2B elements and their block sums, until one block covers a level; then each level's scanned
/// sums are added back down. The launches are worked out once.
pub(super) struct Blelloch<'a> {
    scan: Kernel,
    add: Kernel,
    /// (add?, dims, args) in launch order.
    launches: Vec<(bool, Dims, [Arg; 4])>,
    /// The block sums of each level.
    _sums: Vec<DeviceBuf>,
    /// The case's buffers, which the launches may point into.
    _io: &'a DeviceIo,
}

impl<'a> Blelloch<'a> {
    /// `[input, output]`: buffers of at least `len` ints that outlive the launcher (the case's,
    /// or its owner's). `entry`: the kernel, padded against bank conflicts or not.
    pub(super) fn new(
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
        entry: &str,
        padded: bool,
        block: u32,
        [input, output]: [Arg; 2],
        len: usize,
    ) -> Result<Self> {
        let per_block = 2 * block as u64;
        let shared = 4 * (per_block + if padded { per_block / 32 } else { 0 }) as u32;
        let grid = |len: u64| -> Result<u32> {
            u32::try_from(len.div_ceil(per_block).max(1)).context("the grid is too large")
        };
        let mut sums: Vec<DeviceBuf> = Vec::new();
        // (scanned buffer, its length) per level, bottom up.
        let mut levels: Vec<(Arg, u64)> = Vec::new();
        let mut launches = Vec::new();
        let (mut source, mut target, mut n) = (input, output, len as u64);
        loop {
            let g = grid(n)?;
            sums.push(gpu.alloc(DType::I32, g as usize)?);
            let block_sums = sums.last().expect("pushed").arg();
            launches.push((
                false,
                Dims::linear(g, block, shared),
                [source, target, block_sums, Arg::U64(n)],
            ));
            levels.push((target, n));
            if g == 1 {
                break;
            }
            // The next level scans this level's block sums in place.
            (source, target, n) = (block_sums, block_sums, g as u64);
        }
        // Down: level k's scanned block sums are level k+1's output.
        for k in (0..levels.len() - 1).rev() {
            let (out, n) = levels[k];
            let offsets = levels[k + 1].0;
            launches.push((
                true,
                Dims::linear(grid(n)?, block, 0),
                [out, offsets, Arg::U64(n), Arg::U64(0)],
            ));
        }
        Ok(Blelloch {
            scan: gpu.kernel(entry)?,
            add: gpu.kernel("scan_add_offsets")?,
            launches,
            _sums: sums,
            _io: io,
        })
    }
}

impl Launcher for Blelloch<'_> {
    fn launch(&mut self) -> Result<()> {
        for (add, dims, args) in &self.launches {
            if *add {
                // SAFETY: scan_add_offsets(int* out, const int* offsets, unsigned long long n):
                // out holds n ints, offsets one per 2B-element block of them (the next level's
                // scanned sums, sized for this level's grid).
                unsafe { self.add.launch(*dims, &args[..3])? };
            } else {
                // SAFETY: scan_blelloch[_padded](const int* in, int* out, int* block_sums,
                // unsigned long long n): in and out hold n ints (the same buffer above level 0),
                // block_sums one per block; the dynamic shared memory is the 2B ints (+ padding)
                // the block scans.
                unsafe { self.scan.launch(*dims, args)? };
            }
        }
        Ok(())
    }

    fn launches_per_run(&self) -> usize {
        self.launches.len()
    }

    fn graph_refused(&self) -> Option<&'static str> {
        None
    }
}

/// The single-pass kernels' tile bookkeeping: the tile counter and one status word per tile
/// (8-byte words; the dtype only sizes them), zeroed once and never cleared again.
pub(super) struct LookBackState {
    pub counter: DeviceBuf,
    pub status: DeviceBuf,
}

/// A single-pass kernel with decoupled look-back (`scan_lookback`, `repeats_fused`,
/// `repeats_direct`): one launch of a persistent grid (as many blocks as fit the GPU at once, at
/// most one per tile) over max(1, ceil(n / tile)) tiles. Each launch takes the next run of tickets
/// from the counter and its own epoch, so no bookkeeping is cleared between runs.
pub(super) struct LookBack<'a> {
    kernel: Kernel,
    dims: Dims,
    n: u64,
    /// Elements a worker thread, for the staged kernels.
    items: Option<u32>,
    /// Tickets a launch draws: one a tile, and one past the last tile for each block.
    tickets_per_launch: u64,
    launches: u64,
    /// The kernel's arguments before (n, items, first_ticket, epoch).
    leading: Vec<Arg>,
    _state: LookBackState,
    /// The case's buffers, which `leading` points into.
    _io: &'a DeviceIo,
}

impl<'a> LookBack<'a> {
    pub(super) fn new(
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
        entry: &str,
        tiling: Tiling,
        block: u32,
        n: usize,
        leading: impl Fn(&LookBackState) -> Vec<Arg>,
    ) -> Result<Self> {
        let kernel = gpu.kernel(entry)?;
        let available = (gpu.shared_optin_bytes() as u64)
            .saturating_sub(kernel.static_shared_bytes()? as u64);
        let (tile_elements, shared_bytes, items) = tiling.plan(block, available)?;
        anyhow::ensure!(
            shared_bytes <= available,
            "{entry}: a block of {block} threads needs {shared_bytes} bytes of shared memory, more \
             than the {available} this GPU offers"
        );
        let shared_bytes = u32::try_from(shared_bytes)?;
        kernel.allow_dynamic_shared(shared_bytes)?;
        let per_sm = kernel.max_active_blocks_per_sm(block, shared_bytes)?;
        anyhow::ensure!(
            per_sm > 0,
            "{entry}: a block of {block} threads with {shared_bytes} bytes of shared memory fits \
             no SM"
        );
        let tiles = (n as u64).div_ceil(tile_elements).max(1);
        let grid = tiles.min(gpu.sm_count() as u64 * per_sm as u64);
        let state = LookBackState {
            counter: gpu.alloc(DType::F64, 1)?,
            status: gpu.alloc(DType::F64, tiles as usize)?,
        };
        Ok(LookBack {
            kernel,
            dims: Dims::linear(grid as u32, block, shared_bytes),
            n: n as u64,
            items,
            tickets_per_launch: tiles + grid,
            launches: 0,
            leading: leading(&state),
            _state: state,
            _io: io,
        })
    }
}

impl Launcher for LookBack<'_> {
    fn launch(&mut self) -> Result<()> {
        let mut args = self.leading.clone();
        args.push(Arg::U64(self.n));
        args.extend(self.items.map(Arg::U32));
        args.extend([
            Arg::U64(self.launches * self.tickets_per_launch),
            Arg::U32(self.launches as u32),
        ]);
        self.launches += 1;
        // SAFETY: scan_lookback(const int* in, int* out, u64* tile_counter, u64* tile_status,
        // n, items, first_ticket, epoch), repeats_fused(const int* a, int* indices, int* count,
        // u64* tile_counter, u64* tile_status, n, items, first_ticket, epoch) or
        // repeats_direct(the same without items): the leading pointers are the case's
        // whole buffers of >= n ints (indices: capacity n; count: 1) and the state's counter (one
        // word) and status (one word per tile); the counter has counted launches *
        // tickets_per_launch so far, as first_ticket says; the dynamic shared memory is what
        // Tiling::plan gives for the block, and the kernel's limit was raised to it in `new`.
        unsafe { self.kernel.launch(self.dims, &args) }
    }

    fn graph_refused(&self) -> Option<&'static str> {
        Some("each launch passes its own first ticket and epoch (the look-back's status words must not be mistaken for an earlier launch's), which a replayed graph would repeat")
    }
}

/// What a block of the single-pass kernels may use on an H100 (227 KiB of opt-in shared memory,
/// less some static), for the tests that work out its tiles.
#[cfg(test)]
pub(super) const H100_SHARED_BYTES: u64 = 227 * 1024 - 256;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_pass_tiles_are_the_largest_two_that_fit() {
        let shape = |block| SinglePass::new(block, H100_SHARED_BYTES).unwrap();
        assert_eq!(shape(512), SinglePass { workers: 480, items: 60 });
        assert_eq!(shape(1024), SinglePass { workers: 992, items: 28 });
        assert_eq!(shape(64), SinglePass { workers: 32, items: 60 });
        // An A100's 163 KiB.
        assert_eq!(SinglePass::new(1024, 163 * 1024).unwrap().items, 20);
        for block in [64, 96, 512, 1024] {
            let s = shape(block);
            assert!(
                2 * 4 * s.tile_elements() <= H100_SHARED_BYTES && (s.items / 4) % 2 == 1,
                "{s:?}"
            );
        }
    }

    #[test]
    fn repeats_fused_unrolls_its_front_for_every_items_the_host_may_choose() {
        // An items without its case still counts right, through the loop that reads one vector
        // at a time, but that loop made the kernel about 6% slower (H200, scan_lab.py).
        for items in ITEMS_CHOICES {
            let case = format!("case {items}: return repeat_flags_of<{items}>(mine, items, after);");
            assert!(KERNEL_FILE.source.contains(&case), "scan.cu has no `{case}`");
        }
    }

    #[test]
    fn single_pass_blocks_need_a_look_back_warp_and_workers() {
        for block in [0, 32, 100, 1056] {
            let e = SinglePass::new(block, 1 << 20).unwrap_err().to_string();
            assert!(e.contains("64 to 1024") && e.contains(&block.to_string()), "{e}");
        }
        let e = SinglePass::new(1024, 1000).unwrap_err().to_string();
        assert!(e.contains("do not fit 1000 bytes"), "{e}");
    }

    #[test]
    fn repeats_direct_tiles_follow_scan_cu() {
        for (name, value) in [("DIRECT_ROUNDS", DIRECT_ROUNDS), ("DIRECT_ROUND_INTS", DIRECT_ROUND_INTS)] {
            let define = format!("#define {name} {value}");
            assert!(KERNEL_FILE.source.contains(&define), "scan.cu has no `{define}`");
        }
        for define in [
            "#define DIRECT_GATHER_INTS (2 * DIRECT_ROUND_INTS)",
            "#define DIRECT_HELD_TILES 4",
            "#define DIRECT_WARP_INTS (DIRECT_GATHER_INTS + DIRECT_HELD_TILES * DIRECT_FLAG_WORDS * 32)",
            "#define DIRECT_FLAG_WORDS (DIRECT_ROUNDS / 2)",
        ] {
            assert!(KERNEL_FILE.source.contains(define), "scan.cu has no `{define}`");
        }
        // Block 288: 8 worker warps of 8 rounds of 512 elements, 6 KiB of shared memory each
        // (4 KiB of gather, 2 KiB of flags).
        assert_eq!(Tiling::Direct.plan(288, 1 << 20).unwrap(), (32_768, 49_152, None));
        assert_eq!(Tiling::Direct.plan(64, 1 << 20).unwrap(), (4096, 6144, None));
        // Block 1024: 31 worker warps, 186 KiB, within an H100's 227 KiB a block.
        assert_eq!(Tiling::Direct.plan(1024, 1 << 20).unwrap(), (126_976, 190_464, None));
        for block in [0, 32, 100, 1056] {
            let e = Tiling::Direct.plan(block, 1 << 20).unwrap_err().to_string();
            assert!(e.contains("64 to 1024") && e.contains(&block.to_string()), "{e}");
        }
        let staged = Tiling::Staged.plan(512, H100_SHARED_BYTES).unwrap();
        assert_eq!(staged, (480 * 60, 2 * 4 * 480 * 60, Some(60)));
    }

    #[test]
    fn the_reference_is_an_exclusive_wrapping_scan() {
        let p = Params { n: 5, block: None };
        let data = Scan.prepare(&p, 1).unwrap();
        let x = data.inputs.get::<i32>("x").unwrap();
        let r = &data.outputs[0].reference;
        assert_eq!(r[0], 0.0);
        assert_eq!(r[4], (x[0] + x[1] + x[2] + x[3]) as f64);
        assert!(x.iter().any(|&v| v != 0), "inputs must not be zeros");
    }
}
