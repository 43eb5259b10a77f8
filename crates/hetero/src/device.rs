//! Layer 1: the [`Device`] trait every backend implements, and the plain-data
//! handles and descriptors it speaks in.
//!
//! The trait is *unsafe by contract* (the wgpu-hal model): its safe methods
//! validate what a backend can check cheaply (handles, ranges, launch
//! limits) and return [`Error`]s, while the `unsafe` methods state in their
//! `# Safety` sections what the caller must guarantee about host pointers
//! and about memory that queued work still uses. The typed layer in
//! [`crate::safe`] upholds those contracts for safe code.

use std::ptr::NonNull;

use enum_dispatch::enum_dispatch;

use crate::error::{Error, ErrorKind, Result};
pub use crate::foreign::{RawMemory, RawStream, Release};
pub(crate) use crate::types::INLINE_ARGS;
pub use crate::types::{
    AllocId, ArgBytes, Backend, EventId, GraphId, KernelArg, KernelId, ModuleId, PeerRoute, StreamId, UnknownBackend,
};

/// A byte range of an allocation of `device`: one side of
/// [`crate::Device::copy_peer`].
#[derive(Clone, Copy)]
pub struct PeerRange<'a> {
    /// The device that owns the allocation, as [`Device::as_peer`] gives it.
    pub device: &'a dyn std::any::Any,
    /// The bytes.
    pub range: DeviceRange,
}

impl std::fmt::Debug for PeerRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerRange").field("range", &self.range).finish_non_exhaustive()
    }
}

impl<'a> PeerRange<'a> {
    /// `range` of an allocation of `device`.
    pub fn new<D: Device>(device: &'a D, range: DeviceRange) -> Self {
        Self { device: device.as_peer(), range }
    }
}

/// What a device is and what it can run. Launch validation reads these limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Backend that drives the device.
    pub backend: Backend,
    /// Index of the device within its backend (and platform, for OpenCL).
    pub ordinal: usize,
    /// Marketing name, e.g. "NVIDIA H200".
    pub name: String,
    /// Vendor string as the runtime reports it.
    pub vendor: String,
    /// Platform or driver description (OpenCL platform name, driver version).
    pub platform: String,
    /// Global memory in bytes.
    pub total_memory: u64,
    /// Largest number of threads in one block (work-group).
    pub max_threads_per_block: u32,
    /// Largest block extent per dimension.
    pub max_block_dims: [u32; 3],
    /// Largest number of blocks per grid dimension.
    pub max_grid_dims: [u32; 3],
    /// Largest number of blocks in one grid, all dimensions together
    /// (OpenCL: [`OPENCL_MAX_BLOCKS`]; `u64::MAX` where only the
    /// dimensions are limited).
    pub max_blocks: u64,
    /// Shared (local) memory available to one block, in bytes.
    pub shared_memory_per_block: usize,
    /// Streaming multiprocessors / compute units.
    pub compute_units: u32,
    /// Threads that execute in lock-step: warp (32) or wavefront (32 or 64).
    pub warp_size: u32,
    /// Subgroup widths the device's kernels can have, smallest first; empty
    /// where kernels have no subgroups (`HETERO_SUBGROUPS` undefined): CUDA
    /// and HIP the warp or wavefront (32, or 64 on AMD's CDNA), OpenCL on
    /// NVIDIA 32, other OpenCL devices and the host none.
    pub subgroup_sizes: Vec<u32>,
    /// Whether kernels may use `double` (CUDA and HIP always; OpenCL where
    /// the device reports double-precision support; the host always).
    pub fp64: bool,
    /// PCI address, `domain:bus:device.function` in hexadecimal as `lspci`
    /// prints it, where the driver gives it (CUDA; OpenCL through
    /// `cl_khr_pci_bus_info` or NVIDIA's extension).
    pub pci_bus_id: Option<String>,
    /// The device's UUID (`8-4-4-4-12` hexadecimal digits), where the
    /// driver gives it (CUDA; OpenCL through `cl_khr_device_uuid`).
    pub uuid: Option<String>,
    /// The GPU target its code is compiled for, where known: `sm_90` on
    /// CUDA (from the compute capability), `gfx90a:sramecc+:xnack-` on
    /// AMD (HIP from ROCm 6 on, `gcnArchName`; OpenCL, whose device name
    /// is the target there).
    pub arch: Option<String>,
}

/// A 16-byte UUID as `8-4-4-4-12` lowercase hexadecimal digits.
#[cfg_attr(not(any(feature = "cuda", feature = "opencl")), allow(dead_code))]
pub(crate) fn format_uuid(bytes: &[u8; 16]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

/// How a module is compiled ([`crate::Device::build_module`]).
///
/// By default each compiler may contract `a * b + c` into one fused
/// multiply-add, and OpenCL's may divide and take square roots to within a
/// few ulp: results agree between backends within rounding only.
/// [`BuildOptions::deterministic`] asks every backend for IEEE-754 as
/// written: no contraction (NVRTC `--fmad=false`; hiprtc
/// `-ffp-contract=off` on AMD; OpenCL `FP_CONTRACT OFF`), denormals kept,
/// correctly rounded division and square root (OpenCL
/// `-cl-fp32-correctly-rounded-divide-sqrt`), and defines
/// `HETERO_DETERMINISTIC` in the source, so that kernels can take orders
/// of summation that do not depend on the launch. The host backend's Rust
/// never contracts; its built-in kernels follow the define. A kernel that
/// wants a fused multiply-add writes `fma` (the dialect's `hetero_fma_f32`
/// and `hetero_fma_f64`; Rust's `mul_add`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct BuildOptions {
    /// Floating point exactly as written, and `HETERO_DETERMINISTIC` defined.
    pub deterministic: bool,
}

impl BuildOptions {
    /// The options of a deterministic build (see the type's documentation).
    pub fn deterministic() -> Self {
        Self { deterministic: true }
    }

    /// The lines a backend compiles before the prelude for these options
    /// (`#define HETERO_DETERMINISTIC 1` for a deterministic build).
    pub fn defines(&self) -> &'static str {
        if self.deterministic { "#define HETERO_DETERMINISTIC 1\n" } else { "" }
    }
}

/// What one kernel can run with on its device, read from the runtime when
/// the kernel is looked up ([`crate::Device::kernel_limits`]).
///
/// Invariant: `1 <= max_threads <= DeviceInfo::max_threads_per_block` and
/// `preferred_multiple >= 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelLimits {
    /// Most threads in one block of this kernel, all dimensions together
    /// (CUDA/HIP `MAX_THREADS_PER_BLOCK`, OpenCL `CL_KERNEL_WORK_GROUP_SIZE`,
    /// the host: its device limit).
    pub max_threads: u32,
    /// Blocks whose size is a multiple of this run best: the warp or
    /// wavefront on CUDA and HIP, OpenCL's
    /// `CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE`, 1 on the host.
    pub preferred_multiple: u32,
    /// Shared (local) memory the kernel declares itself, in bytes, besides
    /// the dynamic amount a launch asks for.
    pub static_shared: usize,
    /// The width of the kernel's subgroups (`SUBGROUP_SIZE`), where the
    /// device has them.
    pub subgroup_size: Option<u32>,
}

impl KernelLimits {
    /// Limits made to hold the invariant: a runtime that reports 0 threads
    /// or a 0 multiple (neither is meaningful) gets 1, and no kernel is
    /// allowed more threads than its device.
    pub fn new(info: &DeviceInfo, max_threads: u32, preferred_multiple: u32, static_shared: usize) -> Self {
        Self {
            max_threads: max_threads.min(info.max_threads_per_block).max(1),
            preferred_multiple: preferred_multiple.max(1),
            static_shared,
            subgroup_size: info.subgroup_sizes.last().copied(),
        }
    }

    /// Limits both `self` and `other` satisfy: for a block size shared by
    /// several kernels (a two-pass algorithm launching each with one
    /// shape).
    #[must_use]
    pub fn and(self, other: KernelLimits) -> KernelLimits {
        KernelLimits {
            max_threads: self.max_threads.min(other.max_threads),
            preferred_multiple: self.preferred_multiple.max(other.preferred_multiple),
            static_shared: self.static_shared.max(other.static_shared),
            subgroup_size: self.subgroup_size.max(other.subgroup_size),
        }
    }
}

/// How a new stream relates to the device's implicit default stream, and
/// whether its events can be timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFlags {
    /// `true`: the stream never synchronises with the legacy default stream
    /// (CUDA/HIP `NonBlocking`). Backends without a default stream ignore it.
    pub non_blocking: bool,
    /// Scheduling priority where the backend has one; lower is more urgent
    /// (CUDA convention). `0` is the default.
    pub priority: i32,
    /// `true` (the default): events recorded on the stream can be timed.
    /// `false` makes every command cheaper where timing has a per-command
    /// price: OpenCL creates the queue without profiling, which on NVIDIA's
    /// driver about halves the host cost of each command. The typed layer
    /// then refuses to time events recorded on the stream, on every backend.
    pub timing: bool,
}

impl Default for StreamFlags {
    fn default() -> Self {
        Self { non_blocking: false, priority: 0, timing: true }
    }
}

/// A range of bytes inside a device allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRange {
    /// The allocation.
    pub alloc: AllocId,
    /// Byte offset from its start.
    pub offset: usize,
    /// Length in bytes.
    pub len: usize,
}

/// Grid and block shape of a launch, plus dynamic shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Number of blocks per dimension.
    pub grid: [u32; 3],
    /// Threads per block per dimension.
    pub block: [u32; 3],
    /// Bytes of dynamic shared (local) memory per block.
    pub shared_bytes: usize,
}

impl LaunchConfig {
    /// A one-dimensional launch of `blocks` blocks of `threads` threads.
    pub fn linear(blocks: u32, threads: u32, shared_bytes: usize) -> Self {
        Self { grid: [blocks, 1, 1], block: [threads, 1, 1], shared_bytes }
    }

    /// A launch covering `extent` elements (x, y, z; 1 for unused axes)
    /// with blocks of `block` threads: enough blocks on each axis that
    /// every element has a thread (kernels check bounds). An empty axis
    /// (`0`) still gets one block, so the launch shape stays valid.
    pub fn covering(extent: [u32; 3], block: [u32; 3], shared_bytes: usize) -> Self {
        let grid = std::array::from_fn(|i| extent[i].div_ceil(block[i].max(1)).max(1));
        Self { grid, block, shared_bytes }
    }

    /// Checks the shape against a device's limits; every backend calls this
    /// before launching, so the message is the same everywhere.
    pub fn validate(&self, info: &DeviceInfo, call: &'static str) -> Result<()> {
        let fail = |msg: String| Err(Error::new(info.backend, call, ErrorKind::InvalidLaunch, msg));
        if self.grid.contains(&0) {
            return fail(format!("grid {:?} has a zero dimension; every dimension must be >= 1", self.grid));
        }
        if self.block.contains(&0) {
            return fail(format!("block {:?} has a zero dimension; every dimension must be >= 1", self.block));
        }
        let threads: u64 = self.block.iter().map(|&b| u64::from(b)).product();
        if threads > u64::from(info.max_threads_per_block) {
            return fail(format!(
                "block {:?} has {threads} threads but {} allows at most {} per block",
                self.block, info.name, info.max_threads_per_block
            ));
        }
        for (axis, (&b, &max)) in self.block.iter().zip(&info.max_block_dims).enumerate() {
            if b > max {
                return fail(format!("block dimension {axis} is {b} but {} allows at most {max}", info.name));
            }
        }
        for (axis, (&g, &max)) in self.grid.iter().zip(&info.max_grid_dims).enumerate() {
            if g > max {
                return fail(format!("grid dimension {axis} is {g} blocks but {} allows at most {max}", info.name));
            }
        }
        let blocks: u64 = self.grid.iter().map(|&g| u64::from(g)).product();
        if blocks > info.max_blocks {
            return fail(format!(
                "grid {:?} has {blocks} blocks but {} runs at most {} blocks in one launch (all dimensions together)",
                self.grid, info.name, info.max_blocks
            ));
        }
        if self.shared_bytes > info.shared_memory_per_block {
            return fail(format!(
                "launch asks for {} bytes of shared memory per block but {} has {}",
                self.shared_bytes, info.name, info.shared_memory_per_block
            ));
        }
        Ok(())
    }
}

/// The objects a device holds, by kind ([`crate::Device::live_handles`]):
/// those its owners have not released, and released ones still kept for
/// queued work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveHandles {
    /// Streams.
    pub streams: usize,
    /// Events.
    pub events: usize,
    /// Device and pinned allocations.
    pub allocations: usize,
    /// Modules.
    pub modules: usize,
    /// Kernels.
    pub kernels: usize,
    /// Graphs.
    pub graphs: usize,
}

impl LiveHandles {
    /// Every kind together.
    pub fn total(&self) -> usize {
        self.streams + self.events + self.allocations + self.modules + self.kernels + self.graphs
    }
}

/// One operation of a graph, as [`crate::Device::create_graph`] takes it:
/// what the trait's enqueue methods take, with pinned memory as ranges of
/// its allocation (each backend finds its host address, or its buffer),
/// so that a graph's description is plain data.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphOp {
    /// [`crate::Device::copy_h2d`] from a range of a pinned allocation.
    CopyH2D {
        /// Source range, of a pinned allocation of this device.
        src: DeviceRange,
        /// Destination range, of the same length.
        dst: DeviceRange,
    },
    /// [`crate::Device::copy_d2h`] into a range of a pinned allocation.
    CopyD2H {
        /// Source range.
        src: DeviceRange,
        /// Destination range, of a pinned allocation of this device, of the same length.
        dst: DeviceRange,
    },
    /// [`crate::Device::copy_d2d`].
    CopyD2D {
        /// Source range.
        src: DeviceRange,
        /// Destination range.
        dst: DeviceRange,
    },
    /// [`crate::Device::fill_u32`].
    Fill {
        /// Destination range.
        dst: DeviceRange,
        /// The 32-bit pattern.
        pattern: u32,
    },
    /// [`crate::Device::launch`].
    Launch {
        /// The kernel.
        kernel: KernelId,
        /// Its launch shape.
        config: LaunchConfig,
        /// Its arguments.
        args: Vec<KernelArg>,
    },
    /// Records the graph's event number `event` (numbered from 0 within
    /// the graph) on the node's stream.
    Record {
        /// The event's number.
        event: usize,
    },
    /// Makes the node's stream wait for the graph's event `event`, recorded
    /// by an earlier node.
    Wait {
        /// The event's number.
        event: usize,
    },
}

/// One node of a graph: an operation on one of the graph's streams
/// (numbered from 0). Nodes come in the order they were recorded, which
/// is an order they may run in: a `Wait` follows its `Record`.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphNode {
    /// The graph's stream the operation runs on.
    pub stream: usize,
    /// The operation.
    pub op: GraphOp,
}

impl GraphNode {
    /// How many streams and events `nodes` use (each numbered from 0).
    pub fn counts(nodes: &[GraphNode]) -> (usize, usize) {
        let streams = nodes.iter().map(|n| n.stream + 1).max().unwrap_or(0);
        let events = nodes
            .iter()
            .filter_map(|n| match n.op {
                GraphOp::Record { event } | GraphOp::Wait { event } => Some(event + 1),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        (streams, events)
    }
}

/// Streams, events, memory, copies and kernels of one device.
///
/// # Contract (who may call what)
///
/// The trait is *unsafe by contract*, as in wgpu-hal. Handles are plain data
/// that anyone can copy or forge, so every method that takes a handle or a
/// byte range is an `unsafe fn`: its caller promises what the device cannot
/// check cheaply — that no queued work still uses memory being freed or
/// touched from the host, that no other stream writes a range while an
/// operation uses it, and that the handles it passes are owned by it (not
/// destroyed, or used, by another owner at the same time). The typed layer in
/// [`crate::safe`] owns its handles and upholds these rules, so safe code
/// goes through it; methods that take no handle are safe.
///
/// What a backend guarantees in return, whatever the caller passes:
///
/// - a handle of another device, or one already released, is refused with
///   [`ErrorKind::InvalidHandle`]; ranges outside their allocation with
///   [`ErrorKind::OutOfBounds`]; device operations ([`Device::fill_u32`],
///   [`Device::copy_d2d`], kernel buffers) on pinned allocations with
///   [`ErrorKind::InvalidHandle`];
/// - a call that returns an error has enqueued nothing;
/// - work on one stream runs in order; streams are ordered only by events;
/// - an asynchronous failure is sticky on its stream and reaches every
///   stream that waits on an event recorded after it (the waiting stream
///   fails too), and is reported by the next synchronising call;
/// - [`Device::synchronize_stream`] returns (with or without an error) only
///   once every operation enqueued on the stream has completed or can never
///   run any more (a sticky fault, a lost device), so memory they use may be
///   released after it returns;
/// - no call blocks on work that the host has yet to release
///   ([`Device::destroy_stream`] and [`Device::free`] never wait for queued
///   work), and dropping the device completes every user event still open.
#[enum_dispatch]
pub trait Device: Send + Sync + 'static {
    /// Static description and limits of the device.
    fn info(&self) -> &DeviceInfo;

    /// Creates an in-order stream.
    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId>;
    /// Releases a stream without waiting: work already enqueued still runs.
    ///
    /// # Safety
    /// No other caller may use `stream` during or after this call.
    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()>;
    /// Blocks the host until all work enqueued on `stream` has completed (or
    /// can never run: see the trait's contract).
    ///
    /// # Safety
    /// `stream` must be owned by the caller (not being destroyed).
    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()>;
    /// `true` when all work enqueued on `stream` has completed.
    ///
    /// # Safety
    /// As for [`Device::synchronize_stream`].
    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool>;

    /// Creates an event that can be recorded, waited on and timed.
    fn create_event(&self) -> Result<EventId>;
    /// Creates an event for ordering and completion only: recording it may
    /// be cheaper (CUDA and HIP skip the timestamp), and
    /// [`Device::elapsed_ms`] refuses it. The typed layer's tracking uses these.
    fn create_sync_event(&self) -> Result<EventId> {
        self.create_event()
    }
    /// Creates an event that completes only when the host calls
    /// [`Device::complete_user_event`]: a gate that holds streams waiting on it.
    fn create_user_event(&self) -> Result<EventId>;
    /// Completes a user event, releasing every stream waiting on it.
    ///
    /// # Safety
    /// `event` must be owned by the caller.
    unsafe fn complete_user_event(&self, event: EventId) -> Result<()>;
    /// Releases an event (completing it if it is an open user event).
    /// Streams already waiting on it still see its completion.
    ///
    /// # Safety
    /// No other caller may use `event` during or after this call; in
    /// particular the typed layer's tracking events are its own.
    unsafe fn destroy_event(&self, event: EventId) -> Result<()>;
    /// Marks the point in `stream` reached by all work enqueued so far.
    ///
    /// The event then stands for this recording only, even while an earlier
    /// one (on any stream) is pending: queries and times are about the
    /// latest recording, and a [`Device::stream_wait_event`] issued before
    /// waits for what was recorded when it was issued (CUDA's semantics;
    /// every backend keeps them, and the typed layer relies on them to
    /// reuse its tracking events).
    ///
    /// # Safety
    /// `event` and `stream` must be owned by the caller; re-recording an
    /// event that someone relies on to track memory breaks that tracking.
    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()>;
    /// `true` when the last recording has completed (or the event was never recorded).
    ///
    /// # Safety
    /// `event` must be owned by the caller.
    unsafe fn query_event(&self, event: EventId) -> Result<bool>;
    /// Blocks the host until the last recording has completed.
    ///
    /// # Safety
    /// `event` must be owned by the caller.
    unsafe fn synchronize_event(&self, event: EventId) -> Result<()>;
    /// Milliseconds between two completed recordings, from device clocks.
    ///
    /// # Safety
    /// Both events must be owned by the caller.
    unsafe fn elapsed_ms(&self, start: EventId, end: EventId) -> Result<f64>;
    /// Makes later work on `stream` wait for the event's last recording,
    /// without blocking the host. If the recorded stream had failed, the
    /// waiting stream fails too.
    ///
    /// # Safety
    /// Both handles must be owned by the caller.
    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()>;

    /// Allocates `bytes` of device memory (contents unspecified).
    fn alloc_device(&self, bytes: usize) -> Result<AllocId>;
    /// Allocates `bytes` of page-locked host memory usable by asynchronous
    /// copies, zeroed, aligned to at least [`PINNED_ALIGN`] bytes.
    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId>;
    /// The host address of a pinned allocation. Stays valid until it is freed.
    ///
    /// # Safety
    /// `alloc` must be owned by the caller; reading or writing through the
    /// pointer is only sound while no queued work uses the bytes touched.
    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>>;
    /// Size in bytes of a device or pinned allocation.
    ///
    /// # Safety
    /// `alloc` must be owned by the caller.
    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize>;
    /// Releases a device or pinned allocation. Never waits for queued work.
    ///
    /// # Safety
    /// No enqueued work that uses `alloc` may still be pending, no other
    /// caller may use `alloc` after this call, and for a pinned allocation
    /// no host reference into it may outlive this call.
    unsafe fn free(&self, alloc: AllocId) -> Result<()>;

    /// Makes `len` bytes of memory that another library allocated an
    /// allocation of this device: device memory for copies and kernels
    /// like any other (never pinned). [`Device::free`] then frees nothing
    /// of the memory: the device drops its own reference (OpenCL releases
    /// the `cl_mem` it retained here) and runs `release`. A refusal runs
    /// `release` before it returns: a buffer of another context or device
    /// is a [`ErrorKind::DeviceMismatch`], a `cl_mem` smaller than `len` is
    /// [`ErrorKind::OutOfBounds`], a kind of handle the backend does not
    /// take (or a backend that adopts nothing) is [`ErrorKind::Unsupported`].
    ///
    /// # Safety
    /// `memory` must be `len` bytes of this device's memory (host memory on
    /// the host backend, aligned for the elements it holds) that stay valid
    /// until the allocation is freed and `release` has run; until then no
    /// one else may use them in a way that conflicts with work enqueued on
    /// them (order such work with events or an adopted stream).
    unsafe fn adopt_memory(&self, memory: RawMemory, len: usize, release: Option<Release>) -> Result<AllocId> {
        let _ = (memory, len, release);
        Err(unsupported(self.info().backend, "adopt_memory", "this device adopts no foreign memory"))
    }
    /// The native handle of an allocation: an address ([`RawMemory::Address`])
    /// on CUDA, HIP and the host (of pinned memory, its host address), the
    /// `cl_mem` on OpenCL. Another library may use it under the rules
    /// hetero's own work follows, for as long as the allocation lives.
    ///
    /// # Safety
    /// `alloc` must be owned by the caller.
    unsafe fn raw_memory(&self, alloc: AllocId) -> Result<RawMemory> {
        let _ = alloc;
        Err(unsupported(self.info().backend, "raw_memory", "this device has no native memory handles"))
    }
    /// Makes a stream that another library created a stream of this
    /// device. [`Device::destroy_stream`] then only drops the device's
    /// reference (OpenCL releases the queue it retained here); the stream
    /// itself is never destroyed by hetero. Refused with
    /// [`ErrorKind::DeviceMismatch`] when the stream belongs to another
    /// device or context, [`ErrorKind::Unsupported`] where the backend
    /// has no native streams (the host) or the queue is out of order.
    ///
    /// # Safety
    /// `stream` must be a live stream of this device that outlives the
    /// returned id's destruction and every operation enqueued through it.
    unsafe fn adopt_stream(&self, stream: RawStream) -> Result<StreamId> {
        let _ = stream;
        Err(unsupported(self.info().backend, "adopt_stream", "this device adopts no foreign streams"))
    }
    /// The native handle of a stream, for another library to enqueue its
    /// work in order with hetero's (while the stream lives): work enqueued
    /// on it natively after this call runs after everything hetero queued
    /// on the stream before it (OpenCL, whose waits wait for the stream's
    /// next command, enqueues them as a marker and flushes).
    ///
    /// # Safety
    /// `stream` must be owned by the caller.
    unsafe fn raw_stream(&self, stream: StreamId) -> Result<RawStream> {
        let _ = stream;
        Err(unsupported(self.info().backend, "raw_stream", "this device has no native streams"))
    }

    /// Enqueues a copy of `dst.len` bytes from host memory at `src` into `dst`.
    /// With pinned memory ([`Device::alloc_pinned`]) the call returns at once;
    /// with pageable memory a backend may block until the stream has run the
    /// copy (CUDA stages pageable copies synchronously), so never copy from
    /// pageable memory on a stream that waits for something the host has yet to do.
    ///
    /// # Safety
    /// `src` must be valid for reads of `dst.len` bytes until the copy has
    /// completed, and must not be written meanwhile. `dst` must not be used
    /// by other streams until the copy completes. The handles must be owned
    /// by the caller.
    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()>;
    /// Enqueues a copy of `src.len` bytes from `src` into host memory at `dst`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `src.len` bytes until the copy has
    /// completed, and must not be read or written meanwhile. `src` must not
    /// be written by other streams until the copy completes. The handles
    /// must be owned by the caller.
    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()>;
    /// [`Device::copy_h2d`] followed by [`Device::synchronize_stream`]: returns
    /// once the stream has run everything up to and including the copy
    /// (or failed). A backend may do both in one call (OpenCL: a blocking write).
    ///
    /// # Safety
    /// As [`Device::copy_h2d`], but `src` need only stay valid during the call.
    unsafe fn copy_h2d_sync(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract, and the copy is complete (or can
        // never run) once the stream is synchronised.
        unsafe {
            self.copy_h2d(src, dst, stream)?;
            self.synchronize_stream(stream)
        }
    }
    /// [`Device::copy_d2h`] followed by [`Device::synchronize_stream`] (see
    /// [`Device::copy_h2d_sync`]).
    ///
    /// # Safety
    /// As [`Device::copy_d2h`], but `dst` need only stay valid during the call.
    unsafe fn copy_d2h_sync(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        // SAFETY: as in copy_h2d_sync.
        unsafe {
            self.copy_d2h(src, dst, stream)?;
            self.synchronize_stream(stream)
        }
    }
    /// Enqueues a device-to-device copy between device allocations; the
    /// ranges must have equal lengths and must not overlap
    /// ([`check_copy_ranges`]).
    ///
    /// # Safety
    /// No other stream may write `src`, or use `dst`, until the copy
    /// completes; the handles must be owned by the caller.
    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()>;
    /// Enqueues filling device memory `dst` with a repeated 4-byte pattern;
    /// `dst.offset` and `dst.len` must be multiples of 4.
    ///
    /// # Safety
    /// No other stream may use `dst` until the fill completes; the handles
    /// must be owned by the caller.
    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()>;

    /// This device as another device's peer operations take it
    /// ([`PeerRange::device`], [`Device::peer_route`],
    /// [`Device::stream_wait_peer_event`]): the backend's own device object,
    /// which an [`crate::AnyDevice`] gives from inside.
    fn as_peer(&self) -> &dyn std::any::Any;

    /// How copies between this device and `peer` (another device of the
    /// same backend, as [`Device::as_peer`] gives it) go; the route
    /// [`Device::copy_peer`] takes. A device of another backend is a
    /// [`ErrorKind::DeviceMismatch`].
    fn peer_route(&self, peer: &dyn std::any::Any) -> Result<PeerRoute>;
    /// Enqueues on `stream`, a stream of this device, a copy from `src` to
    /// `dst`, ranges of device allocations of two devices of this backend
    /// (or both of this one), one of them this device. Equal lengths;
    /// on one device the ranges must not overlap. Returns the route taken.
    ///
    /// The copy is ordered on `stream` like any of its operations. The
    /// other device's streams are not ordered with it: make them wait with
    /// [`Device::stream_wait_peer_event`]. A staged copy may run part of
    /// its work on an internal queue of the other device; if the call
    /// fails after that part was queued, the part touches only the
    /// staging memory, which is released when it completes.
    ///
    /// # Safety
    /// As [`Device::copy_d2d`], for both devices: no stream of either may
    /// write `src`, or use `dst`, until the copy completes, and the
    /// handles must be owned by the caller.
    unsafe fn copy_peer(&self, src: PeerRange<'_>, dst: PeerRange<'_>, stream: StreamId) -> Result<PeerRoute>;
    /// Makes later work on `stream` (of this device) wait for the last
    /// recording of `event`, an event of `peer` (another device of this
    /// backend, or this one), without blocking the host: natively on CUDA
    /// and HIP; on OpenCL across contexts by a user event of this device
    /// that a completion callback of the peer's event releases; on the host
    /// by the stream's worker. A failure of the recorded stream fails this
    /// stream too. A user event of another device is refused
    /// ([`ErrorKind::InvalidHandle`]): wait for it on a stream of its own
    /// device and for an event recorded there.
    ///
    /// # Safety
    /// Both handles must be owned by the caller.
    unsafe fn stream_wait_peer_event(&self, stream: StreamId, peer: &dyn std::any::Any, event: EventId) -> Result<()>;
    /// As [`Device::stream_wait_peer_event`], except that a failure of the
    /// recorded stream does not fail `stream`: later work waits until the
    /// event is reached or can never be (its stream failed before it), and
    /// then runs. The typed layer orders a far buffer's tracking after a
    /// peer copy that only *reads* it this way: a read that failed is over
    /// and leaves the far buffer and the far device's streams usable
    /// (`a_failed_far_read_leaves_the_far_buffer_usable`). The default is
    /// the plain wait, right where a fault never reaches another device's
    /// streams (CUDA and HIP: it stays in its own device's context); the
    /// host and OpenCL backends, whose waits carry failures, override it.
    ///
    /// # Safety
    /// Both handles must be owned by the caller.
    unsafe fn stream_wait_peer_settled(
        &self,
        stream: StreamId,
        peer: &dyn std::any::Any,
        event: EventId,
    ) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe { self.stream_wait_peer_event(stream, peer, event) }
    }

    /// Builds a module from portable kernel source (see `hetero-kernels`)
    /// under `options`, which every backend honours (see [`BuildOptions`]).
    /// `host_kernels` are Rust implementations of its kernels, which only
    /// the host backend runs (see [`crate::host_kernel`]); other backends
    /// ignore them. On failure the error kind is [`ErrorKind::Build`] and
    /// its message is the build log.
    fn build_module(
        &self,
        source: &str,
        options: &crate::device::BuildOptions,
        host_kernels: &[crate::host_kernel::HostKernel],
    ) -> Result<ModuleId>;
    /// Looks up a kernel of a module by name.
    ///
    /// # Safety
    /// `module` must be owned by the caller.
    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId>;
    /// What a kernel can run with on this device (see
    /// [`crate::BlockRequest`] to turn a wanted block size into one it
    /// can run).
    ///
    /// # Safety
    /// `kernel` must be owned by the caller.
    unsafe fn kernel_limits(&self, kernel: KernelId) -> Result<KernelLimits>;
    /// Enqueues a kernel launch. Validates `config` against [`Device::info`].
    ///
    /// # Safety
    /// `args` must match the kernel's parameters in number and type. Every
    /// buffer argument must point into a live device allocation, and the
    /// kernel must only access memory within the ranges the caller has made
    /// available to it; no other stream may write those ranges until it
    /// completes. No element one thread writes may be read or written by
    /// another thread of the launch without the kernel's own synchronisation
    /// (a data race, undefined behaviour on every backend, the host's
    /// included). The handles must be owned by the caller.
    unsafe fn launch(
        &self,
        kernel: KernelId,
        config: &LaunchConfig,
        args: &[KernelArg],
        stream: StreamId,
    ) -> Result<()>;

    /// How many objects of each kind the device holds now (`None` where a
    /// backend does not count them): what a long run checks for growth.
    fn live_handles(&self) -> Option<LiveHandles> {
        None
    }

    /// `true` when the backend builds graphs of its own
    /// ([`Device::create_graph`]); otherwise the typed layer replays a
    /// graph's nodes one by one on the replaying stream.
    fn native_graphs(&self) -> bool {
        false
    }
    /// Builds a graph of `nodes` that [`Device::launch_graph`] runs as one
    /// operation. `nodes` were checked as their enqueues are (ranges,
    /// launch shapes, kernel limits) and are not run here.
    ///
    /// # Safety
    /// Every handle in `nodes` must be owned by the caller, and every range
    /// and host address must stay valid (and, for pinned addresses, be of
    /// this device's pinned memory) for as long as any launch of the graph
    /// is queued; a launch then follows the rules of each node's enqueue.
    unsafe fn create_graph(&self, nodes: &[GraphNode]) -> Result<GraphId> {
        let _ = nodes;
        Err(Error::new(
            self.info().backend,
            "create_graph",
            ErrorKind::InvalidHandle,
            "this backend builds no graphs of its own (native_graphs is false)",
        ))
    }
    /// Replaces a graph's nodes with `nodes`: as many nodes, each of the
    /// same kind on the same stream, with the same kernel. Buffers,
    /// offsets, host addresses, lengths, fill patterns, launch shapes and
    /// scalar arguments may differ (where the backend cannot update its
    /// graph in place, it builds it anew). Launches queued before keep
    /// their nodes.
    ///
    /// # Safety
    /// As [`Device::create_graph`]; `graph` must be owned by the caller.
    unsafe fn update_graph(&self, graph: GraphId, nodes: &[GraphNode]) -> Result<()> {
        let _ = nodes;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.destroy_graph(graph) }
    }
    /// Enqueues a graph on `stream` as one operation: later work on the
    /// stream runs after all of it.
    ///
    /// # Safety
    /// As [`Device::create_graph`]; `graph` and `stream` must be owned by
    /// the caller, and no other stream may use the graph's ranges in a way
    /// that conflicts with its nodes until the launch completes.
    unsafe fn launch_graph(&self, graph: GraphId, stream: StreamId) -> Result<()> {
        let _ = stream;
        // SAFETY: the caller's contract, passed on.
        unsafe { self.destroy_graph(graph) }
    }
    /// Enqueues `nodes` one by one on `stream`, in order: the replay of a
    /// graph on a backend without graphs of its own. Only the stream's end
    /// after the last node is observed (by the mark recorded after the
    /// replay), so a backend may spare the commands before it what it keeps
    /// for each command's completion (OpenCL returns no event for them). If
    /// a node fails after others were queued, the stream is synchronised
    /// before the error returns.
    ///
    /// # Safety
    /// Every handle in `nodes` and `stream` must be owned by the caller, and
    /// each node must satisfy its own enqueue's contract (the typed layer's
    /// graphs borrow their buffers and kernels for this).
    unsafe fn replay_nodes(&self, nodes: &[GraphNode], stream: StreamId) -> Result<()> {
        // SAFETY: the caller's contract, passed on.
        unsafe {
            replay_each(self, nodes, stream, |kernel, config, args, _last| self.launch(kernel, config, args, stream))
        }
    }
    /// Destroys a graph. Launches still queued complete first: the backend
    /// frees the graph only after them.
    ///
    /// # Safety
    /// `graph` must be owned by the caller.
    unsafe fn destroy_graph(&self, graph: GraphId) -> Result<()> {
        Err(Error::new(
            self.info().backend,
            "destroy_graph",
            ErrorKind::InvalidHandle,
            format!("graph {} was never built: this backend builds no graphs of its own", graph.0),
        ))
    }
}

/// The refusal of what a backend cannot do or represent.
pub(crate) fn unsupported(backend: Backend, call: &'static str, message: impl Into<String>) -> Error {
    Error::new(backend, call, ErrorKind::Unsupported, message)
}

/// Alignment every backend's pinned allocations have at least (PoCL maps
/// buffers at 128 bytes; CUDA, HIP and the host backend give pages).
pub const PINNED_ALIGN: usize = 128;

/// Grid limits of backends whose runtime states none (host, OpenCL): CUDA's
/// limits, which every portable launch must respect anyway.
pub const PORTABLE_GRID_LIMITS: [u32; 3] = [i32::MAX as u32, 65535, 65535];

/// Work-groups one OpenCL launch may have, all dimensions together. OpenCL
/// states no such limit, but PoCL 3.1's pthread device crashes the process
/// at 2^32 work-groups and beyond (SIGFPE in its scheduler, or the
/// assertion `max_wgs > 0`), and other implementations count work-groups in
/// 32 bits too.
pub const OPENCL_MAX_BLOCKS: u64 = u32::MAX as u64;

/// Checks that `[offset, offset + len)` lies within an allocation of `size`
/// bytes. Every backend calls this before handing a range to its runtime.
pub fn check_range(backend: Backend, call: &'static str, offset: usize, len: usize, size: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= size => Ok(()),
        _ => Err(Error::new(
            backend,
            call,
            ErrorKind::OutOfBounds,
            format!("byte range {offset}..{} is outside the allocation of {size} bytes", offset as u128 + len as u128),
        )),
    }
}

/// The host address of a range of a pinned allocation, checked against
/// the allocation's size.
///
/// # Safety
/// `range.alloc` must be a pinned allocation owned by the caller.
pub(crate) unsafe fn pinned_address<D: Device + ?Sized>(device: &D, range: DeviceRange) -> Result<*mut u8> {
    // SAFETY: the caller's contract.
    let (base, size) = unsafe { (device.pinned_ptr(range.alloc)?, device.alloc_size(range.alloc)?) };
    check_range(device.info().backend, "pinned range", range.offset, range.len, size)?;
    // SAFETY: the range lies within the allocation (checked above).
    Ok(unsafe { base.as_ptr().add(range.offset) })
}

/// [`Device::replay_nodes`] with `launch` enqueueing each launch node; its
/// last argument says whether the node is the last that enqueues anything.
/// Events are skipped: recorded order already runs each wait after its
/// record.
///
/// # Safety
/// As [`Device::replay_nodes`]; `launch` enqueues as [`Device::launch`].
pub(crate) unsafe fn replay_each<D: Device + ?Sized>(
    device: &D,
    nodes: &[GraphNode],
    stream: StreamId,
    mut launch: impl FnMut(KernelId, &LaunchConfig, &[KernelArg], bool) -> Result<()>,
) -> Result<()> {
    let last = nodes.iter().rposition(|n| !matches!(n.op, GraphOp::Record { .. } | GraphOp::Wait { .. }));
    for (k, node) in nodes.iter().enumerate() {
        // SAFETY: the caller's contract: each node's handles and ranges are
        // valid for its enqueue.
        let done = unsafe {
            match &node.op {
                GraphOp::CopyH2D { src, dst } => {
                    pinned_address(device, *src).and_then(|host| device.copy_h2d(host, *dst, stream))
                }
                GraphOp::CopyD2H { src, dst } => {
                    pinned_address(device, *dst).and_then(|host| device.copy_d2h(*src, host, stream))
                }
                GraphOp::CopyD2D { src, dst } => device.copy_d2d(*src, *dst, stream),
                GraphOp::Fill { dst, pattern } => device.fill_u32(*dst, *pattern, stream),
                GraphOp::Launch { kernel, config, args } => launch(*kernel, config, args, Some(k) == last),
                GraphOp::Record { .. } | GraphOp::Wait { .. } => Ok(()),
            }
        };
        if let Err(e) = done {
            if k > 0 {
                // SAFETY: the stream is the caller's; it returns once the
                // queued nodes are done or can never run.
                let _ = unsafe { device.synchronize_stream(stream) };
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Checks that a device-to-device copy's ranges have one length and, within
/// one allocation, do not overlap. Every backend calls this before handing
/// the copy to its runtime.
pub fn check_copy_ranges(backend: Backend, src: DeviceRange, dst: DeviceRange) -> Result<()> {
    let fail = |msg: String| Err(Error::new(backend, "copy_d2d", ErrorKind::OutOfBounds, msg));
    if src.len != dst.len {
        return fail(format!("source has {} bytes but destination has {}", src.len, dst.len));
    }
    let overlap = src.alloc == dst.alloc
        && src.len > 0
        && (src.offset as u128) < dst.offset as u128 + dst.len as u128
        && (dst.offset as u128) < src.offset as u128 + src.len as u128;
    if overlap {
        return fail(format!(
            "source bytes {}..{} and destination bytes {}..{} of one allocation overlap",
            src.offset,
            src.offset as u128 + src.len as u128,
            dst.offset,
            dst.offset as u128 + dst.len as u128
        ));
    }
    Ok(())
}

/// Checks that a 4-byte fill starts and ends on 4-byte boundaries.
pub fn check_fill_range(backend: Backend, dst: DeviceRange) -> Result<()> {
    if !dst.offset.is_multiple_of(4) || !dst.len.is_multiple_of(4) {
        return Err(Error::new(
            backend,
            "fill_u32",
            ErrorKind::OutOfBounds,
            format!("offset {} and length {} must be multiples of 4 bytes", dst.offset, dst.len),
        ));
    }
    Ok(())
}

/// Checks a launch against one kernel's own limits (a backend reads them
/// from its runtime): threads per block and shared memory including the
/// kernel's static part. The messages name both numbers.
pub fn check_kernel_limits(
    info: &DeviceInfo,
    kernel: &str,
    config: &LaunchConfig,
    limits: &KernelLimits,
) -> Result<()> {
    let fail = |msg: String| Err(Error::new(info.backend, "launch", ErrorKind::InvalidLaunch, msg));
    let threads: u64 = config.block.iter().map(|&b| u64::from(b)).product();
    let max_threads = limits.max_threads;
    if threads > u64::from(max_threads) {
        return fail(format!(
            "block of {threads} threads but kernel `{kernel}` can run at most {max_threads} per block on {} \
             (pick block sizes with `Kernel::block_size`)",
            info.name
        ));
    }
    let static_shared = limits.static_shared as u64;
    let shared = config.shared_bytes as u64 + static_shared;
    if shared > info.shared_memory_per_block as u64 {
        return fail(format!(
            "kernel `{kernel}` needs {shared} bytes of shared (local) memory ({} dynamic + {static_shared} static) but {} has {}",
            config.shared_bytes, info.name, info.shared_memory_per_block
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::format_uuid;

    #[test]
    fn uuids_read_as_drivers_print_them() {
        let bytes = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 0xff];
        assert_eq!(format_uuid(&bytes), "12345678-9abc-def0-0001-0203040506ff");
    }
}
