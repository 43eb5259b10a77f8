//! DLPack: buffers exchanged with PyTorch, CuPy, NumPy, JAX and any other
//! library that speaks it, without a copy and without synchronising the
//! device.
//!
//! The `repr(C)` types are those of `dlpack.h` (version 1.1), the versioned
//! ABI (`DLManagedTensorVersioned`). [`export`] hands a buffer out as a
//! tensor whose deleter keeps the buffer alive until the consumer is done
//! with it; [`import`] takes a tensor in as a buffer whose release calls
//! the producer's deleter once hetero's queued work on it has completed.
//!
//! The stream handshake is DLPack's: the side that hands memory over makes
//! the receiving side's stream wait for its own pending work, with an
//! event, never with a device-wide synchronisation. The receiving stream
//! is a [`Stream`] (another library's native stream adopted with
//! [`Context::adopt_stream`]); without one, the handover waits on the host.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use bytemuck::Pod;

use crate::device::{Backend, Device, RawMemory, Release};
use crate::error::{Error, ErrorKind, Result};
use crate::safe::{Context, DeviceBuffer, Stream};

/// The DLPack major version this module speaks.
pub const DLPACK_MAJOR_VERSION: u32 = 1;
/// The DLPack minor version this module writes.
pub const DLPACK_MINOR_VERSION: u32 = 1;
/// `flags` bit: the consumer must not write the tensor.
pub const DLPACK_FLAG_BITMASK_READ_ONLY: u64 = 1 << 0;
/// `flags` bit: the producer copied the data for this exchange.
pub const DLPACK_FLAG_BITMASK_IS_COPIED: u64 = 1 << 1;

/// `DLDeviceType` values hetero produces or accepts.
pub mod device_type {
    /// Host memory.
    pub const CPU: i32 = 1;
    /// CUDA device memory.
    pub const CUDA: i32 = 2;
    /// CUDA pinned host memory.
    pub const CUDA_HOST: i32 = 3;
    /// OpenCL memory (`data` is a `cl_mem`).
    pub const OPENCL: i32 = 4;
    /// ROCm (HIP) device memory.
    pub const ROCM: i32 = 10;
}

/// `DLPackVersion`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLPackVersion {
    /// Major version: a consumer refuses a tensor of another major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

/// `DLDevice`: a device type (`DLDeviceType`) and its index.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// One of [`device_type`]'s values (or another `DLDeviceType`).
    pub device_type: i32,
    /// The device's index within its type.
    pub device_id: i32,
}

/// `DLDataType`: type code (`kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2), bits
/// per lane and lanes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// `DLDataTypeCode`.
    pub code: u8,
    /// Bits of one lane.
    pub bits: u8,
    /// Lanes (1 for scalars).
    pub lanes: u16,
}

/// `DLTensor`: the data, where it lives, and its shape.
#[repr(C)]
#[derive(Debug)]
pub struct DLTensor {
    /// Start of the allocation (a `cl_mem` on OpenCL).
    pub data: *mut c_void,
    /// Where the data lives.
    pub device: DLDevice,
    /// Dimensions.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for a compact row-major tensor.
    pub strides: *mut i64,
    /// Bytes from `data` to the first element.
    pub byte_offset: u64,
}

/// `DLManagedTensorVersioned`: a tensor with its owner and version.
#[repr(C)]
#[derive(Debug)]
pub struct DLManagedTensorVersioned {
    /// The version of the producer.
    pub version: DLPackVersion,
    /// The producer's context, for its deleter.
    pub manager_ctx: *mut c_void,
    /// Called by the consumer, once, when it no longer needs the tensor.
    pub deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    /// [`DLPACK_FLAG_BITMASK_READ_ONLY`] and [`DLPACK_FLAG_BITMASK_IS_COPIED`].
    pub flags: u64,
    /// The tensor.
    pub dl_tensor: DLTensor,
}

/// Element types a tensor may hold, with their DLPack type. Sealed.
pub trait Element: Pod + private::Sealed {
    /// The element's DLPack type.
    const DTYPE: DLDataType;
}

mod private {
    pub trait Sealed {}
}

macro_rules! elements {
    ($($t:ty => $code:expr),* $(,)?) => {$(
        impl private::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DLDataType = DLDataType { code: $code, bits: (8 * size_of::<$t>()) as u8, lanes: 1 };
        }
    )*};
}

elements!(i8 => 0, i16 => 0, i32 => 0, i64 => 0, u8 => 1, u16 => 1, u32 => 1, u64 => 1, f32 => 2, f64 => 2);

/// The DLPack device of a hetero device: CUDA, ROCm or OpenCL with its
/// ordinal, or the CPU for the host backend.
pub fn dl_device(backend: Backend, ordinal: usize) -> DLDevice {
    let device_type = match backend {
        Backend::Host => device_type::CPU,
        Backend::OpenCl => device_type::OPENCL,
        Backend::Cuda => device_type::CUDA,
        Backend::Hip => device_type::ROCM,
    };
    let device_id = if backend == Backend::Host { 0 } else { i32::try_from(ordinal).unwrap_or(i32::MAX) };
    DLDevice { device_type, device_id }
}

/// Whether a tensor on `device` can be a buffer of a device of `backend` with `ordinal`.
fn accepts(backend: Backend, ordinal: usize, device: DLDevice) -> bool {
    let ours = dl_device(backend, ordinal);
    match backend {
        // Host memory of any kind is the host backend's device memory.
        Backend::Host => [device_type::CPU, device_type::CUDA_HOST].contains(&device.device_type),
        _ => device == ours,
    }
}

/// What a tensor hetero exports owns: the buffer (and the consumer's
/// stream, to order the buffer's release after the consumer's work), the
/// shape, and the tensor itself, which points into this box.
struct Manager<T, D: Device> {
    tensor: DLManagedTensorVersioned,
    shape: Vec<i64>,
    buffer: DeviceBuffer<T, D>,
    consumer: Option<Arc<Stream<D>>>,
}

/// Hands `buffer` out as a DLPack tensor of `shape` (its product must be
/// the buffer's length; compact, row-major). The consumer calls the
/// tensor's deleter when it is done; the buffer is then dropped, so its
/// memory is freed once hetero's queued work and, with a `consumer`
/// stream, everything queued on that stream up to the deleter's call have
/// completed.
///
/// With `consumer`, that stream waits for every use of the buffer queued
/// so far (no host wait); without, this call waits on the host until those
/// uses have completed, and the consumer must finish its own use before it
/// calls the deleter.
pub fn export<T: Element, D: Device>(
    buffer: DeviceBuffer<T, D>,
    shape: &[i64],
    consumer: Option<Arc<Stream<D>>>,
) -> Result<NonNull<DLManagedTensorVersioned>> {
    let (backend, ordinal) = (buffer.device.info().backend, buffer.device.info().ordinal);
    let elements = shape_len(backend, "dlpack export", shape)?;
    if elements != buffer.len() {
        return Err(Error::new(
            backend,
            "dlpack export",
            ErrorKind::OutOfBounds,
            format!("shape {shape:?} holds {elements} elements but the buffer holds {}", buffer.len()),
        ));
    }
    let ndim = i32::try_from(shape.len()).map_err(|_| unsupported(backend, "a tensor of more than 2^31 dimensions"))?;
    let data = match buffer.raw_memory()? {
        RawMemory::Address(address) => address as usize as *mut c_void,
        RawMemory::ClMem(mem) => mem,
    };
    let mut buffer = buffer;
    match &consumer {
        Some(stream) => stream.acquire(&mut buffer)?,
        None => buffer.wait_idle()?,
    }
    let mut manager = Box::new(Manager {
        tensor: DLManagedTensorVersioned {
            version: DLPackVersion { major: DLPACK_MAJOR_VERSION, minor: DLPACK_MINOR_VERSION },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete::<T, D>),
            flags: 0,
            dl_tensor: DLTensor {
                data,
                device: dl_device(backend, ordinal),
                ndim,
                dtype: T::DTYPE,
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: shape.to_vec(),
        buffer,
        consumer,
    });
    manager.tensor.dl_tensor.shape = manager.shape.as_mut_ptr();
    let manager = Box::into_raw(manager);
    // SAFETY: `manager` is the live box just leaked; the tensor is its
    // first field, so the pointers the consumer gets stay valid until the
    // deleter takes the box back.
    unsafe {
        (*manager).tensor.manager_ctx = manager.cast();
        Ok(NonNull::new_unchecked(&raw mut (*manager).tensor))
    }
}

/// The deleter of an exported tensor: takes the box back and drops the
/// buffer after ordering its release after the consumer's stream.
unsafe extern "C" fn delete<T: Element, D: Device>(tensor: *mut DLManagedTensorVersioned) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: `tensor` is one that `export` made; its context is the box,
    // which the deleter (called once, DLPack's rule) takes back here.
    let mut manager = unsafe { Box::from_raw((*tensor).manager_ctx.cast::<Manager<T, D>>()) };
    let Manager { buffer, consumer, .. } = &mut *manager;
    if let Some(stream) = consumer {
        // Its failure leaves the buffer's earlier marks, which the free
        // still waits for; nothing better is possible in a deleter.
        let _ = stream.acquire(buffer);
    }
}

fn unsupported(backend: Backend, what: impl std::fmt::Display) -> Error {
    Error::new(backend, "dlpack", ErrorKind::Unsupported, format!("{what} cannot be a hetero buffer"))
}

/// Elements of a compact tensor of `shape`, or an error.
fn shape_len(backend: Backend, call: &'static str, shape: &[i64]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |n, &extent| {
            let extent = usize::try_from(extent).ok()?;
            n.checked_mul(extent)
        })
        .ok_or_else(|| {
            Error::new(
                backend,
                call,
                ErrorKind::OutOfBounds,
                format!("shape {shape:?} has a negative extent or overflows"),
            )
        })
}

/// Whether `strides` (in elements) are those of a compact row-major tensor
/// of `shape`; extents of 1 may have any stride.
fn is_compact(shape: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1i64;
    for (&extent, &stride) in shape.iter().zip(strides).rev() {
        if extent != 1 && stride != expected {
            return false;
        }
        expected = expected.saturating_mul(extent);
    }
    true
}

/// A tensor taken in by [`import`]: the buffer and its shape.
#[derive(Debug)]
pub struct Imported<T, D: Device> {
    /// The tensor's elements, in row-major order.
    pub buffer: DeviceBuffer<T, D>,
    /// The tensor's extents.
    pub shape: Vec<i64>,
}

/// Takes a DLPack tensor in as a buffer of `context`'s device, without a
/// copy. The producer's deleter runs once the buffer is dropped and every
/// use hetero queued on it has completed; a refusal runs it before this
/// returns. Refused, with [`ErrorKind::Unsupported`] and what would work:
/// another major version, strides that are not compact, a type other than
/// `T`, a read-only tensor, an offset into a `cl_mem`; with
/// [`ErrorKind::DeviceMismatch`]: a tensor of another device.
///
/// With `stream`, the producer has made that stream wait for its work on
/// the tensor (DLPack's `__dlpack__(stream=...)`): the buffer's first use
/// is ordered after it there, and a use on any other stream waits for it.
/// Without, the producer's work on it has completed.
///
/// # Safety
/// `tensor` must point to a valid `DLManagedTensorVersioned` whose
/// ownership passes to this call (no one else calls its deleter), whose
/// memory stays valid until the deleter runs, and which no one else
/// writes meanwhile (or reads, while hetero writes) except in order with
/// hetero's work, as [`Context::adopt_buffer`] requires.
pub unsafe fn import<T: Element, D: Device>(
    context: &Context<D>,
    tensor: NonNull<DLManagedTensorVersioned>,
    stream: Option<&Stream<D>>,
) -> Result<Imported<T, D>> {
    let raw = tensor.as_ptr();
    let release = Release::new({
        let raw = raw as usize;
        move || {
            let raw = raw as *mut DLManagedTensorVersioned;
            // SAFETY: the tensor is valid until its deleter runs, which
            // happens here once (this release runs at most once).
            if let Some(deleter) = unsafe { (*raw).deleter } {
                // SAFETY: DLPack's contract: the owner calls the deleter once.
                unsafe { deleter(raw) };
            }
        }
    });
    // SAFETY: the caller's contract: a valid tensor.
    let managed = unsafe { &*raw };
    let info = context.info();
    let (backend, ordinal) = (info.backend, info.ordinal);
    let t = &managed.dl_tensor;
    if managed.version.major != DLPACK_MAJOR_VERSION {
        return Err(unsupported(
            backend,
            format!("a DLPack {}.{} tensor (hetero reads 1.x)", managed.version.major, managed.version.minor),
        ));
    }
    if !accepts(backend, ordinal, t.device) {
        return Err(Error::new(
            backend,
            "dlpack import",
            ErrorKind::DeviceMismatch,
            format!(
                "the tensor lives on DLPack device type {} index {}, not on this device ({:?} {ordinal}, DLPack {:?})",
                t.device.device_type,
                t.device.device_id,
                backend,
                dl_device(backend, ordinal)
            ),
        ));
    }
    if t.dtype != T::DTYPE {
        return Err(unsupported(
            backend,
            format!("a tensor of DLPack type {:?} read as {} ({:?})", t.dtype, std::any::type_name::<T>(), T::DTYPE),
        ));
    }
    if managed.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0 {
        return Err(unsupported(backend, "a read-only tensor (hetero buffers are writable; pass a copy)"));
    }
    let ndim = usize::try_from(t.ndim).map_err(|_| unsupported(backend, "a tensor with negative dimensions"))?;
    let shape: Vec<i64> = if ndim == 0 {
        Vec::new()
    } else {
        // SAFETY: a valid tensor has `ndim` extents at `shape`.
        unsafe { std::slice::from_raw_parts(t.shape, ndim) }.to_vec()
    };
    let len = shape_len(backend, "dlpack import", &shape)?;
    if !t.strides.is_null() && ndim > 0 {
        // SAFETY: non-null strides hold `ndim` values.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        if !is_compact(&shape, strides) {
            return Err(unsupported(
                backend,
                format!("a strided tensor (shape {shape:?}, strides {strides:?}; make it contiguous first)"),
            ));
        }
    }
    if len == 0 {
        drop(release);
        return Ok(Imported { buffer: context.alloc(0)?, shape });
    }
    let memory = if backend == Backend::OpenCl {
        if t.byte_offset != 0 {
            return Err(unsupported(backend, "an OpenCL tensor at a byte offset into its cl_mem"));
        }
        RawMemory::ClMem(t.data)
    } else {
        let address = (t.data as usize as u64).checked_add(t.byte_offset);
        let address = address.ok_or_else(|| unsupported(backend, "a tensor whose offset overflows"))?;
        if address % align_of::<T>() as u64 != 0 {
            return Err(unsupported(backend, format!("a tensor at address {address:#x}, not aligned for its type")));
        }
        RawMemory::Address(address)
    };
    // SAFETY: the caller's contract: `len` elements of T on this device
    // (checked above as far as DLPack tells), valid until the deleter.
    let mut buffer = unsafe { context.adopt_buffer::<T>(memory, len, Some(release))? };
    if let Some(stream) = stream {
        stream.acquire(&mut buffer)?;
    }
    Ok(Imported { buffer, shape })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_are_those_of_the_header() {
        // dlpack.h 1.1 on a 64-bit target.
        assert_eq!(size_of::<DLDevice>(), 8);
        assert_eq!(size_of::<DLDataType>(), 4);
        assert_eq!(size_of::<DLTensor>(), 48);
        assert_eq!(std::mem::offset_of!(DLTensor, byte_offset), 40);
        assert_eq!(size_of::<DLManagedTensorVersioned>(), 80);
        assert_eq!(std::mem::offset_of!(DLManagedTensorVersioned, dl_tensor), 32);
        assert_eq!(f32::DTYPE, DLDataType { code: 2, bits: 32, lanes: 1 });
        assert_eq!(u64::DTYPE, DLDataType { code: 1, bits: 64, lanes: 1 });
    }

    #[test]
    fn compact_strides_are_recognised() {
        assert!(is_compact(&[2, 3], &[3, 1]));
        assert!(is_compact(&[1, 3], &[99, 1]));
        assert!(!is_compact(&[2, 3], &[1, 2]));
        assert!(!is_compact(&[4], &[2]));
    }
}
