//! Completion without blocking a thread: futures and host callbacks, on
//! every backend, with a plain executor and with tokio.

use std::future::Future;
use std::pin::pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use hetero::Context;

/// Polls `future` once, with a waker that does nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut TaskContext::from_waker(futures::task::noop_waker_ref()))
}

/// A stream's future stays pending while a gate holds its work and
/// resolves (woken by the waker thread) once the work is done.
pub fn stream_future_resolves_after_its_work(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let input = ctx.pinned_from_slice(&[4u32; 1024]).unwrap();
    let mut out = ctx.alloc_pinned::<u32>(1024).unwrap();
    let mut device = ctx.alloc::<u32>(1024).unwrap();
    stream.wait(&gate).unwrap();
    stream.copy(&input, &mut device).unwrap();
    stream.copy(&device, &mut out).unwrap();
    let mut done = pin!(stream.synchronize_async());
    assert!(poll_once(done.as_mut()).is_pending(), "resolved while the gate holds the work");
    std::thread::sleep(Duration::from_millis(5));
    assert!(poll_once(done.as_mut()).is_pending(), "resolved while the gate holds the work");
    gate.complete().unwrap();
    futures::executor::block_on(done).unwrap();
    assert!(out.is_idle().unwrap(), "the future resolved before the work was done");
    assert!(out.host_slice().unwrap().iter().all(|&v| v == 4));
}

/// An event never recorded resolves at once; a recorded one once reached.
pub fn event_futures_resolve_when_reached(ctx: &Context) {
    let never = ctx.event().unwrap();
    assert!(matches!(poll_once(pin!(never.wait_async())), Poll::Ready(Ok(()))));
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    stream.wait(&gate).unwrap();
    let event = ctx.event().unwrap();
    stream.record(&event).unwrap();
    let mut reached = pin!(event.wait_async());
    assert!(poll_once(reached.as_mut()).is_pending());
    gate.complete().unwrap();
    futures::executor::block_on(reached).unwrap();
    assert!(event.query().unwrap());
}

/// Callbacks run after the work before them, in order, on another thread,
/// and do not hold up later work on the stream.
pub fn callbacks_run_in_order_after_the_work(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let mut device = ctx.alloc::<u32>(256).unwrap();
    stream.wait(&gate).unwrap();
    stream.fill(&mut device, 1).unwrap();
    let order = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = mpsc::channel();
    for k in 0..3 {
        let (order, tx) = (Arc::clone(&order), tx.clone());
        stream
            .then(move |result| {
                order.lock().unwrap().push((k, result.is_ok(), std::thread::current().id()));
                let _ = tx.send(());
            })
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(5));
    assert!(order.lock().unwrap().is_empty(), "a callback ran before the gate opened");
    gate.complete().unwrap();
    for _ in 0..3 {
        rx.recv_timeout(Duration::from_secs(20)).expect("a callback never ran");
    }
    let order = order.lock().unwrap();
    assert_eq!(order.iter().map(|o| (o.0, o.1)).collect::<Vec<_>>(), [(0, true), (1, true), (2, true)]);
    assert!(order.iter().all(|o| o.2 != std::thread::current().id()));
    // Later work was not held up by the callbacks.
    stream.fill(&mut device, 2).unwrap();
    assert_eq!(stream.download(&device).unwrap(), vec![2u32; 256]);
}

/// Dropping a pending future, the callback's stream and every handle of the
/// context neither hangs nor loses the callback, and the buffers the work
/// uses stay alive until it is done (the copy below still lands).
pub fn dropping_everything_with_callbacks_pending(ctx: &Context) {
    let backend = ctx.info().backend;
    let (tx, rx) = mpsc::channel();
    let opener = {
        let Ok(hetero::testing::Availability::Ready(ctx)) = hetero::testing::context(backend) else { return };
        let stream = ctx.stream().unwrap();
        let gate = ctx.user_event().unwrap();
        let input = ctx.pinned_from_slice(&[6u32; 1024]).unwrap();
        let mut device = ctx.alloc::<u32>(1024).unwrap();
        // Pinned memory first: on CUDA a page-locked allocation waits for gated streams.
        let mut check = ctx.alloc_pinned::<u32>(1024).unwrap();
        stream.wait(&gate).unwrap();
        stream.copy(&input, &mut device).unwrap();
        let pending = stream.synchronize_async();
        stream.copy(&device, &mut check).unwrap();
        stream
            .then(move |result| {
                let _ = tx.send(result.map(|()| check.host_slice().map(<[u32]>::to_vec)));
            })
            .unwrap();
        drop(pending);
        drop((input, device, stream));
        // The gate is opened later from another thread; the context goes now.
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            gate.complete().unwrap();
        })
    };
    let seen = rx.recv_timeout(Duration::from_secs(20)).expect("the callback never ran").unwrap().unwrap();
    assert!(seen.iter().all(|&v| v == 6));
    opener.join().unwrap();
}

/// Many tasks on a tokio runtime, each awaiting its own stream's work.
pub fn tokio_tasks_await_their_streams(ctx: &Context) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let ctx = ctx.clone();
    let results = runtime.block_on(async move {
        let tasks: Vec<_> = (0..8u32)
            .map(|k| {
                let ctx = ctx.clone();
                tokio::spawn(async move {
                    let stream = ctx.stream().unwrap();
                    let mut x = stream.alloc::<u32>(4096).unwrap();
                    stream.fill(&mut x, k).unwrap();
                    let mut out = ctx.alloc_pinned::<u32>(4096).unwrap();
                    stream.copy(&x, &mut out).unwrap();
                    stream.synchronize_async().await.unwrap();
                    out.host_slice().unwrap().iter().all(|&v| v == k)
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.push(t.await.unwrap());
        }
        all
    });
    assert_eq!(results, vec![true; 8]);
}
