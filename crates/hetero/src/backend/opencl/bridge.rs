//! Waits across OpenCL contexts. A wait list takes events of one context
//! only, so a queue waits for another context's event through a bridge: a
//! user event of its own context that completes with the source event
//! ([`make`]), by the process's polling thread ([`Poller`]), by a thread
//! blocked on the source ([`Waiters`]) or by a completion callback
//! ([`BRIDGE_ENV`] chooses, [`Via`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

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

/// How a [`make`] learns that its source completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    /// The [`Poller`]: one thread reads every pending source's status.
    Poll,
    /// The [`Waiters`]: a thread blocked in `clWaitForEvents` per pending
    /// bridge, at most [`MAX_WAITERS`], callbacks past them.
    Thread,
    /// A completion callback (`clSetEventCallback`).
    Callback,
}

/// Chooses how a [`make`] learns that its source completed: `poll` (one
/// thread of the process reads every pending source's status, [`Poller`]),
/// `thread` (a thread blocked on each, [`Waiters`]) or `callback`
/// (`clSetEventCallback`: no thread, the user event completed from inside
/// the driver's callback); `auto`, the default, polls except on Mesa's
/// rusticl, where an event's status did not reach complete while a later
/// command of its queue waited for a user event, until something waited
/// on it (`a_wait_on_a_peer_event_ends_with_its_event` hung there polled),
/// so it takes threads. On two H200s (`experiments/gpu/opencl-wait-cost.c`)
/// NVIDIA's driver delivers a callback about 10 ms after its event
/// completed, and a thread in `clWaitForEvents` spins a core on
/// `sched_yield` until then (64 such threads kept 31 cores busy), while
/// one thread reading the status in a loop learnt of it within 11 µs.
/// PoCL's callbacks come at once, but a wait bridged by callback there
/// once never ended in CI (`a_wait_on_a_peer_event_ends_with_its_event`,
/// cause not found), and PoCL's callbacks have reported defects
/// (pocl/pocl#1430: none when a user event fails; pocl/pocl#2215: a
/// callback run inline while the event may be freed). See
/// `docs/results/multi-device-h200x2`.
pub const BRIDGE_ENV: &str = "HETERO_OPENCL_BRIDGE";

/// How bridges of a device go, as [`BRIDGE_ENV`] says (`rusticl`: the
/// device is Mesa's); an error for a value hetero does not know.
pub(super) fn via(rusticl: bool) -> Result<Via> {
    match std::env::var(BRIDGE_ENV).as_deref() {
        Err(_) | Ok("" | "auto") if rusticl => Ok(Via::Thread),
        Err(_) | Ok("" | "auto" | "poll") => Ok(Via::Poll),
        Ok("thread") => Ok(Via::Thread),
        Ok("callback") => Ok(Via::Callback),
        Ok(other) => Err(super::error::error(
            "discover",
            crate::ErrorKind::Config,
            format!("{BRIDGE_ENV}={other:?}: give `auto` (the default), `poll`, `thread` or `callback`"),
        )),
    }
}

/// A user event of `context` that completes when `event` does, failing
/// with its status when it fails and `kind` is [`Bridged::Inherit`]: a
/// wait across contexts, which OpenCL's wait lists do not allow. `event`'s
/// queue must be flushed for it to complete (a poll does not flush it).
/// `via` names what completes the bridge; a completion callback does
/// where no thread can be had. `None` where `event` has completed
/// already: there is nothing to wait for (an idle stream's last command,
/// typically), and a bridge would cost a hop through the host.
pub(super) fn make(
    event: &Arc<Event>,
    via: Via,
    context: &opencl3::context::Context,
    kind: Bridged,
) -> Result<Option<Arc<Event>>> {
    if matches!(event.command_execution_status(), Ok(s) if s.0 == CL_COMPLETE) {
        return Ok(None);
    }
    let raw = opencl3::event::create_user_event(context.get()).map_err(super::error::from_code("clCreateUserEvent"))?;
    let user = Event::new(raw);
    // SAFETY: raw is a live event; the thread or the callback that
    // completes it owns this second reference and releases it.
    unsafe { opencl3::event::retain_event(raw) }.map_err(super::error::from_code("clRetainEvent"))?;
    let pending = Pending { source: Arc::clone(event), user: UserRef(raw), kind };
    let handed = match via {
        Via::Poll => POLLER.hand(pending),
        Via::Thread => WAITERS.hand(pending),
        Via::Callback => Err(pending),
    };
    // Where no thread could be had, a callback completes this one.
    let pending = match handed {
        Ok(()) => return Ok(Some(Arc::new(user))),
        Err(pending) => pending,
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
    /// The status the bridge completes with once its source has completed
    /// or failed; `None` while it runs (or waits).
    fn settled(&self) -> Option<opencl3::types::cl_int> {
        let status = match self.source.command_execution_status() {
            Ok(s) if s.0 < 0 => s.0,
            Ok(s) if s.0 == CL_COMPLETE => CL_COMPLETE,
            Ok(_) => return None,
            Err(e) => e.0.min(-1),
        };
        Some(if self.kind == Bridged::Inherit { status } else { CL_COMPLETE })
    }

    /// Waits until the source has completed or failed, then completes the
    /// user event as `kind` says and releases it.
    fn complete(self) {
        loop {
            let waited = self.source.wait();
            if let Some(status) = self.settled() {
                return self.release(status);
            }
            // Not yet complete although waited for (a driver whose status
            // lags): wait again, without spinning on an error.
            if waited.is_err() {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
    }

    /// Completes the user event with `status` and releases it.
    fn release(&self, status: opencl3::types::cl_int) {
        release_with(self.user.0.cast(), status);
    }
}

/// The thread that completes bridges: it reads the status of every
/// pending source in turn and completes the bridges of those that have
/// completed or failed, so no bridge waits behind another's source (a
/// source held behind a closed gate holds only its own bridge:
/// `a_wait_on_a_peer_event_ends_with_its_event`) and the process spends at
/// most one thread on them, however many are pending (with a thread
/// blocked in `clWaitForEvents` per bridge, NVIDIA's driver spun a core
/// for each; see [`BRIDGE_ENV`]). Between rounds it yields while anything
/// pending is young or the last completion was recent, and otherwise sleeps
/// for a sixteenth of that age, at most [`MAX_NAP`], woken early by a new
/// bridge; so a bridge is completed late by at most about a sixteenth of
/// its wait. With nothing pending it waits for a bridge, and ends after
/// [`IDLE`]. One for the process.
struct Poller {
    /// The running thread's sender, `None` once it ended (or before it
    /// started). Sending and ending both hold the lock, so no bridge is
    /// sent to a thread that has ended.
    sender: Mutex<Option<Sender<Pending>>>,
}

static POLLER: LazyLock<Poller> = LazyLock::new(|| Poller { sender: Mutex::new(None) });

/// How long a bridge thread (the poller or a waiter) stays with nothing
/// to do before it ends.
const IDLE: Duration = Duration::from_secs(1);
/// Below this age of the youngest bridge and of the last completion the
/// thread yields between rounds instead of sleeping: work that exchanges
/// halos every few milliseconds keeps it polling, so each hop through it
/// costs microseconds.
const SPIN: Duration = Duration::from_millis(5);
/// The longest sleep between rounds.
const MAX_NAP: Duration = Duration::from_millis(1);

impl Poller {
    fn sender(&self) -> std::sync::MutexGuard<'_, Option<Sender<Pending>>> {
        self.sender.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives `pending` to the thread, starting it where none runs; gives it
    /// back where it cannot be started.
    fn hand(&'static self, pending: Pending) -> std::result::Result<(), Pending> {
        let mut sender = self.sender();
        let pending = match sender.as_ref() {
            Some(running) => match running.send(pending) {
                Ok(()) => return Ok(()),
                // A thread that ended without saying so (it says so before
                // it ends): start another.
                Err(back) => back.0,
            },
            None => pending,
        };
        let (tx, rx) = std::sync::mpsc::channel::<Pending>();
        let started = std::thread::Builder::new()
            .name("hetero-cl-bridge".into())
            .stack_size(64 * 1024)
            .spawn(move || self.serve(&rx));
        if started.is_err() {
            return Err(pending);
        }
        tx.send(pending).map_err(|back| back.0)?;
        *sender = Some(tx);
        Ok(())
    }

    /// The thread's loop (the type's docs).
    fn serve(&self, receiver: &Receiver<Pending>) {
        // Each pending bridge with when it arrived.
        let mut pending: Vec<(Pending, Instant)> = Vec::new();
        let mut progress = Instant::now();
        loop {
            if pending.is_empty() {
                match receiver.recv_timeout(IDLE) {
                    Ok(first) => pending.push((first, Instant::now())),
                    Err(RecvTimeoutError::Timeout) => {
                        let mut sender = self.sender();
                        // Under the lock no bridge can be sent: end unless
                        // one came meanwhile.
                        match receiver.try_recv() {
                            Ok(first) => pending.push((first, Instant::now())),
                            Err(_) => {
                                *sender = None;
                                return;
                            }
                        }
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            while let Ok(more) = receiver.try_recv() {
                pending.push((more, Instant::now()));
            }
            let before = pending.len();
            pending.retain(|(bridge, _)| {
                let settled = bridge.settled();
                if let Some(status) = settled {
                    bridge.release(status);
                }
                settled.is_none()
            });
            let now = Instant::now();
            if pending.len() < before {
                progress = now;
            }
            let Some(youngest) = pending.iter().map(|(_, at)| *at).max() else { continue };
            let age = now.saturating_duration_since(youngest.max(progress));
            if age < SPIN {
                std::thread::yield_now();
                continue;
            }
            match receiver.recv_timeout((age / 16).min(MAX_NAP)) {
                Ok(more) => pending.push((more, Instant::now())),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {}
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::Backend;
    use opencl3::event::{create_user_event, set_user_event_status};

    /// The threads of this process named as the bridge thread (a name
    /// shows its first 15 bytes), from Linux's `/proc`; 0 elsewhere.
    fn bridge_threads() -> usize {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .filter(|name| "hetero-cl-bridge".starts_with(name.trim_end()))
            .count()
    }

    fn status(event: &Event) -> i32 {
        event.command_execution_status().map_or_else(|e| e.0, |s| s.0)
    }

    /// Bridges by thread had a thread each blocked in `clWaitForEvents`,
    /// which NVIDIA's driver spins a core for: with the split wave's host
    /// enqueueing far ahead, dozens of cores spun. One thread now polls
    /// them all: 200 bridges pending behind sources that complete in
    /// reverse order (some failing) each complete with their own source,
    /// none earlier, with at most one bridge thread in the process.
    #[test]
    fn one_thread_completes_each_pending_bridge_with_its_own_source() {
        let (mut devices, unavailable) = super::super::discover();
        if devices.is_empty() {
            let required = crate::testing::required_backends().is_ok_and(|b| b.contains(&Backend::OpenCl));
            assert!(!required, "OpenCL is required but has no usable device: {unavailable:?}");
            println!("skipped: no OpenCL device: {unavailable:?}");
            return;
        }
        let context = Arc::clone(&devices.remove(0).context);
        let sources: Vec<Arc<Event>> =
            (0..200).map(|_| Arc::new(Event::new(create_user_event(context.get()).unwrap()))).collect();
        let bridges: Vec<Arc<Event>> = sources
            .iter()
            .map(|source| make(source, Via::Poll, &context, Bridged::Inherit).unwrap().unwrap())
            .collect();
        assert!(bridge_threads() <= 1, "{} bridge threads", bridge_threads());
        for (i, source) in sources.iter().enumerate().rev() {
            let want = if i % 7 == 0 { -5 } else { CL_COMPLETE };
            set_user_event_status(source.get(), want).unwrap();
            let started = Instant::now();
            while status(&bridges[i]) != want {
                assert!(started.elapsed() < Duration::from_secs(10), "bridge {i}: status {}", status(&bridges[i]));
                std::thread::sleep(Duration::from_micros(50));
            }
            if i > 0 {
                assert!(status(&bridges[i - 1]) > CL_COMPLETE, "bridge {} completed before its source", i - 1);
            }
        }
        assert!(bridge_threads() <= 1, "{} bridge threads", bridge_threads());
    }
}
