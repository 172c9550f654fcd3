//! Accuracy: a case's output against the float64 reference computed from the same inputs.
//!
//! An element passes when `|got - expected| <= abs + rel * |expected|`. NaN never passes, and
//! integers are held to an exact match.

use crate::record::{AccuracyReport, WrongElement};
use crate::vocab::Tolerance;

const FIRST_WRONG_KEPT: usize = 10;

/// One chunk of `compare`'s work: its largest error (NaN outputs aside), its counts, its first
/// wrong elements and its largest |expected|.
#[derive(Default)]
struct ChunkCheck {
    max_abs_err: f64,
    wrong: usize,
    nan: usize,
    first_wrong: Vec<WrongElement>,
    max_expected: f64,
}

/// Elements a thread checks at a time: chunks of 64 Ki keep a 2^28-element output's check on
/// every core without a chunk's bookkeeping showing.
const CHUNK: usize = 1 << 16;

pub fn compare(got: &[f64], expected: &[f64], tolerance: Tolerance) -> AccuracyReport {
    use rayon::prelude::*;
    let paired = got.len().min(expected.len());
    let chunks: Vec<ChunkCheck> = (got[..paired].par_chunks(CHUNK))
        .zip(expected[..paired].par_chunks(CHUNK))
        .enumerate()
        .map(|(c, (got, expected))| {
            let mut chunk = ChunkCheck::default();
            for (k, (&g, &e)) in got.iter().zip(expected).enumerate() {
                let abs_err = (g - e).abs();
                let ok = abs_err <= tolerance.abs + tolerance.rel * e.abs();
                if g.is_nan() {
                    chunk.nan += 1;
                } else {
                    // `max` passes over a NaN error (a NaN expected value).
                    chunk.max_abs_err = chunk.max_abs_err.max(abs_err);
                }
                // `ok` is false for NaN, since every comparison with NaN is.
                if !ok {
                    chunk.wrong += 1;
                    if chunk.first_wrong.len() < FIRST_WRONG_KEPT {
                        chunk.first_wrong.push(WrongElement {
                            index: c * CHUNK + k,
                            got: g,
                            expected: e,
                        });
                    }
                }
                chunk.max_expected = chunk.max_expected.max(e.abs());
            }
            chunk
        })
        .collect();
    let mut report = AccuracyReport {
        passed: got.len() == expected.len(),
        tolerance,
        max_abs_err: 0.0,
        max_rel_err: 0.0,
        elements: expected.len(),
        subset_of: None,
        wrong_elements: got.len().abs_diff(expected.len()),
        mismatches_allowed: 0,
        nan_elements: 0,
        first_wrong: Vec::new(),
    };
    let mut max_expected = (expected[paired..].iter()).fold(0.0f64, |m, e| m.max(e.abs()));
    for chunk in chunks {
        report.max_abs_err = report.max_abs_err.max(chunk.max_abs_err);
        report.wrong_elements += chunk.wrong;
        report.nan_elements += chunk.nan;
        let room = FIRST_WRONG_KEPT - report.first_wrong.len();
        report
            .first_wrong
            .extend(chunk.first_wrong.into_iter().take(room));
        max_expected = max_expected.max(chunk.max_expected);
    }
    report.passed &= report.wrong_elements == 0;
    // A NaN output makes the errors NaN: no figure stands for it.
    report.max_rel_err = if report.nan_elements > 0 {
        report.max_abs_err = f64::NAN;
        f64::NAN
    } else if max_expected > 0.0 {
        report.max_abs_err / max_expected
    } else {
        report.max_abs_err
    };
    report
}

/// `report` passed where it has every element and at most `allowed` of them outside the
/// tolerance (a custom buffer's `check = { max_mismatches = k }`).
pub fn allow_mismatches(report: &mut AccuracyReport, allowed: u64, has_every_element: bool) {
    report.mismatches_allowed = allowed;
    if has_every_element && report.wrong_elements as u64 <= allowed {
        report.passed = true;
    }
}

/// As `compare`, for a reference of only some of the output's elements: `expected[k]` is element
/// `indices[k]`'s. An index past the output's end counts as wrong. The report says how many of how
/// many elements were checked, and the first wrong ones by their index in the whole output.
pub fn compare_at(
    got: &[f64],
    indices: &[usize],
    expected: &[f64],
    tolerance: Tolerance,
) -> AccuracyReport {
    let picked: Vec<f64> = indices
        .iter()
        .map(|&i| got.get(i).copied().unwrap_or(f64::NAN))
        .collect();
    let mut report = compare(&picked, expected, tolerance);
    for wrong in &mut report.first_wrong {
        wrong.index = indices[wrong.index];
    }
    report.subset_of = Some(got.len());
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::DType;

    #[test]
    fn within_tolerance_passes_and_outside_fails() {
        let tol = Tolerance {
            rel: 1e-6,
            abs: 0.0,
        };
        assert!(compare(&[1.0 + 5e-7, -3.0], &[1.0, -3.0], tol).passed);
        let r = compare(&[1.0, -3.0 * (1.0 + 2e-6)], &[1.0, -3.0], tol);
        assert!(!r.passed);
        assert_eq!(r.wrong_elements, 1);
        assert_eq!(r.first_wrong[0].index, 1);
        // Norm-wise: 6e-6 off over a largest |expected| of 3.
        assert!((r.max_rel_err - 2e-6).abs() < 1e-12);
        // An error on a near-zero element is measured against the vector, not the element.
        let r = compare(
            &[1.0, 1e-12],
            &[1.0, 1e-18],
            Tolerance {
                rel: 0.0,
                abs: 1e-9,
            },
        );
        assert!(r.passed && (r.max_rel_err - 1e-12).abs() < 1e-17, "{r:?}");
    }

    #[test]
    fn elements_past_the_first_chunk_are_found_and_named_in_order() {
        let expected: Vec<f64> = (0..200_003).map(|i| (i % 97) as f64 - 40.0).collect();
        let mut got = expected.clone();
        for i in [199_999, 70_001, 65_536, 3] {
            got[i] += 1.0;
        }
        got[150_000] = f64::NAN;
        let r = compare(&got, &expected, Tolerance::relative(1e-9));
        let indices: Vec<usize> = r.first_wrong.iter().map(|w| w.index).collect();
        assert_eq!(indices, [3, 65_536, 70_001, 150_000, 199_999]);
        assert_eq!((r.wrong_elements, r.nan_elements, r.passed), (5, 1, false));
        assert!(r.max_abs_err.is_nan() && r.max_rel_err.is_nan());
        got[150_000] = expected[150_000];
        let r = compare(&got, &expected, Tolerance::relative(1e-9));
        // 1.0 off over a largest |expected| of 56.
        assert_eq!((r.max_abs_err, r.max_rel_err), (1.0, 1.0 / 56.0));
    }

    #[test]
    fn nan_never_passes_even_with_infinite_tolerance() {
        let tol = Tolerance {
            rel: f64::INFINITY,
            abs: f64::INFINITY,
        };
        let r = compare(&[f64::NAN, 2.0], &[1.0, 2.0], tol);
        assert!(!r.passed);
        assert_eq!(r.nan_elements, 1);
        assert!(r.max_abs_err.is_nan());
    }

    #[test]
    fn the_float_overrides_leave_integer_tolerances_as_they_are() {
        let acc = crate::vocab::ToleranceOverrides {
            rel_tol_f32: Some(0.5),
            abs_tol_f64: Some(3.0),
            ..Default::default()
        };
        let tol = Tolerance::EXACT.with_overrides(DType::I32, &acc);
        assert_eq!(tol, Tolerance::EXACT);
        assert!(!compare(&[41.0], &[42.0], tol).passed);
        for dtype in [DType::U8, DType::I64] {
            let off_by_one = Tolerance { rel: 0.0, abs: 1.0 };
            assert_eq!(off_by_one.with_overrides(dtype, &acc), off_by_one);
        }
        let f32_tol = Tolerance { rel: 0.1, abs: 1.0 }.with_overrides(DType::F32, &acc);
        assert_eq!(f32_tol, Tolerance { rel: 0.5, abs: 1.0 });
    }

    #[test]
    fn a_subset_is_checked_at_its_indices_and_says_so() {
        let tol = Tolerance {
            rel: 0.0,
            abs: 1e-6,
        };
        let got = [0.0, 1.0, 2.0, 3.5, 4.0];
        let r = compare_at(&got, &[1, 3], &[1.0, 3.0], tol);
        assert!(!r.passed);
        assert_eq!((r.elements, r.subset_of, r.wrong_elements), (2, Some(5), 1));
        // The wrong element is named by its place in the whole output.
        assert_eq!(r.first_wrong[0].index, 3);
        assert!((r.max_abs_err - 0.5).abs() < 1e-12);
        assert!(compare_at(&got, &[0, 4], &[0.0, 4.0], tol).passed);
        // Elements outside the subset are not looked at; one past the end fails.
        assert!(!compare_at(&got, &[0, 7], &[0.0, 4.0], tol).passed);
    }

    #[test]
    fn length_mismatch_fails() {
        assert!(!compare(&[1.0], &[1.0, 2.0], Tolerance::EXACT).passed);
    }
}
