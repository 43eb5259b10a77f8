//! Built modules and their kernels.

use std::sync::Arc;

use super::shared::Shared;
use crate::AnyDevice;
use crate::device::{Device, KernelId, ModuleId};
use crate::error::{Error, ErrorKind, Result};

/// Kernels built from one portable source for one device.
pub struct Module<D: Device = AnyDevice> {
    pub(crate) device: Arc<Shared<D>>,
    pub(crate) id: ModuleId,
    /// Each kernel's parameter declarations, parsed from the source
    /// (dynamic shared memory excluded).
    pub(crate) params: Vec<(String, Vec<String>)>,
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
        let params = self.params.iter().find(|(n, _)| n == name).map(|(_, p)| p.len());
        Ok(Kernel { device: Arc::clone(&self.device), id, name: name.to_string(), params })
    }
}

/// One kernel entry point, ready to launch on a [`crate::Stream`].
pub struct Kernel<D: Device = AnyDevice> {
    pub(crate) device: Arc<Shared<D>>,
    pub(crate) id: KernelId,
    name: String,
    /// Number of parameters the source declares, when it could be parsed.
    params: Option<usize>,
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

    /// Refuses a launch whose argument count differs from the source's
    /// parameter list: the same check, and message, on every backend.
    pub(crate) fn check_arg_count(&self, given: usize) -> Result<()> {
        match self.params {
            Some(expected) if expected != given => Err(Error::new(
                self.device.info().backend,
                "launch",
                ErrorKind::InvalidLaunch,
                format!(
                    "kernel `{}` takes {expected} arguments but the launch passed {given} (dynamic shared memory is not an argument)",
                    self.name
                ),
            )),
            _ => Ok(()),
        }
    }
}
