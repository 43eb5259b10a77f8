//! The HIP backend (feature `hip`), on ROCm's runtime loaded at run time.
//!
//! `ffi` loads `libamdhip64` (by the development name or the soname of
//! ROCm 7, 6 or 5) and hiprtc (its own library, or inside the runtime as
//! in ROCm 5) from `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib` or
//! the library path, and resolves every function the backend calls once;
//! `cubecl-hip-sys` gives the types and constants. A missing library or
//! function, and a runtime without a device (`hipErrorNoDevice`), are an
//! [`crate::ErrorKind::Unavailable`] error at discovery, naming the
//! library and the reason. Nothing here assumes NVIDIA behaviour: the
//! wavefront size is read from the device. On NVIDIA GPUs the same code
//! runs through HIP's NVIDIA-platform headers (see `ci/hip-nvidia/`),
//! where hiprtc returns PTX instead of a code object. The device itself
//! is the shared [`GpuDevice`] over [`Hip`], the runtime calls wrapped
//! once in `runtime.rs`.

mod compile;
mod error;
pub mod ffi;
mod runtime;

pub use runtime::Hip;

use crate::backend::gpu::GpuDevice;

/// A HIP device: the shared GPU device over the HIP runtime.
pub type HipDevice = GpuDevice<Hip>;

use ffi as hip;

use crate::error::{Error, ErrorKind};

/// Compiles kernel `source` (hetero's portable dialect) with ROCm's hiprtc
/// for the AMD GPU target `arch` (`gfx90a`, `gfx1030`, ...), without a
/// device, and returns the code object's size: the check `cargo xtask
/// hip-compile` makes of every kernel. An error names the kernel's
/// compile log, or why the runtime could not be loaded.
pub fn compile_for_target(source: &str, arch: &str, options: &crate::BuildOptions) -> crate::Result<usize> {
    let fail = |kind, message: String| error::error("hiprtcCompileProgram", kind, message);
    ffi::load().map_err(|why| fail(ErrorKind::Unavailable, why.to_string()))?;
    let full = crate::backend::gpu::module::assembled(crate::device::Backend::Hip, source, options)?;
    let option = std::ffi::CString::new(format!("--gpu-architecture={arch}"))
        .map_err(|_| fail(ErrorKind::Build, format!("target {arch:?} contains a NUL byte")))?;
    let mut flags = compile::strict_flags(options.deterministic, true)?;
    flags.push(option);
    let flags: Vec<&std::ffi::CStr> = flags.iter().map(std::ffi::CString::as_c_str).collect();
    compile::compile(&full, &flags).map(|code| code.len().saturating_sub(1))
}

/// Every HIP device, or why there is none.
pub(crate) fn discover() -> (Vec<HipDevice>, Vec<Error>) {
    let unavailable = |call, message: String| (Vec::new(), vec![error::error(call, ErrorKind::Unavailable, message)]);
    let loaded = match ffi::load() {
        Ok(loaded) => loaded,
        Err(why) => return unavailable("load libamdhip64", why.to_string()),
    };
    let mut count = 0;
    // SAFETY: the runtime is loaded; hipInit may be called any number of
    // times, and count is a valid out-pointer.
    let (init, counted) = unsafe { (hip::hipInit(0), hip::hipGetDeviceCount(&mut count)) };
    if init == hip::hipError_t_hipErrorNoDevice
        || counted == hip::hipError_t_hipErrorNoDevice
        || (counted == hip::hipError_t_hipSuccess && count == 0)
    {
        let mut version = 0;
        // SAFETY: version is a valid out-pointer.
        let version = match unsafe { hip::hipRuntimeGetVersion(&mut version) } {
            hip::hipError_t_hipSuccess => format!("HIP runtime {version}"),
            _ => "HIP runtime of unknown version".to_string(),
        };
        let reason = if counted == hip::hipError_t_hipErrorNoDevice || init == hip::hipError_t_hipErrorNoDevice {
            "hipErrorNoDevice"
        } else {
            "no devices"
        };
        let message = format!(
            "no GPU for HIP: hipGetDeviceCount reports {reason} ({version} from {}, hiprtc from {})",
            loaded.hip.display(),
            loaded.hiprtc.display()
        );
        return unavailable("hipGetDeviceCount", message);
    }
    // Every call goes through `ffi`'s resolved table, which never panics.
    let found = (|| {
        error::check("hipInit", init)?;
        error::check("hipGetDeviceCount", counted)?;
        let count = crate::backend::gpu::loader::device_count(crate::device::Backend::Hip, "hipGetDeviceCount", count)?;
        let open = |ordinal| GpuDevice::new(Hip::open(ordinal)?, ordinal);
        Ok::<_, Error>((0..count).map(open).collect::<Vec<_>>())
    })();
    crate::backend::gpu::collect_devices(crate::device::Backend::Hip, "hipInit", Ok(found))
}
