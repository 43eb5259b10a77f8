//! What the CUDA and HIP loaders share: they never trust the library they
//! load further than its contract, and say why a load failed.
//!
//! - a name or bus id the library writes is read up to the buffer's end,
//!   NUL or not ([`text_of`]);
//! - a device count past [`MAX_DEVICES`] (or below zero) is an error,
//!   not a loop that opens a million devices ([`device_count`]);
//! - an empty environment variable is unset, and a relative one is never
//!   searched ([`env_path`]): a library is loaded by absolute path or by
//!   bare name from the system's library path only;
//! - a load error carries the loader's own reason (`dlerror`), which
//!   libloading keeps as the error's source ([`load_error`]).

use std::ffi::{CStr, OsString, c_char, c_int};
use std::path::PathBuf;

use crate::device::Backend;
use crate::error::{Error, ErrorKind, Result};

/// Devices a runtime may report before its count is taken as broken: past
/// any node built (NVIDIA's and AMD's drivers address at most a few dozen
/// GPUs a node), far below what would exhaust memory.
pub(crate) const MAX_DEVICES: usize = 1024;

/// The text a library wrote into `buffer`: up to its first NUL, or all of
/// it when the library left none (never past the buffer).
pub(crate) fn text_of(buffer: &[c_char]) -> String {
    // c_char is i8 or u8 by target: the same bytes either way.
    let bytes: Vec<u8> = buffer.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(text) => text.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// The device count `call` reported, checked to lie in `0..=MAX_DEVICES`.
pub(crate) fn device_count(backend: Backend, call: &'static str, count: c_int) -> Result<usize> {
    match usize::try_from(count) {
        Ok(n) if n <= MAX_DEVICES => Ok(n),
        _ => Err(Error::new(
            backend,
            call,
            ErrorKind::Unavailable,
            format!(
                "{call} reports {count} devices, which no node has (hetero opens at most {MAX_DEVICES}): \
                 the runtime library is broken or not the vendor's"
            ),
        )),
    }
}

/// The path in environment variable `name`, when set to an absolute path;
/// empty counts as unset. A relative path is an error naming the variable,
/// so that nothing is ever loaded relative to the current directory.
pub(crate) fn env_path(name: &str) -> std::result::Result<Option<PathBuf>, String> {
    env_value(name, std::env::var_os(name))
}

fn env_value(name: &str, value: Option<OsString>) -> std::result::Result<Option<PathBuf>, String> {
    match value {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => {
            let path = PathBuf::from(v);
            if path.is_absolute() {
                Ok(Some(path))
            } else {
                Err(format!(
                    "{name}={} is a relative path: give an absolute one (libraries are never loaded relative to the current directory)",
                    path.display()
                ))
            }
        }
    }
}

/// libloading's error with the loader's reason (its source) after it.
pub(crate) fn load_error(error: &libloading::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name that fills its buffer without a NUL is read to the buffer's
    /// end, not past it (a stand-in runtime made safe discovery read 257
    /// bytes of a 256-byte buffer).
    #[test]
    fn text_stops_at_the_buffer_end() {
        let full = [b'A' as c_char; 8];
        assert_eq!(text_of(&full), "AAAAAAAA");
        let mut named = [0 as c_char; 8];
        named[..3].copy_from_slice(&[b'H' as c_char, b'1' as c_char, b'0' as c_char]);
        assert_eq!(text_of(&named), "H10");
        assert_eq!(text_of(&[]), "");
    }

    /// Counts beyond any node, or negative, are errors naming the count.
    #[test]
    fn absurd_device_counts_are_refused() {
        assert_eq!(device_count(Backend::Hip, "hipGetDeviceCount", 8).unwrap(), 8);
        for bad in [1_000_000, i32::MAX, -1] {
            let e = device_count(Backend::Hip, "hipGetDeviceCount", bad).unwrap_err();
            assert!(e.message.contains(&bad.to_string()) && e.message.contains("1024"), "{e}");
        }
    }

    /// Empty is unset; relative is refused with the variable's name.
    #[test]
    fn environment_paths_are_absolute_or_unset() {
        assert_eq!(env_value("ROCM_PATH", None).unwrap(), None);
        assert_eq!(env_value("ROCM_PATH", Some(OsString::new())).unwrap(), None);
        assert_eq!(env_value("ROCM_PATH", Some("/opt/rocm".into())).unwrap(), Some(PathBuf::from("/opt/rocm")));
        let e = env_value("HETERO_NVRTC", Some("lib/libnvrtc.so".into())).unwrap_err();
        assert!(e.contains("HETERO_NVRTC=lib/libnvrtc.so") && e.contains("relative"), "{e}");
    }

    /// A load error says what the loader said, not only "dlopen failed".
    #[test]
    fn load_errors_carry_the_loaders_reason() {
        // SAFETY: the file does not exist; nothing is loaded.
        let e = unsafe { libloading::Library::new("/nonexistent/libhetero-none.so") }.unwrap_err();
        let text = load_error(&e);
        assert!(text.contains("dlopen failed: ") && text.contains("/nonexistent/libhetero-none.so"), "{text}");
    }
}
