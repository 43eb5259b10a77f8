//! Buffers of the OpenCL backend.
//!
//! Device memory is a `CL_MEM_READ_WRITE` buffer. Pinned memory is a buffer
//! created with `CL_MEM_ALLOC_HOST_PTR` and mapped once for its whole life:
//! drivers back such buffers with page-locked memory, so reads and writes
//! from the mapped pointer are true asynchronous DMA transfers. Peer copies
//! between contexts pass through a pool of such buffers ([`StagingPool`]).

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use opencl3::command_queue::{CommandQueue, enqueue_map_buffer, enqueue_unmap_mem_object};
use opencl3::context::Context;
use opencl3::event::{CL_COMPLETE, Event};
use opencl3::memory::{
    CL_BUFFER_CREATE_TYPE_REGION, CL_MAP_READ, CL_MAP_WRITE, CL_MEM_ALLOC_HOST_PTR, CL_MEM_CONTEXT, CL_MEM_READ_WRITE,
    CL_MEM_SIZE, cl_buffer_region, create_buffer, create_sub_buffer, get_mem_object_info, release_mem_object,
    retain_mem_object,
};
use opencl3::types::{CL_BLOCKING, cl_context, cl_mem};

use super::error::{error, from_code};
use super::stream::Queues;
use crate::device::Release;
use crate::error::{ErrorKind, Result};

/// One OpenCL buffer, released on drop (unmapped first when pinned).
///
/// Invariant: `mem` is a live buffer of at least `max(size, 1)` bytes; when
/// `mapped` is set, it points to a mapping of all of it made on `queue`.
pub(super) struct ClMemory {
    pub(super) mem: cl_mem,
    pub(super) size: usize,
    mapped: Option<(NonNull<u8>, Arc<CommandQueue>)>,
    /// Sub-buffers from a byte offset to the end, for kernel arguments at
    /// that offset, made once and released with the buffer: releasing one
    /// right after enqueueing the kernel that uses it crashed NVIDIA's
    /// OpenCL driver (580, H100: in clReleaseMemObject, the kernel not yet
    /// flushed), though OpenCL keeps a memory object alive for its queued
    /// commands. The buffer outlives every command that uses it (the
    /// trait's contract), so these do too. They are released newest first:
    /// releasing one before a later one that overlaps it, made after the
    /// earlier one had run a kernel and used since, crashed NVIDIA's driver
    /// too (580, H200: a null dereference in clReleaseMemObject;
    /// `experiments/gpu/opencl-subbuf.c` shows it without hetero).
    subs: Mutex<Vec<(usize, cl_mem)>>,
    /// Where another library made the buffer: what runs once this
    /// reference is released (after `mem`, by field order).
    _release: Option<Release>,
}

/// Distinct kernel-argument offsets one buffer keeps sub-buffers for.
pub(super) const MAX_SUB_BUFFERS: usize = 1 << 16;

// SAFETY: OpenCL memory objects may be used from any thread; the mapped
// pointer is only handed out under the Device contract.
unsafe impl Send for ClMemory {}
// SAFETY: as above; the sub-buffer list is behind its lock.
unsafe impl Sync for ClMemory {}

impl ClMemory {
    /// A device buffer of `size` bytes; `limit` is the device's largest allocation.
    pub(super) fn device(context: cl_context, size: usize, limit: u64) -> Result<Self> {
        let mem = create(context, CL_MEM_READ_WRITE, size, limit, "alloc_device")?;
        Ok(Self { mem, size, mapped: None, subs: Mutex::new(Vec::new()), _release: None })
    }

    /// A buffer another library made, of at least `size` bytes in
    /// `context`: retained here, released (and `release` run) on drop.
    ///
    /// # Safety
    /// `mem` must be a live memory object.
    pub(super) unsafe fn adopted(
        context: cl_context,
        mem: cl_mem,
        size: usize,
        release: Option<Release>,
    ) -> Result<Self> {
        let refuse = |kind, message: String| Err(error("adopt_memory", kind, message));
        let info = |param| get_mem_object_info(mem, param).map_err(from_code("clGetMemObjectInfo"));
        if isize::from(info(CL_MEM_CONTEXT)?) as cl_context != context {
            return refuse(
                ErrorKind::DeviceMismatch,
                "the cl_mem belongs to another OpenCL context than this device's".into(),
            );
        }
        let held = info(CL_MEM_SIZE)?.to_size();
        if held < size {
            return refuse(
                ErrorKind::OutOfBounds,
                format!("the cl_mem holds {held} bytes, fewer than the {size} adopted"),
            );
        }
        // SAFETY: mem is live (the caller's contract); the reference taken
        // here is released once, in drop.
        unsafe { retain_mem_object(mem) }.map_err(from_code("clRetainMemObject"))?;
        Ok(Self { mem, size, mapped: None, subs: Mutex::new(Vec::new()), _release: release })
    }

    /// A mapped, zeroed host buffer of `size` bytes, mapped through `queue`
    /// (the device's queue for mapping, which runs nothing else).
    pub(super) fn pinned(context: cl_context, queue: Arc<CommandQueue>, size: usize, limit: u64) -> Result<Self> {
        let mem = create(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, limit, "alloc_pinned")?;
        let mut memory = Self { mem, size, mapped: None, subs: Mutex::new(Vec::new()), _release: None };
        let mut host: cl_mem = std::ptr::null_mut();
        // SAFETY: mem is a live buffer of max(size, 1) bytes; the blocking
        // map returns a pointer valid until it is unmapped in drop.
        let event = unsafe {
            enqueue_map_buffer(
                queue.get(),
                mem,
                CL_BLOCKING,
                CL_MAP_READ | CL_MAP_WRITE,
                0,
                size.max(1),
                &mut host,
                0,
                std::ptr::null(),
            )
        }
        .map_err(from_code("clEnqueueMapBuffer"))?;
        drop(opencl3::event::Event::new(event));
        let ptr = NonNull::new(host.cast::<u8>())
            .ok_or_else(|| error("clEnqueueMapBuffer", ErrorKind::Driver, "mapping returned a null pointer"))?;
        // SAFETY: the mapping covers size bytes and nothing else uses it yet.
        unsafe { ptr.as_ptr().write_bytes(0, size) };
        memory.mapped = Some((ptr, queue));
        Ok(memory)
    }

    /// The sub-buffer from byte `offset` (at most the size, aligned as the
    /// device needs: checked by the caller) to the end, made at the first
    /// use of that offset and kept until the buffer is released.
    pub(super) fn sub_buffer(&self, offset: usize) -> Result<cl_mem> {
        let mut subs = self.subs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(&(_, sub)) = subs.iter().find(|(at, _)| *at == offset) {
            return Ok(sub);
        }
        if subs.len() >= MAX_SUB_BUFFERS {
            return Err(error(
                "clCreateSubBuffer",
                ErrorKind::InvalidLaunch,
                format!(
                    "kernels took arguments at {MAX_SUB_BUFFERS} distinct offsets into one buffer; pass fewer distinct offsets (or whole buffers with an index)"
                ),
            ));
        }
        let region = cl_buffer_region { origin: offset, size: (self.size - offset).max(1) };
        // SAFETY: mem is live and the region lies within it (offset <= size
        // checked by the caller).
        let sub = unsafe {
            create_sub_buffer(self.mem, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, (&raw const region).cast())
        }
        .map_err(from_code("clCreateSubBuffer"))?;
        subs.push((offset, sub));
        Ok(sub)
    }

    /// The mapped host pointer of a pinned buffer.
    pub(super) fn host_ptr(&self) -> Option<NonNull<u8>> {
        self.mapped.as_ref().map(|(p, _)| *p)
    }

    /// What an operation needs of this buffer, copied out of the allocation
    /// table under its lock.
    pub(super) fn view(&self) -> View {
        View { mem: self.mem, size: self.size, pinned: self.mapped.is_some() }
    }
}

/// A copy of a buffer's handle and size, for one operation. It keeps
/// nothing alive: the [`crate::Device`] contract keeps the buffer from being
/// freed while an operation uses it.
#[derive(Clone, Copy)]
pub(super) struct View {
    pub(super) mem: cl_mem,
    pub(super) size: usize,
    /// Whether the buffer is pinned host memory.
    pub(super) pinned: bool,
}

fn create(context: cl_context, flags: u64, size: usize, limit: u64, call: &'static str) -> Result<cl_mem> {
    if size as u64 > limit {
        return Err(error(
            call,
            ErrorKind::OutOfMemory,
            format!("cannot allocate {size} bytes: the device's largest allocation is {limit} bytes"),
        ));
    }
    // SAFETY: no host pointer is passed; the size is non-zero.
    unsafe { create_buffer(context, flags, size.max(1), std::ptr::null_mut()) }.map_err(from_code("clCreateBuffer"))
}

impl Drop for ClMemory {
    fn drop(&mut self) {
        if let Some((ptr, queue)) = self.mapped.take() {
            // SAFETY: ptr is the mapping made on this queue; the Device
            // contract guarantees no queued work or host borrow uses it.
            let unmapped = unsafe {
                enqueue_unmap_mem_object(queue.get(), self.mem, ptr.as_ptr().cast::<c_void>(), 0, std::ptr::null())
            };
            if let Ok(event) = unmapped {
                drop(opencl3::event::Event::new(event));
            }
            let _ = queue.finish();
        }
        let subs = self.subs.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, sub) in subs.drain(..).rev() {
            // SAFETY: made by sub_buffer, released once; no command uses
            // the buffer any more (the Device contract).
            let _ = unsafe { release_mem_object(sub) };
        }
        // SAFETY: mem is live and released exactly once; commands that
        // still use it keep it alive inside the runtime.
        let _ = unsafe { release_mem_object(self.mem) };
    }
}

// Staging: pinned host memory that staged peer copies pass through.
//
// Each device keeps a pool of `CL_MEM_ALLOC_HOST_PTR` buffers of its own
// context, mapped once for their whole life (page-locked where the driver
// pins such buffers, as the module docs say). A copy takes a buffer
// (`StagingPool::take`) and gives it back with the event of the last
// command that uses its bytes (`Lease::give_back`); the buffer is taken
// again only once that event has completed or failed. Nothing is freed
// from a driver callback: OpenCL leaves calls from callbacks undefined,
// and unmapping is one.
//
// Mapping a buffer costs the host far more than a copy's enqueue (on
// NVIDIA's driver about 0.36 ms a MiB: 42% of the split wave's enqueueing
// on two H200s, with the host 40 copies of 1 MiB ahead of the devices).
// So a pool holding `STAGING_BUDGET` bytes in at least
// `STAGING_MIN_BUFFERS` buffers waits for its oldest busy buffer rather
// than map another, which bounds how far the host runs ahead with staged
// copies (there, 8 MiB took the split from 60.6-68.1 ms with 32 MiB to
// 49.7-50.4; without the floor, rounds whose halos take 4 MiB let the host
// only two copies ahead: 70.5 ms, against 56.7 with it); but only for
// `STAGING_WAIT`: the buffer's last command may be held behind a gate that
// the host opens only later, and an unbounded wait would then never end.
//
// Invariant: a slot in the pool is either idle (no event, or a finished
// one) or in use by commands that end with its event; the pool waits for
// every slot's event before it unmaps the buffers (on drop).

/// The smallest staging buffer made: halo rows and small copies share one.
const MIN_STAGING: usize = 64 << 10;

/// Idle buffers a pool keeps before it lets smaller ones go for a larger.
const MAX_IDLE: usize = 8;

/// Bytes of staging buffers past which a copy waits for a busy buffer
/// rather than map another (the section comment above).
const STAGING_BUDGET: usize = 8 << 20;

/// Buffers a pool holds before it waits, whatever their bytes: large
/// copies still keep this many in flight (at 8 MiB alone, copies of 4 MiB
/// would let the host only two ahead).
const STAGING_MIN_BUFFERS: usize = 8;

/// The longest a copy waits for a busy staging buffer before it maps
/// another all the same.
const STAGING_WAIT: Duration = Duration::from_millis(50);

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

/// One buffer, the event of the last command that used it, and when it
/// was last taken (the pool's count of takes).
struct Slot {
    memory: ClMemory,
    last: Option<Arc<Event>>,
    taken: u64,
}

impl Slot {
    /// Whether no command uses the bytes any more (the last one completed
    /// or failed; a status the driver cannot give counts as busy).
    fn idle(&self) -> bool {
        self.last.as_ref().is_none_or(|event| settled(event))
    }
}

/// Whether `event` has completed or failed.
fn settled(event: &Event) -> bool {
    event.command_execution_status().is_ok_and(|s| s.0 <= CL_COMPLETE)
}

/// A device's staging buffers (the section comment above).
pub(super) struct StagingPool {
    context: Arc<Context>,
    mapper: Arc<CommandQueue>,
    /// The device's largest allocation.
    limit: u64,
    slots: Mutex<Vec<Slot>>,
    /// Buffers taken so far.
    takes: AtomicU64,
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
        Self { context, mapper, limit, slots: Mutex::new(Vec::new()), takes: AtomicU64::new(0) }
    }

    /// An idle buffer of at least `len` bytes (the smallest such), or, where
    /// the pool holds [`STAGING_BUDGET`] bytes in at least
    /// [`STAGING_MIN_BUFFERS`] buffers, the oldest busy one once it is
    /// idle (waiting at most [`STAGING_WAIT`]), or else a new one of the
    /// next power of two (at least [`MIN_STAGING`], at most the largest
    /// allocation). Before it waits it flushes `queues`, the device's.
    pub(super) fn take(&self, len: usize, queues: &Queues) -> Result<Lease<'_>> {
        let size = len.max(MIN_STAGING).checked_next_power_of_two().unwrap_or(len);
        let size = usize::try_from(self.limit).map_or(size, |limit| size.min(limit.max(len)));
        let taken = self.takes.fetch_add(1, Ordering::Relaxed);
        let deadline = Instant::now() + STAGING_WAIT;
        loop {
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
                slot.taken = taken;
                return Ok(Lease { pool: self, slot: Some(slot) });
            }
            let held: usize = slots.iter().map(|slot| slot.memory.size).sum();
            let oldest = slots
                .iter()
                .filter(|slot| slot.memory.size >= len)
                .filter_map(|slot| Some((slot.taken, Arc::clone(slot.last.as_ref()?))))
                .min_by_key(|(taken, _)| *taken);
            match oldest {
                Some((_, busy))
                    if held.saturating_add(size) > STAGING_BUDGET
                        && slots.len() >= STAGING_MIN_BUFFERS
                        && Instant::now() < deadline =>
                {
                    drop(slots);
                    queues.flush_all();
                    while !settled(&busy) && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                }
                _ => {
                    if slots.len() >= MAX_IDLE {
                        // Outgrown: idle buffers too small for this copy are
                        // unmapped here, on the enqueueing thread.
                        slots.retain(|slot| slot.memory.size >= len || !slot.idle());
                    }
                    break;
                }
            }
        }
        let memory = ClMemory::pinned(self.context.get(), Arc::clone(&self.mapper), size, self.limit)?;
        Ok(Lease { pool: self, slot: Some(Slot { memory, last: None, taken }) })
    }
}

impl Lease<'_> {
    /// The mapped bytes, for the commands that read and write them.
    pub(super) fn ptr(&self) -> *mut u8 {
        self.slot.as_ref().and_then(|slot| slot.memory.host_ptr()).map_or(std::ptr::null_mut(), |p| p.as_ptr())
    }

    /// Returns the buffer to its pool (on drop), busy until `last` (the
    /// last command enqueued that uses the bytes, if any) has completed or
    /// failed.
    pub(super) fn give_back(mut self, last: Option<Arc<Event>>) {
        if let Some(slot) = &mut self.slot {
            slot.last = last;
        }
    }
}

impl Drop for Lease<'_> {
    /// The buffer goes back to its pool: idle unless [`Lease::give_back`]
    /// named a last command.
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
