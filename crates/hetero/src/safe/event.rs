//! Events: markers in a stream that other streams and the host wait on, and
//! that time the work between two of them on the device's own clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::completion::Completion;
use super::gates;
use super::state::DeviceState;
use super::state::same_device;
use crate::AnyDevice;
use crate::device::{Device, EventId};
use crate::error::{Error, ErrorKind, Result};
use crate::markers;

/// An event owned by the typed layer; released on drop.
pub struct Event<D: Device = AnyDevice> {
    pub(crate) device: Arc<DeviceState<D>>,
    pub(crate) id: EventId,
    /// The latest recording was on a stream created without timing.
    pub(crate) untimed: AtomicBool,
}

impl<D: Device> std::fmt::Debug for Event<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("backend", &self.device.info().backend).field("id", &self.id).finish()
    }
}

impl<D: Device> Event<D> {
    /// `true` once the stream reached the latest recording (or it was never recorded).
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the event is owned by self.
        unsafe { self.device.query_event(self.id) }
    }

    /// A future that resolves once the latest recording is reached (at
    /// once for an event never recorded), with the error of the recorded
    /// stream if it failed; it does not block a thread (see
    /// [`Completion`]). A recording made after the first poll is waited
    /// for instead.
    pub fn wait_async(&self) -> Completion<'_, D> {
        Completion::new(&self.device, self.id, None)
    }

    /// Blocks the host until the latest recording is reached.
    pub fn synchronize(&self) -> Result<()> {
        let _range = markers::range(c"hetero event synchronize");
        // SAFETY: the event is owned by self.
        unsafe { self.device.synchronize_event(self.id) }
    }

    /// Milliseconds of device time from `self` to `end`; both must have
    /// completed, on streams created with timing ([`crate::StreamFlags::timing`]).
    pub fn elapsed_ms(&self, end: &Event<D>) -> Result<f64> {
        same_device(&self.device, &end.device, "elapsed_ms")?;
        if self.untimed.load(Ordering::Relaxed) || end.untimed.load(Ordering::Relaxed) {
            return Err(Error::new(
                self.device.info().backend,
                "elapsed_ms",
                ErrorKind::InvalidHandle,
                "an event was recorded on a stream created without timing; \
                 record both events on streams made by `Context::stream` (or with `StreamFlags::timing`)",
            ));
        }
        // SAFETY: both events are owned by the typed layer.
        unsafe { self.device.elapsed_ms(self.id, end.id) }
    }
}

impl<D: Device> Drop for Event<D> {
    fn drop(&mut self) {
        // SAFETY: the event is owned by self and used by nobody after this.
        let _ = unsafe { self.device.destroy_event(self.id) };
    }
}

/// An event completed by the host: a gate that holds every stream waiting
/// on it until [`UserEvent::complete`] is called, and only those (and work
/// ordered after them: on CUDA and HIP the work behind it waits on the
/// host, not in a hardware queue other streams share). Dropping it
/// completes it, so a forgotten gate cannot hold a stream forever.
pub struct UserEvent<D: Device = AnyDevice> {
    pub(crate) device: Arc<DeviceState<D>>,
    pub(crate) id: EventId,
    /// Completed or released: no longer counted as closed ([`super::gates`]).
    opened: AtomicBool,
}

impl<D: Device> std::fmt::Debug for UserEvent<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserEvent").field("backend", &self.device.info().backend).field("id", &self.id).finish()
    }
}

impl<D: Device> UserEvent<D> {
    /// A gate of `device`'s event `id`, counted as closed.
    pub(crate) fn new(device: Arc<DeviceState<D>>, id: EventId) -> Self {
        gates::closed();
        Self { device, id, opened: AtomicBool::new(false) }
    }

    /// Stops counting the gate as closed, once.
    fn uncount(&self) {
        if !self.opened.swap(true, Ordering::SeqCst) {
            gates::opened();
        }
    }

    /// Releases every stream waiting on the gate.
    pub fn complete(&self) -> Result<()> {
        // SAFETY: the event is owned by self.
        unsafe { self.device.complete_user_event(self.id) }?;
        self.uncount();
        Ok(())
    }

    /// `true` once completed.
    pub fn query(&self) -> Result<bool> {
        // SAFETY: the event is owned by self.
        unsafe { self.device.query_event(self.id) }
    }
}

impl<D: Device> Drop for UserEvent<D> {
    fn drop(&mut self) {
        // Releasing a gate opens it (the `Device` contract); one whose
        // release failed stays counted: it may hold streams until its
        // device goes.
        // SAFETY: the event is owned by self and used by nobody after this.
        if unsafe { self.device.destroy_event(self.id) }.is_ok() {
            self.uncount();
        }
    }
}

/// Anything a stream can wait on: [`Event`] and [`UserEvent`]. Sealed, so
/// that only events the typed layer owns reach the device.
pub trait Waitable<D: Device>: private::Sealed {
    /// The device and raw event.
    #[doc(hidden)]
    fn raw(&self) -> (&Arc<DeviceState<D>>, EventId);
    /// Whether it is a [`UserEvent`] (a gate), which only streams of its
    /// own device may wait on.
    #[doc(hidden)]
    fn is_gate(&self) -> bool;
}

mod private {
    pub trait Sealed {}
    impl<D: crate::Device> Sealed for super::Event<D> {}
    impl<D: crate::Device> Sealed for super::UserEvent<D> {}
}

impl<D: Device> Waitable<D> for Event<D> {
    fn raw(&self) -> (&Arc<DeviceState<D>>, EventId) {
        (&self.device, self.id)
    }

    fn is_gate(&self) -> bool {
        false
    }
}

impl<D: Device> Waitable<D> for UserEvent<D> {
    fn raw(&self) -> (&Arc<DeviceState<D>>, EventId) {
        (&self.device, self.id)
    }

    fn is_gate(&self) -> bool {
        true
    }
}
