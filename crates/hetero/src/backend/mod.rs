//! The backends, one folder each with the same file names. Vendor crates
//! and FFI appear only below this module.

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(any(feature = "cuda", feature = "hip"))]
pub(crate) mod gpu_common;
pub(crate) mod handles;
#[cfg(feature = "hip")]
pub mod hip;
#[cfg(feature = "host")]
pub mod host;
#[cfg(feature = "opencl")]
pub mod opencl;
