//! Streams of the host backend: one worker thread per stream runs its
//! operations in order, so enqueueing returns before the work is done.
//!
//! Like a GPU stream, an operation that fails makes the stream *sticky*: its
//! later operations are skipped and every synchronising call returns the
//! first error.

use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;

use super::error::error;
use super::event::HostEvent;
use crate::error::{Error, ErrorKind, Result};

/// One unit of queued work.
pub(super) type Op = Box<dyn FnOnce() -> Result<()> + Send>;

/// What a worker does with a queue entry.
enum Work {
    /// Run the operation (skipped once the stream has failed).
    Run(Op),
    /// Mark an event's recording as reached. On a failed stream the event
    /// is still released, carrying the error, so no waiter hangs.
    Signal(Arc<HostEvent>, u64),
}

#[derive(Default)]
struct Progress {
    enqueued: u64,
    completed: u64,
    error: Option<Error>,
}

#[derive(Default)]
struct Shared {
    progress: Mutex<Progress>,
    done: Condvar,
}

/// An in-order queue served by its own thread.
pub(super) struct HostStream {
    sender: Option<mpsc::Sender<Work>>,
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

impl HostStream {
    pub(super) fn new(name: String) -> Result<Self> {
        let (sender, receiver) = mpsc::channel::<Work>();
        let shared = Arc::new(Shared::default());
        let worker_shared = Arc::clone(&shared);
        let worker = std::thread::Builder::new()
            .name(name)
            .spawn(move || serve(&receiver, &worker_shared))
            .map_err(|e| error("create_stream", ErrorKind::Driver, format!("cannot start stream thread: {e}")))?;
        Ok(Self { sender: Some(sender), shared, worker: Some(worker) })
    }

    /// Queues `op` behind everything enqueued before.
    pub(super) fn enqueue(&self, call: &'static str, op: Op) -> Result<()> {
        self.push(call, Work::Run(op))
    }

    /// Queues the completion of `event`'s recording number `generation`.
    pub(super) fn signal(&self, call: &'static str, event: Arc<HostEvent>, generation: u64) -> Result<()> {
        self.push(call, Work::Signal(event, generation))
    }

    fn push(&self, call: &'static str, work: Work) -> Result<()> {
        let sender =
            self.sender.as_ref().ok_or_else(|| error(call, ErrorKind::InvalidHandle, "stream is being destroyed"))?;
        let mut progress = self.shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
        progress.enqueued += 1;
        sender.send(work).map_err(|_| {
            progress.enqueued -= 1;
            error(call, ErrorKind::Driver, "stream worker has stopped")
        })
    }

    /// Blocks until everything enqueued so far has run; returns the sticky error if any.
    pub(super) fn synchronize(&self) -> Result<()> {
        let mut progress = self.shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let target = progress.enqueued;
        while progress.completed < target {
            progress = self.shared.done.wait(progress).unwrap_or_else(PoisonError::into_inner);
        }
        progress.error.clone().map_or(Ok(()), Err)
    }

    /// `true` when everything enqueued so far has run; the sticky error if any.
    pub(super) fn query(&self) -> Result<bool> {
        let progress = self.shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
        match &progress.error {
            Some(e) => Err(e.clone()),
            None => Ok(progress.completed == progress.enqueued),
        }
    }
}

impl Drop for HostStream {
    fn drop(&mut self) {
        // Closing the channel lets the worker drain the queue and exit.
        self.sender = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

fn serve(receiver: &mpsc::Receiver<Work>, shared: &Shared) {
    while let Ok(work) = receiver.recv() {
        let failed = shared.progress.lock().unwrap_or_else(PoisonError::into_inner).error.clone();
        let outcome = match (work, failed) {
            (Work::Run(op), None) => op(),
            (Work::Run(_), Some(_)) => Ok(()),
            (Work::Signal(event, generation), failed) => {
                event.complete(generation, failed);
                Ok(())
            }
        };
        let mut progress = shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = outcome {
            progress.error.get_or_insert(e);
        }
        progress.completed += 1;
        shared.done.notify_all();
    }
}
