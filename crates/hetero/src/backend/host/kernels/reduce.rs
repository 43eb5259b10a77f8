//! `reduce_partial` and `reduce_atomic` of `reduce.kern`.

use super::{Args, Block, Fault, block_sum};

/// Per-thread grid-stride sums of one block, as `thread_sum` computes them.
fn thread_sums(block: &Block, args: &Args) -> Fault<Vec<f32>> {
    let input = args.buffer::<f32>(0)?;
    let n = args.u32(2)? as usize;
    let threads = block.threads();
    block.need_shared(threads * 4)?;
    let stride = threads * block.grid[0] as usize;
    let first = block.idx[0] as usize * threads;
    (0..threads)
        .map(|tid| {
            // The kernel's four accumulators, in its order of additions.
            let mut acc = [0.0f32; 4];
            let mut i = first + tid;
            while i + 3 * stride < n {
                for (k, a) in acc.iter_mut().enumerate() {
                    *a += input.get(i + k * stride)?;
                }
                i += 4 * stride;
            }
            while i < n {
                acc[0] += input.get(i)?;
                i += stride;
            }
            Ok((acc[0] + acc[1]) + (acc[2] + acc[3]))
        })
        .collect()
}

pub(super) fn reduce_partial(block: &Block, args: &Args) -> Fault<()> {
    let total = block_sum(&mut thread_sums(block, args)?);
    args.buffer::<f32>(1)?.set(block.idx[0] as usize, total)
}

pub(super) fn reduce_atomic(block: &Block, args: &Args) -> Fault<()> {
    let total = block_sum(&mut thread_sums(block, args)?);
    args.buffer::<f32>(1)?.atomic_add(0, total)
}
