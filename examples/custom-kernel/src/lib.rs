//! A crate's own kernels on every backend.
//!
//! The kernels are written once in hetero's portable dialect
//! (`kernels.kern`), which CUDA, HIP and OpenCL compile at run time. The
//! host backend cannot compile C, so each kernel also has a Rust
//! implementation here, registered with the module build; hetero checks
//! the registrations against the source's parameter lists, and every
//! launch's arguments against the same lists, on every backend.

use hetero::host_kernel::{Args, Block, Fault, HostKernel};
use hetero::{BlockRequest, Context, LaunchConfig};

/// The portable source of the crate's kernels.
pub const SOURCE: &str = include_str!("kernels.kern");

/// `Coeffs` of the source, passed by value: the same fields, in order.
#[repr(C)]
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Coeffs {
    /// Factor of `x`.
    pub a: f32,
    /// Factor of `y`.
    pub b: f32,
    /// Elements.
    pub n: u32,
}

/// Side of the square thread block (and shared-memory tile) of `transpose`
/// where the kernel can run that many threads; see [`tile_side`].
pub const TILE: u32 = 16;

/// The side of `transpose`'s square block on its device: [`TILE`], or the
/// largest square the kernel's limits allow (threads, and a tile of
/// `side * (side + 1)` floats in shared memory).
pub fn tile_side(kernel: &hetero::Kernel) -> u32 {
    let most = kernel.block_size(BlockRequest::new(TILE * TILE).shared_per_thread(2 * std::mem::size_of::<f32>()));
    most.isqrt().clamp(1, TILE)
}

/// `axpby` for the host: every thread of one block.
fn axpby(block: &Block, args: &Args) -> Fault {
    let (x, y, c) = (args.slice::<f32>(0)?, args.slice_mut::<f32>(1)?, args.scalar::<Coeffs>(2)?);
    let (b, d) = (block.idx()[0] as usize, block.dim()[0] as usize);
    for i in (b * d..(b + 1) * d).filter(|&i| i < c.n as usize) {
        y.set(i, c.a * x.get(i)? + c.b * y.get(i)?)?;
    }
    Ok(())
}

/// `transpose` for the host: the two phases either side of its barrier,
/// each a loop over the block's threads, with the tile in shared memory.
fn transpose(block: &Block, args: &Args) -> Fault {
    let (input, out) = (args.slice::<f32>(0)?, args.slice_mut::<f32>(1)?);
    let (width, height) = (args.u32(2)?, args.u32(3)?);
    let t = block.dim()[0];
    let [bx, by, _] = block.idx();
    let mut tile = block.shared::<f32>((t * (t + 1)) as usize)?;
    for [tx, ty, _] in block.thread_indices() {
        let (x, y) = (bx * t + tx, by * t + ty);
        if x < width && y < height {
            tile[(ty * (t + 1) + tx) as usize] = input.get((y * width + x) as usize)?;
        }
    }
    // BARRIER
    for [tx, ty, _] in block.thread_indices() {
        let (ox, oy) = (by * t + tx, bx * t + ty);
        if ox < height && oy < width {
            out.set((oy * height + ox) as usize, tile[(tx * (t + 1) + ty) as usize])?;
        }
    }
    Ok(())
}

/// The host implementations of [`SOURCE`]'s kernels, with their parameters.
pub fn host_kernels() -> Vec<HostKernel> {
    vec![
        HostKernel::new("axpby", axpby).slice::<f32>().slice_mut::<f32>().scalar::<Coeffs>(),
        HostKernel::new("transpose", transpose).slice::<f32>().slice_mut::<f32>().scalar::<u32>().scalar::<u32>(),
    ]
}

/// Runs both kernels on `ctx` and checks them against the CPU; the error
/// says what differs.
pub fn run(ctx: &Context) -> Result<(), Box<dyn std::error::Error>> {
    let module = ctx.build_module_with(SOURCE, &host_kernels())?;
    let stream = ctx.stream()?;

    // 1D: y = 2x + 0.5y over a length that is not a multiple of the block.
    let n = 10_007u32;
    let x: Vec<f32> = (0..n).map(|i| (i % 97) as f32 * 0.25).collect();
    let y0: Vec<f32> = (0..n).map(|i| (i % 13) as f32 - 6.0).collect();
    let x_dev = stream.upload(&x)?;
    let mut y = stream.upload(&y0)?;
    let coeffs = Coeffs { a: 2.0, b: 0.5, n };
    let axpby = module.kernel("axpby")?;
    let threads = axpby.block_size(BlockRequest::new(256));
    // SAFETY: thread i < n reads x[i] and updates y[i]; both have n elements.
    unsafe {
        stream.launch(
            &axpby,
            LaunchConfig::covering([n, 1, 1], [threads, 1, 1], 0),
            &[(&x_dev).into(), (&mut y).into(), hetero::Arg::value(&coeffs)],
        )?;
    }
    let got = stream.download(&y)?;
    for (i, v) in got.iter().enumerate() {
        // Exact on the CPU; a GPU may fuse the multiply-add (one rounding less).
        let want = 2.0 * x[i] + 0.5 * y0[i];
        if (v - want).abs() > 1e-6 * want.abs().max(1.0) {
            return Err(format!("axpby element {i}: {v}, expected {want}").into());
        }
    }

    // 2D with shared memory and a barrier: a transpose of a ragged matrix.
    let (width, height) = (300u32, 77u32);
    let matrix: Vec<f32> = (0..width * height).map(|i| i as f32).collect();
    let input = stream.upload(&matrix)?;
    let mut out = stream.alloc_zeros::<f32>(matrix.len())?;
    let transpose = module.kernel("transpose")?;
    let side = tile_side(&transpose);
    let shared = (side * (side + 1)) as usize * std::mem::size_of::<f32>();
    // SAFETY: each thread reads in[y * width + x] for x < width, y < height
    // and writes out[oy * height + ox] for ox < height, oy < width: both
    // buffers hold width * height elements; the tile is the shared memory
    // passed, and the barrier orders its writes before its reads.
    unsafe {
        stream.launch(
            &transpose,
            LaunchConfig::covering([width, height, 1], [side, side, 1], shared),
            &[(&input).into(), (&mut out).into(), width.into(), height.into()],
        )?;
    }
    let got = stream.download(&out)?;
    for row in 0..width {
        for col in 0..height {
            let (v, want) = (got[(row * height + col) as usize], matrix[(col * width + row) as usize]);
            if v != want {
                return Err(format!("transpose element ({row}, {col}): {v}, expected {want}").into());
            }
        }
    }
    Ok(())
}
