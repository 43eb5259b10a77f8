//! Device memory and page-locked host memory of the HIP backend.
//!
//! Device memory comes from the stream-ordered allocator
//! (`hipMallocAsync`/`hipFreeAsync` on the device's allocator stream),
//! which does not wait for other streams; where it is not supported,
//! `hipMalloc`/`hipFree`. Page-locked host memory is `hipHostMalloc`, whose
//! release (`hipHostFree`) synchronises the device on both platforms.

use std::ffi::c_void;
use std::ptr::NonNull;

use cubecl_hip_sys as hip;

use super::error::{check, error};
use crate::error::{ErrorKind, Result};

/// Where an allocation lives.
#[derive(Clone, Copy)]
pub(super) enum Place {
    /// Device memory; `pooled` when it came from `hipMallocAsync`.
    Device { ptr: hip::hipDeviceptr_t, pooled: bool },
    /// Page-locked host memory.
    Pinned(NonNull<u8>),
}

/// One allocation; freed by [`HipMemory::free`] with the device set.
///
/// Invariant: the allocation holds at least `max(size, 1)` bytes.
pub(super) struct HipMemory {
    pub(super) place: Place,
    pub(super) size: usize,
}

// SAFETY: device addresses and pinned host memory may be used from any
// thread; access is ordered by the Device contract.
unsafe impl Send for HipMemory {}
// SAFETY: as above.
unsafe impl Sync for HipMemory {}

impl HipMemory {
    /// `size` bytes of device memory, ready for every stream on return.
    pub(super) fn device(size: usize, pool_stream: hip::hipStream_t) -> Result<Self> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: ptr is a valid out-pointer; the stream is live; the size is non-zero.
        let code = unsafe { hip::hipMallocAsync(&mut ptr, size.max(1), pool_stream) };
        if code == hip::hipError_t_hipErrorNotSupported {
            // SAFETY: as above.
            check("hipMalloc", unsafe { hip::hipMalloc(&mut ptr, size.max(1)) })?;
            return Ok(Self { place: Place::Device { ptr, pooled: false }, size });
        }
        check("hipMallocAsync", code)?;
        // SAFETY: the allocator stream only holds allocations and frees.
        check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(pool_stream) })?;
        Ok(Self { place: Place::Device { ptr, pooled: true }, size })
    }

    /// `size` zeroed bytes of page-locked host memory.
    pub(super) fn pinned(size: usize) -> Result<Self> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: ptr is a valid out-pointer; the size is non-zero.
        check("hipHostMalloc", unsafe { hip::hipHostMalloc(&mut ptr, size.max(1), hip::hipHostMallocPortable) })?;
        let ptr = NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| error("hipHostMalloc", ErrorKind::OutOfMemory, "HIP returned a null pointer"))?;
        // SAFETY: the block holds at least size bytes and is ours alone.
        unsafe { ptr.as_ptr().write_bytes(0, size) };
        Ok(Self { place: Place::Pinned(ptr), size })
    }

    /// Device address `offset` bytes in (device memory only).
    pub(super) fn device_ptr(&self, call: &'static str, offset: usize) -> Result<hip::hipDeviceptr_t> {
        match self.place {
            // SAFETY: offset <= size is checked by the caller; the result stays in the allocation.
            Place::Device { ptr, .. } => Ok(unsafe { ptr.cast::<u8>().add(offset) }.cast()),
            Place::Pinned(_) => {
                Err(error(call, ErrorKind::InvalidHandle, "allocation is pinned host memory, not device memory"))
            }
        }
    }

    /// Releases the allocation; no queued work may use it.
    pub(super) fn free(&self, pool_stream: hip::hipStream_t) -> Result<()> {
        match self.place {
            Place::Device { ptr, pooled: true } => {
                // SAFETY: allocated by hipMallocAsync and freed once.
                let code = unsafe { hip::hipFreeAsync(ptr, pool_stream) };
                check("hipFreeAsync", code)
            }
            // SAFETY: allocated by hipMalloc and freed once.
            Place::Device { ptr, pooled: false } => check("hipFree", unsafe { hip::hipFree(ptr) }),
            // SAFETY: allocated by hipHostMalloc and freed once.
            Place::Pinned(ptr) => check("hipHostFree", unsafe { hip::hipHostFree(ptr.as_ptr().cast()) }),
        }
    }
}
