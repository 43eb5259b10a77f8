//! `wave_step` of `wave.kern`, with the same association of every sum: each
//! block computes `WAVE_ROWS` rows per thread row, over its columns.
//!
//! A row of the block is computed from local copies of the five rows of `u`
//! it needs and its row of `u_prev`, in one loop over the columns that the
//! compiler vectorises.

use super::{Args, Block, Fault};

pub(super) fn wave_step(block: &Block, args: &Args) -> Fault<()> {
    let ny = args.u32(4)? as usize;
    let (c2, src_x, src_y, src) = (args.f32(5)?, args.u32(6)? as usize, args.u32(7)? as usize, args.f32(8)?);
    rows(block, args, 0..ny, [0, 0], c2, (src_x, src_y, src))
}

/// `wave_rows`: `wave_step` for rows `[row_begin, row_end)` only, of
/// `u_prev` and `u_next` held from `out_first` and `u` from `u_first`.
pub(super) fn wave_rows(block: &Block, args: &Args) -> Fault<()> {
    let (begin, end) = (args.u32(5)? as usize, args.u32(6)? as usize);
    let (out_first, u_first) = (args.u32(7)? as usize, args.u32(8)? as usize);
    let (c2, src_x, src_y, src) = (args.f32(9)?, args.u32(10)? as usize, args.u32(11)? as usize, args.f32(12)?);
    if out_first > begin || u_first > out_first {
        return Err("wave_rows: out_first must be at most row_begin, and u_first at most out_first".into());
    }
    rows(block, args, begin..end, [out_first, u_first], c2, (src_x, src_y, src))
}

/// The rows of `range` that `block` covers (its block row counted from
/// `range.start`), as one thread row per `WAVE_ROWS` rows; `u_prev` and
/// `u_next` hold rows from `out_first`, `u` from `u_first`.
fn rows(
    block: &Block,
    args: &Args,
    range: std::ops::Range<usize>,
    [out_first, u_first]: [usize; 2],
    c2: f32,
    (src_x, src_y, src): (usize, usize, f32),
) -> Fault<()> {
    let (u_prev, u, u_next) = (args.slice::<f32>(0)?, args.slice::<f32>(1)?, args.slice_mut::<f32>(2)?);
    let nx = args.u32(3)? as usize;
    let ny = args.u32(4)? as usize;
    let [dx, dy, _] = block.dim.map(|d| d as usize);
    let rows = dy * hetero_kernels::WAVE_ROWS as usize;
    let (x0, y0) = (block.idx[0] as usize * dx, range.start + block.idx[1] as usize * rows);
    let x_end = (x0 + dx).min(nx);
    if x0 >= x_end {
        return Ok(());
    }
    // The block's interior columns, [xa, xb): the two outermost on each side stay zero.
    let (xa, xb) = (x0.max(2), x_end.min(nx.saturating_sub(2)));
    let width = xb.saturating_sub(xa);
    let mut out = vec![0.0f32; x_end - x0];
    let mut mid = vec![0.0f32; width + 4];
    let [mut up2, mut up1, mut dn1, mut dn2, mut prev] = std::array::from_fn(|_| vec![0.0f32; width]);
    for y in y0..(y0 + rows).min(range.end).min(ny) {
        // Row y of u, and of u_prev and u_next (y >= out_first >= u_first).
        let (row, out_row) = ((y - u_first) * nx, (y - out_first) * nx);
        out.fill(0.0);
        if width > 0 && y >= 2 && y + 2 < ny {
            u.read(row + xa - 2, &mut mid)?;
            u.read(row - 2 * nx + xa, &mut up2)?;
            u.read(row - nx + xa, &mut up1)?;
            u.read(row + nx + xa, &mut dn1)?;
            u.read(row + 2 * nx + xa, &mut dn2)?;
            u_prev.read(out_row + xa, &mut prev)?;
            let cells = out[xa - x0..xb - x0].iter_mut();
            for (j, v) in cells.enumerate() {
                let c = mid[j + 2];
                let near = (mid[j + 1] + mid[j + 3]) + (up1[j] + dn1[j]);
                let far = (mid[j] + mid[j + 4]) + (up2[j] + dn2[j]);
                let lap = (4.0f32 / 3.0) * near - (1.0f32 / 12.0) * far - 5.0 * c;
                *v = 2.0 * c - prev[j] + c2 * lap;
            }
            if y == src_y && (xa..xb).contains(&src_x) {
                out[src_x - x0] += src;
            }
        }
        u_next.write(out_row + x0, &out)?;
    }
    Ok(())
}
