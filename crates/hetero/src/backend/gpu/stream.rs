//! Streams of the shared GPU device.

use std::sync::Arc;

use super::runtime::Runtime;

/// One runtime stream, destroyed when the last holder lets go (the device
/// never lets a busy stream go, see `GpuDevice::destroy_stream`), unless
/// another library made it (`owned` false).
pub(super) struct GpuStream<R: Runtime> {
    pub(super) raw: R::Stream,
    runtime: Arc<R>,
    owned: bool,
}

// SAFETY: runtime streams may be used from any thread (CUDA and HIP
// document their handles as thread-safe).
unsafe impl<R: Runtime> Send for GpuStream<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuStream<R> {}

impl<R: Runtime> GpuStream<R> {
    pub(super) fn new(raw: R::Stream, runtime: Arc<R>) -> Self {
        Self { raw, runtime, owned: true }
    }

    /// A stream another library made and destroys.
    pub(super) fn adopted(raw: R::Stream, runtime: Arc<R>) -> Self {
        Self { raw, runtime, owned: false }
    }
}

impl<R: Runtime> Drop for GpuStream<R> {
    fn drop(&mut self) {
        if self.owned && self.runtime.enter().is_ok() {
            // SAFETY: the stream is live, of this device, destroyed once here,
            // and the device is current.
            unsafe { self.runtime.stream_destroy(self.raw) };
        }
    }
}
