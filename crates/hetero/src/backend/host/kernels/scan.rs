//! `scan_block` and `scan_add` of `scan.kern`. Integer sums are exact, so a
//! sequential scan of the block gives the same result as the GPU's.

use super::{Args, Block, Fault};

pub(super) fn scan_block(block: &Block, args: &Args) -> Fault<()> {
    let input = args.buffer::<u32>(0)?;
    let output = args.buffer::<u32>(1)?;
    let block_sums = args.buffer::<u32>(2)?;
    let n = args.u32(3)? as usize;
    let threads = block.threads();
    block.need_shared(threads * 8)?;
    let first = block.idx[0] as usize * threads;
    let mut running = 0u32;
    for i in first..first + threads {
        let v = if i < n { input.get(i)? } else { 0 };
        if i < n {
            output.set(i, running)?;
        }
        running = running.wrapping_add(v);
    }
    block_sums.set(block.idx[0] as usize, running)
}

pub(super) fn scan_add(block: &Block, args: &Args) -> Fault<()> {
    let output = args.buffer::<u32>(0)?;
    let offsets = args.buffer::<u32>(1)?;
    let n = args.u32(2)? as usize;
    let threads = block.threads();
    let add = offsets.get(block.idx[0] as usize)?;
    let first = block.idx[0] as usize * threads;
    for i in first..(first + threads).min(n) {
        output.set(i, output.get(i)?.wrapping_add(add))?;
    }
    Ok(())
}
