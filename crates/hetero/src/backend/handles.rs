//! The handle table every backend keeps: plain-data ids to shared objects.
//!
//! Ids are unique across every table of every device in the process, so a
//! handle issued by one device (or of another kind) is never found in
//! another table and is refused with [`ErrorKind::InvalidHandle`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use rustc_hash::FxHashMap;

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};
use crate::shard::{self, Sharded};

/// Objects by id.
type Table<T> = FxHashMap<u64, Arc<T>>;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Objects of one kind owned by one device, by id, and the released ones
/// still busy (see [`Handles::retire`]).
///
/// Every operation looks several objects up, from every host thread that
/// enqueues, while objects come and go far less often. So each shard
/// ([`crate::shard`]) keeps a copy of the table under its own lock: a
/// lookup takes only its thread's shard, and threads on their own streams
/// do not contend for one lock word; an insert or removal takes every
/// shard's lock (in shard order), so all copies change at once.
pub(crate) struct Handles<T> {
    backend: Backend,
    what: &'static str,
    /// Ids are ours, not an adversary's, so SipHash's resistance to chosen
    /// keys buys nothing; every operation does several lookups, each hashed
    /// with one multiply (`FxHash`).
    shards: Sharded<RwLock<Table<T>>>,
    retired: Mutex<Vec<Arc<T>>>,
}

impl<T> Handles<T> {
    /// An empty table of objects described as `what` in errors (e.g. "stream").
    pub(crate) fn new(backend: Backend, what: &'static str) -> Self {
        Self { backend, what, shards: shard::each(), retired: Mutex::new(Vec::new()) }
    }

    /// The calling thread's copy, for a lookup.
    fn read(&self) -> RwLockReadGuard<'_, Table<T>> {
        self.shards[shard::current()].0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every copy, locked in shard order, for a change.
    fn write(&self) -> Vec<RwLockWriteGuard<'_, Table<T>>> {
        self.shards.iter().map(|s| s.0.write().unwrap_or_else(PoisonError::into_inner)).collect()
    }

    /// Stores `value` under a fresh id.
    pub(crate) fn insert(&self, value: T) -> u64 {
        self.insert_shared(Arc::new(value))
    }

    /// Stores an object that other ids may share (e.g. a cached module).
    pub(crate) fn insert_shared(&self, value: Arc<T>) -> u64 {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        for mut copy in self.write() {
            copy.insert(id, Arc::clone(&value));
        }
        id
    }

    /// The object with `id`, or an `InvalidHandle` error naming `call`.
    pub(crate) fn get(&self, call: &'static str, id: u64) -> Result<Arc<T>> {
        self.read().get(&id).cloned().ok_or_else(|| self.invalid(call, id))
    }

    /// Calls `f` with the object with `id`, under the calling thread's read
    /// lock instead of through a new reference: an object all threads use
    /// (a kernel) then has no reference count that every call writes. `f`
    /// must not use this table (a second read lock on one thread can wait
    /// for a writer queued behind the first).
    #[cfg_attr(not(any(feature = "opencl", feature = "cuda", feature = "hip")), allow(dead_code))]
    pub(crate) fn with<R>(&self, call: &'static str, id: u64, f: impl FnOnce(&T) -> R) -> Result<R> {
        let copy = self.read();
        let object = copy.get(&id).ok_or_else(|| self.invalid(call, id))?;
        Ok(f(object))
    }

    /// Removes and returns the object with `id`.
    pub(crate) fn remove(&self, call: &'static str, id: u64) -> Result<Arc<T>> {
        let mut removed = None;
        for mut copy in self.write() {
            removed = copy.remove(&id).or(removed);
        }
        removed.ok_or_else(|| self.invalid(call, id))
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

    /// Removes and returns every object, retired ones included (for a device's drop).
    pub(crate) fn take_all(&self) -> Vec<Arc<T>> {
        let mut copies = self.write();
        let mut all: Vec<Arc<T>> = copies.first_mut().map(|c| c.drain().map(|(_, v)| v).collect()).unwrap_or_default();
        for copy in copies.iter_mut().skip(1) {
            copy.clear();
        }
        all.append(&mut self.retired.lock().unwrap_or_else(PoisonError::into_inner));
        all
    }

    fn invalid(&self, call: &'static str, id: u64) -> Error {
        Error::new(
            self.backend,
            call,
            ErrorKind::InvalidHandle,
            format!("{} #{id} does not belong to this device (released, or issued by another device)", self.what),
        )
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

    /// Guards the sharded copies: an object inserted on one thread is found
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
