//! [`CudaDevice`]: one GPU through its primary context.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::sys;

use super::error::{check, cu_error, error, is_sticky};
use super::event::CuEvent;
use super::memory::{CuMemory, Place};
use super::module::{self, CuKernel, CuModule};
use super::stream::CuStream;
use crate::backend::handles::Handles;
use crate::device::{
    AllocId, Backend, Device, DeviceInfo, DeviceRange, EventId, KernelArg, KernelId, LaunchConfig, ModuleId,
    StreamFlags, StreamId, check_copy_ranges, check_fill_range, check_kernel_limits, check_range,
};
use crate::error::{Error, ErrorKind, Result};

/// Built modules by device and source, for the whole process.
type ModuleCache = HashMap<(sys::CUdevice, String), Arc<CuModule>>;

/// A CUDA device. Every call makes its primary context current on the
/// calling thread first. After a sticky error (a faulting kernel) every
/// call returns that error: the context cannot be trusted any more.
pub struct CudaDevice {
    info: DeviceInfo,
    device: sys::CUdevice,
    context: sys::CUcontext,
    /// `sm_XY` of the device, for NVRTC.
    arch: String,
    /// The stream of the stream-ordered allocator, where the device has memory pools.
    pool_stream: Option<CuStream>,
    poisoned: Mutex<Option<Error>>,
    /// Gate words of destroyed user events, freed when the device is dropped.
    retired_gates: Mutex<Vec<NonNull<u32>>>,
    /// Destroyed streams whose work may still run: really destroyed once
    /// idle (checked at every `destroy_stream`), or at the device's drop
    /// after its gates are open. Destroying a busy stream could block.
    retired_streams: Mutex<Vec<Arc<CuStream>>>,
    streams: Handles<CuStream>,
    events: Handles<CuEvent>,
    allocs: Handles<CuMemory>,
    modules: Handles<CuModule>,
    kernels: Handles<CuKernel>,
}

// SAFETY: the raw handles are process-wide driver objects; all mutable
// state is behind mutexes.
unsafe impl Send for CudaDevice {}
// SAFETY: as above.
unsafe impl Sync for CudaDevice {}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

fn attribute(device: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32> {
    let mut value = 0;
    // SAFETY: device is a valid ordinal handle; value is a valid out-pointer.
    check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut value, attr, device) })?;
    Ok(value)
}

fn positive(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

impl CudaDevice {
    /// Opens device `ordinal`; `cuInit` must have succeeded.
    pub(super) fn new(ordinal: usize) -> Result<Self> {
        let mut device: sys::CUdevice = 0;
        let index = i32::try_from(ordinal).unwrap_or(i32::MAX);
        // SAFETY: device is a valid out-pointer.
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut device, index) })?;
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: name holds 256 bytes, as passed.
        check("cuDeviceGetName", unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, device) })?;
        // SAFETY: the driver NUL-terminates the name within the buffer.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        let mut total: usize = 0;
        // SAFETY: total is a valid out-pointer.
        check("cuDeviceTotalMem", unsafe { sys::cuDeviceTotalMem_v2(&mut total, device) })?;
        let mut version = 0;
        // SAFETY: version is a valid out-pointer.
        check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut version) })?;
        use sys::CUdevice_attribute::*;
        let major = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let minor = attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
        let info = DeviceInfo {
            backend: Backend::Cuda,
            ordinal,
            name,
            vendor: "NVIDIA".to_string(),
            platform: format!(
                "CUDA driver {}.{}, compute capability {major}.{minor}",
                version / 1000,
                version % 1000 / 10
            ),
            total_memory: total as u64,
            max_threads_per_block: positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?),
            max_block_dims: [
                positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?),
                positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?),
                positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?),
            ],
            max_grid_dims: [
                positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?),
                positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?),
                positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?),
            ],
            shared_memory_per_block: positive(attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?)
                as usize,
            compute_units: positive(attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?),
            warp_size: positive(attribute(device, CU_DEVICE_ATTRIBUTE_WARP_SIZE)?),
        };
        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: context is a valid out-pointer; released in Drop.
        check("cuDevicePrimaryCtxRetain", unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, device) })?;
        // SAFETY: the primary context was just retained.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(context) })?;
        let pool_stream = if attribute(device, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)? != 0 {
            Some(CuStream::new(StreamFlags { non_blocking: true, priority: 0 }, context)?)
        } else {
            None
        };
        Ok(Self {
            info,
            device,
            context,
            arch: format!("sm_{major}{minor}"),
            pool_stream,
            poisoned: Mutex::new(None),
            retired_gates: Mutex::new(Vec::new()),
            retired_streams: Mutex::new(Vec::new()),
            streams: Handles::new(Backend::Cuda, "stream"),
            events: Handles::new(Backend::Cuda, "event"),
            allocs: Handles::new(Backend::Cuda, "allocation"),
            modules: Handles::new(Backend::Cuda, "module"),
            kernels: Handles::new(Backend::Cuda, "kernel"),
        })
    }

    /// Refuses work on a poisoned device and makes the context current.
    fn enter(&self) -> Result<()> {
        if let Some(e) = self.poisoned.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            return Err(e.clone());
        }
        // SAFETY: the primary context is retained for the device's life.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.context) })
    }

    /// Checks a driver result, poisoning the device on a sticky error.
    fn check(&self, call: &'static str, code: sys::CUresult) -> Result<()> {
        if code == sys::CUresult::CUDA_SUCCESS {
            return Ok(());
        }
        let err = cu_error(call, code);
        if is_sticky(code) {
            let mut poisoned = self.poisoned.lock().unwrap_or_else(PoisonError::into_inner);
            let mut sticky = err.clone();
            sticky.message = format!("{} (the device is unusable from now on)", sticky.message);
            poisoned.get_or_insert(sticky);
        }
        Err(err)
    }

    /// The stream of `id`, kept alive by the returned `Arc` for as long
    /// as the caller holds it (a concurrent `destroy_stream` cannot destroy
    /// a stream in use).
    fn stream(&self, call: &'static str, id: StreamId) -> Result<Arc<CuStream>> {
        self.streams.get(call, id.0)
    }

    /// The device address of a checked range.
    fn address(&self, call: &'static str, range: DeviceRange) -> Result<sys::CUdeviceptr> {
        let mem = self.allocs.get(call, range.alloc.0)?;
        check_range(Backend::Cuda, call, range.offset, range.len, mem.size)?;
        mem.device_ptr(call, range.offset)
    }

    /// Waits on a timed event or a query: `Ok(true)` done, `Ok(false)` not ready.
    fn ready(&self, call: &'static str, code: sys::CUresult) -> Result<bool> {
        match code {
            sys::CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => self.check(call, other).map(|()| true),
        }
    }
}

impl Drop for CudaDevice {
    fn drop(&mut self) {
        // Open every gate first, also on a poisoned device, so that no
        // stream waits forever for a user event nobody will complete.
        let events = self.events.take_all();
        for event in &events {
            event.open();
        }
        let retired = std::mem::take(self.retired_streams.get_mut().unwrap_or_else(PoisonError::into_inner));
        let streams: Vec<_> = self.streams.take_all().into_iter().chain(retired).collect();
        if self.enter().is_ok() {
            // Wait for this device's own streams only: with its gates open
            // they finish, whatever other devices sharing the GPU do.
            for stream in &streams {
                // SAFETY: live streams of this device.
                let _ = unsafe { sys::cuStreamSynchronize(stream.0) };
            }
            let pool = self.pool_stream.as_ref().map(|s| s.0);
            for mem in self.allocs.take_all() {
                // Allocations the typed layer retired while still in use.
                let _ = mem.free(pool);
            }
            for event in events {
                if let Ok(Some(gate)) = event.destroy() {
                    self.retired_gates.get_mut().unwrap_or_else(PoisonError::into_inner).push(gate);
                }
            }
            for gate in self.retired_gates.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
                // SAFETY: allocated by cuMemHostAlloc, open, and no longer read.
                let _ = unsafe { sys::cuMemFreeHost(gate.as_ptr().cast()) };
            }
        }
        // Streams go while the context is still retained.
        drop(streams);
        drop(self.pool_stream.take());
        // SAFETY: retained in new, released once.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

impl Device for CudaDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId> {
        self.enter()?;
        Ok(StreamId(self.streams.insert(CuStream::new(flags, self.context)?)))
    }

    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        let stream = self.streams.remove("destroy_stream", stream.0)?;
        let mut retired = self.retired_streams.lock().unwrap_or_else(PoisonError::into_inner);
        retired.push(stream);
        if self.enter().is_ok() {
            // SAFETY: live streams of this device (a query never blocks).
            retired.retain(|s| unsafe { sys::cuStreamQuery(s.0) == sys::CUresult::CUDA_ERROR_NOT_READY });
        }
        Ok(())
    }

    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        self.enter()?;
        let held = self.stream("synchronize_stream", stream)?;
        let s = held.0;
        // SAFETY: s is a live stream of this context.
        self.check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(s) })
    }

    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        self.enter()?;
        let held = self.stream("query_stream", stream)?;
        let s = held.0;
        // SAFETY: s is a live stream of this context.
        self.ready("cuStreamQuery", unsafe { sys::cuStreamQuery(s) })
    }

    fn create_event(&self) -> Result<EventId> {
        self.enter()?;
        Ok(EventId(self.events.insert(CuEvent::timed()?)))
    }

    fn create_user_event(&self) -> Result<EventId> {
        self.enter()?;
        Ok(EventId(self.events.insert(CuEvent::user()?)))
    }

    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        match &*self.events.get("complete_user_event", event.0)? {
            e @ CuEvent::User { .. } => {
                e.open();
                Ok(())
            }
            CuEvent::Timed { .. } => {
                Err(error("complete_user_event", ErrorKind::InvalidHandle, "event is not a user event"))
            }
        }
    }

    unsafe fn destroy_event(&self, event: EventId) -> Result<()> {
        let slot = self.events.remove("destroy_event", event.0)?;
        // A user event is opened even on a poisoned device, so no stream waits forever.
        slot.open();
        self.enter()?;
        if let Some(gate) = slot.destroy()? {
            self.retired_gates.lock().unwrap_or_else(PoisonError::into_inner).push(gate);
        }
        Ok(())
    }

    unsafe fn record_event(&self, event: EventId, stream: StreamId) -> Result<()> {
        self.enter()?;
        let held = self.stream("record_event", stream)?;
        let s = held.0;
        match &*self.events.get("record_event", event.0)? {
            CuEvent::Timed { event, recorded } => {
                // SAFETY: both handles are live objects of this context.
                self.check("cuEventRecord", unsafe { sys::cuEventRecord(*event, s) })?;
                recorded.store(true, std::sync::atomic::Ordering::Release);
                Ok(())
            }
            CuEvent::User { .. } => {
                Err(error("record_event", ErrorKind::InvalidHandle, "a user event cannot be recorded"))
            }
        }
    }

    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        self.enter()?;
        match &*self.events.get("query_event", event.0)? {
            // SAFETY: a live event of this context.
            CuEvent::Timed { event, .. } => self.ready("cuEventQuery", unsafe { sys::cuEventQuery(*event) }),
            user => Ok(user.is_open()),
        }
    }

    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        self.enter()?;
        match &*self.events.get("synchronize_event", event.0)? {
            CuEvent::Timed { event, .. } => {
                // SAFETY: a live event of this context.
                let code = unsafe { sys::cuEventSynchronize(*event) };
                self.check("cuEventSynchronize", code)
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
        let handle = |id: EventId| -> Result<sys::CUevent> {
            match &*self.events.get("elapsed_ms", id.0)? {
                CuEvent::Timed { event, recorded } if recorded.load(std::sync::atomic::Ordering::Acquire) => Ok(*event),
                CuEvent::Timed { .. } => Err(error("elapsed_ms", ErrorKind::NotReady, "event was never recorded")),
                CuEvent::User { .. } => Err(error("elapsed_ms", ErrorKind::InvalidHandle, "user events carry no time")),
            }
        };
        let (a, b) = (handle(start)?, handle(end)?);
        let mut ms = 0f32;
        // SAFETY: both events are live, recorded events of this context.
        self.check("cuEventElapsedTime", unsafe { sys::cuEventElapsedTime_v2(&mut ms, a, b) })?;
        Ok(f64::from(ms))
    }

    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        self.enter()?;
        let held = self.stream("stream_wait_event", stream)?;
        let s = held.0;
        match &*self.events.get("stream_wait_event", event.0)? {
            CuEvent::Timed { event, .. } => {
                // SAFETY: both handles are live objects of this context.
                let code = unsafe { sys::cuStreamWaitEvent(s, *event, 0) };
                self.check("cuStreamWaitEvent", code)
            }
            // SAFETY: the gate word is mapped page-locked memory that lives
            // until the device is dropped (destroyed gates are retired, not freed).
            CuEvent::User { device, .. } => self.check("cuStreamWaitValue32", unsafe {
                sys::cuStreamWaitValue32_v2(
                    s,
                    *device,
                    1,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32,
                )
            }),
        }
    }

    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        self.enter()?;
        Ok(AllocId(self.allocs.insert(CuMemory::device(bytes, self.pool_stream.as_ref().map(|s| s.0))?)))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        self.enter()?;
        Ok(AllocId(self.allocs.insert(CuMemory::pinned(bytes)?)))
    }

    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        match self.allocs.get("pinned_ptr", alloc.0)?.place {
            Place::Pinned(ptr) => Ok(ptr),
            Place::Device(_) => Err(error(
                "pinned_ptr",
                ErrorKind::InvalidHandle,
                "allocation is device memory, not pinned host memory",
            )),
        }
    }

    unsafe fn alloc_size(&self, alloc: AllocId) -> Result<usize> {
        Ok(self.allocs.get("alloc_size", alloc.0)?.size)
    }

    unsafe fn free(&self, alloc: AllocId) -> Result<()> {
        let mem = self.allocs.remove("free", alloc.0)?;
        self.enter()?;
        mem.free(self.pool_stream.as_ref().map(|s| s.0))
    }

    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.enter()?;
        let (to, held) = (self.address("copy_h2d", dst)?, self.stream("copy_h2d", stream)?);
        let s = held.0;
        if dst.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is checked; the caller keeps src valid until completion.
        self.check("cuMemcpyHtoDAsync", unsafe { sys::cuMemcpyHtoDAsync_v2(to, src.cast(), dst.len, s) })
    }

    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        self.enter()?;
        let (from, held) = (self.address("copy_d2h", src)?, self.stream("copy_d2h", stream)?);
        let s = held.0;
        if src.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is checked; the caller keeps dst valid until completion.
        self.check("cuMemcpyDtoHAsync", unsafe { sys::cuMemcpyDtoHAsync_v2(dst.cast(), from, src.len, s) })
    }

    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.enter()?;
        check_copy_ranges(Backend::Cuda, src, dst)?;
        let (from, to) = (self.address("copy_d2d", src)?, self.address("copy_d2d", dst)?);
        let held = self.stream("copy_d2d", stream)?;
        let s = held.0;
        if src.len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges are checked device memory of this context.
        self.check("cuMemcpyDtoDAsync", unsafe { sys::cuMemcpyDtoDAsync_v2(to, from, src.len, s) })
    }

    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        self.enter()?;
        check_fill_range(Backend::Cuda, dst)?;
        let (to, held) = (self.address("fill_u32", dst)?, self.stream("fill_u32", stream)?);
        let s = held.0;
        if dst.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is checked, 4-byte aligned device memory.
        self.check("cuMemsetD32Async", unsafe { sys::cuMemsetD32Async(to, pattern, dst.len / 4, s) })
    }

    fn build_module(&self, source: &str) -> Result<ModuleId> {
        self.enter()?;
        // Modules live in the primary context, shared by every CudaDevice of
        // this ordinal, so one cache serves the whole process; it keeps the
        // context retained so cached modules stay valid.
        static CACHE: Mutex<Option<ModuleCache>> = Mutex::new(None);
        let mut guard = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        let cache = guard.get_or_insert_with(HashMap::new);
        let key = (self.device, source.to_string());
        let module = match cache.get(&key) {
            Some(module) => Arc::clone(module),
            None => {
                let module = Arc::new(module::load(&module::compile(source, &self.arch)?)?);
                if !cache.keys().any(|(d, _)| *d == self.device) {
                    let mut context: sys::CUcontext = std::ptr::null_mut();
                    // SAFETY: context is a valid out-pointer; this retain is never released.
                    check("cuDevicePrimaryCtxRetain", unsafe {
                        sys::cuDevicePrimaryCtxRetain(&mut context, self.device)
                    })?;
                }
                cache.insert(key, Arc::clone(&module));
                module
            }
        };
        Ok(ModuleId(self.modules.insert_shared(module)))
    }

    unsafe fn kernel(&self, module: ModuleId, name: &str) -> Result<KernelId> {
        self.enter()?;
        let module = self.modules.get("kernel", module.0)?;
        Ok(KernelId(self.kernels.insert(module::kernel(&module, name)?)))
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
        let kernel = self.kernels.get("launch", kernel.0)?;
        let held = self.stream("launch", stream)?;
        let s = held.0;
        check_kernel_limits(
            &self.info,
            &kernel.name,
            config,
            u64::from(kernel.max_threads),
            kernel.static_shared as u64,
        )?;
        /// One argument's value, kept at a stable address for cuLaunchKernel.
        enum Value {
            Ptr(sys::CUdeviceptr),
            U32(u32),
            I32(i32),
            F32(f32),
        }
        let mut values = args
            .iter()
            .map(|arg| {
                Ok(match *arg {
                    KernelArg::Buffer { alloc, offset } => {
                        let mem = self.allocs.get("launch", alloc.0)?;
                        check_range(Backend::Cuda, "launch", offset, 0, mem.size)?;
                        Value::Ptr(mem.device_ptr("launch", offset)?)
                    }
                    KernelArg::U32(v) => Value::U32(v),
                    KernelArg::I32(v) => Value::I32(v),
                    KernelArg::F32(v) => Value::F32(v),
                })
            })
            .collect::<Result<Vec<Value>>>()?;
        let mut params: Vec<*mut c_void> = values
            .iter_mut()
            .map(|v| match v {
                Value::Ptr(p) => (p as *mut u64).cast(),
                Value::U32(x) => (x as *mut u32).cast(),
                Value::I32(x) => (x as *mut i32).cast(),
                Value::F32(x) => (x as *mut f32).cast(),
            })
            .collect();
        let [gx, gy, gz] = config.grid;
        let [bx, by, bz] = config.block;
        let shared_bytes = u32::try_from(config.shared_bytes).unwrap_or(u32::MAX);
        // SAFETY: params point into `values`, alive for the call (the driver
        // copies them at launch); sizes are validated; the caller guarantees
        // the kernel's parameter types and memory accesses.
        self.check("cuLaunchKernel", unsafe {
            sys::cuLaunchKernel(
                kernel.function,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                shared_bytes,
                s,
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        })
    }
}
