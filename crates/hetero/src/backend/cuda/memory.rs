//! Device memory (`cuMemAlloc`) and page-locked host memory (`cuMemHostAlloc`).

use std::ffi::c_void;
use std::ptr::NonNull;

use cudarc::driver::sys;

use super::error::{check, error};
use crate::error::{ErrorKind, Result};

/// Where an allocation lives.
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
    /// `size` bytes of device memory. The context must be current.
    pub(super) fn device(size: usize) -> Result<Self> {
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: ptr is a valid out-pointer; the size is non-zero.
        check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, size.max(1)) })?;
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

    /// Releases the allocation. The context must be current and no queued work may use it.
    pub(super) fn free(&self) -> Result<()> {
        match self.place {
            // SAFETY: allocated by cuMemAlloc and freed once (the handle was removed from its table).
            Place::Device(ptr) => check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) }),
            // SAFETY: allocated by cuMemHostAlloc and freed once.
            Place::Pinned(ptr) => check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(ptr.as_ptr().cast()) }),
        }
    }
}
