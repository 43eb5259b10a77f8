//! Events of the shared GPU device: the runtime's timing events, and user
//! events built from a word of mapped page-locked memory that streams wait
//! on (`>=` the gate's generation) and the host sets to release them —
//! CUDA and HIP have no host-completed events of their own.
//!
//! A word only grows, so it is reused for gate after gate: the gate of
//! generation `g` is closed while the word is below `g` and opened by
//! storing `g`. A destroyed gate is opened first; the next gate on its word
//! has generation `g + 1`, closed to new waits while every wait on an
//! earlier generation stays released (`>= g` still holds). No wait needs
//! tracking before its word is reused (`gate_words_are_reused_without_releasing_a_new_gate`).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::runtime::Runtime;

/// One hetero event.
pub(super) enum GpuEvent<R: Runtime> {
    /// A runtime event, whether it keeps time, and whether it was ever recorded.
    Timed { event: R::Event, timing: bool, recorded: AtomicBool },
    /// A host-released gate: the mapped word, its device address, and the
    /// generation that opens it.
    User { word: GateWord, device: R::Ptr, generation: u32 },
}

// SAFETY: runtime events may be used from any thread; the gate word is
// only accessed atomically.
unsafe impl<R: Runtime> Send for GpuEvent<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuEvent<R> {}

impl<R: Runtime> GpuEvent<R> {
    /// Opens a user event's gate (no effect on timed events).
    pub(super) fn open(&self) {
        if let Self::User { word, generation, .. } = self {
            word.open(*generation);
        }
    }

    /// `true` once a user event's gate is open (timed events: always).
    pub(super) fn is_open(&self) -> bool {
        match self {
            Self::User { word, generation, .. } => word.value() >= *generation,
            Self::Timed { .. } => true,
        }
    }
}

/// A 4-byte word of mapped page-locked memory.
///
/// Invariant: `0` is 4-byte aligned and valid while the device lives (words
/// are freed only at its drop, after its streams are done); the host only
/// touches it atomically and never lowers it, devices only read it.
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

    /// Sets a new word, which no stream has waited on, to 0.
    pub(super) fn reset(&self) {
        self.atomic().store(0, Ordering::SeqCst);
    }

    /// The latest generation opened (0 for a new word).
    pub(super) fn value(&self) -> u32 {
        self.atomic().load(Ordering::SeqCst)
    }

    /// Opens the gate of `generation`, releasing every stream waiting on it
    /// or on an earlier generation.
    pub(super) fn open(&self, generation: u32) {
        self.atomic().fetch_max(generation, Ordering::SeqCst);
    }
}
