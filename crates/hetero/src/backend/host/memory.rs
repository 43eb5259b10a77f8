//! Device and "pinned" memory of the host backend: aligned, zeroed heap blocks.
//!
//! Device allocations are 256-byte aligned like `cudaMalloc`; pinned ones are
//! page aligned (the host backend does not lock pages: its copies are
//! `memcpy`s and need no DMA-able memory).

use std::alloc::Layout;
use std::ptr::NonNull;

use super::error::error;
use crate::device::Release;
use crate::error::{ErrorKind, Result};

/// Alignment of device allocations, as `cudaMalloc` guarantees.
pub(super) const DEVICE_ALIGN: usize = 256;
/// Alignment of pinned allocations: one page.
pub(super) const PAGE_ALIGN: usize = 4096;

/// One block of host memory: owned and zero-initialised, or adopted.
///
/// Invariant: `ptr` points to at least `size` bytes valid until drop: when
/// owned, `layout.size()` bytes allocated with `layout` (`size <=
/// layout.size()`); when adopted, as the adopter promised.
pub(super) struct HostMemory {
    ptr: NonNull<u8>,
    size: usize,
    pub(super) pinned: bool,
    owner: Owner,
}

/// Who frees a block.
enum Owner {
    /// This block, allocated with the layout.
    Heap(Layout),
    /// Another library: its release runs when the block is dropped.
    Foreign { _release: Option<Release> },
}

// SAFETY: HostMemory owns its block exclusively; concurrent access to the
// bytes goes through raw pointers under the Device contract (no two
// streams write one range without an event between them).
unsafe impl Send for HostMemory {}
// SAFETY: as above; &HostMemory only hands out the raw pointer.
unsafe impl Sync for HostMemory {}

impl HostMemory {
    /// Allocates `size` zeroed bytes; `limit` is the most one allocation may take.
    pub(super) fn new(call: &'static str, size: usize, pinned: bool, limit: u64) -> Result<Self> {
        let oom = || {
            error(
                call,
                ErrorKind::OutOfMemory,
                format!("cannot allocate {size} bytes (this host has {limit} bytes of memory)"),
            )
        };
        if size as u64 > limit {
            return Err(oom());
        }
        let align = if pinned { PAGE_ALIGN } else { DEVICE_ALIGN };
        let layout = Layout::from_size_align(size.max(1), align).map_err(|_| oom())?;
        // SAFETY: layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or_else(oom)?;
        Ok(Self { ptr, size, pinned, owner: Owner::Heap(layout) })
    }

    /// Device memory at `address` that another library owns.
    ///
    /// # Safety
    /// `size` bytes at `address` stay valid until the block is dropped
    /// (and its release has run).
    pub(super) unsafe fn adopted(address: u64, size: usize, release: Option<Release>) -> Result<Self> {
        let ptr = NonNull::new(address as usize as *mut u8)
            .ok_or_else(|| error("adopt_memory", ErrorKind::InvalidHandle, "the address is null"))?;
        Ok(Self { ptr, size, pinned: false, owner: Owner::Foreign { _release: release } })
    }

    /// Size in bytes as requested.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// Start of the block.
    pub(super) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if let Owner::Heap(layout) = self.owner {
            // SAFETY: ptr was allocated with layout in `new` and is freed once.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// A raw pointer that may cross to a stream worker thread.
///
/// The `Device` contract makes the caller keep the memory valid and
/// unaliased until the enqueued operation completes.
#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut u8);
// SAFETY: see the type's doc: validity across threads is the caller's contract.
unsafe impl Send for SendPtr {}
