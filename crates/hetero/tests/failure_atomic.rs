//! Failure-atomicity of the typed layer (U2): when tracking fails after
//! work was enqueued, the call returns only once that work can no longer
//! touch the memory it uses. `hetero::faults::Faulty` fails `record_event`
//! on demand, and every call of each kind in turn (`every_failed_call_is_an_error_and_leaves_nothing_behind`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::wrap;
use hetero::backend::host::HostDevice;
use hetero::faults::{FaultLog, FaultPlan, FaultSite, Faulty};
use hetero::{Context, Device, ErrorKind, LaunchConfig};

/// The host device, whose every `record_event` fails while the log is enabled.
fn flaky() -> (Context<Faulty<HostDevice>>, Arc<FaultLog>) {
    let plan = FaultPlan::random(1.0, 0).unwrap().only(&[FaultSite::Record]);
    let device = Faulty::new(HostDevice::new(), plan);
    let log = device.log();
    log.set_enabled(false);
    (Context::new(device), log)
}

/// Out of memory with a full cache frees the cache and retries once: a
/// request the driver refuses only because cached blocks hold the budget
/// succeeds, and the cache is empty afterwards.
#[test]
fn out_of_memory_trims_the_cache_and_retries() {
    let inner = HostDevice::new();
    let info = inner.info().clone();
    let ctx = Context::with_allocator(wrap(inner, info, 1 << 20), hetero::AllocatorOptions::caching());
    // Fill the budget with cached blocks of one size class…
    let blocks: Vec<_> = (0..4).map(|_| ctx.alloc::<u8>(256 << 10).unwrap()).collect();
    drop(blocks);
    assert_eq!(ctx.allocator_stats().device.bytes_cached, 1 << 20);
    // …then ask for another class, which only fits once they are freed.
    let big = ctx.alloc::<u8>(512 << 10).unwrap();
    let stats = ctx.allocator_stats().device;
    assert_eq!((stats.bytes_cached, stats.bytes_in_use), (0, 512 << 10), "{stats:?}");
    // A request beyond the budget still fails, with the driver's error.
    assert_eq!(ctx.alloc::<u8>(1 << 20).unwrap_err().kind, ErrorKind::OutOfMemory);
    drop(big);
}

/// A `double` argument, or a buffer of them, is refused on a device that
/// reports no double precision, before anything is enqueued.
#[test]
fn double_is_refused_on_a_device_without_fp64() {
    let inner = HostDevice::new();
    let mut info = inner.info().clone();
    info.fp64 = false;
    let ctx = Context::new(wrap(inner, info, usize::MAX));
    let source = "KERNEL void scale_f64(GLOBAL double* y, double a, uint n) { }";
    let host = hetero::host_kernel::HostKernel::new("scale_f64", |_, _| Ok(()))
        .slice_mut::<f64>()
        .scalar::<f64>()
        .scalar::<u32>();
    let kernel = ctx.build_module_with(source, &[host]).unwrap().kernel("scale_f64").unwrap();
    let stream = ctx.stream().unwrap();
    let mut y = ctx.alloc::<f64>(4).unwrap();
    // SAFETY: refused before anything is enqueued (the test's assertion).
    let err = unsafe {
        stream.launch(&kernel, LaunchConfig::linear(1, 4, 0), &[(&mut y).into(), 2.0f64.into(), 4u32.into()])
    }
    .unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidLaunch);
    assert!(err.message.contains("double") && err.message.contains("does not support"), "{err}");
}

/// Opens `gate` after 100 ms from another thread; the flag is set just before.
fn open_later<D: Device>(gate: Arc<hetero::UserEvent<D>>) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let opened = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&opened);
    let handle = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        flag.store(true, Ordering::SeqCst);
        gate.complete().unwrap();
    });
    (opened, handle)
}

/// U2: a pageable copy must not return while the device can still read
/// the caller's slice (it returned before its synchronise when its
/// tracking failed, and the caller freed memory a copy still read). It
/// records no event now (it returns once the copy is done), so a failing
/// record cannot cut it short either.
#[test]
fn pageable_copy_returns_only_after_the_device_is_done_with_the_slice() {
    let (ctx, fail_records) = flaky();
    let stream = ctx.stream().unwrap();
    let gate = Arc::new(ctx.user_event().unwrap());
    let mut device = ctx.alloc::<u32>(1 << 16).unwrap();
    stream.wait(&*gate).unwrap();
    let (opened, opener) = open_later(Arc::clone(&gate));
    fail_records.set_enabled(true);
    let source = vec![7u32; 1 << 16];
    stream.copy_from_host(&source, &mut device).unwrap();
    assert!(opened.load(Ordering::SeqCst), "returned while the copy was still queued behind the gate");
    drop(source);
    fail_records.set_enabled(false);
    opener.join().unwrap();
    let mut out = vec![0u32; 1 << 16];
    stream.copy_to_host(&device, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 7));
}

/// U2: a pinned copy whose tracking fails leaves the buffers safe: the
/// error returns only once the untracked copy is done, so dropping the
/// buffers right after cannot free memory the copy uses.
#[test]
fn untracked_copy_finishes_before_its_buffers_can_go() {
    let (ctx, fail_records) = flaky();
    let stream = ctx.stream().unwrap();
    let gate = Arc::new(ctx.user_event().unwrap());
    let input = ctx.pinned_from_slice(&[3u32; 1 << 16]).unwrap();
    let mut device = ctx.alloc::<u32>(1 << 16).unwrap();
    stream.wait(&*gate).unwrap();
    let (opened, opener) = open_later(Arc::clone(&gate));
    fail_records.set_enabled(true);
    assert!(stream.copy(&input, &mut device).is_err());
    assert!(opened.load(Ordering::SeqCst), "returned while the untracked copy was still queued");
    assert!(device.is_idle().unwrap());
    fail_records.set_enabled(false);
    drop((input, device));
    assert_eq!(ctx.deferred_frees(), 0);
    opener.join().unwrap();
}

/// Guards a leak: a mark made outside a stream operation (a callback's, a
/// future's) whose recording failed dropped its event instead of keeping
/// it spare, so every failure left one more event behind until the
/// device went.
#[test]
fn a_mark_that_fails_to_record_keeps_its_event_for_the_next() {
    let (ctx, fail_records) = flaky();
    let stream = ctx.stream().unwrap();
    let before = fail_records.calls(FaultSite::Create);
    fail_records.set_enabled(true);
    for _ in 0..3 {
        assert!(stream.then(|_| {}).is_err());
    }
    fail_records.set_enabled(false);
    assert_eq!(fail_records.calls(FaultSite::Create) - before, 1, "each failed recording made a new event");
    let (sent, received) = std::sync::mpsc::channel();
    stream.then(move |r| sent.send(r).unwrap()).unwrap();
    assert!(received.recv_timeout(Duration::from_secs(30)).unwrap().is_ok());
    assert_eq!(fail_records.calls(FaultSite::Create) - before, 1, "the spare event serves the next mark");
}

/// Guards a leak: marks given back outside a stream operation (those of
/// dropped buffers, once their work completes, and of completed futures)
/// were dropped instead of made spare, so every such mark cost a new event
/// that stayed until the device went.
#[test]
fn marks_of_dropped_buffers_and_completed_futures_are_reused() {
    let (ctx, fail_records) = flaky();
    let stream = ctx.stream().unwrap();
    let before = fail_records.calls(FaultSite::Create);
    for i in 0..50 {
        let mut x = ctx.alloc::<u32>(256).unwrap();
        stream.fill(&mut x, i).unwrap();
        drop(x);
        futures::executor::block_on(stream.synchronize_async()).unwrap();
        stream.synchronize().unwrap();
    }
    let made = fail_records.calls(FaultSite::Create) - before;
    assert!(made <= 4, "50 rounds made {made} events");
}

type FaultyCtx = Context<Faulty<HostDevice>>;

/// Work of every kind the typed layer does: copies each way, fills,
/// launches, events across streams, a gate opened late, a future, a
/// callback, and buffers dropped while their work is queued. A step that
/// fails is noted and the steps that need it are skipped; the errors come back.
fn every_kind_of_work(ctx: &FaultyCtx, affine: &hetero::Kernel<Faulty<HostDevice>>) -> Vec<hetero::Error> {
    const N: usize = 1 << 12;
    let mut errors = Vec::new();
    macro_rules! step {
        ($e:expr) => {
            match $e {
                Ok(v) => Some(v),
                Err(e) => {
                    errors.push(e);
                    None
                }
            }
        };
    }
    let (Some(a), Some(b)) = (step!(ctx.stream()), step!(ctx.stream())) else { return errors };
    if let (Some(mut x), Some(mut p)) = (step!(ctx.alloc::<u32>(N)), step!(ctx.pinned_from_slice(&[1u32; N]))) {
        step!(a.copy(&p, &mut x));
        step!(x.slice_mut(..N / 2).and_then(|s| a.fill(s, 5)));
        step!(x.slice_mut(..).and_then(|xs| {
            // SAFETY: affine_u32 touches x[0..N), which x holds.
            unsafe {
                a.launch(
                    affine,
                    LaunchConfig::linear(N as u32 / 64, 64, 0),
                    &[(&xs).into(), (N as u32).into(), 3u32.into(), 1u32.into()],
                )
            }
        }));
        if let Some(event) = step!(ctx.event()) {
            step!(a.record(&event).and_then(|()| b.wait(&event)));
        }
        if let Some(gate) = step!(ctx.user_event()) {
            step!(b.wait(&gate));
            step!(b.copy(&x, &mut p));
            step!(gate.complete());
        }
        let mut out = vec![0u32; N];
        step!(b.copy_to_host(&x, &mut out));
        step!(a.copy_from_host(&out, &mut x));
        step!(futures::executor::block_on(a.synchronize_async()));
        step!(a.then(|_| {}));
        if let Some(mut y) = step!(ctx.alloc::<u32>(N)) {
            step!(b.copy(&x, &mut y));
            drop(y);
        }
        drop((x, p));
    }
    step!(a.synchronize());
    step!(b.synchronize());
    errors
}

/// Fault injection at every call: for each kind of driver call, each call
/// of [`every_kind_of_work`] in turn fails once. Every error an operation
/// returns is that injected fault (none other, and none twice), nothing
/// hangs, and once the context is dropped every allocation, event and
/// stream made through the device was released (guards against a failure
/// path that leaks its event or frees nothing; AddressSanitizer, which CI
/// runs this file under, guards against one that frees too early).
#[test]
fn every_failed_call_is_an_error_and_leaves_nothing_behind() {
    let run = |plan: FaultPlan, what: String| {
        let device = Faulty::new(HostDevice::new(), plan);
        let log = device.log();
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let ctx = Context::new(device);
            let affine = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
            let errors = every_kind_of_work(&ctx, &affine);
            drop((affine, ctx));
            done.send(errors).unwrap();
        });
        let errors = finished.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("{what}: the work hung"));
        (errors, log)
    };
    let (errors, clean) = run(FaultPlan::none(), "no fault".into());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(clean.released_within(Duration::from_secs(10)).total(), 0);
    let mut failed = 0;
    for site in FaultSite::ALL {
        let calls = clean.calls(site);
        assert!(calls > 0 || site == FaultSite::Query, "the work makes no {site:?} call");
        for k in 0..calls {
            let (errors, log) = run(FaultPlan::none().nth(site, k), format!("{site:?} call {k}"));
            for e in &errors {
                assert_eq!(hetero::faults::injected_id(e), Some(0), "{site:?} call {k}: an error not injected: {e}");
            }
            assert!(errors.len() <= 1, "{site:?} call {k}: one fault returned {} times: {errors:?}", errors.len());
            // The k-th call failed if this run made it: queries come as
            // often as the waker and the reaper poll, and whether a spare
            // event or a callback's delivery is there in time varies too,
            // so a run may make fewer calls at a site than the one without
            // faults (it did under AddressSanitizer).
            let made = log.calls(site) > k;
            assert_eq!(log.injected(), u64::from(made), "{site:?} call {k} (made: {made})");
            let live = log.released_within(Duration::from_secs(10));
            assert_eq!(live.total(), 0, "{site:?} call {k}: left behind {live:?} ({errors:?})");
            assert_eq!(log.invalid_handles(), 0, "{site:?} call {k}: a handle was used after its release");
            failed += errors.len();
        }
    }
    assert!(failed > 30, "only {failed} injected faults surfaced");
}

/// A peer copy whose tracking record failed, and failed again when it was
/// retried, names both faults and leaves the copy done. (When the far
/// buffer had a record of its own, a far failure after a retried near one
/// was returned alone, so the first fault was lost to the caller: the
/// stress test's peer mix counted it as swallowed. One mark now serves
/// both buffers.)
#[test]
fn a_peer_copy_that_fails_twice_names_both_faults() {
    // Record calls up to the copy, then the copy's, with no fault.
    let scenario = |plan: FaultPlan| {
        let near = Faulty::new(HostDevice::new(), plan.clone());
        let log = near.log();
        let far = Faulty::with_log(HostDevice::new(), plan, Arc::clone(&log));
        let (a, b) = (Context::new(near), Context::new(far));
        let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
        let src = sb.upload(&[4u32; 256]).unwrap();
        let mut dst = sa.alloc_zeros::<u32>(256).unwrap();
        sb.synchronize().unwrap();
        sa.synchronize().unwrap();
        let before = log.calls(FaultSite::Record);
        let copied = sa.copy_peer(&src, &mut dst);
        let after = log.calls(FaultSite::Record);
        let got = sa.download(&dst).unwrap();
        (before, after, copied, got)
    };
    let (before, after, copied, got) = scenario(FaultPlan::none());
    assert!(copied.is_ok() && got.iter().all(|&v| v == 4));
    assert_eq!(after - before, 1, "a peer copy records one mark, for both buffers");
    // The record fails, and its retry too.
    let plan = FaultPlan::none().nth(FaultSite::Record, before).nth(FaultSite::Record, before + 1);
    let (_, _, copied, got) = scenario(plan);
    let err = copied.unwrap_err();
    assert_eq!(hetero::faults::injected_ids(&err).len(), 2, "both faults are named: {err}");
    assert!(got.iter().all(|&v| v == 4), "the copy itself ran");
}

/// Two devices with peer copies held behind gates both ways, dropped
/// (buffers, streams, then the contexts, the gates before or after them),
/// release every handle they made, and neither drop waits on the other.
/// Defect guarded: each far buffer's tracker holds the near device's mark,
/// and when retired allocations held the near device's state for it, two
/// devices copying both ways held each other's state and neither was ever
/// dropped (a stress run with faults counted 52 to 76 events never
/// released). They hold only the device and its spare marks now.
#[test]
fn devices_dropped_with_copies_both_ways_held_release_everything() {
    for gates_last in [false, true] {
        let near = Faulty::new(HostDevice::new(), FaultPlan::none());
        let log = near.log();
        let far = Faulty::with_log(HostDevice::new(), FaultPlan::none(), Arc::clone(&log));
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (a, b) = (Context::new(near), Context::new(far));
            let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
            let (ga, gb) = (a.user_event().unwrap(), b.user_event().unwrap());
            let (xa, xb) = (sa.upload(&[1u32; 4096]).unwrap(), sb.upload(&[2u32; 4096]).unwrap());
            let (mut ya, mut yb) = (sa.alloc_zeros::<u32>(4096).unwrap(), sb.alloc_zeros::<u32>(4096).unwrap());
            sa.synchronize().unwrap();
            sb.synchronize().unwrap();
            sa.wait(&ga).unwrap();
            sb.wait(&gb).unwrap();
            sa.copy_peer(&xa, &mut yb).unwrap();
            sb.copy_peer(&xb, &mut ya).unwrap();
            drop((xa, xb, ya, yb, sa, sb));
            if gates_last {
                drop((a, b));
                drop((ga, gb));
            } else {
                drop((ga, gb));
                drop((a, b));
            }
            let _ = done.send(());
        });
        assert!(
            finished.recv_timeout(Duration::from_secs(30)).is_ok(),
            "dropping two devices with copies both ways did not return (gates last: {gates_last})"
        );
        let live = log.released_within(Duration::from_secs(10));
        assert_eq!(live.total(), 0, "gates last: {gates_last}: not released: {live:?}");
    }
}

/// Every call that takes a handle counts in `FaultLog::invalid_handles`
/// when the device no longer has it: `copy_peer`, the peer waits, `kernel`,
/// `kernel_limits` and the graph calls were not counted, so a stress run's
/// "calls on released handles: 0" could not see them.
#[test]
fn calls_on_released_handles_are_counted_for_every_call() {
    use hetero::{DeviceRange, GraphId, KernelId, ModuleId, PeerRange};
    type Call<'a> = Box<dyn Fn() -> hetero::Result<()> + 'a>;
    let device = Faulty::new(HostDevice::new(), FaultPlan::none());
    let log = device.log();
    let stream = device.create_stream(hetero::StreamFlags::default()).unwrap();
    let event = device.create_event().unwrap();
    let (a, b) = (device.alloc_device(64).unwrap(), device.alloc_device(64).unwrap());
    // SAFETY: all are this device's; nothing is queued on them.
    unsafe {
        device.destroy_stream(stream).unwrap();
        device.destroy_event(event).unwrap();
        device.free(a).unwrap();
        device.free(b).unwrap();
    }
    let range = |alloc| PeerRange::new(&device, DeviceRange { alloc, offset: 0, len: 64 });
    let peer = device.as_peer();
    // Each call names released handles, which the device refuses before
    // it touches anything.
    let calls: Vec<(&str, Call<'_>)> = vec![
        (
            "copy_peer",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.copy_peer(range(a), range(b), stream).map(|_| ()) }
            }),
        ),
        (
            "stream_wait_peer_event",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.stream_wait_peer_event(stream, peer, event) }
            }),
        ),
        (
            "stream_wait_peer_settled",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.stream_wait_peer_settled(stream, peer, event) }
            }),
        ),
        (
            "kernel",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.kernel(ModuleId(u64::MAX), "k").map(|_| ()) }
            }),
        ),
        (
            "kernel_limits",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.kernel_limits(KernelId(u64::MAX)).map(|_| ()) }
            }),
        ),
        (
            "launch_graph",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.launch_graph(GraphId(u64::MAX), stream) }
            }),
        ),
        (
            "update_graph",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.update_graph(GraphId(u64::MAX), &[]) }
            }),
        ),
        (
            "destroy_graph",
            Box::new(|| {
                // SAFETY: released handles, refused (the comment above).
                unsafe { device.destroy_graph(GraphId(u64::MAX)) }
            }),
        ),
    ];
    for (name, call) in calls {
        let before = log.invalid_handles();
        let err = call().unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidHandle, "{name}: {err}");
        assert_eq!(log.invalid_handles(), before + 1, "{name} is counted");
    }
}
