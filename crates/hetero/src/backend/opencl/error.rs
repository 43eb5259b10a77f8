//! OpenCL status codes to [`Error`]s.

use opencl3::error_codes::{self as codes, ClError};

use crate::device::Backend;
use crate::error::{Error, ErrorKind};

/// Status cl3 returns when `libOpenCL.so.1` cannot be loaded.
pub(super) const RUNTIME_MISSING: i32 = codes::DLOPEN_RUNTIME_LOAD_FAILED;

/// An error of the OpenCL backend without a native code.
pub(super) fn error(call: &'static str, kind: ErrorKind, message: impl Into<String>) -> Error {
    Error::new(Backend::OpenCl, call, kind, message)
}

/// The error for OpenCL status `code` returned by `call`.
#[cold]
pub(super) fn cl_error(call: &'static str, code: i32) -> Error {
    let kind = match code {
        codes::CL_MEM_OBJECT_ALLOCATION_FAILURE | codes::CL_OUT_OF_RESOURCES | codes::CL_OUT_OF_HOST_MEMORY => {
            ErrorKind::OutOfMemory
        }
        codes::CL_BUILD_PROGRAM_FAILURE => ErrorKind::Build,
        codes::CL_INVALID_KERNEL_NAME => ErrorKind::KernelNotFound,
        codes::CL_INVALID_WORK_GROUP_SIZE | codes::CL_INVALID_WORK_ITEM_SIZE | codes::CL_INVALID_GLOBAL_WORK_SIZE => {
            ErrorKind::InvalidLaunch
        }
        codes::CL_INVALID_BUFFER_SIZE => ErrorKind::OutOfBounds,
        // Timing an event of a queue created without profiling (a stream
        // without timing), as CUDA answers for an event without timing.
        codes::CL_PROFILING_INFO_NOT_AVAILABLE => ErrorKind::InvalidHandle,
        codes::DLOPEN_RUNTIME_LOAD_FAILED | codes::DLOPEN_FUNCTION_NOT_AVAILABLE | codes::CL_PLATFORM_NOT_FOUND_KHR => {
            ErrorKind::Unavailable
        }
        _ => ErrorKind::Driver,
    };
    Error::native(Backend::OpenCl, call, i64::from(code), codes::error_text(code).to_string()).with_kind(kind)
}

/// Converts opencl3's wrapper error.
pub(super) fn from_cl(call: &'static str) -> impl Fn(ClError) -> Error {
    move |e| cl_error(call, e.0)
}

/// Converts cl3's raw status.
pub(super) fn from_code(call: &'static str) -> impl Fn(i32) -> Error {
    move |code| cl_error(call, code)
}
