//! Events of the host backend: a generation counter per event and the time
//! its latest recording was reached by the stream worker.
//!
//! `recorded` counts recordings; `completed` is the highest recording a
//! stream has reached. A stream that waits on an event captures the
//! `recorded` count at the time of the call (CUDA semantics), so recording
//! the event again later does not change what the wait waits for.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Instant;

use super::error::error;
use crate::error::{Error, ErrorKind, Result};

#[derive(Default)]
struct Marks {
    recorded: u64,
    completed: u64,
    time: Option<Instant>,
    /// Set when a recording was reached by a stream that had failed.
    error: Option<Error>,
}

/// One event, shared by the device table and the operations that signal or wait on it.
#[derive(Default)]
pub(super) struct HostEvent {
    marks: Mutex<Marks>,
    reached: Condvar,
    /// A user event: completed by the host, never recorded.
    user: bool,
}

impl HostEvent {
    /// An event that completes only by [`HostEvent::complete`] from the host.
    pub(super) fn user() -> Self {
        let event = Self { user: true, ..Self::default() };
        event.lock().recorded = 1;
        event
    }

    /// `true` for a user event.
    pub(super) fn is_user(&self) -> bool {
        self.user
    }

    /// Completes a user event that is still open (no effect on others).
    pub(super) fn release_gate(&self) {
        if self.user {
            self.complete(1, None);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Marks> {
        self.marks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a new recording and returns its generation, to be passed to
    /// [`HostEvent::complete`] by the stream when it gets there.
    pub(super) fn begin_record(&self) -> u64 {
        let mut marks = self.lock();
        marks.recorded += 1;
        marks.recorded
    }

    /// The generation a wait issued now must reach.
    pub(super) fn current(&self) -> u64 {
        self.lock().recorded
    }

    /// Marks `generation` as reached now; `failed` is the error of the
    /// stream that reached it, if that stream had failed.
    pub(super) fn complete(&self, generation: u64, failed: Option<Error>) {
        let mut marks = self.lock();
        if generation > marks.completed {
            marks.completed = generation;
            marks.time = Some(Instant::now());
            marks.error = failed;
        }
        self.reached.notify_all();
    }

    pub(super) fn is_complete(&self) -> bool {
        let marks = self.lock();
        marks.completed >= marks.recorded
    }

    /// Blocks until `generation` is reached; the error of a failed stream
    /// that reached it (or a later recording).
    pub(super) fn wait_for(&self, generation: u64) -> Result<()> {
        let mut marks = self.lock();
        while marks.completed < generation {
            marks = self.reached.wait(marks).unwrap_or_else(PoisonError::into_inner);
        }
        marks.error.clone().map_or(Ok(()), Err)
    }

    /// Blocks until the latest recording is reached; the error of a failed
    /// stream that reached it.
    pub(super) fn wait(&self) -> Result<()> {
        let target = self.current();
        self.wait_for(target)
    }

    /// When the latest recording was reached, or `NotReady`.
    pub(super) fn time(&self, call: &'static str) -> Result<Instant> {
        let marks = self.lock();
        if let Some(e) = &marks.error {
            return Err(e.clone());
        }
        match marks.time {
            Some(t) if marks.completed >= marks.recorded => Ok(t),
            _ => Err(error(
                call,
                ErrorKind::NotReady,
                if marks.recorded == 0 { "event was never recorded" } else { "event has not completed yet" },
            )),
        }
    }
}
