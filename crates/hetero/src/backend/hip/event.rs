//! Events of the HIP backend: `hipEvent_t`s with blocking sync, and user
//! events built from a mapped page-locked word that streams wait on with
//! `hipStreamWaitValue32(>= 1)` (as in the CUDA backend).

use std::ptr::NonNull;
use std::sync::atomic::AtomicBool;

use crate::backend::gpu_common::GateWord;

use cubecl_hip_sys as hip;

use super::error::{check, error};
use crate::error::{ErrorKind, Result};

/// One hetero event.
pub(super) enum HipEvent {
    /// A HIP event and whether it was ever recorded.
    Timed { event: hip::hipEvent_t, recorded: AtomicBool },
    /// A host-released gate: the host word and the device address of it.
    User { flag: NonNull<u32>, device: *mut std::ffi::c_void },
}

// SAFETY: event handles may be used from any thread; the gate word is only
// accessed atomically.
unsafe impl Send for HipEvent {}
// SAFETY: as above.
unsafe impl Sync for HipEvent {}

impl HipEvent {
    /// A timing event on the current device.
    pub(super) fn timed() -> Result<Self> {
        let mut event: hip::hipEvent_t = std::ptr::null_mut();
        // SAFETY: event is a valid out-pointer.
        check("hipEventCreateWithFlags", unsafe {
            hip::hipEventCreateWithFlags(&mut event, hip::hipEventBlockingSync)
        })?;
        Ok(Self::Timed { event, recorded: AtomicBool::new(false) })
    }

    /// A closed gate.
    pub(super) fn user() -> Result<Self> {
        let mut host: *mut std::ffi::c_void = std::ptr::null_mut();
        let flags = hip::hipHostMallocMapped | hip::hipHostMallocPortable;
        // SAFETY: host is a valid out-pointer; 4 bytes hold the flag.
        check("hipHostMalloc", unsafe { hip::hipHostMalloc(&mut host, 4, flags) })?;
        let flag = NonNull::new(host.cast::<u32>())
            .ok_or_else(|| error("hipHostMalloc", ErrorKind::OutOfMemory, "null gate word"))?;
        let mut device: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: host was allocated mapped. On AMD the device address
        // usually equals the host one; on NVIDIA it need not.
        check("hipHostGetDevicePointer", unsafe { hip::hipHostGetDevicePointer(&mut device, host, 0) })?;
        let event = Self::User { flag, device };
        GateWord(flag).close();
        Ok(event)
    }

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
    /// word, to be freed once the device is synchronised.
    pub(super) fn destroy(&self) -> Result<Option<NonNull<u32>>> {
        match self {
            Self::Timed { event, .. } => {
                // SAFETY: created by hipEventCreateWithFlags, destroyed once.
                let code = unsafe { hip::hipEventDestroy(*event) };
                check("hipEventDestroy", code).map(|()| None)
            }
            Self::User { flag, .. } => {
                self.open();
                Ok(Some(*flag))
            }
        }
    }
}
