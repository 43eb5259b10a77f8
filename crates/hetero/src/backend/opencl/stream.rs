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
//!
//! A wait for another queue's event (`stream_wait_event`) is not a command
//! of its own: the event joins the wait list of the queue's next command,
//! or of a marker when the queue is synchronised, queried or recorded first.
//! In an in-order queue every later command then follows the wait, as
//! CUDA's semantics ask, for one enqueue instead of two.
//!
//! Invariant: a command is enqueued and remembered as the last under the
//! queue's lock, so the remembered command is the queue's last also when
//! threads enqueue on one stream at once (remembered after the lock was
//! let go, a command could replace a later one, and a stream or a tracking
//! mark could complete while that later command still ran). Blocking
//! commands run outside the lock and are not remembered: when one returns,
//! it and everything before it have completed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue, enqueue_marker_with_wait_list};
use opencl3::context::Context;
use opencl3::event::Event;
use opencl3::types::{cl_event, cl_uint};

use super::error::{from_cl, from_code};
use super::event::is_complete;
use crate::error::Result;

/// Unflushed commands after which a queue is flushed without a wait.
pub(super) const FLUSH_COMMANDS: u32 = 16;
/// Age of the oldest unflushed command after which the next enqueue flushes.
pub(super) const FLUSH_AFTER: Duration = Duration::from_micros(100);

/// The last command of a queue, the waits its next command takes, and what
/// is unflushed.
struct Last {
    /// The last command's event, shared by `Arc` with the hetero events
    /// recorded from it (so a recording costs no `clRetainEvent`), and
    /// whether it may stand for a recording: on a profiling queue, not a
    /// marker with a wait list (NVIDIA's driver gives those no profiling
    /// times).
    event: Option<(Arc<Event>, bool)>,
    /// Events of other queues the next command must wait for.
    waits: Vec<Arc<Event>>,
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

/// A command to enqueue, given its wait list (count and pointer, valid for
/// the call); it returns the command's event or the OpenCL status.
pub(super) type Command<'a> = &'a mut dyn FnMut(cl_uint, *const cl_event) -> std::result::Result<cl_event, i32>;

impl ClStream {
    pub(super) fn new(context: &Context, profiling: bool) -> Result<Self> {
        Ok(Self {
            queue: create(context, profiling)?,
            profiling,
            last: Mutex::new(Last { event: None, waits: Vec::new(), commands: 0, oldest: None }),
            unflushed: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Last> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enqueues `command` with the pending waits as its wait list and
    /// remembers it as the queue's last (flushed later, when something
    /// waits or the flush policy says so).
    pub(super) fn enqueue(&self, call: &'static str, command: Command<'_>) -> Result<()> {
        let due = {
            let mut last = self.lock();
            self.push(&mut last, call, true, command)?
        };
        if due { self.flush() } else { Ok(()) }
    }

    /// As [`Self::enqueue`] for a command that does not block; a blocking
    /// one runs outside the lock, after the pending waits, and is not
    /// remembered: when it returns, it and every earlier command have
    /// completed, so the remembered last command has too, or is later.
    pub(super) fn submit(&self, call: &'static str, blocking: bool, command: Command<'_>) -> Result<()> {
        if !blocking {
            return self.enqueue(call, command);
        }
        self.settle(&mut self.lock())?;
        owned(call, command(0, std::ptr::null())).map(drop)
    }

    /// Makes the queue's next command wait for `event` (of another queue,
    /// flushed by the caller).
    pub(super) fn defer_wait(&self, event: Arc<Event>) {
        self.lock().waits.push(event);
    }

    /// Enqueues `command` under the lock held as `last`; `true` when the
    /// flush policy asks for a flush. On an error nothing was enqueued and
    /// the waits stay pending.
    fn push(&self, last: &mut Last, call: &'static str, recordable: bool, command: Command<'_>) -> Result<bool> {
        let list: Vec<cl_event> = last.waits.iter().map(|e| e.get()).collect();
        let count = cl_uint::try_from(list.len()).unwrap_or(cl_uint::MAX);
        let event = owned(call, command(count, if list.is_empty() { std::ptr::null() } else { list.as_ptr() }))?;
        last.waits.clear();
        last.event = Some((Arc::new(event), recordable || !self.profiling));
        last.commands += 1;
        let oldest = *last.oldest.get_or_insert_with(Instant::now);
        self.unflushed.store(true, Ordering::Release);
        Ok(last.commands >= FLUSH_COMMANDS || oldest.elapsed() >= FLUSH_AFTER)
    }

    /// Enqueues a marker carrying the pending waits, if there are any, so
    /// that the last command follows them.
    fn settle(&self, last: &mut Last) -> Result<()> {
        if last.waits.is_empty() {
            return Ok(());
        }
        // SAFETY: the queue is live; the wait list is valid for the call.
        self.push(last, "clEnqueueMarkerWithWaitList", false, &mut |n, list| unsafe {
            enqueue_marker_with_wait_list(self.queue.get(), n, list)
        })
        .map(drop)
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

    /// An event that completes when everything enqueued so far has: the
    /// last command's, while it may still stand for a recording made now,
    /// else a new marker's. For a `timed` recording on a profiling queue a
    /// completed command's event does not serve: its end time is that
    /// completion's, not the recording's (timing would include the idle
    /// gap). Any last command serves an untimed recording: it completes
    /// after everything before it, and a completed one says so at once.
    pub(super) fn recording(&self, timed: bool) -> Result<Arc<Event>> {
        let mut last = self.lock();
        self.settle(&mut last)?;
        let reusable = match last.event.as_ref() {
            None => false,
            Some(_) if !timed || !self.profiling => true,
            Some((_, false)) => false,
            // An unflushed command is pending without asking the driver.
            Some(_) if self.unflushed.load(Ordering::Acquire) => true,
            Some((event, true)) => matches!(is_complete(event, "record_event"), Ok(false)),
        };
        if !reusable {
            // SAFETY: the queue is live; no wait list (settled above).
            self.push(&mut last, "clEnqueueMarkerWithWaitList", true, &mut |_, _| unsafe {
                enqueue_marker_with_wait_list(self.queue.get(), 0, std::ptr::null())
            })?;
        }
        match last.event.as_ref() {
            Some((event, _)) => Ok(Arc::clone(event)),
            None => Err(super::error::error(
                "record_event",
                crate::ErrorKind::Driver,
                "the marker just enqueued has no event",
            )),
        }
    }

    /// The last command's event, once pending waits are settled; `None`
    /// when nothing was ever enqueued.
    fn last_settled(&self) -> Result<Option<Arc<Event>>> {
        let mut last = self.lock();
        self.settle(&mut last)?;
        Ok(last.event.as_ref().map(|(event, _)| Arc::clone(event)))
    }

    /// The error of the last remembered command, if it failed; for use
    /// after a blocking command returned, when every command before it has
    /// completed (a remembered one still pending was enqueued after it, by
    /// another thread, and is not waited for).
    pub(super) fn check_earlier(&self, call: &'static str) -> Result<()> {
        match self.lock().event.as_ref() {
            Some((event, _)) => is_complete(event, call).map(drop),
            None => Ok(()),
        }
    }

    /// `true` when the last command has completed.
    pub(super) fn is_idle(&self) -> Result<bool> {
        let last = self.last_settled()?;
        self.flush()?;
        match last {
            Some(event) => is_complete(&event, "query_stream"),
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
        let Some(last) = self.last_settled()? else { return Ok(()) };
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
