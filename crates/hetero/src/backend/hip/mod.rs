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

/// `cubecl-hip-sys`'s bindings, with the functions called per operation
/// resolved once.
///
/// The bindings look each symbol up in the HIP library (`dlsym`) at every
/// call: about 0.1 µs a call, in tables that every thread reads. Here the
/// functions called per operation are looked up once, in the library the
/// bindings loaded, and called through the pointer, as a program linked
/// against `libamdhip64` calls them; every other item is the bindings' own.
/// Code that calls HIP next to hetero can use this module in place of
/// `cubecl_hip_sys` (the bench's raw HIP path does).
pub mod ffi {
    use std::ffi::{c_int, c_uint, c_void};
    use std::sync::OnceLock;

    pub use cubecl_hip_sys::*;

    /// Declares the resolved functions, each with the C signature of the
    /// binding of the same name.
    macro_rules! resolved {
        ($($name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {
            /// Pointers to the resolved functions.
            #[allow(non_snake_case)]
            struct Table {
                $($name: unsafe extern "C" fn($($ty),*) -> hipError_t,)*
            }

            impl Table {
                /// The bindings themselves: the fallback when a function
                /// cannot be resolved, and the check that each signature
                /// here is the binding's (a function item coerces to the
                /// field's pointer type only when they agree).
                fn bindings() -> Self {
                    Self { $($name: cubecl_hip_sys::$name,)* }
                }

                /// Every function from `library`, or `None` when one is missing.
                #[cfg(unix)]
                fn resolve(library: &libloading::os::unix::Library) -> Option<Self> {
                    Some(Self {
                        $($name: {
                            let name = concat!(stringify!($name), "\0").as_bytes();
                            // SAFETY: the symbol is the HIP runtime's function of
                            // that name, whose C signature is the field's type
                            // (checked against the bindings by `bindings`).
                            *unsafe { library.get::<unsafe extern "C" fn($($ty),*) -> hipError_t>(name) }.ok()?
                        },)*
                    })
                }
            }

            $(
                /// As the binding of the same name, through the pointer resolved once.
                ///
                /// # Safety
                /// As the HIP function of that name.
                #[inline]
                #[allow(non_snake_case, clippy::too_many_arguments)]
                pub unsafe fn $name($($arg: $ty),*) -> hipError_t {
                    // SAFETY: the caller's contract is the HIP function's.
                    unsafe { (table().0.$name)($($arg),*) }
                }
            )*
        };
    }

    resolved! {
        hipGetDevice(device: *mut c_int);
        hipSetDevice(device: c_int);
        hipStreamCreateWithPriority(stream: *mut hipStream_t, flags: c_uint, priority: c_int);
        hipStreamDestroy(stream: hipStream_t);
        hipStreamSynchronize(stream: hipStream_t);
        hipStreamQuery(stream: hipStream_t);
        hipStreamWaitEvent(stream: hipStream_t, event: hipEvent_t, flags: c_uint);
        hipStreamWaitValue32(stream: hipStream_t, ptr: *mut c_void, value: u32, flags: c_uint, mask: u32);
        hipEventCreateWithFlags(event: *mut hipEvent_t, flags: c_uint);
        hipEventDestroy(event: hipEvent_t);
        hipEventRecord(event: hipEvent_t, stream: hipStream_t);
        hipEventQuery(event: hipEvent_t);
        hipEventSynchronize(event: hipEvent_t);
        hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t);
        hipMalloc(ptr: *mut *mut c_void, size: usize);
        hipFree(ptr: *mut c_void);
        hipMallocAsync(ptr: *mut *mut c_void, size: usize, stream: hipStream_t);
        hipFreeAsync(ptr: *mut c_void, stream: hipStream_t);
        hipHostMalloc(ptr: *mut *mut c_void, size: usize, flags: c_uint);
        hipHostFree(ptr: *mut c_void);
        hipHostGetDevicePointer(device: *mut *mut c_void, host: *mut c_void, flags: c_uint);
        hipMemcpyHtoDAsync(dst: hipDeviceptr_t, src: *const c_void, bytes: usize, stream: hipStream_t);
        hipMemcpyDtoHAsync(dst: *mut c_void, src: hipDeviceptr_t, bytes: usize, stream: hipStream_t);
        hipMemcpyDtoDAsync(dst: hipDeviceptr_t, src: hipDeviceptr_t, bytes: usize, stream: hipStream_t);
        hipMemsetD32Async(dst: hipDeviceptr_t, value: c_int, count: usize, stream: hipStream_t);
        hipMemcpyPeerAsync(
            dst: *mut c_void,
            dst_device: c_int,
            src: *const c_void,
            src_device: c_int,
            bytes: usize,
            stream: hipStream_t,
        );
        hipModuleLaunchKernel(
            function: hipFunction_t,
            grid_x: c_uint,
            grid_y: c_uint,
            grid_z: c_uint,
            block_x: c_uint,
            block_y: c_uint,
            block_z: c_uint,
            shared_bytes: c_uint,
            stream: hipStream_t,
            params: *mut *mut c_void,
            extra: *mut *mut c_void,
        );
    }

    /// Whether the functions were resolved once: `false` when they could
    /// not be (no HIP library loaded, a missing symbol, not Unix), so that
    /// each call goes through the bindings' lookup.
    pub fn resolved() -> bool {
        table().1
    }

    /// The resolved functions, or the bindings where they cannot be
    /// resolved, and which of the two.
    fn table() -> &'static (Table, bool) {
        static TABLE: OnceLock<(Table, bool)> = OnceLock::new();
        TABLE.get_or_init(|| {
            #[cfg(unix)]
            if let Some(library) = loaded()
                && let Some(table) = Table::resolve(&library)
            {
                // The pointers must outlive every call: the library stays
                // open for the process's life (the bindings keep it open
                // too, in a static).
                std::mem::forget(library);
                return (table, true);
            }
            (Table::bindings(), false)
        })
    }

    /// The HIP library the bindings loaded, found as they find it:
    /// `libamdhip64.so` (or `.so.1`, `.so.0`) in `$ROCM_PATH/lib`,
    /// `$ROCM_PATH`, `$HIP_PATH/lib`, `$HIP_PATH`, then on the library path.
    /// Only a library already loaded is opened (`RTLD_NOLOAD`), so no second
    /// runtime ever comes in.
    #[cfg(unix)]
    fn loaded() -> Option<libloading::os::unix::Library> {
        if !is_available() {
            return None;
        }
        let roots = ["ROCM_PATH", "HIP_PATH"].into_iter().filter_map(std::env::var_os).map(std::path::PathBuf::from);
        let folders = roots.flat_map(|root| [root.join("lib"), root]).map(Some).chain([None]);
        let names = ["libamdhip64.so", "libamdhip64.so.1", "libamdhip64.so.0"];
        for folder in folders {
            for name in names {
                let path = folder.as_ref().map_or_else(|| name.into(), |f| f.join(name));
                // SAFETY: RTLD_NOLOAD opens only a library already loaded (the
                // bindings loaded it, running its initialisers); nothing runs.
                let opened = unsafe {
                    libloading::os::unix::Library::open(
                        Some(&path),
                        libc::RTLD_NOLOAD | libloading::os::unix::RTLD_LAZY,
                    )
                };
                if let Ok(library) = opened {
                    return Some(library);
                }
            }
        }
        None
    }
}
