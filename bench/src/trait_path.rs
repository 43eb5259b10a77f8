//! The operations through hetero's raw [`Device`] trait, below the typed
//! layer: what a backend costs by itself. Against `hetero-untimed` it
//! splits hetero's cost into the typed layer's share (tracking, views,
//! argument checks) and the backend's.
//!
//! The stream has no timing, as `hetero-untimed`'s. The tracked operations
//! record a synchronisation event after the command, which is what the
//! typed layer's tracking asks of the backend; the others record nothing.

use hetero::{
    AllocId, AnyDevice, Device, DeviceRange, EventId, KernelArg, KernelId, LaunchConfig, StreamFlags, StreamId,
};

use crate::measure::{Fail, Path};
use crate::{Op, sizes};

/// Invariant: every handle belongs to `device` and only to this path;
/// `pinned` is the host pointer of `pinned_alloc` (`WORDS` u32).
struct Trait {
    device: AnyDevice,
    kernel: KernelId,
    /// Threads of the measured launch (as `sizes::launch_threads` picks them).
    threads: u32,
    a: StreamId,
    b: StreamId,
    x: AllocId,
    y: AllocId,
    pinned_alloc: AllocId,
    pinned: *mut u8,
    /// Timed, recorded by `EventRecord`.
    event: EventId,
    /// Synchronisation events: the tracked operations' marks, the fill of
    /// a cross-stream pair, and the pair's copy (which reads `x`).
    mark: EventId,
    filled: EventId,
    copied: EventId,
    /// Whether `copied` was recorded (the next fill waits for it).
    copying: bool,
}

const BYTES: usize = sizes::WORDS * 4;

impl Trait {
    fn whole(alloc: AllocId) -> DeviceRange {
        DeviceRange { alloc, offset: 0, len: BYTES }
    }

    /// Records the synchronisation mark on `a`, as tracking does.
    fn track(&self) -> Result<(), Fail> {
        // SAFETY: the event and the stream are this path's (type invariant).
        Ok(unsafe { self.device.record_event(self.mark, self.a) }?)
    }

    fn launch(&self) -> Result<(), Fail> {
        let args = [
            KernelArg::Buffer { alloc: self.x, offset: 0 },
            KernelArg::U32(sizes::WORDS as u32),
            KernelArg::U32(1),
            KernelArg::U32(1),
        ];
        // SAFETY: affine_u32(uint*, uint n, uint a, uint b) touches x[0..n),
        // and x holds n words; the handles are this path's; nothing else
        // writes x while the launch runs (the cross-stream pair's fill and
        // copy are ordered against it by stream order and events).
        Ok(unsafe { self.device.launch(self.kernel, &LaunchConfig::linear(1, self.threads, 0), &args, self.a) }?)
    }
}

impl Path for Trait {
    fn run(&mut self, op: Op, i: usize) -> Result<(), Fail> {
        // SAFETY: the handles are this path's and live until drop (type
        // invariant); `pinned` holds BYTES bytes and only copies on `a` use
        // it, which `settle` waits for; the ranges lie within their
        // allocations; the allocation freed was never used.
        unsafe {
            match op {
                Op::Launch => self.launch()?,
                Op::LaunchTracked => {
                    self.launch()?;
                    self.track()?;
                }
                Op::LaunchToCompletion => {
                    self.launch()?;
                    self.device.synchronize_stream(self.a)?;
                }
                Op::CopyH2d => self.device.copy_h2d(self.pinned, Self::whole(self.x), self.a)?,
                Op::CopyH2dTracked => {
                    self.device.copy_h2d(self.pinned, Self::whole(self.x), self.a)?;
                    self.track()?;
                }
                Op::CopyD2h => self.device.copy_d2h(Self::whole(self.x), self.pinned, self.a)?,
                Op::EventRecord => self.device.record_event(self.event, self.a)?,
                Op::CrossStreamPair => {
                    // The fill waits for the previous pair's copy, which reads x.
                    if self.copying {
                        self.device.stream_wait_event(self.a, self.copied)?;
                    }
                    self.device.fill_u32(Self::whole(self.x), i as u32, self.a)?;
                    self.device.record_event(self.filled, self.a)?;
                    self.device.stream_wait_event(self.b, self.filled)?;
                    self.device.copy_d2d(Self::whole(self.x), Self::whole(self.y), self.b)?;
                    self.device.record_event(self.copied, self.b)?;
                    self.copying = true;
                }
                Op::AllocFree1M => {
                    let alloc = self.device.alloc_device(sizes::ALLOC_BYTES)?;
                    self.device.free(alloc)?;
                }
                Op::RoundTrip => {
                    let mut word = [0u8; 4];
                    let range = DeviceRange { alloc: self.x, offset: 0, len: 4 };
                    self.device.copy_d2h_sync(range, word.as_mut_ptr(), self.a)?;
                }
                Op::AllocFree1MCached | Op::LaunchAwait | Op::LaunchCallback | Op::ThenEnqueue => {
                    return Err("hetero only".into());
                }
            }
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        // SAFETY: the streams are this path's.
        unsafe {
            self.device.synchronize_stream(self.a)?;
            self.device.synchronize_stream(self.b)?;
        }
        Ok(())
    }
}

impl Drop for Trait {
    fn drop(&mut self) {
        // SAFETY: once both streams are idle nothing uses the handles,
        // which are this path's; errors leave them to the device's drop.
        unsafe {
            let _ = self.device.synchronize_stream(self.a);
            let _ = self.device.synchronize_stream(self.b);
            for event in [self.event, self.mark, self.filled, self.copied] {
                let _ = self.device.destroy_event(event);
            }
            for alloc in [self.x, self.y, self.pinned_alloc] {
                let _ = self.device.free(alloc);
            }
            for stream in [self.a, self.b] {
                let _ = self.device.destroy_stream(stream);
            }
        }
    }
}

/// The trait path on `device`, compared with `hetero-untimed`.
pub fn path(device: AnyDevice) -> Result<Box<dyn Path>, Fail> {
    let untimed = StreamFlags { timing: false, ..StreamFlags::default() };
    let module = device.build_module(hetero::kernels::UTIL, &hetero::BuildOptions::default(), &[])?;
    // SAFETY: the module is this path's, built just now.
    let kernel = unsafe { device.kernel(module, "affine_u32") }?;
    // SAFETY: the kernel is this path's, looked up just now.
    let limits = unsafe { device.kernel_limits(kernel) }?;
    let threads = hetero::BlockRequest::new(crate::sizes::LAUNCH_THREADS).pick(device.info(), &limits);
    let (a, b) = (device.create_stream(untimed)?, device.create_stream(untimed)?);
    let (x, y) = (device.alloc_device(BYTES)?, device.alloc_device(BYTES)?);
    let pinned_alloc = device.alloc_pinned(BYTES)?;
    // SAFETY: a pinned allocation of this device, live until drop.
    let pinned = unsafe { device.pinned_ptr(pinned_alloc) }?.as_ptr();
    let (event, mark) = (device.create_event()?, device.create_sync_event()?);
    let (filled, copied) = (device.create_sync_event()?, device.create_sync_event()?);
    let path = Trait {
        device,
        kernel,
        threads,
        a,
        b,
        x,
        y,
        pinned_alloc,
        pinned,
        event,
        mark,
        filled,
        copied,
        copying: false,
    };
    // SAFETY: x is this path's and holds BYTES bytes.
    unsafe { path.device.fill_u32(Trait::whole(path.x), 1, path.a) }?;
    Ok(Box::new(path))
}
