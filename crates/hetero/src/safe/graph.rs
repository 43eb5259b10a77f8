//! Graphs: copies, fills and launches recorded once and replayed on a
//! stream as one operation, with their buffers and scalar arguments
//! changeable between replays.
//!
//! # Rules
//!
//! - **Buffers are bound, and borrowed for the graph's life.** A
//!   [`Recorder`] takes each buffer the work uses once, shared
//!   ([`Recorder::bind`]) or exclusive ([`Recorder::bind_mut`], for
//!   buffers the graph writes), and the [`Graph`] keeps those borrows: no
//!   buffer it touches can be dropped, freed, handed to the caching
//!   allocator or written by the host while the graph exists (the borrow
//!   checker says so at compile time). Recorded operations name a bound
//!   buffer by its handle ([`GraphBuffer`]), so one graph may write a
//!   buffer in one node and read it in the next.
//! - **A replay is one tracked operation.** Its uses are, per bound
//!   buffer, the hull of the bytes its nodes touch, written if any node
//!   writes it; work outside the graph is ordered against a replay as
//!   against any operation of the stream (the tracker module's rules).
//! - **Checked when recorded.** Copy lengths, fills, launch shapes, kernel
//!   limits and launch arguments (against the kernel's source) are checked
//!   as [`Stream`]'s methods check them. A failed check is an error that
//!   ends the recording: every later call, and [`Recorder::finish`],
//!   return it. Nothing is enqueued while recording, so streams stay
//!   usable. Host waits, synchronisation and allocations have no method
//!   here: they cannot be recorded.
//! - **Changed between replays without recording again**: a bound buffer
//!   for another of the same length and type ([`Graph::rebind`],
//!   [`Graph::rebind_mut`]) and a launch's scalar arguments
//!   ([`Graph::set_arg`]). Backends with graphs of their own (CUDA, HIP,
//!   OpenCL with command buffers) update the built graph before the next
//!   replay.
//! - **Backends.** CUDA and HIP capture the nodes into a runtime graph,
//!   instantiated once; OpenCL records them into command buffers where the
//!   device has `cl_khr_command_buffer` (unless
//!   `HETERO_OPENCL_GRAPHS=replay`) ([`Device::native_graphs`]). The host
//!   backend, and OpenCL without command buffers, replay the recorded
//!   nodes one by one on the replaying stream, in recorded order (an order
//!   they may run in).

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::Arc;

use bytemuck::Pod;
use smallvec::SmallVec;

use super::buffer::{Buffer, OnDevice, Pinned, SliceMut, View};
use super::module::Kernel;
use super::same_device;
use super::shared::Shared;
use super::stream::{Arg, CopyKind, Stream, StructArg};
use super::tracker::Access;
use crate::AnyDevice;
use crate::device::{
    Device, DeviceRange, GraphId, GraphNode, GraphOp, KernelArg, LaunchConfig, StreamId, check_kernel_limits,
};
use crate::error::{Error, ErrorKind, Result};
use crate::markers;

/// Records copies, fills and launches on graph streams into a [`Graph`].
/// Made by [`super::Context::recorder`]; `'b` is how long the bound
/// buffers are borrowed.
pub struct Recorder<'b, D: Device = AnyDevice> {
    device: Arc<Shared<D>>,
    /// Names this recording's handles, so those of another are refused.
    tag: u64,
    slots: Vec<Slot<D>>,
    /// The borrows of the bound buffers.
    _borrows: PhantomData<&'b mut ()>,
    streams: usize,
    events: usize,
    steps: Vec<Step<'b, D>>,
    /// The error that ended the recording.
    failed: Option<Error>,
}

/// One bound buffer, borrowed for the recording's and graph's `'b`.
///
/// Invariant: `buffer` points to a live `Buffer<T, K, D>` of the types of
/// the binding's [`GraphBuffer`] handle, borrowed for `'b` (exclusively
/// when `writable`, the pointer then made from that `&mut`). Views of it
/// are made afresh for each use and never kept past the call that made
/// them, so that an exclusive borrow handed out by [`Graph::get_mut`]
/// aliases none.
struct Slot<D: Device> {
    buffer: NonNull<()>,
    /// Makes the whole buffer's view (read access) from `buffer`.
    whole: unsafe fn(NonNull<()>) -> View<'static, D>,
    writable: bool,
    pinned: bool,
}

// SAFETY: a slot stands for a `&Buffer` or `&mut Buffer`, both Send and
// Sync (the buffer's state is behind locks and atomics).
unsafe impl<D: Device> Send for Slot<D> {}
// SAFETY: as above.
unsafe impl<D: Device> Sync for Slot<D> {}

impl<D: Device> Slot<D> {
    fn new<T: Pod, K: 'static>(buffer: NonNull<Buffer<T, K, D>>, writable: bool) -> Self {
        Self {
            buffer: buffer.cast(),
            whole: whole::<T, K, D>,
            writable,
            pinned: std::any::TypeId::of::<K>() == std::any::TypeId::of::<Pinned>(),
        }
    }

    /// `len` bytes from byte `offset` of the buffer, with `access`; the
    /// view must not outlive the borrow of the graph or recorder that
    /// owns the slot.
    fn view(&self, offset: usize, len: usize, access: Access) -> View<'_, D> {
        // SAFETY: the type invariant: a live buffer of the types `whole`
        // was made for; the view is bounded by the borrow of self.
        let whole = unsafe { (self.whole)(self.buffer) };
        whole.part(offset, len, access)
    }

    /// The bound buffer's allocation and, for pinned memory, host address.
    fn base(&self) -> View<'_, D> {
        self.view(0, 0, Access::Read)
    }
}

/// The whole view of the `Buffer<T, K, D>` at `buffer`.
///
/// # Safety
/// `buffer` points to a live `Buffer<T, K, D>` for as long as the view is used.
unsafe fn whole<T: Pod, K: 'static, D: Device>(buffer: NonNull<()>) -> View<'static, D> {
    // SAFETY: the caller's contract.
    let buffer: &Buffer<T, K, D> = unsafe { buffer.cast().as_ref() };
    super::buffer::Slice::from(buffer).into_view()
}

/// A buffer bound to a recording, by handle (see [`Recorder::bind`]).
pub struct GraphBuffer<T, K> {
    backend: crate::Backend,
    tag: u64,
    slot: usize,
    len: usize,
    writable: bool,
    _marker: PhantomData<fn() -> (T, K)>,
}

impl<T, K> Clone for GraphBuffer<T, K> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, K> Copy for GraphBuffer<T, K> {}

impl<T, K> std::fmt::Debug for GraphBuffer<T, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphBuffer").field("slot", &self.slot).field("len", &self.len).finish()
    }
}

/// Elements of a bound buffer, read or written by a recorded operation.
pub struct GraphSlice<T, K> {
    buf: GraphBuffer<T, K>,
    offset: usize,
    len: usize,
    write: bool,
}

impl<T, K> std::fmt::Debug for GraphSlice<T, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GraphSlice").field("offset", &self.offset).field("len", &self.len).finish()
    }
}

impl<T: Pod, K> GraphBuffer<T, K> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The whole buffer, read.
    pub fn read(&self) -> GraphSlice<T, K> {
        GraphSlice { buf: *self, offset: 0, len: self.len, write: false }
    }

    /// The whole buffer, written (see [`GraphBuffer::slice_mut`]).
    pub fn write(&self) -> GraphSlice<T, K> {
        GraphSlice { buf: *self, offset: 0, len: self.len, write: true }
    }

    /// Elements `range`, read; an error when out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<GraphSlice<T, K>> {
        let (offset, len) = self.bounds(range)?;
        Ok(GraphSlice { buf: *self, offset, len, write: false })
    }

    /// Elements `range`, written; an error when out of bounds. Recording
    /// a write to a buffer bound with [`Recorder::bind`] is an error too.
    pub fn slice_mut(&self, range: impl RangeBounds<usize>) -> Result<GraphSlice<T, K>> {
        let (offset, len) = self.bounds(range)?;
        Ok(GraphSlice { buf: *self, offset, len, write: true })
    }

    fn bounds(&self, range: impl RangeBounds<usize>) -> Result<(usize, usize)> {
        let (start, end) = (range.start_bound().cloned(), range.end_bound().cloned());
        bounds((start, end), self.len).ok_or_else(|| {
            Error::new(
                self.backend,
                "slice",
                ErrorKind::OutOfBounds,
                format!("element range {start:?}..{end:?} is outside a bound buffer of {} elements", self.len),
            )
        })
    }
}

impl<T: Pod, K> From<GraphBuffer<T, K>> for GraphSlice<T, K> {
    /// The whole buffer: written where it was bound with
    /// [`Recorder::bind_mut`], read otherwise.
    fn from(buf: GraphBuffer<T, K>) -> Self {
        GraphSlice { buf, offset: 0, len: buf.len, write: buf.writable }
    }
}

fn bounds(range: impl RangeBounds<usize>, len: usize) -> Option<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1)?,
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start <= end && end <= len).then_some((start, end - start))
}

/// Bytes of one bound buffer an operation uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Use {
    tag: u64,
    slot: usize,
    offset: usize,
    len: usize,
    write: bool,
}

impl<T: Pod, K> GraphSlice<T, K> {
    fn bytes(&self) -> Use {
        let size = std::mem::size_of::<T>();
        Use {
            tag: self.buf.tag,
            slot: self.buf.slot,
            offset: self.offset * size,
            len: self.len * size,
            write: self.write,
        }
    }
}

/// One argument of a recorded launch: elements of a bound device buffer
/// (a [`GraphSlice`] or a whole [`GraphBuffer`]), a scalar, or a struct
/// ([`GraphArg::value`]). Made with `.into()`.
pub struct GraphArg(ArgKind);

enum ArgKind {
    Buffer(Use),
    Scalar(KernelArg),
    Struct(StructArg),
}

impl Clone for ArgKind {
    fn clone(&self) -> Self {
        match self {
            ArgKind::Buffer(u) => ArgKind::Buffer(*u),
            ArgKind::Scalar(s) => ArgKind::Scalar(s.clone()),
            ArgKind::Struct(s) => ArgKind::Struct(s.clone()),
        }
    }
}

impl GraphArg {
    /// A `#[repr(C)]` plain-data struct passed by value (see [`Arg::value`]).
    pub fn value<T: Pod>(value: &T) -> Self {
        GraphArg(ArgKind::Struct(StructArg::of(value)))
    }
}

impl<T: Pod> From<GraphSlice<T, OnDevice>> for GraphArg {
    fn from(s: GraphSlice<T, OnDevice>) -> Self {
        GraphArg(ArgKind::Buffer(s.bytes()))
    }
}

impl<T: Pod> From<GraphBuffer<T, OnDevice>> for GraphArg {
    /// The whole buffer: written where bound with [`Recorder::bind_mut`].
    fn from(b: GraphBuffer<T, OnDevice>) -> Self {
        GraphSlice::from(b).into()
    }
}

macro_rules! scalar_args {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for GraphArg {
            fn from(v: $t) -> Self {
                GraphArg(ArgKind::Scalar(KernelArg::$v(v)))
            }
        }
    )*};
}
scalar_args!(u32 => U32, i32 => I32, f32 => F32, u64 => U64, i64 => I64, f64 => F64);

/// One of a recording's streams: operations on one graph stream run in
/// recorded order; graph streams are ordered only by graph events.
#[derive(Debug, Clone, Copy)]
pub struct GraphStream {
    tag: u64,
    index: usize,
}

/// A point in a graph stream that other graph streams can wait for.
#[derive(Debug, Clone, Copy)]
pub struct GraphEvent {
    tag: u64,
    index: usize,
}

/// A recorded launch, for [`Graph::set_arg`].
#[derive(Debug, Clone, Copy)]
pub struct Node {
    tag: u64,
    index: usize,
}

enum Op<'b, D: Device> {
    Copy { src: Use, dst: Use },
    Fill { dst: Use, pattern: u32 },
    Launch { kernel: &'b Kernel<D>, config: LaunchConfig, args: Vec<ArgKind> },
    Record(usize),
    Wait(usize),
}

struct Step<'b, D: Device> {
    stream: usize,
    op: Op<'b, D>,
}

/// The error for a handle of another recording.
#[cold]
fn foreign(backend: crate::Backend, what: &str) -> Error {
    Error::new(
        backend,
        "record",
        ErrorKind::InvalidHandle,
        format!("a {what} of another recording was used; use the handles this recording gave"),
    )
}

/// Checks a use of a bound buffer: of the recording tagged `tag`, and
/// written only where bound writable.
fn check_use<D: Device>(backend: crate::Backend, tag: u64, slots: &[Slot<D>], u: Use, what: &str) -> Result<()> {
    let slot = match slots.get(u.slot) {
        Some(slot) if u.tag == tag => slot,
        _ => return Err(foreign(backend, "buffer")),
    };
    if u.write && !slot.writable {
        return Err(Error::new(
            backend,
            "record",
            ErrorKind::InvalidLaunch,
            format!("{what} writes a buffer bound read-only; bind it with `bind_mut`"),
        ));
    }
    Ok(())
}

/// Checks a copy's two sides: bound buffers of the recording, equal
/// lengths, no overlap; returns them as read and written.
fn copy_uses<D: Device>(
    backend: crate::Backend,
    tag: u64,
    slots: &[Slot<D>],
    mut src: Use,
    mut dst: Use,
) -> Result<(Use, Use)> {
    (src.write, dst.write) = (false, true);
    check_use(backend, tag, slots, src, "a copy")?;
    check_use(backend, tag, slots, dst, "a copy")?;
    if src.len != dst.len {
        return Err(Error::new(
            backend,
            "copy",
            ErrorKind::OutOfBounds,
            format!("source has {} bytes but destination has {}", src.len, dst.len),
        ));
    }
    if src.slot == dst.slot && src.offset < dst.offset + dst.len && dst.offset < src.offset + src.len {
        return Err(Error::new(backend, "copy", ErrorKind::OutOfBounds, "a copy's source and destination overlap"));
    }
    Ok((src, dst))
}

impl<'b, D: Device> Recorder<'b, D> {
    pub(crate) fn new(device: &Arc<Shared<D>>) -> Self {
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
        device: &Arc<Shared<D>>,
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

/// Checks a launch's arguments against the kernel's source, through the
/// same check as [`Stream::launch`].
fn check_launch<D: Device>(slots: &[Slot<D>], kernel: &Kernel<D>, args: &[ArgKind]) -> Result<()> {
    let mut checked: SmallVec<[Arg<'_, D>; crate::device::INLINE_ARGS]> = SmallVec::new();
    for a in args {
        checked.push(match a {
            ArgKind::Buffer(u) => {
                let access = if u.write { Access::Write } else { Access::Read };
                Arg::Buffer(slots[u.slot].view(u.offset, u.len, access))
            }
            ArgKind::Scalar(s) => Arg::Scalar(s.clone()),
            ArgKind::Struct(s) => Arg::Struct(s.clone()),
        });
    }
    kernel.check_args(&checked)
}

/// Recorded work, replayed on a stream as one operation
/// ([`Graph::replay`]); holds the borrows of its bound buffers.
pub struct Graph<'b, D: Device = AnyDevice> {
    device: Arc<Shared<D>>,
    tag: u64,
    slots: Vec<Slot<D>>,
    _borrows: PhantomData<&'b mut ()>,
    steps: Vec<Step<'b, D>>,
    /// The nodes as the backend takes them, for the current bindings.
    nodes: Vec<GraphNode>,
    /// The backend's graph, where it builds its own.
    native: Option<GraphId>,
    /// Bindings or arguments changed since the nodes were handed over.
    dirty: bool,
    /// What a replay tracks ([`Graph::hulls`]), for the current nodes.
    hulls: Vec<(usize, usize, usize, bool)>,
}

impl<D: Device> std::fmt::Debug for Graph<'_, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph")
            .field("backend", &self.device.info().backend)
            .field("nodes", &self.steps.len())
            .field("native", &self.native.is_some())
            .finish()
    }
}

impl<D: Device> Drop for Graph<'_, D> {
    fn drop(&mut self) {
        if let Some(id) = self.native.take() {
            // SAFETY: the graph is owned by self; the backend frees it
            // after its queued launches (the trait's contract), and their
            // buffers are kept by their trackers' marks.
            let _ = unsafe { self.device.destroy_graph(id) };
        }
    }
}

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
    fn raw_nodes(&self) -> Result<Vec<GraphNode>> {
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
    fn hulls(&self) -> Vec<(usize, usize, usize, bool)> {
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
            None => replay_nodes(device, nodes, stream.id),
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

/// Enqueues `nodes` one by one on `stream` (backends without graphs of
/// their own). Events are skipped: recorded order already runs each wait
/// after its record. If a node fails after others were queued, the stream
/// is synchronised before the error returns (the replay's mark is never
/// stored, so its work must be over first).
fn replay_nodes<D: Device>(device: &D, nodes: &[GraphNode], stream: StreamId) -> Result<()> {
    for (k, node) in nodes.iter().enumerate() {
        // SAFETY: the nodes' handles and ranges are of the graph's borrowed
        // buffers and kernels (`Graph::replay`).
        let done = unsafe {
            match &node.op {
                GraphOp::CopyH2D { src, dst } => {
                    crate::device::pinned_address(device, *src).and_then(|host| device.copy_h2d(host, *dst, stream))
                }
                GraphOp::CopyD2H { src, dst } => {
                    crate::device::pinned_address(device, *dst).and_then(|host| device.copy_d2h(*src, host, stream))
                }
                GraphOp::CopyD2D { src, dst } => device.copy_d2d(*src, *dst, stream),
                GraphOp::Fill { dst, pattern } => device.fill_u32(*dst, *pattern, stream),
                GraphOp::Launch { kernel, config, args } => device.launch(*kernel, config, args, stream),
                GraphOp::Record { .. } | GraphOp::Wait { .. } => Ok(()),
            }
        };
        if let Err(e) = done {
            if k > 0 {
                // SAFETY: the stream is the caller's; it returns once the
                // queued nodes are done or can never run.
                let _ = unsafe { device.synchronize_stream(stream) };
            }
            return Err(e);
        }
    }
    Ok(())
}
