//! Streams of the shared GPU device, and the work held on the host behind
//! a closed user event.
//!
//! Work behind a closed gate waits on the host, not in one of the device's
//! hardware queues. A device-side wait (a stream waiting for a gate's
//! mapped word) blocks the hardware queue its stream is mapped to, and CUDA
//! maps every stream of a context onto a few such queues
//! (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 by default): a closed gate held
//! streams that never waited on it, and a host waiting for one of those
//! before opening the gate waited forever (H200;
//! `a_closed_gate_holds_no_other_stream`,
//! `a_gated_peer_copy_holds_no_other_stream`). So a stream that waits on
//! a closed gate, or on a recording still held behind one, is *held*: what
//! is enqueued on it from then on is kept here in order ([`Step`]) and
//! submitted by the thread that releases it, the one opening the gate or
//! submitting the recording it waits for. Work submitted to a runtime this
//! way never waits for the host.
//!
//! Events follow their streams. A recording on a held stream is made on a
//! fresh runtime event ([`Pending`]), and queries, waits and times of the
//! event go to that recording until it is recorded again ([`Latest`]). A
//! wait on a recording already submitted is submitted at once, on a held
//! stream too: the held work then also waits for it, which delays it but
//! never for the host.
//!
//! A graph launch is held with an executable of its own, which a later
//! update of the graph does not change (`graph.rs`, `HeldLaunch`). Where
//! work must reach the runtime before its gate opens (a stream handed to
//! another library; a graph launch where the graph keeps no source to make
//! an executable from) the held steps are submitted behind device-side
//! waits instead ([`materialize`]), and that stream's hardware queue is
//! held as before.
//!
//! Invariants: a stream's steps are submitted in the order enqueued, each
//! once; its `held` flag is set while steps wait and cleared only under the
//! steps' lock once none is left, so work enqueued while it reads `false`
//! follows every step. A [`Pending`] is marked submitted only after its
//! record was submitted, or after its stream's earlier work completed where
//! the record failed, so a wait on it never runs ahead of that work; on a
//! device that cannot even be made current, it is marked submitted at once
//! (nothing more runs there), so that no wait on it lasts forever.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use super::memory::GateWord;
use super::runtime::Runtime;
use crate::error::{Error, Result};

/// One runtime stream, destroyed when the last holder lets go (the device
/// never lets a busy stream go, see `GpuDevice::destroy_stream`), unless
/// another library made it (`owned` false), with the work held on the host
/// behind a closed gate (see the module's doc).
pub(super) struct GpuStream<R: Runtime> {
    pub(super) raw: R::Stream,
    pub(super) runtime: Arc<R>,
    pub(super) hold: Hold<R>,
    owned: bool,
}

// SAFETY: runtime streams may be used from any thread (CUDA and HIP
// document their handles as thread-safe); held work captures only such
// handles, addresses and shared arguments ([`Work`]), behind a mutex.
unsafe impl<R: Runtime> Send for GpuStream<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuStream<R> {}

impl<R: Runtime> GpuStream<R> {
    pub(super) fn new(raw: R::Stream, runtime: Arc<R>) -> Self {
        Self { raw, runtime, hold: Hold::default(), owned: true }
    }

    /// A stream another library made and destroys.
    pub(super) fn adopted(raw: R::Stream, runtime: Arc<R>) -> Self {
        Self { raw, runtime, hold: Hold::default(), owned: false }
    }
}

impl<R: Runtime> Drop for GpuStream<R> {
    fn drop(&mut self) {
        if self.owned && self.runtime.enter().is_ok() {
            // SAFETY: the stream is live, of this device, destroyed once here,
            // and the device is current.
            unsafe { self.runtime.stream_destroy(self.raw) };
        }
    }
}

/// Work enqueued on a held stream: a copy, fill, peer copy or launch, given
/// the stream's runtime (current) and stream. It captures only runtime
/// handles, device addresses, shared kernel arguments and host addresses
/// the caller keeps valid until the work completes.
pub(super) type Work<R> = Box<dyn FnOnce(&R, <R as Runtime>::Stream) -> Result<()>>;

/// One thing a held stream does once released.
enum Step<R: Runtime> {
    /// Wait for a gate: its word, the word's device address, and the
    /// generation that opens it.
    Gate { word: GateWord, device: R::Ptr, generation: u32 },
    /// Wait for a recording made on a held stream.
    After(Arc<Pending<R>>),
    /// Submit work.
    Run(Work<R>),
    /// Record a pending recording.
    Record(Arc<Pending<R>>),
}

/// The steps of one stream (see the module's invariants).
pub(super) struct Hold<R: Runtime> {
    held: AtomicBool,
    /// Whether `Steps::failed` holds a failure: one load where none does.
    failed: AtomicBool,
    steps: Mutex<Steps<R>>,
}

struct Steps<R: Runtime> {
    queue: VecDeque<Step<R>>,
    /// The first failure of work submitted on release, reported by the
    /// stream's next synchronise or query.
    failed: Option<Error>,
}

impl<R: Runtime> Default for Hold<R> {
    fn default() -> Self {
        Self {
            held: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            steps: Mutex::new(Steps { queue: VecDeque::new(), failed: None }),
        }
    }
}

impl<R: Runtime> Hold<R> {
    fn lock(&self) -> MutexGuard<'_, Steps<R>> {
        self.steps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps the first failure.
    fn fail(&self, steps: &mut Steps<R>, e: Error) {
        steps.failed.get_or_insert(e);
        self.failed.store(true, Ordering::Release);
    }
}

/// A recording on a held stream, on an event of its own, submitted when the
/// stream is released.
pub(super) struct Pending<R: Runtime> {
    event: R::Event,
    runtime: Arc<R>,
    stream: Weak<GpuStream<R>>,
    submitted: AtomicBool,
    waiters: Waiters<R>,
}

impl<R: Runtime> Pending<R> {
    /// The runtime event, to query, synchronise or time once submitted.
    pub(super) fn event(&self) -> R::Event {
        self.event
    }

    /// Whether the record was submitted (see the module's invariants).
    pub(super) fn submitted(&self) -> bool {
        self.submitted.load(Ordering::SeqCst)
    }
}

impl<R: Runtime> Drop for Pending<R> {
    fn drop(&mut self) {
        if self.runtime.enter().is_ok() {
            // SAFETY: the event is this recording's own, created for it and
            // destroyed once; the runtime releases a recorded event once it completes.
            let _ = unsafe { self.runtime.event_destroy(self.event) };
        }
    }
}

/// Streams held by a gate or a pending recording, released when it opens
/// or is submitted.
pub(super) struct Waiters<R: Runtime>(Mutex<Vec<Weak<GpuStream<R>>>>);

impl<R: Runtime> Default for Waiters<R> {
    fn default() -> Self {
        Self(Mutex::new(Vec::new()))
    }
}

impl<R: Runtime> Waiters<R> {
    fn add(&self, stream: &Arc<GpuStream<R>>) {
        let mut waiters = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        waiters.retain(|w| w.strong_count() > 0);
        waiters.push(Arc::downgrade(stream));
    }

    fn take(&self) -> Vec<Arc<GpuStream<R>>> {
        let taken = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        taken.iter().filter_map(Weak::upgrade).collect()
    }

    /// Releases every waiting stream (after its gate opened).
    pub(super) fn release_all(&self) {
        for stream in self.take() {
            release(stream);
        }
    }
}

/// The pending recording an event stands for, if its latest recording was
/// made on a held stream; read with one atomic load where it was not.
pub(super) struct Latest<R: Runtime> {
    deferred: AtomicBool,
    pending: Mutex<Option<Arc<Pending<R>>>>,
}

impl<R: Runtime> Default for Latest<R> {
    fn default() -> Self {
        Self { deferred: AtomicBool::new(false), pending: Mutex::new(None) }
    }
}

impl<R: Runtime> Latest<R> {
    pub(super) fn get(&self) -> Option<Arc<Pending<R>>> {
        if !self.deferred.load(Ordering::Acquire) {
            return None;
        }
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    pub(super) fn set(&self, pending: Option<Arc<Pending<R>>>) {
        if pending.is_none() && !self.deferred.load(Ordering::Acquire) {
            return;
        }
        let mut slot = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        self.deferred.store(pending.is_some(), Ordering::Release);
        *slot = pending;
    }
}

impl<R: Runtime> GpuStream<R> {
    /// Whether steps wait on the host.
    pub(super) fn is_held(&self) -> bool {
        self.hold.held.load(Ordering::Acquire)
    }

    /// Submits `work` now, or keeps it behind the stream's steps.
    pub(super) fn submit(&self, work: impl FnOnce(&R, R::Stream) -> Result<()> + 'static) -> Result<()> {
        if self.is_held() {
            let mut steps = self.hold.lock();
            if !steps.queue.is_empty() {
                steps.queue.push_back(Step::Run(Box::new(work)));
                return Ok(());
            }
        }
        work(&self.runtime, self.raw)
    }

    /// Makes the stream wait for the gate of `generation` on `word` (nothing
    /// when it is open); `waiters` are the gate's.
    pub(super) fn wait_gate(self: &Arc<Self>, word: GateWord, device: R::Ptr, generation: u32, waiters: &Waiters<R>) {
        if word.value() >= generation {
            return;
        }
        self.hold_with(Step::Gate { word, device, generation });
        waiters.add(self);
        // Opened between the check and the registration: release here.
        if word.value() >= generation {
            release(Arc::clone(self));
        }
    }

    /// Makes the stream wait for a pending recording: at once where it was
    /// submitted, else on the host.
    pub(super) fn wait_pending(self: &Arc<Self>, pending: &Arc<Pending<R>>) -> Result<()> {
        if pending.submitted() {
            // SAFETY: a live stream and event of this runtime; the caller entered it.
            return unsafe { self.runtime.stream_wait_event(self.raw, pending.event) };
        }
        self.hold_with(Step::After(Arc::clone(pending)));
        pending.waiters.add(self);
        if pending.submitted() {
            release(Arc::clone(self));
        }
        Ok(())
    }

    /// A recording on this stream, pending while it is held: `None` where
    /// it is not (record the event itself). The device is current.
    pub(super) fn record_pending(self: &Arc<Self>, timing: bool) -> Result<Option<Arc<Pending<R>>>> {
        if !self.is_held() {
            return Ok(None);
        }
        // SAFETY: the caller made the device current.
        let event = unsafe { self.runtime.event_create(timing) }?;
        let pending = Arc::new(Pending {
            event,
            runtime: Arc::clone(&self.runtime),
            stream: Arc::downgrade(self),
            submitted: AtomicBool::new(false),
            waiters: Waiters::default(),
        });
        let mut steps = self.hold.lock();
        if steps.queue.is_empty() {
            // Released meanwhile: the unused event goes with `pending`.
            return Ok(None);
        }
        steps.queue.push_back(Step::Record(Arc::clone(&pending)));
        Ok(Some(pending))
    }

    /// The failure of work submitted on release, once.
    pub(super) fn take_failure(&self) -> Option<Error> {
        if !self.hold.failed.load(Ordering::Acquire) {
            return None;
        }
        let mut steps = self.hold.lock();
        self.hold.failed.store(false, Ordering::Release);
        steps.failed.take()
    }

    fn hold_with(&self, step: Step<R>) {
        let mut steps = self.hold.lock();
        steps.queue.push_back(step);
        self.hold.held.store(true, Ordering::Release);
    }
}

/// Submits a released stream's steps up to the first that still waits, and
/// then those of every stream waiting on a recording it submitted.
pub(super) fn release<R: Runtime>(first: Arc<GpuStream<R>>) {
    let mut streams = vec![first];
    while let Some(stream) = streams.pop() {
        let mut steps = stream.hold.lock();
        while let Some(step) = steps.queue.front() {
            let ready = match step {
                Step::Gate { word, generation, .. } => word.value() >= *generation,
                Step::After(pending) => pending.submitted(),
                Step::Run(_) | Step::Record(_) => true,
            };
            if !ready {
                break;
            }
            let Some(step) = steps.queue.pop_front() else { break };
            if let Err(e) = submit_step(&stream, step, &mut streams) {
                stream.hold.fail(&mut steps, e);
            }
        }
        if steps.queue.is_empty() {
            stream.hold.held.store(false, Ordering::Release);
        }
    }
}

/// Submits one ready step, making its device current first (dropping an
/// earlier step may have made another one current); a submitted recording
/// adds its waiters to `released`.
fn submit_step<R: Runtime>(stream: &GpuStream<R>, step: Step<R>, released: &mut Vec<Arc<GpuStream<R>>>) -> Result<()> {
    let (runtime, raw) = (&*stream.runtime, stream.raw);
    let entered = runtime.enter();
    match step {
        Step::Gate { .. } => Ok(()),
        Step::After(pending) => {
            entered?;
            // SAFETY: a live stream of the current device, and the
            // recording's live event, submitted.
            unsafe { runtime.stream_wait_event(raw, pending.event) }
        }
        Step::Run(work) => {
            entered?;
            work(runtime, raw)
        }
        Step::Record(pending) => {
            let recorded = entered.clone().and_then(|()| {
                // SAFETY: a live stream of the current device and the recording's own live event.
                unsafe { runtime.event_record(pending.event, raw) }
            });
            if recorded.is_err() && entered.is_ok() {
                // A wait on an event never recorded does not wait: the
                // stream's earlier work completes first.
                // SAFETY: a live stream of the current device.
                let _ = unsafe { runtime.stream_synchronize(raw) };
            }
            // Where the device cannot even be made current, nothing can be
            // recorded on it: waits on it go on rather than wait forever.
            pending.submitted.store(true, Ordering::SeqCst);
            released.extend(pending.waiters.take());
            recorded
        }
    }
}

/// One materialisation at a time: it holds one stream's steps while taking
/// another's, which nothing else does.
static MATERIALIZING: Mutex<()> = Mutex::new(());

/// Submits every step of a held stream now, a closed gate as a device-side
/// wait, and a wait on a pending recording after submitting that
/// recording's stream up to it (the same way).
pub(super) fn materialize<R: Runtime>(stream: &Arc<GpuStream<R>>) -> Result<()> {
    if !stream.is_held() {
        return Ok(());
    }
    let _one = MATERIALIZING.lock().unwrap_or_else(PoisonError::into_inner);
    let mut released = Vec::new();
    let outcome = submit_through(stream, None, &mut released);
    for waiting in released {
        release(waiting);
    }
    outcome
}

/// [`materialize`] for one stream, up to `until`'s record where given.
fn submit_through<R: Runtime>(
    stream: &Arc<GpuStream<R>>,
    until: Option<&Arc<Pending<R>>>,
    released: &mut Vec<Arc<GpuStream<R>>>,
) -> Result<()> {
    let mut steps = stream.hold.lock();
    while let Some(step) = steps.queue.front() {
        stream.runtime.enter()?;
        let (runtime, raw) = (&*stream.runtime, stream.raw);
        // A gate or a wait stays first until its device-side wait is submitted.
        match step {
            Step::Gate { word, device, generation } if word.value() < *generation => {
                // SAFETY: the word is mapped page-locked memory that lives
                // until the device's drop and never goes below an opened
                // generation, so the wait ends once the gate opens.
                unsafe { runtime.stream_wait_word(raw, *device, *generation) }?;
            }
            Step::After(pending) if !pending.submitted() => {
                let pending = Arc::clone(pending);
                if let Some(recorder) = pending.stream.upgrade() {
                    submit_through(&recorder, Some(&pending), released)?;
                }
                stream.runtime.enter()?;
                if !pending.submitted() {
                    // Its stream is gone with the record: nothing to wait for.
                    steps.queue.pop_front();
                    continue;
                }
            }
            _ => {}
        }
        let Some(step) = steps.queue.pop_front() else { break };
        let last = matches!((&step, until), (Step::Record(p), Some(u)) if Arc::ptr_eq(p, u));
        if let Err(e) = submit_step(stream, step, released) {
            stream.hold.fail(&mut steps, e);
        }
        if last {
            break;
        }
    }
    if steps.queue.is_empty() {
        stream.hold.held.store(false, Ordering::Release);
    }
    Ok(())
}
