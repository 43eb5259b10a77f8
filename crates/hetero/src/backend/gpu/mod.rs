//! The GPU wing: one implementation of [`crate::Device`] for CUDA-like
//! runtimes ([`GpuDevice`]), generic over the small [`Runtime`] trait that
//! the `cuda` and `hip` backends implement with thin FFI wrappers.
//!
//! What lives here once: handle tables, poisoning after sticky errors,
//! user-event gates (a mapped word, and work held on the host behind a
//! closed one), the module cache,
//! argument packing, `DeviceInfo` from attributes, memory and streams.
//! What each backend keeps: library loading and discovery, the error-code
//! table, the run-time compiler (NVRTC for `sm_XY` / hiprtc), the FFI
//! wrappers (`runtime.rs`), the context model (primary context and
//! `cuCtxSetCurrent` / `hipSetDevice`) and memory-pool detection.

mod capture;
mod device;
mod event;
mod graph;
pub(crate) mod loader;
mod memory;
pub(crate) mod module;
mod runtime;
mod stream;

use std::any::Any;

pub use device::GpuDevice;
pub use runtime::ModuleCache;
pub(crate) use runtime::sealed::Sealed;
#[cfg(test)]
pub(crate) use runtime::symbols;
pub use runtime::{Attribute, Identity, Runtime};

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};

/// Sorts the outcome of a driver's initialisation and per-device opening
/// (run under `catch_unwind`, since the bindings panic on a missing symbol)
/// into devices and reasons.
pub(crate) fn collect_devices<T>(
    backend: Backend,
    call: &'static str,
    found: std::thread::Result<Result<Vec<Result<T>>>>,
) -> (Vec<T>, Vec<Error>) {
    match found {
        Ok(Ok(results)) => {
            let mut devices = Vec::new();
            let mut failures = Vec::new();
            for result in results {
                match result {
                    Ok(d) => devices.push(d),
                    Err(e) => failures.push(e),
                }
            }
            (devices, failures)
        }
        Ok(Err(mut e)) => {
            e.kind = ErrorKind::Unavailable;
            (Vec::new(), vec![e])
        }
        Err(panic) => {
            let why = panic_text(&panic).unwrap_or_else(|| "unknown failure".into());
            let message = format!("the {backend} runtime could not be used: {why}");
            (Vec::new(), vec![Error::new(backend, call, ErrorKind::Unavailable, message)])
        }
    }
}

fn panic_text(panic: &Box<dyn Any + Send>) -> Option<String> {
    panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
}
