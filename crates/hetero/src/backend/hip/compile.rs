//! hiprtc: the portable kernels (assembled with the CUDA prelude) compiled
//! for the current device — a code object on AMD; on the NVIDIA platform
//! hiprtc is NVRTC underneath and returns PTX.

use std::ffi::{CStr, c_char};

use super::ffi as hip;

use super::error::rtc_error;
use crate::error::Result;

/// hiprtc's flags on AMD (clang) for IEEE-754 as written, as
/// `STRICT_NVRTC` are NVRTC's.
const STRICT_AMD: [&str; 3] =
    ["-ffp-contract=off", "-fno-gpu-flush-denormals-to-zero", "-fhip-fp32-correctly-rounded-divide-sqrt"];

/// The flags of a strict build (`strict`) for AMD's compiler or, on the
/// NVIDIA platform, NVRTC's; none otherwise.
pub(super) fn strict_flags(strict: bool, amd: bool) -> Result<Vec<std::ffi::CString>> {
    use crate::backend::gpu::module::STRICT_NVRTC;
    if !strict {
        return Ok(Vec::new());
    }
    let flags: &[&str] = if amd { &STRICT_AMD } else { &STRICT_NVRTC };
    flags
        .iter()
        .map(|f| {
            std::ffi::CString::new(*f).map_err(|_| {
                crate::error::Error::new(
                    crate::device::Backend::Hip,
                    "hiprtcCompileProgram",
                    crate::error::ErrorKind::Build,
                    "a compiler flag contains a NUL byte",
                )
            })
        })
        .collect()
}

/// Compiles assembled `src` for the current device, or for the target
/// `options` name; the error carries the hiprtc log.
pub(super) fn compile(src: &CStr, options: &[&CStr]) -> Result<Vec<c_char>> {
    let mut program: hip::hiprtcProgram = std::ptr::null_mut();
    // SAFETY: src outlives the call; no headers.
    let created = unsafe {
        hip::hiprtcCreateProgram(
            &mut program,
            src.as_ptr(),
            c"hetero.cu".as_ptr(),
            0,
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if created != hip::hiprtcResult_HIPRTC_SUCCESS {
        return Err(rtc_error("hiprtcCreateProgram", created));
    }
    let options: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
    let count = i32::try_from(options.len()).unwrap_or(i32::MAX);
    // SAFETY: program is live until destroyed below; the options are
    // `count` NUL-terminated strings that outlive the call.
    let compiled = unsafe { hip::hiprtcCompileProgram(program, count, options.as_ptr()) };
    let log = program_log(program);
    let code = if compiled == hip::hiprtcResult_HIPRTC_SUCCESS {
        code(program)
    } else {
        let mut err = rtc_error("hiprtcCompileProgram", compiled);
        if !log.trim().is_empty() {
            err.message = log;
        }
        Err(err)
    };
    // SAFETY: destroyed once.
    let _ = unsafe { hip::hiprtcDestroyProgram(&mut program) };
    code
}

fn program_log(program: hip::hiprtcProgram) -> String {
    let mut size = 0usize;
    // SAFETY: program is live; size is a valid out-pointer.
    if unsafe { hip::hiprtcGetProgramLogSize(program, &mut size) } != hip::hiprtcResult_HIPRTC_SUCCESS || size == 0 {
        return String::new();
    }
    let mut log = vec![0 as c_char; size];
    // SAFETY: log holds size bytes, as hiprtc asked for.
    if unsafe { hip::hiprtcGetProgramLog(program, log.as_mut_ptr()) } != hip::hiprtcResult_HIPRTC_SUCCESS {
        return String::new();
    }
    let bytes: Vec<u8> = log.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn code(program: hip::hiprtcProgram) -> Result<Vec<c_char>> {
    let mut size = 0usize;
    // SAFETY: program is live; size is a valid out-pointer.
    let sized = unsafe { hip::hiprtcGetCodeSize(program, &mut size) };
    if sized != hip::hiprtcResult_HIPRTC_SUCCESS {
        return Err(rtc_error("hiprtcGetCodeSize", sized));
    }
    let mut code = vec![0 as c_char; size + 1];
    // SAFETY: code holds size bytes plus a terminating NUL.
    let got = unsafe { hip::hiprtcGetCode(program, code.as_mut_ptr()) };
    if got != hip::hiprtcResult_HIPRTC_SUCCESS {
        return Err(rtc_error("hiprtcGetCode", got));
    }
    Ok(code)
}
