//! Programs and kernels of the OpenCL backend.
//!
//! A portable source is compiled by `clBuildProgram` after the OpenCL
//! prelude; on failure the error carries the build log. Kernels that use
//! dynamic shared memory declare it as their last parameter (a `__local`
//! pointer), which [`ClKernel`] sets from the launch's byte count.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use smallvec::SmallVec;

use opencl3::context::Context;
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use opencl3::types::{cl_device_id, cl_mem, cl_uint};

use super::error::{cl_error, error, from_cl};
use crate::device::{BuildOptions, DeviceInfo, KernelLimits, LaunchConfig};
use crate::error::{ErrorKind, Result};
use crate::shard::{self, Padded, SHARDS, Sharded};

/// Whether kernels for a device of `vendor` get subgroups through inline
/// PTX (`HETERO_SUBGROUP_PTX` in the OpenCL prelude): NVIDIA's OpenCL
/// reports no subgroup extension, but its compiler takes PTX.
pub(super) fn subgroups_by_ptx(vendor: &str) -> bool {
    vendor.to_ascii_uppercase().contains("NVIDIA")
}

/// The compiler options of a build: OpenCL C 1.2, and for a deterministic
/// one correctly rounded single-precision division and square root (the
/// prelude turns contraction off; denormals are kept unless asked otherwise).
pub(super) fn compiler_options(options: &BuildOptions) -> &'static str {
    if options.deterministic { "-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt" } else { "-cl-std=CL1.2" }
}

/// Builds `source` for `device` under `options`; the error message is the build log.
pub(super) fn build(
    context: &Context,
    device: cl_device_id,
    info: &DeviceInfo,
    source: &str,
    options: &BuildOptions,
) -> Result<Program> {
    let ptx = if subgroups_by_ptx(&info.vendor) { "#define HETERO_SUBGROUP_PTX 1\n" } else { "" };
    let prelude = format!("{}{ptx}{}", options.defines(), hetero_kernels::PRELUDE_OPENCL);
    let text = hetero_kernels::assemble(&prelude, source);
    let program = Program::create_from_source(context, &text).map_err(from_cl("clCreateProgramWithSource"))?;
    build_for(&program, device, compiler_options(options)).map_err(|code| {
        let log = program.get_build_log(device).unwrap_or_default();
        let mut failure = cl_error("clBuildProgram", code).with_kind(ErrorKind::Build);
        failure.message =
            if log.trim().is_empty() { format!("{} (the compiler gave no log)", failure.message) } else { log };
        failure
    })?;
    if hetero_kernels::kernel_names(source).is_empty() {
        return Err(error(
            "clBuildProgram",
            ErrorKind::Build,
            "the source declares no kernel (expected `KERNEL void name(`)",
        ));
    }
    Ok(program)
}

/// `clBuildProgram` of `program` for `device` alone, with `options` (no
/// NUL byte). Not `Program::build`, which then asks for the program's
/// kernel names: NVIDIA's OpenCL refuses that question
/// (`CL_INVALID_PROGRAM_EXECUTABLE`) for a program of a context of several
/// devices that was built for one of them.
pub(super) fn build_for(
    program: &Program,
    device: cl_device_id,
    options: &'static str,
) -> std::result::Result<(), i32> {
    let options = std::ffi::CString::new(options).map_err(|_| opencl3::error_codes::CL_INVALID_BUILD_OPTIONS)?;
    opencl3::program::build_program(program.get(), &[device], &options, None, std::ptr::null_mut())
}

/// One kernel, as a kernel object per shard ([`crate::shard`]), with what
/// launches need to know about it.
pub(super) struct ClKernel {
    /// clSetKernelArg and the enqueue that captures the arguments must not
    /// interleave between threads; with an object per shard, threads
    /// launching one kernel at once each set their own arguments instead
    /// of waiting for each other's enqueues. Each is counted on its own, so
    /// that a launch holds its shard's object, not the kernel table's lock,
    /// across the driver calls, writing no count other shards write.
    instances: Sharded<Arc<Mutex<Instance>>>,
    pub(super) name: String,
    /// Parameters the kernel declares.
    pub(super) num_args: u32,
    /// Its work-group limits on the device (`CL_KERNEL_WORK_GROUP_SIZE`,
    /// the preferred multiple, and `CL_KERNEL_LOCAL_MEM_SIZE`: local memory
    /// besides the dynamic argument).
    pub(super) limits: KernelLimits,
}

fn create(program: &Program, name: &str) -> Result<Kernel> {
    Kernel::create(program, name).map_err(|e| {
        let mut err = cl_error("clCreateKernel", e.0);
        if err.kind == ErrorKind::KernelNotFound || e.0 == opencl3::error_codes::CL_INVALID_KERNEL_NAME {
            err.kind = ErrorKind::KernelNotFound;
            err.message = format!("no kernel `{name}` in the module ({})", err.message);
        }
        err
    })
}

impl ClKernel {
    pub(super) fn new(program: &Program, device: cl_device_id, info: &DeviceInfo, name: &str) -> Result<Self> {
        let kernel = create(program, name)?;
        let num_args = kernel.num_args().map_err(from_cl("clGetKernelInfo"))?;
        let query = from_cl("clGetKernelWorkGroupInfo");
        let max_work_group = kernel.get_work_group_size(device).map_err(&query)?;
        let multiple = kernel.get_work_group_size_multiple(device).map_err(&query)?;
        let static_local = kernel.get_local_mem_size(device).map_err(&query)?;
        let limits = KernelLimits::new(
            info,
            u32::try_from(max_work_group).unwrap_or(u32::MAX),
            u32::try_from(multiple).unwrap_or(u32::MAX),
            usize::try_from(static_local).unwrap_or(usize::MAX),
        );
        let mut instances = vec![Padded(Arc::new(Mutex::new(Instance::new(kernel))))];
        for _ in 1..SHARDS {
            instances.push(Padded(Arc::new(Mutex::new(Instance::new(create(program, name)?)))));
        }
        Ok(Self { instances: instances.into(), name: name.to_string(), num_args, limits })
    }

    /// The calling thread's kernel object, locked by the launch that sets
    /// its arguments and enqueues it ([`lock`]).
    pub(super) fn instance(&self) -> Arc<Mutex<Instance>> {
        Arc::clone(&self.instances[shard::current()].0)
    }
}

/// Exclusive access to a kernel object, for setting arguments and enqueueing.
pub(super) fn lock(instance: &Mutex<Instance>) -> MutexGuard<'_, Instance> {
    instance.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A kernel argument's value, as `clSetKernelArg` takes it.
#[derive(Clone, Copy)]
pub(super) enum ArgValue<'a> {
    /// A buffer or sub-buffer.
    Mem(cl_mem),
    /// A scalar's or struct's bytes.
    Bytes(&'a [u8]),
    /// The byte count of a `__local` pointer parameter.
    Local(usize),
}

/// An argument as last set, to compare the next launch's with.
#[derive(PartialEq)]
enum Set {
    Mem(cl_mem),
    Bytes(SmallVec<[u8; 16]>),
    Local(usize),
}

impl ArgValue<'_> {
    fn is(&self, set: &Set) -> bool {
        match (self, set) {
            (ArgValue::Mem(a), Set::Mem(b)) => a == b,
            (ArgValue::Bytes(a), Set::Bytes(b)) => *a == b.as_slice(),
            (ArgValue::Local(a), Set::Local(b)) => a == b,
            _ => false,
        }
    }

    fn kept(&self) -> Set {
        match *self {
            ArgValue::Mem(m) => Set::Mem(m),
            ArgValue::Bytes(b) => Set::Bytes(SmallVec::from_slice(b)),
            ArgValue::Local(n) => Set::Local(n),
        }
    }
}

/// A kernel object and the arguments last set on it: a launch sets only
/// those that changed, as a kernel object keeps its arguments and each
/// enqueue captures them. A `clSetKernelArg` costs about 1 µs of host time
/// on NVIDIA's driver, and a replayed round of the split wave changes 3 or
/// 4 of its 13 arguments a launch.
///
/// Invariant: `set[i]` is `Some` only while argument `i` of the object
/// holds that value and no buffer of the device was freed since it was set
/// (`epoch`: the device's count of frees then): a new buffer can have a
/// freed one's handle, and the driver may have kept what the old one was.
pub(super) struct Instance {
    kernel: Kernel,
    set: Vec<Option<Set>>,
    epoch: u64,
}

// SAFETY: the kept handles are compared, never used; the kernel object may
// be used from any thread (OpenCL objects are thread-safe, and this one is
// used under its mutex).
unsafe impl Send for Instance {}

impl Instance {
    fn new(kernel: Kernel) -> Self {
        Self { kernel, set: Vec::new(), epoch: 0 }
    }

    /// The kernel object.
    pub(super) fn get(&self) -> opencl3::types::cl_kernel {
        self.kernel.get()
    }

    /// Forgets every argument kept when buffers were freed since they were
    /// set: `epoch` is the device's count of frees now.
    pub(super) fn since(&mut self, epoch: u64) {
        if self.epoch != epoch {
            self.set.clear();
            self.epoch = epoch;
        }
    }

    /// Sets argument `index` to `value` unless it holds it already.
    ///
    /// # Safety
    /// `value` is of the parameter's type: a live buffer of the kernel's
    /// context for a buffer, the parameter's size in bytes for a scalar or
    /// struct, and a `__local` pointer parameter for [`ArgValue::Local`].
    pub(super) unsafe fn set(&mut self, index: u32, value: ArgValue<'_>) -> std::result::Result<(), i32> {
        let i = index as usize;
        if self.set.get(i).and_then(Option::as_ref).is_some_and(|set| value.is(set)) {
            return Ok(());
        }
        if self.set.len() <= i {
            self.set.resize_with(i + 1, || None);
        }
        // Unknown until the call succeeds.
        self.set[i] = None;
        let k = self.kernel.get();
        // SAFETY: the caller's contract; each pointer is valid for the size passed.
        unsafe {
            match value {
                ArgValue::Mem(mem) => {
                    let size = std::mem::size_of::<cl_mem>();
                    opencl3::kernel::set_kernel_arg(k, index, size, (&raw const mem).cast())
                }
                ArgValue::Bytes(bytes) => opencl3::kernel::set_kernel_arg(k, index, bytes.len(), bytes.as_ptr().cast()),
                ArgValue::Local(n) => opencl3::kernel::set_kernel_arg(k, index, n, std::ptr::null()),
            }
        }?;
        self.set[i] = Some(value.kept());
        Ok(())
    }
}

/// A launch's range: its global and local sizes in work-items, and the
/// dimensions passed, the fewest that hold every size above 1 (at least
/// one). A kernel sees the same values either way: the work-item
/// functions answer 0 (ids) or 1 (sizes) past the range's dimensions, as
/// they do for a dimension of size 1; only `get_work_dim` tells them
/// apart (hetero's dialect does not use it). What the number of
/// dimensions costs a driver's enqueue: `experiments/gpu/opencl-launch-cost.c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) dims: cl_uint,
    pub(super) global: [usize; 3],
    pub(super) local: [usize; 3],
}

/// The range of a launch of `config`, validated (no size is 0, so a
/// dimension's global size is at least its local size).
pub(super) fn shape(config: &LaunchConfig) -> Shape {
    let global: [usize; 3] = std::array::from_fn(|i| config.grid[i] as usize * config.block[i] as usize);
    let local = config.block.map(|b| b as usize);
    let used = (0..3).rev().find(|&i| global[i] > 1).map_or(1, |i| i + 1);
    Shape { dims: used as cl_uint, global, local }
}

#[cfg(test)]
mod tests {
    use super::shape;
    use crate::device::LaunchConfig;

    fn dims(grid: [u32; 3], block: [u32; 3]) -> u32 {
        shape(&LaunchConfig { grid, block, shared_bytes: 0 }).dims
    }

    /// A launch passes the fewest dimensions that hold its sizes above 1,
    /// so a one-dimensional launch is not enqueued as a three-dimensional
    /// range.
    #[test]
    fn a_range_passes_the_dimensions_it_uses() {
        assert_eq!(dims([1, 1, 1], [1, 1, 1]), 1, "one work-item");
        assert_eq!(dims([8, 1, 1], [256, 1, 1]), 1);
        assert_eq!(dims([1, 1, 1], [256, 1, 1]), 1, "one block");
        assert_eq!(dims([16, 525, 1], [256, 1, 1]), 2, "the wave's rows");
        assert_eq!(dims([1, 1, 1], [16, 16, 1]), 2, "a 2D block alone");
        assert_eq!(dims([1, 1, 2], [64, 1, 1]), 3, "a third dimension past a first");
        assert_eq!(dims([1, 1, 1], [1, 1, 4]), 3);
        let range = shape(&LaunchConfig { grid: [16, 525, 1], block: [256, 1, 1], shared_bytes: 0 });
        assert_eq!((range.global, range.local), ([4096, 525, 1], [256, 1, 1]), "the sizes are unchanged");
    }
}
