//! `hipError_t` and `hiprtcResult` codes to [`Error`]s.

use std::ffi::CStr;

use super::ffi as hip;

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};

/// An error of the HIP backend without a native code.
pub(super) fn error(call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
    Error::new(Backend::Hip, call, kind, message)
}

/// Errors after which the device cannot be trusted (sticky errors).
pub(super) fn is_sticky(code: hip::hipError_t) -> bool {
    matches!(
        code,
        hip::hipError_t_hipErrorIllegalAddress
            | hip::hipError_t_hipErrorLaunchFailure
            | hip::hipError_t_hipErrorAssert
            | hip::hipError_t_hipErrorLaunchTimeOut
            | hip::hipError_t_hipErrorIllegalState
    )
}

fn text(ptr: *const std::ffi::c_char) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: HIP returns static NUL-terminated strings.
    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
}

/// The error for `code` returned by `call`, with HIP's name and text.
#[cold]
pub(super) fn hip_error(call: &'static str, code: hip::hipError_t) -> Error {
    // SAFETY: both functions accept any code and return static strings.
    let (name, message) = unsafe { (text(hip::hipGetErrorName(code)), text(hip::hipGetErrorString(code))) };
    let kind = match code {
        hip::hipError_t_hipErrorOutOfMemory => ErrorKind::OutOfMemory,
        hip::hipError_t_hipErrorNotReady => ErrorKind::NotReady,
        hip::hipError_t_hipErrorNotFound => ErrorKind::KernelNotFound,
        hip::hipError_t_hipErrorInvalidHandle | hip::hipError_t_hipErrorContextIsDestroyed => ErrorKind::InvalidHandle,
        hip::hipError_t_hipErrorLaunchOutOfResources => ErrorKind::InvalidLaunch,
        hip::hipError_t_hipErrorNoDevice
        | hip::hipError_t_hipErrorNotInitialized
        | hip::hipError_t_hipErrorInsufficientDriver => ErrorKind::Unavailable,
        c if is_sticky(c) => ErrorKind::KernelFault,
        _ => ErrorKind::Driver,
    };
    Error::native(Backend::Hip, call, i64::from(code), format!("{name}: {message}")).with_kind(kind)
}

/// `Ok` for `hipSuccess`, else the error of `call`.
pub(super) fn check(call: &'static str, code: hip::hipError_t) -> Result<()> {
    if code == hip::hipError_t_hipSuccess { Ok(()) } else { Err(hip_error(call, code)) }
}

/// The error for a failed hiprtc call.
#[cold]
pub(super) fn rtc_error(call: &'static str, code: hip::hiprtcResult) -> Error {
    // SAFETY: accepts any code and returns a static string.
    let message = text(unsafe { hip::hiprtcGetErrorString(code) });
    Error::native(Backend::Hip, call, i64::from(code), message).with_kind(ErrorKind::Build)
}
