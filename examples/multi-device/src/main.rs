//! Pairs every device of each compiled-in backend with every other (and,
//! on a backend with one device, that device with itself through the peer
//! path): one line per ordered pair, ending in `ok` or the failure.

use std::process::ExitCode;

use hetero::{Backend, Context};

/// A short label: the backend, the index and the name.
fn label(index: usize, ctx: &Context) -> String {
    format!("{index} ({})", ctx.info().name)
}

fn main() -> ExitCode {
    let mut failed = false;
    let mut pairs = 0;
    for backend in hetero::compiled_backends() {
        let found = hetero::discover(backend);
        for missing in &found.unavailable {
            eprintln!("skipped: {missing}");
        }
        let contexts: Vec<Context> = found.devices.into_iter().map(Context::new).collect();
        let mut run = |i: usize, a: &Context, j: usize, b: &Context| {
            pairs += 1;
            match multi_device::round_trip(a, b) {
                Ok(route) => println!("{backend} {} -> {} [{route}]: ok", label(i, a), label(j, b)),
                Err(e) => {
                    failed = true;
                    println!("{backend} {} -> {}: FAILED: {e}", label(i, a), label(j, b));
                }
            }
        };
        match contexts.len() {
            0 => {}
            1 => match second_object(backend) {
                Some(again) => run(0, &contexts[0], 0, &again),
                None => eprintln!("skipped: {backend} device 0 could not be opened twice"),
            },
            _ => {
                for (i, a) in contexts.iter().enumerate() {
                    for (j, b) in contexts.iter().enumerate().filter(|&(j, _)| j != i) {
                        run(i, a, j, b);
                    }
                }
            }
        }
    }
    if pairs == 0 {
        eprintln!("no usable device");
        return ExitCode::from(2);
    }
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// A second object of `backend`'s first device.
fn second_object(backend: Backend) -> Option<Context> {
    hetero::discover(backend).devices.into_iter().next().map(Context::new)
}
