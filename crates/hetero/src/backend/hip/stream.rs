//! Streams of the HIP backend.

use cubecl_hip_sys as hip;

use super::error::check;
use crate::device::StreamFlags;
use crate::error::Result;

/// One `hipStream_t`; destroyed by [`HipStream::destroy`] with the device set.
pub(super) struct HipStream(pub(super) hip::hipStream_t);

// SAFETY: HIP stream handles may be used from any thread.
unsafe impl Send for HipStream {}
// SAFETY: as above.
unsafe impl Sync for HipStream {}

impl HipStream {
    /// A stream with the requested flags and priority on the current device.
    pub(super) fn new(flags: StreamFlags) -> Result<Self> {
        let mut stream: hip::hipStream_t = std::ptr::null_mut();
        let kind = if flags.non_blocking { hip::hipStreamNonBlocking } else { 0 };
        // SAFETY: stream is a valid out-pointer; HIP clamps the priority to its range.
        check("hipStreamCreateWithPriority", unsafe {
            hip::hipStreamCreateWithPriority(&mut stream, kind, flags.priority)
        })?;
        Ok(Self(stream))
    }

    /// Waits for the stream's work, then destroys it.
    pub(super) fn destroy(&self) -> Result<()> {
        // SAFETY: the stream is live and destroyed once (removed from its table).
        let synced = check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(self.0) });
        // SAFETY: as above.
        check("hipStreamDestroy", unsafe { hip::hipStreamDestroy(self.0) })?;
        synced
    }
}
