//! scan: exclusive prefix sum of u32 counts (counts -> offsets), exact
//! modulo 2^32, for any length.
//!
//! [`ScanPlan`] is a reduce-then-scan over tiles of `threads * ITEMS`
//! elements (`scan.kern`): `scan_tile_sums` writes each tile's total, the
//! totals are scanned the same way (recursively), and `scan_tiles` scans
//! each tile from its offset. No block waits for another, so it needs no
//! forward-progress guarantee from any backend. The pull workload reuses
//! it to turn per-jet constituent counts into offsets.

use hetero::algorithms::{Algorithms, ScanKind};
use hetero::safe::OnDevice;
use hetero::{
    BlockRequest, Context, DeviceBuffer, DeviceSlice, DeviceSliceMut, Graph, GraphBuffer, GraphStream, Kernel,
    LaunchConfig, Node, Recorder, Stream,
};
use rand::Rng;

use super::{Env, Failure, Outcome, Workload, median, timed};
use crate::check::Verdict;
use crate::inputs;

/// Variant name and threads per block asked for (the kernels' limits may
/// allow fewer: the metric `block` records the size used).
pub const VARIANTS: [(&str, u32); 2] = [("block-256", 256), ("block-192", 192)];
/// Elements each thread scans: a tile is `threads * ITEMS` elements.
pub const ITEMS: u32 = 16;
/// Largest count drawn; counts are uniform in `0..=MAX_COUNT`.
pub const MAX_COUNT: u32 = 64;
const REPEATS: usize = 5;

/// Kernels and scratch buffers to scan up to `capacity` elements.
pub struct ScanPlan {
    threads: u32,
    capacity: usize,
    sums: Kernel,
    tiles: Kernel,
    /// Per level: tile totals and their scan (at least one element each).
    levels: Vec<(DeviceBuffer<u32>, DeviceBuffer<u32>)>,
}

/// Tiles of `threads * ITEMS` elements covering `n` elements.
fn tiles_for(n: usize, threads: u32) -> usize {
    n.div_ceil(threads as usize * ITEMS as usize)
}

/// Bytes of dynamic shared memory per thread `scan_tiles` needs at most:
/// its tile (`ITEMS` words a thread, padded one word in 32) and the two
/// halves of the thread totals' double buffer.
const SHARED_PER_THREAD: usize = (ITEMS as usize + ITEMS as usize / 32 + 1 + 2) * 4;

impl ScanPlan {
    /// Builds the kernels and allocates every level for `capacity`
    /// elements, with blocks of `wanted` threads or as many as both
    /// kernels can run (any size works, down to 1).
    pub fn new(ctx: &Context, wanted: u32, capacity: usize) -> Result<Self, hetero::Error> {
        let module = ctx.build_module(hetero::kernels::SCAN)?;
        let (sums, tiles) = (module.kernel("scan_tile_sums")?, module.kernel("scan_tiles")?);
        let limits = sums.limits().and(tiles.limits());
        let threads = BlockRequest::new(wanted).shared_per_thread(SHARED_PER_THREAD).pick(ctx.info(), &limits);
        let mut levels = Vec::new();
        let mut n = capacity;
        loop {
            let tiles = tiles_for(n, threads).max(1);
            levels.push((ctx.alloc::<u32>(tiles)?, ctx.alloc::<u32>(tiles)?));
            if tiles <= 1 {
                break;
            }
            n = tiles;
        }
        Ok(Self { threads, capacity, sums, tiles, levels })
    }

    /// Threads per block the plan launches with.
    pub fn threads(&self) -> u32 {
        self.threads
    }

    /// Enqueues `output = exclusive_scan(input)`; lengths must match and fit the plan.
    pub fn enqueue(
        &mut self,
        stream: &Stream,
        input: &DeviceSlice<'_, u32>,
        output: &mut DeviceSliceMut<'_, u32>,
    ) -> Result<(), hetero::Error> {
        if input.len() != output.len() || input.len() > self.capacity {
            return Err(hetero::Error::new(
                stream.backend(),
                "scan",
                hetero::ErrorKind::OutOfBounds,
                format!("scan of {} elements into {} (plan capacity {})", input.len(), output.len(), self.capacity),
            ));
        }
        let kernels = (&self.sums, &self.tiles);
        scan_level(stream, kernels, self.threads, input, output, &mut self.levels)
    }
}

/// The launches of a scan recorded into a graph ([`ScanPlan::record`]),
/// per level: the tile sums (levels with more than one tile at the
/// recorded length) and the tile scan.
pub struct ScanNodes {
    threads: u32,
    capacity: usize,
    levels: Vec<(Option<Node>, Node)>,
}

/// Dynamic shared memory of `scan_tiles` with `threads` threads.
fn tiles_shared(threads: u32) -> usize {
    let tile = threads as usize * ITEMS as usize;
    (tile + tile / 32 + 2 * threads as usize) * 4
}

impl ScanPlan {
    /// Records `output = exclusive_scan(input)` for up to the plan's
    /// capacity on graph stream `s`, binding the plan's scratch; the
    /// length is set for each replay with [`ScanNodes::set_len`].
    pub fn record<'b>(
        &'b mut self,
        rec: &mut Recorder<'b>,
        s: GraphStream,
        input: GraphBuffer<u32, OnDevice>,
        output: GraphBuffer<u32, OnDevice>,
    ) -> Result<ScanNodes, hetero::Error> {
        let ScanPlan { threads, capacity, sums, tiles, levels } = self;
        let (threads, capacity) = (*threads, *capacity);
        let mut bound = Vec::with_capacity(levels.len());
        for (a, b) in levels.iter_mut() {
            bound.push((rec.bind_mut(a)?, rec.bind_mut(b)?));
        }
        let mut nodes = Vec::new();
        record_level(rec, s, (sums, tiles), threads, input, output, capacity, &bound, &mut nodes)?;
        Ok(ScanNodes { threads, capacity, levels: nodes })
    }
}

impl ScanNodes {
    /// Makes later replays scan the first `n` elements (`1..=capacity`):
    /// each level's grid and length, as [`ScanPlan::enqueue`] would launch
    /// them. A level recorded with more than one tile keeps its tile sums
    /// (one tile then sums to the offset 0 the tile scan reads).
    pub fn set_len(&self, graph: &mut Graph<'_>, n: usize) -> Result<(), hetero::Error> {
        if n == 0 || n > self.capacity {
            return Err(hetero::Error::new(
                graph.backend(),
                "scan",
                hetero::ErrorKind::OutOfBounds,
                format!("a recorded scan takes 1 to {} elements, not {n}", self.capacity),
            ));
        }
        let mut n = n;
        for &(sums, tiles_node) in &self.levels {
            let tiles = tiles_for(n, self.threads);
            if let Some(sums) = sums {
                graph.set_config(sums, LaunchConfig::linear(tiles as u32, self.threads, self.threads as usize * 4))?;
                // SAFETY: scan_tile_sums reads input[0..n) of a buffer of
                // at least capacity elements and writes totals[0..tiles).
                unsafe { graph.set_arg(sums, 2, n as u32) }?;
            }
            graph
                .set_config(tiles_node, LaunchConfig::linear(tiles as u32, self.threads, tiles_shared(self.threads)))?;
            // SAFETY: scan_tiles reads input[0..n) and offsets[0..tiles) and writes output[0..n).
            unsafe { graph.set_arg(tiles_node, 3, n as u32) }?;
            n = tiles;
        }
        Ok(())
    }
}

/// One level's scratch bound to a recording: tile totals and their scan.
type BoundLevel = (GraphBuffer<u32, OnDevice>, GraphBuffer<u32, OnDevice>);

/// [`scan_level`] into a graph, for `n` elements; `nodes` gets each
/// level's launches, the shallowest first.
#[allow(clippy::too_many_arguments)]
fn record_level<'b>(
    rec: &mut Recorder<'b>,
    s: GraphStream,
    (sums_kernel, tiles_kernel): (&'b Kernel, &'b Kernel),
    threads: u32,
    input: GraphBuffer<u32, OnDevice>,
    output: GraphBuffer<u32, OnDevice>,
    n: usize,
    levels: &[BoundLevel],
    nodes: &mut Vec<(Option<Node>, Node)>,
) -> Result<(), hetero::Error> {
    let tiles = tiles_for(n, threads);
    let Some((&(sums, scanned), deeper)) = levels.split_first() else {
        return Err(hetero::Error::new(rec.backend(), "scan", hetero::ErrorKind::OutOfBounds, "scan plan too shallow"));
    };
    let at = nodes.len();
    let mut sums_node = None;
    let use_offsets = u32::from(tiles > 1);
    if tiles > 1 {
        // SAFETY: scan_tile_sums reads input[0..n) and writes totals[0..tiles).
        let node = unsafe {
            rec.launch(
                s,
                sums_kernel,
                LaunchConfig::linear(tiles as u32, threads, threads as usize * 4),
                vec![input.read().into(), sums.write().into(), (n as u32).into(), ITEMS.into()],
            )
        }?;
        sums_node = Some(node);
        record_level(rec, s, (sums_kernel, tiles_kernel), threads, sums, scanned, tiles, deeper, nodes)?;
    }
    // SAFETY: scan_tiles reads input[0..n) and offsets[0..tiles) and writes output[0..n).
    let tiles_node = unsafe {
        rec.launch(
            s,
            tiles_kernel,
            LaunchConfig::linear(tiles as u32, threads, tiles_shared(threads)),
            vec![
                input.read().into(),
                output.write().into(),
                scanned.read().into(),
                (n as u32).into(),
                ITEMS.into(),
                use_offsets.into(),
            ],
        )
    }?;
    nodes.insert(at, (sums_node, tiles_node));
    Ok(())
}

fn scan_level(
    stream: &Stream,
    (sums_kernel, tiles_kernel): (&Kernel, &Kernel),
    threads: u32,
    input: &DeviceSlice<'_, u32>,
    output: &DeviceSliceMut<'_, u32>,
    levels: &mut [(DeviceBuffer<u32>, DeviceBuffer<u32>)],
) -> Result<(), hetero::Error> {
    let n = input.len();
    if n == 0 {
        return Ok(());
    }
    let tiles = tiles_for(n, threads);
    let Some(((sums, scanned), deeper)) = levels.split_first_mut() else {
        return Err(hetero::Error::new(
            stream.backend(),
            "scan",
            hetero::ErrorKind::OutOfBounds,
            "scan plan too shallow",
        ));
    };
    let tiles_shared = tiles_shared(threads);
    let use_offsets = u32::from(tiles > 1);
    if tiles > 1 {
        {
            let totals = sums.slice_mut(..tiles)?;
            // SAFETY: scan_tile_sums reads input[0..n) and writes totals[0..tiles).
            unsafe {
                stream.launch(
                    sums_kernel,
                    LaunchConfig::linear(tiles as u32, threads, threads as usize * 4),
                    &[input.into(), (&totals).into(), (n as u32).into(), ITEMS.into()],
                )
            }?;
        }
        let totals = sums.slice(..tiles)?;
        let offsets = scanned.slice_mut(..tiles)?;
        scan_level(stream, (sums_kernel, tiles_kernel), threads, &totals, &offsets, deeper)?;
    }
    // With one tile the offsets are not read (use_offsets is 0).
    let offsets = scanned.slice(..tiles)?;
    // SAFETY: scan_tiles reads input[0..n) and offsets[0..tiles) and writes output[0..n).
    unsafe {
        stream.launch(
            tiles_kernel,
            LaunchConfig::linear(tiles as u32, threads, tiles_shared),
            &[input.into(), output.into(), (&offsets).into(), (n as u32).into(), ITEMS.into(), use_offsets.into()],
        )
    }
}

/// Runs every variant over lengths 0, 1, 1001 and the full size.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let n = super::elements(env.size);
    let mut rng = inputs::rng(env.seed, "scan");
    let counts: Vec<u32> = (0..n).map(|_| rng.random_range(0..=MAX_COUNT)).collect();
    env.dump(Workload::Scan, "input", &[n as u64], &counts)?;
    let expect = reference(&counts);
    env.dump(Workload::Scan, "offsets_ref", &[n as u64], &expect)?;

    let ctx = env.ctx;
    let stream = ctx.stream()?;
    let staged = ctx.pinned_from_slice(&counts)?;
    let mut input = ctx.alloc::<u32>(n)?;
    stream.copy(&staged, &mut input)?;
    let mut output = ctx.alloc::<u32>(n)?;
    // Empty, one element, one tile and its neighbours, two levels' worth
    // and the whole input: prefixes of one input, each checked in full.
    let mut plans = VARIANTS
        .iter()
        .map(|&(name, wanted)| Ok((name, Scan::Blocks(Box::new(ScanPlan::new(ctx, wanted, n)?)))))
        .collect::<Result<Vec<_>, hetero::Error>>()?;
    let mut lengths = vec![0, 1, 1001, n];
    for (_, plan) in &plans {
        let tile = (plan.threads() * ITEMS) as usize;
        lengths.extend([tile - 1, tile, tile + 1, tile * tile + 1]);
    }
    // The library's single-pass scan (hetero::algorithms), whose tiles for
    // u32 are 256 threads of 32 elements.
    plans.push((SINGLE_PASS, Scan::SinglePass(Algorithms::new(ctx))));
    lengths.extend([8191, 8192, 8193, 3 * 8192 + 17]);
    lengths.retain(|&len| len <= n);
    lengths.sort_unstable();
    lengths.dedup();

    let mut outcomes = Vec::new();
    for (name, mut plan) in plans {
        let mut mismatches = 0;
        let mut got = vec![0u32; n];
        for &len in &lengths {
            // A fresh sentinel shows elements the scan failed to write.
            stream.fill(&mut output, u32::MAX)?;
            plan.enqueue(&stream, &input.slice(..len)?, &mut output.slice_mut(..len)?)?;
            stream.copy_to_host(output.slice(..len)?, &mut got[..len])?;
            // Prefixes of an exclusive scan are the scan of the prefix.
            mismatches += got[..len].iter().zip(&expect).filter(|(g, e)| g != e).count();
        }
        env.dump(Workload::Scan, &format!("{name}_offsets"), &[n as u64], &got)?;
        let mut times = Vec::with_capacity(REPEATS);
        for _ in 0..REPEATS {
            let ((), ms) = timed(env.clock, ctx, &stream, || {
                plan.enqueue(&stream, &input.slice(..)?, &mut output.slice_mut(..)?)
            })?;
            times.push(ms);
        }
        let ms = median(times);
        // Bytes the scan must move at least: read counts, write offsets.
        outcomes.push(
            Outcome::new(name, Verdict::exact(mismatches), Some(ms))
                .metric("gbps", n as f64 * 8.0 / (ms * 1e6))
                .metric("block", f64::from(plan.threads()))
                .with_output(super::Output::U32(got)),
        );
    }
    Ok(outcomes)
}

/// The single-pass variant's name: `hetero::algorithms`' scan.
pub const SINGLE_PASS: &str = "single-pass";

/// A variant: the block scan's plan, or the library's single-pass scan.
enum Scan {
    Blocks(Box<ScanPlan>),
    SinglePass(Algorithms),
}

impl Scan {
    fn threads(&self) -> u32 {
        match self {
            Scan::Blocks(plan) => plan.threads(),
            Scan::SinglePass(_) => 256,
        }
    }

    fn enqueue(
        &mut self,
        stream: &Stream,
        input: &DeviceSlice<'_, u32>,
        output: &mut DeviceSliceMut<'_, u32>,
    ) -> Result<(), hetero::Error> {
        match self {
            Scan::Blocks(plan) => plan.enqueue(stream, input, output),
            Scan::SinglePass(algorithms) => algorithms.scan(stream, *input, output.reborrow(), ScanKind::Exclusive),
        }
    }
}

/// Sequential exclusive scan, modulo 2^32 like the device.
pub fn reference(counts: &[u32]) -> Vec<u32> {
    let mut running = 0u32;
    counts
        .iter()
        .map(|&c| {
            let offset = running;
            running = running.wrapping_add(c);
            offset
        })
        .collect()
}
