//! Memory and streams shared with other libraries: adopting theirs
//! ([`Context::adopt_buffer`], [`Context::borrow_buffer`],
//! [`Context::adopt_stream`]), handing out hetero's own
//! ([`Buffer::raw_memory`], [`Stream::raw`]), and ordering a stream that
//! both enqueue on with hetero's tracking ([`Stream::acquire`]).
//!
//! An adopted buffer is tracked like any other: dropping it never blocks,
//! and its memory goes back to its owner (the release runs) only once
//! every use hetero queued has completed.

use std::sync::Arc;

use bytemuck::Pod;

use super::buffer::{Buffer, DeviceBuffer, SliceMut, byte_len};
use super::cache::{MemoryKind, Taken};
use super::context::Context;
use super::stream::Stream;
use crate::device::{Device, RawMemory, RawStream, Release, StreamFlags};
use crate::error::Result;

impl<D: Device> Context<D> {
    /// `len` elements of device memory that another library allocated, as
    /// a buffer of this device. When the buffer is dropped and every use
    /// queued on it has completed, `release` runs (to drop the other
    /// library's reference, or free the memory). A refusal (see
    /// [`Device::adopt_memory`]) runs `release` before it returns.
    ///
    /// # Safety
    /// `memory` must hold `len` elements of `T` in this device's memory
    /// (aligned for `T`), valid until `release` runs, and no one else may
    /// use them meanwhile except in order with hetero's work on them: on a
    /// stream that [`Stream::acquire`]s the buffer, or after hetero's work
    /// has completed.
    pub unsafe fn adopt_buffer<T: Pod>(
        &self,
        memory: RawMemory,
        len: usize,
        release: Option<Release>,
    ) -> Result<DeviceBuffer<T, D>> {
        let device = self.state();
        let bytes = byte_len::<T, D>(device, len, "adopt_memory")?;
        // SAFETY: the caller's contract.
        let alloc = unsafe { device.adopt_memory(memory, bytes, release)? };
        // `bytes: 0`: the allocator holds none of it, so its statistics
        // stay as they were, and `cached: false`: the block never goes to
        // the cache, only back to its owner once its uses have completed.
        let taken = Taken { alloc, bytes: 0, fresh: false, cached: false, host: None, inherited: Default::default() };
        Ok(Buffer::from_taken(Arc::clone(device), taken, MemoryKind::Device, len))
    }

    /// Lends `len` elements of another library's device memory to `f` as a
    /// writable slice, and returns only once every use `f` queued on it has
    /// completed (or can never run): the memory is hetero's for this call
    /// only. An error of that final wait is returned after `f`'s result is
    /// dropped.
    ///
    /// # Safety
    /// As [`Context::adopt_buffer`], with the memory valid until this call
    /// returns.
    pub unsafe fn borrow_buffer<T: Pod, R>(
        &self,
        memory: RawMemory,
        len: usize,
        f: impl for<'a> FnOnce(SliceMut<'a, T, super::OnDevice, D>) -> R,
    ) -> Result<R> {
        // SAFETY: the caller's contract; the buffer is dropped below only
        // after its uses have completed, before this call returns.
        let mut buffer = unsafe { self.adopt_buffer::<T>(memory, len, None)? };
        let result = f(SliceMut::from(&mut buffer));
        buffer.wait_idle()?;
        Ok(result)
    }

    /// A stream that another library created, as a stream of this device:
    /// work hetero enqueues on it runs in order with the other library's.
    /// Dropping the returned stream never destroys the native one.
    /// Refused on the host backend, which has no native streams.
    ///
    /// # Safety
    /// `stream` must be a live stream of this device (on OpenCL an in-order
    /// queue of its context and device) that outlives the returned
    /// [`Stream`] and every operation enqueued through it.
    pub unsafe fn adopt_stream(&self, stream: RawStream) -> Result<Stream<D>> {
        // SAFETY: the caller's contract.
        let id = unsafe { self.state().adopt_stream(stream)? };
        // Events recorded on it may be timed; where the native queue
        // cannot time them (an OpenCL queue made without profiling), the
        // backend refuses `elapsed_ms` with its error.
        Ok(self.wrap_stream(id, StreamFlags::default()))
    }
}

impl<T: Pod, K, D: Device> Buffer<T, K, D> {
    /// The native handle of the memory, for another library: an address
    /// on CUDA, HIP and the host, the `cl_mem` on OpenCL. Using it is that
    /// library's `unsafe` business: only in order with hetero's work on the
    /// buffer (on a stream that [`Stream::acquire`]d it, or after its
    /// uses have completed), and only while the buffer lives.
    pub fn raw_memory(&self) -> Result<RawMemory> {
        // SAFETY: the buffer owns the allocation.
        unsafe { self.device.raw_memory(self.alloc) }
    }

    /// Waits until no queued work uses the buffer.
    pub fn wait_idle(&self) -> Result<()> {
        self.tracker.wait_host(&**self.device)
    }
}

impl<D: Device> Stream<D> {
    /// The native stream, for another library to enqueue work in order
    /// with hetero's (while this stream lives): native work enqueued after
    /// this call runs after everything hetero queued here before it. Ask
    /// again after later hetero work (on OpenCL a wait is enqueued with
    /// the stream's next command, which this call makes).
    pub fn raw(&self) -> Result<RawStream> {
        // SAFETY: the stream is owned by self.
        unsafe { self.device.raw_stream(self.id) }
    }

    /// Takes `buffer` for work on this stream that hetero does not see (a
    /// library that shares the stream): later work here waits for every
    /// use of the buffer queued elsewhere, and any later use elsewhere
    /// waits for everything queued on this stream so far. Enqueues no
    /// work of its own.
    pub fn acquire<T: Pod, K>(&self, buffer: &mut Buffer<T, K, D>) -> Result<()> {
        let slice = SliceMut::from(buffer);
        self.tracked(&[&slice.view()], || Ok(()))
    }
}
