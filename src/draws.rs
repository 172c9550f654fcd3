//! Random buffers drawn on every core, reproducibly: element `i` of a stream is a function of
//! the stream's key and `i` alone (ChaCha8, keyed by the key, at word `words_per_element * i`),
//! so the buffer is the same however many threads drew it, and any one element can be drawn
//! again without the others (for `--save-outputs`, say, or a reference that wants element 7).

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Elements a thread draws in one go: large enough that seeking is rare.
const CHUNK: usize = 1 << 16;

/// `len` values of `one` applied to each element's own two 64-bit words (one element needs at
/// most two).
fn draw(key: u64, len: usize, one: impl Fn([u64; 2]) -> f64 + Sync) -> Vec<f64> {
    let mut values = vec![0.0; len];
    values
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = ChaCha8Rng::seed_from_u64(key);
            // A ChaCha word is 32 bits: an element takes four.
            rng.set_word_pos(4 * (chunk * CHUNK) as u128);
            for value in out {
                *value = one([rng.next_u64(), rng.next_u64()]);
            }
        });
    values
}

/// The top 53 bits of `word` as a float in [0, 1).
fn unit(word: u64) -> f64 {
    (word >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Uniform in [low, high).
pub fn uniform(key: u64, len: usize, low: f64, high: f64) -> Vec<f64> {
    draw(key, len, |[word, _]| {
        let value = low + unit(word) * (high - low);
        // Rounding can reach `high` itself, which the interval leaves out.
        if value >= high && high > low {
            high.next_down()
        } else {
            value
        }
    })
}

/// Uniform integers in [low, high], both included (`low <= high`).
pub fn uniform_int(key: u64, len: usize, low: i64, high: i64) -> Vec<f64> {
    let span = (high as i128 - low as i128 + 1) as u128;
    draw(key, len, |[word, _]| {
        // Multiply-shift: a bias of at most span / 2^64, nothing for any buffer's range.
        (low as i128 + ((word as u128 * span) >> 64) as i128) as f64
    })
}

/// Normal with `mean` and `std_dev` (Box-Muller: two uniforms, one normal).
pub fn normal(key: u64, len: usize, mean: f64, std_dev: f64) -> Vec<f64> {
    draw(key, len, |[first, second]| {
        let (u1, u2) = (1.0 - unit(first), unit(second));
        mean + std_dev * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_element_is_the_same_in_any_buffer_length_and_each_chunk_differs() {
        let long = uniform(7, 3 * CHUNK + 11, -1.0, 1.0);
        let short = uniform(7, CHUNK + 3, -1.0, 1.0);
        assert_eq!(long[..short.len()], short[..]);
        assert_ne!(long[..100], long[CHUNK..CHUNK + 100]);
        assert_ne!(uniform(8, 100, -1.0, 1.0), long[..100]);
        assert!(long.iter().all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn the_draws_have_their_distributions_moments_and_bounds() {
        let n = 200_003;
        let u = uniform(1, n, 2.0, 4.0);
        let mean = u.iter().sum::<f64>() / n as f64;
        assert!((mean - 3.0).abs() < 0.01, "{mean}");
        let z = normal(2, n, 1.0, 3.0);
        let mean = z.iter().sum::<f64>() / n as f64;
        let var = z.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        assert!(
            (mean - 1.0).abs() < 0.03 && (var.sqrt() - 3.0).abs() < 0.03,
            "{mean} {var}"
        );
        let k = uniform_int(3, n, -2, 5);
        assert!(k
            .iter()
            .all(|v| v.fract() == 0.0 && (-2.0..=5.0).contains(v)));
        for value in -2..=5 {
            let seen = k.iter().filter(|&&v| v == value as f64).count();
            assert!(
                (seen as f64 / n as f64 - 0.125).abs() < 0.005,
                "{value}: {seen}"
            );
        }
        let wide = uniform_int(4, 1000, i64::MIN, i64::MAX);
        assert!(wide.iter().any(|v| *v < -1e18) && wide.iter().any(|v| *v > 1e18));
        assert_eq!(uniform_int(5, 10, 9, 9), vec![9.0; 10]);
        assert!(uniform(6, 0, 0.0, 1.0).is_empty());
    }
}
