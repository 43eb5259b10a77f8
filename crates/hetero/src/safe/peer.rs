//! Work across two devices of one backend: peer copies
//! ([`Stream::copy_peer`]) and waits on another device's events
//! ([`Stream::wait`]), with hazard tracking on both sides.
//!
//! A peer copy runs on one stream, of its source's or its destination's
//! device (the *near* device); the buffer of the other (*far*) device is
//! tracked by its own tracker, with events of its own device, so that every
//! tracker keeps its invariant (marks of its allocation's device only):
//!
//! - before the copy, the stream waits ([`Device::stream_wait_peer_event`])
//!   for the far buffer's conflicting uses, as for a buffer of its own;
//! - after it, the stream records the copy's mark for the near buffer, and
//!   a *bridge stream* of the far device, one per near stream that copies
//!   ([`Bridge`]), waits for that mark and records a far mark, stored as
//!   the far buffer's use on the bridge stream.
//!
//! A far mark therefore completes only after the copy, so freeing the far
//! buffer (stream-ordered, or into the caching allocator), reading it from
//! the host, or using it on any far stream waits for the copy, exactly as
//! for work of its own device (`a_gate_on_one_device_holds_the_others_dependent_work`,
//! `dropping_a_device_with_peer_work_queued`).
//! Bridge marks are recorded and stored under the bridge's order lock, so
//! they reach the trackers in the bridge stream's order, as a stream's own
//! marks do.

use std::sync::{Arc, Mutex, PoisonError};

use bytemuck::Pod;

use super::bridge::Bridge;
use super::buffer::{OnDevice, Slice, SliceMut, View};
use super::event::Waitable;
use super::state::same_device;
use super::state::{DeviceState, Recycler};
use super::stream::Stream;
use super::tracker::{Access, Held};
use crate::backend::peer::peer_gate_refused_on;
use crate::device::{Device, EventId, PeerRange, PeerRoute, StreamFlags};
use crate::error::{Error, ErrorKind, Result};

/// Bridge streams a device keeps before it lets idle ones go.
const MAX_BRIDGES: usize = 16;

/// The bridge of `far` for peer copies made on `waiter`, made at the first
/// (under the list's lock, so two threads copying on one stream share one).
fn bridge_for<D: Device>(far: &DeviceState<D>, waiter: &Stream<D>) -> Result<Arc<Bridge>> {
    let mut bridges = far.bridges();
    if let Some(bridge) = bridges.iter().find(|b| b.waiter == waiter.id) {
        return Ok(Arc::clone(bridge));
    }
    // Bridges of streams that are gone go first; past MAX_BRIDGES, every
    // bridge not in use.
    let many = bridges.len() >= MAX_BRIDGES;
    let gone = take_unused(&mut bridges, many);
    let made = far.create_stream(StreamFlags { non_blocking: true, timing: false, ..StreamFlags::default() });
    let bridge = made.map(|id| {
        let bridge = Arc::new(Bridge {
            waiter: waiter.id,
            waiter_alive: Arc::downgrade(&waiter.alive),
            id,
            order: Mutex::new(None),
        });
        bridges.push(Arc::clone(&bridge));
        bridge
    });
    drop(bridges);
    release(far, gone);
    bridge
}

/// Lets go of `far`'s bridges whose near streams are gone and that no copy
/// is using (`Context::trim`): work queued on them still runs, and the
/// marks they recorded stay valid events.
pub(crate) fn prune_bridges<D: Device>(far: &DeviceState<D>) {
    let gone = take_unused(&mut far.bridges(), false);
    release(far, gone);
}

/// Takes out of `bridges` those no copy is using whose near stream is gone,
/// or with `all`, every one no copy is using.
fn take_unused(bridges: &mut Vec<Arc<Bridge>>, all: bool) -> Vec<Arc<Bridge>> {
    let (keep, gone) =
        bridges.drain(..).partition(|b| Arc::strong_count(b) > 1 || (!all && b.waiter_alive.strong_count() > 0));
    *bridges = keep;
    gone
}

/// Destroys the streams of bridges taken out of `far`'s list.
fn release<D: Device>(far: &DeviceState<D>, gone: Vec<Arc<Bridge>>) {
    for bridge in gone {
        let (id, spare) = bridge.into_parts();
        far.keep_spare(spare);
        // SAFETY: the bridge stream is the device's, used by nobody now.
        let _ = unsafe { far.destroy_stream(id) };
    }
}

/// Records on `far`'s bridge for `near_stream` a mark that follows
/// `near_event` (of `near`), and stores it as the uses in `held`, which
/// are unlocked (one tracker's lock is never held while another's is
/// taken, but in address order: `opposite_peer_copies_do_not_deadlock`).
///
/// A far use that only reads (`access`) is over when the copy is, also
/// when the near stream failed before it: the bridge waits without taking
/// on that failure ([`Device::stream_wait_peer_settled`]), so a failed far
/// read leaves the far buffer and the far device's streams usable, as a
/// failed read does on one device
/// (`a_failed_far_read_leaves_the_far_buffer_usable`). A far write keeps
/// the failure: what it left in the buffer is unknown.
fn track_far<D: Device>(
    far: &DeviceState<D>,
    (near_stream, near_event): (&Stream<D>, EventId),
    access: Access,
    held: &mut Held<'_>,
) -> Result<()> {
    far.cross();
    let near: &D = &near_stream.device;
    let bridge = bridge_for(far, near_stream)?;
    let mut spare = bridge.order.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: the bridge stream is far's and used under its order lock; the
    // event is a live mark of `near`, held by the caller for the call.
    unsafe {
        match access {
            Access::Read => far.stream_wait_peer_settled(bridge.id, near.as_peer(), near_event),
            Access::Write => far.stream_wait_peer_event(bridge.id, near.as_peer(), near_event),
        }
    }?;
    // SAFETY: as above.
    let mark = unsafe { far.mark_from(bridge.id, &mut spare) }?;
    held.lock();
    held.after(&mut Recycler { shared: far, spare: &mut spare }, bridge.id, mark);
    Ok(())
}

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
    /// either device; both buffers stay tracked by their own devices until
    /// it completes, so no free, reuse or host access of either can
    /// overtake it (see the module doc).
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
        self.device.cross();
        let waited = near_held.before(&**self.device, self.id).and_then(|()| {
            far_held.before_with(far_device, self.id, |event| {
                // SAFETY: a live mark of the far device (its tracker's
                // invariant); the stream is this one's.
                unsafe { self.device.stream_wait_peer_event(self.id, far_device.as_peer(), event) }
            })
        });
        near_held.unlock();
        far_held.unlock();
        waited?;

        let mut spare = self.order.lock().unwrap_or_else(PoisonError::into_inner);
        self.device.ready_spare(&mut spare)?;
        let ranges = (PeerRange::new::<D>(&***sv.device, sv.range()), PeerRange::new::<D>(&***dv.device, dv.range()));
        // SAFETY: both views are bounds-checked views of live device
        // allocations; the waits above order the copy after their
        // conflicting uses on both devices, and the marks below keep both
        // allocations alive and unborrowed until it completes. A backend
        // that fails has nothing of the copy left running.
        let route = unsafe { self.device.copy_peer(ranges.0, ranges.1, self.id) }?;
        // SAFETY: the stream is owned by self.
        let (mark, error) = match unsafe { self.device.mark_enqueued(self.id, &mut spare) } {
            Ok(marked) => marked,
            Err(e) => return Err(self.settle_after(e)),
        };
        let near_mark = mark.clone();
        near_held.lock();
        near_held.after(&mut Recycler { shared: &self.device, spare: &mut spare }, self.id, mark);
        near_held.unlock();
        drop(spare);
        let far_tracked = track_far(far_shared, (self, near_mark.id()), far.access, &mut far_held);
        self.device.recycle(near_mark);
        match (far_tracked, error) {
            (Ok(()), None) => Ok(route),
            (Ok(()), Some(first)) => Err(first),
            (Err(e), None) => Err(self.settle_after(e)),
            // Both faults are told: the near record's retried one, then the far one's.
            (Err(e), Some(first)) => {
                let message = format!("{}; then tracking the far buffer failed: {}", first.message, e.message);
                Err(self.settle_after(Error { message, ..first }))
            }
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
