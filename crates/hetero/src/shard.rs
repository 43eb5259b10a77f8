//! Per-thread shards of state that every operation touches, so that host
//! threads enqueuing on their own streams do not write the same cache
//! lines (a lock word or a list shared by all of them moves between cores
//! on every operation, and the threads then take turns).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Shards of each sharded value: more than the host threads that usually
/// enqueue at once on one device.
pub(crate) const SHARDS: usize = 8;

/// A value alone on its cache lines (two 64-byte lines: adjacent-line
/// prefetch pairs them on x86).
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Padded<T>(pub(crate) T);

static NEXT: AtomicUsize = AtomicUsize::new(0);

crate::sync::thread_local! {
    static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
}

/// The calling thread's shard: threads take shards in turn as they first
/// ask, so up to [`SHARDS`] threads each have their own.
pub(crate) fn current() -> usize {
    // A thread being torn down (a destructor that enqueues) uses shard 0.
    SHARD.try_with(|s| *s).unwrap_or(0)
}

/// One value per shard, each on its own cache lines.
pub(crate) type Sharded<T> = Box<[Padded<T>]>;

/// One value per shard.
pub(crate) fn each<T: Default>() -> Sharded<T> {
    (0..SHARDS).map(|_| Padded::default()).collect()
}
