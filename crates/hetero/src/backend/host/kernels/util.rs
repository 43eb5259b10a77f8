//! `affine_u32` of `util.kern`.

use super::{Args, Block, Fault};

pub(super) fn affine_u32(block: &Block, args: &Args) -> Fault<()> {
    let x = args.slice_mut::<u32>(0)?;
    let n = args.u32(1)? as usize;
    let (a, b) = (args.u32(2)?, args.u32(3)?);
    let threads = block.threads();
    let first = block.idx[0] as usize * threads;
    for i in first..(first + threads).min(n) {
        x.set(i, a.wrapping_mul(x.get(i)?).wrapping_add(b))?;
    }
    Ok(())
}
