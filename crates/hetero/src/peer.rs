//! What the [`crate::Device`] trait's peer operations speak: another device
//! of the same backend ([`PeerRange`], [`peer_of`]) and the route a copy
//! between two devices takes ([`PeerRoute`]).
//!
//! A peer is passed as `&dyn Any`, so that the trait stays one trait for
//! static dispatch and for [`crate::AnyDevice`]: a backend accepts its own
//! device type, or an `AnyDevice` holding one ([`peer_of`]).

use std::any::Any;

use crate::device::{Backend, Device, DeviceRange};
use crate::error::{Error, ErrorKind, Result};

/// How a copy between two devices runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerRoute {
    /// In one step, by the devices themselves: one device (or two device
    /// objects of one device), peer access between two GPUs, or the host
    /// backend's workers copying between their memories.
    Direct,
    /// Through host memory: read into a staging buffer on the source's
    /// side, written from it on the destination's side.
    Staged,
}

impl PeerRoute {
    /// `"direct"` or `"staged"`, as reports print it.
    pub fn name(self) -> &'static str {
        match self {
            PeerRoute::Direct => "direct",
            PeerRoute::Staged => "staged",
        }
    }
}

impl std::fmt::Display for PeerRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A byte range of an allocation of `device`: one side of
/// [`crate::Device::copy_peer`].
#[derive(Clone, Copy)]
pub struct PeerRange<'a> {
    /// The device that owns the allocation: the same type as the device
    /// called, or an [`crate::AnyDevice`] of its backend.
    pub device: &'a dyn Any,
    /// The bytes.
    pub range: DeviceRange,
}

impl std::fmt::Debug for PeerRange<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerRange").field("range", &self.range).finish_non_exhaustive()
    }
}

impl<'a> PeerRange<'a> {
    /// `range` of an allocation of `device`.
    pub fn new<D: Device>(device: &'a D, range: DeviceRange) -> Self {
        Self { device, range }
    }
}

/// `peer` as a device of type `T`: itself, or the `T` inside an
/// [`crate::AnyDevice`]. Any other type is a
/// [`ErrorKind::DeviceMismatch`] naming what was expected.
pub(crate) fn peer_of<'a, T: Device>(backend: Backend, call: &'static str, peer: &'a dyn Any) -> Result<&'a T> {
    if let Some(device) = peer.downcast_ref::<T>() {
        return Ok(device);
    }
    if let Some(any) = peer.downcast_ref::<crate::AnyDevice>() {
        if let Some(device) = any.as_any().downcast_ref::<T>() {
            return Ok(device);
        }
        return Err(mismatch(backend, call, &format!("a {} device", any.info().backend)));
    }
    Err(mismatch(backend, call, "not a hetero device"))
}

#[cold]
fn mismatch(backend: Backend, call: &'static str, got: &str) -> Error {
    Error::new(
        backend,
        call,
        ErrorKind::DeviceMismatch,
        format!("the peer is {got}; peer copies and waits join two devices of one backend ({backend})"),
    )
}

/// Whether `a` and `b` are the same device object.
pub(crate) fn same_object<T>(a: &T, b: &T) -> bool {
    std::ptr::eq(a, b)
}

/// Which of a copy's two sides is the device called (`me`), and the other
/// one: `Ok((mine, other, me_is_source))`. Both sides on `me` is a copy
/// within one device, `other` then being `me`.
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
