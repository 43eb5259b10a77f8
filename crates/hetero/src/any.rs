//! Run-time backend choice: [`AnyDevice`] over the compiled-in backends, and
//! discovery of every usable device.

use enum_dispatch::enum_dispatch;

#[cfg(feature = "host")]
use crate::backend::host::HostDevice;
use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};

/// A device of any compiled-in backend. Generic code written over
/// `D: Device` runs on it unchanged; each call dispatches with a `match`.
#[enum_dispatch(Device)]
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyDevice {
    /// The embedded CPU backend.
    #[cfg(feature = "host")]
    Host(HostDevice),
}

/// Backends compiled into this build, in [`Backend::ALL`] order.
pub fn compiled_backends() -> Vec<Backend> {
    Backend::ALL.into_iter().filter(|&b| is_compiled(b)).collect()
}

/// `true` when `backend`'s cargo feature is enabled in this build.
pub fn is_compiled(backend: Backend) -> bool {
    match backend {
        Backend::Host => cfg!(feature = "host"),
        Backend::OpenCl | Backend::Cuda | Backend::Hip => false,
    }
}

/// Every device of `backend`, or why there is none: the backend is not
/// compiled in, or its runtime is missing ([`ErrorKind::Unavailable`]).
pub fn backend_devices(backend: Backend) -> Result<Vec<AnyDevice>> {
    match backend {
        #[cfg(feature = "host")]
        Backend::Host => Ok(vec![AnyDevice::Host(HostDevice::new())]),
        other => Err(Error::new(
            other,
            "backend_devices",
            ErrorKind::Unavailable,
            format!("the {other} backend is not compiled into this build (cargo feature `{other}` of hetero)"),
        )),
    }
}

/// What [`devices`] found.
#[derive(Debug)]
pub struct Discovery {
    /// Usable devices, grouped by backend in [`Backend::ALL`] order.
    pub devices: Vec<AnyDevice>,
    /// One error per compiled-in backend that has no usable runtime or device.
    pub unavailable: Vec<Error>,
}

/// Every usable device of every compiled-in backend. A backend whose runtime
/// is missing is listed in [`Discovery::unavailable`] with the reason.
pub fn devices() -> Discovery {
    let mut found = Discovery { devices: Vec::new(), unavailable: Vec::new() };
    for backend in compiled_backends() {
        match backend_devices(backend) {
            Ok(list) if list.is_empty() => found.unavailable.push(Error::new(
                backend,
                "devices",
                ErrorKind::Unavailable,
                "the runtime loaded but reports no device",
            )),
            Ok(list) => found.devices.extend(list),
            Err(e) => found.unavailable.push(e),
        }
    }
    found
}
