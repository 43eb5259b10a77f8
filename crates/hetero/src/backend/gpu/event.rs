//! Events of the shared GPU device: the runtime's timing events, and user
//! events built from a word of mapped page-locked memory that streams wait
//! on (`>= 1`) and the host sets to release them — CUDA and HIP have no
//! host-completed events of their own.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::runtime::Runtime;

/// One hetero event.
pub(super) enum GpuEvent<R: Runtime> {
    /// A runtime event, whether it keeps time, and whether it was ever recorded.
    Timed { event: R::Event, timing: bool, recorded: AtomicBool },
    /// A host-released gate: the mapped word and its device address.
    User { word: GateWord, device: R::Ptr },
}

// SAFETY: runtime events may be used from any thread; the gate word is
// only accessed atomically.
unsafe impl<R: Runtime> Send for GpuEvent<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuEvent<R> {}

impl<R: Runtime> GpuEvent<R> {
    /// Opens a user event's gate (no effect on timed events).
    pub(super) fn open(&self) {
        if let Self::User { word, .. } = self {
            word.open();
        }
    }

    /// `true` once a user event's gate is open (timed events: always).
    pub(super) fn is_open(&self) -> bool {
        match self {
            Self::User { word, .. } => word.is_open(),
            Self::Timed { .. } => true,
        }
    }
}

/// A 4-byte word of mapped page-locked memory.
///
/// Invariant: `0` is 4-byte aligned and valid while the gate lives (words
/// of destroyed gates are freed only after the device's streams are done);
/// the host only touches it atomically, devices only read it.
#[derive(Clone, Copy)]
pub(super) struct GateWord(pub(super) NonNull<u32>);

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
    pub(super) fn close(&self) {
        self.atomic().store(0, Ordering::SeqCst);
    }

    /// Opens the gate, releasing every stream waiting on it.
    pub(super) fn open(&self) {
        self.atomic().store(1, Ordering::SeqCst);
    }

    /// `true` once open.
    pub(super) fn is_open(&self) -> bool {
        self.atomic().load(Ordering::SeqCst) >= 1
    }
}
