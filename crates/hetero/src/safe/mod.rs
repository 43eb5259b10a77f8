//! Layer 2: the typed safe layer, written once for every backend.
//!
//! # Rules of safe asynchronous memory
//!
//! - **No use-after-free, no blocking drop.** A [`Buffer`] remembers the
//!   event of every queued use; dropping it retires the allocation, which
//!   is freed once those events have completed (stream-ordered free).
//!   Dropping a [`Stream`] lets its queued work finish without waiting.
//! - **Failure-atomic.** If tracking fails after work was enqueued, the
//!   stream is synchronised before the error returns, so no untracked work
//!   can outlive the memory it uses.
//! - **No host access during a copy.** A [`PinnedBuffer`] gives out its
//!   contents ([`PinnedBuffer::host_slice`]) only after its queued copies
//!   are done, and writing work needs `&mut`, so it cannot be queued while
//!   the host holds a borrow.
//! - **Cross-stream order by events, not host syncs.** Using memory on a
//!   stream other than the one that last wrote it makes that stream wait
//!   for the write's event on the device; writing waits likewise for reads
//!   on other streams.
//! - **No mixing of devices, but by peer copies and waits.** Streams,
//!   events, buffers and kernels carry their device; combining objects of
//!   two contexts is an [`crate::ErrorKind::DeviceMismatch`] error, except
//!   for [`Stream::copy_peer`] and [`Stream::wait`] on another device's
//!   recorded event (same backend), whose hazard tracking spans both
//!   devices (the `peer` module).
//! - **Pageable copies block.** [`Stream::copy_from_host`] and
//!   [`Stream::copy_to_host`] borrow ordinary memory only for the call, so
//!   they return, also on error, only after the device is done with it.
//! - **Faults travel with events.** A stream that waits on an event of a
//!   stream that failed fails too; the error surfaces where the user
//!   synchronises.
//! - **The raw [`Device`](crate::Device) is `unsafe`.** Every trait method that takes a
//!   handle is an `unsafe fn`; the objects here own their handles and are
//!   the safe way in. [`Waitable`] and [`CopyKind`] are sealed.
//!
//! Kernel launches are `unsafe`: the kernel is foreign code that the
//! library cannot check (see [`Stream::launch`]).
//!
//! Safe code cannot reach the raw operations with the typed layer's handles
//! (U1: it destroyed a buffer's tracking event and filled pinned memory the
//! host was reading). This does not compile:
//!
//! ```compile_fail,E0133
//! use hetero::{Context, Device, backend::host::HostDevice};
//! let ctx = Context::new(HostDevice::new());
//! let stream = ctx.stream().unwrap();
//! ctx.device().destroy_stream(stream.id()).unwrap(); // error[E0133]: needs `unsafe`
//! ```
//!
//! nor does forging a waitable event from a raw handle:
//!
//! ```compile_fail,E0277
//! use hetero::{Context, EventId, backend::host::HostDevice};
//! let ctx = Context::new(HostDevice::new());
//! let stream = ctx.stream().unwrap();
//! stream.wait(&EventId(1)).unwrap(); // error[E0277]: `Waitable` is sealed
//! ```

mod alloc;
mod args;
mod buffer;
mod cache;
mod completion;
mod context;
mod event;
mod foreign;
mod gates;
mod graph;
mod marks;
mod module;
mod peer;
mod state;
mod stream;
mod tracker;
mod waiter;

pub use args::Arg;
pub use buffer::{
    Buffer, DeviceBuffer, DeviceSlice, DeviceSliceMut, Halves, OnDevice, Pinned, PinnedBuffer, PinnedSlice,
    PinnedSliceMut, Slice, SliceMut,
};
pub use cache::{
    ALLOCATOR_ENV, AllocatorMode, AllocatorOptions, AllocatorStats, KindStats, MAX_BLOCK, MIN_BLOCK, MemoryKind,
};
pub use completion::Completion;
pub use context::Context;
pub use event::{Event, UserEvent, Waitable};
pub use graph::{Graph, GraphArg, GraphBuffer, GraphEvent, GraphSlice, GraphStream, Node, Recorder};
pub use module::{Kernel, Module};
pub use stream::{CopyKind, Stream};
