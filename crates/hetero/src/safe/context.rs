//! [`Context`]: the entry to the typed layer for one device.

use std::sync::Arc;

use bytemuck::Pod;

use super::buffer::{DeviceBuffer, PinnedBuffer};
use super::event::{Event, UserEvent};
use super::module::Module;
use super::stream::Stream;
use crate::AnyDevice;
use crate::device::{Device, DeviceInfo, StreamFlags};
use crate::error::{Error, ErrorKind, Result};

/// One device, shared by every stream, buffer and event made from it.
/// Cloning is cheap; objects from two contexts never mix (they fail with
/// [`ErrorKind::DeviceMismatch`]).
pub struct Context<D: Device = AnyDevice> {
    device: Arc<D>,
}

impl<D: Device> Clone for Context<D> {
    fn clone(&self) -> Self {
        Self { device: Arc::clone(&self.device) }
    }
}

impl<D: Device> std::fmt::Debug for Context<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("device", &self.device.info().name).finish()
    }
}

impl<D: Device> Context<D> {
    /// Takes ownership of a device.
    pub fn new(device: D) -> Self {
        Self { device: Arc::new(device) }
    }

    /// The device's description and limits.
    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// The underlying device, for calls the typed layer does not wrap.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// A new non-blocking stream of default priority.
    pub fn stream(&self) -> Result<Stream<D>> {
        self.stream_with(StreamFlags { non_blocking: true, priority: 0 })
    }

    /// A new stream with explicit flags.
    pub fn stream_with(&self, flags: StreamFlags) -> Result<Stream<D>> {
        let id = self.device.create_stream(flags)?;
        Ok(Stream { device: Arc::clone(&self.device), id })
    }

    /// A new event.
    pub fn event(&self) -> Result<Event<D>> {
        Ok(Event { device: Arc::clone(&self.device), id: self.device.create_event()? })
    }

    /// A new host-completed gate event.
    pub fn user_event(&self) -> Result<UserEvent<D>> {
        Ok(UserEvent { device: Arc::clone(&self.device), id: self.device.create_user_event()? })
    }

    /// Uninitialised-by-contract device memory for `len` elements (its
    /// contents are backend-defined until written).
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T, D>> {
        let alloc = self.device.alloc_device(self.bytes::<T>(len, "alloc_device")?)?;
        Ok(DeviceBuffer::from_alloc(Arc::clone(&self.device), alloc, len))
    }

    /// Zeroed pinned host memory for `len` elements.
    pub fn alloc_pinned<T: Pod>(&self, len: usize) -> Result<PinnedBuffer<T, D>> {
        let alloc = self.device.alloc_pinned(self.bytes::<T>(len, "alloc_pinned")?)?;
        Ok(PinnedBuffer::from_alloc(Arc::clone(&self.device), alloc, len))
    }

    /// Pinned host memory holding a copy of `data`.
    pub fn pinned_from_slice<T: Pod>(&self, data: &[T]) -> Result<PinnedBuffer<T, D>> {
        let mut buf = self.alloc_pinned(data.len())?;
        buf.host_slice_mut()?.copy_from_slice(data);
        Ok(buf)
    }

    /// Builds a portable kernel source (see `hetero-kernels`).
    pub fn build_module(&self, source: &str) -> Result<Module<D>> {
        Ok(Module { device: Arc::clone(&self.device), id: self.device.build_module(source)? })
    }

    fn bytes<T>(&self, len: usize, call: &'static str) -> Result<usize> {
        len.checked_mul(std::mem::size_of::<T>()).ok_or_else(|| {
            Error::new(
                self.info().backend,
                call,
                ErrorKind::OutOfMemory,
                format!("{len} elements overflow the address space"),
            )
        })
    }
}
