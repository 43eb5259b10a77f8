//! Support for test suites that run on every backend a machine has.
//!
//! A test asks [`context`] for a device of a backend. When the backend
//! cannot run here the answer is `Ok(None)` and the test should print the
//! returned reason as `skipped: …` — unless the backend is listed in the
//! `HETERO_REQUIRE` environment variable (comma-separated backend names, as
//! CI sets it), in which case its absence is an `Err` that fails the test.
//!
//! The device is the backend's first, or the one `HETERO_<BACKEND>_DEVICE`
//! chooses ([`device_var`]: an index or a piece of the device's name or
//! platform, e.g. `HETERO_OPENCL_DEVICE=rusticl`), so one test suite runs
//! on each implementation a machine has. A choice that matches no device
//! is an `Err`.

use crate::any::{AnyDevice, discover};
use crate::device::{Backend, Device};
use crate::safe::{AllocatorOptions, Context};
use crate::select::DeviceSelector;

/// Environment variable naming the backends a test run must have.
pub const REQUIRE_VAR: &str = "HETERO_REQUIRE";

/// The environment variable that chooses `backend`'s device for tests:
/// `HETERO_HOST_DEVICE`, `HETERO_OPENCL_DEVICE`, `HETERO_CUDA_DEVICE` or
/// `HETERO_HIP_DEVICE`.
pub fn device_var(backend: Backend) -> String {
    format!("HETERO_{}_DEVICE", backend.name().to_uppercase())
}

/// The device `HETERO_<BACKEND>_DEVICE` chooses; the first when it is unset
/// or empty.
pub fn device_selector(backend: Backend) -> DeviceSelector {
    std::env::var(device_var(backend))
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| v.parse().ok())
        .unwrap_or_default()
}

/// Backends named in `HETERO_REQUIRE` (unknown names are an error).
pub fn required_backends() -> Result<Vec<Backend>, String> {
    let Ok(list) = std::env::var(REQUIRE_VAR) else { return Ok(Vec::new()) };
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().map_err(|e| format!("{REQUIRE_VAR}: {e}")))
        .collect()
}

/// What a test gets for a backend.
#[derive(Debug)]
pub enum Availability {
    /// The chosen device of the backend.
    Ready(Context<AnyDevice>),
    /// The backend cannot run here and is not required; the reason.
    Skipped(String),
}

/// The chosen device of `backend` (see the module doc), or `Ok(None)` after printing
/// `skipped: <reason>`; `Err` when the backend is required but missing.
pub fn context_or_skip(backend: Backend) -> Result<Option<Context<AnyDevice>>, String> {
    Ok(match context(backend)? {
        Availability::Ready(ctx) => Some(ctx),
        Availability::Skipped(reason) => {
            println!("skipped: {reason}");
            None
        }
    })
}

/// The chosen device of `backend`; `Err` when it is required but missing,
/// or when `HETERO_<BACKEND>_DEVICE` names a device there is not.
pub fn context(backend: Backend) -> Result<Availability, String> {
    context_with(backend, None)
}

/// As [`context`], with these allocator options instead of the default
/// and [`crate::ALLOCATOR_ENV`].
pub fn context_with_allocator(backend: Backend, options: AllocatorOptions) -> Result<Availability, String> {
    context_with(backend, Some(options))
}

fn context_with(backend: Backend, options: Option<AllocatorOptions>) -> Result<Availability, String> {
    let mut found = discover(backend);
    if !found.devices.is_empty() {
        let selector = device_selector(backend);
        let device = found.take(&selector).map_err(|e| format!("{}={selector}: {e}", device_var(backend)))?;
        return Ok(Availability::Ready(match options {
            Some(o) => Context::with_allocator(device, o),
            None => Context::new(device),
        }));
    }
    let reason = found.unavailable.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    if required_backends()?.contains(&backend) {
        return Err(format!("{backend} is required by {REQUIRE_VAR} but cannot run: {reason}"));
    }
    Ok(Availability::Skipped(reason))
}

/// Two contexts of one backend ([`context_pair_or_skip`]).
pub type ContextPair = (Context<AnyDevice>, Context<AnyDevice>);

/// Two devices of `backend` for tests of work across devices: the chosen
/// device ([`context`]) and another device of the same platform where
/// there is one, else a second object of the chosen device (a device to
/// itself through the peer paths). `Ok(None)` after printing
/// `skipped: <reason>` as [`context_or_skip`] does.
pub fn context_pair_or_skip(backend: Backend) -> Result<Option<ContextPair>, String> {
    let Some(first) = context_or_skip(backend)? else { return Ok(None) };
    let mut found = discover(backend);
    let info = first.device().info();
    let other = found.devices.iter().position(|d| {
        let i = d.info();
        i.platform == info.platform && (i.ordinal != info.ordinal || i.name != info.name)
    });
    let second = match other {
        Some(index) => found.devices.remove(index),
        None => {
            let selector = device_selector(backend);
            found.take(&selector).map_err(|e| format!("{}={selector}: {e}", device_var(backend)))?
        }
    };
    Ok(Some((first, Context::new(second))))
}
