//! Pieces the CUDA and HIP backends share: their discovery bookkeeping and
//! the host-released gate word behind their user events.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};

/// Sorts the outcome of a driver's initialisation and per-device opening
/// (run under `catch_unwind`, since the bindings panic on a missing symbol)
/// into devices and reasons.
pub(crate) fn collect_devices<T>(
    backend: Backend,
    call: &'static str,
    found: std::thread::Result<Result<Vec<Result<T>>>>,
) -> (Vec<T>, Vec<Error>) {
    match found {
        Ok(Ok(results)) => {
            let mut devices = Vec::new();
            let mut failures = Vec::new();
            for result in results {
                match result {
                    Ok(d) => devices.push(d),
                    Err(e) => failures.push(e),
                }
            }
            (devices, failures)
        }
        Ok(Err(mut e)) => {
            e.kind = ErrorKind::Unavailable;
            (Vec::new(), vec![e])
        }
        Err(panic) => {
            let why = panic_text(&panic).unwrap_or_else(|| "unknown failure".into());
            let message = format!("the {backend} runtime could not be used: {why}");
            (Vec::new(), vec![Error::new(backend, call, ErrorKind::Unavailable, message)])
        }
    }
}

fn panic_text(panic: &Box<dyn Any + Send>) -> Option<String> {
    panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
}

/// A 4-byte word of mapped page-locked memory that streams wait on (`>= 1`)
/// and the host sets to open the gate.
///
/// Invariant: `word` is 4-byte aligned and valid while the gate lives; the
/// host only touches it atomically, devices only read it.
#[derive(Clone, Copy)]
pub(crate) struct GateWord(pub(crate) NonNull<u32>);

// SAFETY: the word is only accessed atomically (see the invariant).
unsafe impl Send for GateWord {}
// SAFETY: as above.
unsafe impl Sync for GateWord {}

impl GateWord {
    fn atomic(&self) -> &AtomicU32 {
        // SAFETY: the invariant of the type.
        unsafe { AtomicU32::from_ptr(self.0.as_ptr()) }
    }

    /// Closes the gate (at creation).
    pub(crate) fn close(&self) {
        self.atomic().store(0, Ordering::SeqCst);
    }

    /// Opens the gate, releasing every stream waiting on it.
    pub(crate) fn open(&self) {
        self.atomic().store(1, Ordering::SeqCst);
    }

    /// `true` once open.
    pub(crate) fn is_open(&self) -> bool {
        self.atomic().load(Ordering::SeqCst) >= 1
    }
}
