//! Kernels of the host backend, written in Rust: the built-in ones and a
//! downstream crate's own.
//!
//! The host backend cannot compile C, so each kernel of a portable source
//! needs a Rust implementation with the same name and parameters. A crate
//! registers its implementations when it builds a module
//! ([`crate::Context::build_module_with`]); GPU backends ignore them. The
//! host resolves each kernel of the source to a registration of that name,
//! else to a built-in kernel whose whole source file the source contains
//! unchanged; any other kernel fails the build with a log naming it (a
//! kernel that merely shares a built-in's name is never replaced by it).
//!
//! # Writing one
//!
//! An implementation is a *block-level* function, `fn(&Block, &Args) ->
//! Fault`: it runs every thread of one block. Blocks run in parallel.
//! Thread indices are loops over [`Block::threads`] (or
//! [`Block::thread_indices`] in 2D and 3D); a barrier is the end of one such
//! loop and the start of the next; dynamic shared memory is a local vector
//! from [`Block::shared`]; the dialect's block collectives are
//! [`Block::reduce`], [`Block::inclusive_scan`] and
//! [`Block::exclusive_scan`] over the block's per-thread values. Registration declares the parameters in order
//! ([`HostKernel::scalar`], [`HostKernel::slice`], [`HostKernel::slice_mut`]),
//! and the build checks them against the source's parameter list (count,
//! kind, element type, `const`).
//!
//! # What stays safe
//!
//! Every access is bounds-checked and every argument is checked against
//! the registration: a breach is a [`Fault`], which the stream reports as a
//! sticky [`crate::ErrorKind::KernelFault`] like a GPU's illegal address.
//! Registered kernels touch device memory only through atomic accesses of
//! the element's width, so even blocks that race on one element (a bug on a
//! GPU too) do not make the host's behaviour undefined.

// What runs host kernels (argument resolution, the kernel function) is the
// host backend's; built without it, only the public registration API is used.
#![cfg_attr(not(feature = "host"), allow(dead_code, unused_imports))]

mod args;
mod collectives;
mod slice;

use std::sync::Arc;

pub use args::Args;
pub(crate) use args::Value;
pub use slice::{Slice, SliceMut};

use crate::signature::{self, Param};

/// The error of a kernel: what went wrong, in words.
pub type Fault<T = ()> = std::result::Result<T, String>;

/// A block-level kernel implementation.
pub type KernelFn = fn(&Block, &Args) -> Fault;

/// Where one block is, and the launch's shape.
#[derive(Debug, Clone, Copy)]
pub struct Block {
    pub(crate) idx: [u32; 3],
    pub(crate) dim: [u32; 3],
    pub(crate) grid: [u32; 3],
    pub(crate) shared_bytes: usize,
}

impl Block {
    /// This block's index per dimension (`BLOCK_X/Y/Z`).
    pub fn idx(&self) -> [u32; 3] {
        self.idx
    }

    /// Threads per block per dimension (`BLOCK_DIM_X/Y/Z`).
    pub fn dim(&self) -> [u32; 3] {
        self.dim
    }

    /// Blocks per dimension (`GRID_DIM_X/Y/Z`).
    pub fn grid(&self) -> [u32; 3] {
        self.grid
    }

    /// Threads in the block, all dimensions together.
    pub fn threads(&self) -> usize {
        self.dim.iter().map(|&d| d as usize).product()
    }

    /// Every thread index of the block (`THREAD_X/Y/Z`), x fastest.
    pub fn thread_indices(&self) -> impl Iterator<Item = [u32; 3]> + use<> {
        let [dx, dy, dz] = self.dim;
        (0..dz).flat_map(move |z| (0..dy).flat_map(move |y| (0..dx).map(move |x| [x, y, z])))
    }

    /// Dynamic shared memory the launch provides, in bytes.
    pub fn shared_bytes(&self) -> usize {
        self.shared_bytes
    }

    /// Fails like a GPU would (out-of-bounds shared access) when the launch
    /// gave less dynamic shared memory than `bytes`.
    pub fn need_shared(&self, bytes: usize) -> Fault {
        if self.shared_bytes < bytes {
            return Err(format!(
                "kernel uses {bytes} bytes of dynamic shared memory but the launch provides {}",
                self.shared_bytes
            ));
        }
        Ok(())
    }

    /// `len` elements of the block's dynamic shared memory, zeroed; a fault
    /// when the launch provides fewer bytes.
    pub fn shared<T: bytemuck::Zeroable + Clone>(&self, len: usize) -> Fault<Vec<T>> {
        self.need_shared(len.saturating_mul(std::mem::size_of::<T>()))?;
        Ok(vec![T::zeroed(); len])
    }
}

/// What an implementation declares for one parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Declared {
    pub(crate) kind: Kind,
    /// The element's (or scalar's) C name, when it is a C scalar type.
    pub(crate) c_type: Option<&'static str>,
    /// Its Rust name, for messages.
    pub(crate) rust: &'static str,
    pub(crate) size: usize,
    pub(crate) align: usize,
}

/// How a parameter is passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Scalar,
    Slice,
    SliceMut,
}

impl Declared {
    fn of<T: bytemuck::Pod>(kind: Kind) -> Self {
        Self {
            kind,
            c_type: signature::c_name::<T>(),
            rust: std::any::type_name::<T>(),
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
        }
    }

    fn describe(&self) -> String {
        match self.kind {
            Kind::Scalar => format!("a {} scalar", self.rust),
            Kind::Slice => format!("a read-only slice of {}", self.rust),
            Kind::SliceMut => format!("a writable slice of {}", self.rust),
        }
    }
}

/// One Rust implementation of a portable kernel, with its parameters.
#[derive(Clone)]
pub struct HostKernel {
    pub(crate) name: String,
    pub(crate) params: Arc<[Declared]>,
    pub(crate) function: KernelFn,
    /// Built-in kernels, reviewed to write disjoint elements per block,
    /// access memory with plain copies (vectorised) instead of atomics.
    pub(crate) trusted: bool,
}

impl std::fmt::Debug for HostKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostKernel").field("name", &self.name).field("params", &self.params.len()).finish()
    }
}

impl HostKernel {
    /// The implementation of kernel `name`; declare its parameters next, in order.
    pub fn new(name: impl Into<String>, function: KernelFn) -> Self {
        Self { name: name.into(), params: Arc::from([]), function, trusted: false }
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn with(mut self, declared: Declared) -> Self {
        let mut params = self.params.to_vec();
        params.push(declared);
        self.params = params.into();
        self
    }

    /// Next parameter: a scalar (or `Pod` struct) of type `T`, read with [`Args::scalar`].
    pub fn scalar<T: bytemuck::Pod>(self) -> Self {
        self.with(Declared::of::<T>(Kind::Scalar))
    }

    /// Next parameter: `GLOBAL const T*`, read with [`Args::slice`].
    pub fn slice<T: bytemuck::Pod>(self) -> Self {
        self.with(Declared::of::<T>(Kind::Slice))
    }

    /// Next parameter: `GLOBAL T*` (written), read with [`Args::slice_mut`].
    pub fn slice_mut<T: bytemuck::Pod>(self) -> Self {
        self.with(Declared::of::<T>(Kind::SliceMut))
    }

    pub(crate) fn trusted(mut self) -> Self {
        self.trusted = true;
        self
    }

    /// Why this registration does not fit the source's `params`, if it
    /// does not; `structs` are the layouts of the structs the source
    /// defines (`hetero_kernels::struct_layouts`), against which a struct
    /// parameter's registered type is checked.
    pub(crate) fn mismatch(&self, params: &[Param], structs: &[(String, usize, usize)]) -> Option<String> {
        let at = |i: usize, p: &Param| format!("kernel `{}` parameter {} (`{}`)", self.name, i + 1, p.name);
        if params.len() != self.params.len() {
            return Some(format!(
                "kernel `{}`: the source declares {} parameters but the host implementation declares {}",
                self.name,
                params.len(),
                self.params.len()
            ));
        }
        for (i, (p, d)) in params.iter().zip(self.params.iter()).enumerate() {
            let kind_fits = matches!(
                (p.pointer, d.kind),
                (None, Kind::Scalar) | (Some(false), Kind::Slice) | (Some(true), Kind::SliceMut)
            );
            // A C scalar type matches by name; a user type matches any other user type.
            let type_fits = match d.c_type {
                Some(c) => c == p.ty,
                None => !p.is_c_scalar(),
            };
            if !(kind_fits && type_fits) {
                return Some(format!(
                    "{}: the source declares {} but the host implementation declares {}",
                    at(i, p),
                    p.describe(),
                    d.describe()
                ));
            }
            let layout = structs.iter().find(|(n, ..)| *n == p.ty && p.pointer.is_none() && d.c_type.is_none());
            if let Some((_, size, align)) = layout
                && (d.size, d.align) != (*size, *align)
            {
                return Some(format!(
                    "{}: the source's `{}` is {size} bytes aligned to {align}, but the host implementation declares {} of {} bytes aligned to {}",
                    at(i, p),
                    p.ty,
                    d.describe(),
                    d.size,
                    d.align
                ));
            }
        }
        None
    }
}
