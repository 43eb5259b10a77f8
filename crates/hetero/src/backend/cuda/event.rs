//! Events of the CUDA backend.
//!
//! Ordinary events are `CUevent`s created with `CU_EVENT_BLOCKING_SYNC`
//! (host waits sleep instead of spinning) and timing enabled. CUDA has no
//! user events: a hetero user event is a word of mapped page-locked memory
//! that streams wait on with `cuStreamWaitValue32(>= 1)` and that the host
//! sets to 1 to release them.

use std::ptr::NonNull;
use std::sync::atomic::AtomicBool;

use crate::backend::gpu_common::GateWord;

use cudarc::driver::sys;

use super::error::check;
use crate::error::Result;

/// One hetero event.
pub(super) enum CuEvent {
    /// A driver event and whether it was ever recorded.
    Timed { event: sys::CUevent, recorded: AtomicBool },
    /// A host-released gate.
    User { flag: NonNull<u32>, device: sys::CUdeviceptr },
}

// SAFETY: CUevent handles may be used from any thread; the gate word is
// only accessed atomically.
unsafe impl Send for CuEvent {}
// SAFETY: as above.
unsafe impl Sync for CuEvent {}

impl CuEvent {
    /// A timing event. The context must be current.
    pub(super) fn timed() -> Result<Self> {
        let mut event: sys::CUevent = std::ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32;
        // SAFETY: event is a valid out-pointer.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut event, flags) })?;
        Ok(Self::Timed { event, recorded: AtomicBool::new(false) })
    }

    /// A closed gate. The context must be current.
    pub(super) fn user() -> Result<Self> {
        let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        // SAFETY: host is a valid out-pointer; 4 bytes hold the flag.
        check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, 4, flags) })?;
        let flag = NonNull::new(host.cast::<u32>()).ok_or_else(|| {
            super::error::error("cuMemHostAlloc", crate::error::ErrorKind::OutOfMemory, "null gate word")
        })?;
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: host was allocated with DEVICEMAP; device is a valid out-pointer.
        check("cuMemHostGetDevicePointer", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device, host, 0) })?;
        let event = Self::User { flag, device };
        GateWord(flag).close();
        Ok(event)
    }

    /// The gate word of a user event.
    fn gate(&self) -> Option<GateWord> {
        match self {
            Self::User { flag, .. } => Some(GateWord(*flag)),
            Self::Timed { .. } => None,
        }
    }

    /// Opens a user event's gate (no effect on timed events).
    pub(super) fn open(&self) {
        if let Some(gate) = self.gate() {
            gate.open();
        }
    }

    /// `true` once a user event's gate is open.
    pub(super) fn is_open(&self) -> bool {
        self.gate().is_none_or(|gate| gate.is_open())
    }

    /// Releases a timed event, or opens a user event's gate and returns its
    /// word: a stream may still be about to read it, so the caller frees it
    /// only when the device is synchronised. The context must be current.
    pub(super) fn destroy(&self) -> Result<Option<NonNull<u32>>> {
        match self {
            Self::Timed { event, .. } => {
                // SAFETY: created by cuEventCreate, destroyed once (removed from the table).
                let code = unsafe { sys::cuEventDestroy_v2(*event) };
                check("cuEventDestroy", code).map(|()| None)
            }
            Self::User { flag, .. } => {
                self.open();
                Ok(Some(*flag))
            }
        }
    }
}
