//! The operations through hetero's typed layer (what a user writes).

use std::sync::mpsc;

use hetero::{AllocatorOptions, Context, DeviceBuffer, Event, Kernel, LaunchConfig, PinnedBuffer, Stream};

use crate::measure::{Fail, Path};
use crate::{Op, sizes};

struct Typed {
    /// Contexts of the device with each allocator (`AllocFree1M*`).
    direct: Context,
    cached: Context,
    kernel: Kernel,
    /// Threads of the measured launch ([`sizes::launch_threads`]).
    threads: u32,
    a: Stream,
    b: Stream,
    x: DeviceBuffer<u32>,
    y: DeviceBuffer<u32>,
    pinned: PinnedBuffer<u32>,
    event: Event,
}

impl Typed {
    fn launch(&mut self) -> Result<(), Fail> {
        let xs = self.x.slice_mut(..)?;
        let n = sizes::WORDS as u32;
        let config = LaunchConfig::linear(1, self.threads, 0);
        // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
        unsafe { self.a.launch(&self.kernel, config, &[(&xs).into(), n.into(), 1u32.into(), 1u32.into()])? };
        Ok(())
    }

    /// Blocks until a callback registered now on `a` has run.
    fn callback(&self) -> Result<(), Fail> {
        let (tx, rx) = mpsc::channel();
        self.a.then(move |r| {
            let _ = tx.send(r);
        })?;
        Ok(rx.recv()??)
    }
}

impl Path for Typed {
    fn run(&mut self, op: Op, i: usize) -> Result<(), Fail> {
        match op {
            Op::Launch | Op::LaunchTracked => self.launch()?,
            Op::LaunchToCompletion => {
                self.launch()?;
                self.a.synchronize()?;
            }
            Op::LaunchAwait => {
                self.launch()?;
                futures::executor::block_on(self.a.synchronize_async())?;
            }
            Op::LaunchCallback => {
                self.launch()?;
                self.callback()?;
            }
            Op::ThenEnqueue => self.a.then(|_| {})?,
            Op::CopyH2d | Op::CopyH2dTracked => self.a.copy(&self.pinned, &mut self.x)?,
            Op::CopyD2h => self.a.copy(&self.x, &mut self.pinned)?,
            Op::EventRecord => self.a.record(&self.event)?,
            Op::CrossStreamPair => {
                self.a.fill(&mut self.x, i as u32)?;
                self.b.copy(&self.x, &mut self.y)?;
            }
            Op::AllocFree1M => drop(self.direct.alloc::<u8>(sizes::ALLOC_BYTES)?),
            Op::AllocFree1MCached => drop(self.cached.alloc::<u8>(sizes::ALLOC_BYTES)?),
            Op::RoundTrip => self.a.copy_to_host(self.x.slice(..1)?, &mut [0u32; 1])?,
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        self.a.synchronize()?;
        self.b.synchronize()?;
        // Callbacks of a stream run in order: once this one ran, all have.
        self.callback()
    }
}

/// The operations of [`Op::ALL`] through the typed layer of `ctx`, on
/// streams with timing (`Context::stream`) or without. The event is a
/// user's [`Event`], which keeps time, as the raw paths' recorded event does.
/// The alloc+free pairs use contexts of their own on the same device, with
/// the direct and the caching allocator.
pub fn path(ctx: &Context, timing: bool) -> Result<Box<dyn Path>, Fail> {
    let stream = || if timing { ctx.stream() } else { ctx.untimed_stream() };
    let device = || crate::fresh_device(ctx.info());
    let mut path = Typed {
        direct: Context::with_allocator(device()?, AllocatorOptions::direct()),
        cached: Context::with_allocator(device()?, AllocatorOptions::caching()),
        kernel: ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?,
        threads: sizes::launch_threads(ctx)?,
        a: stream()?,
        b: stream()?,
        x: ctx.alloc::<u32>(sizes::WORDS)?,
        y: ctx.alloc::<u32>(sizes::WORDS)?,
        pinned: ctx.alloc_pinned::<u32>(sizes::WORDS)?,
        event: ctx.event()?,
    };
    path.a.fill(&mut path.x, 1)?;
    path.settle()?;
    Ok(Box::new(path))
}
