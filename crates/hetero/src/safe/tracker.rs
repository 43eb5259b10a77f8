//! Hazard tracking for one allocation: the rules of safe asynchronous memory.
//!
//! Every allocation owned by the typed layer remembers the event recorded
//! after its last write and, per stream, the event recorded after its last
//! read since that write. Before an operation on stream `s`:
//!
//! - any use waits (on the device, with `stream_wait_event`) for the last
//!   write if it was on another stream (read-after-write, write-after-write);
//! - a write also waits for every read on another stream (write-after-read).
//!
//! After the operation one event is recorded on `s` (a [`Mark`], shared by
//! every allocation the operation uses) and stored. Handing
//! pinned memory to the host first synchronises every stored event; freeing
//! the allocation is deferred until they have all completed
//! ([`super::shared::Shared::retire`]), so no queued work can touch freed or
//! host-borrowed memory, and no drop blocks. Tracking is per allocation, not per byte range: two streams
//! writing disjoint slices of one allocation are serialised.

use std::sync::{Mutex, MutexGuard, PoisonError};

use smallvec::SmallVec;

use super::shared::{Mark, Shared};
use crate::device::{Device, INLINE_ARGS, StreamId};
use crate::error::Result;

/// Whether an operation reads or writes the tracked memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

#[derive(Default)]
struct State {
    last_write: Option<(StreamId, Mark)>,
    reads: Vec<(StreamId, Mark)>,
}

/// The marks of one allocation's pending uses.
///
/// Invariant: every mark in it was recorded by the device that owns the
/// allocation, after the use it stands for. Marks it no longer needs go
/// back to that device's [`Shared`] ([`Shared::recycle`]);
/// [`Tracker::into_marks`] hands the rest over when the allocation is retired.
#[derive(Default)]
pub(crate) struct Tracker {
    state: Mutex<State>,
}

/// The locked trackers of one operation, each with the access the
/// operation makes ([`Tracker::hold_all`]).
pub(crate) struct Held<'a>(SmallVec<[(MutexGuard<'a, State>, Access); INLINE_ARGS]>);

impl Held<'_> {
    /// Makes `stream` wait for conflicting earlier uses on other streams.
    pub(crate) fn before<D: Device>(&self, device: &D, stream: StreamId) -> Result<()> {
        for (state, access) in &self.0 {
            if let Some((s, m)) = &state.last_write
                && *s != stream
            {
                // SAFETY: a live event of this device (type invariant); the
                // stream belongs to the caller.
                unsafe { device.stream_wait_event(stream, m.id())? };
            }
            if *access == Access::Write {
                for (s, m) in &state.reads {
                    if *s != stream {
                        // SAFETY: as above.
                        unsafe { device.stream_wait_event(stream, m.id())? };
                    }
                }
            }
        }
        Ok(())
    }

    /// Records that the operation was enqueued on `stream` and is followed
    /// there by `mark` (one mark serves every allocation it uses). Marks
    /// it replaces go back to `shared`.
    pub(crate) fn after<D: Device>(&mut self, shared: &Shared<D>, stream: StreamId, mark: &Mark) {
        for (state, access) in &mut self.0 {
            match access {
                Access::Write => {
                    for (_, old) in std::mem::take(&mut state.reads) {
                        shared.recycle(old);
                    }
                    if let Some((_, old)) = state.last_write.replace((stream, mark.clone())) {
                        shared.recycle(old);
                    }
                }
                Access::Read => match state.reads.iter_mut().find(|(s, _)| *s == stream) {
                    // The later read on the same stream ends after the earlier one.
                    Some((_, entry)) => shared.recycle(std::mem::replace(entry, mark.clone())),
                    None => state.reads.push((stream, mark.clone())),
                },
            }
        }
    }
}

impl Tracker {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks the trackers of one operation's views for the whole
    /// operation (waits, enqueue, record): one lock per allocation, however
    /// many views of it the operation has (they count as one write if any
    /// of them writes), taken in address order so that threads locking
    /// overlapping sets cannot deadlock.
    pub(crate) fn hold_all<'a>(views: impl Iterator<Item = (&'a Tracker, Access)>) -> Held<'a> {
        let mut uses: SmallVec<[(&'a Tracker, Access); INLINE_ARGS]> = views.collect();
        uses.sort_unstable_by_key(|(t, _)| std::ptr::from_ref(*t) as usize);
        uses.dedup_by(|later, kept| {
            let same = std::ptr::eq(later.0, kept.0);
            if same && later.1 == Access::Write {
                kept.1 = Access::Write;
            }
            same
        });
        Held(uses.into_iter().map(|(t, access)| (t.lock(), access)).collect())
    }

    /// Blocks the host until every pending use has completed.
    pub(crate) fn wait_host<D: Device>(&self, device: &D) -> Result<()> {
        let state = self.lock();
        for (_, m) in state.last_write.iter().chain(&state.reads) {
            // SAFETY: a live event of this device (type invariant).
            unsafe { device.synchronize_event(m.id())? };
        }
        Ok(())
    }

    /// `true` when no pending use remains.
    pub(crate) fn is_idle<D: Device>(&self, device: &D) -> Result<bool> {
        let state = self.lock();
        for (_, m) in state.last_write.iter().chain(&state.reads) {
            // SAFETY: a live event of this device (type invariant).
            if !unsafe { device.query_event(m.id())? } {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Gives up the marks of every possibly pending use.
    pub(crate) fn into_marks(self) -> Vec<Mark> {
        let state = self.state.into_inner().unwrap_or_else(PoisonError::into_inner);
        state.last_write.into_iter().chain(state.reads).map(|(_, m)| m).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::{Access, Tracker};

    /// Guards the one-lock-per-operation rule: a launch that passes one
    /// buffer twice (read and written) locks its tracker once, as a write;
    /// locking it twice would deadlock the thread on its own mutex.
    #[test]
    fn one_allocation_twice_in_an_operation_is_held_once_as_a_write() {
        let tracker = Tracker::default();
        let held = Tracker::hold_all([(&tracker, Access::Read), (&tracker, Access::Write)].into_iter());
        assert_eq!(held.0.len(), 1);
        assert_eq!(held.0[0].1, Access::Write);
        drop(held);
        let held = Tracker::hold_all([(&tracker, Access::Read), (&tracker, Access::Read)].into_iter());
        assert_eq!(held.0[0].1, Access::Read, "two reads stay a read");
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
                let order =
                    if flip { [(b, Access::Read), (a, Access::Read)] } else { [(a, Access::Read), (b, Access::Read)] };
                for _ in 0..20_000 {
                    let held = Tracker::hold_all(order.into_iter());
                    std::hint::black_box(&held);
                }
                let _ = done.send(());
            });
        }
        for _ in 0..2 {
            assert!(finished.recv_timeout(Duration::from_secs(60)).is_ok(), "two threads deadlocked on two trackers");
        }
    }
}
