//! The operations through the CUDA driver API directly (cudarc's `sys`
//! bindings: what hetero's CUDA backend costs on top of the driver) and
//! through cudarc's safe API (what a Rust user would otherwise write; it
//! tracks events per buffer too), on device 0 and its primary context.

use std::ffi::{CString, c_char, c_void};
use std::sync::Arc;

use cudarc::driver::sys;
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc;

use crate::measure::{Fail, Path};
use crate::{Op, sizes};

fn check(call: &str, code: sys::CUresult) -> Result<(), Fail> {
    if code == sys::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(format!("{call}: {code:?}").into()) }
}

/// The portable `affine_u32` source as CUDA C++, and the device's `sm_XY`.
fn source_and_arch(ctx: &CudaContext) -> Result<(String, String), Fail> {
    use sys::CUdevice_attribute::*;
    let major = ctx.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = ctx.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    let source = hetero::kernels::assemble(hetero::kernels::PRELUDE_CUDA, hetero::kernels::UTIL);
    Ok((source, format!("sm_{major}{minor}")))
}

/// Both vendor paths: `(name, the hetero path it is compared with, path)`.
pub fn paths() -> Result<Vec<crate::RawPath>, Fail> {
    let ctx = CudaContext::new(0)?;
    Ok(vec![("raw", "hetero", Box::new(Driver::new(&ctx)?)), ("cudarc", "hetero", Box::new(Safe::new(&ctx)?))])
}

/// The raw driver calls hetero's backend makes, without hetero.
///
/// Invariant: every handle is live and of `ctx`'s primary context, which
/// `_ctx` keeps; released once in `Drop`.
struct Driver {
    _ctx: Arc<CudaContext>,
    module: sys::CUmodule,
    function: sys::CUfunction,
    streams: [sys::CUstream; 3],
    x: sys::CUdeviceptr,
    y: sys::CUdeviceptr,
    pinned: *mut c_void,
    events: [sys::CUevent; 3],
}

impl Driver {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, Fail> {
        let (source, arch) = source_and_arch(ctx)?;
        let program = nvrtc::result::create_program(&CString::new(source)?, None)?;
        // SAFETY: the program is live until destroyed below.
        let ptx: Vec<c_char> = unsafe {
            let compiled = nvrtc::result::compile_program(program, &[format!("--gpu-architecture={arch}")]);
            let ptx = compiled.and_then(|()| nvrtc::result::get_ptx(program));
            let _ = nvrtc::result::destroy_program(program);
            ptx?
        };
        ctx.bind_to_thread()?;
        let null: *mut c_void = std::ptr::null_mut();
        let mut d = Driver {
            _ctx: Arc::clone(ctx),
            module: null.cast(),
            function: null.cast(),
            streams: [null.cast(); 3],
            x: 0,
            y: 0,
            pinned: null,
            events: [null.cast(); 3],
        };
        let words = sizes::WORDS;
        let nonblocking = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        let untimed = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: every out-pointer is valid; the context is current.
        unsafe {
            check("cuModuleLoadData", sys::cuModuleLoadData(&mut d.module, ptx.as_ptr().cast()))?;
            check("cuModuleGetFunction", sys::cuModuleGetFunction(&mut d.function, d.module, c"affine_u32".as_ptr()))?;
            for s in &mut d.streams {
                check("cuStreamCreate", sys::cuStreamCreateWithPriority(s, nonblocking, 0))?;
            }
            check("cuMemAlloc", sys::cuMemAlloc_v2(&mut d.x, words * 4))?;
            check("cuMemAlloc", sys::cuMemAlloc_v2(&mut d.y, words * 4))?;
            check("cuMemHostAlloc", sys::cuMemHostAlloc(&mut d.pinned, words * 4, sys::CU_MEMHOSTALLOC_PORTABLE))?;
            // Two untimed events (tracking's), and a timed one for `EventRecord`
            // (a user's hetero event keeps time).
            for e in &mut d.events[..2] {
                check("cuEventCreate", sys::cuEventCreate(e, untimed))?;
            }
            check("cuEventCreate", sys::cuEventCreate(&mut d.events[2], sys::CUevent_flags::CU_EVENT_DEFAULT as u32))?;
        }
        Ok(d)
    }
}

impl Path for Driver {
    fn run(&mut self, op: Op, i: usize) -> Result<(), Fail> {
        let ([a, b, pool], [event, filled, timed]) = (self.streams, self.events);
        let (x, y, words) = (self.x, self.y, sizes::WORDS);
        let (n, one) = (words as u32, 1u32);
        // SAFETY: live handles (type invariant); the launch parameters match
        // affine_u32(uint*, uint, uint, uint), which touches x[0..n); copies
        // stay within the 4 KiB buffers; the word outlives its waited copy.
        unsafe {
            match op {
                Op::Launch | Op::LaunchTracked | Op::LaunchToCompletion => {
                    let tracked = op == Op::LaunchTracked;
                    let mut current: sys::CUcontext = std::ptr::null_mut();
                    if tracked {
                        check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut current))?;
                    }
                    let mut params: [*mut c_void; 4] = [
                        (&raw const x).cast_mut().cast(),
                        (&raw const n).cast_mut().cast(),
                        (&raw const one).cast_mut().cast(),
                        (&raw const one).cast_mut().cast(),
                    ];
                    let launched = sys::cuLaunchKernel(
                        self.function,
                        1,
                        1,
                        1,
                        64,
                        1,
                        1,
                        0,
                        a,
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    );
                    check("cuLaunchKernel", launched)?;
                    if tracked {
                        check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut current))?;
                        check("cuEventRecord", sys::cuEventRecord(event, a))?;
                    }
                    if op == Op::LaunchToCompletion {
                        check("cuStreamSynchronize", sys::cuStreamSynchronize(a))?;
                    }
                }
                Op::CopyH2d => check("cuMemcpyHtoDAsync", sys::cuMemcpyHtoDAsync_v2(x, self.pinned, words * 4, a))?,
                Op::CopyH2dTracked => {
                    let mut current: sys::CUcontext = std::ptr::null_mut();
                    check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut current))?;
                    check("cuMemcpyHtoDAsync", sys::cuMemcpyHtoDAsync_v2(x, self.pinned, words * 4, a))?;
                    check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut current))?;
                    check("cuEventRecord", sys::cuEventRecord(event, a))?;
                }
                Op::CopyD2h => check("cuMemcpyDtoHAsync", sys::cuMemcpyDtoHAsync_v2(self.pinned, x, words * 4, a))?,
                Op::EventRecord => check("cuEventRecord", sys::cuEventRecord(timed, a))?,
                Op::CrossStreamPair => {
                    // The previous pair's copy on b (recorded as `event`) reads x.
                    check("cuStreamWaitEvent", sys::cuStreamWaitEvent(a, event, 0))?;
                    check("cuMemsetD32Async", sys::cuMemsetD32Async(x, i as u32, words, a))?;
                    check("cuEventRecord", sys::cuEventRecord(filled, a))?;
                    check("cuStreamWaitEvent", sys::cuStreamWaitEvent(b, filled, 0))?;
                    check("cuMemcpyDtoDAsync", sys::cuMemcpyDtoDAsync_v2(y, x, words * 4, b))?;
                    check("cuEventRecord", sys::cuEventRecord(event, b))?;
                }
                Op::AllocFree1MCached | Op::LaunchAwait | Op::LaunchCallback | Op::ThenEnqueue => {
                    return Err("hetero only".into());
                }
                Op::AllocFree1M => {
                    // The same stream-ordered pair hetero uses.
                    let mut ptr: sys::CUdeviceptr = 0;
                    check("cuMemAllocAsync", sys::cuMemAllocAsync(&mut ptr, sizes::ALLOC_BYTES, pool))?;
                    check("cuStreamSynchronize", sys::cuStreamSynchronize(pool))?;
                    check("cuMemFreeAsync", sys::cuMemFreeAsync(ptr, pool))?;
                }
                Op::RoundTrip => {
                    let mut word = 0u32;
                    check("cuMemcpyDtoHAsync", sys::cuMemcpyDtoHAsync_v2((&raw mut word).cast(), x, 4, a))?;
                    check("cuStreamSynchronize", sys::cuStreamSynchronize(a))?;
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        for s in self.streams {
            // SAFETY: a live stream (type invariant).
            check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(s) })?;
        }
        Ok(())
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.settle();
        // SAFETY: everything is idle; each handle is released once.
        unsafe {
            let _ = sys::cuMemFree_v2(self.x);
            let _ = sys::cuMemFree_v2(self.y);
            let _ = sys::cuMemFreeHost(self.pinned);
            for e in self.events {
                let _ = sys::cuEventDestroy_v2(e);
            }
            for s in self.streams {
                let _ = sys::cuStreamDestroy_v2(s);
            }
            let _ = sys::cuModuleUnload(self.module);
        }
    }
}

/// The same operations through cudarc's safe API.
struct Safe {
    function: CudaFunction,
    a: Arc<CudaStream>,
    b: Arc<CudaStream>,
    x: CudaSlice<u32>,
    y: CudaSlice<u32>,
    pinned: PinnedHostSlice<u32>,
    event: CudaEvent,
}

impl Safe {
    fn new(ctx: &Arc<CudaContext>) -> Result<Self, Fail> {
        let (source, arch) = source_and_arch(ctx)?;
        let options =
            nvrtc::CompileOptions { options: vec![format!("--gpu-architecture={arch}")], ..Default::default() };
        let ptx = nvrtc::compile_ptx_with_opts(source, options)?;
        let function = ctx.load_module(ptx)?.load_function("affine_u32")?;
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        let (x, y) = (a.alloc_zeros::<u32>(sizes::WORDS)?, a.alloc_zeros::<u32>(sizes::WORDS)?);
        // SAFETY: zeroed below before any use.
        let mut pinned = unsafe { ctx.alloc_pinned_with_flags::<u32>(sizes::WORDS, sys::CU_MEMHOSTALLOC_PORTABLE) }?;
        pinned.as_mut_slice()?.fill(0);
        // Timed, as a user's hetero event is.
        let event = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
        Ok(Self { function, a, b, x, y, pinned, event })
    }
}

impl Path for Safe {
    fn run(&mut self, op: Op, _i: usize) -> Result<(), Fail> {
        let Safe { function, a, b, x, y, pinned, event } = self;
        match op {
            Op::Launch | Op::LaunchTracked | Op::LaunchToCompletion => {
                let (n, one) = (sizes::WORDS as u32, 1u32);
                let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
                let mut builder = a.launch_builder(function);
                builder.arg(&mut *x).arg(&n).arg(&one).arg(&one);
                // SAFETY: the arguments match affine_u32, which touches x[0..n).
                unsafe { builder.launch(config) }?;
                if op == Op::LaunchToCompletion {
                    a.synchronize()?;
                }
            }
            Op::CopyH2d | Op::CopyH2dTracked => a.memcpy_htod(&*pinned, x)?,
            Op::CopyD2h => a.memcpy_dtoh(&*x, pinned)?,
            Op::EventRecord => event.record(a)?,
            Op::CrossStreamPair => {
                a.memset_zeros(&mut *x)?;
                b.memcpy_dtod(&*x, y)?;
            }
            Op::AllocFree1MCached | Op::LaunchAwait | Op::LaunchCallback | Op::ThenEnqueue => {
                return Err("hetero only".into());
            }
            // SAFETY: the memory is never read.
            Op::AllocFree1M => drop(unsafe { a.alloc::<u8>(sizes::ALLOC_BYTES) }?),
            Op::RoundTrip => {
                a.memcpy_dtoh(&x.slice(0..1), &mut [0u32; 1])?;
                a.synchronize()?;
            }
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        self.a.synchronize()?;
        Ok(self.b.synchronize()?)
    }
}

/// `cuMemcpyPeerAsync` of `bytes` from device `from` to device `to` on a
/// stream of `to` (with `both`, the reverse on a stream of `from` at the
/// same time), waited for: the median host time of `rounds` rounds, in
/// microseconds. Peer access is enabled where the driver allows, as
/// hetero enables it.
pub fn peer_us(from: usize, to: usize, bytes: usize, both: bool, rounds: usize) -> Result<f64, Fail> {
    let (ca, cb) = (CudaContext::new(from)?, CudaContext::new(to)?);
    let null: *mut c_void = std::ptr::null_mut();
    let mut streams: [sys::CUstream; 2] = [null.cast(); 2];
    let mut buffers: [sys::CUdeviceptr; 4] = [0; 4];
    let result = (|| -> Result<f64, Fail> {
        let nonblocking = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        for (k, ctx) in [&ca, &cb].into_iter().enumerate() {
            ctx.bind_to_thread()?;
            // SAFETY: valid out-pointers; the context is current.
            unsafe {
                check("cuStreamCreate", sys::cuStreamCreate(&mut streams[k], nonblocking))?;
                check("cuMemAlloc", sys::cuMemAlloc_v2(&mut buffers[2 * k], bytes))?;
                check("cuMemAlloc", sys::cuMemAlloc_v2(&mut buffers[2 * k + 1], bytes))?;
            }
            let other = if k == 0 { &cb } else { &ca };
            let mut can = 0;
            // SAFETY: valid out-pointer and device handles.
            check("cuDeviceCanAccessPeer", unsafe {
                sys::cuDeviceCanAccessPeer(&mut can, ctx.cu_device(), other.cu_device())
            })?;
            if can != 0 {
                // SAFETY: this context is current; the other is retained.
                match unsafe { sys::cuCtxEnablePeerAccess(other.cu_ctx(), 0) } {
                    sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED => {}
                    code => check("cuCtxEnablePeerAccess", code)?,
                }
            }
        }
        let (a, b) = (ca.cu_ctx(), cb.cu_ctx());
        crate::measure::median_us(rounds, &mut || {
            // SAFETY: the buffers are `bytes` long in their contexts; the
            // streams are live; the copies are waited for before the next round.
            unsafe {
                check("cuMemcpyPeerAsync", sys::cuMemcpyPeerAsync(buffers[3], b, buffers[0], a, bytes, streams[1]))?;
                if both {
                    check(
                        "cuMemcpyPeerAsync",
                        sys::cuMemcpyPeerAsync(buffers[1], a, buffers[2], b, bytes, streams[0]),
                    )?;
                    check("cuStreamSynchronize", sys::cuStreamSynchronize(streams[0]))?;
                }
                check("cuStreamSynchronize", sys::cuStreamSynchronize(streams[1]))
            }
        })
    })();
    for (k, ctx) in [&ca, &cb].into_iter().enumerate() {
        let _ = ctx.bind_to_thread();
        // SAFETY: created above in this context (or null/0, which these skip).
        unsafe {
            if !streams[k].is_null() {
                let _ = sys::cuStreamSynchronize(streams[k]);
                let _ = sys::cuStreamDestroy_v2(streams[k]);
            }
            for p in [buffers[2 * k], buffers[2 * k + 1]] {
                if p != 0 {
                    let _ = sys::cuMemFree_v2(p);
                }
            }
        }
    }
    result
}

/// The driver's graph API on the raw path's kernel and buffer (`graphs.rs`).
///
/// Invariant: `exec`, when set, is a live executable of `driver`'s context.
pub struct Graphs {
    driver: Driver,
    exec: Option<sys::CUgraphExec>,
}

/// The raw graph path of device 0.
pub fn graphs() -> Result<Graphs, Fail> {
    let ctx = CudaContext::new(0)?;
    Ok(Graphs { driver: Driver::new(&ctx)?, exec: None })
}

impl crate::graphs::RawGraphs for Graphs {
    fn build(&mut self, launches: usize) -> Result<(), Fail> {
        let (s, x, n, one) = (self.driver.streams[0], self.driver.x, sizes::WORDS as u32, 1u32);
        let relaxed = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: live handles (Driver's invariant); the parameters match
        // affine_u32(uint*, uint, uint, uint), which touches x[0..n); the
        // capture is ended whatever a launch returns.
        unsafe {
            check("cuStreamBeginCapture_v2", sys::cuStreamBeginCapture_v2(s, relaxed))?;
            let mut launched = Ok(());
            for _ in 0..launches {
                let mut params: [*mut c_void; 4] = [
                    (&raw const x).cast_mut().cast(),
                    (&raw const n).cast_mut().cast(),
                    (&raw const one).cast_mut().cast(),
                    (&raw const one).cast_mut().cast(),
                ];
                let f = self.driver.function;
                let code = sys::cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, s, params.as_mut_ptr(), std::ptr::null_mut());
                launched = launched.and(check("cuLaunchKernel", code));
            }
            let mut graph: sys::CUgraph = std::ptr::null_mut();
            check("cuStreamEndCapture", sys::cuStreamEndCapture(s, &mut graph))?;
            let mut exec: sys::CUgraphExec = std::ptr::null_mut();
            let built =
                launched.and(check("cuGraphInstantiate", sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)));
            let _ = sys::cuGraphDestroy(graph);
            built?;
            if let Some(old) = self.exec.replace(exec) {
                let _ = sys::cuGraphExecDestroy(old);
            }
        }
        Ok(())
    }

    fn replay(&mut self) -> Result<(), Fail> {
        let exec = self.exec.ok_or("no graph built")?;
        // SAFETY: a live executable and stream (type invariant).
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(exec, self.driver.streams[0]) })
    }

    fn replay_tracked(&mut self) -> Result<(), Fail> {
        let mut current: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-pointer; live handles (type invariant).
        unsafe {
            check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut current))?;
            self.replay()?;
            check("cuCtxGetCurrent", sys::cuCtxGetCurrent(&mut current))?;
            check("cuEventRecord", sys::cuEventRecord(self.driver.events[0], self.driver.streams[0]))
        }
    }

    fn sync(&mut self) -> Result<(), Fail> {
        // SAFETY: a live stream.
        check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(self.driver.streams[0]) })
    }
}

impl Drop for Graphs {
    fn drop(&mut self) {
        use crate::graphs::RawGraphs;
        let _ = self.sync();
        if let Some(exec) = self.exec.take() {
            // SAFETY: idle (synchronised above), destroyed once.
            let _ = unsafe { sys::cuGraphExecDestroy(exec) };
        }
    }
}
