//! The handle table every backend keeps: plain-data ids to shared objects.
//!
//! Ids are unique across every table of every device in the process, so a
//! handle issued by one device (or of another kind) is never found in
//! another table and is refused with [`ErrorKind::InvalidHandle`].

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};

use rustc_hash::FxHashMap;

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::shard::{self, SHARDS, Sharded};
use crate::sync::{Mutex, RwLock};

/// Objects by id.
type Table<T> = FxHashMap<u64, Arc<T>>;

/// The first id no thread has taken yet.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Ids a thread takes from [`NEXT_ID`] at once, so that handing one out
/// (every allocation takes one) writes no word that every thread shares.
const ID_BLOCK: u64 = 1024;

thread_local! {
    /// The calling thread's untaken ids: `next..end` of its block.
    static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A fresh id, unique among the ids of every table of every device in the
/// process. It never reaches 2^63 (2^63 ids, one a nanosecond, would take
/// 292 years, and a thread leaves at most one block partly unused), so the
/// top bit is free for allocation ids ([`super::allocations`]), which take
/// their sequence number from here.
pub(crate) fn fresh_id() -> u64 {
    let from_block = IDS.try_with(|ids| {
        let (next, end) = ids.get();
        if next < end {
            ids.set((next + 1, end));
            return next;
        }
        let start = NEXT_ID.fetch_add(ID_BLOCK, Ordering::Relaxed);
        ids.set((start + 1, start + ID_BLOCK));
        start
    });
    // A thread whose locals are already gone takes ids one at a time.
    from_block.unwrap_or_else(|_| NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

/// The refusal of id `id` of a `what` (e.g. "stream") by `call`: not one of
/// this device's, or released.
#[cold]
pub(crate) fn invalid(backend: Backend, call: &'static str, what: &str, id: u64) -> Error {
    Error::new(
        backend,
        call,
        ErrorKind::InvalidHandle,
        format!("{what} #{id} does not belong to this device (released, or issued by another device)"),
    )
}

/// Objects of one kind owned by one device, by id, and the released ones
/// still busy (see [`Handles::retire`]): streams, events, modules, kernels.
/// Allocations, which come and go with the work, have a table of their own
/// ([`super::allocations`]).
///
/// Every operation looks several objects up, from every host thread that
/// enqueues, so a lookup must not write a lock word that all those threads
/// share ([`crate::shard`]): the map has a read gate per thread shard. A
/// lookup read-locks its thread's gate, so threads looking up one kernel at
/// once write nothing in common; a change write-locks every gate, in shard
/// order, and so excludes every reader. Ids are ours, not an adversary's, so
/// SipHash's resistance to chosen keys buys nothing; every operation does
/// several lookups, each hashed with one multiply (`FxHash`).
///
/// Invariant: `map` is read only under one gate's read lock and changed
/// only under every gate's write lock.
pub(crate) struct Handles<T> {
    backend: Backend,
    what: &'static str,
    gates: Sharded<RwLock<()>>,
    map: UnsafeCell<Table<T>>,
    retired: Mutex<Vec<Arc<T>>>,
}

// SAFETY: the map is shared between threads only as its gates allow (the
// type's invariant): reads under a read lock, changes under every write
// lock, as a `RwLock<Table<T>>` would, which is `Sync` when `T` is
// `Send + Sync`; everything else is `Sync` under the same bound.
unsafe impl<T: Send + Sync> Sync for Handles<T> {}

impl<T> Handles<T> {
    /// An empty table, described as `what` in errors (e.g. "stream").
    pub(crate) fn new(backend: Backend, what: &'static str) -> Self {
        Self {
            backend,
            what,
            gates: shard::each(),
            map: UnsafeCell::new(FxHashMap::default()),
            retired: Mutex::new(Vec::new()),
        }
    }

    /// Calls `f` with the map, locked for reading.
    fn read<R>(&self, f: impl FnOnce(&Table<T>) -> R) -> R {
        let _gate = self.gates[shard::current()].0.read().unwrap_or_else(PoisonError::into_inner);
        // SAFETY: a gate is read-locked, so no change is under way (type invariant).
        f(unsafe { &*self.map.get() })
    }

    /// Calls `f` with the map, locked for a change.
    fn write<R>(&self, f: impl FnOnce(&mut Table<T>) -> R) -> R {
        let _gates: [_; SHARDS] =
            std::array::from_fn(|shard| self.gates[shard].0.write().unwrap_or_else(PoisonError::into_inner));
        // SAFETY: every gate is write-locked, so nothing else reads or changes the map.
        f(unsafe { &mut *self.map.get() })
    }

    /// Stores `value` under a fresh id.
    pub(crate) fn insert(&self, value: T) -> u64 {
        self.insert_shared(Arc::new(value))
    }

    /// Stores an object that other ids may share (e.g. a cached module).
    pub(crate) fn insert_shared(&self, value: Arc<T>) -> u64 {
        let id = fresh_id();
        self.write(|map| map.insert(id, value));
        id
    }

    /// The object with `id`, or an `InvalidHandle` error naming `call`.
    pub(crate) fn get(&self, call: &'static str, id: u64) -> Result<Arc<T>> {
        self.read(|map| map.get(&id).cloned()).ok_or_else(|| self.invalid(call, id))
    }

    /// Calls `f` with the object with `id`, under its table's read lock
    /// instead of through a new reference: an object all threads use
    /// (a kernel) then has no reference count that every call writes. `f`
    /// must not block (no driver call that can wait for the device, such as
    /// an enqueue into a full queue): a change to the table waits for every
    /// reader, holding up the others meanwhile, and the thread that would
    /// let the device go on could be one of them. Nor may `f` use this table
    /// (a second read lock on one thread can wait for a writer queued
    /// behind the first).
    #[cfg_attr(not(any(feature = "opencl", feature = "cuda", feature = "hip")), allow(dead_code))]
    pub(crate) fn with<R>(&self, call: &'static str, id: u64, f: impl FnOnce(&T) -> R) -> Result<R> {
        self.read(|map| map.get(&id).map(|object| f(object))).ok_or_else(|| self.invalid(call, id))
    }

    /// Removes and returns the object with `id`.
    pub(crate) fn remove(&self, call: &'static str, id: u64) -> Result<Arc<T>> {
        self.write(|map| map.remove(&id)).ok_or_else(|| self.invalid(call, id))
    }

    /// Releases `id` without dropping a busy object: it is kept until
    /// `busy` says otherwise (asked of every kept object at each call), or
    /// until [`Handles::take_all`]. Streams use this: destroying one with
    /// queued work could block, or free what that work still uses.
    pub(crate) fn retire(&self, call: &'static str, id: u64, busy: impl Fn(&T) -> bool) -> Result<()> {
        let object = self.remove(call, id)?;
        let mut retired = self.retired.lock().unwrap_or_else(PoisonError::into_inner);
        retired.push(object);
        retired.retain(|o| busy(o));
        Ok(())
    }

    /// Drops the retired objects that `busy` says are done (as each
    /// [`Handles::retire`] does), so that a count of live handles does not
    /// include streams that finished since the last release.
    #[cfg(any(feature = "host", feature = "opencl"))]
    pub(crate) fn drop_finished(&self, busy: impl Fn(&T) -> bool) {
        self.retired.lock().unwrap_or_else(PoisonError::into_inner).retain(|o| busy(o));
    }

    /// Objects in the table, retired ones still in use included.
    pub(crate) fn live(&self) -> usize {
        self.read(|map| map.len()) + self.retired.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Removes and returns every object, retired ones included (for a device's drop).
    pub(crate) fn take_all(&self) -> Vec<Arc<T>> {
        let mut all: Vec<Arc<T>> = self.write(|map| map.drain().map(|(_, v)| v).collect());
        all.append(&mut self.retired.lock().unwrap_or_else(PoisonError::into_inner));
        all
    }

    fn invalid(&self, call: &'static str, id: u64) -> Error {
        invalid(self.backend, call, self.what, id)
    }
}

#[cfg(test)]
mod tests {
    use super::Handles;
    use crate::device::Backend;
    use crate::shard::SHARDS;

    /// Looks `id` up from more threads than there are shards, so that
    /// every shard's copy is read at least once.
    fn found_by_every_thread(table: &Handles<u32>, id: u64) -> Vec<bool> {
        std::thread::scope(|s| {
            let threads: Vec<_> = (0..2 * SHARDS).map(|_| s.spawn(|| table.get("test", id).is_ok())).collect();
            threads.into_iter().map(|t| t.join().unwrap_or(false)).collect()
        })
    }

    /// Guards the per-thread id blocks: two threads, or one thread across
    /// the end of its block, must never be handed the same id.
    #[test]
    fn fresh_ids_are_unique_across_threads() {
        let per_thread = 3 * super::ID_BLOCK as usize + 7;
        let ids: Vec<u64> = std::thread::scope(|s| {
            let threads: Vec<_> = (0..8)
                .map(|_| s.spawn(move || (0..per_thread).map(|_| super::fresh_id()).collect::<Vec<_>>()))
                .collect();
            threads.into_iter().flat_map(|t| t.join().unwrap_or_default()).collect()
        });
        assert_eq!(ids.len(), 8 * per_thread, "a thread panicked");
        let distinct: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(distinct.len(), ids.len(), "an id was handed out twice");
        assert!(ids.iter().all(|&id| id > 0 && id < 1 << 63));
    }

    /// Guards the sharded gates: an object inserted on one thread is found
    /// from every shard, and once removed (or taken by `take_all`) from none.
    #[test]
    fn every_shard_sees_inserts_and_removals() {
        let table = Handles::new(Backend::Host, "thing");
        let (a, b) = (table.insert(1), table.insert(2));
        assert!(found_by_every_thread(&table, a).iter().all(|&f| f));
        assert_eq!(table.remove("test", a).ok().map(|v| *v), Some(1));
        assert!(found_by_every_thread(&table, a).iter().all(|&f| !f), "a removed id stayed in some shard");
        assert!(table.remove("test", a).is_err(), "an id is removed once");
        assert_eq!(table.take_all().len(), 1);
        assert!(found_by_every_thread(&table, b).iter().all(|&f| !f), "take_all left an id in some shard");
    }
}

/// The handle table under Shuttle (`--cfg hetero_shuttle`; see
/// `crate::sync`): threads on distinct shards insert, look up and remove
/// at once, every interleaving of their gates chosen by the checker.
#[cfg(all(test, hetero_shuttle))]
mod model {
    use std::sync::Arc;

    use shuttle::sync::Mutex;

    use super::Handles;
    use crate::device::Backend;

    /// Invariant (ARCHITECTURE.md, `backend/handles.rs`): a change
    /// write-locks every gate in shard order, a lookup read-locks its own;
    /// so changes from several threads never deadlock, an id published
    /// after its insert is found from every thread until it is removed, and
    /// never after. Fails (a deadlock) when a removal takes the gates in
    /// the other order.
    #[test]
    fn changes_and_lookups_from_every_shard_agree() {
        let check = || {
            let table = Arc::new(Handles::<u64>::new(Backend::Host, "thing"));
            // Ids inserted and not yet removed, and ids removed, as published.
            let published = Arc::new(Mutex::new((Vec::new(), Vec::new())));
            let threads: Vec<_> = (0..3u64)
                .map(|t| {
                    let (table, published) = (Arc::clone(&table), Arc::clone(&published));
                    shuttle::thread::spawn(move || {
                        for round in 0..2u64 {
                            let id = table.insert(10 * t + round);
                            published.lock().unwrap_or_else(|e| e.into_inner()).0.push((id, 10 * t + round));
                            let (live, gone) = published.lock().unwrap_or_else(|e| e.into_inner()).clone();
                            for (other, value) in &live {
                                // Removed meanwhile by its owner, or found with its value.
                                if let Ok(found) = table.get("model", *other) {
                                    assert_eq!(*found, *value);
                                }
                            }
                            for other in gone {
                                assert!(table.get("model", other).is_err(), "a removed id was found");
                            }
                            if round == 1 {
                                let mut p = published.lock().unwrap_or_else(|e| e.into_inner());
                                p.0.retain(|(i, _)| *i != id);
                                let removed = table.remove("model", id);
                                assert_eq!(removed.ok().map(|v| *v), Some(10 * t + round));
                                p.1.push(id);
                            }
                        }
                    })
                })
                .collect();
            for thread in threads {
                let _ = thread.join();
            }
            let (live, _) = published.lock().unwrap_or_else(|e| e.into_inner()).clone();
            for (id, value) in live {
                assert_eq!(table.get("model", id).ok().map(|v| *v), Some(value), "an inserted id was lost");
            }
        };
        shuttle::check_random(check, 300);
        shuttle::check_pct(check, 300, 3);
    }
}
