//! NVRTC compilation of the portable kernels, module loading and kernels.
//!
//! Sources are compiled for the device's own architecture
//! (`--gpu-architecture=sm_XY` from its compute capability). Built modules
//! are cached per device for the life of the process, keyed by source.

use std::ffi::{CStr, CString, c_char};

use cudarc::driver::sys;
use cudarc::nvrtc::result as nvrtc;

use super::error::{check, error};
use crate::error::{ErrorKind, Result};

/// A loaded `CUmodule`, never unloaded (modules are cached for the process).
pub(super) struct CuModule(pub(super) sys::CUmodule);

// SAFETY: CUmodule handles may be used from any thread.
unsafe impl Send for CuModule {}
// SAFETY: as above.
unsafe impl Sync for CuModule {}

/// One kernel and its limits on the device.
pub(super) struct CuKernel {
    pub(super) function: sys::CUfunction,
    pub(super) name: String,
    pub(super) max_threads: u32,
    pub(super) static_shared: usize,
}

// SAFETY: CUfunction handles may be used from any thread.
unsafe impl Send for CuKernel {}
// SAFETY: as above.
unsafe impl Sync for CuKernel {}

fn text(chars: &[c_char]) -> String {
    // SAFETY: NVRTC returns NUL-terminated strings; CStr stops at the first NUL.
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).collect();
    CStr::from_bytes_until_nul(&bytes)
        .map_or_else(|_| String::from_utf8_lossy(&bytes).into_owned(), |s| s.to_string_lossy().into_owned())
}

/// Compiles `source` to PTX for `arch` (e.g. `sm_90`); the error carries the NVRTC log.
pub(super) fn compile(source: &str, arch: &str) -> Result<Vec<c_char>> {
    if hetero_kernels::kernel_names(source).is_empty() {
        return Err(error(
            "nvrtcCompileProgram",
            ErrorKind::Build,
            "the source declares no kernel (expected `KERNEL void name(`)",
        ));
    }
    let full = hetero_kernels::assemble(hetero_kernels::PRELUDE_CUDA, source);
    let src = CString::new(full)
        .map_err(|_| error("nvrtcCreateProgram", ErrorKind::Build, "kernel source contains a NUL byte"))?;
    let program = nvrtc::create_program(&src, None)
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

/// Loads PTX into the current context.
pub(super) fn load(ptx: &[c_char]) -> Result<CuModule> {
    let mut module: sys::CUmodule = std::ptr::null_mut();
    // SAFETY: ptx is a NUL-terminated PTX image from NVRTC.
    check("cuModuleLoadData", unsafe { sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()) })?;
    Ok(CuModule(module))
}

/// The kernel `name` of `module`, with its limits. The context must be current.
pub(super) fn kernel(module: &CuModule, name: &str) -> Result<CuKernel> {
    let c_name = CString::new(name)
        .map_err(|_| error("cuModuleGetFunction", ErrorKind::KernelNotFound, "kernel name contains a NUL byte"))?;
    let mut function: sys::CUfunction = std::ptr::null_mut();
    // SAFETY: module is loaded; function is a valid out-pointer.
    check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut function, module.0, c_name.as_ptr()) })
        .map_err(|mut e| {
            if e.kind == ErrorKind::KernelNotFound {
                e.message = format!("no kernel `{name}` in the module ({})", e.message);
            }
            e
        })?;
    let attribute = |attr| -> Result<i32> {
        let mut value = 0;
        // SAFETY: function is live; value is a valid out-pointer.
        check("cuFuncGetAttribute", unsafe { sys::cuFuncGetAttribute(&mut value, attr, function) })?;
        Ok(value)
    };
    use sys::CUfunction_attribute::*;
    Ok(CuKernel {
        function,
        name: name.to_string(),
        max_threads: u32::try_from(attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?).unwrap_or(0),
        static_shared: usize::try_from(attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?).unwrap_or(0),
    })
}
