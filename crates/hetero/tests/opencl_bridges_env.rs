//! `HETERO_OPENCL_BRIDGE` chooses how a wait across OpenCL contexts (a
//! staged peer copy's halves, a wait on another context's event) learns
//! that its source completed: hetero's one thread polling every source
//! (`poll`), a thread blocked on each (`thread`) or a completion callback
//! (`callback`); `auto`, the default, polls except on rusticl. A value
//! that is not understood makes opening the devices fail with a message
//! naming it. One test per process: it sets the variables before any
//! device is opened. With one
//! OpenCL device it checks the refusal only (CI also runs it with
//! `POCL_DEVICES="pthread pthread"`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod opencl_env;

use hetero::{Backend, Context, PeerRoute};

const ENV: &str = "HETERO_OPENCL_BRIDGE";

/// Copies back and forth between the first two OpenCL devices, in a
/// context each, with a wait on the other device's event between, on
/// several streams at once; `false` with fewer than two devices.
fn copies_across_contexts() -> bool {
    let mut contexts = hetero::backend_devices(Backend::OpenCl).unwrap().into_iter().map(Context::new);
    let (Some(a), Some(b)) = (contexts.next(), contexts.next()) else { return false };
    assert_eq!(a.peer_route(&b).unwrap(), PeerRoute::Staged, "a context each stages peer copies");
    let data: Vec<u32> = (0..300_000u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    let lanes: Vec<_> = (0..3)
        .map(|_| {
            let (on_a, on_b) = (a.stream().unwrap(), b.stream().unwrap());
            let x = on_a.upload(&data).unwrap();
            let mut y = on_b.alloc::<u32>(data.len()).unwrap();
            on_b.copy_peer(&x, &mut y).unwrap();
            let done = b.event().unwrap();
            on_b.record(&done).unwrap();
            on_a.wait(&done).unwrap();
            let mut back = on_a.alloc::<u32>(data.len()).unwrap();
            on_a.copy_peer(&y, &mut back).unwrap();
            (on_a, back)
        })
        .collect();
    for (on_a, back) in &lanes {
        assert_eq!(on_a.download(back).unwrap(), data);
    }
    // More bridges pending at once than the threads that wait for them
    // (64): copies from a stream held behind a gate, each copy's write
    // bridged to its read; those past the threads go by callback.
    let (on_a, on_b) = (a.stream().unwrap(), b.stream().unwrap());
    let sources: Vec<_> = (0..100u32).map(|i| on_a.upload(&[i; 1024]).unwrap()).collect();
    let mut targets: Vec<_> = (0..100).map(|_| on_b.alloc_zeros::<u32>(1024).unwrap()).collect();
    on_b.synchronize().unwrap();
    let gate = a.user_event().unwrap();
    on_a.wait(&gate).unwrap();
    for (x, y) in sources.iter().zip(&mut targets) {
        on_a.copy_peer(x, y).unwrap();
    }
    gate.complete().unwrap();
    on_a.synchronize().unwrap();
    for (i, y) in (0u32..).zip(&targets) {
        assert!(on_b.download(y).unwrap().iter().all(|&v| v == i), "copy {i}");
    }
    true
}

#[test]
fn bridges_follow_the_environment() {
    // SAFETY: this test binary has one test, and no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var("HETERO_OPENCL_CONTEXT", "device") };
    if !opencl_env::refuses(ENV, "spin", &["\"spin\"", "`poll`", "`thread`"]) {
        return;
    }
    for value in ["poll", "thread", "callback", "auto"] {
        // SAFETY: as above.
        unsafe { std::env::set_var(ENV, value) };
        // A bridge that never completes would hang the copies: fail instead.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(copies_across_contexts()));
        let copied = finished
            .recv_timeout(std::time::Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the copies with {ENV}={value} did not finish within 60 s"));
        if !copied {
            println!("skipped with {ENV}={value}: fewer than two OpenCL devices");
        }
    }
}
