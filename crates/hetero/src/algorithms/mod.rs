//! Device-wide algorithms on any backend: reduce (sum, min, max),
//! inclusive and exclusive scan (sum) and segmented reduce, over `u32`,
//! `i32`, `u64`, `i64`, `f32` and `f64`.
//!
//! Each runs on a stream as the typed layer's other operations do: its
//! buffers are tracked like a launch's, so work on other streams that uses
//! them is ordered against it, and its temporary storage comes from the
//! caching allocator in stream order. Kernels are compiled once per element
//! type and operator, on first use, from one generic source
//! ([`hetero_kernels::ALGORITHMS`]); the host backend runs Rust
//! implementations of the same kernels.
//!
//! ```
//! # fn main() -> hetero::Result<()> {
//! use hetero::algorithms::{Algorithms, ReduceOp, ScanKind};
//!
//! let ctx = hetero::Context::new(hetero::backend::host::HostDevice::new());
//! let stream = ctx.stream()?;
//! let algorithms = Algorithms::new(&ctx);
//! let counts = stream.upload(&[3u32, 0, 2, 5])?;
//!
//! // Offsets from counts, left on the device for the next kernel.
//! let mut offsets = stream.alloc::<u32>(4)?;
//! algorithms.scan(&stream, &counts, &mut offsets, ScanKind::Exclusive)?;
//! assert_eq!(stream.download(&offsets)?, [0, 3, 3, 5]);
//!
//! // A total brought back to the host.
//! assert_eq!(algorithms.reduce_to_host(&stream, &counts, ReduceOp::Max)?, 5);
//! # Ok(())
//! # }
//! ```
//!
//! The scan is single-pass, with decoupled look-back (Merrill and Garland,
//! 2016): each element is read once and written once. Blocks take their
//! tiles from an atomic counter, so it needs no forward-progress guarantee
//! between blocks. Numeric rules are [`ReduceOp`]'s; lengths are limited to
//! [`MAX_LEN`] elements.

mod element;
mod fixed;
#[cfg(feature = "host")]
mod fixed_host;
#[cfg(feature = "host")]
mod host;
mod select;
#[cfg(feature = "host")]
mod select_host;
mod sort;
#[cfg(feature = "host")]
mod sort_host;

use std::sync::{Arc, Mutex, PoisonError};

pub use crate::ops::{ReduceOp, Scalar, pairwise};
pub use element::{Element, ScanKind};
use fixed::FixedBuilt;
use select::SelectBuilt;
pub use select::{Bins, MAX_SELECT_LEN, Predicate};
use sort::SortBuilt;
pub use sort::{MAX_SORT_LEN, SortKey, SortOrder};

use crate::any::AnyDevice;
use crate::block::BlockRequest;
use crate::device::{Device, LaunchConfig};
use crate::error::{Error, ErrorKind, Result};
use crate::safe::{Context, Kernel, Module, OnDevice, Slice, SliceMut, Stream};

/// The most elements an algorithm takes (and segments a segmented reduce
/// has): `2^31 - 1`, so that no index of the kernels overflows 32 bits.
pub const MAX_LEN: usize = i32::MAX as usize;

/// Threads per block the algorithms ask for (fewer where a kernel cannot).
const THREADS: u32 = 256;
/// Most blocks of a reduce's first pass, and blocks per compute unit below
/// that (a CPU of few cores gets fewer, longer blocks).
const MAX_BLOCKS: u32 = 1024;
const BLOCKS_PER_UNIT: u32 = 64;
/// Elements a thread scans, held in registers, for 4-byte and 8-byte
/// types: tiles of 3072 and 2560 elements at 256 threads. On an H100 at
/// 2^28 elements the register tiles peak there, and fall with more items
/// (register pressure, fewer blocks resident): docs/results/algorithms-h100.
const SCAN_ITEMS: [u32; 2] = [12, 10];
/// Elements per thread of a fixed-order tile (a power of two; `fixed.rs`):
/// tiles of 4096 elements at 256 threads.
const FIXED_ITEMS: u32 = 16;
/// Look-back window of `alg_scan` (`ALG_WINDOW`), plus its running sum:
/// static shared memory of the kernel.
const SCAN_WINDOW: usize = 129;

/// The kernels of one element type and operator.
struct Built<D: Device> {
    /// The element type's name in the dialect, and the operator.
    ty: &'static str,
    op: ReduceOp,
    reduce: Kernel<D>,
    segmented: Kernel<D>,
    scan: Kernel<D>,
    /// Elements per thread the scan kernel was compiled for.
    scan_items: u32,
    /// Keeps the kernels' module loaded.
    _module: Module<D>,
}

/// Device-wide algorithms on one device; build once and share (it is
/// `Sync`): kernels are compiled per element type and operator on first
/// use and kept.
pub struct Algorithms<D: Device = AnyDevice> {
    ctx: Context<D>,
    /// Threads per block asked for.
    threads: u32,
    /// Float sums in the fixed order ([`Algorithms::deterministic`]).
    deterministic: bool,
    /// The fixed-order kernels, per float type.
    fixed: Mutex<Vec<Arc<FixedBuilt<D>>>>,
    /// Elements each thread of the scan takes, for 4-byte and 8-byte types.
    scan_items: [u32; 2],
    built: Mutex<Vec<Arc<Built<D>>>>,
    /// The sort kernels, per key and value width.
    sorts: Mutex<Vec<Arc<SortBuilt<D>>>>,
    /// Keys each thread of a sort pass holds, for 4-byte and 8-byte keys.
    sort_items: [u32; 2],
    /// The histogram and select kernels, per element type.
    selects: Mutex<Vec<Arc<SelectBuilt<D>>>>,
}

impl<D: Device> std::fmt::Debug for Algorithms<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Algorithms").field("device", &self.ctx.info().name).finish()
    }
}

impl<D: Device> Algorithms<D> {
    /// The algorithms of `ctx`'s device; nothing is compiled yet.
    pub fn new(ctx: &Context<D>) -> Self {
        Self {
            ctx: ctx.clone(),
            threads: THREADS,
            deterministic: false,
            fixed: Mutex::new(Vec::new()),
            scan_items: SCAN_ITEMS,
            built: Mutex::new(Vec::new()),
            sorts: Mutex::new(Vec::new()),
            sort_items: sort::SORT_ITEMS,
            selects: Mutex::new(Vec::new()),
        }
    }

    /// Float sums that give the same bits on every backend, device and
    /// launch shape: `f32` and `f64` [`ReduceOp::Sum`] reduces, scans and
    /// segmented reduces add in the fixed order of
    /// [`pairwise`] (a pairwise tree; prefix sums from its
    /// subtrees), compiled with [`crate::BuildOptions::deterministic`]; the
    /// host backend follows the same order. Integers are exact either way,
    /// and min and max do not depend on the order (but for the sign of a
    /// zero result when both zeros occur), so they are unchanged. Accuracy:
    /// a sum is within `gamma(ceil(log2 n)) * sum |x_i|` (a pairwise sum's
    /// bound), a prefix sum within `gamma(2 ceil(log2 n)) * sum |x_i|`. The
    /// scan reads its input twice (tile sums, then the scan), so it moves
    /// half as many bytes again as the single-pass one.
    #[must_use]
    pub fn deterministic(mut self) -> Self {
        self.deterministic = true;
        self
    }

    /// Threads per block the kernels ask for (default 256; fewer where a
    /// kernel or the device cannot; the fixed-order kernels take the
    /// largest power of two below). Deterministic results do not depend on
    /// it.
    #[must_use]
    pub fn with_threads(mut self, threads: u32) -> Self {
        self.threads = threads.clamp(1, 1024);
        self
    }

    /// Whether `T` and `op` take the fixed order.
    fn fixed_order<T: Element>(&self, op: ReduceOp) -> bool {
        self.deterministic && T::FLOAT && op == ReduceOp::Sum
    }

    /// Tunes the scan: elements each of its 256 threads a block scans, for
    /// 4-byte and for 8-byte types (defaults 12 and 10; fewer where the
    /// device's shared memory per block needs it). A tile of the single
    /// pass is 256 times that; larger tiles mean fewer tiles to look back
    /// over, but fewer blocks resident at once.
    #[must_use]
    pub fn with_scan_items(mut self, four_byte: u32, eight_byte: u32) -> Self {
        self.scan_items = [four_byte.clamp(1, 64), eight_byte.clamp(1, 64)];
        self
    }

    /// Tunes the sort: keys each thread of a pass holds, for 4-byte and for
    /// 8-byte keys (defaults in [`Self::sort`]'s docs; fewer where the
    /// device's shared memory per block needs it). A tile is 256 times that:
    /// larger tiles mean fewer tiles to look back over, but more registers
    /// a thread and fewer blocks resident at once.
    #[must_use]
    pub fn with_sort_items(mut self, four_byte: u32, eight_byte: u32) -> Self {
        self.sort_items = [four_byte.clamp(1, 32), eight_byte.clamp(1, 32)];
        self
    }

    /// Writes the combination of every element of `input` into `out`, a
    /// one-element slice, in stream order (the identity when `input` is
    /// empty; see [`ReduceOp`] for the rules).
    pub fn reduce<'i, 'o, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        op: ReduceOp,
        out: impl Into<SliceMut<'o, T, OnDevice, D>>,
    ) -> Result<()> {
        let (input, out) = (input.into(), out.into());
        self.check_len("reduce", input.len())?;
        if out.len() != 1 {
            return Err(self.error(
                "reduce",
                ErrorKind::OutOfBounds,
                format!("the output holds {} elements; a reduce writes one", out.len()),
            ));
        }
        if self.fixed_order::<T>(op) {
            return self.fixed_reduce(stream, input, out);
        }
        let built = self.built::<T>(op)?;
        let kernel = &built.reduce;
        let threads = kernel.block_size(BlockRequest::new(self.threads).shared_per_thread(std::mem::size_of::<T>()));
        let shared = threads as usize * std::mem::size_of::<T>();
        let n = input.len() as u32;
        let units = self.ctx.info().compute_units.max(1);
        let blocks = n.div_ceil(threads).clamp(1, units.saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS));
        let identity = op.identity::<T>();
        if blocks == 1 {
            // SAFETY: alg_reduce reads input[0..n) and writes out[0..1).
            return unsafe {
                stream.launch(
                    kernel,
                    LaunchConfig::linear(1, threads, shared),
                    &[(&input).into(), (&out).into(), n.into(), identity.arg()],
                )
            };
        }
        let mut partials = stream.alloc::<T>(blocks as usize)?;
        {
            let sums = partials.slice_mut(..)?;
            // SAFETY: alg_reduce reads input[0..n) and writes sums[0..blocks).
            unsafe {
                stream.launch(
                    kernel,
                    LaunchConfig::linear(blocks, threads, shared),
                    &[(&input).into(), (&sums).into(), n.into(), identity.arg()],
                )?;
            }
        }
        let sums = partials.slice(..)?;
        // SAFETY: one block reads sums[0..blocks) and writes out[0..1).
        unsafe {
            stream.launch(
                kernel,
                LaunchConfig::linear(1, threads, shared),
                &[(&sums).into(), (&out).into(), blocks.into(), identity.arg()],
            )
        }
    }

    /// The combination of every element of `input`, brought to the host:
    /// blocks until the work queued on `stream` before it is done.
    pub fn reduce_to_host<'i, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        op: ReduceOp,
    ) -> Result<T> {
        let mut out = stream.alloc::<T>(1)?;
        self.reduce(stream, input, op, &mut out)?;
        let mut value = [T::zeroed()];
        stream.copy_to_host(&out, &mut value)?;
        Ok(value[0])
    }

    /// Writes the inclusive or exclusive prefix sum of `input` into
    /// `output` (of the same length), in stream order, in one pass.
    pub fn scan<'i, 'o, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        output: impl Into<SliceMut<'o, T, OnDevice, D>>,
        kind: ScanKind,
    ) -> Result<()> {
        let (input, output) = (input.into(), output.into());
        self.check_len("scan", input.len())?;
        if input.len() != output.len() {
            return Err(self.error(
                "scan",
                ErrorKind::OutOfBounds,
                format!("the input has {} elements but the output {}", input.len(), output.len()),
            ));
        }
        if input.is_empty() {
            return Ok(());
        }
        if self.fixed_order::<T>(ReduceOp::Sum) {
            return self.fixed_scan(stream, input, output, kind);
        }
        let built = self.built::<T>(ReduceOp::Sum)?;
        let kernel = &built.scan;
        let size = std::mem::size_of::<T>();
        let host = self.ctx.info().backend == crate::Backend::Host;
        let threads = kernel.block_size(BlockRequest::new(THREADS));
        let items = built.scan_items;
        let shared = exchange_len(threads, items) * size;
        let n = input.len() as u32;
        // The host backend's implementation scans the whole input in one
        // block, in parallel across the host's cores.
        let tiles = if host { 1 } else { n.div_ceil(threads * items) };
        // The tile counter, then each tile's status: a word per 16 bits.
        let mut state = stream.alloc::<u32>(1 + tiles as usize * size / 2)?;
        stream.fill(&mut state, 0u32)?;
        let state = state.slice_mut(..)?;
        let exclusive = u32::from(kind == ScanKind::Exclusive);
        // SAFETY: alg_scan reads input[0..n), writes output[0..n), and with
        // exactly `tiles` blocks touches state[0..1 + tiles * size / 2),
        // which was zeroed above.
        unsafe {
            stream.launch(
                kernel,
                LaunchConfig::linear(tiles, threads, shared),
                &[(&input).into(), (&output).into(), (&state).into(), n.into(), exclusive.into(), T::zeroed().arg()],
            )
        }
    }

    /// Writes into `out[s]` the combination of the input's elements
    /// `offsets[s]..offsets[s + 1]`, for each of the `offsets.len() - 1`
    /// segments, in stream order.
    /// The offsets must be non-decreasing and end within the input; they are
    /// checked here and copied to the device (which waits for the work
    /// queued on `stream` before it).
    pub fn segmented_reduce<'i, 'o, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        offsets: &[u32],
        op: ReduceOp,
        out: impl Into<SliceMut<'o, T, OnDevice, D>>,
    ) -> Result<()> {
        let (input, out) = (input.into(), out.into());
        self.check_len("segmented_reduce", input.len())?;
        let Some(segments) = offsets.len().checked_sub(1) else {
            return Err(self.error(
                "segmented_reduce",
                ErrorKind::OutOfBounds,
                "no offsets: segments s take offsets[s]..offsets[s + 1], so n segments need n + 1 offsets",
            ));
        };
        self.check_len("segmented_reduce", segments)?;
        if out.len() != segments {
            return Err(self.error(
                "segmented_reduce",
                ErrorKind::OutOfBounds,
                format!("{} offsets make {segments} segments, but the output holds {}", offsets.len(), out.len()),
            ));
        }
        if let Some(s) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(self.error(
                "segmented_reduce",
                ErrorKind::OutOfBounds,
                format!("offsets decrease at segment {s}: {} then {}", offsets[s], offsets[s + 1]),
            ));
        }
        if let Some(&last) = offsets.last()
            && last as usize > input.len()
        {
            return Err(self.error(
                "segmented_reduce",
                ErrorKind::OutOfBounds,
                format!("the last offset is {last}, past the input's {} elements", input.len()),
            ));
        }
        if segments == 0 {
            return Ok(());
        }
        let mut device_offsets = stream.alloc::<u32>(offsets.len())?;
        stream.copy_from_host(offsets, &mut device_offsets)?;
        self.launch_segmented(stream, input, device_offsets.slice(..)?, op, out)
    }

    /// [`Self::segmented_reduce`] with the offsets already on the device:
    /// nothing waits for the host.
    ///
    /// # Safety
    /// `offsets` holds `out.len() + 1` non-decreasing offsets, the last at
    /// most the input's length. The kernel clamps offsets to the input, so
    /// bad ones read nothing outside it, but their segments' results are
    /// then meaningless: the promise is what makes them right.
    pub unsafe fn segmented_reduce_on_device<'i, 'f, 'o, T: Element>(
        &self,
        stream: &Stream<D>,
        input: impl Into<Slice<'i, T, OnDevice, D>>,
        offsets: impl Into<Slice<'f, u32, OnDevice, D>>,
        op: ReduceOp,
        out: impl Into<SliceMut<'o, T, OnDevice, D>>,
    ) -> Result<()> {
        let (input, offsets, out) = (input.into(), offsets.into(), out.into());
        self.check_len("segmented_reduce", input.len())?;
        self.check_len("segmented_reduce", out.len())?;
        if offsets.len() != out.len() + 1 {
            return Err(self.error(
                "segmented_reduce",
                ErrorKind::OutOfBounds,
                format!("{} offsets for {} segments; n segments need n + 1 offsets", offsets.len(), out.len()),
            ));
        }
        if out.is_empty() {
            return Ok(());
        }
        self.launch_segmented(stream, input, offsets, op, out)
    }

    /// Launches `alg_segmented_reduce` over checked lengths.
    fn launch_segmented<T: Element>(
        &self,
        stream: &Stream<D>,
        input: Slice<'_, T, OnDevice, D>,
        offsets: Slice<'_, u32, OnDevice, D>,
        op: ReduceOp,
        out: SliceMut<'_, T, OnDevice, D>,
    ) -> Result<()> {
        if self.fixed_order::<T>(op) {
            return self.fixed_segmented(stream, input, offsets, out);
        }
        let built = self.built::<T>(op)?;
        let kernel = &built.segmented;
        let threads = kernel.block_size(BlockRequest::new(self.threads).shared_per_thread(std::mem::size_of::<T>()));
        let segments = out.len() as u32;
        // Threads per segment: a power of two near a quarter of the mean
        // segment, so that each thread adds about four elements.
        let mean = input.len() / out.len();
        let group = (mean / 4).max(1).next_power_of_two().min(1 << threads.max(1).ilog2()) as u32;
        let per_block = threads / group;
        let units = self.ctx.info().compute_units.max(1);
        let blocks = segments.div_ceil(per_block).min(units.saturating_mul(BLOCKS_PER_UNIT).min(MAX_BLOCKS));
        // SAFETY: alg_segmented_reduce reads offsets[0..=segments), input
        // within [0, n) (offsets are clamped to it) and writes out[0..segments).
        unsafe {
            stream.launch(
                kernel,
                LaunchConfig::linear(blocks, threads, threads as usize * std::mem::size_of::<T>()),
                &[
                    (&input).into(),
                    (&offsets).into(),
                    (&out).into(),
                    (input.len() as u32).into(),
                    segments.into(),
                    group.into(),
                    op.identity::<T>().arg(),
                ],
            )
        }
    }

    /// The kernels for `T` and `op`, built on first use.
    fn built<T: Element>(&self, op: ReduceOp) -> Result<Arc<Built<D>>> {
        let mut built = self.built.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(b) = built.iter().find(|b| b.ty == T::NAME && b.op == op) {
            return Ok(Arc::clone(b));
        }
        self.check_fp64::<T>()?;
        // The host backend's implementations; GPU backends ignore them.
        #[cfg(feature = "host")]
        let hosts = host::kernels::<T>(op);
        #[cfg(not(feature = "host"))]
        let hosts: Vec<crate::host_kernel::HostKernel> = Vec::new();
        let scan_items = self.scan_items_for::<T>();
        let module = self.ctx.build_module_with(&source::<T>(op, scan_items), &hosts)?;
        let b = Arc::new(Built {
            ty: T::NAME,
            op,
            reduce: module.kernel("alg_reduce")?,
            segmented: module.kernel("alg_segmented_reduce")?,
            scan: module.kernel("alg_scan")?,
            scan_items,
            _module: module,
        });
        built.push(Arc::clone(&b));
        Ok(b)
    }

    /// Elements per thread of the scan for `T` (compiled into its kernel):
    /// the tuned count, halved until a tile of the largest block fits the
    /// device's shared memory beside the look-back's static arrays.
    fn scan_items_for<T: Element>(&self) -> u32 {
        let size = std::mem::size_of::<T>();
        let limit = self.ctx.info().shared_memory_per_block.saturating_sub(SCAN_WINDOW * (size + 4) + 16);
        let mut items = self.scan_items[usize::from(size > 4)];
        while items > 1 && exchange_len(THREADS, items) * size > limit {
            items /= 2;
        }
        items
    }

    /// An error where `T` is `f64` and the device has no 64-bit floats.
    fn check_fp64<T: Element>(&self) -> Result<()> {
        if std::mem::size_of::<T>() == 8 && T::FLOAT && !self.ctx.info().fp64 {
            return Err(self.error(
                "algorithms",
                ErrorKind::Unavailable,
                format!("{} has no 64-bit floating point (DeviceInfo::fp64 is false)", self.ctx.info().name),
            ));
        }
        Ok(())
    }

    fn check_len(&self, call: &'static str, len: usize) -> Result<()> {
        if len > MAX_LEN {
            return Err(self.error(
                call,
                ErrorKind::OutOfBounds,
                format!("{len} elements: the algorithms take at most {MAX_LEN} (2^31 - 1); split the work"),
            ));
        }
        Ok(())
    }

    #[cold]
    fn error(&self, call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
        Error::new(self.ctx.info().backend, call, kind, message)
    }
}

/// Every instantiation of the algorithms' source the library can build
/// (element type and operator, and its text), for checking them with
/// other compilers (`cargo xtask hip-compile`).
pub fn kernel_sources() -> Vec<(String, String)> {
    fn of<T: Element>(out: &mut Vec<(String, String)>) {
        out.push((format!("algorithms select {}", T::NAME), select::source::<T>(16)));
        for op in [ReduceOp::Sum, ReduceOp::Min, ReduceOp::Max] {
            out.push((
                format!("algorithms {} {}", T::NAME, op.name()),
                source::<T>(op, SCAN_ITEMS[usize::from(std::mem::size_of::<T>() > 4)]),
            ));
        }
    }
    let mut out = vec![
        ("algorithms fixed float".to_string(), fixed::source::<f32>()),
        ("algorithms fixed double".to_string(), fixed::source::<f64>()),
    ];
    for (key, value) in [(4, 0), (4, 4), (4, 8), (8, 0), (8, 4), (8, 8)] {
        out.push((format!("algorithms sort {key}-byte keys {value}-byte values"), sort::source(key, value, 256, 16)));
    }
    of::<u32>(&mut out);
    of::<i32>(&mut out);
    of::<u64>(&mut out);
    of::<i64>(&mut out);
    of::<f32>(&mut out);
    of::<f64>(&mut out);
    out
}

/// Elements of a block exchange of `threads` × `items` (the dialect's
/// `BLOCK_EXCHANGE_LEN`): one padding element in 32.
fn exchange_len(threads: u32, items: u32) -> usize {
    let tile = threads as usize * items as usize;
    tile + tile / 32
}

/// The generic source instantiated for `T` and `op`.
fn source<T: Element>(op: ReduceOp, items: u32) -> String {
    let body =
        hetero_kernels::ALGORITHMS.replace("$OP", op.dialect_name()).replace("$T", T::NAME).replace("$S", T::SUFFIX);
    format!("/* hetero::algorithms: {} {} */\n#define ALG_ITEMS {items}u\n{body}", T::NAME, op.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_is_instantiated_for_the_type() {
        let text = source::<i64>(ReduceOp::Sum, 8);
        assert!(text.contains("#define ALG_ITEMS 8u\n"));
        assert!(text.contains("a0 = hetero_add_i64(a0, in[i]);"), "{text}");
        assert!(!text.contains('$'), "{text}");
        assert!(source::<f32>(ReduceOp::Min, 8).contains("block_reduce_min_f32(sh,"));
    }
}
