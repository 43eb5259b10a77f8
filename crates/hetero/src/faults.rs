//! Fault injection: [`Faulty`], a device that fails chosen or random
//! driver calls of the device it wraps, for tests of code that must stay
//! correct when a driver fails in the middle of work (the stress test's
//! `--inject-faults`, and a downstream crate's own tests).
//!
//! A failed call fails the way the trait's contract lets a driver fail,
//! with the wrapped backend's own error kind and native code (an
//! allocation is [`ErrorKind::OutOfMemory`] with `CUDA_ERROR_OUT_OF_MEMORY`,
//! `hipErrorOutOfMemory` or `CL_MEM_OBJECT_ALLOCATION_FAILURE`; anything
//! else is [`ErrorKind::Driver`] with `CUDA_ERROR_UNKNOWN`,
//! `hipErrorUnknown` or `CL_OUT_OF_RESOURCES`):
//!
//! - an allocation, a creation, a recording, an enqueue, a query or a
//!   stream wait fails *instead of* the call: nothing was allocated,
//!   created, recorded or enqueued;
//! - a synchronisation fails *after* the call returned: the work is done
//!   (or can never run), as the contract requires of a failed
//!   synchronisation.
//!
//! Releases (`free`, `destroy_*`, completing a user event) never fail:
//! what is checked is that every failure leaves memory safe and is
//! reported, not what a leak looks like.
//!
//! The choice is reproducible: the `k`-th call at a site fails when the
//! plan names it ([`FaultPlan::nth`]) or when a hash of the seed, the site
//! and `k` falls under the rate ([`FaultPlan::random`]). Calls from several
//! threads take their `k` in the order they arrive, so the same seed fails
//! the same calls of each site, though not always on the same thread.
//!
//! Every injected error's message starts with `injected fault #<id>`
//! ([`injected_id`]), and the [`FaultLog`] keeps each injection, so that a
//! test can account for every one: surfaced as the error of an operation,
//! or absorbed by the library (a query it retries later, an allocation it
//! retries after trimming its cache).
//!
//! ```
//! use hetero::faults::{FaultPlan, FaultSite, Faulty, injected_id};
//! use hetero::{Context, ErrorKind, backend::host::HostDevice};
//!
//! # fn main() -> hetero::Result<()> {
//! // The first two device allocations fail. The caching allocator retries
//! // a failed allocation once, after giving its cached blocks back, so the
//! // first fault is absorbed and the second reaches the caller.
//! let plan = FaultPlan::none().nth(FaultSite::Alloc, 0).nth(FaultSite::Alloc, 1);
//! let device = Faulty::new(HostDevice::new(), plan);
//! let log = device.log();
//! let ctx = Context::new(device);
//! let err = ctx.alloc::<u32>(1024).unwrap_err();
//! assert_eq!(err.kind, ErrorKind::OutOfMemory);
//! assert_eq!(injected_id(&err), Some(1));
//! assert!(ctx.alloc::<u32>(1024).is_ok());
//! assert_eq!(log.injected(), 2);
//! drop(ctx);
//! assert_eq!(log.released_within(std::time::Duration::from_secs(10)).total(), 0);
//! # Ok(())
//! # }
//! ```

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::device::{
    AllocId, Backend, Device, DeviceInfo, DeviceRange, EventId, GraphId, GraphNode, KernelArg, KernelId, KernelLimits,
    LaunchConfig, LiveHandles, ModuleId, PeerRange, PeerRoute, RawMemory, RawStream, Release, StreamFlags, StreamId,
};
use crate::error::{Error, ErrorKind, Result};

/// A kind of driver call that can be made to fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultSite {
    /// Device and pinned allocations.
    Alloc,
    /// Creating streams and events.
    Create,
    /// Recording an event.
    Record,
    /// Enqueuing a copy, a fill, a launch or a graph.
    Enqueue,
    /// Querying an event or a stream.
    Query,
    /// Making a stream wait for an event.
    Wait,
    /// Synchronising a stream or an event (fails after the wait).
    Synchronize,
}

impl FaultSite {
    /// Every site, in order.
    pub const ALL: [FaultSite; 7] = [
        FaultSite::Alloc,
        FaultSite::Create,
        FaultSite::Record,
        FaultSite::Enqueue,
        FaultSite::Query,
        FaultSite::Wait,
        FaultSite::Synchronize,
    ];

    /// The site's name, as `--inject-faults` output prints it.
    pub fn name(self) -> &'static str {
        match self {
            FaultSite::Alloc => "alloc",
            FaultSite::Create => "create",
            FaultSite::Record => "record",
            FaultSite::Enqueue => "enqueue",
            FaultSite::Query => "query",
            FaultSite::Wait => "wait",
            FaultSite::Synchronize => "synchronize",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Which calls a [`Faulty`] device fails.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultPlan {
    seed: u64,
    /// Probability that a call at an enabled site fails, in [0, 1].
    rate: f64,
    sites: [bool; 7],
    /// Calls that fail whatever the rate: (site, index of the call at that site).
    nth: Vec<(FaultSite, u64)>,
}

impl FaultPlan {
    /// Fails nothing (until [`FaultPlan::nth`] names calls).
    pub fn none() -> Self {
        Self { seed: 0, rate: 0.0, sites: [true; 7], nth: Vec::new() }
    }

    /// Fails each call at every site with probability `rate`, chosen by a
    /// hash of `seed`; `rate` must be in [0, 1].
    pub fn random(rate: f64, seed: u64) -> Result<Self> {
        if !(0.0..=1.0).contains(&rate) {
            return Err(Error::new(
                Backend::Host,
                "FaultPlan::random",
                ErrorKind::Config,
                format!("a fault rate is a probability in [0, 1], not {rate}"),
            ));
        }
        Ok(Self { seed, rate, ..Self::none() })
    }

    /// Injects random faults only at `sites` (calls named by
    /// [`FaultPlan::nth`] fail wherever they are).
    #[must_use]
    pub fn only(mut self, sites: &[FaultSite]) -> Self {
        self.sites = [false; 7];
        for site in sites {
            self.sites[site.index()] = true;
        }
        self
    }

    /// Also fails the `n`-th call (from 0) at `site`.
    #[must_use]
    pub fn nth(mut self, site: FaultSite, n: u64) -> Self {
        self.nth.push((site, n));
        self
    }

    /// Whether the `k`-th call at `site` fails.
    fn fails(&self, site: FaultSite, k: u64) -> bool {
        if self.nth.contains(&(site, k)) {
            return true;
        }
        if self.rate <= 0.0 || !self.sites[site.index()] {
            return false;
        }
        let x = splitmix64(self.seed ^ splitmix64((site.index() as u64) << 56 ^ k));
        // The top 53 bits as a fraction in [0, 1).
        ((x >> 11) as f64) * (1.0 / (1u64 << 53) as f64) < self.rate
    }
}

/// SplitMix64's finaliser: a well-mixed hash of one word.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One injected fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injection {
    /// Its number, in the order of injection (`injected fault #<id>`).
    pub id: u64,
    /// Its site.
    pub site: FaultSite,
    /// The trait call that failed, e.g. `record_event`.
    pub call: &'static str,
}

/// What a [`Faulty`] device has done: every call counted by site, every
/// injection, and the objects it created that are still live. Shared
/// (an `Arc`), so that it outlives the device it watches.
#[derive(Debug, Default)]
pub struct FaultLog {
    disabled: AtomicBool,
    calls: [AtomicU64; 7],
    next_id: AtomicU64,
    injections: Mutex<Vec<Injection>>,
    allocations: AtomicI64,
    events: AtomicI64,
    streams: AtomicI64,
    invalid_handles: AtomicU64,
}

impl FaultLog {
    /// Stops (`false`) or resumes (`true`) injecting; calls are counted either way.
    pub fn set_enabled(&self, enabled: bool) {
        self.disabled.store(!enabled, Ordering::SeqCst);
    }

    /// How many calls were made at `site`.
    pub fn calls(&self, site: FaultSite) -> u64 {
        self.calls[site.index()].load(Ordering::Relaxed)
    }

    /// How many faults were injected.
    pub fn injected(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst)
    }

    /// Every injection so far, in order.
    pub fn injections(&self) -> Vec<Injection> {
        self.injections.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Calls the wrapped device refused as naming a handle it does not
    /// have ([`ErrorKind::InvalidHandle`]): an event, stream or allocation
    /// used after its release. Zero for a caller that keeps the trait's
    /// contract.
    pub fn invalid_handles(&self) -> u64 {
        self.invalid_handles.load(Ordering::SeqCst)
    }

    /// Allocations, events and streams created through the device and not
    /// yet released through it (the rest of [`LiveHandles`] is zero): all
    /// zero once a [`crate::Context`] over it has been dropped, if every
    /// object it made was given back.
    pub fn live(&self) -> LiveHandles {
        let count = |c: &AtomicI64| usize::try_from(c.load(Ordering::SeqCst)).unwrap_or(0);
        LiveHandles {
            streams: count(&self.streams),
            events: count(&self.events),
            allocations: count(&self.allocations),
            ..LiveHandles::default()
        }
    }

    /// [`FaultLog::live`] once it is all zero, or as it is after `timeout`.
    /// The last holder of a device may be a thread of the library (the
    /// completion waker, which drops the device when it held the last
    /// reference), so a device is released shortly after a context's drop,
    /// not always within it.
    pub fn released_within(&self, timeout: std::time::Duration) -> LiveHandles {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let live = self.live();
            if live.total() == 0 || std::time::Instant::now() >= deadline {
                return live;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

/// The number of the injected fault `error` reports, or `None` for an
/// error that no [`Faulty`] device injected.
pub fn injected_id(error: &Error) -> Option<u64> {
    number_after_mark(error.message.strip_prefix(MARK)?)
}

/// Every injected fault `error` reports: the one it is, and any its
/// message tells of after it (the library names a second failure that
/// followed the first, as when recording a tracking event failed twice).
pub fn injected_ids(error: &Error) -> Vec<u64> {
    if injected_id(error).is_none() {
        return Vec::new();
    }
    error.message.split(MARK).skip(1).filter_map(number_after_mark).collect()
}

/// How an injected fault's message starts.
const MARK: &str = "injected fault #";

fn number_after_mark(rest: &str) -> Option<u64> {
    rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()
}

/// A device whose driver calls fail as a [`FaultPlan`] says; everything
/// else is the wrapped device's (see the module doc).
#[derive(Debug)]
pub struct Faulty<D: Device> {
    inner: D,
    plan: FaultPlan,
    log: Arc<FaultLog>,
}

impl<D: Device> Faulty<D> {
    /// Wraps `inner`.
    pub fn new(inner: D, plan: FaultPlan) -> Self {
        Self { inner, plan, log: Arc::new(FaultLog::default()) }
    }

    /// Wraps `inner`, counting into `log`, which another device may share:
    /// two devices that copy between each other under one plan then
    /// number their faults in one sequence and are accounted together.
    pub fn with_log(inner: D, plan: FaultPlan, log: Arc<FaultLog>) -> Self {
        Self { inner, plan, log }
    }

    /// The log of calls and injections, which outlives the device.
    pub fn log(&self) -> Arc<FaultLog> {
        Arc::clone(&self.log)
    }

    /// The wrapped device.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// Counts a call at `site`: the injected error when it is to fail.
    #[inline]
    fn check(&self, site: FaultSite, call: &'static str) -> Result<()> {
        let k = self.log.calls[site.index()].fetch_add(1, Ordering::Relaxed);
        if self.log.disabled.load(Ordering::Relaxed) || !self.plan.fails(site, k) {
            return Ok(());
        }
        Err(self.inject(site, call))
    }

    #[cold]
    fn inject(&self, site: FaultSite, call: &'static str) -> Error {
        let mut injections = self.log.injections.lock().unwrap_or_else(PoisonError::into_inner);
        let id = self.log.next_id.fetch_add(1, Ordering::SeqCst);
        injections.push(Injection { id, site, call });
        let backend = self.inner.info().backend;
        let (kind, code, name) = native_failure(backend, site);
        let message = format!("{MARK}{id} ({} site): {name}", site.name());
        match code {
            Some(code) => Error::native(backend, call, code, message).with_kind(kind),
            None => Error::new(backend, call, kind, message),
        }
    }

    /// Runs a synchronising call, then fails it when the plan says so.
    fn after(&self, call: &'static str, result: Result<()>) -> Result<()> {
        result?;
        self.check(FaultSite::Synchronize, call)
    }

    /// Notes a call the wrapped device refused for its handle.
    fn seen<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result
            && e.kind == ErrorKind::InvalidHandle
        {
            self.log.invalid_handles.fetch_add(1, Ordering::SeqCst);
        }
        result
    }

    fn counted<T>(counter: &AtomicI64, by: i64, result: Result<T>) -> Result<T> {
        if result.is_ok() {
            counter.fetch_add(by, Ordering::SeqCst);
        }
        result
    }
}

/// The kind, native code and its name that `backend`'s driver gives for a
/// failure at `site`.
fn native_failure(backend: Backend, site: FaultSite) -> (ErrorKind, Option<i64>, &'static str) {
    match (backend, site) {
        (Backend::Cuda, FaultSite::Alloc) => (ErrorKind::OutOfMemory, Some(2), "CUDA_ERROR_OUT_OF_MEMORY"),
        (Backend::Cuda, _) => (ErrorKind::Driver, Some(999), "CUDA_ERROR_UNKNOWN"),
        (Backend::Hip, FaultSite::Alloc) => (ErrorKind::OutOfMemory, Some(2), "hipErrorOutOfMemory"),
        (Backend::Hip, _) => (ErrorKind::Driver, Some(999), "hipErrorUnknown"),
        (Backend::OpenCl, FaultSite::Alloc) => (ErrorKind::OutOfMemory, Some(-4), "CL_MEM_OBJECT_ALLOCATION_FAILURE"),
        (Backend::OpenCl, _) => (ErrorKind::Driver, Some(-5), "CL_OUT_OF_RESOURCES"),
        (Backend::Host, FaultSite::Alloc) => (ErrorKind::OutOfMemory, None, "host allocation failed"),
        (Backend::Host, _) => (ErrorKind::Driver, None, "host worker failed"),
    }
}

// Every method passes the caller's contract on to the wrapped device
// unchanged: an injected failure only ever does less (nothing at all)
// or, for a synchronisation, reports an error after the full wait.
impl<D: Device> Device for Faulty<D> {
    fn info(&self) -> &DeviceInfo {
        self.inner.info()
    }

    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId> {
        self.check(FaultSite::Create, "create_stream")?;
        Self::counted(&self.log.streams, 1, self.inner.create_stream(flags))
    }

    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        Self::counted(&self.log.streams, -1, self.seen(unsafe { self.inner.destroy_stream(stream) }))
    }

    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        self.after("synchronize_stream", self.seen(unsafe { self.inner.synchronize_stream(stream) }))
    }

    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        self.check(FaultSite::Query, "query_stream")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.query_stream(stream) })
    }

    fn create_event(&self) -> Result<EventId> {
        self.check(FaultSite::Create, "create_event")?;
        Self::counted(&self.log.events, 1, self.inner.create_event())
    }

    fn create_sync_event(&self) -> Result<EventId> {
        self.check(FaultSite::Create, "create_sync_event")?;
        Self::counted(&self.log.events, 1, self.inner.create_sync_event())
    }

    fn create_user_event(&self) -> Result<EventId> {
        self.check(FaultSite::Create, "create_user_event")?;
        Self::counted(&self.log.events, 1, self.inner.create_user_event())
    }

    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.complete_user_event(event) })
    }

    unsafe fn destroy_event(&self, event: EventId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        Self::counted(&self.log.events, -1, self.seen(unsafe { self.inner.destroy_event(event) }))
    }

    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Record, "record_event")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.record_event(event, stream) })
    }

    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        self.check(FaultSite::Query, "query_event")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.query_event(event) })
    }

    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        self.after("synchronize_event", self.seen(unsafe { self.inner.synchronize_event(event) }))
    }

    unsafe fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.elapsed_ms(start, end) })
    }

    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        self.check(FaultSite::Wait, "stream_wait_event")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.stream_wait_event(stream, event) })
    }

    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        self.check(FaultSite::Alloc, "alloc_device")?;
        Self::counted(&self.log.allocations, 1, self.inner.alloc_device(bytes))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        self.check(FaultSite::Alloc, "alloc_pinned")?;
        Self::counted(&self.log.allocations, 1, self.inner.alloc_pinned(bytes))
    }

    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.pinned_ptr(alloc) })
    }

    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.alloc_size(alloc) })
    }

    unsafe fn free(&self, alloc: AllocId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        Self::counted(&self.log.allocations, -1, self.seen(unsafe { self.inner.free(alloc) }))
    }

    unsafe fn adopt_memory(&self, memory: RawMemory, len: usize, release: Option<Release>) -> Result<AllocId> {
        // SAFETY: the caller's contract, passed on.
        Self::counted(&self.log.allocations, 1, unsafe { self.inner.adopt_memory(memory, len, release) })
    }

    unsafe fn raw_memory(&self, alloc: AllocId) -> Result<RawMemory> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.raw_memory(alloc) }
    }

    unsafe fn adopt_stream(&self, stream: RawStream) -> Result<StreamId> {
        // SAFETY: the caller's contract, passed on.
        Self::counted(&self.log.streams, 1, unsafe { self.inner.adopt_stream(stream) })
    }

    unsafe fn raw_stream(&self, stream: StreamId) -> Result<RawStream> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.inner.raw_stream(stream) }
    }

    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "copy_h2d")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.copy_h2d(src, dst, stream) })
    }

    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "copy_d2h")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.copy_d2h(src, dst, stream) })
    }

    unsafe fn copy_h2d_sync(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "copy_h2d_sync")?;
        // SAFETY: the caller's contract, passed on; an injected failure
        // comes after the copy is done, as the contract allows.
        self.after("copy_h2d_sync", self.seen(unsafe { self.inner.copy_h2d_sync(src, dst, stream) }))
    }

    unsafe fn copy_d2h_sync(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "copy_d2h_sync")?;
        // SAFETY: as in copy_h2d_sync.
        self.after("copy_d2h_sync", self.seen(unsafe { self.inner.copy_d2h_sync(src, dst, stream) }))
    }

    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "copy_d2d")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.copy_d2d(src, dst, stream) })
    }

    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "fill_u32")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.fill_u32(dst, pattern, stream) })
    }

    fn as_peer(&self) -> &dyn std::any::Any {
        self.inner.as_peer()
    }

    fn peer_route(&self, peer: &dyn std::any::Any) -> Result<PeerRoute> {
        self.inner.peer_route(peer)
    }

    unsafe fn copy_peer(&self, src: PeerRange<'_>, dst: PeerRange<'_>, stream: StreamId) -> Result<PeerRoute> {
        self.check(FaultSite::Enqueue, "copy_peer")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.copy_peer(src, dst, stream) })
    }

    unsafe fn stream_wait_peer_event(&self, stream: StreamId, peer: &dyn std::any::Any, event: EventId) -> Result<()> {
        self.check(FaultSite::Wait, "stream_wait_peer_event")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.stream_wait_peer_event(stream, peer, event) })
    }

    unsafe fn stream_wait_peer_settled(
        &self,
        stream: StreamId,
        peer: &dyn std::any::Any,
        event: EventId,
    ) -> Result<()> {
        self.check(FaultSite::Wait, "stream_wait_peer_settled")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.stream_wait_peer_settled(stream, peer, event) })
    }

    fn build_module(
        &self,
        source: &str,
        options: &crate::device::BuildOptions,
        host_kernels: &[crate::host_kernel::HostKernel],
    ) -> Result<ModuleId> {
        self.inner.build_module(source, options, host_kernels)
    }

    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.kernel(module, name) })
    }

    unsafe fn kernel_limits(&self, kernel: KernelId) -> Result<KernelLimits> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.kernel_limits(kernel) })
    }

    unsafe fn launch(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()> {
        self.check(FaultSite::Enqueue, "launch")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.launch(kernel, config, args, stream) })
    }

    fn live_handles(&self) -> Option<LiveHandles> {
        self.inner.live_handles()
    }

    fn native_graphs(&self) -> bool {
        self.inner.native_graphs()
    }

    unsafe fn create_graph(&self, nodes: &[GraphNode]) -> Result<GraphId> {
        self.check(FaultSite::Create, "create_graph")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.create_graph(nodes) })
    }

    unsafe fn update_graph(&self, graph: GraphId, nodes: &[GraphNode]) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.update_graph(graph, nodes) })
    }

    unsafe fn launch_graph(&self, graph: GraphId, stream: StreamId) -> Result<()> {
        self.check(FaultSite::Enqueue, "launch_graph")?;
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.launch_graph(graph, stream) })
    }

    unsafe fn destroy_graph(&self, graph: GraphId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        self.seen(unsafe { self.inner.destroy_graph(graph) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan's choices are the same for the same seed, differ for another,
    /// and come near the rate.
    #[test]
    fn random_plans_repeat_and_keep_their_rate() {
        let plan = |seed| FaultPlan::random(0.1, seed).unwrap_or_else(|e| panic!("{e}"));
        let fails = |p: &FaultPlan| (0..10_000).filter(|k| p.fails(FaultSite::Record, *k)).collect::<Vec<_>>();
        assert_eq!(fails(&plan(1)), fails(&plan(1)));
        assert_ne!(fails(&plan(1)), fails(&plan(2)));
        let n = fails(&plan(1)).len();
        assert!((800..1200).contains(&n), "{n} of 10000 at rate 0.1");
        assert!(fails(&plan(1).only(&[FaultSite::Alloc])).is_empty());
        assert!(FaultPlan::random(1.5, 0).is_err() && FaultPlan::random(f64::NAN, 0).is_err());
    }

    /// The ids of an injected error, and of the second failure a message
    /// tells of; none for an error not injected.
    #[test]
    fn injected_ids_are_read_back() {
        let error = |message: &str| Error::new(Backend::Host, "record_event", ErrorKind::Driver, message);
        assert_eq!(injected_ids(&error("injected fault #7 (record site): x")), [7]);
        let twice = error(
            "injected fault #7 (record site): x; recording it again failed too: injected fault #9 (record site): x",
        );
        assert_eq!((injected_id(&twice), injected_ids(&twice)), (Some(7), vec![7, 9]));
        assert!(injected_ids(&error("a driver said injected fault #3")).is_empty());
    }
}
