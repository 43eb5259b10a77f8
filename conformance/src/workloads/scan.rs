//! scan: exclusive prefix sum of u32 counts (counts -> offsets), exact
//! modulo 2^32, for any length.
//!
//! [`ScanPlan`] runs `scan_block` over blocks, scans the block totals the
//! same way (recursively) and adds them back with `scan_add`. The pull
//! workload reuses it to turn per-jet constituent counts into offsets.

use hetero::{Context, DeviceBuffer, DeviceSlice, DeviceSliceMut, Kernel, LaunchConfig, Stream};
use rand::Rng;

use super::{Env, Failure, Outcome, Workload, blocks_for, median, timed};
use crate::check::Verdict;
use crate::inputs;

/// Variant name and threads per block.
pub const VARIANTS: [(&str, u32); 2] = [("block-256", 256), ("block-192", 192)];
/// Largest count drawn; counts are uniform in `0..=MAX_COUNT`.
pub const MAX_COUNT: u32 = 64;
const REPEATS: usize = 5;

/// Kernels and scratch buffers to scan up to `capacity` elements.
pub struct ScanPlan {
    threads: u32,
    capacity: usize,
    block: Kernel,
    add: Kernel,
    /// Per level: block totals and their scan.
    levels: Vec<(DeviceBuffer<u32>, DeviceBuffer<u32>)>,
}

impl ScanPlan {
    /// Builds the kernels and allocates every level for `capacity` elements.
    pub fn new(ctx: &Context, threads: u32, capacity: usize) -> Result<Self, hetero::Error> {
        let module = ctx.build_module(hetero::kernels::SCAN)?;
        let mut levels = Vec::new();
        let mut n = capacity;
        loop {
            let blocks = blocks_for(n, threads) as usize;
            levels.push((ctx.alloc::<u32>(blocks)?, ctx.alloc::<u32>(blocks)?));
            if blocks <= 1 {
                break;
            }
            n = blocks;
        }
        Ok(Self { threads, capacity, block: module.kernel("scan_block")?, add: module.kernel("scan_add")?, levels })
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
        let (block, add, threads) = (&self.block, &self.add, self.threads);
        scan_level(stream, block, add, threads, input, output, &mut self.levels)
    }
}

fn scan_level(
    stream: &Stream,
    block: &Kernel,
    add: &Kernel,
    threads: u32,
    input: &DeviceSlice<'_, u32>,
    output: &DeviceSliceMut<'_, u32>,
    levels: &mut [(DeviceBuffer<u32>, DeviceBuffer<u32>)],
) -> Result<(), hetero::Error> {
    let n = input.len();
    if n == 0 {
        return Ok(());
    }
    let blocks = blocks_for(n, threads);
    let Some(((sums, scanned), deeper)) = levels.split_first_mut() else {
        return Err(hetero::Error::new(
            stream.backend(),
            "scan",
            hetero::ErrorKind::OutOfBounds,
            "scan plan too shallow",
        ));
    };
    {
        let totals = sums.slice_mut(..blocks as usize)?;
        // SAFETY: scan_block reads input[0..n), writes output[0..n) and totals[0..blocks).
        unsafe {
            stream.launch(
                block,
                LaunchConfig::linear(blocks, threads, threads as usize * 8),
                &[input.into(), output.into(), (&totals).into(), (n as u32).into()],
            )
        }?;
    }
    if blocks > 1 {
        let totals = sums.slice(..blocks as usize)?;
        let offsets = scanned.slice_mut(..blocks as usize)?;
        scan_level(stream, block, add, threads, &totals, &offsets, deeper)?;
        let offsets = scanned.slice(..blocks as usize)?;
        // SAFETY: scan_add updates output[0..n) and reads offsets[0..blocks).
        unsafe {
            stream.launch(
                add,
                LaunchConfig::linear(blocks, threads, 0),
                &[output.into(), (&offsets).into(), (n as u32).into()],
            )
        }?;
    }
    Ok(())
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
    let mut lengths = vec![0, 1, 1001.min(n), n];
    lengths.dedup();

    let mut outcomes = Vec::new();
    for (name, threads) in VARIANTS {
        let mut plan = ScanPlan::new(ctx, threads, n)?;
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
            let ((), ms) =
                timed(ctx, &stream, || Ok(plan.enqueue(&stream, &input.slice(..)?, &mut output.slice_mut(..)?)?))?;
            times.push(ms);
        }
        let ms = median(times);
        // Bytes the scan must move at least: read counts, write offsets.
        outcomes.push(
            Outcome::new(name, Verdict::exact(mismatches), Some(ms))
                .metric("gbps", n as f64 * 8.0 / (ms * 1e6))
                .with_output(super::Output::U32(got)),
        );
    }
    Ok(outcomes)
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
