//! `CUresult` and NVRTC status codes to [`Error`]s.

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::CUresult;

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};

/// An error of the CUDA backend without a native code.
pub(super) fn error(call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
    Error::new(Backend::Cuda, call, kind, message)
}

/// Errors after which the CUDA context is unusable (sticky errors): every
/// later call on the device returns the first of them.
pub(super) fn is_sticky(code: CUresult) -> bool {
    use CUresult::*;
    matches!(
        code,
        CUDA_ERROR_ILLEGAL_ADDRESS
            | CUDA_ERROR_LAUNCH_FAILED
            | CUDA_ERROR_MISALIGNED_ADDRESS
            | CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUDA_ERROR_INVALID_PC
            | CUDA_ERROR_ASSERT
            | CUDA_ERROR_LAUNCH_TIMEOUT
            | CUDA_ERROR_ECC_UNCORRECTABLE
    )
}

/// The error for `code` returned by `call`, with the driver's name and text.
#[cold]
pub(super) fn cu_error(call: &'static str, code: CUresult) -> Error {
    use CUresult::*;
    let err = DriverError(code);
    let name = err.error_name().map_or_else(|_| format!("{code:?}"), |n| n.to_string_lossy().into_owned());
    let text = err.error_string().map_or_else(|_| String::new(), |s| s.to_string_lossy().into_owned());
    let kind = match code {
        CUDA_ERROR_OUT_OF_MEMORY => ErrorKind::OutOfMemory,
        CUDA_ERROR_NOT_READY => ErrorKind::NotReady,
        CUDA_ERROR_NOT_FOUND => ErrorKind::KernelNotFound,
        CUDA_ERROR_INVALID_HANDLE | CUDA_ERROR_CONTEXT_IS_DESTROYED => ErrorKind::InvalidHandle,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES => ErrorKind::InvalidLaunch,
        CUDA_ERROR_NO_DEVICE
        | CUDA_ERROR_NOT_INITIALIZED
        | CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
        | CUDA_ERROR_NO_BINARY_FOR_GPU => ErrorKind::Unavailable,
        c if is_sticky(c) => ErrorKind::KernelFault,
        _ => ErrorKind::Driver,
    };
    Error::native(Backend::Cuda, call, code as i64, format!("{name}: {text}")).with_kind(kind)
}

/// `Ok` for `CUDA_SUCCESS`, else the error of `call`.
pub(super) fn check(call: &'static str, code: CUresult) -> Result<()> {
    match code {
        CUresult::CUDA_SUCCESS => Ok(()),
        other => Err(cu_error(call, other)),
    }
}
