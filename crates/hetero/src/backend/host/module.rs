//! Modules of the host backend.
//!
//! The host backend cannot compile C. "Building" a portable source resolves
//! each kernel entry point it declares (`KERNEL void name(`) against the Rust
//! kernels in [`super::kernels`]; a source that declares no kernel, or one
//! without a host implementation, fails with a build log that says so.

use std::collections::HashMap;

use super::error::error;
use super::kernels::{self, HostKernel};
use crate::error::{ErrorKind, Result};

/// The resolved kernels of one source.
pub(super) struct HostModule {
    pub(super) kernels: HashMap<String, HostKernel>,
}

impl HostModule {
    pub(super) fn build(source: &str) -> Result<Self> {
        let names = hetero_kernels::kernel_names(source);
        let mut log = String::from("host backend: resolving kernel entry points against built-in Rust kernels\n");
        if names.is_empty() {
            log.push_str("error: the source declares no kernel (expected `KERNEL void name(`)\n");
            return Err(error("build_module", ErrorKind::Build, log));
        }
        let mut resolved = HashMap::new();
        let mut missing = false;
        for name in names {
            match kernels::lookup(&name) {
                Some(kernel) => {
                    log.push_str(&format!("  {name}: ok\n"));
                    resolved.insert(name, kernel);
                }
                None => {
                    missing = true;
                    log.push_str(&format!("  {name}: error: no host implementation\n"));
                }
            }
        }
        if missing {
            log.push_str(&format!("host kernels available: {}\n", kernels::NAMES.join(", ")));
            return Err(error("build_module", ErrorKind::Build, log));
        }
        Ok(Self { kernels: resolved })
    }
}
