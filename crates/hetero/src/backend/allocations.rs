//! The allocation table every backend keeps: objects that come and go with
//! the work, stored by value in slots.
//!
//! Allocations are made and freed as often as work is enqueued (the typed
//! layer's pool aside), so the table holds each one in place in a slot of
//! a per-shard slab, with no reference-counted box and no hashing: an id
//! names its slot, an insert and a removal take one shard's lock, and a
//! lookup copies out what the operation needs (a device address, a buffer
//! handle) under the read lock. Nothing keeps an allocation alive past its
//! lookup; the [`crate::Device`] contract does: no caller frees an
//! allocation that another is using.
//!
//! An id is `TAG | seq << 24 | slot << 3 | shard`. `TAG` (the top bit) is
//! never set in the ids of [`super::handles`], whose counter gives `seq`
//! (its low 39 bits), so an id of another table, or of another device's
//! allocation table, is refused; so is a released id, whose slot holds
//! another id or none. Ids repeat only once 2^39 ids have been issued in the
//! process, and a stale id is mistaken for a live one only if its slot holds
//! an allocation made exactly a multiple of 2^39 ids later.

use std::sync::{PoisonError, RwLock};

use super::handles;
use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::shard::{self, SHARDS, Sharded};

/// Set in every allocation id, never in another table's.
const TAG: u64 = 1 << 63;
/// Bits of an id below its sequence number: slot and shard.
const INDEX_BITS: u32 = 24;
/// Bits of the shard.
const SHARD_BITS: u32 = SHARDS.trailing_zeros();
/// Slots of one shard's slab.
const SLOTS: usize = 1 << (INDEX_BITS - SHARD_BITS);
const _: () = assert!(SHARDS.is_power_of_two() && SHARD_BITS < INDEX_BITS);

/// Allocations of one device, by id: a slab per shard, each behind its own
/// lock. A thread inserts into its own shard, so threads allocating at once
/// take different locks.
pub(crate) struct Allocations<T> {
    backend: Backend,
    slabs: Sharded<RwLock<Slab<T>>>,
}

/// One shard's allocations. Invariant: a slot holds a value exactly when
/// its id is non-zero, and `vacant` lists the slots that hold none.
struct Slab<T> {
    slots: Vec<Slot<T>>,
    vacant: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Self { slots: Vec::new(), vacant: Vec::new() }
    }
}

struct Slot<T> {
    id: u64,
    value: Option<T>,
}

/// The shard and slot that `id` names, if it is an allocation id.
fn place(id: u64) -> Option<(usize, usize)> {
    let index = (id & TAG != 0).then_some(id & ((1 << INDEX_BITS) - 1))?;
    Some(((index % SHARDS as u64) as usize, (index >> SHARD_BITS) as usize))
}

impl<T> Allocations<T> {
    /// An empty table.
    pub(crate) fn new(backend: Backend) -> Self {
        Self { backend, slabs: shard::each() }
    }

    /// Stores `value` under a fresh id. When every shard is full (2^21 live
    /// allocations each), `value` comes back with the error, for the caller
    /// to release.
    pub(crate) fn insert(&self, value: T) -> std::result::Result<u64, (T, Error)> {
        let seq = handles::fresh_id() & ((1 << (63 - INDEX_BITS)) - 1);
        let first = shard::current();
        for shard in (first..SHARDS).chain(0..first) {
            let mut slab = self.slabs[shard].0.write().unwrap_or_else(PoisonError::into_inner);
            let slot = match slab.vacant.pop() {
                Some(slot) => slot as usize,
                None if slab.slots.len() < SLOTS => {
                    slab.slots.push(Slot { id: 0, value: None });
                    slab.slots.len() - 1
                }
                None => continue,
            };
            let id = TAG | seq << INDEX_BITS | (slot << SHARD_BITS | shard) as u64;
            slab.slots[slot] = Slot { id, value: Some(value) };
            return Ok(id);
        }
        let message = format!("this device holds {} allocations, as many as its table can name", SLOTS * SHARDS);
        Err((value, Error::new(self.backend, "alloc", ErrorKind::OutOfMemory, message)))
    }

    /// Calls `f` with the allocation `id`, under its shard's read lock. `f`
    /// copies out what the caller needs; it must not block (the shard's
    /// writers wait for it) nor use this table.
    pub(crate) fn with<R>(&self, call: &'static str, id: u64, f: impl FnOnce(&T) -> R) -> Result<R> {
        let found = place(id).and_then(|(shard, slot)| {
            let slab = self.slabs[shard].0.read().unwrap_or_else(PoisonError::into_inner);
            slab.slots.get(slot).filter(|s| s.id == id).and_then(|s| s.value.as_ref()).map(f)
        });
        found.ok_or_else(|| self.invalid(call, id))
    }

    /// Removes and returns the allocation `id`; dropping it is the caller's
    /// business, outside the lock.
    pub(crate) fn remove(&self, call: &'static str, id: u64) -> Result<T> {
        let removed = place(id).and_then(|(shard, slot)| {
            let mut slab = self.slabs[shard].0.write().unwrap_or_else(PoisonError::into_inner);
            let held = slab.slots.get_mut(slot).filter(|s| s.id == id)?;
            held.id = 0;
            let value = held.value.take();
            slab.vacant.push(slot as u32);
            value
        });
        removed.ok_or_else(|| self.invalid(call, id))
    }

    /// Allocations in the table.
    pub(crate) fn live(&self) -> usize {
        self.slabs
            .iter()
            .map(|slab| {
                let slab = slab.0.read().unwrap_or_else(PoisonError::into_inner);
                slab.slots.len() - slab.vacant.len()
            })
            .sum()
    }

    /// Removes and returns every allocation (for a device's drop where
    /// allocations need more than a drop to be freed: CUDA and HIP).
    #[cfg_attr(not(any(feature = "cuda", feature = "hip")), allow(dead_code))]
    pub(crate) fn take_all(&self) -> Vec<T> {
        let mut all = Vec::new();
        for slab in self.slabs.iter() {
            let mut slab = slab.0.write().unwrap_or_else(PoisonError::into_inner);
            all.extend(slab.slots.drain(..).filter_map(|slot| slot.value));
            slab.vacant.clear();
        }
        all
    }

    fn invalid(&self, call: &'static str, id: u64) -> Error {
        handles::invalid(self.backend, call, "allocation", id)
    }
}

#[cfg(test)]
mod tests {
    use super::{Allocations, TAG};
    use crate::backend::handles::Handles;
    use crate::device::Backend;
    use crate::shard::SHARDS;

    fn insert(table: &Allocations<u32>, value: u32) -> u64 {
        table.insert(value).unwrap_or_else(|(_, e)| panic!("{e}"))
    }

    /// Looks `id` up from more threads than there are shards.
    fn found_by_every_thread(table: &Allocations<u32>, id: u64) -> Vec<bool> {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..2 * SHARDS).map(|_| s.spawn(|| table.with("test", id, |v| *v).is_ok())).collect();
            threads.into_iter().map(|t| t.join().unwrap_or(false)).collect()
        })
    }

    /// Guards the per-shard slabs: an allocation inserted on one thread is
    /// found from every thread, and once removed (or taken by `take_all`)
    /// from none; a second removal is refused.
    #[test]
    fn inserts_and_removals_reach_every_thread() {
        let table = Allocations::new(Backend::Host);
        // Inserted from several threads, so several shards hold some.
        let ids: Vec<u64> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..2 * SHARDS as u32)
                .map(|v| {
                    s.spawn({
                        let table = &table;
                        move || insert(table, v)
                    })
                })
                .collect();
            threads.into_iter().filter_map(|t| t.join().ok()).collect()
        });
        assert_eq!(ids.len(), 2 * SHARDS);
        assert!(ids.iter().all(|&id| found_by_every_thread(&table, id).iter().all(|&f| f)));
        let first = table.with("test", ids[0], |v| *v).ok();
        assert_eq!(table.remove("test", ids[0]).ok(), first);
        assert!(found_by_every_thread(&table, ids[0]).iter().all(|&f| !f), "a removed id stayed");
        assert!(table.remove("test", ids[0]).is_err(), "an id is removed once");
        assert_eq!(table.take_all().len(), ids.len() - 1);
        assert!(ids.iter().all(|&id| table.with("test", id, |_| ()).is_err()), "take_all left an id");
    }

    /// Guards slot reuse: the allocation that takes a freed slot gets a new
    /// id, and the freed id is refused rather than naming it.
    #[test]
    fn a_reused_slot_refuses_its_old_id() {
        let table = Allocations::new(Backend::Host);
        let old = insert(&table, 1);
        assert!(table.remove("test", old).is_ok());
        let new = insert(&table, 2);
        assert_ne!(old, new);
        assert_eq!(super::place(old), super::place(new), "the freed slot was not reused");
        assert!(table.with("test", old, |v| *v).is_err());
        assert!(table.remove("test", old).is_err());
        assert_eq!(table.with("test", new, |v| *v).ok(), Some(2));
    }

    /// Guards the shared id space: an allocation's id is refused by another
    /// device's table and by every other kind of table, and their ids by it.
    #[test]
    fn ids_of_other_tables_are_refused() {
        let (mine, other) = (Allocations::new(Backend::Host), Allocations::<u32>::new(Backend::Host));
        let streams = Handles::new(Backend::Host, "stream");
        let (id, stream) = (insert(&mine, 1), streams.insert(2u32));
        assert!(id & TAG != 0 && stream & TAG == 0);
        // The other table's slot of the same place, taken.
        let theirs = insert(&other, 3);
        assert!(other.with("test", id, |_| ()).is_err());
        assert!(mine.with("test", theirs, |_| ()).is_err());
        assert!(mine.with("test", stream, |_| ()).is_err());
        assert!(streams.get("test", id).is_err());
        let message = other.with("free", id, |_| ()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("does not belong to this device"), "{message}");
    }
}
