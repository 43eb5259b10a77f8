//! Programs and kernels of the OpenCL backend.
//!
//! A portable source is compiled by `clBuildProgram` after the OpenCL
//! prelude; on failure the error carries the build log. Kernels that use
//! dynamic shared memory declare it as their last parameter (a `__local`
//! pointer), which [`ClKernel`] sets from the launch's byte count.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use opencl3::context::Context;
use opencl3::kernel::Kernel;
use opencl3::program::Program;
use opencl3::types::cl_device_id;

use super::error::{cl_error, error, from_cl};
use crate::device::KernelLimits;
use crate::device::{BuildOptions, DeviceInfo};
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
    instances: Sharded<Arc<Mutex<Kernel>>>,
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
        let mut instances = vec![Padded(Arc::new(Mutex::new(kernel)))];
        for _ in 1..SHARDS {
            instances.push(Padded(Arc::new(Mutex::new(create(program, name)?))));
        }
        Ok(Self { instances: instances.into(), name: name.to_string(), num_args, limits })
    }

    /// The calling thread's kernel object, locked by the launch that sets
    /// its arguments and enqueues it ([`lock`]).
    pub(super) fn instance(&self) -> Arc<Mutex<Kernel>> {
        Arc::clone(&self.instances[shard::current()].0)
    }
}

/// Exclusive access to a kernel object, for setting arguments and enqueueing.
pub(super) fn lock(instance: &Mutex<Kernel>) -> MutexGuard<'_, Kernel> {
    instance.lock().unwrap_or_else(PoisonError::into_inner)
}
