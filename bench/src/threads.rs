//! Whether enqueuing scales with host threads, through hetero and through
//! the vendor API: each of T threads makes its own path (its own streams
//! and buffers), warms it up, and enqueues pull-shaped batches on its own
//! stream: a tracked 4 KiB copy in, a tracked launch, a copy out. The
//! rate is batches per second of wall-clock time, from the first thread's
//! start to the last one's drained stream, for every thread count.
//!
//! The vendor path shows how far the runtime itself lets threads enqueue
//! at once; hetero scaling less than it would be hetero's own
//! serialisation (shared locks, reference counts, lists). Each thread
//! count runs [`REPEATS`] times with the paths taking turns; the median
//! rate counts.

use std::sync::Barrier;
use std::time::Instant;

use crate::Op;
use crate::measure::{Fail, Path};

/// Runs of each thread count and path; the median rate counts.
pub const REPEATS: usize = 3;
/// Batches each thread enqueues before the timed ones (not timed).
const WARMUP: usize = 100;

/// Makes one thread's path, on that thread.
pub type Make<'a> = Box<dyn Fn() -> Result<Box<dyn Path>, Fail> + Sync + 'a>;

/// The rate of one path at one thread count.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ThreadRate {
    /// `hetero-untimed` or the vendor path (`raw`).
    pub path: &'static str,
    /// Host threads, each on its own stream.
    pub threads: usize,
    /// Batches per thread.
    pub batches: usize,
    /// Batches per second over all threads (median of the runs).
    pub batches_per_s: f64,
    /// Every run's rate.
    pub runs: Vec<f64>,
    /// `batches_per_s` over the same path's rate with one thread.
    pub speedup: f64,
}

/// One pull-shaped batch through `path`.
fn batch(path: &mut dyn Path, i: usize) -> Result<(), Fail> {
    path.run(Op::CopyH2dTracked, i)?;
    path.run(Op::LaunchTracked, i)?;
    path.run(Op::CopyD2h, i)
}

/// Batches per second of `threads` threads enqueuing `batches` each.
fn rate(make: &Make<'_>, threads: usize, batches: usize) -> Result<f64, Fail> {
    let start = Barrier::new(threads);
    let spans = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<(Instant, Instant), String> {
                    let fail = |e: Fail| e.to_string();
                    // Every thread reaches the barrier, also after a failure,
                    // so that no other thread waits for it forever.
                    let ready = make().map_err(fail).and_then(|mut path| {
                        (0..WARMUP).try_for_each(|i| batch(&mut *path, i)).map_err(fail)?;
                        path.settle().map_err(fail)?;
                        Ok(path)
                    });
                    start.wait();
                    let mut path = ready?;
                    let began = Instant::now();
                    (0..batches).try_for_each(|i| batch(&mut *path, i)).map_err(fail)?;
                    path.settle().map_err(fail)?;
                    Ok((began, Instant::now()))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("a thread panicked".into())))
            .collect::<Result<Vec<_>, String>>()
    })?;
    let first = spans.iter().map(|s| s.0).min().ok_or("no thread ran")?;
    let last = spans.iter().map(|s| s.1).max().ok_or("no thread ran")?;
    Ok((threads * batches) as f64 / last.duration_since(first).as_secs_f64())
}

/// The rate of every path at every thread count (`1` first, for the speed-ups).
pub fn measure(paths: &[(&'static str, Make<'_>)], counts: &[usize], batches: usize) -> Result<Vec<ThreadRate>, Fail> {
    let mut rates = Vec::new();
    for &threads in counts {
        let mut runs = vec![Vec::new(); paths.len()];
        for _ in 0..REPEATS {
            for (runs, (_, make)) in runs.iter_mut().zip(paths) {
                runs.push(rate(make, threads, batches)?);
            }
        }
        for (mut runs, (path, _)) in runs.into_iter().zip(paths) {
            let unsorted = runs.clone();
            runs.sort_by(f64::total_cmp);
            let batches_per_s = runs[runs.len() / 2];
            let one = rates
                .iter()
                .find(|r: &&ThreadRate| r.path == *path && r.threads == 1)
                .map_or(batches_per_s, |r| r.batches_per_s);
            rates.push(ThreadRate {
                path,
                threads,
                batches,
                batches_per_s,
                runs: unsorted,
                speedup: batches_per_s / one,
            });
        }
    }
    Ok(rates)
}
