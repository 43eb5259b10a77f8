//! DLPack capsules both ways: `from_dlpack` takes any DLPack array in
//! without a copy, `Array.__dlpack__` hands one out.
//!
//! The handshake is the Array API's: the consumer passes its stream to the
//! producer's `__dlpack__`, and the producer makes that stream wait for its
//! own work with an event. A capsule is named `dltensor_versioned` until a
//! consumer takes the tensor and renames it `used_dltensor_versioned`; a
//! capsule dropped with its first name still owns the tensor and calls its
//! deleter.

use std::ffi::{CStr, c_void};
use std::ptr::NonNull;
use std::sync::Arc;

use hetero::dlpack::{self, DLManagedTensorVersioned, Element, device_type};
use hetero::{Backend, Context, RawStream, Release, Stream};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::array::{Array, Inner, Named, Typed, with_typed};
use crate::devices::{Handle, handle};
use crate::to_py;

const NAME: &CStr = c"dltensor_versioned";
const USED: &CStr = c"used_dltensor_versioned";

/// The device a DLPack `(type, index)` names, as the module's handle.
fn device_of(device: (i32, i32)) -> PyResult<Arc<Handle>> {
    let (kind, index) = device;
    let ordinal = usize::try_from(index).map_err(|_| PyValueError::new_err(format!("DLPack device index {index}")))?;
    let backend = match kind {
        device_type::CPU | device_type::CUDA_HOST => return handle(Backend::Host, 0),
        device_type::CUDA => Backend::Cuda,
        device_type::ROCM => Backend::Hip,
        device_type::OPENCL => Backend::OpenCl,
        other => return Err(PyBufferError::new_err(format!("hetero has no backend for DLPack device type {other}"))),
    };
    handle(backend, ordinal)
}

/// Takes the DLPack array `x` in as a hetero array, without a copy: the
/// producer orders its pending work before the module's stream (no host
/// wait). Arrays of `int32`, `uint32`, `int64`, `uint64`, `float32` and
/// `float64`, compact and writable, are taken; anything else is refused
/// with a `HeteroError` that says why.
#[pyfunction]
pub(crate) fn from_dlpack(py: Python<'_>, x: &Bound<'_, PyAny>) -> PyResult<Array> {
    if let Ok(array) = x.cast::<Array>() {
        return Ok(Array { inner: Arc::clone(&array.get().inner) });
    }
    let device: (i32, i32) = x.call_method0("__dlpack_device__")?.extract()?;
    let handle = device_of(device)?;
    let stream = handle.stream.raw().ok().map(|s| s.0 as isize);
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("stream", stream)?;
    kwargs.set_item("max_version", (dlpack::DLPACK_MAJOR_VERSION, dlpack::DLPACK_MINOR_VERSION))?;
    let capsule = x.call_method("__dlpack__", (), Some(&kwargs))?;
    let tensor = take_capsule(py, &capsule)?;
    let on = if stream.is_some() { Some(&handle.stream) } else { None };
    let ctx = &handle.ctx;
    let imported = py.detach(move || {
        let taken = tensor; // the whole `Taken`, which may cross threads
        // SAFETY: ownership of the tensor passed to this call (the capsule
        // was renamed); the producer ordered its work before the module's
        // stream (the handshake), or completed it where there are no streams.
        unsafe { import(ctx, taken.0, on) }
    });
    let (typed, shape) = imported.map_err(to_py)?;
    Ok(Array { inner: Inner::new(handle, typed, shape) })
}

/// A tensor pointer that may cross into [`Python::detach`]; its owner is
/// the call that took it from its capsule.
struct Taken(NonNull<DLManagedTensorVersioned>);
// SAFETY: a DLPack tensor may be used and deleted from any thread.
unsafe impl Send for Taken {}

/// The tensor of a `dltensor_versioned` capsule, taken from it (the
/// capsule is renamed, so its destructor leaves the tensor alone).
fn take_capsule(py: Python<'_>, capsule: &Bound<'_, PyAny>) -> PyResult<Taken> {
    let raw = capsule.as_ptr();
    // SAFETY: `raw` is a live object; a capsule's name is checked first.
    if unsafe { pyo3::ffi::PyCapsule_IsValid(raw, NAME.as_ptr()) } == 0 {
        return Err(PyTypeError::new_err(
            "the producer gave no `dltensor_versioned` capsule (DLPack 1.0 or later is needed)",
        ));
    }
    // SAFETY: a valid capsule of that name.
    let pointer = unsafe { pyo3::ffi::PyCapsule_GetPointer(raw, NAME.as_ptr()) };
    let tensor = NonNull::new(pointer.cast::<DLManagedTensorVersioned>())
        .ok_or_else(|| PyErr::take(py).unwrap_or_else(|| PyTypeError::new_err("an empty DLPack capsule")))?;
    // SAFETY: a valid capsule of that name; renamed, it no longer owns the tensor.
    if unsafe { pyo3::ffi::PyCapsule_SetName(raw, USED.as_ptr()) } != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(Taken(tensor))
}

/// The tensor as the variant its DLPack type names; any other type is
/// refused, the tensor deleted.
///
/// # Safety
/// As [`dlpack::import`].
unsafe fn import(
    ctx: &Context,
    tensor: NonNull<DLManagedTensorVersioned>,
    stream: Option<&Stream>,
) -> hetero::Result<(Typed, Vec<i64>)> {
    // SAFETY: the caller's contract: a valid tensor.
    let dtype = unsafe { tensor.as_ref().dl_tensor.dtype };
    macro_rules! take {
        ($($t:ty),*) => {$(
            if dtype == <$t as Element>::DTYPE {
                // SAFETY: the caller's contract.
                let imported = unsafe { dlpack::import::<$t, _>(ctx, tensor, stream)? };
                return Ok((<$t as Named>::wrap(imported.buffer), imported.shape));
            }
        )*};
    }
    take!(i32, u32, i64, u64, f32, f64);
    // SAFETY: the caller owns the tensor.
    unsafe { delete(tensor) };
    let message = format!("a DLPack array of type {dtype:?} is none of the module's element types");
    Err(hetero::Error::new(ctx.info().backend, "from_dlpack", hetero::ErrorKind::Unsupported, message))
}

/// What `Array.__dlpack__` returns: a capsule of a tensor over the array's
/// memory that keeps the array alive until the consumer's deleter call.
pub(crate) fn export(
    py: Python<'_>,
    inner: &Arc<Inner>,
    stream: Option<isize>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(i32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    if max_version.is_none_or(|(major, _)| major < dlpack::DLPACK_MAJOR_VERSION) {
        return Err(PyBufferError::new_err(
            "hetero exports DLPack 1.x tensors only: pass max_version=(1, 0) or later (NumPy 2.1, PyTorch 2.4 and CuPy 13.3 on do)",
        ));
    }
    let info = inner.handle.ctx.info();
    let ours = dlpack::dl_device(info.backend, info.ordinal);
    if dl_device.is_some_and(|(kind, index)| (kind, index) != (ours.device_type, ours.device_id)) {
        return Err(PyBufferError::new_err("hetero exports an array on its own device only (copying is not offered)"));
    }
    if copy == Some(true) {
        return Err(PyBufferError::new_err("hetero exports without a copy only (copy=True is refused)"));
    }
    // The consumer's stream: -1 and None ask for no stream ordering, so the
    // export waits on the host instead; the host backend has no streams.
    let consumer = match stream {
        None | Some(-1) => None,
        Some(_) if info.backend == Backend::Host => {
            return Err(PyBufferError::new_err("the host backend takes stream=None"));
        }
        Some(raw) => {
            // SAFETY: the consumer passes its live stream of this device,
            // which outlives the exchange (the Array API's contract).
            let adopted = unsafe { inner.handle.ctx.adopt_stream(RawStream(raw as *mut c_void)) };
            Some(Arc::new(adopted.map_err(to_py)?))
        }
    };
    let owner = Arc::clone(inner);
    let tensor = py.detach(move || share(owner, consumer)).map_err(to_py)?;
    // SAFETY: the tensor is valid until its deleter runs; the capsule owns
    // it until a consumer renames it (see `delete_unused`).
    let capsule = unsafe { pyo3::ffi::PyCapsule_New(tensor.0.as_ptr().cast(), NAME.as_ptr(), Some(delete_unused)) };
    if capsule.is_null() {
        // SAFETY: nobody else has the tensor: delete it.
        unsafe { delete(tensor.0) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, just made.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}

/// A tensor over `owner`'s memory: the consumer's stream waits for the
/// array's queued work (or the host does, without one); the tensor's
/// buffer is a second view of the memory whose release drops `owner`.
fn share(owner: Arc<Inner>, consumer: Option<Arc<Stream>>) -> hetero::Result<Taken> {
    let shape = owner.shape.clone();
    let ctx = owner.handle.ctx.clone();
    let mut buffer = owner.buffer();
    with_typed!(&mut *buffer, b, T => {
        match &consumer {
            Some(stream) => stream.acquire(b)?,
            None => b.wait_idle()?,
        }
        let (raw, len) = (b.raw_memory()?, b.len());
        let keep = Arc::clone(&owner);
        // SAFETY: the memory is `owner`'s buffer, which `keep` holds until
        // the view's release; the consumer uses it after the waits above.
        let view = unsafe { ctx.adopt_buffer::<T>(raw, len, Some(Release::new(move || drop(keep)))) }?;
        drop(buffer);
        dlpack::export(view, &shape, consumer).map(Taken)
    })
}

/// Deletes a tensor through its deleter.
///
/// # Safety
/// The caller owns `tensor`, which is valid.
unsafe fn delete(tensor: NonNull<DLManagedTensorVersioned>) {
    // SAFETY: the caller's contract; the deleter runs once.
    unsafe {
        if let Some(deleter) = tensor.as_ref().deleter {
            deleter(tensor.as_ptr());
        }
    }
}

/// The destructor of an exported capsule: a capsule that still has its
/// first name was never consumed and deletes its tensor.
unsafe extern "C" fn delete_unused(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by the interpreter with the live capsule, holding it.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 0 {
            return;
        }
        let pointer = pyo3::ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr());
        if let Some(tensor) = NonNull::new(pointer.cast::<DLManagedTensorVersioned>()) {
            delete(tensor);
        }
    }
}
