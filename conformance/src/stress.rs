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
//!
//! With a [`Mix`], operations of the later features join the chain:
//! peer copies through a buffer of a second device (a round trip: pushed
//! on the thread's stream, pulled back on a stream of the other device),
//! one-node graphs recorded and replayed, and the device-wide exclusive
//! scan of [`hetero::algorithms`] from one buffer into another.
//!
//! Over a [`hetero::faults::Faulty`] device (`--inject-faults`), an
//! operation may fail with an injected fault. A failed write leaves its
//! buffer either as it was or fully written (the typed layer's enqueue is
//! failure-atomic, or synchronises when only its tracking failed), so the
//! model keeps every state the buffer may be in, and a readback must match
//! one of them, which it then settles on. Every other error ends the run.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hetero::algorithms::{Algorithms, ScanKind};
use hetero::faults::{FaultLog, injected_id, injected_ids};
use hetero::{Context, Device, DeviceBuffer, DeviceSlice, DeviceSliceMut, Kernel, LaunchConfig, Stream, UserEvent};
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

/// The later features a run mixes into its operations (`--mix`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mix {
    /// Peer copies with a second device of the backend.
    pub peer: bool,
    /// Graphs recorded and replayed.
    pub graphs: bool,
    /// Device-wide algorithms (the exclusive scan).
    pub algorithms: bool,
}

impl Mix {
    /// Parses `peer,graphs,algorithms` (any of them) or `all`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut mix = Mix::default();
        for word in text.split(',').map(str::trim) {
            match word {
                "peer" => mix.peer = true,
                "graphs" => mix.graphs = true,
                "algorithms" => mix.algorithms = true,
                "all" => mix = Mix { peer: true, graphs: true, algorithms: true },
                other => return Err(format!("`{other}` is not a mix: give peer, graphs, algorithms or all")),
            }
        }
        Ok(mix)
    }

    /// Whether anything is mixed in.
    pub fn any(self) -> bool {
        self.peer || self.graphs || self.algorithms
    }
}

/// What the threads of a run share besides the buffers: the kernel, and
/// what the mix needs (built once, before faults are injected, so runs
/// that share them leave the device's handle counts as they were).
pub struct Tools<D: Device> {
    kernel: Kernel<D>,
    algorithms: Option<Algorithms<D>>,
    graphs: bool,
    /// The second device of peer copies.
    peer: Option<Context<D>>,
}

/// The [`Tools`] of `ctx` for `mix`; `peer` is the second device, which
/// `mix.peer` needs.
pub fn tools<D: Device>(ctx: &Context<D>, mix: Mix, peer: Option<Context<D>>) -> hetero::Result<Tools<D>> {
    let kernel = ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")?;
    let algorithms = if mix.algorithms {
        let algorithms = Algorithms::new(ctx);
        // Compiled now, outside the timed run.
        let stream = ctx.stream()?;
        let input = stream.upload(&[1u32; 64])?;
        let mut output = ctx.alloc::<u32>(64)?;
        algorithms.scan(&stream, &input, &mut output, ScanKind::Exclusive)?;
        stream.synchronize()?;
        Some(algorithms)
    } else {
        None
    };
    Ok(Tools { kernel, algorithms, graphs: mix.graphs, peer: if mix.peer { peer } else { None } })
}

impl<D: Device> Tools<D> {
    /// Trims the second device ([`Context::trim`]): its cached blocks hold
    /// the marks of peer copies made on the first, events of the first
    /// device that its own trim cannot give back while they are held.
    pub fn trim_peer(&self) {
        if let Some(peer) = &self.peer {
            peer.trim();
        }
    }
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
    /// Readbacks of a buffer whose contents an injected fault had left
    /// unknown (more states than the model keeps): they set the model.
    pub resyncs: u64,
    /// Errors returned by the library that no fault injection explains
    /// (none are expected).
    pub errors: Vec<String>,
    /// The numbers of the injected faults that operations returned (an
    /// error may tell of two: a tracking record that failed twice).
    pub surfaced: BTreeSet<u64>,
}

/// The most states a buffer's model keeps after injected faults; beyond
/// that its contents are unknown until a readback.
const MAX_STATES: usize = 4;

/// One shared buffer and its model: every state the buffer may be in
/// (one, unless an injected fault left it open; none when unknown).
struct Slot<D: Device> {
    buffer: DeviceBuffer<u32, D>,
    states: Vec<Vec<u32>>,
}

impl<D: Device> Slot<D> {
    /// After a write that returned `result`: `next` of each state, and on an
    /// injected fault also each state as it was.
    fn write(&mut self, result: &Step, next: impl Fn(&[u32]) -> Vec<u32>) {
        let written: Vec<Vec<u32>> = self.states.iter().map(|s| next(s)).collect();
        match result {
            Ok(()) => self.states = written,
            Err(_) => {
                for state in written {
                    if !self.states.contains(&state) {
                        self.states.push(state);
                    }
                }
                if self.states.len() > MAX_STATES {
                    self.states.clear();
                }
            }
        }
    }

    /// After a write of the whole buffer with `data`.
    fn overwrite(&mut self, result: &Step, data: Vec<u32>) {
        match result {
            Ok(()) => self.states = vec![data],
            Err(_) if self.states.is_empty() => {}
            Err(_) => {
                if !self.states.contains(&data) {
                    self.states.push(data);
                }
            }
        }
    }
}

#[derive(Default)]
struct Counters {
    operations: AtomicU64,
    checks: AtomicU64,
    mismatches: AtomicU64,
    resyncs: AtomicU64,
    errors: Mutex<Vec<String>>,
    surfaced: Mutex<BTreeSet<u64>>,
}

impl Counters {
    /// A readback `got` of `slot`: compared with its states, and the
    /// matching one kept; sets the model when it was unknown.
    fn check<D: Device>(&self, slot: &mut Slot<D>, got: &[u32]) {
        if slot.states.is_empty() {
            self.resyncs.fetch_add(1, Ordering::Relaxed);
            slot.states = vec![got.to_vec()];
            return;
        }
        self.checks.fetch_add(1, Ordering::Relaxed);
        match slot.states.iter().position(|s| s == got) {
            Some(at) => {
                let state = slot.states.swap_remove(at);
                slot.states = vec![state];
            }
            None => {
                self.mismatches.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// An operation's result: an injected fault is noted and the run goes
    /// on; any other error ends the thread.
    fn settle(&self, result: Step) -> Step {
        match result {
            Err(e) => {
                let ids = injected_ids(&e);
                if ids.is_empty() {
                    return Err(e);
                }
                self.surfaced.lock().unwrap_or_else(PoisonError::into_inner).extend(ids);
                Ok(())
            }
            Ok(()) => Ok(()),
        }
    }

    /// Runs `make` until it gives no injected fault (at most 1000 times).
    fn retry<T>(&self, mut make: impl FnMut() -> hetero::Result<T>) -> hetero::Result<T> {
        let mut tries = 0;
        loop {
            match make() {
                Err(e) if injected_id(&e).is_some() && tries < 1000 => {
                    tries += 1;
                    self.settle(Err(e))?;
                }
                other => return other,
            }
        }
    }

    fn error(&self, message: String) {
        self.errors.lock().unwrap_or_else(PoisonError::into_inner).push(message);
    }
}

type Step = hetero::Result<()>;

/// Stresses `ctx` for `config.duration` with `tools` (see [`tools`]);
/// returns `None` when the threads do not finish within
/// `watchdog` after the deadline (a hang). With `faults`, the log of a
/// [`hetero::faults::Faulty`] device under `ctx`, faults are injected only
/// while the threads run: not into the setup or the final check.
pub fn run<D: Device>(
    ctx: &Context<D>,
    tools: &Arc<Tools<D>>,
    config: Config,
    watchdog: Duration,
    faults: Option<&FaultLog>,
) -> Option<Stats> {
    let counters = Arc::new(Counters::default());
    let stop = Arc::new(AtomicBool::new(false));
    let injecting = |on: bool| {
        if let Some(log) = faults {
            log.set_enabled(on);
        }
    };
    injecting(false);
    let setup = || -> hetero::Result<Vec<Arc<Mutex<Slot<D>>>>> {
        let stream = ctx.stream()?;
        let mut slots = Vec::new();
        for i in 0..config.buffers {
            let mut buffer = ctx.alloc::<u32>(config.len)?;
            stream.fill(&mut buffer, i as u32)?;
            slots.push(Arc::new(Mutex::new(Slot { buffer, states: vec![vec![i as u32; config.len]] })));
        }
        stream.synchronize()?;
        Ok(slots)
    };
    let slots = match setup() {
        Ok(s) => s,
        Err(e) => return Some(Stats { errors: vec![format!("setup: {e}")], ..Stats::default() }),
    };
    injecting(true);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for t in 0..config.threads {
        let (ctx, tools, slots) = (ctx.clone(), Arc::clone(tools), slots.clone());
        let (counters, stop, done) = (Arc::clone(&counters), Arc::clone(&stop), done_tx.clone());
        std::thread::spawn(move || {
            let mut worker = Worker {
                ctx: &ctx,
                kernel: &tools.kernel,
                tools: &tools,
                slots: &slots,
                counters: &counters,
                rng: ChaCha8Rng::seed_from_u64(config.seed ^ (t as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                len: config.len,
            };
            if let Err(e) = worker.serve(config.streams, &stop) {
                counters.error(format!("thread {t}: {e}"));
            }
            // Everything the thread holds of the device goes before it says
            // it is done: a caller counting the device's handles then sees
            // none of the thread's.
            drop((tools, slots, ctx));
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
    injecting(false);
    // Final check of every buffer, through one fresh stream.
    let final_check = || -> Step {
        let stream = ctx.stream()?;
        for slot in &slots {
            let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            let mut out = vec![0u32; config.len];
            stream.copy_to_host(&slot.buffer, &mut out)?;
            counters.check(&mut slot, &out);
        }
        Ok(())
    };
    if let Err(e) = final_check() {
        counters.error(format!("final check: {e}"));
    }
    let errors = std::mem::take(&mut *counters.errors.lock().unwrap_or_else(PoisonError::into_inner));
    let surfaced = std::mem::take(&mut *counters.surfaced.lock().unwrap_or_else(PoisonError::into_inner));
    Some(Stats {
        operations: counters.operations.load(Ordering::Relaxed),
        checks: counters.checks.load(Ordering::Relaxed),
        mismatches: counters.mismatches.load(Ordering::Relaxed),
        resyncs: counters.resyncs.load(Ordering::Relaxed),
        errors,
        surfaced,
    })
}

struct Worker<'a, D: Device> {
    ctx: &'a Context<D>,
    kernel: &'a Kernel<D>,
    tools: &'a Tools<D>,
    slots: &'a [Arc<Mutex<Slot<D>>>],
    counters: &'a Counters,
    rng: ChaCha8Rng,
    len: usize,
}

impl<D: Device> Worker<'_, D> {
    fn serve(&mut self, streams: usize, stop: &AtomicBool) -> Step {
        let counters = self.counters;
        let streams: Vec<Stream<D>> =
            (0..streams.max(1)).map(|_| counters.retry(|| self.ctx.stream())).collect::<hetero::Result<_>>()?;
        let mut staging = counters.retry(|| self.ctx.alloc_pinned::<u32>(self.len))?;
        // The peer side: a buffer and a stream of the second device.
        let mut far = match &self.tools.peer {
            Some(peer) => Some((counters.retry(|| peer.alloc::<u32>(self.len))?, counters.retry(|| peer.stream())?)),
            None => None,
        };
        let mut gates: Vec<(Arc<UserEvent<D>>, std::thread::JoinHandle<()>)> = Vec::new();
        let tools = self.tools;
        let mixing = self.tools.peer.is_some() || self.tools.graphs || self.tools.algorithms.is_some();
        while !stop.load(Ordering::SeqCst) {
            let a = self.rng.random_range(0..self.slots.len());
            let s = &streams[self.rng.random_range(0..streams.len())];
            let choice = self.rng.random_range(0..if mixing { 115 } else { 100 });
            let b = (a + self.rng.random_range(1..self.slots.len().max(2))) % self.slots.len();
            let result = match choice {
                0..8 if b != a => Some(self.transfer(a, b, 1, |_| None, |src, dst| s.copy(src, dst))),
                100..105 if b != a => far.as_mut().map(|(far, fs)| {
                    // There and back: pushed on `s`, pulled back on the other device's stream.
                    self.transfer(
                        a,
                        b,
                        1,
                        |_| None,
                        |src, dst| {
                            let n = src.len();
                            s.copy_peer(src, far.slice_mut(..n)?)?;
                            fs.copy_peer(far.slice(..n)?, dst).map(|_| ())
                        },
                    )
                }),
                110..115 if b != a => tools.algorithms.as_ref().map(|algorithms| {
                    self.transfer(
                        a,
                        b,
                        SCAN_ALIGN,
                        |part| Some(exclusive_scan(part)),
                        |src, dst| algorithms.scan(s, src, dst, ScanKind::Exclusive),
                    )
                }),
                _ => None,
            };
            if let Some(result) = result {
                counters.settle(result)?;
                continue;
            }
            let mut slot = self.slots[a].lock().unwrap_or_else(PoisonError::into_inner);
            let result = match choice {
                8..=29 => self.affine(s, &mut slot),
                30..=41 => {
                    let value = self.rng.random();
                    let n = self.rng.random_range(0..=self.len);
                    let result = slot.buffer.slice_mut(..n).and_then(|dst| s.fill(dst, value));
                    slot.write(&result, |m| {
                        let mut m = m.to_vec();
                        m[..n].fill(value);
                        m
                    });
                    result
                }
                42..=51 => {
                    let base: u32 = self.rng.random();
                    let data: Vec<u32> = (0..self.len as u32).map(|i| base.wrapping_add(i)).collect();
                    let result = staging
                        .host_slice_mut()
                        .map(|host| host.copy_from_slice(&data))
                        .and_then(|()| s.copy(&staging, &mut slot.buffer));
                    slot.overwrite(&result, data);
                    result
                }
                52..=59 => {
                    let data: Vec<u32> = (0..self.len).map(|_| self.rng.random()).collect();
                    let result = s.copy_from_host(&data, &mut slot.buffer);
                    slot.overwrite(&result, data);
                    result
                }
                60..=69 => s.copy(&slot.buffer, &mut staging).and_then(|()| {
                    let got = staging.host_slice()?;
                    counters.check(&mut slot, got);
                    Ok(())
                }),
                70..=74 => {
                    let mut out = vec![0u32; self.len];
                    s.copy_to_host(&slot.buffer, &mut out).map(|()| counters.check(&mut slot, &out))
                }
                75..=82 => {
                    // Order another of this thread's streams after `s`.
                    let other = &streams[self.rng.random_range(0..streams.len())];
                    let ordered = self.ctx.event().and_then(|event| {
                        s.record(&event)?;
                        other.wait(&event)
                    });
                    ordered.and_then(|()| self.affine(other, &mut slot))
                }
                83..=88 => {
                    // A gate opened late by a helper thread holds the stream.
                    let delay = Duration::from_micros(self.rng.random_range(0..3000));
                    let gated = self.ctx.user_event().map(Arc::new).and_then(|gate| {
                        s.wait(&*gate)?;
                        let opener = Arc::clone(&gate);
                        let handle = std::thread::spawn(move || {
                            std::thread::sleep(delay);
                            let _ = opener.complete();
                        });
                        gates.push((gate, handle));
                        Ok(())
                    });
                    gated.and_then(|()| self.affine(s, &mut slot))
                }
                105..110 if self.tools.graphs => self.replay_affine(s, &mut slot),
                89..=94 => {
                    // Replace the buffer while its work is queued: the old one
                    // is retired, never freed under the queued work.
                    self.ctx.alloc::<u32>(self.len).and_then(|mut fresh| {
                        s.copy(&slot.buffer, &mut fresh)?;
                        slot.buffer = fresh;
                        Ok(())
                    })
                }
                _ => s.synchronize(),
            };
            drop(slot);
            counters.settle(result)?;
            self.counters.operations.fetch_add(1, Ordering::Relaxed);
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
            counters.settle(s.synchronize())?;
        }
        if let Some((_, fs)) = &far {
            counters.settle(fs.synchronize())?;
        }
        Ok(())
    }

    /// Records `x[0..n) = a * x + b` as a one-node graph over the slot's
    /// buffer and replays it one to three times on `stream`.
    fn replay_affine(&mut self, stream: &Stream<D>, slot: &mut Slot<D>) -> Step {
        let n = self.rng.random_range(1..=self.len);
        let (a, b): (u32, u32) = (self.rng.random_range(1..8), self.rng.random());
        let replays = self.rng.random_range(1..=3);
        let mut rec = self.ctx.recorder();
        let recorded = rec.bind_mut(&mut slot.buffer).and_then(|x| {
            let s = rec.stream();
            let config = LaunchConfig::linear((n as u32).div_ceil(64), 64, 0);
            // SAFETY: affine_u32 touches x[0..n) and the buffer holds len >= n elements.
            unsafe { rec.launch(s, self.kernel, config, vec![x.into(), (n as u32).into(), a.into(), b.into()]) }
        });
        // A recording that fails enqueued nothing: the buffer is as it was.
        let mut graph = recorded.and_then(|_| rec.finish())?;
        // Each replay in turn: the first that fails ends the chain.
        let mut replayed = Vec::new();
        for _ in 0..replays {
            let result = graph.replay(stream);
            let failed = result.is_err();
            replayed.push(result);
            if failed {
                break;
            }
        }
        drop(graph);
        for result in replayed {
            slot.write(&result, |m| {
                let mut m = m.to_vec();
                for v in &mut m[..n] {
                    *v = a.wrapping_mul(*v).wrapping_add(b);
                }
                m
            });
            result?;
        }
        Ok(())
    }

    /// x[0..n) = a * x + b (wrapping), on `stream`.
    fn affine(&mut self, stream: &Stream<D>, slot: &mut Slot<D>) -> Step {
        let n = self.rng.random_range(1..=self.len);
        let (a, b): (u32, u32) = (self.rng.random_range(1..8), self.rng.random());
        let result = slot.buffer.slice_mut(..).and_then(|xs| {
            let config = LaunchConfig::linear((n as u32).div_ceil(64), 64, 0);
            // SAFETY: affine_u32 touches x[0..n) and the buffer holds len >= n elements.
            unsafe { stream.launch(self.kernel, config, &[(&xs).into(), (n as u32).into(), a.into(), b.into()]) }
        });
        slot.write(&result, |m| {
            let mut m = m.to_vec();
            for v in &mut m[..n] {
                *v = a.wrapping_mul(*v).wrapping_add(b);
            }
            m
        });
        result
    }

    /// Runs `op` from a random range of buffer `from` into the same range
    /// of buffer `to`, another buffer (locked in index order, so two
    /// threads never wait on each other's locks), and
    /// writes the range into `to`'s model: the source's range itself, or
    /// what `map` makes of it. The range starts at a multiple of `align`
    /// elements (a kernel argument at an offset must be aligned on OpenCL).
    fn transfer(
        &mut self,
        from: usize,
        to: usize,
        align: usize,
        map: impl Fn(&[u32]) -> Option<Vec<u32>>,
        op: impl FnOnce(DeviceSlice<'_, u32, D>, DeviceSliceMut<'_, u32, D>) -> Step,
    ) -> Step {
        let (first, second) = (from.min(to), from.max(to));
        let mut low = self.slots[first].lock().unwrap_or_else(PoisonError::into_inner);
        let mut high = self.slots[second].lock().unwrap_or_else(PoisonError::into_inner);
        let (src, dst) = if from < to { (&mut *low, &mut *high) } else { (&mut *high, &mut *low) };
        let start = self.rng.random_range(0..self.len) / align * align;
        let n = self.rng.random_range(0..=self.len - start);
        let result =
            src.buffer.slice(start..start + n).and_then(|from| op(from, dst.buffer.slice_mut(start..start + n)?));
        // The destination's states: each of its own with the range of each
        // of the source's (unknown when the source is).
        let sources: Vec<Vec<u32>> = src
            .states
            .iter()
            .map(|s| map(&s[start..start + n]).unwrap_or_else(|| s[start..start + n].to_vec()))
            .collect();
        if sources.is_empty() && n > 0 {
            dst.states.clear();
        } else if let [part] = sources.as_slice() {
            dst.write(&result, |m| {
                let mut m = m.to_vec();
                m[start..start + n].copy_from_slice(part);
                m
            });
        } else {
            let before = dst.states.clone();
            let mut states: Vec<Vec<u32>> = Vec::new();
            for state in &before {
                for part in &sources {
                    let mut m = state.clone();
                    m[start..start + n].copy_from_slice(part);
                    if !states.contains(&m) {
                        states.push(m);
                    }
                }
            }
            if result.is_err() {
                states.extend(before.into_iter().filter(|s| !states.contains(s)).collect::<Vec<_>>());
            }
            dst.states = if states.len() > MAX_STATES { Vec::new() } else { states };
        }
        self.counters.operations.fetch_add(1, Ordering::Relaxed);
        result
    }
}

/// Where scanned ranges start, in elements: 1 KiB, the largest alignment
/// OpenCL devices ask of a kernel argument's offset.
const SCAN_ALIGN: usize = 256;

/// `out[i] = in[0] + ... + in[i - 1]`, wrapping; `out[0] = 0`.
fn exclusive_scan(part: &[u32]) -> Vec<u32> {
    let mut sum = 0u32;
    part.iter()
        .map(|&v| {
            let before = sum;
            sum = sum.wrapping_add(v);
            before
        })
        .collect()
}
