//! Deterministic float sums, prefix sums and segmented sums
//! ([`Algorithms::deterministic`]): `fixed.kern`'s kernels, launched level
//! by level, in the order of [`crate::ops::pairwise`].

use std::sync::{Arc, PoisonError};

use super::{Algorithms, BLOCKS_PER_UNIT, Element, FIXED_ITEMS, MAX_BLOCKS, ScanKind, exchange_len};
use crate::block::BlockRequest;
use crate::device::{BuildOptions, Device, LaunchConfig};
use crate::error::Result;
use crate::safe::{Buffer, Kernel, Module, OnDevice, Slice, SliceMut, Stream};

/// The fixed-order kernels of one float type.
pub(super) struct FixedBuilt<D: Device> {
    ty: &'static str,
    reduce: Kernel<D>,
    scan: Kernel<D>,
    segmented: Kernel<D>,
    _module: Module<D>,
}

/// The source of the fixed-order kernels for `T`.
pub(super) fn source<T: Element>() -> String {
    let body = hetero_kernels::FIXED.replace("$T", T::NAME).replace("$S", T::SUFFIX);
    format!("/* hetero::algorithms, fixed order: {} */\n#define ALG_FIXED_ITEMS {FIXED_ITEMS}u\n{body}", T::NAME)
}

impl<D: Device> Algorithms<D> {
    /// The fixed-order kernels for `T`, built on first use (deterministically).
    fn fixed<T: Element>(&self) -> Result<Arc<FixedBuilt<D>>> {
        let mut built = self.fixed.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = built.iter().find(|b| b.ty == T::NAME) {
            return Ok(Arc::clone(b));
        }
        self.check_fp64::<T>()?;
        #[cfg(feature = "host")]
        let hosts = super::fixed_host::kernels::<T>();
        #[cfg(not(feature = "host"))]
        let hosts: Vec<crate::host_kernel::HostKernel> = Vec::new();
        let module = self.ctx.build_module_with_options(&source::<T>(), &BuildOptions::deterministic(), &hosts)?;
        let b = Arc::new(FixedBuilt {
            ty: T::NAME,
            reduce: module.kernel("alg_fixed_reduce")?,
            scan: module.kernel("alg_fixed_scan")?,
            segmented: module.kernel("alg_fixed_segmented")?,
            _module: module,
        });
        built.push(Arc::clone(&b));
        Ok(b)
    }

    /// Threads per block of a fixed-order kernel: the largest power of two
    /// at most the threads asked for, the kernel's limit, and what leaves
    /// the tile's exchange within the device's shared memory.
    fn fixed_threads<T: Element>(&self, kernel: &Kernel<D>) -> u32 {
        let size = std::mem::size_of::<T>();
        let limit = self.ctx.info().shared_memory_per_block;
        let mut threads = kernel.block_size(BlockRequest::new(self.threads)).max(1);
        threads = 1 << threads.ilog2();
        while threads > 1 && exchange_len(threads, FIXED_ITEMS) * size > limit {
            threads /= 2;
        }
        threads
    }

    /// The launch of a fixed kernel over `work` tiles or segments.
    fn fixed_launch<T: Element>(&self, threads: u32, work: usize) -> LaunchConfig {
        let units = self.ctx.info().compute_units.max(1);
        let cap = units.saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS);
        let blocks = u32::try_from(work).unwrap_or(u32::MAX).clamp(1, cap);
        LaunchConfig::linear(blocks, threads, exchange_len(threads, FIXED_ITEMS) * std::mem::size_of::<T>())
    }

    /// The tree sum of `input` into `out[0]`.
    pub(super) fn fixed_reduce<T: Element>(
        &self,
        stream: &Stream<D>,
        input: Slice<'_, T, OnDevice, D>,
        out: SliceMut<'_, T, OnDevice, D>,
    ) -> Result<()> {
        if input.is_empty() {
            return stream.copy_from_host(&[T::zeroed()], out);
        }
        let built = self.fixed::<T>()?;
        let threads = self.fixed_threads::<T>(&built.reduce);
        let tile = threads as usize * FIXED_ITEMS as usize;
        // Each level sums tiles, aligned subtrees, into the next level's input.
        let mut level: Option<Buffer<T, OnDevice, D>> = None;
        loop {
            let current = match &level {
                Some(buffer) => buffer.slice(..)?,
                None => input,
            };
            let tiles = current.len().div_ceil(tile);
            if tiles == 1 {
                return self.tile_sums(stream, &built, threads, &current, &out);
            }
            let mut next = stream.alloc::<T>(tiles)?;
            self.tile_sums(stream, &built, threads, &current, &next.slice_mut(..)?)?;
            level = Some(next);
        }
    }

    /// Launches `alg_fixed_reduce`: the tree sum of each tile of `x` (tiles
    /// of `threads * FIXED_ITEMS`) into `sums`, which must hold them all.
    fn tile_sums<T: Element>(
        &self,
        stream: &Stream<D>,
        built: &FixedBuilt<D>,
        threads: u32,
        x: &Slice<'_, T, OnDevice, D>,
        sums: &SliceMut<'_, T, OnDevice, D>,
    ) -> Result<()> {
        let tiles = x.len().div_ceil(threads as usize * FIXED_ITEMS as usize);
        if sums.len() < tiles {
            return Err(self.error(
                "reduce",
                crate::error::ErrorKind::OutOfBounds,
                format!("{tiles} tile sums do not fit {} elements", sums.len()),
            ));
        }
        // SAFETY: alg_fixed_reduce reads x[0..len) and writes sums[0..tiles),
        // within `sums` (checked above).
        unsafe {
            stream.launch(
                &built.reduce,
                self.fixed_launch::<T>(threads, tiles),
                &[x.into(), sums.into(), (x.len() as u32).into()],
            )
        }
    }

    /// The prefix sums of `input` into `output`, in the tree's order.
    pub(super) fn fixed_scan<T: Element>(
        &self,
        stream: &Stream<D>,
        input: Slice<'_, T, OnDevice, D>,
        output: SliceMut<'_, T, OnDevice, D>,
        kind: ScanKind,
    ) -> Result<()> {
        let built = self.fixed::<T>()?;
        let threads = self.fixed_threads::<T>(&built.scan);
        let tile = threads as usize * FIXED_ITEMS as usize;
        let n = input.len();
        let shift = u32::from(kind == ScanKind::Inclusive);
        let offsets = self.fixed_offsets(stream, &built, threads, input, (n + shift as usize).div_ceil(tile))?;
        let offsets = offsets.slice(..)?;
        let config = self.fixed_launch::<T>(threads, (n + shift as usize).div_ceil(tile));
        // SAFETY: alg_fixed_scan reads input[0..n) and offsets[0..tiles),
        // and writes output[0..n).
        unsafe {
            stream.launch(
                &built.scan,
                config,
                &[
                    (&input).into(),
                    (&output).into(),
                    (&offsets).into(),
                    (n as u32).into(),
                    (n as u32).into(),
                    shift.into(),
                ],
            )
        }
    }

    /// `E` at the first element of each of the first `count` tiles of `x`
    /// (tiles of `threads * FIXED_ITEMS`): the exclusive prefix sums of the
    /// tile sums, by the same rule, `count` at most the tiles plus one.
    fn fixed_offsets<T: Element>(
        &self,
        stream: &Stream<D>,
        built: &FixedBuilt<D>,
        threads: u32,
        x: Slice<'_, T, OnDevice, D>,
        count: usize,
    ) -> Result<Buffer<T, OnDevice, D>> {
        let mut offsets = stream.alloc::<T>(count.max(1))?;
        if count <= 1 {
            // E(0): the root's prefix.
            stream.copy_from_host(&[T::zeroed()], &mut offsets)?;
            return Ok(offsets);
        }
        let tile = threads as usize * FIXED_ITEMS as usize;
        let tiles = x.len().div_ceil(tile);
        let mut sums = stream.alloc::<T>(tiles)?;
        self.tile_sums(stream, built, threads, &x, &sums.slice_mut(..)?)?;
        let sums = sums.slice(..)?;
        let above = self.fixed_offsets(stream, built, threads, sums, count.div_ceil(tile))?;
        let above = above.slice(..)?;
        {
            let out = offsets.slice_mut(..)?;
            let config = self.fixed_launch::<T>(threads, count.div_ceil(tile));
            // SAFETY: reads sums[0..tiles) and above[0..), writes out[0..count);
            // count <= tiles + 1, so E(count - 1) lies within the sums.
            unsafe {
                stream.launch(
                    &built.scan,
                    config,
                    &[
                        (&sums).into(),
                        (&out).into(),
                        (&above).into(),
                        (tiles as u32).into(),
                        (count as u32).into(),
                        0u32.into(),
                    ],
                )?;
            }
        }
        Ok(offsets)
    }

    /// The tree sum of each segment `offsets[s]..offsets[s + 1]` into `out[s]`.
    pub(super) fn fixed_segmented<T: Element>(
        &self,
        stream: &Stream<D>,
        input: Slice<'_, T, OnDevice, D>,
        offsets: Slice<'_, u32, OnDevice, D>,
        out: SliceMut<'_, T, OnDevice, D>,
    ) -> Result<()> {
        let built = self.fixed::<T>()?;
        // Lanes per segment: any power of two gives the same bits; half the
        // mean segment keeps each lane's run to one or two elements (its
        // binary counter is the costly part), several segments to a block.
        let mean = input.len() / out.len().max(1);
        let threads = self.fixed_threads::<T>(&built.segmented);
        let lanes = u32::try_from((mean / 2).max(1).next_power_of_two()).unwrap_or(threads).min(threads);
        let segments = out.len() as u32;
        let config = self.fixed_launch::<T>(threads, out.len().div_ceil((threads / lanes) as usize));
        // SAFETY: reads offsets[0..=segments) and input within [0, n)
        // (offsets are clamped to it), writes out[0..segments).
        unsafe {
            stream.launch(
                &built.segmented,
                config,
                &[
                    (&input).into(),
                    (&offsets).into(),
                    (&out).into(),
                    (input.len() as u32).into(),
                    segments.into(),
                    lanes.into(),
                ],
            )
        }
    }
}
