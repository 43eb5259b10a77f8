//! The pending completions of one device (`completion.rs` polls them on
//! its waker thread): plain data that the device state keeps.

use std::any::Any;
use std::collections::VecDeque;
use std::marker::PhantomData;
use std::sync::{Arc, PoisonError};
use std::task::Waker;

use super::marks::Mark;
use crate::device::{Device, EventId, StreamId};
use crate::error::Result;
use crate::sync::{Condvar, Mutex, MutexGuard};

/// What to do when an entry's event completes.
pub(super) enum Then {
    Wake(Arc<Slot>),
    Call(Box<dyn FnOnce(Result<()>) + Send>),
}

/// One pending completion.
pub(super) struct Entry<D: Device> {
    pub(super) key: u64,
    pub(super) event: EventId,
    /// The mark the entry owns (callbacks), recycled once delivered.
    pub(super) mark: Option<Mark>,
    pub(super) then: Then,
    /// Keeps the device state (and so the event) alive while pending.
    pub(super) _device: Arc<dyn Any + Send + Sync>,
    pub(super) _kind: PhantomData<fn() -> D>,
}

pub(super) struct Queue<D: Device> {
    /// Futures' entries, each on its own.
    pub(super) futures: Vec<Entry<D>>,
    /// Callbacks per stream, in the order they were queued: only the first
    /// of each stream is polled.
    pub(super) callbacks: Vec<(StreamId, VecDeque<Entry<D>>)>,
    pub(super) next_key: u64,
    /// The waker thread runs (or was started).
    pub(super) running: bool,
    /// The device is gone: the thread ends.
    pub(super) shutdown: bool,
    /// Something was registered since the thread last looked.
    pub(super) news: bool,
    /// The thread waits on the signal (registrations wake it only then:
    /// a wake-up is a system call).
    pub(super) asleep: bool,
}

/// The pending completions of one device and the waker thread's signal.
///
/// Invariant: every entry's event belongs to the device and stays live
/// while the entry is queued or a pass that saw it runs: the waker thread
/// queries events only while holding `pass`, and a future that cancels its
/// entry takes `pass` once before its event may go. Callback entries are
/// removed only by the waker thread. Registration takes only `queue`, so
/// it never waits for the driver calls of a pass.
pub(crate) struct Waiter<D: Device> {
    pub(super) queue: Mutex<Queue<D>>,
    pub(super) pass: Mutex<()>,
    pub(super) signal: Condvar,
}

/// The result slot of a future, filled by the waker thread.
pub(super) struct Slot {
    pub(super) state: Mutex<(Option<Result<()>>, Option<Waker>)>,
}

impl Slot {
    pub(super) fn lock(&self) -> MutexGuard<'_, (Option<Result<()>>, Option<Waker>)> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<D: Device> Queue<D> {
    pub(super) fn is_empty(&self) -> bool {
        self.futures.is_empty() && self.callbacks.is_empty()
    }
}

impl<D: Device> Waiter<D> {
    pub(crate) fn new() -> Self {
        Self {
            queue: Mutex::new(Queue {
                futures: Vec::new(),
                callbacks: Vec::new(),
                next_key: 0,
                running: false,
                shutdown: false,
                news: false,
                asleep: false,
            }),
            pass: Mutex::new(()),
            signal: Condvar::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Queue<D>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends the waker thread (the device is being dropped).
    pub(crate) fn shut_down(&self) {
        self.lock().shutdown = true;
        self.signal.notify_all();
    }
}
