//! Work across two devices of one backend, as a node's code does it: a
//! kernel on device A, a peer copy of its output to device B ordered after
//! it, a kernel on B, and the result copied back to A, checked on the host.

use hetero::{BlockRequest, Context, Kernel, LaunchConfig, PeerRoute, Result};

/// Elements each pair moves.
pub const LEN: usize = 1 << 16;

fn affine(ctx: &Context) -> Result<Kernel> {
    ctx.build_module(hetero::kernels::UTIL)?.kernel("affine_u32")
}

/// Enqueues `x = a * x + b` over the whole buffer.
fn launch(stream: &hetero::Stream, kernel: &Kernel, x: &mut hetero::DeviceBuffer<u32>, a: u32, b: u32) -> Result<()> {
    let n = u32::try_from(x.len()).unwrap_or(u32::MAX);
    let threads = kernel.block_size(BlockRequest::new(256));
    let config = LaunchConfig::covering([n, 1, 1], [threads, 1, 1], 0);
    let xs = x.slice_mut(..)?;
    // SAFETY: affine_u32 touches x[0..n) and x holds n elements.
    unsafe { stream.launch(kernel, config, &[(&xs).into(), n.into(), a.into(), b.into()]) }
}

/// Runs the round trip between `a` and `b`; the route the copies took.
///
/// Nothing here synchronises between the steps: B's copy waits for A's
/// kernel, and A's copy back waits for B's kernel, on the devices.
pub fn round_trip(a: &Context, b: &Context) -> Result<PeerRoute> {
    let (ka, kb) = (affine(a)?, affine(b)?);
    let (sa, sb) = (a.stream()?, b.stream()?);
    let input: Vec<u32> = (0..LEN as u32).collect();
    let mut on_a = sa.upload(&input)?;
    launch(&sa, &ka, &mut on_a, 2, 1)?;
    let mut on_b = sb.alloc::<u32>(LEN)?;
    let route = sb.copy_peer(&on_a, &mut on_b)?;
    launch(&sb, &kb, &mut on_b, 3, 0)?;
    let mut back = sa.alloc::<u32>(LEN)?;
    sa.copy_peer(&on_b, &mut back)?;
    let got = sa.download(&back)?;
    match got.iter().enumerate().find(|&(i, &v)| v != 3 * (2 * i as u32 + 1)) {
        None => Ok(route),
        Some((i, v)) => Err(hetero::Error::new(
            a.info().backend,
            "multi-device",
            hetero::ErrorKind::Driver,
            format!("element {i} is {v}, expected {}", 3 * (2 * i as u32 + 1)),
        )),
    }
}
