//! Graphs of the shared GPU device: a graph's nodes are enqueued on
//! private streams under stream capture, so every node goes through the
//! same checked enqueue as outside a graph, and the captured graph is
//! instantiated once and launched as one operation.

use std::sync::{Arc, Mutex, PoisonError};

use super::device::GpuDevice;
use super::runtime::Runtime;
use super::stream::GpuStream;
use crate::device::{Device, GraphNode, GraphOp, StreamFlags, StreamId, pinned_address};
use crate::error::Result;

/// An instantiated graph, and what its launches may still be running.
pub(super) struct GpuGraph<R: Runtime> {
    exec: Mutex<Launched<R>>,
    runtime: Arc<R>,
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
struct Launched<R: Runtime> {
    exec: R::GraphExec,
    done: Option<R::Event>,
    old: Vec<(R::GraphExec, R::Event)>,
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
    /// Destroys the replaced executables whose launches are done.
    fn prune(&mut self, runtime: &R) {
        self.old.retain(|&(exec, event)| {
            let done = complete(runtime, event);
            if done {
                // SAFETY: replaced, destroyed once, its launches done.
                unsafe {
                    runtime.graph_exec_destroy(exec);
                    let _ = runtime.event_destroy(event);
                }
            }
            !done
        });
    }

    /// Whether a launch of the current executable may still be queued.
    fn in_flight(&self, runtime: &R) -> bool {
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

    /// Whether destroying the graph now could free an executable a queued
    /// launch still runs (the device is current).
    pub(super) fn busy(&self) -> bool {
        if R::GRAPHS_OUTLIVE_LAUNCHES {
            return false;
        }
        let mut launched = self.exec.lock().unwrap_or_else(PoisonError::into_inner);
        launched.prune(&self.runtime);
        !launched.old.is_empty() || launched.in_flight(&self.runtime)
    }
}

impl<R: Runtime> Drop for GpuGraph<R> {
    fn drop(&mut self) {
        if self.runtime.enter().is_ok() {
            let launched = self.exec.get_mut().unwrap_or_else(PoisonError::into_inner);
            // SAFETY: each destroyed once; dropped only when no launch is
            // queued (`busy`, or the device's drop after its streams).
            unsafe {
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

/// Private streams of one capture, destroyed when it ends.
struct Streams<'a, R: Runtime> {
    device: &'a GpuDevice<R>,
    ids: Vec<StreamId>,
}

impl<R: Runtime> Drop for Streams<'_, R> {
    fn drop(&mut self) {
        for &id in &self.ids {
            // SAFETY: streams this capture created and nobody else knows;
            // captured work never ran on them.
            let _ = unsafe { self.device.destroy_stream(id) };
        }
    }
}

/// Private events of one capture, destroyed when it ends.
struct Events<'a, R: Runtime> {
    runtime: &'a R,
    raw: Vec<R::Event>,
}

impl<R: Runtime> Drop for Events<'_, R> {
    fn drop(&mut self) {
        for &event in &self.raw {
            // SAFETY: events this capture created; capture records nothing
            // that runs.
            let _ = unsafe { self.runtime.event_destroy(event) };
        }
    }
}

impl<R: Runtime> GpuDevice<R> {
    /// Captures `nodes` into a runtime graph (the device is current): one
    /// private stream per graph stream, forked from the first and joined
    /// back into it, and one private event per recorded graph event.
    ///
    /// # Safety
    /// As [`Device::create_graph`].
    unsafe fn capture(&self, nodes: &[GraphNode]) -> Result<R::Graph> {
        let (count, events_needed) = GraphNode::counts(nodes);
        let count = count.max(1);
        let flags = StreamFlags { non_blocking: true, ..StreamFlags::default() };
        let mut streams = Streams { device: self, ids: Vec::with_capacity(count) };
        let mut raw = Vec::with_capacity(count);
        for _ in 0..count {
            let id = self.create_stream(flags)?;
            streams.ids.push(id);
            raw.push(self.stream("create_graph", id)?);
        }
        let runtime = &*self.runtime;
        // Two more per extra stream: its fork from, and join into, stream 0.
        let mut events = Events { runtime, raw: Vec::new() };
        for _ in 0..events_needed + 2 * (count - 1) {
            // SAFETY: the device is current.
            events.raw.push(unsafe { runtime.event_create(false) }?);
        }
        let (fork, join) = events.raw[events_needed..].split_at(count - 1);
        // SAFETY: live private streams and events of the current device.
        unsafe { runtime.capture_begin(raw[0].raw) }?;
        // SAFETY: as above; the caller's contract covers the nodes.
        let captured = unsafe { self.enqueue_nodes(nodes, &streams.ids, &raw, &events.raw, fork, join) };
        // The capture ends whatever happened, so the streams are plain again.
        // SAFETY: the stream capturing since capture_begin.
        let graph = unsafe { runtime.capture_end(raw[0].raw) };
        match (captured, graph) {
            (Ok(()), graph) => graph,
            (Err(e), Ok(graph)) => {
                // SAFETY: the graph just captured, never instantiated.
                unsafe { runtime.graph_destroy(graph) };
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }

    /// Enqueues `nodes` on capturing streams: the other streams join the
    /// capture by waiting for `fork` events of stream 0, and stream 0 waits
    /// for each of them at the end (`join`), as capture requires.
    ///
    /// # Safety
    /// As [`Device::create_graph`]; stream 0 is capturing.
    unsafe fn enqueue_nodes(
        &self,
        nodes: &[GraphNode],
        ids: &[StreamId],
        raw: &[Arc<GpuStream<R>>],
        events: &[R::Event],
        fork: &[R::Event],
        join: &[R::Event],
    ) -> Result<()> {
        let runtime = &*self.runtime;
        for (k, &event) in fork.iter().enumerate() {
            // SAFETY: live private events and streams of the current device.
            unsafe {
                runtime.event_record(event, raw[0].raw)?;
                runtime.stream_wait_event(raw[k + 1].raw, event)?;
            }
        }
        for node in nodes {
            let stream = ids[node.stream];
            // SAFETY: the caller's contract covers every node's handles,
            // ranges and addresses; the streams and events are private.
            unsafe {
                match &node.op {
                    GraphOp::CopyH2D { src, dst } => self.copy_h2d(pinned_address(self, *src)?, *dst, stream)?,
                    GraphOp::CopyD2H { src, dst } => self.copy_d2h(*src, pinned_address(self, *dst)?, stream)?,
                    GraphOp::CopyD2D { src, dst } => self.copy_d2d(*src, *dst, stream)?,
                    GraphOp::Fill { dst, pattern } => self.fill_u32(*dst, *pattern, stream)?,
                    GraphOp::Launch { kernel, config, args } => self.launch(*kernel, config, args, stream)?,
                    GraphOp::Record { event } => runtime.event_record(events[*event], raw[node.stream].raw)?,
                    GraphOp::Wait { event } => runtime.stream_wait_event(raw[node.stream].raw, events[*event])?,
                }
            }
        }
        for (k, &event) in join.iter().enumerate() {
            // SAFETY: as for the fork.
            unsafe {
                runtime.event_record(event, raw[k + 1].raw)?;
                runtime.stream_wait_event(raw[0].raw, event)?;
            }
        }
        Ok(())
    }

    /// [`Device::create_graph`]: capture, instantiate (the device is current).
    ///
    /// # Safety
    /// As [`Device::create_graph`].
    pub(super) unsafe fn build_graph(&self, nodes: &[GraphNode]) -> Result<GpuGraph<R>> {
        // SAFETY: the caller's contract.
        let graph = unsafe { self.capture(nodes) }?;
        let runtime = &*self.runtime;
        // SAFETY: the graph just captured; destroyed once, after.
        let exec = unsafe { runtime.graph_instantiate(graph) };
        // SAFETY: as above (an instantiated graph does not need its source).
        unsafe { runtime.graph_destroy(graph) };
        Ok(GpuGraph {
            exec: Mutex::new(Launched { exec: exec?, done: None, old: Vec::new() }),
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// [`Device::update_graph`]: capture `nodes` again and update the
    /// executable in place, or instantiate anew where the runtime refuses
    /// (the device is current).
    ///
    /// # Safety
    /// As [`Device::update_graph`].
    pub(super) unsafe fn rebuild_graph(&self, graph: &GpuGraph<R>, nodes: &[GraphNode]) -> Result<()> {
        // SAFETY: the caller's contract.
        let captured = unsafe { self.capture(nodes) }?;
        let runtime = &*self.runtime;
        let mut launched = graph.exec.lock().unwrap_or_else(PoisonError::into_inner);
        let result = if !R::GRAPHS_OUTLIVE_LAUNCHES && launched.in_flight(runtime) {
            // A launch may be queued: a new executable, the old one kept
            // until its stream is idle.
            // SAFETY: the graph just captured.
            unsafe { runtime.graph_instantiate(captured) }.map(|exec| {
                let old = std::mem::replace(&mut launched.exec, exec);
                if let Some(event) = launched.done.take() {
                    launched.old.push((old, event));
                }
            })
        } else {
            // SAFETY: a live executable and the graph just captured.
            match unsafe { runtime.graph_exec_update(launched.exec, captured) } {
                Ok(true) => Ok(()),
                Ok(false) => {
                    // SAFETY: as above; the old executable goes once the
                    // new one is in place (queued launches keep it, see
                    // GRAPHS_OUTLIVE_LAUNCHES, or none is queued).
                    unsafe { runtime.graph_instantiate(captured) }.map(|exec| {
                        let old = std::mem::replace(&mut launched.exec, exec);
                        // SAFETY: replaced above, destroyed once.
                        unsafe { runtime.graph_exec_destroy(old) };
                    })
                }
                Err(e) => Err(e),
            }
        };
        // SAFETY: the captured graph, destroyed once.
        unsafe { runtime.graph_destroy(captured) };
        result
    }
}
