//! [`Cuda`]: the driver API calls the shared GPU device makes, each wrapped
//! once (cudarc's `sys` bindings), for one device in its primary context.

use std::ffi::{CStr, c_char, c_void};
use std::ptr::NonNull;
use std::sync::{Mutex, OnceLock, PoisonError};

use cudarc::driver::sys;

use super::error::{check, error};
use crate::backend::gpu::{Attribute, Identity, ModuleCache, Runtime, Sealed};
use crate::device::{Backend, StreamFlags};
use crate::error::{ErrorKind, Result};

/// Every driver entry point the backend calls, by the name it is loaded
/// under, with the older name used where a driver lacks it.
/// `cuEventElapsedTime_v2` came with CUDA 12.8 drivers (R570); earlier ones
/// export only `cuEventElapsedTime`, with the same signature. Kept whole
/// by `driver_symbols_cover_every_call`.
pub(crate) const DRIVER_SYMBOLS: &[(&str, Option<&str>)] = &[
    ("cuCtxEnablePeerAccess", None),
    ("cuCtxGetCurrent", None),
    ("cuCtxSetCurrent", None),
    ("cuDeviceCanAccessPeer", None),
    ("cuDeviceGet", None),
    ("cuDeviceGetAttribute", None),
    ("cuDeviceGetCount", None),
    ("cuDeviceGetMemPool", None),
    ("cuDeviceGetName", None),
    ("cuDeviceGetPCIBusId", None),
    ("cuDeviceGetUuid_v2", None),
    ("cuDevicePrimaryCtxRetain", None),
    ("cuDeviceTotalMem_v2", None),
    ("cuDriverGetVersion", None),
    ("cuEventCreate", None),
    ("cuEventDestroy_v2", None),
    ("cuEventElapsedTime_v2", Some("cuEventElapsedTime")),
    ("cuEventQuery", None),
    ("cuEventRecord", None),
    ("cuEventSynchronize", None),
    ("cuFuncGetAttribute", None),
    ("cuGraphDestroy", None),
    ("cuGraphExecDestroy", None),
    ("cuGraphExecUpdate_v2", None),
    ("cuGraphInstantiateWithFlags", None),
    ("cuGraphLaunch", None),
    ("cuInit", None),
    ("cuLaunchKernel", None),
    ("cuMemAllocAsync", None),
    ("cuMemAlloc_v2", None),
    ("cuMemFreeAsync", None),
    ("cuMemFreeHost", None),
    ("cuMemFree_v2", None),
    ("cuMemHostAlloc", None),
    ("cuMemHostGetDevicePointer_v2", None),
    ("cuMemPoolSetAccess", None),
    ("cuMemcpyDtoDAsync_v2", None),
    ("cuMemcpyDtoHAsync_v2", None),
    ("cuMemcpyHtoDAsync_v2", None),
    ("cuMemcpyPeerAsync", None),
    ("cuMemsetD32Async", None),
    ("cuModuleGetFunction", None),
    ("cuModuleLoadData", None),
    ("cuPointerGetAttribute", None),
    ("cuStreamBeginCapture_v2", None),
    ("cuStreamCreateWithPriority", None),
    ("cuStreamDestroy_v2", None),
    ("cuStreamEndCapture", None),
    ("cuStreamGetCtx", None),
    ("cuStreamQuery", None),
    ("cuStreamSynchronize", None),
    ("cuStreamWaitEvent", None),
    ("cuStreamWaitValue32_v2", None),
];

/// The oldest driver API the backend runs on: CUDA 12.0 (R525 drivers).
pub(crate) const OLDEST_DRIVER: i32 = 12000;

/// Entry points called only where the driver exports them all (CUDA 12.3,
/// R545, and later): with them a graph's changed launch arguments are set
/// node by node ([`Runtime::exec_set_launch`]) instead of capturing the
/// whole graph again.
pub(crate) const PER_NODE_SYMBOLS: &[&str] = &["cuGraphExecKernelNodeSetParams_v2", "cuStreamGetCaptureInfo_v3"];

/// Whether this driver exports [`PER_NODE_SYMBOLS`], found at discovery.
static PER_NODE: OnceLock<bool> = OnceLock::new();

fn per_node_updates() -> bool {
    PER_NODE.get().copied().unwrap_or(false)
}

/// The entry points of [`DRIVER_SYMBOLS`] that a library exporting the
/// names `has` answers for lacks, fallback included.
pub(crate) fn missing_symbols(has: impl Fn(&str) -> bool) -> Vec<&'static str> {
    DRIVER_SYMBOLS
        .iter()
        .filter(|(name, older)| !has(name) && !older.is_some_and(&has))
        .map(|(name, _)| *name)
        .collect()
}

/// `cuEventElapsedTime(_v2)`'s signature.
type ElapsedFn = unsafe extern "C" fn(*mut f32, sys::CUevent, sys::CUevent) -> sys::CUresult;

/// The elapsed-time entry point this driver exports, resolved at discovery.
static ELAPSED: OnceLock<ElapsedFn> = OnceLock::new();

/// Checks the loaded driver before any other call: its version (at least
/// [`OLDEST_DRIVER`]) and every entry point the backend may call, and
/// resolves the one with two names. cudarc panics at the first call of a
/// symbol the driver lacks; this names it instead.
pub(super) fn check_driver() -> Result<()> {
    // SAFETY: the library is present (checked by the caller); culib loads it once.
    let lib = unsafe { sys::culib() };
    // SAFETY: each name is looked up only, never called here.
    let has = |name: &str| unsafe { lib.get::<*const c_void>(name.as_bytes()) }.is_ok();
    let mut version = 0;
    if has("cuDriverGetVersion") {
        // SAFETY: version is a valid out-pointer; the call needs no cuInit.
        check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut version) })?;
    }
    let release = release(version);
    if version < OLDEST_DRIVER {
        return Err(error(
            "cuDriverGetVersion",
            ErrorKind::Unavailable,
            format!("the NVIDIA driver supports CUDA {release}; hetero needs a driver for CUDA 12.0 or later (R525+)"),
        ));
    }
    let missing = missing_symbols(has);
    if !missing.is_empty() {
        return Err(error(
            "load libcuda",
            ErrorKind::Unavailable,
            format!("the NVIDIA driver (CUDA {release}) does not export {}", missing.join(", ")),
        ));
    }
    // SAFETY: both names have ElapsedFn's signature; one of them is present (checked above).
    let elapsed = unsafe { lib.get::<ElapsedFn>(b"cuEventElapsedTime_v2") }
        .or_else(|_| unsafe { lib.get::<ElapsedFn>(b"cuEventElapsedTime") })
        .map(|f| *f)
        .map_err(|e| error("load libcuda", ErrorKind::Unavailable, format!("cuEventElapsedTime: {e}")))?;
    let _ = ELAPSED.set(elapsed);
    let _ = PER_NODE.set(PER_NODE_SYMBOLS.iter().all(|name| has(name)));
    Ok(())
}

/// A `cuDriverGetVersion` answer as a CUDA release (`12020` is `12.2`).
fn release(version: i32) -> String {
    format!("{}.{}", version / 1000, version % 1000 / 10)
}

/// The error for PTX the driver cannot load: NVRTC is newer than the
/// driver. Names both versions and the remedy.
#[cold]
fn newer_nvrtc() -> crate::error::Error {
    let mut version = 0;
    // SAFETY: version is a valid out-pointer.
    let _ = unsafe { sys::cuDriverGetVersion(&mut version) };
    let major = version / 1000;
    let nvrtc =
        super::compile::nvrtc_version().map_or("unknown".to_string(), |(major, minor)| format!("{major}.{minor}"));
    error(
        "cuModuleLoadData",
        ErrorKind::Build,
        format!(
            "the driver (CUDA {}) cannot load PTX from NVRTC {nvrtc}, which is newer: name an NVRTC no newer than \
             the driver with {}=/path/to/libnvrtc.so.{major} (a CUDA {major}.x toolkit's, or the \
             nvidia-cuda-nvrtc-cu{major} wheel's), or update the driver",
            release(version),
            super::compile::NVRTC_ENV,
        ),
    )
}

/// A device and its primary context, retained once for the process.
struct Kept(sys::CUdevice, sys::CUcontext);

// SAFETY: driver handles may be used from any thread.
unsafe impl Send for Kept {}

/// The primary contexts the process has retained: one retain each, never
/// released.
static KEPT: Mutex<Vec<Kept>> = Mutex::new(Vec::new());

/// `device`'s primary context, retained the first time the process asks.
fn primary_context(device: sys::CUdevice) -> Result<sys::CUcontext> {
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(Kept(_, context)) = kept.iter().find(|k| k.0 == device) {
        return Ok(*context);
    }
    let mut context: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: context is a valid out-pointer; this retain is never released.
    check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, device) })?;
    kept.push(Kept(device, context));
    Ok(context)
}

/// One CUDA device and its retained primary context.
///
/// Invariant: `context` is the primary context of `device`, which the
/// process keeps retained once it is opened (`KEPT`), as CUDA's runtime API
/// does with the contexts it creates: modules cached for the process stay
/// valid, and a context is created once, never again while another
/// device's stream waits on a gate. Creating a context then waited for that
/// stream: a second discovery of a two-GPU node, after the first had
/// released device 1's context, hung until the gate opened
/// (`drops_never_wait_for_a_forgotten_gate` on two H200s).
pub struct Cuda {
    device: sys::CUdevice,
    context: sys::CUcontext,
    /// Compute capability (major, minor).
    capability: (i32, i32),
}

// SAFETY: driver handles may be used from any thread; the fields never change.
unsafe impl Send for Cuda {}
// SAFETY: as above.
unsafe impl Sync for Cuda {}

impl Sealed for Cuda {}

impl Cuda {
    /// The GPU target of the device's code, `sm_XY` from its compute capability.
    fn target(&self) -> String {
        format!("sm_{}{}", self.capability.0, self.capability.1)
    }

    /// Device `ordinal` with its primary context retained; `cuInit` must have succeeded.
    pub(super) fn open(ordinal: usize) -> Result<Self> {
        let mut device: sys::CUdevice = 0;
        let index = i32::try_from(ordinal).unwrap_or(i32::MAX);
        // SAFETY: device is a valid out-pointer.
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut device, index) })?;
        let mut cuda = Self { device, context: primary_context(device)?, capability: (0, 0) };
        use sys::CUdevice_attribute::*;
        let major = cuda.raw_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = cuda.raw_attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        cuda.capability = (major, minor);
        Ok(cuda)
    }

    fn raw_attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        let mut value = 0;
        // SAFETY: the device is a valid ordinal handle; value is a valid out-pointer.
        check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut value, attr, self.device) })?;
        Ok(value)
    }
}

/// `Ok(false)` for `CUDA_ERROR_NOT_READY`, `Ok(true)` for success.
fn ready(call: &'static str, code: sys::CUresult) -> Result<bool> {
    match code {
        sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        other => check(call, other).map(|()| true),
    }
}

static MODULES: ModuleCache<Cuda> = ModuleCache::new();

impl Runtime for Cuda {
    const BACKEND: Backend = Backend::Cuda;
    type Stream = sys::CUstream;
    type Event = sys::CUevent;
    type Module = sys::CUmodule;
    type Function = sys::CUfunction;
    type Ptr = sys::CUdeviceptr;
    type Graph = sys::CUgraph;
    type GraphExec = sys::CUgraphExec;
    type GraphNode = sys::CUgraphNode;
    /// `cuGraphExecDestroy` frees a graph in flight once it completes, and
    /// an update "only affect[s] future launches" (CUDA driver API reference).
    const GRAPHS_OUTLIVE_LAUNCHES: bool = true;

    fn module_cache() -> &'static ModuleCache<Self> {
        &MODULES
    }

    fn enter(&self) -> Result<()> {
        // Asking is cheaper than setting (26-41 ns a switch between two
        // contexts on an H200, experiments/gpu/ctx-current.c), and the
        // context is usually current already.
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: current is a valid out-pointer.
        if unsafe { sys::cuCtxGetCurrent(&mut current) } == sys::CUresult::CUDA_SUCCESS && current == self.context {
            return Ok(());
        }
        // SAFETY: the primary context is retained for this value's life.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.context) })
    }

    fn device_key(&self) -> i64 {
        i64::from(self.device)
    }

    fn attribute(&self, attribute: Attribute) -> Result<i32> {
        use sys::CUdevice_attribute::*;
        let axis = |a: u8, x, y, z| match a {
            0 => x,
            1 => y,
            _ => z,
        };
        self.raw_attribute(match attribute {
            Attribute::MaxThreadsPerBlock => CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
            Attribute::MaxBlockDim(a) => axis(
                a,
                CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X,
                CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y,
                CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z,
            ),
            Attribute::MaxGridDim(a) => axis(
                a,
                CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X,
                CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y,
                CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z,
            ),
            Attribute::SharedMemoryPerBlock => CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
            Attribute::MultiprocessorCount => CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            Attribute::WarpSize => CU_DEVICE_ATTRIBUTE_WARP_SIZE,
        })
    }

    fn identity(&self) -> Result<Identity> {
        let mut name = [0 as c_char; 256];
        // SAFETY: name holds 256 bytes, as passed.
        check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, self.device) })?;
        // Read to the buffer's end at most: a library may leave no NUL.
        let name = crate::backend::gpu::loader::text_of(&name);
        let mut total: usize = 0;
        // SAFETY: total is a valid out-pointer.
        check("cuDeviceTotalMem", unsafe { sys::cuDeviceTotalMem_v2(&mut total, self.device) })?;
        let mut version = 0;
        // SAFETY: version is a valid out-pointer.
        check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut version) })?;
        let mut bus = [0 as c_char; 64];
        // SAFETY: bus holds 64 bytes, as passed.
        let pci_bus_id =
            check("cuDeviceGetPCIBusId", unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, self.device) })
                .ok()
                .map(|()| crate::backend::gpu::loader::text_of(&bus).to_lowercase());
        // SAFETY: an all-zero CUuuid is a valid value of the plain struct.
        let mut id: sys::CUuuid = unsafe { std::mem::zeroed() };
        // SAFETY: id is a valid out-pointer.
        let uuid = check("cuDeviceGetUuid_v2", unsafe { sys::cuDeviceGetUuid_v2(&mut id, self.device) })
            .ok()
            .map(|()| crate::device::format_uuid(&id.bytes.map(|b| b as u8)));
        Ok(Identity {
            pci_bus_id,
            uuid,
            name,
            vendor: "NVIDIA".to_string(),
            platform: format!(
                "CUDA driver {}.{}, compute capability {}.{}",
                version / 1000,
                version % 1000 / 10,
                self.capability.0,
                self.capability.1
            ),
            total_memory: total as u64,
            arch: Some(self.target()),
        })
    }

    fn pool_stream(&self) -> Result<Option<sys::CUstream>> {
        if self.raw_attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? == 0 {
            return Ok(None);
        }
        // SAFETY: the context is current (the shared device entered it).
        unsafe { self.stream_create(StreamFlags { non_blocking: true, ..StreamFlags::default() }) }.map(Some)
    }

    unsafe fn stream_create(&self, flags: StreamFlags) -> Result<sys::CUstream> {
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
        Ok(stream)
    }

    unsafe fn stream_destroy(&self, stream: sys::CUstream) {
        // SAFETY: the caller's contract (a live, idle stream, destroyed once).
        let _ = unsafe { sys::cuStreamDestroy_v2(stream) };
    }

    unsafe fn stream_synchronize(&self, stream: sys::CUstream) -> Result<()> {
        // SAFETY: the caller's contract.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream) })
    }

    unsafe fn stream_query(&self, stream: sys::CUstream) -> Result<bool> {
        // SAFETY: the caller's contract.
        ready("cuStreamQuery", unsafe { sys::cuStreamQuery(stream) })
    }

    unsafe fn stream_wait_event(&self, stream: sys::CUstream, event: sys::CUevent) -> Result<()> {
        // SAFETY: the caller's contract.
        check("cuStreamWaitEvent", unsafe { sys::cuStreamWaitEvent(stream, event, 0) })
    }

    unsafe fn stream_wait_word(&self, stream: sys::CUstream, addr: sys::CUdeviceptr, value: u32) -> Result<()> {
        let geq = sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32;
        // SAFETY: the caller's contract; addr is a mapped word that outlives the wait.
        check("cuStreamWaitValue32", unsafe { sys::cuStreamWaitValue32_v2(stream, addr, value, geq) })
    }

    unsafe fn event_create(&self, timing: bool) -> Result<sys::CUevent> {
        let mut event: sys::CUevent = std::ptr::null_mut();
        // No CU_EVENT_BLOCKING_SYNC: it made every record cost about a
        // microsecond more (hetero's timed record took 2.0x cudarc's), and
        // host waits follow the context's scheduling mode instead, as
        // cudarc's and PyTorch's do.
        let flags = if timing { 0 } else { sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32 };
        // SAFETY: event is a valid out-pointer.
        check("cuEventCreate", unsafe { sys::cuEventCreate(&mut event, flags) })?;
        Ok(event)
    }

    unsafe fn event_destroy(&self, event: sys::CUevent) -> Result<()> {
        // SAFETY: the caller's contract (destroyed once).
        check("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(event) })
    }

    unsafe fn event_record(&self, event: sys::CUevent, stream: sys::CUstream) -> Result<()> {
        // SAFETY: the caller's contract.
        check("cuEventRecord", unsafe { sys::cuEventRecord(event, stream) })
    }

    unsafe fn event_query(&self, event: sys::CUevent) -> Result<bool> {
        // SAFETY: the caller's contract.
        ready("cuEventQuery", unsafe { sys::cuEventQuery(event) })
    }

    unsafe fn event_synchronize(&self, event: sys::CUevent) -> Result<()> {
        // SAFETY: the caller's contract.
        check("cuEventSynchronize", unsafe { sys::cuEventSynchronize(event) })
    }

    unsafe fn event_elapsed(&self, start: sys::CUevent, end: sys::CUevent) -> Result<f32> {
        let mut ms = 0f32;
        let elapsed = ELAPSED.get().ok_or_else(|| {
            error("cuEventElapsedTime", ErrorKind::Unavailable, "the driver was not checked at discovery")
        })?;
        // SAFETY: the caller's contract; ms is a valid out-pointer; elapsed
        // is the driver's cuEventElapsedTime(_v2).
        check("cuEventElapsedTime", unsafe { elapsed(&mut ms, start, end) })?;
        Ok(ms)
    }

    unsafe fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<NonNull<u8>> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | if mapped { sys::CU_MEMHOSTALLOC_DEVICEMAP } else { 0 };
        // SAFETY: ptr is a valid out-pointer; the caller passes a non-zero size.
        check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut ptr, bytes, flags) })?;
        NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| error("cuMemHostAlloc", ErrorKind::OutOfMemory, "the driver returned a null pointer"))
    }

    unsafe fn host_device_ptr(&self, host: NonNull<u8>) -> Result<sys::CUdeviceptr> {
        let mut device: sys::CUdeviceptr = 0;
        // SAFETY: host was allocated mapped (the caller's contract); device is a valid out-pointer.
        check("cuMemHostGetDevicePointer", unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut device, host.as_ptr().cast(), 0)
        })?;
        Ok(device)
    }

    unsafe fn host_free(&self, host: NonNull<u8>) -> Result<()> {
        // SAFETY: allocated by cuMemHostAlloc and freed once (the caller's contract).
        check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(host.as_ptr().cast()) })
    }

    unsafe fn mem_alloc(&self, bytes: usize, pool: Option<sys::CUstream>) -> Result<(sys::CUdeviceptr, bool)> {
        let mut ptr: sys::CUdeviceptr = 0;
        match pool {
            Some(stream) => {
                // SAFETY: ptr is a valid out-pointer; the stream is live.
                check("cuMemAllocAsync", unsafe { sys::cuMemAllocAsync(&mut ptr, bytes, stream) })?;
                // SAFETY: the allocator stream only holds allocations and frees.
                check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(stream) })?;
                Ok((ptr, true))
            }
            None => {
                // SAFETY: ptr is a valid out-pointer.
                check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) })?;
                Ok((ptr, false))
            }
        }
    }

    unsafe fn mem_free(&self, ptr: sys::CUdeviceptr, pool: Option<sys::CUstream>) -> Result<()> {
        match pool {
            // SAFETY: allocated by cuMemAllocAsync and freed once (the caller's contract).
            Some(stream) => check("cuMemFreeAsync", unsafe { sys::cuMemFreeAsync(ptr, stream) }),
            // SAFETY: allocated by cuMemAlloc and freed once.
            None => check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) }),
        }
    }

    fn ptr_add(ptr: sys::CUdeviceptr, offset: usize) -> sys::CUdeviceptr {
        ptr + offset as u64
    }

    fn ptr_to_raw(ptr: sys::CUdeviceptr) -> u64 {
        ptr
    }

    fn ptr_from_raw(raw: u64) -> sys::CUdeviceptr {
        raw
    }

    fn stream_to_raw(stream: sys::CUstream) -> *mut c_void {
        stream.cast()
    }

    fn stream_from_raw(raw: *mut c_void) -> sys::CUstream {
        raw.cast()
    }

    unsafe fn check_foreign_ptr(&self, ptr: sys::CUdeviceptr) -> Result<()> {
        let mut ordinal: i32 = -1;
        // SAFETY: ordinal is a valid out-pointer of the attribute's type (int).
        check("cuPointerGetAttribute", unsafe {
            sys::cuPointerGetAttribute(
                (&raw mut ordinal).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr,
            )
        })?;
        if ordinal != self.device {
            return Err(crate::error::Error::new(
                Backend::Cuda,
                "adopt_memory",
                ErrorKind::DeviceMismatch,
                format!("the memory belongs to CUDA device {ordinal}, not to device {}", self.device),
            ));
        }
        Ok(())
    }

    unsafe fn check_foreign_stream(&self, stream: sys::CUstream) -> Result<()> {
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: the caller promises a live stream; context is a valid out-pointer.
        check("cuStreamGetCtx", unsafe { sys::cuStreamGetCtx(stream, &mut context) })?;
        if context != self.context {
            return Err(crate::error::Error::new(
                Backend::Cuda,
                "adopt_stream",
                ErrorKind::DeviceMismatch,
                "the stream belongs to another CUDA context than this device's primary context",
            ));
        }
        Ok(())
    }

    unsafe fn copy_h2d(&self, dst: sys::CUdeviceptr, src: *const u8, len: usize, stream: sys::CUstream) -> Result<()> {
        // SAFETY: the caller's contract (checked range; src valid until completion).
        check("cuMemcpyHtoDAsync", unsafe { sys::cuMemcpyHtoDAsync_v2(dst, src.cast(), len, stream) })
    }

    unsafe fn copy_d2h(&self, dst: *mut u8, src: sys::CUdeviceptr, len: usize, stream: sys::CUstream) -> Result<()> {
        // SAFETY: the caller's contract (checked range; dst valid until completion).
        check("cuMemcpyDtoHAsync", unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, stream) })
    }

    unsafe fn copy_d2d(
        &self,
        dst: sys::CUdeviceptr,
        src: sys::CUdeviceptr,
        len: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        // SAFETY: the caller's contract (checked, non-overlapping ranges).
        check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, len, stream) })
    }

    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        if self.device == peer.device {
            return Ok(false);
        }
        let mut can = 0;
        // SAFETY: can is a valid out-pointer; both are device handles.
        check("cuDeviceCanAccessPeer", unsafe { sys::cuDeviceCanAccessPeer(&mut can, self.device, peer.device) })?;
        Ok(can != 0)
    }

    unsafe fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        // SAFETY: this device's context is current (the caller's contract);
        // the peer's primary context is kept for the process.
        match unsafe { sys::cuCtxEnablePeerAccess(peer.context, 0) } {
            sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
            other => check("cuCtxEnablePeerAccess", other)?,
        }
        // Peer access does not cover stream-ordered allocations: the peer's
        // memory pool grants this device access on its own. Without it the
        // driver staged every copy from a pool through host memory (38 GB/s
        // over an 18-link NVLink that torch crossed at 390 GB/s).
        if peer.raw_attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? == 0 {
            return Ok(());
        }
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: pool is a valid out-pointer; peer.device is a device handle.
        check("cuDeviceGetMemPool", unsafe { sys::cuDeviceGetMemPool(&mut pool, peer.device) })?;
        let access = sys::CUmemAccessDesc {
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: self.device,
            },
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: pool is the peer's live pool; access is one valid descriptor.
        check("cuMemPoolSetAccess", unsafe { sys::cuMemPoolSetAccess(pool, &access, 1) })
    }

    unsafe fn copy_peer(
        &self,
        dst: sys::CUdeviceptr,
        to: &Self,
        src: sys::CUdeviceptr,
        from: &Self,
        len: usize,
        stream: sys::CUstream,
    ) -> Result<()> {
        // SAFETY: the caller's contract: checked ranges of live memory of
        // each context, a stream of this device.
        check("cuMemcpyPeerAsync", unsafe { sys::cuMemcpyPeerAsync(dst, to.context, src, from.context, len, stream) })
    }

    unsafe fn fill_u32(&self, dst: sys::CUdeviceptr, value: u32, count: usize, stream: sys::CUstream) -> Result<()> {
        // SAFETY: the caller's contract (checked, 4-byte aligned range).
        check("cuMemsetD32Async", unsafe { sys::cuMemsetD32Async(dst, value, count, stream) })
    }

    fn compile(&self, source: &CStr, options: &crate::device::BuildOptions) -> Result<Vec<c_char>> {
        super::compile::compile(source, &self.target(), options.deterministic)
    }

    unsafe fn module_load(&self, image: &[c_char]) -> Result<sys::CUmodule> {
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: image is NUL-terminated PTX from NVRTC (the caller's contract).
        match unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) } {
            sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => Err(newer_nvrtc()),
            other => check("cuModuleLoadData", other).map(|()| module),
        }
    }

    unsafe fn module_function(&self, module: sys::CUmodule, name: &CStr) -> Result<sys::CUfunction> {
        let mut function: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded; function is a valid out-pointer.
        check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut function, module, name.as_ptr()) })?;
        Ok(function)
    }

    unsafe fn function_limits(&self, function: sys::CUfunction) -> Result<(u32, usize)> {
        let attribute = |attr| -> Result<i32> {
            let mut value = 0;
            // SAFETY: the function is live; value is a valid out-pointer.
            check("cuFuncGetAttribute", unsafe { sys::cuFuncGetAttribute(&mut value, attr, function) })?;
            Ok(value)
        };
        use sys::CUfunction_attribute::*;
        Ok((
            u32::try_from(attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?).unwrap_or(0),
            usize::try_from(attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?).unwrap_or(0),
        ))
    }

    unsafe fn capture_begin(&self, stream: sys::CUstream) -> Result<()> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: the caller's contract (a live stream of the current device).
        check("cuStreamBeginCapture_v2", unsafe { sys::cuStreamBeginCapture_v2(stream, mode) })
    }

    unsafe fn capture_end(&self, stream: sys::CUstream) -> Result<sys::CUgraph> {
        let mut graph: sys::CUgraph = std::ptr::null_mut();
        // SAFETY: graph is a valid out-pointer; the caller's contract.
        check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(stream, &mut graph) })?;
        Ok(graph)
    }

    unsafe fn graph_instantiate(&self, graph: sys::CUgraph) -> Result<sys::CUgraphExec> {
        let mut exec: sys::CUgraphExec = std::ptr::null_mut();
        // SAFETY: exec is a valid out-pointer; the caller's contract.
        check("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) })?;
        Ok(exec)
    }

    unsafe fn graph_exec_update(&self, exec: sys::CUgraphExec, graph: sys::CUgraph) -> Result<bool> {
        // SAFETY: all-zero is a valid value of this plain C struct (an enum
        // whose zero is SUCCESS, and null node handles).
        let mut info: sys::CUgraphExecUpdateResultInfo = unsafe { std::mem::zeroed() };
        // SAFETY: info is a valid out-pointer; the caller's contract.
        match unsafe { sys::cuGraphExecUpdate_v2(exec, graph, &mut info) } {
            sys::CUresult::CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE => Ok(false),
            other => check("cuGraphExecUpdate_v2", other).map(|()| true),
        }
    }

    unsafe fn graph_launch(&self, exec: sys::CUgraphExec, stream: sys::CUstream) -> Result<()> {
        // SAFETY: the caller's contract.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(exec, stream) })
    }

    unsafe fn graph_destroy(&self, graph: sys::CUgraph) {
        // SAFETY: the caller's contract (destroyed once).
        let _ = unsafe { sys::cuGraphDestroy(graph) };
    }

    unsafe fn graph_exec_destroy(&self, exec: sys::CUgraphExec) {
        // SAFETY: the caller's contract (destroyed once; launches in flight
        // complete first, see GRAPHS_OUTLIVE_LAUNCHES).
        let _ = unsafe { sys::cuGraphExecDestroy(exec) };
    }

    unsafe fn captured_node(&self, stream: sys::CUstream) -> Result<Option<sys::CUgraphNode>> {
        if !per_node_updates() {
            return Ok(None);
        }
        let mut status = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        let (mut nodes, mut count): (*const sys::CUgraphNode, usize) = (std::ptr::null(), 0);
        // SAFETY: valid out-pointers (the optional ones null); the caller's
        // contract: a live stream, capturing.
        check("cuStreamGetCaptureInfo_v3", unsafe {
            sys::cuStreamGetCaptureInfo_v3(
                stream,
                &mut status,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut nodes,
                std::ptr::null_mut(),
                &mut count,
            )
        })?;
        // After an enqueue, the capture's next node depends on that one alone.
        if count != 1 || nodes.is_null() {
            return Ok(None);
        }
        // SAFETY: the driver's array of `count` (1) nodes, valid until the
        // next call on the stream.
        Ok(Some(unsafe { *nodes }))
    }

    unsafe fn exec_set_launch(
        &self,
        exec: sys::CUgraphExec,
        node: sys::CUgraphNode,
        function: sys::CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let ([gx, gy, gz], [bx, by, bz]) = (grid, block);
        let node_params = sys::CUDA_KERNEL_NODE_PARAMS {
            func: function,
            gridDimX: gx,
            gridDimY: gy,
            gridDimZ: gz,
            blockDimX: bx,
            blockDimY: by,
            blockDimZ: bz,
            sharedMemBytes: shared_bytes,
            kernelParams: params,
            extra: std::ptr::null_mut(),
            kern: std::ptr::null_mut(),
            ctx: std::ptr::null_mut(),
        };
        // SAFETY: the caller's contract: a launch node of the graph `exec`
        // came from, a live function, one pointer per parameter (read and
        // copied by the call).
        check("cuGraphExecKernelNodeSetParams_v2", unsafe {
            sys::cuGraphExecKernelNodeSetParams_v2(exec, node, &node_params)
        })
    }

    unsafe fn launch(
        &self,
        function: sys::CUfunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        stream: sys::CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let ([gx, gy, gz], [bx, by, bz]) = (grid, block);
        // SAFETY: the caller's contract (validated shape, one pointer per parameter).
        check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, std::ptr::null_mut())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{DRIVER_SYMBOLS, PER_NODE_SYMBOLS, missing_symbols};
    use crate::backend::gpu::symbols;
    use std::collections::BTreeSet;

    /// The list names every `sys::cu*` call of the backend, and nothing
    /// else but the entry point called through a resolved pointer: a call
    /// left out would panic on a driver that lacks it.
    #[test]
    fn driver_symbols_cover_every_call() {
        let sources =
            [include_str!("mod.rs"), include_str!("runtime.rs"), include_str!("compile.rs"), include_str!("error.rs")];
        let called = symbols::called(&sources, "sys", "cu");
        let listed: BTreeSet<String> = DRIVER_SYMBOLS
            .iter()
            .map(|(n, _)| n.to_string())
            .filter(|n| n != "cuEventElapsedTime_v2")
            .chain(PER_NODE_SYMBOLS.iter().map(|n| n.to_string()))
            .collect();
        assert_eq!(called, listed);
    }

    /// A driver of before CUDA 12.8 lacks `cuEventElapsedTime_v2` and is
    /// enough through its older name; one lacking both, or any other
    /// call, is named.
    #[test]
    fn older_names_stand_in() {
        assert!(missing_symbols(|n| n != "cuEventElapsedTime_v2").is_empty());
        assert_eq!(missing_symbols(|n| !n.starts_with("cuEventElapsedTime")), ["cuEventElapsedTime_v2"]);
        assert_eq!(missing_symbols(|n| n != "cuMemPoolSetAccess"), ["cuMemPoolSetAccess"]);
    }

    /// Against a real driver's exports (`nm -D --defined-only` of a
    /// `libcuda.so`, one name per line; `ci/driver-symbols.sh` makes them
    /// from Debian's `libcuda1` 535), named by
    /// `HETERO_CUDA_DRIVER_EXPORTS`: every call the backend may make is
    /// there or has a fallback that is.
    #[test]
    fn a_real_drivers_exports_cover_every_call() {
        let Some(exports) = symbols::exports("HETERO_CUDA_DRIVER_EXPORTS") else { return };
        let missing = missing_symbols(|n| exports.contains(n));
        assert!(missing.is_empty(), "the driver lacks {missing:?}");
    }
}
