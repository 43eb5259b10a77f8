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
//! After the operation an event is recorded on `s` and stored. Handing
//! pinned memory to the host first synchronises every stored event; freeing
//! the allocation is deferred until they have all completed
//! ([`super::shared::Shared::retire`]), so no queued work can touch freed or
//! host-borrowed memory, and no drop blocks. Tracking is per allocation, not per byte range: two streams
//! writing disjoint slices of one allocation are serialised.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::device::{Device, EventId, StreamId};
use crate::error::Result;

/// Whether an operation reads or writes the tracked memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

#[derive(Default)]
struct State {
    last_write: Option<(StreamId, EventId)>,
    reads: Vec<(StreamId, EventId)>,
    spare: Vec<EventId>,
}

/// The events of one allocation's pending uses.
///
/// Invariant: every event in it was created by the device that owns the
/// allocation and is used by this tracker alone. Every method takes that
/// device; [`Tracker::into_events`] hands the events over when the
/// allocation is retired (the tracker never destroys them itself).
#[derive(Default)]
pub(crate) struct Tracker {
    state: Mutex<State>,
}

impl Tracker {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An event for a new use: a spare one, or a new one.
    fn event<D: Device>(state: &mut State, device: &D) -> Result<EventId> {
        match state.spare.pop() {
            Some(e) => Ok(e),
            None => device.create_sync_event(),
        }
    }

    /// Makes `stream` wait for conflicting earlier uses on other streams.
    pub(crate) fn before<D: Device>(&self, device: &D, stream: StreamId, access: Access) -> Result<()> {
        let state = self.lock();
        if let Some((s, e)) = state.last_write
            && s != stream
        {
            // SAFETY: the event is the tracker's own (type invariant); the
            // stream belongs to the caller.
            unsafe { device.stream_wait_event(stream, e)? };
        }
        if access == Access::Write {
            for &(s, e) in &state.reads {
                if s != stream {
                    // SAFETY: as above.
                    unsafe { device.stream_wait_event(stream, e)? };
                }
            }
        }
        Ok(())
    }

    /// Records that an operation using the memory was enqueued on `stream`.
    /// On an error the state is unchanged (the caller must then make sure
    /// the operation completes before the memory can be released).
    pub(crate) fn after<D: Device>(&self, device: &D, stream: StreamId, access: Access) -> Result<()> {
        let mut state = self.lock();
        let existing = match access {
            Access::Write => None,
            Access::Read => state.reads.iter().find(|(s, _)| *s == stream).map(|&(_, e)| e),
        };
        let event = match existing {
            Some(e) => e,
            None => Self::event(&mut state, device)?,
        };
        // SAFETY: the event is the tracker's own (type invariant); the
        // stream belongs to the caller.
        if let Err(e) = unsafe { device.record_event(event, stream) } {
            if existing.is_none() {
                state.spare.push(event);
            }
            return Err(e);
        }
        match access {
            Access::Write => {
                let old_reads = std::mem::take(&mut state.reads);
                state.spare.extend(old_reads.into_iter().map(|(_, e)| e));
                if let Some((_, old)) = state.last_write.replace((stream, event)) {
                    state.spare.push(old);
                }
            }
            Access::Read if existing.is_none() => state.reads.push((stream, event)),
            Access::Read => {}
        }
        Ok(())
    }

    /// Blocks the host until every pending use has completed.
    pub(crate) fn wait_host<D: Device>(&self, device: &D) -> Result<()> {
        let state = self.lock();
        for &(_, e) in state.last_write.iter().chain(&state.reads) {
            // SAFETY: the tracker's own event (type invariant).
            unsafe { device.synchronize_event(e)? };
        }
        Ok(())
    }

    /// `true` when no pending use remains.
    pub(crate) fn is_idle<D: Device>(&self, device: &D) -> Result<bool> {
        let state = self.lock();
        for &(_, e) in state.last_write.iter().chain(&state.reads) {
            // SAFETY: the tracker's own event (type invariant).
            if !unsafe { device.query_event(e)? } {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Gives up every event: (events of possibly pending uses, spare events).
    pub(crate) fn into_events(self) -> (Vec<EventId>, Vec<EventId>) {
        let state = self.state.into_inner().unwrap_or_else(PoisonError::into_inner);
        let pending = state.last_write.into_iter().chain(state.reads).map(|(_, e)| e).collect();
        (pending, state.spare)
    }
}
