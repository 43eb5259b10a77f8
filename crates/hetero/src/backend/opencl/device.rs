//! [`OpenClDevice`]: one device of one OpenCL platform.

use std::any::Any;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use opencl3::command_queue::{
    CL_QUEUE_CONTEXT, CL_QUEUE_DEVICE, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, CL_QUEUE_PROFILING_ENABLE,
    CL_QUEUE_PROPERTIES, CommandQueue, enqueue_copy_buffer, enqueue_fill_buffer, enqueue_nd_range_kernel,
    enqueue_read_buffer, enqueue_write_buffer, get_command_queue_info, retain_command_queue,
};
use opencl3::context::Context;
use opencl3::device::Device as ClDevice;
use opencl3::event::{CL_COMPLETE, Event, create_user_event, set_user_event_status};
use opencl3::types::{
    CL_BLOCKING, CL_NON_BLOCKING, cl_bool, cl_command_queue, cl_context, cl_device_id, cl_event, cl_kernel, cl_mem,
    cl_uint,
};
use smallvec::SmallVec;

use super::bridge::{self, Bridged};
use super::error::{error, from_cl, from_code};
use super::event::{self, ClEvent};
use super::graph::{self, ClGraph, Command, CommandBuffers, Recording};
use super::memory::{self, ClMemory, StagingPool, View};
use super::module::{self, ArgValue, ClKernel, Instance, Shape, shape};
use super::stream::{self, ClStream, Queues, is_complete};
use crate::backend::allocations::Allocations;
use crate::backend::handles::Handles;
use crate::backend::peer::{peer_gate_refused_on, peer_of, sides};
use crate::device::{
    AllocId, Backend, Device, DeviceInfo, DeviceRange, EventId, GraphId, GraphNode, GraphOp, INLINE_ARGS, KernelArg,
    KernelId, LaunchConfig, ModuleId, OPENCL_MAX_BLOCKS, PORTABLE_GRID_LIMITS, StreamFlags, StreamId,
    check_copy_ranges, check_fill_range, check_kernel_limits, check_range,
};
use crate::device::{BuildOptions, KernelLimits};
use crate::device::{LiveHandles, PeerRange, PeerRoute, RawMemory, RawStream, Release};
use crate::error::{ErrorKind, Result};
use crate::host_kernel::HostKernel;

/// An OpenCL device, in a context of its own or in one with the other
/// devices of its platform (`HETERO_OPENCL_CONTEXT`).
pub struct OpenClDevice {
    info: DeviceInfo,
    pub(super) device: ClDevice,
    /// Shared by the devices of one platform where the driver made one
    /// context for them all: their buffers and events are then one
    /// context's, so a peer copy is one `clEnqueueCopyBuffer` and a wait on
    /// another device's event needs no bridge.
    pub(super) context: Arc<Context>,
    /// Largest single allocation (`CL_DEVICE_MAX_MEM_ALLOC_SIZE`).
    max_alloc: u64,
    /// Alignment in bytes that a sub-buffer's origin needs.
    base_align: usize,
    /// Maps and unmaps pinned buffers; runs nothing else.
    mapper: Arc<CommandQueue>,
    /// Every stream, for the flushes of one made by another's enqueue.
    queues: Arc<Queues>,
    streams: Handles<ClStream>,
    events: Handles<ClEvent>,
    allocs: Allocations<ClMemory>,
    /// Allocations freed so far: kernel objects forget the arguments they
    /// kept when it changes ([`Instance`]).
    frees: AtomicU64,
    modules: Handles<opencl3::program::Program>,
    kernels: Handles<ClKernel>,
    graphs: Handles<ClGraph>,
    /// `cl_khr_command_buffer`, where the device has it and graphs may use
    /// it ([`graph::GRAPHS_ENV`]).
    command_buffers: Option<CommandBuffers>,
    /// The queues for this device's halves of staged peer copies that run
    /// on another device's streams: one per such (near) stream, made at its
    /// first copy, so that a copy held on one stream holds no other
    /// stream's copies (`a_gated_peer_copy_holds_no_other_stream`).
    peer_queues: Mutex<Vec<(StreamId, Arc<ClStream>)>>,
    /// Pinned buffers for the staged peer copies made on this device's
    /// streams ([`StagingPool`]).
    staging: StagingPool,
    /// What completes this device's waits across contexts
    /// ([`bridge::BRIDGE_ENV`]).
    bridges: bridge::Via,
}

/// Peer queues a device keeps (one per near stream) before it lets idle ones go.
const MAX_PEER_QUEUES: usize = 16;

impl std::fmt::Debug for OpenClDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenClDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

/// `CL_DEVICE_WARP_SIZE_NV` (cl_nv_device_attribute_query).
const WARP_SIZE_NV: u32 = 0x4003;
/// `CL_DEVICE_WAVEFRONT_WIDTH_AMD` (cl_amd_device_attribute_query).
const WAVEFRONT_WIDTH_AMD: u32 = 0x4043;

/// The device's PCI address where `cl_khr_pci_bus_info`, among its
/// `extensions`, gives it.
fn pci_bus_id(device: &ClDevice, extensions: &str) -> Option<String> {
    if !extensions.contains("cl_khr_pci_bus_info") {
        return None;
    }
    let info = device.pcibusinfokhr_intel().ok()?;
    Some(format!("{:04x}:{:02x}:{:02x}.{:x}", info.pci_domain, info.pci_bus, info.pci_device, info.pci_function))
}

/// The device's UUID where `cl_khr_device_uuid`, among its `extensions`,
/// gives one.
fn uuid(device: &ClDevice, extensions: &str) -> Option<String> {
    if !extensions.contains("cl_khr_device_uuid") {
        return None;
    }
    device.uuid_khr().ok().filter(|u| u.iter().any(|&b| b != 0)).map(|u| crate::device::format_uuid(&u))
}

/// The subgroup widths kernels get on a device of `vendor`: NVIDIA's warps
/// through PTX ([`module::subgroups_by_ptx`]); no other OpenCL device yet (the
/// `cl_khr_subgroups` route is not written).
fn subgroup_sizes(vendor: &str) -> Vec<u32> {
    if module::subgroups_by_ptx(vendor) { vec![32] } else { Vec::new() }
}

impl OpenClDevice {
    /// Opens `device` of the platform described by `platform`, as number
    /// `ordinal`, in `shared` (a context of its platform's devices) or else
    /// in a context of its own.
    pub(super) fn new(
        device: ClDevice,
        platform: String,
        ordinal: usize,
        shared: Option<Arc<Context>>,
    ) -> Result<Self> {
        let q = |call| from_cl(call);
        let sizes = device.max_work_item_sizes().map_err(q("clGetDeviceInfo"))?;
        let dim = |i: usize| sizes.get(i).map_or(1, |&s| u32::try_from(s).unwrap_or(u32::MAX));
        let vendor_query =
            |param| opencl3::device::get_device_info(device.id(), param).ok().map(|v| v.to_uint()).filter(|&w| w > 0);
        let extensions = device.extensions().unwrap_or_default();
        let name = device.name().map_err(q("clGetDeviceInfo"))?.trim().to_string();
        let vendor = device.vendor().map_err(q("clGetDeviceInfo"))?.trim().to_string();
        let info = DeviceInfo {
            backend: Backend::OpenCl,
            ordinal,
            // AMD's OpenCL names a device by its target (`gfx90a:sramecc+:xnack-`).
            arch: name.starts_with("gfx").then(|| name.clone()),
            name,
            vendor: vendor.clone(),
            platform,
            total_memory: device.global_mem_size().map_err(q("clGetDeviceInfo"))?,
            max_threads_per_block: u32::try_from(device.max_work_group_size().map_err(q("clGetDeviceInfo"))?)
                .unwrap_or(u32::MAX),
            max_block_dims: [dim(0), dim(1), dim(2)],
            // OpenCL states no grid limit of its own.
            max_grid_dims: PORTABLE_GRID_LIMITS,
            max_blocks: OPENCL_MAX_BLOCKS,
            shared_memory_per_block: usize::try_from(device.local_mem_size().map_err(q("clGetDeviceInfo"))?)
                .unwrap_or(usize::MAX),
            compute_units: device.max_compute_units().map_err(q("clGetDeviceInfo"))?,
            warp_size: vendor_query(WARP_SIZE_NV).or_else(|| vendor_query(WAVEFRONT_WIDTH_AMD)).unwrap_or(1),
            subgroup_sizes: subgroup_sizes(&vendor),
            fp64: device.double_fp_config().is_ok_and(|config| config != 0),
            pci_bus_id: pci_bus_id(&device, &extensions),
            uuid: uuid(&device, &extensions),
        };
        let command_buffers = if graph::allowed()? { CommandBuffers::find(&device) } else { None };
        let context = match shared {
            Some(context) => context,
            None => Arc::new(Context::from_device(&device).map_err(q("clCreateContext"))?),
        };
        let mapper = Arc::new(stream::create(&context, device.id(), false)?);
        let max_alloc = device.max_mem_alloc_size().map_err(q("clGetDeviceInfo"))?;
        // Mesa's rusticl: blocking copies waited for (`Queues`), bridges by
        // blocked threads (`bridge::via`).
        let rusticl = info.platform.starts_with("rusticl");
        Ok(Self {
            staging: StagingPool::new(Arc::clone(&context), Arc::clone(&mapper), max_alloc),
            mapper,
            queues: Queues::new(rusticl),
            bridges: bridge::via(rusticl)?,
            max_alloc,
            base_align: (device.mem_base_addr_align().map_err(q("clGetDeviceInfo"))? as usize / 8).max(1),
            info,
            device,
            context,
            streams: Handles::new(Backend::OpenCl, "stream"),
            events: Handles::new(Backend::OpenCl, "event"),
            allocs: Allocations::new(Backend::OpenCl),
            frees: AtomicU64::new(0),
            modules: Handles::new(Backend::OpenCl, "module"),
            kernels: Handles::new(Backend::OpenCl, "kernel"),
            graphs: Handles::new(Backend::OpenCl, "graph"),
            command_buffers,
            peer_queues: Mutex::new(Vec::new()),
        })
    }

    /// The queue for this device's halves of staged peer copies made on
    /// `near`, a stream of another device (stream ids are unique in the
    /// process). Past [`MAX_PEER_QUEUES`], queues no copy is enqueueing on
    /// go: their queued commands still run, and a copy's halves are ordered
    /// through its near stream, never through this queue's order.
    fn peer_queue(&self, near: StreamId) -> Result<Arc<ClStream>> {
        let mut queues = self.peer_queues.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, queue)) = queues.iter().find(|(id, _)| *id == near) {
            return Ok(Arc::clone(queue));
        }
        if queues.len() >= MAX_PEER_QUEUES {
            queues.retain(|(_, queue)| Arc::strong_count(queue) > 1);
        }
        let made = ClStream::new(&self.context, self.device.id(), false, &self.queues)?;
        queues.push((near, Arc::clone(&made)));
        Ok(made)
    }

    /// A copy from `source` (of device `from`) to `target` (of `to`)
    /// through pinned host memory of this device ([`StagingPool`]), on `queue`
    /// (stream `near`) of this device, one of the two: the reads run on the
    /// source's side, the writes on the destination's, the other device's
    /// half on its peer queue for `near` ([`OpenClDevice::peer_queue`]).
    /// Each write waits for its read through an [`bridge::make`]; from
    /// [`memory::HALVES_FROM`] bytes the copy moves in two halves, so the
    /// first half's write overlaps the second's read. `queue` then follows
    /// the last write. On an error after a command was enqueued, both
    /// queues are finished before it returns (nothing still uses the
    /// memory).
    fn staged_copy(
        &self,
        (near, queue): (StreamId, &ClStream),
        (from, source, src): (&OpenClDevice, View, DeviceRange),
        (to, target, dst): (&OpenClDevice, View, DeviceRange),
    ) -> Result<()> {
        let lease = self.staging.take(src.len, &self.queues)?;
        let bytes = lease.ptr();
        let pull = std::ptr::eq(self, to);
        let theirs = if pull { from.peer_queue(near)? } else { to.peer_queue(near)? };
        let (reader, writer) = if pull { (&*theirs, queue) } else { (queue, &*theirs) };
        let read = |(at, len): (usize, usize)| {
            // SAFETY: the range lies in the buffer (checked by the caller);
            // the staging bytes (at least `src.len`) are this copy's until
            // the last command using them completes; the wait list is valid
            // for the call.
            reader.enqueue_flushed("clEnqueueReadBuffer", &mut |n, list| unsafe {
                enqueue_read_buffer(
                    reader.queue.get(),
                    source.mem,
                    CL_NON_BLOCKING,
                    src.offset + at,
                    len,
                    bytes.add(at).cast(),
                    n,
                    list,
                )
            })
        };
        let write = |(at, len): (usize, usize)| {
            // SAFETY: as for the read.
            writer.enqueue_flushed("clEnqueueWriteBuffer", &mut |n, list| unsafe {
                enqueue_write_buffer(
                    writer.queue.get(),
                    target.mem,
                    CL_NON_BLOCKING,
                    dst.offset + at,
                    len,
                    bytes.add(at).cast(),
                    n,
                    list,
                )
            })
        };
        // The last command enqueued that uses the staging bytes.
        let mut last: Option<Arc<Event>> = None;
        let mut steps = || -> Result<()> {
            if pull {
                let here = queue.recording(false)?;
                queue.flush()?;
                if let Some(bridge) = bridge::make(&here, self.bridges, &from.context, Bridged::Inherit)? {
                    theirs.defer_wait(bridge);
                }
            }
            let pieces = memory::pieces(src.len);
            let mut reads = Vec::with_capacity(pieces.len());
            for &piece in &pieces {
                let done = read(piece)?;
                last = Some(Arc::clone(&done));
                reads.push(done);
            }
            for (&piece, done) in pieces.iter().zip(&reads) {
                if let Some(bridge) = bridge::make(done, self.bridges, &to.context, Bridged::Inherit)? {
                    writer.defer_wait(bridge);
                }
                last = Some(write(piece)?);
            }
            if !pull {
                if let Some(written) = &last
                    && let Some(bridge) = bridge::make(written, self.bridges, &self.context, Bridged::Inherit)?
                {
                    queue.defer_wait(bridge);
                }
                queue.recording(false)?;
                queue.flush()?;
            }
            Ok(())
        };
        let outcome = steps();
        if outcome.is_err() && last.is_some() {
            let _ = queue.finish();
            let _ = theirs.finish();
        }
        lease.give_back(last);
        outcome
    }

    /// Makes `stream` wait for `event` of `peer` (this device or another),
    /// across contexts through a [`bridge::make`] of kind `kind`.
    fn wait_peer(
        &self,
        call: &'static str,
        stream: StreamId,
        peer: &dyn Any,
        event: EventId,
        kind: Bridged,
    ) -> Result<()> {
        let peer = peer_of::<Self>(Backend::OpenCl, call, peer)?;
        if std::ptr::eq(self, peer) && kind == Bridged::Inherit {
            // SAFETY: the caller's contract.
            return unsafe { self.stream_wait_event(stream, event) };
        }
        let queue = self.queue(call, stream)?;
        let slot = peer.events.get(call, event.0)?;
        if slot.user {
            return Err(peer_gate_refused_on(Backend::OpenCl));
        }
        // `current` flushed the event's queue, so the callback (or, in one
        // context, the event itself) will come.
        if let Some(recorded) = slot.current()? {
            if self.shares_context(peer) && kind == Bridged::Inherit {
                // One context: the event goes in the wait list as it is.
                queue.defer_wait(recorded);
            } else if let Some(bridge) = bridge::make(&recorded, self.bridges, &self.context, kind)? {
                queue.defer_wait(bridge);
            }
        }
        Ok(())
    }

    /// Whether `other` is in this device's context (itself included).
    fn shares_context(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.context, &other.context)
    }

    fn queue(&self, call: &'static str, id: StreamId) -> Result<Arc<ClStream>> {
        self.streams.get(call, id.0)
    }

    /// Stores `mem` (released again when the table is full).
    fn insert_alloc(&self, mem: ClMemory) -> Result<AllocId> {
        self.allocs.insert(mem).map(AllocId).map_err(|(_, e)| e)
    }

    /// The buffer of `range`, checked to contain it.
    fn range(&self, call: &'static str, range: DeviceRange) -> Result<View> {
        let mem = self.allocs.with(call, range.alloc.0, ClMemory::view)?;
        check_range(Backend::OpenCl, call, range.offset, range.len, mem.size)?;
        Ok(mem)
    }

    /// As [`Self::range`], refusing pinned memory (device operations never
    /// touch memory the host may be reading).
    fn device_range(&self, call: &'static str, range: DeviceRange) -> Result<View> {
        let mem = self.range(call, range)?;
        if mem.pinned {
            return Err(error(call, ErrorKind::InvalidHandle, "allocation is pinned host memory, not device memory"));
        }
        Ok(mem)
    }

    /// The buffer of a kernel argument at `offset` bytes into device
    /// allocation `alloc`: the buffer itself, or its sub-buffer from that
    /// offset (kernels take buffers, not pointers), kept by the allocation.
    fn argument_buffer(&self, alloc: AllocId, offset: usize) -> Result<cl_mem> {
        let mem = self.device_range("launch", DeviceRange { alloc, offset, len: 0 })?;
        if offset == 0 {
            return Ok(mem.mem);
        }
        if !offset.is_multiple_of(self.base_align) {
            return Err(error(
                "clCreateSubBuffer",
                ErrorKind::InvalidLaunch,
                format!(
                    "a kernel buffer argument at byte offset {offset} is not aligned to {} bytes, as {} requires",
                    self.base_align, self.info.name
                ),
            ));
        }
        self.allocs.with("launch", alloc.0, |memory| memory.sub_buffer(offset))?
    }

    /// Enqueues a write of host memory at `src` into `dst`, blocking or not.
    ///
    /// # Safety
    /// As [`Device::copy_h2d`]; blocking, `src` need only be valid during the call.
    unsafe fn write(
        &self,
        op: &'static str,
        src: *const u8,
        dst: DeviceRange,
        stream: StreamId,
        blocking: cl_bool,
    ) -> Result<()> {
        let mem = self.range(op, dst)?;
        let queue = self.queue(op, stream)?;
        if dst.len == 0 {
            return Ok(());
        }
        let (blocking, waited) = self.blocking(blocking);
        // SAFETY: the range lies in mem (checked); the caller keeps src valid
        // until completion; the wait list is valid for the call.
        let command = &mut |n, list| unsafe {
            enqueue_write_buffer(
                queue.queue.get(),
                mem.mem,
                blocking,
                dst.offset,
                dst.len,
                src.cast_mut().cast(),
                n,
                list,
            )
        };
        queue.submit("clEnqueueWriteBuffer", blocking == CL_BLOCKING, waited, command)
    }

    /// The blocking flag to enqueue a read or write with, and whether it is
    /// then to be waited for instead ([`Queues::wait_instead_of_blocking`]).
    fn blocking(&self, blocking: cl_bool) -> (cl_bool, bool) {
        if blocking == CL_BLOCKING && self.queues.wait_instead_of_blocking() {
            (CL_NON_BLOCKING, true)
        } else {
            (blocking, false)
        }
    }

    /// Enqueues a read of `src` into host memory at `dst`, blocking or not.
    ///
    /// # Safety
    /// As [`Device::copy_d2h`]; blocking, `dst` need only be valid during the call.
    unsafe fn read(
        &self,
        op: &'static str,
        src: DeviceRange,
        dst: *mut u8,
        stream: StreamId,
        blocking: cl_bool,
    ) -> Result<()> {
        let mem = self.range(op, src)?;
        let queue = self.queue(op, stream)?;
        if src.len == 0 {
            return Ok(());
        }
        let (blocking, waited) = self.blocking(blocking);
        // SAFETY: the range lies in mem (checked); the caller keeps dst valid
        // until completion; the wait list is valid for the call.
        let command = &mut |n, list| unsafe {
            enqueue_read_buffer(queue.queue.get(), mem.mem, blocking, src.offset, src.len, dst.cast(), n, list)
        };
        queue.submit("clEnqueueReadBuffer", blocking == CL_BLOCKING, waited, command)
    }

    /// Ends a blocking copy. After a successful one, every earlier command
    /// has completed: only the last remembered one's status is read, so the
    /// failure of earlier work is reported. After a failed one, the stream
    /// is synchronised, so nothing still runs when the error returns.
    ///
    /// # Safety
    /// The stream must be owned by the caller.
    unsafe fn after_blocking(&self, call: &'static str, copied: Result<()>, stream: StreamId) -> Result<()> {
        match copied {
            Ok(()) => self.queue(call, stream)?.check_earlier(call),
            Err(e) => {
                // SAFETY: the caller owns the stream. Its result does not
                // matter: the copy's error is the one to report.
                let _ = unsafe { self.synchronize_stream(stream) };
                Err(e)
            }
        }
    }

    /// The checks of a launch of `kernel` that need the kernel: its limits
    /// and whether its last parameter takes the dynamic local memory.
    fn check_launch(&self, kernel: &ClKernel, config: &LaunchConfig, args: &[KernelArg]) -> Result<bool> {
        check_kernel_limits(&self.info, &kernel.name, config, &kernel.limits)?;
        match kernel.num_args as usize {
            n if n == args.len() => Ok(false),
            n if n == args.len() + 1 && config.shared_bytes > 0 => Ok(true),
            n => Err(error(
                "launch",
                ErrorKind::InvalidLaunch,
                format!(
                    "kernel `{}` takes {n} parameters but the launch passed {} arguments{}",
                    kernel.name,
                    args.len(),
                    if n == args.len() + 1 { " and no dynamic shared memory" } else { "" }
                ),
            )),
        }
    }

    /// [`Device::launch`] once the launch is checked: sets the arguments of
    /// the calling thread's kernel object and enqueues it, outside the
    /// kernel table's lock (an enqueue into a full queue blocks, and a
    /// change to the table waits for every reader).
    ///
    /// # Safety
    /// As [`Device::launch`]; `instance` is the launched kernel's.
    unsafe fn launch_instance(
        &self,
        instance: &Mutex<Instance>,
        dynamic_local: bool,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
        evented: bool,
    ) -> Result<()> {
        let queue = self.queue("launch", stream)?;
        // SAFETY: the caller's contract, passed on.
        let guard = unsafe { self.bind_args(instance, dynamic_local, config, args) }?;
        let range = shape(config);
        let (q, k, call) = (queue.queue.get(), guard.get(), "clEnqueueNDRangeKernel");
        // Both: arguments are set; sizes are validated; the caller
        // guarantees the kernel stays within its buffers; the wait list is
        // valid for the call.
        let launched = if evented {
            // SAFETY: as above.
            queue.enqueue(call, &mut |n, list| unsafe {
                let (g, l) = (range.global.as_ptr(), range.local.as_ptr());
                enqueue_nd_range_kernel(q, k, range.dims, std::ptr::null(), g, l, n, list)
            })
        } else {
            // SAFETY: as above.
            queue.enqueue_unevented(call, &mut |n, list| unsafe { enqueue_kernel_unevented(q, k, &range, n, list) })
        };
        drop(guard);
        launched
    }

    /// [`Device::launch`], the command returning an event or not
    /// ([`ClStream::enqueue_unevented`]).
    ///
    /// # Safety
    /// As [`Device::launch`].
    unsafe fn launch_as(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
        evented: bool,
    ) -> Result<()> {
        config.validate(&self.info, "launch")?;
        // The checks under the kernel table's read lock, for the calling
        // thread's kernel object: every thread launches the same kernels,
        // so a reference count per launch on the kernel would be a shared write.
        let (instance, dynamic_local) = self.kernels.with("launch", kernel.0, |kernel| {
            self.check_launch(kernel, config, args).map(|dynamic_local| (kernel.instance(), dynamic_local))
        })??;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.launch_instance(&instance, dynamic_local, config, args, stream, evented) }
    }

    /// Sets `args` on `instance`, returned locked.
    ///
    /// # Safety
    /// As [`Device::launch`]; `instance` is the launched kernel's.
    unsafe fn bind_args<'k>(
        &self,
        instance: &'k Mutex<Instance>,
        dynamic_local: bool,
        config: &LaunchConfig,
        args: &[KernelArg],
    ) -> Result<std::sync::MutexGuard<'k, Instance>> {
        let mut mems: SmallVec<[cl_mem; INLINE_ARGS]> = SmallVec::new();
        for arg in args {
            if let KernelArg::Buffer { alloc, offset } = *arg {
                mems.push(self.argument_buffer(alloc, offset)?);
            }
        }
        let mut guard = module::lock(instance);
        guard.since(self.frees.load(Ordering::Acquire));
        let mut mem_iter = mems.iter();
        for (index, arg) in args.iter().enumerate() {
            let value = match arg {
                KernelArg::Buffer { .. } => match mem_iter.next() {
                    Some(&mem) => ArgValue::Mem(mem),
                    None => return Err(error("launch", ErrorKind::InvalidLaunch, "buffer argument mismatch")),
                },
                scalar => ArgValue::Bytes(scalar.value_bytes().unwrap_or_default()),
            };
            // SAFETY: buffers of this context; each value has its
            // parameter's size; the parameter types are the caller's contract.
            unsafe { guard.set(index as u32, value) }.map_err(from_code("clSetKernelArg"))?;
        }
        if dynamic_local {
            // SAFETY: the last parameter is the kernel's `__local` pointer.
            unsafe { guard.set(args.len() as u32, ArgValue::Local(config.shared_bytes)) }
                .map_err(from_code("clSetKernelArg"))?;
        }
        Ok(guard)
    }

    /// Checks a graph's nodes as their enqueues would (ranges, kinds of
    /// memory, kernels and launch shapes), enqueueing nothing.
    fn check_nodes(&self, nodes: &[GraphNode]) -> Result<()> {
        for node in nodes {
            match &node.op {
                GraphOp::CopyH2D { src, dst } => {
                    self.pinned_range("create_graph", *src)?;
                    self.device_range("create_graph", *dst)?;
                }
                GraphOp::CopyD2H { src, dst } => {
                    self.device_range("create_graph", *src)?;
                    self.pinned_range("create_graph", *dst)?;
                }
                GraphOp::CopyD2D { src, dst } => {
                    check_copy_ranges(Backend::OpenCl, *src, *dst)?;
                    self.device_range("create_graph", *src)?;
                    self.device_range("create_graph", *dst)?;
                }
                GraphOp::Fill { dst, .. } => {
                    check_fill_range(Backend::OpenCl, *dst)?;
                    self.device_range("create_graph", *dst)?;
                }
                GraphOp::Launch { kernel, config, args } => {
                    config.validate(&self.info, "create_graph")?;
                    self.kernels.with("create_graph", kernel.0, |k| self.check_launch(k, config, args))??;
                }
                GraphOp::Record { .. } | GraphOp::Wait { .. } => {}
            }
        }
        Ok(())
    }

    /// A pinned buffer's range, checked.
    fn pinned_range(&self, call: &'static str, range: DeviceRange) -> Result<View> {
        let mem = self.range(call, range)?;
        if !mem.pinned {
            return Err(error(call, ErrorKind::InvalidHandle, "allocation is device memory, not pinned host memory"));
        }
        Ok(mem)
    }

    /// Records `nodes` into a command buffer of `queue`: each command after
    /// the last of its graph stream and the graph events that stream waits
    /// for (module `graph`).
    fn record_graph(&self, calls: CommandBuffers, queue: &ClStream, nodes: &[GraphNode]) -> Result<Recording> {
        let mut recording = Recording::new(calls, queue.queue.get())?;
        let (streams, events) = GraphNode::counts(nodes);
        let mut last: Vec<Option<u32>> = vec![None; streams];
        let mut waits: Vec<Vec<u32>> = vec![Vec::new(); streams];
        let mut recorded: Vec<Option<u32>> = vec![None; events];
        for node in nodes {
            let s = node.stream;
            let copy = |src: View, src_offset: usize, dst: View, dst_offset: usize, len: usize| Command::Copy {
                src: src.mem,
                src_offset,
                dst: dst.mem,
                dst_offset,
                len,
            };
            let command = match &node.op {
                GraphOp::Record { event } => {
                    recorded[*event] = last[s];
                    continue;
                }
                GraphOp::Wait { event } => {
                    waits[s].extend(recorded[*event]);
                    continue;
                }
                GraphOp::CopyH2D { src, dst } => {
                    let (from, to) =
                        (self.pinned_range("create_graph", *src)?, self.device_range("create_graph", *dst)?);
                    copy(from, src.offset, to, dst.offset, dst.len)
                }
                GraphOp::CopyD2H { src, dst } => {
                    let (from, to) =
                        (self.device_range("create_graph", *src)?, self.pinned_range("create_graph", *dst)?);
                    copy(from, src.offset, to, dst.offset, src.len)
                }
                GraphOp::CopyD2D { src, dst } => {
                    let (from, to) =
                        (self.device_range("create_graph", *src)?, self.device_range("create_graph", *dst)?);
                    copy(from, src.offset, to, dst.offset, src.len)
                }
                GraphOp::Fill { dst, pattern } => {
                    let to = self.device_range("create_graph", *dst)?;
                    Command::Fill { dst: to.mem, offset: dst.offset, len: dst.len, pattern: *pattern }
                }
                GraphOp::Launch { kernel, config, args } => {
                    let (instance, dynamic_local) = self.kernels.with("create_graph", kernel.0, |k| {
                        self.check_launch(k, config, args).map(|dynamic_local| (k.instance(), dynamic_local))
                    })??;
                    // SAFETY: the caller's contract (`Device::create_graph`)
                    // covers the kernel's arguments.
                    let guard = unsafe { self.bind_args(&instance, dynamic_local, config, args) }?;
                    let kernel = recording.own_kernel(guard.get());
                    drop(guard);
                    let kernel = kernel?;
                    let range = shape(config);
                    let mut after = last[s].into_iter().collect::<Vec<_>>();
                    after.append(&mut waits[s]);
                    // SAFETY: the arguments are set on the recording's own
                    // copy of the kernel, which nothing else sets.
                    let point = unsafe { recording.record(&Command::Kernel { kernel, range }, &after) }?;
                    last[s] = Some(point);
                    continue;
                }
            };
            let empty = match command {
                Command::Copy { len, .. } | Command::Fill { len, .. } => len == 0,
                Command::Kernel { .. } => false,
            };
            if empty {
                continue;
            }
            let mut after = last[s].into_iter().collect::<Vec<_>>();
            after.append(&mut waits[s]);
            // SAFETY: buffers of this context, ranges checked above.
            last[s] = Some(unsafe { recording.record(&command, &after) }?);
        }
        recording.finalize()?;
        Ok(recording)
    }
}

/// `clEnqueueNDRangeKernel` with no event returned (opencl3 always asks
/// for one).
///
/// # Safety
/// As `clEnqueueNDRangeKernel`: live queue and kernel of one context, the
/// kernel's arguments set, the wait list valid for the call.
unsafe fn enqueue_kernel_unevented(
    queue: cl_command_queue,
    kernel: cl_kernel,
    range: &Shape,
    n: cl_uint,
    list: *const cl_event,
) -> std::result::Result<(), i32> {
    let runtime = cl3::load_library().as_ref().map_err(|_| cl3::error_codes::DLOPEN_RUNTIME_LOAD_FAILED)?;
    let null = std::ptr::null_mut();
    // The loader's wrapper is a safe method over the C call: this
    // function's contract is the call's, and the sizes are three-element
    // arrays, of which the call reads the first `range.dims`.
    let (g, l) = (range.global.as_ptr(), range.local.as_ptr());
    match runtime.clEnqueueNDRangeKernel(queue, kernel, range.dims, std::ptr::null(), g, l, n, list, null) {
        Some(0) => Ok(()),
        Some(status) => Err(status),
        None => Err(cl3::error_codes::DLOPEN_FUNCTION_NOT_AVAILABLE),
    }
}

/// Completes a user event unless it already is.
fn open_gate(slot: &ClEvent, call: &'static str) -> Result<()> {
    match slot.current()? {
        Some(ev) if !is_complete(&ev, call)? => {
            set_user_event_status(ev.get(), CL_COMPLETE).map_err(from_code("clSetUserEventStatus"))
        }
        _ => Ok(()),
    }
}

/// `clEnqueueCopyBuffer` of `src`'s bytes of `from` to `dst`'s of `to` on
/// `queue`, nothing for 0 bytes: buffers of the queue's context, each
/// range checked to lie in its buffer and the two not overlapping
/// (`check_copy_ranges`).
fn copy_buffer(queue: &ClStream, (from, src): (View, DeviceRange), (to, dst): (View, DeviceRange)) -> Result<()> {
    if src.len == 0 {
        return Ok(());
    }
    // SAFETY: both ranges lie in their buffers (checked by the callers) and
    // do not overlap; the wait list is valid for the call.
    queue.enqueue("clEnqueueCopyBuffer", &mut |n, list| unsafe {
        enqueue_copy_buffer(queue.queue.get(), from.mem, to.mem, src.offset, dst.offset, src.len, n, list)
    })
}

impl Device for OpenClDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId> {
        Ok(StreamId(self.streams.insert_shared(ClStream::new(
            &self.context,
            self.device.id(),
            flags.timing,
            &self.queues,
        )?)))
    }

    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        // A busy queue is kept until idle, or until the device's drop finishes it.
        self.streams.retire("destroy_stream", stream.0, |s| !matches!(s.is_idle(), Ok(true)))
    }

    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        self.queue("synchronize_stream", stream)?.finish()
    }

    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        self.queue("query_stream", stream)?.is_idle()
    }

    fn create_event(&self) -> Result<EventId> {
        Ok(EventId(self.events.insert(ClEvent::marker(true))))
    }

    fn create_sync_event(&self) -> Result<EventId> {
        Ok(EventId(self.events.insert(ClEvent::marker(false))))
    }

    fn create_user_event(&self) -> Result<EventId> {
        let raw = create_user_event(self.context.get()).map_err(from_code("clCreateUserEvent"))?;
        Ok(EventId(self.events.insert(ClEvent::user(Event::new(raw)))))
    }

    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        let slot = self.events.get("complete_user_event", event.0)?;
        if !slot.user {
            return Err(error("complete_user_event", ErrorKind::InvalidHandle, "event is not a user event"));
        }
        open_gate(&slot, "complete_user_event")
    }

    unsafe fn destroy_event(&self, event: EventId) -> Result<()> {
        let slot = self.events.remove("destroy_event", event.0)?;
        // A user event released while queues wait on it would hold them forever.
        if slot.user { open_gate(&slot, "destroy_event") } else { Ok(()) }
    }

    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        let slot = self.events.get("record_event", event.0)?;
        if slot.user {
            return Err(error("record_event", ErrorKind::InvalidHandle, "a user event cannot be recorded"));
        }
        let queue = self.queue("record_event", stream)?;
        let event = queue.recording(slot.timed)?;
        slot.set(event, queue);
        Ok(())
    }

    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        self.events.get("query_event", event.0)?.completed("query_event")
    }

    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        match self.events.get("synchronize_event", event.0)?.current()? {
            Some(ev) => {
                // A completed command needs neither a flush nor a wait (the
                // typed layer asks this of every completed mark it hands on).
                if is_complete(&ev, "synchronize_event")? {
                    return Ok(());
                }
                // Other queues' work must not wait for the host to come back.
                self.queues.flush_all();
                ev.wait().map_err(from_cl("clWaitForEvents"))
            }
            None => Ok(()),
        }
    }

    unsafe fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64> {
        let recording = |id: EventId| -> Result<_> {
            let slot = self.events.get("elapsed_ms", id.0)?;
            if !slot.timed {
                let what =
                    if slot.user { "user events carry no time" } else { "a synchronisation event carries no time" };
                return Err(error("elapsed_ms", ErrorKind::InvalidHandle, what));
            }
            slot.recording()?.ok_or_else(|| error("elapsed_ms", ErrorKind::NotReady, "event was never recorded"))
        };
        let (first, last) = (recording(start)?, recording(end)?);
        // Completion as the queues' order implies it.
        for recorded in [&first, &last] {
            if !event::completed(recorded, "elapsed_ms")? {
                return Err(error("elapsed_ms", ErrorKind::NotReady, "event has not completed yet"));
            }
        }
        let time = |ev: &opencl3::event::Event| -> Result<u64> {
            let begun = ev.profiling_command_start().map_err(from_cl("clGetEventProfilingInfo"))?;
            let ended = ev.profiling_command_end().map_err(from_cl("clGetEventProfilingInfo"))?;
            if ended == 0 {
                return Err(error(
                    "clGetEventProfilingInfo",
                    ErrorKind::Driver,
                    "the device reported no profiling time for a marker",
                ));
            }
            if begun > ended {
                return Err(error(
                    "clGetEventProfilingInfo",
                    ErrorKind::Driver,
                    format!("profiling times out of order: start {begun} ns after end {ended} ns"),
                ));
            }
            Ok(ended)
        };
        let (t0, t1) = (time(&first.0)?, time(&last.0)?);
        // Signed difference in floating point: never underflows.
        Ok((t1 as f64 - t0 as f64) / 1e6)
    }

    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        let queue = self.queue("stream_wait_event", stream)?;
        let Some(ev) = self.events.get("stream_wait_event", event.0)?.current()? else {
            return Ok(());
        };
        // `current` flushed the event's queue; the wait joins this queue's next command.
        queue.defer_wait(ev);
        Ok(())
    }

    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        self.insert_alloc(ClMemory::device(self.context.get(), bytes, self.max_alloc)?)
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        let pinned = ClMemory::pinned(self.context.get(), Arc::clone(&self.mapper), bytes, self.max_alloc)?;
        self.insert_alloc(pinned)
    }

    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        self.allocs.with("pinned_ptr", alloc.0, ClMemory::host_ptr)?.ok_or_else(|| {
            error("pinned_ptr", ErrorKind::InvalidHandle, "allocation is device memory, not pinned host memory")
        })
    }

    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize> {
        self.allocs.with("alloc_size", alloc.0, |mem| mem.size)
    }

    unsafe fn free(&self, alloc: AllocId) -> Result<()> {
        let freed = self.allocs.remove("free", alloc.0).map(drop);
        // After the release: a buffer made from now on may have its handle,
        // so arguments kept by kernel objects are forgotten.
        self.frees.fetch_add(1, Ordering::Release);
        freed
    }

    unsafe fn adopt_memory(&self, memory: RawMemory, len: usize, release: Option<Release>) -> Result<AllocId> {
        let RawMemory::ClMem(mem) = memory else {
            return Err(error("adopt_memory", ErrorKind::Unsupported, "OpenCL adopts a cl_mem, not an address"));
        };
        if mem.is_null() {
            return Err(error("adopt_memory", ErrorKind::InvalidHandle, "the cl_mem is null"));
        }
        // SAFETY: the caller promises a live memory object.
        self.insert_alloc(unsafe { ClMemory::adopted(self.context.get(), mem.cast(), len, release)? })
    }

    unsafe fn raw_memory(&self, alloc: AllocId) -> Result<RawMemory> {
        Ok(RawMemory::ClMem(self.allocs.with("raw_memory", alloc.0, |mem| mem.mem)?.cast()))
    }

    unsafe fn adopt_stream(&self, stream: RawStream) -> Result<StreamId> {
        let raw: cl_command_queue = stream.0.cast();
        if raw.is_null() {
            return Err(error("adopt_stream", ErrorKind::InvalidHandle, "the cl_command_queue is null"));
        }
        let info = |param| get_command_queue_info(raw, param).map_err(from_code("clGetCommandQueueInfo"));
        if isize::from(info(CL_QUEUE_CONTEXT)?) as cl_context != self.context.get()
            || isize::from(info(CL_QUEUE_DEVICE)?) as cl_device_id != self.device.id()
        {
            return Err(error(
                "adopt_stream",
                ErrorKind::DeviceMismatch,
                "the queue belongs to another OpenCL context or device than this device's",
            ));
        }
        let properties = info(CL_QUEUE_PROPERTIES)?.to_ulong();
        if properties & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE != 0 {
            return Err(error(
                "adopt_stream",
                ErrorKind::Unsupported,
                "the queue runs its commands out of order; a stream is in order",
            ));
        }
        let dimensions = self.device.max_work_item_dimensions().map_err(from_cl("clGetDeviceInfo"))?;
        // SAFETY: the caller promises a live queue; the reference taken
        // here is the CommandQueue's, released once when it drops.
        unsafe { retain_command_queue(raw) }.map_err(from_code("clRetainCommandQueue"))?;
        let queue = CommandQueue::new(raw, dimensions);
        let profiling = properties & CL_QUEUE_PROFILING_ENABLE != 0;
        Ok(StreamId(self.streams.insert_shared(ClStream::over(queue, profiling, &self.queues))))
    }

    unsafe fn raw_stream(&self, stream: StreamId) -> Result<RawStream> {
        let stream = self.queue("raw_stream", stream)?;
        // Waits are deferred to a stream's next command and commands are
        // flushed lazily: a marker takes the pending waits, and the flush
        // submits everything, so native work enqueued from here on runs
        // after all that hetero queued before.
        stream.recording(false)?;
        stream.flush()?;
        Ok(RawStream(stream.queue.get().cast()))
    }

    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract is copy_h2d's.
        unsafe { self.write("copy_h2d", src, dst, stream, CL_NON_BLOCKING) }
    }

    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract is copy_d2h's.
        unsafe { self.read("copy_d2h", src, dst, stream, CL_NON_BLOCKING) }
    }

    unsafe fn copy_h2d_sync(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        // A blocking write on an in-order queue returns once it and every
        // command before it ran: a synchronised copy in one call, which
        // NVIDIA's OpenCL does far faster than a write and a wait.
        // SAFETY: the caller's contract is copy_h2d_sync's.
        let written = unsafe { self.write("copy_h2d_sync", src, dst, stream, CL_BLOCKING) };
        // SAFETY: as above.
        unsafe { self.after_blocking("copy_h2d_sync", written, stream) }
    }

    unsafe fn copy_d2h_sync(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract is copy_d2h_sync's.
        let read = unsafe { self.read("copy_d2h_sync", src, dst, stream, CL_BLOCKING) };
        // SAFETY: as above.
        unsafe { self.after_blocking("copy_d2h_sync", read, stream) }
    }

    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        check_copy_ranges(Backend::OpenCl, src, dst)?;
        let (from, to) = (self.device_range("copy_d2d", src)?, self.device_range("copy_d2d", dst)?);
        let queue = self.queue("copy_d2d", stream)?;
        copy_buffer(&queue, (from, src), (to, dst))
    }

    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        check_fill_range(Backend::OpenCl, dst)?;
        let mem = self.device_range("fill_u32", dst)?;
        let queue = self.queue("fill_u32", stream)?;
        if dst.len == 0 {
            return Ok(());
        }
        // SAFETY: the range lies in mem (checked); the pattern is copied at
        // enqueue; the wait list is valid for the call.
        queue.enqueue("clEnqueueFillBuffer", &mut |n, list| unsafe {
            enqueue_fill_buffer(
                queue.queue.get(),
                mem.mem,
                (&raw const pattern).cast::<c_void>(),
                4,
                dst.offset,
                dst.len,
                n,
                list,
            )
        })
    }

    fn as_peer(&self) -> &dyn Any {
        self
    }

    fn peer_route(&self, peer: &dyn Any) -> Result<PeerRoute> {
        let peer = peer_of::<Self>(Backend::OpenCl, "peer_route", peer)?;
        Ok(if self.shares_context(peer) { PeerRoute::Direct } else { PeerRoute::Staged })
    }

    unsafe fn copy_peer(&self, src: PeerRange<'_>, dst: PeerRange<'_>, stream: StreamId) -> Result<PeerRoute> {
        let (from, to) = sides(self, "copy_peer", src, dst)?;
        check_copy_ranges(Backend::OpenCl, src.range, dst.range)?;
        let source = from.device_range("copy_peer", src.range)?;
        let target = to.device_range("copy_peer", dst.range)?;
        let queue = self.queue("copy_peer", stream)?;
        if from.shares_context(to) {
            // One device, or one context: the runtime moves the bytes between
            // the devices by a route of its choosing.
            return copy_buffer(&queue, (source, src.range), (target, dst.range)).map(|()| PeerRoute::Direct);
        }
        if src.range.len > 0 {
            self.staged_copy((stream, &queue), (from, source, src.range), (to, target, dst.range))?;
        }
        Ok(PeerRoute::Staged)
    }

    unsafe fn stream_wait_peer_event(&self, stream: StreamId, peer: &dyn Any, event: EventId) -> Result<()> {
        self.wait_peer("stream_wait_peer_event", stream, peer, event, Bridged::Inherit)
    }

    unsafe fn stream_wait_peer_settled(&self, stream: StreamId, peer: &dyn Any, event: EventId) -> Result<()> {
        self.wait_peer("stream_wait_peer_settled", stream, peer, event, Bridged::Settled)
    }

    fn build_module(&self, source: &str, options: &BuildOptions, _host_kernels: &[HostKernel]) -> Result<ModuleId> {
        Ok(ModuleId(self.modules.insert(module::build(&self.context, self.device.id(), &self.info, source, options)?)))
    }

    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        let program = self.modules.get("kernel", module.0)?;
        if name.contains('\0') {
            return Err(error(
                "kernel",
                ErrorKind::KernelNotFound,
                format!("kernel name {name:?} contains a NUL byte"),
            ));
        }
        Ok(KernelId(self.kernels.insert(ClKernel::new(&program, self.device.id(), &self.info, name)?)))
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
        // SAFETY: the caller's contract, passed on.
        unsafe { self.launch_as(kernel, config, args, stream, true) }
    }

    unsafe fn replay_nodes(&self, nodes: &[GraphNode], stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract, passed on; a launch but the last
        // node returns no event, as only the stream's end is observed.
        unsafe {
            crate::device::replay_each(self, nodes, stream, |kernel, config, args, last| {
                self.launch_as(kernel, config, args, stream, last)
            })
        }
    }

    fn live_handles(&self) -> Option<LiveHandles> {
        self.streams.drop_finished(|s| !matches!(s.is_idle(), Ok(true)));
        Some(LiveHandles {
            streams: self.streams.live(),
            events: self.events.live(),
            allocations: self.allocs.live(),
            modules: self.modules.live(),
            kernels: self.kernels.live(),
            graphs: self.graphs.live(),
        })
    }

    fn native_graphs(&self) -> bool {
        self.command_buffers.is_some()
    }

    unsafe fn create_graph(&self, nodes: &[GraphNode]) -> Result<GraphId> {
        if self.command_buffers.is_none() {
            return Err(error(
                "create_graph",
                ErrorKind::InvalidHandle,
                "this device has no usable cl_khr_command_buffer (or HETERO_OPENCL_GRAPHS=replay): native_graphs is false",
            ));
        }
        self.check_nodes(nodes)?;
        Ok(GraphId(self.graphs.insert(ClGraph::new(nodes))))
    }

    unsafe fn update_graph(&self, graph: GraphId, nodes: &[GraphNode]) -> Result<()> {
        let graph = self.graphs.get("update_graph", graph.0)?;
        self.check_nodes(nodes)?;
        graph.update(nodes);
        Ok(())
    }

    unsafe fn launch_graph(&self, graph: GraphId, stream: StreamId) -> Result<()> {
        let calls = self
            .command_buffers
            .ok_or_else(|| error("launch_graph", ErrorKind::InvalidHandle, "this device builds no command buffers"))?;
        let queue = self.queue("launch_graph", stream)?;
        let graph = self.graphs.get("launch_graph", graph.0)?;
        let recording = graph.recording(stream, |nodes| self.record_graph(calls, &queue, nodes))?;
        queue.enqueue("clEnqueueCommandBufferKHR", &mut |n, list| recording.enqueue(n, list))
    }

    unsafe fn destroy_graph(&self, graph: GraphId) -> Result<()> {
        // The runtime keeps a command buffer until its queued runs are done.
        self.graphs.remove("destroy_graph", graph.0).map(drop)
    }
}

impl Drop for OpenClDevice {
    fn drop(&mut self) {
        // Open every gate, so no queue waits forever for a user event nobody
        // will complete, then let every queue finish: queued copies may
        // read or write pinned memory that is unmapped when the tables drop.
        for event in self.events.take_all() {
            if event.user {
                let _ = open_gate(&event, "drop");
            }
        }
        for stream in self.streams.take_all() {
            let _ = stream.finish();
        }
        for (_, queue) in self.peer_queues.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
            let _ = queue.finish();
        }
    }
}
