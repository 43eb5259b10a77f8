//! `HETERO_OPENCL_GRAPHS` chooses how OpenCL devices replay graphs:
//! command buffers where the device has them (`native`, the default) or the
//! recorded nodes one by one (`replay`); a value that is not understood
//! makes opening the devices fail with a message naming it. One test per
//! process: it sets the variable before any device is opened.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod opencl_env;

use hetero::{Backend, Device};

const ENV: &str = "HETERO_OPENCL_GRAPHS";

#[test]
fn graph_path_follows_the_environment() {
    if !opencl_env::refuses(ENV, "sometimes", &["`sometimes`", "replay"]) {
        return;
    }
    // SAFETY: this test binary has one test, and no other thread reads the
    // environment while it is set.
    unsafe { std::env::set_var(ENV, "replay") };
    for device in hetero::backend_devices(Backend::OpenCl).unwrap() {
        assert!(!device.native_graphs(), "{}: replay was asked for", device.info().name);
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var(ENV) };
    for device in hetero::backend_devices(Backend::OpenCl).unwrap() {
        let info = device.info();
        // PoCL 3.1 (Debian 12, CI) reports cl_khr_command_buffer 0.9.0 with simultaneous use.
        if info.platform.starts_with("Portable Computing Language") {
            assert!(device.native_graphs(), "{}: PoCL's command buffers are used by default", info.name);
        }
        println!("{} ({}): native graphs {}", info.name, info.platform, device.native_graphs());
    }
}
