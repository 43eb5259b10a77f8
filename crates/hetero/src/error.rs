//! The one error type of the crate.
//!
//! Every error names the backend and the call that failed; errors that come
//! from a driver or runtime also carry its native code and message, so a user
//! can look the code up in the vendor's documentation.
//!
//! Every constructor of an error is `#[cold]`, in this module and in each
//! backend's `error.rs`: the code that builds a message then sits apart
//! from the operations' hot paths, which fit more of themselves (and of the
//! driver they call) in the instruction cache. Over PoCL, marking them
//! cold took a 4 KiB copy's instruction-cache misses (callgrind's
//! simulation) from about 57 to about 30.

use std::fmt;

use crate::types::Backend;

/// Result alias used throughout hetero.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong, for callers that branch on the kind of failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The backend is not compiled in, or its runtime library or driver is
    /// missing on this machine. The message says what was searched.
    Unavailable,
    /// A device or pinned allocation could not be satisfied. The device is
    /// still usable.
    OutOfMemory,
    /// Kernel source did not compile; the message is the build log.
    Build,
    /// A kernel name was not found in a module.
    KernelNotFound,
    /// A byte or element range does not fit its allocation, or two ranges
    /// of a copy differ in length.
    OutOfBounds,
    /// Launch dimensions or arguments the device cannot run.
    InvalidLaunch,
    /// A handle that this device never issued or has already released.
    InvalidHandle,
    /// Objects from two different devices (or backends) used together.
    DeviceMismatch,
    /// An event that has not completed (or was never recorded) was asked
    /// for a time.
    NotReady,
    /// A kernel faulted; the stream that ran it reports this error from now on.
    KernelFault,
    /// Any other failure reported by a driver or runtime.
    Driver,
    /// An option or environment variable has a value hetero does not
    /// understand; the message names it and the values it takes.
    Config,
    /// What was asked cannot be represented here: a DLPack tensor with
    /// strides or a type hetero has no element for, a foreign stream on a
    /// backend without native streams. The message says what would work.
    Unsupported,
}

/// An error from hetero or from a backend's driver.
#[derive(Debug, Clone, thiserror::Error)]
pub struct Error {
    /// Backend that raised the error.
    pub backend: Backend,
    /// The operation or native call that failed, e.g. `copy_h2d` or `clBuildProgram`.
    pub call: &'static str,
    /// Classification for programmatic handling.
    pub kind: ErrorKind,
    /// The native error code, where the failure came from a driver.
    pub code: Option<i64>,
    /// Human-readable explanation, including the native error name where known.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} backend: {} failed: {}", self.backend, self.call, self.message)?;
        if let Some(code) = self.code {
            write!(f, " (native code {code})")?;
        }
        Ok(())
    }
}

impl Error {
    /// Creates an error with no native code.
    #[cold]
    pub fn new(backend: Backend, call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { backend, call, kind, code: None, message: message.into() }
    }

    /// Creates an error carrying a driver's native code.
    #[cold]
    pub fn native(backend: Backend, call: &'static str, code: i64, message: impl Into<String>) -> Self {
        Self { backend, call, kind: ErrorKind::Driver, code: Some(code), message: message.into() }
    }

    /// Replaces the kind, e.g. to mark a native out-of-memory code.
    #[must_use]
    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }

    /// The build log, when this is a [`ErrorKind::Build`] error.
    pub fn build_log(&self) -> Option<&str> {
        (self.kind == ErrorKind::Build).then_some(self.message.as_str())
    }
}
