//! The element types the algorithms take, and their operators' rules.

use bytemuck::Pod;

use crate::device::Device;
use crate::safe::Arg;

mod sealed {
    pub trait Sealed {}
}

/// An element type of the algorithms: `u32`, `i32`, `u64`, `i64`, `f32`
/// and `f64` (the last on devices whose `DeviceInfo::fp64` is set).
pub trait Element: Pod + PartialOrd + Send + Sync + std::fmt::Debug + sealed::Sealed {
    /// The type's name in the kernel dialect.
    const NAME: &'static str;
    /// `f32` or `f64`.
    const FLOAT: bool;
    /// `a + b`, wrapping for integers.
    fn add(self, other: Self) -> Self;
    /// The identity of [`ReduceOp::Min`]: the largest value (`+inf` for floats).
    fn highest() -> Self;
    /// The identity of [`ReduceOp::Max`]: the smallest value (`-inf` for floats).
    fn lowest() -> Self;
    /// The value as a kernel argument.
    fn arg<'a, D: Device>(self) -> Arg<'a, D>;
}

macro_rules! element {
    ($t:ty, $name:literal, $float:literal, $add:expr, $high:expr, $low:expr) => {
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const NAME: &'static str = $name;
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
            fn arg<'a, D: Device>(self) -> Arg<'a, D> {
                self.into()
            }
        }
    };
}

element!(u32, "uint", false, u32::wrapping_add, u32::MAX, u32::MIN);
element!(i32, "int", false, i32::wrapping_add, i32::MAX, i32::MIN);
element!(u64, "ulong", false, u64::wrapping_add, u64::MAX, u64::MIN);
element!(i64, "long", false, i64::wrapping_add, i64::MAX, i64::MIN);
element!(f32, "float", true, |a: f32, b: f32| a + b, f32::INFINITY, f32::NEG_INFINITY);
element!(f64, "double", true, |a: f64, b: f64| a + b, f64::INFINITY, f64::NEG_INFINITY);

/// How [`super::Algorithms::reduce`] combines elements.
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
    pub fn identity<T: Element>(self) -> T {
        match self {
            ReduceOp::Sum => T::zeroed(),
            ReduceOp::Min => T::highest(),
            ReduceOp::Max => T::lowest(),
        }
    }

    /// `a` combined with `b`, as the device combines them.
    #[inline]
    pub fn apply<T: Element>(self, a: T, b: T) -> T {
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

    /// The definition of `alg_combine` the kernel source is built with.
    pub(super) fn source<T: Element>(self) -> String {
        let t = T::NAME;
        let nan = if T::FLOAT { " || a != a" } else { "" };
        let body = match self {
            ReduceOp::Sum if T::FLOAT => "a + b".to_string(),
            // Signed overflow is undefined in C: add as unsigned, which wraps.
            ReduceOp::Sum if t == "int" => "(int)((uint)a + (uint)b)".to_string(),
            ReduceOp::Sum if t == "long" => "(long)((ulong)a + (ulong)b)".to_string(),
            ReduceOp::Sum => "a + b".to_string(),
            ReduceOp::Min => format!("(b < a{nan}) ? b : a"),
            ReduceOp::Max => format!("(b > a{nan}) ? b : a"),
        };
        format!("DEVICE_FN {t} alg_combine({t} a, {t} b) {{ return {body}; }}\n")
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
        }
    }
}

/// Whether [`super::Algorithms::scan`] includes each element in its own output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanKind {
    /// `out[i] = in[0] + ... + in[i]`.
    Inclusive,
    /// `out[i] = in[0] + ... + in[i - 1]`; `out[0] = 0`.
    Exclusive,
}
