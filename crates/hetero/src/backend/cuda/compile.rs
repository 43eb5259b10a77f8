//! NVRTC: the portable kernels (assembled with the CUDA prelude) compiled
//! for the device's own architecture (`--gpu-architecture=sm_XY` from its
//! compute capability).

use std::ffi::{CStr, c_char};

use cudarc::nvrtc::result as nvrtc;

use super::error::error;
use crate::error::{ErrorKind, Result};

fn text(chars: &[c_char]) -> String {
    // SAFETY: NVRTC returns NUL-terminated strings; CStr stops at the first NUL.
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map_or_else(|_| String::from_utf8_lossy(&bytes).into_owned(), |s| s.to_string_lossy().into_owned())
}

/// Compiles assembled `source` to PTX for `arch` (e.g. `sm_90`); the error carries the NVRTC log.
pub(super) fn compile(source: &CStr, arch: &str) -> Result<Vec<c_char>> {
    let program = nvrtc::create_program(source, None)
        .map_err(|e| error("nvrtcCreateProgram", ErrorKind::Build, format!("{e:?}")))?;
    let options = [format!("--gpu-architecture={arch}"), "--std=c++17".to_string()];
    // SAFETY: program is live until destroyed below.
    let compiled = unsafe { nvrtc::compile_program(program, &options) };
    // SAFETY: as above.
    let log = unsafe { nvrtc::get_program_log(program) }.map(|l| text(&l)).unwrap_or_default();
    let ptx = match compiled {
        Ok(()) => {
            // SAFETY: compilation succeeded; program is live.
            let ptx = unsafe { nvrtc::get_ptx(program) };
            ptx.map_err(|e| error("nvrtcGetPTX", ErrorKind::Build, format!("{e:?}")))
        }
        Err(e) => Err(error(
            "nvrtcCompileProgram",
            ErrorKind::Build,
            if log.trim().is_empty() { format!("{e:?} (NVRTC gave no log)") } else { log },
        )),
    };
    // SAFETY: destroyed once.
    let _ = unsafe { nvrtc::destroy_program(program) };
    ptx
}

/// NVRTC's version, `(major, minor)`, when it answers.
pub(super) fn nvrtc_version() -> Option<(i32, i32)> {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: both are valid out-pointers; NVRTC is loaded (it compiled the module).
    let code = unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) };
    (code == cudarc::nvrtc::sys::nvrtcResult::NVRTC_SUCCESS).then_some((major, minor))
}
