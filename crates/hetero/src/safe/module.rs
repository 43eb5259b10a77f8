//! Built modules and their kernels.

use std::ffi::{CStr, CString};
use std::sync::Arc;

use super::args::Arg;
use super::state::DeviceState;
use crate::AnyDevice;
use crate::block::BlockRequest;
use crate::device::KernelLimits;
use crate::device::{Device, KernelArg, KernelId, ModuleId};
use crate::error::{Error, ErrorKind, Result};
use crate::signature::{self, Given, Param};

/// Kernels built from one portable source for one device.
pub struct Module<D: Device = AnyDevice> {
    pub(crate) device: Arc<DeviceState<D>>,
    pub(crate) id: ModuleId,
    /// Each kernel's parameter declarations, parsed from the source
    /// (dynamic shared memory excluded).
    pub(crate) params: Vec<(String, Vec<String>)>,
    /// Size and alignment of the plain structs the source defines.
    pub(crate) structs: Arc<[(String, usize, usize)]>,
}

impl<D: Device> std::fmt::Debug for Module<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("backend", &self.device.info().backend).finish_non_exhaustive()
    }
}

impl<D: Device> Module<D> {
    /// The kernel called `name`; [`crate::ErrorKind::KernelNotFound`] if the module has none.
    pub fn kernel(&self, name: &str) -> Result<Kernel<D>> {
        if name.contains('\0') {
            return Err(Error::new(
                self.device.info().backend,
                "kernel",
                ErrorKind::KernelNotFound,
                format!("kernel name {name:?} contains a NUL byte"),
            ));
        }
        // SAFETY: the module is owned by self.
        let id = unsafe { self.device.kernel(self.id, name) }?;
        // SAFETY: the kernel was just looked up in a module self owns.
        let limits = unsafe { self.device.kernel_limits(id) }?;
        let declared = self.params.iter().find(|(n, _)| n == name).map(|(_, p)| p);
        let count = declared.map(Vec::len);
        let signature = declared.and_then(|d| signature::parse(d));
        Ok(Kernel {
            device: Arc::clone(&self.device),
            id,
            name: name.to_string(),
            // The name has no NUL byte (checked above).
            marker: CString::new(format!("hetero launch {name}")).unwrap_or_default().into(),
            limits,
            count,
            signature,
            structs: Arc::clone(&self.structs),
        })
    }
}

/// One kernel entry point, ready to launch on a [`crate::Stream`].
pub struct Kernel<D: Device = AnyDevice> {
    pub(crate) device: Arc<DeviceState<D>>,
    pub(crate) id: KernelId,
    name: String,
    /// The name of its launches' profiler range, `hetero launch <name>`.
    pub(crate) marker: Arc<CStr>,
    /// What the kernel can run with on its device.
    limits: KernelLimits,
    /// Number of parameters the source declares, when it could be parsed.
    count: Option<usize>,
    /// The parameters, when every declaration could be read.
    signature: Option<Vec<Param>>,
    /// Size and alignment of the plain structs the source defines.
    structs: Arc<[(String, usize, usize)]>,
}

impl<D: Device> std::fmt::Debug for Kernel<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel").field("name", &self.name).finish()
    }
}

impl<D: Device> Kernel<D> {
    /// The entry point's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What this kernel can run with on its device: its largest block,
    /// preferred multiple and static shared memory.
    pub fn limits(&self) -> KernelLimits {
        self.limits
    }

    /// A block size this kernel can run on its device, as close to the
    /// request as its limits allow (see [`BlockRequest::pick`]).
    ///
    /// ```
    /// # #[cfg(feature = "host")] {
    /// # let ctx = hetero::Context::new(hetero::backend::host::HostDevice::new());
    /// let kernel = ctx.build_module(hetero::kernels::REDUCE)?.kernel("reduce_partial")?;
    /// let threads = kernel.block_size(hetero::BlockRequest::new(256).shared_per_thread(4));
    /// assert!(threads >= 1 && threads <= kernel.limits().max_threads);
    /// # }
    /// # Ok::<(), hetero::Error>(())
    /// ```
    pub fn block_size(&self, request: BlockRequest) -> u32 {
        request.pick(self.device.info(), &self.limits)
    }

    /// Refuses a launch whose arguments do not fit the source's parameter
    /// list (count; buffer or scalar; scalar type; element type and
    /// writability of buffers: see the signature module), naming the
    /// kernel, the parameter and both types: the same check, and message,
    /// on every backend.
    pub(crate) fn check_args(&self, args: &[Arg<'_, D>]) -> Result<()> {
        let refuse =
            |message: String| Err(Error::new(self.device.info().backend, "launch", ErrorKind::InvalidLaunch, message));
        if let Some(expected) = self.count
            && expected != args.len()
        {
            return refuse(format!(
                "kernel `{}` takes {expected} arguments but the launch passed {} (dynamic shared memory is not an argument)",
                self.name,
                args.len()
            ));
        }
        let info = self.device.info();
        for (index, arg) in args.iter().enumerate() {
            // Element types are computed only on devices without `double`.
            if !info.fp64
                && match arg {
                    Arg::Buffer(view) => (view.elem)(),
                    Arg::Scalar(scalar) => scalar.c_type(),
                    Arg::Struct(_) => None,
                } == Some("double")
            {
                return refuse(format!(
                    "kernel `{}` argument {} is a double (f64), but {} does not support double precision",
                    self.name,
                    index + 1,
                    info.name
                ));
            }
            if let Arg::Struct(s) = arg
                && s.bytes.is_none()
            {
                return refuse(format!(
                    "kernel `{}` argument {}: a struct `{}` of {} bytes aligned to {} cannot be passed by value (at most {} bytes, aligned to at most 8)",
                    self.name,
                    index + 1,
                    s.rust,
                    s.size,
                    s.align,
                    crate::ArgBytes::MAX
                ));
            }
        }
        for (index, (param, arg)) in self.signature.iter().flatten().zip(args).enumerate() {
            let given = match arg {
                Arg::Buffer(view) => Given::Buffer((view.elem)(), view.access == super::tracker::Access::Write),
                Arg::Struct(s) => {
                    let layout =
                        self.structs.iter().find(|(n, ..)| *n == param.ty).map(|&(_, size, align)| (size, align));
                    match signature::struct_mismatch(&self.name, index, param, (s.rust, s.size, s.align), layout) {
                        Some(why) => return refuse(why),
                        None => continue,
                    }
                }
                // Its Rust type is unknown, so its layout cannot be checked.
                Arg::Scalar(KernelArg::Bytes(_)) => {
                    return refuse(format!(
                        "kernel `{}` argument {} is raw struct bytes; pass the struct with `Arg::value`, which the launch checks",
                        self.name,
                        index + 1
                    ));
                }
                Arg::Scalar(scalar) => match scalar.c_type() {
                    Some(ty) => Given::Scalar(ty),
                    // A raw buffer handle would reach the kernel untracked.
                    None => {
                        return refuse(format!(
                            "kernel `{}` argument {} is a raw buffer handle; pass a slice of the buffer, which the typed layer tracks",
                            self.name,
                            index + 1
                        ));
                    }
                },
            };
            if let Some(why) = signature::mismatch(&self.name, index, param, given) {
                return refuse(why);
            }
        }
        Ok(())
    }
}
