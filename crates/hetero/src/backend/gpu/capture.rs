//! Capturing graphs on the shared GPU device: a graph's nodes are
//! enqueued on private streams under stream capture, so every node goes
//! through the same checked enqueue as outside a graph, and the captured
//! graph is instantiated once (`graph.rs` holds it).

use std::sync::{Arc, Mutex, PoisonError};

use super::device::GpuDevice;
use super::graph::{GpuGraph, HeldLaunch, Launched, Source, Spare};
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
    unsafe fn capture(&self, nodes: &[GraphNode]) -> Result<Captured<R>> {
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
            (Ok(launches), Ok(graph)) => Ok(Captured { graph, launches }),
            (Ok(_), Err(e)) => Err(e),
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
    /// for each of them at the end (`join`), as capture requires. Returns
    /// the runtime node of each launch (`None` for other operations), or
    /// `None` where the runtime does not name them.
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
    ) -> Result<Option<Vec<Option<R::GraphNode>>>> {
        let runtime = &*self.runtime;
        let mut launches = Some(Vec::with_capacity(nodes.len()));
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
                    GraphOp::Launch { kernel, config, args } => {
                        self.launch(*kernel, config, args, stream)?;
                        // The private stream, capturing.
                        match (runtime.captured_node(raw[node.stream].raw)?, &mut launches) {
                            (Some(launch), Some(named)) => named.push(Some(launch)),
                            _ => launches = None,
                        }
                        continue;
                    }
                    GraphOp::Record { event } => runtime.event_record(events[*event], raw[node.stream].raw)?,
                    GraphOp::Wait { event } => runtime.stream_wait_event(raw[node.stream].raw, events[*event])?,
                }
            }
            if let Some(named) = &mut launches {
                named.push(None);
            }
        }
        for (k, &event) in join.iter().enumerate() {
            // SAFETY: as for the fork.
            unsafe {
                runtime.event_record(event, raw[k + 1].raw)?;
                runtime.stream_wait_event(raw[0].raw, event)?;
            }
        }
        Ok(launches)
    }

    /// [`Device::create_graph`]: capture, instantiate (the device is current).
    ///
    /// # Safety
    /// As [`Device::create_graph`].
    pub(super) unsafe fn build_graph(&self, nodes: &[GraphNode]) -> Result<GpuGraph<R>> {
        // SAFETY: the caller's contract.
        let captured = unsafe { self.capture(nodes) }?;
        // SAFETY: the graph just captured.
        let (exec, source) = unsafe { self.instantiate(captured, nodes) }?;
        Ok(GpuGraph {
            exec: Mutex::new(Launched { exec, done: None, old: Vec::new(), source }),
            runtime: Arc::clone(&self.runtime),
            held: Default::default(),
        })
    }

    /// Instantiates `captured`, the capture of `nodes`, and keeps it as the
    /// executable's [`Source`] where its launches are named; else destroys
    /// it (an instantiated graph does not need its source).
    ///
    /// # Safety
    /// `captured` was just captured and is destroyed by nobody else.
    unsafe fn instantiate(
        &self,
        captured: Captured<R>,
        nodes: &[GraphNode],
    ) -> Result<(R::GraphExec, Option<Source<R>>)> {
        let runtime = &*self.runtime;
        // SAFETY: the caller's contract.
        let exec = unsafe { runtime.graph_instantiate(captured.graph) };
        match (exec, captured.launches) {
            (Ok(exec), Some(launches)) => {
                Ok((exec, Some(Source { graph: captured.graph, nodes: nodes.to_vec(), launches, spares: Vec::new() })))
            }
            (exec, _) => {
                // SAFETY: the caller's contract; destroyed once.
                unsafe { runtime.graph_destroy(captured.graph) };
                exec.map(|exec| (exec, None))
            }
        }
    }

    /// For a launch held on the host (`stream.rs`): an executable of `graph`
    /// that runs what its current one runs, of the launch's own
    /// ([`GpuDevice::idle_exec`]); `None` where the graph keeps no source
    /// with its nodes to make one from, or the runtime refuses (the device
    /// is current).
    ///
    /// # Safety
    /// As [`Device::launch_graph`].
    pub(super) unsafe fn held_launch(&self, graph: &Arc<GpuGraph<R>>) -> Option<HeldLaunch<R>> {
        let mut launched = graph.exec.lock().unwrap_or_else(PoisonError::into_inner);
        // Nodes cleared after a refused change are not what `exec` runs.
        let source = launched.source.as_mut().filter(|s| s.nodes.len() == s.launches.len())?;
        let nodes = source.nodes.clone();
        // SAFETY: the caller's contract.
        let (exec, event) = unsafe { self.idle_exec(source, &nodes) }?;
        Some(graph.held_launch(exec, event))
    }

    /// An executable of `source`'s graph that no queued launch uses, set to
    /// run `nodes` (which differ from the source's in launch arguments at
    /// most): an idle spare, with its event, or one instantiated anew.
    /// `None` where the runtime refuses, with nothing left behind.
    ///
    /// # Safety
    /// As [`Device::update_graph`]; the device is current.
    unsafe fn idle_exec(
        &self,
        source: &mut Source<R>,
        nodes: &[GraphNode],
    ) -> Option<(R::GraphExec, Option<R::Event>)> {
        let runtime = &*self.runtime;
        let spare = source.idle_spare(runtime).map(|spare| (spare.exec, Some(spare.event), Some(spare.nodes)));
        let (exec, event, held) = spare.or_else(|| {
            // SAFETY: the source graph, kept alive with it.
            unsafe { runtime.graph_instantiate(source.graph) }.ok().map(|exec| (exec, None, None))
        })?;
        // SAFETY: the caller's contract; no launch of `exec` is queued, and
        // it runs `held` (a new one runs the graph as captured: every
        // launch is set).
        if unsafe { self.set_changed(exec, held.as_deref(), &source.launches, nodes) } {
            return Some((exec, event));
        }
        // SAFETY: not current and no launch of it queued; destroyed once.
        unsafe {
            runtime.graph_exec_destroy(exec);
            if let Some(event) = event {
                let _ = runtime.event_destroy(event);
            }
        }
        None
    }

    /// [`Device::update_graph`]: where only launches' arguments changed and
    /// the runtime named the launches, each changed launch is set in place
    /// ([`Runtime::exec_set_launch`]); else `nodes` are captured again and
    /// the executable updated in place, or instantiated anew where the
    /// runtime refuses or keeps the source graph (the device is current).
    ///
    /// # Safety
    /// As [`Device::update_graph`].
    pub(super) unsafe fn rebuild_graph(&self, graph: &GpuGraph<R>, nodes: &[GraphNode]) -> Result<()> {
        let runtime = &*self.runtime;
        let mut launched = graph.exec.lock().unwrap_or_else(PoisonError::into_inner);
        let outlives = R::GRAPHS_OUTLIVE_LAUNCHES || !launched.in_flight(runtime);
        // SAFETY: the caller's contract; queued launches are left as they were.
        if unsafe { self.set_launches(&mut launched, nodes, outlives) } {
            return Ok(());
        }
        // SAFETY: the caller's contract.
        let captured = unsafe { self.capture(nodes) }?;
        if launched.source.is_some() || !outlives {
            // A new executable, with the source its nodes come from; the
            // old one kept until its launches are done, or destroyed now
            // where the runtime lets queued launches outlive it.
            // SAFETY: the graph just captured.
            let (exec, source) = unsafe { self.instantiate(captured, nodes) }?;
            let old = std::mem::replace(&mut launched.exec, exec);
            let old_source = std::mem::replace(&mut launched.source, source);
            // SAFETY: replaced above; each destroyed once.
            unsafe {
                match launched.done.take() {
                    Some(event) if !R::GRAPHS_OUTLIVE_LAUNCHES => launched.old.push((old, event)),
                    done => {
                        runtime.graph_exec_destroy(old);
                        if let Some(event) = done {
                            let _ = runtime.event_destroy(event);
                        }
                    }
                }
                if let Some(source) = old_source {
                    source.retire(runtime, &mut launched.old);
                }
            }
            return Ok(());
        }
        // SAFETY: a live executable and the graph just captured.
        let result = match unsafe { runtime.graph_exec_update(launched.exec, captured.graph) } {
            Ok(true) => Ok(()),
            Ok(false) => {
                // SAFETY: as above; the old executable goes once the new one
                // is in place (no launch of it is queued, or queued launches
                // keep it, see GRAPHS_OUTLIVE_LAUNCHES).
                unsafe { runtime.graph_instantiate(captured.graph) }.map(|exec| {
                    let old = std::mem::replace(&mut launched.exec, exec);
                    // SAFETY: replaced above, destroyed once.
                    unsafe { runtime.graph_exec_destroy(old) };
                })
            }
            Err(e) => Err(e),
        };
        // SAFETY: the captured graph, destroyed once.
        unsafe { runtime.graph_destroy(captured.graph) };
        result
    }

    /// Sets the launches of `nodes` that differ from what the executable
    /// runs, unless the executable has no [`Source`] whose nodes are
    /// `nodes` but for launch arguments (`false`, changing nothing). In
    /// place where queued launches outlive the change (`outlives`); else
    /// on an idle spare, or an executable instantiated anew from the
    /// source, which then becomes current and the current one a spare. A
    /// call the runtime refuses (`false` too) leaves the source without
    /// its nodes, so that the caller captures the graph again.
    ///
    /// # Safety
    /// As [`Device::update_graph`]; with `outlives`, launches of the
    /// executable already queued are not affected (the caller checked).
    unsafe fn set_launches(&self, launched: &mut Launched<R>, nodes: &[GraphNode], outlives: bool) -> bool {
        let runtime = &*self.runtime;
        let Some(source) = launched.source.as_mut() else { return false };
        if !same_but_arguments(&source.nodes, nodes) {
            return false;
        }
        if outlives {
            // SAFETY: the caller's contract; `exec` runs `source.nodes`.
            let set = unsafe { self.set_changed(launched.exec, Some(&source.nodes), &source.launches, nodes) };
            if set {
                source.nodes = nodes.to_vec();
            } else {
                source.nodes.clear();
            }
            return set;
        }
        // SAFETY: the caller's contract.
        let Some((exec, event)) = (unsafe { self.idle_exec(source, nodes) }) else {
            source.nodes.clear();
            return false;
        };
        let nodes = std::mem::replace(&mut source.nodes, nodes.to_vec());
        let current = (std::mem::replace(&mut launched.exec, exec), std::mem::replace(&mut launched.done, event));
        match current {
            (exec, Some(event)) => source.spares.push(Spare { exec, event, nodes }),
            // Never launched: nothing of it can be queued.
            // SAFETY: replaced above, destroyed once.
            (exec, None) => unsafe { runtime.graph_exec_destroy(exec) },
        }
        true
    }

    /// Sets on `exec`, an executable of the graph whose launch nodes are
    /// `launches`, each launch of `nodes` that differs from `held` (what
    /// `exec` runs), or every launch where `held` is `None`; `false` at the
    /// first the runtime refuses.
    ///
    /// # Safety
    /// As [`Device::update_graph`]; no queued launch of `exec` is affected.
    unsafe fn set_changed(
        &self,
        exec: R::GraphExec,
        held: Option<&[GraphNode]>,
        launches: &[Option<R::GraphNode>],
        nodes: &[GraphNode],
    ) -> bool {
        nodes.iter().enumerate().all(|(i, node)| {
            let GraphOp::Launch { kernel, config, args } = &node.op else { return true };
            if held.is_some_and(|held| held[i] == *node) {
                return true;
            }
            let function = self.function("update_graph", *kernel);
            launches[i].zip(function.ok()).is_some_and(|(launch, function)| {
                let shared_bytes = u32::try_from(config.shared_bytes).unwrap_or(u32::MAX);
                self.with_params("update_graph", args, |params| {
                    // SAFETY: a launch node of the graph `exec` came from,
                    // with the recorded kernel and shape; the caller's
                    // contract covers the arguments.
                    unsafe {
                        self.runtime.exec_set_launch(
                            exec,
                            launch,
                            function,
                            config.grid,
                            config.block,
                            shared_bytes,
                            params,
                        )
                    }
                })
                .is_ok()
            })
        })
    }
}

/// Whether `nodes` are `held` but for launch arguments: the same
/// operations on the same streams, launches of the same kernels and shapes.
fn same_but_arguments(held: &[GraphNode], nodes: &[GraphNode]) -> bool {
    let unchanged = |a: &GraphNode, b: &GraphNode| {
        a.stream == b.stream
            && match (&a.op, &b.op) {
                (GraphOp::Launch { kernel: k, config: c, .. }, GraphOp::Launch { kernel, config, .. }) => {
                    k == kernel && c == config
                }
                (a, b) => a == b,
            }
    };
    held.len() == nodes.len() && held.iter().zip(nodes).all(|(a, b)| unchanged(a, b))
}

/// A captured graph, and the runtime node of each launch where it names them.
struct Captured<R: Runtime> {
    graph: R::Graph,
    launches: Option<Vec<Option<R::GraphNode>>>,
}
