//! The OpenCL backend (feature `opencl`), through `opencl3`.
//!
//! `libOpenCL.so.1` (an ICD loader) is loaded at run time; every device of
//! every platform it lists becomes an [`OpenClDevice`]. How the devices of
//! a platform get contexts is [`CONTEXT_ENV`]'s choice: in one shared
//! context a peer copy is one copy within it (the driver choosing the
//! route), in a context each hetero stages it through host memory. A
//! platform that fails to initialise is reported and the others still
//! work. PoCL gives a real OpenCL on CPUs (CI); vendor drivers give
//! GPUs. Streams are in-order profiling queues, events are markers,
//! stream-wait is a barrier with a wait list, pinned memory is a mapped
//! `CL_MEM_ALLOC_HOST_PTR` buffer.

mod bridge;
mod device;
mod error;
mod event;
mod graph;
mod memory;
mod module;
mod stream;

pub use device::OpenClDevice;

use std::sync::{Arc, Mutex, PoisonError};

use opencl3::context::Context;
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
        let shared = match shared_context(&name, &ids) {
            Ok(shared) => shared,
            Err(err) => {
                failures.push(err);
                continue;
            }
        };
        for id in ids {
            match OpenClDevice::new(ClDevice::new(id), label.clone(), devices.len(), shared.clone()) {
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

/// Chooses how the devices of a platform get their contexts: `shared` (one
/// for them all), `device` (one each) or `auto` (the default: shared,
/// except on NVIDIA's OpenCL, whose copies between devices of one context
/// move whole buffers through the host: the split wave took 9410 ms that
/// way on two H200s against 741 ms with hetero staging the rows copied;
/// see `docs/results/multi-device-h200x2`).
pub const CONTEXT_ENV: &str = "HETERO_OPENCL_CONTEXT";

/// One context for `ids`, the devices of platform `name`, where there are
/// two or more and [`CONTEXT_ENV`] allows it; `None` (a context each) where
/// it does not, or where the driver refuses one for them all or will not
/// build a program for one of them. A value of the variable other than
/// `auto`, `shared` or `device` is an error naming them.
fn shared_context(name: &str, ids: &[opencl3::types::cl_device_id]) -> Result<Option<Arc<Context>>, Error> {
    match std::env::var(CONTEXT_ENV).as_deref() {
        Err(_) | Ok("auto") if name.to_ascii_uppercase().contains("NVIDIA") => return Ok(None),
        Err(_) | Ok("auto") | Ok("shared") => {}
        Ok("device") => return Ok(None),
        Ok(other) => {
            return Err(error::error(
                "discover",
                ErrorKind::Config,
                format!(
                    "{CONTEXT_ENV}={other:?}: give `auto` (the default), `shared` (one context a platform) or `device` (one a device)"
                ),
            ));
        }
    }
    if ids.len() < 2 {
        return Ok(None);
    }
    let Ok(context) = Context::from_devices(ids, &[], None, std::ptr::null_mut()) else { return Ok(None) };
    Ok(builds_per_device(&context, ids).then(|| Arc::new(context)))
}

/// Whether a program of `context` built for one of its devices gives a
/// kernel on each device of `ids` (each device builds its own): how hetero
/// uses a shared context, asked of the driver once before relying on it.
fn builds_per_device(context: &Context, ids: &[opencl3::types::cl_device_id]) -> bool {
    const PROBE: &str = "__kernel void hetero_probe(__global int* x) { x[0] = 1; }";
    ids.iter().all(|&id| {
        let Ok(program) = opencl3::program::Program::create_from_source(context, PROBE) else { return false };
        module::build_for(&program, id, "-cl-std=CL1.2").is_ok()
            && opencl3::kernel::Kernel::create(&program, "hetero_probe").is_ok()
    })
}
