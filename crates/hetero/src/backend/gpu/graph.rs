//! Graphs of the shared GPU device: an instantiated graph, launched as one
//! operation, and what its launches may still be running (`capture.rs`
//! makes them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::runtime::Runtime;
use super::stream::GpuStream;
use crate::device::GraphNode;
use crate::error::Result;

/// An instantiated graph, and what its launches may still be running.
pub(super) struct GpuGraph<R: Runtime> {
    pub(super) exec: Mutex<Launched<R>>,
    pub(super) runtime: Arc<R>,
    /// Launches held on the host not yet launched or dropped ([`HeldLaunch`]).
    pub(super) held: AtomicUsize,
}

/// The executable, and where the runtime does not say that destroying or
/// updating one leaves queued launches alone
/// ([`Runtime::GRAPHS_OUTLIVE_LAUNCHES`]): an event recorded after its
/// last launch, and executables replaced while a launch of theirs may be
/// queued, each with its event, destroyed once that event has completed
/// (at the next launch, update or destroy). Nothing here ever waits: a
/// launch may wait for a gate the caller opens later. An event per
/// executable, not the stream's idleness, so that replaced executables do
/// not pile up behind a stream that is never idle.
pub(super) struct Launched<R: Runtime> {
    pub(super) exec: R::GraphExec,
    pub(super) done: Option<R::Event>,
    pub(super) old: Vec<(R::GraphExec, R::Event)>,
    /// Where the runtime names captured nodes: the graph `exec` was
    /// instantiated from, which holds them.
    pub(super) source: Option<Source<R>>,
}

/// The captured graph an executable was instantiated from, kept while the
/// executable lives so that its launches can be changed node by node
/// ([`Runtime::exec_set_launch`]).
///
/// Invariant: `nodes` are the operations `exec` runs now, and `launches[i]`
/// is the runtime node of `nodes[i]` when that is a launch (else `None`);
/// every spare was instantiated from `graph`.
pub(super) struct Source<R: Runtime> {
    pub(super) graph: R::Graph,
    pub(super) nodes: Vec<GraphNode>,
    pub(super) launches: Vec<Option<R::GraphNode>>,
    /// Where updating an executable in flight is not documented
    /// ([`Runtime::GRAPHS_OUTLIVE_LAUNCHES`]): executables of `graph`
    /// replaced while a launch of theirs may be queued, set and made
    /// current again once their event has completed.
    pub(super) spares: Vec<Spare<R>>,
}

/// An executable of a [`Source`] graph that is not current: `nodes` are
/// the operations it runs, `event` follows its last launch.
pub(super) struct Spare<R: Runtime> {
    pub(super) exec: R::GraphExec,
    pub(super) event: R::Event,
    pub(super) nodes: Vec<GraphNode>,
}

/// Completed spares kept for reuse; more are destroyed.
const SPARES_KEPT: usize = 2;

impl<R: Runtime> Source<R> {
    /// Takes a spare whose launches are done, if any.
    pub(super) fn idle_spare(&mut self, runtime: &R) -> Option<Spare<R>> {
        let at = self.spares.iter().position(|spare| complete(runtime, spare.event))?;
        Some(self.spares.swap_remove(at))
    }

    /// Destroys the graph and its spares, or moves the spares whose
    /// launches may be queued to `old`.
    ///
    /// # Safety
    /// The source is destroyed once; the device is current.
    pub(super) unsafe fn retire(self, runtime: &R, old: &mut Vec<(R::GraphExec, R::Event)>) {
        old.extend(self.spares.into_iter().map(|spare| (spare.exec, spare.event)));
        // SAFETY: the caller's contract; executables of a graph do not
        // need it once instantiated.
        unsafe { runtime.graph_destroy(self.graph) };
    }
}

// SAFETY: runtime graph handles may be used from any thread (the runtimes
// document graph execs as launchable from any thread; updates and
// destruction here are serialised by the mutex).
unsafe impl<R: Runtime> Send for GpuGraph<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuGraph<R> {}

/// Whether `event`'s last recording has completed, or can never (an event
/// whose query fails marks nothing that will run).
fn complete<R: Runtime>(runtime: &R, event: R::Event) -> bool {
    // SAFETY: a live event of the device, which is current (every caller entered it).
    unsafe { runtime.event_query(event) }.unwrap_or(true)
}

impl<R: Runtime> Launched<R> {
    /// Destroys the replaced executables whose launches are done, and the
    /// idle spares beyond [`SPARES_KEPT`].
    pub(super) fn prune(&mut self, runtime: &R) {
        let destroy = |exec, event| {
            // SAFETY: replaced, destroyed once, its launches done.
            unsafe {
                runtime.graph_exec_destroy(exec);
                let _ = runtime.event_destroy(event);
            }
        };
        self.old.retain(|&(exec, event)| {
            let done = complete(runtime, event);
            if done {
                destroy(exec, event);
            }
            !done
        });
        if let Some(source) = &mut self.source {
            let mut idle = 0;
            source.spares.retain(|spare| {
                let keep = !complete(runtime, spare.event) || {
                    idle += 1;
                    idle <= SPARES_KEPT
                };
                if !keep {
                    destroy(spare.exec, spare.event);
                }
                keep
            });
        }
    }

    /// Whether a launch of the current executable may still be queued.
    pub(super) fn in_flight(&self, runtime: &R) -> bool {
        self.done.is_some_and(|event| !complete(runtime, event))
    }
}

impl<R: Runtime> GpuGraph<R> {
    /// Enqueues the graph on `stream` (the device is current).
    pub(super) fn launch(&self, stream: &Arc<GpuStream<R>>) -> Result<()> {
        let mut launched = self.exec.lock().unwrap_or_else(PoisonError::into_inner);
        let runtime = &*self.runtime;
        if !R::GRAPHS_OUTLIVE_LAUNCHES {
            launched.prune(runtime);
            if launched.done.is_none() {
                // SAFETY: the device is current.
                launched.done = Some(unsafe { runtime.event_create(false) }?);
            }
        }
        // SAFETY: a live executable and stream of the current device.
        unsafe { runtime.graph_launch(launched.exec, stream.raw) }?;
        if let Some(event) = launched.done {
            // SAFETY: a live event and stream of the current device. Should
            // the record fail, the launch stays queued with the event
            // marking an earlier one: wait for it here, the only safe way.
            if let Err(e) = unsafe { runtime.event_record(event, stream.raw) } {
                // SAFETY: as above; returns once the launch is done or can never run.
                let _ = unsafe { runtime.stream_synchronize(stream.raw) };
                return Err(e);
            }
        }
        Ok(())
    }

    /// A launch held on the host of `exec`, an executable of this graph's
    /// own that nothing else launches, changes or destroys, with the event
    /// it came with (an idle spare's) if any.
    pub(super) fn held_launch(self: &Arc<Self>, exec: R::GraphExec, event: Option<R::Event>) -> HeldLaunch<R> {
        self.held.fetch_add(1, Ordering::SeqCst);
        HeldLaunch { graph: Arc::clone(self), exec: Some(exec), event }
    }

    /// Whether destroying the graph now could free an executable a queued
    /// launch still runs, or one a held launch will (the device is current).
    pub(super) fn busy(&self) -> bool {
        if self.held.load(Ordering::SeqCst) > 0 {
            return true;
        }
        if R::GRAPHS_OUTLIVE_LAUNCHES {
            return false;
        }
        let mut launched = self.exec.lock().unwrap_or_else(PoisonError::into_inner);
        launched.prune(&self.runtime);
        let spares = launched.source.as_ref().map_or(&[][..], |source| &source.spares[..]);
        // After the prune, `old` holds only executables still in flight.
        !launched.old.is_empty()
            || launched.in_flight(&self.runtime)
            || spares.iter().any(|spare| !complete(&*self.runtime, spare.event))
    }
}

impl<R: Runtime> Drop for GpuGraph<R> {
    fn drop(&mut self) {
        if self.runtime.enter().is_ok() {
            let launched = self.exec.get_mut().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: each destroyed once; dropped only when no launch is
            // queued (`busy`, or the device's drop after its streams).
            unsafe {
                if let Some(source) = launched.source.take() {
                    source.retire(&self.runtime, &mut launched.old);
                }
                for (exec, event) in launched.old.drain(..) {
                    self.runtime.graph_exec_destroy(exec);
                    let _ = self.runtime.event_destroy(event);
                }
                self.runtime.graph_exec_destroy(launched.exec);
                if let Some(event) = launched.done.take() {
                    let _ = self.runtime.event_destroy(event);
                }
            }
        }
    }
}

/// A graph launch held on the host behind a closed gate (`stream.rs`), on an
/// executable of its own made when it was enqueued (so a later update of
/// the graph does not reach it): launched when released, then retired as
/// a replaced executable is, or destroyed unlaunched where it is dropped
/// first. Its graph counts as busy until then.
pub(super) struct HeldLaunch<R: Runtime> {
    graph: Arc<GpuGraph<R>>,
    exec: Option<R::GraphExec>,
    /// An event to mark the launch with, where it came with its executable.
    event: Option<R::Event>,
}

impl<R: Runtime> HeldLaunch<R> {
    /// Launches the executable on `stream` (the device is current).
    pub(super) fn launch(mut self, stream: R::Stream) -> Result<()> {
        let runtime = &*self.graph.runtime;
        let Some(exec) = self.exec else { return Ok(()) };
        // SAFETY: a live executable of this launch's own and a live stream
        // of the current device. Should it fail, the drop destroys it.
        unsafe { runtime.graph_launch(exec, stream) }?;
        self.exec = None;
        if R::GRAPHS_OUTLIVE_LAUNCHES {
            // SAFETY: launched once, destroyed once; the queued launch
            // outlives it. The drop destroys any event.
            unsafe { runtime.graph_exec_destroy(exec) };
            return Ok(());
        }
        // SAFETY: the device is current.
        let event = self.event.take().map_or_else(|| unsafe { runtime.event_create(false) }, Ok);
        let marked = event.and_then(|event| {
            // SAFETY: a live event and stream of the current device.
            match unsafe { runtime.event_record(event, stream) } {
                Ok(()) => Ok(event),
                Err(e) => {
                    // SAFETY: made above, never recorded, destroyed once.
                    let _ = unsafe { runtime.event_destroy(event) };
                    Err(e)
                }
            }
        });
        match marked {
            Ok(event) => {
                self.graph.exec.lock().unwrap_or_else(PoisonError::into_inner).old.push((exec, event));
                Ok(())
            }
            Err(e) => {
                // Nothing marks the launch: wait for it here, the only safe
                // way, then destroy its executable.
                // SAFETY: a live stream; then launched and done, destroyed once.
                unsafe {
                    let _ = runtime.stream_synchronize(stream);
                    runtime.graph_exec_destroy(exec);
                }
                Err(e)
            }
        }
    }
}

impl<R: Runtime> Drop for HeldLaunch<R> {
    fn drop(&mut self) {
        let runtime = &*self.graph.runtime;
        if (self.exec.is_some() || self.event.is_some()) && runtime.enter().is_ok() {
            // SAFETY: this launch's own, never launched (the executable) or
            // recorded (the event) by it, and no launch of a spare's queued;
            // each destroyed once.
            unsafe {
                if let Some(exec) = self.exec.take() {
                    runtime.graph_exec_destroy(exec);
                }
                if let Some(event) = self.event.take() {
                    let _ = runtime.event_destroy(event);
                }
            }
        }
        self.graph.held.fetch_sub(1, Ordering::SeqCst);
    }
}
