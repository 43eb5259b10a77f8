//! Streams of the OpenCL backend: in-order command queues with profiling.
//!
//! Every enqueue is followed by `clFlush`, so commands reach the device
//! promptly and events recorded on one queue can be waited on by another
//! (OpenCL only guarantees progress for flushed commands). The event of the
//! last command is kept, so a stream is idle exactly when it has completed.

use std::sync::{Mutex, PoisonError};

use opencl3::command_queue::{CL_QUEUE_PROFILING_ENABLE, CommandQueue};
use opencl3::context::Context;
use opencl3::event::Event;
use opencl3::types::cl_event;

use super::error::{from_cl, from_code};
use super::event::is_complete;
use crate::error::Result;

/// An in-order queue and the event of its last command.
pub(super) struct ClStream {
    pub(super) queue: CommandQueue,
    last: Mutex<Option<Event>>,
}

impl ClStream {
    pub(super) fn new(context: &Context) -> Result<Self> {
        Ok(Self { queue: create(context)?, last: Mutex::new(None) })
    }

    /// Takes ownership of the event an enqueue returned, flushes the queue
    /// and remembers the command as the stream's last.
    pub(super) fn submitted(&self, call: &'static str, event: std::result::Result<cl_event, i32>) -> Result<()> {
        let event = submitted(&self.queue, call, event)?;
        *self.last.lock().unwrap_or_else(PoisonError::into_inner) = Some(event);
        Ok(())
    }

    /// `true` when the last command has completed.
    pub(super) fn is_idle(&self) -> Result<bool> {
        match self.last.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            Some(event) => is_complete(event, "query_stream"),
            None => Ok(true),
        }
    }

    /// Blocks until every command has completed.
    pub(super) fn finish(&self) -> Result<()> {
        self.queue.finish().map_err(from_cl("clFinish"))?;
        // A failed command shows in its event, not always in clFinish.
        self.is_idle().map(drop)
    }
}

/// An in-order queue with profiling enabled.
pub(super) fn create(context: &Context) -> Result<CommandQueue> {
    #[allow(deprecated)] // clCreateCommandQueue: the one constructor every OpenCL 1.2+ platform has
    CommandQueue::create_default(context, CL_QUEUE_PROFILING_ENABLE).map_err(from_cl("clCreateCommandQueue"))
}

/// Takes ownership of the event an enqueue returned and flushes the queue.
pub(super) fn submitted(
    queue: &CommandQueue,
    call: &'static str,
    event: std::result::Result<cl_event, i32>,
) -> Result<Event> {
    let event = Event::new(event.map_err(from_code(call))?);
    queue.flush().map_err(from_cl("clFlush"))?;
    Ok(event)
}
