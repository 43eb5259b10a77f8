//! Modules of the host backend.
//!
//! The host backend cannot compile C. "Building" a portable source resolves
//! each kernel entry point it declares (`KERNEL void name(`) to a Rust
//! implementation: one the caller registered under that name (checked
//! against the source's parameter list), else a built-in kernel whose whole
//! source file appears unchanged in the source. Anything else fails the
//! build with a log that names each kernel and what is missing: a kernel
//! that only shares a built-in's name is never silently replaced by it.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::error;
use super::kernels::{self, HostKernel};
use crate::device::BuildOptions;
use crate::error::{ErrorKind, Result};
use crate::signature;

/// The resolved kernels of one source.
pub(super) struct HostModule {
    pub(super) kernels: HashMap<String, Arc<HostKernel>>,
}

impl HostModule {
    pub(super) fn build(source: &str, options: &BuildOptions, registered: &[HostKernel]) -> Result<Self> {
        let names = hetero_kernels::kernel_names(source);
        let declared = hetero_kernels::kernel_params(source);
        let structs = hetero_kernels::struct_layouts(source);
        let mut log = String::from("host backend: resolving kernel entry points to Rust implementations\n");
        if names.is_empty() {
            log.push_str("error: the source declares no kernel (expected `KERNEL void name(`)\n");
            return Err(error("build_module", ErrorKind::Build, log));
        }
        let builtins = kernels::builtins(options);
        let normal = hetero_kernels::normal_form(source);
        let mut resolved = HashMap::new();
        let mut failed = false;
        for name in names {
            let builtin = builtins.iter().find(|(_, k)| k.name() == name);
            let outcome = if let Some(kernel) = registered.iter().find(|k| k.name() == name) {
                let params = declared.iter().find(|(n, _)| *n == name).and_then(|(_, d)| signature::parse(d));
                match params {
                    None => Err(format!(
                        "the source's parameter list of `{name}` cannot be read, so the host implementation cannot be checked against it"
                    )),
                    Some(params) => match kernel.mismatch(&params, &structs) {
                        Some(why) => Err(why),
                        None => Ok((kernel.clone(), "registered implementation")),
                    },
                }
            } else if let Some((file, kernel)) = builtin {
                if normal.contains(&hetero_kernels::normal_form(file)) {
                    Ok((kernel.clone(), "built-in"))
                } else {
                    Err(format!(
                        "`{name}` has the name of a built-in kernel but not its source text (hetero-kernels); register a host implementation for it"
                    ))
                }
            } else {
                Err(format!("no host implementation of `{name}`; register one (Context::build_module_with)"))
            };
            match outcome {
                Ok((kernel, what)) => {
                    log.push_str(&format!("  {name}: ok ({what})\n"));
                    resolved.insert(name, Arc::new(kernel));
                }
                Err(why) => {
                    failed = true;
                    log.push_str(&format!("  {name}: error: {why}\n"));
                }
            }
        }
        if failed {
            let names: Vec<&str> = builtins.iter().map(|(_, k)| k.name()).collect();
            log.push_str(&format!("built-in host kernels: {}\n", names.join(", ")));
            return Err(error("build_module", ErrorKind::Build, log));
        }
        Ok(Self { kernels: resolved })
    }
}
