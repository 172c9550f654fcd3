//! find_repeats (seed 001, problem 2): every index i with a[i] == a[i+1], in order, and their
//! count: an output whose length depends on the data.
//!
//! Inputs: int32 where each element repeats its predecessor with probability `repeats` (0: none,
//! 1: all equal) and is otherwise a fresh random value in -4..4 different from it: small values,
//! so that zeros, which a kernel's padding past the end holds, are common at the end of an input.
//! The reference is the CPU's scan of the array. A case moves its input once and its indices once: 4 n + 4 count + 4
//! bytes.

use std::sync::LazyLock;

use anyhow::{Context, Result};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;

use super::scan::{Blelloch, LookBack, LookBackState, Tiling, KERNEL_FILE};
use super::{
    Algorithm, AxisDef, Buffers, CaseData, CpuImpl, CpuRun, KernelImpl, OnDevice, OutputSpec, Spec,
};
use crate::device::{Arg, DeviceBuf, DeviceIo, Dims, Gpu, Kernel, Launcher};
use crate::vocab::{DType, HostData, Tolerance};

#[derive(Debug)]
pub struct FindRepeats;

static AXES: &[AxisDef] = &[
    AxisDef::size("n", "elements of a"),
    AxisDef::float(
        "repeats",
        0.1,
        0.0,
        1.0,
        "share of elements equal to their successor",
    ),
    AxisDef::BLOCK,
];

static SPEC: LazyLock<Spec> = LazyLock::new(|| Spec {
    name: "find_repeats",
    title: "indices i with a[i] == a[i+1] (find_repeats)",
    axes: AXES,
    fixed_dtype: Some(DType::I32),
    kernel_file: KERNEL_FILE,
    test_grid: "n = [0, 1, 2, 3, 1000, 65_537, 1_000_003]\nrepeats = [0.0, 0.1, 0.5, 1.0]",
    // Sizes that are whole numbers of repeats_fused's worker chunks (16800: 60, 28, 20 or 12
    // elements; 65520: 60, 52, 36, 28 or 20) end a worker's elements exactly at n: the test below
    // checks that one of them ends in a 0, as the padding past n does. On an H100 or H200 the
    // blocks here take 60 (64, 256) and 28 (1024) elements a worker; the other unrolled fronts in
    // scan.cu run on GPUs with less shared memory, and scripts/lab/scan_lab.py runs them on any.
    // repeats_fused keeps a tile's indices in registers when it has at most HELD (8) a worker, else
    // in its stage; 0.133 and 0.286 put the tiles of 60 and 28 items a worker on either side of
    // that line, so that both kinds follow one another in one launch (the test below checks it).
    // 28,672 is a whole number of repeats_direct's tiles at blocks 64 and 256 (4096 and 28,672).
    gpu_test_grid: "n = [0, 1, 2, 3, 1000, 4_099, 16_800, 28_672, 65_520, 65_537, 1_000_003]\n\
                    repeats = [0.0, 0.1, 0.133, 0.286, 1.0]\nblock = [64, 256, 1024]",
    ..Spec::implementing(FindRepeats::CPU, FindRepeats::KERNELS)
});

#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Params {
    pub n: usize,
    pub repeats: f64,
    /// CUDA variants only.
    pub block: Option<u32>,
}

impl Algorithm for FindRepeats {
    type Params = Params;

    const CPU: &'static [CpuImpl<Params>] = &[CpuImpl::new("sequential", |_| Ok(cpu()))];

    const KERNELS: &'static [KernelImpl<Params>] = &[
        KernelImpl::new("repeats_seed", |p, on| {
            let [a, indices, count] = buffers(on.io)?;
            let seed = Seed::new(on.gpu, on.io, block(p)?, [a, indices, count], p.n)?;
            Ok(Box::new(seed))
        }),
        KernelImpl::new("repeats_fused", |p, on| {
            single_pass(p, on, Tiling::Staged)
        }),
        KernelImpl::new("repeats_direct", |p, on| {
            single_pass(p, on, Tiling::Direct)
        }),
    ];

    fn spec(&self) -> &Spec {
        &SPEC
    }

    /// a, the indices at their capacity n, the flags and positions of the seed's version, the
    /// references.
    fn footprint_bytes(&self, p: &Params) -> Option<u64> {
        (p.n as u64).checked_mul(4 * 4 + 8)?.checked_add(1 << 20)
    }

    fn prepare(&self, p: &Params, seed: u64) -> Result<CaseData> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xF1D_0001);
        let mut a: Vec<i32> = Vec::with_capacity(p.n);
        for i in 0..p.n {
            let value = if i > 0 && rng.random_bool(p.repeats) {
                a[i - 1]
            } else {
                // A fresh value, different from the last (so `repeats` = 0 means none).
                loop {
                    let v = rng.random_range(-4..4);
                    if i == 0 || v != a[i - 1] {
                        break v;
                    }
                }
            };
            a.push(value);
        }
        let indices: Vec<f64> = repeats(&a).into_iter().map(|i| i as f64).collect();
        let count = indices.len();
        let outputs = vec![
            OutputSpec::new("count", DType::I32, vec![count as f64], Tolerance::EXACT),
            OutputSpec::new("indices", DType::I32, indices, Tolerance::EXACT)
                .counted_by("count", p.n),
        ];
        let n = p.n as u64;
        Ok(CaseData {
            inputs: Buffers(vec![("a", HostData::I32(a))]),
            outputs,
            // a read once; the count and the repeats' indices written.
            bytes_read: 4 * n,
            bytes_written: 4 * (count as u64 + 1),
            flops: 0,
            elements: 0,
            facts: vec![("repeats_found", count as f64)],
        })
    }
}

fn cpu() -> CpuRun {
    Box::new(|inputs, outputs| {
        let found = repeats(inputs.get::<i32>("a")?);
        outputs.get_mut::<i32>("count")?[0] = found.len() as i32;
        let indices = outputs.get_mut::<i32>("indices")?;
        for (slot, i) in indices.iter_mut().zip(found) {
            *slot = i as i32;
        }
        Ok(())
    })
}

/// A single-pass kernel (`repeats_fused`, `repeats_direct`) over the case's buffers.
fn single_pass<'a>(p: &Params, on: OnDevice<'a>, tiling: Tiling) -> Result<Box<dyn Launcher + 'a>> {
    let [a, indices, count] = buffers(on.io)?;
    let args = |tiles: &LookBackState| {
        vec![
            a.arg(),
            indices.arg(),
            count.arg(),
            tiles.counter.arg(),
            tiles.status.arg(),
        ]
    };
    let look_back = LookBack::new(on.gpu, on.io, on.kernel, tiling, block(p)?, p.n, args)?;
    Ok(Box::new(look_back))
}

fn block(p: &Params) -> Result<u32> {
    p.block.context("find_repeats' kernels need a block size")
}

/// The case's a, indices and count on the device.
fn buffers(io: &DeviceIo) -> Result<[&DeviceBuf; 3]> {
    Ok([io.input("a")?, io.output("indices")?, io.output("count")?])
}

/// The indices i with a[i] == a[i+1], in order.
fn repeats(a: &[i32]) -> Vec<usize> {
    a.windows(2)
        .enumerate()
        .filter(|(_, w)| w[0] == w[1])
        .map(|(i, _)| i)
        .collect()
}

/// The seed's version: flag each element, scan the flags (the seed's padded work-efficient scan),
/// scatter each flagged index to its scanned position.
struct Seed<'a> {
    flags_kernel: Kernel,
    scatter_kernel: Kernel,
    dims: Dims,
    flags_args: [Arg; 3],
    scatter_args: [Arg; 5],
    scan: Blelloch<'a>,
    /// The flags and their scanned positions, which the launches point into.
    _flags: [DeviceBuf; 2],
}

impl<'a> Seed<'a> {
    fn new(
        gpu: Gpu<'a>,
        io: &'a DeviceIo,
        block: u32,
        [a, indices, count]: [&DeviceBuf; 3],
        n: usize,
    ) -> Result<Self> {
        let (flags, positions) = (gpu.alloc(DType::I32, n)?, gpu.alloc(DType::I32, n)?);
        let grid = u32::try_from((n as u64).div_ceil(block as u64).max(1))
            .context("the grid is too large")?;
        Ok(Seed {
            flags_kernel: gpu.kernel("repeats_seed_flags")?,
            scatter_kernel: gpu.kernel("repeats_seed_scatter")?,
            dims: Dims::linear(grid, block, 0),
            flags_args: [a.arg(), flags.arg(), Arg::U64(n as u64)],
            scatter_args: [
                flags.arg(),
                positions.arg(),
                indices.arg(),
                count.arg(),
                Arg::U64(n as u64),
            ],
            scan: Blelloch::new(
                gpu,
                io,
                "scan_blelloch_padded",
                true,
                block,
                [flags.arg(), positions.arg()],
                n,
            )?,
            _flags: [flags, positions],
        })
    }
}

impl Launcher for Seed<'_> {
    fn launch(&mut self) -> Result<()> {
        // SAFETY: repeats_seed_flags(const int* a, int* flags, unsigned long long n): both hold
        // n ints; the grid covers n.
        unsafe { self.flags_kernel.launch(self.dims, &self.flags_args)? };
        self.scan.launch()?;
        // SAFETY: repeats_seed_scatter(const int* flags, const int* positions, int* indices,
        // int* count, n): flags and positions hold n ints, indices n (at most n - 1 repeat),
        // count one.
        unsafe { self.scatter_kernel.launch(self.dims, &self.scatter_args) }
    }

    fn launches_per_run(&self) -> usize {
        2 + self.scan.launches_per_run()
    }

    /// The flags and the scatter keep their arguments: as replayable as the scan between them.
    fn graph_refused(&self) -> Option<&'static str> {
        self.scan.graph_refused()
    }
}

#[cfg(test)]
mod tests {
    use super::super::scan::{SinglePass, H100_SHARED_BYTES};
    use super::*;

    /// The GPU test grid's values of `key`.
    fn gpu_grid(key: &str) -> Vec<toml::Value> {
        let grid: toml::Table = SPEC.gpu_test_grid.parse().unwrap();
        grid[key].as_array().unwrap().clone()
    }

    /// Each block of the GPU test grid with its single-pass shape on an H100 (227 KiB of shared
    /// memory a block).
    fn gpu_grid_shapes() -> Vec<(u32, SinglePass)> {
        gpu_grid("block")
            .iter()
            .map(|v| v.as_integer().unwrap() as u32)
            .map(|block| (block, SinglePass::new(block, H100_SHARED_BYTES).unwrap()))
            .collect()
    }

    /// Every input `a` of the GPU test grid, as the GPU test (tests/gpu.rs, study seed 11) makes it.
    fn gpu_grid_inputs() -> Vec<Vec<i32>> {
        let mut inputs = Vec::new();
        for n in gpu_grid("n").iter().map(|v| v.as_integer().unwrap() as usize) {
            for repeats in gpu_grid("repeats").iter().map(|v| v.as_float().unwrap()) {
                let p = Params { n, repeats, block: None };
                let data = FindRepeats.prepare(&p, 11).unwrap();
                inputs.push(data.inputs.get::<i32>("a").unwrap().to_vec());
            }
        }
        inputs
    }

    /// The GPU test must meet, at each of its blocks, an input that ends exactly at a worker
    /// chunk's end with a last element of 0: repeats_fused once compared that element with the
    /// padding's 0 and counted a repeat past the end.
    #[test]
    fn the_gpu_test_grid_has_an_input_ending_in_zero_at_a_chunks_end() {
        let inputs = gpu_grid_inputs();
        for (block, shape) in gpu_grid_shapes() {
            let items = shape.items as usize;
            let found = inputs
                .iter()
                .any(|a| a.len() % items == 0 && a.last() == Some(&0));
            assert!(
                found,
                "block {block} ({items} items a worker): no such input in {}",
                SPEC.gpu_test_grid
            );
        }
    }

    /// repeats_direct's last tile is either short or whole; the GPU test must meet a whole one.
    #[test]
    fn the_gpu_test_grid_ends_exactly_at_a_tile_of_repeats_direct() {
        let sizes: Vec<u64> = gpu_grid("n").iter().map(|v| v.as_integer().unwrap() as u64).collect();
        for block in gpu_grid("block").iter().map(|v| v.as_integer().unwrap() as u32) {
            if block == 1024 {
                continue;  // a tile of 126,976: 1,000,003 gives it several tiles and a short one
            }
            let (tile, _, _) = Tiling::Direct.plan(block, 1 << 20).unwrap();
            assert!(
                sizes.iter().any(|&n| n > 0 && n % tile == 0),
                "block {block}: no n of {:?} is a whole number of tiles of {tile}",
                sizes
            );
        }
    }

    /// repeats_fused handles a tile in one of two ways by its count of repeats (at most HELD a
    /// worker: indices held in registers and the stage refilled early; more: indices kept in the
    /// stage), and the two must follow one another correctly (cp.async groups, refill order). The
    /// GPU test must meet, at each of its blocks, an input where whole tiles change kind, both ways,
    /// more than once.
    #[test]
    fn the_gpu_test_grid_mixes_tiles_with_few_and_many_repeats() {
        let held: usize = KERNEL_FILE
            .source
            .lines()
            .find_map(|line| line.strip_prefix("#define HELD "))
            .expect("scan.cu defines HELD")
            .trim()
            .parse()
            .unwrap();
        let inputs = gpu_grid_inputs();
        for (block, shape) in gpu_grid_shapes() {
            let tile = shape.tile_elements() as usize;
            let held_per_tile = held * shape.workers as usize;
            let mixed = inputs.iter().any(|a| {
                // Whole tiles only: a short last tile is one of few repeats whatever the share.
                let mut per_tile = vec![0; a.len() / tile];
                for i in repeats(a) {
                    if let Some(count) = per_tile.get_mut(i / tile) {
                        *count += 1;
                    }
                }
                let many: Vec<bool> = per_tile.iter().map(|&c| c > held_per_tile).collect();
                let to_many = many.windows(2).filter(|w| !w[0] && w[1]).count();
                let to_few = many.windows(2).filter(|w| w[0] && !w[1]).count();
                to_many >= 2 && to_few >= 2
            });
            assert!(
                mixed,
                "block {block} ({} items a worker): in no input of {} do whole tiles of at most \
                 {held} repeats a worker and tiles of more follow one another, both ways, twice",
                shape.items, SPEC.gpu_test_grid
            );
        }
    }
}
