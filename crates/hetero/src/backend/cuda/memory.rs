//! Device memory and page-locked host memory.
//!
//! Device memory comes from the stream-ordered allocator
//! (`cuMemAllocAsync`/`cuMemFreeAsync` on the device's internal allocator
//! stream) where the device supports memory pools: unlike `cuMemFree`, it
//! never waits for the whole context to go idle, which would deadlock
//! against a stream held by a user event. Page-locked host memory is
//! `cuMemHostAlloc`/`cuMemFreeHost`, which may still wait for the context.

use std::ffi::c_void;
use std::ptr::NonNull;

use cudarc::driver::sys;

use super::error::{check, error};
use crate::error::{ErrorKind, Result};

/// Where an allocation lives.
#[derive(Clone, Copy)]
pub(super) enum Place {
    /// Device memory at this address.
    Device(sys::CUdeviceptr),
    /// Page-locked host memory at this address.
    Pinned(NonNull<u8>),
}

/// One allocation; freed by [`CuMemory::free`] with the context current.
///
/// Invariant: the allocation holds at least `max(size, 1)` bytes.
pub(super) struct CuMemory {
    pub(super) place: Place,
    pub(super) size: usize,
}

// SAFETY: device addresses and pinned host memory may be used from any
// thread of the process; access is ordered by the Device contract.
unsafe impl Send for CuMemory {}
// SAFETY: as above; &CuMemory only exposes addresses.
unsafe impl Sync for CuMemory {}

impl CuMemory {
    /// `size` bytes of device memory, ready for every stream when this
    /// returns. `pool_stream` is the allocator stream, or `None` where the
    /// device has no memory pools. The context must be current.
    pub(super) fn device(size: usize, pool_stream: Option<sys::CUstream>) -> Result<Self> {
        let mut ptr: sys::CUdeviceptr = 0;
        match pool_stream {
            Some(stream) => {
                // SAFETY: ptr is a valid out-pointer; the stream is live; the size is non-zero.
                check("cuMemAllocAsync", unsafe { sys::cuMemAllocAsync(&mut ptr, size.max(1), stream) })?;
                // SAFETY: the allocator stream only holds allocations and frees.
                check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream) })?;
            }
            // SAFETY: ptr is a valid out-pointer; the size is non-zero.
            None => check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, size.max(1)) })?,
        }
        Ok(Self { place: Place::Device(ptr), size })
    }

    /// `size` zeroed bytes of page-locked host memory, usable by every context.
    pub(super) fn pinned(size: usize) -> Result<Self> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: ptr is a valid out-pointer; the size is non-zero.
        check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut ptr, size.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) })?;
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| error("cuMemHostAlloc", ErrorKind::OutOfMemory, "the driver returned a null pointer"))?;
        // SAFETY: the block holds at least size bytes and is ours alone.
        unsafe { ptr.as_ptr().write_bytes(0, size) };
        Ok(Self { place: Place::Pinned(ptr), size })
    }

    /// Device address `offset` bytes in (device memory only).
    pub(super) fn device_ptr(&self, call: &'static str, offset: usize) -> Result<sys::CUdeviceptr> {
        match self.place {
            Place::Device(ptr) => Ok(ptr + offset as u64),
            Place::Pinned(_) => {
                Err(error(call, ErrorKind::InvalidHandle, "allocation is pinned host memory, not device memory"))
            }
        }
    }

    /// Releases the allocation, through `pool_stream` if it came from the
    /// pool. The context must be current and no queued work may use it.
    pub(super) fn free(&self, pool_stream: Option<sys::CUstream>) -> Result<()> {
        match (self.place, pool_stream) {
            // SAFETY: allocated by cuMemAllocAsync and freed once (the handle was removed from its table).
            (Place::Device(ptr), Some(stream)) => check("cuMemFreeAsync", unsafe { sys::cuMemFreeAsync(ptr, stream) }),
            // SAFETY: allocated by cuMemAlloc and freed once.
            (Place::Device(ptr), None) => check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) }),
            // SAFETY: allocated by cuMemHostAlloc and freed once.
            (Place::Pinned(ptr), _) => check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(ptr.as_ptr().cast()) }),
        }
    }
}
