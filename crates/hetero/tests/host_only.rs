//! Behaviour specific to the host backend.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::backend::host::HostDevice;
use hetero::{Context, ErrorKind, LaunchConfig};

/// A kernel that reads past its buffer faults; the stream then reports the
/// fault from every synchronising call (sticky, like a GPU's), and other
/// streams keep working.
#[test]
fn kernel_fault_is_sticky_on_its_stream() {
    let ctx = Context::new(HostDevice::new());
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<u32>(16).unwrap();
    let xs = x.slice_mut(..).unwrap();
    // SAFETY: deliberately breaks the contract (n = 32 > 16 elements); the
    // host backend bounds-checks every access, so this is a fault, not UB.
    unsafe {
        stream.launch(&kernel, LaunchConfig::linear(1, 32, 0), &[(&xs).into(), 32u32.into(), 1u32.into(), 1u32.into()])
    }
    .unwrap();
    let err = stream.synchronize().unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelFault);
    assert!(err.message.contains("affine_u32") && err.message.contains("out-of-bounds"), "{err}");
    assert_eq!(stream.synchronize().unwrap_err().kind, ErrorKind::KernelFault);
    let other = ctx.stream().unwrap();
    let mut y = ctx.alloc::<u32>(4).unwrap();
    other.fill(&mut y, 3).unwrap();
    let mut out = [0u32; 4];
    other.copy_to_host(&y, &mut out).unwrap();
    assert_eq!(out, [3; 4]);
}

/// Too little dynamic shared memory for a kernel is a fault naming both numbers.
#[test]
fn short_shared_memory_is_a_fault() {
    let ctx = Context::new(HostDevice::new());
    let kernel = ctx.build_module(hetero::kernels::REDUCE).unwrap().kernel("reduce_partial").unwrap();
    let stream = ctx.stream().unwrap();
    let input = ctx.alloc::<f32>(64).unwrap();
    let mut out = ctx.alloc::<f32>(1).unwrap();
    let (i, o) = (input.slice(..).unwrap(), out.slice_mut(..).unwrap());
    // SAFETY: in bounds; shared memory is short on purpose (64 threads need 256 bytes).
    unsafe { stream.launch(&kernel, LaunchConfig::linear(1, 64, 16), &[(&i).into(), (&o).into(), 64u32.into()]) }
        .unwrap();
    let err = stream.synchronize().unwrap_err();
    assert!(err.message.contains("256") && err.message.contains("16"), "{err}");
}

/// Static dispatch: the typed layer works over a concrete backend type too.
#[test]
fn typed_layer_over_a_concrete_device() {
    let ctx: Context<HostDevice> = Context::new(HostDevice::new());
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<f32>(8).unwrap();
    stream.fill(&mut x, 2.5f32).unwrap();
    let mut out = [0f32; 8];
    stream.copy_to_host(&x, &mut out).unwrap();
    assert_eq!(out, [2.5; 8]);
}

/// A stream that waits on an event of a faulted stream fails too, and a
/// read behind that wait reports the fault instead of stale data (W1: the
/// read on the waiting stream returned `Ok` with the old contents).
#[test]
fn fault_travels_through_event_waits() {
    let ctx = Context::new(HostDevice::new());
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let (a, b) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let mut x = ctx.alloc::<u32>(16).unwrap();
    b.fill(&mut x, 1).unwrap();
    b.synchronize().unwrap();
    {
        let xs = x.slice_mut(..).unwrap();
        // SAFETY: deliberately breaks the contract (n = 32 > 16 elements); the
        // host backend bounds-checks every access, so this is a fault, not UB.
        unsafe {
            a.launch(&kernel, LaunchConfig::linear(1, 32, 0), &[(&xs).into(), 32u32.into(), 2u32.into(), 0u32.into()])
        }
        .unwrap();
    }
    let done = ctx.event().unwrap();
    a.record(&done).unwrap();
    b.wait(&done).unwrap();
    let mut out = [0u32; 16];
    let err = b.copy_to_host(&x, &mut out).unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelFault, "{err}");
    assert_eq!(b.synchronize().unwrap_err().kind, ErrorKind::KernelFault, "the waiting stream's failure is sticky");
    assert_eq!(done.synchronize().unwrap_err().kind, ErrorKind::KernelFault);
}

/// Awaiting work that faulted returns the fault: a stream's future and a
/// callback both get the kernel's error, and a future of the other stream
/// that waited on it fails too.
#[test]
fn awaiting_faulted_work_returns_the_fault() {
    let ctx = Context::new(HostDevice::new());
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let (a, b) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let mut x = ctx.alloc::<u32>(16).unwrap();
    {
        let xs = x.slice_mut(..).unwrap();
        // SAFETY: deliberately breaks the contract (n = 32 > 16 elements); the
        // host backend bounds-checks every access, so this is a fault, not UB.
        unsafe {
            a.launch(&kernel, LaunchConfig::linear(1, 32, 0), &[(&xs).into(), 32u32.into(), 1u32.into(), 1u32.into()])
        }
        .unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    a.then(move |r| {
        let _ = tx.send(r.map_err(|e| e.kind));
    })
    .unwrap();
    let err = futures::executor::block_on(a.synchronize_async()).unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelFault, "{err}");
    assert_eq!(rx.recv_timeout(std::time::Duration::from_secs(20)).unwrap(), Err(ErrorKind::KernelFault));
    let done = ctx.event().unwrap();
    a.record(&done).unwrap();
    assert_eq!(futures::executor::block_on(done.wait_async()).unwrap_err().kind, ErrorKind::KernelFault);
    b.wait(&done).unwrap();
    assert_eq!(futures::executor::block_on(b.synchronize_async()).unwrap_err().kind, ErrorKind::KernelFault);
}

/// Guards against holding a buffer's tracker across the enqueue: threads
/// reading one shared buffer (a framework's shared inputs) took turns for
/// each other's driver calls, so a blocking read of it stalled every other
/// reader. Here a blocking copy out of `x` waits behind a gate on one
/// stream while another thread's copy out of `x` on another stream must
/// go through; the gate opens either way, so a failure cannot hang.
#[test]
fn readers_of_one_buffer_do_not_wait_for_each_others_enqueues() {
    use std::sync::mpsc;
    use std::time::Duration;

    let ctx = Context::new(HostDevice::new());
    let (gated, free) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let gate = ctx.user_event().unwrap();
    let x = free.upload(&[7u32; 256]).unwrap();
    let mut y = ctx.alloc::<u32>(256).unwrap();
    gated.wait(&gate).unwrap();
    let (done, finished) = mpsc::channel();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut out = vec![0u32; 256];
            // Blocks until the gate opens.
            gated.copy_to_host(&x, &mut out).unwrap();
            assert!(out.iter().all(|&v| v == 7));
        });
        // Give the blocking copy time to start.
        std::thread::sleep(Duration::from_millis(100));
        let (free, x, y) = (&free, &x, &mut y);
        scope.spawn(move || {
            free.copy(x, y).unwrap();
            free.synchronize().unwrap();
            let _ = done.send(());
        });
        let passed = finished.recv_timeout(Duration::from_secs(10)).is_ok();
        gate.complete().unwrap();
        assert!(passed, "a copy out of a shared buffer waited for another thread's blocked read of it");
    });
    assert_eq!(free.download(&y).unwrap(), vec![7u32; 256]);
}

/// The host backend's deterministic sums are the same bits on machines of
/// 2 and 32 cores (grids sized from `compute_units` change the reduction
/// tree of the default sums; a 2-core and a 32-core machine gave different
/// reduce outputs before the deterministic mode).
#[test]
fn deterministic_sums_do_not_depend_on_the_core_count() {
    use hetero::algorithms::{Algorithms, ReduceOp, ScanKind};
    let x: Vec<f32> = (0..300_001u64).map(|i| ((i * 7919 % 10007) as f32 - 5003.0) * 1.7e-3).collect();
    let offsets: Vec<u32> = (0..=300u32).map(|s| s * 1000).collect();
    let run = |units: u32| {
        let ctx = Context::new(HostDevice::new().with_compute_units(units));
        let algorithms = Algorithms::new(&ctx).deterministic();
        let stream = ctx.stream().unwrap();
        let input = stream.upload(&x).unwrap();
        let sum = algorithms.reduce_to_host(&stream, &input, ReduceOp::Sum).unwrap();
        let mut scanned = stream.alloc::<f32>(x.len()).unwrap();
        algorithms.scan(&stream, &input, &mut scanned, ScanKind::Inclusive).unwrap();
        let mut segments = stream.alloc::<f32>(300).unwrap();
        algorithms.segmented_reduce(&stream, &input, &offsets, ReduceOp::Sum, &mut segments).unwrap();
        let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
        (sum.to_bits(), bits(stream.download(&scanned).unwrap()), bits(stream.download(&segments).unwrap()))
    };
    assert_eq!(run(2), run(32));
    assert_eq!(run(2).0, hetero::algorithms::pairwise::sum(&x).to_bits());
}
