//! Streams of the typed layer: copies, fills and launches with automatic
//! cross-stream ordering (see the tracker module for the rules).

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::sync::Mutex;

use bytemuck::Pod;
use smallvec::SmallVec;

use super::args::Arg;
use super::buffer::{Buffer, OnDevice, Pinned, Slice, SliceMut, View};
use super::completion::{self, Completion};
use super::event::Event;
use super::marks::Spare;
use super::module::Kernel;
use super::state::same_device;
use super::state::{DeviceState, Recycler};
use super::tracker::Held;
use crate::AnyDevice;
use crate::device::{Backend, Device, INLINE_ARGS, KernelArg, LaunchConfig, StreamId};
use crate::error::{Error, ErrorKind, Result};
use crate::markers;

/// An in-order queue of work. Dropping it never blocks: work already
/// enqueued still runs, and the memory it uses stays alive until it has.
pub struct Stream<D: Device = AnyDevice> {
    pub(crate) device: Arc<DeviceState<D>>,
    pub(crate) id: StreamId,
    /// Whether events recorded here can be timed ([`crate::StreamFlags::timing`]).
    pub(crate) timing: bool,
    /// Held by an operation from its enqueue to its tracking record
    /// (`Stream::tracked`), for threads that share the stream; holds the
    /// stream's spare mark event.
    pub(crate) order: Mutex<Spare>,
}

impl<D: Device> std::fmt::Debug for Stream<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("backend", &self.device.info().backend).field("id", &self.id).finish()
    }
}

impl<D: Device> Drop for Stream<D> {
    fn drop(&mut self) {
        self.device.keep_spare(self.order.get_mut().unwrap_or_else(PoisonError::into_inner).take());
        // SAFETY: the stream is owned by self and used by nobody after this.
        let _ = unsafe { self.device.destroy_stream(self.id) };
    }
}

/// Which copy a (source kind, destination kind) pair is. Sealed.
pub trait CopyKind<Dst>: private::Sealed + 'static {
    #[doc(hidden)]
    fn enqueue<D: Device>(device: &D, src: &View<'_, D>, dst: &View<'_, D>, stream: StreamId) -> Result<()>;
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::OnDevice {}
    impl Sealed for super::Pinned {}
}

impl CopyKind<OnDevice> for Pinned {
    fn enqueue<D: Device>(device: &D, src: &View<'_, D>, dst: &View<'_, D>, stream: StreamId) -> Result<()> {
        let ptr = src.host_ptr()?;
        // SAFETY: src is a bounds-checked view of a live pinned allocation;
        // the tracker keeps the allocation alive and host-unborrowed until
        // the copy's event completes.
        unsafe { device.copy_h2d(ptr, dst.range(), stream) }
    }
}

impl CopyKind<Pinned> for OnDevice {
    fn enqueue<D: Device>(device: &D, src: &View<'_, D>, dst: &View<'_, D>, stream: StreamId) -> Result<()> {
        let ptr = dst.host_ptr()?;
        // SAFETY: as for H2D; the destination view is exclusively borrowed.
        unsafe { device.copy_d2h(src.range(), ptr, stream) }
    }
}

impl CopyKind<OnDevice> for OnDevice {
    fn enqueue<D: Device>(device: &D, src: &View<'_, D>, dst: &View<'_, D>, stream: StreamId) -> Result<()> {
        // SAFETY: both views are bounds-checked views of live device
        // allocations whose uses the tracker orders across streams.
        unsafe { device.copy_d2d(src.range(), dst.range(), stream) }
    }
}

impl<D: Device> Stream<D> {
    /// The raw handle, for the `unsafe` methods of [`Device`].
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The backend of the stream's device.
    pub fn backend(&self) -> Backend {
        self.device.info().backend
    }

    /// Blocks the host until all enqueued work is done; reports errors of
    /// work that ran asynchronously.
    pub fn synchronize(&self) -> Result<()> {
        let _range = markers::range(c"hetero synchronize");
        // SAFETY: the stream is owned by self.
        let done = unsafe { self.device.synchronize_stream(self.id) };
        self.device.reap();
        done
    }

    /// `true` when all enqueued work is done.
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the stream is owned by self.
        unsafe { self.device.query_stream(self.id) }
    }

    /// Records `event` at the current end of the stream.
    pub fn record(&self, event: &Event<D>) -> Result<()> {
        same_device(&self.device, &event.device, "record_event")?;
        // SAFETY: both are owned by the typed layer; a user's Event tracks no memory.
        unsafe { self.device.record_event(event.id, self.id) }?;
        event.untimed.store(!self.timing, Ordering::Relaxed);
        Ok(())
    }

    /// Checks that every view is of this device and makes the stream wait
    /// (on the device) for conflicting uses of them on other streams; returns
    /// the uses, unlocked, for the operation's record.
    ///
    /// The trackers are held for the waits and again for the record, not
    /// across the enqueue: a use that conflicts with this one needs an
    /// overlapping view, which the borrow rules keep out for the whole
    /// operation (a write needs `&mut`), so none can be stored meanwhile;
    /// and threads reading one buffer (shared inputs) do not take turns for
    /// each other's driver calls. A failure here leaves some device-side
    /// waits queued and no work: harmless.
    fn wait_for<'v>(&self, views: &[&'v View<'_, D>]) -> Result<Held<'v>> {
        for v in views {
            same_device(&self.device, v.device, "stream operation")?;
        }
        let mut held = Held::new();
        for v in views {
            held.add(v.tracker, v.offset..v.offset + v.len, v.access);
        }
        if held.may_wait(self.id) {
            held.lock();
            held.before(&**self.device, self.id)?;
            held.unlock();
        }
        Ok(held)
    }

    /// Runs `enqueue` between the tracker steps of every view it uses.
    ///
    /// Failure-atomic: the mark's event is made before `enqueue` runs, and
    /// if recording it fails twice after `enqueue` queued work
    /// (`DeviceState::mark_enqueued`), the stream is synchronised before the
    /// error returns, so the untracked work has finished (or can never run)
    /// before anyone can free or touch its memory. An error after the
    /// enqueue (a first recording that failed) leaves the work queued and
    /// tracked: the caller cannot tell whether it has run.
    pub(super) fn tracked(&self, views: &[&View<'_, D>], enqueue: impl FnOnce() -> Result<()>) -> Result<()> {
        let mut held = self.wait_for(views)?;
        // One operation of this stream at a time from enqueue to record, so
        // that marks reach the trackers in stream order (a later mark stands
        // for the earlier ones of its stream). `enqueue` must not wait for
        // the device: a thread sharing the stream would wait with it, even
        // for a gate that it is the one to open.
        let mut spare = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        self.device.ready_spare(&mut spare)?;
        enqueue()?;
        // SAFETY: the stream is owned by self.
        match unsafe { self.device.mark_enqueued(self.id, &mut spare) } {
            Ok((mark, error)) => {
                held.lock();
                held.after(&mut Recycler { shared: &self.device, spare: &mut spare }, self.id, mark);
                error.map_or(Ok(()), Err)
            }
            Err(e) => {
                // SAFETY: the stream is owned by self. Its result does not
                // matter: it returns once the work is done or can never run.
                let _ = unsafe { self.device.synchronize_stream(self.id) };
                Err(e)
            }
        }
    }

    /// Runs `copy`, a synchronous copy that returns only once the stream
    /// has run it (or never can), after the waits for every view it uses.
    ///
    /// It records no mark and so takes no order lock: the use is over when
    /// `copy` returns, and a conflicting use cannot be stored meanwhile (as
    /// in [`Stream::tracked`]). Other threads enqueuing on the stream are
    /// never held up by the device wait (`enqueue_is_not_held_by_a_blocking_copy`).
    fn blocking(&self, views: &[&View<'_, D>], copy: impl FnOnce() -> Result<()>) -> Result<()> {
        self.wait_for(views)?;
        copy()?;
        self.device.reap();
        Ok(())
    }

    /// Enqueues a copy between equal-length slices: pinned to device,
    /// device to pinned, or device to device.
    pub fn copy<'s, 'd, T: Pod, KS: CopyKind<KD>, KD: 'static>(
        &self,
        src: impl Into<Slice<'s, T, KS, D>>,
        dst: impl Into<SliceMut<'d, T, KD, D>>,
    ) -> Result<()> {
        let _range = markers::range(c"hetero copy");
        let (src, dst) = (src.into(), dst.into());
        if src.len() != dst.len() {
            return Err(Error::new(
                self.device.info().backend,
                "copy",
                ErrorKind::OutOfBounds,
                format!("source has {} elements but destination has {}", src.len(), dst.len()),
            ));
        }
        if src.is_empty() {
            return Ok(());
        }
        let (sv, dv) = (src.view(), dst.view());
        self.tracked(&[&sv, &dv], || KS::enqueue(&**self.device, &sv, &dv, self.id))
    }

    /// Copies pageable host memory into device memory. Blocks until the
    /// copy and the work enqueued before it on this stream are done, since
    /// `src` is only borrowed for this call; it returns (also with an
    /// error) only once the device can no longer read `src`.
    pub fn copy_from_host<'d, T: Pod>(&self, src: &[T], dst: impl Into<SliceMut<'d, T, OnDevice, D>>) -> Result<()> {
        let _range = markers::range(c"hetero copy_from_host");
        let dst = dst.into();
        self.check_len(src.len(), dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        let dv = dst.view();
        // An error from copy_h2d_sync may come after the copy was queued; it
        // returns only once the stream is done or can never run, so src is
        // free either way. It synchronised the stream: no second wait.
        self.blocking(&[&dv], || {
            // SAFETY: src is borrowed for the whole call, which returns once the copy is done.
            unsafe { self.device.copy_h2d_sync(src.as_ptr().cast(), dv.range(), self.id) }
        })
    }

    /// Copies device memory into pageable host memory. Blocks until the
    /// copy and the work enqueued before it on this stream are done, and
    /// reports that work's errors; it returns (also with an error) only
    /// once the device can no longer write `dst`.
    pub fn copy_to_host<'s, T: Pod>(&self, src: impl Into<Slice<'s, T, OnDevice, D>>, dst: &mut [T]) -> Result<()> {
        let _range = markers::range(c"hetero copy_to_host");
        let src = src.into();
        self.check_len(src.len(), dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        let sv = src.view();
        // `copy_d2h_sync` synchronises the stream, reporting earlier work's
        // errors: no second wait.
        self.blocking(&[&sv], || {
            // SAFETY: dst is borrowed for the whole call, which returns once
            // the copy is done (or can never run), also with an error.
            unsafe { self.device.copy_d2h_sync(sv.range(), dst.as_mut_ptr().cast(), self.id) }
        })
    }

    /// Device memory for `len` elements for use on this stream (contents
    /// unspecified until written, or the allocator's debug fill pattern).
    /// Besides idle cached blocks it may reuse a block whose last uses are
    /// still queued on this stream: work enqueued here later runs after
    /// them, and other streams and the host wait for them through the
    /// tracker, so the new buffer never overlaps the old work.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<Buffer<T, OnDevice, D>> {
        let mut buffer = Buffer::alloc(&self.device, len, Some(self.id))?;
        if let Some(pattern) = self.device.cache().fill {
            self.fill_block(&mut buffer, pattern)?;
        }
        Ok(buffer)
    }

    /// Fills a new buffer's whole allocation (rounded down to 4 bytes) with
    /// the allocator's debug pattern.
    pub(crate) fn fill_block<T: Pod>(&self, buffer: &mut Buffer<T, OnDevice, D>, pattern: u32) -> Result<()> {
        let bytes = buffer.held_bytes() / 4 * 4;
        if bytes == 0 {
            return Ok(());
        }
        self.fill_view(&buffer.block_view(bytes), pattern)
    }

    /// A future that resolves once all work enqueued so far on this stream
    /// has completed, with its error if it failed; it does not block a
    /// thread (see [`Completion`]) and may outlive the stream.
    pub fn synchronize_async(&self) -> Completion<'static, D> {
        // SAFETY: the stream is owned by self.
        match unsafe { self.device.mark(self.id) } {
            Ok(mark) => Completion::new(&self.device, mark.id(), Some(mark)),
            Err(e) => Completion::failed(&self.device, e),
        }
    }

    /// Runs `f` on hetero's waker thread once all work enqueued so far on
    /// this stream has completed, with its error if it failed. Later work
    /// on the stream is not held up; the callback runs even if the stream
    /// or the context is dropped first. Keep it short: callbacks of a
    /// device run one after another, and one that blocks on another
    /// callback or on a hetero future of the same device waits forever.
    pub fn then(&self, f: impl FnOnce(Result<()>) + Send + 'static) -> Result<()> {
        // SAFETY: the stream is owned by self.
        let mark = unsafe { self.device.mark(self.id) }?;
        completion::then(&self.device, self.id, mark, Box::new(f))
    }

    /// A new device buffer holding a copy of `src`; returns once copied.
    pub fn upload<T: Pod>(&self, src: &[T]) -> Result<Buffer<T, OnDevice, D>> {
        let mut buffer = Buffer::alloc(&self.device, src.len(), Some(self.id))?;
        self.copy_from_host(src, &mut buffer)?;
        Ok(buffer)
    }

    /// The contents of a device slice, after the work queued before it on
    /// this stream (and the writes it waits for) is done.
    pub fn download<'s, T: Pod>(&self, src: impl Into<Slice<'s, T, OnDevice, D>>) -> Result<Vec<T>> {
        let src = src.into();
        let mut out = vec![T::zeroed(); src.len()];
        self.copy_to_host(src, &mut out)?;
        Ok(out)
    }

    /// Device memory for `len` elements, zeroed in stream order: work
    /// enqueued on this stream later sees zeros (other streams wait through
    /// the tracker). Blocks the host only when the size is not a multiple of
    /// 4 bytes (then the zeros are copied from the host).
    pub fn alloc_zeros<T: Pod>(&self, len: usize) -> Result<Buffer<T, OnDevice, D>> {
        let mut buffer = Buffer::alloc(&self.device, len, Some(self.id))?;
        let bytes = len * std::mem::size_of::<T>();
        if bytes == 0 {
            return Ok(buffer);
        }
        if bytes.is_multiple_of(4) {
            self.fill_view(&SliceMut::from(&mut buffer).into_view(), 0)?;
        } else {
            self.copy_from_host(&vec![T::zeroed(); len], &mut buffer)?;
        }
        Ok(buffer)
    }

    fn check_len(&self, src: usize, dst: usize) -> Result<()> {
        if src != dst {
            return Err(Error::new(
                self.device.info().backend,
                "copy",
                ErrorKind::OutOfBounds,
                format!("source has {src} elements but destination has {dst}"),
            ));
        }
        Ok(())
    }

    /// Fills a device slice with `value`; `T` must be 4 bytes wide.
    pub fn fill<'d, T: Pod>(&self, dst: impl Into<SliceMut<'d, T, OnDevice, D>>, value: T) -> Result<()> {
        let dst = dst.into();
        let pattern: u32 = bytemuck::try_cast(value).map_err(|_| {
            Error::new(
                self.device.info().backend,
                "fill",
                ErrorKind::OutOfBounds,
                format!("fill takes 4-byte elements, not {} bytes", std::mem::size_of::<T>()),
            )
        })?;
        if dst.is_empty() {
            return Ok(());
        }
        self.fill_view(&dst.view(), pattern)
    }

    /// Enqueues a fill of a writable device view with 32-bit `pattern`
    /// (its byte length a multiple of 4).
    fn fill_view(&self, view: &View<'_, D>, pattern: u32) -> Result<()> {
        let _range = markers::range(c"hetero fill");
        self.tracked(&[view], || {
            // SAFETY: a bounds-checked view of a live device allocation
            // whose uses the tracker orders across streams.
            unsafe { self.device.fill_u32(view.range(), pattern, self.id) }
        })
    }

    /// Enqueues `kernel` with `args` in its parameter order.
    ///
    /// Launch shapes are checked against the device's limits, and the
    /// arguments against the parameter list of the kernel's source (count,
    /// buffer or scalar, scalar type, element type, a writable slice for a
    /// pointer declared without `const`); buffers used on other streams are
    /// waited for (device-side) according to their read/write access.
    ///
    /// # Safety
    /// The kernel is foreign code: it must match `args` in number and type,
    /// read and write only within the slices passed (a read-only slice must
    /// not be written; for an argument passed with [`Arg::whole_buffer`],
    /// the slice's elements indexed from its buffer's start), not race between its threads (an element one thread
    /// writes is not accessed by another without synchronisation), and
    /// finish in finite time.
    pub unsafe fn launch(&self, kernel: &Kernel<D>, config: LaunchConfig, args: &[Arg<'_, D>]) -> Result<()> {
        let _range = markers::range(&kernel.marker);
        same_device(&self.device, &kernel.device, "launch")?;
        // The shape is validated by the backend (`LaunchConfig::validate`, the
        // same check and message everywhere), before anything is enqueued.
        kernel.check_args(args)?;
        // Up to `INLINE_ARGS` arguments, nothing here allocates. One pass
        // and no `collect` into a `Result`: that moves the whole inline
        // array, a sizeable share of the layer's cost per launch.
        let mut views: SmallVec<[&View<'_, D>; INLINE_ARGS]> = SmallVec::new();
        let mut raw: SmallVec<[KernelArg; INLINE_ARGS]> = SmallVec::new();
        for arg in args {
            raw.push(match arg {
                Arg::Buffer(v) => {
                    views.push(v);
                    KernelArg::Buffer { alloc: v.alloc, offset: if v.from_start { 0 } else { v.offset } }
                }
                Arg::Scalar(s) => s.clone(),
                // `check_args` refused structs without bytes already.
                Arg::Struct(s) => s.raw(self.backend())?,
            });
        }
        self.tracked(&views, || {
            // SAFETY: buffer views are live and bounds-checked; the caller
            // guarantees the kernel stays within them.
            unsafe { self.device.launch(kernel.id, &config, &raw, self.id) }
        })
    }
}
