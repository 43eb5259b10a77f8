//! Work across two devices of one backend: peer copies
//! ([`Stream::copy_peer`]) and waits on another device's events
//! ([`Stream::wait`]), with hazard tracking on both sides.
//!
//! A peer copy runs on one stream, of its source's or its destination's
//! device (the *near* device); the buffer of the other (*far*) device is
//! tracked by its own tracker:
//!
//! - before the copy, the stream waits ([`Device::stream_wait_peer_event`])
//!   for the far buffer's conflicting uses, as for a buffer of its own;
//! - after it, the stream records one mark, stored for both buffers: for
//!   the far one as a use by a stream of the near device, with that
//!   device's `Core` ([`Foreign`]). Nothing is asked of the far device.
//!
//! The far device's later uses of the buffer wait for the mark across
//! devices, the host waits for it on the near device, and when the far
//! buffer goes, its block is freed or handed out again only once the mark
//! has completed (`DeviceState::settle` queries it on the near device; a
//! far device dropped before waits for it on a thread of its own). So no
//! free, reuse or host access of the far buffer overtakes the copy
//! (`a_far_buffer_dropped_under_a_held_copy_is_not_reused`,
//! `a_gate_on_one_device_holds_the_others_dependent_work`,
//! `dropping_a_device_with_peer_work_queued`). The mark is stored in both
//! trackers under the stream's order lock, so it reaches them in stream
//! order. The far tracker holds the near device's `Core`, never its
//! state: two devices copying both ways do not keep each other alive
//! (`devices_dropped_with_copies_both_ways_held_release_everything`).

use std::sync::{Arc, PoisonError};

use bytemuck::Pod;

use super::buffer::{OnDevice, Slice, SliceMut, View};
use super::event::Waitable;
use super::marks::Foreign;
use super::state::same_device;
use super::state::{DeviceState, Recycler};
use super::stream::Stream;
use super::tracker::Held;
use crate::backend::peer::peer_gate_refused_on;
use crate::device::{Device, PeerRange, PeerRoute};
use crate::error::{Error, ErrorKind, Result};

/// Locks the trackers of two operations' uses in address order.
fn lock_both(first: &mut Held<'_>, second: &mut Held<'_>, first_is_lower: bool) {
    if first_is_lower {
        first.lock();
        second.lock();
    } else {
        second.lock();
        first.lock();
    }
}

impl<D: Device> Stream<D> {
    /// Copies between device slices of two devices of one backend (or of
    /// this stream's device only, as [`Stream::copy`]): one of them must be
    /// of this stream's device. Returns the route the copy took.
    ///
    /// The copy is ordered on this stream, and waits for queued writes to
    /// the source (and, for the destination, for its queued uses) on
    /// either device; both buffers' trackers hold the copy's mark until it
    /// completes, so no free, reuse or host access of either can overtake
    /// it (see the module doc).
    pub fn copy_peer<'s, 'd, T: Pod>(
        &self,
        src: impl Into<Slice<'s, T, OnDevice, D>>,
        dst: impl Into<SliceMut<'d, T, OnDevice, D>>,
    ) -> Result<PeerRoute> {
        let (src, dst) = (src.into(), dst.into());
        if src.len() != dst.len() {
            return Err(Error::new(
                self.backend(),
                "copy_peer",
                ErrorKind::OutOfBounds,
                format!("source has {} elements but destination has {}", src.len(), dst.len()),
            ));
        }
        let (sv, dv) = (src.view(), dst.view());
        let (src_here, dst_here) = (Arc::ptr_eq(sv.device, &self.device), Arc::ptr_eq(dv.device, &self.device));
        match (src_here, dst_here) {
            (true, true) => {
                self.copy(src, dst)?;
                return Ok(PeerRoute::Direct);
            }
            (false, false) => {
                same_device(&self.device, sv.device, "copy_peer")?;
            }
            _ => {}
        }
        let (near, far) = if src_here { (&sv, &dv) } else { (&dv, &sv) };
        let far_device: &Arc<DeviceState<D>> = far.device;
        if far_device.info().backend != self.backend() {
            same_device(&self.device, far_device, "copy_peer")?;
        }
        if sv.len == 0 {
            return self.device.peer_route(far_device.as_peer());
        }
        self.copy_across(near, far, &sv, &dv)
    }

    /// [`Stream::copy_peer`] once `near` (this device's view) and `far`
    /// (the other device's) are known; `sv`/`dv` are the same two views as
    /// source and destination.
    fn copy_across(
        &self,
        near: &View<'_, D>,
        far: &View<'_, D>,
        sv: &View<'_, D>,
        dv: &View<'_, D>,
    ) -> Result<PeerRoute> {
        let far_shared: &DeviceState<D> = far.device;
        let far_device: &D = far_shared;
        let (mut near_held, mut far_held) = (Held::new(), Held::new());
        near_held.add(near.tracker, near.offset..near.offset + near.len, near.access);
        far_held.add(far.tracker, far.offset..far.offset + far.len, far.access);
        let near_lower = std::ptr::from_ref(near.tracker) < std::ptr::from_ref(far.tracker);
        lock_both(&mut near_held, &mut far_held, near_lower);
        // The near device's streams wait on the far device's events, and
        // the far device's later uses of its buffer on the near device's.
        self.device.cross();
        far_shared.cross();
        let near_device: &D = &self.device;
        let waited =
            near_held.before(near_device, self.id).and_then(|()| far_held.before_on(near_device, self.id, far_device));
        near_held.unlock();
        far_held.unlock();
        waited?;

        let mut spare = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        self.device.ready_spare(&mut spare)?;
        let ranges = (PeerRange::new::<D>(&***sv.device, sv.range()), PeerRange::new::<D>(&***dv.device, dv.range()));
        // SAFETY: both views are bounds-checked views of live device
        // allocations; the waits above order the copy after their
        // conflicting uses on both devices, and the mark below keeps both
        // allocations alive and unborrowed until it completes. A backend
        // that fails has nothing of the copy left running.
        let route = unsafe { self.device.copy_peer(ranges.0, ranges.1, self.id) }?;
        // SAFETY: the stream is owned by self.
        let (mark, error) = match unsafe { self.device.mark_enqueued(self.id, &mut spare) } {
            Ok(marked) => marked,
            Err(e) => return Err(self.settle_after(e)),
        };
        let from = Foreign::new(&self.device.core);
        lock_both(&mut near_held, &mut far_held, near_lower);
        near_held.after(&mut Recycler { shared: &self.device, spare: &mut spare }, self.id, mark.clone());
        // Marks the far tracker replaces are of this device (this stream's
        // earlier copies), of the far device, or of a third one: each goes
        // back to its own (`after_on`), none to this stream's spare.
        let mut far_spare = None;
        far_held.after_on(&mut Recycler { shared: far_shared, spare: &mut far_spare }, self.id, mark, Some(&from));
        far_shared.keep_spare(far_spare);
        near_held.unlock();
        far_held.unlock();
        drop(spare);
        match error {
            None => Ok(route),
            Some(first) => Err(first),
        }
    }

    /// Synchronises the stream after tracking failed behind queued work
    /// (failure-atomic, as `Stream::tracked`), and passes the error on.
    fn settle_after(&self, error: Error) -> Error {
        // SAFETY: the stream is owned by self. Its result does not matter:
        // it returns once the work is done or can never run.
        let _ = unsafe { self.device.synchronize_stream(self.id) };
        error
    }

    /// Makes later work on this stream wait for `event` (no host block).
    /// If the event's stream failed before reaching it, this stream fails too.
    ///
    /// The event may be of another device of the same backend (a recorded
    /// [`super::Event`]; a [`super::UserEvent`] of another device is
    /// refused: wait for it on a stream of its own device and record an
    /// event there).
    pub fn wait(&self, event: &impl Waitable<D>) -> Result<()> {
        let (device, id) = event.raw();
        if Arc::ptr_eq(&self.device, device) {
            // SAFETY: both are owned by the typed layer.
            return unsafe { self.device.stream_wait_event(self.id, id) };
        }
        if device.info().backend != self.backend() {
            same_device(&self.device, device, "stream_wait_event")?;
        }
        if event.is_gate() {
            // Refused here, so the device is only asked for what it can do.
            return Err(peer_gate_refused_on(self.backend()));
        }
        self.device.cross();
        let peer: &D = device;
        // SAFETY: both are owned by the typed layer; the event is the peer's.
        unsafe { self.device.stream_wait_peer_event(self.id, peer.as_peer(), id) }
    }
}
