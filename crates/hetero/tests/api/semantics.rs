//! What streams, events and buffers must do on every backend.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hetero::{
    Arg, BlockRequest, Context, Device, DeviceBuffer, DeviceRange, ErrorKind, Kernel, LaunchConfig, Stream, StreamFlags,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SENTINEL: u32 = 0xDEAD_BEEF;

pub(super) fn affine(ctx: &Context) -> Kernel {
    ctx.build_module(hetero::kernels::UTIL).and_then(|m| m.kernel("affine_u32")).expect("affine_u32 builds")
}

/// Enqueues x = a * x + b on `stream` over the whole buffer.
pub(super) fn launch_affine(
    stream: &hetero::Stream,
    kernel: &Kernel,
    x: &mut hetero::DeviceBuffer<u32>,
    a: u32,
    b: u32,
) {
    let n = x.len() as u32;
    let xs = x.slice_mut(..).expect("whole buffer");
    let threads = kernel.block_size(BlockRequest::new(64));
    let config = LaunchConfig::covering([n, 1, 1], [threads, 1, 1], 0);
    // SAFETY: affine_u32 touches x[0..n) and x holds n elements.
    unsafe { stream.launch(kernel, config, &[(&xs).into(), n.into(), a.into(), b.into()]) }.expect("launch");
}

/// Opens `gate` from another thread after a short delay; returns the flag
/// the thread sets just before opening it.
fn open_later(gate: Arc<hetero::UserEvent>) -> (Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let opened = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&opened);
    let handle = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        flag.store(true, Ordering::SeqCst);
        gate.complete().expect("complete gate");
    });
    (opened, handle)
}

pub fn stream_order(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let start: Vec<u32> = (0..1000).map(|_| rng.random_range(0..1000)).collect();
    let mut x = ctx.alloc::<u32>(start.len()).unwrap();
    let mut y = ctx.alloc::<u32>(start.len()).unwrap();
    stream.copy_from_host(&start, &mut x).unwrap();
    let mut expect = start.clone();
    for step in 0..40 {
        let (a, b) = (rng.random_range(1..4u32), rng.random_range(0..9u32));
        launch_affine(&stream, &kernel, &mut x, a, b);
        for v in &mut expect {
            *v = a.wrapping_mul(*v).wrapping_add(b);
        }
        if step % 10 == 0 {
            // A round trip through another buffer must not reorder anything.
            stream.copy(&x, &mut y).unwrap();
            stream.fill(&mut x, 0u32).unwrap();
            stream.copy(&y, &mut x).unwrap();
        }
    }
    let mut out = vec![0u32; start.len()];
    stream.copy_to_host(&x, &mut out).unwrap();
    assert_eq!(out, expect);
}

/// Random x2 / -1 steps alternating between two streams, behind a gate
/// that holds the first stream: only a device-side wait at every hand-over
/// gives the one correct final value.
pub fn gated_two_stream_chain(ctx: &Context, seed: u64) {
    let kernel = affine(ctx);
    let streams = [ctx.stream().unwrap(), ctx.stream().unwrap()];
    let gate = Arc::new(ctx.user_event().unwrap());
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x = ctx.alloc::<u32>(256).unwrap();
    // Allocate before the gate closes: on CUDA, page-locked allocation
    // waits for every stream, including the one the gate holds.
    let mut result = ctx.alloc_pinned::<u32>(256).unwrap();
    let mut expect = 3u32;
    streams[0].fill(&mut x, expect).unwrap();
    streams[0].wait(&*gate).unwrap();
    for _ in 0..30 {
        let stream = &streams[rng.random_range(0..2)];
        if rng.random_bool(0.5) {
            launch_affine(stream, &kernel, &mut x, 2, 0);
            expect = expect.wrapping_mul(2);
        } else {
            launch_affine(stream, &kernel, &mut x, 1, u32::MAX);
            expect = expect.wrapping_sub(1);
        }
    }
    streams[1].copy(&x, &mut result).unwrap();
    assert!(!streams[1].query().unwrap(), "work behind a closed gate reported complete");
    gate.complete().unwrap();
    assert!(result.host_slice().unwrap().iter().all(|&v| v == expect), "final value differs from {expect}");
}

/// The raw Device API: a copy on stream B ordered after a copy on stream A
/// only by `stream_wait_event`, while A is held by a gate. Host memory is
/// pinned: a copy from pageable memory may block the host until the stream
/// runs it (CUDA stages it synchronously), and the gate would never open.
pub fn raw_event_wait_orders_streams(ctx: &Context) {
    let dev = ctx.device();
    let flags = StreamFlags { non_blocking: true, ..StreamFlags::default() };
    let (a, b) = (dev.create_stream(flags).unwrap(), dev.create_stream(flags).unwrap());
    let gate = dev.create_user_event().unwrap();
    let done = dev.create_event().unwrap();
    let alloc = dev.alloc_device(64).unwrap();
    let (src, dst) = (dev.alloc_pinned(64).unwrap(), dev.alloc_pinned(64).unwrap());
    let pattern: Vec<u8> = (0..64).collect();
    // SAFETY: every handle is this test's own and used by this thread only;
    // the pinned allocations outlive the synchronisations below, src is
    // written before any copy reads it and dst read after both streams finish.
    unsafe {
        let (src_ptr, dst_ptr) = (dev.pinned_ptr(src).unwrap().as_ptr(), dev.pinned_ptr(dst).unwrap().as_ptr());
        std::ptr::copy_nonoverlapping(pattern.as_ptr(), src_ptr, 64);
        let range = DeviceRange { alloc, offset: 0, len: 64 };
        dev.stream_wait_event(a, gate).unwrap();
        dev.copy_h2d(src_ptr, range, a).unwrap();
        dev.record_event(done, a).unwrap();
        dev.stream_wait_event(b, done).unwrap();
        dev.copy_d2h(range, dst_ptr, b).unwrap();
        assert!(!dev.query_event(done).unwrap());
        assert!(!dev.query_stream(b).unwrap(), "stream B ran ahead of the event it waits on");
        dev.complete_user_event(gate).unwrap();
        dev.synchronize_stream(b).unwrap();
        dev.synchronize_stream(a).unwrap();
        let copied = std::slice::from_raw_parts(dst_ptr, 64);
        assert_eq!(copied, pattern.as_slice());
        for e in [gate, done] {
            dev.destroy_event(e).unwrap();
        }
        for alloc in [alloc, src, dst] {
            dev.free(alloc).unwrap();
        }
        dev.destroy_stream(a).unwrap();
        dev.destroy_stream(b).unwrap();
    }
}

/// Synchronisation events (`create_sync_event`, what tracking records) on
/// a timed stream. Guards the OpenCL shortcut that lets any command event
/// stand for an untimed recording, a completed one included: recorded after
/// a blocking copy the event orders later work at once, recorded behind a
/// closed gate it stays pending, and it never carries time.
pub fn sync_events_order_and_carry_no_time(ctx: &Context) {
    let dev = ctx.device();
    let flags = StreamFlags { non_blocking: true, timing: true, ..StreamFlags::default() };
    let (a, b) = (dev.create_stream(flags).unwrap(), dev.create_stream(flags).unwrap());
    let (sync, gate) = (dev.create_sync_event().unwrap(), dev.create_user_event().unwrap());
    let alloc = dev.alloc_device(64).unwrap();
    let pinned = dev.alloc_pinned(64).unwrap();
    let pattern: Vec<u8> = (0..64).collect();
    let range = DeviceRange { alloc, offset: 0, len: 64 };
    // SAFETY: every handle is this test's own and used by this thread only;
    // `pattern` outlives the blocking copy and `pinned` every copy of it.
    unsafe {
        let host = dev.pinned_ptr(pinned).unwrap().as_ptr();
        dev.fill_u32(range, 7, a).unwrap();
        dev.copy_h2d_sync(pattern.as_ptr(), range, a).unwrap();
        dev.record_event(sync, a).unwrap();
        dev.stream_wait_event(b, sync).unwrap();
        dev.copy_d2h(range, host, b).unwrap();
        dev.synchronize_stream(b).unwrap();
        assert_eq!(std::slice::from_raw_parts(host, 64), pattern.as_slice());

        dev.stream_wait_event(a, gate).unwrap();
        dev.copy_d2h(range, host, a).unwrap();
        dev.record_event(sync, a).unwrap();
        assert!(!dev.query_event(sync).unwrap(), "a sync event recorded behind a closed gate completed");
        dev.complete_user_event(gate).unwrap();
        dev.synchronize_event(sync).unwrap();
        assert!(dev.query_stream(a).unwrap(), "the stream was busy after its last recording completed");
        let err = dev.elapsed_ms(sync, sync).unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidHandle, "{err}");
        assert!(err.to_string().contains("synchronisation event"), "{err}");

        for e in [sync, gate] {
            dev.destroy_event(e).unwrap();
        }
        for alloc in [alloc, pinned] {
            dev.free(alloc).unwrap();
        }
        dev.destroy_stream(a).unwrap();
        dev.destroy_stream(b).unwrap();
    }
}

/// Copies pinned[src..src+len] -> device[dst'..] -> pinned[dst..dst+len]
/// inside one pinned allocation; everything outside the target range keeps
/// its sentinel.
pub fn subrange_copies(ctx: &Context, src: usize, dst: usize, len: usize) {
    let stream = ctx.stream().unwrap();
    let mut pinned = ctx.alloc_pinned::<u32>(64).unwrap();
    let host = pinned.host_slice_mut().unwrap();
    for (i, v) in host.iter_mut().enumerate() {
        *v = if (src..src + len).contains(&i) { 1000 + i as u32 } else { SENTINEL };
    }
    let mut device = ctx.alloc::<u32>(20).unwrap();
    stream.fill(&mut device, SENTINEL).unwrap();
    let mid = 20 - len.min(20);
    stream.copy(pinned.slice(src..src + len).unwrap(), device.slice_mut(mid..mid + len).unwrap()).unwrap();
    let mut out = ctx.alloc_pinned::<u32>(64).unwrap();
    out.host_slice_mut().unwrap().fill(SENTINEL);
    stream.copy(device.slice(mid..mid + len).unwrap(), out.slice_mut(dst..dst + len).unwrap()).unwrap();
    let got = out.host_slice().unwrap();
    for (i, &v) in got.iter().enumerate() {
        let expect = if (dst..dst + len).contains(&i) { 1000 + (src + i - dst) as u32 } else { SENTINEL };
        assert_eq!(v, expect, "element {i} (copied {src}..{} to {dst}..{})", src + len, dst + len);
    }
}

/// Dropping a buffer with queued work neither blocks nor frees it early
/// (H1: a buffer dropped before its gate opened waited forever): the
/// allocation is retired and freed once the work is done, and memory
/// allocated meanwhile never aliases it.
pub fn drop_defers_free_until_queued_work_is_done(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let input = ctx.pinned_from_slice(&[5u32; 4096]).unwrap();
    let mut output = ctx.alloc_pinned::<u32>(4096).unwrap();
    let mut device = ctx.alloc::<u32>(4096).unwrap();
    let before = ctx.deferred_frees();
    stream.wait(&gate).unwrap();
    stream.copy(&input, &mut device).unwrap();
    stream.copy(&device, &mut output).unwrap();
    drop(device); // returns at once although the gate holds the copies
    assert_eq!(ctx.deferred_frees(), before + 1, "the queued buffer must be retired, not freed");
    // A new allocation cannot be the retired memory: filling it must not
    // change what the queued copies move.
    let other_stream = ctx.stream().unwrap();
    let mut fresh = ctx.alloc::<u32>(4096).unwrap();
    other_stream.fill(&mut fresh, 7).unwrap();
    other_stream.synchronize().unwrap();
    gate.complete().unwrap();
    stream.synchronize().unwrap();
    assert!(output.host_slice().unwrap().iter().all(|&v| v == 5));
    assert_eq!(ctx.deferred_frees(), before, "the retired buffer is freed once its work is done");
    drop(fresh);
}

/// One operation records one mark that every buffer it used shares; a
/// buffer that moves on must not make the mark spare while another buffer
/// still waits on it (a mark recycled early would be recorded again
/// elsewhere, complete at once, and let the host read a buffer that a
/// queued copy is still writing).
pub fn shared_mark_outlives_one_buffer(ctx: &Context) {
    let (held, other, churn) = (ctx.stream().unwrap(), ctx.stream().unwrap(), ctx.stream().unwrap());
    let gate = ctx.user_event().unwrap();
    let mut x = ctx.alloc::<u32>(1024).unwrap();
    held.copy_from_host(&[3u32; 1024], &mut x).unwrap();
    let mut out = ctx.alloc_pinned::<u32>(1024).unwrap();
    held.wait(&gate).unwrap();
    held.copy(&x, &mut out).unwrap(); // one mark for x (read) and out (write)
    other.fill(&mut x, 9u32).unwrap(); // x's next use: x gives the mark up
    let mut scratch: Vec<_> = (0..8).map(|_| ctx.alloc::<u32>(64).unwrap()).collect();
    for (i, buffer) in scratch.iter_mut().enumerate() {
        churn.fill(buffer, i as u32).unwrap(); // takes spare events, if any
    }
    churn.synchronize().unwrap();
    assert!(!out.is_idle().unwrap(), "out's copy is still held by the gate");
    gate.complete().unwrap();
    assert!(out.host_slice().unwrap().iter().all(|&v| v == 3), "the copy ran before the fill");
    assert!(out.is_idle().unwrap());
    other.synchronize().unwrap();
}

/// Queries say "not done" while a gate holds the stream and "done" after.
pub fn query_before_and_after_completion(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let event = ctx.event().unwrap();
    let input = ctx.pinned_from_slice(&[1.5f32; 256]).unwrap();
    let mut device = ctx.alloc::<f32>(256).unwrap();
    assert!(stream.query().unwrap(), "a new stream has no pending work");
    assert!(event.query().unwrap(), "a never-recorded event counts as complete");
    stream.wait(&gate).unwrap();
    stream.copy(&input, &mut device).unwrap();
    stream.record(&event).unwrap();
    assert!(!stream.query().unwrap());
    assert!(!event.query().unwrap());
    assert!(!device.is_idle().unwrap());
    assert!(!gate.query().unwrap());
    gate.complete().unwrap();
    stream.synchronize().unwrap();
    assert!(stream.query().unwrap());
    assert!(event.query().unwrap());
    assert!(device.is_idle().unwrap());
}

/// Device times between events are non-negative and ordered; asking for a
/// time before completion is `NotReady`.
pub fn elapsed_times_are_ordered(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let events: Vec<_> = (0..3).map(|_| ctx.event().unwrap()).collect();
    assert_eq!(events[0].elapsed_ms(&events[1]).unwrap_err().kind, ErrorKind::NotReady);
    let mut x = ctx.alloc::<u32>(1 << 16).unwrap();
    stream.fill(&mut x, 1).unwrap();
    let gate = ctx.user_event().unwrap();
    stream.wait(&gate).unwrap();
    stream.record(&events[0]).unwrap();
    launch_affine(&stream, &kernel, &mut x, 3, 1);
    stream.record(&events[1]).unwrap();
    launch_affine(&stream, &kernel, &mut x, 3, 1);
    stream.record(&events[2]).unwrap();
    assert_eq!(events[0].elapsed_ms(&events[2]).unwrap_err().kind, ErrorKind::NotReady);
    gate.complete().unwrap();
    stream.synchronize().unwrap();
    let t01 = events[0].elapsed_ms(&events[1]).unwrap();
    let t12 = events[1].elapsed_ms(&events[2]).unwrap();
    let t02 = events[0].elapsed_ms(&events[2]).unwrap();
    assert!(t01 >= 0.0 && t12 >= 0.0, "negative interval: {t01} ms, {t12} ms");
    assert!(t02 >= t01 && t02 >= t12, "t02 = {t02} ms is shorter than a part ({t01} ms, {t12} ms)");
}

/// Guards against a defect: on a timed OpenCL stream a recording stood for
/// the stream's last command whenever that command was unflushed, taken to
/// mean "not run yet". NVIDIA's driver runs unflushed commands on its own,
/// so the recording took that command's end, from before the host's pause,
/// and wave's variants on NVIDIA's OpenCL measured 10-54x their device time.
pub fn timed_recordings_start_when_recorded(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<u32>(1024).unwrap();
    stream.fill(&mut x, 1).unwrap();
    // A pause that the fill, run or not, cannot be part of.
    let pause = Duration::from_millis(300);
    std::thread::sleep(pause);
    let (start, stop) = (ctx.event().unwrap(), ctx.event().unwrap());
    stream.record(&start).unwrap();
    stream.fill(&mut x, 2).unwrap();
    stream.record(&stop).unwrap();
    stop.synchronize().unwrap();
    let ms = start.elapsed_ms(&stop).unwrap();
    assert!(
        ms < pause.as_secs_f64() * 1e3 / 2.0,
        "a fill of 4 KiB timed at {ms} ms: the interval began before the recording"
    );
}

/// A stream created without timing orders work and events like any other
/// (the OpenCL queue without profiling reuses its last command's event for a
/// recording, even once it completed), and the typed layer refuses to time
/// its events on every backend, so code that times works everywhere or
/// nowhere.
pub fn untimed_streams_order_but_refuse_timing(ctx: &Context) {
    let kernel = affine(ctx);
    let (untimed, timed) = (ctx.untimed_stream().unwrap(), ctx.stream().unwrap());
    let mut x = ctx.alloc::<u32>(4096).unwrap();
    untimed.fill(&mut x, 1).unwrap();
    untimed.synchronize().unwrap();
    // Recorded after the last command completed: still orders what follows.
    let (done, later) = (ctx.event().unwrap(), ctx.event().unwrap());
    untimed.record(&done).unwrap();
    let gate = ctx.user_event().unwrap();
    untimed.wait(&gate).unwrap();
    launch_affine(&untimed, &kernel, &mut x, 3, 1);
    untimed.record(&later).unwrap();
    done.synchronize().unwrap(); // returns although the gate behind it is closed
    assert!(!later.query().unwrap(), "a recording behind a closed gate completed");
    timed.wait(&later).unwrap();
    let mut y = ctx.alloc::<u32>(4096).unwrap();
    gate.complete().unwrap();
    timed.copy(&x, &mut y).unwrap();
    let mut host = vec![0u32; 4096];
    timed.copy_to_host(&y, &mut host).unwrap();
    assert!(host.iter().all(|&v| v == 4), "copy did not wait for the untimed stream's kernel");
    let err = done.elapsed_ms(&later).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidHandle, "{err}");
    assert!(err.to_string().contains("without timing"), "{err}");
    // Re-recorded on a timed stream, the same events time again.
    timed.record(&done).unwrap();
    timed.record(&later).unwrap();
    later.synchronize().unwrap();
    assert!(done.elapsed_ms(&later).unwrap() >= 0.0);
}

/// Host access to a pinned buffer waits for the copy that fills it.
pub fn pinned_host_access_waits(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let gate = Arc::new(ctx.user_event().unwrap());
    let mut device = ctx.alloc::<u32>(1024).unwrap();
    stream.fill(&mut device, 42).unwrap();
    let mut pinned = ctx.alloc_pinned::<u32>(1024).unwrap();
    stream.wait(&*gate).unwrap();
    stream.copy(&device, &mut pinned).unwrap();
    let (opened, opener) = open_later(Arc::clone(&gate));
    let data = pinned.host_slice().unwrap();
    assert!(opened.load(Ordering::SeqCst), "host read the buffer while a copy into it was queued");
    assert!(data.iter().all(|&v| v == 42));
    opener.join().unwrap();
}

/// Runs `body` on another thread and fails if it has not returned within
/// `seconds` (a hang is a failure, not a stuck test run).
fn within<T: Send + 'static>(seconds: u64, what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(body());
    });
    rx.recv_timeout(Duration::from_secs(seconds)).unwrap_or_else(|_| panic!("{what} did not return within {seconds} s"))
}

/// Dropping streams, buffers and the context never blocks on a gate nobody
/// will open (H1: an early `?` dropped buffers before the gate and their
/// drop waited forever; H2: `mem::forget` of a `UserEvent` made dropping
/// its stream hang).
pub fn drops_never_wait_for_a_forgotten_gate(ctx: &Context) {
    let ctx = ctx.clone();
    within(20, "dropping objects behind a forgotten gate", move || {
        let stream = ctx.stream().unwrap();
        let gate = ctx.user_event().unwrap();
        let input = ctx.pinned_from_slice(&[1u32; 1024]).unwrap();
        let mut device = ctx.alloc::<u32>(1024).unwrap();
        let mut output = ctx.alloc_pinned::<u32>(1024).unwrap();
        stream.wait(&gate).unwrap();
        stream.copy(&input, &mut device).unwrap();
        stream.copy(&device, &mut output).unwrap();
        std::mem::forget(gate);
        drop(device);
        drop(stream);
        // The pinned buffers are still used by the held copies: retired, not freed.
        drop(input);
        drop(output);
        assert!(ctx.deferred_frees() >= 3);
        // Another device of the backend still works, and dropping it does
        // not wait for the held stream (CUDA synchronised the whole primary
        // context, which this device shares).
        let Ok(hetero::testing::Availability::Ready(other)) = hetero::testing::context(ctx.info().backend) else {
            return;
        };
        let s = other.stream().unwrap();
        let mut x = other.alloc::<u32>(256).unwrap();
        s.fill(&mut x, 4).unwrap();
        let mut out = vec![0u32; 256];
        s.copy_to_host(&x, &mut out).unwrap();
        assert!(out.iter().all(|&v| v == 4));
        drop((x, s, other));
    });
}

/// Dropping a device whose stream waits on a user event nobody completed
/// returns: the device opens its gates and lets its own work finish (the
/// CUDA backend synchronised the whole context, so a gate held by another
/// device in the process hung every drop).
pub fn device_drop_opens_forgotten_gates(ctx: &Context) {
    let backend = ctx.info().backend;
    within(20, "dropping a device behind an open gate", move || {
        let Ok(hetero::testing::Availability::Ready(ctx)) = hetero::testing::context(backend) else { return };
        let stream = ctx.stream().unwrap();
        let input = ctx.pinned_from_slice(&[1u32; 1024]).unwrap();
        let mut device = ctx.alloc::<u32>(1024).unwrap();
        let gate = ctx.device().create_user_event().unwrap();
        // SAFETY: the gate is this test's own raw event, never destroyed or
        // completed by it; the stream only waits on it.
        unsafe { ctx.device().stream_wait_event(stream.id(), gate) }.unwrap();
        stream.copy(&input, &mut device).unwrap();
        drop((device, input, stream));
        assert!(ctx.deferred_frees() >= 2, "the held copy's buffers are retired");
        drop(ctx);
    });
}

/// A wait with no command after it still holds the stream: queries,
/// recordings and other streams' waits all see it (OpenCL adds a wait to
/// the next command's wait list, so it must not be lost when none comes).
pub fn a_wait_alone_holds_the_stream(ctx: &Context) {
    let (stream, other) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let (gate, event) = (ctx.user_event().unwrap(), ctx.event().unwrap());
    let mut x = ctx.alloc::<u32>(256).unwrap();
    stream.fill(&mut x, 1u32).unwrap();
    stream.synchronize().unwrap();
    stream.wait(&gate).unwrap();
    assert!(!stream.query().unwrap(), "the stream waits for the gate");
    stream.record(&event).unwrap();
    assert!(!event.query().unwrap(), "a recording after the wait follows it");
    other.wait(&event).unwrap();
    other.fill(&mut x, 2u32).unwrap();
    assert!(!other.query().unwrap(), "the other stream waits for the recording");
    gate.complete().unwrap();
    other.synchronize().unwrap();
    assert!(event.query().unwrap());
    assert!(stream.query().unwrap());
}

/// A closed gate holds only the streams that wait on it. On CUDA a stream
/// waiting on the gate's word in the device blocked the hardware queue it
/// was mapped to (`CUDA_DEVICE_MAX_CONNECTIONS`, 8 by default), so other
/// streams mapped to that queue waited for the gate too, and a host
/// synchronising one before opening the gate waited forever (H200; fixed by
/// holding the gated work on the host).
pub fn a_closed_gate_holds_no_other_stream(ctx: &Context) {
    let ctx = ctx.clone();
    within(60, "streams beside a closed gate", move || {
        let (gate, gated) = (ctx.user_event().unwrap(), ctx.stream().unwrap());
        let mut x = gated.alloc_zeros::<u32>(1024).unwrap();
        gated.synchronize().unwrap();
        gated.wait(&gate).unwrap();
        gated.fill(&mut x, 7u32).unwrap();
        // More streams than CUDA has hardware queues (32 at most), all kept.
        let mut others = Vec::new();
        for i in 0..40u32 {
            let stream = ctx.stream().unwrap();
            let mut y = stream.alloc_zeros::<u32>(256).unwrap();
            stream.fill(&mut y, i).unwrap();
            assert_eq!(stream.download(&y).unwrap(), vec![i; 256], "stream {i} beside the gate");
            others.push(stream);
        }
        assert!(!gated.query().unwrap(), "the gated stream is still held");
        gate.complete().unwrap();
        assert_eq!(gated.download(&x).unwrap(), vec![7u32; 1024]);
    });
}

/// A wait issued on an event waits for the recording it had then, even
/// once the event is recorded again: a recording behind a closed gate,
/// then one on an idle stream. Guards the host-held recordings of CUDA and
/// HIP, which stand apart from the event's later ones.
pub fn a_wait_keeps_its_recording_when_the_event_is_recorded_again(ctx: &Context) {
    let (gated, idle, waiter) = (ctx.stream().unwrap(), ctx.stream().unwrap(), ctx.stream().unwrap());
    let (gate, event) = (ctx.user_event().unwrap(), ctx.event().unwrap());
    let mut y = waiter.alloc_zeros::<u32>(256).unwrap();
    waiter.synchronize().unwrap();
    gated.wait(&gate).unwrap();
    gated.record(&event).unwrap();
    waiter.wait(&event).unwrap();
    waiter.fill(&mut y, 3u32).unwrap();
    idle.record(&event).unwrap();
    idle.synchronize().unwrap();
    assert!(event.query().unwrap(), "the event's latest recording is the idle stream's");
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert!(!waiter.query().unwrap(), "the wait still waits for the recording behind the gate");
    gate.complete().unwrap();
    assert_eq!(waiter.download(&y).unwrap(), vec![3u32; 256]);
    assert!(gated.query().unwrap());
}

/// The one-call helpers: upload, download, stream-ordered zeroed memory,
/// whole buffers as launch arguments and launch shapes covering an extent.
pub fn helpers_upload_download_zeros_and_whole_buffers(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let kernel = affine(ctx);
    let mut x = stream.upload(&[1u32, 2, 3, 4]).unwrap();
    let config = hetero::LaunchConfig::covering([4, 1, 1], [kernel.block_size(BlockRequest::new(64)), 1, 1], 0);
    assert_eq!(config.grid, [1, 1, 1]);
    // SAFETY: affine_u32(x, n, a, b) touches x[0..n), and x holds n elements.
    unsafe { stream.launch(&kernel, config, &[(&mut x).into(), 4u32.into(), 3u32.into(), 1u32.into()]).unwrap() };
    assert_eq!(stream.download(&x).unwrap(), [4, 7, 10, 13]);
    // Zeroed in stream order over memory that held other values.
    drop(x);
    let words = stream.alloc_zeros::<u32>(1000).unwrap();
    let odd = stream.alloc_zeros::<u8>(3).unwrap();
    assert!(stream.download(&words).unwrap().iter().all(|&w| w == 0));
    assert_eq!(stream.download(&odd).unwrap(), [0, 0, 0]);
    assert_eq!(hetero::LaunchConfig::covering([10, 5, 0], [4, 2, 1], 0).grid, [3, 3, 1]);
    fn needs_pod<T: hetero::Pod + hetero::Zeroable>() {}
    needs_pod::<f32>();
}

/// Regression: the host backend completed a recording's event before it
/// counted the recording as done, so a host that had waited for the event
/// could query the stream, with nothing else queued, and find it busy.
pub fn a_completed_recording_leaves_its_stream_idle(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let event = ctx.event().unwrap();
    for _ in 0..500 {
        stream.record(&event).unwrap();
        event.synchronize().unwrap();
        assert!(stream.query().unwrap(), "the recording was the stream's last work and it has completed");
    }
}

/// Regression: OpenCL remembered a stream's last command after letting go
/// of the queue, so with two threads enqueueing on one stream an earlier
/// command could be remembered after a later one, and a host wait (here,
/// the pinned buffer's) could return while the later command still ran.
/// With that code this failed in about one run in three on PoCL.
pub fn threads_sharing_a_stream_wait_for_their_own_work(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    std::thread::scope(|scope| {
        for t in 0..2u32 {
            let stream = &stream;
            scope.spawn(move || {
                let mut big = ctx.alloc::<u32>(1 << 18).unwrap();
                let mut x = ctx.alloc::<u32>(64).unwrap();
                let mut out = ctx.alloc_pinned::<u32>(64).unwrap();
                for i in 0..5000u32 {
                    let value = t << 16 | i;
                    stream.fill(&mut big, value).unwrap(); // long, so a later command can outlast it
                    stream.fill(&mut x, value).unwrap();
                    stream.copy(&x, &mut out).unwrap();
                    let seen = out.host_slice().unwrap();
                    assert!(seen.iter().all(|&v| v == value), "thread {t}, round {i}: read before the copy ended");
                }
            });
        }
    });
    stream.synchronize().unwrap();
}

/// Threads launching one kernel at once, each on its own stream and
/// buffer with its own arguments, each get their own results. Guards the
/// per-thread kernel objects of OpenCL (arguments are set on the object,
/// then captured by the enqueue): threads sharing an object without the
/// lock would launch with each other's arguments.
pub fn threads_launching_one_kernel_keep_their_arguments(ctx: &Context) {
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    std::thread::scope(|scope| {
        for t in 0..12u32 {
            let kernel = &kernel;
            scope.spawn(move || {
                let stream = ctx.untimed_stream().unwrap();
                let n = 256u32;
                let mut x = stream.alloc_zeros::<u32>(n as usize).unwrap();
                for _ in 0..200 {
                    let xs = x.slice_mut(..).unwrap();
                    // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
                    unsafe {
                        stream
                            .launch(
                                kernel,
                                LaunchConfig::covering([n, 1, 1], [kernel.block_size(BlockRequest::new(64)), 1, 1], 0),
                                &[(&xs).into(), n.into(), 1u32.into(), (t + 1).into()],
                            )
                            .unwrap();
                    }
                }
                let got = stream.download(&x).unwrap();
                assert!(got.iter().all(|&v| v == 200 * (t + 1)), "thread {t} got {:?}", &got[..4]);
            });
        }
    });
}

/// Waits (up to 30 s) for `free` to finish what it was given while `gate`
/// is still closed; past that, opens the gate and fails with `waited`.
fn runs_while_gated(free: &Stream, gate: &hetero::UserEvent, waited: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !free.query().unwrap() {
        if std::time::Instant::now() > deadline {
            gate.complete().unwrap();
            panic!("{waited}");
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Disjoint halves of one buffer are tracked per range (defect: tracking
/// per allocation serialised two streams writing different halves): with
/// one stream held by a gate while it writes the lower half, another
/// stream writes the upper half and completes; a write overlapping the
/// lower half still waits for the gated one, and the final contents show
/// the order.
pub fn disjoint_halves_are_not_serialised(ctx: &Context) {
    let (held, free) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let gate = ctx.user_event().unwrap();
    let mut x = ctx.alloc::<u32>(1024).unwrap();
    assert!(x.split_at_mut(1025).is_err(), "a split past the end is an error");
    {
        let (lower, upper) = x.split_at_mut(512).unwrap();
        held.wait(&gate).unwrap();
        held.fill(lower, 1u32).unwrap();
        free.fill(upper, 2u32).unwrap();
    }
    runs_while_gated(&free, &gate, "the upper half waited for the gated lower half");
    assert!(!held.query().unwrap(), "the gated stream is still held");
    // Overlaps the lower half: waits for the gated write.
    free.fill(x.slice_mut(256..600).unwrap(), 3u32).unwrap();
    assert!(!free.query().unwrap(), "an overlapping write waits for the gated one");
    gate.complete().unwrap();
    free.synchronize().unwrap();
    held.synchronize().unwrap();
    let got = free.download(&x).unwrap();
    let want = |i: usize| match i {
        0..256 => 1,
        256..600 => 3,
        _ => 2,
    };
    for (i, v) in got.iter().enumerate() {
        assert_eq!(*v, want(i), "element {i}");
    }
    // Chunks are views of their own too.
    let chunks = x.slice_mut(..).unwrap().chunks_mut(300).unwrap();
    assert_eq!(chunks.iter().map(|c| c.len()).collect::<Vec<_>>(), [300, 300, 300, 124]);
    for (k, chunk) in chunks.into_iter().enumerate() {
        let stream = if k % 2 == 0 { &held } else { &free };
        stream.fill(chunk, k as u32).unwrap();
    }
    held.synchronize().unwrap();
    free.synchronize().unwrap();
    let got = held.download(&x).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == (i / 300) as u32), "each chunk holds its index");
    assert!(x.slice_mut(..).unwrap().chunks_mut(0).is_err(), "chunks of 0 elements are an error");
}

/// Regression (hang): a synchronous copy held its stream's order lock
/// across the device wait, so another thread's enqueue on that stream (a
/// fill, which only enqueues) waited for the copy, and with it for a gate
/// that thread was yet to open: neither returned until a watchdog opened
/// the gate. Both directions of synchronous copy are tried.
pub fn enqueue_is_not_held_by_a_blocking_copy(ctx: &Context) {
    const N: usize = 256;
    for upload in [true, false] {
        let stream = ctx.stream().unwrap();
        let mut d = stream.alloc_zeros::<u32>(N).unwrap();
        let mut e = stream.alloc_zeros::<u32>(N).unwrap();
        stream.fill(&mut d, 3u32).unwrap();
        stream.synchronize().unwrap();
        let gate = ctx.user_event().unwrap();
        stream.wait(&gate).unwrap();
        let opened = AtomicBool::new(false);
        let open = &|| {
            if !opened.swap(true, Ordering::SeqCst) {
                gate.complete().expect("complete gate");
            }
        };
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let mut host = vec![0u32; N];
        let took = std::thread::scope(|scope| {
            let copier = scope.spawn(|| {
                if upload { stream.copy_from_host(&[5u32; N], &mut d) } else { stream.copy_to_host(&d, &mut host) }
            });
            // The watchdog opens the gate if the fill is still stuck, so
            // that a regression fails the test instead of hanging it.
            scope.spawn(move || {
                if done_rx.recv_timeout(Duration::from_secs(5)).is_err() {
                    open();
                }
            });
            std::thread::sleep(Duration::from_millis(200));
            let start = std::time::Instant::now();
            stream.fill(&mut e, 1u32).unwrap();
            let took = start.elapsed();
            let _ = done_tx.send(());
            open();
            copier.join().unwrap().unwrap();
            took
        });
        assert!(
            took < Duration::from_secs(2),
            "a fill waited {took:?} behind another thread's blocking copy ({})",
            if upload { "copy_from_host" } else { "copy_to_host" }
        );
        let expect = if upload { 5 } else { 3 };
        assert_eq!(stream.download(&d).unwrap(), vec![expect; N]);
        assert_eq!(stream.download(&e).unwrap(), vec![1; N]);
        if !upload {
            assert_eq!(host, vec![3; N]);
        }
    }
}

/// Regression: a kernel argument at an offset into a buffer (an OpenCL
/// sub-buffer) was released right after its launch was enqueued, which
/// crashed NVIDIA's OpenCL driver in `clReleaseMemObject` when the launch
/// was not flushed yet (pull's packed arrays). Launches at several
/// offsets, held behind a gate, then run and leave their results.
pub fn arguments_at_offsets_outlive_their_queued_launches(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    // 1 KiB apart: every device's sub-buffer alignment divides it.
    let (part, parts) = (256usize, 6usize);
    let mut x = stream.upload(&vec![1u32; part * parts]).unwrap();
    stream.synchronize().unwrap();
    stream.wait(&gate).unwrap();
    let threads = kernel.block_size(BlockRequest::new(64));
    for k in 0..parts {
        for _ in 0..3 {
            let xs = x.slice_mut(k * part..(k + 1) * part).unwrap();
            let config = LaunchConfig::covering([part as u32, 1, 1], [threads, 1, 1], 0);
            // SAFETY: affine_u32 touches x[offset..offset + part), within x.
            unsafe {
                stream.launch(
                    &kernel,
                    config,
                    &[(&xs).into(), (part as u32).into(), 1u32.into(), (k as u32 + 1).into()],
                )
            }
            .unwrap();
        }
    }
    gate.complete().unwrap();
    let got = stream.download(&x).unwrap();
    for k in 0..parts {
        assert!(got[k * part..(k + 1) * part].iter().all(|&v| v == 1 + 3 * (k as u32 + 1)), "part {k}");
    }
}

/// Regression: a buffer's sub-buffers (its kernel arguments at offsets)
/// were released oldest first when it was freed, which crashed NVIDIA's
/// OpenCL driver (a null dereference in `clReleaseMemObject`) where a later
/// sub-buffer overlapping an earlier one was made after the earlier one had
/// run a kernel: scans of slices at random offsets in `stress --mix
/// algorithms`. Each launch here runs before the next offset is used; the
/// buffer is then freed for good and the device is used again.
pub fn arguments_at_overlapping_offsets_are_released_safely(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    // 1 KiB apart: every device's sub-buffer alignment divides it. Each
    // range runs from its offset to the end, so the sub-buffers overlap.
    let (part, parts) = (256usize, 4usize);
    let mut x = stream.upload(&vec![1u32; part * parts]).unwrap();
    let threads = kernel.block_size(BlockRequest::new(64));
    for k in 0..parts {
        let n = part * (parts - k);
        let xs = x.slice_mut(k * part..).unwrap();
        let config = LaunchConfig::covering([n as u32, 1, 1], [threads, 1, 1], 0);
        // SAFETY: affine_u32 touches x[k * part..), within x.
        unsafe { stream.launch(&kernel, config, &[(&xs).into(), (n as u32).into(), 1u32.into(), 1u32.into()]) }
            .unwrap();
        stream.synchronize().unwrap();
    }
    let got = stream.download(&x).unwrap();
    for k in 0..parts {
        assert!(got[k * part..(k + 1) * part].iter().all(|&v| v == 1 + k as u32 + 1), "part {k}");
    }
    drop(x);
    stream.synchronize().unwrap();
    ctx.trim();
    assert_eq!(stream.download(&stream.upload(&[7u32; 4]).unwrap()).unwrap(), [7; 4]);
}

/// One kernel launched again and again with one argument changed at a
/// time, all queued before any runs: each launch takes its own values.
/// Guards OpenCL's kept arguments (a launch sets only those that changed
/// since the kernel object's last launch): a value wrongly kept would
/// run a launch with the previous one's. The last launch is on a buffer
/// made after another was freed, which can have the freed one's handle.
pub fn launches_take_their_own_arguments_when_one_changes(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let (part, n) = (256usize, 1024usize);
    let threads = kernel.block_size(BlockRequest::new(64));
    let launch = |x: &mut hetero::DeviceSliceMut<'_, u32>, len: usize, a: u32, b: u32| {
        let config = LaunchConfig::covering([len as u32, 1, 1], [threads, 1, 1], 0);
        // SAFETY: affine_u32 touches the first `len` elements of x, within x.
        unsafe { stream.launch(&kernel, config, &[(&*x).into(), (len as u32).into(), a.into(), b.into()]) }.unwrap();
    };
    let mut x = stream.upload(&vec![1u32; n]).unwrap();
    let mut y = stream.upload(&vec![1u32; n]).unwrap();
    launch(&mut x.slice_mut(..).unwrap(), n, 2, 1); // x = 3
    launch(&mut x.slice_mut(..).unwrap(), n, 2, 3); // b changed: x = 9
    launch(&mut y.slice_mut(..).unwrap(), n, 2, 3); // the buffer changed: y = 5
    launch(&mut x.slice_mut(part..).unwrap(), n - part, 2, 3); // an offset and n: x[part..] = 21
    launch(&mut x.slice_mut(part..).unwrap(), part, 3, 3); // n and a: x[part..2 part] = 66
    let (gx, gy) = (stream.download(&x).unwrap(), stream.download(&y).unwrap());
    assert!(gx[..part].iter().all(|&v| v == 9), "x[..part]: {:?}", &gx[..4]);
    assert!(gx[part..2 * part].iter().all(|&v| v == 66), "x[part..2 part]: {:?}", &gx[part..part + 4]);
    assert!(gx[2 * part..].iter().all(|&v| v == 21), "x[2 part..]: {:?}", &gx[2 * part..2 * part + 4]);
    assert!(gy.iter().all(|&v| v == 5), "y: {:?}", &gy[..4]);
    drop(y);
    stream.synchronize().unwrap();
    ctx.trim();
    let mut z = stream.upload(&vec![1u32; n]).unwrap();
    launch(&mut z.slice_mut(..).unwrap(), n, 2, 3);
    assert!(stream.download(&z).unwrap().iter().all(|&v| v == 5), "a buffer made after a free");
}

/// Buffer arguments passed whole ([`hetero::Arg::whole_buffer`]) are
/// ordered by the slices they were made from, not by their buffers: a
/// launch on rows apart from a gated write runs at once, one on rows it
/// overlaps waits for it, and both compute what the same launches with
/// the slices passed at their offsets compute, bit for bit. Guards the
/// split wave's launches, which pass whole fields (no OpenCL sub-buffer)
/// while halo copies move other rows of them.
pub fn whole_buffer_arguments_are_ordered_by_their_slices(ctx: &Context) {
    let kernel = ctx.build_module(hetero::kernels::WAVE).and_then(|m| m.kernel("wave_rows")).unwrap();
    let (nx, ny) = (64usize, 32usize);
    let (held, free) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let field = |seed: u32| -> Vec<f32> {
        (0..nx * ny).map(|i| (((i as u32).wrapping_mul(2654435761) ^ seed) % 1000) as f32 * 1e-3).collect()
    };
    let (prev, cur) = (held.upload(&field(1)).unwrap(), held.upload(&field(2)).unwrap());
    let mut by_offset = held.upload(&vec![0.0f32; nx * ny]).unwrap();
    let mut whole = held.upload(&vec![0.0f32; nx * ny]).unwrap();
    held.synchronize().unwrap();
    let threads = kernel.block_size(BlockRequest::new(64));
    let config = |rows: usize| LaunchConfig {
        grid: [(nx as u32).div_ceil(threads), (rows as u32).div_ceil(hetero::kernels::WAVE_ROWS), 1],
        block: [threads, 1, 1],
        shared_bytes: 0,
    };
    // wave_rows over `rows`, the fields cut to the rows it touches; passed
    // at their offsets, or whole (the kernel then indexes from row 0).
    let launch = |stream: &Stream, out: &mut DeviceBuffer<f32>, rows: std::ops::Range<usize>, whole: bool| {
        let u = rows.start.saturating_sub(2)..(rows.end + 2).min(ny);
        let (p, c) =
            (prev.slice(rows.start * nx..rows.end * nx).unwrap(), cur.slice(u.start * nx..u.end * nx).unwrap());
        let n = out.slice_mut(rows.start * nx..rows.end * nx).unwrap();
        let mut fields = [Arg::from(&p), Arg::from(&c), Arg::from(&n)];
        let (out_first, u_first) = if whole { (0, 0) } else { (rows.start as u32, u.start as u32) };
        if whole {
            fields = fields.map(Arg::whole_buffer);
        }
        let scalars: [Arg<'_>; 10] = [
            (nx as u32).into(),
            (ny as u32).into(),
            (rows.start as u32).into(),
            (rows.end as u32).into(),
            out_first.into(),
            u_first.into(),
            0.25f32.into(),
            5u32.into(),
            u32::MAX.into(),
            0.0f32.into(),
        ];
        let args: Vec<Arg<'_>> = fields.into_iter().chain(scalars).collect();
        // SAFETY: wave_rows touches rows `rows` of u_prev and u_next and
        // `u` of u (wave.kern), the slices passed, indexed as the
        // arguments say.
        unsafe { stream.launch(&kernel, config(rows.len()), &args) }.unwrap();
    };
    for rows in [8..24, 2..6] {
        launch(&free, &mut by_offset, rows, false);
    }
    let gate = ctx.user_event().unwrap();
    held.wait(&gate).unwrap();
    held.fill(whole.slice_mut(..4 * nx).unwrap(), 7.0f32).unwrap();
    launch(&free, &mut whole, 8..24, true);
    runs_while_gated(&free, &gate, "a launch on rows 8..24 passed whole waited for a gated write of rows 0..4");
    launch(&free, &mut whole, 2..6, true);
    assert!(!free.query().unwrap(), "a launch on rows 2..6 passed whole ran before a gated write of rows 0..4");
    gate.complete().unwrap();
    held.synchronize().unwrap();
    let (want, got) = (free.download(&by_offset).unwrap(), free.download(&whole).unwrap());
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let row = i / nx;
        if row < 2 {
            assert_eq!(*g, 7.0, "row {row}: the gated fill's value");
        } else if (2..6).contains(&row) || (8..24).contains(&row) {
            assert_eq!(g.to_bits(), w.to_bits(), "cell {i} (row {row}): whole against at an offset");
        }
    }
}

/// Gates made one after another, each destroyed before the next is made
/// (CUDA and HIP reuse a destroyed gate's word for the next gate): a new
/// gate holds its stream until it is opened, and a stream that waited on
/// an earlier gate, destroyed before it ran, is not held again by the gates
/// made after it. Guards the reuse of gate words, which once kept every
/// destroyed gate's page-locked word until the device went (soak growth).
pub fn gate_words_are_reused_without_releasing_a_new_gate(ctx: &Context) {
    let (early, stream) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let mut x = ctx.alloc::<u32>(256).unwrap();
    let mut y = ctx.alloc::<u32>(256).unwrap();
    // A wait on a gate that is destroyed (so opened) before it runs.
    let first = ctx.user_event().unwrap();
    early.wait(&first).unwrap();
    early.fill(&mut y, 7u32).unwrap();
    drop(first);
    for round in 0..8u32 {
        let gate = ctx.user_event().unwrap();
        stream.wait(&gate).unwrap();
        stream.fill(&mut x, round).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert!(!stream.query().unwrap(), "round {round}: a new gate let its stream run before it was opened");
        gate.complete().unwrap();
        stream.synchronize().unwrap();
        assert_eq!(stream.download(&x).unwrap(), vec![round; 256], "round {round}");
        drop(gate);
    }
    early.synchronize().unwrap();
    assert_eq!(early.download(&y).unwrap(), vec![7u32; 256]);
}
