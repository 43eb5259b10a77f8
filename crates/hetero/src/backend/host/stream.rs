//! Streams of the host backend: one worker thread per stream runs its
//! operations in order, so enqueueing returns before the work is done.
//!
//! Like a GPU stream, an operation that fails (or panics) makes the stream
//! *sticky*: its later operations are skipped and every synchronising call
//! returns the first error. Events the stream reaches afterwards carry that
//! error to the streams and host threads that wait on them.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, PoisonError};

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

/// An in-order queue served by its own thread. Dropping it closes the
/// queue without waiting: the worker runs what is queued, then exits.
pub(super) struct HostStream {
    sender: mpsc::Sender<Work>,
    shared: Arc<Shared>,
}

impl HostStream {
    pub(super) fn new(name: String) -> Result<Self> {
        let (sender, receiver) = mpsc::channel::<Work>();
        let shared = Arc::new(Shared::default());
        let worker_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || serve(&receiver, &worker_shared))
            .map_err(|e| error("create_stream", ErrorKind::Driver, format!("cannot start stream thread: {e}")))?;
        Ok(Self { sender, shared })
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
        let mut progress = self.shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
        progress.enqueued += 1;
        self.sender.send(work).map_err(|_| {
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

fn serve(receiver: &mpsc::Receiver<Work>, shared: &Shared) {
    while let Ok(work) = receiver.recv() {
        let failed = shared.progress.lock().unwrap_or_else(PoisonError::into_inner).error.clone();
        let outcome = match (work, failed) {
            (Work::Run(op), None) => run(op),
            (Work::Run(_), Some(_)) => Ok(()),
            (Work::Signal(event, generation), failed) => {
                // The event completes and the stream counts the recording
                // as done at once, under the progress lock: completed
                // before, a host that saw the event complete could find
                // the stream still busy with nothing left to run
                // (`a_completed_recording_leaves_its_stream_idle`).
                // Lock order: progress, then the event's (a recording
                // lets go of the event's lock before it queues).
                let mut progress = shared.progress.lock().unwrap_or_else(PoisonError::into_inner);
                event.complete(generation, failed);
                progress.completed += 1;
                shared.done.notify_all();
                continue;
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

/// Runs one operation; a panic (a bug in a kernel or in the backend) becomes
/// the stream's sticky error instead of killing the worker, which would
/// leave every later synchronisation waiting forever.
fn run(op: Op) -> Result<()> {
    catch_unwind(AssertUnwindSafe(op)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_string()))
            .unwrap_or_else(|| "unknown panic".to_string());
        Err(error("stream operation", ErrorKind::KernelFault, format!("operation panicked: {why}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panicking operation becomes the stream's sticky error; the worker
    /// keeps serving, so synchronising returns instead of hanging (W2: a
    /// multiply overflow panicked the worker and every later drop hung).
    #[test]
    fn panic_in_an_operation_is_a_sticky_error() {
        let stream = HostStream::new("test".to_string()).expect("stream");
        stream.enqueue("test", Box::new(|| panic!("boom"))).expect("enqueue");
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        stream
            .enqueue(
                "test",
                Box::new(move || {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    Ok(())
                }),
            )
            .expect("enqueue");
        let err = stream.synchronize().expect_err("the panic is reported");
        assert_eq!(err.kind, ErrorKind::KernelFault);
        assert!(err.message.contains("boom"), "{err}");
        assert!(!ran.load(std::sync::atomic::Ordering::SeqCst), "work after a failure is skipped");
        assert!(stream.query().is_err());
    }
}
