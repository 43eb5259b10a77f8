//! Events of the OpenCL backend.
//!
//! An `EventId` names a slot holding the `cl_event` of its latest
//! recording and the queue it was recorded on: the event of that queue's
//! last command (or a marker when it had none), or, for a user event, a
//! `clCreateUserEvent` event. Profiling end times give elapsed device time.

use std::sync::{Arc, Mutex, PoisonError};

use opencl3::event::Event;

use super::stream::{ClStream, is_complete};
use crate::error::Result;

/// A recording: the command's event, shared with its queue, and the queue
/// (none for a user event).
pub(super) type Recording = (Arc<Event>, Option<Arc<ClStream>>);

/// The latest `cl_event` of one hetero event, and its queue.
pub(super) struct ClEvent {
    latest: Mutex<Option<Recording>>,
    /// A user event: completed by the host, never recorded.
    pub(super) user: bool,
    /// Whether the event keeps time (`create_event`); a synchronisation
    /// event (`create_sync_event`) does not, so any command event that
    /// completes after the work before its recording may stand for it.
    pub(super) timed: bool,
}

impl ClEvent {
    /// An event recorded from queues, timed or for synchronisation only.
    pub(super) fn marker(timed: bool) -> Self {
        Self { latest: Mutex::new(None), user: false, timed }
    }

    pub(super) fn user(event: Event) -> Self {
        Self { latest: Mutex::new(Some((Arc::new(event), None))), user: true, timed: false }
    }

    /// Replaces the latest recording, made on `source`.
    pub(super) fn set(&self, event: Arc<Event>, source: Arc<ClStream>) {
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some((event, Some(source)));
    }

    /// The latest recording, usable after the lock is gone; its queue is
    /// flushed first, so whoever waits on it sees progress.
    pub(super) fn current(&self) -> Result<Option<Arc<Event>>> {
        Ok(self.recording()?.map(|(event, _)| event))
    }

    /// The latest recording with its queue, flushed as by [`ClEvent::current`].
    pub(super) fn recording(&self) -> Result<Option<Recording>> {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        match latest.as_ref() {
            None => Ok(None),
            Some((event, source)) => {
                if let Some(source) = source {
                    source.flush()?;
                }
                Ok(Some((Arc::clone(event), source.clone())))
            }
        }
    }

    /// Whether the latest recording has completed ([`completed`]); an
    /// event never recorded has.
    pub(super) fn completed(&self, call: &'static str) -> Result<bool> {
        match self.recording()? {
            Some(recording) => completed(&recording, call),
            None => Ok(true),
        }
    }
}

/// Whether a recording has completed: its event says so, or a later
/// command of its in-order queue has completed ([`ClStream::drained`]), in
/// which case the event is waited for, which returns at once and brings the
/// driver's status up to date.
pub(super) fn completed((event, source): &Recording, call: &'static str) -> Result<bool> {
    if is_complete(event, call)? {
        return Ok(true);
    }
    match source {
        Some(queue) if queue.drained()? => {
            event.wait().map_err(super::error::from_cl("clWaitForEvents"))?;
            is_complete(event, call)
        }
        _ => Ok(false),
    }
}
