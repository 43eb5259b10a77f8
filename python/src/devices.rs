//! The devices Python sees: one context per device, made when first used
//! and kept for the process, with its algorithms and its stream.

use std::sync::{Arc, Mutex, PoisonError};

use hetero::algorithms::Algorithms;
use hetero::{Backend, Context, Stream};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::to_py;

/// One device as the module uses it.
pub(crate) struct Handle {
    pub(crate) ctx: Context,
    pub(crate) algorithms: Algorithms,
    /// The stream every call of the module enqueues on, and the one a
    /// DLPack producer is asked to order its work before.
    pub(crate) stream: Stream,
}

/// The handles made so far.
static HANDLES: Mutex<Vec<Arc<Handle>>> = Mutex::new(Vec::new());

/// The handle of device `ordinal` of `backend`, made at its first use.
pub(crate) fn handle(backend: Backend, ordinal: usize) -> PyResult<Arc<Handle>> {
    if let Some(h) = known(backend, ordinal) {
        return Ok(h);
    }
    let mut found = hetero::discover(backend);
    let at = found.devices.iter().position(|d| hetero::Device::info(d).ordinal == ordinal);
    let Some(at) = at else {
        let why: Vec<String> = found.unavailable.iter().map(ToString::to_string).collect();
        return Err(PyValueError::new_err(format!(
            "{backend} has no device {ordinal} ({} found{}{})",
            found.devices.len(),
            if why.is_empty() { "" } else { "; " },
            why.join("; ")
        )));
    };
    keep(found.devices.swap_remove(at))
}

/// The handle made so far for device `ordinal` of `backend`.
fn known(backend: Backend, ordinal: usize) -> Option<Arc<Handle>> {
    let handles = HANDLES.lock().unwrap_or_else(PoisonError::into_inner);
    handles.iter().find(|h| h.ctx.info().backend == backend && h.ctx.info().ordinal == ordinal).cloned()
}

/// The handle of `device`: the one made before for the same device (a
/// thread may have made it meanwhile), or a new one kept from now on.
fn keep(device: hetero::AnyDevice) -> PyResult<Arc<Handle>> {
    let (backend, ordinal) = (hetero::Device::info(&device).backend, hetero::Device::info(&device).ordinal);
    let mut handles = HANDLES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(h) = handles.iter().find(|h| h.ctx.info().backend == backend && h.ctx.info().ordinal == ordinal) {
        return Ok(Arc::clone(h));
    }
    let ctx = Context::new(device);
    let handle = Arc::new(Handle { algorithms: Algorithms::new(&ctx), stream: ctx.stream().map_err(to_py)?, ctx });
    handles.push(Arc::clone(&handle));
    Ok(handle)
}

/// The backend a name gives (`host`, `opencl`, `cuda`, `hip`).
pub(crate) fn backend(name: &str) -> PyResult<Backend> {
    name.parse::<Backend>().map_err(|e| PyValueError::new_err(e.to_string()))
}

/// A device: its backend, index within the backend, and description.
#[pyclass(frozen, module = "hetero")]
pub(crate) struct Device {
    pub(crate) handle: Arc<Handle>,
}

#[pymethods]
impl Device {
    /// `host`, `opencl`, `cuda` or `hip`.
    #[getter]
    fn backend(&self) -> &'static str {
        self.handle.ctx.info().backend.name()
    }

    /// The device's index within its backend.
    #[getter]
    fn ordinal(&self) -> usize {
        self.handle.ctx.info().ordinal
    }

    /// The device's name, e.g. "NVIDIA H200".
    #[getter]
    fn name(&self) -> String {
        self.handle.ctx.info().name.clone()
    }

    /// Global memory in bytes.
    #[getter]
    fn total_memory(&self) -> u64 {
        self.handle.ctx.info().total_memory
    }

    /// The native stream the module's calls use (a `CUstream` or
    /// `hipStream_t` as an integer), for a framework to order its work
    /// with; `None` on backends without native streams.
    #[getter]
    fn stream(&self) -> Option<usize> {
        self.handle.stream.raw().ok().map(|s| s.0 as usize)
    }

    /// Waits until the module's work on this device has completed.
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let handle = Arc::clone(&self.handle);
        py.detach(move || handle.stream.synchronize()).map_err(to_py)
    }

    fn __repr__(&self) -> String {
        let info = self.handle.ctx.info();
        format!("hetero.Device({} #{}: {})", info.backend, info.ordinal, info.name)
    }
}

/// Every device that can run here: the backends compiled into the module
/// whose runtime is installed, each device of each.
#[pyfunction]
pub(crate) fn devices() -> PyResult<Vec<Device>> {
    let mut all = Vec::new();
    for backend in hetero::compiled_backends() {
        // One discovery per backend: a device with a handle already keeps it.
        for device in hetero::discover(backend).devices {
            all.push(Device { handle: keep(device)? });
        }
    }
    Ok(all)
}

/// Device `ordinal` of `backend`.
#[pyfunction]
#[pyo3(signature = (backend = "host", ordinal = 0))]
pub(crate) fn device(backend: &str, ordinal: usize) -> PyResult<Device> {
    Ok(Device { handle: handle(self::backend(backend)?, ordinal)? })
}
