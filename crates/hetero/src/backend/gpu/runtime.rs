//! [`Runtime`]: what the shared GPU device needs of a CUDA-like runtime.
//!
//! Each method wraps exactly one vendor call (or a fixed short sequence,
//! documented where it is one) and converts its status into an [`Error`](crate::Error)
//! whose kind is [`crate::ErrorKind::KernelFault`] for the runtime's sticky
//! errors; the shared device poisons itself on those. Handles are the
//! runtime's raw ones; the shared device owns them and upholds each
//! method's `# Safety` contract. Only `cuda/runtime.rs` and
//! `hip/runtime.rs` implement it.

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use crate::device::{Backend, StreamFlags};
use crate::error::Result;

/// A device attribute the shared device reads for [`crate::DeviceInfo`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attribute {
    /// Threads per block.
    MaxThreadsPerBlock,
    /// Block extent in dimension 0, 1 or 2.
    MaxBlockDim(u8),
    /// Grid extent in dimension 0, 1 or 2.
    MaxGridDim(u8),
    /// Shared memory per block, bytes.
    SharedMemoryPerBlock,
    /// Multiprocessors (compute units).
    MultiprocessorCount,
    /// Warp or wavefront size.
    WarpSize,
}

/// The name, vendor, platform line and memory size of a device, which each
/// runtime finds its own way.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Marketing name.
    pub name: String,
    /// Vendor as reported.
    pub vendor: String,
    /// Driver and architecture line.
    pub platform: String,
    /// Global memory, bytes.
    pub total_memory: u64,
    /// PCI address, where the runtime gives it.
    pub pci_bus_id: Option<String>,
    /// UUID, where the runtime gives it.
    pub uuid: Option<String>,
    /// GPU target, where known ([`crate::DeviceInfo::arch`]).
    pub arch: Option<String>,
}

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// One device of a CUDA-like runtime (CUDA, HIP), as the shared device
/// drives it. Sealed: implemented by the CUDA and HIP backends only.
///
/// Every method that takes a handle requires, as its `# Safety`, that the
/// handle is live and of this device, and that [`Runtime::enter`] has made
/// the device current on the calling thread.
#[doc(hidden)]
#[allow(clippy::missing_safety_doc)] // one contract for every method, stated above
pub trait Runtime: sealed::Sealed + Send + Sync + Sized + 'static {
    /// The backend this runtime is.
    const BACKEND: Backend;
    /// A stream.
    type Stream: Copy + 'static;
    /// An event.
    type Event: Copy + 'static;
    /// A loaded module.
    type Module: Copy + 'static;
    /// A kernel function.
    type Function: Copy + 'static;
    /// A device address.
    type Ptr: Copy + 'static;
    /// A graph as stream capture made it (`CUgraph`, `hipGraph_t`).
    type Graph: Copy + 'static;
    /// An instantiated graph (`CUgraphExec`, `hipGraphExec_t`).
    type GraphExec: Copy + 'static;
    /// A node of a captured graph (`CUgraphNode`, `hipGraphNode_t`).
    type GraphNode: Copy + 'static;
    /// Whether the runtime documents that destroying or updating an
    /// instantiated graph leaves launches already queued as they were
    /// (CUDA does; HIP states nothing, so the device keeps an executable
    /// until an event after its last launch has completed, and changes one
    /// that may be in flight on another executable of the same graph: an
    /// idle spare, or one instantiated anew).
    const GRAPHS_OUTLIVE_LAUNCHES: bool;

    /// The process-wide cache of built modules of this runtime.
    fn module_cache() -> &'static ModuleCache<Self>;

    /// Makes the device current on this thread (CUDA: its primary context;
    /// HIP: `hipSetDevice`).
    fn enter(&self) -> Result<()>;
    /// A number that identifies the physical device within the process
    /// (the key of the module cache).
    fn device_key(&self) -> i64;
    /// Reads an attribute of the device.
    fn attribute(&self, attribute: Attribute) -> Result<i32>;
    /// Name, vendor, platform line and memory of the device.
    fn identity(&self) -> Result<Identity>;
    /// The stream the stream-ordered allocator works on, if the device has
    /// memory pools; created once per device.
    fn pool_stream(&self) -> Result<Option<Self::Stream>>;

    /// Creates a stream.
    unsafe fn stream_create(&self, flags: StreamFlags) -> Result<Self::Stream>;
    /// Destroys a stream (never called on a busy one).
    unsafe fn stream_destroy(&self, stream: Self::Stream);
    /// Waits for a stream.
    unsafe fn stream_synchronize(&self, stream: Self::Stream) -> Result<()>;
    /// `true` when the stream is idle.
    unsafe fn stream_query(&self, stream: Self::Stream) -> Result<bool>;
    /// Makes `stream` wait for `event`.
    unsafe fn stream_wait_event(&self, stream: Self::Stream, event: Self::Event) -> Result<()>;
    /// Makes `stream` wait until the 32-bit word at `addr` is `>= value`.
    unsafe fn stream_wait_word(&self, stream: Self::Stream, addr: Self::Ptr, value: u32) -> Result<()>;

    /// Creates an event whose host waits block (not spin), with timing or
    /// (cheaper to record) without.
    unsafe fn event_create(&self, timing: bool) -> Result<Self::Event>;
    /// Destroys an event.
    unsafe fn event_destroy(&self, event: Self::Event) -> Result<()>;
    /// Records an event on a stream.
    unsafe fn event_record(&self, event: Self::Event, stream: Self::Stream) -> Result<()>;
    /// `true` when the event's last recording completed.
    unsafe fn event_query(&self, event: Self::Event) -> Result<bool>;
    /// Waits for the event's last recording.
    unsafe fn event_synchronize(&self, event: Self::Event) -> Result<()>;
    /// Milliseconds between two completed recordings.
    unsafe fn event_elapsed(&self, start: Self::Event, end: Self::Event) -> Result<f32>;

    /// Page-locked host memory of `bytes` (at least 1), portable across
    /// contexts, and mapped into the device's address space when `mapped`.
    unsafe fn host_alloc(&self, bytes: usize, mapped: bool) -> Result<NonNull<u8>>;
    /// The device address of mapped page-locked memory.
    unsafe fn host_device_ptr(&self, host: NonNull<u8>) -> Result<Self::Ptr>;
    /// Releases page-locked memory (may wait for the device).
    unsafe fn host_free(&self, host: NonNull<u8>) -> Result<()>;
    /// Device memory of `bytes` (at least 1), ready for every stream on
    /// return: from the pool through `pool` where there is one. Returns the
    /// address and whether it came from the pool.
    unsafe fn mem_alloc(&self, bytes: usize, pool: Option<Self::Stream>) -> Result<(Self::Ptr, bool)>;
    /// Releases device memory, through `pool` when it came from the pool.
    unsafe fn mem_free(&self, ptr: Self::Ptr, pool: Option<Self::Stream>) -> Result<()>;
    /// `ptr + offset`.
    fn ptr_add(ptr: Self::Ptr, offset: usize) -> Self::Ptr;
    /// The address as a number, and back.
    fn ptr_to_raw(ptr: Self::Ptr) -> u64;
    /// See [`Runtime::ptr_to_raw`].
    fn ptr_from_raw(raw: u64) -> Self::Ptr;
    /// The stream as a pointer-sized handle, and back.
    fn stream_to_raw(stream: Self::Stream) -> *mut c_void;
    /// See [`Runtime::stream_to_raw`].
    fn stream_from_raw(raw: *mut c_void) -> Self::Stream;
    /// Checks, where the runtime can tell cheaply, that foreign memory at
    /// `ptr` is this device's; `Ok` where it cannot tell.
    unsafe fn check_foreign_ptr(&self, ptr: Self::Ptr) -> Result<()> {
        let _ = ptr;
        Ok(())
    }
    /// As [`Runtime::check_foreign_ptr`], for a foreign stream.
    unsafe fn check_foreign_stream(&self, stream: Self::Stream) -> Result<()> {
        let _ = stream;
        Ok(())
    }

    /// Enqueues a host-to-device copy.
    unsafe fn copy_h2d(&self, dst: Self::Ptr, src: *const u8, len: usize, stream: Self::Stream) -> Result<()>;
    /// Enqueues a device-to-host copy.
    unsafe fn copy_d2h(&self, dst: *mut u8, src: Self::Ptr, len: usize, stream: Self::Stream) -> Result<()>;
    /// Enqueues a device-to-device copy.
    unsafe fn copy_d2d(&self, dst: Self::Ptr, src: Self::Ptr, len: usize, stream: Self::Stream) -> Result<()>;
    /// Whether this device can read and write `peer`'s memory directly
    /// (`false` for one physical device: it is no peer of itself).
    fn can_access_peer(&self, peer: &Self) -> Result<bool>;
    /// Lets this (current) device reach `peer`'s memory directly, its
    /// memory pool's stream-ordered allocations included (the pool grants
    /// access apart from the context); access already enabled is success.
    unsafe fn enable_peer_access(&self, peer: &Self) -> Result<()>;
    /// Enqueues a copy of `len` bytes from `src`, memory of `from`, to
    /// `dst`, memory of `to`, on `stream` of this device.
    #[allow(clippy::too_many_arguments)]
    unsafe fn copy_peer(
        &self,
        dst: Self::Ptr,
        to: &Self,
        src: Self::Ptr,
        from: &Self,
        len: usize,
        stream: Self::Stream,
    ) -> Result<()>;
    /// Enqueues filling `count` 32-bit words at `dst` with `value`.
    unsafe fn fill_u32(&self, dst: Self::Ptr, value: u32, count: usize, stream: Self::Stream) -> Result<()>;

    /// Compiles portable source (already assembled with the CUDA prelude)
    /// for this device, with the compiler flags `options` need; the error
    /// kind is `Build` with the compiler's log.
    fn compile(&self, source: &CStr, options: &crate::device::BuildOptions) -> Result<Vec<c_char>>;
    /// Loads a compiled image.
    unsafe fn module_load(&self, image: &[c_char]) -> Result<Self::Module>;
    /// The kernel `name` of a module; `KernelNotFound` when it has none.
    unsafe fn module_function(&self, module: Self::Module, name: &CStr) -> Result<Self::Function>;
    /// The kernel's largest block and its static shared memory in bytes.
    unsafe fn function_limits(&self, function: Self::Function) -> Result<(u32, usize)>;
    /// Starts capturing `stream`'s enqueues into a graph (relaxed mode:
    /// other threads' calls go on as usual).
    unsafe fn capture_begin(&self, stream: Self::Stream) -> Result<()>;
    /// Ends the capture begun on `stream`, returning the graph; the stream
    /// is no longer capturing afterwards, also on error.
    unsafe fn capture_end(&self, stream: Self::Stream) -> Result<Self::Graph>;
    /// Instantiates a captured graph.
    unsafe fn graph_instantiate(&self, graph: Self::Graph) -> Result<Self::GraphExec>;
    /// Updates an instantiated graph to `graph`'s parameters; `false` when
    /// the runtime refuses (another topology), leaving `exec` as it was.
    unsafe fn graph_exec_update(&self, exec: Self::GraphExec, graph: Self::Graph) -> Result<bool>;
    /// Enqueues an instantiated graph.
    unsafe fn graph_launch(&self, exec: Self::GraphExec, stream: Self::Stream) -> Result<()>;
    /// Destroys a captured graph.
    unsafe fn graph_destroy(&self, graph: Self::Graph);
    /// Destroys an instantiated graph.
    unsafe fn graph_exec_destroy(&self, exec: Self::GraphExec);
    /// The node the last enqueue on the capturing `stream` became, where
    /// this runtime names it (`None`: graphs are updated by capturing
    /// them again).
    unsafe fn captured_node(&self, stream: Self::Stream) -> Result<Option<Self::GraphNode>>;
    /// Makes `node`, a launch of the graph `exec` was instantiated from,
    /// launch `function` with `params` (one pointer per argument) in later
    /// launches of `exec`. Called only with nodes
    /// [`Runtime::captured_node`] named, and where the runtime does not
    /// document that launches already queued run as they were
    /// ([`Runtime::GRAPHS_OUTLIVE_LAUNCHES`]), only on an executable with
    /// no launch queued.
    #[allow(clippy::too_many_arguments)]
    unsafe fn exec_set_launch(
        &self,
        exec: Self::GraphExec,
        node: Self::GraphNode,
        function: Self::Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: *mut *mut c_void,
    ) -> Result<()>;
    /// Enqueues a launch; `params` points to one pointer per argument.
    unsafe fn launch(
        &self,
        function: Self::Function,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        stream: Self::Stream,
        params: *mut *mut c_void,
    ) -> Result<()>;
}

/// What the CUDA and HIP symbol tests share: the calls a backend's sources
/// make, and a real library's exported names.
/// A loaded module.
pub(super) struct GpuModule<R: Runtime>(pub(super) R::Module);

// SAFETY: module and function handles may be used from any thread.
unsafe impl<R: Runtime> Send for GpuModule<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuModule<R> {}

/// Built modules by device key and source, for the whole process: one
/// `static` per runtime.
pub struct ModuleCache<R: Runtime>(pub(super) Mutex<Option<Modules<R>>>);

pub(super) type Modules<R> = HashMap<(i64, crate::device::BuildOptions, String), Arc<GpuModule<R>>>;

impl<R: Runtime> ModuleCache<R> {
    /// An empty cache.
    pub const fn new() -> Self {
        Self(Mutex::new(None))
    }
}

impl<R: Runtime> Default for ModuleCache<R> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
pub(crate) mod symbols {
    use std::collections::BTreeSet;

    /// The names called as `{path}::{prefix}Name(` in `sources`, `Name`
    /// capitalised (`path` is `sys` for cudarc's bindings, `hip` for HIP's;
    /// helpers such as `sys::culib` are left out).
    pub(crate) fn called(sources: &[&str], path: &str, prefix: &str) -> BTreeSet<String> {
        let lead = format!("{path}::{prefix}");
        let mut names = BTreeSet::new();
        for source in sources {
            for (at, _) in source.match_indices(&lead) {
                let start = at + path.len() + 2;
                let name: String =
                    source[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                let capitalised = name[prefix.len()..].starts_with(|c: char| c.is_ascii_uppercase());
                if capitalised && source[start + name.len()..].starts_with('(') {
                    names.insert(name);
                }
            }
        }
        names
    }

    /// The exported names listed one per line in the file `var` names
    /// (`nm -D --defined-only`, versions stripped), or `None` after
    /// printing why the test is skipped.
    pub(crate) fn exports(var: &str) -> Option<BTreeSet<String>> {
        let Some(path) = std::env::var_os(var) else {
            println!("skipped: {var} names no list of a library's exports");
            return None;
        };
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.to_string_lossy()));
        let names: BTreeSet<String> = text.lines().map(|l| l.trim().to_string()).collect();
        assert!(names.len() > 100, "{} lists {} names: not a library's exports", path.to_string_lossy(), names.len());
        Some(names)
    }
}
