//! Error constructors of the host backend.

use crate::device::Backend;
use crate::error::{Error, ErrorKind};

/// An error of the host backend.
pub(super) fn error(call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
    Error::new(Backend::Host, call, kind, message)
}
