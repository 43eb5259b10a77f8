//! The caching allocator: reuse, stream order, caps, trimming, the debug
//! fill and pinned zeroing, on every backend.

use hetero::{AllocatorOptions, Context};

/// A context on the same backend as `ctx` with these allocator options.
fn with(ctx: &Context, options: AllocatorOptions) -> Context {
    match hetero::testing::context_with_allocator(ctx.info().backend, options) {
        Ok(hetero::testing::Availability::Ready(c)) => c,
        other => panic!("a second context of a backend that has one: {other:?}"),
    }
}

/// A dropped buffer's block serves the next request of its size class;
/// statistics count requests, hits, misses and bytes.
pub fn cached_blocks_are_reused_and_counted(ctx: &Context) {
    let ctx = with(ctx, AllocatorOptions::caching());
    let stream = ctx.stream().unwrap();
    let a = ctx.alloc::<u32>(1000).unwrap(); // 4000 bytes: a 4096-byte block
    let first = ctx.allocator_stats().device;
    assert_eq!((first.requests, first.misses, first.hits, first.bytes_in_use), (1, 1, 0, 4096), "{first:?}");
    drop(a);
    assert_eq!(ctx.allocator_stats().device.bytes_cached, 4096);
    let mut b = ctx.alloc::<u32>(900).unwrap();
    let again = ctx.allocator_stats().device;
    assert_eq!((again.requests, again.hits, again.bytes_cached, again.bytes_in_use), (2, 1, 0, 4096), "{again:?}");
    assert_eq!(again.high_water, 4096);
    stream.fill(&mut b, 3).unwrap();
    assert_eq!(stream.download(&b).unwrap(), vec![3u32; 900], "the reused block holds the new buffer's data");
    // Another size class is a miss.
    let _c = ctx.alloc::<u32>(5000).unwrap();
    assert_eq!(ctx.allocator_stats().device.misses, 2);
}

/// Soundness: a block whose last use is still queued is never handed to a
/// request that could touch it early. Behind a gate, a dropped buffer's
/// copy is pending; a context-level allocation and another stream's
/// allocation get fresh blocks (the other stream does not wait for the
/// gate), and the queued copy still moves the old data.
pub fn blocks_in_use_elsewhere_are_not_reused(ctx: &Context) {
    let ctx = with(ctx, AllocatorOptions::caching());
    let (held, other) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let gate = ctx.user_event().unwrap();
    let input = ctx.pinned_from_slice(&[5u32; 4096]).unwrap();
    let mut out = ctx.alloc_pinned::<u32>(4096).unwrap();
    let mut old = ctx.alloc::<u32>(4096).unwrap();
    held.wait(&gate).unwrap();
    held.copy(&input, &mut old).unwrap();
    held.copy(&old, &mut out).unwrap();
    drop(old);
    assert_eq!(ctx.deferred_frees(), 1, "the dropped block waits in the cache");
    let misses = ctx.allocator_stats().device.misses;
    let mut fresh = ctx.alloc::<u32>(4096).unwrap();
    let mut theirs = other.alloc::<u32>(4096).unwrap();
    assert_eq!(ctx.allocator_stats().device.misses, misses + 2, "both requests must get new blocks");
    other.fill(&mut fresh, 7).unwrap();
    other.fill(&mut theirs, 8).unwrap();
    other.synchronize().unwrap(); // returns although the gate is closed
    gate.complete().unwrap();
    held.synchronize().unwrap();
    assert!(out.host_slice().unwrap().iter().all(|&v| v == 5), "the queued copies saw another buffer's fill");
    assert_eq!(ctx.deferred_frees(), 0, "the block is reusable once its work is done");
}

/// A block whose pending uses are all on stream S is reused at once by
/// `S.alloc`: work on S runs after the old uses, and another stream reading
/// the new buffer waits for both.
pub fn same_stream_reuse_is_ordered(ctx: &Context) {
    let ctx = with(ctx, AllocatorOptions::caching());
    let (s, reader) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let gate = ctx.user_event().unwrap();
    let input = ctx.pinned_from_slice(&[5u32; 4096]).unwrap();
    let (mut before, mut after, mut seen) =
        (ctx.alloc_pinned::<u32>(4096).unwrap(), ctx.alloc_pinned(4096).unwrap(), ctx.alloc_pinned(4096).unwrap());
    let mut old = s.alloc::<u32>(4096).unwrap();
    s.wait(&gate).unwrap();
    s.copy(&input, &mut old).unwrap();
    s.copy(&old, &mut before).unwrap();
    drop(old);
    let hits = ctx.allocator_stats().device.hits;
    let mut new = s.alloc::<u32>(4096).unwrap();
    assert_eq!(ctx.allocator_stats().device.hits, hits + 1, "the same stream reuses the pending block");
    assert!(!new.is_idle().unwrap(), "the new buffer inherits the old uses");
    s.fill(&mut new, 7).unwrap();
    s.copy(&new, &mut after).unwrap();
    reader.copy(&new, &mut seen).unwrap();
    gate.complete().unwrap();
    s.synchronize().unwrap();
    reader.synchronize().unwrap();
    assert!(before.host_slice().unwrap().iter().all(|&v| v == 5), "the old copy ran after the new fill");
    assert!(after.host_slice().unwrap().iter().all(|&v| v == 7));
    assert!(seen.host_slice().unwrap().iter().all(|&v| v == 7), "the other stream read before the fill");
}

/// A cap of 0 disables caching; `trim` empties the cache; the debug fill
/// pattern shows in new buffers; reused pinned blocks are zeroed.
pub fn caps_trim_fill_and_pinned_zeros(ctx: &Context) {
    let off = with(ctx, AllocatorOptions { max_cached_device: Some(0), max_cached_pinned: 0, ..Default::default() });
    drop(off.alloc::<u32>(100).unwrap());
    drop(off.alloc_pinned::<u32>(100).unwrap());
    drop((off.alloc::<u32>(100).unwrap(), off.alloc_pinned::<u32>(100).unwrap()));
    let stats = off.allocator_stats();
    assert_eq!((stats.device.hits, stats.pinned.hits, stats.device.bytes_cached), (0, 0, 0), "{stats:?}");

    let cached = with(ctx, AllocatorOptions { fill: Some(0xDEAD_BEEF), ..Default::default() });
    drop(cached.alloc::<u32>(100).unwrap());
    assert!(cached.allocator_stats().device.bytes_cached > 0);
    cached.trim();
    assert_eq!(cached.allocator_stats().device.bytes_cached, 0);
    let stream = cached.stream().unwrap();
    for buf in [cached.alloc::<u32>(10).unwrap(), stream.alloc::<u32>(10).unwrap()] {
        assert_eq!(stream.download(&buf).unwrap(), vec![0xDEAD_BEEFu32; 10], "the debug pattern");
    }
    let mut p = cached.alloc_pinned::<u32>(64).unwrap();
    p.host_slice_mut().unwrap().fill(9);
    drop(p);
    let q = cached.alloc_pinned::<u32>(60).unwrap();
    assert_eq!(cached.allocator_stats().pinned.hits, 1);
    assert!(q.host_slice().unwrap().iter().all(|&v| v == 0), "pinned memory is zeroed when reused");
}

/// Direct allocation goes to the driver for every buffer and caches nothing.
pub fn direct_allocation_caches_nothing(ctx: &Context) {
    let ctx = with(ctx, AllocatorOptions::direct());
    for _ in 0..3 {
        drop(ctx.alloc::<u32>(100).unwrap());
    }
    let stats = ctx.allocator_stats().device;
    assert_eq!((stats.requests, stats.misses, stats.hits, stats.bytes_cached), (3, 3, 0, 0), "{stats:?}");
    assert_eq!(stats.high_water, 400, "direct allocations hold exactly what was asked");
}

/// What a long run checks for growth: every object counted while it
/// lives, and after a trim nothing left of work that is done (spare
/// tracking events and cached blocks included).
pub fn live_handles_come_back_after_trim(ctx: &Context) {
    use hetero::Device;
    ctx.trim();
    let Some(before) = ctx.device().live_handles() else {
        println!("skipped: {} does not count its handles", ctx.info().backend);
        return;
    };
    {
        let stream = ctx.stream().unwrap();
        let event = ctx.event().unwrap();
        let mut a = ctx.alloc::<u32>(1000).unwrap();
        let b = ctx.alloc::<u32>(1000).unwrap();
        stream.fill(&mut a, 3).unwrap();
        stream.copy(&b, &mut a).unwrap();
        stream.record(&event).unwrap();
        let during = ctx.device().live_handles().unwrap();
        assert_eq!(during.streams, before.streams + 1, "{during:?}");
        assert!(during.events > before.events, "{during:?}");
        assert!(during.allocations >= before.allocations + 2, "{during:?}");
        stream.synchronize().unwrap();
    }
    ctx.trim();
    let after = ctx.device().live_handles().unwrap();
    assert_eq!(after, before, "objects left after everything was dropped and trimmed");
}
