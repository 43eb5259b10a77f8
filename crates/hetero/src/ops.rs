//! The element types of the collectives and algorithms, and the rules of
//! their operators: one place for what a combination means, shared by the
//! kernels' sources (through `hetero_kernels::combine`), the host
//! backend's algorithms and the host kernels' block collectives.

use bytemuck::Pod;

pub mod pairwise;

mod sealed {
    pub trait Sealed {}
}

/// An element type of the collectives: `u32`, `i32`, `u64`, `i64`, `f32`
/// and `f64`.
pub trait Scalar: Pod + PartialOrd + Send + Sync + std::fmt::Debug + sealed::Sealed {
    /// The type's name in the kernel dialect (`uint`).
    const NAME: &'static str;
    /// Its suffix in the dialect's collectives (`u32`).
    const SUFFIX: &'static str;
    /// `f32` or `f64`.
    const FLOAT: bool;
    /// `a + b`, wrapping for integers.
    fn add(self, other: Self) -> Self;
    /// The identity of [`ReduceOp::Min`]: the largest value (`+inf` for floats).
    fn highest() -> Self;
    /// The identity of [`ReduceOp::Max`]: the smallest value (`-inf` for floats).
    fn lowest() -> Self;
    /// The value as a float, for messages.
    #[doc(hidden)]
    fn approx_f64(self) -> f64;
    /// The scale of even bins over `[lower, upper)`: `bins / (upper -
    /// lower)` in the type for floats (`None` unless finite and positive),
    /// zero for integers.
    #[doc(hidden)]
    fn bin_scale(bins: usize, lower: Self, upper: Self) -> Option<Self>;
    /// `upper - lower` exactly, for integers.
    #[doc(hidden)]
    fn span(lower: Self, upper: Self) -> Option<u128>;
    /// The bin of `self` (`hist_bin` in `select.kern`), `None` where it is
    /// not counted: mode 0 the value itself (integers), mode 1 even bins.
    #[doc(hidden)]
    fn bin(self, mode: u32, bins: u32, lower: Self, upper: Self, scale: Self) -> Option<u32>;
}

/// [`Scalar::bin`] of an integer type.
macro_rules! int_bins {
    ($t:ty) => {
        fn approx_f64(self) -> f64 {
            self as f64
        }
        fn bin_scale(_: usize, _: Self, _: Self) -> Option<Self> {
            Some(0)
        }
        fn span(lower: Self, upper: Self) -> Option<u128> {
            u128::try_from(upper as i128 - lower as i128).ok()
        }
        fn bin(self, mode: u32, bins: u32, lower: Self, upper: Self, _: Self) -> Option<u32> {
            if mode == 0 {
                return u32::try_from(self).ok().filter(|&v| v < bins);
            }
            if !(self >= lower && self < upper) {
                return None;
            }
            // Two's complement through 64 bits, as the kernel's casts.
            let off = (self as i64 as u64).wrapping_sub(lower as i64 as u64);
            let range = (upper as i64 as u64).wrapping_sub(lower as i64 as u64);
            Some((off.wrapping_mul(u64::from(bins)) / range) as u32)
        }
    };
}

/// [`Scalar::bin`] of a float type.
macro_rules! float_bins {
    ($t:ty) => {
        fn approx_f64(self) -> f64 {
            self as f64
        }
        fn bin_scale(bins: usize, lower: Self, upper: Self) -> Option<Self> {
            let width = upper - lower;
            let scale = bins as $t / width;
            (width.is_finite() && scale.is_finite() && scale > 0.0).then_some(scale)
        }
        fn span(_: Self, _: Self) -> Option<u128> {
            None
        }
        fn bin(self, _: u32, bins: u32, lower: Self, upper: Self, scale: Self) -> Option<u32> {
            if !(self >= lower && self < upper) {
                return None;
            }
            // `as` saturates where C's conversion would be out of range;
            // the product is below bins but for rounding, so both truncate.
            Some((((self - lower) * scale) as u32).min(bins - 1))
        }
    };
}

macro_rules! scalar {
    ($t:ty, $name:literal, $suffix:literal, $float:literal, $add:expr, $high:expr, $low:expr, $bins:ident) => {
        impl sealed::Sealed for $t {}
        impl Scalar for $t {
            const NAME: &'static str = $name;
            const SUFFIX: &'static str = $suffix;
            const FLOAT: bool = $float;
            #[inline]
            fn add(self, other: Self) -> Self {
                $add(self, other)
            }
            fn highest() -> Self {
                $high
            }
            fn lowest() -> Self {
                $low
            }
            $bins!($t);
        }
    };
}

scalar!(u32, "uint", "u32", false, u32::wrapping_add, u32::MAX, u32::MIN, int_bins);
scalar!(i32, "int", "i32", false, i32::wrapping_add, i32::MAX, i32::MIN, int_bins);
scalar!(u64, "ulong", "u64", false, u64::wrapping_add, u64::MAX, u64::MIN, int_bins);
scalar!(i64, "long", "i64", false, i64::wrapping_add, i64::MAX, i64::MIN, int_bins);
scalar!(f32, "float", "f32", true, |a: f32, b: f32| a + b, f32::INFINITY, f32::NEG_INFINITY, float_bins);
scalar!(f64, "double", "f64", true, |a: f64, b: f64| a + b, f64::INFINITY, f64::NEG_INFINITY, float_bins);

/// How elements are combined.
///
/// - `Sum` wraps around for integers (as unsigned arithmetic does, signed
///   ones too); float sums are added in an order that depends on the
///   device and launch shape, so they differ from a sequential sum by
///   rounding: the tests allow `n * eps * sum of |x|`.
/// - `Min` and `Max` skip NaN elements as if they were absent (C's `fmin`
///   and `fmax` from the identity on): over only NaNs the result is the
///   identity; between `-0.0` and `0.0` either may come out. A float sum
///   with a NaN is NaN.
/// - Over no elements the result is the identity: 0, the type's largest
///   value (`+inf`) for `Min`, its smallest (`-inf`) for `Max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// The sum.
    Sum,
    /// The smallest element.
    Min,
    /// The largest element.
    Max,
}

impl ReduceOp {
    /// The identity of the operator for `T`.
    pub fn identity<T: Scalar>(self) -> T {
        match self {
            ReduceOp::Sum => T::zeroed(),
            ReduceOp::Min => T::highest(),
            ReduceOp::Max => T::lowest(),
        }
    }

    /// `a` combined with `b`, as the device combines them.
    #[inline]
    pub fn apply<T: Scalar>(self, a: T, b: T) -> T {
        #[allow(clippy::eq_op)] // a NaN is the one value unequal to itself
        let a_nan = a != a;
        match self {
            ReduceOp::Sum => a.add(b),
            ReduceOp::Min => {
                if b < a || a_nan {
                    b
                } else {
                    a
                }
            }
            ReduceOp::Max => {
                if b > a || a_nan {
                    b
                } else {
                    a
                }
            }
        }
    }

    /// The operator's name in the dialect's collectives (`add`, `min`, `max`).
    pub fn dialect_name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "add",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }

    /// `sum`, `min` or `max`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_and_max_ignore_nan_and_sums_wrap() {
        let nan = f32::NAN;
        assert_eq!(ReduceOp::Min.apply(nan, 1.0), 1.0);
        assert_eq!(ReduceOp::Min.apply(1.0, nan), 1.0);
        assert!(ReduceOp::Max.apply(nan, nan).is_nan());
        assert_eq!(ReduceOp::Max.apply(ReduceOp::Max.identity(), nan), f32::NEG_INFINITY);
        assert_eq!(ReduceOp::Max.apply(-1.0f64, 2.0), 2.0);
        assert_eq!(ReduceOp::Sum.apply(u32::MAX, 2), 1);
        assert_eq!(ReduceOp::Sum.apply(i64::MAX, 1), i64::MIN);
        assert_eq!(ReduceOp::Min.identity::<i32>(), i32::MAX);
        assert_eq!(ReduceOp::Max.identity::<f32>(), f32::NEG_INFINITY);
    }

    /// The device's combination is the same rule: a kernel's min over a NaN
    /// keeps the other value, as `apply` does.
    #[test]
    fn the_kernels_combine_by_the_same_rules() {
        assert_eq!(hetero_kernels::combine("min", "float"), "(b < a || a != a) ? b : a");
        assert_eq!(hetero_kernels::combine("max", "uint"), "(b > a) ? b : a");
        assert_eq!(hetero_kernels::combine("add", "long"), "(long)((ulong)a + (ulong)b)");
    }
}
