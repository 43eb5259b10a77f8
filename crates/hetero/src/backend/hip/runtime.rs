//! [`Hip`]: the HIP runtime calls the shared GPU device makes, each wrapped
//! once (`cubecl-hip-sys` bindings), for one device selected by
//! `hipSetDevice`. Nothing here assumes an NVIDIA GPU: where a call behaves
//! differently on the two HIP platforms, the comment says so.

use std::ffi::{CStr, c_char, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};

use super::ffi::{self, self as hip};

use super::error::{check, error};
use crate::backend::gpu::{Attribute, Identity, ModuleCache, Runtime, Sealed};
use crate::device::{Backend, StreamFlags};
use crate::error::{ErrorKind, Result};

/// One HIP device, by ordinal.
pub struct Hip {
    ordinal: i32,
}

impl Sealed for Hip {}

impl Hip {
    /// Device `index`; `hipInit` must have succeeded.
    pub(super) fn open(index: usize) -> Result<Self> {
        Ok(Self { ordinal: i32::try_from(index).unwrap_or(i32::MAX) })
    }

    fn raw_attribute(&self, attr: hip::hipDeviceAttribute_t) -> Result<i32> {
        let mut value = 0;
        // SAFETY: value is a valid out-pointer.
        check("hipDeviceGetAttribute", unsafe { hip::hipDeviceGetAttribute(&mut value, attr, self.ordinal) })?;
        Ok(value)
    }
}

/// `Ok(false)` for `hipErrorNotReady`, `Ok(true)` for success.
fn ready(call: &'static str, code: hip::hipError_t) -> Result<bool> {
    match code {
        hip::hipError_t_hipErrorNotReady => Ok(false),
        other => check(call, other).map(|()| true),
    }
}

static MODULES: ModuleCache<Hip> = ModuleCache::new();

/// Set once the runtime refused to set a launch in an instantiated graph:
/// captured launches are no longer named, so graphs are captured again.
static SET_LAUNCH_REFUSED: AtomicBool = AtomicBool::new(false);

impl Runtime for Hip {
    const BACKEND: Backend = Backend::Hip;
    type Stream = hip::hipStream_t;
    type Event = hip::hipEvent_t;
    type Module = hip::hipModule_t;
    type Function = hip::hipFunction_t;
    type Ptr = hip::hipDeviceptr_t;
    type Graph = hip::hipGraph_t;
    type GraphExec = hip::hipGraphExec_t;
    type GraphNode = hip::hipGraphNode_t;
    /// HIP documents neither destroying nor updating a graph in flight.
    const GRAPHS_OUTLIVE_LAUNCHES: bool = false;

    fn module_cache() -> &'static ModuleCache<Self> {
        &MODULES
    }

    fn enter(&self) -> Result<()> {
        // Selecting the device is not free; asking which one is current is
        // cheaper, and it usually is this one already.
        let mut current = -1;
        // SAFETY: current is a valid out-pointer.
        if unsafe { hip::hipGetDevice(&mut current) } == hip::hipError_t_hipSuccess && current == self.ordinal {
            return Ok(());
        }
        // SAFETY: plain call with this device's index.
        check("hipSetDevice", unsafe { hip::hipSetDevice(self.ordinal) })
    }

    fn device_key(&self) -> i64 {
        i64::from(self.ordinal)
    }

    fn attribute(&self, attribute: Attribute) -> Result<i32> {
        use hip::*;
        let axis = |a: u8, x, y, z| match a {
            0 => x,
            1 => y,
            _ => z,
        };
        self.raw_attribute(match attribute {
            Attribute::MaxThreadsPerBlock => hipDeviceAttribute_t_hipDeviceAttributeMaxThreadsPerBlock,
            Attribute::MaxBlockDim(a) => axis(
                a,
                hipDeviceAttribute_t_hipDeviceAttributeMaxBlockDimX,
                hipDeviceAttribute_t_hipDeviceAttributeMaxBlockDimY,
                hipDeviceAttribute_t_hipDeviceAttributeMaxBlockDimZ,
            ),
            Attribute::MaxGridDim(a) => axis(
                a,
                hipDeviceAttribute_t_hipDeviceAttributeMaxGridDimX,
                hipDeviceAttribute_t_hipDeviceAttributeMaxGridDimY,
                hipDeviceAttribute_t_hipDeviceAttributeMaxGridDimZ,
            ),
            Attribute::SharedMemoryPerBlock => hipDeviceAttribute_t_hipDeviceAttributeMaxSharedMemoryPerBlock,
            Attribute::MultiprocessorCount => hipDeviceAttribute_t_hipDeviceAttributeMultiprocessorCount,
            // 64 on most AMD GPUs, 32 on NVIDIA and RDNA: read, never assumed.
            Attribute::WarpSize => hipDeviceAttribute_t_hipDeviceAttributeWarpSize,
        })
    }

    fn identity(&self) -> Result<Identity> {
        let mut name = [0 as c_char; 256];
        // SAFETY: name holds 256 bytes, as passed.
        check("hipDeviceGetName", unsafe { hip::hipDeviceGetName(name.as_mut_ptr(), 256, self.ordinal) })?;
        // Read to the buffer's end at most: a library may leave no NUL.
        let name = crate::backend::gpu::loader::text_of(&name);
        let mut total: usize = 0;
        // SAFETY: total is a valid out-pointer.
        check("hipDeviceTotalMem", unsafe { hip::hipDeviceTotalMem(&mut total, self.ordinal) })?;
        let mut version = 0;
        // SAFETY: version is a valid out-pointer.
        check("hipDriverGetVersion", unsafe { hip::hipDriverGetVersion(&mut version) })?;
        let major = self.raw_attribute(hip::hipDeviceAttribute_t_hipDeviceAttributeComputeCapabilityMajor)?;
        let minor = self.raw_attribute(hip::hipDeviceAttribute_t_hipDeviceAttributeComputeCapabilityMinor)?;
        let mut bus = [0 as c_char; 64];
        // SAFETY: bus holds 64 bytes, as passed.
        let pci_bus_id =
            check("hipDeviceGetPCIBusId", unsafe { hip::hipDeviceGetPCIBusId(bus.as_mut_ptr(), 64, self.ordinal) })
                .ok()
                .map(|()| crate::backend::gpu::loader::text_of(&bus).to_lowercase());
        Ok(Identity {
            pci_bus_id,
            // hipDeviceGetUuid is not read: the HIP-on-NVIDIA harness's
            // headers (HIP 5.2) do not declare it for NVIDIA.
            uuid: None,
            arch: ffi::gcn_arch_name(self.ordinal),
            name,
            vendor: "HIP".to_string(),
            platform: format!("HIP driver version {version}, compute capability {major}.{minor}"),
            total_memory: total as u64,
        })
    }

    fn pool_stream(&self) -> Result<Option<hip::hipStream_t>> {
        // Whether the device has memory pools shows at the first
        // hipMallocAsync (mem_alloc falls back per allocation).
        // SAFETY: the device is current (the shared device entered it).
        unsafe { self.stream_create(StreamFlags { non_blocking: true, ..StreamFlags::default() }) }.map(Some)
    }

    unsafe fn stream_create(&self, flags: StreamFlags) -> Result<hip::hipStream_t> {
        let mut stream: hip::hipStream_t = std::ptr::null_mut();
        let kind = if flags.non_blocking { hip::hipStreamNonBlocking } else { 0 };
        // SAFETY: stream is a valid out-pointer; HIP clamps the priority to its range.
        check("hipStreamCreateWithPriority", unsafe {
            hip::hipStreamCreateWithPriority(&mut stream, kind, flags.priority)
        })?;
        Ok(stream)
    }

    unsafe fn stream_destroy(&self, stream: hip::hipStream_t) {
        // HIP may wait for a busy stream here; the shared device only
        // destroys idle ones.
        // SAFETY: the caller's contract (a live, idle stream, destroyed once).
        let _ = unsafe { hip::hipStreamDestroy(stream) };
    }

    unsafe fn stream_synchronize(&self, stream: hip::hipStream_t) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(stream) })
    }

    unsafe fn stream_query(&self, stream: hip::hipStream_t) -> Result<bool> {
        // SAFETY: the caller's contract.
        ready("hipStreamQuery", unsafe { hip::hipStreamQuery(stream) })
    }

    unsafe fn stream_wait_event(&self, stream: hip::hipStream_t, event: hip::hipEvent_t) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipStreamWaitEvent", unsafe { hip::hipStreamWaitEvent(stream, event, 0) })
    }

    unsafe fn stream_wait_word(&self, stream: hip::hipStream_t, addr: hip::hipDeviceptr_t, value: u32) -> Result<()> {
        // SAFETY: the caller's contract; addr is a mapped word that outlives the wait.
        check("hipStreamWaitValue32", unsafe {
            hip::hipStreamWaitValue32(stream, addr, value, hip::hipStreamWaitValueGte, u32::MAX)
        })
    }

    unsafe fn event_create(&self, timing: bool) -> Result<hip::hipEvent_t> {
        let mut event: hip::hipEvent_t = std::ptr::null_mut();
        // No hipEventBlockingSync, as on CUDA (see its event_create): host
        // waits follow the device's scheduling mode.
        let flags = if timing { 0 } else { hip::hipEventDisableTiming };
        // SAFETY: event is a valid out-pointer.
        check("hipEventCreateWithFlags", unsafe { hip::hipEventCreateWithFlags(&mut event, flags) })?;
        Ok(event)
    }

    unsafe fn event_destroy(&self, event: hip::hipEvent_t) -> Result<()> {
        // SAFETY: the caller's contract (destroyed once).
        check("hipEventDestroy", unsafe { hip::hipEventDestroy(event) })
    }

    unsafe fn event_record(&self, event: hip::hipEvent_t, stream: hip::hipStream_t) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipEventRecord", unsafe { hip::hipEventRecord(event, stream) })
    }

    unsafe fn event_query(&self, event: hip::hipEvent_t) -> Result<bool> {
        // SAFETY: the caller's contract.
        ready("hipEventQuery", unsafe { hip::hipEventQuery(event) })
    }

    unsafe fn event_synchronize(&self, event: hip::hipEvent_t) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipEventSynchronize", unsafe { hip::hipEventSynchronize(event) })
    }

    unsafe fn event_elapsed(&self, start: hip::hipEvent_t, end: hip::hipEvent_t) -> Result<f32> {
        let mut ms = 0f32;
        // SAFETY: the caller's contract; ms is a valid out-pointer.
        check("hipEventElapsedTime", unsafe { hip::hipEventElapsedTime(&mut ms, start, end) })?;
        Ok(ms)
    }

    unsafe fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<NonNull<u8>> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        let flags = hip::hipHostMallocPortable | if mapped { hip::hipHostMallocMapped } else { 0 };
        // SAFETY: ptr is a valid out-pointer; the caller passes a non-zero size.
        check("hipHostMalloc", unsafe { hip::hipHostMalloc(&mut ptr, bytes, flags) })?;
        NonNull::new(ptr.cast::<u8>())
            .ok_or_else(|| error("hipHostMalloc", ErrorKind::OutOfMemory, "HIP returned a null pointer"))
    }

    unsafe fn host_device_ptr(&self, host: NonNull<u8>) -> Result<hip::hipDeviceptr_t> {
        let mut device: *mut c_void = std::ptr::null_mut();
        // SAFETY: host was allocated mapped (the caller's contract). On AMD
        // the device address usually equals the host one; on NVIDIA it need not.
        check("hipHostGetDevicePointer", unsafe {
            hip::hipHostGetDevicePointer(&mut device, host.as_ptr().cast(), 0)
        })?;
        Ok(device)
    }

    unsafe fn host_free(&self, host: NonNull<u8>) -> Result<()> {
        // hipHostFree synchronises the device first, on both platforms.
        // SAFETY: allocated by hipHostMalloc and freed once (the caller's contract).
        check("hipHostFree", unsafe { hip::hipHostFree(host.as_ptr().cast()) })
    }

    unsafe fn mem_alloc(&self, bytes: usize, pool: Option<hip::hipStream_t>) -> Result<(hip::hipDeviceptr_t, bool)> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        if let Some(stream) = pool {
            // SAFETY: ptr is a valid out-pointer; the stream is live.
            let code = unsafe { hip::hipMallocAsync(&mut ptr, bytes, stream) };
            if code != hip::hipError_t_hipErrorNotSupported {
                check("hipMallocAsync", code)?;
                // SAFETY: the allocator stream only holds allocations and frees.
                check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(stream) })?;
                return Ok((ptr, true));
            }
        }
        // SAFETY: ptr is a valid out-pointer.
        check("hipMalloc", unsafe { hip::hipMalloc(&mut ptr, bytes) })?;
        Ok((ptr, false))
    }

    unsafe fn mem_free(&self, ptr: hip::hipDeviceptr_t, pool: Option<hip::hipStream_t>) -> Result<()> {
        match pool {
            // SAFETY: allocated by hipMallocAsync and freed once (the caller's contract).
            Some(stream) => check("hipFreeAsync", unsafe { hip::hipFreeAsync(ptr, stream) }),
            // SAFETY: allocated by hipMalloc and freed once.
            None => check("hipFree", unsafe { hip::hipFree(ptr) }),
        }
    }

    fn ptr_add(ptr: hip::hipDeviceptr_t, offset: usize) -> hip::hipDeviceptr_t {
        ptr.cast::<u8>().wrapping_add(offset).cast()
    }

    fn ptr_to_raw(ptr: hip::hipDeviceptr_t) -> u64 {
        ptr as usize as u64
    }

    fn ptr_from_raw(raw: u64) -> hip::hipDeviceptr_t {
        raw as usize as hip::hipDeviceptr_t
    }

    fn stream_to_raw(stream: hip::hipStream_t) -> *mut c_void {
        stream.cast()
    }

    fn stream_from_raw(raw: *mut c_void) -> hip::hipStream_t {
        raw.cast()
    }

    unsafe fn copy_h2d(
        &self,
        dst: hip::hipDeviceptr_t,
        src: *const u8,
        len: usize,
        stream: hip::hipStream_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract (checked range; src valid until completion).
        check("hipMemcpyHtoDAsync", unsafe { hip::hipMemcpyHtoDAsync(dst, src.cast_mut().cast(), len, stream) })
    }

    unsafe fn copy_d2h(
        &self,
        dst: *mut u8,
        src: hip::hipDeviceptr_t,
        len: usize,
        stream: hip::hipStream_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract (checked range; dst valid until completion).
        check("hipMemcpyDtoHAsync", unsafe { hip::hipMemcpyDtoHAsync(dst.cast(), src, len, stream) })
    }

    unsafe fn copy_d2d(
        &self,
        dst: hip::hipDeviceptr_t,
        src: hip::hipDeviceptr_t,
        len: usize,
        stream: hip::hipStream_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract (checked, non-overlapping ranges).
        check("hipMemcpyDtoDAsync", unsafe { hip::hipMemcpyDtoDAsync(dst, src, len, stream) })
    }

    fn can_access_peer(&self, peer: &Self) -> Result<bool> {
        if self.ordinal == peer.ordinal {
            return Ok(false);
        }
        let mut can = 0;
        // SAFETY: can is a valid out-pointer; both are device indices.
        check("hipDeviceCanAccessPeer", unsafe { hip::hipDeviceCanAccessPeer(&mut can, self.ordinal, peer.ordinal) })?;
        Ok(can != 0)
    }

    unsafe fn enable_peer_access(&self, peer: &Self) -> Result<()> {
        // SAFETY: this device is current (the caller's contract).
        match unsafe { hip::hipDeviceEnablePeerAccess(peer.ordinal, 0) } {
            hip::hipError_t_hipErrorPeerAccessAlreadyEnabled => {}
            other => check("hipDeviceEnablePeerAccess", other)?,
        }
        // Peer access does not cover stream-ordered allocations: the peer's
        // memory pool grants this device access on its own.
        let mut pool: hip::hipMemPool_t = std::ptr::null_mut();
        // SAFETY: pool is a valid out-pointer.
        match unsafe { hip::hipDeviceGetMemPool(&mut pool, peer.ordinal) } {
            hip::hipError_t_hipErrorNotSupported => return Ok(()),
            other => check("hipDeviceGetMemPool", other)?,
        }
        let access = hip::hipMemAccessDesc {
            location: hip::hipMemLocation { type_: hip::hipMemLocationType_hipMemLocationTypeDevice, id: self.ordinal },
            flags: hip::hipMemAccessFlags_hipMemAccessFlagsProtReadWrite,
        };
        // SAFETY: pool is the peer's live pool; access is one valid descriptor.
        check("hipMemPoolSetAccess", unsafe { hip::hipMemPoolSetAccess(pool, &access, 1) })
    }

    unsafe fn copy_peer(
        &self,
        dst: hip::hipDeviceptr_t,
        to: &Self,
        src: hip::hipDeviceptr_t,
        from: &Self,
        len: usize,
        stream: hip::hipStream_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract: checked ranges of live memory of
        // each device, a stream of this device.
        check("hipMemcpyPeerAsync", unsafe {
            hip::hipMemcpyPeerAsync(dst, to.ordinal, src.cast_const(), from.ordinal, len, stream)
        })
    }

    unsafe fn fill_u32(
        &self,
        dst: hip::hipDeviceptr_t,
        value: u32,
        count: usize,
        stream: hip::hipStream_t,
    ) -> Result<()> {
        // SAFETY: the caller's contract (checked, 4-byte aligned range).
        check("hipMemsetD32Async", unsafe { hip::hipMemsetD32Async(dst, value as i32, count, stream) })
    }

    fn compile(&self, source: &CStr, options: &crate::device::BuildOptions) -> Result<Vec<c_char>> {
        // On AMD the compiler is clang; on NVIDIA hiprtc hands the flags to NVRTC.
        let amd = ffi::gcn_arch_name(self.ordinal).is_some();
        let flags = super::compile::strict_flags(options.deterministic, amd)?;
        let flags: Vec<&CStr> = flags.iter().map(std::ffi::CString::as_c_str).collect();
        super::compile::compile(source, &flags)
    }

    unsafe fn module_load(&self, image: &[c_char]) -> Result<hip::hipModule_t> {
        let mut module: hip::hipModule_t = std::ptr::null_mut();
        // SAFETY: image is a complete code object (AMD) or NUL-terminated PTX
        // (NVIDIA) from hiprtc (the caller's contract).
        check("hipModuleLoadData", unsafe { hip::hipModuleLoadData(&mut module, image.as_ptr().cast()) })?;
        Ok(module)
    }

    unsafe fn module_function(&self, module: hip::hipModule_t, name: &CStr) -> Result<hip::hipFunction_t> {
        let mut function: hip::hipFunction_t = std::ptr::null_mut();
        // SAFETY: the module is loaded; function is a valid out-pointer.
        check("hipModuleGetFunction", unsafe { hip::hipModuleGetFunction(&mut function, module, name.as_ptr()) })?;
        Ok(function)
    }

    unsafe fn function_limits(&self, function: hip::hipFunction_t) -> Result<(u32, usize)> {
        let attribute = |attr| -> Result<i32> {
            let mut value = 0;
            // SAFETY: the function is live; value is a valid out-pointer.
            check("hipFuncGetAttribute", unsafe { hip::hipFuncGetAttribute(&mut value, attr, function) })?;
            Ok(value)
        };
        Ok((
            u32::try_from(attribute(hip::hipFunction_attribute_HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?).unwrap_or(0),
            usize::try_from(attribute(hip::hipFunction_attribute_HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?).unwrap_or(0),
        ))
    }

    unsafe fn capture_begin(&self, stream: hip::hipStream_t) -> Result<()> {
        let mode = hip::hipStreamCaptureMode_hipStreamCaptureModeRelaxed;
        // SAFETY: the caller's contract (a live stream of the current device).
        check("hipStreamBeginCapture", unsafe { hip::hipStreamBeginCapture(stream, mode) })
    }

    unsafe fn capture_end(&self, stream: hip::hipStream_t) -> Result<hip::hipGraph_t> {
        let mut graph: hip::hipGraph_t = std::ptr::null_mut();
        // SAFETY: graph is a valid out-pointer; the caller's contract.
        check("hipStreamEndCapture", unsafe { hip::hipStreamEndCapture(stream, &mut graph) })?;
        Ok(graph)
    }

    unsafe fn graph_instantiate(&self, graph: hip::hipGraph_t) -> Result<hip::hipGraphExec_t> {
        let mut exec: hip::hipGraphExec_t = std::ptr::null_mut();
        // SAFETY: exec is a valid out-pointer; the caller's contract.
        check("hipGraphInstantiateWithFlags", unsafe { hip::hipGraphInstantiateWithFlags(&mut exec, graph, 0) })?;
        Ok(exec)
    }

    unsafe fn graph_exec_update(&self, exec: hip::hipGraphExec_t, graph: hip::hipGraph_t) -> Result<bool> {
        let mut node: hip::hipGraphNode_t = std::ptr::null_mut();
        let mut result: hip::hipGraphExecUpdateResult = 0;
        // SAFETY: node and result are valid out-pointers; the caller's contract.
        match unsafe { hip::hipGraphExecUpdate(exec, graph, &mut node, &mut result) } {
            hip::hipError_t_hipErrorGraphExecUpdateFailure => Ok(false),
            other => check("hipGraphExecUpdate", other).map(|()| true),
        }
    }

    unsafe fn graph_launch(&self, exec: hip::hipGraphExec_t, stream: hip::hipStream_t) -> Result<()> {
        // SAFETY: the caller's contract.
        check("hipGraphLaunch", unsafe { hip::hipGraphLaunch(exec, stream) })
    }

    unsafe fn graph_destroy(&self, graph: hip::hipGraph_t) {
        // SAFETY: the caller's contract (destroyed once).
        let _ = unsafe { hip::hipGraphDestroy(graph) };
    }

    unsafe fn graph_exec_destroy(&self, exec: hip::hipGraphExec_t) {
        // SAFETY: the caller's contract (destroyed once, no launch in flight).
        let _ = unsafe { hip::hipGraphExecDestroy(exec) };
    }

    unsafe fn captured_node(&self, stream: hip::hipStream_t) -> Result<Option<hip::hipGraphNode_t>> {
        if SET_LAUNCH_REFUSED.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let mut status = hip::hipStreamCaptureStatus_hipStreamCaptureStatusNone;
        let (mut nodes, mut count): (*const hip::hipGraphNode_t, usize) = (std::ptr::null(), 0);
        // SAFETY: valid out-pointers (the optional ones null); the caller's
        // contract: a live stream, capturing.
        check("hipStreamGetCaptureInfo_v2", unsafe {
            hip::hipStreamGetCaptureInfo_v2(
                stream,
                &mut status,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                &mut nodes,
                &mut count,
            )
        })?;
        // After an enqueue, the capture's next node depends on that one alone.
        if count != 1 || nodes.is_null() {
            return Ok(None);
        }
        // SAFETY: the runtime's array of `count` (1) nodes, valid until the
        // next call on the stream.
        Ok(Some(unsafe { *nodes }))
    }

    unsafe fn exec_set_launch(
        &self,
        exec: hip::hipGraphExec_t,
        node: hip::hipGraphNode_t,
        function: hip::hipFunction_t,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let dim = |[x, y, z]: [u32; 3]| hip::dim3 { x, y, z };
        let node_params = hip::hipKernelNodeParams {
            blockDim: dim(block),
            extra: std::ptr::null_mut(),
            // A module's function, as HIP's graphs take it for launches
            // captured from hipModuleLaunchKernel.
            func: function.cast(),
            gridDim: dim(grid),
            kernelParams: params,
            sharedMemBytes: shared_bytes,
        };
        // SAFETY: the caller's contract: a launch node of the graph `exec`
        // came from, no launch of `exec` queued, a live function, one
        // pointer per parameter (read and copied by the call).
        let result = check("hipGraphExecKernelNodeSetParams", unsafe {
            hip::hipGraphExecKernelNodeSetParams(exec, node, &node_params)
        });
        if result.is_err() {
            // Some ROCm releases take only a program's own (not a
            // module's) functions here: graphs are captured again from
            // now on, in this process.
            SET_LAUNCH_REFUSED.store(true, Ordering::Relaxed);
        }
        result
    }

    unsafe fn launch(
        &self,
        function: hip::hipFunction_t,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        stream: hip::hipStream_t,
        params: *mut *mut c_void,
    ) -> Result<()> {
        let ([gx, gy, gz], [bx, by, bz]) = (grid, block);
        // SAFETY: the caller's contract (validated shape, one pointer per parameter).
        check("hipModuleLaunchKernel", unsafe {
            hip::hipModuleLaunchKernel(
                function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared_bytes,
                stream,
                params,
                std::ptr::null_mut(),
            )
        })
    }
}

#[cfg(test)]
mod symbol_tests {
    use super::super::ffi::SYMBOLS as RUNTIME_SYMBOLS;
    use crate::backend::gpu::symbols;
    use std::collections::BTreeSet;

    /// The list names every `hip::` call of the backend and nothing else.
    #[test]
    fn runtime_symbols_cover_every_call() {
        let sources =
            [include_str!("mod.rs"), include_str!("runtime.rs"), include_str!("compile.rs"), include_str!("error.rs")];
        let mut called = symbols::called(&sources, "hip", "hip");
        called.extend(symbols::called(&sources, "hip", "hiprtc"));
        let listed: BTreeSet<String> = RUNTIME_SYMBOLS.iter().map(|n| n.to_string()).collect();
        assert_eq!(called, listed);
    }

    /// Against a real runtime's exports (`nm -D --defined-only` of a
    /// `libamdhip64.so`, one name per line, versions stripped;
    /// `ci/driver-symbols.sh` makes them from Debian's ROCm 5.2), named by
    /// `HETERO_HIP_RUNTIME_EXPORTS`.
    #[test]
    fn a_real_runtimes_exports_cover_every_call() {
        let Some(exports) = symbols::exports("HETERO_HIP_RUNTIME_EXPORTS") else { return };
        let missing: Vec<&str> = RUNTIME_SYMBOLS.iter().copied().filter(|n| !exports.contains(*n)).collect();
        assert!(missing.is_empty(), "the runtime lacks {missing:?}");
    }
}
