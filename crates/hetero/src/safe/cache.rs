//! The caching allocator's state: its options and statistics, the blocks
//! it keeps per size class and memory kind, and the host address of a
//! pinned block (plain data; what the allocator does with them is in
//! `alloc.rs`, which has the rules).

use std::ptr::NonNull;
use std::sync::PoisonError;

use crate::sync::{Mutex, MutexGuard};

use super::marks::Pending;
use crate::device::{AllocId, Backend};
use crate::error::{Error, ErrorKind, Result};

/// The host address of a pinned allocation, kept beside its handle so a
/// copy need not look it up. Only an address: whoever dereferences it
/// answers for the access, as with [`crate::Device::pinned_ptr`].
#[derive(Clone, Copy)]
pub(crate) struct HostAddr(pub(crate) NonNull<u8>);

// SAFETY: an address is plain data; every access through it is ordered by
// the owning buffer's tracker and borrows, whichever thread makes it.
unsafe impl Send for HostAddr {}
// SAFETY: as above.
unsafe impl Sync for HostAddr {}

/// The smallest block the cache hands out, in bytes.
pub const MIN_BLOCK: usize = 256;
/// The largest block the cache keeps, in bytes; larger requests are
/// allocated and freed directly.
pub const MAX_BLOCK: usize = 1 << 30;

/// The environment variable that chooses the allocator of contexts made
/// with [`crate::Context::new`]: `caching`, `direct`, or a per-kind list
/// such as `device=caching,pinned=direct`.
pub const ALLOCATOR_ENV: &str = "HETERO_ALLOCATOR";

/// Device memory or pinned host memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// Memory on the device.
    Device,
    /// Page-locked host memory.
    Pinned,
}

/// How one kind of memory is allocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocatorMode {
    /// Every buffer gets its own driver allocation, freed (stream-ordered)
    /// when the buffer is dropped.
    Direct,
    /// Dropped buffers' blocks are kept and reused (see the module docs).
    Caching,
}

/// The allocator options of one context ([`crate::Context::with_allocator`]).
///
/// The default ([`AllocatorOptions::for_backend`]) caches both kinds on
/// GPU backends: a framework allocating per task would otherwise pay a
/// driver allocation and free (which may wait for the device) for every
/// buffer, and a full cache is trimmed and the allocation retried before
/// out of memory is reported, so caching never fails an allocation that
/// direct allocation would have satisfied. The host backend allocates its
/// device memory directly by default: its kernels bounds-check against the
/// allocation, and a cached block is larger than the buffer, so only exact
/// allocations turn every out-of-bounds access into a fault. (Memory past
/// a buffer's end within its block belongs to that buffer alone, so a
/// kernel that strays there corrupts nothing else.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocatorOptions {
    /// How device memory is allocated.
    pub device: AllocatorMode,
    /// How pinned host memory is allocated.
    pub pinned: AllocatorMode,
    /// Most bytes of device memory kept cached; `None` is a quarter of the
    /// device's memory. 0 disables caching.
    pub max_cached_device: Option<usize>,
    /// Most bytes of pinned memory kept cached. 0 disables caching.
    pub max_cached_pinned: usize,
    /// For debugging: every new device buffer (contents unspecified) is
    /// first filled with this 32-bit pattern, so reads of memory nobody
    /// wrote show it. Pinned buffers are always zeroed.
    pub fill: Option<u32>,
}

impl Default for AllocatorOptions {
    fn default() -> Self {
        Self {
            device: AllocatorMode::Caching,
            pinned: AllocatorMode::Caching,
            max_cached_device: None,
            max_cached_pinned: 256 << 20,
            fill: None,
        }
    }
}

impl AllocatorOptions {
    /// The default options for a device of `backend` (see above).
    pub fn for_backend(backend: Backend) -> Self {
        let device = if backend == Backend::Host { AllocatorMode::Direct } else { AllocatorMode::Caching };
        Self { device, ..Self::default() }
    }

    /// Both kinds cached.
    pub fn caching() -> Self {
        Self::default()
    }

    /// Both kinds allocated directly.
    pub fn direct() -> Self {
        Self { device: AllocatorMode::Direct, pinned: AllocatorMode::Direct, ..Self::default() }
    }

    /// The defaults for `backend` with [`ALLOCATOR_ENV`] applied, or an
    /// error naming the value that is not understood.
    pub fn from_env(backend: Backend) -> Result<Self> {
        match std::env::var(ALLOCATOR_ENV) {
            // An empty value (`HETERO_ALLOCATOR=`) is read as unset.
            Ok(value) if value.trim().is_empty() => Ok(Self::for_backend(backend)),
            Ok(value) => Self::for_backend(backend).with_spec(backend, &value),
            Err(std::env::VarError::NotPresent) => Ok(Self::for_backend(backend)),
            Err(std::env::VarError::NotUnicode(v)) => Err(config_error(backend, &v.to_string_lossy())),
        }
    }

    /// Applies a specification as [`ALLOCATOR_ENV`] takes it: `caching`,
    /// `direct`, or `device=MODE,pinned=MODE` with each kind at most once.
    pub fn with_spec(mut self, backend: Backend, spec: &str) -> Result<Self> {
        let mode = |word: &str| match word.trim() {
            "caching" => Some(AllocatorMode::Caching),
            "direct" => Some(AllocatorMode::Direct),
            _ => None,
        };
        if let Some(m) = mode(spec) {
            self.device = m;
            self.pinned = m;
            return Ok(self);
        }
        let mut seen = Vec::new();
        for part in spec.split(',') {
            let parsed = part.split_once('=').and_then(|(kind, m)| Some((kind.trim(), mode(m)?)));
            let kind = match parsed {
                Some(("device", m)) => {
                    self.device = m;
                    "device"
                }
                Some(("pinned", m)) => {
                    self.pinned = m;
                    "pinned"
                }
                _ => return Err(config_error(backend, spec)),
            };
            if seen.contains(&kind) {
                return Err(Error::new(
                    backend,
                    "allocator",
                    ErrorKind::Config,
                    format!("{ALLOCATOR_ENV}={spec:?} gives `{kind}` twice; give each memory kind once"),
                ));
            }
            seen.push(kind);
        }
        Ok(self)
    }

    fn mode(&self, kind: MemoryKind) -> AllocatorMode {
        match kind {
            MemoryKind::Device => self.device,
            MemoryKind::Pinned => self.pinned,
        }
    }
}

fn config_error(backend: Backend, value: &str) -> Error {
    Error::new(
        backend,
        "allocator",
        ErrorKind::Config,
        format!(
            "{ALLOCATOR_ENV}={value:?} is not understood; use `caching`, `direct`, \
             or a list such as `device=caching,pinned=direct`"
        ),
    )
}

/// What the allocator did for one kind of memory, since the context was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KindStats {
    /// Allocations asked for.
    pub requests: u64,
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that went to the driver.
    pub misses: u64,
    /// Bytes held by live buffers (whole blocks when cached).
    pub bytes_in_use: u64,
    /// Bytes kept in the cache for reuse.
    pub bytes_cached: u64,
    /// The most bytes held from the driver at once (in use plus cached).
    pub high_water: u64,
}

/// The allocator's statistics per memory kind ([`crate::Context::allocator_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AllocatorStats {
    /// Device memory.
    pub device: KindStats,
    /// Pinned host memory.
    pub pinned: KindStats,
}

/// A cached allocation and the marks of its last uses.
pub(crate) struct Block {
    pub(crate) alloc: AllocId,
    /// The block's size: what the driver allocated.
    pub(crate) bytes: usize,
    pub(crate) host: Option<HostAddr>,
    /// Marks of uses that may be pending, each with its stream.
    pub(crate) pending: Pending,
}

/// What a request got: a block, and whether it goes back to the cache.
pub(crate) struct Taken {
    pub(crate) alloc: AllocId,
    pub(crate) bytes: usize,
    /// A fresh driver allocation (contents as the driver gives them).
    pub(crate) fresh: bool,
    /// The block came from (and returns to) the cache.
    pub(crate) cached: bool,
    pub(crate) host: Option<HostAddr>,
    /// Pending marks, all on the requesting stream, the buffer inherits.
    pub(crate) inherited: Pending,
}

/// The cache of one memory kind.
pub(super) struct Pool {
    pub(super) mode: AllocatorMode,
    pub(super) cap: usize,
    /// Blocks per size class, index `log2(bytes) - log2(MIN_BLOCK)`;
    /// the most recently given back last.
    pub(super) bins: Vec<Vec<Block>>,
    pub(super) stats: KindStats,
}

/// The caches of one device, both kinds.
///
/// Invariant: every block belongs to the owning device state's device, no
/// buffer uses it, and its `pending` holds a mark after every queued use.
pub(crate) struct Cache {
    pools: [Mutex<Pool>; 2],
    /// Per kind, whether its pool caches (caching mode and a cap above
    /// zero); fixed at creation, so read without the lock.
    pub(super) caching: [bool; 2],
    /// Options that could not be read: every allocation reports this.
    pub(super) error: Option<Error>,
    pub(crate) fill: Option<u32>,
}

pub(super) const BINS: usize = (MAX_BLOCK.trailing_zeros() - MIN_BLOCK.trailing_zeros() + 1) as usize;

/// The size class of a request: its index and block size, or `None` when
/// the request bypasses the cache.
pub(super) fn class(bytes: usize) -> Option<(usize, usize)> {
    if bytes == 0 || bytes > MAX_BLOCK {
        return None;
    }
    let block = bytes.next_power_of_two().max(MIN_BLOCK);
    Some(((block.trailing_zeros() - MIN_BLOCK.trailing_zeros()) as usize, block))
}

pub(super) fn index(kind: MemoryKind) -> usize {
    match kind {
        MemoryKind::Device => 0,
        MemoryKind::Pinned => 1,
    }
}

impl Pool {
    fn new(mode: AllocatorMode, cap: usize) -> Self {
        Self { mode, cap, bins: (0..BINS).map(|_| Vec::new()).collect(), stats: KindStats::default() }
    }

    pub(super) fn held(&mut self, bytes: usize) {
        self.stats.bytes_in_use += bytes as u64;
        self.stats.high_water = self.stats.high_water.max(self.stats.bytes_in_use + self.stats.bytes_cached);
    }
}

impl Cache {
    pub(crate) fn new(options: Result<AllocatorOptions>, total_memory: u64) -> Self {
        let (options, error) = match options {
            Ok(o) => (o, None),
            Err(e) => (AllocatorOptions::direct(), Some(e)),
        };
        let quarter = usize::try_from(total_memory / 4).unwrap_or(usize::MAX);
        let cap = |kind: MemoryKind| match (options.mode(kind), kind) {
            (AllocatorMode::Direct, _) => 0,
            (AllocatorMode::Caching, MemoryKind::Device) => options.max_cached_device.unwrap_or(quarter),
            (AllocatorMode::Caching, MemoryKind::Pinned) => options.max_cached_pinned,
        };
        let kinds = [MemoryKind::Device, MemoryKind::Pinned];
        Self {
            caching: kinds.map(|k| options.mode(k) == AllocatorMode::Caching && cap(k) > 0),
            pools: kinds.map(|k| Mutex::new(Pool::new(options.mode(k), cap(k)))),
            error,
            fill: options.fill,
        }
    }

    pub(super) fn pool(&self, kind: MemoryKind) -> MutexGuard<'_, Pool> {
        self.pools[index(kind)].lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stats(&self) -> AllocatorStats {
        AllocatorStats { device: self.pool(MemoryKind::Device).stats, pinned: self.pool(MemoryKind::Pinned).stats }
    }
}

#[cfg(test)]
mod tests {
    use super::{AllocatorMode, AllocatorOptions, MAX_BLOCK, MIN_BLOCK, class};
    use crate::device::Backend;

    #[test]
    fn size_classes_are_powers_of_two_within_bounds() {
        assert_eq!(class(0), None, "empty requests bypass the cache");
        assert_eq!(class(1), Some((0, MIN_BLOCK)));
        assert_eq!(class(MIN_BLOCK + 1), Some((1, 2 * MIN_BLOCK)));
        assert_eq!(class(1 << 20), Some((12, 1 << 20)));
        assert_eq!(class(MAX_BLOCK).map(|c| c.1), Some(MAX_BLOCK));
        assert_eq!(class(MAX_BLOCK + 1), None, "larger requests bypass the cache");
    }

    #[test]
    fn allocator_specifications_parse_or_name_the_bad_value() {
        let spec = |s: &str| AllocatorOptions::default().with_spec(Backend::Host, s);
        assert_eq!(
            spec("direct").map(|o| (o.device, o.pinned)).ok(),
            Some((AllocatorMode::Direct, AllocatorMode::Direct))
        );
        let mixed = spec("device=caching, pinned=direct").ok().map(|o| (o.device, o.pinned));
        assert_eq!(mixed, Some((AllocatorMode::Caching, AllocatorMode::Direct)));
        for bad in ["cached", "device=fast", "gpu=direct", ""] {
            let e = spec(bad).err().map(|e| e.message).unwrap_or_default();
            assert!(e.contains("HETERO_ALLOCATOR") && e.contains("caching"), "{bad:?}: {e}");
        }
        // Regression: a repeated key was accepted, the last one silently winning.
        let e = spec("device=direct,device=caching").err().map(|e| e.message).unwrap_or_default();
        assert!(e.contains("`device` twice"), "{e}");
    }
}
