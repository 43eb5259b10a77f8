//! Graphs on every backend: recording, replay, changes between replays,
//! ordering against streams outside the graph, drops with replays queued,
//! and every error a recording or a replay can meet.

use hetero::{
    Backend, BlockRequest, Context, ErrorKind, GraphArg, GraphBuffer, GraphStream, Kernel, LaunchConfig, Node, Recorder,
};

use hetero::safe::OnDevice;

use super::semantics::affine;
use super::user_kernels::{host_saxpy, reads_past_the_end};

fn kind<T>(r: hetero::Result<T>) -> ErrorKind {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.kind,
    }
}

/// Records `x = a * x + b` over the whole of `x`.
fn record_affine<'b>(
    rec: &mut Recorder<'b>,
    s: GraphStream,
    kernel: &'b Kernel,
    x: GraphBuffer<u32, OnDevice>,
    a: u32,
    b: u32,
) -> hetero::Result<Node> {
    let n = x.len() as u32;
    let threads = kernel.block_size(BlockRequest::new(64));
    let config = LaunchConfig::covering([n, 1, 1], [threads, 1, 1], 0);
    // SAFETY: affine_u32 touches x[0..n), and x holds n elements.
    unsafe { rec.launch(s, kernel, config, vec![x.into(), n.into(), a.into(), b.into()]) }
}

fn affine_host(v: &[u32], a: u32, b: u32) -> Vec<u32> {
    v.iter().map(|x| a.wrapping_mul(*x).wrapping_add(b)).collect()
}

/// A graph of copy in, launch and copy out, replayed with new inputs
/// written by the host and new scalars between replays; each replay's
/// output is read from the host before the next.
pub fn replays_run_the_recorded_work_with_changed_arguments(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let n = 1000;
    let mut input = ctx.alloc_pinned::<u32>(n).unwrap();
    let mut x = ctx.alloc::<u32>(n).unwrap();
    let mut out = ctx.alloc_pinned::<u32>(n).unwrap();
    let mut rec = ctx.recorder();
    let (pin, px, pout) =
        (rec.bind_mut(&mut input).unwrap(), rec.bind_mut(&mut x).unwrap(), rec.bind_mut(&mut out).unwrap());
    let s = rec.stream();
    rec.copy(s, pin, px).unwrap();
    let node = record_affine(&mut rec, s, &kernel, px, 1, 0).unwrap();
    rec.copy(s, px, pout).unwrap();
    let mut graph = rec.finish().unwrap();
    assert_eq!(graph.len(), 3);
    assert_eq!(graph.is_native(), hetero::Device::native_graphs(ctx.device()));
    for round in 0..6u32 {
        let start: Vec<u32> = (0..n as u32).map(|i| i * 7 + round).collect();
        graph.host_slice_mut(pin).unwrap().copy_from_slice(&start);
        let (a, b) = (round + 2, 3 * round + 1);
        // SAFETY: the same kernel and buffers; only scalars change.
        unsafe {
            graph.set_arg(node, 2, a).unwrap();
            graph.set_arg(node, 3, b).unwrap();
        }
        graph.replay(&stream).unwrap();
        assert_eq!(graph.get(pout).unwrap().host_slice().unwrap(), affine_host(&start, a, b), "round {round}");
    }
    stream.synchronize().unwrap();
}

/// Two graph streams joined by a graph event: the waiting stream sees the
/// recording stream's work before the event, and the replay as a whole is
/// one operation of the replaying stream.
pub fn graph_streams_are_ordered_by_graph_events(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let n = 4096;
    let (mut a, mut b, mut c) =
        (ctx.alloc::<u32>(n).unwrap(), ctx.alloc::<u32>(n).unwrap(), ctx.alloc::<u32>(n).unwrap());
    let mut rec = ctx.recorder();
    let (ga, gb, gc) = (rec.bind_mut(&mut a).unwrap(), rec.bind_mut(&mut b).unwrap(), rec.bind_mut(&mut c).unwrap());
    let (s0, s1) = (rec.stream(), rec.stream());
    rec.fill(s0, ga, 5u32).unwrap();
    record_affine(&mut rec, s0, &kernel, ga, 3, 1).unwrap();
    let filled = rec.record(s0).unwrap();
    rec.fill(s0, gc, 9u32).unwrap();
    rec.wait(s1, filled).unwrap();
    rec.copy(s1, ga.slice(..).unwrap(), gb).unwrap();
    record_affine(&mut rec, s1, &kernel, gb, 2, 0).unwrap();
    record_affine(&mut rec, s0, &kernel, gc, 1, 1).unwrap();
    let mut graph = rec.finish().unwrap();
    for _ in 0..3 {
        graph.replay(&stream).unwrap();
    }
    assert_eq!(stream.download(graph.get(ga).unwrap()).unwrap(), vec![16; n]);
    assert_eq!(stream.download(graph.get(gb).unwrap()).unwrap(), vec![32; n]);
    assert_eq!(stream.download(graph.get(gc).unwrap()).unwrap(), vec![10; n]);
}

/// A bound buffer is swapped for another of the same length: later
/// replays use the new one and leave the old one alone. Another length,
/// or the other kind of binding, is refused and changes nothing.
pub fn rebinding_changes_the_buffer_of_later_replays(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let mut x = stream.upload(&[1u32; 256]).unwrap();
    let mut y = stream.upload(&[10u32; 256]).unwrap();
    let mut short = stream.upload(&[0u32; 255]).unwrap();
    let source = stream.upload(&[4u32; 256]).unwrap();
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    let gs = rec.bind(&source).unwrap();
    let s = rec.stream();
    record_affine(&mut rec, s, &kernel, gx, 2, 1).unwrap();
    let mut graph = rec.finish().unwrap();
    graph.replay(&stream).unwrap();
    assert_eq!(kind(graph.rebind_mut(gx, &mut short)), ErrorKind::OutOfBounds);
    assert_eq!(kind(graph.rebind(gx, &source)), ErrorKind::InvalidHandle, "a writable binding takes rebind_mut");
    assert_eq!(kind(graph.get_mut(gs)), ErrorKind::InvalidHandle, "a read-only binding is never written");
    graph.rebind_mut(gx, &mut y).unwrap();
    graph.replay(&stream).unwrap();
    graph.replay(&stream).unwrap();
    assert_eq!(stream.download(graph.get(gx).unwrap()).unwrap(), vec![43; 256], "y: (10 * 2 + 1) * 2 + 1");
    drop(graph);
    assert_eq!(stream.download(&x).unwrap(), vec![3; 256], "x: one replay before the rebinding");
    assert_eq!(stream.download(&short).unwrap(), vec![0; 255]);
}

/// Several writable bindings at once, between replays: a kernel that
/// reads two bound buffers and writes a third launches on views of them,
/// and its uses are ordered with the replays' (the wave split's interior
/// step). One binding asked for twice, or a read-only one, is refused.
pub fn several_bindings_are_lent_at_once(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let (mut x, mut y) = (stream.upload(&[1u32; 256]).unwrap(), stream.upload(&[5u32; 256]).unwrap());
    let source = stream.upload(&[4u32; 256]).unwrap();
    let mut rec = ctx.recorder();
    let (gx, gy) = (rec.bind_mut(&mut x).unwrap(), rec.bind_mut(&mut y).unwrap());
    let gs = rec.bind(&source).unwrap();
    let s = rec.stream();
    record_affine(&mut rec, s, &kernel, gx, 2, 1).unwrap();
    let mut graph = rec.finish().unwrap();
    graph.replay(&stream).unwrap();
    assert_eq!(kind(graph.get_disjoint_mut([gx, gx])), ErrorKind::InvalidHandle, "one binding twice");
    assert_eq!(kind(graph.get_disjoint_mut([gx, gs])), ErrorKind::InvalidHandle, "a read-only binding");
    let [mut vx, mut vy] = graph.get_disjoint_mut([gx, gy]).unwrap();
    let other_stream = ctx.stream().unwrap();
    other_stream.copy(vx.slice(0..128).unwrap(), vy.slice_mut(128..256).unwrap()).unwrap();
    other_stream.fill(vx.slice_mut(0..1).unwrap(), 7u32).unwrap();
    graph.replay(&stream).unwrap();
    let got_x = stream.download(graph.get(gx).unwrap()).unwrap();
    let got_y = stream.download(graph.get(gy).unwrap()).unwrap();
    assert_eq!(got_x[0], 15, "the replay after the fill: 7 * 2 + 1");
    assert_eq!(got_x[1..], vec![7; 255], "3 * 2 + 1");
    assert_eq!(got_y[..128], vec![5; 128]);
    assert_eq!(got_y[128..], vec![3; 128], "the copy read x after the first replay");
}

/// A replay held by a gate holds work on another stream that reads what
/// the graph writes, and waits for work on another stream that writes
/// what the graph reads: a replay is tracked as one operation.
pub fn replays_are_ordered_against_streams_outside_the_graph(ctx: &Context) {
    let kernel = affine(ctx);
    let (a, b) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let gate = ctx.user_event().unwrap();
    let n = 2048;
    let mut x = a.upload(&vec![1u32; n]).unwrap();
    let mut input = a.upload(&vec![0u32; n]).unwrap();
    let mut seen = ctx.alloc_pinned::<u32>(n).unwrap();
    a.synchronize().unwrap();
    // Another stream writes the graph's input, held by the gate.
    b.wait(&gate).unwrap();
    b.fill(&mut input, 6u32).unwrap();
    let mut rec = ctx.recorder();
    let (gin, gx) = (rec.bind(&input).unwrap(), rec.bind_mut(&mut x).unwrap());
    let s = rec.stream();
    rec.copy(s, gin, gx).unwrap();
    record_affine(&mut rec, s, &kernel, gx, 3, 0).unwrap();
    let mut graph = rec.finish().unwrap();
    graph.replay(&a).unwrap();
    assert!(!a.query().unwrap(), "the replay waits for the write of its input");
    // A third use reads the graph's output on the other stream.
    let c = ctx.stream().unwrap();
    c.copy(graph.get(gx).unwrap(), &mut seen).unwrap();
    assert!(!c.query().unwrap(), "the read waits for the replay");
    gate.complete().unwrap();
    c.synchronize().unwrap();
    assert_eq!(seen.host_slice().unwrap(), vec![18; n]);
}

/// Replays queued behind a gate, each after its own scalars and binding:
/// each runs with what was set before it, not with what was set after
/// (guards against an update reaching a queued replay, which HIP does not
/// document against: there it goes to another executable of the graph);
/// replays after the gate reuse those executables.
pub fn queued_replays_keep_their_arguments(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let n = 256;
    let mut xs: Vec<_> = (0..6u32).map(|k| stream.upload(&vec![k; n]).unwrap()).collect();
    stream.synchronize().unwrap();
    stream.wait(&gate).unwrap();
    let (first, rest) = xs.split_first_mut().unwrap();
    let mut rest = rest.iter_mut();
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(first).unwrap();
    let s = rec.stream();
    let node = record_affine(&mut rec, s, &kernel, gx, 1, 0).unwrap();
    let mut graph = rec.finish().unwrap();
    let args = |k: u32| (k + 2, 10 * k + 1);
    for k in 0..6u32 {
        if k > 0 {
            graph.rebind_mut(gx, rest.next().unwrap()).unwrap();
        }
        let (a, b) = args(k);
        // SAFETY: the same kernel and buffers; only scalars change.
        unsafe {
            graph.set_arg(node, 2, a).unwrap();
            graph.set_arg(node, 3, b).unwrap();
        }
        graph.replay(&stream).unwrap();
    }
    assert!(!stream.query().unwrap(), "the replays wait for the gate");
    gate.complete().unwrap();
    stream.synchronize().unwrap();
    let mut last = vec![5u32; n];
    last = affine_host(&last, args(5).0, args(5).1);
    for round in 0..5u32 {
        // SAFETY: as above.
        unsafe { graph.set_arg(node, 2, round + 3).unwrap() };
        graph.replay(&stream).unwrap();
        last = affine_host(&last, round + 3, args(5).1);
    }
    assert_eq!(stream.download(graph.get(gx).unwrap()).unwrap(), last, "replays after the gate");
    drop(graph);
    for (k, x) in xs.iter().enumerate().take(5) {
        let (a, b) = args(k as u32);
        assert_eq!(stream.download(x).unwrap(), affine_host(&vec![k as u32; n], a, b), "replay {k}");
    }
}

/// Dropping a graph, and then its buffers, while replays are queued
/// behind a gate: nothing blocks, and the queued replays still run on
/// live memory (the buffers' frees wait for them).
pub fn dropping_a_graph_with_replays_queued(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let mut x = stream.upload(&[2u32; 512]).unwrap();
    let mut out = ctx.alloc_pinned::<u32>(512).unwrap();
    stream.synchronize().unwrap();
    stream.wait(&gate).unwrap();
    {
        let mut rec = ctx.recorder();
        let (gx, gout) = (rec.bind_mut(&mut x).unwrap(), rec.bind_mut(&mut out).unwrap());
        let s = rec.stream();
        record_affine(&mut rec, s, &kernel, gx, 1, 1).unwrap();
        rec.copy(s, gx, gout).unwrap();
        let mut graph = rec.finish().unwrap();
        for _ in 0..4 {
            graph.replay(&stream).unwrap();
        }
    }
    drop(x);
    // The host waits for the queued replays before it reads their output.
    let opener = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(30));
        gate.complete().unwrap();
    });
    assert_eq!(out.host_slice().unwrap(), vec![6; 512]);
    opener.join().unwrap();
    stream.synchronize().unwrap();
}

/// Every refusal of a recording: a typed error that ends it (later calls
/// and `finish` return it) and leaves the streams usable.
pub fn recording_errors_end_the_recording(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let mut y = ctx.alloc::<u32>(32).unwrap();
    let z = ctx.alloc::<u32>(64).unwrap();
    let bytes = ctx.alloc::<u8>(64).unwrap();

    // A copy of two lengths.
    let mut rec = ctx.recorder();
    let (gx, gy) = (rec.bind_mut(&mut x).unwrap(), rec.bind_mut(&mut y).unwrap());
    let s = rec.stream();
    assert_eq!(kind(rec.copy(s, gx, gy)), ErrorKind::OutOfBounds);
    let again = rec.fill(s, gx, 1u32).unwrap_err();
    assert_eq!(again.kind, ErrorKind::OutOfBounds, "the first error ends the recording: {again}");
    assert_eq!(kind(rec.finish()), ErrorKind::OutOfBounds);

    // A write to a read-only binding; a fill of other than 4 bytes.
    let mut rec = ctx.recorder();
    let (gz, gb) = (rec.bind(&z).unwrap(), rec.bind(&bytes).unwrap());
    let s = rec.stream();
    assert_eq!(kind(record_affine(&mut rec, s, &kernel, gz, 1, 1)), ErrorKind::InvalidLaunch);
    let mut rec = ctx.recorder();
    let gb2 = rec.bind(&bytes).unwrap();
    let s2 = rec.stream();
    assert_eq!(kind(rec.fill(s2, gb2.slice_mut(..).unwrap(), 1u8)), ErrorKind::OutOfBounds);
    let _ = gb;

    // Handles of another recording.
    let mut other = ctx.recorder();
    let foreign_stream = other.stream();
    let foreign_event = other.record(foreign_stream).unwrap();
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    assert_eq!(kind(rec.fill(foreign_stream, gx, 1u32)), ErrorKind::InvalidHandle);
    let mut rec = ctx.recorder();
    let s = rec.stream();
    assert_eq!(kind(rec.wait(s, foreign_event)), ErrorKind::InvalidHandle);
    let mut rec = ctx.recorder();
    let s = rec.stream();
    let mut third = ctx.recorder();
    let gz_other = third.bind(&z).unwrap();
    assert_eq!(kind(rec.copy(s, gz_other, gz_other)), ErrorKind::InvalidHandle);
    drop((other, third));

    // Launch arguments are checked when recorded: count and types.
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    let s = rec.stream();
    let config = LaunchConfig::linear(1, 64, 0);
    // SAFETY: refused before anything runs.
    let short = unsafe { rec.launch(s, &kernel, config, vec![gx.into(), 64u32.into()]) };
    assert_eq!(kind(short), ErrorKind::InvalidLaunch);
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    let s = rec.stream();
    // SAFETY: refused before anything runs (a float for a uint).
    let wrong = unsafe { rec.launch(s, &kernel, config, vec![gx.into(), 64u32.into(), 1.5f32.into(), 0u32.into()]) };
    assert_eq!(kind(wrong), ErrorKind::InvalidLaunch);
    // A launch shape beyond the device's limits.
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    let s = rec.stream();
    let huge = LaunchConfig::linear(1, ctx.info().max_threads_per_block + 1, 0);
    // SAFETY: refused before anything runs.
    let shaped = unsafe { rec.launch(s, &kernel, huge, vec![gx.into(), 64u32.into(), 1u32.into(), 0u32.into()]) };
    assert_eq!(kind(shaped), ErrorKind::InvalidLaunch);

    // Nothing was enqueued: the stream works as before.
    stream.fill(&mut x, 7u32).unwrap();
    assert_eq!(stream.download(&x).unwrap(), vec![7; 64]);
}

/// Changes between replays that do not fit the recording are refused:
/// another scalar type, an index past the arguments, a node of another
/// graph, a buffer of another recording; the graph replays unchanged.
pub fn graph_changes_that_do_not_fit_are_refused(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let mut x = stream.upload(&[1u32; 64]).unwrap();
    let mut w = stream.upload(&[1u32; 64]).unwrap();
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    let s = rec.stream();
    let node = record_affine(&mut rec, s, &kernel, gx, 2, 0).unwrap();
    let mut graph = rec.finish().unwrap();
    let mut rec2 = ctx.recorder();
    let gw = rec2.bind_mut(&mut w).unwrap();
    let s2 = rec2.stream();
    let other_node = record_affine(&mut rec2, s2, &kernel, gw, 1, 0).unwrap();
    let other_graph = rec2.finish().unwrap();
    // SAFETY: each change is refused before it is stored.
    unsafe {
        assert_eq!(kind(graph.set_arg(node, 2, 2.5f32)), ErrorKind::InvalidLaunch);
        assert_eq!(kind(graph.set_arg(node, 4, 1u32)), ErrorKind::InvalidLaunch);
        assert_eq!(kind(graph.set_arg(other_node, 2, 1u32)), ErrorKind::InvalidHandle);
        assert_eq!(kind(graph.set_arg(node, 0, gw)), ErrorKind::InvalidHandle);
        assert_eq!(kind(graph.set_arg(node, 0, GraphArg::from(7u32))), ErrorKind::InvalidLaunch);
    }
    assert_eq!(kind(graph.get(gw)), ErrorKind::InvalidHandle);
    graph.replay(&stream).unwrap();
    assert_eq!(stream.download(graph.get(gx).unwrap()).unwrap(), vec![2; 64]);
    drop(other_graph);
}

/// A replay on another device's stream is refused; so is a buffer of
/// another device.
pub fn graphs_of_another_device_are_refused(ctx: &Context) {
    let Ok(mut devices) = hetero::backend_devices(ctx.info().backend) else { return };
    let other = Context::new(devices.remove(0));
    let kernel = affine(ctx);
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let foreign = other.alloc::<u32>(64).unwrap();
    let mut rec = ctx.recorder();
    assert_eq!(kind(rec.bind(&foreign)), ErrorKind::DeviceMismatch);
    let mut rec = ctx.recorder();
    let gx = rec.bind_mut(&mut x).unwrap();
    let s = rec.stream();
    record_affine(&mut rec, s, &kernel, gx, 1, 1).unwrap();
    let mut graph = rec.finish().unwrap();
    assert_eq!(kind(graph.replay(&other.stream().unwrap())), ErrorKind::DeviceMismatch);
    let stream = ctx.stream().unwrap();
    graph.replay(&stream).unwrap();
    stream.synchronize().unwrap();
}

/// A fault inside a replay is sticky on the stream like any kernel fault,
/// and a replay on a faulted stream reports it. Host only: it faults on
/// demand.
pub fn a_fault_in_a_replay_is_sticky(ctx: &Context) {
    if ctx.info().backend != Backend::Host {
        return;
    }
    let kernel = host_saxpy(ctx, reads_past_the_end);
    let stream = ctx.stream().unwrap();
    let x = stream.upload(&[1.0f32; 64]).unwrap();
    let mut y = stream.alloc_zeros::<f32>(64).unwrap();
    let mut rec = ctx.recorder();
    let (gx, gy) = (rec.bind(&x).unwrap(), rec.bind_mut(&mut y).unwrap());
    let s = rec.stream();
    let config = LaunchConfig::covering([64, 1, 1], [kernel.block_size(BlockRequest::new(64)), 1, 1], 0);
    // SAFETY: the host implementation is bounds-checked; it faults.
    unsafe { rec.launch(s, &kernel, config, vec![1.0f32.into(), gx.into(), gy.into(), 64u32.into()]) }.unwrap();
    let mut graph = rec.finish().unwrap();
    graph.replay(&stream).unwrap();
    assert_eq!(stream.synchronize().unwrap_err().kind, ErrorKind::KernelFault);
    let again = graph.replay(&stream).and_then(|()| stream.synchronize());
    assert_eq!(kind(again), ErrorKind::KernelFault, "the fault is sticky");
}

/// A graph's copies move to other ranges, of other lengths, and its
/// launch shapes change between replays: one graph serves batches of
/// several sizes at several places (what pull's graph variants do).
pub fn copies_and_shapes_change_between_replays(ctx: &Context) {
    let kernel = affine(ctx);
    let stream = ctx.stream().unwrap();
    let start: Vec<u32> = (0..192).collect();
    let input = ctx.pinned_from_slice(&start).unwrap();
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let mut y = ctx.alloc::<u32>(64).unwrap();
    let mut out = ctx.pinned_from_slice(&[0u32; 192]).unwrap();
    let mut rec = ctx.recorder();
    let (gin, gx, gy, gout) = (
        rec.bind(&input).unwrap(),
        rec.bind_mut(&mut x).unwrap(),
        rec.bind_mut(&mut y).unwrap(),
        rec.bind_mut(&mut out).unwrap(),
    );
    let s = rec.stream();
    let copy_in = rec.copy(s, gin.slice(..64).unwrap(), gx).unwrap();
    let launch = record_affine(&mut rec, s, &kernel, gx, 2, 0).unwrap();
    let copy_out = rec.copy(s, gx, gout.slice(..64).unwrap()).unwrap();
    let mut graph = rec.finish().unwrap();
    let threads = kernel.block_size(BlockRequest::new(64));
    for k in 0..3 {
        let len = 64 - 16 * k;
        let (from, to) = (64 * k, 64 * k + len);
        graph.set_copy(copy_in, gin.slice(from..to).unwrap(), gx.slice_mut(..len).unwrap()).unwrap();
        graph.set_copy(copy_out, gx.slice(..len).unwrap(), gout.slice_mut(from..to).unwrap()).unwrap();
        graph.set_config(launch, LaunchConfig::covering([len as u32, 1, 1], [threads, 1, 1], 0)).unwrap();
        // SAFETY: affine_u32 touches x[0..len), within x.
        unsafe { graph.set_arg(launch, 1, len as u32) }.unwrap();
        graph.replay(&stream).unwrap();
    }
    // A copy keeps its direction and its two lengths equal.
    assert_eq!(kind(graph.set_copy(copy_in, gy, gx)), ErrorKind::InvalidHandle);
    assert_eq!(
        kind(graph.set_copy(copy_in, gin.slice(..8).unwrap(), gx.slice_mut(..9).unwrap())),
        ErrorKind::OutOfBounds
    );
    assert_eq!(
        kind(graph.set_copy(launch, gin.slice(..8).unwrap(), gx.slice_mut(..8).unwrap())),
        ErrorKind::InvalidHandle
    );
    let huge = LaunchConfig::linear(1, ctx.info().max_threads_per_block + 1, 0);
    assert_eq!(kind(graph.set_config(launch, huge)), ErrorKind::InvalidLaunch);
    graph.replay(&stream).unwrap();
    let got = graph.get(gout).unwrap().host_slice().unwrap().to_vec();
    let mut expect = vec![0u32; 192];
    for k in 0..3usize {
        let len = 64 - 16 * k;
        for i in 64 * k..64 * k + len {
            expect[i] = 2 * start[i];
        }
    }
    assert_eq!(got, expect);
}
