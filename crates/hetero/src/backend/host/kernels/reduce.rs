//! `reduce_partial` and `reduce_atomic` of `reduce.kern`.

use super::{Args, Block, Fault, block_sum};

/// Per-thread grid-stride sums of one block, as `thread_sum` computes them.
///
/// Every thread's four accumulators see the kernel's additions in the
/// kernel's order, so the sums are bit-identical to a GPU's without fused
/// multiply-adds. The loop runs across the block's threads first: one step
/// of all threads reads one contiguous run of `threads` elements, added to
/// contiguous accumulators (a vectorised loop).
fn thread_sums(block: &Block, args: &Args) -> Fault<Vec<f32>> {
    let input = args.slice::<f32>(0)?;
    let n = args.u32(2)? as usize;
    let threads = block.threads();
    block.need_shared(threads * 4)?;
    let stride = threads * block.grid[0] as usize;
    let first = block.idx[0] as usize * threads;
    let mut acc = [vec![0.0f32; threads], vec![0.0f32; threads], vec![0.0f32; threads], vec![0.0f32; threads]];
    // Thread 0's index; while the block's last thread takes the four-load
    // step, every thread does.
    let mut i = first;
    while i + threads + 3 * stride <= n {
        for (k, a) in acc.iter_mut().enumerate() {
            input.add_to(i + k * stride, a)?;
        }
        i += 4 * stride;
    }
    // The rest thread by thread, as the kernel's loops run it.
    (0..threads)
        .map(|tid| {
            let mut j = i + tid;
            while j + 3 * stride < n {
                for (k, a) in acc.iter_mut().enumerate() {
                    a[tid] += input.get(j + k * stride)?;
                }
                j += 4 * stride;
            }
            while j < n {
                acc[0][tid] += input.get(j)?;
                j += stride;
            }
            Ok((acc[0][tid] + acc[1][tid]) + (acc[2][tid] + acc[3][tid]))
        })
        .collect()
}

pub(super) fn reduce_partial(block: &Block, args: &Args) -> Fault<()> {
    let total = block_sum(&mut thread_sums(block, args)?);
    args.slice_mut::<f32>(1)?.set(block.idx[0] as usize, total)
}

pub(super) fn reduce_atomic(block: &Block, args: &Args) -> Fault<()> {
    let total = block_sum(&mut thread_sums(block, args)?);
    args.slice_mut::<f32>(1)?.atomic_add(0, total)
}
