//! `cargo run -p custom-kernel` prints `ok` for every backend this machine
//! can run (CI: host and PoCL), and the kernels pass on each.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::process::Command;

use hetero::Backend;

#[test]
fn kernels_pass_on_every_required_backend() {
    for backend in [Backend::Host, Backend::OpenCl, Backend::Cuda, Backend::Hip] {
        let Some(ctx) = hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else { continue };
        custom_kernel::run(&ctx).unwrap_or_else(|e| panic!("{backend}: {e}"));
    }
}

#[test]
fn the_binary_prints_ok_per_device() {
    let output = Command::new(env!("CARGO_BIN_EXE_custom-kernel")).output().expect("the example runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.iter().all(|l| l.ends_with(": ok")), "{stdout}");
    for backend in hetero::testing::required_backends().unwrap() {
        let prefix = format!("{backend} (");
        assert!(lines.iter().any(|l| l.starts_with(&prefix)), "no line for required {backend}:\n{stdout}");
    }
}
