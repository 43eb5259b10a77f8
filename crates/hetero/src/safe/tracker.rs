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
//! After the operation an event is recorded on `s` and stored. Freeing the
//! allocation, or handing pinned memory to the host, first synchronises
//! every stored event, so no queued work can touch freed or host-borrowed
//! memory. Tracking is per allocation, not per byte range: two streams
//! writing disjoint slices of one allocation are serialised.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

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
pub(crate) struct Tracker<D: Device> {
    device: Arc<D>,
    state: Mutex<State>,
}

impl<D: Device> Tracker<D> {
    pub(crate) fn new(device: Arc<D>) -> Self {
        Self { device, state: Mutex::new(State::default()) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes `stream` wait for conflicting earlier uses on other streams.
    pub(crate) fn before(&self, stream: StreamId, access: Access) -> Result<()> {
        let state = self.lock();
        if let Some((s, e)) = state.last_write
            && s != stream
        {
            self.device.stream_wait_event(stream, e)?;
        }
        if access == Access::Write {
            for &(s, e) in &state.reads {
                if s != stream {
                    self.device.stream_wait_event(stream, e)?;
                }
            }
        }
        Ok(())
    }

    /// Records that an operation using the memory was enqueued on `stream`.
    pub(crate) fn after(&self, stream: StreamId, access: Access) -> Result<()> {
        let mut state = self.lock();
        match access {
            Access::Write => {
                let event = match state.spare.pop() {
                    Some(e) => e,
                    None => self.device.create_event()?,
                };
                self.device.record_event(event, stream)?;
                let old_reads = std::mem::take(&mut state.reads);
                state.spare.extend(old_reads.into_iter().map(|(_, e)| e));
                if let Some((_, old)) = state.last_write.replace((stream, event)) {
                    state.spare.push(old);
                }
            }
            Access::Read => {
                if let Some(&(_, e)) = state.reads.iter().find(|(s, _)| *s == stream) {
                    self.device.record_event(e, stream)?;
                } else {
                    let event = match state.spare.pop() {
                        Some(e) => e,
                        None => self.device.create_event()?,
                    };
                    self.device.record_event(event, stream)?;
                    state.reads.push((stream, event));
                }
            }
        }
        Ok(())
    }

    /// Blocks the host until every pending use has completed.
    pub(crate) fn wait_host(&self) -> Result<()> {
        let state = self.lock();
        for &(_, e) in state.last_write.iter().chain(&state.reads) {
            self.device.synchronize_event(e)?;
        }
        Ok(())
    }

    /// `true` when no pending use remains.
    pub(crate) fn is_idle(&self) -> Result<bool> {
        let state = self.lock();
        for &(_, e) in state.last_write.iter().chain(&state.reads) {
            if !self.device.query_event(e)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl<D: Device> Drop for Tracker<D> {
    fn drop(&mut self) {
        let state = std::mem::take(self.state.get_mut().unwrap_or_else(PoisonError::into_inner));
        for (_, e) in
            state.last_write.into_iter().chain(state.reads).chain(state.spare.into_iter().map(|e| (StreamId(0), e)))
        {
            let _ = self.device.destroy_event(e);
        }
    }
}
