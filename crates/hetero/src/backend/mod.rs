//! The backends, one folder each with the same file names. Vendor crates
//! and FFI appear only below this module.
//!
//! The file names of each folder (checked by `tests/tidy.rs`):
//!
//! | folders | files |
//! |---|---|
//! | `host` | `mod.rs device.rs error.rs event.rs memory.rs module.rs stream.rs` |
//! | `opencl` | `mod.rs bridge.rs device.rs error.rs event.rs graph.rs memory.rs module.rs stream.rs` |
//! | `cuda` | `mod.rs compile.rs error.rs runtime.rs` |
//! | `hip` | `mod.rs compile.rs error.rs ffi.rs runtime.rs` |
//! | `gpu` | `mod.rs capture.rs device.rs event.rs graph.rs loader.rs memory.rs module.rs runtime.rs stream.rs` |
//!
//! `host` and `opencl` implement [`crate::Device`] themselves; `opencl`
//! and `gpu` build graphs of their own (`graph.rs`), where the host
//! backend lets the typed layer replay a graph's nodes; `opencl` also
//! waits across its contexts (`bridge.rs`). `gpu` is the
//! one implementation for CUDA-like runtimes; `cuda` and `hip` hold only
//! what differs between them: discovery (`mod.rs`), the error-code table
//! (`error.rs`), the run-time compiler (`compile.rs`) and the runtime
//! calls, each wrapped once (`runtime.rs`). `hip` also loads its runtime
//! itself (`ffi.rs`: the bindings' loader misses the names runtime-only
//! ROCm installs use), where cudarc loads CUDA's. The host backend's Rust
//! kernels live in `host/kernels/`.

pub(crate) mod allocations;
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub mod cuda;
#[cfg(any(feature = "cuda", feature = "hip"))]
#[cfg_attr(docsrs, doc(cfg(any(feature = "cuda", feature = "hip"))))]
pub mod gpu;
pub(crate) mod handles;
#[cfg(feature = "hip")]
#[cfg_attr(docsrs, doc(cfg(feature = "hip")))]
pub mod hip;
#[cfg(feature = "host")]
#[cfg_attr(docsrs, doc(cfg(feature = "host")))]
pub mod host;
#[cfg(feature = "opencl")]
#[cfg_attr(docsrs, doc(cfg(feature = "opencl")))]
pub mod opencl;
pub(crate) mod peer;
