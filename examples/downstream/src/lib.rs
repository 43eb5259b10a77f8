//! A downstream crate: picks its backend with a cargo feature of its own
//! (forwarded to hetero) and writes its computation once, generic over
//! [`hetero::Device`].

use hetero::{Context, Device, LaunchConfig, Result};

/// Turns per-jet constituent counts into offsets of each jet's first
/// constituent (an exclusive prefix sum), on any device, with hetero's
/// portable scan kernel. Up to 1024 counts (one block).
pub fn offsets<D: Device>(ctx: &Context<D>, counts: &[u32]) -> Result<Vec<u32>> {
    let n = counts.len();
    let threads = 1024u32.min(ctx.info().max_threads_per_block);
    if n as u64 > u64::from(threads) {
        return Err(hetero::Error::new(
            ctx.info().backend,
            "offsets",
            hetero::ErrorKind::OutOfBounds,
            format!("this example scans up to {threads} counts in one block, not {n}"),
        ));
    }
    let stream = ctx.stream()?;
    let kernel = ctx.build_module(hetero::kernels::SCAN)?.kernel("scan_block")?;
    let mut input = ctx.alloc::<u32>(n)?;
    let mut output = ctx.alloc::<u32>(n)?;
    let mut total = ctx.alloc::<u32>(1)?;
    stream.copy_from_host(counts, &mut input)?;
    {
        let (i, o, t) = (input.slice(..)?, output.slice_mut(..)?, total.slice_mut(..)?);
        let config = LaunchConfig::linear(1, threads, threads as usize * 8);
        // SAFETY: scan_block(in, out, block_sums, n) reads in[0..n), writes
        // out[0..n) and block_sums[0]; the buffers hold n, n and 1 elements.
        unsafe { stream.launch(&kernel, config, &[(&i).into(), (&o).into(), (&t).into(), (n as u32).into()])? };
    }
    let mut result = vec![0; n];
    stream.copy_to_host(&output, &mut result)?;
    Ok(result)
}
