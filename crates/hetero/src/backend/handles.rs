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

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Objects of one kind owned by one device, by id, and the released ones
/// still busy (see [`Handles::retire`]).
pub(crate) struct Handles<T> {
    backend: Backend,
    what: &'static str,
    /// Ids are ours, not an adversary's, so SipHash's resistance to chosen
    /// keys buys nothing; every operation does several lookups, each hashed
    /// with one multiply (`FxHash`). Lookups, the common case, share a read
    /// lock: host threads enqueueing on their own streams do not queue for it.
    map: RwLock<FxHashMap<u64, Arc<T>>>,
    retired: Mutex<Vec<Arc<T>>>,
}

impl<T> Handles<T> {
    /// An empty table of objects described as `what` in errors (e.g. "stream").
    pub(crate) fn new(backend: Backend, what: &'static str) -> Self {
        Self { backend, what, map: RwLock::new(FxHashMap::default()), retired: Mutex::new(Vec::new()) }
    }

    fn read(&self) -> RwLockReadGuard<'_, FxHashMap<u64, Arc<T>>> {
        self.map.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, FxHashMap<u64, Arc<T>>> {
        self.map.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores `value` under a fresh id.
    pub(crate) fn insert(&self, value: T) -> u64 {
        self.insert_shared(Arc::new(value))
    }

    /// Stores an object that other ids may share (e.g. a cached module).
    pub(crate) fn insert_shared(&self, value: Arc<T>) -> u64 {
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.write().insert(id, value);
        id
    }

    /// The object with `id`, or an `InvalidHandle` error naming `call`.
    pub(crate) fn get(&self, call: &'static str, id: u64) -> Result<Arc<T>> {
        self.read().get(&id).cloned().ok_or_else(|| self.invalid(call, id))
    }

    /// Removes and returns the object with `id`.
    pub(crate) fn remove(&self, call: &'static str, id: u64) -> Result<Arc<T>> {
        self.write().remove(&id).ok_or_else(|| self.invalid(call, id))
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
        let mut all: Vec<Arc<T>> = self.write().drain().map(|(_, v)| v).collect();
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
