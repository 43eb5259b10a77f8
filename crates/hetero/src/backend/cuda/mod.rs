//! The CUDA backend (feature `cuda`), through `cudarc`'s driver API and NVRTC.
//!
//! `libcuda.so` and `libnvrtc.so` are loaded at run time (NVRTC from the
//! path `HETERO_NVRTC` names, where set); their absence is an
//! [`crate::ErrorKind::Unavailable`] error, checked before any call
//! (cudarc panics on a missing library). Each device works in its primary
//! context; kernels are compiled by NVRTC for the device's architecture.
//! The device itself is the shared [`GpuDevice`] over [`Cuda`], the driver
//! calls wrapped once in `runtime.rs`.

mod compile;
mod error;
mod runtime;

pub use runtime::Cuda;

use crate::backend::gpu::GpuDevice;

/// A CUDA device: the shared GPU device over the CUDA driver API.
pub type CudaDevice = GpuDevice<Cuda>;

use crate::error::{Error, ErrorKind};

/// The file names cudarc tries for `lib` that this platform's libraries
/// have, without repeats. cudarc also tries Windows-style names
/// (`cuda64_12`) with the platform's prefix and suffix everywhere; on Unix
/// they name no real library, so they are left out of the message.
fn searched(lib: &str) -> String {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    let plain = format!("{DLL_PREFIX}{lib}{DLL_SUFFIX}");
    let mut names = cudarc::get_lib_name_candidates(lib);
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| {
        let native = cfg!(windows) || *n == plain || n.strip_prefix(&plain).is_some_and(|v| v.starts_with('.'));
        native && seen.insert(n.clone())
    });
    names.join(", ")
}

/// Every CUDA device, or why there is none.
pub(crate) fn discover() -> (Vec<CudaDevice>, Vec<Error>) {
    let unavailable = |call, message: String| (Vec::new(), vec![error::error(call, ErrorKind::Unavailable, message)]);
    // SAFETY: only tries to open the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return unavailable(
            "load libcuda",
            format!(
                "the NVIDIA driver library is not installed or not on the library path (searched: {})",
                searched("cuda")
            ),
        );
    }
    if let Some(why) = compile::unavailable() {
        return unavailable("load libnvrtc", why);
    }
    // cudarc panics if the driver lacks a symbol it binds (an old driver):
    // report that as unavailable instead of crashing.
    if let Err(e) = runtime::check_driver() {
        return (Vec::new(), vec![e]);
    }
    let found = std::panic::catch_unwind(|| {
        // SAFETY: the library is present; cuInit may be called any number of times.
        error::check("cuInit", unsafe { cudarc::driver::sys::cuInit(0) })?;
        let mut count = 0;
        // SAFETY: count is a valid out-pointer.
        error::check("cuDeviceGetCount", unsafe { cudarc::driver::sys::cuDeviceGetCount(&mut count) })?;
        let count = crate::backend::gpu::loader::device_count(crate::device::Backend::Cuda, "cuDeviceGetCount", count)?;
        let open = |ordinal| GpuDevice::new(Cuda::open(ordinal)?, ordinal);
        Ok::<_, Error>((0..count).map(open).collect::<Vec<_>>())
    });
    crate::backend::gpu::collect_devices(crate::device::Backend::Cuda, "cuInit", found)
}
