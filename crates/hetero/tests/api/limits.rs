//! Kernel limits, block sizes from them, and event status as queue order
//! implies it: what a device no one here wrote (Mesa's rusticl) needs.

use hetero::{BlockRequest, Context, DeviceBuffer, ErrorKind, Kernel, LaunchConfig, Stream};

/// Enqueues x = a * x + b over all of `x` in blocks of `threads`.
fn affine(stream: &Stream, kernel: &Kernel, x: &mut DeviceBuffer<u32>, threads: u32, a: u32, b: u32) {
    let n = x.len() as u32;
    let xs = x.slice_mut(..).unwrap();
    let config = LaunchConfig::covering([n, 1, 1], [threads, 1, 1], 0);
    // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
    unsafe { stream.launch(kernel, config, &[(&xs).into(), n.into(), a.into(), b.into()]) }.unwrap();
}

/// Every kernel of the portable sources reports limits within its device's,
/// and runs at the block size `Kernel::block_size` picks for the most
/// threads it could want; one thread more than its limit is refused with a
/// message naming the limit. (The suite's fixed 256-thread blocks stopped
/// at the first launch on rusticl, whose kernels run at most 32.)
pub fn kernels_run_at_the_block_size_their_limits_allow(ctx: &Context) {
    let info = ctx.info();
    // The GPU target, where the backend knows it: CUDA always (from the
    // compute capability); AMD names gfx targets; the CPU backends none.
    match info.backend {
        hetero::Backend::Cuda => assert!(info.arch.as_deref().is_some_and(|a| a.starts_with("sm_")), "{:?}", info.arch),
        hetero::Backend::Host => assert_eq!(info.arch, None),
        _ => assert!(info.arch.as_deref().is_none_or(|a| a.starts_with("gfx")), "{:?}", info.arch),
    }
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    for source in [hetero::kernels::REDUCE, hetero::kernels::SCAN, hetero::kernels::PULL, hetero::kernels::WAVE] {
        let module = ctx.build_module(source).unwrap();
        for name in hetero::kernels::kernel_names(source) {
            let limits = module.kernel(&name).unwrap().limits();
            assert!(limits.max_threads >= 1 && limits.max_threads <= info.max_threads_per_block, "{name}: {limits:?}");
            assert!(limits.preferred_multiple >= 1, "{name}: {limits:?}");
        }
    }
    let limits = kernel.limits();
    let most = kernel.block_size(BlockRequest::new(u32::MAX));
    assert!(most >= 1 && most <= limits.max_threads, "{most} for {limits:?}");
    let n = 3 * most + 1;
    let mut x = stream.alloc_zeros::<u32>(n as usize).unwrap();
    affine(&stream, &kernel, &mut x, most, 1, 7);
    assert!(stream.download(&x).unwrap().iter().all(|&v| v == 7));
    if limits.max_threads < info.max_threads_per_block && limits.max_threads < info.max_block_dims[0] {
        let over = LaunchConfig::linear(1, limits.max_threads + 1, 0);
        let xs = x.slice_mut(..).unwrap();
        // SAFETY: refused before anything is enqueued (the assertion).
        let err =
            unsafe { stream.launch(&kernel, over, &[(&xs).into(), n.into(), 1u32.into(), 7u32.into()]) }.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidLaunch, "{err}");
        assert!(err.message.contains(&format!("at most {} per block", limits.max_threads)), "{err}");
    }
}

/// Regression: on rusticl (Mesa 22.3) an event recorded before later work
/// of its in-order queue could still report itself running after that work
/// completed, even after `Stream::synchronize` returned; `elapsed_ms` then
/// failed with `NotReady` in one run of the suite in two. Every event
/// recorded before a completed synchronize has completed, and times.
pub fn events_before_a_synchronize_have_completed(ctx: &Context) {
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let stream = ctx.stream().unwrap();
    let n = 1u32 << 14;
    let threads = kernel.block_size(BlockRequest::new(256));
    let mut x = ctx.alloc::<u32>(n as usize).unwrap();
    for round in 0..200 {
        let events: Vec<_> = (0..3).map(|_| ctx.event().unwrap()).collect();
        stream.fill(&mut x, 1).unwrap();
        for event in &events {
            stream.record(event).unwrap();
            affine(&stream, &kernel, &mut x, threads, 3, 1);
        }
        stream.synchronize().unwrap();
        for (i, event) in events.iter().enumerate() {
            assert!(event.query().unwrap(), "round {round}: event {i} reports work after a synchronize");
        }
        let ms = events[0].elapsed_ms(&events[2]).unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert!(ms >= 0.0, "round {round}: {ms} ms");
    }
}
