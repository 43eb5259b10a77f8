//! [`Context`]: the entry to the typed layer for one device.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use bytemuck::Pod;

use super::buffer::{DeviceBuffer, PinnedBuffer, byte_len};
use super::cache::{AllocatorOptions, AllocatorStats, MemoryKind};
use super::event::{Event, UserEvent};
use super::module::Module;
use super::state::DeviceState;
use super::stream::Stream;
use crate::AnyDevice;
use crate::device::{BuildOptions, Device, DeviceInfo, StreamFlags, StreamId};
use crate::error::{Error, ErrorKind, Result};
use crate::host_kernel::HostKernel;
use crate::markers;
use crate::sync::Mutex;

/// One device, shared by every stream, buffer and event made from it.
/// Cloning is cheap; objects from two contexts never mix (they fail with
/// [`ErrorKind::DeviceMismatch`]).
pub struct Context<D: Device = AnyDevice> {
    device: Arc<DeviceState<D>>,
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
    /// Takes ownership of a device, with the allocator that
    /// [`crate::ALLOCATOR_ENV`] chooses (caching by default: see
    /// [`AllocatorOptions`]). A value of the variable that is not
    /// understood makes every allocation fail with [`ErrorKind::Config`],
    /// naming it.
    pub fn new(device: D) -> Self {
        let options = AllocatorOptions::from_env(device.info().backend);
        Self { device: Arc::new(DeviceState::new(device, options)) }
    }

    /// Takes ownership of a device, with exactly these allocator options
    /// ([`crate::ALLOCATOR_ENV`] is not read).
    pub fn with_allocator(device: D, options: AllocatorOptions) -> Self {
        Self { device: Arc::new(DeviceState::new(device, Ok(options))) }
    }

    /// What the allocator did so far, per memory kind.
    pub fn allocator_stats(&self) -> AllocatorStats {
        self.device.cache().stats()
    }

    /// Returns every cached block to the driver: idle ones now, the others
    /// once the work still using them completes; and destroys the spare
    /// events the layer keeps to track work (it makes new ones as needed).
    pub fn trim(&self) {
        for kind in [MemoryKind::Device, MemoryKind::Pinned] {
            self.device.cache().trim(&self.device, kind);
        }
        self.device.trim_spare();
        self.device.reap();
    }

    /// The device's description and limits.
    pub fn info(&self) -> &DeviceInfo {
        self.device.info()
    }

    /// The underlying device, for calls the typed layer does not wrap.
    /// Every call on it that takes a handle is `unsafe`: see the
    /// [`Device`] contract.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// How copies between this context's device and `other`'s go
    /// ([`Stream::copy_peer`]); a context of another backend is a
    /// [`crate::ErrorKind::DeviceMismatch`].
    pub fn peer_route(&self, other: &Context<D>) -> Result<crate::PeerRoute> {
        let peer: &D = &other.device;
        self.device.peer_route(peer.as_peer())
    }

    /// Allocations whose buffers were dropped while queued work still used
    /// them and that nobody may reuse yet: each is freed, or becomes
    /// reusable in the cache, once that work completes (checked on later
    /// allocations, buffer drops and stream synchronisations).
    pub fn deferred_frees(&self) -> usize {
        self.device.reap();
        self.device.retired_count()
    }

    /// A recorder of work to replay as one operation (see [`super::Graph`]);
    /// the buffers it binds stay borrowed for `'b`, while the graph lives.
    pub fn recorder<'b>(&self) -> super::Recorder<'b, D> {
        super::Recorder::new(&self.device)
    }

    /// A new non-blocking stream of default priority whose events can be timed.
    pub fn stream(&self) -> Result<Stream<D>> {
        self.stream_with(StreamFlags { non_blocking: true, ..StreamFlags::default() })
    }

    /// A new non-blocking stream whose events cannot be timed
    /// ([`Event::elapsed_ms`] refuses them): each command may be cheaper
    /// (see [`StreamFlags::timing`]). For hot loops that time nothing.
    pub fn untimed_stream(&self) -> Result<Stream<D>> {
        self.stream_with(StreamFlags { non_blocking: true, timing: false, ..StreamFlags::default() })
    }

    /// A new stream with explicit flags.
    ///
    /// Fails with [`ErrorKind::Config`] when [`crate::markers::MARKERS_ENV`]
    /// has a value that is not understood.
    pub fn stream_with(&self, flags: StreamFlags) -> Result<Stream<D>> {
        if let Some(problem) = markers::config_error() {
            return Err(Error::new(self.device.info().backend, "stream", ErrorKind::Config, problem.message.clone()));
        }
        let id = self.device.create_stream(flags)?;
        Ok(self.wrap_stream(id, flags))
    }

    /// The typed stream over `id`, a stream of this device made with `flags`.
    pub(crate) fn wrap_stream(&self, id: StreamId, flags: StreamFlags) -> Stream<D> {
        Stream { device: Arc::clone(&self.device), id, timing: flags.timing, order: Mutex::new(None) }
    }

    /// The device and its shared state.
    pub(crate) fn state(&self) -> &Arc<DeviceState<D>> {
        &self.device
    }

    /// A new event.
    pub fn event(&self) -> Result<Event<D>> {
        Ok(Event { device: Arc::clone(&self.device), id: self.device.create_event()?, untimed: AtomicBool::new(false) })
    }

    /// A new host-completed gate event.
    pub fn user_event(&self) -> Result<UserEvent<D>> {
        Ok(UserEvent::new(Arc::clone(&self.device), self.device.create_user_event()?))
    }

    /// Uninitialised-by-contract device memory for `len` elements (its
    /// contents are unspecified until written, or the allocator's debug
    /// fill pattern). A cached block is reused only once no queued work
    /// uses it; [`Stream::alloc`] may also reuse blocks still used on its
    /// stream.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T, D>> {
        let mut buf = DeviceBuffer::alloc(&self.device, len, None)?;
        if let Some(pattern) = self.device.cache().fill {
            // Enqueued on a stream of its own and tracked like any write.
            self.untimed_stream()?.fill_block(&mut buf, pattern)?;
        }
        Ok(buf)
    }

    /// Zeroed pinned host memory for `len` elements. Refused with
    /// [`ErrorKind::OutOfBounds`] when the memory the backend gives is not
    /// aligned for `T` (every backend aligns to at least
    /// [`crate::PINNED_ALIGN`] bytes).
    pub fn alloc_pinned<T: Pod>(&self, len: usize) -> Result<PinnedBuffer<T, D>> {
        let bytes = byte_len::<T, D>(&self.device, len, "alloc_pinned")?;
        let taken = self.device.take(MemoryKind::Pinned, bytes, None)?;
        let (alloc, reused, fresh) = (taken.alloc, taken.host, taken.fresh);
        // Own the allocation first, so that an error below gives it back.
        let mut buf = PinnedBuffer::from_taken(Arc::clone(&self.device), taken, MemoryKind::Pinned, len);
        let ptr = match reused {
            Some(addr) => addr.0,
            // SAFETY: the allocation is owned by `buf`; only its address is read.
            None => unsafe { self.device.pinned_ptr(alloc) }?,
        };
        if !fresh {
            // SAFETY: a reused pinned block is idle (the cache hands out
            // no other) and owned by `buf`; it holds at least `bytes`.
            unsafe { ptr.as_ptr().write_bytes(0, bytes) };
        }
        let align = std::mem::align_of::<T>();
        if !(ptr.as_ptr() as usize).is_multiple_of(align) {
            return Err(Error::new(
                self.info().backend,
                "alloc_pinned",
                ErrorKind::OutOfBounds,
                format!(
                    "{} gives pinned memory aligned to {} bytes but `{}` needs {align}; use a type of at most {} bytes' alignment",
                    self.info().name,
                    1usize << (ptr.as_ptr() as usize).trailing_zeros(),
                    std::any::type_name::<T>(),
                    crate::device::PINNED_ALIGN
                ),
            ));
        }
        buf.set_host(ptr);
        Ok(buf)
    }

    /// Pinned host memory holding a copy of `data`.
    pub fn pinned_from_slice<T: Pod>(&self, data: &[T]) -> Result<PinnedBuffer<T, D>> {
        let mut buf = self.alloc_pinned(data.len())?;
        buf.host_slice_mut()?.copy_from_slice(data);
        Ok(buf)
    }

    /// Builds a portable kernel source (see `hetero-kernels`). On the host
    /// backend this runs only the built-in kernels; give a crate's own
    /// kernels their host implementations with [`Context::build_module_with`].
    pub fn build_module(&self, source: &str) -> Result<Module<D>> {
        self.build_module_with(source, &[])
    }

    /// A failed build of a source that uses a subgroup word on a device
    /// without subgroups says so first: the compiler's log alone names an
    /// undeclared identifier.
    fn name_subgroup_word(&self, mut error: Error, source: &str) -> Error {
        let info = self.info();
        if error.kind == ErrorKind::Build
            && info.subgroup_sizes.is_empty()
            && let Some(word) = hetero_kernels::subgroup_word(source)
        {
            error.message = format!(
                "{} has no subgroups (DeviceInfo::subgroup_sizes is empty), but the source uses `{word}`: \
                 keep it under `#if defined(HETERO_SUBGROUPS)` with a fallback (the block collectives have one), \
                 or build for a device with subgroups\n{}",
                info.name, error.message
            );
        }
        error
    }

    /// Builds a portable kernel source together with Rust implementations
    /// of its kernels, which the host backend runs (checked against the
    /// source's parameter lists: see [`crate::host_kernel`]); GPU backends
    /// compile the source and ignore them.
    pub fn build_module_with(&self, source: &str, host_kernels: &[HostKernel]) -> Result<Module<D>> {
        self.build_module_with_options(source, &BuildOptions::default(), host_kernels)
    }

    /// [`Context::build_module_with`] under `options`: with
    /// [`BuildOptions::deterministic`], floating point exactly as written
    /// on every backend and `HETERO_DETERMINISTIC` defined (see
    /// [`BuildOptions`]).
    pub fn build_module_with_options(
        &self,
        source: &str,
        options: &BuildOptions,
        host_kernels: &[HostKernel],
    ) -> Result<Module<D>> {
        let _range = markers::range(c"hetero build_module");
        let id =
            self.device.build_module(source, options, host_kernels).map_err(|e| self.name_subgroup_word(e, source))?;
        Ok(Module {
            device: Arc::clone(&self.device),
            id,
            params: hetero_kernels::kernel_params(source),
            structs: hetero_kernels::struct_layouts(source).into(),
        })
    }
}
