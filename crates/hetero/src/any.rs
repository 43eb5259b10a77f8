//! Run-time backend choice: [`AnyDevice`] over the compiled-in backends, and
//! discovery of every usable device.

use enum_dispatch::enum_dispatch;

#[cfg(feature = "cuda")]
use crate::backend::cuda::CudaDevice;
#[cfg(feature = "hip")]
use crate::backend::hip::HipDevice;
#[cfg(feature = "host")]
use crate::backend::host::HostDevice;
#[cfg(feature = "opencl")]
use crate::backend::opencl::OpenClDevice;
use crate::device::{Backend, Device};
// The names of the trait's signatures, for the `impl Device for AnyDevice`
// that enum_dispatch writes here (see the order of modules in lib.rs).
#[allow(unused_imports)]
use crate::device::{
    AllocId, DeviceInfo, DeviceRange, EventId, GraphId, GraphNode, KernelArg, KernelId, KernelLimits, LaunchConfig,
    LiveHandles, ModuleId, PeerRange, PeerRoute, RawMemory, RawStream, Release, StreamFlags, StreamId,
};
use crate::error::{Error, ErrorKind, Result};
#[allow(unused_imports)]
use std::ptr::NonNull;

/// A device of any compiled-in backend. Generic code written over
/// `D: Device` runs on it unchanged; each call dispatches with a `match`.
#[enum_dispatch(Device)]
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyDevice {
    /// The embedded CPU backend.
    #[cfg(feature = "host")]
    #[cfg_attr(docsrs, doc(cfg(feature = "host")))]
    Host(HostDevice),
    /// An OpenCL device.
    #[cfg(feature = "opencl")]
    #[cfg_attr(docsrs, doc(cfg(feature = "opencl")))]
    OpenCl(OpenClDevice),
    /// A CUDA device.
    #[cfg(feature = "cuda")]
    #[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
    Cuda(CudaDevice),
    /// A HIP device.
    #[cfg(feature = "hip")]
    #[cfg_attr(docsrs, doc(cfg(feature = "hip")))]
    Hip(HipDevice),
}

/// Backends compiled into this build, in [`Backend::ALL`] order.
pub fn compiled_backends() -> Vec<Backend> {
    Backend::ALL.into_iter().filter(|&b| is_compiled(b)).collect()
}

/// `true` when `backend`'s cargo feature is enabled in this build.
pub fn is_compiled(backend: Backend) -> bool {
    match backend {
        Backend::Host => cfg!(feature = "host"),
        Backend::OpenCl => cfg!(feature = "opencl"),
        Backend::Cuda => cfg!(feature = "cuda"),
        Backend::Hip => cfg!(feature = "hip"),
    }
}

/// What a search for devices found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Usable devices, grouped by backend in [`Backend::ALL`] order.
    pub devices: Vec<AnyDevice>,
    /// Why a backend, platform or device could not be used
    /// ([`ErrorKind::Unavailable`] when a runtime is missing).
    pub unavailable: Vec<Error>,
}

impl Discovery {
    /// Removes and returns the device `selector` chooses; the error lists
    /// the devices there are (or why there are none).
    pub fn take(&mut self, selector: &crate::DeviceSelector) -> std::result::Result<AnyDevice, String> {
        if self.devices.is_empty() {
            let reasons: Vec<String> = self.unavailable.iter().map(ToString::to_string).collect();
            return Err(if reasons.is_empty() { "no device was found".to_string() } else { reasons.join("; ") });
        }
        let infos: Vec<&crate::DeviceInfo> = self.devices.iter().map(Device::info).collect();
        let index = selector.position(&infos)?;
        Ok(self.devices.remove(index))
    }

    /// Removes and returns the devices `list` chooses, in its order; the
    /// error lists the devices there are (or why there are none).
    pub fn take_list(&mut self, list: &crate::DeviceList) -> std::result::Result<Vec<AnyDevice>, String> {
        if self.devices.is_empty() {
            return self.take(&crate::DeviceSelector::default()).map(|d| vec![d]);
        }
        let infos: Vec<&crate::DeviceInfo> = self.devices.iter().map(Device::info).collect();
        let positions = list.positions(&infos)?;
        let mut slots: Vec<Option<AnyDevice>> = std::mem::take(&mut self.devices).into_iter().map(Some).collect();
        let chosen = positions.iter().filter_map(|&i| slots.get_mut(i).and_then(Option::take)).collect();
        self.devices = slots.into_iter().flatten().collect();
        Ok(chosen)
    }
}

/// Environment variable: how many devices the host backend exposes
/// (default 1), each with its own streams and workers, so that code for a
/// node's several devices runs on a CPU.
pub const HOST_DEVICES_ENV: &str = "HETERO_HOST_DEVICES";

/// Most devices `HETERO_HOST_DEVICES` may ask for.
pub const MAX_HOST_DEVICES: usize = 64;

/// The number of host devices `HETERO_HOST_DEVICES` asks for: 1 when it is
/// unset or empty; a `Config` error naming the value when it is not a
/// number from 1 to [`MAX_HOST_DEVICES`].
#[cfg(feature = "host")]
fn host_devices() -> Result<usize> {
    let Ok(value) = std::env::var(HOST_DEVICES_ENV) else { return Ok(1) };
    if value.trim().is_empty() {
        return Ok(1);
    }
    match value.trim().parse::<usize>() {
        Ok(n @ 1..=MAX_HOST_DEVICES) => Ok(n),
        _ => Err(Error::new(
            Backend::Host,
            "discover",
            ErrorKind::Config,
            format!("{HOST_DEVICES_ENV}={value:?}: expected a number of host devices from 1 to {MAX_HOST_DEVICES}"),
        )),
    }
}

/// Every device of `backend`, and every failure met on the way: a backend
/// that is not compiled in, a missing runtime, a platform that failed to
/// initialise (the others are still listed).
pub fn discover(backend: Backend) -> Discovery {
    let mut found = Discovery::default();
    match backend {
        #[cfg(feature = "host")]
        Backend::Host => match host_devices() {
            Ok(count) => found.devices.extend((0..count).map(|i| AnyDevice::Host(HostDevice::with_ordinal(i)))),
            Err(e) => found.unavailable.push(e),
        },
        #[cfg(feature = "opencl")]
        Backend::OpenCl => {
            let (devices, failures) = crate::backend::opencl::discover();
            found.devices.extend(devices.into_iter().map(AnyDevice::OpenCl));
            found.unavailable = failures;
        }
        #[cfg(feature = "cuda")]
        Backend::Cuda => {
            let (devices, failures) = crate::backend::cuda::discover();
            found.devices.extend(devices.into_iter().map(AnyDevice::Cuda));
            found.unavailable = failures;
        }
        #[cfg(feature = "hip")]
        Backend::Hip => {
            let (devices, failures) = crate::backend::hip::discover();
            found.devices.extend(devices.into_iter().map(AnyDevice::Hip));
            found.unavailable = failures;
        }
        #[allow(unreachable_patterns)] // reachable when a backend feature is off
        other => found.unavailable.push(Error::new(
            other,
            "discover",
            ErrorKind::Unavailable,
            format!("the {other} backend is not compiled into this build (cargo feature `{other}` of hetero)"),
        )),
    }
    if found.devices.is_empty() && found.unavailable.is_empty() {
        found.unavailable.push(Error::new(
            backend,
            "discover",
            ErrorKind::Unavailable,
            "the runtime reports no device",
        ));
    }
    found
}

/// Every device of `backend`, or the first reason there is none.
pub fn backend_devices(backend: Backend) -> Result<Vec<AnyDevice>> {
    let mut found = discover(backend);
    if found.devices.is_empty() {
        return Err(found.unavailable.remove(0));
    }
    Ok(found.devices)
}

/// The order [`best_device`] tries the backends in: the GPU runtimes
/// first, the host last.
pub const PREFERENCE: [Backend; 4] = [Backend::Cuda, Backend::Hip, Backend::OpenCl, Backend::Host];

/// The device to use when any will do: the first device of the first
/// compiled-in backend usable here, in [`PREFERENCE`] order (CUDA, HIP,
/// OpenCL, then the host). The error names every backend's reason when
/// none is usable (only possible without the `host` feature).
///
/// ```
/// let ctx = hetero::Context::new(hetero::best_device()?);
/// println!("running on {}", ctx.info().name);
/// # Ok::<(), hetero::Error>(())
/// ```
pub fn best_device() -> Result<AnyDevice> {
    let mut reasons = Vec::new();
    for backend in PREFERENCE.into_iter().filter(|&b| is_compiled(b)) {
        let mut found = discover(backend);
        if !found.devices.is_empty() {
            return Ok(found.devices.remove(0));
        }
        reasons.extend(found.unavailable.into_iter().map(|e| e.to_string()));
    }
    if reasons.is_empty() {
        reasons.push("no backend is compiled in (cargo features host, opencl, cuda, hip of hetero)".into());
    }
    Err(Error::new(
        Backend::Host,
        "best_device",
        ErrorKind::Unavailable,
        format!("no usable device: {}", reasons.join("; ")),
    ))
}

/// Every usable device of every compiled-in backend, with the reason for
/// each backend, platform or device that could not be used.
pub fn devices() -> Discovery {
    let mut all = Discovery::default();
    for backend in compiled_backends() {
        let found = discover(backend);
        all.devices.extend(found.devices);
        all.unavailable.extend(found.unavailable);
    }
    all
}
