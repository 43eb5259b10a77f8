//! Error constructors of the host backend.

use crate::device::Backend;
use crate::error::{Error, ErrorKind};

/// An error of the host backend.
pub(super) fn error(call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
    Error::new(Backend::Host, call, kind, message)
}

/// The error for a handle that this device did not issue or already released.
pub(super) fn invalid_handle(call: &'static str, what: &str, id: u64) -> Error {
    error(
        call,
        ErrorKind::InvalidHandle,
        format!("{what} #{id} does not belong to this host device (released, or issued by another device)"),
    )
}
