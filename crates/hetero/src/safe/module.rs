//! Built modules and their kernels.

use std::sync::Arc;

use crate::AnyDevice;
use crate::device::{Device, KernelId, ModuleId};
use crate::error::Result;

/// Kernels built from one portable source for one device.
pub struct Module<D: Device = AnyDevice> {
    pub(crate) device: Arc<D>,
    pub(crate) id: ModuleId,
}

impl<D: Device> std::fmt::Debug for Module<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Module").field("backend", &self.device.info().backend).field("id", &self.id).finish()
    }
}

impl<D: Device> Module<D> {
    /// The kernel called `name`; [`crate::ErrorKind::KernelNotFound`] if the module has none.
    pub fn kernel(&self, name: &str) -> Result<Kernel<D>> {
        let id = self.device.kernel(self.id, name)?;
        Ok(Kernel { device: Arc::clone(&self.device), id, name: name.to_string() })
    }
}

/// One kernel entry point, ready to launch on a [`crate::Stream`].
pub struct Kernel<D: Device = AnyDevice> {
    pub(crate) device: Arc<D>,
    pub(crate) id: KernelId,
    name: String,
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
}
