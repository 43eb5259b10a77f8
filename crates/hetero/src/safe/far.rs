//! A buffer's uses by other devices' streams, when the buffer goes.
//!
//! A peer copy stores its mark in the far buffer's tracker as it is: an
//! event of the near device (`peer.rs`). A retired allocation and the
//! caching allocator keep marks of their own device only (`state.rs`,
//! `cache.rs`), so when the far buffer is dropped, each such use that may
//! still run becomes one: a *bridge stream* of the far device, one per
//! near stream ([`Bridge`]), waits for the near mark and records a far
//! one. Nothing of this runs per copy; a buffer whose peer copies have
//! completed costs a query each.

use std::sync::{Arc, Mutex, PoisonError};

use super::bridge::Bridge;
use super::marks::Pending;
use super::state::DeviceState;
use super::tracker::{Access, ForeignUse};
use crate::device::{Device, StreamFlags, StreamId};
use crate::error::Result;

/// Bridge streams a device keeps before it lets unused ones go.
const MAX_BRIDGES: usize = 16;

/// Adds to `pending` a mark of `device` after each of `uses` (of a buffer
/// of `device` that is going) that may still run, and gives their marks
/// back to their devices.
///
/// A use that no mark can be made for is waited for by the host: rare (a
/// stream or event the driver refuses), and a free must not overtake it.
pub(crate) fn own_marks<D: Device>(device: &DeviceState<D>, uses: Vec<ForeignUse>, pending: &mut Pending) {
    for used in uses {
        // Of another device type: impossible (a peer copy joins devices of
        // one type), and nothing could be asked of it.
        let Some(from) = used.from.device::<D>() else { continue };
        // SAFETY: a live event of `from` (the tracker's invariant).
        if !matches!(unsafe { from.query_event(used.mark.id()) }, Ok(true)) {
            match bridge_mark(device, from, &used) {
                Ok(marked) => pending.push(marked),
                // SAFETY: as above. Failed or not, the use is then over or
                // can never run.
                Err(_) => drop(unsafe { from.synchronize_event(used.mark.id()) }),
            }
        }
        from.recycle(used.mark);
    }
}

/// A mark of `device` after `used` (of `from`), on the bridge for its stream.
/// A read's bridge only waits: a failed read is over and leaves the
/// allocation free to go, as on one device (`a_failed_far_read_leaves_the_far_buffer_usable`).
fn bridge_mark<D: Device>(
    device: &DeviceState<D>,
    from: &DeviceState<D>,
    used: &ForeignUse,
) -> Result<(StreamId, super::marks::Mark)> {
    device.cross();
    let bridge = bridge_for(device, used.stream)?;
    let mut spare = bridge.order.lock().unwrap_or_else(PoisonError::into_inner);
    // SAFETY: the bridge stream is `device`'s, used under its order lock;
    // the event is a live mark of `from`, held by `used`.
    unsafe {
        match used.access {
            Access::Read => device.stream_wait_peer_settled(bridge.id, from.as_peer(), used.mark.id()),
            Access::Write => device.stream_wait_peer_event(bridge.id, from.as_peer(), used.mark.id()),
        }
    }?;
    // SAFETY: as above.
    let mark = unsafe { device.mark_from(bridge.id, &mut spare) }?;
    Ok((bridge.id, mark))
}

/// The bridge of `device` for uses of the stream `waiter` (of another
/// device), made at the first (under the list's lock).
fn bridge_for<D: Device>(device: &DeviceState<D>, waiter: StreamId) -> Result<Arc<Bridge>> {
    let mut bridges = device.bridges();
    if let Some(bridge) = bridges.iter().find(|b| b.waiter == waiter) {
        return Ok(Arc::clone(bridge));
    }
    // Past MAX_BRIDGES, every bridge not in use goes.
    let gone = if bridges.len() >= MAX_BRIDGES { take_unused(&mut bridges) } else { Vec::new() };
    let made = device.create_stream(StreamFlags { non_blocking: true, timing: false, ..StreamFlags::default() });
    let bridge = made.map(|id| {
        let bridge = Arc::new(Bridge { waiter, id, order: Mutex::new(None) });
        bridges.push(Arc::clone(&bridge));
        bridge
    });
    drop(bridges);
    release(device, gone);
    bridge
}

/// Lets go of `device`'s bridges that no buffer's drop is using
/// (`Context::trim`): work queued on them still runs, and the marks they
/// recorded stay valid events.
pub(crate) fn prune_bridges<D: Device>(device: &DeviceState<D>) {
    let gone = take_unused(&mut device.bridges());
    release(device, gone);
}

/// Takes out of `bridges` those no buffer's drop is using.
fn take_unused(bridges: &mut Vec<Arc<Bridge>>) -> Vec<Arc<Bridge>> {
    let (keep, gone) = bridges.drain(..).partition(|b| Arc::strong_count(b) > 1);
    *bridges = keep;
    gone
}

/// Destroys the streams of bridges taken out of `device`'s list.
fn release<D: Device>(device: &DeviceState<D>, gone: Vec<Arc<Bridge>>) {
    for bridge in gone {
        let (id, spare) = bridge.into_parts();
        device.keep_spare(spare);
        // SAFETY: the bridge stream is the device's, used by nobody now.
        let _ = unsafe { device.destroy_stream(id) };
    }
}
