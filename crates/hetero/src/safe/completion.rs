//! Completion without blocking a thread: futures that resolve when an
//! event or a stream's prior work completes ([`crate::Event::wait_async`],
//! [`crate::Stream::synchronize_async`]) and host callbacks
//! ([`crate::Stream::then`]).
//!
//! One waker thread per device, started on first use, polls the pending
//! events: it yields for the first 100 µs after any news, then sleeps an
//! eighth of the time waited so far (20 µs to 1 ms), so a short wait is
//! noticed within microseconds and a long one costs little CPU. Every
//! backend is served the same way: CUDA's and HIP's host functions stall
//! their stream while they run and never run after a sticky fault (a
//! future would then hang), and OpenCL's event callbacks run on driver
//! threads; polling also reports a fault as the future's error. Callbacks
//! run on the waker thread, one after another: hand long work elsewhere.
//!
//! The thread holds the device only while it polls; every pending entry
//! keeps the device alive, so the device is dropped (and the thread ends)
//! once nothing is pending and nothing else holds it.

use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, PoisonError, Weak};
use std::task::{Context as TaskContext, Poll};
use std::time::{Duration, Instant};

use super::marks::Mark;
use super::state::DeviceState;
use super::waiter::{Entry, Slot, Then, Waiter};
use crate::device::{Device, EventId, StreamId};
use crate::error::{Error, ErrorKind, Result};
use crate::sync::{Builder, Mutex, yield_now};

/// Time spent yielding after news before the thread starts sleeping.
const SPIN: Duration = Duration::from_micros(100);
const MIN_SLEEP: Duration = Duration::from_micros(20);
/// Least time between two passes while yielding.
const POLL_GAP: Duration = Duration::from_micros(5);
/// Callbacks of one stream looked at in one pass.
const CALLBACKS_PER_PASS: usize = 64;
const MAX_SLEEP: Duration = Duration::from_millis(1);

impl<D: Device> Waiter<D> {
    /// Queues `then` for when `event`'s latest recording completes; returns
    /// the entry's key.
    fn register(
        shared: &Arc<DeviceState<D>>,
        event: EventId,
        stream: Option<StreamId>,
        mark: Option<Mark>,
        then: Then,
    ) -> Result<u64> {
        let waiter = shared.waiter();
        let mut queue = waiter.lock();
        if !queue.running {
            let weak = Arc::downgrade(shared);
            let waiter = Arc::clone(waiter);
            Builder::new().name("hetero-waker".into()).spawn(move || run(&weak, &waiter)).map_err(|e| {
                Error::new(
                    shared.info().backend,
                    "completion",
                    ErrorKind::Driver,
                    format!("could not start the waker thread: {e}"),
                )
            })?;
            queue.running = true;
        }
        let key = queue.next_key;
        queue.next_key += 1;
        queue.news = true;
        let entry = Entry {
            key,
            event,
            mark,
            then,
            _device: Arc::clone(shared) as Arc<dyn std::any::Any + Send + Sync>,
            _kind: PhantomData,
        };
        match stream {
            None => queue.futures.push(entry),
            Some(s) => match queue.callbacks.iter_mut().find(|(id, _)| *id == s) {
                Some((_, list)) => list.push_back(entry),
                None => queue.callbacks.push((s, VecDeque::from([entry]))),
            },
        }
        let asleep = queue.asleep;
        drop(queue);
        if asleep {
            waiter.signal.notify_all();
        }
        Ok(key)
    }

    /// Sleeps for `nap` unless there is news, waking for a registration.
    #[cfg(not(hetero_shuttle))]
    fn nap(&self, nap: Duration) {
        let mut queue = self.lock();
        if !queue.news && !queue.shutdown {
            queue.asleep = true;
            let (mut queue, _) = self.signal.wait_timeout(queue, nap).unwrap_or_else(PoisonError::into_inner);
            queue.asleep = false;
        }
    }

    /// Under the model checker, whose timed waits never time out: yields
    /// for `nap` unless there is news, so that the thread goes on polling.
    #[cfg(hetero_shuttle)]
    fn nap(&self, nap: Duration) {
        let until = Instant::now() + nap;
        while Instant::now() < until {
            let queue = self.lock();
            if queue.news || queue.shutdown {
                return;
            }
            drop(queue);
            yield_now();
        }
    }

    /// Removes an entry that is no longer wanted (a dropped future); once
    /// this returns, no pass queries its event any more.
    fn cancel(&self, key: u64) -> Option<Entry<D>> {
        let entry = {
            let mut queue = self.lock();
            let at = queue.futures.iter().position(|e| e.key == key);
            at.map(|at| queue.futures.swap_remove(at))
        };
        // A pass that saw the entry may still be querying its event.
        drop(self.pass.lock().unwrap_or_else(PoisonError::into_inner));
        entry
    }
}

/// The result of a completed recording: the error of a failed stream, if any.
///
/// # Safety
/// `event` must be a live event of `device` whose latest recording completed.
unsafe fn outcome<D: Device>(device: &D, event: EventId) -> Result<()> {
    // SAFETY: as the caller promises; a completed recording does not block.
    unsafe { device.synchronize_event(event) }
}

/// The waker thread: polls until the device is gone.
fn run<D: Device>(weak: &Weak<DeviceState<D>>, waiter: &Waiter<D>) {
    let mut since = Instant::now();
    loop {
        {
            let mut queue = waiter.lock();
            while queue.is_empty() && !queue.shutdown {
                queue.asleep = true;
                queue = waiter.signal.wait(queue).unwrap_or_else(PoisonError::into_inner);
                queue.asleep = false;
                since = Instant::now();
            }
            if queue.shutdown {
                return;
            }
            if std::mem::take(&mut queue.news) {
                since = Instant::now();
            }
        }
        let Some(shared) = weak.upgrade() else { return };
        let done = poll(&shared, waiter);
        let progressed = !done.is_empty();
        for (entry, result) in done {
            deliver(&shared, entry, result);
        }
        // Possibly the last holder: the device's drop runs here, unlocked.
        drop(shared);
        if progressed {
            since = Instant::now();
            continue;
        }
        let waited = since.elapsed();
        if waited < SPIN {
            // Other threads run meanwhile (a host backend's workers may be
            // the ones to finish the work), and the driver is asked at most
            // once per POLL_GAP (its calls take locks the enqueuing threads need).
            let pass_ended = Instant::now();
            while pass_ended.elapsed() < POLL_GAP {
                yield_now();
            }
        } else {
            waiter.nap((waited / 8).clamp(MIN_SLEEP, MAX_SLEEP));
        }
    }
}

/// The result of `event` if its latest recording has completed.
///
/// # Safety
/// `event` must be a live event of `shared`'s device.
unsafe fn settled<D: Device>(shared: &DeviceState<D>, event: EventId) -> Option<Result<()>> {
    // SAFETY: as the caller promises.
    match unsafe { shared.query_event(event) } {
        // SAFETY: as above; the recording completed.
        Ok(true) => Some(unsafe { outcome(&**shared, event) }),
        Ok(false) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Takes out the entries whose events completed, with their results. A
/// stream's callbacks come out in the order they were queued: the first
/// one still pending holds back the rest of its stream. The events are
/// queried with the queue unlocked (the Waiter invariant says why that is
/// safe), so registrations go on meanwhile.
fn poll<D: Device>(shared: &DeviceState<D>, waiter: &Waiter<D>) -> Vec<(Entry<D>, Result<()>)> {
    let _pass = waiter.pass.lock().unwrap_or_else(PoisonError::into_inner);
    let (futures, callbacks) = {
        let queue = waiter.lock();
        let futures: Vec<(u64, EventId)> = queue.futures.iter().map(|e| (e.key, e.event)).collect();
        let callbacks: Vec<(StreamId, Vec<EventId>)> = queue
            .callbacks
            .iter()
            .map(|(s, list)| (*s, list.iter().take(CALLBACKS_PER_PASS).map(|e| e.event).collect()))
            .collect();
        (futures, callbacks)
    };
    // SAFETY: each event is live while `pass` is held (the Waiter invariant).
    let settle = |event: EventId| unsafe { settled(shared, event) };
    let ready: Vec<(u64, Result<()>)> =
        futures.into_iter().filter_map(|(key, event)| settle(event).map(|r| (key, r))).collect();
    let reached: Vec<(StreamId, Vec<Result<()>>)> =
        callbacks.into_iter().map(|(s, events)| (s, events.into_iter().map_while(settle).collect())).collect();
    let mut done = Vec::new();
    let mut queue = waiter.lock();
    for (key, result) in ready {
        // A future cancelled since the snapshot is gone: nothing to deliver.
        if let Some(at) = queue.futures.iter().position(|e| e.key == key) {
            done.push((queue.futures.swap_remove(at), result));
        }
    }
    for (stream, results) in reached {
        // Only this thread removes callbacks: the first ones are those seen.
        if let Some((_, list)) = queue.callbacks.iter_mut().find(|(s, _)| *s == stream) {
            for result in results {
                if let Some(entry) = list.pop_front() {
                    done.push((entry, result));
                }
            }
        }
    }
    queue.callbacks.retain(|(_, list)| !list.is_empty());
    done
}

fn deliver<D: Device>(shared: &DeviceState<D>, entry: Entry<D>, result: Result<()>) {
    match entry.then {
        Then::Wake(slot) => {
            let waker = {
                let mut state = slot.lock();
                state.0 = Some(result);
                state.1.take()
            };
            if let Some(w) = waker {
                w.wake();
            }
        }
        // A panicking callback must not end the thread that serves the others.
        Then::Call(f) => drop(std::panic::catch_unwind(AssertUnwindSafe(move || f(result)))),
    }
    if let Some(mark) = entry.mark {
        shared.recycle(mark);
    }
}

/// Queues `f` to run on the waker thread once `mark`, recorded on
/// `stream`, completes (after the stream's earlier callbacks).
pub(crate) fn then<D: Device>(
    shared: &Arc<DeviceState<D>>,
    stream: StreamId,
    mark: Mark,
    f: Box<dyn FnOnce(Result<()>) + Send>,
) -> Result<()> {
    let event = mark.id();
    Waiter::register(shared, event, Some(stream), Some(mark), Then::Call(f)).map(drop)
}

/// A future that resolves once an event's latest recording (or a stream's
/// work up to a point) has completed, with the error of the work if it
/// failed. Runtime-agnostic: it is woken by hetero's waker thread. Dropping
/// it before it resolves cancels the wait, nothing else.
#[must_use = "a future does nothing unless awaited"]
pub struct Completion<'a, D: Device> {
    shared: Arc<DeviceState<D>>,
    state: State,
    /// The mark this future owns (stream completions), recycled on drop.
    mark: Option<Mark>,
    _event: PhantomData<&'a ()>,
}

enum State {
    /// Not polled yet.
    Idle(EventId),
    /// Registered with the waker thread.
    Waiting(u64, Arc<Slot>),
    /// Resolved (or failed before it could wait): every later poll answers
    /// the same, so a failure is never read as success on a second poll.
    Ready(Result<()>),
}

impl<D: Device> std::fmt::Debug for Completion<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion").field("backend", &self.shared.info().backend).finish()
    }
}

impl<D: Device> Completion<'_, D> {
    /// A future for `event`'s latest recording; `mark` is owned when given.
    pub(crate) fn new(shared: &Arc<DeviceState<D>>, event: EventId, mark: Option<Mark>) -> Self {
        Self { shared: Arc::clone(shared), state: State::Idle(event), mark, _event: PhantomData }
    }

    /// A future that resolves at once with `error`.
    pub(crate) fn failed(shared: &Arc<DeviceState<D>>, error: Error) -> Self {
        Self { shared: Arc::clone(shared), state: State::Ready(Err(error)), mark: None, _event: PhantomData }
    }
}

impl<D: Device> Future for Completion<'_, D> {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        let resolved = match &mut this.state {
            State::Idle(event) => {
                let event = *event;
                // SAFETY: the event is live: borrowed from its owner for the
                // future's lifetime, or a mark the future owns.
                match unsafe { this.shared.query_event(event) } {
                    // SAFETY: as above; the recording completed.
                    Ok(true) => unsafe { outcome(&**this.shared, event) },
                    Err(e) => Err(e),
                    Ok(false) => {
                        let slot = Arc::new(Slot { state: Mutex::new((None, Some(cx.waker().clone()))) });
                        match Waiter::register(&this.shared, event, None, None, Then::Wake(Arc::clone(&slot))) {
                            Ok(key) => {
                                this.state = State::Waiting(key, slot);
                                return Poll::Pending;
                            }
                            Err(e) => Err(e),
                        }
                    }
                }
            }
            State::Waiting(_, slot) => {
                let mut state = slot.lock();
                match state.0.take() {
                    Some(result) => result,
                    None => {
                        if !state.1.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                            state.1 = Some(cx.waker().clone());
                        }
                        return Poll::Pending;
                    }
                }
            }
            State::Ready(result) => return Poll::Ready(result.clone()),
        };
        this.state = State::Ready(resolved.clone());
        Poll::Ready(resolved)
    }
}

impl<D: Device> Drop for Completion<'_, D> {
    fn drop(&mut self) {
        if let State::Waiting(key, _) = self.state {
            // Out of the queue before the event may go (the Waiter invariant).
            drop(self.shared.waiter().cancel(key));
        }
        if let Some(mark) = self.mark.take() {
            self.shared.recycle(mark);
        }
    }
}
