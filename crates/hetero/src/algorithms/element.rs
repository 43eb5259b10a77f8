//! The element types the algorithms take (the operators' rules are
//! [`crate::ops`]').

use crate::device::Device;
use crate::ops::Scalar;
use crate::safe::Arg;

/// An element type of the algorithms: `u32`, `i32`, `u64`, `i64`, `f32`
/// and `f64` (the last on devices whose `DeviceInfo::fp64` is set).
pub trait Element: Scalar {
    /// The value as a kernel argument.
    fn arg<'a, D: Device>(self) -> Arg<'a, D>;
}

macro_rules! element {
    ($($t:ty),*) => {$(
        impl Element for $t {
            fn arg<'a, D: Device>(self) -> Arg<'a, D> {
                self.into()
            }
        }
    )*};
}

element!(u32, i32, u64, i64, f32, f64);

/// Whether [`super::Algorithms::scan`] includes each element in its own output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanKind {
    /// `out[i] = in[0] + ... + in[i]`.
    Inclusive,
    /// `out[i] = in[0] + ... + in[i - 1]`; `out[0] = 0`.
    Exclusive,
}
