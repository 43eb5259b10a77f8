//! Allocations of the shared GPU device, and the mapped words of its gates
//! ([`GateWord`]).
//!
//! Device memory comes from the stream-ordered allocator on the device's
//! allocator stream where the device has memory pools: unlike a plain free,
//! it never waits for the whole device, which would deadlock against a
//! stream held by a user event. Page-locked host memory may still wait for
//! the device when it is allocated or released (both runtimes document it).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::runtime::Runtime;
use crate::device::Release;
use crate::error::{Error, ErrorKind, Result};

/// Where an allocation lives.
pub(super) enum Place<R: Runtime> {
    /// Device memory; `pooled` when it came from the stream-ordered allocator.
    Device { ptr: R::Ptr, pooled: bool },
    /// Page-locked host memory.
    Pinned(NonNull<u8>),
    /// Device memory another library owns; `release` runs at the free.
    Foreign { ptr: R::Ptr, release: Option<Release> },
}

/// One allocation.
///
/// Invariant: it holds at least `max(size, 1)` bytes.
pub(super) struct GpuMemory<R: Runtime> {
    pub(super) place: Place<R>,
    pub(super) size: usize,
}

// SAFETY: device addresses and page-locked memory may be used from any
// thread; access is ordered by the Device contract.
unsafe impl<R: Runtime> Send for GpuMemory<R> {}
// SAFETY: as above; &GpuMemory only exposes addresses.
unsafe impl<R: Runtime> Sync for GpuMemory<R> {}

impl<R: Runtime> GpuMemory<R> {
    /// Device address `offset` bytes in (device memory only; pinned memory
    /// is refused, so device operations never touch host memory).
    pub(super) fn device_ptr(&self, call: &'static str, offset: usize) -> Result<R::Ptr> {
        match self.place {
            Place::Device { ptr, .. } | Place::Foreign { ptr, .. } => Ok(R::ptr_add(ptr, offset)),
            Place::Pinned(_) => Err(Error::new(
                R::BACKEND,
                call,
                ErrorKind::InvalidHandle,
                "allocation is pinned host memory, not device memory",
            )),
        }
    }

    /// Releases the allocation. The device must be current and no queued
    /// work may use it.
    pub(super) fn free(&self, runtime: &R, pool: Option<R::Stream>) -> Result<()> {
        match self.place {
            // SAFETY: allocated by mem_alloc (pooled as recorded) and freed once.
            Place::Device { ptr, pooled } => unsafe { runtime.mem_free(ptr, if pooled { pool } else { None }) },
            // SAFETY: allocated by host_alloc and freed once.
            Place::Pinned(ptr) => unsafe { runtime.host_free(ptr) },
            Place::Foreign { ref release, .. } => {
                if let Some(release) = release {
                    release.run();
                }
                Ok(())
            }
        }
    }
}

/// A 4-byte word of mapped page-locked memory.
///
/// Invariant: `0` is 4-byte aligned and valid while the device lives (words
/// are freed only at its drop, after its streams are done); the host only
/// touches it atomically and never lowers it, devices only read it.
#[derive(Clone, Copy)]
pub(super) struct GateWord(pub(super) NonNull<u32>);

// SAFETY: the word is only accessed atomically (see the invariant).
unsafe impl Send for GateWord {}
// SAFETY: as above.
unsafe impl Sync for GateWord {}

impl GateWord {
    fn atomic(&self) -> &AtomicU32 {
        // SAFETY: the invariant of the type.
        unsafe { AtomicU32::from_ptr(self.0.as_ptr()) }
    }

    /// Sets a new word, which no stream has waited on, to 0.
    pub(super) fn reset(&self) {
        self.atomic().store(0, Ordering::SeqCst);
    }

    /// The latest generation opened (0 for a new word).
    pub(super) fn value(&self) -> u32 {
        self.atomic().load(Ordering::SeqCst)
    }

    /// Opens the gate of `generation`, releasing every stream waiting on it
    /// or on an earlier generation.
    pub(super) fn open(&self, generation: u32) {
        self.atomic().fetch_max(generation, Ordering::SeqCst);
    }
}
