//! [`DeviceState`]: the typed layer's per-device state, as every object of
//! the layer holds it (the device, its spare marks, caches and pending
//! completions), and the allocations it frees later (stream-ordered frees).
//!
//! Dropping a buffer never blocks: if queued work may still use the
//! allocation, the allocation is *retired* with the events of its last uses
//! and freed once they have all completed. Retired allocations are reaped
//! on later allocations, buffer drops and stream synchronisations, and when
//! the last object of the device goes. What is still pending then is left
//! to the backend, whose drop opens every gate and releases what remains
//! once the device's work has finished (see the `Device` contract); an
//! allocation that another device's work still uses (a peer copy's) is
//! first waited for: off the dropping thread while a gate is closed
//! anywhere, as the wait may be for it; else before the drop returns.
//!
//! The device itself, with its spare marks, is held apart ([`Core`]): other
//! devices' trackers hold it for the marks they keep of it, so that its
//! events stay valid after its state has gone, without holding the state.

use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use crate::sync::{AtomicBool, AtomicUsize, Mutex, MutexGuard};
use smallvec::SmallVec;

use super::cache::{AllocatorOptions, Cache, MemoryKind};
use super::gates;
use super::marks::{Foreign, Mark, Pending, PendingUse, Spare};
use super::waiter::Waiter;
use crate::device::{AllocId, Device, EventId, StreamId};
use crate::error::{Error, ErrorKind, Result};
use crate::shard::{self, Sharded};

/// A device and its spare mark events: what a mark of the device needs to
/// be queried, waited for and given back.
///
/// Invariant: every spare event belongs to `device` and is used by nobody.
pub(crate) struct Core<D: Device> {
    /// Dropped last, by [`Core`]'s drop: on its own thread when the
    /// device's streams may wait on another device ([`Self::crossed`])
    /// while a gate is closed.
    device: ManuallyDrop<D>,
    /// Whether a stream of this device was made to wait on another
    /// device's event (a peer copy or wait), or its buffers were used by
    /// another device's: its backend's drop, which waits for its streams,
    /// may then wait on work another device holds back, such as a gate
    /// that this thread opens later.
    crossed: AtomicBool,
    /// Spare marks, per shard ([`crate::shard`]) so that threads enqueuing
    /// at once do not contend for one list: each `Arc` unique, so reusing
    /// one allocates nothing.
    spare: Sharded<Mutex<Vec<Arc<EventId>>>>,
}

impl<D: Device> Deref for Core<D> {
    type Target = D;
    fn deref(&self) -> &D {
        &self.device
    }
}

impl<D: Device> Core<D> {
    /// The calling thread's spare marks.
    fn spare(&self) -> MutexGuard<'_, Vec<Arc<EventId>>> {
        self.spare[shard::current()].0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Gives up one clone of a mark of this device; the last one makes its
    /// event spare.
    pub(crate) fn recycle(&self, mark: Mark) {
        if let Some(event) = mark.into_spare() {
            self.spare().push(event);
        }
    }

    /// Whether releasing the device, or waiting for its retired
    /// allocations' uses, must leave the dropping thread: its streams may
    /// wait on another device's work ([`Self::crossed`]) while a gate the
    /// dropping thread opens later is closed ([`gates`]).
    fn release_off_thread(&self) -> bool {
        self.crossed.load(Ordering::Relaxed) && gates::any_closed()
    }

    /// Gives up a pending use's mark, to its device: this one, or the
    /// foreign one it names.
    fn give_up(&self, used: PendingUse) {
        match &used.from {
            None => self.recycle(used.mark),
            Some(from) => recycle_foreign::<D>(from, used.mark),
        }
    }
}

impl<D: Device> Drop for Core<D> {
    fn drop(&mut self) {
        let spare =
            self.spare.iter_mut().flat_map(|s| std::mem::take(s.0.get_mut().unwrap_or_else(PoisonError::into_inner)));
        for event in spare.collect::<Vec<_>>() {
            // SAFETY: spare events are used by nobody (type invariant).
            let _ = unsafe { self.device.destroy_event(*event) };
        }
        // What remains is in use by work the device has not finished: the
        // backend's own drop waits for that work (after opening every gate)
        // and releases it. Freeing it here could free memory in use.
        // SAFETY: the device is taken once, here, and not used after.
        let device = unsafe { ManuallyDrop::take(&mut self.device) };
        if self.release_off_thread() {
            // Its streams may wait on another device's work, which may wait
            // on a gate this thread has yet to open: the drop must not
            // block it (`dropping_a_device_with_peer_work_queued`). Where no
            // thread can be started, the device is dropped here. With no
            // gate closed, all that work ends by itself, and the device is
            // released before this drop returns: a process that exits next
            // does not tear its runtime down under a thread still calling
            // it (`a_process_exits_cleanly_after_dropping_devices_that_copied`).
            let _ = std::thread::Builder::new().name("hetero-drop".into()).spawn(move || drop(device));
        } else {
            drop(device);
        }
    }
}

impl Foreign {
    /// The device `core`, as a mark's foreign device.
    pub(crate) fn new<D: Device>(core: &Arc<Core<D>>) -> Self {
        Self(Arc::clone(core) as Arc<dyn std::any::Any + Send + Sync>)
    }

    /// The device, of the tracker's device type `D` (the only type a peer
    /// copy stores); `None` for another (a defect).
    pub(crate) fn core<D: Device>(&self) -> Option<&Core<D>> {
        self.0.downcast_ref::<Core<D>>()
    }
}

/// The device whose event a mark stored with `from` is: `own` (the
/// allocation's), or the foreign one; `None` for a foreign device of
/// another type (a defect: a peer copy joins devices of one type).
pub(crate) fn owner_of<'d, D: Device>(from: Option<&'d Foreign>, own: &'d D) -> Option<&'d D> {
    match from {
        None => Some(own),
        Some(from) => from.core::<D>().map(|core| &**core),
    }
}

impl PendingUse {
    /// The device whose event the mark is ([`owner_of`]).
    pub(crate) fn owner<'d, D: Device>(&'d self, own: &'d D) -> Option<&'d D> {
        owner_of(self.from.as_ref(), own)
    }
}

/// Where the marks that one operation gives up go: its stream's
/// [`Spare`] first, then the device's spare lists.
pub(crate) struct Recycler<'a, D: Device> {
    pub(crate) shared: &'a DeviceState<D>,
    pub(crate) spare: &'a mut Spare,
}

impl<D: Device> Recycler<'_, D> {
    /// Gives up one clone of a mark; the last one makes its event spare.
    pub(crate) fn give(&mut self, mark: Mark) {
        if let Some(event) = mark.into_spare() {
            if self.spare.is_none() {
                *self.spare = Some(event);
            } else {
                self.shared.core.spare().push(event);
            }
        }
    }

    /// Gives up one clone of a mark of `from`, or of this device.
    pub(crate) fn give_from(&mut self, mark: Mark, from: Option<&Foreign>) {
        match from {
            None => self.give(mark),
            Some(from) => recycle_foreign::<D>(from, mark),
        }
    }
}

/// Gives up one clone of a mark of the foreign device `from`.
fn recycle_foreign<D: Device>(from: &Foreign, mark: Mark) {
    // Of another type (impossible): the event is dropped, not reused, and
    // released with its device.
    if let Some(core) = from.core::<D>() {
        core.recycle(mark);
    }
}

/// An allocation waiting for the marks of its last uses.
struct Retired {
    alloc: AllocId,
    /// Marks of queued uses; all must complete before the free.
    pending: Pending,
}

/// One device, its deferred frees and its spare tracking events; owned
/// through an `Arc` by the context and every stream, event, buffer and
/// module made from it.
///
/// Invariant: every allocation in `retired` belongs to the device, and is
/// used by nobody else (the buffer that owned it is gone); each of its
/// marks is an event of the device or of its [`Foreign`] one.
///
/// Public only so that sealed traits can name it; its module is private.
#[doc(hidden)]
pub struct DeviceState<D: Device> {
    /// The device and its spare marks, which other devices' trackers may
    /// hold beyond this state.
    pub(crate) core: Arc<Core<D>>,
    retired: Mutex<Vec<Retired>>,
    /// `retired.len()`, stored under its lock, read without it: lets
    /// [`Self::reap`] skip the lock when nothing is retired (every driver
    /// allocation and free reaps). A reap that reads a stale zero only
    /// leaves the freeing to the next one.
    retired_len: AtomicUsize,
    cache: Cache,
    waiter: Arc<Waiter<D>>,
}

impl<D: Device> Deref for DeviceState<D> {
    type Target = D;
    fn deref(&self) -> &D {
        &self.core.device
    }
}

impl<D: Device> DeviceState<D> {
    pub(crate) fn new(device: D, options: Result<AllocatorOptions>) -> Self {
        let cache = Cache::new(options, device.info().total_memory);
        let core = Core { device: ManuallyDrop::new(device), crossed: AtomicBool::new(false), spare: shard::each() };
        Self {
            core: Arc::new(core),
            retired: Mutex::new(Vec::new()),
            retired_len: AtomicUsize::new(0),
            cache,
            waiter: Arc::new(Waiter::new()),
        }
    }

    /// Notes that a stream of this device waits on another device, or that
    /// another device's stream uses its memory.
    pub(crate) fn cross(&self) {
        if !self.core.crossed.load(Ordering::Relaxed) {
            self.core.crossed.store(true, Ordering::Relaxed);
        }
    }

    /// The caching allocator's blocks and statistics.
    pub(crate) fn cache(&self) -> &Cache {
        &self.cache
    }

    /// The pending completions and their waker thread.
    pub(crate) fn waiter(&self) -> &Arc<Waiter<D>> {
        &self.waiter
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Retired>> {
        self.retired.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Destroys every spare tracking event (they are made again when needed).
    pub(crate) fn trim_spare(&self) {
        for shard in self.core.spare.iter() {
            let events = std::mem::take(&mut *shard.0.lock().unwrap_or_else(PoisonError::into_inner));
            for event in events {
                // SAFETY: spare events are used by nobody (type invariant),
                // and this one has just left the spare list.
                let _ = unsafe { self.destroy_event(*event) };
            }
        }
    }

    /// The calling thread's spare marks.
    fn spare(&self) -> MutexGuard<'_, Vec<Arc<EventId>>> {
        self.core.spare()
    }

    /// Records a mark at the current end of `stream` (a spare event, or a
    /// new one). On an error nothing was recorded.
    ///
    /// # Safety
    /// `stream` must be owned by the caller.
    pub(crate) unsafe fn mark(&self, stream: StreamId) -> Result<Mark> {
        let mut spare = None;
        // SAFETY: as the caller's.
        let mark = unsafe { self.mark_from(stream, &mut spare) };
        // The event back to the device's spares when the recording failed.
        self.keep_spare(spare);
        mark
    }

    /// As [`Self::mark`], taking the event from `spare` first; on an error
    /// the event is left in `spare`.
    ///
    /// # Safety
    /// `stream` must be owned by the caller.
    pub(crate) unsafe fn mark_from(&self, stream: StreamId, spare: &mut Spare) -> Result<Mark> {
        // A spare event may still be pending: recording it again is fine, as
        // every backend gives an event the meaning of its latest recording
        // and waits keep what they captured (the contract of `record_event`).
        let event = match spare.take().or_else(|| self.spare().pop()) {
            Some(e) => e,
            None => Arc::new(self.create_sync_event()?),
        };
        // SAFETY: the event is ours and unused (spare or new); the caller owns the stream.
        match unsafe { self.record_event(*event, stream) } {
            Ok(()) => Ok(Mark(event)),
            Err(e) => {
                *spare = Some(event);
                Err(e)
            }
        }
    }

    /// Puts an event in `spare` for the mark an operation records after it
    /// enqueues (a spare one, or a new one): made before the enqueue, a
    /// failure to make it leaves nothing queued, and nothing to wait for.
    pub(crate) fn ready_spare(&self, spare: &mut Spare) -> Result<()> {
        if spare.is_none() {
            *spare = Some(match self.spare().pop() {
                Some(event) => event,
                None => Arc::new(self.create_sync_event()?),
            });
        }
        Ok(())
    }

    /// The mark after work just enqueued on `stream`, from `spare`: when
    /// recording fails it is tried once more, and a second recording that
    /// works tracks the work as the first would have (the first error is
    /// given along, for the operation to return). `Err` when both failed
    /// (the first error, its message followed by the second's): the work
    /// is untracked, and the caller must synchronise the stream.
    ///
    /// A second try, not a synchronisation at once, because the stream may
    /// wait on a gate that the calling thread has yet to open: waiting for
    /// it here would never return (`every_failed_call_is_an_error_and_leaves_nothing_behind`).
    ///
    /// # Safety
    /// `stream` must be owned by the caller.
    pub(crate) unsafe fn mark_enqueued(
        &self,
        stream: StreamId,
        spare: &mut Spare,
    ) -> Result<(Mark, Option<crate::error::Error>)> {
        // SAFETY: as the caller's.
        match unsafe { self.mark_from(stream, spare) } {
            Ok(mark) => Ok((mark, None)),
            // SAFETY: as the caller's.
            Err(first) => match unsafe { self.mark_from(stream, spare) } {
                Ok(mark) => Ok((mark, Some(first))),
                Err(second) => Err(crate::error::Error {
                    message: format!("{}; recording it again failed too: {}", first.message, second.message),
                    ..first
                }),
            },
        }
    }

    /// Gives up one clone of a mark; the last one makes its event spare.
    pub(crate) fn recycle(&self, mark: Mark) {
        self.core.recycle(mark);
    }

    /// Makes a spare event the device's: a stream's, when the stream goes,
    /// or the one a failed [`Self::mark`] leaves.
    pub(crate) fn keep_spare(&self, spare: Spare) {
        if let Some(event) = spare {
            self.spare().push(event);
        }
    }

    /// Frees `alloc` once the marks in `pending` have completed; at once
    /// when they already have. Never blocks on the device.
    ///
    /// # Safety
    /// `alloc` must belong to this device and be owned by the caller, who
    /// gives it up; `pending` must hold a mark recorded after every queued
    /// use of `alloc`, and no host reference into the allocation may remain.
    pub(crate) unsafe fn retire(&self, alloc: AllocId, pending: Pending) {
        if pending.is_empty() {
            // Never used by queued work: freed at once, without the list.
            // SAFETY: the caller gives the allocation up and nothing uses it.
            let _ = unsafe { self.free(alloc) };
        } else {
            let mut retired = self.lock();
            retired.push(Retired { alloc, pending });
            self.retired_len.store(retired.len(), Ordering::Release);
        }
        self.reap();
    }

    /// Drops the marks of `pending` that have completed, recycling them (a
    /// mark whose query fails stays).
    pub(crate) fn settle(&self, pending: &mut Pending) {
        let mut at = 0;
        while at < pending.len() {
            let used = &pending[at];
            // SAFETY: marks are live events of their owners (type invariant).
            let done = used.owner::<D>(self).map(|owner| unsafe { owner.query_event(used.mark.id()) });
            if matches!(done, Some(Ok(true))) {
                self.core.give_up(pending.swap_remove(at));
            } else {
                at += 1;
            }
        }
    }

    /// Frees every retired allocation whose uses have completed. The frees
    /// run after the list's lock is let go: freeing adopted memory runs its
    /// owner's release, which may drop buffers of this device and so retire
    /// and reap again (`dlpack_round_trip`).
    pub(crate) fn reap(&self) {
        if self.retired_len.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut done: SmallVec<[AllocId; 8]> = SmallVec::new();
        {
            let mut retired = self.lock();
            retired.retain_mut(|r| {
                // A mark whose query fails (a faulted or lost device) keeps its
                // allocation retired: the device's drop deals with it.
                self.settle(&mut r.pending);
                if !r.pending.is_empty() {
                    return true;
                }
                done.push(r.alloc);
                false
            });
            self.retired_len.store(retired.len(), Ordering::Release);
        }
        for alloc in done {
            // SAFETY: every use of the allocation has completed and nobody
            // else holds its handle or a host reference (type invariant);
            // it left the list above, so it is freed once.
            let _ = unsafe { self.free(alloc) };
        }
    }

    /// Allocations held back until their last uses complete: retired ones
    /// and cached blocks not yet reusable by every stream.
    pub(crate) fn retired_count(&self) -> usize {
        self.lock().len() + self.cache.pending_blocks(self)
    }
}

impl<D: Device> Drop for DeviceState<D> {
    fn drop(&mut self) {
        self.waiter.shut_down();
        // Idle cached blocks are freed now; the others join the retired ones.
        for kind in [MemoryKind::Device, MemoryKind::Pinned] {
            self.cache.trim(self, kind);
        }
        self.reap();
        // What is still retired the backend's drop frees once its own
        // streams are done. On a device whose memory other devices' work
        // used (a peer copy's), that work may still use it: the retired
        // allocations are then waited for, all uses, and freed, before the
        // device goes. That wait may be for a gate this thread opens later,
        // so while a gate is closed it runs on its own thread, which holds
        // the device until it is done; else, or where no thread can be
        // started, it runs here.
        let retired = std::mem::take(self.retired.get_mut().unwrap_or_else(PoisonError::into_inner));
        if !retired.is_empty() && self.core.crossed.load(Ordering::Relaxed) {
            let job = Arc::new(Mutex::new(Some((Arc::clone(&self.core), retired))));
            let theirs = Arc::clone(&job);
            let spawned = self.core.release_off_thread()
                && std::thread::Builder::new().name("hetero-drop".into()).spawn(move || free_retired(&theirs)).is_ok();
            if !spawned {
                free_retired(&job);
            }
        }
    }
}

/// A dropped device's retired allocations, with the device.
type RetiredJob<D> = Mutex<Option<(Arc<Core<D>>, Vec<Retired>)>>;

/// Waits for every use of the allocations in `job` (once, whoever calls
/// first), gives their marks back, frees each allocation whose uses all
/// completed (one whose wait failed is left to the backend's drop), and
/// then lets go of the device.
fn free_retired<D: Device>(job: &RetiredJob<D>) {
    let Some((core, retired)) = job.lock().unwrap_or_else(PoisonError::into_inner).take() else { return };
    for r in retired {
        let mut done = true;
        for used in r.pending {
            // SAFETY: a live event of its owner (type invariant).
            let waited = used.owner::<D>(&core).map(|owner| unsafe { owner.synchronize_event(used.mark.id()) });
            done &= matches!(waited, Some(Ok(())));
            core.give_up(used);
        }
        if done {
            // SAFETY: every use of the allocation has completed, and nobody
            // else holds it (type invariant); it left the list, so it is
            // freed once.
            let _ = unsafe { core.free(r.alloc) };
        }
    }
    drop(core);
}

/// Errors unless `a` and `b` are the same device instance.
pub(crate) fn same_device<D: Device>(
    a: &Arc<DeviceState<D>>,
    b: &Arc<DeviceState<D>>,
    call: &'static str,
) -> Result<()> {
    if Arc::ptr_eq(a, b) {
        return Ok(());
    }
    Err(Error::new(
        a.info().backend,
        call,
        ErrorKind::DeviceMismatch,
        format!(
            "objects of two devices used together ({} `{}` and {} `{}`); create every stream, event, buffer and module from the same Context",
            a.info().backend,
            a.info().name,
            b.info().backend,
            b.info().name
        ),
    ))
}

#[cfg(all(test, feature = "host"))]
mod tests {
    use super::*;
    use crate::backend::host::HostDevice;
    use crate::device::StreamFlags;

    /// Defect: two holders recycling the last two clones of a mark at once
    /// could both see the other's clone, and neither returned the event to
    /// the spares. Every round here gives up the clones of one mark from
    /// four threads at once: the event must come back exactly once. The
    /// window is a few instructions wide: 5000 rounds on 2 cores did not
    /// hit it with the old code, so this holds the rule (exactly once, never
    /// twice) more than it reproduces the race.
    #[test]
    fn racing_holders_return_a_mark_once() {
        let shared = DeviceState::new(HostDevice::new(), Ok(AllocatorOptions::for_backend(crate::Backend::Host)));
        let stream = shared.create_stream(StreamFlags::default()).unwrap_or_else(|e| panic!("{e}"));
        let spares =
            |s: &DeviceState<HostDevice>| s.core.spare.iter().map(|l| l.0.lock().map_or(0, |v| v.len())).sum::<usize>();
        // Four holders per mark, on four threads released at once.
        const HOLDERS: usize = 4;
        for round in 0..1000 {
            let before = spares(&shared);
            // SAFETY: the stream is this test's.
            let mark = unsafe { shared.mark(stream) }.unwrap_or_else(|e| panic!("{e}"));
            let taken = spares(&shared);
            let barrier = std::sync::Barrier::new(HOLDERS);
            let mut clones: Vec<Mark> = (1..HOLDERS).map(|_| mark.clone()).collect();
            clones.push(mark);
            std::thread::scope(|scope| {
                for clone in clones {
                    let (shared, barrier) = (&shared, &barrier);
                    scope.spawn(move || {
                        barrier.wait();
                        shared.recycle(clone);
                    });
                }
            });
            assert_eq!(
                spares(&shared),
                taken + 1,
                "round {round}: the mark's event came back {} times",
                spares(&shared) as i64 - taken as i64
            );
            assert!(spares(&shared) >= before, "round {round}");
        }
        // SAFETY: the stream is this test's; no work is queued.
        let _ = unsafe { shared.destroy_stream(stream) };
    }
}
