//! Tracking marks: the events recorded after operations, which the
//! trackers, retired allocations and completions hold (plain data at the
//! ground of the typed layer).

use std::any::Any;
use std::sync::Arc;

use crate::device::{EventId, StreamId};

/// An untimed event recorded after one operation, shared by the trackers
/// of every allocation the operation used: one record per operation, not
/// one per buffer.
///
/// Invariant: the event is never recorded again while a clone exists; the
/// holder that gives up the last clone returns it to [`DeviceState::recycle`],
/// which makes it spare.
///
/// The `Arc` goes back to the spares with its event, so that a new mark
/// allocates nothing (`layer_allocations`).
#[derive(Clone)]
pub(crate) struct Mark(pub(crate) Arc<EventId>);

impl Mark {
    /// The event.
    pub(crate) fn id(&self) -> EventId {
        *self.0
    }

    /// Gives up this clone: the event, when it was the last one (no one
    /// else can use the event any more: marks make no weak references).
    ///
    /// Two holders giving up the last two clones at once may both find the
    /// other's (`get_mut` fails for both); `Arc::into_inner` then hands the
    /// event to exactly one of them, in a new `Arc`. Without that, neither
    /// returned it and the event stayed allocated until the device was
    /// dropped (`racing_holders_return_a_mark_once`; the soak in
    /// docs/results/soak counted such events).
    pub(crate) fn into_spare(self) -> Option<Arc<EventId>> {
        let mut event = self.0;
        if Arc::get_mut(&mut event).is_some() {
            return Some(event);
        }
        Arc::into_inner(event).map(Arc::new)
    }
}

/// A stream's own spare mark event, kept under its order lock: an
/// operation takes its mark from it first and gives the marks it replaces
/// to it first ([`Recycler`]), so that one stream's operations pass two
/// events back and forth without the device's spare lists.
///
/// Invariant: the event is unique (no [`Mark`] holds it) and belongs to the
/// stream's device.
pub(crate) type Spare = Option<Arc<EventId>>;

/// The device whose event a mark is, where that is not the device of the
/// allocation it tracks: a peer copy's far buffer holds the copy's own
/// mark, an event of the near device (`peer.rs`). Holds that device's
/// `Core` (`state.rs`), which keeps the event valid and takes it back;
/// never its `DeviceState`, so two devices' trackers never keep each
/// other's state alive.
#[derive(Clone)]
pub(crate) struct Foreign(pub(crate) Arc<dyn Any + Send + Sync>);

/// The mark of one possibly pending use of an allocation, with its stream
/// and, for a use by another device's stream, that device.
pub(crate) struct PendingUse {
    pub(crate) stream: StreamId,
    pub(crate) mark: Mark,
    pub(crate) from: Option<Foreign>,
}

/// Marks of possibly pending uses of one allocation.
pub(crate) type Pending = Vec<PendingUse>;
