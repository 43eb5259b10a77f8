//! Hazard tracking for one allocation: the rules of safe asynchronous memory.
//!
//! Every allocation owned by the typed layer remembers, per byte range, the
//! event recorded after the last write and, per stream, the events recorded
//! after reads since then. Before an operation on stream `s` that uses
//! range `r`:
//!
//! - any use waits (on the device, with `stream_wait_event`) for every
//!   write on another stream whose range overlaps `r` (read-after-write,
//!   write-after-write);
//! - a write also waits for every overlapping read on another stream
//!   (write-after-read).
//!
//! Uses of disjoint ranges (the halves of [`super::SliceMut::split_at_mut`])
//! never wait for each other. After the operation one event is recorded on
//! `s` (a [`Mark`], shared by every range the operation uses) and stored;
//! a write replaces the entries within `r`, and each stream keeps one
//! write and one read entry, whose range grows to the hull of its uses
//! (the later mark on one stream stands for the earlier ones), so the
//! entries stay few. Entries partly covered stay, so later uses still wait
//! for them. Handing pinned memory to the host first
//! synchronises every stored event; freeing the allocation is deferred
//! until they have all completed ([`super::state::DeviceState::retire`]), so no
//! queued work can touch freed or host-borrowed memory, and no drop blocks.
//!
//! A peer copy stores its mark in the far buffer's tracker too: an event of
//! the near device, with that device ([`Foreign`]); the far device's
//! streams wait for it across devices, and the host on the near device.
//!
//! Threads: an operation locks its trackers for its waits, lets them go
//! for the enqueue, and locks them again to store its mark
//! (`Stream::tracked`); it skips the first lock when every use stored is
//! on its own stream, which a word kept beside the lock says
//! ([`Held::may_wait`]). Nothing that conflicts with it can be stored in
//! between: a conflicting use needs an overlapping view while this one is
//! borrowed, and a write needs `&mut` (views of disjoint ranges, which
//! never conflict, are the only way to write one allocation from two
//! places at once). Operations of one stream store their marks in stream
//! order (the stream's own lock, from enqueue to store), which the "later
//! mark stands for the earlier" rule needs when threads share a stream.

use std::ops::Range;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use crate::sync::{AtomicU64, Mutex, MutexGuard};

use smallvec::SmallVec;

use super::marks::{Foreign, Mark, Pending, PendingUse};
use super::state::{Recycler, owner_of};
use crate::device::{Device, EventId, StreamId};
use crate::error::{Error, ErrorKind, Result};

/// Whether an operation reads or writes the tracked memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// One pending use: its stream, byte range and the mark recorded after it.
struct Use {
    stream: StreamId,
    range: Range<usize>,
    mark: Mark,
    /// Streams already made to wait for `mark`: in-order queues, so their
    /// later work follows it without another wait (a driver call each,
    /// every operation, for a buffer that two streams take turns on).
    waited: Waited,
    /// The device of `stream` and `mark`, when not the allocation's.
    from: Option<Foreign>,
}

impl Use {
    fn new(stream: StreamId, range: Range<usize>, mark: Mark, from: Option<Foreign>) -> Self {
        Self { stream, range, mark, waited: Waited::default(), from }
    }

    /// The device whose event `mark` is: `own` (the allocation's), or the
    /// foreign one.
    fn owner<'d, D: Device>(&'d self, own: &'d D) -> Result<&'d D> {
        owner_of(self.from.as_ref(), own).ok_or_else(|| {
            Error::new(
                own.info().backend,
                "peer tracking",
                ErrorKind::DeviceMismatch,
                "a use stored by a device of another type (a defect of hetero)",
            )
        })
    }
}

/// The last streams made to wait for one mark (the two a halo exchange or
/// a copy stream beside a compute stream needs; older ones wait again).
///
/// Invariant: each stream named was made to wait for the entry's current
/// mark (cleared when the mark is replaced); stream ids are never reused
/// in a process, so a name cannot come to mean another stream.
#[derive(Default)]
struct Waited([Option<StreamId>; 2]);

impl Waited {
    fn has(&self, stream: StreamId) -> bool {
        self.0.contains(&Some(stream))
    }

    fn add(&mut self, stream: StreamId) {
        self.0 = [Some(stream), self.0[0]];
    }
}

/// Entries of one list past which completed ones are pruned (uses from many streams).
const PRUNE_ABOVE: usize = 32;

#[derive(Default)]
struct State {
    writes: Vec<Use>,
    reads: Vec<Use>,
}

/// Whether two byte ranges share a byte (empty ranges touch nothing).
fn overlaps(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

fn covers(outer: &Range<usize>, inner: &Range<usize>) -> bool {
    outer.start <= inner.start && inner.end <= outer.end
}

/// [`Tracker::streams`] when no use is stored.
const NO_STREAM: u64 = 0;
/// [`Tracker::streams`] when uses of several streams are stored (or of a
/// stream whose id has no encoding of its own).
const SEVERAL_STREAMS: u64 = 1;

/// [`Tracker::streams`] when every stored use is on `stream`.
fn only(stream: StreamId) -> u64 {
    stream.0.checked_add(2).unwrap_or(SEVERAL_STREAMS)
}

impl State {
    fn all(&self) -> impl Iterator<Item = &Use> {
        self.writes.iter().chain(&self.reads)
    }

    /// The streams of the stored uses, as [`Tracker::streams`] encodes them.
    fn streams(&self) -> u64 {
        let mut uses = self.all();
        let Some(first) = uses.next() else { return NO_STREAM };
        if uses.all(|u| u.stream == first.stream) { only(first.stream) } else { SEVERAL_STREAMS }
    }

    /// Removes the entries of `list` that `keep` rejects, recycling their marks.
    fn remove<D: Device>(list: &mut Vec<Use>, recycler: &mut Recycler<'_, D>, mut keep: impl FnMut(&Use) -> bool) {
        let mut k = 0;
        while k < list.len() {
            if keep(&list[k]) {
                k += 1;
            } else {
                let used = list.swap_remove(k);
                recycler.give_from(used.mark, used.from.as_ref());
            }
        }
    }

    /// Drops the entries whose work has completed (an entry whose query
    /// fails stays: a wait on it reports the error).
    fn prune<D: Device>(&mut self, recycler: &mut Recycler<'_, D>) {
        let shared: &D = recycler.shared;
        for list in [&mut self.writes, &mut self.reads] {
            Self::remove(list, recycler, |u| {
                // SAFETY: a live event of its owner (type invariant).
                !u.owner(shared).and_then(|owner| unsafe { owner.query_event(u.mark.id()) }).unwrap_or(false)
            });
        }
    }
}

/// The marks of one allocation's pending uses.
///
/// Invariant: every mark in it was recorded after the use it stands for,
/// by the stream stored with it, of the device that owns the allocation
/// or, for a peer copy's use, of the [`Foreign`] device stored with it
/// (whose `Core` the entry holds, so the event stays valid); every pending
/// use of a byte is stored, or ordered before a stored use of that byte
/// that covers it. Marks it no longer needs go back to their device
/// ([`DeviceState::recycle`]); [`Tracker::into_marks`] hands the rest over
/// when the allocation is retired.
#[derive(Default)]
pub(crate) struct Tracker {
    state: Mutex<State>,
    /// The streams of the stored uses: [`NO_STREAM`], [`only`] one stream,
    /// or [`SEVERAL_STREAMS`]; stored under the lock after every change,
    /// read without it. An operation on a stream whose uses are the only
    /// ones stored has nothing to wait for and skips the lock before its
    /// enqueue ([`Held::may_wait`]). Reading it unlocked is sound for the
    /// reason the lock may be let go across the enqueue (module doc): a use
    /// that an operation must wait for was stored before the operation
    /// could borrow its view, so the value read includes it.
    streams: AtomicU64,
}

/// Allocations (and uses) one operation keeps inline; more spill to the heap.
const INLINE_VIEWS: usize = 8;

/// The trackers of one operation and the uses it makes of them, locked
/// or not. Built in place by the operation ([`Held::new`], [`Held::add`])
/// and never moved: the layer's cost per operation is a few hundred
/// instructions, and moving its inline arrays was a measurable share of it.
pub(crate) struct Held<'a> {
    /// Each use: its allocation's tracker, byte range and access, sorted by
    /// tracker address (the uses of one allocation are adjacent).
    uses: SmallVec<[(&'a Tracker, Range<usize>, Access); INLINE_VIEWS]>,
    /// One guard per distinct tracker of `uses`, in the same order, while locked.
    guards: SmallVec<[MutexGuard<'a, State>; INLINE_VIEWS]>,
}

/// A tracker's address, the order in which an operation locks its trackers.
fn address(tracker: &Tracker) -> usize {
    std::ptr::from_ref(tracker) as usize
}

/// Whether use `k` of the sorted uses is the first of its tracker.
fn first_of_tracker(uses: &[(&Tracker, Range<usize>, Access)], k: usize) -> bool {
    k == 0 || !std::ptr::eq(uses[k - 1].0, uses[k].0)
}

/// The index in [`Held::guards`] of each use, walking the sorted uses.
fn guard_indices<'h>(
    uses: &'h [(&Tracker, Range<usize>, Access)],
) -> impl Iterator<Item = (usize, &'h Range<usize>, Access)> {
    let mut index = 0;
    uses.iter().enumerate().map(move |(k, (_, range, access))| {
        if k > 0 && first_of_tracker(uses, k) {
            index += 1;
        }
        (index, range, *access)
    })
}

impl<'a> Held<'a> {
    /// No uses yet.
    pub(crate) fn new() -> Self {
        Self { uses: SmallVec::new(), guards: SmallVec::new() }
    }

    /// Adds a use of `range` of `tracker`'s allocation, keeping the uses
    /// sorted (an operation has a handful: insertion is the cheapest sort).
    /// Only before the first [`Held::lock`].
    pub(crate) fn add(&mut self, tracker: &'a Tracker, range: Range<usize>, access: Access) {
        self.uses.push((tracker, range, access));
        let mut k = self.uses.len() - 1;
        while k > 0 && address(self.uses[k - 1].0) > address(tracker) {
            self.uses.swap(k - 1, k);
            k -= 1;
        }
    }

    /// Whether an operation on `stream` may have to wait for a stored use:
    /// `false` when every tracker stores uses of `stream` only, or none.
    pub(crate) fn may_wait(&self, stream: StreamId) -> bool {
        let own = only(stream);
        self.uses.iter().any(|(tracker, ..)| match tracker.streams.load(Ordering::Acquire) {
            NO_STREAM => false,
            SEVERAL_STREAMS => true,
            streams => streams != own,
        })
    }

    /// Locks every tracker of the uses, in address order (the uses are
    /// sorted), so that threads locking overlapping sets cannot deadlock:
    /// one lock per allocation, however many uses of it there are.
    pub(crate) fn lock(&mut self) {
        for k in 0..self.uses.len() {
            if first_of_tracker(&self.uses, k) {
                self.guards.push(self.uses[k].0.lock());
            }
        }
    }

    /// Lets every tracker go, keeping the uses for [`Held::lock`].
    pub(crate) fn unlock(&mut self) {
        self.guards.clear();
    }

    /// Makes `stream` wait for conflicting earlier uses on other streams.
    ///
    /// A write waits for a read only while the read may still run: a read
    /// that is over, also by its stream's fault, changed nothing, and
    /// waiting on a faulted stream's mark would fail this stream too.
    pub(crate) fn before<D: Device>(&mut self, device: &D, stream: StreamId) -> Result<()> {
        self.before_on(device, stream, device)
    }

    /// As [`Held::before`], for uses of allocations of `owner` by a stream
    /// of `device` (the far buffer of a peer copy). Marks of a device other
    /// than `device` are waited for across devices
    /// ([`Device::stream_wait_peer_event`]). Stream ids are unique in the
    /// process, so another device's stream never matches a stored one. A
    /// stream already made to wait for a mark is not made to wait again.
    pub(crate) fn before_on<D: Device>(&mut self, device: &D, stream: StreamId, owner: &D) -> Result<()> {
        self.before_with(owner, stream, |of, event, settled| {
            // SAFETY: a live event of `of` (the tracker's invariant); the
            // stream is the caller's, of `device`.
            unsafe {
                if std::ptr::eq(of, device) {
                    device.stream_wait_event(stream, event)
                } else if settled {
                    device.stream_wait_peer_settled(stream, of.as_peer(), event)
                } else {
                    device.stream_wait_peer_event(stream, of.as_peer(), event)
                }
            }
        })
    }

    /// The waits of [`Held::before_on`], made by `wait` (given the mark's
    /// device and event, and whether a failure of its stream must not fail
    /// the waiter: another device's read, which is over when its stream
    /// fails, as a failed read of one device is:
    /// `a_failed_far_read_leaves_the_far_buffer_usable`).
    fn before_with<D: Device>(
        &mut self,
        owner: &D,
        stream: StreamId,
        mut wait: impl FnMut(&D, EventId, bool) -> Result<()>,
    ) -> Result<()> {
        let Self { uses, guards } = self;
        for (guard, range, access) in guard_indices(uses) {
            let state = &mut *guards[guard];
            for used in &mut state.writes {
                if used.stream != stream && overlaps(&used.range, range) && !used.waited.has(stream) {
                    wait(used.owner(owner)?, used.mark.id(), false)?;
                    used.waited.add(stream);
                }
            }
            if access == Access::Write {
                for used in &mut state.reads {
                    if used.stream != stream
                        && overlaps(&used.range, range)
                        && !used.waited.has(stream)
                        && !read_is_over(owner, used)?
                    {
                        wait(used.owner(owner)?, used.mark.id(), used.from.is_some())?;
                        used.waited.add(stream);
                    }
                }
            }
        }
        Ok(())
    }

    /// Records that the operation was enqueued on `stream` and is followed
    /// there by `mark` (one mark serves every range it uses). Marks it
    /// replaces go to `recycler`.
    pub(crate) fn after<D: Device>(&mut self, recycler: &mut Recycler<'_, D>, stream: StreamId, mark: Mark) {
        self.after_on(recycler, stream, mark, None);
    }

    /// As [`Held::after`], for uses by a stream of another device, `from`
    /// (whose event `mark` is): the far buffer of a peer copy.
    pub(crate) fn after_on<D: Device>(
        &mut self,
        recycler: &mut Recycler<'_, D>,
        stream: StreamId,
        mark: Mark,
        from: Option<&Foreign>,
    ) {
        // The last use takes the mark itself, the others a clone: every
        // clone made or given up is an atomic write.
        let last = self.uses.len().saturating_sub(1);
        let mut mark = Some(mark);
        for (k, (guard, range, access)) in guard_indices(&self.uses).enumerate() {
            let Some(mark) = (if k == last { mark.take() } else { mark.clone() }) else { break };
            let state = &mut *self.guards[guard];
            let list = match access {
                // Every use within a write's range is ordered before it
                // (the waits above), so the write stands for them.
                Access::Write => {
                    State::remove(&mut state.reads, recycler, |u| !covers(range, &u.range));
                    State::remove(&mut state.writes, recycler, |u| !covers(range, &u.range));
                    &mut state.writes
                }
                Access::Read => &mut state.reads,
            };
            // One entry per stream and kind: a later use on the same
            // stream completes after the earlier one, so its mark with
            // the union's hull stands for both (waiters may wait a
            // little more than they must, never less). A stream's uses are
            // all of its own device, so `from` is the entry's too.
            match list.iter_mut().find(|u| u.stream == stream) {
                Some(entry) => {
                    entry.range = entry.range.start.min(range.start)..entry.range.end.max(range.end);
                    recycler.give_from(std::mem::replace(&mut entry.mark, mark), entry.from.as_ref());
                    entry.waited = Waited::default();
                }
                None => list.push(Use::new(stream, range.clone(), mark, from.cloned())),
            }
            if list.len() > PRUNE_ABOVE {
                state.prune(recycler);
            }
        }
        let trackers = (0..self.uses.len()).filter(|&k| first_of_tracker(&self.uses, k)).map(|k| self.uses[k].0);
        for (tracker, state) in trackers.zip(&self.guards) {
            tracker.streams.store(state.streams(), Ordering::Release);
        }
        // The mark itself when the operation used no memory.
        if let Some(mark) = mark {
            recycler.give_from(mark, from);
        }
    }
}

/// The result of waiting for or querying a read's mark, with its stream's
/// sticky fault read as `over`: the read will never run again. (A backend
/// reports a fault on a mark only once its stream has passed it, and the
/// device guarantees that work behind a fault can never run.)
fn read_settled<T>(result: Result<T>, over: T) -> Result<T> {
    match result {
        Err(e) if e.kind == ErrorKind::KernelFault => Ok(over),
        other => other,
    }
}

/// Whether a read's mark (of `own`, the allocation's device, or of its
/// foreign one) has completed, or failed with its stream's fault.
fn read_is_over<D: Device>(own: &D, used: &Use) -> Result<bool> {
    // SAFETY: a live event of its owner (type invariant).
    read_settled(unsafe { used.owner(own)?.query_event(used.mark.id()) }, true)
}

impl Tracker {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Blocks the host until every pending use has completed. A write
    /// that failed reports its error (the bytes are not what was asked
    /// for); a read that failed is over and changed nothing.
    pub(crate) fn wait_host<D: Device>(&self, device: &D) -> Result<()> {
        let state = self.lock();
        for used in &state.writes {
            // SAFETY: a live event of its owner (type invariant).
            unsafe { used.owner(device)?.synchronize_event(used.mark.id())? };
        }
        for used in &state.reads {
            // SAFETY: as above.
            read_settled(unsafe { used.owner(device)?.synchronize_event(used.mark.id()) }, ())?;
        }
        Ok(())
    }

    /// `true` when no pending use remains (a read that failed is over).
    pub(crate) fn is_idle<D: Device>(&self, device: &D) -> Result<bool> {
        let state = self.lock();
        for used in &state.writes {
            // SAFETY: a live event of its owner (type invariant).
            if !unsafe { used.owner(device)?.query_event(used.mark.id())? } {
                return Ok(false);
            }
        }
        for used in &state.reads {
            if !read_is_over(device, used)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A tracker for a reused allocation whose earlier uses, each on its
    /// stream (of the allocation's device, or of its foreign one), may be
    /// pending: they count as writes of every byte, so any use on another
    /// stream (and the host) waits for them.
    pub(crate) fn inheriting(marks: Pending) -> Self {
        if marks.is_empty() {
            // A fresh allocation: no list to build (every allocation comes here).
            return Self::default();
        }
        let writes = marks.into_iter().map(|u| Use::new(u.stream, 0..usize::MAX, u.mark, u.from)).collect();
        let state = State { writes, reads: Vec::new() };
        Self { streams: AtomicU64::new(state.streams()), state: Mutex::new(state) }
    }

    /// Gives up the marks of every possibly pending use, each with its
    /// stream and, for another device's use, that device.
    pub(crate) fn into_marks(self) -> Pending {
        let state = self.state.into_inner().unwrap_or_else(PoisonError::into_inner);
        if state.writes.is_empty() && state.reads.is_empty() {
            // Never used by queued work (every free of an unused buffer comes here).
            return Pending::new();
        }
        state
            .writes
            .into_iter()
            .chain(state.reads)
            .map(|u| PendingUse { stream: u.stream, mark: u.mark, from: u.from })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{Access, Held, Tracker};

    /// Guards the one-lock-per-operation rule: a launch that passes one
    /// buffer twice (read and written) locks its tracker once, with both uses;
    /// locking it twice would deadlock the thread on its own mutex.
    #[test]
    fn one_allocation_twice_in_an_operation_is_locked_once() {
        let tracker = Tracker::default();
        let mut held = Held::new();
        held.add(&tracker, 0..8, Access::Read);
        held.add(&tracker, 0..8, Access::Write);
        held.lock();
        assert_eq!(held.guards.len(), 1);
        assert_eq!(held.uses.len(), 2, "both uses are kept under the one lock");
        assert!(super::guard_indices(&held.uses).all(|(guard, ..)| guard == 0));
    }

    /// Guards the lock order: two threads whose operations use the same two
    /// allocations, listed in opposite orders, deadlock if each locks in
    /// its own list's order.
    #[test]
    fn operations_listing_allocations_in_opposite_orders_do_not_deadlock() {
        let trackers = Arc::new((Tracker::default(), Tracker::default()));
        let (done, finished) = mpsc::channel();
        for flip in [false, true] {
            let (trackers, done) = (Arc::clone(&trackers), done.clone());
            std::thread::spawn(move || {
                let (a, b) = (&trackers.0, &trackers.1);
                let order = if flip {
                    [(b, 0..4, Access::Read), (a, 0..4, Access::Read)]
                } else {
                    [(a, 0..4, Access::Read), (b, 0..4, Access::Read)]
                };
                for _ in 0..20_000 {
                    let mut held = Held::new();
                    for (tracker, range, access) in order.clone() {
                        held.add(tracker, range, access);
                    }
                    held.lock();
                    std::hint::black_box(&held);
                }
                let _ = done.send(());
            });
        }
        for _ in 0..2 {
            assert!(finished.recv_timeout(Duration::from_secs(60)).is_ok(), "two threads deadlocked on two trackers");
        }
    }

    /// Guards the lock-free check before an enqueue: an operation may skip
    /// its waits only while every stored use of each of its allocations is
    /// on its own stream. Skipping them with a use of another stream stored
    /// would let a write run while that use still reads.
    #[cfg(feature = "host")]
    #[test]
    fn waits_are_skipped_only_for_uses_of_the_operations_own_stream() {
        use crate::backend::host::HostDevice;
        use crate::safe::state::Recycler;
        use crate::{Context, StreamId};

        let ctx = Context::new(HostDevice::new());
        let (one, two) = (ctx.untimed_stream().expect("a stream"), ctx.untimed_stream().expect("a stream"));
        let shared = &*one.device;
        let tracker = Tracker::default();
        let may_wait = |stream: StreamId| {
            let mut held = Held::new();
            held.add(&tracker, 0..8, Access::Write);
            held.may_wait(stream)
        };
        let store = |stream: StreamId| {
            let mut held = Held::new();
            held.add(&tracker, 0..8, Access::Read);
            held.lock();
            // SAFETY: the stream is this test's.
            let mark = unsafe { shared.mark(stream) }.expect("a mark");
            held.after(&mut Recycler { shared, spare: &mut None }, stream, mark);
        };
        assert!(!may_wait(one.id) && !may_wait(two.id), "nothing is stored");
        store(one.id);
        assert!(!may_wait(one.id), "only uses of its own stream are stored");
        assert!(may_wait(two.id), "a use of another stream is stored");
        store(two.id);
        assert!(may_wait(one.id) && may_wait(two.id), "uses of two streams are stored");
        assert_eq!(
            super::only(StreamId(u64::MAX)),
            super::SEVERAL_STREAMS,
            "an id without its own code counts as several"
        );
        assert!(one.synchronize().is_ok() && two.synchronize().is_ok());
    }

    /// Guards the wait memo: a stream made to wait for a use of another
    /// stream is not made to wait for that same mark again (one driver call
    /// per operation saved while two streams take turns on a buffer), a
    /// third stream still waits, and a new mark of the use is waited for.
    #[cfg(feature = "host")]
    #[test]
    fn a_stream_waits_once_for_each_mark() {
        use crate::backend::host::HostDevice;
        use crate::safe::state::Recycler;
        use crate::{Context, StreamId};

        let ctx = Context::new(HostDevice::new());
        let streams: Vec<_> = (0..3).map(|_| ctx.untimed_stream().expect("a stream")).collect();
        let (writer, reader, third) = (streams[0].id, streams[1].id, streams[2].id);
        let shared = &*streams[0].device;
        let tracker = Tracker::default();
        let store = |stream: StreamId| {
            let mut held = Held::new();
            held.add(&tracker, 0..8, Access::Write);
            held.lock();
            // SAFETY: the stream is this test's.
            let mark = unsafe { shared.mark(stream) }.expect("a mark");
            held.after(&mut Recycler { shared, spare: &mut None }, stream, mark);
        };
        let waits = |stream: StreamId| {
            let mut held = Held::new();
            held.add(&tracker, 0..4, Access::Read);
            held.lock();
            let mut count = 0;
            held.before_with(&**shared, stream, |_, _, _| {
                count += 1;
                Ok(())
            })
            .expect("waits");
            count
        };
        store(writer);
        assert_eq!(waits(reader), 1, "a use of another stream is waited for");
        assert_eq!(waits(reader), 0, "the reader's stream already follows that mark");
        assert_eq!(waits(third), 1, "another stream still waits");
        assert_eq!(waits(writer), 0, "its own stream never waits");
        store(writer);
        assert_eq!(waits(reader), 1, "a new mark is waited for");
        assert!(streams.iter().all(|s| s.synchronize().is_ok()));
    }
}
