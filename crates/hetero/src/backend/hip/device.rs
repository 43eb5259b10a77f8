//! [`HipDevice`]: one GPU; every call selects it with `hipSetDevice` first.

use std::collections::HashMap;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, PoisonError};

use cubecl_hip_sys as hip;

use super::error::{check, error, hip_error, is_sticky};
use super::event::HipEvent;
use super::memory::{HipMemory, Place};
use super::module::{self, HipKernel, HipModule};
use super::stream::HipStream;
use crate::backend::handles::Handles;
use crate::device::{
    AllocId, Backend, Device, DeviceInfo, DeviceRange, EventId, KernelArg, KernelId, LaunchConfig, ModuleId,
    StreamFlags, StreamId, check_copy_ranges, check_fill_range, check_kernel_limits, check_range,
};
use crate::error::{Error, ErrorKind, Result};

/// Built modules by device ordinal and source, for the whole process.
type ModuleCache = HashMap<(i32, String), Arc<HipModule>>;

/// A HIP device. After a sticky error (a faulting kernel) every call
/// returns that error: the device cannot be trusted any more.
pub struct HipDevice {
    info: DeviceInfo,
    ordinal: i32,
    poisoned: Mutex<Option<Error>>,
    /// The stream of the stream-ordered allocator.
    pool_stream: HipStream,
    /// Gate words of destroyed user events, freed when the device is dropped.
    retired_gates: Mutex<Vec<NonNull<u32>>>,
    /// Destroyed streams whose work may still run: really destroyed once
    /// idle (checked at every `destroy_stream`), or at the device's drop
    /// after its gates are open. Destroying a busy stream could block.
    retired_streams: Mutex<Vec<Arc<HipStream>>>,
    streams: Handles<HipStream>,
    events: Handles<HipEvent>,
    allocs: Handles<HipMemory>,
    modules: Handles<HipModule>,
    kernels: Handles<HipKernel>,
}

// SAFETY: the raw handles are process-wide runtime objects; all mutable
// state is behind mutexes.
unsafe impl Send for HipDevice {}
// SAFETY: as above.
unsafe impl Sync for HipDevice {}

impl std::fmt::Debug for HipDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HipDevice").field("info", &self.info).finish_non_exhaustive()
    }
}

fn attribute(ordinal: i32, attr: hip::hipDeviceAttribute_t) -> Result<i32> {
    let mut value = 0;
    // SAFETY: value is a valid out-pointer.
    check("hipDeviceGetAttribute", unsafe { hip::hipDeviceGetAttribute(&mut value, attr, ordinal) })?;
    Ok(value)
}

fn positive(value: i32) -> u32 {
    u32::try_from(value).unwrap_or(0)
}

impl HipDevice {
    /// Opens device `ordinal`; `hipInit` must have succeeded.
    pub(super) fn new(index: usize) -> Result<Self> {
        let ordinal = i32::try_from(index).unwrap_or(i32::MAX);
        // SAFETY: plain call with a device index.
        check("hipSetDevice", unsafe { hip::hipSetDevice(ordinal) })?;
        let mut name = [0 as std::ffi::c_char; 256];
        // SAFETY: name holds 256 bytes, as passed.
        check("hipDeviceGetName", unsafe { hip::hipDeviceGetName(name.as_mut_ptr(), 256, ordinal) })?;
        // SAFETY: HIP NUL-terminates the name within the buffer.
        let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned();
        let mut total: usize = 0;
        // SAFETY: total is a valid out-pointer.
        check("hipDeviceTotalMem", unsafe { hip::hipDeviceTotalMem(&mut total, ordinal) })?;
        let mut version = 0;
        // SAFETY: version is a valid out-pointer.
        check("hipDriverGetVersion", unsafe { hip::hipDriverGetVersion(&mut version) })?;
        let major = attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeComputeCapabilityMajor)?;
        let minor = attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeComputeCapabilityMinor)?;
        let info = DeviceInfo {
            backend: Backend::Hip,
            ordinal: index,
            name,
            vendor: "HIP".to_string(),
            platform: format!("HIP driver version {version}, compute capability {major}.{minor}"),
            total_memory: total as u64,
            max_threads_per_block: positive(attribute(
                ordinal,
                hip::hipDeviceAttribute_t_hipDeviceAttributeMaxThreadsPerBlock,
            )?),
            max_block_dims: [
                positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeMaxBlockDimX)?),
                positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeMaxBlockDimY)?),
                positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeMaxBlockDimZ)?),
            ],
            max_grid_dims: [
                positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeMaxGridDimX)?),
                positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeMaxGridDimY)?),
                positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeMaxGridDimZ)?),
            ],
            shared_memory_per_block: positive(attribute(
                ordinal,
                hip::hipDeviceAttribute_t_hipDeviceAttributeMaxSharedMemoryPerBlock,
            )?) as usize,
            compute_units: positive(attribute(
                ordinal,
                hip::hipDeviceAttribute_t_hipDeviceAttributeMultiprocessorCount,
            )?),
            // 64 on most AMD GPUs, 32 on NVIDIA and RDNA: read, never assumed.
            warp_size: positive(attribute(ordinal, hip::hipDeviceAttribute_t_hipDeviceAttributeWarpSize)?),
        };
        Ok(Self {
            info,
            ordinal,
            poisoned: Mutex::new(None),
            pool_stream: HipStream::new(StreamFlags { non_blocking: true, priority: 0 }, ordinal)?,
            retired_gates: Mutex::new(Vec::new()),
            retired_streams: Mutex::new(Vec::new()),
            streams: Handles::new(Backend::Hip, "stream"),
            events: Handles::new(Backend::Hip, "event"),
            allocs: Handles::new(Backend::Hip, "allocation"),
            modules: Handles::new(Backend::Hip, "module"),
            kernels: Handles::new(Backend::Hip, "kernel"),
        })
    }

    /// Refuses work on a poisoned device and selects it on this thread.
    fn enter(&self) -> Result<()> {
        if let Some(e) = self.poisoned.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            return Err(e.clone());
        }
        // SAFETY: plain call with this device's index.
        check("hipSetDevice", unsafe { hip::hipSetDevice(self.ordinal) })
    }

    /// Checks a HIP result, poisoning the device on a sticky error.
    fn check(&self, call: &'static str, code: hip::hipError_t) -> Result<()> {
        if code == hip::hipError_t_hipSuccess {
            return Ok(());
        }
        let err = hip_error(call, code);
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
    fn stream(&self, call: &'static str, id: StreamId) -> Result<Arc<HipStream>> {
        self.streams.get(call, id.0)
    }

    /// The device address of a checked range.
    fn address(&self, call: &'static str, range: DeviceRange) -> Result<hip::hipDeviceptr_t> {
        let mem = self.allocs.get(call, range.alloc.0)?;
        check_range(Backend::Hip, call, range.offset, range.len, mem.size)?;
        mem.device_ptr(call, range.offset)
    }

    /// `Ok(true)` done, `Ok(false)` not ready.
    fn ready(&self, call: &'static str, code: hip::hipError_t) -> Result<bool> {
        match code {
            hip::hipError_t_hipErrorNotReady => Ok(false),
            other => self.check(call, other).map(|()| true),
        }
    }
}

impl Drop for HipDevice {
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
                let _ = unsafe { hip::hipStreamSynchronize(stream.0) };
            }
            for mem in self.allocs.take_all() {
                // Allocations the typed layer retired while still in use.
                let _ = mem.free(self.pool_stream.0);
            }
            for event in events {
                if let Ok(Some(gate)) = event.destroy() {
                    self.retired_gates.get_mut().unwrap_or_else(PoisonError::into_inner).push(gate);
                }
            }
            for gate in self.retired_gates.get_mut().unwrap_or_else(PoisonError::into_inner).drain(..) {
                // SAFETY: allocated by hipHostMalloc, open; hipHostFree waits for the device first.
                let _ = unsafe { hip::hipHostFree(gate.as_ptr().cast()) };
            }
        }
        drop(streams);
    }
}

impl Device for HipDevice {
    fn info(&self) -> &DeviceInfo {
        &self.info
    }

    fn create_stream(&self, flags: StreamFlags) -> Result<StreamId> {
        self.enter()?;
        Ok(StreamId(self.streams.insert(HipStream::new(flags, self.ordinal)?)))
    }

    unsafe fn destroy_stream(&self, stream: StreamId) -> Result<()> {
        let stream = self.streams.remove("destroy_stream", stream.0)?;
        let mut retired = self.retired_streams.lock().unwrap_or_else(PoisonError::into_inner);
        retired.push(stream);
        if self.enter().is_ok() {
            // SAFETY: live streams of this device (a query never blocks).
            retired.retain(|s| unsafe { hip::hipStreamQuery(s.0) == hip::hipError_t_hipErrorNotReady });
        }
        Ok(())
    }

    unsafe fn synchronize_stream(&self, stream: StreamId) -> Result<()> {
        self.enter()?;
        let held = self.stream("synchronize_stream", stream)?;
        let s = held.0;
        // SAFETY: s is a live stream of this context.
        self.check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(s) })
    }

    unsafe fn query_stream(&self, stream: StreamId) -> Result<bool> {
        self.enter()?;
        let held = self.stream("query_stream", stream)?;
        let s = held.0;
        // SAFETY: s is a live stream of this context.
        self.ready("hipStreamQuery", unsafe { hip::hipStreamQuery(s) })
    }

    fn create_event(&self) -> Result<EventId> {
        self.enter()?;
        Ok(EventId(self.events.insert(HipEvent::timed()?)))
    }

    fn create_user_event(&self) -> Result<EventId> {
        self.enter()?;
        Ok(EventId(self.events.insert(HipEvent::user()?)))
    }

    unsafe fn complete_user_event(&self, event: EventId) -> Result<()> {
        match &*self.events.get("complete_user_event", event.0)? {
            e @ HipEvent::User { .. } => {
                e.open();
                Ok(())
            }
            HipEvent::Timed { .. } => {
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
            HipEvent::Timed { event, recorded } => {
                // SAFETY: both handles are live objects of this context.
                self.check("hipEventRecord", unsafe { hip::hipEventRecord(*event, s) })?;
                recorded.store(true, std::sync::atomic::Ordering::Release);
                Ok(())
            }
            HipEvent::User { .. } => {
                Err(error("record_event", ErrorKind::InvalidHandle, "a user event cannot be recorded"))
            }
        }
    }

    unsafe fn query_event(&self, event: EventId) -> Result<bool> {
        self.enter()?;
        match &*self.events.get("query_event", event.0)? {
            // SAFETY: a live event of this context.
            HipEvent::Timed { event, .. } => self.ready("hipEventQuery", unsafe { hip::hipEventQuery(*event) }),
            user => Ok(user.is_open()),
        }
    }

    unsafe fn synchronize_event(&self, event: EventId) -> Result<()> {
        self.enter()?;
        match &*self.events.get("synchronize_event", event.0)? {
            HipEvent::Timed { event, .. } => {
                // SAFETY: a live event of this context.
                let code = unsafe { hip::hipEventSynchronize(*event) };
                self.check("hipEventSynchronize", code)
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
        let handle = |id: EventId| -> Result<hip::hipEvent_t> {
            match &*self.events.get("elapsed_ms", id.0)? {
                HipEvent::Timed { event, recorded } if recorded.load(std::sync::atomic::Ordering::Acquire) => {
                    Ok(*event)
                }
                HipEvent::Timed { .. } => Err(error("elapsed_ms", ErrorKind::NotReady, "event was never recorded")),
                HipEvent::User { .. } => {
                    Err(error("elapsed_ms", ErrorKind::InvalidHandle, "user events carry no time"))
                }
            }
        };
        let (a, b) = (handle(start)?, handle(end)?);
        let mut ms = 0f32;
        // SAFETY: both events are live, recorded events of this context.
        self.check("hipEventElapsedTime", unsafe { hip::hipEventElapsedTime(&mut ms, a, b) })?;
        Ok(f64::from(ms))
    }

    unsafe fn stream_wait_event(&self, stream: StreamId, event: EventId) -> Result<()> {
        self.enter()?;
        let held = self.stream("stream_wait_event", stream)?;
        let s = held.0;
        match &*self.events.get("stream_wait_event", event.0)? {
            HipEvent::Timed { event, .. } => {
                // SAFETY: both handles are live objects of this context.
                let code = unsafe { hip::hipStreamWaitEvent(s, *event, 0) };
                self.check("hipStreamWaitEvent", code)
            }
            // SAFETY: the gate word is mapped page-locked memory that lives
            // until the device is dropped (destroyed gates are retired, not freed).
            // SAFETY: the gate word is mapped page-locked memory that lives
            // until the device is dropped (destroyed gates are retired, not freed).
            HipEvent::User { device, .. } => self.check("hipStreamWaitValue32", unsafe {
                hip::hipStreamWaitValue32(s, *device, 1, hip::hipStreamWaitValueGte, u32::MAX)
            }),
        }
    }

    fn alloc_device(&self, bytes: usize) -> Result<AllocId> {
        self.enter()?;
        Ok(AllocId(self.allocs.insert(HipMemory::device(bytes, self.pool_stream.0)?)))
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<AllocId> {
        self.enter()?;
        Ok(AllocId(self.allocs.insert(HipMemory::pinned(bytes)?)))
    }

    unsafe fn pinned_ptr(&self, alloc: AllocId) -> Result<NonNull<u8>> {
        match self.allocs.get("pinned_ptr", alloc.0)?.place {
            Place::Pinned(ptr) => Ok(ptr),
            Place::Device { .. } => Err(error(
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
        mem.free(self.pool_stream.0)
    }

    unsafe fn copy_h2d(&self, src: *const u8, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.enter()?;
        let (to, held) = (self.address("copy_h2d", dst)?, self.stream("copy_h2d", stream)?);
        let s = held.0;
        if dst.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is checked; the caller keeps src valid until completion.
        self.check("hipMemcpyHtoDAsync", unsafe { hip::hipMemcpyHtoDAsync(to, src.cast(), dst.len, s) })
    }

    unsafe fn copy_d2h(&self, src: DeviceRange, dst: *mut u8, stream: StreamId) -> Result<()> {
        self.enter()?;
        let (from, held) = (self.address("copy_d2h", src)?, self.stream("copy_d2h", stream)?);
        let s = held.0;
        if src.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is checked; the caller keeps dst valid until completion.
        self.check("hipMemcpyDtoHAsync", unsafe { hip::hipMemcpyDtoHAsync(dst.cast(), from, src.len, s) })
    }

    unsafe fn copy_d2d(&self, src: DeviceRange, dst: DeviceRange, stream: StreamId) -> Result<()> {
        self.enter()?;
        check_copy_ranges(Backend::Hip, src, dst)?;
        let (from, to) = (self.address("copy_d2d", src)?, self.address("copy_d2d", dst)?);
        let held = self.stream("copy_d2d", stream)?;
        let s = held.0;
        if src.len == 0 {
            return Ok(());
        }
        // SAFETY: both ranges are checked device memory of this context.
        self.check("hipMemcpyDtoDAsync", unsafe { hip::hipMemcpyDtoDAsync(to, from, src.len, s) })
    }

    unsafe fn fill_u32(&self, dst: DeviceRange, pattern: u32, stream: StreamId) -> Result<()> {
        self.enter()?;
        check_fill_range(Backend::Hip, dst)?;
        let (to, held) = (self.address("fill_u32", dst)?, self.stream("fill_u32", stream)?);
        let s = held.0;
        if dst.len == 0 {
            return Ok(());
        }
        // SAFETY: the range is checked, 4-byte aligned device memory.
        self.check("hipMemsetD32Async", unsafe { hip::hipMemsetD32Async(to, pattern as i32, dst.len / 4, s) })
    }

    fn build_module(&self, source: &str) -> Result<ModuleId> {
        self.enter()?;
        static CACHE: Mutex<Option<ModuleCache>> = Mutex::new(None);
        let mut guard = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
        let cache = guard.get_or_insert_with(HashMap::new);
        let key = (self.ordinal, source.to_string());
        let module = match cache.get(&key) {
            Some(module) => Arc::clone(module),
            None => {
                let module = Arc::new(module::load(&module::compile(source)?)?);
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
        /// One argument's value, kept at a stable address for the launch.
        enum Value {
            Ptr(hip::hipDeviceptr_t),
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
                        check_range(Backend::Hip, "launch", offset, 0, mem.size)?;
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
                Value::Ptr(p) => (p as *mut hip::hipDeviceptr_t).cast(),
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
        self.check("hipModuleLaunchKernel", unsafe {
            hip::hipModuleLaunchKernel(
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
