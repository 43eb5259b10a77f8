//! The BabelStream kernels of `bandwidth.kern`: each block copies its run
//! of elements (`STREAM_PER_THREAD` per thread) in one read and one write per array, which the compiler
//! vectorises; dot adds each thread's grid-stride products in the kernel's
//! order and the block's sums with the kernel's tree.

use super::{Args, Block, Fault, block_sum};

/// The elements `[first, end)` one block covers: `STREAM_PER_THREAD`
/// elements per thread, consecutive for the block.
fn run(block: &Block, n: usize) -> std::ops::Range<usize> {
    let len = block.threads() * hetero_kernels::STREAM_PER_THREAD as usize;
    let first = (block.idx[0] as usize * len).min(n);
    first..(first + len).min(n)
}

/// Reads `len` elements of argument `arg` from `at`.
fn load(args: &Args, arg: usize, at: usize, len: usize) -> Fault<Vec<f32>> {
    let mut out = vec![0.0f32; len];
    args.slice::<f32>(arg)?.read(at, &mut out)?;
    Ok(out)
}

pub(super) fn stream_copy(block: &Block, args: &Args) -> Fault<()> {
    let r = run(block, args.u32(2)? as usize);
    let a = load(args, 0, r.start, r.len())?;
    args.slice_mut::<f32>(1)?.write(r.start, &a)
}

pub(super) fn stream_mul(block: &Block, args: &Args) -> Fault<()> {
    let (s, r) = (args.f32(2)?, run(block, args.u32(3)? as usize));
    let b: Vec<f32> = load(args, 1, r.start, r.len())?.into_iter().map(|c| s * c).collect();
    args.slice_mut::<f32>(0)?.write(r.start, &b)
}

pub(super) fn stream_add(block: &Block, args: &Args) -> Fault<()> {
    let r = run(block, args.u32(3)? as usize);
    let (a, b) = (load(args, 0, r.start, r.len())?, load(args, 1, r.start, r.len())?);
    let c: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    args.slice_mut::<f32>(2)?.write(r.start, &c)
}

pub(super) fn stream_triad(block: &Block, args: &Args) -> Fault<()> {
    let (s, r) = (args.f32(3)?, run(block, args.u32(4)? as usize));
    let (b, c) = (load(args, 1, r.start, r.len())?, load(args, 2, r.start, r.len())?);
    let a: Vec<f32> = b.iter().zip(&c).map(|(b, c)| b + s * c).collect();
    args.slice_mut::<f32>(0)?.write(r.start, &a)
}

pub(super) fn stream_dot(block: &Block, args: &Args) -> Fault<()> {
    let (a, b) = (args.slice::<f32>(0)?, args.slice::<f32>(1)?);
    let n = args.u32(3)? as usize;
    let threads = block.threads();
    block.need_shared(threads * 4)?;
    let stride = threads * block.grid[0] as usize;
    let first = block.idx[0] as usize * threads;
    let mut sums = vec![0.0f32; threads];
    let (mut xs, mut ys) = (vec![0.0f32; threads], vec![0.0f32; threads]);
    // One grid-stride step of every thread of the block at a time: a
    // contiguous run of `threads` elements (shorter at the end).
    let mut i = first;
    while i < n {
        let len = threads.min(n - i);
        a.read(i, &mut xs[..len])?;
        b.read(i, &mut ys[..len])?;
        for ((sum, x), y) in sums.iter_mut().zip(&xs[..len]).zip(&ys[..len]) {
            *sum += x * y;
        }
        i += stride;
    }
    let total = block_sum(&mut sums);
    args.slice_mut::<f32>(2)?.set(block.idx[0] as usize, total)
}
