//! Native handles that cross between hetero and other software: memory and
//! streams a framework made, adopted by a device ([`crate::Device::adopt_memory`],
//! [`crate::Device::adopt_stream`]), and the native handles of hetero's own
//! ([`crate::Device::raw_memory`], [`crate::Device::raw_stream`]).
//!
//! The types are plain data: holding one keeps nothing alive. Who keeps
//! the memory or stream alive, and for how long, is the contract of the
//! `unsafe` call that takes it.

use std::ffi::c_void;
use std::sync::Mutex;

/// A native memory handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawMemory {
    /// An address: a `CUdeviceptr` on CUDA, a `hipDeviceptr_t` on HIP, a
    /// host address on the host backend.
    Address(u64),
    /// An OpenCL `cl_mem` of the device's context.
    ClMem(*mut c_void),
}

/// A native stream: a `CUstream` on CUDA, a `hipStream_t` on HIP, an
/// in-order `cl_command_queue` of the device's context and device on OpenCL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawStream(pub *mut c_void);

// SAFETY: both are handle values; using them is governed by the unsafe
// calls that take them, not by holding one.
unsafe impl Send for RawMemory {}
// SAFETY: as above.
unsafe impl Sync for RawMemory {}
// SAFETY: as above.
unsafe impl Send for RawStream {}
// SAFETY: as above.
unsafe impl Sync for RawStream {}

/// What a device calls once it no longer uses adopted memory: when the
/// allocation is freed, which the typed layer does only after every queued
/// use has completed. It runs at most once, on whichever thread frees.
pub struct Release(Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl Release {
    /// `f` is called once hetero is done with the memory (to drop a
    /// framework's reference, return it to a pool, or free it).
    pub fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Self(Mutex::new(Some(Box::new(f))))
    }

    /// Calls the function, if it has not run yet.
    pub(crate) fn run(&self) {
        let f = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(f) = f {
            f();
        }
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        self.run();
    }
}

impl std::fmt::Debug for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Release")
    }
}
