//! `HETERO_ALLOCATOR` chooses the allocator of `Context::new`; a value that
//! is not understood makes allocations fail with a message naming it. One
//! test per process: it sets the variable.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::backend::host::HostDevice;
use hetero::{ALLOCATOR_ENV, Context, ErrorKind};

#[test]
fn allocator_environment_is_read_and_checked() {
    // SAFETY: this test binary has one test, and no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var(ALLOCATOR_ENV, "device=caching,pinned=direct") };
    let ctx = Context::new(HostDevice::new());
    drop(ctx.alloc::<u32>(10).unwrap());
    drop(ctx.alloc::<u32>(10).unwrap());
    drop(ctx.alloc_pinned::<u32>(10).unwrap());
    drop(ctx.alloc_pinned::<u32>(10).unwrap());
    let stats = ctx.allocator_stats();
    assert_eq!((stats.device.hits, stats.pinned.hits), (1, 0), "{stats:?}");

    // SAFETY: as above.
    unsafe { std::env::set_var(ALLOCATOR_ENV, "cachin") };
    let ctx = Context::new(HostDevice::new());
    let err = ctx.alloc::<u32>(10).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Config);
    assert!(err.message.contains("\"cachin\"") && err.message.contains("direct"), "{err}");
    assert_eq!(ctx.alloc_pinned::<u32>(10).unwrap_err().kind, ErrorKind::Config);

    // Regression: an empty value made every allocation fail; it reads as
    // unset (the host's default: device memory direct, pinned cached).
    for empty in ["", "  "] {
        // SAFETY: as above.
        unsafe { std::env::set_var(ALLOCATOR_ENV, empty) };
        let ctx = Context::new(HostDevice::new());
        for _ in 0..2 {
            drop(ctx.alloc::<u32>(10).unwrap());
            drop(ctx.alloc_pinned::<u32>(10).unwrap());
        }
        let stats = ctx.allocator_stats();
        assert_eq!((stats.device.hits, stats.pinned.hits), (0, 1), "{empty:?}: the default allocator");
    }

    // Regression: a repeated key was accepted silently.
    // SAFETY: as above.
    unsafe { std::env::set_var(ALLOCATOR_ENV, "device=direct,device=caching") };
    let err = Context::new(HostDevice::new()).alloc::<u32>(10).unwrap_err();
    assert!(err.kind == ErrorKind::Config && err.message.contains("twice"), "{err}");
}
