//! The operations through hetero's typed layer (what a user writes).

use hetero::{Context, DeviceBuffer, Event, Kernel, LaunchConfig, PinnedBuffer, Stream};

use crate::measure::{Fail, Path};
use crate::{Op, sizes};

struct Typed<'a> {
    ctx: &'a Context,
    kernel: Kernel,
    a: Stream,
    b: Stream,
    x: DeviceBuffer<u32>,
    y: DeviceBuffer<u32>,
    pinned: PinnedBuffer<u32>,
    event: Event,
}

impl Path for Typed<'_> {
    fn run(&mut self, op: Op, i: usize) -> Result<(), Fail> {
        let Typed { ctx, kernel, a, b, x, y, pinned, event } = self;
        match op {
            Op::Launch | Op::LaunchTracked | Op::LaunchToCompletion => {
                let xs = x.slice_mut(..)?;
                let n = sizes::WORDS as u32;
                let config = LaunchConfig::linear(1, 64, 0);
                // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
                unsafe { a.launch(kernel, config, &[(&xs).into(), n.into(), 1u32.into(), 1u32.into()])? };
                if op == Op::LaunchToCompletion {
                    a.synchronize()?;
                }
            }
            Op::CopyH2d | Op::CopyH2dTracked => a.copy(&*pinned, x)?,
            Op::CopyD2h => a.copy(&*x, pinned)?,
            Op::EventRecord => a.record(event)?,
            Op::CrossStreamPair => {
                a.fill(&mut *x, i as u32)?;
                b.copy(&*x, y)?;
            }
            Op::AllocFree1M => drop(ctx.alloc::<u8>(sizes::ALLOC_BYTES)?),
            Op::RoundTrip => a.copy_to_host(x.slice(..1)?, &mut [0u32; 1])?,
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<(), Fail> {
        self.a.synchronize()?;
        Ok(self.b.synchronize()?)
    }
}

/// The operations of [`Op::ALL`] through the typed layer of `ctx`, on
/// streams with timing (`Context::stream`) or without. The event is a
/// user's [`Event`], which keeps time, as the raw paths' recorded event does.
pub fn path(ctx: &Context, timing: bool) -> Result<Box<dyn Path + '_>, Fail> {
    let stream = || if timing { ctx.stream() } else { ctx.untimed_stream() };
    let mut path = Typed {
        ctx,
        kernel: ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?,
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
