//! The wave's grid and schedule, its constants and the width of its
//! launches: what the single-device run (`wave.rs`) and the run split
//! across devices (`split.rs`) share.

use hetero::{BlockRequest, Kernel, LaunchConfig};

use super::Size;

/// `(c dt / h)^2`.
pub const C2: f32 = 0.25;
/// Threads per block (one row of them, each computing
/// [`hetero::kernels::WAVE_ROWS`] cells of its column) on a device that
/// allows it; see [`block_width`].
pub const BLOCK_WIDTH: u32 = 256;
/// Rotating device wavefields.
pub const FIELDS: usize = 5;
/// Device buffers the asynchronous variants stage snapshots in (`wave.rs`).
pub const STAGING: usize = 2;
/// Snapshots of a balanced run (at most; fewer when the size's steps do
/// not allow that many at the balanced interval).
pub const BALANCED_SNAPSHOTS: usize = 20;

/// Grid and schedule of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grid {
    /// Cells per row.
    pub nx: usize,
    /// Rows.
    pub ny: usize,
    /// Time steps.
    pub steps: usize,
    /// Steps between snapshots.
    pub snapshot_every: usize,
}

impl Grid {
    /// The grid of a size class.
    pub fn of(size: Size) -> Self {
        match size {
            Size::Small => Grid { nx: 128, ny: 128, steps: 300, snapshot_every: 30 },
            Size::Medium => Grid { nx: 1024, ny: 1024, steps: 1000, snapshot_every: 100 },
            Size::Large => Grid { nx: 4096, ny: 4096, steps: 1000, snapshot_every: 100 },
        }
    }

    /// The grid a run uses: the size class's with the tuning's overrides;
    /// the error says which value is out of range and what is allowed.
    pub fn tuned(size: Size, tuning: &super::Tuning) -> Result<Self, String> {
        let mut g = Grid::of(size);
        if let Some(side) = tuning.wave_grid {
            (g.nx, g.ny) = (side, side);
        }
        if let Some(every) = tuning.wave_snapshot_every {
            g.snapshot_every = every;
        }
        if g.nx < 5 {
            return Err(format!("--wave-grid {} is too small: the stencil needs at least 5 cells a side", g.nx));
        }
        if g.snapshot_every == 0 || g.snapshot_every > g.steps {
            return Err(format!(
                "--snapshot-every {} is out of range: size {} runs {} steps, so 1..={} steps between snapshots",
                g.snapshot_every,
                size.name(),
                g.steps,
                g.steps
            ));
        }
        Ok(g)
    }

    /// Host memory a run needs, in bytes (estimate from above): the float64
    /// reference (three fields and every snapshot) and, per variant, the
    /// pinned float32 snapshots and their copy.
    pub fn host_bytes(&self) -> u128 {
        let cells = self.cells() as u128;
        // The balanced run that follows may keep more snapshots.
        let snapshots = self.snapshots().max(self.steps.min(BALANCED_SNAPSHOTS)) as u128;
        cells * 3 * 8 + snapshots * cells * (8 + 3 * 2 * 4)
    }

    /// Device memory a run needs, in bytes: the rotating fields and the
    /// staging buffers.
    pub fn device_bytes(&self) -> u128 {
        self.cells() as u128 * (FIELDS + STAGING) as u128 * 4
    }

    pub(crate) fn cells(&self) -> usize {
        self.nx * self.ny
    }

    pub(crate) fn snapshots(&self) -> usize {
        self.steps / self.snapshot_every
    }

    pub(crate) fn source(&self) -> (usize, usize) {
        (self.nx / 2, self.ny / 2)
    }
}

/// Threads per block of `wave_step`: [`BLOCK_WIDTH`], or the most the
/// kernel can run on its device, rounded down to its preferred multiple
/// (whole warps) where it holds one. Any width works.
pub fn block_width(kernel: &Kernel) -> u32 {
    kernel.block_size(BlockRequest::new(BLOCK_WIDTH))
}

/// The launch of `wave_step` or `wave_rows` over `rows` rows `nx` cells
/// wide, `width` threads a block, each thread computing
/// [`hetero::kernels::WAVE_ROWS`] cells of its column.
pub fn rows_launch(nx: usize, rows: usize, width: u32) -> LaunchConfig {
    let (nx, rows) = (u32::try_from(nx).unwrap_or(u32::MAX), u32::try_from(rows).unwrap_or(u32::MAX));
    LaunchConfig {
        grid: [nx.div_ceil(width), rows.div_ceil(hetero::kernels::WAVE_ROWS), 1],
        block: [width, 1, 1],
        shared_bytes: 0,
    }
}
