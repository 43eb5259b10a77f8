//! How many gates ([`crate::UserEvent`]s) of the whole process are closed:
//! made and not yet completed or released.
//!
//! While none is, all queued work of every device completes without the
//! host, so any thread may wait for any of it. A device whose streams wait
//! on another device's work is then released by the thread that drops it
//! (`state.rs`), not on a thread of its own that the process could exit
//! under while it still calls the device's runtime.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Gates made and not yet opened.
static CLOSED: AtomicUsize = AtomicUsize::new(0);

/// Counts a new gate, before any stream can wait on it.
pub(crate) fn closed() {
    CLOSED.fetch_add(1, Ordering::SeqCst);
}

/// Uncounts a gate that was completed or released (once per gate).
pub(crate) fn opened() {
    CLOSED.fetch_sub(1, Ordering::SeqCst);
}

/// Whether a gate of any device may still be closed.
pub(crate) fn any_closed() -> bool {
    CLOSED.load(Ordering::SeqCst) > 0
}
