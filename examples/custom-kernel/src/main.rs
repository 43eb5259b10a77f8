//! Runs the crate's kernels on every usable device of the compiled-in
//! backends; one line per device, ending in `ok` or the failure.

use std::process::ExitCode;

fn main() -> ExitCode {
    let found = hetero::devices();
    for missing in &found.unavailable {
        eprintln!("skipped: {missing}");
    }
    if found.devices.is_empty() {
        eprintln!("no usable device");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for device in found.devices {
        let ctx = hetero::Context::new(device);
        let (backend, name) = (ctx.info().backend, ctx.info().name.clone());
        match custom_kernel::run(&ctx) {
            Ok(()) => println!("{backend} ({name}): ok"),
            Err(e) => {
                failed = true;
                println!("{backend} ({name}): FAILED: {e}");
            }
        }
    }
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}
