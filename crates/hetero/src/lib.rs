//! hetero: write GPU work once, run it on CUDA, HIP, OpenCL or the host CPU.
//!
//! Three layers:
//!
//! 1. [`Device`] — the backend interface: streams, events, device and
//!    pinned memory, asynchronous copies at any offset, run-time kernel
//!    builds and launches. Plain-data handles; unsafe by contract.
//! 2. The typed safe layer ([`Context`], [`Stream`], [`Event`],
//!    [`DeviceBuffer`], [`PinnedBuffer`], slices, [`Module`]), written once
//!    over `D: Device`. Its rules are documented in [`safe`].
//! 3. Backends under [`backend`], switched on by cargo features: `host`
//!    (default, needs nothing installed). [`AnyDevice`] picks among the
//!    compiled-in backends at run time; [`devices`] lists what is usable.
//!
//! ```
//! use hetero::{BlockRequest, Context, LaunchConfig, backend::host::HostDevice};
//!
//! # fn main() -> hetero::Result<()> {
//! let ctx = Context::new(HostDevice::new());
//! let stream = ctx.stream()?;
//! let module = ctx.build_module(hetero_kernels::UTIL)?;
//! let affine = module.kernel("affine_u32")?;
//! let mut x = ctx.alloc::<u32>(4)?;
//! stream.copy_from_host(&[1, 2, 3, 4], &mut x)?;
//! let n = 4u32;
//! {
//!     let xs = x.slice_mut(..)?;
//!     // SAFETY: affine_u32(x, n, a, b) touches x[0..n), and x holds n elements.
//!     // Up to 64 threads a block: as many as this kernel runs on the device.
//!     let config = LaunchConfig::covering([n, 1, 1], [affine.block_size(BlockRequest::new(64)), 1, 1], 0);
//!     unsafe { stream.launch(&affine, config, &[(&xs).into(), n.into(), 3u32.into(), 1u32.into()])? };
//! }
//! let mut out = [0u32; 4];
//! stream.copy_to_host(&x, &mut out)?;
//! assert_eq!(out, [4, 7, 10, 13]);
//! # Ok(())
//! # }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "host", feature = "opencl", feature = "cuda", feature = "hip")))]
compile_error!("hetero needs at least one backend feature: host, opencl, cuda or hip");

// The trait first: enum_dispatch writes `impl Device for AnyDevice` where
// it meets the second of the trait and the enum, so with `device` declared
// before `any` the impl lives in `any.rs` and the trait's module names no
// backend (the layer rule in ARCHITECTURE.md, `tests/tidy.rs`).
mod device;

pub mod algorithms;
mod any;
pub mod backend;
mod block;
pub mod dlpack;
mod error;
pub mod faults;
mod foreign;
pub mod host_kernel;
pub mod markers;
mod ops;
pub mod safe;
mod select;
mod shard;
mod signature;
mod sync;
pub mod testing;
mod types;

pub use any::{
    AnyDevice, Discovery, HOST_DEVICES_ENV, MAX_HOST_DEVICES, PREFERENCE, backend_devices, best_device,
    compiled_backends, devices, discover, is_compiled,
};
pub use block::BlockRequest;
pub use device::{
    AllocId, ArgBytes, Backend, BuildOptions, Device, DeviceInfo, DeviceRange, EventId, GraphId, GraphNode, GraphOp,
    KernelArg, KernelId, KernelLimits, LaunchConfig, LiveHandles, ModuleId, OPENCL_MAX_BLOCKS, PINNED_ALIGN,
    PORTABLE_GRID_LIMITS, PeerRange, PeerRoute, RawMemory, RawStream, Release, StreamFlags, StreamId, UnknownBackend,
    check_copy_ranges, check_fill_range, check_kernel_limits, check_range,
};
pub use error::{Error, ErrorKind, Result};
pub use select::{DeviceList, DeviceSelector};

/// The element traits buffers need, re-exported so that a crate's own
/// types can derive them without naming `bytemuck` (`#[derive(Clone,
/// Copy, hetero::Pod, hetero::Zeroable)]` needs bytemuck's `derive`
/// feature in the user's crate).
pub use bytemuck::{Pod, Zeroable};
pub use safe::{
    ALLOCATOR_ENV, AllocatorMode, AllocatorOptions, AllocatorStats, Arg, Buffer, Completion, Context, DeviceBuffer,
    DeviceSlice, DeviceSliceMut, Event, Graph, GraphArg, GraphBuffer, GraphEvent, GraphSlice, GraphStream, Kernel,
    KindStats, MemoryKind, Module, Node, OnDevice, Pinned, PinnedBuffer, PinnedSlice, PinnedSliceMut, Recorder, Slice,
    SliceMut, Stream, UserEvent,
};

/// Portable kernel sources, re-exported so downstream crates need one dependency.
pub use hetero_kernels as kernels;

/// The README's Rust examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The Rust examples of the guides in `docs/guide/`, compiled and run as doctests.
#[cfg(doctest)]
pub mod guide_doctests {
    #[doc = include_str!("../../../docs/guide/frameworks.md")]
    pub struct Frameworks;
    #[doc = include_str!("../../../docs/guide/kernels.md")]
    pub struct Kernels;
    #[doc = include_str!("../../../docs/guide/collectives.md")]
    pub struct Collectives;
    #[doc = include_str!("../../../docs/guide/deterministic.md")]
    pub struct Deterministic;
    #[doc = include_str!("../../../docs/guide/several-devices.md")]
    pub struct SeveralDevices;
    #[doc = include_str!("../../../docs/guide/algorithms.md")]
    pub struct Algorithms;
    #[doc = include_str!("../../../docs/guide/sorting.md")]
    pub struct Sorting;
    #[doc = include_str!("../../../docs/guide/graphs.md")]
    pub struct Graphs;
    #[doc = include_str!("../../../docs/guide/profiling.md")]
    pub struct Profiling;
    #[doc = include_str!("../../../docs/guide/interop.md")]
    pub struct Interop;
}
