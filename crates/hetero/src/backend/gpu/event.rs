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
//!
//! A stream waits on a closed gate on the host, not on the word (`stream.rs`):
//! the word is waited on by the device only where held work had to be
//! submitted early.

use std::sync::atomic::AtomicBool;

use super::memory::GateWord;
use super::runtime::Runtime;
use super::stream::{Latest, Waiters};

/// One hetero event.
pub(super) enum GpuEvent<R: Runtime> {
    /// A runtime event, whether it keeps time, whether it was ever
    /// recorded, and its latest recording where that was made on a held stream.
    Timed { event: R::Event, timing: bool, recorded: AtomicBool, latest: Latest<R> },
    /// A host-released gate: the mapped word, its device address, the
    /// generation that opens it, and the streams it holds.
    User { word: GateWord, device: R::Ptr, generation: u32, waiters: Waiters<R> },
}

// SAFETY: runtime events may be used from any thread; the gate word is
// only accessed atomically.
unsafe impl<R: Runtime> Send for GpuEvent<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuEvent<R> {}

impl<R: Runtime> GpuEvent<R> {
    /// Opens a user event's gate and submits the work it held (no effect
    /// on timed events).
    pub(super) fn open(&self) {
        if let Self::User { word, generation, waiters, .. } = self {
            word.open(*generation);
            waiters.release_all();
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
