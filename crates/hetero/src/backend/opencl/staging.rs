//! Pinned host memory that staged peer copies pass through, between
//! devices in contexts of their own.
//!
//! Each device keeps a pool of `CL_MEM_ALLOC_HOST_PTR` buffers of its own
//! context, mapped once for their whole life (page-locked where the driver
//! pins such buffers, as [`super::memory`] says). A copy takes a buffer
//! ([`StagingPool::take`]) and gives it back with the event of the last
//! command that uses its bytes ([`Lease::give_back`]); the buffer is taken
//! again only once that event has completed or failed. Nothing is freed
//! from a driver callback: OpenCL leaves calls from callbacks undefined,
//! and unmapping is one.
//!
//! Invariant: a slot in the pool is either idle (no event, or a finished
//! one) or in use by commands that end with its event; the pool waits for
//! every slot's event before it unmaps the buffers (on drop).

use std::sync::{Arc, Mutex, PoisonError};

use opencl3::command_queue::CommandQueue;
use opencl3::context::Context;
use opencl3::event::{CL_COMPLETE, Event};

use super::memory::ClMemory;
use crate::error::Result;

/// The smallest staging buffer made: halo rows and small copies share one.
const MIN_STAGING: usize = 64 << 10;

/// Idle buffers a pool keeps before it lets smaller ones go for a larger.
const MAX_IDLE: usize = 8;

/// Copies of at least this many bytes are staged in two halves, so the
/// destination's write of the first overlaps the source's read of the
/// second.
pub(super) const HALVES_FROM: usize = 1 << 20;

/// The byte ranges, as `(offset, len)`, a staged copy of `len` bytes moves
/// one after another: two halves from [`HALVES_FROM`] (the first a
/// multiple of 64 bytes), else one piece.
pub(super) fn pieces(len: usize) -> Vec<(usize, usize)> {
    if len < HALVES_FROM {
        return vec![(0, len)];
    }
    let first = (len / 2) & !63;
    vec![(0, first), (first, len - first)]
}

/// One buffer and the event of the last command that used it.
struct Slot {
    memory: ClMemory,
    last: Option<Arc<Event>>,
}

impl Slot {
    /// Whether no command uses the bytes any more (the last one completed
    /// or failed; a status the driver cannot give counts as busy).
    fn idle(&self) -> bool {
        self.last.as_ref().is_none_or(|event| event.command_execution_status().is_ok_and(|s| s.0 <= CL_COMPLETE))
    }
}

/// A device's staging buffers ([module docs](self)).
pub(super) struct StagingPool {
    context: Arc<Context>,
    mapper: Arc<CommandQueue>,
    /// The device's largest allocation.
    limit: u64,
    slots: Mutex<Vec<Slot>>,
}

/// A staging buffer taken for one copy; its bytes are the copy's alone
/// until it is given back.
pub(super) struct Lease<'a> {
    pool: &'a StagingPool,
    slot: Option<Slot>,
}

impl StagingPool {
    /// A pool of buffers of `context`, mapped on `mapper`; `limit` is the
    /// device's largest allocation.
    pub(super) fn new(context: Arc<Context>, mapper: Arc<CommandQueue>, limit: u64) -> Self {
        Self { context, mapper, limit, slots: Mutex::new(Vec::new()) }
    }

    /// An idle buffer of at least `len` bytes (the smallest such), or a new
    /// one of the next power of two (at least [`MIN_STAGING`], at most the
    /// largest allocation).
    pub(super) fn take(&self, len: usize) -> Result<Lease<'_>> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let fitting = slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| slot.memory.size >= len && slot.idle())
            .min_by_key(|(_, slot)| slot.memory.size)
            .map(|(i, _)| i);
        if let Some(i) = fitting {
            let mut slot = slots.swap_remove(i);
            slot.last = None;
            return Ok(Lease { pool: self, slot: Some(slot) });
        }
        if slots.len() >= MAX_IDLE {
            // Outgrown: idle buffers too small for this copy are unmapped
            // here, on the enqueueing thread.
            slots.retain(|slot| slot.memory.size >= len || !slot.idle());
        }
        drop(slots);
        let size = len.max(MIN_STAGING).checked_next_power_of_two().unwrap_or(len);
        let size = usize::try_from(self.limit).map_or(size, |limit| size.min(limit.max(len)));
        let memory = ClMemory::pinned(self.context.get(), Arc::clone(&self.mapper), size, self.limit)?;
        Ok(Lease { pool: self, slot: Some(Slot { memory, last: None }) })
    }
}

impl Lease<'_> {
    /// The mapped bytes, for the commands that read and write them.
    pub(super) fn ptr(&self) -> *mut u8 {
        self.slot.as_ref().and_then(|slot| slot.memory.host_ptr()).map_or(std::ptr::null_mut(), |p| p.as_ptr())
    }

    /// Returns the buffer to its pool, busy until `last` (the last command
    /// enqueued that uses the bytes, if any) has completed or failed.
    pub(super) fn give_back(mut self, last: Option<Arc<Event>>) {
        if let Some(mut slot) = self.slot.take() {
            slot.last = last;
            self.pool.slots.lock().unwrap_or_else(PoisonError::into_inner).push(slot);
        }
    }
}

impl Drop for Lease<'_> {
    /// A lease dropped without [`Lease::give_back`] had no command enqueued
    /// on its bytes: the buffer goes back idle.
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.slots.lock().unwrap_or_else(PoisonError::into_inner).push(slot);
        }
    }
}

impl Drop for StagingPool {
    fn drop(&mut self) {
        for slot in self.slots.get_mut().unwrap_or_else(PoisonError::into_inner).iter() {
            if let Some(event) = &slot.last {
                // Commands of another device's queue may still use the
                // bytes; the unmap (the slot's drop) waits for them.
                let _ = event.wait();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HALVES_FROM, pieces};

    #[test]
    fn copies_from_the_threshold_move_in_two_aligned_halves() {
        assert_eq!(pieces(0), vec![(0, 0)]);
        assert_eq!(pieces(HALVES_FROM - 1), vec![(0, HALVES_FROM - 1)]);
        for len in [HALVES_FROM, HALVES_FROM + 1, HALVES_FROM + 63, 3 * HALVES_FROM + 5] {
            let p = pieces(len);
            assert_eq!(p.len(), 2, "{len}");
            assert_eq!(p[0].0, 0);
            assert_eq!(p[0].1 % 64, 0, "{len}: the first half is 64-byte aligned");
            assert_eq!(p[1].0, p[0].1, "{len}: the halves meet");
            assert_eq!(p[0].1 + p[1].1, len, "{len}: and cover the copy");
            assert!(p[1].1 >= p[0].1, "{len}");
        }
    }
}
