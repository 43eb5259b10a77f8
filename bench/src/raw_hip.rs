//! The operations through the HIP runtime directly (`cubecl-hip-sys`): what
//! hetero's HIP backend costs on top of the calls it makes, on device 0.

use std::ffi::{CString, c_char, c_void};

use cubecl_hip_sys as hip;

use crate::measure::{Plan, per_op};
use crate::{Op, PathResult, sizes};

fn check(call: &str, code: hip::hipError_t) -> Result<(), String> {
    if code == hip::hipError_t_hipSuccess { Ok(()) } else { Err(format!("{call}: error {code}")) }
}

fn rtc(call: &str, code: hip::hiprtcResult) -> Result<(), String> {
    if code == hip::hiprtcResult_HIPRTC_SUCCESS { Ok(()) } else { Err(format!("{call}: error {code}")) }
}

/// `affine_u32` compiled by hiprtc for the current device.
fn compile() -> Result<Vec<c_char>, String> {
    let source = hetero::kernels::assemble(hetero::kernels::PRELUDE_CUDA, hetero::kernels::UTIL);
    let source = CString::new(source).map_err(|e| e.to_string())?;
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
        got.map(|()| code)
    }
}

/// Every operation of [`Op::ALL`] through raw HIP calls.
pub fn run(plan: Plan) -> Result<Vec<PathResult>, String> {
    let words = sizes::WORDS;
    let mut module: hip::hipModule_t = std::ptr::null_mut();
    let mut function: hip::hipFunction_t = std::ptr::null_mut();
    let (mut a, mut b, mut pool): (hip::hipStream_t, hip::hipStream_t, hip::hipStream_t) =
        (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    let (mut x, mut y, mut pinned): (*mut c_void, *mut c_void, *mut c_void) =
        (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    let (mut event, mut filled): (hip::hipEvent_t, hip::hipEvent_t) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: every out-pointer is valid.
    let image = unsafe {
        check("hipSetDevice", hip::hipSetDevice(0))?;
        let image = compile()?;
        check("hipModuleLoadData", hip::hipModuleLoadData(&mut module, image.as_ptr().cast()))?;
        check("hipModuleGetFunction", hip::hipModuleGetFunction(&mut function, module, c"affine_u32".as_ptr()))?;
        for s in [&mut a, &mut b, &mut pool] {
            check("hipStreamCreateWithPriority", hip::hipStreamCreateWithPriority(s, hip::hipStreamNonBlocking, 0))?;
        }
        check("hipMalloc", hip::hipMalloc(&mut x, words * 4))?;
        check("hipMalloc", hip::hipMalloc(&mut y, words * 4))?;
        check("hipHostMalloc", hip::hipHostMalloc(&mut pinned, words * 4, hip::hipHostMallocPortable))?;
        check("hipEventCreate", hip::hipEventCreateWithFlags(&mut event, hip::hipEventDisableTiming))?;
        check("hipEventCreate", hip::hipEventCreateWithFlags(&mut filled, hip::hipEventDisableTiming))?;
        image
    };
    let n = words as u32;
    let one = 1u32;
    // SAFETY: live streams.
    let settle = || unsafe {
        check("hipStreamSynchronize", hip::hipStreamSynchronize(a))?;
        check("hipStreamSynchronize", hip::hipStreamSynchronize(b))
    };
    let mut costs = Vec::new();
    for op in Op::ALL {
        let count = op.count();
        // SAFETY (every block below): live handles; launch parameters match
        // affine_u32(uint*, uint, uint, uint) and it touches x[0..n); copies
        // stay within the 4 KiB buffers; settle waits before anything is released.
        let cost = match op {
            Op::Launch | Op::LaunchToCompletion => per_op(
                plan,
                count,
                |k| {
                    for _ in 0..k {
                        let mut params: [*mut c_void; 4] = [
                            (&raw const x).cast_mut().cast(),
                            (&raw const n).cast_mut().cast(),
                            (&raw const one).cast_mut().cast(),
                            (&raw const one).cast_mut().cast(),
                        ];
                        // SAFETY: see above.
                        unsafe {
                            check(
                                "hipModuleLaunchKernel",
                                hip::hipModuleLaunchKernel(
                                    function,
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
                                ),
                            )?;
                            if op == Op::LaunchToCompletion {
                                check("hipStreamSynchronize", hip::hipStreamSynchronize(a))?;
                            }
                        }
                    }
                    Ok(())
                },
                settle,
            )?,
            Op::CopyH2d => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|_| {
                        // SAFETY: as stated above the match.
                        unsafe { check("hipMemcpyHtoDAsync", hip::hipMemcpyHtoDAsync(x, pinned, words * 4, a)) }
                    })
                },
                settle,
            )?,
            Op::CopyD2h => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|_| {
                        // SAFETY: as stated above the match.
                        unsafe { check("hipMemcpyDtoHAsync", hip::hipMemcpyDtoHAsync(pinned, x, words * 4, a)) }
                    })
                },
                settle,
            )?,
            Op::EventRecord => per_op(
                plan,
                count,
                // SAFETY: see above.
                |k| (0..k).try_for_each(|_| unsafe { check("hipEventRecord", hip::hipEventRecord(event, a)) }),
                settle,
            )?,
            Op::CrossStreamPair => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|i| {
                        // SAFETY: see above.
                        unsafe {
                            check("hipMemsetD32Async", hip::hipMemsetD32Async(x, i as i32, words, a))?;
                            check("hipEventRecord", hip::hipEventRecord(filled, a))?;
                            check("hipStreamWaitEvent", hip::hipStreamWaitEvent(b, filled, 0))?;
                            check("hipMemcpyDtoDAsync", hip::hipMemcpyDtoDAsync(y, x, words * 4, b))?;
                            check("hipEventRecord", hip::hipEventRecord(event, b))
                        }
                    })
                },
                settle,
            )?,
            Op::AllocFree1M => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|_| {
                        let mut ptr: *mut c_void = std::ptr::null_mut();
                        // SAFETY: see above; the same stream-ordered pair hetero uses.
                        unsafe {
                            check("hipMallocAsync", hip::hipMallocAsync(&mut ptr, sizes::ALLOC_BYTES, pool))?;
                            check("hipStreamSynchronize", hip::hipStreamSynchronize(pool))?;
                            check("hipFreeAsync", hip::hipFreeAsync(ptr, pool))
                        }
                    })
                },
                // SAFETY: see above.
                || unsafe { check("hipStreamSynchronize", hip::hipStreamSynchronize(pool)) },
            )?,
            Op::RoundTrip => per_op(
                plan,
                count,
                |k| {
                    let mut word = 0u32;
                    (0..k).try_for_each(|_| {
                        // SAFETY: see above; the word outlives the synchronised copy.
                        unsafe {
                            check("hipMemcpyDtoHAsync", hip::hipMemcpyDtoHAsync((&raw mut word).cast(), x, 4, a))?;
                            check("hipStreamSynchronize", hip::hipStreamSynchronize(a))
                        }
                    })
                },
                || Ok(()),
            )?,
        };
        costs.push((op, cost));
    }
    settle()?;
    // SAFETY: everything is idle; each handle is released once.
    unsafe {
        let _ = hip::hipFree(x);
        let _ = hip::hipFree(y);
        let _ = hip::hipHostFree(pinned);
        let _ = hip::hipEventDestroy(event);
        let _ = hip::hipEventDestroy(filled);
        for s in [a, b, pool] {
            let _ = hip::hipStreamDestroy(s);
        }
    }
    drop(image);
    Ok(vec![PathResult { path: "raw", costs }])
}
