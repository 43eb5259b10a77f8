//! Streams of the OpenCL backend: in-order command queues, with profiling
//! only for streams created with timing (on NVIDIA's driver profiling about
//! doubles the host cost of every command).
//!
//! OpenCL only guarantees progress for flushed commands, but a `clFlush`
//! after every enqueue costs several microseconds on some drivers (about
//! 7 µs on NVIDIA's). A queue is therefore flushed before anything can wait
//! on its work — another queue waiting on one of its events, the host
//! querying or waiting on its events or on the queue itself (see
//! [`super::event::ClEvent::current`]) — and, so the device is never left
//! idle behind a host that only enqueues, once [`FLUSH_COMMANDS`] commands
//! or [`FLUSH_AFTER`] have gone by since the oldest unflushed one. (Flushed
//! only when waited on, the 1000 steps of the wave workload at 4096² took
//! about 4× their compute time on NVIDIA's OpenCL.) The event of the last
//! command is kept, so a stream is idle exactly when it has completed, and
//! recording an event reuses it instead of enqueueing a marker: in an
//! in-order queue the last command completes after every earlier one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::event::{Event, retain_event};
use opencl3::types::cl_event;

use super::error::{from_cl, from_code};
use super::event::is_complete;
use crate::error::Result;

/// Unflushed commands after which a queue is flushed without a wait.
pub(super) const FLUSH_COMMANDS: u32 = 16;
/// Age of the oldest unflushed command after which the next enqueue flushes.
pub(super) const FLUSH_AFTER: Duration = Duration::from_micros(100);

/// The last command of a queue and what is unflushed.
struct Last {
    /// The last command's event, and whether it may stand for a recording:
    /// on a profiling queue only if it reports profiling times (NVIDIA's
    /// driver gives none for barriers).
    event: Option<(Event, bool)>,
    /// Commands enqueued since the last flush, and when the first of them was.
    commands: u32,
    oldest: Option<Instant>,
}

/// An in-order queue, the event of its last command, and whether commands
/// were enqueued since its last flush.
pub(super) struct ClStream {
    pub(super) queue: CommandQueue,
    /// Whether the queue profiles its commands (the stream was created with timing).
    profiling: bool,
    last: Mutex<Last>,
    /// Set after every enqueue, cleared by a flush: read without the lock.
    unflushed: AtomicBool,
}

impl ClStream {
    pub(super) fn new(context: &Context, profiling: bool) -> Result<Self> {
        Ok(Self {
            queue: create(context, profiling)?,
            profiling,
            last: Mutex::new(Last { event: None, commands: 0, oldest: None }),
            unflushed: AtomicBool::new(false),
        })
    }

    /// Whether the queue profiles its commands, so recordings can be timed.
    pub(super) fn profiling(&self) -> bool {
        self.profiling
    }

    /// Takes ownership of the event an enqueue returned and remembers the
    /// command as the stream's last (flushed later, when something waits).
    pub(super) fn submitted(&self, call: &'static str, event: std::result::Result<cl_event, i32>) -> Result<()> {
        self.remember(call, event, true)
    }

    /// As [`Self::submitted`], for a barrier: its event is never reused as a
    /// recording, since drivers need not time barriers.
    pub(super) fn submitted_barrier(
        &self,
        call: &'static str,
        event: std::result::Result<cl_event, i32>,
    ) -> Result<()> {
        self.remember(call, event, false)
    }

    fn remember(&self, call: &'static str, event: std::result::Result<cl_event, i32>, timed: bool) -> Result<()> {
        let event = owned(call, event)?;
        let reusable = timed || !self.profiling;
        let due = {
            let mut last = self.lock();
            last.event = Some((event, reusable));
            last.commands += 1;
            let oldest = *last.oldest.get_or_insert_with(Instant::now);
            last.commands >= FLUSH_COMMANDS || oldest.elapsed() >= FLUSH_AFTER
        };
        self.unflushed.store(true, Ordering::Release);
        if due { self.flush() } else { Ok(()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Last> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Submits everything enqueued so far to the device, if anything is new.
    pub(super) fn flush(&self) -> Result<()> {
        if self.unflushed.swap(false, Ordering::AcqRel) {
            {
                let mut last = self.lock();
                (last.commands, last.oldest) = (0, None);
            }
            self.queue.flush().map_err(from_cl("clFlush"))?;
        }
        Ok(())
    }

    /// `true` when commands were enqueued since the last flush: the last of
    /// them has not even reached the device, so it is pending.
    pub(super) fn has_unflushed(&self) -> bool {
        self.unflushed.load(Ordering::Acquire)
    }

    /// A retained handle to the event of the last command, if it may stand
    /// for a recording (see [`Last::event`]).
    pub(super) fn last_event(&self) -> Result<Option<Event>> {
        let last = self.lock();
        match last.event.as_ref() {
            None | Some((_, false)) => Ok(None),
            Some((event, true)) => {
                // SAFETY: the event is live while the lock is held; the
                // retained reference is released by the returned wrapper.
                unsafe { retain_event(event.get()) }.map_err(from_code("clRetainEvent"))?;
                Ok(Some(Event::new(event.get())))
            }
        }
    }

    /// `true` when the last command has completed.
    pub(super) fn is_idle(&self) -> Result<bool> {
        self.flush()?;
        match self.lock().event.as_ref() {
            Some((event, _)) => is_complete(event, "query_stream"),
            None => Ok(true),
        }
    }

    /// Blocks until every command enqueued before the call has completed.
    ///
    /// Waits for the last command's event: in an in-order queue it
    /// completes after every earlier command, and the wait costs less than
    /// `clFinish` on NVIDIA's driver (a 4-byte read waited for: 15 µs with
    /// `clFinish`, against 8 µs for a blocking read).
    pub(super) fn finish(&self) -> Result<()> {
        let last = {
            let last = self.lock();
            match last.event.as_ref() {
                Some((event, _)) => {
                    // SAFETY: the event is live while the lock is held; the
                    // retained reference is released by the wrapper below.
                    unsafe { retain_event(event.get()) }.map_err(from_code("clRetainEvent"))?;
                    Some(Event::new(event.get()))
                }
                None => None,
            }
        };
        let Some(last) = last else { return Ok(()) };
        self.flush()?;
        let waited = last.wait();
        // A failed command shows in its event's status, which names the error.
        if is_complete(&last, "synchronize_stream")? {
            return Ok(());
        }
        waited.map_err(from_cl("clWaitForEvents"))?;
        Err(super::error::error(
            "clWaitForEvents",
            crate::ErrorKind::Driver,
            "the last command had not completed when the wait for it returned",
        ))
    }
}

/// An in-order queue, with profiling enabled if `profiling`.
pub(super) fn create(context: &Context, profiling: bool) -> Result<CommandQueue> {
    let properties = if profiling { CL_QUEUE_PROFILING_ENABLE } else { 0 };
    #[allow(deprecated)] // clCreateCommandQueue: the one constructor every OpenCL 1.2+ platform has
    CommandQueue::create_default(context, properties).map_err(from_cl("clCreateCommandQueue"))
}

/// Takes ownership of the event an enqueue returned.
pub(super) fn owned(call: &'static str, event: std::result::Result<cl_event, i32>) -> Result<Event> {
    Ok(Event::new(event.map_err(from_code(call))?))
}
