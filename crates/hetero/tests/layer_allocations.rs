//! The typed layer's hot paths allocate nothing: a launch of up to
//! `INLINE_ARGS` arguments and a copy, on a device that does no work, make
//! no heap allocation once their tracking events exist.
//!
//! Guards against the defect this found: the launch's argument check
//! formatted an error message for every argument of every launch, also
//! when nothing was wrong (four `String`s per launch, about 40% of the
//! layer's own cost per launch). Counts are per thread, so the host
//! backend's worker threads do not disturb them; a test binary of its own,
//! since it installs a global allocator.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use hetero::{Context, LaunchConfig};

/// The system allocator, counting the allocations of each thread.
struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded under the caller's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded under the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded under the caller's contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn launches_and_copies_allocate_nothing_in_the_typed_layer() {
    let ctx = Context::new(common::skipping_work());
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let stream = ctx.untimed_stream().unwrap();
    let mut x = ctx.alloc::<u32>(1024).unwrap();
    let pinned = ctx.alloc_pinned::<u32>(1024).unwrap();
    let mut launch = || {
        let xs = x.slice_mut(..).unwrap();
        let args = [(&xs).into(), 1024u32.into(), 1u32.into(), 1u32.into()];
        // SAFETY: the device does no work, so the kernel never runs.
        unsafe { stream.launch(&kernel, LaunchConfig::linear(1, 64, 0), &args) }.unwrap();
    };
    // The first operations create the tracking events that later ones reuse.
    launch();
    launch();
    let launches = allocations_during(|| (0..1000).for_each(|_| launch()));
    assert_eq!(launches, 0, "1000 launches of 4 arguments allocated {launches} times");
    stream.copy(&pinned, &mut x).unwrap();
    let copies = allocations_during(|| (0..1000).for_each(|_| stream.copy(&pinned, &mut x).unwrap()));
    assert_eq!(copies, 0, "1000 copies allocated {copies} times");
}
