//! Support for test suites that run on every backend a machine has.
//!
//! A test asks [`context`] for a device of a backend. When the backend
//! cannot run here the answer is `Ok(None)` and the test should print the
//! returned reason as `skipped: …` — unless the backend is listed in the
//! `HETERO_REQUIRE` environment variable (comma-separated backend names, as
//! CI sets it), in which case its absence is an `Err` that fails the test.

use crate::any::{AnyDevice, discover};
use crate::device::Backend;
use crate::safe::{AllocatorOptions, Context};

/// Environment variable naming the backends a test run must have.
pub const REQUIRE_VAR: &str = "HETERO_REQUIRE";

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
    /// The first device of the backend.
    Ready(Context<AnyDevice>),
    /// The backend cannot run here and is not required; the reason.
    Skipped(String),
}

/// The first device of `backend`, or `Ok(None)` after printing
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

/// The first device of `backend`; `Err` when it is required but missing.
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
        let device = found.devices.remove(0);
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
