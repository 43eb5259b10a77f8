//! Waits across OpenCL contexts. A wait list takes events of one context
//! only, so a queue waits for another context's event through a bridge: a
//! user event of its own context that completes with the source event
//! ([`make`]), by a thread of the process's [`Waiters`] or by a
//! completion callback ([`BRIDGE_ENV`] chooses).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use opencl3::event::{CL_COMPLETE, Event};

use crate::error::Result;

/// What a [`make`] does when its source event fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Bridged {
    /// Fails with the source's status, so the waiting queue's command fails.
    Inherit,
    /// Completes: the wait only ends ([`crate::Device::stream_wait_peer_settled`]).
    Settled,
}

/// Chooses how a [`make`] learns that its source completed: `thread`, the
/// default (a thread waits for it, [`Waiters`]; `auto` is the same), or
/// `callback` (`clSetEventCallback`: no thread, the user event completed
/// from inside the driver's callback). NVIDIA's driver delivers callbacks
/// late: on one H200 with two contexts a staged 64 MiB copy took 20–27 ms
/// bridged by callbacks and 1.9 ms by threads. PoCL's come at once (a
/// 4 KiB copy: 7–13 µs by callback, 41–94 µs by thread, on two CPU cores),
/// but a wait bridged by callback there once never ended in CI
/// (`a_wait_on_a_peer_event_ends_with_its_event`, cause not found), and
/// PoCL's callbacks have reported defects (pocl/pocl#1430: none when a
/// user event fails; pocl/pocl#2215: a callback run inline while the event
/// may be freed), so threads are the default everywhere. See
/// `docs/results/multi-device-h200x2`.
pub const BRIDGE_ENV: &str = "HETERO_OPENCL_BRIDGE";

/// Whether bridges go by [`Waiters`], as [`BRIDGE_ENV`] says; an error for
/// a value hetero does not know.
pub(super) fn bridges_by_thread() -> Result<bool> {
    match std::env::var(BRIDGE_ENV).as_deref() {
        Err(_) | Ok("" | "auto" | "thread") => Ok(true),
        Ok("callback") => Ok(false),
        Ok(other) => Err(super::error::error(
            "discover",
            crate::ErrorKind::Config,
            format!("{BRIDGE_ENV}={other:?}: give `thread` (the default) or `callback`"),
        )),
    }
}

/// A user event of `context` that completes when `event` does, failing
/// with its status when it fails and `kind` is [`Bridged::Inherit`]: a
/// wait across contexts, which OpenCL's wait lists do not allow. `event`'s
/// queue must be flushed for it to complete. With `by_thread` one of the
/// [`Waiters`] completes the bridge, else (or where no thread can be had)
/// a completion callback does. `None` where `event` has completed
/// already: there is nothing to wait for (an idle stream's last command,
/// typically), and a bridge would cost a hop through the host.
pub(super) fn make(
    event: &Arc<Event>,
    by_thread: bool,
    context: &opencl3::context::Context,
    kind: Bridged,
) -> Result<Option<Arc<Event>>> {
    if matches!(event.command_execution_status(), Ok(s) if s.0 == CL_COMPLETE) {
        return Ok(None);
    }
    let raw = opencl3::event::create_user_event(context.get()).map_err(super::error::from_code("clCreateUserEvent"))?;
    let user = Event::new(raw);
    // SAFETY: raw is a live event; the waiting thread or the callback owns
    // this second reference and releases it.
    unsafe { opencl3::event::retain_event(raw) }.map_err(super::error::from_code("clRetainEvent"))?;
    let pending = Pending { source: Arc::clone(event), user: UserRef(raw), kind };
    let pending = if by_thread {
        match WAITERS.hand(pending) {
            Ok(()) => return Ok(Some(Arc::new(user))),
            // No thread could be started: a callback completes this one.
            Err(pending) => pending,
        }
    } else {
        pending
    };
    let callback = match kind {
        Bridged::Inherit => release_bridge,
        Bridged::Settled => release_settled,
    };
    match pending.source.set_callback(CL_COMPLETE, callback, raw.cast()) {
        Ok(()) => Ok(Some(Arc::new(user))),
        Err(e) => {
            // SAFETY: the reference the callback would have released.
            let _ = unsafe { opencl3::event::release_event(raw) };
            Err(super::error::from_cl("clSetEventCallback")(e))
        }
    }
}

/// The retained reference to a bridge's user event that completing it
/// releases.
struct UserRef(opencl3::types::cl_event);

// SAFETY: OpenCL objects may be used from any thread (OpenCL 1.1 on); the
// reference is used once, by whoever completes the bridge.
unsafe impl Send for UserRef {}

/// A bridge waiting for its source.
struct Pending {
    source: Arc<Event>,
    user: UserRef,
    kind: Bridged,
}

impl Pending {
    /// Waits until the source has completed or failed, then completes the
    /// user event as `kind` says and releases it.
    fn complete(self) {
        let status = loop {
            let waited = self.source.wait();
            match self.source.command_execution_status() {
                Ok(s) if s.0 < 0 => break s.0,
                Ok(s) if s.0 == CL_COMPLETE => break CL_COMPLETE,
                // Not yet complete although waited for (a driver whose
                // status lags): wait again, without spinning on an error.
                Ok(_) if waited.is_ok() => continue,
                Ok(_) => std::thread::sleep(std::time::Duration::from_micros(100)),
                Err(e) => break e.0.min(-1),
            }
        };
        let status = if self.kind == Bridged::Inherit { status } else { CL_COMPLETE };
        release_with(self.user.0.cast(), status);
    }
}

/// The threads that complete bridges, each waiting for one source at a
/// time, so that no bridge waits behind another's source: a source held
/// behind a closed gate holds only its own bridge, whatever the order the
/// bridges were made in (`a_wait_on_a_peer_event_ends_with_its_event`).
/// A bridge goes to an idle thread, or to a new one where none is idle
/// and fewer than [`MAX_WAITERS`] live; past that, to a callback (later on
/// NVIDIA, as correct). A thread idle for [`IDLE`] ends. One set for the
/// process.
struct Waiters {
    /// The idle threads: an id and the sender of each.
    idle: Mutex<Vec<(u64, Sender<Pending>)>>,
    /// The next thread's id.
    next: AtomicU64,
    /// Threads started and not ended.
    live: AtomicUsize,
}

static WAITERS: LazyLock<Waiters> =
    LazyLock::new(|| Waiters { idle: Mutex::new(Vec::new()), next: AtomicU64::new(0), live: AtomicUsize::new(0) });

/// How long a waiting thread stays idle before it ends.
const IDLE: Duration = Duration::from_secs(1);
/// Most waiting threads at once: bridges pending beyond them (thousands of
/// copies enqueued ahead, say) go by callback rather than by a thread each.
const MAX_WAITERS: usize = 64;

impl Waiters {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Sender<Pending>)>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives `pending` to an idle thread, or to a new one; gives it back
    /// where [`MAX_WAITERS`] are busy or no thread could be started.
    fn hand(&'static self, mut pending: Pending) -> std::result::Result<(), Pending> {
        loop {
            let Some((_, sender)) = self.idle().pop() else { break };
            match sender.send(pending) {
                Ok(()) => return Ok(()),
                // A thread that has ended (each holds its own sender, so
                // none should): the next one.
                Err(back) => pending = back.0,
            }
        }
        if self.live.fetch_add(1, Ordering::Relaxed) >= MAX_WAITERS {
            self.live.fetch_sub(1, Ordering::Relaxed);
            return Err(pending);
        }
        let (sender, receiver) = std::sync::mpsc::channel::<Pending>();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let own = sender.clone();
        let started = std::thread::Builder::new()
            .name("hetero-cl-bridge".into())
            .stack_size(64 * 1024)
            .spawn(move || self.serve(id, &own, &receiver));
        if started.is_err() {
            self.live.fetch_sub(1, Ordering::Relaxed);
            return Err(pending);
        }
        sender.send(pending).map_err(|back| back.0)
    }

    /// A thread's loop: completes each bridge it is given, then offers
    /// itself as idle; ends once idle for [`IDLE`] and still listed (a
    /// thread taken off the list meanwhile has a bridge on its way).
    fn serve(&self, id: u64, own: &Sender<Pending>, receiver: &Receiver<Pending>) {
        loop {
            match receiver.recv_timeout(IDLE) {
                Ok(pending) => {
                    pending.complete();
                    self.idle().push((id, own.clone()));
                }
                Err(RecvTimeoutError::Timeout) => {
                    let mut idle = self.idle();
                    if let Some(at) = idle.iter().position(|(k, _)| *k == id) {
                        idle.swap_remove(at);
                        self.live.fetch_sub(1, Ordering::Relaxed);
                        return;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    self.live.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

/// The completion callback of an inheriting [`make`]: completes the user
/// event in `data` with the source event's status, and releases it.
extern "C" fn release_bridge(
    _event: opencl3::types::cl_event,
    status: opencl3::types::cl_int,
    data: *mut std::ffi::c_void,
) {
    let status = if status < 0 { status } else { CL_COMPLETE };
    release_with(data, status);
}

/// The completion callback of a settled [`make`]: completes the user
/// event in `data`, whatever the source's status, and releases it.
extern "C" fn release_settled(
    _event: opencl3::types::cl_event,
    _status: opencl3::types::cl_int,
    data: *mut std::ffi::c_void,
) {
    release_with(data, CL_COMPLETE);
}

/// Sets the user event in `data` to `status` and releases the reference
/// that [`make`] retained for whoever completes it, once.
fn release_with(data: *mut std::ffi::c_void, status: opencl3::types::cl_int) {
    let user: opencl3::types::cl_event = data.cast();
    let _ = opencl3::event::set_user_event_status(user, status);
    // SAFETY: the reference `make` retained for this completion, made once.
    let _ = unsafe { opencl3::event::release_event(user) };
}
