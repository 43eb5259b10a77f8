//! Streams of the CUDA backend.

use cudarc::driver::sys;

use super::error::check;
use crate::device::StreamFlags;
use crate::error::Result;

/// One `CUstream` of a context; destroyed when dropped, without waiting
/// (the driver finishes its queued work first).
pub(super) struct CuStream(pub(super) sys::CUstream, sys::CUcontext);

// SAFETY: CUstream handles may be used from any thread.
unsafe impl Send for CuStream {}
// SAFETY: as above.
unsafe impl Sync for CuStream {}

impl CuStream {
    /// A stream with the requested flags and priority in `context`, which
    /// must be current.
    pub(super) fn new(flags: StreamFlags, context: sys::CUcontext) -> Result<Self> {
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
        Ok(Self(stream, context))
    }
}

impl Drop for CuStream {
    fn drop(&mut self) {
        // SAFETY: the context outlives its streams (the device drops them
        // before releasing it); the stream is destroyed once, here.
        unsafe {
            let _ = sys::cuCtxSetCurrent(self.1);
            let _ = sys::cuStreamDestroy_v2(self.0);
        }
    }
}
