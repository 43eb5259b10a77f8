//! Model checks of the typed layer's concurrency (`--cfg hetero_shuttle`;
//! `crates/hetero/src/sync.rs` says what the checker runs): host threads
//! racing on shared buffers through the shipped tracker, stream order,
//! spare marks, retired allocations and caching allocator, each schedule
//! of their locks chosen by Shuttle (random and PCT schedulers, seeded by
//! the iteration). The device is the host backend, whose stream workers
//! run outside the checker like a GPU would.
//!
//! `RUSTFLAGS="--cfg hetero_shuttle" cargo test -p hetero --test model --target-dir target/shuttle`

#![cfg(hetero_shuttle)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::sync::Arc;

use hetero::backend::host::HostDevice;
use hetero::{AllocatorOptions, Context, LaunchConfig};
use shuttle::sync::Mutex;

/// Schedules tried by each check, per scheduler.
const ITERATIONS: usize = 300;

/// Runs `check` under the random scheduler and under PCT.
fn explore(check: impl Fn() + Send + Sync + 'static) {
    let check = Arc::new(check);
    let random = Arc::clone(&check);
    shuttle::check_random(move || random(), ITERATIONS);
    shuttle::check_pct(move || check(), ITERATIONS, 3);
}

/// Invariant (tracker, ARCHITECTURE.md "hazard rules"): a use of a buffer
/// on one stream runs after every conflicting use enqueued before it, in
/// host order, on another stream, whichever thread enqueued either. Two
/// threads, each with its own stream held by one gate, take turns on one
/// buffer under a host lock, each applying `x = a x + b` with its own `a`
/// (the order shows in the result); the gate opens once all is enqueued,
/// so only the tracker's waits order the two streams' work.
#[test]
fn uses_on_two_streams_are_ordered_as_the_host_ordered_them() {
    const N: usize = 1024;
    explore(|| {
        let ctx = Context::new(HostDevice::new());
        let affine = Arc::new(ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap());
        let gate = Arc::new(ctx.user_event().unwrap());
        let x = ctx.stream().unwrap().upload(&[1u32; N]).unwrap();
        let shared = Arc::new(Mutex::new((x, Vec::new())));
        let mut handles = Vec::new();
        for t in 0..2u32 {
            let (ctx, affine, gate, shared) =
                (ctx.clone(), Arc::clone(&affine), Arc::clone(&gate), Arc::clone(&shared));
            handles.push(shuttle::thread::spawn(move || {
                let stream = ctx.stream().unwrap();
                stream.wait(&*gate).unwrap();
                for round in 0..2u32 {
                    let mut guard = shared.lock().unwrap();
                    let (x, log) = &mut *guard;
                    let (a, b) = (2 + t, 10 * t + round);
                    let xs = x.slice_mut(..).unwrap();
                    let config = LaunchConfig::linear(N as u32 / 64, 64, 0);
                    // SAFETY: affine_u32 touches x[0..N), which x holds.
                    unsafe { stream.launch(&affine, config, &[(&xs).into(), (N as u32).into(), a.into(), b.into()]) }
                        .unwrap();
                    log.push((a, b));
                }
                stream
            }));
        }
        let streams: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        gate.complete().unwrap();
        for s in &streams {
            s.synchronize().unwrap();
        }
        let (x, log) = &*shared.lock().unwrap();
        let expect = log.iter().fold(1u32, |v, (a, b)| a.wrapping_mul(v).wrapping_add(*b));
        let out = streams[0].download(x).unwrap();
        assert!(
            out.iter().all(|&v| v == expect),
            "a use ran before one the host ordered it after: {} != {expect}",
            out[0]
        );
    });
}

/// Invariant (caching allocator's reuse rule, `safe/alloc.rs`): a cached
/// block whose last uses are pending on a stream is never handed to work
/// on another stream while they are: that work would have to wait for
/// them (a block's pending marks go with it). One thread drops a buffer
/// whose copy out is held by a gate; another allocates the same size on
/// its own stream, and its fill must finish while the gate is still
/// closed. Then the copy must read the old contents.
#[test]
fn a_block_in_use_on_one_stream_is_not_reused_on_another() {
    explore(|| {
        let ctx = Context::with_allocator(HostDevice::new(), AllocatorOptions::caching());
        let gate = Arc::new(ctx.user_event().unwrap());
        let out = Arc::new(Mutex::new(ctx.alloc_pinned::<u32>(256).unwrap()));
        let first = {
            let (ctx, gate, out) = (ctx.clone(), Arc::clone(&gate), Arc::clone(&out));
            shuttle::thread::spawn(move || {
                let stream = ctx.stream().unwrap();
                let mut x = ctx.alloc::<u32>(256).unwrap();
                stream.fill(&mut x, 1).unwrap();
                stream.wait(&*gate).unwrap();
                stream.copy(&x, &mut *out.lock().unwrap()).unwrap();
                drop(x);
                stream
            })
        };
        let second = {
            let ctx = ctx.clone();
            shuttle::thread::spawn(move || {
                let stream = ctx.stream().unwrap();
                let mut y = ctx.alloc::<u32>(256).unwrap();
                stream.fill(&mut y, 2).unwrap();
                // Polled, not synchronised: held by the gate, it would never end.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while !stream.query().unwrap() {
                    assert!(
                        std::time::Instant::now() < deadline,
                        "the fill waits for another stream's gate: its block was in use there"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(1));
                    shuttle::thread::yield_now();
                }
                (stream, y)
            })
        };
        let (_stream, y) = second.join().unwrap();
        let stream = first.join().unwrap();
        gate.complete().unwrap();
        stream.synchronize().unwrap();
        let out = out.lock().unwrap();
        assert!(out.host_slice().unwrap().iter().all(|&v| v == 1), "the copy read a block reused under it");
        drop(y);
    });
}

/// Invariant (spare marks, `safe/marks.rs`, `safe/state.rs`): a tracking event goes back
/// to the spares exactly once, when the last holder of its mark gives it
/// up, however threads interleave the giving up; and an allocation dropped
/// while its work is queued is freed once, after that work. Three threads
/// share buffers written on their streams and drop them in every order.
#[test]
fn marks_and_retired_allocations_are_given_back_once() {
    explore(|| {
        let ctx = Context::new(HostDevice::new());
        let buffers: Vec<_> = (0..2).map(|_| Arc::new(Mutex::new(Some(ctx.alloc::<u32>(64).unwrap())))).collect();
        let mut handles = Vec::new();
        for t in 0..3u32 {
            let (ctx, buffers) = (ctx.clone(), buffers.clone());
            handles.push(shuttle::thread::spawn(move || {
                let stream = ctx.stream().unwrap();
                for (i, b) in buffers.iter().enumerate() {
                    let mut slot = b.lock().unwrap();
                    if let Some(x) = slot.as_mut() {
                        stream.fill(x, t).unwrap();
                        if (i as u32 + t) % 3 == 2 {
                            // Dropped while its fill is queued: retired.
                            *slot = None;
                        }
                    }
                }
                stream.synchronize().unwrap();
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
        drop(buffers);
        ctx.trim();
        let live = hetero::Device::live_handles(ctx.device()).unwrap();
        assert_eq!((live.allocations, live.events), (0, 0), "{live:?}");
        assert_eq!(ctx.deferred_frees(), 0);
    });
}

/// Invariant (completion waker, `safe/completion.rs`, the `Waiter`
/// invariant): once a dropped future's entry is cancelled, no pass of the
/// waker thread queries its event, so the event may be destroyed at once.
/// Threads register futures on events held back by a gate, poll them once
/// and drop them and their events while the waker passes over them; the
/// device (wrapped to count it) must never be asked about a destroyed
/// event. Also: callbacks of one stream run once each, in their order.
/// Fails when a cancellation does not wait out a pass that saw its entry.
#[test]
fn the_waker_never_asks_about_a_cancelled_futures_event() {
    use std::future::Future;
    use std::task::{Context as TaskContext, Waker};

    use hetero::faults::{FaultPlan, Faulty};

    // The random scheduler only: the waker polls until a gate opens, and
    // PCT can keep the thread that would open it from ever running.
    shuttle::check_random(
        || {
            let device = Faulty::new(HostDevice::new(), FaultPlan::none());
            let log = device.log();
            let ctx = Context::new(device);
            let gate = Arc::new(ctx.user_event().unwrap());
            let order = Arc::new(Mutex::new(Vec::new()));
            let mut handles = Vec::new();
            for t in 0..2u32 {
                let (ctx, gate, order) = (ctx.clone(), Arc::clone(&gate), Arc::clone(&order));
                handles.push(shuttle::thread::spawn(move || {
                    let stream = ctx.stream().unwrap();
                    stream.wait(&*gate).unwrap();
                    for i in 0..2u32 {
                        let order = Arc::clone(&order);
                        stream.then(move |r| order.lock().unwrap().push((t, i, r.is_ok()))).unwrap();
                        let event = ctx.event().unwrap();
                        stream.record(&event).unwrap();
                        {
                            let mut future = std::pin::pin!(event.wait_async());
                            let pending =
                                future.as_mut().poll(&mut TaskContext::from_waker(Waker::noop())).is_pending();
                            assert!(pending, "the gate holds the event");
                        }
                        drop(event);
                    }
                    stream
                }));
            }
            let streams: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
            gate.complete().unwrap();
            for stream in &streams {
                stream.synchronize().unwrap();
            }
            // The callbacks run on the waker thread once their marks complete.
            while order.lock().unwrap().len() < 4 {
                shuttle::thread::yield_now();
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
            let order = order.lock().unwrap().clone();
            for t in 0..2u32 {
                let mine: Vec<u32> = order.iter().filter(|(s, _, ok)| *s == t && *ok).map(|(_, i, _)| *i).collect();
                assert_eq!(mine, [0, 1], "callbacks of stream {t}: {order:?}");
            }
            drop((streams, gate, ctx));
            assert_eq!(log.invalid_handles(), 0, "the waker asked about a destroyed event");
        },
        ITERATIONS,
    );
}
