//! The arguments of one host launch, checked against the registration.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use super::slice::{Slice, SliceMut};
use super::{Declared, Fault, HostKernel, Kind};
use crate::types::KernelArg;

/// One argument as the host backend resolved it.
pub(crate) enum Value {
    /// Device memory from the argument's offset to its allocation's end.
    Buffer {
        /// First byte the kernel sees.
        ptr: *mut u8,
        /// Bytes from `ptr` to the allocation's end.
        len: usize,
        /// Keeps the allocation alive while the launch runs.
        _owner: Arc<dyn Any + Send + Sync>,
    },
    /// A scalar or struct, by value.
    Scalar(KernelArg),
}

/// The arguments of one launch, as a host kernel reads them.
///
/// Invariant: each buffer's `ptr` is valid for `len` bytes while its owner
/// is held; the launcher (the `Device` contract) makes sure no other stream
/// writes it until the launch completes.
pub struct Args {
    values: Vec<Value>,
    declared: Arc<[Declared]>,
    trusted: bool,
}

// SAFETY: the raw pointers are only dereferenced through `Slice` and
// `SliceMut`, whose accesses are bounds-checked and, for untrusted kernels,
// atomic; trusted (built-in) kernels write disjoint elements per block.
unsafe impl Send for Args {}
// SAFETY: as above.
unsafe impl Sync for Args {}

impl Args {
    /// The arguments of a launch of `kernel`.
    pub(crate) fn new(kernel: &HostKernel, values: Vec<Value>) -> Self {
        Self { values, declared: Arc::clone(&kernel.params), trusted: kernel.trusted }
    }

    /// Arguments checked against nothing but their own kinds (built-in kernel tests).
    #[cfg(test)]
    pub(crate) fn unchecked(values: Vec<Value>) -> Self {
        Self { values, declared: Arc::from([]), trusted: true }
    }

    /// The number of arguments the launch passed.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the launch passed no argument.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    fn get(&self, index: usize) -> Fault<&Value> {
        self.values
            .get(index)
            .ok_or_else(|| format!("kernel reads argument {index} but the launch passed {}", self.values.len()))
    }

    /// Checks that the registration declares parameter `index` as `kind` of `T`.
    fn declared<T>(&self, index: usize, kind: Kind) -> Fault<()> {
        let Some(d) = self.declared.get(index) else {
            // Only kernels tested without a registration have no declarations.
            return if self.declared.is_empty() && self.trusted {
                Ok(())
            } else {
                Err(format!("argument {index} is not declared by the host kernel's registration"))
            };
        };
        let size = std::mem::size_of::<T>();
        let kind_fits = d.kind == kind || (d.kind == Kind::SliceMut && kind == Kind::Slice);
        if !kind_fits || d.size != size || (d.rust != std::any::type_name::<T>() && d.c_type.is_some()) {
            return Err(format!(
                "argument {index} is read as {} of {} but the registration declares {}",
                match kind {
                    Kind::Scalar => "a scalar",
                    Kind::Slice => "a read-only slice",
                    Kind::SliceMut => "a writable slice",
                },
                std::any::type_name::<T>(),
                d.describe()
            ));
        }
        Ok(())
    }

    fn view<T: bytemuck::Pod>(&self, index: usize) -> Fault<Slice<'_, T>> {
        match self.get(index)? {
            Value::Buffer { ptr, len, .. } => {
                if !(*ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
                    return Err(format!("buffer argument {index} is misaligned for `{}`", std::any::type_name::<T>()));
                }
                Ok(Slice {
                    ptr: ptr.cast(),
                    len: len / std::mem::size_of::<T>().max(1),
                    atomic: !self.trusted,
                    _args: PhantomData,
                })
            }
            Value::Scalar(_) => Err(format!("argument {index} is a scalar, not a buffer")),
        }
    }

    /// Argument `index` as a read-only view of `T` from the argument's
    /// offset to its allocation's end.
    pub fn slice<T: bytemuck::Pod>(&self, index: usize) -> Fault<Slice<'_, T>> {
        self.declared::<T>(index, Kind::Slice)?;
        self.view::<T>(index)
    }

    /// Argument `index` as a writable view of `T`; the registration must
    /// declare it with [`HostKernel::slice_mut`].
    pub fn slice_mut<T: bytemuck::Pod>(&self, index: usize) -> Fault<SliceMut<'_, T>> {
        self.declared::<T>(index, Kind::SliceMut)?;
        Ok(SliceMut(self.view::<T>(index)?))
    }

    /// Argument `index` as a scalar or struct of type `T`.
    pub fn scalar<T: bytemuck::Pod>(&self, index: usize) -> Fault<T> {
        self.declared::<T>(index, Kind::Scalar)?;
        match self.get(index)? {
            Value::Scalar(arg) => {
                let bytes = arg.value_bytes().unwrap_or_default();
                let c_matches = match (arg.c_type(), crate::signature::c_name::<T>()) {
                    (Some(given), Some(wanted)) => given == wanted,
                    (None, None) => true,
                    _ => false,
                };
                if !c_matches || bytes.len() != std::mem::size_of::<T>() {
                    return Err(format!(
                        "argument {index} is read as `{}` but the launch passed {}",
                        std::any::type_name::<T>(),
                        arg.c_type().map_or_else(|| format!("{} bytes", bytes.len()), |c| format!("a {c}"))
                    ));
                }
                Ok(bytemuck::pod_read_unaligned(bytes))
            }
            Value::Buffer { .. } => Err(format!("argument {index} is a buffer, not a scalar")),
        }
    }

    /// Argument `index` as a `u32` (`uint`).
    pub fn u32(&self, index: usize) -> Fault<u32> {
        self.scalar(index)
    }

    /// Argument `index` as an `f32` (`float`).
    pub fn f32(&self, index: usize) -> Fault<f32> {
        self.scalar(index)
    }
}
