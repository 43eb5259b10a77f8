//! The operations through the CUDA driver API directly (cudarc's `sys`
//! bindings: what hetero's CUDA backend costs on top of the driver) and
//! through cudarc's safe API (what a Rust user would otherwise write; it
//! tracks events per buffer too), on device 0 and its primary context.

use std::ffi::{CString, c_char, c_void};

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use cudarc::nvrtc;

use crate::measure::{Plan, per_op};
use crate::{Op, PathResult, sizes};

fn check(call: &str, code: sys::CUresult) -> Result<(), String> {
    if code == sys::CUresult::CUDA_SUCCESS { Ok(()) } else { Err(format!("{call}: {code:?}")) }
}

fn err(e: impl std::fmt::Debug) -> String {
    format!("{e:?}")
}

/// The portable `affine_u32` source as CUDA C++, and the device's `sm_XY`.
fn source_and_arch(ctx: &CudaContext) -> Result<(String, String), String> {
    let (major, minor) = (
        ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR).map_err(err)?,
        ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR).map_err(err)?,
    );
    let source = hetero::kernels::assemble(hetero::kernels::PRELUDE_CUDA, hetero::kernels::UTIL);
    Ok((source, format!("sm_{major}{minor}")))
}

/// Both vendor paths.
pub fn run(plan: Plan) -> Result<Vec<PathResult>, String> {
    Ok(vec![driver(plan)?, safe(plan)?])
}

/// The raw driver calls hetero's backend makes, without hetero.
fn driver(plan: Plan) -> Result<PathResult, String> {
    let ctx = CudaContext::new(0).map_err(err)?;
    let (source, arch) = source_and_arch(&ctx)?;
    let program = nvrtc::result::create_program(&CString::new(source).map_err(err)?, None).map_err(err)?;
    // SAFETY: the program is live until destroyed below.
    let ptx: Vec<c_char> = unsafe {
        nvrtc::result::compile_program(program, &[format!("--gpu-architecture={arch}")]).map_err(err)?;
        let ptx = nvrtc::result::get_ptx(program).map_err(err)?;
        let _ = nvrtc::result::destroy_program(program);
        ptx
    };
    ctx.bind_to_thread().map_err(err)?;
    let words = sizes::WORDS;
    let mut module: sys::CUmodule = std::ptr::null_mut();
    let mut function: sys::CUfunction = std::ptr::null_mut();
    let (mut a, mut b): (sys::CUstream, sys::CUstream) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut x, mut y, mut pool): (sys::CUdeviceptr, sys::CUdeviceptr, sys::CUstream) = (0, 0, std::ptr::null_mut());
    let mut pinned: *mut c_void = std::ptr::null_mut();
    let (mut event, mut filled): (sys::CUevent, sys::CUevent) = (std::ptr::null_mut(), std::ptr::null_mut());
    let nonblocking = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
    let no_timing = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
    // SAFETY: every out-pointer is valid; the context is current.
    unsafe {
        check("cuModuleLoadData", sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()))?;
        check("cuModuleGetFunction", sys::cuModuleGetFunction(&mut function, module, c"affine_u32".as_ptr()))?;
        check("cuStreamCreate", sys::cuStreamCreateWithPriority(&mut a, nonblocking, 0))?;
        check("cuStreamCreate", sys::cuStreamCreateWithPriority(&mut b, nonblocking, 0))?;
        check("cuStreamCreate", sys::cuStreamCreateWithPriority(&mut pool, nonblocking, 0))?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut x, words * 4))?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut y, words * 4))?;
        check("cuMemHostAlloc", sys::cuMemHostAlloc(&mut pinned, words * 4, sys::CU_MEMHOSTALLOC_PORTABLE))?;
        check("cuEventCreate", sys::cuEventCreate(&mut event, no_timing))?;
        check("cuEventCreate", sys::cuEventCreate(&mut filled, no_timing))?;
    }
    let n = words as u32;
    let one = 1u32;
    // SAFETY: live streams of the current context.
    let settle = || unsafe {
        check("cuStreamSynchronize", sys::cuStreamSynchronize(a))?;
        check("cuStreamSynchronize", sys::cuStreamSynchronize(b))
    };
    let mut costs = Vec::new();
    for op in Op::ALL {
        let count = op.count();
        // SAFETY (every block below): live handles of the current context;
        // launch parameters match affine_u32(uint*, uint, uint, uint) and it
        // touches x[0..n); copies stay within the 4 KiB buffers; settle waits
        // before anything is released.
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
                                "cuLaunchKernel",
                                sys::cuLaunchKernel(
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
                                check("cuStreamSynchronize", sys::cuStreamSynchronize(a))?;
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
                        unsafe { check("cuMemcpyHtoDAsync", sys::cuMemcpyHtoDAsync_v2(x, pinned, words * 4, a)) }
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
                        unsafe { check("cuMemcpyDtoHAsync", sys::cuMemcpyDtoHAsync_v2(pinned, x, words * 4, a)) }
                    })
                },
                settle,
            )?,
            Op::EventRecord => per_op(
                plan,
                count,
                // SAFETY: see above.
                |k| (0..k).try_for_each(|_| unsafe { check("cuEventRecord", sys::cuEventRecord(event, a)) }),
                settle,
            )?,
            Op::CrossStreamPair => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|i| {
                        // SAFETY: see above.
                        unsafe {
                            check("cuMemsetD32Async", sys::cuMemsetD32Async(x, i as u32, words, a))?;
                            check("cuEventRecord", sys::cuEventRecord(filled, a))?;
                            check("cuStreamWaitEvent", sys::cuStreamWaitEvent(b, filled, 0))?;
                            check("cuMemcpyDtoDAsync", sys::cuMemcpyDtoDAsync_v2(y, x, words * 4, b))?;
                            check("cuEventRecord", sys::cuEventRecord(event, b))
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
                        let mut ptr: sys::CUdeviceptr = 0;
                        // SAFETY: see above; the same stream-ordered pair hetero uses.
                        unsafe {
                            check("cuMemAllocAsync", sys::cuMemAllocAsync(&mut ptr, sizes::ALLOC_BYTES, pool))?;
                            check("cuStreamSynchronize", sys::cuStreamSynchronize(pool))?;
                            check("cuMemFreeAsync", sys::cuMemFreeAsync(ptr, pool))
                        }
                    })
                },
                // SAFETY: see above.
                || unsafe { check("cuStreamSynchronize", sys::cuStreamSynchronize(pool)) },
            )?,
            Op::RoundTrip => per_op(
                plan,
                count,
                |k| {
                    let mut word = 0u32;
                    (0..k).try_for_each(|_| {
                        // SAFETY: see above; the word outlives the synchronised copy.
                        unsafe {
                            check("cuMemcpyDtoHAsync", sys::cuMemcpyDtoHAsync_v2((&raw mut word).cast(), x, 4, a))?;
                            check("cuStreamSynchronize", sys::cuStreamSynchronize(a))
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
        let _ = sys::cuMemFree_v2(x);
        let _ = sys::cuMemFree_v2(y);
        let _ = sys::cuMemFreeHost(pinned);
        let _ = sys::cuEventDestroy_v2(event);
        let _ = sys::cuEventDestroy_v2(filled);
        for s in [a, b, pool] {
            let _ = sys::cuStreamDestroy_v2(s);
        }
        let _ = sys::cuModuleUnload(module);
    }
    Ok(PathResult { path: "raw", costs })
}

/// The same operations through cudarc's safe API.
fn safe(plan: Plan) -> Result<PathResult, String> {
    let ctx = CudaContext::new(0).map_err(err)?;
    let (source, arch) = source_and_arch(&ctx)?;
    let options = nvrtc::CompileOptions { options: vec![format!("--gpu-architecture={arch}")], ..Default::default() };
    let ptx = nvrtc::compile_ptx_with_opts(source, options).map_err(err)?;
    let function = ctx.load_module(ptx).map_err(err)?.load_function("affine_u32").map_err(err)?;
    let (a, b) = (ctx.new_stream().map_err(err)?, ctx.new_stream().map_err(err)?);
    let words = sizes::WORDS;
    let mut x = a.alloc_zeros::<u32>(words).map_err(err)?;
    let mut y = a.alloc_zeros::<u32>(words).map_err(err)?;
    // SAFETY: zeroed below before any use.
    let mut pinned =
        unsafe { ctx.alloc_pinned_with_flags::<u32>(words, sys::CU_MEMHOSTALLOC_PORTABLE) }.map_err(err)?;
    pinned.as_mut_slice().map_err(err)?.fill(0);
    let event = ctx.new_event(None).map_err(err)?;
    let n = words as u32;
    let one = 1u32;
    let config = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (64, 1, 1), shared_mem_bytes: 0 };
    let settle = || a.synchronize().and_then(|()| b.synchronize()).map_err(err);
    let mut costs = Vec::new();
    for op in Op::ALL {
        let count = op.count();
        let cost = match op {
            Op::Launch | Op::LaunchToCompletion => per_op(
                plan,
                count,
                |k| {
                    for _ in 0..k {
                        let mut builder = a.launch_builder(&function);
                        builder.arg(&mut x).arg(&n).arg(&one).arg(&one);
                        // SAFETY: the arguments match affine_u32 and it touches x[0..n).
                        unsafe { builder.launch(config) }.map_err(err)?;
                        if op == Op::LaunchToCompletion {
                            a.synchronize().map_err(err)?;
                        }
                    }
                    Ok(())
                },
                settle,
            )?,
            Op::CopyH2d => {
                per_op(plan, count, |k| (0..k).try_for_each(|_| a.memcpy_htod(&pinned, &mut x).map_err(err)), settle)?
            }
            Op::CopyD2h => {
                per_op(plan, count, |k| (0..k).try_for_each(|_| a.memcpy_dtoh(&x, &mut pinned).map_err(err)), settle)?
            }
            Op::EventRecord => per_op(plan, count, |k| (0..k).try_for_each(|_| event.record(&a).map_err(err)), settle)?,
            Op::CrossStreamPair => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|_| {
                        a.memset_zeros(&mut x).map_err(err)?;
                        b.memcpy_dtod(&x, &mut y).map_err(err)
                    })
                },
                settle,
            )?,
            Op::AllocFree1M => per_op(
                plan,
                count,
                // SAFETY: the memory is never read.
                |k| (0..k).try_for_each(|_| unsafe { a.alloc::<u8>(sizes::ALLOC_BYTES) }.map(drop).map_err(err)),
                settle,
            )?,
            Op::RoundTrip => per_op(
                plan,
                count,
                |k| {
                    let mut word = [0u32; 1];
                    (0..k).try_for_each(|_| {
                        a.memcpy_dtoh(&x.slice(0..1), &mut word).map_err(err)?;
                        a.synchronize().map_err(err)
                    })
                },
                || Ok(()),
            )?,
        };
        costs.push((op, cost));
    }
    settle()?;
    Ok(PathResult { path: "cudarc", costs })
}
