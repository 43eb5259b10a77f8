//! The OpenCL backend (feature `opencl`), through `opencl3`.
//!
//! `libOpenCL.so.1` (an ICD loader) is loaded at run time; every device of
//! every platform it lists becomes an [`OpenClDevice`] with its own
//! context. A platform that fails to initialise is reported and the others
//! still work. PoCL gives a real OpenCL on CPUs (CI); vendor drivers give
//! GPUs. Streams are in-order profiling queues, events are markers,
//! stream-wait is a barrier with a wait list, pinned memory is a mapped
//! `CL_MEM_ALLOC_HOST_PTR` buffer.

mod device;
mod error;
mod event;
mod graph;
mod memory;
mod module;
mod stream;

pub use device::OpenClDevice;

use std::sync::{Mutex, PoisonError};

use opencl3::device::{CL_DEVICE_TYPE_ALL, Device as ClDevice};
use opencl3::platform::get_platforms;

use crate::error::{Error, ErrorKind};

/// Every device of every platform, and an error per platform or device that failed.
pub(crate) fn discover() -> (Vec<OpenClDevice>, Vec<Error>) {
    // Discovery runs one thread at a time: concurrent first calls into the
    // ICD loader and PoCL were seen to list no platform and to crash.
    static DISCOVERY: Mutex<()> = Mutex::new(());
    let _serial = DISCOVERY.lock().unwrap_or_else(PoisonError::into_inner);
    let platforms = match get_platforms() {
        Ok(p) => p,
        Err(e) if e.0 == error::RUNTIME_MISSING => {
            let searched =
                std::env::var("OPENCL_DYLIB_PATH").map_or(String::new(), |p| format!(" and in OPENCL_DYLIB_PATH={p}"));
            return (
                Vec::new(),
                vec![error::error(
                    "load libOpenCL.so.1",
                    ErrorKind::Unavailable,
                    format!(
                        "no OpenCL ICD loader: libOpenCL.so.1 not found on the library path{searched}; install one with a driver (e.g. `apt-get install ocl-icd-libopencl1 pocl-opencl-icd`)"
                    ),
                )],
            );
        }
        Err(e) => {
            let mut err = error::cl_error("clGetPlatformIDs", e.0).with_kind(ErrorKind::Unavailable);
            err.message = format!(
                "{}: the ICD loader found no OpenCL platform (no driver registered in /etc/OpenCL/vendors or OCL_ICD_VENDORS)",
                err.message
            );
            return (Vec::new(), vec![err]);
        }
    };
    let mut devices = Vec::new();
    let mut failures = Vec::new();
    for platform in platforms {
        let name = platform.name().unwrap_or_else(|_| "unnamed platform".to_string());
        let version = platform.version().unwrap_or_default();
        let label = format!("{name} / {version}");
        let ids = match platform.get_devices(CL_DEVICE_TYPE_ALL) {
            Ok(ids) => ids,
            Err(e) => {
                let mut err = error::cl_error("clGetDeviceIDs", e.0).with_kind(ErrorKind::Unavailable);
                err.message = format!("platform `{label}`: {}", err.message);
                failures.push(err);
                continue;
            }
        };
        for id in ids {
            match OpenClDevice::new(ClDevice::new(id), label.clone(), devices.len()) {
                Ok(device) => devices.push(device),
                Err(mut err) => {
                    err.message = format!("platform `{label}`: {}", err.message);
                    failures.push(err);
                }
            }
        }
    }
    (devices, failures)
}
