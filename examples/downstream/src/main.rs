//! Runs the example on the first usable device of the compiled-in backends.

use std::process::ExitCode;

fn main() -> ExitCode {
    let found = hetero::devices();
    for missing in &found.unavailable {
        eprintln!("skipped: {missing}");
    }
    let Some(device) = found.devices.into_iter().next() else {
        eprintln!("no usable device");
        return ExitCode::from(2);
    };
    let ctx = hetero::Context::new(device);
    match downstream::offsets(&ctx, &[3, 0, 5, 2]) {
        Ok(offsets) => {
            println!("{} ({}): offsets {offsets:?}", ctx.info().backend, ctx.info().name);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
