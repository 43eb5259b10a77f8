//! `hetero` for Python: the devices, arrays that any DLPack library can
//! take without a copy, the device-wide algorithms on any DLPack array, and
//! the conformance run with its report as a dict.
//!
//! Every call that may wait for a device lets the interpreter go
//! ([`Python::detach`]): a DLPack deleter that hetero runs (on any thread)
//! takes the interpreter, so holding it while waiting could deadlock.

mod algorithms;
mod array;
mod conform;
mod devices;
mod exchange;

use pyo3::create_exception;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

create_exception!(
    hetero,
    HeteroError,
    PyRuntimeError,
    "A hetero call failed; the message names the backend, the call and the kind of failure."
);

/// A hetero error as a Python exception.
pub(crate) fn to_py(error: hetero::Error) -> PyErr {
    HeteroError::new_err(format!("{error} ({:?})", error.kind))
}

/// The module.
#[pymodule]
fn _hetero(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HeteroError", m.py().get_type::<HeteroError>())?;
    m.add_class::<devices::Device>()?;
    m.add_class::<array::Array>()?;
    m.add_function(wrap_pyfunction!(devices::devices, m)?)?;
    m.add_function(wrap_pyfunction!(devices::device, m)?)?;
    m.add_function(wrap_pyfunction!(exchange::from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::reduce, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::scan, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::segmented_reduce, m)?)?;
    m.add_function(wrap_pyfunction!(algorithms::sort, m)?)?;
    m.add_function(wrap_pyfunction!(conform::conform, m)?)?;
    Ok(())
}
