//! Graphs on OpenCL: command buffers (`cl_khr_command_buffer`), where the
//! device reports the extension with simultaneous use (a graph is replayed
//! again before its last replay is done) and needs no particular queue
//! properties; elsewhere, or with [`GRAPHS_ENV`]` = replay`, the typed
//! layer replays a graph's nodes one by one.
//!
//! A command buffer belongs to one queue, so a graph is recorded once per
//! stream that replays it, at its first replay there, and recorded again
//! after an update (no mutable dispatch). The graph's streams become sync
//! points of the one queue: each command waits for the last command of its
//! graph stream and for the events that stream waits on.
//!
//! The extension is provisional and changed its calls: before version
//! 0.9.5 (PoCL 3.1 reports 0.9.0) copies and fills take no `properties`
//! argument. Both forms are declared here and the device's version picks
//! one; versions past 0.9.x are used as 0.9.5, which they match so far.

use std::ffi::{CString, c_void};
use std::sync::{Arc, Mutex, PoisonError};

use opencl3::device::Device as ClDevice;
use opencl3::types::{cl_command_queue, cl_event, cl_int, cl_kernel, cl_mem, cl_platform_id, cl_uint, cl_ulong};

use super::error::error;
use crate::device::{GraphNode, StreamId};
use crate::error::{ErrorKind, Result};

/// Forces the replay of recorded nodes on OpenCL (`replay`) or uses
/// command buffers where the device has them (`native`, the default).
pub const GRAPHS_ENV: &str = "HETERO_OPENCL_GRAPHS";

type SyncPoint = cl_uint;
type Properties = cl_ulong;
type CommandBuffer = *mut c_void;

type CreateFn = unsafe extern "C" fn(cl_uint, *const cl_command_queue, *const Properties, *mut cl_int) -> CommandBuffer;
type FinalizeFn = unsafe extern "C" fn(CommandBuffer) -> cl_int;
type ReleaseFn = unsafe extern "C" fn(CommandBuffer) -> cl_int;
type EnqueueFn = unsafe extern "C" fn(
    cl_uint,
    *mut cl_command_queue,
    CommandBuffer,
    cl_uint,
    *const cl_event,
    *mut cl_event,
) -> cl_int;
/// Before 0.9.5: no `properties`.
type CopyFn090 = unsafe extern "C" fn(
    CommandBuffer,
    cl_command_queue,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut *mut c_void,
) -> cl_int;
type CopyFn095 = unsafe extern "C" fn(
    CommandBuffer,
    cl_command_queue,
    *const Properties,
    cl_mem,
    cl_mem,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut *mut c_void,
) -> cl_int;
type FillFn090 = unsafe extern "C" fn(
    CommandBuffer,
    cl_command_queue,
    cl_mem,
    *const c_void,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut *mut c_void,
) -> cl_int;
type FillFn095 = unsafe extern "C" fn(
    CommandBuffer,
    cl_command_queue,
    *const Properties,
    cl_mem,
    *const c_void,
    usize,
    usize,
    usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut *mut c_void,
) -> cl_int;
/// Has `properties` in every version.
type NdRangeFn = unsafe extern "C" fn(
    CommandBuffer,
    cl_command_queue,
    *const Properties,
    cl_kernel,
    cl_uint,
    *const usize,
    *const usize,
    *const usize,
    cl_uint,
    *const SyncPoint,
    *mut SyncPoint,
    *mut *mut c_void,
) -> cl_int;

/// The copy and fill calls of the device's version of the extension.
#[derive(Clone, Copy)]
enum Calls {
    V090 { copy: CopyFn090, fill: FillFn090 },
    V095 { copy: CopyFn095, fill: FillFn095 },
}

/// `cl_khr_command_buffer`'s entry points for one device's platform.
#[derive(Clone, Copy)]
pub(super) struct CommandBuffers {
    create: CreateFn,
    finalize: FinalizeFn,
    release: ReleaseFn,
    enqueue: EnqueueFn,
    nd_range: NdRangeFn,
    calls: Calls,
}

/// `CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR`.
const CAPABILITIES: cl_uint = 0x12A9;
/// `CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR`.
const REQUIRED_QUEUE_PROPERTIES: cl_uint = 0x12AA;
/// `CL_COMMAND_BUFFER_CAPABILITY_SIMULTANEOUS_USE_KHR`.
const SIMULTANEOUS_USE_CAPABILITY: cl_ulong = 1 << 2;
/// `CL_COMMAND_BUFFER_FLAGS_KHR` and its `CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR`.
const FLAGS: Properties = 0x1293;
const SIMULTANEOUS_USE: Properties = 1;

/// Whether [`GRAPHS_ENV`] allows command buffers; an error for a value
/// hetero does not know.
pub(super) fn allowed() -> Result<bool> {
    match std::env::var(GRAPHS_ENV) {
        Err(_) => Ok(true),
        Ok(v) if v.is_empty() || v == "native" => Ok(true),
        Ok(v) if v == "replay" => Ok(false),
        Ok(v) => Err(error(
            "graphs",
            ErrorKind::Config,
            format!(
                "{GRAPHS_ENV}=`{v}` is not understood; use `native` (command buffers where the device has them) or `replay`"
            ),
        )),
    }
}

impl CommandBuffers {
    /// The entry points for `device` when it reports the extension with
    /// simultaneous use and no required queue properties; `None` otherwise.
    pub(super) fn find(device: &ClDevice) -> Option<Self> {
        let version = device
            .extensions_with_version()
            .ok()?
            .into_iter()
            .find(|e| {
                let name: Vec<u8> = e.name.iter().take_while(|&&c| c != 0).copied().collect();
                name == b"cl_khr_command_buffer"
            })?
            .version;
        let version = (version >> 22, (version >> 12) & 0x3FF, version & 0xFFF);
        let query = |param| opencl3::device::get_device_info(device.id(), param).ok().map(|v| v.to_ulong());
        if query(CAPABILITIES)? & SIMULTANEOUS_USE_CAPABILITY == 0 || query(REQUIRED_QUEUE_PROPERTIES)? != 0 {
            return None;
        }
        let platform = device.platform().ok()?;
        let get = |name: &str| lookup(platform, name);
        // SAFETY: each entry point is the extension's function of that name,
        // whose C signature is the type it is read as (for copy and fill,
        // the one of the device's version).
        unsafe {
            let calls = if version < (0, 9, 5) {
                Calls::V090 {
                    copy: std::mem::transmute::<*mut c_void, CopyFn090>(get("clCommandCopyBufferKHR")?),
                    fill: std::mem::transmute::<*mut c_void, FillFn090>(get("clCommandFillBufferKHR")?),
                }
            } else {
                Calls::V095 {
                    copy: std::mem::transmute::<*mut c_void, CopyFn095>(get("clCommandCopyBufferKHR")?),
                    fill: std::mem::transmute::<*mut c_void, FillFn095>(get("clCommandFillBufferKHR")?),
                }
            };
            Some(Self {
                create: std::mem::transmute::<*mut c_void, CreateFn>(get("clCreateCommandBufferKHR")?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(get("clFinalizeCommandBufferKHR")?),
                release: std::mem::transmute::<*mut c_void, ReleaseFn>(get("clReleaseCommandBufferKHR")?),
                enqueue: std::mem::transmute::<*mut c_void, EnqueueFn>(get("clEnqueueCommandBufferKHR")?),
                nd_range: std::mem::transmute::<*mut c_void, NdRangeFn>(get("clCommandNDRangeKernelKHR")?),
                calls,
            })
        }
    }
}

/// The extension entry point `name` of `platform`, from the ICD loader
/// opencl3 loaded; `None` where it has none.
fn lookup(platform: cl_platform_id, name: &str) -> Option<*mut c_void> {
    let runtime = cl3::load_library().as_ref().ok()?;
    let name = CString::new(name).ok()?;
    let found = runtime.clGetExtensionFunctionAddressForPlatform(platform, name.as_ptr())?;
    (!found.is_null()).then_some(found)
}

/// One command of a recording, as the backend resolved it.
#[derive(Clone, Copy)]
pub(super) enum Command {
    /// Copy `len` bytes between two buffers (device or pinned).
    Copy { src: cl_mem, src_offset: usize, dst: cl_mem, dst_offset: usize, len: usize },
    /// Fill `len` bytes with a 32-bit pattern.
    Fill { dst: cl_mem, offset: usize, len: usize, pattern: u32 },
    /// A kernel whose arguments are set on `kernel` (held by the caller
    /// for the call).
    Kernel { kernel: cl_kernel, range: super::module::Shape },
}

/// A command buffer being recorded or recorded, with what it needs alive.
pub(super) struct Recording {
    buffer: CommandBuffer,
    calls: CommandBuffers,
    /// A kernel object of each launch, its arguments set for it alone:
    /// PoCL 3.1 reads a recorded kernel's arguments from the kernel object
    /// again at each enqueue (not when recorded, as the extension says),
    /// so no other launch may set them afterwards.
    kernels: Vec<cl_kernel>,
}

// SAFETY: OpenCL objects may be used from any thread; a recording is used
// under its graph's lock.
unsafe impl Send for Recording {}

impl Recording {
    /// A new command buffer on `queue`, for simultaneous use.
    pub(super) fn new(calls: CommandBuffers, queue: cl_command_queue) -> Result<Self> {
        let properties = [FLAGS, SIMULTANEOUS_USE, 0];
        let mut status: cl_int = 0;
        // SAFETY: a live queue; the property list is zero-terminated.
        let buffer = unsafe { (calls.create)(1, &queue, properties.as_ptr(), &mut status) };
        if status != 0 || buffer.is_null() {
            return Err(super::error::cl_error("clCreateCommandBufferKHR", status));
        }
        Ok(Self { buffer, calls, kernels: Vec::new() })
    }

    /// A copy of `kernel` with its arguments as set now, owned by the
    /// recording (see `kernels`).
    pub(super) fn own_kernel(&mut self, kernel: cl_kernel) -> Result<cl_kernel> {
        let copy = cl3::kernel::clone_kernel(kernel).map_err(|code| super::error::cl_error("clCloneKernel", code))?;
        self.kernels.push(copy);
        Ok(copy)
    }

    /// Records `command` after `after`; returns its sync point.
    ///
    /// # Safety
    /// Every handle is live and of the command buffer's context; a kernel's
    /// arguments are set and stay so for the call.
    pub(super) unsafe fn record(&mut self, command: &Command, after: &[SyncPoint]) -> Result<SyncPoint> {
        let (n, list) = (after.len() as cl_uint, if after.is_empty() { std::ptr::null() } else { after.as_ptr() });
        let mut point: SyncPoint = 0;
        let (cb, none, props) = (self.buffer, std::ptr::null_mut(), std::ptr::null::<Properties>());
        let handle = std::ptr::null_mut();
        // SAFETY: the caller's contract; the wait list and out-pointers are valid for the call.
        let status = unsafe {
            match (*command, self.calls.calls) {
                (Command::Copy { src, src_offset, dst, dst_offset, len }, Calls::V090 { copy, .. }) => {
                    copy(cb, none, src, dst, src_offset, dst_offset, len, n, list, &mut point, handle)
                }
                (Command::Copy { src, src_offset, dst, dst_offset, len }, Calls::V095 { copy, .. }) => {
                    copy(cb, none, props, src, dst, src_offset, dst_offset, len, n, list, &mut point, handle)
                }
                (Command::Fill { dst, offset, len, pattern }, Calls::V090 { fill, .. }) => {
                    fill(cb, none, dst, (&raw const pattern).cast(), 4, offset, len, n, list, &mut point, handle)
                }
                (Command::Fill { dst, offset, len, pattern }, Calls::V095 { fill, .. }) => {
                    let p = (&raw const pattern).cast();
                    fill(cb, none, props, dst, p, 4, offset, len, n, list, &mut point, handle)
                }
                (Command::Kernel { kernel, range }, _) => (self.calls.nd_range)(
                    cb,
                    none,
                    props,
                    kernel,
                    range.dims,
                    std::ptr::null(),
                    range.global.as_ptr(),
                    range.local.as_ptr(),
                    n,
                    list,
                    &mut point,
                    handle,
                ),
            }
        };
        let call = match command {
            Command::Copy { .. } => "clCommandCopyBufferKHR",
            Command::Fill { .. } => "clCommandFillBufferKHR",
            Command::Kernel { .. } => "clCommandNDRangeKernelKHR",
        };
        if status != 0 {
            return Err(super::error::cl_error(call, status));
        }
        Ok(point)
    }

    /// Ends the recording.
    pub(super) fn finalize(&self) -> Result<()> {
        // SAFETY: a live command buffer, recorded only by this object.
        let status = unsafe { (self.calls.finalize)(self.buffer) };
        if status != 0 {
            return Err(super::error::cl_error("clFinalizeCommandBufferKHR", status));
        }
        Ok(())
    }

    /// The command to enqueue the command buffer on its queue after the
    /// wait list the stream passes.
    pub(super) fn enqueue(&self, n: cl_uint, list: *const cl_event) -> std::result::Result<cl_event, i32> {
        let mut event: cl_event = std::ptr::null_mut();
        // SAFETY: a finalised command buffer made for simultaneous use; the
        // wait list is valid for the call (the stream's contract).
        let status = unsafe { (self.calls.enqueue)(0, std::ptr::null_mut(), self.buffer, n, list, &mut event) };
        if status == 0 { Ok(event) } else { Err(status) }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        // SAFETY: released once; the runtime keeps a command buffer, and the
        // memory objects its commands use, until its pending runs complete.
        unsafe {
            let _ = (self.calls.release)(self.buffer);
            for &kernel in &self.kernels {
                let _ = opencl3::kernel::release_kernel(kernel);
            }
        }
    }
}

/// A graph: its nodes, and the command buffer recorded for each stream
/// that replayed it since the nodes last changed.
pub(super) struct ClGraph {
    pub(super) nodes: Mutex<Vec<GraphNode>>,
    pub(super) recorded: Mutex<Vec<(StreamId, Arc<Recording>)>>,
}

// SAFETY: every field is behind a lock; a recording's handles may be used
// from any thread.
unsafe impl Sync for Recording {}

impl ClGraph {
    pub(super) fn new(nodes: &[GraphNode]) -> Self {
        Self { nodes: Mutex::new(nodes.to_vec()), recorded: Mutex::new(Vec::new()) }
    }

    /// Replaces the nodes; every recording goes (runs queued keep theirs).
    pub(super) fn update(&self, nodes: &[GraphNode]) {
        *self.nodes.lock().unwrap_or_else(PoisonError::into_inner) = nodes.to_vec();
        self.recorded.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }

    /// The recording for `stream`, made with `record` the first time.
    pub(super) fn recording(
        &self,
        stream: StreamId,
        record: impl FnOnce(&[GraphNode]) -> Result<Recording>,
    ) -> Result<Arc<Recording>> {
        let mut recorded = self.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, r)) = recorded.iter().find(|(s, _)| *s == stream) {
            return Ok(Arc::clone(r));
        }
        let nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let recording = Arc::new(record(&nodes)?);
        recorded.push((stream, Arc::clone(&recording)));
        Ok(recording)
    }
}
