//! Events of the OpenCL backend.
//!
//! An `EventId` names a slot holding the `cl_event` of its latest
//! recording: a marker (`clEnqueueMarkerWithWaitList`) on the recording
//! queue, or, for a user event, a `clCreateUserEvent` event. Profiling
//! times of markers give elapsed device time.

use std::sync::{Mutex, PoisonError};

use opencl3::event::{CL_COMPLETE, Event, retain_event};

use super::error::from_code;
use crate::error::Result;

/// The latest `cl_event` of one hetero event.
pub(super) struct ClEvent {
    latest: Mutex<Option<Event>>,
    /// A user event: completed by the host, never recorded.
    pub(super) user: bool,
}

impl ClEvent {
    pub(super) fn marker() -> Self {
        Self { latest: Mutex::new(None), user: false }
    }

    pub(super) fn user(event: Event) -> Self {
        Self { latest: Mutex::new(Some(event)), user: true }
    }

    /// Replaces the latest recording.
    pub(super) fn set(&self, event: Event) {
        *self.latest.lock().unwrap_or_else(PoisonError::into_inner) = Some(event);
    }

    /// A retained handle to the latest recording, usable after the lock is gone.
    pub(super) fn current(&self) -> Result<Option<Event>> {
        let latest = self.latest.lock().unwrap_or_else(PoisonError::into_inner);
        match latest.as_ref() {
            None => Ok(None),
            Some(event) => {
                // SAFETY: the event is live while we hold the lock; the
                // retained reference is released by the returned wrapper.
                unsafe { retain_event(event.get()) }.map_err(from_code("clRetainEvent"))?;
                Ok(Some(Event::new(event.get())))
            }
        }
    }
}

/// `true` when `event` has completed; its error status when it failed.
pub(super) fn is_complete(event: &Event, call: &'static str) -> Result<bool> {
    let status = event.command_execution_status().map_err(super::error::from_cl(call))?;
    if status.0 < 0 {
        return Err(super::error::cl_error(call, status.0));
    }
    Ok(status.0 == CL_COMPLETE)
}
