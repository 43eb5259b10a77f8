//! Capturing graphs on the shared GPU device: a graph's nodes are
//! enqueued on private streams under stream capture, so every node goes
//! through the same checked enqueue as outside a graph, and the captured
//! graph is instantiated once (`graph.rs` holds it).

use std::sync::{Arc, Mutex, PoisonError};

use super::device::GpuDevice;
use super::graph::{GpuGraph, Launched};
use super::runtime::Runtime;
use super::stream::GpuStream;
use crate::device::{Device, GraphNode, GraphOp, StreamFlags, StreamId, pinned_address};
use crate::error::Result;

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
