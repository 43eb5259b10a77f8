//! [`Shared`]: the device as every object of the typed layer holds it, and
//! the allocations it frees later (stream-ordered frees).
//!
//! Dropping a buffer never blocks: if queued work may still use the
//! allocation, the allocation is *retired* with the events of its last uses
//! and freed once they have all completed. Retired allocations are reaped
//! on later allocations, buffer drops and stream synchronisations, and when
//! the last object of the device goes. What is still pending then is left
//! to the backend, whose drop opens every gate and releases what remains
//! once the device's work has finished (see the `Device` contract).

use std::ops::Deref;
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::device::{AllocId, Device, EventId};

/// An allocation waiting for the events of its last uses.
struct Retired {
    alloc: AllocId,
    /// Events of queued uses; all must complete before the free.
    pending: Vec<EventId>,
    /// Events owned by the allocation's tracker that hold no pending use.
    spare: Vec<EventId>,
}

/// One device and its deferred frees; owned through an `Arc` by the
/// context and every stream, event, buffer and module made from it.
///
/// Invariant: every handle in `retired` belongs to `device` and is used by
/// nobody else (the buffer that owned it is gone).
///
/// Public only so that sealed traits can name it; its module is private.
#[doc(hidden)]
pub struct Shared<D: Device> {
    device: D,
    retired: Mutex<Vec<Retired>>,
}

impl<D: Device> Deref for Shared<D> {
    type Target = D;
    fn deref(&self) -> &D {
        &self.device
    }
}

impl<D: Device> Shared<D> {
    pub(crate) fn new(device: D) -> Self {
        Self { device, retired: Mutex::new(Vec::new()) }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Retired>> {
        self.retired.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Frees `alloc` once the events in `pending` have completed; at once
    /// when they already have. Never blocks on the device.
    ///
    /// # Safety
    /// `alloc` and every event must belong to this device and be owned by
    /// the caller, who gives them up; `pending` must hold an event recorded
    /// after every queued use of `alloc`, and no host reference into the
    /// allocation may remain.
    pub(crate) unsafe fn retire(&self, alloc: AllocId, pending: Vec<EventId>, spare: Vec<EventId>) {
        self.lock().push(Retired { alloc, pending, spare });
        self.reap();
    }

    /// Frees every retired allocation whose uses have completed.
    pub(crate) fn reap(&self) {
        let mut retired = self.lock();
        if retired.is_empty() {
            return;
        }
        retired.retain_mut(|r| {
            // An event whose query fails (a faulted or lost device) keeps its
            // allocation retired: the device's drop deals with it.
            let Retired { pending, spare, .. } = r;
            pending.retain(|&e| {
                // SAFETY: the events are owned here (type invariant).
                let complete = matches!(unsafe { self.device.query_event(e) }, Ok(true));
                if complete {
                    spare.push(e);
                }
                !complete
            });
            if !r.pending.is_empty() {
                return true;
            }
            // SAFETY: every use of the allocation has completed, nobody else
            // holds its handle or a host reference (type invariant), and the
            // events are ours to release.
            unsafe {
                let _ = self.device.free(r.alloc);
                for &e in &r.spare {
                    let _ = self.device.destroy_event(e);
                }
            }
            false
        });
    }

    /// Allocations freed later, when their last uses complete.
    pub(crate) fn retired_count(&self) -> usize {
        self.lock().len()
    }
}

impl<D: Device> Drop for Shared<D> {
    fn drop(&mut self) {
        self.reap();
        // What remains is in use by work the device has not finished: the
        // backend's own drop waits for that work (after opening every gate)
        // and releases it. Freeing it here could free memory in use.
    }
}
