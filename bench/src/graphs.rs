//! Graph rows: a graph of 1, 10 and 100 tiny launches (one block of
//! `affine_u32` on 4 KiB) replayed, against the same launches enqueued one
//! by one on a stream; what recording and building a graph costs; and, on
//! CUDA and HIP, the same through the runtime's graph API directly, in the
//! same process. Host time per launch (what the host spends to enqueue)
//! and time per launch until done (what the device takes), medians of
//! rounds.

use std::time::Instant;

use hetero::{BlockRequest, Context, DeviceBuffer, LaunchConfig};

use crate::measure::{Fail, median};
use crate::sizes;

/// Launches per graph of each row.
pub const LAUNCHES: [usize; 3] = [1, 10, 100];

/// Launches per timed round (replays of a graph of `n`: this over `n`).
const PER_ROUND: usize = 2000;

/// One row: microseconds per launch, or per graph where it says so.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GraphCost {
    /// Launches in the graph.
    pub launches: usize,
    /// Whether the backend built the graph itself (else hetero replays its nodes).
    pub native: bool,
    /// Host µs per launch, enqueued one by one on an untimed stream.
    pub stream_us: f64,
    /// Host µs per launch inside a replayed graph.
    pub replay_us: f64,
    /// Host µs per launch inside a graph replayed through the runtime's API.
    pub raw_replay_us: Option<f64>,
    /// The same with what hetero's tracking adds (an event recorded after each replay).
    pub raw_tracked_us: Option<f64>,
    /// µs per launch until done, one by one.
    pub stream_done_us: f64,
    /// µs per launch until done, replayed.
    pub replay_done_us: f64,
    /// µs per launch until done, replayed through the runtime's API.
    pub raw_done_us: Option<f64>,
    /// µs to record and build one graph (hetero).
    pub record_us: f64,
    /// µs to capture and instantiate one graph through the runtime's API.
    pub raw_record_us: Option<f64>,
}

/// A runtime's own graph API, on a graph of `n` launches of the same
/// kernel the hetero path runs (`raw_cuda.rs`, `raw_hip.rs`).
pub trait RawGraphs {
    /// Captures `n` launches into a graph and instantiates it, replacing
    /// the one built before.
    fn build(&mut self, n: usize) -> Result<(), Fail>;
    /// Enqueues the last graph built.
    fn replay(&mut self) -> Result<(), Fail>;
    /// The same with what hetero's tracking adds to an operation: the
    /// current-device checks before and after, and an untimed event
    /// recorded after it (as the bench's `launch + tracking` row).
    fn replay_tracked(&mut self) -> Result<(), Fail>;
    /// Waits for the stream.
    fn sync(&mut self) -> Result<(), Fail>;
}

/// Host µs per launch of `enqueue` (run `reps` times, each `n` launches),
/// and µs per launch until `sync` returns; medians of `rounds`.
fn time(
    rounds: usize,
    reps: usize,
    n: usize,
    mut enqueue: impl FnMut() -> Result<(), Fail>,
    mut sync: impl FnMut() -> Result<(), Fail>,
) -> Result<(f64, f64), Fail> {
    let (mut host, mut done) = (Vec::new(), Vec::new());
    for round in 0..rounds + 1 {
        let start = Instant::now();
        for _ in 0..reps {
            enqueue()?;
        }
        let enqueued = start.elapsed();
        sync()?;
        let finished = start.elapsed();
        // Round 0 warms up.
        if round > 0 {
            let launches = (reps * n) as f64;
            host.push(enqueued.as_secs_f64() * 1e6 / launches);
            done.push(finished.as_secs_f64() * 1e6 / launches);
        }
    }
    Ok((median(&host), median(&done)))
}

/// Every row on `ctx`'s device; `raw` is the runtime's own graph API
/// where the backend has one.
pub fn measure(
    ctx: &Context,
    raw: Option<&mut (dyn RawGraphs + 'static)>,
    rounds: usize,
) -> Result<Vec<GraphCost>, Fail> {
    let kernel = ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?;
    let threads = kernel.block_size(BlockRequest::new(sizes::LAUNCH_THREADS));
    let config = LaunchConfig::linear(1, threads, 0);
    let stream = ctx.untimed_stream()?;
    let words = sizes::WORDS as u32;
    let mut x: DeviceBuffer<u32> = stream.alloc_zeros(sizes::WORDS)?;
    let mut raw = raw;
    let mut rows = Vec::new();
    for n in LAUNCHES {
        let reps = (PER_ROUND / n).max(1);
        let (stream_us, stream_done_us) = time(
            rounds,
            reps,
            n,
            || {
                for _ in 0..n {
                    let xs = x.slice_mut(..)?;
                    // SAFETY: affine_u32 touches x[0..words), and x holds that many.
                    unsafe { stream.launch(&kernel, config, &[(&xs).into(), words.into(), 1u32.into(), 1u32.into()]) }?;
                }
                Ok(())
            },
            || Ok(stream.synchronize()?),
        )?;
        // Recording and building, timed over a few graphs.
        let builds = 20;
        let start = Instant::now();
        for _ in 0..builds {
            let mut rec = ctx.recorder();
            let gx = rec.bind_mut(&mut x)?;
            let s = rec.stream();
            for _ in 0..n {
                // SAFETY: as above.
                unsafe { rec.launch(s, &kernel, config, vec![gx.into(), words.into(), 1u32.into(), 1u32.into()]) }?;
            }
            drop(rec.finish()?);
        }
        let record_us = start.elapsed().as_secs_f64() * 1e6 / builds as f64;
        let mut rec = ctx.recorder();
        let gx = rec.bind_mut(&mut x)?;
        let s = rec.stream();
        for _ in 0..n {
            // SAFETY: as above.
            unsafe { rec.launch(s, &kernel, config, vec![gx.into(), words.into(), 1u32.into(), 1u32.into()]) }?;
        }
        let mut graph = rec.finish()?;
        let native = graph.is_native();
        let (replay_us, replay_done_us) =
            time(rounds, reps, n, || Ok(graph.replay(&stream)?), || Ok(stream.synchronize()?))?;
        drop(graph);
        let (mut raw_replay_us, mut raw_done_us, mut raw_record_us, mut raw_tracked_us) = (None, None, None, None);
        if let Some(raw) = raw.as_deref_mut() {
            let start = Instant::now();
            for _ in 0..builds {
                raw.build(n)?;
            }
            raw_record_us = Some(start.elapsed().as_secs_f64() * 1e6 / builds as f64);
            let cell = std::cell::RefCell::new(raw);
            let (host, done) = time(rounds, reps, n, || cell.borrow_mut().replay(), || cell.borrow_mut().sync())?;
            let (tracked, _) =
                time(rounds, reps, n, || cell.borrow_mut().replay_tracked(), || cell.borrow_mut().sync())?;
            (raw_replay_us, raw_done_us, raw_tracked_us) = (Some(host), Some(done), Some(tracked));
        }
        rows.push(GraphCost {
            launches: n,
            native,
            stream_us,
            replay_us,
            raw_replay_us,
            raw_tracked_us,
            stream_done_us,
            replay_done_us,
            raw_done_us,
            record_us,
            raw_record_us,
        });
    }
    stream.synchronize()?;
    Ok(rows)
}
