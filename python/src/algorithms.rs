//! The device-wide algorithms on any DLPack array: taken in without a
//! copy, run on the array's device, in order after the producer's work.

use std::sync::Arc;

use hetero::algorithms::{ReduceOp, ScanKind, SortOrder};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::array::{Array, Inner, Named, Typed, with_typed};
use crate::exchange::from_dlpack;
use crate::to_py;

fn reduce_op(op: &str) -> PyResult<ReduceOp> {
    match op {
        "sum" => Ok(ReduceOp::Sum),
        "min" => Ok(ReduceOp::Min),
        "max" => Ok(ReduceOp::Max),
        other => Err(PyValueError::new_err(format!("op {other:?}: hetero reduces with \"sum\", \"min\" or \"max\""))),
    }
}

/// A reduce's result, made without the interpreter and turned into a
/// Python number with it.
enum Value {
    Int(i64),
    UInt(u64),
    Float(f64),
}

macro_rules! value_from {
    ($($t:ty => $variant:ident as $wide:ty),*) => {$(
        impl From<$t> for Value {
            fn from(x: $t) -> Self {
                Value::$variant(<$wide>::from(x))
            }
        }
    )*};
}

value_from!(i32 => Int as i64, i64 => Int as i64, u32 => UInt as u64, u64 => UInt as u64, f32 => Float as f64, f64 => Float as f64);

impl Value {
    fn into_py(self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Value::Int(x) => x.into_pyobject(py)?.into_any().unbind(),
            Value::UInt(x) => x.into_pyobject(py)?.into_any().unbind(),
            Value::Float(x) => x.into_pyobject(py)?.into_any().unbind(),
        })
    }
}

/// A new array made from the DLPack array `$x` on its device: `$make`
/// runs with the interpreter let go (as does every lock of an array: a
/// thread holding one may need the interpreter, for a DLPack deleter), `$b`
/// the input's buffer, `$t` its element type and `$h` the device's
/// handle, and returns a buffer of `$t`; `$shape` gives the new array's
/// shape from the input's.
macro_rules! derive_array {
    ($py:expr, $x:expr, |$b:ident, $t:ident, $h:ident| $make:block, $shape:expr) => {{
        let inner = Arc::clone(&from_dlpack($py, $x)?.inner);
        let typed = $py.detach(|| -> hetero::Result<Typed> {
            let buffer = inner.buffer();
            let $h = &inner.handle;
            with_typed!(&*buffer, $b, $t => {
                let out: hetero::Result<hetero::DeviceBuffer<$t>> = (|| $make)();
                Ok(<$t as Named>::wrap(out?))
            })
        });
        let shape: Vec<i64> = $shape(&inner.shape);
        Ok(Array { inner: Inner::new(Arc::clone(&inner.handle), typed.map_err(to_py)?, shape) })
    }};
}

/// The sum (or `min`, `max`) of every element of `x`: a Python number, or
/// with `as_array` a one-element array on the device, returned without
/// waiting for the device (for chaining, and for timing with events).
#[pyfunction]
#[pyo3(signature = (x, op = "sum", *, as_array = false))]
pub(crate) fn reduce(py: Python<'_>, x: &Bound<'_, PyAny>, op: &str, as_array: bool) -> PyResult<Py<PyAny>> {
    let op = reduce_op(op)?;
    if as_array {
        let array: PyResult<Array> = derive_array!(
            py,
            x,
            |b, T, h| {
                let mut out = h.stream.alloc::<T>(1)?;
                h.algorithms.reduce(&h.stream, b, op, &mut out)?;
                Ok(out)
            },
            |_: &[i64]| vec![1]
        );
        return Ok(Py::new(py, array?)?.into_any());
    }
    let inner = Arc::clone(&from_dlpack(py, x)?.inner);
    let value = py.detach(|| -> hetero::Result<Value> {
        let buffer = inner.buffer();
        let h = &inner.handle;
        with_typed!(&*buffer, b, T => {
            let value: T = h.algorithms.reduce_to_host(&h.stream, b, op)?;
            Ok(value.into())
        })
    });
    value.map_err(to_py)?.into_py(py)
}

/// The shape of a flattened array.
fn flat(shape: &[i64]) -> Vec<i64> {
    vec![shape.iter().product()]
}

/// The inclusive (or, with `exclusive`, exclusive) prefix sum of `x`, as a
/// new array of its shape on its device.
#[pyfunction]
#[pyo3(signature = (x, exclusive = false))]
pub(crate) fn scan(py: Python<'_>, x: &Bound<'_, PyAny>, exclusive: bool) -> PyResult<Array> {
    let kind = if exclusive { ScanKind::Exclusive } else { ScanKind::Inclusive };
    derive_array!(
        py,
        x,
        |b, T, h| {
            let mut out = h.stream.alloc::<T>(b.len())?;
            h.algorithms.scan(&h.stream, b, &mut out, kind)?;
            Ok(out)
        },
        |shape: &[i64]| shape.to_vec()
    )
}

/// The sum (or `min`, `max`) of each segment `x[offsets[i]:offsets[i+1]]`
/// of `x` (flattened), as a new array of `len(offsets) - 1` elements.
#[pyfunction]
#[pyo3(signature = (x, offsets, op = "sum"))]
pub(crate) fn segmented_reduce(py: Python<'_>, x: &Bound<'_, PyAny>, offsets: Vec<u32>, op: &str) -> PyResult<Array> {
    let op = reduce_op(op)?;
    let segments =
        offsets.len().checked_sub(1).ok_or_else(|| PyValueError::new_err("offsets needs at least one value"))?;
    derive_array!(
        py,
        x,
        |b, T, h| {
            let mut out = h.stream.alloc::<T>(segments)?;
            h.algorithms.segmented_reduce(&h.stream, b, &offsets, op, &mut out)?;
            Ok(out)
        },
        |_: &[i64]| vec![segments as i64]
    )
}

/// `x` (flattened) sorted, stably, as a new array; `x` is left as it was.
#[pyfunction]
#[pyo3(signature = (x, descending = false))]
pub(crate) fn sort(py: Python<'_>, x: &Bound<'_, PyAny>, descending: bool) -> PyResult<Array> {
    let order = if descending { SortOrder::descending() } else { SortOrder::ascending() };
    derive_array!(
        py,
        x,
        |b, T, h| {
            let mut out = h.stream.alloc::<T>(b.len())?;
            h.stream.copy(b, &mut out)?;
            h.algorithms.sort(&h.stream, &mut out, &order)?;
            Ok(out)
        },
        flat
    )
}
