//! Streams of the HIP backend.

use cubecl_hip_sys as hip;

use super::error::check;
use crate::device::StreamFlags;
use crate::error::Result;

/// One `hipStream_t` of a device; destroyed when dropped, without waiting
/// (the runtime finishes its queued work first).
pub(super) struct HipStream(pub(super) hip::hipStream_t, i32);

// SAFETY: HIP stream handles may be used from any thread.
unsafe impl Send for HipStream {}
// SAFETY: as above.
unsafe impl Sync for HipStream {}

impl HipStream {
    /// A stream with the requested flags and priority on `device`, which
    /// must be the current device.
    pub(super) fn new(flags: StreamFlags, device: i32) -> Result<Self> {
        let mut stream: hip::hipStream_t = std::ptr::null_mut();
        let kind = if flags.non_blocking { hip::hipStreamNonBlocking } else { 0 };
        // SAFETY: stream is a valid out-pointer; HIP clamps the priority to its range.
        check("hipStreamCreateWithPriority", unsafe {
            hip::hipStreamCreateWithPriority(&mut stream, kind, flags.priority)
        })?;
        Ok(Self(stream, device))
    }
}

impl Drop for HipStream {
    fn drop(&mut self) {
        // SAFETY: the stream is live and destroyed once, here; selecting its
        // device first is what every HIP call of this backend does.
        unsafe {
            let _ = hip::hipSetDevice(self.1);
            let _ = hip::hipStreamDestroy(self.0);
        }
    }
}
