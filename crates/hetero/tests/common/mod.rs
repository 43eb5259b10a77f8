//! A wrapper around the host device for tests that need a device to
//! misbehave (a memory budget, a changed description) or to do no work at
//! all. Failing driver calls is `hetero::faults::Faulty`'s job.

#![allow(dead_code)] // each test binary uses a part

use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use hetero::backend::host::HostDevice;
use hetero::{
    AllocId, Backend, Device, DeviceInfo, DeviceRange, Error, ErrorKind, EventId, KernelArg, KernelId, LaunchConfig,
    ModuleId, Result, StreamFlags, StreamId,
};

/// The host device, which reports `info` (the host's, or one changed by a test), which
/// refuses device allocations beyond `budget` live bytes, and which, with
/// `skip_work`, enqueues nothing for launches, copies to the device and
/// event records (so that a test sees the typed layer's own cost).
pub struct Wrapped {
    inner: HostDevice,
    info: DeviceInfo,
    budget: usize,
    live: AtomicUsize,
    skip_work: bool,
}

/// The host device inside a peer that is a `Wrapped`.
fn inner_of(peer: &dyn std::any::Any) -> Result<&HostDevice> {
    peer.downcast_ref::<Wrapped>().map(|w| &w.inner).ok_or_else(|| {
        Error::new(Backend::Host, "peer", ErrorKind::DeviceMismatch, "the peer is not a wrapped host device")
    })
}

impl Device for Wrapped {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }
    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId> {
        self.inner.create_stream(flags)
    }
    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.destroy_stream(stream) }
    }
    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.synchronize_stream(stream) }
    }
    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.query_stream(stream) }
    }
    fn create_event(&self) -> Result<EventId> {
        self.inner.create_event()
    }
    fn create_user_event(&self) -> Result<EventId> {
        self.inner.create_user_event()
    }
    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.complete_user_event(event) }
    }
    unsafe fn destroy_event(&self, event: EventId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.destroy_event(event) }
    }
    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        if self.skip_work {
            return Ok(());
        }
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.record_event(event, stream) }
    }
    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.query_event(event) }
    }
    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.synchronize_event(event) }
    }
    unsafe fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.elapsed_ms(start, end) }
    }
    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.stream_wait_event(stream, event) }
    }
    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        if self.live.load(Ordering::SeqCst) + bytes > self.budget {
            return Err(Error::new(Backend::Host, "alloc_device", ErrorKind::OutOfMemory, "over the test's budget"));
        }
        let alloc = self.inner.alloc_device(bytes)?;
        self.live.fetch_add(bytes, Ordering::SeqCst);
        Ok(alloc)
    }
    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        self.inner.alloc_pinned(bytes)
    }
    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.pinned_ptr(alloc) }
    }
    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.alloc_size(alloc) }
    }
    unsafe fn free(&self, alloc: AllocId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        let (size, pinned) = unsafe { (self.inner.alloc_size(alloc)?, self.inner.pinned_ptr(alloc).is_ok()) };
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.free(alloc) }?;
        if !pinned {
            self.live.fetch_sub(size, Ordering::SeqCst);
        }
        Ok(())
    }
    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        if self.skip_work {
            return Ok(());
        }
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.copy_h2d(src, dst, stream) }
    }
    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.copy_d2h(src, dst, stream) }
    }
    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.copy_d2d(src, dst, stream) }
    }
    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.fill_u32(dst, pattern, stream) }
    }
    fn as_peer(&self) -> &dyn std::any::Any {
        self
    }
    fn peer_route(&self, peer: &dyn std::any::Any) -> Result<hetero::PeerRoute> {
        self.inner.peer_route(inner_of(peer)?)
    }
    unsafe fn copy_peer(
        &self,
        src: hetero::PeerRange<'_>,
        dst: hetero::PeerRange<'_>,
        stream: StreamId,
    ) -> Result<hetero::PeerRoute> {
        let (from, to) = (inner_of(src.device)?, inner_of(dst.device)?);
        let (src, dst) = (hetero::PeerRange::new(from, src.range), hetero::PeerRange::new(to, dst.range));
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.copy_peer(src, dst, stream) }
    }
    unsafe fn stream_wait_peer_event(&self, stream: StreamId, peer: &dyn std::any::Any, event: EventId) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.stream_wait_peer_event(stream, inner_of(peer)?, event) }
    }
    unsafe fn stream_wait_peer_settled(
        &self,
        stream: StreamId,
        peer: &dyn std::any::Any,
        event: EventId,
    ) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.stream_wait_peer_settled(stream, inner_of(peer)?, event) }
    }
    fn build_module(
        &self,
        source: &str,
        options: &hetero::BuildOptions,
        host_kernels: &[hetero::host_kernel::HostKernel],
    ) -> Result<ModuleId> {
        self.inner.build_module(source, options, host_kernels)
    }
    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.kernel(module, name) }
    }
    unsafe fn kernel_limits(&self, kernel: KernelId) -> Result<hetero::KernelLimits> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.kernel_limits(kernel) }
    }
    unsafe fn launch(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()> {
        if self.skip_work {
            return Ok(());
        }
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.launch(kernel, config, args, stream) }
    }
}

/// The host device wrapped, reporting `info`.
pub fn wrap(inner: HostDevice, info: DeviceInfo, budget: usize) -> Wrapped {
    Wrapped { inner, info, budget, live: AtomicUsize::new(0), skip_work: false }
}

/// The host device wrapped so that launches, copies to the device and
/// event records do nothing.
pub fn skipping_work() -> Wrapped {
    let inner = HostDevice::new();
    let info = inner.info().clone();
    Wrapped { skip_work: true, ..wrap(inner, info, usize::MAX) }
}
