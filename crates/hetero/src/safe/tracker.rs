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

use super::shared::{Mark, Shared};
use crate::device::{Device, StreamId};
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

impl Tracker {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `stream` wait for conflicting earlier uses on other streams.
    pub(crate) fn before<D: Device>(&self, device: &D, stream: StreamId, access: Access) -> Result<()> {
        let state = self.lock();
        if let Some((s, m)) = &state.last_write
            && *s != stream
        {
            // SAFETY: a live event of this device (type invariant); the
            // stream belongs to the caller.
            unsafe { device.stream_wait_event(stream, m.id())? };
        }
        if access == Access::Write {
            for (s, m) in &state.reads {
                if *s != stream {
                    // SAFETY: as above.
                    unsafe { device.stream_wait_event(stream, m.id())? };
                }
            }
        }
        Ok(())
    }

    /// Records that an operation using the memory was enqueued on `stream`
    /// and is followed there by `mark` (one mark serves every allocation
    /// the operation uses). Marks it replaces go back to `shared`.
    pub(crate) fn after<D: Device>(&self, shared: &Shared<D>, stream: StreamId, access: Access, mark: &Mark) {
        let mut state = self.lock();
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
