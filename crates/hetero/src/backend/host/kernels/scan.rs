//! `scan_tile_sums` and `scan_tiles` of `scan.kern`, one tile per block.
//! Integer sums are exact, so sequential sums and scans of a tile give the
//! same result as the GPU's. Tiles are copied through local memory in runs
//! of `RUN` elements.

use super::{Args, Block, Fault};

/// Elements copied in or out at a time.
const RUN: usize = 2048;

/// The tile of `block`: (first element, elements in it) for `n` elements.
fn tile(block: &Block, items: usize, n: usize) -> (usize, usize) {
    let size = block.threads() * items;
    let start = block.idx[0] as usize * size;
    (start, size.min(n.saturating_sub(start)))
}

pub(super) fn scan_tile_sums(block: &Block, args: &Args) -> Fault<()> {
    let input = args.slice::<u32>(0)?;
    let sums = args.slice_mut::<u32>(1)?;
    let n = args.u32(2)? as usize;
    let items = args.u32(3)? as usize;
    block.need_shared(block.threads() * 4)?;
    let (start, len) = tile(block, items, n);
    let mut run = [0u32; RUN];
    let mut total = 0u32;
    for at in (start..start + len).step_by(RUN) {
        let part = &mut run[..RUN.min(start + len - at)];
        input.read(at, part)?;
        total = part.iter().fold(total, |t, &v| t.wrapping_add(v));
    }
    sums.set(block.idx[0] as usize, total)
}

pub(super) fn scan_tiles(block: &Block, args: &Args) -> Fault<()> {
    let input = args.slice::<u32>(0)?;
    let output = args.slice_mut::<u32>(1)?;
    let offsets = args.slice::<u32>(2)?;
    let n = args.u32(3)? as usize;
    let items = args.u32(4)? as usize;
    let use_offsets = args.u32(5)? != 0;
    let size = block.threads() * items;
    block.need_shared((size + size / 32 + 2 * block.threads()) * 4)?;
    let (start, len) = tile(block, items, n);
    let mut running = if use_offsets { offsets.get(block.idx[0] as usize)? } else { 0 };
    let mut run = [0u32; RUN];
    for at in (start..start + len).step_by(RUN) {
        let part = &mut run[..RUN.min(start + len - at)];
        input.read(at, part)?;
        for v in part.iter_mut() {
            let next = running.wrapping_add(*v);
            *v = running;
            running = next;
        }
        output.write(at, part)?;
    }
    Ok(())
}
