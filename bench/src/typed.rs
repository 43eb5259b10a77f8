//! The operations through hetero's typed layer (what a user writes).

use hetero::{Context, LaunchConfig};

use crate::measure::{Cost, Plan, per_op};
use crate::{Op, sizes};

/// Every operation of [`Op::ALL`] through the typed layer of `ctx`.
pub fn run(ctx: &Context, plan: Plan) -> hetero::Result<Vec<(Op, Cost)>> {
    let kernel = ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?;
    let (a, b) = (ctx.stream()?, ctx.stream()?);
    let mut x = ctx.alloc::<u32>(sizes::WORDS)?;
    let mut y = ctx.alloc::<u32>(sizes::WORDS)?;
    let mut pinned = ctx.alloc_pinned::<u32>(sizes::WORDS)?;
    let event = ctx.event()?;
    a.fill(&mut x, 1)?;
    a.synchronize()?;
    let n = sizes::WORDS as u32;
    let config = LaunchConfig::linear(1, 64, 0);
    let mut out = Vec::new();
    for op in Op::ALL {
        let count = op.count();
        let cost = match op {
            Op::Launch | Op::LaunchToCompletion => per_op(
                plan,
                count,
                |k| {
                    for _ in 0..k {
                        let xs = x.slice_mut(..)?;
                        // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
                        unsafe { a.launch(&kernel, config, &[(&xs).into(), n.into(), 1u32.into(), 1u32.into()])? };
                        if op == Op::LaunchToCompletion {
                            a.synchronize()?;
                        }
                    }
                    Ok(())
                },
                || a.synchronize(),
            )?,
            Op::CopyH2d => {
                per_op(plan, count, |k| (0..k).try_for_each(|_| a.copy(&pinned, &mut x)), || a.synchronize())?
            }
            Op::CopyD2h => {
                per_op(plan, count, |k| (0..k).try_for_each(|_| a.copy(&x, &mut pinned)), || a.synchronize())?
            }
            Op::EventRecord => per_op(plan, count, |k| (0..k).try_for_each(|_| a.record(&event)), || a.synchronize())?,
            Op::CrossStreamPair => per_op(
                plan,
                count,
                |k| {
                    (0..k).try_for_each(|i| {
                        a.fill(&mut x, i as u32)?;
                        b.copy(&x, &mut y)
                    })
                },
                || a.synchronize().and_then(|()| b.synchronize()),
            )?,
            Op::AllocFree1M => per_op(
                plan,
                count,
                |k| (0..k).try_for_each(|_| ctx.alloc::<u8>(sizes::ALLOC_BYTES).map(drop)),
                || Ok(()),
            )?,
            Op::RoundTrip => per_op(
                plan,
                count,
                |k| {
                    let mut word = [0u32; 1];
                    (0..k).try_for_each(|_| a.copy_to_host(x.slice(..1)?, &mut word))
                },
                || Ok(()),
            )?,
        };
        out.push((op, cost));
    }
    Ok(out)
}
