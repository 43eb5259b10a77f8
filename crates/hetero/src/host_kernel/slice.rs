//! Bounds-checked views of device memory for host kernels.
//!
//! Kernels copy elements into local memory and back rather than borrow
//! device memory, so no Rust reference ever covers memory another block
//! (or the same buffer passed twice) may write. Registered kernels access
//! each element with relaxed atomics as wide as its alignment allows, so
//! two blocks that race on an element (a kernel bug) get some value rather
//! than undefined behaviour; built-in kernels, which write disjoint
//! elements per block, use plain copies the compiler vectorises.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};

use super::Fault;

/// A read-only view of `len` elements of device memory, borrowed from the
/// launch's [`Args`](super::Args) for `'a`.
///
/// Invariant: `ptr` is aligned for `T` and valid for `len` elements for
/// `'a`, the launch's arguments, which own the allocation; while the launch
/// runs no other stream writes them. The lifetime is what ends a view with
/// its launch: a kernel body cannot keep one (in a `thread_local!`, say)
/// and write through it after the memory was freed and handed out again.
///
/// ```compile_fail,E0521
/// use std::cell::RefCell;
/// use hetero::host_kernel::{Args, Block, Fault, SliceMut};
/// thread_local! {
///     static KEPT: RefCell<Option<SliceMut<u32>>> = const { RefCell::new(None) };
/// }
/// fn keep(_: &Block, a: &Args) -> Fault {
///     let s = a.slice_mut::<u32>(0)?;
///     KEPT.with(|t| *t.borrow_mut() = Some(s));
///     Ok(())
/// }
/// ```
pub struct Slice<'a, T> {
    pub(super) ptr: *mut T,
    pub(super) len: usize,
    /// Access elements with atomics (registered kernels) or plain copies (built-ins).
    pub(super) atomic: bool,
    pub(super) _args: PhantomData<&'a super::Args>,
}

/// A writable view: everything a [`Slice`] does, and writes.
pub struct SliceMut<'a, T>(pub(super) Slice<'a, T>);

impl<'a, T> std::ops::Deref for SliceMut<'a, T> {
    type Target = Slice<'a, T>;
    fn deref(&self) -> &Slice<'a, T> {
        &self.0
    }
}

/// Bytes one atomic access moves for `T`: the widest of 8, 4, 2, 1 that
/// divides both its size and its alignment.
fn unit<T>() -> usize {
    let (size, align) = (std::mem::size_of::<T>(), std::mem::align_of::<T>());
    [8, 4, 2, 1].into_iter().find(|u| size.is_multiple_of(*u) && align.is_multiple_of(*u)).unwrap_or(1)
}

macro_rules! atomic_copy {
    ($atomic:ty, $word:ty, $from:expr, $to:expr, $words:expr, $load:expr) => {{
        let (from, to) = ($from.cast::<$word>(), $to.cast::<$word>());
        for k in 0..$words {
            if $load {
                // SAFETY: (caller) `from` is device memory aligned for the word; `to` is local.
                unsafe { to.add(k).write(<$atomic>::from_ptr(from.add(k)).load(Ordering::Relaxed)) };
            } else {
                // SAFETY: (caller) `to` is device memory aligned for the word; `from` is local.
                unsafe { <$atomic>::from_ptr(to.add(k)).store(from.add(k).read(), Ordering::Relaxed) };
            }
        }
    }};
}

/// Copies `count` elements of `T` from `from` to `to`, with atomic accesses
/// on the device side (`load`: reading device memory at `from`).
///
/// # Safety
/// Both ranges are valid for `count` elements and aligned for `T`; they do
/// not overlap; the local side is not shared with other threads.
unsafe fn copy_atomic<T>(from: *const T, to: *mut T, count: usize, load: bool) {
    let bytes = count * std::mem::size_of::<T>();
    let (from, to) = (from.cast_mut().cast::<u8>(), to.cast::<u8>());
    let unit = unit::<T>();
    // The caller's contract holds for every word: element addresses are
    // multiples of `unit`, which divides T's alignment.
    match unit {
        8 => atomic_copy!(AtomicU64, u64, from, to, bytes / 8, load),
        4 => atomic_copy!(AtomicU32, u32, from, to, bytes / 4, load),
        2 => atomic_copy!(AtomicU16, u16, from, to, bytes / 2, load),
        _ => atomic_copy!(AtomicU8, u8, from, to, bytes, load),
    }
}

impl<T: bytemuck::Pod> Slice<'_, T> {
    /// Elements in the view.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Checks that elements `start..start + len` lie in the view.
    fn check_range(&self, start: usize, len: usize) -> Fault {
        if start.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(format!(
                "out-of-bounds access at elements {start}..{} of a buffer of {} elements",
                start.saturating_add(len),
                self.len
            ));
        }
        Ok(())
    }

    /// Reads element `i`.
    pub fn get(&self, i: usize) -> Fault<T> {
        let mut value = [T::zeroed()];
        self.read(i, &mut value)?;
        Ok(value[0])
    }

    /// Copies elements `start..start + out.len()` into `out`, checked once.
    pub fn read(&self, start: usize, out: &mut [T]) -> Fault {
        self.check_range(start, out.len())?;
        // SAFETY: the range is in bounds (checked) and `out` is local
        // memory, so the two do not overlap; the type's invariant.
        unsafe {
            if self.atomic {
                copy_atomic(self.ptr.add(start), out.as_mut_ptr(), out.len(), true);
            } else {
                std::ptr::copy_nonoverlapping(self.ptr.add(start), out.as_mut_ptr(), out.len());
            }
        }
        Ok(())
    }

    /// Adds elements `start..start + sums.len()` to `sums`, checked once.
    pub fn add_to(&self, start: usize, sums: &mut [T]) -> Fault
    where
        T: std::ops::AddAssign,
    {
        const RUN: usize = 64;
        let mut run = [T::zeroed(); RUN];
        for (k, chunk) in sums.chunks_mut(RUN).enumerate() {
            let part = &mut run[..chunk.len()];
            self.read(start + k * RUN, part)?;
            for (sum, v) in chunk.iter_mut().zip(part.iter()) {
                *sum += *v;
            }
        }
        Ok(())
    }
}

impl<T: bytemuck::Pod> SliceMut<'_, T> {
    /// Writes element `i`.
    pub fn set(&self, i: usize, value: T) -> Fault {
        self.write(i, &[value])
    }

    /// Copies `values` to elements `start..start + values.len()`, checked once.
    pub fn write(&self, start: usize, values: &[T]) -> Fault {
        self.0.check_range(start, values.len())?;
        // SAFETY: as in `Slice::read`, with the copy's direction reversed.
        unsafe {
            if self.0.atomic {
                copy_atomic(values.as_ptr(), self.0.ptr.add(start), values.len(), false);
            } else {
                std::ptr::copy_nonoverlapping(values.as_ptr(), self.0.ptr.add(start), values.len());
            }
        }
        Ok(())
    }

    /// The 32-bit cell of element `i`, for atomics.
    fn cell(&self, i: usize) -> Fault<&AtomicU32> {
        const { assert!(std::mem::size_of::<T>() == 4) };
        self.0.check_range(i, 1)?;
        if !(self.0.ptr as usize).is_multiple_of(4) {
            return Err("atomic on a buffer that is not 4-byte aligned".to_string());
        }
        // SAFETY: i < len (checked), the element is 4 bytes and 4-byte
        // aligned; during a launch every racing access to it is atomic.
        Ok(unsafe { AtomicU32::from_ptr(self.0.ptr.add(i).cast()) })
    }
}

impl SliceMut<'_, f32> {
    /// Atomically adds `value` to element `i` (`atomic_add_f32`).
    pub fn atomic_add(&self, i: usize, value: f32) -> Fault {
        let _ = self
            .cell(i)?
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some((f32::from_bits(bits) + value).to_bits()));
        Ok(())
    }
}

impl SliceMut<'_, u32> {
    /// Atomically adds `value` to element `i`, returning the old value (`atomic_add_u32`).
    pub fn atomic_add(&self, i: usize, value: u32) -> Fault<u32> {
        Ok(self.cell(i)?.fetch_add(value, Ordering::AcqRel))
    }

    /// Atomically raises element `i` to at least `value`, returning the old value (`atomic_max_u32`).
    pub fn atomic_max(&self, i: usize, value: u32) -> Fault<u32> {
        Ok(self.cell(i)?.fetch_max(value, Ordering::AcqRel))
    }

    /// Atomically lowers element `i` to at most `value`, returning the old value (`atomic_min_u32`).
    pub fn atomic_min(&self, i: usize, value: u32) -> Fault<u32> {
        Ok(self.cell(i)?.fetch_min(value, Ordering::AcqRel))
    }
}

impl SliceMut<'_, i32> {
    /// Atomically adds `value` to element `i`, returning the old value (`atomic_add_i32`).
    pub fn atomic_add(&self, i: usize, value: i32) -> Fault<i32> {
        Ok(self.cell(i)?.fetch_add(value as u32, Ordering::AcqRel) as i32)
    }
}
