//! Streams of the CUDA backend.

use cudarc::driver::sys;

use super::error::check;
use crate::device::StreamFlags;
use crate::error::Result;

/// One `CUstream`; destroyed by [`CuStream::destroy`] with the context current.
pub(super) struct CuStream(pub(super) sys::CUstream);

// SAFETY: CUstream handles may be used from any thread.
unsafe impl Send for CuStream {}
// SAFETY: as above.
unsafe impl Sync for CuStream {}

impl CuStream {
    /// A stream with the requested flags and priority. The context must be current.
    pub(super) fn new(flags: StreamFlags) -> Result<Self> {
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let kind = if flags.non_blocking {
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING
        } else {
            sys::CUstream_flags::CU_STREAM_DEFAULT
        };
        // SAFETY: stream is a valid out-pointer; the driver clamps the priority to its range.
        check("cuStreamCreateWithPriority", unsafe {
            sys::cuStreamCreateWithPriority(&mut stream, kind as u32, flags.priority)
        })?;
        Ok(Self(stream))
    }

    /// Waits for the stream's work, then destroys it. The context must be current.
    pub(super) fn destroy(&self) -> Result<()> {
        // SAFETY: the stream is live and destroyed once (removed from its table).
        let synced = check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.0) });
        // SAFETY: as above.
        check("cuStreamDestroy", unsafe { sys::cuStreamDestroy_v2(self.0) })?;
        synced
    }
}
