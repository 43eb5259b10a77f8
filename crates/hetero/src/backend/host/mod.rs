//! The host backend: the embedded default, needing nothing installed.
//!
//! A real asynchronous implementation of [`crate::Device`] on the CPU: each
//! stream is an in-order worker thread, so enqueueing returns at once;
//! events carry the time their stream reached them; cross-stream waits
//! block only the waiting stream's worker. Kernels are the Rust functions in
//! `kernels`, run block by block in parallel on a thread pool.
//!
//! Differences from a GPU a user may notice: there is no implicit default
//! stream (so [`crate::StreamFlags::non_blocking`] has no effect), pinned
//! memory is page-aligned but not page-locked, and the warp size is 1.

mod device;
mod error;
mod event;
mod kernels;
mod memory;
mod module;
mod stream;

pub use device::HostDevice;
