//! The series of seed 003 (Pearson), shared by its three algorithms: M random walks of N values,
//! each from `start`, every step multiplying by 1 + f u with u uniform in [-1, 1) and f the step
//! fraction. The draws come from Philox4x32-10, a counter-based generator, so a thread of
//! `kernels/pearson.cu` computes series i's step j from (seed, i, j) alone and the CPU here
//! produces the same bits: both use one fused multiply-add and one rounded multiply a step.

use rayon::prelude::*;
use serde::Deserialize;

use crate::choice;

choice! {
    /// Where element j of series i lives in the M x N buffer.
    pub enum Layout {
        /// i * N + j: each series contiguous (the seed's choice).
        Series = "series",
        /// j * M + i: the j-th elements of all series contiguous, so a warp's stores coalesce.
        Interleaved = "interleaved",
    }
}

/// The walk's axes, shared by the Pearson algorithms: M, N, the start value and the step.
#[macro_export]
macro_rules! walk_axes {
    () => {
        [
            $crate::algos::AxisDef::size("m", "number of series"),
            $crate::algos::AxisDef::size("n", "values per series"),
            $crate::algos::AxisDef::float(
                "start",
                100.0,
                1e-6,
                1e6,
                "every series' first value (the seed's V)",
            ),
            $crate::algos::AxisDef::float(
                "step_pct",
                1.0,
                0.0,
                99.0,
                "the largest step, in percent of the value (the seed's epsilon)",
            ),
        ]
    };
}

/// The walk's parameters, as the Pearson manifests give them.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Walk {
    /// Series.
    pub m: usize,
    /// Values per series.
    pub n: usize,
    /// The first value of every series (the seed's V).
    pub start: f64,
    /// The largest step, in percent of the value (the seed's epsilon).
    pub step_pct: f64,
}

impl Walk {
    /// The step fraction f, as the kernels receive it.
    pub fn step_fraction(&self) -> f64 {
        self.step_pct / 100.0
    }

    /// M x N, or None if it overflows.
    pub fn elements(&self) -> Option<u64> {
        (self.m as u64).checked_mul(self.n as u64)
    }
}

/// Arithmetic the walk needs, in the element type.
pub trait WalkFloat: crate::vocab::Element + Default {
    fn from_f64(x: f64) -> Self;
    /// a * b + c with one rounding.
    fn fused(a: Self, b: Self, c: Self) -> Self;
    fn mul(a: Self, b: Self) -> Self;
}

impl WalkFloat for f32 {
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
    fn fused(a: f32, b: f32, c: f32) -> f32 {
        a.mul_add(b, c)
    }
    fn mul(a: f32, b: f32) -> f32 {
        a * b
    }
}

impl WalkFloat for f64 {
    fn from_f64(x: f64) -> f64 {
        x
    }
    fn fused(a: f64, b: f64, c: f64) -> f64 {
        a.mul_add(b, c)
    }
    fn mul(a: f64, b: f64) -> f64 {
        a * b
    }
}

/// Philox4x32-10 (Salmon et al., SC'11), as Random123 and cuRAND define it.
pub fn philox4x32_10(mut counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    const M0: u64 = 0xD251_1F53;
    const M1: u64 = 0xCD9E_8D57;
    const W0: u32 = 0x9E37_79B9;
    const W1: u32 = 0xBB67_AE85;
    let mut key = key;
    for round in 0..10 {
        if round > 0 {
            key = [key[0].wrapping_add(W0), key[1].wrapping_add(W1)];
        }
        let p0 = M0 * counter[0] as u64;
        let p1 = M1 * counter[2] as u64;
        counter = [
            (p1 >> 32) as u32 ^ counter[1] ^ key[0],
            p1 as u32,
            (p0 >> 32) as u32 ^ counter[3] ^ key[1],
            p0 as u32,
        ];
    }
    counter
}

/// The uniform draw in [-1, 1) of 32 random bits: the top 24 bits, exact in f32 and f64.
pub fn uniform_pm1(bits: u32) -> f64 {
    (bits >> 8) as f64 * (1.0 / (1u32 << 23) as f64) - 1.0
}

/// Series `series`'s values, in order, into `out` (N of them, `stride` apart).
fn walk_one<T: WalkFloat>(walk: &Walk, seed: u64, series: usize, out: &mut [T], stride: usize) {
    if walk.n == 0 {
        return;
    }
    let key = key_words(seed);
    let fraction = T::from_f64(walk.step_fraction());
    let one = T::from_f64(1.0);
    let mut value = T::from_f64(walk.start);
    out[0] = value;
    let mut draws = [0u32; 4];
    // Step j (1 <= j < N) uses word (j - 1) % 4 of Philox((j - 1) / 4, series).
    for j in 1..walk.n {
        let step = j - 1;
        if step % 4 == 0 {
            draws = philox4x32_10([(step / 4) as u32, series as u32, 0, 0], key);
        }
        let u = T::from_f64(uniform_pm1(draws[step % 4]));
        value = T::mul(value, T::fused(fraction, u, one));
        out[j * stride] = value;
    }
}

/// All M series in `layout`, on every core.
pub fn generate<T: WalkFloat>(walk: &Walk, seed: u64, layout: Layout) -> Vec<T> {
    let mut out = vec![T::default(); walk.m * walk.n];
    fill(walk, seed, layout, &mut out, true);
    out
}

/// All M series into `out` (M x N elements) in `layout`, on every core or on this thread alone.
pub fn fill<T: WalkFloat>(walk: &Walk, seed: u64, layout: Layout, out: &mut [T], parallel: bool) {
    let (m, n) = (walk.m, walk.n);
    if m == 0 || n == 0 {
        return;
    }
    match (layout, parallel) {
        (Layout::Series, false) => out
            .chunks_mut(n)
            .enumerate()
            .for_each(|(i, row)| walk_one(walk, seed, i, row, 1)),
        (Layout::Series, true) => out
            .par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, row)| walk_one(walk, seed, i, row, 1)),
        (Layout::Interleaved, false) => {
            for i in 0..m {
                walk_one(walk, seed, i, &mut out[i..], m);
            }
        }
        (Layout::Interleaved, true) => {
            // Generated series-major in slabs of series, then transposed into place.
            const SLAB: usize = 64;
            let slabs: Vec<(usize, Vec<T>)> = (0..m.div_ceil(SLAB))
                .into_par_iter()
                .map(|s| {
                    let first = s * SLAB;
                    let count = SLAB.min(m - first);
                    let mut rows = vec![T::default(); count * n];
                    for (k, row) in rows.chunks_mut(n).enumerate() {
                        walk_one(walk, seed, first + k, row, 1);
                    }
                    (first, rows)
                })
                .collect();
            for (first, rows) in slabs {
                for (k, row) in rows.chunks(n).enumerate() {
                    for (j, &v) in row.iter().enumerate() {
                        out[j * m + first + k] = v;
                    }
                }
            }
        }
    }
}

/// The case seed as the kernels' Philox key, two 32-bit words (an input buffer, since a launcher
/// sees only device buffers).
pub fn key_words(seed: u64) -> [u32; 2] {
    [seed as u32, (seed >> 32) as u32]
}

/// The seed back from its key words.
pub fn seed_of(words: [u32; 2]) -> u64 {
    words[0] as u64 | (words[1] as u64) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn philox_matches_the_random123_known_answers() {
        assert_eq!(
            philox4x32_10([0; 4], [0; 2]),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        assert_eq!(
            philox4x32_10([u32::MAX; 4], [u32::MAX; 2]),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
    }

    #[test]
    fn uniform_draws_cover_minus_one_to_one() {
        assert_eq!(uniform_pm1(0), -1.0);
        assert_eq!(uniform_pm1(u32::MAX), 1.0 - 1.0 / (1u32 << 23) as f64);
        assert_eq!(uniform_pm1(1 << 31), 0.0);
    }

    #[test]
    fn walks_start_at_start_move_by_at_most_the_step_and_layouts_agree() {
        let walk = Walk {
            m: 67,
            n: 131,
            start: 100.0,
            step_pct: 1.0,
        };
        let series: Vec<f32> = generate(&walk, 7, Layout::Series);
        let interleaved: Vec<f32> = generate(&walk, 7, Layout::Interleaved);
        for layout in [Layout::Series, Layout::Interleaved] {
            let mut one_thread = vec![0.0f32; walk.m * walk.n];
            fill(&walk, 7, layout, &mut one_thread, false);
            assert_eq!(one_thread, generate::<f32>(&walk, 7, layout), "{layout:?}");
        }
        for i in 0..walk.m {
            assert_eq!(series[i * walk.n], 100.0);
            for j in 0..walk.n {
                assert_eq!(series[i * walk.n + j], interleaved[j * walk.m + i]);
            }
            for j in 1..walk.n {
                let ratio = series[i * walk.n + j] / series[i * walk.n + j - 1];
                assert!((0.9899..=1.0101).contains(&ratio), "{ratio}");
            }
        }
        // Series differ from each other and from another seed's.
        assert_ne!(series[..walk.n], series[walk.n..2 * walk.n]);
        let other: Vec<f32> = generate(&walk, 8, Layout::Series);
        assert_ne!(series, other);
        // A longer walk extends a shorter one (the counter depends on i and j only).
        let longer: Vec<f32> = generate(&Walk { n: 200, ..walk }, 7, Layout::Series);
        assert_eq!(series[..walk.n], longer[..walk.n]);
    }

    #[test]
    fn seeds_survive_their_key_words() {
        for seed in [0, 1, u64::MAX, 0x1234_5678_9abc_def0] {
            assert_eq!(seed_of(key_words(seed)), seed);
        }
    }

    #[test]
    fn empty_walks_are_empty() {
        for (m, n) in [(0, 5), (5, 0), (0, 0)] {
            let walk = Walk {
                m,
                n,
                start: 1.0,
                step_pct: 1.0,
            };
            assert!(generate::<f64>(&walk, 1, Layout::Series).is_empty());
        }
    }
}
