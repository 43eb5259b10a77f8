//! hiprtc compilation of the portable kernels, module loading and kernels.
//!
//! hiprtc compiles for the current device: a code object on AMD; on the
//! NVIDIA platform it is NVRTC underneath and returns PTX. Built modules
//! are cached per device for the life of the process, keyed by source.

use std::ffi::{CString, c_char};

use cubecl_hip_sys as hip;

use super::error::{check, error, rtc_error};
use crate::error::{ErrorKind, Result};

/// A loaded `hipModule_t`, never unloaded (cached for the process).
pub(super) struct HipModule(pub(super) hip::hipModule_t);

// SAFETY: module handles may be used from any thread.
unsafe impl Send for HipModule {}
// SAFETY: as above.
unsafe impl Sync for HipModule {}

/// One kernel and its limits on the device.
pub(super) struct HipKernel {
    pub(super) function: hip::hipFunction_t,
    pub(super) name: String,
    pub(super) max_threads: u32,
    pub(super) static_shared: usize,
}

// SAFETY: function handles may be used from any thread.
unsafe impl Send for HipKernel {}
// SAFETY: as above.
unsafe impl Sync for HipKernel {}

/// Compiles `source` for the current device; the error carries the hiprtc log.
pub(super) fn compile(source: &str) -> Result<Vec<c_char>> {
    if hetero_kernels::kernel_names(source).is_empty() {
        return Err(error(
            "hiprtcCompileProgram",
            ErrorKind::Build,
            "the source declares no kernel (expected `KERNEL void name(`)",
        ));
    }
    let full = hetero_kernels::assemble(hetero_kernels::PRELUDE_CUDA, source);
    let src = CString::new(full)
        .map_err(|_| error("hiprtcCreateProgram", ErrorKind::Build, "kernel source contains a NUL byte"))?;
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
    // SAFETY: program is live until destroyed below; no options.
    let compiled = unsafe { hip::hiprtcCompileProgram(program, 0, std::ptr::null()) };
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

/// Loads a compiled image on the current device.
pub(super) fn load(image: &[c_char]) -> Result<HipModule> {
    let mut module: hip::hipModule_t = std::ptr::null_mut();
    // SAFETY: image is a complete code object or NUL-terminated PTX from hiprtc.
    check("hipModuleLoadData", unsafe { hip::hipModuleLoadData(&mut module, image.as_ptr().cast()) })?;
    Ok(HipModule(module))
}

/// The kernel `name` of `module`, with its limits.
pub(super) fn kernel(module: &HipModule, name: &str) -> Result<HipKernel> {
    let c_name = CString::new(name)
        .map_err(|_| error("hipModuleGetFunction", ErrorKind::KernelNotFound, "kernel name contains a NUL byte"))?;
    let mut function: hip::hipFunction_t = std::ptr::null_mut();
    // SAFETY: module is loaded; function is a valid out-pointer.
    check("hipModuleGetFunction", unsafe { hip::hipModuleGetFunction(&mut function, module.0, c_name.as_ptr()) })
        .map_err(|mut e| {
            e.kind = ErrorKind::KernelNotFound;
            e.message = format!("no kernel `{name}` in the module ({})", e.message);
            e
        })?;
    let attribute = |attr| -> Result<i32> {
        let mut value = 0;
        // SAFETY: function is live; value is a valid out-pointer.
        check("hipFuncGetAttribute", unsafe { hip::hipFuncGetAttribute(&mut value, attr, function) })?;
        Ok(value)
    };
    Ok(HipKernel {
        function,
        name: name.to_string(),
        max_threads: u32::try_from(attribute(hip::hipFunction_attribute_HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?)
            .unwrap_or(0),
        static_shared: usize::try_from(attribute(hip::hipFunction_attribute_HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?)
            .unwrap_or(0),
    })
}
