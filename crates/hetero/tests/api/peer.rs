//! Work across two devices of one backend: peer copies, waits on another
//! device's events, and hazard tracking that spans both. Each body gets two
//! contexts (`hetero::testing::context_pair_or_skip`): two devices where
//! the backend has them, else two objects of one device.

use std::time::Duration;

use hetero::{BlockRequest, Context, ErrorKind, LaunchConfig, PeerRoute};

use super::semantics::{affine, launch_affine};
use super::user_kernels::{host_saxpy, launch_saxpy, reads_past_the_end};

/// Runs `body` on another thread and fails if it has not returned in time.
fn within<T: Send + 'static>(seconds: u64, what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(body());
    });
    rx.recv_timeout(Duration::from_secs(seconds)).unwrap_or_else(|_| panic!("{what} did not return within {seconds} s"))
}

/// Ranges at offsets, copied both ways, on a stream of either device.
pub fn peer_copies_of_ranges_both_ways(a: &Context, b: &Context) {
    let route = a.peer_route(b).unwrap();
    assert_eq!(route, b.peer_route(a).unwrap(), "one route each way");
    let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
    let data: Vec<u32> = (0..4096).collect();
    let on_a = sa.upload(&data).unwrap();
    let mut on_b = sb.alloc_zeros::<u32>(4096).unwrap();
    // Pull on B's stream: A[100..1100) to B[2000..3000).
    let taken = sb.copy_peer(on_a.slice(100..1100).unwrap(), on_b.slice_mut(2000..3000).unwrap()).unwrap();
    assert_eq!(taken, route, "the copy reports the route peer_route names");
    // Push on A's stream: A[0..64) to B[4000..4064).
    sa.copy_peer(on_a.slice(0..64).unwrap(), on_b.slice_mut(4000..4064).unwrap()).unwrap();
    let got = sb.download(&on_b).unwrap();
    for (i, &v) in got.iter().enumerate() {
        let want = match i {
            2000..3000 => (i - 1900) as u32,
            4000..4064 => (i - 4000) as u32,
            _ => 0,
        };
        assert_eq!(v, want, "element {i} after copies A -> B");
    }
    // And back: B[2000..2100) to A[3000..3100), on B's stream, then A's.
    let mut back = sa.alloc_zeros::<u32>(4096).unwrap();
    sb.copy_peer(on_b.slice(2000..2100).unwrap(), back.slice_mut(3000..3100).unwrap()).unwrap();
    sa.copy_peer(on_b.slice(4000..4010).unwrap(), back.slice_mut(10..20).unwrap()).unwrap();
    let got = sa.download(&back).unwrap();
    assert_eq!(&got[3000..3100], &data[100..200]);
    assert_eq!(&got[10..20], &data[0..10]);
    assert!(got[..10].iter().chain(&got[20..3000]).chain(&got[3100..]).all(|&v| v == 0));
    // Lengths must agree; an empty copy is a no-op that still names the route.
    let err = sb.copy_peer(on_a.slice(0..10).unwrap(), on_b.slice_mut(0..11).unwrap()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::OutOfBounds, "{err}");
    assert_eq!(sb.copy_peer(on_a.slice(5..5).unwrap(), on_b.slice_mut(7..7).unwrap()).unwrap(), route);
}

/// A stream of B waits for an event recorded on A, on the device.
pub fn cross_device_event_waits(a: &Context, b: &Context) {
    let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
    let gate = a.user_event().unwrap();
    let event = a.event().unwrap();
    sa.wait(&gate).unwrap();
    sa.record(&event).unwrap();
    sb.wait(&event).unwrap();
    let mut x = sb.alloc_zeros::<u32>(256).unwrap();
    sb.fill(&mut x, 7).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert!(!sb.query().unwrap(), "B's stream waits for A's event while A's gate is held");
    gate.complete().unwrap();
    assert!(sb.download(&x).unwrap().iter().all(|&v| v == 7));
    assert!(event.query().unwrap());
    // A gate of another device is refused: it is waited for through an
    // event recorded after it.
    let other_gate = a.user_event().unwrap();
    let err = sb.wait(&other_gate).unwrap_err();
    assert_eq!(err.kind, ErrorKind::InvalidHandle, "{err}");
}

/// A gate held on A delays B's copy of A's data and B's kernel on it; the
/// result is A's data after A's kernel.
pub fn a_gate_on_one_device_holds_the_others_dependent_work(a: &Context, b: &Context) {
    let (ka, kb) = (affine(a), affine(b));
    let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
    let mut src = sa.upload(&(0..1024).collect::<Vec<u32>>()).unwrap();
    let mut dst = sb.alloc_zeros::<u32>(1024).unwrap();
    let gate = a.user_event().unwrap();
    sa.wait(&gate).unwrap();
    launch_affine(&sa, &ka, &mut src, 2, 1);
    sb.copy_peer(&src, &mut dst).unwrap();
    launch_affine(&sb, &kb, &mut dst, 3, 0);
    std::thread::sleep(Duration::from_millis(50));
    assert!(!sb.query().unwrap(), "B's copy and kernel wait for A's gated write");
    gate.complete().unwrap();
    let got = sb.download(&dst).unwrap();
    for (i, &v) in got.iter().enumerate() {
        assert_eq!(v, 3 * (2 * i as u32 + 1), "element {i}");
    }
    // A's next write waits for B's read of src (write-after-read across devices).
    launch_affine(&sa, &ka, &mut src, 0, 5);
    sb.copy_peer(&src, &mut dst).unwrap();
    assert!(sb.download(&dst).unwrap().iter().all(|&v| v == 5));
}

/// Dropping buffers, streams and contexts of either device while peer
/// work is held behind a gate neither hangs nor frees memory the work
/// still uses: the result arrives intact once the gate opens.
pub fn dropping_a_device_with_peer_work_queued(a: &Context, b: &Context) {
    let (a, b, backend) = (a.clone(), b.clone(), a.info().backend);
    within(30, "dropping objects of two devices with peer work queued", move || {
        let sa = a.stream().unwrap();
        let sb = b.stream().unwrap();
        let gate = a.user_event().unwrap();
        let src = sa.upload(&[9u32; 4096]).unwrap();
        let mut dst = sb.alloc::<u32>(4096).unwrap();
        let mut out = b.alloc_pinned::<u32>(4096).unwrap();
        sa.wait(&gate).unwrap();
        let mut staged = sa.alloc::<u32>(4096).unwrap();
        sa.copy(&src, &mut staged).unwrap();
        sb.copy_peer(&staged, &mut dst).unwrap();
        sb.copy(&dst, &mut out).unwrap();
        // Everything of A but the gate goes, then B's stream and buffer.
        drop((src, staged, sa, a));
        drop((dst, sb));
        std::thread::sleep(Duration::from_millis(20));
        gate.complete().unwrap();
        assert!(out.host_slice().unwrap().iter().all(|&v| v == 9), "the held copy read memory freed early");
        drop(gate);

        // B's whole context goes while B's stream still waits on A's gate.
        let (a, b) = hetero::testing::context_pair_or_skip(backend).unwrap().unwrap();
        let sa = a.stream().unwrap();
        let sb = b.stream().unwrap();
        let gate = a.user_event().unwrap();
        let mut src = sa.upload(&[1u32; 1024]).unwrap();
        let mut dst = sb.alloc::<u32>(1024).unwrap();
        sa.wait(&gate).unwrap();
        sa.fill(&mut src, 3).unwrap();
        sb.copy_peer(&src, &mut dst).unwrap();
        drop((dst, sb, b));
        gate.complete().unwrap();
        assert!(sa.download(&src).unwrap().iter().all(|&v| v == 3));
    });
}

/// A buffer of A passed to B's kernel, fill or copy is refused: only a
/// peer copy joins two devices.
pub fn a_buffer_of_one_device_is_refused_on_the_other(a: &Context, b: &Context) {
    let kb = affine(b);
    let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
    let mut on_a = sa.alloc_zeros::<u32>(64).unwrap();
    let mut on_b = sb.alloc_zeros::<u32>(64).unwrap();
    let xs = on_a.slice_mut(..).unwrap();
    let config = LaunchConfig::covering([64, 1, 1], [kb.block_size(BlockRequest::new(64)), 1, 1], 0);
    // SAFETY: refused before anything runs; affine_u32 would touch 64 elements.
    let err = unsafe { sb.launch(&kb, config, &[(&xs).into(), 64u32.into(), 1u32.into(), 1u32.into()]) }.unwrap_err();
    assert_eq!(err.kind, ErrorKind::DeviceMismatch, "{err}");
    let err = sb.fill(&mut on_a, 1).unwrap_err();
    assert_eq!(err.kind, ErrorKind::DeviceMismatch, "{err}");
    let err = sb.copy(&on_a, &mut on_b).unwrap_err();
    assert_eq!(err.kind, ErrorKind::DeviceMismatch, "{err}");
    // A peer copy on a third device's stream (neither side's) is refused too.
    if let Ok(hetero::testing::Availability::Ready(c)) = hetero::testing::context(a.info().backend) {
        let sc = c.stream().unwrap();
        let err = sc.copy_peer(&on_a, &mut on_b).unwrap_err();
        assert_eq!(err.kind, ErrorKind::DeviceMismatch, "{err}");
    }
    assert!(sb.download(&on_b).unwrap().iter().all(|&v| v == 0), "nothing ran");
}

/// A fault on A's stream reaches B's stream that waits on it (through an
/// event, or through a peer copy of what A wrote). Host only: it faults on
/// demand.
pub fn a_fault_on_one_device_reaches_the_other(a: &Context, b: &Context) {
    if a.info().backend != hetero::Backend::Host {
        return;
    }
    let kernel = host_saxpy(a, reads_past_the_end);
    let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
    let x = sa.upload(&[1.0f32; 64]).unwrap();
    let mut y = sa.alloc_zeros::<f32>(64).unwrap();
    launch_saxpy(&sa, &kernel, &x, &mut y);
    let mut on_b = sb.alloc_zeros::<f32>(64).unwrap();
    sb.copy_peer(&y, &mut on_b).unwrap();
    let err = sb.synchronize().unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelFault, "{err}");
    let sb2 = b.stream().unwrap();
    let event = a.event().unwrap();
    sa.record(&event).unwrap();
    sb2.wait(&event).unwrap();
    assert_eq!(sb2.synchronize().unwrap_err().kind, ErrorKind::KernelFault);
}

/// The route both ways agrees with what a copy reports (used by the
/// example and the bench to label their figures).
pub fn routes_are_named(a: &Context, b: &Context) {
    let route = a.peer_route(b).unwrap();
    assert!(matches!(route, PeerRoute::Direct | PeerRoute::Staged));
    assert_eq!(a.peer_route(a).unwrap(), PeerRoute::Direct, "a device to itself is direct");
    assert!(!route.name().is_empty());
}

/// Two threads copy between the same two buffers in opposite roles, each
/// on a stream of its own device, so that each one's near buffer is the
/// other's far buffer. They deadlocked: a copy kept its near tracker locked
/// while it took the far one, which the other thread held as its near one.
/// No tracker's lock is held while another's is taken, but in one order.
pub fn opposite_peer_copies_do_not_deadlock(a: &Context, b: &Context) {
    const N: usize = 4096;
    let rounds = if a.info().backend == hetero::Backend::Host { 4000 } else { 400 };
    let (a, b) = (a.clone(), b.clone());
    within(120, "opposite peer copies from two threads", move || {
        let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
        let mut y_a = sa.alloc_zeros::<u32>(N).unwrap();
        let x_b = sb.upload(&(0..N as u32).collect::<Vec<_>>()).unwrap();
        {
            let (mut y1, mut y2) = y_a.slice_mut(..).unwrap().split_at_mut(N / 2).unwrap();
            let (x1, x2) = x_b.slice(..).unwrap().split_at(N / 2).unwrap();
            std::thread::scope(|s| {
                s.spawn(|| {
                    for _ in 0..rounds {
                        sa.copy_peer(x1, y1.reborrow()).unwrap();
                    }
                });
                s.spawn(|| {
                    for _ in 0..rounds {
                        sb.copy_peer(x2, y2.reborrow()).unwrap();
                    }
                });
            });
        }
        let got = sa.download(&y_a).unwrap();
        assert!(got.iter().enumerate().all(|(i, &v)| v == i as u32), "both halves arrived");
    });
}

/// A peer copy held behind a gate on one stream holds nothing else: a copy
/// between other buffers on another stream of the same device completes.
/// On OpenCL every staged copy's far half went through one in-order queue
/// per device, so the second copy waited for the gate.
pub fn a_gated_peer_copy_holds_no_other_stream(a: &Context, b: &Context) {
    let (a, b) = (a.clone(), b.clone());
    within(30, "a peer copy on a stream beside a gated one", move || {
        let (a1, a2) = (a.stream().unwrap(), a.stream().unwrap());
        let sb = b.stream().unwrap();
        for pull in [true, false] {
            let gate = a.user_event().unwrap();
            let (x_b, u_b) = (sb.upload(&[1u32; 1024]).unwrap(), sb.upload(&[2u32; 1024]).unwrap());
            let (mut y_a, mut v_a) = (a1.alloc_zeros::<u32>(1024).unwrap(), a2.alloc_zeros::<u32>(1024).unwrap());
            let (mut x_b, mut u_b) = (x_b, u_b);
            a1.wait(&gate).unwrap();
            if pull {
                a1.copy_peer(&x_b, &mut y_a).unwrap();
                a2.copy_peer(&u_b, &mut v_a).unwrap();
            } else {
                a1.copy_peer(&y_a, &mut x_b).unwrap();
                a2.copy_peer(&v_a, &mut u_b).unwrap();
            }
            let started = std::time::Instant::now();
            a2.synchronize().unwrap();
            assert!(!a1.query().unwrap(), "the gated stream is still held");
            gate.complete().unwrap();
            a1.synchronize().unwrap();
            let (first, second) = if pull {
                (a1.download(&y_a).unwrap(), a2.download(&v_a).unwrap())
            } else {
                (sb.download(&x_b).unwrap(), sb.download(&u_b).unwrap())
            };
            let want = if pull { (1, 2) } else { (0, 0) };
            assert!(first.iter().all(|&v| v == want.0) && second.iter().all(|&v| v == want.1), "pull {pull}");
            assert!(started.elapsed() < Duration::from_secs(30));
        }
    });
}

/// A wait on another device's event ends when that event completes, also
/// where later work of the event's stream is held behind a closed gate and
/// was bridged first. OpenCL's bridges by thread had one waiting thread per
/// source queue, taking bridges in the order they were made: the wait
/// below was made after the held copy's, so it waited for the gate too,
/// and the host's synchronise before opening that gate never returned.
pub fn a_wait_on_a_peer_event_ends_with_its_event(a: &Context, b: &Context) {
    let (a, b) = (a.clone(), b.clone());
    within(30, "a wait on an event recorded before a held copy", move || {
        let (qa, sb) = (a.stream().unwrap(), b.stream().unwrap());
        let (first, second) = (a.user_event().unwrap(), a.user_event().unwrap());
        let x_a = qa.upload(&[7u32; 4096]).unwrap();
        let mut y_b = sb.alloc_zeros::<u32>(4096).unwrap();
        sb.synchronize().unwrap();
        qa.wait(&first).unwrap();
        let recorded = a.event().unwrap();
        qa.record(&recorded).unwrap();
        qa.wait(&second).unwrap();
        qa.copy_peer(&x_a, &mut y_b).unwrap();
        let waiter = b.stream().unwrap();
        waiter.wait(&recorded).unwrap();
        first.complete().unwrap();
        waiter.synchronize().unwrap();
        assert!(!qa.query().unwrap(), "the second gate still holds the copy");
        second.complete().unwrap();
        assert!(sb.download(&y_b).unwrap().iter().all(|&v| v == 7), "the copy ran once the gate opened");
    });
}

/// A far buffer dropped while a peer copy of it is held behind a gate is
/// neither freed nor reused before the copy, whichever side it is on: its
/// tracker's mark must follow the copy. With the far buffer's tracking
/// left out it fails on PoCL: the caching allocator gives the block to the
/// next allocation of its size at once, and the held copy writes into it
/// or reads what that allocation wrote. It guards changes to how far
/// buffers are tracked (a design that turned the near device's mark into a
/// far one only when the buffer went failed it with the turn left out).
pub fn a_far_buffer_dropped_under_a_held_copy_is_not_reused(a: &Context, b: &Context) {
    let (a, b) = (a.clone(), b.clone());
    within(30, "far buffers dropped under held peer copies", move || {
        for far_written in [true, false] {
            // The copy runs on the near device's stream, behind its gate.
            let (near, far) = if far_written { (&a, &b) } else { (&b, &a) };
            let (on_near, on_far) = (near.stream().unwrap(), far.stream().unwrap());
            let gate = near.user_event().unwrap();
            let (near_fill, far_fill) = if far_written { (7u32, 0) } else { (0, 7) };
            let mut near_buf = on_near.upload(&[near_fill; 4096]).unwrap();
            let mut far_buf = on_far.upload(&[far_fill; 4096]).unwrap();
            on_near.synchronize().unwrap();
            on_far.synchronize().unwrap();
            on_near.wait(&gate).unwrap();
            let copied = if far_written {
                on_near.copy_peer(&near_buf, &mut far_buf)
            } else {
                on_near.copy_peer(&far_buf, &mut near_buf)
            };
            copied.unwrap();
            drop(far_buf);
            let next = on_far.upload(&[1u32; 4096]).unwrap();
            on_far.synchronize().unwrap();
            gate.complete().unwrap();
            on_near.synchronize().unwrap();
            let what = if far_written { "wrote into" } else { "read" };
            assert!(on_far.download(&next).unwrap().iter().all(|&v| v == 1), "the held copy {what} a reused block");
            assert!(
                on_near.download(&near_buf).unwrap().iter().all(|&v| v == 7),
                "the held copy {what} a reused block"
            );
        }
    });
}

/// A far buffer that only a faulted stream read stays usable on its own
/// device. When a bridge stream of the far device marked the far read,
/// that mark took on the near stream's fault: a later write of the far
/// buffer on a healthy far stream waited for it and failed with that fault
/// (4 to 20 times in 20, by load), and the buffer could never be read
/// again. The far tracker now holds the near read's own mark, which a far
/// write waits for only while it may run. Host only: it faults on demand.
pub fn a_failed_far_read_leaves_the_far_buffer_usable(a: &Context, b: &Context) {
    if a.info().backend != hetero::Backend::Host {
        return;
    }
    let kernel = host_saxpy(a, reads_past_the_end);
    for round in 0..20 {
        let (sa, sb) = (a.stream().unwrap(), b.stream().unwrap());
        let mut far_src = sb.upload(&[5u32; 256]).unwrap();
        sb.synchronize().unwrap();
        let x = sa.upload(&[1.0f32; 64]).unwrap();
        let mut y = sa.alloc_zeros::<f32>(64).unwrap();
        let mut dst = sa.alloc_zeros::<u32>(256).unwrap();
        launch_saxpy(&sa, &kernel, &x, &mut y);
        sa.copy_peer(&far_src, &mut dst).unwrap();
        assert_eq!(sa.synchronize().unwrap_err().kind, ErrorKind::KernelFault, "round {round}");
        sb.fill(&mut far_src, 1).unwrap_or_else(|e| panic!("round {round}: the far fill failed: {e}"));
        let got = sb.download(&far_src).unwrap_or_else(|e| panic!("round {round}: the far read failed: {e}"));
        assert!(got.iter().all(|&v| v == 1), "round {round}");
    }
}

/// Copies large enough to move in two halves (OpenCL across contexts
/// stages them through pinned memory), many in flight at once on three
/// streams of one device, pulled and pushed, one stream held by a gate
/// meanwhile: each copy's staging bytes are its own until its last write
/// completes (defect guarded: a pooled staging buffer taken again while a
/// copy still used it hands one copy's bytes to another). The copies
/// need 96 MiB of staging, past the pool's budget, so later copies wait
/// for busy buffers, some held by the gate: with that wait unbounded the
/// host never returned from `copy_peer` to open it.
pub fn large_peer_copies_in_flight_keep_their_own_bytes(a: &Context, b: &Context) {
    let (a, b) = (a.clone(), b.clone());
    within(60, "large peer copies in flight", move || {
        // Over 1 MiB twice, and not a multiple of 64 bytes.
        let n = (3 << 20) / 4 + 7;
        let copies = 12;
        let data = |seed: usize| -> Vec<u32> {
            (0..n as u32).map(|i| i.wrapping_mul(2_654_435_761) ^ (seed as u32).wrapping_mul(0x9e37_79b9)).collect()
        };
        let streams = [a.stream().unwrap(), a.stream().unwrap(), a.stream().unwrap()];
        let sb = b.stream().unwrap();
        let sources: Vec<_> = (0..copies).map(|s| sb.upload(&data(s)).unwrap()).collect();
        let mut pulled: Vec<_> = (0..copies).map(|_| streams[1].alloc_zeros::<u32>(n).unwrap()).collect();
        let mut pushed: Vec<_> = (0..copies).map(|_| sb.alloc_zeros::<u32>(n).unwrap()).collect();
        sb.synchronize().unwrap();
        streams[1].synchronize().unwrap();
        let gate = a.user_event().unwrap();
        streams[0].wait(&gate).unwrap();
        for (i, (src, dst)) in sources.iter().zip(pulled.iter_mut()).enumerate() {
            streams[i % 3].copy_peer(src, dst).unwrap();
        }
        for (i, (src, dst)) in pulled.iter().zip(pushed.iter_mut()).enumerate() {
            streams[i % 3].copy_peer(src, dst).unwrap();
        }
        for i in (0..copies).filter(|i| i % 3 != 0) {
            assert!(sb.download(&pushed[i]).unwrap() == data(i), "copy {i} there and back");
        }
        gate.complete().unwrap();
        for i in 0..copies {
            assert!(streams[1].download(&pulled[i]).unwrap() == data(i), "pulled copy {i}");
            assert!(sb.download(&pushed[i]).unwrap() == data(i), "copy {i} there and back");
        }
    });
}
