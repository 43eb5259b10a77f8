//! Arrays: a hetero buffer of one of the algorithms' element types, its
//! shape and its device, exported through DLPack without a copy.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hetero::DeviceBuffer;
use pyo3::prelude::*;

use crate::devices::{Device, Handle};
use crate::exchange;

/// A buffer of one of the element types the module handles.
pub(crate) enum Typed {
    I32(DeviceBuffer<i32>),
    U32(DeviceBuffer<u32>),
    I64(DeviceBuffer<i64>),
    U64(DeviceBuffer<u64>),
    F32(DeviceBuffer<f32>),
    F64(DeviceBuffer<f64>),
}

/// Runs `$body` with `$buf` bound to the typed buffer of `$typed` (an
/// expression of type `&Typed` or `&mut Typed`) and `$t` to its element
/// type, and wraps a returned buffer as the same variant when asked.
macro_rules! with_typed {
    ($typed:expr, $buf:ident, $t:ident => $body:expr) => {
        match $typed {
            $crate::array::Typed::I32($buf) => {
                type $t = i32;
                $body
            }
            $crate::array::Typed::U32($buf) => {
                type $t = u32;
                $body
            }
            $crate::array::Typed::I64($buf) => {
                type $t = i64;
                $body
            }
            $crate::array::Typed::U64($buf) => {
                type $t = u64;
                $body
            }
            $crate::array::Typed::F32($buf) => {
                type $t = f32;
                $body
            }
            $crate::array::Typed::F64($buf) => {
                type $t = f64;
                $body
            }
        }
    };
}
pub(crate) use with_typed;

/// The element types as NumPy names them.
pub(crate) trait Named {
    const NAME: &'static str;
    fn wrap(buffer: DeviceBuffer<Self>) -> Typed
    where
        Self: Sized;
}

macro_rules! named {
    ($($t:ty => $variant:ident, $name:expr);* $(;)?) => {$(
        impl Named for $t {
            const NAME: &'static str = $name;
            fn wrap(buffer: DeviceBuffer<Self>) -> Typed {
                Typed::$variant(buffer)
            }
        }
    )*};
}

named!(i32 => I32, "int32"; u32 => U32, "uint32"; i64 => I64, "int64"; u64 => U64, "uint64"; f32 => F32, "float32"; f64 => F64, "float64");

impl Typed {
    pub(crate) fn dtype(&self) -> &'static str {
        with_typed!(self, _b, T => <T as Named>::NAME)
    }
}

/// What an array holds; shared with the DLPack tensors exported from it,
/// which keep it alive until their consumers are done.
pub(crate) struct Inner {
    pub(crate) handle: Arc<Handle>,
    buffer: Mutex<Typed>,
    pub(crate) shape: Vec<i64>,
    dtype: &'static str,
}

impl Inner {
    pub(crate) fn new(handle: Arc<Handle>, buffer: Typed, shape: Vec<i64>) -> Arc<Self> {
        let dtype = buffer.dtype();
        Arc::new(Self { handle, buffer: Mutex::new(buffer), shape, dtype })
    }

    /// The buffer, locked. Only ever taken with the interpreter let go: a
    /// thread holding it may run a DLPack deleter, which takes the
    /// interpreter.
    pub(crate) fn buffer(&self) -> MutexGuard<'_, Typed> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// An array in a device's memory. `numpy.from_dlpack`, `torch.from_dlpack`
/// and `cupy.from_dlpack` take it without a copy, ordered after the work
/// hetero queued on it.
#[pyclass(frozen, module = "hetero")]
pub(crate) struct Array {
    pub(crate) inner: Arc<Inner>,
}

#[pymethods]
impl Array {
    /// The extents.
    #[getter]
    fn shape(&self) -> Vec<i64> {
        self.inner.shape.clone()
    }

    /// The element type, as NumPy names it.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.inner.dtype
    }

    /// The device the array lives on.
    #[getter]
    fn device(&self) -> Device {
        Device { handle: Arc::clone(&self.inner.handle) }
    }

    fn __len__(&self) -> usize {
        self.inner.shape.first().map_or(1, |&n| n as usize)
    }

    /// `(device type, device index)` as DLPack numbers them.
    fn __dlpack_device__(&self) -> (i32, i32) {
        let info = self.inner.handle.ctx.info();
        let device = hetero::dlpack::dl_device(info.backend, info.ordinal);
        (device.device_type, device.device_id)
    }

    /// A DLPack capsule of the array (`dltensor_versioned`). `stream` is the
    /// consumer's stream (an integer as the Array API gives it): it is
    /// made to wait for hetero's work on the array, without a host wait;
    /// with `None` (or -1) the call waits for that work on the host.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<isize>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        exchange::export(py, &self.inner, stream, max_version, dl_device, copy)
    }

    fn __repr__(&self) -> String {
        let info = self.inner.handle.ctx.info();
        format!(
            "hetero.Array(shape={:?}, dtype={}, device={} #{})",
            self.inner.shape,
            self.dtype(),
            info.backend,
            info.ordinal
        )
    }
}
