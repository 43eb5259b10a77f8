//! The example computes the right thing, and choosing one backend pulls in
//! no other backend's crates.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use std::process::Command;

#[test]
fn offsets_on_every_usable_device() {
    let found = hetero::devices();
    assert!(!found.devices.is_empty());
    for device in found.devices {
        let ctx = hetero::Context::new(device);
        assert_eq!(downstream::offsets(&ctx, &[3, 0, 5, 2]).unwrap(), [0, 3, 3, 8], "{}", ctx.info().backend);
        assert_eq!(downstream::offsets(&ctx, &[]).unwrap(), Vec::<u32>::new());
        assert!(downstream::offsets(&ctx, &vec![1; 5000]).is_err());
    }
}

/// `cargo tree` of the example with only the `opencl` feature.
#[test]
fn opencl_alone_pulls_in_no_cuda_or_hip_crate() {
    let output = Command::new(env!("CARGO"))
        .args(["tree", "--package", "downstream", "--no-default-features", "--features", "opencl", "--edges", "normal"])
        .args(["--prefix", "none"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    let tree = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(tree.contains("opencl3"), "the OpenCL crate is in the tree:\n{tree}");
    for absent in ["cudarc", "cubecl-hip-sys", "rayon"] {
        assert!(!tree.lines().any(|l| l.starts_with(absent)), "{absent} in the tree:\n{tree}");
    }
}
