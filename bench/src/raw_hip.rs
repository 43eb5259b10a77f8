//! The operations through the HIP runtime directly (`cubecl-hip-sys`'s bindings,
//! per-operation functions resolved once: `hetero::backend::hip::ffi`): what
//! hetero's HIP backend costs on top of the calls it makes, on device 0.

use std::ffi::{CString, c_char, c_void};

// The bindings with the per-operation functions resolved once, as a program
// linked against libamdhip64 calls them (cubecl-hip-sys's own bindings look
// each symbol up at every call).
use hetero::backend::hip::ffi as hip;

use crate::measure::{Fail, Path};
use crate::{Op, sizes};

fn check(call: &str, code: hip::hipError_t) -> Result<(), Fail> {
    if code == hip::hipError_t_hipSuccess { Ok(()) } else { Err(format!("{call}: error {code}").into()) }
}

fn rtc(call: &str, code: hip::hiprtcResult) -> Result<(), String> {
    if code == hip::hiprtcResult_HIPRTC_SUCCESS { Ok(()) } else { Err(format!("{call}: error {code}")) }
}

/// `affine_u32` compiled by hiprtc for the current device.
fn compile() -> Result<Vec<c_char>, Fail> {
    let source = hetero::kernels::assemble(hetero::kernels::PRELUDE_CUDA, hetero::kernels::UTIL);
    let source = CString::new(source)?;
    let mut program: hip::hiprtcProgram = std::ptr::null_mut();
    // SAFETY: valid out-pointer and NUL-terminated source; the program is
    // destroyed once at the end.
    unsafe {
        let name = c"bench.cu".as_ptr();
        rtc(
            "hiprtcCreateProgram",
            hip::hiprtcCreateProgram(&mut program, source.as_ptr(), name, 0, std::ptr::null(), std::ptr::null()),
        )?;
        let compiled = rtc("hiprtcCompileProgram", hip::hiprtcCompileProgram(program, 0, std::ptr::null()));
        let mut size = 0usize;
        let sized = compiled.and_then(|()| rtc("hiprtcGetCodeSize", hip::hiprtcGetCodeSize(program, &mut size)));
        let mut code = vec![0 as c_char; size + 1];
        let got = sized.and_then(|()| rtc("hiprtcGetCode", hip::hiprtcGetCode(program, code.as_mut_ptr())));
        let _ = hip::hiprtcDestroyProgram(&mut program);
        got.map(|()| code).map_err(Fail::from)
    }
}

/// Invariant: every handle is live and of device 0; released once in `Drop`.
struct Raw {
    module: hip::hipModule_t,
    function: hip::hipFunction_t,
    streams: [hip::hipStream_t; 3],
    x: *mut c_void,
    y: *mut c_void,
    pinned: *mut c_void,
    events: [hip::hipEvent_t; 3],
}

impl Raw {
    fn new() -> Result<Self, Fail> {
        let null: *mut c_void = std::ptr::null_mut();
        let mut r = Raw {
            module: null.cast(),
            function: null.cast(),
            streams: [null.cast(); 3],
            x: null,
            y: null,
            pinned: null,
            events: [null.cast(); 3],
        };
        let words = sizes::WORDS;
        // SAFETY: every out-pointer is valid.
        unsafe {
            check("hipSetDevice", hip::hipSetDevice(0))?;
            let image = compile()?;
            check("hipModuleLoadData", hip::hipModuleLoadData(&mut r.module, image.as_ptr().cast()))?;
            check(
                "hipModuleGetFunction",
                hip::hipModuleGetFunction(&mut r.function, r.module, c"affine_u32".as_ptr()),
            )?;
            for s in &mut r.streams {
                check(
                    "hipStreamCreateWithPriority",
                    hip::hipStreamCreateWithPriority(s, hip::hipStreamNonBlocking, 0),
                )?;
            }
            check("hipMalloc", hip::hipMalloc(&mut r.x, words * 4))?;
            check("hipMalloc", hip::hipMalloc(&mut r.y, words * 4))?;
            check("hipHostMalloc", hip::hipHostMalloc(&mut r.pinned, words * 4, hip::hipHostMallocPortable))?;
            // Two untimed events (tracking's), and a timed one for `EventRecord`
            // (a user's hetero event keeps time).
            for e in &mut r.events[..2] {
                check("hipEventCreate", hip::hipEventCreateWithFlags(e, hip::hipEventDisableTiming))?;
            }
            check("hipEventCreate", hip::hipEventCreateWithFlags(&mut r.events[2], hip::hipEventDefault))?;
        }
        Ok(r)
    }
}

impl Path for Raw {
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
                    let mut current = 0;
                    if tracked {
                        check("hipGetDevice", hip::hipGetDevice(&mut current))?;
                    }
                    let mut params: [*mut c_void; 4] = [
                        (&raw const x).cast_mut().cast(),
                        (&raw const n).cast_mut().cast(),
                        (&raw const one).cast_mut().cast(),
                        (&raw const one).cast_mut().cast(),
                    ];
                    let launched = hip::hipModuleLaunchKernel(
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
                    check("hipModuleLaunchKernel", launched)?;
                    if tracked {
                        check("hipGetDevice", hip::hipGetDevice(&mut current))?;
                        check("hipEventRecord", hip::hipEventRecord(event, a))?;
                    }
                    if op == Op::LaunchToCompletion {
                        check("hipStreamSynchronize", hip::hipStreamSynchronize(a))?;
                    }
                }
                Op::CopyH2d => check("hipMemcpyHtoDAsync", hip::hipMemcpyHtoDAsync(x, self.pinned, words * 4, a))?,
                Op::CopyH2dTracked => {
                    let mut current = 0;
                    check("hipGetDevice", hip::hipGetDevice(&mut current))?;
                    check("hipMemcpyHtoDAsync", hip::hipMemcpyHtoDAsync(x, self.pinned, words * 4, a))?;
                    check("hipGetDevice", hip::hipGetDevice(&mut current))?;
                    check("hipEventRecord", hip::hipEventRecord(event, a))?;
                }
                Op::CopyD2h => check("hipMemcpyDtoHAsync", hip::hipMemcpyDtoHAsync(self.pinned, x, words * 4, a))?,
                Op::EventRecord => check("hipEventRecord", hip::hipEventRecord(timed, a))?,
                Op::CrossStreamPair => {
                    // The previous pair's copy on b (recorded as `event`) reads x.
                    check("hipStreamWaitEvent", hip::hipStreamWaitEvent(a, event, 0))?;
                    check("hipMemsetD32Async", hip::hipMemsetD32Async(x, i as i32, words, a))?;
                    check("hipEventRecord", hip::hipEventRecord(filled, a))?;
                    check("hipStreamWaitEvent", hip::hipStreamWaitEvent(b, filled, 0))?;
                    check("hipMemcpyDtoDAsync", hip::hipMemcpyDtoDAsync(y, x, words * 4, b))?;
                    check("hipEventRecord", hip::hipEventRecord(event, b))?;
                }
                Op::AllocFree1MCached | Op::LaunchAwait | Op::LaunchCallback | Op::ThenEnqueue => {
                    return Err("hetero only".into());
                }
                Op::AllocFree1M => {
                    // The same stream-ordered pair hetero uses.
                    let mut ptr: *mut c_void = std::ptr::null_mut();
                    check("hipMallocAsync", hip::hipMallocAsync(&mut ptr, sizes::ALLOC_BYTES, pool))?;
                    check("hipStreamSynchronize", hip::hipStreamSynchronize(pool))?;
                    check("hipFreeAsync", hip::hipFreeAsync(ptr, pool))?;
                }
                Op::RoundTrip => {
                    let mut word = 0u32;
                    check("hipMemcpyDtoHAsync", hip::hipMemcpyDtoHAsync((&raw mut word).cast(), x, 4, a))?;
                    check("hipStreamSynchronize", hip::hipStreamSynchronize(a))?;
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        for s in self.streams {
            // SAFETY: a live stream (type invariant).
            check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(s) })?;
        }
        Ok(())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.settle();
        // SAFETY: everything is idle; each handle is released once.
        unsafe {
            let _ = hip::hipFree(self.x);
            let _ = hip::hipFree(self.y);
            let _ = hip::hipHostFree(self.pinned);
            for e in self.events {
                let _ = hip::hipEventDestroy(e);
            }
            for s in self.streams {
                let _ = hip::hipStreamDestroy(s);
            }
        }
    }
}

/// The operations of [`Op::ALL`] through raw HIP calls: `(name, the hetero
/// path it is compared with, path)`.
pub fn paths() -> Result<Vec<crate::RawPath>, Fail> {
    let raw = Raw::new()?;
    if !hip::resolved() {
        eprintln!(
            "bench: HIP's functions could not be resolved once: hetero and the raw path look each up at every call"
        );
    }
    Ok(vec![("raw", "hetero", Box::new(raw))])
}

/// `hipMemcpyPeerAsync` of `bytes` from device `from` to device `to` on a
/// stream of `to` (with `both`, the reverse on a stream of `from` at the
/// same time), waited for: the median host time of `rounds` rounds, in
/// microseconds. Peer access is enabled where the runtime allows.
pub fn peer_us(from: usize, to: usize, bytes: usize, both: bool, rounds: usize) -> Result<f64, Fail> {
    let devices = [i32::try_from(from)?, i32::try_from(to)?];
    let null: *mut c_void = std::ptr::null_mut();
    let mut streams: [hip::hipStream_t; 2] = [null.cast(); 2];
    let mut buffers: [*mut c_void; 4] = [null; 4];
    let result = (|| -> Result<f64, Fail> {
        for (k, &device) in devices.iter().enumerate() {
            let other = devices[1 - k];
            // SAFETY: valid out-pointers and device indices.
            unsafe {
                check("hipSetDevice", hip::hipSetDevice(device))?;
                check(
                    "hipStreamCreate",
                    hip::hipStreamCreateWithPriority(&mut streams[k], hip::hipStreamNonBlocking, 0),
                )?;
                check("hipMalloc", hip::hipMalloc(&mut buffers[2 * k], bytes))?;
                check("hipMalloc", hip::hipMalloc(&mut buffers[2 * k + 1], bytes))?;
                let mut can = 0;
                if other != device {
                    check("hipDeviceCanAccessPeer", hip::hipDeviceCanAccessPeer(&mut can, device, other))?;
                }
                if can != 0 {
                    match hip::hipDeviceEnablePeerAccess(other, 0) {
                        hip::hipError_t_hipErrorPeerAccessAlreadyEnabled => {}
                        code => check("hipDeviceEnablePeerAccess", code)?,
                    }
                }
            }
        }
        let [a, b] = devices;
        crate::measure::median_us(rounds, &mut || {
            // SAFETY: the buffers are `bytes` long on their devices; the
            // streams are live; the copies are waited for before the next round.
            unsafe {
                check(
                    "hipMemcpyPeerAsync",
                    hip::hipMemcpyPeerAsync(buffers[3], b, buffers[0].cast_const(), a, bytes, streams[1]),
                )?;
                if both {
                    check(
                        "hipMemcpyPeerAsync",
                        hip::hipMemcpyPeerAsync(buffers[1], a, buffers[2].cast_const(), b, bytes, streams[0]),
                    )?;
                    check("hipStreamSynchronize", hip::hipStreamSynchronize(streams[0]))?;
                }
                check("hipStreamSynchronize", hip::hipStreamSynchronize(streams[1]))
            }
        })
    })();
    for (k, &device) in devices.iter().enumerate() {
        // SAFETY: created above on this device (or null, which these skip).
        unsafe {
            let _ = hip::hipSetDevice(device);
            if !streams[k].is_null() {
                let _ = hip::hipStreamSynchronize(streams[k]);
                let _ = hip::hipStreamDestroy(streams[k]);
            }
            for p in [buffers[2 * k], buffers[2 * k + 1]] {
                if !p.is_null() {
                    let _ = hip::hipFree(p);
                }
            }
        }
    }
    result
}

/// HIP's graph API on the raw path's kernel and buffer (`graphs.rs`).
///
/// Invariant: `exec`, when set, is a live executable of device 0.
pub struct Graphs {
    raw: Raw,
    exec: Option<hip::hipGraphExec_t>,
}

/// The raw graph path of device 0.
pub fn graphs() -> Result<Graphs, Fail> {
    Ok(Graphs { raw: Raw::new()?, exec: None })
}

impl crate::graphs::RawGraphs for Graphs {
    fn build(&mut self, launches: usize) -> Result<(), Fail> {
        let (s, x, n, one) = (self.raw.streams[0], self.raw.x, sizes::WORDS as u32, 1u32);
        let relaxed = hip::hipStreamCaptureMode_hipStreamCaptureModeRelaxed;
        // SAFETY: live handles (Raw's invariant); the parameters match
        // affine_u32(uint*, uint, uint, uint), which touches x[0..n); the
        // capture is ended whatever a launch returns.
        unsafe {
            check("hipStreamBeginCapture", hip::hipStreamBeginCapture(s, relaxed))?;
            let mut launched = Ok(());
            for _ in 0..launches {
                let mut params: [*mut c_void; 4] = [
                    (&raw const x).cast_mut().cast(),
                    (&raw const n).cast_mut().cast(),
                    (&raw const one).cast_mut().cast(),
                    (&raw const one).cast_mut().cast(),
                ];
                let f = self.raw.function;
                let code =
                    hip::hipModuleLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, s, params.as_mut_ptr(), std::ptr::null_mut());
                launched = launched.and(check("hipModuleLaunchKernel", code));
            }
            let mut graph: hip::hipGraph_t = std::ptr::null_mut();
            check("hipStreamEndCapture", hip::hipStreamEndCapture(s, &mut graph))?;
            let mut exec: hip::hipGraphExec_t = std::ptr::null_mut();
            let built =
                launched.and(check("hipGraphInstantiate", hip::hipGraphInstantiateWithFlags(&mut exec, graph, 0)));
            let _ = hip::hipGraphDestroy(graph);
            built?;
            if let Some(old) = self.exec.replace(exec) {
                // The old executable's launches were synchronised by the caller's rounds.
                let _ = hip::hipStreamSynchronize(s);
                let _ = hip::hipGraphExecDestroy(old);
            }
        }
        Ok(())
    }

    fn replay(&mut self) -> Result<(), Fail> {
        let exec = self.exec.ok_or("no graph built")?;
        // SAFETY: a live executable and stream (type invariant).
        check("hipGraphLaunch", unsafe { hip::hipGraphLaunch(exec, self.raw.streams[0]) })
    }

    fn replay_tracked(&mut self) -> Result<(), Fail> {
        let mut current = 0;
        // SAFETY: a valid out-pointer; live handles (type invariant).
        unsafe {
            check("hipGetDevice", hip::hipGetDevice(&mut current))?;
            self.replay()?;
            check("hipGetDevice", hip::hipGetDevice(&mut current))?;
            check("hipEventRecord", hip::hipEventRecord(self.raw.events[0], self.raw.streams[0]))
        }
    }

    fn sync(&mut self) -> Result<(), Fail> {
        // SAFETY: a live stream.
        check("hipStreamSynchronize", unsafe { hip::hipStreamSynchronize(self.raw.streams[0]) })
    }
}

impl Drop for Graphs {
    fn drop(&mut self) {
        use crate::graphs::RawGraphs;
        let _ = self.sync();
        if let Some(exec) = self.exec.take() {
            // SAFETY: idle (synchronised above), destroyed once.
            let _ = unsafe { hip::hipGraphExecDestroy(exec) };
        }
    }
}
