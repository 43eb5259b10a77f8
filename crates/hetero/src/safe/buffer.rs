//! Typed device and pinned buffers, and slices of them.
//!
//! A [`Buffer`] owns one allocation and its [`Tracker`]. Dropping it never
//! blocks: the allocation is freed once every queued use has completed. A pinned buffer hands its contents to
//! the host only after its queued uses have completed
//! ([`PinnedBuffer::host_slice`]). Slices borrow their buffer, so the
//! borrow checker keeps a buffer alive, and unaliased where written, for
//! as long as a slice is used to enqueue work.

use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};
use std::ptr::NonNull;
use std::sync::Arc;

use bytemuck::Pod;

use super::cache::{Block, HostAddr, MemoryKind, Taken};
use super::state::DeviceState;
use super::tracker::{Access, Tracker};
use crate::AnyDevice;
use crate::device::{AllocId, Device, DeviceRange, StreamId};
use crate::error::{Error, ErrorKind, Result};

/// Marker: memory on the device.
#[derive(Debug)]
pub enum OnDevice {}
/// Marker: page-locked host memory that asynchronous copies can use.
#[derive(Debug)]
pub enum Pinned {}

/// An owned allocation of `len` elements of `T`, on the device (`K =
/// OnDevice`) or pinned on the host (`K = Pinned`).
pub struct Buffer<T, K, D: Device = AnyDevice> {
    pub(crate) device: Arc<DeviceState<D>>,
    pub(crate) alloc: AllocId,
    pub(crate) tracker: Tracker,
    /// The host address of a pinned allocation, read once when it was
    /// made (it stays valid until the free); `None` for device memory.
    host: Option<HostAddr>,
    len: usize,
    /// Which memory, and the bytes held from the allocator (a whole block).
    kind: MemoryKind,
    held: usize,
    /// The allocation goes back to the cache when dropped.
    cached: bool,
    _marker: PhantomData<(fn() -> T, K)>,
}

/// A buffer in device memory.
pub type DeviceBuffer<T, D = AnyDevice> = Buffer<T, OnDevice, D>;
/// A buffer in pinned host memory.
pub type PinnedBuffer<T, D = AnyDevice> = Buffer<T, Pinned, D>;

impl<T, K, D: Device> std::fmt::Debug for Buffer<T, K, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Buffer").field("backend", &self.device.info().backend).field("len", &self.len).finish()
    }
}

impl<T: Pod, K, D: Device> Buffer<T, K, D> {
    /// Wraps what the allocator gave; it must hold `len * size_of::<T>()`
    /// bytes (aligned for `T` when pinned) and be owned by the new buffer,
    /// which inherits the marks of its pending uses.
    pub(crate) fn from_taken(device: Arc<DeviceState<D>>, taken: Taken, kind: MemoryKind, len: usize) -> Self {
        Self {
            device,
            alloc: taken.alloc,
            tracker: Tracker::inheriting(taken.inherited),
            host: taken.host,
            len,
            kind,
            held: taken.bytes,
            cached: taken.cached,
            _marker: PhantomData,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the buffer holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A read-only view of `range` (in elements); errors when it is out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<Slice<'_, T, K, D>> {
        let (offset, len) = self.bounds(range)?;
        Ok(Slice { buf: self, offset, len })
    }

    /// A writable view of `range` (in elements); errors when it is out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<SliceMut<'_, T, K, D>> {
        let (offset, len) = self.bounds(range)?;
        Ok(SliceMut { buf: self, offset, len, _exclusive: PhantomData })
    }

    /// Two writable views, of elements `[0, mid)` and `[mid, len)`: their
    /// uses are tracked per range, so work on one never waits for work on
    /// the other (see [`SliceMut::split_at_mut`]).
    pub fn split_at_mut(&mut self, mid: usize) -> Result<Halves<'_, T, K, D>> {
        SliceMut::from(self).split_at_mut(mid)
    }

    /// `true` when no queued work uses the buffer any more.
    pub fn is_idle(&self) -> Result<bool> {
        self.tracker.is_idle(&**self.device)
    }

    fn bounds(&self, range: impl RangeBounds<usize>) -> Result<(usize, usize)> {
        self.bounds_within(range, self.len)
    }

    /// `range` of a view of `len` elements (at most the buffer's) as its
    /// start and length within that view; an error when out of bounds.
    fn bounds_within(&self, range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
        let start = match range.start_bound() {
            Bound::Included(&s) => Some(s),
            Bound::Excluded(&s) => s.checked_add(1),
            Bound::Unbounded => Some(0),
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1),
            Bound::Excluded(&e) => Some(e),
            Bound::Unbounded => Some(len),
        };
        match (start, end) {
            (Some(s), Some(e)) if s <= e && e <= len => Ok((s, e - s)),
            _ => Err(Error::new(
                self.device.info().backend,
                "slice",
                ErrorKind::OutOfBounds,
                format!(
                    "element range {} is outside a {} of {len} elements",
                    show_range(range.start_bound(), range.end_bound()),
                    if len == self.len { "buffer" } else { "slice" }
                ),
            )),
        }
    }
}

impl<T: Pod, D: Device> DeviceBuffer<T, D> {
    /// Device memory for `len` elements, contents unspecified, from the
    /// allocator (reusing blocks whose pending uses are all on `stream`,
    /// when given).
    pub(crate) fn alloc(device: &Arc<DeviceState<D>>, len: usize, stream: Option<StreamId>) -> Result<Self> {
        let bytes = byte_len::<T, D>(device, len, "alloc_device")?;
        let taken = device.take(MemoryKind::Device, bytes, stream)?;
        Ok(Self::from_taken(Arc::clone(device), taken, MemoryKind::Device, len))
    }

    /// A writable view of the whole allocation, also past the last
    /// element (the allocator's debug fill covers the whole block).
    pub(crate) fn block_view(&mut self, bytes: usize) -> View<'_, D> {
        View {
            device: &self.device,
            alloc: self.alloc,
            tracker: &self.tracker,
            host: None,
            elem: crate::signature::c_name::<T>,
            offset: 0,
            len: bytes.min(self.held),
            access: Access::Write,
            from_start: false,
        }
    }

    /// Bytes the allocation holds (at least the elements').
    pub(crate) fn held_bytes(&self) -> usize {
        self.held
    }
}

/// The size in bytes of `len` elements of `T`, or an error naming `call`
/// when it overflows.
pub(crate) fn byte_len<T, D: Device>(device: &DeviceState<D>, len: usize, call: &'static str) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
        Error::new(
            device.info().backend,
            call,
            ErrorKind::OutOfMemory,
            format!("{len} elements overflow the address space"),
        )
    })
}

impl<T: Pod, D: Device> PinnedBuffer<T, D> {
    /// Reads the allocation's host address once, for every later copy;
    /// `ptr` is what [`Device::pinned_ptr`] returned for it.
    pub(crate) fn set_host(&mut self, ptr: NonNull<u8>) {
        self.host = Some(HostAddr(ptr));
    }

    fn host_ptr(&self) -> Result<*mut T> {
        Ok(host_base(self.host, &self.device)?.as_ptr().cast())
    }

    /// The contents, after waiting for every queued copy that uses the buffer.
    pub fn host_slice(&self) -> Result<&[T]> {
        self.tracker.wait_host(&**self.device)?;
        let ptr = self.host_ptr()?;
        // SAFETY: the allocation holds len elements of T, aligned for T
        // (checked when it was allocated);
        // no queued work uses it (waited above), and new work needs
        // `&mut self` (writes) or ends before the host can observe it
        // through this shared borrow (reads do not change the bytes).
        Ok(unsafe { std::slice::from_raw_parts(ptr, self.len) })
    }

    /// The contents for writing, after waiting for every queued use.
    pub fn host_slice_mut(&mut self) -> Result<&mut [T]> {
        self.tracker.wait_host(&**self.device)?;
        let ptr = self.host_ptr()?;
        // SAFETY: as in host_slice; `&mut self` also excludes any other
        // host or device use while the returned borrow lives.
        Ok(unsafe { std::slice::from_raw_parts_mut(ptr, self.len) })
    }
}

impl<T, K, D: Device> Drop for Buffer<T, K, D> {
    fn drop(&mut self) {
        let pending = std::mem::take(&mut self.tracker).into_marks();
        let block = Block { alloc: self.alloc, bytes: self.held, host: self.host, pending };
        // SAFETY: the buffer owns the allocation and gives it up here;
        // `pending` holds a mark after every queued use; no slice or host
        // borrow outlives `self`.
        unsafe { self.device.give_back(self.kind, block, self.cached) };
    }
}

/// `a..b` as a user wrote it (`5..`, `..=7`, `..`).
fn show_range(start: Bound<&usize>, end: Bound<&usize>) -> String {
    let start = match start {
        Bound::Included(s) => s.to_string(),
        Bound::Excluded(s) => format!("{}", *s as u128 + 1),
        Bound::Unbounded => String::new(),
    };
    let end = match end {
        Bound::Included(e) => format!("={e}"),
        Bound::Excluded(e) => e.to_string(),
        Bound::Unbounded => String::new(),
    };
    format!("{start}..{end}")
}

/// The two writable views [`Buffer::split_at_mut`] returns.
pub type Halves<'a, T, K, D> = (SliceMut<'a, T, K, D>, SliceMut<'a, T, K, D>);

/// A read-only view of part of a buffer.
#[derive(Debug)]
pub struct Slice<'a, T, K, D: Device = AnyDevice> {
    pub(crate) buf: &'a Buffer<T, K, D>,
    pub(crate) offset: usize,
    pub(crate) len: usize,
}

/// A writable view of part of a buffer.
#[derive(Debug)]
pub struct SliceMut<'a, T, K, D: Device = AnyDevice> {
    pub(crate) buf: &'a Buffer<T, K, D>,
    pub(crate) offset: usize,
    pub(crate) len: usize,
    _exclusive: PhantomData<&'a mut Buffer<T, K, D>>,
}

// A read-only view is a shared borrow: copies of it are as sound as the one.
impl<T, K, D: Device> Clone for Slice<'_, T, K, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, K, D: Device> Copy for Slice<'_, T, K, D> {}

/// Read-only view of part of a device buffer.
pub type DeviceSlice<'a, T, D = AnyDevice> = Slice<'a, T, OnDevice, D>;
/// Writable view of part of a device buffer.
pub type DeviceSliceMut<'a, T, D = AnyDevice> = SliceMut<'a, T, OnDevice, D>;
/// Read-only view of part of a pinned buffer.
pub type PinnedSlice<'a, T, D = AnyDevice> = Slice<'a, T, Pinned, D>;
/// Writable view of part of a pinned buffer.
pub type PinnedSliceMut<'a, T, D = AnyDevice> = SliceMut<'a, T, Pinned, D>;

impl<'a, T: Pod, K, D: Device> From<&'a Buffer<T, K, D>> for Slice<'a, T, K, D> {
    fn from(buf: &'a Buffer<T, K, D>) -> Self {
        Slice { buf, offset: 0, len: buf.len }
    }
}

impl<'a, T: Pod, K, D: Device> From<&'a mut Buffer<T, K, D>> for SliceMut<'a, T, K, D> {
    fn from(buf: &'a mut Buffer<T, K, D>) -> Self {
        let len = buf.len;
        SliceMut { buf, offset: 0, len, _exclusive: PhantomData }
    }
}

/// What the typed layer needs of a view to enqueue work on it (opaque).
#[doc(hidden)]
pub struct View<'a, D: Device> {
    pub(crate) device: &'a Arc<DeviceState<D>>,
    pub(crate) alloc: AllocId,
    pub(crate) tracker: &'a Tracker,
    host: Option<HostAddr>,
    /// The element's C type when it is a C scalar type; called only by
    /// launch checks, so copies pay nothing for it.
    pub(crate) elem: fn() -> Option<&'static str>,
    /// Byte offset and length within the allocation.
    pub(crate) offset: usize,
    pub(crate) len: usize,
    pub(crate) access: Access,
    /// A launch passes the allocation from its start, not from `offset`
    /// ([`crate::Arg::whole_buffer`]); tracked as `offset..offset + len` all the same.
    pub(crate) from_start: bool,
}

impl<'a, T: Pod, K, D: Device> Slice<'a, T, K, D> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the slice holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn view(&self) -> View<'a, D> {
        view_of(self.buf, self.offset, self.len, Access::Read)
    }

    /// Two read-only views, of elements `[0, mid)` and `[mid, len)`; an
    /// error when `mid` is past the end.
    pub fn split_at(self, mid: usize) -> Result<(Self, Self)> {
        check_split(self.buf, mid, self.len)?;
        let (buf, offset, len) = (self.buf, self.offset, self.len);
        Ok((Slice { buf, offset, len: mid }, Slice { buf, offset: offset + mid, len: len - mid }))
    }

    /// The view, for as long as the buffer is borrowed.
    pub(crate) fn into_view(self) -> View<'a, D> {
        self.view()
    }
}

/// The view of `len` elements from element `offset` of `buf`.
fn view_of<T: Pod, K, D: Device>(buf: &Buffer<T, K, D>, offset: usize, len: usize, access: Access) -> View<'_, D> {
    let size = std::mem::size_of::<T>();
    View {
        device: &buf.device,
        alloc: buf.alloc,
        tracker: &buf.tracker,
        host: buf.host,
        elem: crate::signature::c_name::<T>,
        offset: offset * size,
        len: len * size,
        access,
        from_start: false,
    }
}

impl<'a, T: Pod, K, D: Device> SliceMut<'a, T, K, D> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` when the slice holds no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn view(&self) -> View<'_, D> {
        view_of(self.buf, self.offset, self.len, Access::Write)
    }

    /// A read-only view of `range` of the slice's elements (counted from
    /// its start); an error when out of bounds.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<Slice<'_, T, K, D>> {
        let (offset, len) = self.buf.bounds_within(range, self.len)?;
        Ok(Slice { buf: self.buf, offset: self.offset + offset, len })
    }

    /// A writable view of `range` of the slice's elements (counted from its
    /// start), for as long as `self` is borrowed; an error when out of bounds.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<SliceMut<'_, T, K, D>> {
        let (offset, len) = self.buf.bounds_within(range, self.len)?;
        Ok(SliceMut { buf: self.buf, offset: self.offset + offset, len, _exclusive: PhantomData })
    }

    /// The same elements, writable for as long as `self` is borrowed: to
    /// pass the slice on and use it again afterwards.
    pub fn reborrow(&mut self) -> SliceMut<'_, T, K, D> {
        SliceMut { buf: self.buf, offset: self.offset, len: self.len, _exclusive: PhantomData }
    }

    /// The view, holding the buffer's exclusive borrow for `'a`.
    pub(crate) fn into_view(self) -> View<'a, D> {
        view_of(self.buf, self.offset, self.len, Access::Write)
    }

    /// Two writable views of disjoint elements, `[0, mid)` and `[mid,
    /// len)`; an error when `mid` is past the end. Their uses are tracked
    /// per byte range: two streams may write the two halves at the same
    /// time, while uses of overlapping ranges still wait for each other.
    pub fn split_at_mut(self, mid: usize) -> Result<(Self, Self)> {
        check_split(self.buf, mid, self.len)?;
        let (buf, offset, len) = (self.buf, self.offset, self.len);
        Ok((
            SliceMut { buf, offset, len: mid, _exclusive: PhantomData },
            SliceMut { buf, offset: offset + mid, len: len - mid, _exclusive: PhantomData },
        ))
    }

    /// Writable views of consecutive `chunk` elements (the last may be
    /// shorter), each tracked on its own as with [`Self::split_at_mut`];
    /// an error when `chunk` is 0.
    pub fn chunks_mut(self, chunk: usize) -> Result<Vec<Self>> {
        if chunk == 0 {
            return Err(Error::new(
                self.buf.device.info().backend,
                "chunks_mut",
                ErrorKind::OutOfBounds,
                "chunks of 0 elements were asked for; give a chunk length of at least 1",
            ));
        }
        let (buf, offset, len) = (self.buf, self.offset, self.len);
        Ok((0..len)
            .step_by(chunk)
            .map(|at| SliceMut { buf, offset: offset + at, len: chunk.min(len - at), _exclusive: PhantomData })
            .collect())
    }
}

/// Errors unless `mid` splits a view of `len` elements (`mid <= len`).
fn check_split<T, K, D: Device>(buf: &Buffer<T, K, D>, mid: usize, len: usize) -> Result<()> {
    if mid > len {
        return Err(Error::new(
            buf.device.info().backend,
            "split_at",
            ErrorKind::OutOfBounds,
            format!("split at element {mid} is past the end of a slice of {len} elements"),
        ));
    }
    Ok(())
}

impl<'a, D: Device> View<'a, D> {
    /// `len` bytes from byte `offset` of this view, with `access`; within
    /// the view when the caller checked the bounds.
    pub(crate) fn part(&self, offset: usize, len: usize, access: Access) -> View<'a, D> {
        View {
            device: self.device,
            alloc: self.alloc,
            tracker: self.tracker,
            host: self.host,
            elem: self.elem,
            offset: self.offset + offset,
            len,
            access,
            from_start: self.from_start,
        }
    }

    pub(crate) fn range(&self) -> DeviceRange {
        DeviceRange { alloc: self.alloc, offset: self.offset, len: self.len }
    }

    /// Host address of the view's first byte (pinned memory only).
    pub(crate) fn host_ptr(&self) -> Result<*mut u8> {
        let base = host_base(self.host, self.device)?;
        // SAFETY: offset lies within the allocation (slices are bounds-checked).
        Ok(unsafe { base.as_ptr().add(self.offset) })
    }
}

/// The host address a pinned buffer keeps, or an error for device memory
/// (which the sealed copy kinds never ask for).
fn host_base<D: Device>(host: Option<HostAddr>, device: &DeviceState<D>) -> Result<NonNull<u8>> {
    host.map(|h| h.0).ok_or_else(|| {
        Error::new(device.info().backend, "pinned_ptr", ErrorKind::InvalidHandle, "device memory has no host address")
    })
}
