//! A downstream crate: picks its backend with a cargo feature of its own
//! (forwarded to hetero) and writes its computation once, generic over
//! [`hetero::Device`].

use hetero::{BlockRequest, Context, Device, LaunchConfig, Result};

/// Turns per-jet constituent counts into offsets of each jet's first
/// constituent (an exclusive prefix sum), on any device, with hetero's
/// portable scan kernel, in one tile of up to 256 threads × 16 counts:
/// 4096 counts where the kernel runs 256 threads, fewer where it runs fewer.
pub fn offsets<D: Device>(ctx: &Context<D>, counts: &[u32]) -> Result<Vec<u32>> {
    let n = counts.len();
    let kernel = ctx.build_module(hetero::kernels::SCAN)?.kernel("scan_tiles")?;
    let items = 16u32;
    // The tile (16 counts a thread, padded one word in 32) and two words of
    // scratch per thread, in shared memory.
    let threads = kernel.block_size(BlockRequest::new(256).shared_per_thread((items as usize + 3) * 4));
    let tile = (threads * items) as usize;
    if n > tile {
        return Err(hetero::Error::new(
            ctx.info().backend,
            "offsets",
            hetero::ErrorKind::OutOfBounds,
            format!("this example scans up to {tile} counts in one tile, not {n}"),
        ));
    }
    let stream = ctx.stream()?;
    let mut input = ctx.alloc::<u32>(n.max(1))?;
    let mut output = ctx.alloc::<u32>(n.max(1))?;
    let unused_offsets = ctx.alloc::<u32>(1)?;
    stream.copy_from_host(counts, input.slice_mut(..n)?)?;
    {
        let (i, o, t) = (input.slice(..)?, output.slice_mut(..)?, unused_offsets.slice(..)?);
        let shared = (tile + tile / 32 + 2 * threads as usize) * 4;
        let config = LaunchConfig::linear(1, threads, shared);
        // SAFETY: scan_tiles(in, out, offsets, n, items, use_offsets = 0)
        // reads in[0..n) and writes out[0..n) of one tile; offsets is not read.
        unsafe {
            stream.launch(
                &kernel,
                config,
                &[(&i).into(), (&o).into(), (&t).into(), (n as u32).into(), items.into(), 0u32.into()],
            )?
        };
    }
    let mut result = vec![0; n];
    stream.copy_to_host(output.slice(..n)?, &mut result)?;
    Ok(result)
}
