//! What the tests of OpenCL's environment variables share: each sets a
//! variable before any device is opened, one test per process.

use hetero::{Backend, ErrorKind};

/// Sets `var` to `value`, which hetero does not understand, and checks that
/// opening OpenCL's devices fails with a `Config` error whose message holds
/// each of `names` (the variable, the value as it is quoted, a value that
/// is understood). `false`, after printing why, where OpenCL is not
/// compiled in or has no device: the caller's test has nothing to check.
pub fn refuses(var: &str, value: &str, names: &[&str]) -> bool {
    if !hetero::is_compiled(Backend::OpenCl) {
        println!("skipped: the opencl feature is not compiled in");
        return false;
    }
    // SAFETY: the test binary has one test, and no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var(var, value) };
    match hetero::backend_devices(Backend::OpenCl) {
        Err(e) if e.kind == ErrorKind::Unavailable && !e.message.contains(var) => {
            println!("skipped: no OpenCL device: {e}");
            false
        }
        Err(e) => {
            assert_eq!(e.kind, ErrorKind::Config, "{e}");
            assert!(e.message.contains(var), "{e}");
            for name in names {
                assert!(e.message.contains(name), "{e}: no `{name}`");
            }
            true
        }
        Ok(devices) => panic!("{} devices opened with {var}={value:?}, which is not understood", devices.len()),
    }
}
