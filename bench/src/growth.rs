//! Whether the cost of an operation grows with the number already done:
//! batches shaped like the pull workload's (a copy in, a launch, a copy
//! out) go round-robin to four streams through the typed layer, and the
//! host time of each thousand is measured. A cost that grows (a table, a
//! list or a word that only ever gets longer) shows as the last thousands
//! slower than the first. Medians of the first and the last few thousands
//! are compared, so that one slow thousand (the machine, not the library)
//! at either end does not read as growth.

use std::time::Instant;

use hetero::{Context, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream};

use crate::measure::Fail;
use crate::sizes;

/// Batches per timed group.
pub const GROUP: usize = 1000;

/// Host microseconds per batch at the start and at the end, and of every
/// group in order.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Growth {
    /// Batches measured in all.
    pub batches: usize,
    /// Groups at each end whose median is taken.
    pub edge_groups: usize,
    /// Microseconds per batch, median of the first `edge_groups` groups.
    pub first_us: f64,
    /// Microseconds per batch, median of the last `edge_groups` groups.
    pub last_us: f64,
    /// `last_us / first_us`.
    pub ratio: f64,
    /// Microseconds per batch of each group.
    pub groups_us: Vec<f64>,
}

struct Lane {
    stream: Stream,
    x: DeviceBuffer<u32>,
    staged: PinnedBuffer<u32>,
    out: PinnedBuffer<u32>,
}

/// The growth measurement of one device, one group at a time, so that
/// several devices can take turns (a slow stretch of the machine then
/// shows on all of them, while a cost that grows shows on one).
pub struct Runner {
    kernel: hetero::Kernel,
    lanes: Vec<Lane>,
    groups_us: Vec<f64>,
}

impl Runner {
    /// Four untimed streams with their buffers.
    pub fn new(ctx: &Context) -> Result<Self, Fail> {
        let kernel = ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?;
        let lanes = (0..4)
            .map(|_| {
                Ok(Lane {
                    stream: ctx.untimed_stream()?,
                    x: ctx.alloc(sizes::WORDS)?,
                    staged: ctx.pinned_from_slice(&[1u32; sizes::WORDS])?,
                    out: ctx.alloc_pinned(sizes::WORDS)?,
                })
            })
            .collect::<Result<Vec<_>, hetero::Error>>()?;
        Ok(Runner { kernel, lanes, groups_us: Vec::new() })
    }

    /// One group of [`GROUP`] batches, timed; the device is drained
    /// (untimed) after it, so every group starts from empty queues.
    pub fn group(&mut self) -> Result<(), Fail> {
        let n = sizes::WORDS as u32;
        let start = Instant::now();
        for i in 0..GROUP {
            let Lane { stream, x, staged, out } = &mut self.lanes[i % 4];
            stream.copy(&*staged, &mut *x)?;
            let xs = x.slice_mut(..)?;
            // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
            unsafe {
                stream.launch(
                    &self.kernel,
                    LaunchConfig::linear(n.div_ceil(64), 64, 0),
                    &[(&xs).into(), n.into(), 3u32.into(), 1u32.into()],
                )?;
            }
            stream.copy(&*x, &mut *out)?;
        }
        self.groups_us.push(start.elapsed().as_secs_f64() * 1e6 / GROUP as f64);
        for lane in &self.lanes {
            lane.stream.synchronize()?;
        }
        Ok(())
    }

    /// Checks the results and sums the groups up.
    pub fn finish(self) -> Result<Growth, Fail> {
        for lane in &self.lanes {
            if lane.out.host_slice()?.iter().any(|&v| v != 4) {
                return Err("growth: a batch computed a wrong result".into());
            }
        }
        let groups_us = self.groups_us;
        if groups_us.is_empty() {
            return Err("growth: no group ran".into());
        }
        let edge_groups = (groups_us.len() / 4).clamp(1, 5);
        let first_us = median(&groups_us[..edge_groups]);
        let last_us = median(&groups_us[groups_us.len() - edge_groups..]);
        Ok(Growth {
            batches: groups_us.len() * GROUP,
            edge_groups,
            first_us,
            last_us,
            ratio: last_us / first_us,
            groups_us,
        })
    }
}

/// The median of a non-empty slice (the upper one of an even count).
fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}
