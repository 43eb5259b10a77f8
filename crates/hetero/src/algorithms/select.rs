//! Histograms, selection (by flags, by a comparison, of the first of each
//! run) and the one-to-many association: `select.kern`'s kernels, and the
//! sort for the association's fill.

use std::sync::{Arc, PoisonError};

use super::{Algorithms, BLOCKS_PER_UNIT, Element, MAX_BLOCKS, ScanKind, SortOrder, exchange_len};
use crate::device::{Device, LaunchConfig};
use crate::error::{ErrorKind, Result};
use crate::safe::{Arg, Kernel, Module, OnDevice, Slice, SliceMut, Stream};

/// The most elements a select or an association takes: `2^30 - 1` (the
/// look-back packs a count and a flag into one 32-bit word).
pub const MAX_SELECT_LEN: usize = (1 << 30) - 1;
/// Most threads of a select block.
const SELECT_THREADS: u32 = 256;
/// Elements a select thread holds, for 4-byte and 8-byte types (at most
/// 32: a thread's kept ones are a bit mask).
const SELECT_ITEMS: [u32; 2] = [16, 8];

/// How [`Algorithms::histogram`] bins values; the counts' length is the
/// number of bins.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bins<T> {
    /// Integers straight into bins: value `v` counts in bin `v`; values
    /// outside `0..bins` are not counted. Integer types only.
    Direct,
    /// Even bins over `[lower, upper)`; values outside it (and NaN) are not
    /// counted. Floats: bin `trunc((v - lower) * (bins / (upper - lower)))`
    /// in the element type (clamped to the last bin), the same bits on
    /// every backend. Integers: `(v - lower) * bins / (upper - lower)` in
    /// 64-bit integers (refused where that product could overflow).
    Even {
        /// The first bin's lower edge.
        lower: T,
        /// The last bin's upper edge (excluded).
        upper: T,
    },
}

/// The comparison of [`Algorithms::select_if`]: keeps `x` where
/// `x <op> value`, with IEEE comparisons for floats (a NaN is kept by
/// `NotEqual` only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Predicate<T> {
    /// `x < value`.
    Less(T),
    /// `x <= value`.
    LessEqual(T),
    /// `x > value`.
    Greater(T),
    /// `x >= value`.
    GreaterEqual(T),
    /// `x == value`.
    Equal(T),
    /// `x != value`.
    NotEqual(T),
}

impl<T: Copy> Predicate<T> {
    /// The kernel's mode and the value compared with.
    fn mode(self) -> (u32, T) {
        match self {
            Self::Less(v) => (1, v),
            Self::LessEqual(v) => (2, v),
            Self::Greater(v) => (3, v),
            Self::GreaterEqual(v) => (4, v),
            Self::Equal(v) => (5, v),
            Self::NotEqual(v) => (6, v),
        }
    }
}

/// The kernel's mode of a flagged select and of [`Algorithms::unique`].
const FLAGGED: u32 = 0;
const UNIQUE: u32 = 7;

/// The histogram and select kernels of one element type.
pub(super) struct SelectBuilt<D: Device> {
    ty: &'static str,
    histogram: Kernel<D>,
    select: Kernel<D>,
    assoc_prepare: Kernel<D>,
    threads: u32,
    items: u32,
    _module: Module<D>,
}

/// The source of the histogram and select kernels for `T`.
pub(super) fn source<T: Element>(items: u32) -> String {
    let body = hetero_kernels::SELECT.replace("$T", T::NAME).replace("$S", T::SUFFIX);
    let float = if T::FLOAT { "#define SEL_FLOAT 1\n" } else { "" };
    format!("/* hetero::algorithms select: {} */\n#define SEL_ITEMS {items}u\n{float}{body}", T::NAME)
}

impl<D: Device> Algorithms<D> {
    /// Counts the elements of `input` in each bin into `counts` (one
    /// count per bin, overwritten), in stream order. Integer counts: the
    /// same on every backend.
    ///
    /// ```
    /// # fn main() -> hetero::Result<()> {
    /// use hetero::algorithms::{Algorithms, Bins};
    ///
    /// let ctx = hetero::Context::new(hetero::backend::host::HostDevice::new());
    /// let stream = ctx.stream()?;
    /// let algorithms = Algorithms::new(&ctx);
    /// let charges = stream.upload(&[0.5f32, 1.5, 1.7, 9.0, -1.0])?;
    /// let mut counts = stream.alloc::<u32>(4)?;
    /// algorithms.histogram(&stream, &charges, Bins::Even { lower: 0.0, upper: 4.0 }, &mut counts)?;
    /// assert_eq!(stream.download(&counts)?, [1, 2, 0, 0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn histogram<'i, 'c, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        bins: Bins<T>,
        counts: impl Into<SliceMut<'c, u32, OnDevice, D>>,
    ) -> Result<()> {
        let (input, mut counts) = (input.into(), counts.into());
        self.check_len("histogram", input.len())?;
        let n_bins = counts.len();
        if n_bins == 0 || n_bins > u32::MAX as usize - 1 {
            return Err(self.error(
                "histogram",
                ErrorKind::OutOfBounds,
                format!("{n_bins} bins: the counts' length is the number of bins, 1 to 2^32 - 2"),
            ));
        }
        let (mode, lower, upper, scale) = self.bins_of(bins, n_bins)?;
        stream.fill(counts.reborrow(), 0u32)?;
        if input.is_empty() {
            return Ok(());
        }
        let built = self.select_built::<T>()?;
        let host = self.ctx.info().backend == crate::Backend::Host;
        let threads = built.threads;
        // Counts in shared memory where they fit in half of it.
        let private = n_bins * 4 <= self.ctx.info().shared_memory_per_block / 2;
        let units = self.ctx.info().compute_units.max(1);
        let blocks = if host {
            1
        } else {
            (input.len() as u32).div_ceil(threads * 16).clamp(1, units.saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS))
        };
        // SAFETY: alg_histogram reads input[0..n) and adds into
        // counts[0..bins) (the bin function returns bins or less; bins is
        // not counted).
        unsafe {
            stream.launch(
                &built.histogram,
                LaunchConfig::linear(blocks, threads, if private { n_bins * 4 } else { 4 }),
                &[
                    (&input).into(),
                    (&counts).into(),
                    (input.len() as u32).into(),
                    (n_bins as u32).into(),
                    mode.into(),
                    u32::from(private).into(),
                    lower.arg(),
                    upper.arg(),
                    scale.arg(),
                ],
            )
        }
    }

    /// The kernel's mode and its lower, upper and scale arguments for `bins`.
    fn bins_of<T: Element>(&self, bins: Bins<T>, n_bins: usize) -> Result<(u32, T, T, T)> {
        let zero = T::zeroed();
        match bins {
            Bins::Direct if T::FLOAT => Err(self.error(
                "histogram",
                ErrorKind::Config,
                "Bins::Direct takes integers; bin floats with Bins::Even { lower, upper }",
            )),
            Bins::Direct => Ok((0, zero, zero, zero)),
            Bins::Even { lower, upper } => {
                let (lo, hi) = (lower.approx_f64(), upper.approx_f64());
                let bad = |why: &str| {
                    self.error("histogram", ErrorKind::Config, format!("even bins over [{lo}, {hi}): {why}"))
                };
                if lower.partial_cmp(&upper) != Some(std::cmp::Ordering::Less) {
                    return Err(bad("the lower edge must be below the upper one"));
                }
                let Some(scale) = T::bin_scale(n_bins, lower, upper) else {
                    return Err(bad("the range's width or bins / width is not a finite positive number"));
                };
                // (v - lower) * bins, at most (upper - lower - 1) * bins,
                // must fit 64 bits.
                if T::span(lower, upper).is_some_and(|span| (span - 1) * n_bins as u128 > u128::from(u64::MAX)) {
                    return Err(bad("(upper - lower) * bins does not fit 64 bits; use fewer bins or a smaller range"));
                }
                Ok((1, lower, upper, scale))
            }
        }
    }

    /// Copies the elements of `input` whose flag is non-zero to the front
    /// of `output`, in order, and their number to `count[0]`, in stream
    /// order. `output` holds at least as many elements as `input`; past the
    /// count it is left as it was.
    pub fn select_flagged<'i, 'f, 'o, 'c, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        flags: impl Into<Slice<'f, u8, OnDevice, D>>,
        output: impl Into<SliceMut<'o, T, OnDevice, D>>,
        count: impl Into<SliceMut<'c, u32, OnDevice, D>>,
    ) -> Result<()> {
        let (input, flags) = (input.into(), flags.into());
        if flags.len() != input.len() {
            return Err(self.error(
                "select_flagged",
                ErrorKind::OutOfBounds,
                format!("{} elements but {} flags; each element needs one", input.len(), flags.len()),
            ));
        }
        self.launch_select(
            "select_flagged",
            stream,
            input,
            Some(flags),
            FLAGGED,
            T::zeroed(),
            output.into(),
            count.into(),
        )
    }

    /// Copies the elements `x` of `input` for which `predicate` holds to
    /// the front of `output`, in order, and their number to `count[0]`, in
    /// stream order (as [`Self::select_flagged`]).
    ///
    /// ```
    /// # fn main() -> hetero::Result<()> {
    /// use hetero::algorithms::{Algorithms, Predicate};
    ///
    /// let ctx = hetero::Context::new(hetero::backend::host::HostDevice::new());
    /// let stream = ctx.stream()?;
    /// let pt = stream.upload(&[0.4f32, 2.5, 1.0, 7.0])?;
    /// let mut kept = stream.alloc::<f32>(4)?;
    /// let mut count = stream.alloc::<u32>(1)?;
    /// Algorithms::new(&ctx).select_if(&stream, &pt, Predicate::Greater(0.9), &mut kept, &mut count)?;
    /// assert_eq!(stream.download(&count)?, [3]);
    /// assert_eq!(stream.download(&kept)?[..3], [2.5, 1.0, 7.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn select_if<'i, 'o, 'c, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        predicate: Predicate<T>,
        output: impl Into<SliceMut<'o, T, OnDevice, D>>,
        count: impl Into<SliceMut<'c, u32, OnDevice, D>>,
    ) -> Result<()> {
        let (mode, value) = predicate.mode();
        self.launch_select("select_if", stream, input.into(), None, mode, value, output.into(), count.into())
    }

    /// Copies the first element of each run of equal elements of `input`
    /// (all of them, where `input` is sorted: its distinct values) to the
    /// front of `output`, and their number to `count[0]`, in stream order.
    /// Floats compare as numbers: `-0.0` equals `+0.0`, and every NaN
    /// starts a run.
    pub fn unique<'i, 'o, 'c, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        output: impl Into<SliceMut<'o, T, OnDevice, D>>,
        count: impl Into<SliceMut<'c, u32, OnDevice, D>>,
    ) -> Result<()> {
        self.launch_select("unique", stream, input.into(), None, UNIQUE, T::zeroed(), output.into(), count.into())
    }

    #[allow(clippy::too_many_arguments)]
    fn launch_select<T: Element>(
        &self,
        call: &'static str,
        stream: &Stream<D>,
        input: Slice<'_, T, OnDevice, D>,
        flags: Option<Slice<'_, u8, OnDevice, D>>,
        mode: u32,
        value: T,
        output: SliceMut<'_, T, OnDevice, D>,
        count: SliceMut<'_, u32, OnDevice, D>,
    ) -> Result<()> {
        let n = input.len();
        if n > MAX_SELECT_LEN {
            return Err(self.error(
                call,
                ErrorKind::OutOfBounds,
                format!("{n} elements: a select takes at most {MAX_SELECT_LEN} (2^30 - 1); split the work"),
            ));
        }
        if output.len() < n {
            return Err(self.error(
                call,
                ErrorKind::OutOfBounds,
                format!(
                    "the output holds {} elements, fewer than the input's {n}, which may all be kept",
                    output.len()
                ),
            ));
        }
        if count.len() != 1 {
            return Err(self.error(
                call,
                ErrorKind::OutOfBounds,
                format!("the count holds {} elements; a select writes one", count.len()),
            ));
        }
        if n == 0 {
            return stream.fill(count, 0u32);
        }
        let built = self.select_built::<T>()?;
        let host = self.ctx.info().backend == crate::Backend::Host;
        let threads = built.threads;
        let tiles = if host { 1 } else { n.div_ceil(threads as usize * built.items as usize) };
        let mut state = stream.alloc::<u32>(1 + tiles)?;
        stream.fill(&mut state, 0u32)?;
        // A flag buffer for the modes that read none.
        let none = match flags {
            Some(_) => None,
            None => Some(stream.alloc::<u8>(1)?),
        };
        let none = match &none {
            Some(buffer) => Some(buffer.slice(..)?),
            None => None,
        };
        let Some(flags) = flags.as_ref().or(none.as_ref()) else {
            return Err(self.error(call, ErrorKind::Config, "no flags"));
        };
        // Devices with subgroups (GPUs) select in one launch with look-back;
        // others count the tiles, scan the counts and select (select.kern).
        let phased = !host && self.ctx.info().subgroup_sizes.is_empty();
        let mut prefixes = stream.alloc::<u32>(if phased { tiles } else { 1 })?;
        let config =
            LaunchConfig::linear(tiles as u32, threads, exchange_len(threads, built.items) * std::mem::size_of::<T>());
        for phase in if phased { [1u32, 2].as_slice() } else { [0u32].as_slice() } {
            if *phase == 2 {
                self.scan(stream, state.slice(..tiles)?, &mut prefixes, ScanKind::Exclusive)?;
            }
            let state = state.slice_mut(..)?;
            let prefixes = prefixes.slice(..)?;
            let args: [Arg<'_, D>; 10] = [
                (&input).into(),
                flags.into(),
                (&output).into(),
                (&count).into(),
                (&state).into(),
                (&prefixes).into(),
                (n as u32).into(),
                mode.into(),
                (*phase).into(),
                value.arg(),
            ];
            // SAFETY: alg_select with exactly `tiles` blocks reads
            // input[0..n) (and flags[0..n) in mode 0, whose length was
            // checked), writes at most n elements of output (which holds n
            // or more) and count[0]; phase 0 touches state[0..1 + tiles),
            // zeroed above, phase 1 writes state[0..tiles) and phase 2
            // reads prefixes[0..tiles), their exclusive scan.
            unsafe {
                stream.launch(&built.select, config, &args)?;
            }
        }
        Ok(())
    }

    /// Groups the indices of `keys` by key, CMSSW's one-to-many
    /// association: for `bins = offsets.len() - 1`, `indices[offsets[k]..
    /// offsets[k + 1]]` are the `i` with `keys[i] == k`, in increasing
    /// order (the same on every backend), and `offsets[bins]` is the number
    /// of keys below `bins`; the indices of the other keys follow it. Built
    /// as a histogram of the keys, a scan of the counts and a stable sort
    /// of the indices by key, in stream order.
    ///
    /// ```
    /// # fn main() -> hetero::Result<()> {
    /// use hetero::algorithms::Algorithms;
    ///
    /// let ctx = hetero::Context::new(hetero::backend::host::HostDevice::new());
    /// let stream = ctx.stream()?;
    /// let module_of_hit = stream.upload(&[2u32, 0, 2, 1, 0])?;
    /// let mut offsets = stream.alloc::<u32>(4)?;
    /// let mut hits = stream.alloc::<u32>(5)?;
    /// Algorithms::new(&ctx).associate(&stream, &module_of_hit, &mut offsets, &mut hits)?;
    /// assert_eq!(stream.download(&offsets)?, [0, 2, 3, 5]);
    /// assert_eq!(stream.download(&hits)?, [1, 4, 3, 0, 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn associate<'k, 'o, 'i>(
        &self,
        stream: &Stream<D>,
        keys: impl Into<Slice<'k, u32, OnDevice, D>>,
        offsets: impl Into<SliceMut<'o, u32, OnDevice, D>>,
        indices: impl Into<SliceMut<'i, u32, OnDevice, D>>,
    ) -> Result<()> {
        let (keys, offsets, indices) = (keys.into(), offsets.into(), indices.into());
        let n = keys.len();
        let Some(bins) = offsets.len().checked_sub(1).filter(|&b| b > 0 && b < u32::MAX as usize - 1) else {
            return Err(self.error(
                "associate",
                ErrorKind::OutOfBounds,
                format!("{} offsets: bins need one offset each and one more, 2 to 2^32 - 2", offsets.len()),
            ));
        };
        if n > MAX_SELECT_LEN || indices.len() != n {
            return Err(self.error(
                "associate",
                ErrorKind::OutOfBounds,
                format!("{n} keys and {} indices: one index per key, at most {MAX_SELECT_LEN}", indices.len()),
            ));
        }
        // Counts, with a zero after the last bin: its exclusive scan ends
        // in the number of keys below `bins`.
        let mut counts = stream.alloc::<u32>(bins + 1)?;
        self.histogram(stream, keys, Bins::Direct, counts.slice_mut(..bins)?)?;
        stream.fill(counts.slice_mut(bins..)?, 0u32)?;
        self.scan(stream, &counts, offsets, ScanKind::Exclusive)?;
        if n == 0 {
            return Ok(());
        }
        let built = self.select_built::<u32>()?;
        let mut clamped = stream.alloc::<u32>(n)?;
        {
            let clamped = clamped.slice_mut(..)?;
            let host = self.ctx.info().backend == crate::Backend::Host;
            let units = self.ctx.info().compute_units.max(1);
            let blocks = if host {
                1
            } else {
                (n as u32).div_ceil(built.threads).clamp(1, units.saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS))
            };
            // SAFETY: alg_assoc_prepare reads keys[0..n) and writes
            // clamped[0..n) and indices[0..n), all of n elements.
            unsafe {
                stream.launch(
                    &built.assoc_prepare,
                    LaunchConfig::linear(blocks, built.threads, 0),
                    &[(&keys).into(), (&clamped).into(), (&indices).into(), (n as u32).into(), (bins as u32).into()],
                )?;
            }
        }
        let bits = u32::BITS - (bins as u32).leading_zeros();
        self.sort_pairs(stream, &mut clamped, indices, &SortOrder::ascending().bits(0..bits))
    }

    /// The histogram and select kernels for `T`, built on first use.
    fn select_built<T: Element>(&self) -> Result<Arc<SelectBuilt<D>>> {
        let mut built = self.selects.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = built.iter().find(|b| b.ty == T::NAME) {
            return Ok(Arc::clone(b));
        }
        self.check_fp64::<T>()?;
        let info = self.ctx.info();
        let threads = SELECT_THREADS.min(self.threads).min(info.max_threads_per_block).max(1);
        let mut items = SELECT_ITEMS[usize::from(std::mem::size_of::<T>() > 4)];
        while items > 1 && exchange_len(threads, items) * std::mem::size_of::<T>() + 1040 > info.shared_memory_per_block
        {
            items /= 2;
        }
        #[cfg(feature = "host")]
        let hosts = super::select_host::kernels::<T>();
        #[cfg(not(feature = "host"))]
        let hosts: Vec<crate::host_kernel::HostKernel> = Vec::new();
        let module = self.ctx.build_module_with(&source::<T>(items), &hosts)?;
        let histogram = module.kernel("alg_histogram")?;
        let select = module.kernel("alg_select")?;
        let assoc_prepare = module.kernel("alg_assoc_prepare")?;
        // The kernels may run fewer threads than the device (registers, or
        // a CPU compiler's limit); the source does not depend on them.
        let limit = [&histogram, &select, &assoc_prepare].iter().map(|k| k.limits().max_threads).min().unwrap_or(0);
        if limit == 0 {
            return Err(self.error(
                "select",
                ErrorKind::Unavailable,
                format!("the select kernels run no thread a block on {}", info.name),
            ));
        }
        let b = Arc::new(SelectBuilt {
            ty: T::NAME,
            histogram,
            select,
            assoc_prepare,
            threads: threads.min(limit),
            items,
            _module: module,
        });
        built.push(Arc::clone(&b));
        Ok(b)
    }
}
