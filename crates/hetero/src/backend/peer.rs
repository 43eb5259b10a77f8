//! What the backends share for peer operations: the device behind a peer
//! ([`peer_of`]), the two sides of a copy ([`sides`]) and the error for a
//! wait on another device's user event. A peer is passed as `&dyn Any`
//! ([`Device::as_peer`]), so that the trait stays one trait for static
//! dispatch and for [`crate::AnyDevice`].

use std::any::Any;

use crate::device::{Backend, Device, PeerRange};
use crate::error::{Error, ErrorKind, Result};

/// `peer` (as [`Device::as_peer`] gives it) as a device of type `T`; any
/// other type is a [`ErrorKind::DeviceMismatch`].
pub(crate) fn peer_of<'a, T: Device>(backend: Backend, call: &'static str, peer: &'a dyn Any) -> Result<&'a T> {
    peer.downcast_ref::<T>().ok_or_else(|| mismatch(backend, call))
}

#[cold]
fn mismatch(backend: Backend, call: &'static str) -> Error {
    Error::new(
        backend,
        call,
        ErrorKind::DeviceMismatch,
        format!(
            "the peer is not a {backend} device (pass `device.as_peer()`); peer copies and waits join two devices \
             of one backend"
        ),
    )
}

/// Whether `a` and `b` are the same device object.
pub(crate) fn same_object<T>(a: &T, b: &T) -> bool {
    std::ptr::eq(a, b)
}

/// A copy's source and destination devices, `(from, to)`, one of which
/// must be the device called (`me`); both are `me` for a copy within one
/// device.
pub(crate) fn sides<'a, T: Device>(
    me: &'a T,
    call: &'static str,
    src: PeerRange<'a>,
    dst: PeerRange<'a>,
) -> Result<(&'a T, &'a T)> {
    let backend = me.info().backend;
    let (from, to) = (peer_of::<T>(backend, call, src.device)?, peer_of::<T>(backend, call, dst.device)?);
    if !same_object(me, from) && !same_object(me, to) {
        return Err(Error::new(
            backend,
            call,
            ErrorKind::DeviceMismatch,
            "a peer copy runs on a stream of its source's or its destination's device",
        ));
    }
    Ok((from, to))
}

/// The error for a wait on a user event of another device.
#[cold]
pub(crate) fn peer_gate_refused_on(backend: Backend) -> Error {
    Error::new(
        backend,
        "stream_wait_peer_event",
        ErrorKind::InvalidHandle,
        "a user event of another device cannot be waited on: make a stream of its own device wait for it, \
         record an event there and wait for that",
    )
}
