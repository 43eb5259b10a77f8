//! The caching allocator: device and pinned blocks handed back by dropped
//! buffers are kept and handed out again, instead of going back to the
//! driver (whose allocations and frees may synchronise the device).
//!
//! Blocks come in geometric size classes (powers of two from
//! [`MIN_BLOCK`] to [`MAX_BLOCK`] bytes; larger requests bypass the cache,
//! as in CUB's caching allocator). A dropped buffer's block keeps the
//! tracking marks of its last uses, each with its stream. A block is handed
//! out again:
//!
//! - at once, to any request, when every mark has completed (or it had none);
//! - at once, to a request made for stream `S` ([`crate::Stream::alloc`]),
//!   when every pending mark is on `S`: the new buffer inherits the marks
//!   as writes, so work on `S` runs after them by stream order, and work on
//!   other streams (and the host) waits for them through the tracker.
//!
//! No other block is handed out while its marks are pending, so a new
//! buffer never aliases memory that queued work uses, and never makes an
//! unrelated stream wait. Pinned blocks are handed out only once idle, and
//! zeroed over the requested length (`alloc_pinned` promises zeros).
//!
//! A block given back when the cache would exceed its cap is freed
//! (stream-ordered, see [`super::state::DeviceState::retire`]) instead. When
//! the driver reports out of memory, the kind's cache is trimmed and the
//! allocation retried once.

use super::cache::{AllocatorMode, Block, Cache, MemoryKind, Pool, Taken, class, index};
use super::state::DeviceState;
use crate::device::{AllocId, Device, StreamId};
use crate::error::{ErrorKind, Result};

impl Cache {
    /// Blocks whose uses are still pending (after dropping completed marks).
    pub(crate) fn pending_blocks<D: Device>(&self, shared: &DeviceState<D>) -> usize {
        let mut count = 0;
        for kind in [MemoryKind::Device, MemoryKind::Pinned] {
            for block in self.pool(kind).bins.iter_mut().flatten() {
                shared.settle(&mut block.pending);
                count += usize::from(!block.pending.is_empty());
            }
        }
        count
    }

    /// Gives up every cached block of `kind`: idle ones are freed now, the
    /// rest are retired (freed once their uses complete).
    pub(crate) fn trim<D: Device>(&self, shared: &DeviceState<D>, kind: MemoryKind) {
        let blocks: Vec<Block> = {
            let mut pool = self.pool(kind);
            pool.stats.bytes_cached = 0;
            pool.bins.iter_mut().flat_map(std::mem::take).collect()
        };
        for block in blocks {
            // SAFETY: no buffer uses a cached block and its marks follow
            // every queued use (type invariant).
            unsafe { shared.retire(block.alloc, block.pending) };
        }
    }
}

impl<D: Device> DeviceState<D> {
    /// A block of at least `bytes` of `kind` memory: from the cache when
    /// one may be reused (for use on `stream`, when given), else from the
    /// driver (trimming the cache and retrying once when it is out of memory).
    pub(crate) fn take(&self, kind: MemoryKind, bytes: usize, stream: Option<StreamId>) -> Result<Taken> {
        let cache = self.cache();
        if let Some(e) = &cache.error {
            return Err(e.clone());
        }
        // Whether the pool may cache is fixed at creation, so a request it
        // cannot serve locks the pool once, after the driver call.
        let class = class(bytes).filter(|_| cache.caching[index(kind)]);
        if let Some((bin, _)) = class {
            let mut pool = cache.pool(kind);
            pool.stats.requests += 1;
            if let Some(taken) = self.reuse(&mut pool, bin, stream) {
                return Ok(taken);
            }
            pool.stats.misses += 1;
        }
        let size = class.map_or(bytes, |(_, block)| block);
        self.reap();
        let alloc = match self.driver_alloc(kind, size) {
            Err(e) if e.kind == ErrorKind::OutOfMemory => {
                cache.trim(self, kind);
                self.reap();
                self.driver_alloc(kind, size)
            }
            other => other,
        };
        let mut pool = cache.pool(kind);
        if class.is_none() {
            pool.stats.requests += 1;
            pool.stats.misses += 1;
        }
        let alloc = alloc?;
        pool.held(size);
        drop(pool);
        Ok(Taken { alloc, bytes: size, fresh: true, cached: class.is_some(), host: None, inherited: Vec::new() })
    }

    /// A cached block of class `bin` that may serve a request on `stream`.
    fn reuse(&self, pool: &mut Pool, bin: usize, stream: Option<StreamId>) -> Option<Taken> {
        let blocks = &mut pool.bins[bin];
        // Another device's use is never on `stream`: such a block waits
        // until that use has completed.
        let usable = |b: &Block| b.pending.iter().all(|u| u.from.is_none() && Some(u.stream) == stream);
        let at = match blocks.iter().rposition(usable) {
            Some(at) => at,
            // Marks may have completed since the blocks came back.
            None => (0..blocks.len()).rev().find(|&at| {
                self.settle(&mut blocks[at].pending);
                blocks[at].pending.is_empty()
            })?,
        };
        let block = blocks.remove(at);
        pool.stats.hits += 1;
        pool.stats.bytes_cached -= block.bytes as u64;
        pool.held(block.bytes);
        Some(Taken {
            alloc: block.alloc,
            bytes: block.bytes,
            fresh: false,
            cached: true,
            host: block.host,
            inherited: block.pending,
        })
    }

    fn driver_alloc(&self, kind: MemoryKind, bytes: usize) -> Result<AllocId> {
        match kind {
            MemoryKind::Device => self.alloc_device(bytes),
            MemoryKind::Pinned => self.alloc_pinned(bytes),
        }
    }

    /// Takes back a buffer's block: cached when it came from the cache and
    /// fits under the cap, else freed once its uses complete.
    ///
    /// # Safety
    /// The caller gives up `block`, whose `pending` holds a mark after every
    /// queued use, and keeps no host reference into it.
    pub(crate) unsafe fn give_back(&self, kind: MemoryKind, block: Block, cached: bool) {
        let cache = self.cache();
        let mut pool = cache.pool(kind);
        pool.stats.bytes_in_use -= block.bytes as u64;
        let fits = pool.stats.bytes_cached + block.bytes as u64 <= pool.cap as u64;
        if cached
            && fits
            && pool.mode == AllocatorMode::Caching
            && let Some((bin, _)) = class(block.bytes)
        {
            pool.stats.bytes_cached += block.bytes as u64;
            pool.bins[bin].push(block);
            return;
        }
        drop(pool);
        // SAFETY: the caller gives the block up; its marks follow every use.
        unsafe { self.retire(block.alloc, block.pending) };
    }
}
