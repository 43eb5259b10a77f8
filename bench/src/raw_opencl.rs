//! The operations through OpenCL's C API (opencl3's thin wrappers), as a
//! careful user would write them: one in-order queue per stream, events
//! only where an operation needs one, pinned memory as a mapped
//! `CL_MEM_ALLOC_HOST_PTR` buffer.

use std::ptr::null_mut;

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_ALL, Device};
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE, ClMem};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING, cl_mem};

use crate::measure::{Plan, per_op};
use crate::{Op, PathResult, sizes};

fn err(e: impl std::fmt::Debug) -> String {
    format!("{e:?}")
}

/// The device called `name` (the one hetero ran on), first match.
fn find(name: &str) -> Result<Device, String> {
    for platform in opencl3::platform::get_platforms().map_err(err)? {
        for id in platform.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default() {
            let device = Device::new(id);
            if device.name().map(|n| n.trim() == name).unwrap_or(false) {
                return Ok(device);
            }
        }
    }
    Err(format!("no OpenCL device called `{name}`"))
}

#[allow(deprecated)] // clCreateCommandQueue: the constructor every OpenCL 1.2+ platform has
fn queue(context: &Context) -> Result<CommandQueue, String> {
    CommandQueue::create_default(context, 0).map_err(err)
}

/// Every operation of [`Op::ALL`] through raw OpenCL calls.
pub fn run(name: &str, plan: Plan) -> Result<Vec<PathResult>, String> {
    let device = find(name)?;
    let context = Context::from_device(&device).map_err(err)?;
    let (a, b) = (queue(&context)?, queue(&context)?);
    let source = hetero::kernels::assemble(hetero::kernels::PRELUDE_OPENCL, hetero::kernels::UTIL);
    let program = Program::create_and_build_from_source(&context, &source, "-cl-std=CL1.2")?;
    let kernel = Kernel::create(&program, "affine_u32").map_err(err)?;
    let words = sizes::WORDS;
    // SAFETY: no host pointer is passed; the sizes are non-zero.
    let (mut x, mut y, pinned_buffer) = unsafe {
        (
            Buffer::<u32>::create(&context, CL_MEM_READ_WRITE, words, null_mut()).map_err(err)?,
            Buffer::<u32>::create(&context, CL_MEM_READ_WRITE, words, null_mut()).map_err(err)?,
            Buffer::<u32>::create(&context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, words, null_mut())
                .map_err(err)?,
        )
    };
    let mut mapped: cl_mem = null_mut();
    // SAFETY: a blocking map of the whole buffer; the pointer stays valid
    // while the buffer lives (it is never unmapped before the end).
    unsafe {
        a.enqueue_map_buffer(&pinned_buffer, CL_BLOCKING, CL_MAP_READ | CL_MAP_WRITE, 0, words * 4, &mut mapped, &[])
    }
    .map_err(err)?;
    // SAFETY: the mapping covers `words` u32 and is only touched by the
    // copies below, which are ordered on queue `a` and finished by `settle`.
    let pinned = unsafe { std::slice::from_raw_parts_mut(mapped.cast::<u32>(), words) };
    let n = words as u32;
    let (global, local) = ([64usize], [64usize]);
    let settle = || a.finish().and_then(|()| b.finish()).map_err(err);
    let mut costs = Vec::new();
    for op in Op::ALL {
        let count = op.count();
        let cost = match op {
            Op::Launch | Op::LaunchToCompletion => per_op(
                plan,
                count,
                |k| {
                    for _ in 0..k {
                        // SAFETY: the arguments match affine_u32(uint*, uint, uint, uint);
                        // it touches x[0..n) of an n-element buffer.
                        unsafe {
                            kernel.set_arg(0, &x.get()).map_err(err)?;
                            kernel.set_arg(1, &n).map_err(err)?;
                            kernel.set_arg(2, &1u32).map_err(err)?;
                            kernel.set_arg(3, &1u32).map_err(err)?;
                            a.enqueue_nd_range_kernel(
                                kernel.get(),
                                1,
                                std::ptr::null(),
                                global.as_ptr(),
                                local.as_ptr(),
                                &[],
                            )
                            .map_err(err)?;
                        }
                        if op == Op::LaunchToCompletion {
                            a.finish().map_err(err)?;
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
                        // SAFETY: the mapped source outlives the copies (finished by settle).
                        unsafe { a.enqueue_write_buffer(&mut x, CL_NON_BLOCKING, 0, pinned, &[]) }
                            .map(drop)
                            .map_err(err)
                    })
                },
                settle,
            )?,
            Op::CopyD2h => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|_| {
                        // SAFETY: the mapped destination outlives the copies and
                        // nothing else touches it meanwhile.
                        unsafe { a.enqueue_read_buffer(&x, CL_NON_BLOCKING, 0, pinned, &[]) }.map(drop).map_err(err)
                    })
                },
                settle,
            )?,
            Op::EventRecord => per_op(
                plan,
                count,
                |k| {
                    // SAFETY: an empty wait list.
                    (0..k).try_for_each(|_| unsafe { a.enqueue_marker_with_wait_list(&[]) }.map(drop).map_err(err))
                },
                settle,
            )?,
            Op::CrossStreamPair => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|i| {
                        // SAFETY: both buffers hold `words` u32; the copy waits for the fill.
                        unsafe {
                            let filled = a.enqueue_fill_buffer(&mut x, &[i as u32], 0, words * 4, &[]).map_err(err)?;
                            b.enqueue_copy_buffer(&x, &mut y, 0, 0, words * 4, &[filled.get()]).map(drop).map_err(err)
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
                        // SAFETY: no host pointer; released on drop.
                        unsafe { Buffer::<u8>::create(&context, CL_MEM_READ_WRITE, sizes::ALLOC_BYTES, null_mut()) }
                            .map(drop)
                            .map_err(err)
                    })
                },
                || Ok(()),
            )?,
            Op::RoundTrip => per_op(
                plan,
                count,
                |k| {
                    let mut word = [0u32; 1];
                    (0..k).try_for_each(|_| {
                        // SAFETY: a blocking read into a local word.
                        unsafe { a.enqueue_read_buffer(&x, CL_BLOCKING, 0, &mut word, &[]) }.map(drop).map_err(err)
                    })
                },
                || Ok(()),
            )?,
        };
        costs.push((op, cost));
    }
    settle()?;
    Ok(vec![PathResult { path: "raw", costs }])
}
