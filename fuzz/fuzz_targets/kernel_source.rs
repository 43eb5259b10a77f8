//! A kernel source, as a user's crate hands it over: the dialect's readers
//! (entry points, parameter lists, struct layouts) and a host build, which
//! checks every launch's parameter declarations, never panic.

#![no_main]

use std::sync::OnceLock;

use hetero::Context;
use hetero::backend::host::HostDevice;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|source: &str| {
    static CTX: OnceLock<Context<HostDevice>> = OnceLock::new();
    let _ = hetero_kernels_of(source);
    let ctx = CTX.get_or_init(|| Context::new(HostDevice::new()));
    if let Ok(module) = ctx.build_module(source) {
        for name in hetero::kernels::kernel_names(source) {
            let _ = module.kernel(&name);
        }
    }
});

fn hetero_kernels_of(source: &str) -> usize {
    let names = hetero::kernels::kernel_names(source);
    let params = hetero::kernels::kernel_params(source);
    let structs = hetero::kernels::struct_layouts(source);
    names.len() + params.len() + structs.len()
}
