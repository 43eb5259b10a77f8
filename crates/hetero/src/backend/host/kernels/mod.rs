//! Rust implementations of the portable kernels, registered under the same
//! names and argument lists as the sources in `hetero-kernels`.
//!
//! Each kernel is a *block-level* function: it runs all threads of one
//! block, in thread order, phase by phase between the points where the
//! portable kernel has barriers, so the arithmetic order (and thus float
//! rounding) follows the GPU kernel's. Blocks run in parallel. Every memory
//! access is bounds-checked: an access outside a buffer is a kernel fault,
//! reported by the stream like a GPU's illegal-address error.

mod pull;
mod reduce;
mod scan;
mod util;
mod wave;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::memory::HostMemory;

/// Where one block is and how large the launch is.
pub(super) struct Block {
    /// Block index per dimension.
    pub idx: [u32; 3],
    /// Threads per block per dimension.
    pub dim: [u32; 3],
    /// Blocks per dimension.
    pub grid: [u32; 3],
    /// Dynamic shared memory the launch provides, in bytes.
    pub shared_bytes: usize,
}

impl Block {
    /// Fails like a GPU would (out-of-bounds shared access) when the launch
    /// gave less dynamic shared memory than the kernel uses.
    pub fn need_shared(&self, bytes: usize) -> Fault<()> {
        if self.shared_bytes < bytes {
            return Err(format!(
                "kernel uses {bytes} bytes of dynamic shared memory but the launch provides {}",
                self.shared_bytes
            ));
        }
        Ok(())
    }

    /// Threads in the block's x dimension.
    pub fn threads(&self) -> usize {
        self.dim[0] as usize
    }
}

/// A kernel fault: the message names what went wrong.
pub(super) type Fault<T> = std::result::Result<T, String>;

/// A block-level kernel function.
pub(super) type HostKernel = fn(&Block, &Args) -> Fault<()>;

/// The host implementation of portable kernel `name`, if there is one.
pub(super) fn lookup(name: &str) -> Option<HostKernel> {
    Some(match name {
        "reduce_partial" => reduce::reduce_partial,
        "reduce_atomic" => reduce::reduce_atomic,
        "scan_tile_sums" => scan::scan_tile_sums,
        "scan_tiles" => scan::scan_tiles,
        "pull_jets" => pull::pull_jets,
        "wave_step" => wave::wave_step,
        "affine_u32" => util::affine_u32,
        _ => return None,
    })
}

/// Names of every registered host kernel, for build logs.
pub(super) const NAMES: &[&str] =
    &["reduce_partial", "reduce_atomic", "scan_tile_sums", "scan_tiles", "pull_jets", "wave_step", "affine_u32"];

/// A launch argument as the host kernel sees it.
pub(super) enum Arg {
    Buffer { mem: Arc<HostMemory>, offset: usize },
    U32(u32),
    I32(i32),
    F32(f32),
}

/// The arguments of one launch.
pub(super) struct Args(pub Vec<Arg>);

impl Args {
    fn get(&self, index: usize) -> Fault<&Arg> {
        self.0
            .get(index)
            .ok_or_else(|| format!("kernel expects an argument {index} but the launch passed {}", self.0.len()))
    }

    /// Argument `index` as a typed view of a buffer from its offset to the allocation's end.
    pub fn buffer<T: bytemuck::Pod>(&self, index: usize) -> Fault<Slice<T>> {
        match self.get(index)? {
            Arg::Buffer { mem, offset } => {
                let size = std::mem::size_of::<T>();
                let bytes = mem.size().saturating_sub(*offset);
                // SAFETY: offset <= size was checked at launch, so the pointer stays in the block.
                let ptr = unsafe { mem.ptr().as_ptr().add((*offset).min(mem.size())) };
                if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
                    return Err(format!(
                        "buffer argument {index} at byte offset {offset} is misaligned for its element type"
                    ));
                }
                Ok(Slice { ptr: ptr.cast(), len: bytes / size, _mem: Arc::clone(mem) })
            }
            _ => Err(format!("argument {index} must be a buffer")),
        }
    }

    /// Argument `index` as a u32 scalar.
    pub fn u32(&self, index: usize) -> Fault<u32> {
        match self.get(index)? {
            Arg::U32(v) => Ok(*v),
            _ => Err(format!("argument {index} must be a u32")),
        }
    }

    /// Argument `index` as an f32 scalar.
    pub fn f32(&self, index: usize) -> Fault<f32> {
        match self.get(index)? {
            Arg::F32(v) => Ok(*v),
            _ => Err(format!("argument {index} must be an f32")),
        }
    }

    /// Argument `index` as an i32 scalar.
    #[allow(dead_code)]
    pub fn i32(&self, index: usize) -> Fault<i32> {
        match self.get(index)? {
            Arg::I32(v) => Ok(*v),
            _ => Err(format!("argument {index} must be an i32")),
        }
    }
}

/// A bounds-checked view of device memory shared by all blocks of a launch.
///
/// Invariant: `ptr` is aligned for `T` and valid for `len` elements while
/// `_mem` is held. Blocks write disjoint elements (the launch contract), so
/// plain reads and writes do not race.
pub(super) struct Slice<T> {
    ptr: *mut T,
    len: usize,
    _mem: Arc<HostMemory>,
}

impl<T: Copy> Slice<T> {
    fn check(&self, i: usize) -> Fault<()> {
        if i >= self.len {
            return Err(format!("out-of-bounds access at element {i} of a buffer of {} elements", self.len));
        }
        Ok(())
    }

    /// Reads element `i`.
    pub fn get(&self, i: usize) -> Fault<T> {
        self.check(i)?;
        // SAFETY: i < len (checked) and the invariant of the type.
        Ok(unsafe { self.ptr.add(i).read() })
    }

    /// Writes element `i`.
    pub fn set(&self, i: usize, value: T) -> Fault<()> {
        self.check(i)?;
        // SAFETY: i < len (checked) and the invariant of the type.
        unsafe { self.ptr.add(i).write(value) };
        Ok(())
    }
}

impl Slice<f32> {
    /// Atomically adds `value` to element `i`.
    pub fn atomic_add(&self, i: usize, value: f32) -> Fault<()> {
        self.check(i)?;
        // SAFETY: i < len, the element is 4-byte aligned, and during the
        // launch every access to it goes through this atomic.
        let cell = unsafe { AtomicU32::from_ptr(self.ptr.add(i).cast()) };
        let _ = cell
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some((f32::from_bits(bits) + value).to_bits()));
        Ok(())
    }
}

/// The block-wide tree sum of `common.kern`'s `block_sum`, in the same order.
pub(super) fn block_sum(sh: &mut [f32]) -> f32 {
    let n = sh.len();
    let mut s = n.next_power_of_two() >> 1;
    while s > 0 {
        for tid in 0..s.min(n) {
            if tid + s < n {
                sh[tid] += sh[tid + s];
            }
        }
        s >>= 1;
    }
    sh.first().copied().unwrap_or(0.0)
}
