//! Comparison of device results with float64 references, and the error
//! bounds used as tolerances.
//!
//! Float32 sums are checked against the classic a-priori bound for
//! recursive summation (Higham, *Accuracy and Stability of Numerical
//! Algorithms*, 2nd ed., §4.2): a sum whose every term passes through at
//! most `k` float32 additions has `|computed - exact| <= gamma(k) * sum|x_i|`,
//! with `gamma(k) = k u / (1 - k u)` and `u = 2^-24` the unit roundoff. The
//! bound holds for any order of the additions, which is what lets one
//! tolerance cover tree reductions, grid-stride loops and atomics. Inputs
//! are float32 values, so the reference sees exactly the data the device saw.

/// Unit roundoff of float32.
pub const U32: f64 = f32::EPSILON as f64 / 2.0;

/// `gamma(k) = k u / (1 - k u)` for float32.
pub fn gamma(k: f64) -> f64 {
    let ku = k * U32;
    if ku >= 1.0 { f64::INFINITY } else { ku / (1.0 - ku) }
}

/// Depth (in additions) of a tree reduction over `threads` values.
pub fn tree_depth(threads: u32) -> f64 {
    f64::from(threads.next_power_of_two().trailing_zeros())
}

/// The outcome of one comparison: the error that was seen and what was allowed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    /// Observed error (absolute, in the output's units).
    pub error: f64,
    /// Allowed error.
    pub tolerance: f64,
}

impl Verdict {
    /// An exact comparison: `mismatches` wrong elements.
    pub fn exact(mismatches: usize) -> Self {
        Self { error: mismatches as f64, tolerance: 0.0 }
    }

    /// `true` when the error is within the tolerance (and not NaN).
    pub fn passed(&self) -> bool {
        self.error <= self.tolerance
    }

    /// Error over tolerance, for picking the worst of several checks; an
    /// error with zero tolerance ranks above every finite ratio.
    pub fn ratio(&self) -> f64 {
        if self.error.is_nan() {
            f64::INFINITY
        } else if self.tolerance > 0.0 {
            self.error / self.tolerance
        } else if self.error > 0.0 {
            f64::INFINITY
        } else {
            0.0
        }
    }

    /// The worse of two verdicts.
    #[must_use]
    pub fn worst(self, other: Verdict) -> Verdict {
        if other.ratio() > self.ratio() { other } else { self }
    }
}

/// The element-wise verdict of `got` against `reference` with a per-element tolerance.
pub fn elementwise(got: &[f32], reference: &[f64], tolerance: impl Fn(usize) -> f64) -> Verdict {
    if got.len() != reference.len() {
        return Verdict { error: f64::INFINITY, tolerance: 0.0 };
    }
    got.iter().zip(reference).enumerate().fold(Verdict { error: 0.0, tolerance: 0.0 }, |worst, (i, (&g, &r))| {
        worst.worst(Verdict { error: (f64::from(g) - r).abs(), tolerance: tolerance(i) })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_grows_and_saturates() {
        assert!(gamma(1.0) > U32 && gamma(2.0) > gamma(1.0));
        assert_eq!(gamma(1.0 / U32), f64::INFINITY);
    }

    #[test]
    fn tree_depth_of_odd_blocks() {
        assert_eq!(tree_depth(1), 0.0);
        assert_eq!(tree_depth(192), 8.0);
        assert_eq!(tree_depth(256), 8.0);
    }

    #[test]
    fn worst_prefers_larger_ratio_and_nan_fails() {
        let ok = Verdict { error: 1.0, tolerance: 10.0 };
        let bad = Verdict { error: 2.0, tolerance: 1.0 };
        assert_eq!(ok.worst(bad), bad);
        assert!(!Verdict { error: f64::NAN, tolerance: 1.0 }.passed());
        assert!(!elementwise(&[f32::NAN], &[0.0], |_| 1.0).passed());
        assert!(!elementwise(&[1.0], &[1.0, 2.0], |_| 1.0).passed());
    }
}
