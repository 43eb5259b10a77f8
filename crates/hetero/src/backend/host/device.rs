//! [`HostDevice`]: the handle tables and the [`Device`] implementation.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use super::error::error;
use super::event::HostEvent;
use super::kernels::{Args, Block, HostKernel};
use super::memory::{HostMemory, SendPtr};
use super::module::HostModule;
use super::stream::{HostStream, Op};
use crate::backend::allocations::Allocations;
use crate::backend::handles::Handles;
use crate::backend::peer::{peer_gate_refused_on, peer_of, sides};
use crate::device::{
    AllocId, Backend, Device, DeviceInfo, DeviceRange, EventId, KernelArg, KernelId, LaunchConfig, ModuleId,
    PORTABLE_GRID_LIMITS, StreamFlags, StreamId, check_copy_ranges, check_fill_range, check_range,
};
use crate::device::{BuildOptions, KernelLimits};
use crate::device::{LiveHandles, PeerRange, PeerRoute, RawMemory, Release};
use crate::error::{ErrorKind, Result};
use crate::host_kernel::Value;

/// A kernel handle's implementation, shared with the launches that run it.
type KernelEntry = Arc<HostKernel>;

/// The CPU as a device. Cheap to create; each instance has its own handles.
pub struct HostDevice {
    info: DeviceInfo,
    memory_limit: u64,
    streams: Handles<HostStream>,
    events: Handles<HostEvent>,
    /// Shared with the queued operations that use them.
    allocs: Allocations<Arc<HostMemory>>,
    modules: Handles<HostModule>,
    kernels: Handles<KernelEntry>,
    epoch: Instant,
}

impl std::fmt::Debug for HostDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

impl HostDevice {
    /// Queues on `stream` a wait for `event` of `peer`: the worker blocks,
    /// not the caller. With `inherit`, a failure of the recorded stream
    /// becomes this stream's failure; without, the wait only ends.
    fn wait_peer(
        &self,
        call: &'static str,
        stream: StreamId,
        peer: &dyn Any,
        event: EventId,
        inherit: bool,
    ) -> Result<()> {
        let peer = peer_of::<HostDevice>(Backend::Host, call, peer)?;
        let ev = peer.event(call, event)?;
        if ev.is_user() && !std::ptr::eq(self, peer) {
            return Err(peer_gate_refused_on(Backend::Host));
        }
        let generation = ev.current();
        self.enqueue(
            call,
            stream,
            Box::new(move || {
                let reached = ev.wait_for(generation);
                if inherit { reached } else { Ok(()) }
            }),
        )
    }

    /// The host CPU as device number 0.
    pub fn new() -> Self {
        Self::with_ordinal(0)
    }

    /// The host CPU as device number `ordinal`: a device of its own, with
    /// its own streams and workers, as one of several that
    /// `HETERO_HOST_DEVICES` asks discovery for (a node's several devices,
    /// on a machine without them).
    pub fn with_ordinal(ordinal: usize) -> Self {
        let total_memory = host_memory_bytes();
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        Self {
            info: DeviceInfo {
                backend: Backend::Host,
                ordinal,
                name: cpu_model().unwrap_or_else(|| "host CPU".to_string()),
                vendor: "hetero".to_string(),
                platform: format!("hetero host backend {}", env!("CARGO_PKG_VERSION")),
                total_memory,
                max_threads_per_block: 1024,
                max_block_dims: [1024, 1024, 64],
                max_grid_dims: PORTABLE_GRID_LIMITS,
                max_blocks: u64::MAX,
                shared_memory_per_block: 64 * 1024,
                compute_units: cpus,
                warp_size: 1,
                subgroup_sizes: Vec::new(),
                fp64: true,
                pci_bus_id: None,
                uuid: None,
                arch: None,
            },
            memory_limit: total_memory,
            streams: Handles::new(Backend::Host, "stream"),
            events: Handles::new(Backend::Host, "event"),
            allocs: Allocations::new(Backend::Host),
            modules: Handles::new(Backend::Host, "module"),
            kernels: Handles::new(Backend::Host, "kernel"),
            epoch: Instant::now(),
        }
    }

    /// The device reporting `units` compute units instead of the host's
    /// cores (at least 1): what sizes its grids, as on a machine of that
    /// many cores; tests of what must not depend on it use it.
    #[must_use]
    pub fn with_compute_units(mut self, units: u32) -> Self {
        self.info.compute_units = units.max(1);
        self
    }

    fn stream(&self, call: &'static str, id: StreamId) -> Result<Arc<HostStream>> {
        self.streams.get(call, id.0)
    }

    fn event(&self, call: &'static str, id: EventId) -> Result<Arc<HostEvent>> {
        self.events.get(call, id.0)
    }

    fn alloc(&self, call: &'static str, id: AllocId) -> Result<Arc<HostMemory>> {
        self.allocs.with(call, id.0, Arc::clone)
    }

    /// The allocation of `range`, checked to contain it.
    fn range(&self, call: &'static str, range: DeviceRange) -> Result<Arc<HostMemory>> {
        let mem = self.alloc(call, range.alloc)?;
        check_range(Backend::Host, call, range.offset, range.len, mem.size())?;
        Ok(mem)
    }

    /// The device allocation of `range`, checked to contain it; pinned
    /// memory is refused (device operations never touch host memory).
    fn device_range(&self, call: &'static str, range: DeviceRange) -> Result<Arc<HostMemory>> {
        let mem = self.range(call, range)?;
        if mem.pinned {
            return Err(error(call, ErrorKind::InvalidHandle, "allocation is pinned host memory, not device memory"));
        }
        Ok(mem)
    }

    /// Enqueues on `stream` (of this device) a copy from `src` of device
    /// `from` to `dst` of device `to`: the worker copies between the two
    /// allocations, which it holds until it has.
    fn copy_between(
        &self,
        from: &HostDevice,
        src: DeviceRange,
        to: &HostDevice,
        dst: DeviceRange,
        stream: StreamId,
        call: &'static str,
    ) -> Result<()> {
        check_copy_ranges(Backend::Host, src, dst)?;
        let (source, target) = (from.device_range(call, src)?, to.device_range(call, dst)?);
        let queue = self.stream(call, stream)?;
        if src.len == 0 {
            return Ok(());
        }
        queue.enqueue(
            call,
            Box::new(move || {
                // SAFETY: both ranges lie inside their allocations, which
                // this closure keeps alive, and do not overlap (checked
                // above; allocations of two devices never share bytes).
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        source.ptr().as_ptr().add(src.offset),
                        target.ptr().as_ptr().add(dst.offset),
                        src.len,
                    )
                };
                Ok(())
            }),
        )
    }

    fn enqueue(&self, call: &'static str, stream: StreamId, op: Op) -> Result<()> {
        self.stream(call, stream)?.enqueue(call, op)
    }

    /// Stores `mem` (dropped again when the table is full).
    fn insert_alloc(&self, mem: HostMemory) -> Result<AllocId> {
        self.allocs.insert(Arc::new(mem)).map(AllocId).map_err(|(_, e)| e)
    }
}

impl Drop for HostDevice {
    fn drop(&mut self) {
        // A user event nobody will complete any more would hold its
        // waiting streams' workers forever: open them, then let every
        // stream finish, since queued copies read and write pinned memory
        // that goes with the allocation table.
        for event in self.events.take_all() {
            event.release_gate();
        }
        for stream in self.streams.take_all() {
            let _ = stream.synchronize();
        }
    }
}

impl Default for HostDevice {
    fn default() -> Self {
        Self::new()
    }
}

impl Device for HostDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn live_handles(&self) -> Option<LiveHandles> {
        self.streams.drop_finished(|s| !matches!(s.query(), Ok(true)));
        Some(LiveHandles {
            streams: self.streams.live(),
            events: self.events.live(),
            allocations: self.allocs.live(),
            modules: self.modules.live(),
            kernels: self.kernels.live(),
            graphs: 0,
        })
    }

    fn create_stream(&self, _flags: StreamFlags) -> Result<StreamId> {
        Ok(StreamId(self.streams.insert(HostStream::new("hetero-host-stream".to_string())?)))
    }

    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        // Queued work still runs; a busy stream is kept (its copies may read
        // pinned memory the device frees at its drop, which waits for it).
        self.streams.retire("destroy_stream", stream.0, |s| !matches!(s.query(), Ok(true)))
    }

    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        self.stream("synchronize_stream", stream)?.synchronize()
    }

    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        self.stream("query_stream", stream)?.query()
    }

    fn create_event(&self) -> Result<EventId> {
        Ok(EventId(self.events.insert(HostEvent::default())))
    }

    fn create_sync_event(&self) -> Result<EventId> {
        Ok(EventId(self.events.insert(HostEvent::sync())))
    }

    fn create_user_event(&self) -> Result<EventId> {
        Ok(EventId(self.events.insert(HostEvent::user())))
    }

    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        let ev = self.event("complete_user_event", event)?;
        if !ev.is_user() {
            return Err(error("complete_user_event", ErrorKind::InvalidHandle, "event is not a user event"));
        }
        ev.release_gate();
        Ok(())
    }

    unsafe fn destroy_event(&self, event: EventId) -> Result<()> {
        // A user event released while streams wait on it would hold them forever.
        self.events.remove("destroy_event", event.0)?.release_gate();
        Ok(())
    }

    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        let ev = self.event("record_event", event)?;
        if ev.is_user() {
            return Err(error("record_event", ErrorKind::InvalidHandle, "a user event cannot be recorded"));
        }
        let target = self.stream("record_event", stream)?;
        let generation = ev.begin_record();
        target.signal("record_event", ev, generation)
    }

    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        Ok(self.event("query_event", event)?.is_complete())
    }

    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        self.event("synchronize_event", event)?.wait()
    }

    unsafe fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64> {
        let t0 = self.event("elapsed_ms", start)?.time("elapsed_ms")?;
        let t1 = self.event("elapsed_ms", end)?.time("elapsed_ms")?;
        let ms = |t: Instant| t.duration_since(self.epoch).as_secs_f64() * 1e3;
        Ok(ms(t1) - ms(t0))
    }

    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        let ev = self.event("stream_wait_event", event)?;
        let generation = ev.current();
        // A failure of the recorded stream becomes this stream's failure.
        self.enqueue("stream_wait_event", stream, Box::new(move || ev.wait_for(generation)))
    }

    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        self.insert_alloc(HostMemory::new("alloc_device", bytes, false, self.memory_limit)?)
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        self.insert_alloc(HostMemory::new("alloc_pinned", bytes, true, self.memory_limit)?)
    }

    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        let mem = self.alloc("pinned_ptr", alloc)?;
        if !mem.pinned {
            return Err(error(
                "pinned_ptr",
                ErrorKind::InvalidHandle,
                "allocation is device memory, not pinned host memory",
            ));
        }
        Ok(mem.ptr())
    }

    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize> {
        Ok(self.alloc("alloc_size", alloc)?.size())
    }

    unsafe fn free(&self, alloc: AllocId) -> Result<()> {
        self.allocs.remove("free", alloc.0).map(drop)
    }

    unsafe fn adopt_memory(&self, memory: RawMemory, len: usize, release: Option<Release>) -> Result<AllocId> {
        let RawMemory::Address(address) = memory else {
            return Err(error(
                "adopt_memory",
                ErrorKind::Unsupported,
                "the host backend adopts host addresses, not cl_mem",
            ));
        };
        // SAFETY: the caller keeps len bytes at address valid until the free.
        self.insert_alloc(unsafe { HostMemory::adopted(address, len, release)? })
    }

    unsafe fn raw_memory(&self, alloc: AllocId) -> Result<RawMemory> {
        Ok(RawMemory::Address(self.alloc("raw_memory", alloc)?.ptr().as_ptr() as usize as u64))
    }

    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        let mem = self.range("copy_h2d", dst)?;
        if dst.len == 0 {
            return Ok(());
        }
        let src = SendPtr(src.cast_mut());
        self.enqueue(
            "copy_h2d",
            stream,
            Box::new(move || {
                let src = src;
                // SAFETY: the caller keeps src valid for dst.len bytes until
                // completion; dst lies inside mem (checked above).
                unsafe { std::ptr::copy_nonoverlapping(src.0, mem.ptr().as_ptr().add(dst.offset), dst.len) };
                Ok(())
            }),
        )
    }

    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        let mem = self.range("copy_d2h", src)?;
        if src.len == 0 {
            return Ok(());
        }
        let dst = SendPtr(dst);
        self.enqueue(
            "copy_d2h",
            stream,
            Box::new(move || {
                let dst = dst;
                // SAFETY: the caller keeps dst valid for src.len bytes until
                // completion; src lies inside mem (checked above).
                unsafe { std::ptr::copy_nonoverlapping(mem.ptr().as_ptr().add(src.offset), dst.0, src.len) };
                Ok(())
            }),
        )
    }

    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.copy_between(self, src, self, dst, stream, "copy_d2d")
    }

    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        check_fill_range(Backend::Host, dst)?;
        let mem = self.device_range("fill_u32", dst)?;
        if dst.len == 0 {
            return Ok(());
        }
        let bytes = pattern.to_ne_bytes();
        self.enqueue(
            "fill_u32",
            stream,
            Box::new(move || {
                // SAFETY: the range lies inside mem (checked above) and no
                // other stream writes it (Device contract).
                let out = unsafe { std::slice::from_raw_parts_mut(mem.ptr().as_ptr().add(dst.offset), dst.len) };
                for chunk in out.chunks_exact_mut(4) {
                    chunk.copy_from_slice(&bytes);
                }
                Ok(())
            }),
        )
    }

    fn as_peer(&self) -> &dyn Any {
        self
    }

    fn peer_route(&self, peer: &dyn Any) -> Result<PeerRoute> {
        peer_of::<HostDevice>(Backend::Host, "peer_route", peer).map(|_| PeerRoute::Direct)
    }

    unsafe fn copy_peer(&self, src: PeerRange<'_>, dst: PeerRange<'_>, stream: StreamId) -> Result<PeerRoute> {
        let (from, to) = sides(self, "copy_peer", src, dst)?;
        self.copy_between(from, src.range, to, dst.range, stream, "copy_peer")?;
        Ok(PeerRoute::Direct)
    }

    unsafe fn stream_wait_peer_event(&self, stream: StreamId, peer: &dyn Any, event: EventId) -> Result<()> {
        self.wait_peer("stream_wait_peer_event", stream, peer, event, true)
    }

    unsafe fn stream_wait_peer_settled(&self, stream: StreamId, peer: &dyn Any, event: EventId) -> Result<()> {
        self.wait_peer("stream_wait_peer_settled", stream, peer, event, false)
    }

    fn build_module(&self, source: &str, options: &BuildOptions, host_kernels: &[HostKernel]) -> Result<ModuleId> {
        Ok(ModuleId(self.modules.insert(HostModule::build(source, options, host_kernels)?)))
    }

    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        let built = self.modules.get("kernel", module.0)?;
        let Some(function) = built.kernels.get(name).cloned() else {
            let mut known: Vec<_> = built.kernels.keys().cloned().collect();
            known.sort();
            return Err(error(
                "kernel",
                ErrorKind::KernelNotFound,
                format!("no kernel `{name}` in the module; it has: {}", known.join(", ")),
            ));
        };
        Ok(KernelId(self.kernels.insert(function)))
    }

    unsafe fn kernel_limits(&self, kernel: KernelId) -> Result<KernelLimits> {
        // Host kernels run any block the device allows, one thread after
        // another, and declare no shared memory of their own.
        self.kernels.get("kernel_limits", kernel.0)?;
        Ok(KernelLimits::new(&self.info, self.info.max_threads_per_block, 1, 0))
    }

    unsafe fn launch(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()> {
        config.validate(&self.info, "launch")?;
        let entry = self.kernels.get("launch", kernel.0)?;
        let kernel = Arc::clone(&entry);
        let values = args
            .iter()
            .map(|arg| {
                Ok(match arg {
                    &KernelArg::Buffer { alloc, offset } => {
                        let mem = self.device_range("launch", DeviceRange { alloc, offset, len: 0 })?;
                        // SAFETY: offset <= size (checked by device_range), so the pointer stays in the block.
                        let ptr = unsafe { mem.ptr().as_ptr().add(offset) };
                        Value::Buffer { ptr, len: mem.size() - offset, _owner: mem }
                    }
                    scalar => Value::Scalar(scalar.clone()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let args = Args::new(&kernel, values);
        let config = *config;
        self.enqueue(
            "launch",
            stream,
            Box::new(move || {
                let [gx, gy, gz] = config.grid.map(u64::from);
                // At most 2^63 blocks within PORTABLE_GRID_LIMITS; checked all the same.
                let blocks = gx.checked_mul(gy).and_then(|b| b.checked_mul(gz)).ok_or_else(|| {
                    error("launch", ErrorKind::InvalidLaunch, format!("grid {:?} has too many blocks", config.grid))
                })?;
                (0..blocks)
                    .into_par_iter()
                    .try_for_each(|flat| {
                        let block = Block {
                            idx: [(flat % gx) as u32, (flat / gx % gy) as u32, (flat / (gx * gy)) as u32],
                            dim: config.block,
                            grid: config.grid,
                            shared_bytes: config.shared_bytes,
                        };
                        (kernel.function)(&block, &args)
                    })
                    .map_err(|fault| {
                        error("launch", ErrorKind::KernelFault, format!("kernel `{}` faulted: {fault}", kernel.name))
                    })
            }),
        )
    }
}

/// Physical memory of the machine, from `/proc/meminfo` where there is one.
fn host_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(u64::MAX)
}

/// The CPU's model name, from `/proc/cpuinfo` where there is one.
fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_string())
}
