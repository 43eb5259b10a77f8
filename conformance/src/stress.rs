//! `cargo xtask stress`: random concurrent use of the typed layer, checked
//! against a CPU model of every buffer.
//!
//! Several threads, each with its own streams, share a pool of device
//! buffers. A thread takes a buffer (a mutex per slot: the host-side order
//! of use), enqueues a random chain on it — fills, `affine_u32` launches,
//! device-to-device copies from another buffer, uploads from pinned and
//! pageable memory, waits on events of its other streams and on gates that
//! helper threads open late — and applies the same operations to the
//! buffer's model. Device work stays asynchronous: the next thread to take
//! the buffer enqueues on *its* streams, so only the typed layer's
//! cross-stream tracking keeps the order. Readbacks compare with the model;
//! buffers are replaced while their work is queued (deferred frees).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hetero::{Context, DeviceBuffer, Kernel, LaunchConfig, Stream, UserEvent};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// What to run.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    /// How long each device is stressed.
    pub duration: Duration,
    /// Host threads enqueueing work.
    pub threads: usize,
    /// Streams per thread.
    pub streams: usize,
    /// Shared buffers.
    pub buffers: usize,
    /// Elements per buffer.
    pub len: usize,
    /// Seed of every random choice.
    pub seed: u64,
}

/// What a run did and found.
#[derive(Debug, Default)]
pub struct Stats {
    /// Operations enqueued.
    pub operations: u64,
    /// Readbacks compared with the model.
    pub checks: u64,
    /// Readbacks that differed from the model.
    pub mismatches: u64,
    /// Errors returned by the library (none are expected).
    pub errors: Vec<String>,
}

/// One shared buffer and its model.
struct Slot {
    buffer: DeviceBuffer<u32>,
    model: Vec<u32>,
}

#[derive(Default)]
struct Counters {
    operations: AtomicU64,
    checks: AtomicU64,
    mismatches: AtomicU64,
    errors: Mutex<Vec<String>>,
}

type Step = hetero::Result<()>;

/// The kernel the stress test launches (`affine_u32` of the UTIL source).
/// A module stays loaded until its device goes: runs that build it once
/// and share it leave the device's module count as it was.
pub fn kernel(ctx: &Context) -> hetero::Result<Kernel> {
    ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")
}

/// Stresses `ctx` for `config.duration`, launching `kernel` (see
/// [`kernel`]); returns `None` when the threads do not finish within
/// `watchdog` after the deadline (a hang).
pub fn run(ctx: &Context, kernel: &Arc<Kernel>, config: Config, watchdog: Duration) -> Option<Stats> {
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let setup = || -> hetero::Result<Vec<Arc<Mutex<Slot>>>> {
        let stream = ctx.stream()?;
        let mut slots = Vec::new();
        for i in 0..config.buffers {
            let mut buffer = ctx.alloc::<u32>(config.len)?;
            stream.fill(&mut buffer, i as u32)?;
            slots.push(Arc::new(Mutex::new(Slot { buffer, model: vec![i as u32; config.len] })));
        }
        stream.synchronize()?;
        Ok(slots)
    };
    let slots = match setup() {
        Ok(s) => s,
        Err(e) => return Some(Stats { errors: vec![format!("setup: {e}")], ..Stats::default() }),
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for t in 0..config.threads {
        let (ctx, kernel, slots) = (ctx.clone(), Arc::clone(kernel), slots.clone());
        let (counters, stop, done) = (Arc::clone(&counters), Arc::clone(&stop), done_tx.clone());
        std::thread::spawn(move || {
            let mut worker = Worker {
                ctx: &ctx,
                kernel: &kernel,
                slots: &slots,
                counters: &counters,
                rng: ChaCha8Rng::seed_from_u64(config.seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                len: config.len,
            };
            if let Err(e) = worker.serve(config.streams, &stop) {
                counters.errors.lock().unwrap_or_else(PoisonError::into_inner).push(format!("thread {t}: {e}"));
            }
            // Everything the thread holds of the device goes before it says
            // it is done: a caller counting the device's handles then sees
            // none of the thread's.
            drop((kernel, slots, ctx));
            let _ = done.send(());
        });
    }
    drop(done_tx);
    std::thread::sleep(config.duration);
    stop.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + watchdog;
    for _ in 0..config.threads {
        let left = deadline.saturating_duration_since(Instant::now());
        done_rx.recv_timeout(left).ok()?;
    }
    // Final check of every buffer, through one fresh stream.
    let final_check = || -> Step {
        let stream = ctx.stream()?;
        for slot in &slots {
            let slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            let mut out = vec![0u32; config.len];
            stream.copy_to_host(&slot.buffer, &mut out)?;
            counters.checks.fetch_add(1, Ordering::Relaxed);
            if out != slot.model {
                counters.mismatches.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(())
    };
    if let Err(e) = final_check() {
        counters.errors.lock().unwrap_or_else(PoisonError::into_inner).push(format!("final check: {e}"));
    }
    let errors = std::mem::take(&mut *counters.errors.lock().unwrap_or_else(PoisonError::into_inner));
    Some(Stats {
        operations: counters.operations.load(Ordering::Relaxed),
        checks: counters.checks.load(Ordering::Relaxed),
        mismatches: counters.mismatches.load(Ordering::Relaxed),
        errors,
    })
}

struct Worker<'a> {
    ctx: &'a Context,
    kernel: &'a Kernel,
    slots: &'a [Arc<Mutex<Slot>>],
    counters: &'a Counters,
    rng: ChaCha8Rng,
    len: usize,
}

impl Worker<'_> {
    fn serve(&mut self, streams: usize, stop: &AtomicBool) -> Step {
        let streams: Vec<Stream> = (0..streams.max(1)).map(|_| self.ctx.stream()).collect::<hetero::Result<_>>()?;
        let mut staging = self.ctx.alloc_pinned::<u32>(self.len)?;
        let mut gates: Vec<(Arc<UserEvent>, std::thread::JoinHandle<()>)> = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            let a = self.rng.random_range(0..self.slots.len());
            let s = &streams[self.rng.random_range(0..streams.len())];
            let choice = self.rng.random_range(0..100);
            if choice < 8 && self.slots.len() > 1 {
                let b = (a + self.rng.random_range(1..self.slots.len())) % self.slots.len();
                self.copy_between(s, a, b)?;
                continue;
            }
            let mut slot = self.slots[a].lock().unwrap_or_else(PoisonError::into_inner);
            match choice {
                8..=29 => self.affine(s, &mut slot)?,
                30..=41 => {
                    let value = self.rng.random();
                    let n = self.rng.random_range(0..=self.len);
                    s.fill(slot.buffer.slice_mut(..n)?, value)?;
                    slot.model[..n].fill(value);
                }
                42..=51 => {
                    let host = staging.host_slice_mut()?;
                    let base: u32 = self.rng.random();
                    for (i, v) in host.iter_mut().enumerate() {
                        *v = base.wrapping_add(i as u32);
                    }
                    slot.model.copy_from_slice(host);
                    s.copy(&staging, &mut slot.buffer)?;
                }
                52..=59 => {
                    let data: Vec<u32> = (0..self.len).map(|_| self.rng.random()).collect();
                    s.copy_from_host(&data, &mut slot.buffer)?;
                    slot.model = data;
                }
                60..=69 => {
                    s.copy(&slot.buffer, &mut staging)?;
                    let got = staging.host_slice()?;
                    self.check(got == slot.model.as_slice());
                }
                70..=74 => {
                    let mut out = vec![0u32; self.len];
                    s.copy_to_host(&slot.buffer, &mut out)?;
                    self.check(out == slot.model);
                }
                75..=82 => {
                    // Order another of this thread's streams after `s`.
                    let event = self.ctx.event()?;
                    s.record(&event)?;
                    let other = &streams[self.rng.random_range(0..streams.len())];
                    other.wait(&event)?;
                    self.affine(other, &mut slot)?;
                }
                83..=88 => {
                    // A gate opened late by a helper thread holds the stream.
                    let gate = Arc::new(self.ctx.user_event()?);
                    s.wait(&*gate)?;
                    let delay = Duration::from_micros(self.rng.random_range(0..3000));
                    let opener = Arc::clone(&gate);
                    let handle = std::thread::spawn(move || {
                        std::thread::sleep(delay);
                        let _ = opener.complete();
                    });
                    gates.push((gate, handle));
                    self.affine(s, &mut slot)?;
                }
                89..=94 => {
                    // Replace the buffer while its work is queued: the old one
                    // is retired, never freed under the queued work.
                    let mut fresh = self.ctx.alloc::<u32>(self.len)?;
                    s.copy(&slot.buffer, &mut fresh)?;
                    slot.buffer = fresh;
                }
                _ => s.synchronize()?,
            }
            self.counters.operations.fetch_add(1, Ordering::Relaxed);
            drop(slot);
            if gates.len() > 8 {
                for (_, handle) in gates.drain(..) {
                    let _ = handle.join();
                }
            }
        }
        for (_, handle) in gates {
            let _ = handle.join();
        }
        for s in &streams {
            s.synchronize()?;
        }
        Ok(())
    }

    fn check(&self, ok: bool) {
        self.counters.checks.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.counters.mismatches.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// x[0..n) = a * x + b (wrapping), on `stream`.
    fn affine(&mut self, stream: &Stream, slot: &mut Slot) -> Step {
        let n = self.rng.random_range(1..=self.len);
        let (a, b): (u32, u32) = (self.rng.random_range(1..8), self.rng.random());
        let xs = slot.buffer.slice_mut(..)?;
        let config = LaunchConfig::linear((n as u32).div_ceil(64), 64, 0);
        // SAFETY: affine_u32 touches x[0..n) and the buffer holds len >= n elements.
        unsafe { stream.launch(self.kernel, config, &[(&xs).into(), (n as u32).into(), a.into(), b.into()])? };
        for v in &mut slot.model[..n] {
            *v = a.wrapping_mul(*v).wrapping_add(b);
        }
        Ok(())
    }

    /// Copies a random range of buffer `from` into buffer `to` (locked in
    /// index order, so two threads never wait on each other's locks).
    fn copy_between(&mut self, stream: &Stream, from: usize, to: usize) -> Step {
        let (first, second) = (from.min(to), from.max(to));
        let mut low = self.slots[first].lock().unwrap_or_else(PoisonError::into_inner);
        let mut high = self.slots[second].lock().unwrap_or_else(PoisonError::into_inner);
        let (src, dst) = if from < to { (&mut *low, &mut *high) } else { (&mut *high, &mut *low) };
        let start = self.rng.random_range(0..self.len);
        let n = self.rng.random_range(0..=self.len - start);
        stream.copy(src.buffer.slice(start..start + n)?, dst.buffer.slice_mut(start..start + n)?)?;
        let part = src.model[start..start + n].to_vec();
        dst.model[start..start + n].copy_from_slice(&part);
        self.counters.operations.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
