//! Whether the cost of an operation grows with the number already done:
//! batches shaped like the pull workload's (a copy in, a launch, a copy
//! out) go round-robin to four streams through the typed layer, and the
//! host time of each thousand is measured. A cost that grows (a table, a
//! list or a word that only ever gets longer) shows as the last thousands
//! slower than the first. Medians of the first and the last few thousands
//! are compared, so that one slow thousand (the machine, not the library)
//! at either end does not read as growth.
//!
//! A slow stretch of the machine that covers the last thousands still
//! reads as growth (seen on a GPU machine: a dozen groups at twice the
//! cost on two backends at once, then back). So the last few thousands
//! are also run, group by group in turn, on a control: a fresh context of
//! the same device, with no operations behind it. The cost against the
//! control's in the same stretch is growth that the machine cannot fake.

use std::time::Instant;

use hetero::{Context, DeviceBuffer, LaunchConfig, PinnedBuffer, Stream};

use crate::measure::{Fail, median};
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
    /// The control's microseconds per batch, median of its groups, each run
    /// right after one of the last `edge_groups` groups (module doc); `None`
    /// when the measurement had too few groups for one.
    pub control_us: Option<f64>,
    /// `last_us / control_us`.
    pub control_ratio: Option<f64>,
    /// Microseconds per batch of each control group.
    pub control_groups_us: Vec<f64>,
}

/// Groups at each end whose median is compared, of `groups` in all.
pub fn edge_groups(groups: usize) -> usize {
    (groups / 4).clamp(1, 5)
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
    /// The control (module doc), once started: it runs a group after each
    /// of this runner's.
    control: Option<Box<Runner>>,
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
        Ok(Runner { kernel, lanes, groups_us: Vec::new(), control: None })
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
                    LaunchConfig::covering([n, 1, 1], [self.kernel.block_size(hetero::BlockRequest::new(64)), 1, 1], 0),
                    &[(&xs).into(), n.into(), 3u32.into(), 1u32.into()],
                )?;
            }
            stream.copy(&*x, &mut *out)?;
        }
        self.groups_us.push(start.elapsed().as_secs_f64() * 1e6 / GROUP as f64);
        for lane in &self.lanes {
            lane.stream.synchronize()?;
        }
        match &mut self.control {
            Some(control) => control.group(),
            None => Ok(()),
        }
    }

    /// Starts the control (module doc) on `fresh`, a new context of the
    /// same device: after one untimed group of its own, it runs a group
    /// after each of this runner's from now on.
    pub fn start_control(&mut self, fresh: &Context) -> Result<(), Fail> {
        let mut control = Runner::new(fresh)?;
        control.group()?;
        control.groups_us.clear();
        self.control = Some(Box::new(control));
        Ok(())
    }

    /// Checks the results and sums the groups up.
    pub fn finish(self) -> Result<Growth, Fail> {
        for lane in &self.lanes {
            if lane.out.host_slice()?.iter().any(|&v| v != 4) {
                return Err("growth: a batch computed a wrong result".into());
            }
        }
        let control = self.control.map(|c| c.finish()).transpose()?;
        let groups_us = self.groups_us;
        if groups_us.is_empty() {
            return Err("growth: no group ran".into());
        }
        let edge_groups = edge_groups(groups_us.len());
        let first_us = median(&groups_us[..edge_groups]);
        let last_us = median(&groups_us[groups_us.len() - edge_groups..]);
        let control_groups_us = control.map(|c| c.groups_us).unwrap_or_default();
        let control_us = (!control_groups_us.is_empty()).then(|| median(&control_groups_us));
        Ok(Growth {
            batches: groups_us.len() * GROUP,
            edge_groups,
            first_us,
            last_us,
            ratio: last_us / first_us,
            groups_us,
            control_us,
            control_ratio: control_us.map(|c| last_us / c),
            control_groups_us,
        })
    }
}
