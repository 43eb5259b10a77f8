//! Failure-atomicity of the typed layer (U2): when tracking fails after
//! work was enqueued, the call returns only once that work can no longer
//! touch the memory it uses. A wrapper device fails `record_event` on demand.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use hetero::backend::host::HostDevice;
use hetero::{
    AllocId, Backend, Context, Device, DeviceInfo, DeviceRange, Error, ErrorKind, EventId, KernelArg, KernelId,
    LaunchConfig, ModuleId, Result, StreamFlags, StreamId,
};

/// The host device, whose `record_event` fails while `fail_records` is set,
/// which reports `info` (the host's, or one changed by a test) and which
/// refuses device allocations beyond `budget` live bytes.
struct FlakyRecords {
    inner: HostDevice,
    info: DeviceInfo,
    fail_records: Arc<AtomicBool>,
    budget: usize,
    live: AtomicUsize,
}

impl Device for FlakyRecords {
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
        if self.fail_records.load(Ordering::SeqCst) {
            return Err(Error::new(Backend::Host, "record_event", ErrorKind::Driver, "injected failure"));
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
    fn build_module(&self, source: &str, host_kernels: &[hetero::host_kernel::HostKernel]) -> Result<ModuleId> {
        self.inner.build_module(source, host_kernels)
    }
    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.kernel(module, name) }
    }
    unsafe fn launch(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()> {
        // SAFETY: forwarded under the caller's contract.
        unsafe { self.inner.launch(kernel, config, args, stream) }
    }
}

fn wrap(inner: HostDevice, info: DeviceInfo, fail_records: Arc<AtomicBool>, budget: usize) -> FlakyRecords {
    FlakyRecords { inner, info, fail_records, budget, live: AtomicUsize::new(0) }
}

fn flaky() -> (Context<FlakyRecords>, Arc<AtomicBool>) {
    let fail_records = Arc::new(AtomicBool::new(false));
    let inner = HostDevice::new();
    let info = inner.info().clone();
    let device = wrap(inner, info, Arc::clone(&fail_records), usize::MAX);
    (Context::new(device), fail_records)
}

/// Out of memory with a full cache frees the cache and retries once: a
/// request the driver refuses only because cached blocks hold the budget
/// succeeds, and the cache is empty afterwards.
#[test]
fn out_of_memory_trims_the_cache_and_retries() {
    let inner = HostDevice::new();
    let info = inner.info().clone();
    let ctx = Context::with_allocator(
        wrap(inner, info, Arc::new(AtomicBool::new(false)), 1 << 20),
        hetero::AllocatorOptions::caching(),
    );
    // Fill the budget with cached blocks of one size class…
    let blocks: Vec<_> = (0..4).map(|_| ctx.alloc::<u8>(256 << 10).unwrap()).collect();
    drop(blocks);
    assert_eq!(ctx.allocator_stats().device.bytes_cached, 1 << 20);
    // …then ask for another class, which only fits once they are freed.
    let big = ctx.alloc::<u8>(512 << 10).unwrap();
    let stats = ctx.allocator_stats().device;
    assert_eq!((stats.bytes_cached, stats.bytes_in_use), (0, 512 << 10), "{stats:?}");
    // A request beyond the budget still fails, with the driver's error.
    assert_eq!(ctx.alloc::<u8>(1 << 20).unwrap_err().kind, ErrorKind::OutOfMemory);
    drop(big);
}

/// A `double` argument, or a buffer of them, is refused on a device that
/// reports no double precision, before anything is enqueued.
#[test]
fn double_is_refused_on_a_device_without_fp64() {
    let inner = HostDevice::new();
    let mut info = inner.info().clone();
    info.fp64 = false;
    let ctx = Context::new(wrap(inner, info, Arc::new(AtomicBool::new(false)), usize::MAX));
    let source = "KERNEL void scale_f64(GLOBAL double* y, double a, uint n) { }";
    let host = hetero::host_kernel::HostKernel::new("scale_f64", |_, _| Ok(()))
        .slice_mut::<f64>()
        .scalar::<f64>()
        .scalar::<u32>();
    let kernel = ctx.build_module_with(source, &[host]).unwrap().kernel("scale_f64").unwrap();
    let stream = ctx.stream().unwrap();
    let mut y = ctx.alloc::<f64>(4).unwrap();
    // SAFETY: refused before anything is enqueued (the test's assertion).
    let err = unsafe {
        stream.launch(&kernel, LaunchConfig::linear(1, 4, 0), &[(&mut y).into(), 2.0f64.into(), 4u32.into()])
    }
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidLaunch);
    assert!(err.message.contains("double") && err.message.contains("does not support"), "{err}");
}

/// Opens `gate` after 100 ms from another thread; the flag is set just before.
fn open_later(gate: Arc<hetero::UserEvent<FlakyRecords>>) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let opened = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&opened);
    let handle = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        flag.store(true, Ordering::SeqCst);
        gate.complete().unwrap();
    });
    (opened, handle)
}

/// U2: a pageable copy whose tracking fails must not return while the
/// device can still read the caller's slice (it returned before its
/// synchronise, and the caller freed memory a copy still read).
#[test]
fn pageable_copy_returns_only_after_the_device_is_done_with_the_slice() {
    let (ctx, fail_records) = flaky();
    let stream = ctx.stream().unwrap();
    let gate = Arc::new(ctx.user_event().unwrap());
    let mut device = ctx.alloc::<u32>(1 << 16).unwrap();
    stream.wait(&*gate).unwrap();
    let (opened, opener) = open_later(Arc::clone(&gate));
    fail_records.store(true, Ordering::SeqCst);
    let source = vec![7u32; 1 << 16];
    let err = stream.copy_from_host(&source, &mut device).unwrap_err();
    assert!(opened.load(Ordering::SeqCst), "returned while the copy was still queued behind the gate");
    assert!(err.message.contains("injected"), "{err}");
    drop(source);
    fail_records.store(false, Ordering::SeqCst);
    opener.join().unwrap();
    let mut out = vec![0u32; 1 << 16];
    stream.copy_to_host(&device, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 7));
}

/// U2: a pinned copy whose tracking fails leaves the buffers safe: the
/// error returns only once the untracked copy is done, so dropping the
/// buffers right after cannot free memory the copy uses.
#[test]
fn untracked_copy_finishes_before_its_buffers_can_go() {
    let (ctx, fail_records) = flaky();
    let stream = ctx.stream().unwrap();
    let gate = Arc::new(ctx.user_event().unwrap());
    let input = ctx.pinned_from_slice(&[3u32; 1 << 16]).unwrap();
    let mut device = ctx.alloc::<u32>(1 << 16).unwrap();
    stream.wait(&*gate).unwrap();
    let (opened, opener) = open_later(Arc::clone(&gate));
    fail_records.store(true, Ordering::SeqCst);
    assert!(stream.copy(&input, &mut device).is_err());
    assert!(opened.load(Ordering::SeqCst), "returned while the untracked copy was still queued");
    assert!(device.is_idle().unwrap());
    fail_records.store(false, Ordering::SeqCst);
    drop((input, device));
    assert_eq!(ctx.deferred_frees(), 0);
    opener.join().unwrap();
}
