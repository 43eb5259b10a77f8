//! Lists every device of every compiled-in backend and runs a short smoke
//! test on the first device of each, printing every step as it happens, so
//! a hang or failure on a new machine shows where it is.
//!
//! `cargo run --example probe --all-features [BACKEND...]`

use std::time::Instant;

use hetero::{Backend, Context, LaunchConfig};

fn step<T>(start: Instant, what: &str, result: hetero::Result<T>) -> Option<T> {
    let ms = start.elapsed().as_secs_f64() * 1e3;
    match result {
        Ok(value) => {
            println!("  {ms:9.1} ms  ok    {what}");
            Some(value)
        }
        Err(e) => {
            println!("  {ms:9.1} ms  FAIL  {what}: {e}");
            None
        }
    }
}

fn smoke(backend: Backend) -> Option<()> {
    let t = Instant::now();
    println!("{backend}:");
    let found = hetero::discover(backend);
    for e in &found.unavailable {
        println!("  unavailable: {e}");
    }
    for d in &found.devices {
        let info = hetero::Device::info(d);
        println!("  device {}: {} ({}, {})", info.ordinal, info.name, info.vendor, info.platform);
    }
    let ctx = Context::new(found.devices.into_iter().next()?);
    step(t, "context", Ok(()))?;
    let stream = step(t, "create stream", ctx.stream())?;
    let mut x = step(t, "alloc 1024 u32", ctx.alloc::<u32>(1024))?;
    step(t, "fill", stream.fill(&mut x, 2u32))?;
    step(t, "synchronize", stream.synchronize())?;
    let module = step(t, "build util module", ctx.build_module(hetero::kernels::UTIL))?;
    let kernel = step(t, "kernel affine_u32", module.kernel("affine_u32"))?;
    {
        let xs = step(t, "slice", x.slice_mut(..))?;
        // SAFETY: affine_u32 touches x[0..1024), and x holds 1024 elements.
        let launched = unsafe {
            stream.launch(
                &kernel,
                LaunchConfig::covering([1024, 1, 1], [kernel.block_size(hetero::BlockRequest::new(256)), 1, 1], 0),
                &[(&xs).into(), 1024u32.into(), 3u32.into(), 1u32.into()],
            )
        };
        step(t, "launch", launched)?;
    }
    step(t, "synchronize", stream.synchronize())?;
    let event = step(t, "create event", ctx.event())?;
    step(t, "record event", stream.record(&event))?;
    step(t, "synchronize event", event.synchronize())?;
    let mut out = vec![0u32; 1024];
    step(t, "copy to host", stream.copy_to_host(&x, &mut out))?;
    let right = out.iter().all(|&v| v == 7);
    println!("  result {}", if right { "right (all 7)" } else { "WRONG" });
    right.then_some(())
}

fn main() {
    let wanted: Vec<Backend> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let backends = if wanted.is_empty() { hetero::compiled_backends() } else { wanted };
    let mut ok = true;
    for backend in backends {
        ok &= smoke(backend).is_some();
    }
    std::process::exit(if ok { 0 } else { 1 });
}
