//! [`GpuDevice`]: the one [`Device`] implementation of CUDA and HIP.

use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use smallvec::SmallVec;

use super::event::GpuEvent;
use super::graph::GpuGraph;
use super::memory::{GateWord, GpuMemory, Place};
use super::module::{self, GpuKernel};
use super::runtime::GpuModule;
use super::runtime::{Attribute, Runtime};
use super::stream::{self, GpuStream, Latest, Waiters};
use crate::backend::allocations::Allocations;
use crate::backend::handles::Handles;
use crate::backend::peer::{peer_gate_refused_on, peer_of, sides};
use crate::device::{
    AllocId, Device, DeviceInfo, DeviceRange, EventId, GraphId, GraphNode, INLINE_ARGS, KernelArg, KernelId,
    LaunchConfig, ModuleId, StreamFlags, StreamId, check_copy_ranges, check_fill_range, check_kernel_limits,
    check_range,
};
use crate::device::{BuildOptions, KernelLimits};
use crate::device::{LiveHandles, PeerRange, PeerRoute, RawMemory, RawStream, Release};
use crate::error::{Error, ErrorKind, Result};
use crate::host_kernel::HostKernel;

/// A device of a CUDA-like runtime ([`crate::backend::cuda::CudaDevice`],
/// [`crate::backend::hip::HipDevice`]). Every call makes the device current
/// on the calling thread first. After a sticky error (a faulting kernel)
/// every call returns that error: the device cannot be trusted any more.
pub struct GpuDevice<R: Runtime> {
    info: DeviceInfo,
    pub(super) runtime: Arc<R>,
    /// The stream of the stream-ordered allocator, where the device has memory pools.
    pool_stream: Option<GpuStream<R>>,
    poisoned: OnceLock<Error>,
    /// Words of destroyed (and so opened) user events, with their device
    /// addresses, for the next gates (see `event.rs`); freed at the drop.
    spare_gates: Mutex<Vec<(GateWord, R::Ptr)>>,
    /// Words that reached the last generation: never reused, freed at the drop.
    retired_gates: Mutex<Vec<NonNull<u32>>>,
    streams: Handles<GpuStream<R>>,
    events: Handles<GpuEvent<R>>,
    allocs: Allocations<GpuMemory<R>>,
    modules: Handles<GpuModule<R>>,
    kernels: Handles<GpuKernel<R>>,
    graphs: Handles<GpuGraph<R>>,
}

/// The route between each ordered pair of devices asked for so far in this
/// process, by backend and [`Runtime::device_key`]s. Peer access belongs to
/// the primary contexts, which the process keeps, so it is enabled once a
/// pair for the process, not again for every later device object (each of
/// which called `cuCtxEnablePeerAccess` and `cuMemPoolSetAccess` anew).
static PEER_ROUTES: Mutex<Vec<(crate::Backend, i64, i64, PeerRoute)>> = Mutex::new(Vec::new());

// SAFETY: the runtime's handles may be used from any thread; all mutable
// state is behind mutexes; gate words are only accessed atomically.
unsafe impl<R: Runtime> Send for GpuDevice<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuDevice<R> {}

impl<R: Runtime> std::fmt::Debug for GpuDevice<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

fn positive(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

impl<R: Runtime> GpuDevice<R> {
    /// Wraps device `ordinal` of its backend, reading its description.
    pub(crate) fn new(runtime: R, ordinal: usize) -> Result<Self> {
        runtime.enter()?;
        let identity = runtime.identity()?;
        let attr = |a| runtime.attribute(a).map(positive);
        let info = DeviceInfo {
            backend: R::BACKEND,
            ordinal,
            name: identity.name,
            vendor: identity.vendor,
            platform: identity.platform,
            total_memory: identity.total_memory,
            max_threads_per_block: attr(Attribute::MaxThreadsPerBlock)?,
            max_block_dims: [
                attr(Attribute::MaxBlockDim(0))?,
                attr(Attribute::MaxBlockDim(1))?,
                attr(Attribute::MaxBlockDim(2))?,
            ],
            max_grid_dims: [
                attr(Attribute::MaxGridDim(0))?,
                attr(Attribute::MaxGridDim(1))?,
                attr(Attribute::MaxGridDim(2))?,
            ],
            // CUDA and HIP limit each dimension only.
            max_blocks: u64::MAX,
            shared_memory_per_block: attr(Attribute::SharedMemoryPerBlock)? as usize,
            compute_units: attr(Attribute::MultiprocessorCount)?,
            warp_size: attr(Attribute::WarpSize)?,
            subgroup_sizes: vec![attr(Attribute::WarpSize)?],
            fp64: true,
            pci_bus_id: identity.pci_bus_id,
            uuid: identity.uuid,
            arch: identity.arch,
        };
        let runtime = Arc::new(runtime);
        let pool_stream = runtime.pool_stream()?.map(|raw| GpuStream::new(raw, Arc::clone(&runtime)));
        let b = R::BACKEND;
        Ok(Self {
            info,
            runtime,
            pool_stream,
            poisoned: OnceLock::new(),
            spare_gates: Mutex::new(Vec::new()),
            retired_gates: Mutex::new(Vec::new()),
            streams: Handles::new(b, "stream"),
            events: Handles::new(b, "event"),
            allocs: Allocations::new(b),
            modules: Handles::new(b, "module"),
            kernels: Handles::new(b, "kernel"),
            graphs: Handles::new(b, "graph"),
        })
    }

    /// Refuses work on a poisoned device and makes the device current.
    fn enter(&self) -> Result<()> {
        if let Some(e) = self.poisoned.get() {
            return Err(e.clone());
        }
        self.runtime.enter()
    }

    /// Passes a runtime result on, poisoning the device on a sticky error.
    fn check<T>(&self, result: Result<T>) -> Result<T> {
        result.inspect_err(|err| {
            if err.kind == ErrorKind::KernelFault {
                // The first sticky error stays; later ones are its echoes.
                let _ = self.poisoned.get_or_init(|| {
                    let mut sticky = err.clone();
                    sticky.message = format!("{} (the device is unusable from now on)", sticky.message);
                    sticky
                });
            }
        })
    }

    fn error(&self, call: &'static str, kind: ErrorKind, message: &str) -> Error {
        Error::new(R::BACKEND, call, kind, message)
    }

    /// The stream of `id`, kept alive by the returned `Arc` for as long as
    /// the caller holds it (a concurrent `destroy_stream` cannot destroy a
    /// stream in use).
    pub(super) fn stream(&self, call: &'static str, id: StreamId) -> Result<Arc<GpuStream<R>>> {
        self.streams.get(call, id.0)
    }

    /// The device address of a checked range of device memory.
    fn address(&self, call: &'static str, range: DeviceRange) -> Result<R::Ptr> {
        self.allocs.with(call, range.alloc.0, |mem| {
            check_range(R::BACKEND, call, range.offset, range.len, mem.size)?;
            mem.device_ptr(call, range.offset)
        })?
    }

    /// How copies between this device and `peer` go: direct on one
    /// physical device, or where the runtime allows peer access (enabled
    /// here, once per pair and process: [`PEER_ROUTES`]); else staged by
    /// the driver through the host.
    fn route_to(&self, peer: &Self) -> Result<PeerRoute> {
        let (near, far) = (self.runtime.device_key(), peer.runtime.device_key());
        if near == far {
            return Ok(PeerRoute::Direct);
        }
        let mut routes = PEER_ROUTES.lock().unwrap_or_else(PoisonError::into_inner);
        let pair = (R::BACKEND, near, far);
        if let Some(&(.., route)) = routes.iter().find(|(b, n, f, _)| (*b, *n, *f) == pair) {
            return Ok(route);
        }
        self.enter()?;
        let route = if self.check(self.runtime.can_access_peer(&peer.runtime))? {
            // SAFETY: this device is current; the peer's runtime is live.
            self.check(unsafe { self.runtime.enable_peer_access(&peer.runtime) })?;
            PeerRoute::Direct
        } else {
            PeerRoute::Staged
        };
        routes.push((R::BACKEND, near, far, route));
        Ok(route)
    }

    fn new_event(&self, timing: bool) -> Result<EventId> {
        self.enter()?;
        // SAFETY: the device is current.
        let event = self.check(unsafe { self.runtime.event_create(timing) })?;
        Ok(EventId(self.events.insert(GpuEvent::Timed {
            event,
            timing,
            recorded: Default::default(),
            latest: Latest::default(),
        })))
    }

    /// Stores `mem`, or frees it again when the table is full (the device
    /// is current).
    fn insert_alloc(&self, mem: GpuMemory<R>) -> Result<AllocId> {
        self.allocs.insert(mem).map(AllocId).map_err(|(mem, e)| {
            let _ = mem.free(&self.runtime, self.pool());
            e
        })
    }

    fn pool(&self) -> Option<R::Stream> {
        self.pool_stream.as_ref().map(|s| s.raw)
    }

    /// [`Device::launch`] once the kernel's limits are checked: its
    /// function, outside the kernel table's lock (a launch into a full
    /// queue blocks, and a change to the table waits for every reader).
    ///
    /// # Safety
    /// As [`Device::launch`]; `function` is the launched kernel's, live for the call.
    unsafe fn launch_function(
        &self,
        function: R::Function,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()> {
        let held = self.stream("launch", stream)?;
        let shared_bytes = u32::try_from(config.shared_bytes).unwrap_or(u32::MAX);
        if held.is_held() {
            let (grid, block) = (config.grid, config.block);
            let (mut pointers, args) = (self.pointers("launch", args)?, args.to_vec());
            return self.check(held.submit(move |runtime, raw| {
                call_with_params::<R, ()>(&mut pointers, &args, |params| {
                    // SAFETY: as below, with the launch's own copies of its
                    // arguments; the caller keeps its memory until the launch completes.
                    unsafe { runtime.launch(function, grid, block, shared_bytes, raw, params) }
                })
            }));
        }
        self.with_params("launch", args, |params| {
            // SAFETY: params stay alive for the call (the runtime reads and
            // copies them at launch, never writes); sizes are validated; the
            // caller guarantees the kernel's parameter types and memory accesses.
            self.check(unsafe {
                self.runtime.launch(function, config.grid, config.block, shared_bytes, held.raw, params)
            })
        })
    }

    /// Calls `f` with the runtime's parameter array for `args`: one pointer
    /// per argument, to a buffer's device pointer or a scalar's bytes in
    /// `args`, at an address aligned for its type (struct bytes are 8-byte
    /// aligned), valid for the call. The runtime reads each parameter's
    /// bytes with the size the kernel declares (it only reads them).
    pub(super) fn with_params<T>(
        &self,
        call: &'static str,
        args: &[KernelArg],
        f: impl FnOnce(*mut *mut c_void) -> Result<T>,
    ) -> Result<T> {
        let mut pointers = self.pointers(call, args)?;
        call_with_params::<R, T>(&mut pointers, args, f)
    }

    /// The device pointer of each buffer argument (`None` for the others).
    /// Up to `INLINE_ARGS` arguments allocate nothing; a plain loop, since
    /// collecting into a `Result` moves the inline array.
    fn pointers(&self, call: &'static str, args: &[KernelArg]) -> Result<SmallVec<[Option<R::Ptr>; INLINE_ARGS]>> {
        let mut pointers = SmallVec::new();
        for arg in args {
            pointers.push(match *arg {
                KernelArg::Buffer { alloc, offset } => Some(self.address(call, DeviceRange { alloc, offset, len: 0 })?),
                _ => None,
            });
        }
        Ok(pointers)
    }

    /// Makes `stream` wait for the latest recording of a timed event (of
    /// this device or a peer): its pending recording where that is held,
    /// else the event (the device is current).
    fn wait_timed(&self, stream: &Arc<GpuStream<R>>, event: R::Event, latest: &Latest<R>) -> Result<()> {
        match latest.get() {
            Some(pending) => self.check(stream.wait_pending(&pending)),
            // SAFETY: a live stream of this device, which is current, and a
            // live event of it or of a peer (the runtimes wait across devices).
            None => self.check(unsafe { self.runtime.stream_wait_event(stream.raw, event) }),
        }
    }

    /// The function of live kernel `kernel`.
    pub(super) fn function(&self, call: &'static str, kernel: KernelId) -> Result<R::Function> {
        self.kernels.with(call, kernel.0, |kernel| kernel.function)
    }
}

/// Calls `f` with the runtime's parameter array for `args`: one pointer per
/// argument, to its device pointer in `pointers` (at a stable address for
/// the call) or a scalar's bytes in `args`, at an address aligned for its
/// type (struct bytes are 8-byte aligned), valid for the call. The runtime
/// reads each parameter's bytes with the size the kernel declares (it only
/// reads them).
fn call_with_params<R: Runtime, T>(
    pointers: &mut [Option<R::Ptr>],
    args: &[KernelArg],
    f: impl FnOnce(*mut *mut c_void) -> Result<T>,
) -> Result<T> {
    let mut params: SmallVec<[*mut c_void; INLINE_ARGS]> = SmallVec::new();
    for (pointer, arg) in pointers.iter_mut().zip(args) {
        params.push(match pointer {
            Some(p) => (p as *mut R::Ptr).cast(),
            None => arg.value_bytes().map_or(std::ptr::null_mut(), |b| b.as_ptr().cast_mut().cast()),
        });
    }
    f(params.as_mut_ptr())
}

impl<R: Runtime> Drop for GpuDevice<R> {
    fn drop(&mut self) {
        // Open every gate first, also on a poisoned device, so that no
        // stream waits forever for a user event nobody will complete.
        let events = self.events.take_all();
        for event in &events {
            event.open();
        }
        let graphs = self.graphs.take_all();
        let streams = self.streams.take_all();
        if self.enter().is_ok() {
            // Wait for this device's own streams only: with its gates open
            // they finish, whatever other devices sharing the GPU (CUDA's
            // primary context, HIP on NVIDIA) do.
            for stream in &streams {
                // SAFETY: a live stream of this device, which is current.
                let _ = unsafe { self.runtime.stream_synchronize(stream.raw) };
            }
            // Executables go before the memory their nodes use.
            drop(graphs);
            let pool = self.pool();
            for mem in self.allocs.take_all() {
                // Allocations the typed layer retired while still in use.
                let _ = mem.free(&self.runtime, pool);
            }
            let gates = self.retired_gates.get_mut().unwrap_or_else(PoisonError::into_inner);
            let spare = self.spare_gates.get_mut().unwrap_or_else(PoisonError::into_inner);
            gates.extend(spare.drain(..).map(|(word, _)| word.0));
            for event in events {
                match &*event {
                    // SAFETY: a live event of this device; its streams are done.
                    GpuEvent::Timed { event, .. } => drop(unsafe { self.runtime.event_destroy(*event) }),
                    GpuEvent::User { word, .. } => gates.push(word.0),
                }
            }
            for gate in gates.drain(..) {
                // SAFETY: allocated by host_alloc, open, and read by no stream any more.
                let _ = unsafe { self.runtime.host_free(gate.cast()) };
            }
        }
        // Streams (and the runtime, with CUDA's context) go after this.
        drop(streams);
    }
}

impl<R: Runtime> Device for GpuDevice<R> {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId> {
        self.enter()?;
        // SAFETY: the device is current.
        let raw = self.check(unsafe { self.runtime.stream_create(flags) })?;
        Ok(StreamId(self.streams.insert(GpuStream::new(raw, Arc::clone(&self.runtime)))))
    }

    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        // A busy stream is kept until idle, or until the device's drop (after
        // its gates open): destroying a busy stream could block (HIP allows it to).
        let entered = self.enter().is_ok();
        self.streams.retire("destroy_stream", stream.0, |s| {
            // SAFETY: a live stream of this device, current when entered; a query never blocks.
            !entered || s.is_held() || !matches!(unsafe { self.runtime.stream_query(s.raw) }, Ok(true))
        })
    }

    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        self.enter()?;
        let held = self.stream("synchronize_stream", stream)?;
        // Work held behind a gate is submitted by whoever opens it.
        while held.is_held() {
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
        // SAFETY: a live stream of this device, which is current.
        self.check(unsafe { self.runtime.stream_synchronize(held.raw) })?;
        held.take_failure().map_or(Ok(()), |e| self.check(Err(e)))
    }

    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        self.enter()?;
        let held = self.stream("query_stream", stream)?;
        if let Some(e) = held.take_failure() {
            return self.check(Err(e));
        }
        // SAFETY: as above.
        Ok(!held.is_held() && self.check(unsafe { self.runtime.stream_query(held.raw) })?)
    }

    fn create_event(&self) -> Result<EventId> {
        self.new_event(true)
    }

    fn create_sync_event(&self) -> Result<EventId> {
        self.new_event(false)
    }

    fn create_user_event(&self) -> Result<EventId> {
        // A spare word: every gate before on it is open, so the next
        // generation is closed to new waits only.
        let spare = self.spare_gates.lock().unwrap_or_else(PoisonError::into_inner).pop();
        if let Some((word, device)) = spare {
            let generation = word.value() + 1;
            return Ok(EventId(self.events.insert(GpuEvent::User {
                word,
                device,
                generation,
                waiters: Waiters::default(),
            })));
        }
        self.enter()?;
        // SAFETY: the device is current; 4 bytes hold the word.
        let host = self.check(unsafe { self.runtime.host_alloc(4, true) })?;
        let word = GateWord(host.cast());
        // SAFETY: host was allocated mapped on this device.
        let device = match self.check(unsafe { self.runtime.host_device_ptr(host) }) {
            Ok(device) => device,
            Err(e) => {
                // SAFETY: allocated above, used by nobody.
                let _ = unsafe { self.runtime.host_free(host) };
                return Err(e);
            }
        };
        // A new word starts at 0: generation 1 is closed.
        word.reset();
        Ok(EventId(self.events.insert(GpuEvent::User { word, device, generation: 1, waiters: Waiters::default() })))
    }

    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        match &*self.events.get("complete_user_event", event.0)? {
            e @ GpuEvent::User { .. } => {
                e.open();
                Ok(())
            }
            GpuEvent::Timed { .. } => {
                Err(self.error("complete_user_event", ErrorKind::InvalidHandle, "event is not a user event"))
            }
        }
    }

    unsafe fn destroy_event(&self, event: EventId) -> Result<()> {
        let slot = self.events.remove("destroy_event", event.0)?;
        // A user event is opened even on a poisoned device, so no stream waits forever.
        slot.open();
        match &*slot {
            GpuEvent::User { word, device, generation, .. } => {
                // A stream may still be about to read the word, and will
                // find it open whatever gate it serves next; at the last
                // generation it is kept apart until the device's drop.
                if *generation == u32::MAX {
                    self.retired_gates.lock().unwrap_or_else(PoisonError::into_inner).push(word.0);
                } else {
                    self.spare_gates.lock().unwrap_or_else(PoisonError::into_inner).push((*word, *device));
                }
                Ok(())
            }
            GpuEvent::Timed { event, .. } => {
                self.enter()?;
                // SAFETY: a live event of this device, removed from the table, destroyed once.
                self.check(unsafe { self.runtime.event_destroy(*event) })
            }
        }
    }

    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        self.enter()?;
        let held = self.stream("record_event", stream)?;
        match &*self.events.get("record_event", event.0)? {
            GpuEvent::Timed { event, timing, recorded, latest } => {
                let pending = self.check(held.record_pending(*timing))?;
                if pending.is_none() {
                    // SAFETY: both handles are live objects of this device, which is current.
                    self.check(unsafe { self.runtime.event_record(*event, held.raw) })?;
                }
                latest.set(pending);
                recorded.store(true, std::sync::atomic::Ordering::Release);
                Ok(())
            }
            GpuEvent::User { .. } => {
                Err(self.error("record_event", ErrorKind::InvalidHandle, "a user event cannot be recorded"))
            }
        }
    }

    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        self.enter()?;
        match &*self.events.get("query_event", event.0)? {
            GpuEvent::Timed { event, latest, .. } => match latest.get() {
                Some(pending) if !pending.submitted() => Ok(false),
                // SAFETY: a live event of this device (or its pending
                // recording's, which the `Arc` keeps), which is current.
                pending => self.check(unsafe { self.runtime.event_query(pending.map_or(*event, |p| p.event())) }),
            },
            user => Ok(user.is_open()),
        }
    }

    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        self.enter()?;
        match &*self.events.get("synchronize_event", event.0)? {
            GpuEvent::Timed { event, latest, .. } => {
                let pending = latest.get();
                // Submitted by whoever opens the gate that holds it.
                while pending.as_ref().is_some_and(|p| !p.submitted()) {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                // SAFETY: a live event of this device (or its pending
                // recording's, which the `Arc` keeps), which is current.
                self.check(unsafe { self.runtime.event_synchronize(pending.map_or(*event, |p| p.event())) })
            }
            user => {
                while !user.is_open() {
                    std::thread::sleep(std::time::Duration::from_micros(100));
                }
                Ok(())
            }
        }
    }

    unsafe fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64> {
        self.enter()?;
        // The events, and the pending recordings the `Arc`s keep alive.
        type Recording<R> = (<R as Runtime>::Event, Option<Arc<stream::Pending<R>>>);
        let handle = |id: EventId| -> Result<Recording<R>> {
            match &*self.events.get("elapsed_ms", id.0)? {
                GpuEvent::Timed { timing: false, .. } => {
                    Err(self.error("elapsed_ms", ErrorKind::InvalidHandle, "a synchronisation event carries no time"))
                }
                GpuEvent::Timed { event, recorded, latest, .. }
                    if recorded.load(std::sync::atomic::Ordering::Acquire) =>
                {
                    match latest.get() {
                        Some(pending) if !pending.submitted() => Err(self.error(
                            "elapsed_ms",
                            ErrorKind::NotReady,
                            "the event's recording is held behind a user event not yet completed",
                        )),
                        Some(pending) => Ok((pending.event(), Some(pending))),
                        None => Ok((*event, None)),
                    }
                }
                GpuEvent::Timed { .. } => {
                    Err(self.error("elapsed_ms", ErrorKind::NotReady, "event was never recorded"))
                }
                GpuEvent::User { .. } => {
                    Err(self.error("elapsed_ms", ErrorKind::InvalidHandle, "user events carry no time"))
                }
            }
        };
        let ((a, _a), (b, _b)) = (handle(start)?, handle(end)?);
        // SAFETY: both are live, recorded events of this device, which is current.
        self.check(unsafe { self.runtime.event_elapsed(a, b) }).map(f64::from)
    }

    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        self.enter()?;
        let held = self.stream("stream_wait_event", stream)?;
        match &*self.events.get("stream_wait_event", event.0)? {
            GpuEvent::Timed { event, latest, .. } => self.wait_timed(&held, *event, latest),
            GpuEvent::User { word, device, generation, waiters } => {
                held.wait_gate(*word, *device, *generation, waiters);
                Ok(())
            }
        }
    }

    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        self.enter()?;
        // SAFETY: the device is current; the pool stream is live.
        let (ptr, pooled) = self.check(unsafe { self.runtime.mem_alloc(bytes.max(1), self.pool()) })?;
        self.insert_alloc(GpuMemory { place: Place::Device { ptr, pooled }, size: bytes })
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        self.enter()?;
        // SAFETY: the device is current.
        let ptr = self.check(unsafe { self.runtime.host_alloc(bytes.max(1), false) })?;
        // SAFETY: the block holds at least `bytes` bytes and is ours alone.
        unsafe { ptr.as_ptr().write_bytes(0, bytes) };
        self.insert_alloc(GpuMemory { place: Place::Pinned(ptr), size: bytes })
    }

    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        let pinned = self.allocs.with("pinned_ptr", alloc.0, |mem| match mem.place {
            Place::Pinned(ptr) => Some(ptr),
            Place::Device { .. } | Place::Foreign { .. } => None,
        })?;
        pinned.ok_or_else(|| {
            self.error("pinned_ptr", ErrorKind::InvalidHandle, "allocation is device memory, not pinned host memory")
        })
    }

    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize> {
        self.allocs.with("alloc_size", alloc.0, |mem| mem.size)
    }

    unsafe fn free(&self, alloc: AllocId) -> Result<()> {
        let mem = self.allocs.remove("free", alloc.0)?;
        self.enter()?;
        self.check(mem.free(&self.runtime, self.pool()))
    }

    unsafe fn adopt_memory(&self, memory: RawMemory, len: usize, release: Option<Release>) -> Result<AllocId> {
        let RawMemory::Address(raw) = memory else {
            return Err(self.error(
                "adopt_memory",
                ErrorKind::Unsupported,
                "CUDA and HIP adopt device addresses, not cl_mem",
            ));
        };
        if raw == 0 {
            return Err(self.error("adopt_memory", ErrorKind::InvalidHandle, "the device address is null"));
        }
        let ptr = R::ptr_from_raw(raw);
        self.enter()?;
        // SAFETY: the device is current; the check only reads attributes.
        self.check(unsafe { self.runtime.check_foreign_ptr(ptr) })?;
        self.insert_alloc(GpuMemory { place: Place::Foreign { ptr, release }, size: len })
    }

    unsafe fn raw_memory(&self, alloc: AllocId) -> Result<RawMemory> {
        self.allocs.with("raw_memory", alloc.0, |mem| match mem.place {
            Place::Device { ptr, .. } | Place::Foreign { ptr, .. } => RawMemory::Address(R::ptr_to_raw(ptr)),
            Place::Pinned(ptr) => RawMemory::Address(ptr.as_ptr() as usize as u64),
        })
    }

    unsafe fn adopt_stream(&self, stream: RawStream) -> Result<StreamId> {
        let raw = R::stream_from_raw(stream.0);
        self.enter()?;
        // SAFETY: the device is current; the caller promises a live stream.
        self.check(unsafe { self.runtime.check_foreign_stream(raw) })?;
        Ok(StreamId(self.streams.insert(GpuStream::adopted(raw, Arc::clone(&self.runtime)))))
    }

    unsafe fn raw_stream(&self, stream: StreamId) -> Result<RawStream> {
        let held = self.stream("raw_stream", stream)?;
        // Another library enqueues behind the work held on the host only
        // once that is submitted (behind device-side waits).
        self.check(stream::materialize(&held))?;
        Ok(RawStream(R::stream_to_raw(held.raw)))
    }

    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.enter()?;
        let (to, held) = (self.address("copy_h2d", dst)?, self.stream("copy_h2d", stream)?);
        if dst.len == 0 {
            return Ok(());
        }
        let len = dst.len;
        // SAFETY: the range is checked device memory; the caller keeps src valid until completion.
        self.check(held.submit(move |runtime, raw| unsafe { runtime.copy_h2d(to, src, len, raw) }))
    }

    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        self.enter()?;
        let (from, held) = (self.address("copy_d2h", src)?, self.stream("copy_d2h", stream)?);
        if src.len == 0 {
            return Ok(());
        }
        let len = src.len;
        // SAFETY: the range is checked device memory; the caller keeps dst valid until completion.
        self.check(held.submit(move |runtime, raw| unsafe { runtime.copy_d2h(dst, from, len, raw) }))
    }

    unsafe fn copy_d2h_sync(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        // A copy to pageable memory returns only once it has run, and while
        // it waits for the stream's earlier work, CUDA's driver (and HIP on
        // it) holds the stream against other threads' enqueues: a fill
        // behind a gated download waited until the gate opened
        // (`enqueue_is_not_held_by_a_blocking_copy`, H100). So the earlier
        // work is waited for first, which holds nothing; work another thread
        // enqueues between that wait and the copy can still hold it.
        // SAFETY: the caller owns the stream.
        if !unsafe { self.query_stream(stream) }? {
            // SAFETY: as above.
            unsafe { self.synchronize_stream(stream) }?;
        }
        // SAFETY: the caller's contract; the copy is complete (or can never
        // run) once the stream is synchronised.
        unsafe {
            self.copy_d2h(src, dst, stream)?;
            self.synchronize_stream(stream)
        }
    }

    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.enter()?;
        check_copy_ranges(R::BACKEND, src, dst)?;
        let (from, to) = (self.address("copy_d2d", src)?, self.address("copy_d2d", dst)?);
        let held = self.stream("copy_d2d", stream)?;
        if src.len == 0 {
            return Ok(());
        }
        let len = src.len;
        // SAFETY: both ranges are checked, non-overlapping device memory of this device.
        self.check(held.submit(move |runtime, raw| unsafe { runtime.copy_d2d(to, from, len, raw) }))
    }

    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        self.enter()?;
        check_fill_range(R::BACKEND, dst)?;
        let (to, held) = (self.address("fill_u32", dst)?, self.stream("fill_u32", stream)?);
        if dst.len == 0 {
            return Ok(());
        }
        let count = dst.len / 4;
        // SAFETY: the range is checked, 4-byte aligned device memory.
        self.check(held.submit(move |runtime, raw| unsafe { runtime.fill_u32(to, pattern, count, raw) }))
    }

    fn as_peer(&self) -> &dyn Any {
        self
    }

    fn peer_route(&self, peer: &dyn Any) -> Result<PeerRoute> {
        self.route_to(peer_of::<Self>(R::BACKEND, "peer_route", peer)?)
    }

    unsafe fn copy_peer(&self, src: PeerRange<'_>, dst: PeerRange<'_>, stream: StreamId) -> Result<PeerRoute> {
        self.enter()?;
        let (from, to) = sides(self, "copy_peer", src, dst)?;
        check_copy_ranges(R::BACKEND, src.range, dst.range)?;
        let (source, target) = (from.address("copy_peer", src.range)?, to.address("copy_peer", dst.range)?);
        let route = self.route_to(if std::ptr::eq(self, from) { to } else { from })?;
        let held = self.stream("copy_peer", stream)?;
        if src.range.len == 0 {
            return Ok(route);
        }
        let len = src.range.len;
        if !held.is_held() {
            // SAFETY: both ranges are checked device memory of their devices,
            // which do not overlap (two devices, or checked on one); the
            // stream is this device's, which is current.
            self.check(unsafe { self.runtime.copy_peer(target, &to.runtime, source, &from.runtime, len, held.raw) })?;
            return Ok(route);
        }
        // Held: the work keeps both runtimes (cloned only here, since every
        // thread's copies would share their counts' cache line).
        let (to, from) = (Arc::clone(&to.runtime), Arc::clone(&from.runtime));
        self.check(held.submit(move |runtime, raw| {
            // SAFETY: as above; the work keeps both runtimes.
            unsafe { runtime.copy_peer(target, &to, source, &from, len, raw) }
        }))?;
        Ok(route)
    }

    unsafe fn stream_wait_peer_event(&self, stream: StreamId, peer: &dyn Any, event: EventId) -> Result<()> {
        let peer = peer_of::<Self>(R::BACKEND, "stream_wait_peer_event", peer)?;
        if std::ptr::eq(self, peer) {
            // SAFETY: the caller's contract.
            return unsafe { self.stream_wait_event(stream, event) };
        }
        self.enter()?;
        let held = self.stream("stream_wait_peer_event", stream)?;
        match &*peer.events.get("stream_wait_peer_event", event.0)? {
            // The runtimes wait across devices.
            GpuEvent::Timed { event, latest, .. } => self.wait_timed(&held, *event, latest),
            GpuEvent::User { .. } => Err(peer_gate_refused_on(R::BACKEND)),
        }
    }

    fn build_module(&self, source: &str, options: &BuildOptions, _host_kernels: &[HostKernel]) -> Result<ModuleId> {
        self.enter()?;
        let module = module::build(&*self.runtime, source, options)?;
        Ok(ModuleId(self.modules.insert_shared(module)))
    }

    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        self.enter()?;
        let module = self.modules.get("kernel", module.0)?;
        Ok(KernelId(self.kernels.insert(module::kernel(&*self.runtime, &self.info, &module, name)?)))
    }

    unsafe fn kernel_limits(&self, kernel: KernelId) -> Result<KernelLimits> {
        self.kernels.with("kernel_limits", kernel.0, |kernel| kernel.limits)
    }

    unsafe fn launch(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()> {
        self.enter()?;
        config.validate(&self.info, "launch")?;
        // The checks under the kernel table's read lock, for the function
        // handle: every thread launches the same kernels, so a reference
        // count per launch would be a shared write.
        let function = self.kernels.with("launch", kernel.0, |kernel| {
            check_kernel_limits(&self.info, &kernel.name, config, &kernel.limits).map(|()| kernel.function)
        })??;
        // SAFETY: the caller's contract, passed on; the kernel stays live
        // for the call (the contract of `launch`), and so does its function.
        unsafe { self.launch_function(function, config, args, stream) }
    }

    fn live_handles(&self) -> Option<LiveHandles> {
        // Words at their last generation count until they are freed; spare
        // words are a cache of at most as many gates as were open at once.
        let retired_gates = self.retired_gates.lock().unwrap_or_else(PoisonError::into_inner).len();
        Some(LiveHandles {
            streams: self.streams.live(),
            events: self.events.live() + retired_gates,
            allocations: self.allocs.live(),
            modules: self.modules.live(),
            kernels: self.kernels.live(),
            graphs: self.graphs.live(),
        })
    }

    fn native_graphs(&self) -> bool {
        true
    }

    unsafe fn create_graph(&self, nodes: &[GraphNode]) -> Result<GraphId> {
        self.enter()?;
        // SAFETY: the caller's contract.
        let graph = self.check(unsafe { self.build_graph(nodes) })?;
        Ok(GraphId(self.graphs.insert(graph)))
    }

    unsafe fn update_graph(&self, graph: GraphId, nodes: &[GraphNode]) -> Result<()> {
        self.enter()?;
        let graph = self.graphs.get("update_graph", graph.0)?;
        // SAFETY: the caller's contract.
        self.check(unsafe { self.rebuild_graph(&graph, nodes) })
    }

    unsafe fn launch_graph(&self, graph: GraphId, stream: StreamId) -> Result<()> {
        self.enter()?;
        let held = self.stream("launch_graph", stream)?;
        let graph = self.graphs.get("launch_graph", graph.0)?;
        if held.is_held() {
            // Held on the host with an executable of its own, so that an
            // update after it does not reach it; where the graph has no
            // source to make one from, submitted now with the work held
            // before it, behind device-side waits.
            // SAFETY: the caller's contract.
            if let Some(launch) = unsafe { self.held_launch(&graph) } {
                return self.check(held.submit(move |_, raw| launch.launch(raw)));
            }
            self.check(stream::materialize(&held))?;
            self.enter()?;
        }
        self.check(graph.launch(&held))
    }

    unsafe fn destroy_graph(&self, graph: GraphId) -> Result<()> {
        // Kept while a launch may still run it (where the runtime says
        // nothing of destroying a graph in flight), never waited for.
        self.enter()?;
        self.graphs.retire("destroy_graph", graph.0, GpuGraph::busy)
    }
}
