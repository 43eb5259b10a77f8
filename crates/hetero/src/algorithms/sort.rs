//! Stable radix sort of keys, and of keys with values: `sort.kern`'s
//! kernels, eight bits a pass (one global histogram for every pass, then
//! one single-pass launch per digit).

use std::ops::Range;
use std::sync::{Arc, PoisonError};

use bytemuck::Pod;

use super::{Algorithms, BLOCKS_PER_UNIT, Element, MAX_BLOCKS};
use crate::device::{Device, LaunchConfig};
use crate::error::{ErrorKind, Result};
use crate::safe::{Arg, Kernel, Module, OnDevice, SliceMut, Stream};

/// The most keys a sort takes: `2^30 - 1` (its look-back packs a count and
/// a flag into one 32-bit word).
pub const MAX_SORT_LEN: usize = (1 << 30) - 1;
/// Values of the radix: eight bits a pass.
const RADIX: usize = 256;
/// Most threads of a sort block (`SORT_WARPS` subgroups of 32 lanes).
const SORT_THREADS: u32 = 256;
/// Keys a thread holds for 4-byte and 8-byte keys: tiles of 4096 and 3072
/// keys at 256 threads.
pub(super) const SORT_ITEMS: [u32; 2] = [16, 12];
/// Static shared memory of `alg_sort_pass` besides the tile, in bytes.
const SORT_STATIC: usize = (8 * RADIX + 2 * RADIX + 1) * 4;

/// A key type of [`Algorithms::sort`]: `u32`, `i32`, `u64`, `i64`, `f32`
/// and `f64`. Keys are sorted by their bits, made order-preserving: signed
/// integers in their order, floats in IEEE 754's total order
/// (`-NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN`, as
/// [`f32::total_cmp`]), so `-0.0` comes before `+0.0` and NaNs go to the
/// ends by their sign. Floats are moved as bits, but `f64` keys are
/// buffers of doubles, which a device without 64-bit floats refuses
/// (`DeviceInfo::fp64`).
pub trait SortKey: Element {
    /// How the bits are made order-preserving: 0 as they are, 1 the sign
    /// bit flipped, 2 the float rule.
    #[doc(hidden)]
    const KIND: u32;
}

macro_rules! sort_key {
    ($($t:ty => $kind:expr),*) => {$(
        impl SortKey for $t {
            const KIND: u32 = $kind;
        }
    )*};
}

sort_key!(u32 => 0, u64 => 0, i32 => 1, i64 => 1, f32 => 2, f64 => 2);

/// How [`Algorithms::sort`] orders keys: ascending (the default) or
/// descending, by every bit or by a range of the order-preserving bits
/// (CUB's `begin_bit`/`end_bit`). Both directions are stable: equal keys
/// keep their order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SortOrder {
    descending: bool,
    bits: Option<Range<u32>>,
}

impl SortOrder {
    /// Smallest key first.
    pub fn ascending() -> Self {
        Self::default()
    }

    /// Largest key first.
    pub fn descending() -> Self {
        Self { descending: true, bits: None }
    }

    /// Sorts by bits `bits` of the order-preserving key only (bit 0 the
    /// least significant): keys equal there keep their order. Fewer bits,
    /// fewer passes (eight bits a pass).
    #[must_use]
    pub fn bits(mut self, bits: Range<u32>) -> Self {
        self.bits = Some(bits);
        self
    }

    /// Whether the order is descending.
    pub fn is_descending(&self) -> bool {
        self.descending
    }

    /// The bit range for keys of `width` bits, or `None` if it does not fit.
    fn range(&self, width: u32) -> Option<Range<u32>> {
        match &self.bits {
            None => Some(0..width),
            Some(r) if r.start <= r.end && r.end <= width => Some(r.clone()),
            Some(_) => None,
        }
    }
}

/// The sort kernels of one key width and value width.
pub(super) struct SortBuilt<D: Device> {
    key_size: usize,
    value_size: usize,
    histogram: Kernel<D>,
    offsets: Kernel<D>,
    pass: Kernel<D>,
    threads: u32,
    items: u32,
    _module: Module<D>,
}

/// The C type of an unsigned word of `size` bytes.
fn word(size: usize) -> &'static str {
    if size == 8 { "ulong" } else { "uint" }
}

/// The sort source for keys of `key_size` bytes, values of `value_size`
/// (0 for none), `threads` threads a block and `items` keys a thread.
pub(super) fn source(key_size: usize, value_size: usize, threads: u32, items: u32) -> String {
    let vparams =
        if value_size == 0 { "" } else { ", GLOBAL const sort_value* values_in, GLOBAL sort_value* values_out" };
    let body = hetero_kernels::SORT
        .replace("$VPARAMS", vparams)
        .replace("$K", word(key_size))
        .replace("$V", word(value_size.max(4)));
    let per = (RADIX as u32).div_ceil(threads.max(1));
    let values = if value_size == 0 { "" } else { "#define SORT_VALUES 1\n" };
    format!(
        "/* hetero::algorithms sort: {}-byte keys, {value_size}-byte values */\n#define SORT_ITEMS {items}u\n#define SORT_PER {per}u\n{values}{body}",
        key_size
    )
}

impl<D: Device> Algorithms<D> {
    /// Sorts `keys` in place, stably, in stream order: ascending or
    /// descending, by every bit or a range of bits ([`SortOrder`]). At
    /// most [`MAX_SORT_LEN`] keys; temporary storage of the keys' size
    /// comes from the stream's allocator. A pass's threads hold 16 keys of
    /// 4 bytes or 12 of 8 ([`Self::with_sort_items`]).
    ///
    /// ```
    /// # fn main() -> hetero::Result<()> {
    /// use hetero::algorithms::{Algorithms, SortOrder};
    ///
    /// let ctx = hetero::Context::new(hetero::backend::host::HostDevice::new());
    /// let stream = ctx.stream()?;
    /// let mut keys = stream.upload(&[3.5f32, -0.0, 0.0, -2.0, f32::NAN])?;
    /// Algorithms::new(&ctx).sort(&stream, &mut keys, &SortOrder::ascending())?;
    /// let sorted = stream.download(&keys)?;
    /// assert_eq!(sorted[..4].iter().map(|k| k.to_bits()).collect::<Vec<_>>(),
    ///            [(-2.0f32).to_bits(), (-0.0f32).to_bits(), 0.0f32.to_bits(), 3.5f32.to_bits()]);
    /// assert!(sorted[4].is_nan());
    /// # Ok(())
    /// # }
    /// ```
    pub fn sort<'k, K: SortKey>(
        &self,
        stream: &Stream<D>,
        keys: impl Into<SliceMut<'k, K, OnDevice, D>>,
        order: &SortOrder,
    ) -> Result<()> {
        self.radix_sort::<K, u32>(stream, keys.into(), None, order)
    }

    /// Sorts `keys` in place and moves `values` with them (the value at
    /// `i` follows the key at `i`), stably, in stream order. Values are any
    /// plain type of 4 or 8 bytes (an index, a `u64` id, an `f32`...).
    pub fn sort_pairs<'k, 'v, K: SortKey, V: Pod>(
        &self,
        stream: &Stream<D>,
        keys: impl Into<SliceMut<'k, K, OnDevice, D>>,
        values: impl Into<SliceMut<'v, V, OnDevice, D>>,
        order: &SortOrder,
    ) -> Result<()> {
        let (keys, values) = (keys.into(), values.into());
        let size = std::mem::size_of::<V>();
        if size != 4 && size != 8 {
            return Err(self.error(
                "sort_pairs",
                ErrorKind::Config,
                format!("values of {size} bytes: sort_pairs moves values of 4 or 8 bytes (use an index into yours)"),
            ));
        }
        if keys.len() != values.len() {
            return Err(self.error(
                "sort_pairs",
                ErrorKind::OutOfBounds,
                format!("{} keys but {} values; each key needs one value", keys.len(), values.len()),
            ));
        }
        self.radix_sort(stream, keys, Some(values), order)
    }

    fn radix_sort<K: SortKey, V: Pod>(
        &self,
        stream: &Stream<D>,
        keys: SliceMut<'_, K, OnDevice, D>,
        values: Option<SliceMut<'_, V, OnDevice, D>>,
        order: &SortOrder,
    ) -> Result<()> {
        let call = if values.is_some() { "sort_pairs" } else { "sort" };
        let n = keys.len();
        if n > MAX_SORT_LEN {
            return Err(self.error(
                call,
                ErrorKind::OutOfBounds,
                format!("{n} keys: a sort takes at most {MAX_SORT_LEN} (2^30 - 1); sort parts and merge them"),
            ));
        }
        let width = 8 * std::mem::size_of::<K>() as u32;
        let Some(bits) = order.range(width) else {
            return Err(self.error(
                call,
                ErrorKind::OutOfBounds,
                format!("bits {:?}: a {width}-bit key has bits 0..{width}, start at most end", order.bits),
            ));
        };
        if n <= 1 || bits.is_empty() {
            return Ok(());
        }
        self.check_fp64::<K>()?;
        let value_size = if values.is_some() { std::mem::size_of::<V>() } else { 0 };
        let built = self.sort_built(std::mem::size_of::<K>(), value_size)?;
        let host = self.ctx.info().backend == crate::Backend::Host;
        let threads = built.threads;
        let tile = threads as usize * built.items as usize;
        let tiles = if host { 1 } else { n.div_ceil(tile) };
        let passes = (bits.end - bits.start).div_ceil(8);
        let descending = u32::from(order.descending);
        let n32 = n as u32;

        // Devices with subgroups (GPUs) take each pass in one launch with
        // look-back, from every pass's digit counts (one read, then their
        // prefixes); others in two launches around a scan of the tiles'
        // counts (sort.kern says why).
        let phased = !host && self.ctx.info().subgroup_sizes.is_empty();
        let mut hist = stream.alloc::<u32>(if phased { 1 } else { passes as usize * RADIX })?;
        stream.fill(&mut hist, 0u32)?;
        if !phased {
            let hist = hist.slice_mut(..)?;
            let units = self.ctx.info().compute_units.max(1);
            let blocks =
                if host { 1 } else { (tiles as u32).clamp(1, units.saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS)) };
            // SAFETY: alg_sort_histogram reads keys[0..n) and adds into
            // hist[0..passes * 256).
            unsafe {
                stream.launch(
                    &built.histogram,
                    LaunchConfig::linear(blocks, threads, passes as usize * RADIX * 4),
                    &[
                        (&keys).into(),
                        (&hist).into(),
                        n32.into(),
                        bits.start.into(),
                        bits.end.into(),
                        passes.into(),
                        K::KIND.into(),
                        descending.into(),
                    ],
                )?;
                // alg_sort_offsets: block p scans hist[p * 256..][..256].
                stream.launch(
                    &built.offsets,
                    LaunchConfig::linear(passes, threads, threads as usize * 4),
                    &[(&hist).into()],
                )?;
            }
        }

        let mut temp_keys = stream.alloc::<K>(n)?;
        let mut temp_values = match values {
            Some(_) => Some(stream.alloc::<V>(n)?),
            None => None,
        };
        let mut state = stream.alloc::<u32>(1 + tiles * RADIX)?;
        let mut places = stream.alloc::<u32>(if phased { tiles * RADIX } else { 1 })?;
        let shared = tile * std::mem::size_of::<K>().max(value_size);
        for p in 0..passes {
            stream.fill(&mut state, 0u32)?;
            let shift = bits.start + 8 * p;
            let pass_bits = (bits.end - shift).min(8);
            for phase in if phased { [1u32, 2].as_slice() } else { [0u32].as_slice() } {
                if *phase == 2 {
                    self.scan(stream, state.slice(..tiles * RADIX)?, &mut places, super::ScanKind::Exclusive)?;
                }
                let (digit_base, digit_at) = if phased { (places.slice(..)?, 0) } else { (hist.slice(..)?, p * 256) };
                let state = state.slice_mut(..)?;
                let tail: [Arg<'_, D>; 10] = [
                    (&digit_base).into(),
                    digit_at.into(),
                    (&state).into(),
                    n32.into(),
                    shift.into(),
                    pass_bits.into(),
                    K::KIND.into(),
                    descending.into(),
                    (*phase).into(),
                    (tiles as u32).into(),
                ];
                let temp_k = temp_keys.slice_mut(..)?;
                // Even passes read the caller's buffers and write the
                // temporary ones; odd passes the other way.
                let forward = p % 2 == 0;
                let mut args: Vec<Arg<'_, D>> = if forward {
                    vec![(&keys).into(), (&temp_k).into()]
                } else {
                    vec![(&temp_k).into(), (&keys).into()]
                };
                let temp_v = match temp_values.as_mut() {
                    Some(t) => Some(t.slice_mut(..)?),
                    None => None,
                };
                if let (Some(v), Some(t)) = (&values, &temp_v) {
                    if forward {
                        args.extend([v.into(), t.into()]);
                    } else {
                        args.extend([t.into(), v.into()]);
                    }
                }
                args.extend(tail);
                // SAFETY: with exactly `tiles` blocks it reads n keys (values)
                // and writes a permutation of them, both buffers n long.
                // Phase 0 reads digit_base[digit_at..][..256) (in hist) and
                // uses state[0..1 + tiles * 256), zeroed; phase 1 writes
                // state[..tiles * 256); phase 2 reads digit_base[..tiles *
                // 256), the scan of those. The host runs one block.
                unsafe {
                    stream.launch(&built.pass, LaunchConfig::linear(tiles as u32, threads, shared), &args)?;
                }
            }
        }
        if passes % 2 == 1 {
            stream.copy(&temp_keys, keys)?;
            if let (Some(v), Some(t)) = (values, &temp_values) {
                stream.copy(t, v)?;
            }
        }
        Ok(())
    }

    /// The sort kernels for keys and values of these sizes and `threads`
    /// threads a block.
    fn build_sort(&self, key_size: usize, value_size: usize, threads: u32) -> Result<Arc<SortBuilt<D>>> {
        let info = self.ctx.info();
        let mut items = self.sort_items[usize::from(key_size > 4)];
        let wide = key_size.max(value_size);
        while items > 1 && threads as usize * items as usize * wide + SORT_STATIC > info.shared_memory_per_block {
            items /= 2;
        }
        #[cfg(feature = "host")]
        let hosts = super::sort_host::kernels(key_size, value_size);
        #[cfg(not(feature = "host"))]
        let hosts: Vec<crate::host_kernel::HostKernel> = Vec::new();
        let module = self.ctx.build_module_with(&source(key_size, value_size, threads, items), &hosts)?;
        Ok(Arc::new(SortBuilt {
            key_size,
            value_size,
            histogram: module.kernel("alg_sort_histogram")?,
            offsets: module.kernel("alg_sort_offsets")?,
            pass: module.kernel("alg_sort_pass")?,
            threads,
            items,
            _module: module,
        }))
    }

    /// The sort kernels for keys and values of these sizes, built on first use.
    fn sort_built(&self, key_size: usize, value_size: usize) -> Result<Arc<SortBuilt<D>>> {
        let mut built = self.sorts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = built.iter().find(|b| b.key_size == key_size && b.value_size == value_size) {
            return Ok(Arc::clone(b));
        }
        let info = self.ctx.info();
        let mut threads = SORT_THREADS.min(self.threads).min(info.max_threads_per_block).max(1);
        // The kernels may run fewer threads than the device (registers, or
        // a CPU compiler's limit): then they are built again for that many.
        let b = loop {
            let b = self.build_sort(key_size, value_size, threads)?;
            let limit = [&b.histogram, &b.offsets, &b.pass].iter().map(|k| k.limits().max_threads).min().unwrap_or(0);
            if limit >= threads {
                break b;
            }
            if limit == 0 {
                return Err(self.error(
                    "sort",
                    ErrorKind::Unavailable,
                    format!("the sort kernels run no thread a block on {}", info.name),
                ));
            }
            threads = limit;
        };
        built.push(Arc::clone(&b));
        Ok(b)
    }
}
