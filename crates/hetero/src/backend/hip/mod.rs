//! The HIP backend (feature `hip`), through `cubecl-hip-sys`.
//!
//! ROCm's `libamdhip64.so` and `libhiprtc.so` are loaded at run time, from
//! `$ROCM_PATH/lib`, `$HIP_PATH/lib` or the library path; their absence is
//! an [`crate::ErrorKind::Unavailable`] error, checked with
//! `cubecl_hip_sys::is_available()` before any call (a missing library or
//! symbol panics inside the bindings). Nothing here assumes NVIDIA
//! behaviour: the wavefront size is read from the device. On NVIDIA GPUs
//! the same code runs through HIP's NVIDIA-platform headers (see
//! `ci/hip-nvidia/`), where hiprtc returns PTX instead of a code object.
//! The device itself is the shared [`GpuDevice`] over [`Hip`], the runtime
//! calls wrapped once in `runtime.rs`.

mod compile;
mod error;
mod runtime;

pub use runtime::Hip;

use crate::backend::gpu::GpuDevice;

/// A HIP device: the shared GPU device over the HIP runtime.
pub type HipDevice = GpuDevice<Hip>;

use cubecl_hip_sys as hip;

use crate::error::{Error, ErrorKind};

/// Every HIP device, or why there is none.
pub(crate) fn discover() -> (Vec<HipDevice>, Vec<Error>) {
    let unavailable = |call, message: String| (Vec::new(), vec![error::error(call, ErrorKind::Unavailable, message)]);
    if !hip::is_available() {
        let roots: Vec<String> = ["ROCM_PATH", "HIP_PATH"]
            .iter()
            .map(|v| format!("{v}={}", std::env::var(v).unwrap_or_else(|_| "(unset)".to_string())))
            .collect();
        return unavailable(
            "load libamdhip64",
            format!(
                "ROCm's libamdhip64.so and libhiprtc.so were not found in $ROCM_PATH/lib, $HIP_PATH/lib or the library path ({}); install ROCm or set ROCM_PATH",
                roots.join(", ")
            ),
        );
    }
    // The bindings panic on a missing symbol (an old or partial runtime):
    // report that as unavailable instead of crashing.
    let found = std::panic::catch_unwind(|| {
        // SAFETY: the libraries are loaded; hipInit may be called any number of times.
        error::check("hipInit", unsafe { hip::hipInit(0) })?;
        let mut count = 0;
        // SAFETY: count is a valid out-pointer.
        error::check("hipGetDeviceCount", unsafe { hip::hipGetDeviceCount(&mut count) })?;
        let open = |ordinal| GpuDevice::new(Hip::open(ordinal)?, ordinal);
        Ok::<_, Error>((0..usize::try_from(count).unwrap_or(0)).map(open).collect::<Vec<_>>())
    });
    crate::backend::gpu::collect_devices(crate::device::Backend::Hip, "hipInit", found)
}
