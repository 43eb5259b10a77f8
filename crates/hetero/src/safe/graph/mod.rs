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

use super::args::{Arg, StructArg};
use super::buffer::{Buffer, OnDevice, Pinned, SliceMut, View};
use super::module::Kernel;
use super::state::DeviceState;
use super::state::same_device;
use super::stream::{CopyKind, Stream};
use super::tracker::Access;
use crate::AnyDevice;
use crate::device::{Device, DeviceRange, GraphId, GraphNode, GraphOp, KernelArg, LaunchConfig, check_kernel_limits};
use crate::error::{Error, ErrorKind, Result};
use crate::markers;

/// Records copies, fills and launches on graph streams into a [`Graph`].
/// Made by [`super::Context::recorder`]; `'b` is how long the bound
/// buffers are borrowed.
pub struct Recorder<'b, D: Device = AnyDevice> {
    device: Arc<DeviceState<D>>,
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

/// Recorded work, replayed on a stream as one operation
/// ([`Graph::replay`]); holds the borrows of its bound buffers.
pub struct Graph<'b, D: Device = AnyDevice> {
    device: Arc<DeviceState<D>>,
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

mod checks;
mod record;
mod replay;
