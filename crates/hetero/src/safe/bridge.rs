//! The bridge streams of peer copies (see `peer.rs`): plain data that the
//! device state keeps.

use std::sync::{Arc, Mutex, PoisonError, Weak};

use super::marks::Spare;
use crate::device::StreamId;

/// A stream of the far device that orders its buffers' tracking after peer
/// copies made on one near stream (`waiter`).
///
/// Invariant: `id` is a stream of the device that keeps the bridge, used
/// only under `order`, which holds its spare mark event.
pub(crate) struct Bridge {
    pub(super) waiter: StreamId,
    /// The waiter's `Stream::alive`: dead once that stream is gone.
    pub(super) waiter_alive: Weak<()>,
    pub(super) id: StreamId,
    pub(super) order: Mutex<Spare>,
}

impl Bridge {
    /// The stream and its spare event, when the device goes.
    pub(crate) fn into_parts(self: Arc<Self>) -> (StreamId, Spare) {
        let spare = self.order.lock().unwrap_or_else(PoisonError::into_inner).take();
        (self.id, spare)
    }
}
