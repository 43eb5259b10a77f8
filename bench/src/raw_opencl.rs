//! The operations through OpenCL's C API (opencl3's thin wrappers), as a
//! careful user would write them: one in-order queue per stream, events
//! only where an operation needs one, pinned memory as a mapped
//! `CL_MEM_ALLOC_HOST_PTR` buffer.

use std::ptr::null_mut;
use std::time::{Duration, Instant};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::device::{CL_DEVICE_TYPE_ALL, Device};
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_READ_WRITE, ClMem};
use opencl3::program::Program;
use opencl3::types::{CL_BLOCKING, CL_NON_BLOCKING, cl_mem};

use crate::measure::{Fail, Path};
use crate::{Op, sizes};

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
fn queue(context: &Context, properties: u64) -> Result<CommandQueue, String> {
    CommandQueue::create_default(context, properties).map_err(err)
}

/// Invariant: `pinned` points to the mapping of `_pinned_buffer` (`WORDS`
/// u32), used only by the copies on `a`, which `settle` waits for.
struct Raw {
    context: Context,
    a: CommandQueue,
    b: CommandQueue,
    kernel: Kernel,
    /// Work-items of the one work-group launched (hetero's paths launch as many).
    threads: usize,
    x: Buffer<u32>,
    y: Buffer<u32>,
    _pinned_buffer: Buffer<u32>,
    pinned: *mut u32,
    /// The last cross-stream pair's copy, which reads `x`.
    copied: Option<Event>,
    /// The last tracked command's event, kept until the next one replaces
    /// it: what tracking needs to know when the command is done.
    tracked: Option<Event>,
    /// Whether queue `a` is flushed as hetero's streams flush theirs, and
    /// its commands since the last flush, the first of them at `oldest`.
    flushing: bool,
    unflushed: u32,
    oldest: Option<Instant>,
}

/// hetero's flush policy (its OpenCL `stream.rs`): a queue is flushed once
/// 16 commands, or 100 µs since the oldest, have gone by unflushed.
const FLUSH_COMMANDS: u32 = 16;
const FLUSH_AFTER: Duration = Duration::from_micros(100);

impl Raw {
    /// Keeps `event` as the last tracked command's when `tracked`, else
    /// releases it at once.
    fn keep(&mut self, tracked: bool, event: Event) {
        if tracked {
            self.tracked = Some(event);
        }
    }

    /// Counts one command enqueued on `a`, flushing it as hetero would.
    fn enqueued(&mut self) -> Result<(), Fail> {
        if !self.flushing {
            return Ok(());
        }
        self.unflushed += 1;
        let oldest = *self.oldest.get_or_insert_with(Instant::now);
        if self.unflushed >= FLUSH_COMMANDS || oldest.elapsed() >= FLUSH_AFTER {
            (self.unflushed, self.oldest) = (0, None);
            self.a.flush()?;
        }
        Ok(())
    }
}

impl Path for Raw {
    fn run(&mut self, op: Op, i: usize) -> Result<(), Fail> {
        let words = sizes::WORDS;
        // SAFETY: the buffers hold `words` u32; the mapping is valid (type
        // invariant); affine_u32(uint*, uint, uint, uint) gets matching
        // arguments and touches x[0..n); the copy of a pair waits for its fill.
        unsafe {
            let pinned = std::slice::from_raw_parts_mut(self.pinned, words);
            match op {
                Op::Launch | Op::LaunchTracked | Op::LaunchToCompletion => {
                    self.kernel.set_arg(0, &self.x.get())?;
                    self.kernel.set_arg(1, &(words as u32))?;
                    self.kernel.set_arg(2, &1u32)?;
                    self.kernel.set_arg(3, &1u32)?;
                    let size = [self.threads];
                    let g = size.as_ptr();
                    let launched = self.a.enqueue_nd_range_kernel(self.kernel.get(), 1, std::ptr::null(), g, g, &[])?;
                    self.keep(op == Op::LaunchTracked, launched);
                    if op == Op::LaunchToCompletion {
                        self.a.finish()?;
                    } else {
                        self.enqueued()?;
                    }
                }
                Op::CopyH2d | Op::CopyH2dTracked => {
                    let copied = self.a.enqueue_write_buffer(&mut self.x, CL_NON_BLOCKING, 0, pinned, &[])?;
                    self.keep(op == Op::CopyH2dTracked, copied);
                    self.enqueued()?;
                }
                Op::CopyD2h => {
                    drop(self.a.enqueue_read_buffer(&self.x, CL_NON_BLOCKING, 0, pinned, &[])?);
                    self.enqueued()?;
                }
                Op::EventRecord => {
                    drop(self.a.enqueue_marker_with_wait_list(&[])?);
                    self.enqueued()?;
                }
                Op::CrossStreamPair => {
                    // The fill waits for the previous pair's copy, which reads
                    // x; each queue is flushed before the other waits on it.
                    let copied: Vec<_> = self.copied.iter().map(|e| e.get()).collect();
                    self.b.flush()?;
                    let filled = self.a.enqueue_fill_buffer(&mut self.x, &[i as u32], 0, words * 4, &copied)?;
                    self.a.flush()?;
                    let copy = self.b.enqueue_copy_buffer(&self.x, &mut self.y, 0, 0, words * 4, &[filled.get()])?;
                    self.copied = Some(copy);
                }
                Op::AllocFree1MCached | Op::LaunchAwait | Op::LaunchCallback | Op::ThenEnqueue => {
                    return Err("hetero only".into());
                }
                Op::AllocFree1M => {
                    drop(Buffer::<u8>::create(&self.context, CL_MEM_READ_WRITE, sizes::ALLOC_BYTES, null_mut())?)
                }
                Op::RoundTrip => drop(self.a.enqueue_read_buffer(&self.x, CL_BLOCKING, 0, &mut [0u32; 1], &[])?),
            }
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        self.a.finish()?;
        Ok(self.b.finish()?)
    }
}

/// Every operation of [`Op::ALL`] through raw OpenCL calls: on plain
/// in-order queues (`raw`, compared with hetero's streams without timing),
/// the same flushed as hetero flushes its queues (`raw-flushed`: NVIDIA's
/// driver leaves unflushed work unsubmitted, so this is what it costs to
/// keep the device busy while enqueuing), and on queues with profiling
/// enabled (`raw-prof`, compared with hetero's default, timed streams),
/// which shows what profiling itself costs.
pub fn paths(name: &str, threads: u32) -> Result<Vec<crate::RawPath>, Fail> {
    Ok(vec![
        ("raw", "hetero-untimed", Box::new(setup(name, 0, false, threads)?)),
        ("raw-flushed", "hetero-untimed", Box::new(setup(name, 0, true, threads)?)),
        ("raw-prof", "hetero", Box::new(setup(name, CL_QUEUE_PROFILING_ENABLE, false, threads)?)),
    ])
}

fn setup(name: &str, properties: u64, flushing: bool, threads: u32) -> Result<Raw, Fail> {
    let device = find(name)?;
    let context = Context::from_device(&device)?;
    let (a, b) = (queue(&context, properties)?, queue(&context, properties)?);
    let source = hetero::kernels::assemble(hetero::kernels::PRELUDE_OPENCL, hetero::kernels::UTIL);
    let program = Program::create_and_build_from_source(&context, &source, "-cl-std=CL1.2")?;
    let kernel = Kernel::create(&program, "affine_u32")?;
    let words = sizes::WORDS;
    // SAFETY: no host pointer is passed; the sizes are non-zero.
    let (x, y, pinned_buffer) = unsafe {
        (
            Buffer::<u32>::create(&context, CL_MEM_READ_WRITE, words, null_mut())?,
            Buffer::<u32>::create(&context, CL_MEM_READ_WRITE, words, null_mut())?,
            Buffer::<u32>::create(&context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, words, null_mut())?,
        )
    };
    let mut mapped: cl_mem = null_mut();
    let flags = CL_MAP_READ | CL_MAP_WRITE;
    // SAFETY: a blocking map of the whole buffer; the pointer stays valid
    // while the buffer lives (it is never unmapped before the end).
    drop(unsafe { a.enqueue_map_buffer(&pinned_buffer, CL_BLOCKING, flags, 0, words * 4, &mut mapped, &[]) }?);
    Ok(Raw {
        context,
        a,
        b,
        kernel,
        threads: threads as usize,
        x,
        y,
        _pinned_buffer: pinned_buffer,
        pinned: mapped.cast::<u32>(),
        copied: None,
        tracked: None,
        flushing,
        unflushed: 0,
        oldest: None,
    })
}

/// The `nth` OpenCL device called `name`, in platform and device order.
fn find_nth(name: &str, nth: usize) -> Result<Device, String> {
    let mut seen = 0;
    for platform in opencl3::platform::get_platforms().map_err(err)? {
        for id in platform.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default() {
            let device = Device::new(id);
            if device.name().map(|n| n.trim() == name).unwrap_or(false) {
                if seen == nth {
                    return Ok(device);
                }
                seen += 1;
            }
        }
    }
    Err(format!("no OpenCL device number {nth} called `{name}`"))
}

/// A copy of `bytes` between two OpenCL devices as OpenCL allows one: a
/// read from the source into host memory, then a write to the
/// destination, each device in its own context (`from` and `to`: a name
/// and which device of that name). With `both`, the reverse copy at the
/// same time. The median host time of `rounds` rounds, in microseconds.
pub fn peer_us(from: (&str, usize), to: (&str, usize), bytes: usize, both: bool, rounds: usize) -> Result<f64, Fail> {
    let devices = [find_nth(from.0, from.1)?, find_nth(to.0, to.1)?];
    let contexts = [Context::from_device(&devices[0]).map_err(err)?, Context::from_device(&devices[1]).map_err(err)?];
    let queues = [queue(&contexts[0], 0)?, queue(&contexts[1], 0)?];
    let buffer = |context: &Context| {
        // SAFETY: no host pointer is given.
        unsafe { Buffer::<u8>::create(context, CL_MEM_READ_WRITE, bytes.max(1), null_mut()) }.map_err(err)
    };
    let (src, mut dst) =
        ([buffer(&contexts[0])?, buffer(&contexts[1])?], [buffer(&contexts[0])?, buffer(&contexts[1])?]);
    let mut staging = [vec![0u8; bytes], vec![0u8; bytes]];
    crate::measure::median_us(rounds, &mut || {
        // One direction (a -> b), or both (also b -> a): reads first, then writes.
        let ways: &[(usize, usize)] = if both { &[(0, 1), (1, 0)] } else { &[(0, 1)] };
        let mut reads = Vec::new();
        for &(s, _) in ways {
            // SAFETY: the staging bytes outlive the read, waited for below.
            let read = unsafe { queues[s].enqueue_read_buffer(&src[s], CL_NON_BLOCKING, 0, &mut staging[s], &[]) };
            reads.push(read.map_err(err)?);
        }
        for q in &queues {
            q.flush().map_err(err)?;
        }
        for (&(s, d), read) in ways.iter().zip(&reads) {
            read.wait().map_err(err)?;
            // SAFETY: the staging bytes outlive the write, finished below.
            unsafe { queues[d].enqueue_write_buffer(&mut dst[d], CL_NON_BLOCKING, 0, &staging[s], &[]) }
                .map_err(err)?;
        }
        for q in &queues {
            q.finish().map_err(err)?;
        }
        Ok(())
    })
}
