//! Kernel arguments for [`crate::Stream::launch`] and graph launches:
//! buffer views, scalars and `#[repr(C)]` structs.

use bytemuck::Pod;

use super::buffer::{Buffer, OnDevice, Slice, SliceMut, View};
use crate::AnyDevice;
use crate::device::{ArgBytes, Backend, Device, KernelArg};
use crate::error::{Error, ErrorKind, Result};

/// One kernel argument for [`crate::Stream::launch`]: a buffer view (read or
/// written; the access decides which cross-stream waits are inserted) or a
/// scalar. Made with `.into()` from slices, buffers and scalars.
pub enum Arg<'a, D: Device = AnyDevice> {
    #[doc(hidden)]
    Buffer(View<'a, D>),
    #[doc(hidden)]
    Scalar(KernelArg),
    #[doc(hidden)]
    Struct(StructArg),
}

/// A struct passed by value: its bytes, or why it cannot be passed.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct StructArg {
    pub(crate) bytes: Option<ArgBytes>,
    pub(crate) rust: &'static str,
    pub(crate) size: usize,
    pub(crate) align: usize,
}

impl StructArg {
    /// The struct argument of `value`.
    pub(crate) fn of<T: Pod>(value: &T) -> Self {
        StructArg {
            bytes: ArgBytes::of(value),
            rust: std::any::type_name::<T>(),
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
        }
    }

    /// The raw argument: its bytes, or an error when it is too large to
    /// pass (launch checks refuse those first).
    pub(crate) fn raw(&self, backend: Backend) -> Result<KernelArg> {
        match &self.bytes {
            Some(bytes) => Ok(KernelArg::Bytes(bytes.clone())),
            None => Err(Error::new(backend, "launch", ErrorKind::InvalidLaunch, "struct argument too large")),
        }
    }
}

impl<D: Device> Arg<'_, D> {
    /// This buffer argument passed from its buffer's first element, while
    /// the launch is still ordered against other work on the slice's
    /// elements only; a scalar or struct is returned unchanged.
    ///
    /// For kernels that take a buffer and the offset they start at as a
    /// scalar: the kernel then indexes from the buffer's start, and the
    /// launch's contract ([`crate::Stream::launch`]) is that it touches only
    /// the slice's elements. What it is for: OpenCL passes a slice at an
    /// offset as a sub-buffer, kept for the buffer's life, and NVIDIA's
    /// driver charges every launch for each live sub-buffer that overlaps
    /// another (several row ranges of one field are such); passed whole,
    /// the buffer makes none, and two streams can still work on disjoint
    /// elements at once. On CUDA, HIP and the host it only changes the
    /// address passed.
    pub fn whole_buffer(self) -> Self {
        match self {
            Arg::Buffer(mut view) => {
                view.from_start = true;
                Arg::Buffer(view)
            }
            other => other,
        }
    }

    /// A `#[repr(C)]` plain-data struct passed by value, for a kernel
    /// parameter of a struct type the source defines. The launch checks its
    /// size and alignment against the source's definition where the source
    /// defines it with scalar fields; at most [`ArgBytes::MAX`] bytes.
    pub fn value<T: Pod>(value: &T) -> Self {
        Arg::Struct(StructArg::of(value))
    }
}

impl<'a, T: Pod, D: Device> From<&'a Slice<'a, T, OnDevice, D>> for Arg<'a, D> {
    fn from(s: &'a Slice<'a, T, OnDevice, D>) -> Self {
        Arg::Buffer(s.view())
    }
}

impl<'a, T: Pod, D: Device> From<&'a SliceMut<'a, T, OnDevice, D>> for Arg<'a, D> {
    fn from(s: &'a SliceMut<'a, T, OnDevice, D>) -> Self {
        Arg::Buffer(s.view())
    }
}

impl<'a, T: Pod, D: Device> From<&'a Buffer<T, OnDevice, D>> for Arg<'a, D> {
    /// The whole buffer, read.
    fn from(b: &'a Buffer<T, OnDevice, D>) -> Self {
        Arg::Buffer(Slice::from(b).into_view())
    }
}

impl<'a, T: Pod, D: Device> From<&'a mut Buffer<T, OnDevice, D>> for Arg<'a, D> {
    /// The whole buffer, written.
    fn from(b: &'a mut Buffer<T, OnDevice, D>) -> Self {
        Arg::Buffer(SliceMut::from(b).into_view())
    }
}

impl<D: Device> From<u32> for Arg<'_, D> {
    fn from(v: u32) -> Self {
        Arg::Scalar(KernelArg::U32(v))
    }
}

impl<D: Device> From<i32> for Arg<'_, D> {
    fn from(v: i32) -> Self {
        Arg::Scalar(KernelArg::I32(v))
    }
}

impl<D: Device> From<f32> for Arg<'_, D> {
    fn from(v: f32) -> Self {
        Arg::Scalar(KernelArg::F32(v))
    }
}

impl<D: Device> From<u64> for Arg<'_, D> {
    fn from(v: u64) -> Self {
        Arg::Scalar(KernelArg::U64(v))
    }
}

impl<D: Device> From<i64> for Arg<'_, D> {
    fn from(v: i64) -> Self {
        Arg::Scalar(KernelArg::I64(v))
    }
}

impl<D: Device> From<f64> for Arg<'_, D> {
    /// A `double`: launches refuse it on devices without [`crate::DeviceInfo::fp64`].
    fn from(v: f64) -> Self {
        Arg::Scalar(KernelArg::F64(v))
    }
}
