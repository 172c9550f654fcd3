//! Numerics the algorithms share: a compensated float64 sum for references, and the float trait
//! their CPU implementations are generic over.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// Neumaier's compensated sum: exact to about one float64 rounding for well-scaled inputs.
pub fn compensated_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut carry) = (0.0f64, 0.0f64);
    for v in values {
        let t = sum + v;
        if sum.abs() >= v.abs() {
            carry += (sum - t) + v;
        } else {
            carry += (v - t) + sum;
        }
        sum = t;
    }
    sum + carry
}

/// The arithmetic CPU implementations need from f32 and f64.
pub trait Real:
    crate::vocab::Element
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + PartialOrd
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(x: f64) -> Self;
}

impl Real for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    fn from_f64(x: f64) -> f32 {
        x as f32
    }
}

impl Real for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn from_f64(x: f64) -> f64 {
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compensated_sum_keeps_what_a_plain_sum_loses() {
        let values = [1e16, 1.0, -1e16, 1.0];
        assert_eq!(compensated_sum(values.into_iter()), 2.0);
        assert_ne!(values.iter().sum::<f64>(), 2.0);
    }
}
