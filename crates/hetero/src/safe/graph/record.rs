//! Recording: binding buffers and recording copies, fills, launches and
//! graph events into a [`Graph`].

use super::checks::{check_launch, check_use, copy_uses, foreign};
use super::*;

impl<'b, D: Device> Recorder<'b, D> {
    pub(crate) fn new(device: &Arc<DeviceState<D>>) -> Self {
        Self {
            device: Arc::clone(device),
            tag: crate::backend::handles::fresh_id(),
            slots: Vec::new(),
            _borrows: PhantomData,
            streams: 0,
            events: 0,
            steps: Vec::new(),
            failed: None,
        }
    }

    /// Ends the recording with `error` (kept for every later call).
    fn fail(&mut self, error: Error) -> Error {
        self.failed.get_or_insert(error).clone()
    }

    /// The error that ended the recording, if any.
    fn ended(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Runs a recording step: refused once the recording has ended, and
    /// ending it on error.
    fn step<R>(&mut self, f: impl FnOnce(&mut Self) -> Result<R>) -> Result<R> {
        self.ended()?;
        f(self).map_err(|e| self.fail(e))
    }

    fn bind_slot<T: Pod, K: 'static>(
        &mut self,
        device: &Arc<DeviceState<D>>,
        len: usize,
        slot: Slot<D>,
    ) -> Result<GraphBuffer<T, K>> {
        let writable = slot.writable;
        self.step(|rec| {
            same_device(&rec.device, device, "bind")?;
            rec.slots.push(slot);
            let backend = rec.device.info().backend;
            Ok(GraphBuffer { backend, tag: rec.tag, slot: rec.slots.len() - 1, len, writable, _marker: PhantomData })
        })
    }

    /// Binds a buffer the graph only reads, borrowed while the graph lives.
    pub fn bind<T: Pod, K: 'static>(&mut self, buffer: &'b Buffer<T, K, D>) -> Result<GraphBuffer<T, K>> {
        let (device, len) = (Arc::clone(&buffer.device), buffer.len());
        self.bind_slot(&device, len, Slot::new(NonNull::from(buffer), false))
    }

    /// Binds a buffer the graph may write, borrowed exclusively while the
    /// graph lives.
    pub fn bind_mut<T: Pod, K: 'static>(&mut self, buffer: &'b mut Buffer<T, K, D>) -> Result<GraphBuffer<T, K>> {
        let (device, len) = (Arc::clone(&buffer.device), buffer.len());
        self.bind_slot(&device, len, Slot::new(NonNull::from(buffer), true))
    }

    /// The backend of the recording's device.
    pub fn backend(&self) -> crate::Backend {
        self.device.info().backend
    }

    /// A new graph stream.
    pub fn stream(&mut self) -> GraphStream {
        self.streams += 1;
        GraphStream { tag: self.tag, index: self.streams - 1 }
    }

    fn check_use(&self, u: Use, what: &str) -> Result<()> {
        check_use(self.device.info().backend, self.tag, &self.slots, u, what)
    }

    fn check_stream(&self, s: GraphStream) -> Result<usize> {
        if s.tag != self.tag || s.index >= self.streams {
            return Err(foreign(self.device.info().backend, "graph stream"));
        }
        Ok(s.index)
    }

    /// Records a copy between equal-length slices of bound buffers: pinned
    /// to device, device to pinned, or device to device; returns the node,
    /// for [`Graph::set_copy`].
    pub fn copy<T: Pod, KS: CopyKind<KD>, KD: 'static>(
        &mut self,
        stream: GraphStream,
        src: impl Into<GraphSlice<T, KS>>,
        dst: impl Into<GraphSlice<T, KD>>,
    ) -> Result<Node> {
        let (src, dst) = (src.into().bytes(), dst.into().bytes());
        self.step(|rec| {
            let stream = rec.check_stream(stream)?;
            let (src, dst) = copy_uses(rec.device.info().backend, rec.tag, &rec.slots, src, dst)?;
            rec.steps.push(Step { stream, op: Op::Copy { src, dst } });
            Ok(Node { tag: rec.tag, index: rec.steps.len() - 1 })
        })
    }

    /// Records filling a slice of a bound device buffer with `value`; `T`
    /// must be 4 bytes wide.
    pub fn fill<T: Pod>(
        &mut self,
        stream: GraphStream,
        dst: impl Into<GraphSlice<T, OnDevice>>,
        value: T,
    ) -> Result<()> {
        let dst = dst.into();
        self.step(|rec| {
            let stream = rec.check_stream(stream)?;
            let pattern: u32 = bytemuck::try_cast(value).map_err(|_| {
                Error::new(
                    rec.device.info().backend,
                    "fill",
                    ErrorKind::OutOfBounds,
                    format!("fill takes 4-byte elements, not {} bytes", std::mem::size_of::<T>()),
                )
            })?;
            let mut dst = dst.bytes();
            dst.write = true;
            rec.check_use(dst, "a fill")?;
            rec.steps.push(Step { stream, op: Op::Fill { dst, pattern } });
            Ok(())
        })
    }

    /// Records `kernel` with `args`, checked now as [`Stream::launch`]
    /// checks a launch; returns the node, for [`Graph::set_arg`].
    ///
    /// # Safety
    /// As [`Stream::launch`], for every replay: the kernel must match
    /// `args` and stay within the slices passed, and so after any change
    /// made with [`Graph::set_arg`] or a rebinding.
    pub unsafe fn launch(
        &mut self,
        stream: GraphStream,
        kernel: &'b Kernel<D>,
        config: LaunchConfig,
        args: Vec<GraphArg>,
    ) -> Result<Node> {
        self.step(|rec| {
            let stream = rec.check_stream(stream)?;
            same_device(&rec.device, &kernel.device, "launch")?;
            let info = rec.device.info();
            config.validate(info, "launch")?;
            check_kernel_limits(info, kernel.name(), &config, &kernel.limits())?;
            let args: Vec<ArgKind> = args.into_iter().map(|a| a.0).collect();
            for a in &args {
                if let ArgKind::Buffer(u) = a {
                    rec.check_use(*u, "a launch")?;
                }
            }
            check_launch(&rec.slots, kernel, &args)?;
            rec.steps.push(Step { stream, op: Op::Launch { kernel, config, args } });
            Ok(Node { tag: rec.tag, index: rec.steps.len() - 1 })
        })
    }

    /// Records an event at the current end of `stream`.
    pub fn record(&mut self, stream: GraphStream) -> Result<GraphEvent> {
        self.step(|rec| {
            let stream = rec.check_stream(stream)?;
            rec.events += 1;
            rec.steps.push(Step { stream, op: Op::Record(rec.events - 1) });
            Ok(GraphEvent { tag: rec.tag, index: rec.events - 1 })
        })
    }

    /// Makes `stream`'s later operations wait for `event`.
    pub fn wait(&mut self, stream: GraphStream, event: GraphEvent) -> Result<()> {
        self.step(|rec| {
            let stream = rec.check_stream(stream)?;
            if event.tag != rec.tag || event.index >= rec.events {
                return Err(foreign(rec.device.info().backend, "graph event"));
            }
            rec.steps.push(Step { stream, op: Op::Wait(event.index) });
            Ok(())
        })
    }

    /// The graph, built by the backend where it has graphs of its own; the
    /// error that ended the recording, if one did.
    pub fn finish(self) -> Result<Graph<'b, D>> {
        let _range = markers::range(c"hetero instantiate");
        self.ended()?;
        let mut graph = Graph {
            device: self.device,
            tag: self.tag,
            slots: self.slots,
            _borrows: PhantomData,
            steps: self.steps,
            nodes: Vec::new(),
            native: None,
            dirty: false,
            hulls: Vec::new(),
        };
        graph.nodes = graph.raw_nodes()?;
        graph.hulls = graph.hulls();
        if graph.device.native_graphs() {
            // SAFETY: every handle and range of the nodes is of a buffer or
            // kernel borrowed by the graph for its whole life; a launch of
            // it is tracked (`Graph::replay`) as one operation.
            graph.native = Some(unsafe { graph.device.create_graph(&graph.nodes) }?);
        }
        Ok(graph)
    }
}
