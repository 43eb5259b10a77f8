//! sort: hits of a tracker event, each with the module it was read on and
//! its charge, put through `hetero::algorithms`' sort, histogram, select
//! and one-to-many association, as reconstruction code does with them.
//!
//! Variants, each checked exactly against a sequential reference (integer
//! results, and floats only moved, never added):
//! - `keys`: the module ids sorted;
//! - `pairs`: the ids sorted with each hit's index: the index permutation
//!   of a stable sort (equal ids keep their order);
//! - `histogram`: charges counted into 256 even bins over `[0, 100)`, by
//!   the library's documented rule (`(q - 0) * (256 / 100)` in `f32`);
//! - `select`: the charges above the noise threshold, in order;
//! - `assoc`: the hits grouped by module (`Algorithms::associate`): the
//!   module offsets, then the hit indices module by module.
//!
//! Figures: keys per second for the sorts and the association (`gkeys`),
//! and the bytes each variant must read and write over its time
//! (`gbps`, as the other workloads; `of_copy` in the report).

use hetero::algorithms::{Algorithms, Bins, Predicate, SortOrder};
use rand::Rng;

use super::{Env, Failure, Outcome, Output, Workload, median, timed};
use crate::check::Verdict;
use crate::inputs;

/// The variants, in run order.
pub const VARIANTS: [&str; 5] = ["keys", "pairs", "histogram", "select", "assoc"];
/// Detector modules hits are read on (ids `0..MODULES`).
pub const MODULES: u32 = 4000;
/// Bins of the charge histogram, over `[0, CHARGE_MAX)`.
pub const BINS: usize = 256;
/// The histogram's upper edge.
pub const CHARGE_MAX: f32 = 100.0;
/// Charges above it are kept by `select`.
pub const THRESHOLD: f32 = 20.0;
const REPEATS: usize = 5;

/// The event: each hit's module and charge.
struct Hits {
    modules: Vec<u32>,
    charges: Vec<f32>,
}

/// Hits with modules drawn unevenly (inner modules busier) and charges
/// falling off exponentially, a few past the histogram's range.
fn hits(n: usize, seed: u64) -> Hits {
    let mut rng = inputs::rng(seed, "sort");
    let modules = (0..n)
        .map(|_| {
            let u: f32 = rng.random();
            ((u * u) * MODULES as f32) as u32 % MODULES
        })
        .collect();
    let charges = (0..n).map(|_| -rng.random::<f32>().max(1e-7).ln() * 15.0).collect();
    Hits { modules, charges }
}

/// Runs every variant; one outcome each.
pub fn run(env: &Env<'_>) -> Result<Vec<Outcome>, Failure> {
    let n = super::elements(env.size);
    let Hits { modules, charges } = hits(n, env.seed);
    env.dump(Workload::Sort, "modules", &[n as u64], &modules)?;
    env.dump(Workload::Sort, "charges", &[n as u64], &charges)?;
    let ctx = env.ctx;
    let stream = ctx.stream()?;
    let algorithms = Algorithms::new(ctx);
    let device_modules = stream.upload(&modules)?;
    let device_charges = stream.upload(&charges)?;

    // The references: a stable order by module, and what follows from it.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| modules[i as usize]);
    let sorted: Vec<u32> = order.iter().map(|&i| modules[i as usize]).collect();
    let mut offsets = vec![0u32; MODULES as usize + 1];
    for &m in &modules {
        offsets[m as usize + 1] += 1;
    }
    for m in 0..MODULES as usize {
        offsets[m + 1] += offsets[m];
    }
    let mut counts = vec![0u32; BINS];
    let scale = BINS as f32 / CHARGE_MAX;
    for &q in &charges {
        if (0.0..CHARGE_MAX).contains(&q) {
            counts[(((q - 0.0) * scale) as usize).min(BINS - 1)] += 1;
        }
    }
    let kept: Vec<f32> = charges.iter().copied().filter(|&q| q > THRESHOLD).collect();

    let mismatches = |got: &[u32], want: &[u32]| {
        got.iter().zip(want).filter(|(a, b)| a != b).count() + got.len().abs_diff(want.len())
    };
    let mut outcomes = Vec::new();
    for name in VARIANTS {
        let mut work_keys = ctx.alloc::<u32>(n)?;
        let mut work_values = ctx.alloc::<u32>(n)?;
        let mut out_u32 = ctx.alloc::<u32>(n.max(MODULES as usize + 1))?;
        let mut out_f32 = ctx.alloc::<f32>(n)?;
        let mut count = ctx.alloc::<u32>(1)?;
        let iota: Vec<u32> = (0..n as u32).collect();
        let device_iota = stream.upload(&iota)?;
        let mut times = Vec::with_capacity(REPEATS);
        let mut output = None;
        let mut verdict = Verdict::exact(0);
        for repeat in 0..=REPEATS {
            // The sorts' inputs are copied in untimed first.
            if matches!(name, "keys" | "pairs") {
                stream.copy(&device_modules, &mut work_keys)?;
                stream.copy(&device_iota, &mut work_values)?;
            }
            let ((), ms) = timed(env.clock, ctx, &stream, || -> Result<(), hetero::Error> {
                match name {
                    "keys" => algorithms.sort(&stream, &mut work_keys, &SortOrder::ascending()),
                    "pairs" => {
                        algorithms.sort_pairs(&stream, &mut work_keys, &mut work_values, &SortOrder::ascending())
                    }
                    "histogram" => algorithms.histogram(
                        &stream,
                        &device_charges,
                        Bins::Even { lower: 0.0, upper: CHARGE_MAX },
                        out_u32.slice_mut(..BINS)?,
                    ),
                    "select" => algorithms.select_if(
                        &stream,
                        &device_charges,
                        Predicate::Greater(THRESHOLD),
                        &mut out_f32,
                        &mut count,
                    ),
                    _ => algorithms.associate(
                        &stream,
                        &device_modules,
                        out_u32.slice_mut(..MODULES as usize + 1)?,
                        &mut work_values,
                    ),
                }
            })?;
            // The first run warms up (kernels built, memory cached).
            if repeat > 0 {
                times.push(ms);
            }
            if repeat == REPEATS {
                let (got, check) = match name {
                    "keys" => {
                        let got = stream.download(&work_keys)?;
                        let bad = mismatches(&got, &sorted);
                        (Output::U32(got), bad)
                    }
                    "pairs" => {
                        let got = stream.download(&work_values)?;
                        let bad = mismatches(&got, &order);
                        (Output::U32(got), bad)
                    }
                    "histogram" => {
                        let got = stream.download(out_u32.slice(..BINS)?)?;
                        let bad = mismatches(&got, &counts);
                        (Output::U32(got), bad)
                    }
                    "select" => {
                        let total = stream.download(&count)?[0] as usize;
                        let got = stream.download(out_f32.slice(..total.min(n))?)?;
                        let bad = got.iter().zip(&kept).filter(|(a, b)| a.to_bits() != b.to_bits()).count()
                            + total.abs_diff(kept.len());
                        (Output::F32(got), bad)
                    }
                    _ => {
                        let mut got = stream.download(out_u32.slice(..MODULES as usize + 1)?)?;
                        let bad = mismatches(&got, &offsets);
                        let indices = stream.download(&work_values)?;
                        let bad = bad + mismatches(&indices, &order);
                        got.extend(indices);
                        (Output::U32(got), bad)
                    }
                };
                verdict = Verdict::exact(check);
                output = Some(got);
            }
        }
        let ms = median(times);
        // Bytes each variant must move at least: a radix sort's passes read
        // and write every key (and value) once each; the histogram and the
        // select read the charges (the select also writes the kept ones);
        // the association reads the keys, sorts a clamped copy with the
        // indices, and writes the offsets.
        let bytes = match name {
            "keys" => 2.0 * 4.0 * n as f64,
            "pairs" | "assoc" => 2.0 * 8.0 * n as f64,
            "histogram" => 4.0 * n as f64,
            _ => 4.0 * (n + kept.len()) as f64,
        };
        let mut outcome = Outcome::new(name, verdict, Some(ms)).metric("gbps", bytes / (ms * 1e6));
        if matches!(name, "keys" | "pairs" | "assoc") {
            outcome = outcome.metric("gkeys", n as f64 / (ms * 1e6));
        }
        if let Some(output) = output {
            outcome = outcome.with_output(output);
        }
        outcomes.push(outcome);
    }
    Ok(outcomes)
}
