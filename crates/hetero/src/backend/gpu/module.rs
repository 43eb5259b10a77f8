//! Built modules of the shared GPU device and their kernels.
//!
//! Modules live in the device (CUDA: its primary context, shared by every
//! hetero device of the ordinal), so one cache per runtime serves the whole
//! process, keyed by device and source; cached modules are never unloaded.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, PoisonError};

use super::runtime::{GpuModule, Runtime};
use crate::device::KernelLimits;
use crate::device::{BuildOptions, DeviceInfo};
use crate::error::{Error, ErrorKind, Result};

// SAFETY: as above.
unsafe impl<R: Runtime> Send for GpuKernel<R> {}
// SAFETY: as above.
unsafe impl<R: Runtime> Sync for GpuKernel<R> {}

/// NVRTC's flags for IEEE-754 as written ([`BuildOptions::deterministic`]):
/// no fused multiply-adds by contraction, correctly rounded division and
/// square root, denormals kept (the last three are NVRTC's defaults,
/// stated so that no later default changes them). hiprtc on NVIDIA passes
/// them to NVRTC.
pub(crate) const STRICT_NVRTC: [&str; 4] = ["--fmad=false", "--prec-div=true", "--prec-sqrt=true", "--ftz=false"];

/// One kernel and its limits on the device.
pub(super) struct GpuKernel<R: Runtime> {
    pub(super) function: R::Function,
    pub(super) name: String,
    /// Its block limit and static shared memory from the runtime; the
    /// preferred multiple is the device's warp.
    pub(super) limits: KernelLimits,
}

/// Portable `source` as the CUDA-like runtimes compile it: after the CUDA
/// prelude, NUL-terminated.
pub(crate) fn assembled(backend: crate::device::Backend, source: &str, options: &BuildOptions) -> Result<CString> {
    let prelude = format!("{}{}", options.defines(), hetero_kernels::PRELUDE_CUDA);
    CString::new(hetero_kernels::assemble(&prelude, source))
        .map_err(|_| Error::new(backend, "compile", ErrorKind::Build, "kernel source contains a NUL byte"))
}

/// The module of `source` on the runtime's device, compiled and loaded at
/// its first use in the process under `options`. The device must be current.
pub(super) fn build<R: Runtime>(runtime: &R, source: &str, options: &BuildOptions) -> Result<Arc<GpuModule<R>>> {
    let fail = |call, message: &str| Error::new(R::BACKEND, call, ErrorKind::Build, message);
    if hetero_kernels::kernel_names(source).is_empty() {
        return Err(fail("compile", "the source declares no kernel (expected `KERNEL void name(`)"));
    }
    let mut guard = R::module_cache().0.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = guard.get_or_insert_with(HashMap::new);
    let key = (runtime.device_key(), *options, source.to_string());
    if let Some(module) = cache.get(&key) {
        return Ok(Arc::clone(module));
    }
    let full = assembled(R::BACKEND, source, options)?;
    let image = runtime.compile(&full, options)?;
    // SAFETY: the image comes from the runtime's compiler for this device,
    // which is current.
    let module = Arc::new(GpuModule(unsafe { runtime.module_load(&image) }?));
    cache.insert(key, Arc::clone(&module));
    Ok(module)
}

/// The kernel `name` of `module`, with its limits. The device must be current.
pub(super) fn kernel<R: Runtime>(
    runtime: &R,
    info: &DeviceInfo,
    module: &GpuModule<R>,
    name: &str,
) -> Result<GpuKernel<R>> {
    let c_name = CString::new(name).map_err(|_| {
        Error::new(R::BACKEND, "kernel", ErrorKind::KernelNotFound, format!("kernel name {name:?} contains a NUL byte"))
    })?;
    // SAFETY: the module is loaded on this device, which is current.
    let function = unsafe { runtime.module_function(module.0, &c_name) }.map_err(|mut e| {
        e.kind = ErrorKind::KernelNotFound;
        e.message = format!("no kernel `{name}` in the module ({})", e.message);
        e
    })?;
    // SAFETY: the function was just looked up on this device.
    let (max_threads, static_shared) = unsafe { runtime.function_limits(function) }?;
    let limits = KernelLimits::new(info, max_threads, info.warp_size, static_shared);
    Ok(GpuKernel { function, name: name.to_string(), limits })
}
