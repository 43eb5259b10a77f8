//! Streams of the OpenCL backend: in-order command queues, with profiling
//! only for streams created with timing (on NVIDIA's driver profiling about
//! doubles the host cost of every command).
//!
//! OpenCL only guarantees progress for flushed commands, but a `clFlush`
//! after every enqueue costs several microseconds on some drivers (about
//! 7 µs on NVIDIA's). A queue is therefore flushed:
//!
//! - before anything can wait on its work: another queue waiting on one of
//!   its events, the host querying or waiting on its events or on the
//!   queue itself (see [`super::event::ClEvent::current`]);
//! - before the host blocks on any queue or event of the device, every
//!   queue of the device ([`Queues::flush_all`]): work another queue holds
//!   back would otherwise wait until the host came back;
//! - once [`FLUSH_COMMANDS`] commands have gone by unflushed, and once its
//!   oldest unflushed command is [`FLUSH_AFTER`] old when any queue of the
//!   device enqueues ([`Queues::sweep`]), so the device is never left idle
//!   behind a host that only enqueues. (Flushed only when waited on, the
//!   1000 steps of the wave workload at 4096² took about 4× their compute
//!   time on NVIDIA's OpenCL. Flushed only by its own enqueues, a copy
//!   queue that gets one snapshot copy and then nothing would have no
//!   guarantee of starting it before the compute queue waits for it; a
//!   driver may start unflushed work, as NVIDIA's did in
//!   `experiments/gpu/opencl-overlap.c`, but need not.)
//!
//! A flush that the policy makes after a command was enqueued never fails
//! the enqueue (the trait's contract: an error means nothing was
//! enqueued): a failed one leaves the queue unflushed, and the next flush
//! before a wait reports it.
//!
//! The event of the last command is kept, so a stream is idle exactly when
//! it has completed, and recording an event reuses it instead of
//! enqueueing a marker: in an in-order queue the last command completes
//! after every earlier one. The launches of a replayed graph but its last
//! are enqueued without an event (an event returned costs about 4 µs a
//! launch on NVIDIA's driver); whoever then needs the queue's end gets a
//! marker enqueued after them.
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

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue, enqueue_marker_with_wait_list};
use opencl3::context::Context;
use opencl3::event::{CL_COMPLETE, Event};
use opencl3::types::{cl_device_id, cl_event, cl_uint};

use super::error::{from_cl, from_code};
use crate::error::Result;

/// Unflushed commands after which a queue is flushed.
pub(super) const FLUSH_COMMANDS: u32 = 16;
/// Age of a queue's oldest unflushed command after which the next enqueue
/// on any queue of the device flushes it.
pub(super) const FLUSH_AFTER: Duration = Duration::from_micros(100);
const FLUSH_AFTER_NS: u64 = FLUSH_AFTER.as_nanos() as u64;

/// Every stream of one device, for the flushes that one queue's enqueue or
/// the host's wait makes on the others.
pub(super) struct Queues {
    /// Origin of the nanosecond times kept in atomics.
    epoch: Instant,
    streams: Mutex<Vec<Weak<ClStream>>>,
    /// When the next sweep is due, in nanoseconds since `epoch`.
    next_sweep: AtomicU64,
    /// Blocking commands are enqueued without blocking and then waited
    /// for: on rusticl (Mesa 22.3) a blocking read or write holds its
    /// queue, so another thread's enqueue on it waits until the read or
    /// write has run (`enqueue_is_not_held_by_a_blocking_copy`).
    wait_instead_of_blocking: bool,
}

impl Queues {
    /// The queues of a device; see [`Queues::wait_instead_of_blocking`].
    pub(super) fn new(wait_instead_of_blocking: bool) -> Arc<Self> {
        Arc::new(Self {
            epoch: Instant::now(),
            streams: Mutex::new(Vec::new()),
            next_sweep: AtomicU64::new(0),
            wait_instead_of_blocking,
        })
    }

    /// Whether a blocking read or write is to be enqueued without blocking
    /// and then waited for ([`ClStream::submit`]).
    pub(super) fn wait_instead_of_blocking(&self) -> bool {
        self.wait_instead_of_blocking
    }

    /// Nanoseconds since `epoch`, at least 1 (0 means "none" in [`ClStream::oldest`]).
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1)
    }

    /// Flushes the queues whose oldest unflushed command is
    /// [`FLUSH_AFTER`] old at `now`, at most once per [`FLUSH_AFTER`].
    fn sweep(&self, now: u64) {
        let due = self.next_sweep.load(Ordering::Relaxed);
        if now >= due
            && self.next_sweep.compare_exchange(due, now + FLUSH_AFTER_NS, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.flush_where(|oldest| now.saturating_sub(oldest) >= FLUSH_AFTER_NS);
        }
    }

    /// Flushes every queue with unflushed commands: called before the host
    /// blocks. Failures are left for each queue's own next wait to report.
    pub(super) fn flush_all(&self) {
        self.flush_where(|_| true);
    }

    fn flush_where(&self, old: impl Fn(u64) -> bool) {
        self.streams.lock().unwrap_or_else(PoisonError::into_inner).retain(|weak| {
            let Some(stream) = weak.upgrade() else { return false };
            let oldest = stream.oldest.load(Ordering::Acquire);
            if oldest != 0 && old(oldest) {
                stream.flush_quietly();
            }
            true
        });
    }
}

/// The last command of a queue, the waits its next command takes, and how
/// many commands are unflushed.
struct Last {
    /// The last command's event, shared by `Arc` with the hetero events
    /// recorded from it (so a recording costs no `clRetainEvent`), and
    /// whether it may stand for a recording: on a profiling queue, not a
    /// marker with a wait list (NVIDIA's driver gives those no profiling
    /// times).
    event: Option<(Arc<Event>, bool)>,
    /// Commands were enqueued after `event` without an event of their own
    /// ([`ClStream::enqueue_unevented`]): whoever needs the queue's end
    /// enqueues a marker first ([`ClStream::evented`]).
    unevented: bool,
    /// Events of other queues the next command must wait for.
    waits: Vec<Arc<Event>>,
    /// Commands enqueued since the last flush.
    commands: u32,
}

/// An in-order queue, the event of its last command, and when its oldest
/// unflushed command was enqueued.
pub(super) struct ClStream {
    pub(super) queue: CommandQueue,
    /// Whether the queue profiles its commands (the stream was created with timing).
    profiling: bool,
    last: Mutex<Last>,
    /// Enqueue time of the oldest unflushed command ([`Queues::now`]), 0
    /// when everything is flushed: set by enqueues, cleared by a flush,
    /// read without the lock.
    oldest: AtomicU64,
    /// The device's queues, this one among them.
    queues: Arc<Queues>,
}

/// A command to enqueue, given its wait list (count and pointer, valid for
/// the call); it returns the command's event or the OpenCL status.
pub(super) type Command<'a> = &'a mut dyn FnMut(cl_uint, *const cl_event) -> std::result::Result<cl_event, i32>;

/// As [`Command`], for a command enqueued without an event.
pub(super) type UneventedCommand<'a> = &'a mut dyn FnMut(cl_uint, *const cl_event) -> std::result::Result<(), i32>;

impl ClStream {
    /// A new queue of `device` in `context`, one of `queues`.
    pub(super) fn new(
        context: &Context,
        device: cl_device_id,
        profiling: bool,
        queues: &Arc<Queues>,
    ) -> Result<Arc<Self>> {
        Ok(Self::over(create(context, device, profiling)?, profiling, queues))
    }

    /// A stream over `queue`, an in-order queue that profiles its commands
    /// when `profiling`, one of `queues`.
    pub(super) fn over(queue: CommandQueue, profiling: bool, queues: &Arc<Queues>) -> Arc<Self> {
        let stream = Arc::new(Self {
            queue,
            profiling,
            last: Mutex::new(Last { event: None, unevented: false, waits: Vec::new(), commands: 0 }),
            oldest: AtomicU64::new(0),
            queues: Arc::clone(queues),
        });
        queues.streams.lock().unwrap_or_else(PoisonError::into_inner).push(Arc::downgrade(&stream));
        stream
    }

    fn lock(&self) -> MutexGuard<'_, Last> {
        self.last.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enqueues `command` with the pending waits as its wait list and
    /// remembers it as the queue's last; flushes as the policy says (module
    /// doc). An error means nothing was enqueued.
    pub(super) fn enqueue(&self, call: &'static str, command: Command<'_>) -> Result<()> {
        self.enqueue_then_flush(|last, now| self.push(last, call, true, now, command))
    }

    /// Runs `push` under the lock at [`Queues::now`], then flushes this
    /// queue if `push` says it is due, and others as the sweep finds them.
    fn enqueue_then_flush(&self, push: impl FnOnce(&mut Last, u64) -> Result<bool>) -> Result<()> {
        let now = self.queues.now();
        let due = push(&mut self.lock(), now)?;
        if due {
            self.flush_quietly();
        }
        self.queues.sweep(now);
        Ok(())
    }

    /// As [`Self::enqueue`] for a command that returns no event: on
    /// NVIDIA's driver an event returned costs about 4 µs of host time a
    /// launch (`experiments/gpu/opencl-launch-threads.c`), and a replayed
    /// graph needs one only for its last command. The queue's end is then
    /// known by a marker enqueued when something asks for it.
    pub(super) fn enqueue_unevented(&self, call: &'static str, command: UneventedCommand<'_>) -> Result<()> {
        self.enqueue_then_flush(|last, now| {
            with_waits(last, command).map_err(from_code(call))?;
            last.waits.clear();
            last.unevented = true;
            Ok(self.counted(last, now))
        })
    }

    /// As [`Self::enqueue`], returning the command's event, and flushing
    /// the queue: for commands that something outside the queue's device
    /// waits on (the halves of a staged peer copy).
    pub(super) fn enqueue_flushed(&self, call: &'static str, command: Command<'_>) -> Result<Arc<Event>> {
        let event = {
            let mut last = self.lock();
            self.push(&mut last, call, true, self.queues.now(), command)?;
            last.event.as_ref().map(|(event, _)| Arc::clone(event))
        };
        self.flush_quietly();
        event.ok_or_else(|| {
            super::error::error(call, crate::ErrorKind::Driver, "the command just enqueued has no event")
        })
    }

    /// As [`Self::enqueue`] for a command that does not block; a blocking
    /// one runs outside the lock, after the pending waits and a flush of
    /// every queue of the device, and is not remembered: when it returns,
    /// it and every earlier command have completed, so the remembered last
    /// command has too, or is later. With `waited`, the command was made
    /// without blocking ([`Queues::wait_instead_of_blocking`]) and is
    /// waited for here, so that it has completed on return all the same.
    pub(super) fn submit(&self, call: &'static str, blocking: bool, waited: bool, command: Command<'_>) -> Result<()> {
        if !blocking && !waited {
            return self.enqueue(call, command);
        }
        self.settle(&mut self.lock())?;
        self.queues.flush_all();
        let event = owned(call, command(0, std::ptr::null()))?;
        // The caller's host memory must not be touched after the return:
        // wait until the command has completed, or failed (its status then
        // names the error), whatever a wait reports.
        while waited && !is_complete(&event, call)? {
            if event.wait().is_err() {
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        Ok(())
    }

    /// Makes the queue's next command wait for `event` (of another queue,
    /// flushed by the caller).
    pub(super) fn defer_wait(&self, event: Arc<Event>) {
        self.lock().waits.push(event);
    }

    /// Enqueues `command` under the lock held as `last`, at `now`
    /// ([`Queues::now`]); `true` when the queue is due for a flush (its
    /// command count or its oldest command's age). On an error nothing was
    /// enqueued and the waits stay pending.
    fn push(
        &self,
        last: &mut Last,
        call: &'static str,
        recordable: bool,
        now: u64,
        command: Command<'_>,
    ) -> Result<bool> {
        let event = owned(call, with_waits(last, command))?;
        last.waits.clear();
        last.event = Some((Arc::new(event), recordable || !self.profiling));
        last.unevented = false;
        Ok(self.counted(last, now))
    }

    /// Counts a command just enqueued at `now`, under the lock held as
    /// `last`; `true` when the queue is due for a flush (its command count
    /// or its oldest command's age).
    fn counted(&self, last: &mut Last, now: u64) -> bool {
        last.commands += 1;
        // Read first: the exchange, an atomic write, is needed only by the
        // first command after a flush.
        let mut oldest = self.oldest.load(Ordering::Acquire);
        if oldest == 0 {
            oldest = match self.oldest.compare_exchange(0, now, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => now,
                Err(oldest) => oldest,
            };
        }
        last.commands >= FLUSH_COMMANDS || now.saturating_sub(oldest) >= FLUSH_AFTER_NS
    }

    /// Enqueues a marker carrying the pending waits, if there are any, so
    /// that the last command follows them.
    fn settle(&self, last: &mut Last) -> Result<()> {
        if last.waits.is_empty() {
            return Ok(());
        }
        // SAFETY: the queue is live; the wait list is valid for the call.
        self.push(last, "clEnqueueMarkerWithWaitList", false, self.queues.now(), &mut |n, list| unsafe {
            enqueue_marker_with_wait_list(self.queue.get(), n, list)
        })
        .map(drop)
    }

    /// [`Self::settle`], and a marker after commands enqueued without an
    /// event, so that the remembered event is the queue's last command's.
    fn evented(&self, last: &mut Last) -> Result<()> {
        self.settle(last)?;
        if !last.unevented {
            return Ok(());
        }
        // SAFETY: the queue is live; no wait list (settled above).
        self.push(last, "clEnqueueMarkerWithWaitList", true, self.queues.now(), &mut |_, _| unsafe {
            enqueue_marker_with_wait_list(self.queue.get(), 0, std::ptr::null())
        })
        .map(drop)
    }

    /// Submits everything enqueued so far to the device, if anything is
    /// new. A failure leaves the queue unflushed, so a later flush retries.
    pub(super) fn flush(&self) -> Result<()> {
        let oldest = self.oldest.swap(0, Ordering::AcqRel);
        if oldest == 0 {
            return Ok(());
        }
        self.lock().commands = 0;
        self.queue.flush().map_err(|e| {
            // Commands enqueued since the swap keep their own, later time.
            let _ = self.oldest.compare_exchange(0, oldest, Ordering::AcqRel, Ordering::Relaxed);
            from_cl("clFlush")(e)
        })
    }

    /// [`Self::flush`] for the flush policy, after a command was enqueued:
    /// a failure is reported by the flush before the next wait.
    fn flush_quietly(&self) {
        let _ = self.flush();
    }

    /// An event that completes when everything enqueued so far has: the
    /// last command's, while it may still stand for a recording made now,
    /// else a new marker's. For a `timed` recording on a profiling queue a
    /// completed command's event does not serve: its end time is that
    /// completion's, not the recording's (timing would include the idle
    /// gap), so the driver is asked, also for an unflushed command. Any
    /// last command serves an untimed recording: it completes after
    /// everything before it, and a completed one says so at once; after
    /// commands without events there is no such command, and a marker is
    /// enqueued.
    pub(super) fn recording(&self, timed: bool) -> Result<Arc<Event>> {
        let mut last = self.lock();
        self.settle(&mut last)?;
        let reusable = match last.event.as_ref() {
            None => false,
            // Commands without events came after it: a new marker is needed.
            Some(_) if last.unevented => false,
            Some(_) if !timed || !self.profiling => true,
            Some((_, false)) => false,
            // Only the driver knows: an unflushed command may have run
            // already (NVIDIA's driver and PoCL run them on their own), and
            // then its end would date the recording to before the host's
            // last pause (`timed_recordings_start_when_recorded`).
            Some((event, true)) => matches!(is_complete(event, "record_event"), Ok(false)),
        };
        if !reusable {
            // SAFETY: the queue is live; no wait list (settled above).
            self.push(&mut last, "clEnqueueMarkerWithWaitList", true, self.queues.now(), &mut |_, _| unsafe {
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

    /// The last command's event, once pending waits are settled and
    /// commands without events followed by a marker; `None` when nothing
    /// was ever enqueued.
    fn last_settled(&self) -> Result<Option<Arc<Event>>> {
        let mut last = self.lock();
        self.evented(&mut last)?;
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

    /// Whether the last command enqueued with an event has completed:
    /// then, the queue being in order, so has every command before it,
    /// whatever their events say (commands enqueued after it without an
    /// event are not asked about: every recording is at or before it).
    /// Rusticl (Mesa 22.3) reports an earlier command of a queue as still
    /// running for a while after a later one completed, even after
    /// `clFinish` returned.
    pub(super) fn drained(&self) -> Result<bool> {
        let last = self.lock().event.as_ref().map(|(event, _)| Arc::clone(event));
        match last {
            Some(event) => is_complete(&event, "clGetEventInfo"),
            None => Ok(true),
        }
    }

    /// Blocks until every command enqueued before the call has completed,
    /// after flushing every queue of the device.
    ///
    /// Waits for the last command's event: in an in-order queue it
    /// completes after every earlier command, and the wait costs less than
    /// `clFinish` on NVIDIA's driver (a 4-byte read waited for: 15 µs with
    /// `clFinish`, against 8 µs for a blocking read).
    pub(super) fn finish(&self) -> Result<()> {
        let Some(last) = self.last_settled()? else { return Ok(()) };
        let flushed = self.flush();
        self.queues.flush_all();
        // The wait flushes the queue again if the flush above failed.
        let waited = last.wait();
        // A failed command shows in its event's status, which names the error.
        if is_complete(&last, "synchronize_stream")? {
            return Ok(());
        }
        flushed?;
        waited.map_err(from_cl("clWaitForEvents"))?;
        Err(super::error::error(
            "clWaitForEvents",
            crate::ErrorKind::Driver,
            "the last command had not completed when the wait for it returned",
        ))
    }
}

/// An in-order queue of `device` in `context`, with profiling enabled if `profiling`.
pub(super) fn create(context: &Context, device: cl_device_id, profiling: bool) -> Result<CommandQueue> {
    let properties = if profiling { CL_QUEUE_PROFILING_ENABLE } else { 0 };
    #[allow(deprecated)] // clCreateCommandQueue: the one constructor every OpenCL 1.2+ platform has
    // SAFETY: `device` is one of `context`'s devices (each device's own
    // context, or its platform's that lists it).
    let queue = unsafe { CommandQueue::create(context, device, properties) };
    queue.map_err(from_cl("clCreateCommandQueue"))
}

/// Calls `command` with the pending waits of `last` as its wait list.
fn with_waits<R>(last: &Last, command: &mut dyn FnMut(cl_uint, *const cl_event) -> R) -> R {
    let list: Vec<cl_event> = last.waits.iter().map(|e| e.get()).collect();
    let count = cl_uint::try_from(list.len()).unwrap_or(cl_uint::MAX);
    command(count, if list.is_empty() { std::ptr::null() } else { list.as_ptr() })
}

/// Takes ownership of the event an enqueue returned.
pub(super) fn owned(call: &'static str, event: std::result::Result<cl_event, i32>) -> Result<Event> {
    Ok(Event::new(event.map_err(from_code(call))?))
}

/// `true` when `event` has completed; its error status when it failed.
pub(super) fn is_complete(event: &Event, call: &'static str) -> Result<bool> {
    let status = event.command_execution_status().map_err(super::error::from_cl(call))?;
    if status.0 < 0 {
        return Err(super::error::cl_error(call, status.0));
    }
    Ok(status.0 == CL_COMPLETE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Backend;

    /// The first OpenCL device, or `None` after printing why (failing
    /// instead when `HETERO_REQUIRE` names OpenCL).
    fn device() -> Option<super::super::OpenClDevice> {
        let (mut devices, unavailable) = super::super::discover();
        if devices.is_empty() {
            let required = crate::testing::required_backends().is_ok_and(|b| b.contains(&Backend::OpenCl));
            assert!(!required, "OpenCL is required but has no usable device: {unavailable:?}");
            println!("skipped: no OpenCL device: {unavailable:?}");
            return None;
        }
        Some(devices.remove(0))
    }

    fn marker(stream: &ClStream) {
        // SAFETY: the queue is live; the wait list is valid for the call.
        let enqueued = stream.enqueue("clEnqueueMarkerWithWaitList", &mut |n, list| unsafe {
            enqueue_marker_with_wait_list(stream.queue.get(), n, list)
        });
        assert!(enqueued.is_ok(), "{enqueued:?}");
    }

    /// A marker enqueued without an event.
    fn unevented_marker(stream: &ClStream) {
        let enqueued = stream.enqueue_unevented("clEnqueueMarkerWithWaitList", &mut |n, list| {
            let runtime = cl3::load_library().as_ref().map_err(|_| -1)?;
            match runtime.clEnqueueMarkerWithWaitList(stream.queue.get(), n, list, std::ptr::null_mut()) {
                Some(0) => Ok(()),
                other => Err(other.unwrap_or(-1)),
            }
        });
        assert!(enqueued.is_ok(), "{enqueued:?}");
    }

    /// Guards against a defect: after commands enqueued without an event,
    /// the remembered event is no longer the queue's last, so a stream
    /// would be idle, and a recording complete, while those commands still
    /// waited to run.
    #[test]
    fn commands_without_events_keep_the_stream_busy_until_they_ran() {
        use opencl3::event::{create_user_event, set_user_event_status};
        let Some(device) = device() else { return };
        let queues = Queues::new(false);
        let stream = ClStream::new(&device.context, device.device.id(), false, &queues).expect("an OpenCL queue");
        marker(&stream);
        assert!(stream.finish().is_ok());
        let gate = Arc::new(Event::new(create_user_event(device.context.get()).expect("a user event")));
        stream.defer_wait(Arc::clone(&gate));
        unevented_marker(&stream);
        unevented_marker(&stream);
        assert!(matches!(stream.is_idle(), Ok(false)), "the gated commands have not run");
        let recorded = stream.recording(false).expect("a recording");
        assert!(matches!(is_complete(&recorded, "test"), Ok(false)), "a recording now follows the gated commands");
        assert!(set_user_event_status(gate.get(), CL_COMPLETE).is_ok());
        assert!(stream.finish().is_ok());
        assert!(matches!(stream.is_idle(), Ok(true)));
        assert!(matches!(is_complete(&recorded, "test"), Ok(true)));
    }

    fn unflushed(stream: &ClStream) -> bool {
        stream.oldest.load(Ordering::Acquire) != 0
    }

    /// Guards against a defect: a queue was flushed only by its own
    /// enqueues and waits, so the one snapshot copy given to wave's copy
    /// queue stayed unflushed, with no guarantee of starting, until the
    /// compute queue needed its buffer back.
    #[test]
    fn a_quiet_queue_is_flushed_by_other_queues_and_host_waits() {
        let Some(device) = device() else { return };
        let queues = Queues::new(false);
        let make = || ClStream::new(&device.context, device.device.id(), false, &queues).expect("an OpenCL queue");
        let (copy, compute) = (make(), make());

        marker(&copy);
        assert!(unflushed(&copy), "one command is below the queue's own flush policy");
        std::thread::sleep(2 * FLUSH_AFTER);
        marker(&compute);
        assert!(!unflushed(&copy), "an enqueue elsewhere flushes a command older than FLUSH_AFTER");
        assert!(unflushed(&compute), "a fresh command waits for more");

        marker(&copy);
        assert!(compute.finish().is_ok());
        assert!(!unflushed(&copy), "the host's wait on one queue flushes the others first");
        assert!(copy.finish().is_ok());
    }
}
