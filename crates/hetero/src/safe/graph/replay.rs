//! Replay: a graph's nodes enqueued as one tracked operation, natively or
//! one by one, and the changes made between replays.

use super::checks::{check_launch, check_use, copy_uses, foreign};
use super::*;

impl<'b, D: Device> Graph<'b, D> {
    /// The backend of the graph's device.
    pub fn backend(&self) -> crate::Backend {
        self.device.info().backend
    }

    /// `true` when the backend built the graph itself (CUDA, HIP); `false`
    /// when each replay enqueues the recorded nodes one by one.
    pub fn is_native(&self) -> bool {
        self.native.is_some()
    }

    /// Recorded operations (events included).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// `true` when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    fn range(&self, u: Use) -> DeviceRange {
        let base = self.slots[u.slot].base();
        DeviceRange { alloc: base.alloc, offset: u.offset, len: u.len }
    }

    /// The backend's nodes for the current bindings and arguments.
    pub(super) fn raw_nodes(&self) -> Result<Vec<GraphNode>> {
        // Pinned sides are ranges of their allocations (`GraphOp`).
        let mut nodes = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            let op = match &step.op {
                Op::Copy { src, dst } => match (self.slots[src.slot].pinned, self.slots[dst.slot].pinned) {
                    (true, _) => GraphOp::CopyH2D { src: self.range(*src), dst: self.range(*dst) },
                    (_, true) => GraphOp::CopyD2H { src: self.range(*src), dst: self.range(*dst) },
                    _ => GraphOp::CopyD2D { src: self.range(*src), dst: self.range(*dst) },
                },
                Op::Fill { dst, pattern } => GraphOp::Fill { dst: self.range(*dst), pattern: *pattern },
                Op::Launch { kernel, config, args } => {
                    let mut raw = Vec::with_capacity(args.len());
                    for a in args {
                        raw.push(match a {
                            ArgKind::Buffer(u) => {
                                let r = self.range(*u);
                                KernelArg::Buffer { alloc: r.alloc, offset: r.offset }
                            }
                            ArgKind::Scalar(s) => s.clone(),
                            ArgKind::Struct(s) => s.raw(self.device.info().backend)?,
                        });
                    }
                    GraphOp::Launch { kernel: kernel.id, config: *config, args: raw }
                }
                Op::Record(e) => GraphOp::Record { event: *e },
                Op::Wait(e) => GraphOp::Wait { event: *e },
            };
            nodes.push(GraphNode { stream: step.stream, op });
        }
        Ok(nodes)
    }

    /// Per bound buffer a node uses, the bytes a replay tracks: the hull
    /// of those its nodes use (slot, offset, length), written if any node
    /// writes it.
    pub(super) fn hulls(&self) -> Vec<(usize, usize, usize, bool)> {
        let mut hull: Vec<Option<(usize, usize, bool)>> = vec![None; self.slots.len()];
        let mut add = |u: &Use| {
            let h = &mut hull[u.slot];
            let (start, end) = (u.offset, u.offset + u.len);
            *h = Some(match *h {
                Some((s, e, w)) => (s.min(start), e.max(end), w || u.write),
                None => (start, end, u.write),
            });
        };
        for step in &self.steps {
            match &step.op {
                Op::Copy { src, dst } => {
                    add(src);
                    add(dst);
                }
                Op::Fill { dst, .. } => add(dst),
                Op::Launch { args, .. } => args.iter().for_each(|a| {
                    if let ArgKind::Buffer(u) = a {
                        add(u);
                    }
                }),
                Op::Record(_) | Op::Wait(_) => {}
            }
        }
        hull.iter().enumerate().filter_map(|(slot, h)| h.map(|(s, e, w)| (slot, s, e - s, w))).collect()
    }

    /// The views a replay tracks, from the hulls.
    fn uses(&self) -> SmallVec<[View<'_, D>; 8]> {
        self.hulls
            .iter()
            .map(|&(slot, offset, len, write)| {
                self.slots[slot].view(offset, len, if write { Access::Write } else { Access::Read })
            })
            .collect()
    }

    /// Hands changed bindings or arguments to the backend's graph.
    fn refresh(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        let nodes = self.raw_nodes()?;
        self.hulls = self.hulls();
        if let Some(id) = self.native {
            // SAFETY: as in `Recorder::finish`; the nodes have the recorded
            // shape (only bindings and scalars change).
            unsafe { self.device.update_graph(id, &nodes) }?;
        }
        self.nodes = nodes;
        self.dirty = false;
        Ok(())
    }

    /// Enqueues the whole graph on `stream` as one operation: later work
    /// on the stream runs after all of it, and work on other streams that
    /// uses its buffers is ordered against it by the tracker. A fault in a
    /// replay is sticky on the stream like any kernel fault.
    pub fn replay(&mut self, stream: &Stream<D>) -> Result<()> {
        let _range = markers::range(c"hetero replay");
        same_device(&self.device, &stream.device, "replay")?;
        self.refresh()?;
        let uses = self.uses();
        let refs: SmallVec<[&View<'_, D>; 8]> = uses.iter().collect();
        let device = &**self.device;
        let (native, nodes) = (self.native, &self.nodes);
        stream.tracked(&refs, || match native {
            // SAFETY: the graph is owned by self and its nodes' memory is
            // borrowed by it; the stream waited for conflicting uses, and
            // the replay's mark is stored after (`tracked`).
            Some(id) => unsafe { device.launch_graph(id, stream.id) },
            // SAFETY: as above.
            None => unsafe { device.replay_nodes(nodes, stream.id) },
        })
    }

    /// The recorded launch `node` names: its kernel and arguments; an
    /// error naming `call` when it is no launch of this graph.
    fn launch_of(&self, node: Node, call: &'static str) -> Result<(&'b Kernel<D>, &[ArgKind])> {
        match self.steps.get(node.index) {
            Some(Step { op: Op::Launch { kernel, args, .. }, .. }) if node.tag == self.tag => Ok((*kernel, args)),
            _ => Err(Error::new(
                self.device.info().backend,
                call,
                ErrorKind::InvalidHandle,
                "the node is not a launch of this graph",
            )),
        }
    }

    /// Changes argument `index` (from 0) of a recorded launch for later
    /// replays: a scalar for one of the same type, or a struct, or a slice
    /// of a bound buffer, checked against the kernel's source as when
    /// recorded.
    ///
    /// # Safety
    /// As [`Recorder::launch`]: the kernel must stay within the slices
    /// with the new argument.
    pub unsafe fn set_arg(&mut self, node: Node, index: usize, value: impl Into<GraphArg>) -> Result<()> {
        let (kernel, args) = self.launch_of(node, "set_arg")?;
        let backend = self.device.info().backend;
        let value = value.into().0;
        let Some(old) = args.get(index) else {
            return Err(Error::new(
                backend,
                "set_arg",
                ErrorKind::InvalidLaunch,
                format!(
                    "kernel `{}` was recorded with {} arguments; there is no argument {index}",
                    kernel.name(),
                    args.len()
                ),
            ));
        };
        match (old, &value) {
            (ArgKind::Scalar(a), ArgKind::Scalar(b)) if std::mem::discriminant(a) != std::mem::discriminant(b) => {
                return Err(Error::new(
                    backend,
                    "set_arg",
                    ErrorKind::InvalidLaunch,
                    format!(
                        "argument {index} of kernel `{}` was recorded as a {} and cannot become a {}",
                        kernel.name(),
                        a.c_type().unwrap_or("struct"),
                        b.c_type().unwrap_or("struct")
                    ),
                ));
            }
            (_, ArgKind::Buffer(u)) => check_use(backend, self.tag, &self.slots, *u, "the launch")?,
            _ => {}
        }
        let mut new_args = args.to_vec();
        new_args[index] = value;
        check_launch(&self.slots, kernel, &new_args)?;
        if let Op::Launch { args, .. } = &mut self.steps[node.index].op {
            *args = new_args;
        }
        self.dirty = true;
        Ok(())
    }

    /// Changes a recorded copy (a node [`Recorder::copy`] returned) for
    /// later replays: other slices, of equal length (which may differ from
    /// the recorded one), of bound buffers of the same kinds (pinned or
    /// device) as the recorded ones.
    pub fn set_copy<T: Pod, KS: CopyKind<KD>, KD: 'static>(
        &mut self,
        node: Node,
        src: impl Into<GraphSlice<T, KS>>,
        dst: impl Into<GraphSlice<T, KD>>,
    ) -> Result<()> {
        let backend = self.device.info().backend;
        let (src, dst) = copy_uses(backend, self.tag, &self.slots, src.into().bytes(), dst.into().bytes())?;
        let old = match self.steps.get(node.index) {
            Some(Step { op: Op::Copy { src, dst }, .. }) if node.tag == self.tag => (*src, *dst),
            _ => {
                return Err(Error::new(
                    backend,
                    "set_copy",
                    ErrorKind::InvalidHandle,
                    "the node is not a copy of this graph",
                ));
            }
        };
        let pinned = |u: Use| self.slots[u.slot].pinned;
        if (pinned(src), pinned(dst)) != (pinned(old.0), pinned(old.1)) {
            return Err(Error::new(
                backend,
                "set_copy",
                ErrorKind::InvalidHandle,
                "a copy keeps its direction: give slices of the same memory kinds as recorded",
            ));
        }
        self.steps[node.index].op = Op::Copy { src, dst };
        self.dirty = true;
        Ok(())
    }

    /// Changes a recorded launch's shape for later replays, checked as
    /// when recorded.
    pub fn set_config(&mut self, node: Node, config: LaunchConfig) -> Result<()> {
        let (kernel, _) = self.launch_of(node, "set_config")?;
        let info = self.device.info();
        config.validate(info, "launch")?;
        check_kernel_limits(info, kernel.name(), &config, &kernel.limits())?;
        if let Op::Launch { config: recorded, .. } = &mut self.steps[node.index].op {
            *recorded = config;
        }
        self.dirty = true;
        Ok(())
    }

    fn check_rebind<T, K>(&self, handle: GraphBuffer<T, K>, len: usize, writable: bool) -> Result<()> {
        let backend = self.device.info().backend;
        if handle.tag != self.tag || handle.slot >= self.slots.len() {
            return Err(foreign(backend, "buffer"));
        }
        if handle.len != len {
            return Err(Error::new(
                backend,
                "rebind",
                ErrorKind::OutOfBounds,
                format!(
                    "the graph's buffer holds {} elements but the new one holds {len}; rebind to a buffer of the same length",
                    handle.len
                ),
            ));
        }
        if self.slots[handle.slot].writable != writable {
            return Err(Error::new(
                backend,
                "rebind",
                ErrorKind::InvalidHandle,
                if writable {
                    "the buffer was bound read-only: rebind it with `rebind`"
                } else {
                    "the buffer was bound writable: rebind it with `rebind_mut`"
                },
            ));
        }
        Ok(())
    }

    /// Makes later replays read `buffer` where they read the buffer bound
    /// as `handle` (bound with [`Recorder::bind`]), which must have the same
    /// length; borrowed while the graph lives.
    pub fn rebind<T: Pod, K: 'static>(&mut self, handle: GraphBuffer<T, K>, buffer: &'b Buffer<T, K, D>) -> Result<()> {
        self.check_rebind(handle, buffer.len(), false)?;
        same_device(&self.device, &buffer.device, "rebind")?;
        self.slots[handle.slot] = Slot::new(NonNull::from(buffer), false);
        self.dirty = true;
        Ok(())
    }

    /// Makes later replays use `buffer` where they used the buffer bound
    /// as `handle` (bound with [`Recorder::bind_mut`]), which must have the
    /// same length; borrowed exclusively while the graph lives.
    pub fn rebind_mut<T: Pod, K: 'static>(
        &mut self,
        handle: GraphBuffer<T, K>,
        buffer: &'b mut Buffer<T, K, D>,
    ) -> Result<()> {
        self.check_rebind(handle, buffer.len(), true)?;
        same_device(&self.device, &buffer.device, "rebind_mut")?;
        self.slots[handle.slot] = Slot::new(NonNull::from(buffer), true);
        self.dirty = true;
        Ok(())
    }

    fn slot_of<T, K>(&self, handle: GraphBuffer<T, K>) -> Result<&Slot<D>> {
        match self.slots.get(handle.slot) {
            Some(slot) if handle.tag == self.tag => Ok(slot),
            _ => Err(foreign(self.device.info().backend, "buffer")),
        }
    }

    /// The buffer bound as `handle`, shared: to read it on a stream, or
    /// from the host ([`Buffer::host_slice`] waits for the replays that
    /// write it), between replays.
    pub fn get<T: Pod, K>(&self, handle: GraphBuffer<T, K>) -> Result<&Buffer<T, K, D>> {
        let slot = self.slot_of(handle)?;
        // SAFETY: the slot's invariant: a live `Buffer<T, K, D>` (the
        // handle's types are the binding's), borrowed for 'b; shared here
        // for the borrow of self, which no replay can take meanwhile.
        Ok(unsafe { slot.buffer.cast::<Buffer<T, K, D>>().as_ref() })
    }

    /// The buffer bound writable as `handle`, as a writable slice of all of
    /// it: to fill it on a stream between replays. Its uses are tracked as
    /// any slice's.
    pub fn get_mut<T: Pod, K>(&mut self, handle: GraphBuffer<T, K>) -> Result<SliceMut<'_, T, K, D>> {
        Ok(SliceMut::from(self.buffer_mut(handle)?))
    }

    /// Writable slices of all of several buffers bound writable, at once:
    /// to launch between replays a kernel that writes one bound buffer and
    /// reads others (through [`SliceMut::slice`]). An error when two handles
    /// name one binding, or one was bound read-only.
    pub fn get_disjoint_mut<T: Pod, K, const N: usize>(
        &mut self,
        handles: [GraphBuffer<T, K>; N],
    ) -> Result<[SliceMut<'_, T, K, D>; N]> {
        for (i, handle) in handles.iter().enumerate() {
            self.buffer_mut(*handle)?;
            if handles[..i].iter().any(|h| h.slot == handle.slot) {
                return Err(Error::new(
                    self.device.info().backend,
                    "get_disjoint_mut",
                    ErrorKind::InvalidHandle,
                    format!("handle {i} names a buffer an earlier handle names: each may be asked for once"),
                ));
            }
        }
        Ok(handles.map(|handle| {
            let mut buffer = self.slots[handle.slot].buffer.cast::<Buffer<T, K, D>>();
            // SAFETY: each slot was checked above to be of this graph and
            // writable, and the slots are distinct: the slot's invariant
            // (made from the `&'b mut` of a live `Buffer<T, K, D>`) gives one
            // exclusive borrow each, for the borrow of `&mut self`; handed
            // out as slices only, never as the buffer itself.
            SliceMut::from(unsafe { buffer.as_mut() })
        }))
    }

    /// The contents of a pinned buffer bound writable as `handle`, for the
    /// host to write between replays, after its queued uses (see
    /// [`Buffer::host_slice_mut`]).
    pub fn host_slice_mut<T: Pod>(&mut self, handle: GraphBuffer<T, Pinned>) -> Result<&mut [T]> {
        self.buffer_mut(handle)?.host_slice_mut()
    }

    /// The buffer bound writable as `handle`, exclusively, for this
    /// module: never handed out whole, so that no caller can swap another
    /// allocation in behind the graph's nodes.
    fn buffer_mut<T: Pod, K>(&mut self, handle: GraphBuffer<T, K>) -> Result<&mut Buffer<T, K, D>> {
        let slot = self.slot_of(handle)?;
        if !slot.writable {
            return Err(Error::new(
                self.device.info().backend,
                "get_mut",
                ErrorKind::InvalidHandle,
                "the buffer was bound read-only (`bind`); bind it with `bind_mut` to write it between replays",
            ));
        }
        let mut buffer = slot.buffer.cast::<Buffer<T, K, D>>();
        // SAFETY: the slot's invariant: made from the `&'b mut` of a live
        // `Buffer<T, K, D>`; exclusive here for the borrow of `&mut self`,
        // during which no view of it exists (views live only within calls).
        Ok(unsafe { buffer.as_mut() })
    }
}
