//! `wave_step` of `wave.kern`, with the same association of every sum: each
//! thread of a block computes `WAVE_ROWS` cells of its column.

use super::{Args, Block, Fault};

pub(super) fn wave_step(block: &Block, args: &Args) -> Fault<()> {
    let (u_prev, u, u_next) = (args.buffer::<f32>(0)?, args.buffer::<f32>(1)?, args.buffer::<f32>(2)?);
    let nx = args.u32(3)? as usize;
    let ny = args.u32(4)? as usize;
    let c2 = args.f32(5)?;
    let (src_x, src_y, src) = (args.u32(6)? as usize, args.u32(7)? as usize, args.f32(8)?);
    let [dx, dy, _] = block.dim.map(|d| d as usize);
    let rows = dy * hetero_kernels::WAVE_ROWS as usize;
    let (x0, y0) = (block.idx[0] as usize * dx, block.idx[1] as usize * rows);
    for y in y0..(y0 + rows).min(ny) {
        for x in x0..(x0 + dx).min(nx) {
            let i = y * nx + x;
            if x < 2 || y < 2 || x + 2 >= nx || y + 2 >= ny {
                u_next.set(i, 0.0)?;
                continue;
            }
            let near = (u.get(i - 1)? + u.get(i + 1)?) + (u.get(i - nx)? + u.get(i + nx)?);
            let far = (u.get(i - 2)? + u.get(i + 2)?) + (u.get(i - 2 * nx)? + u.get(i + 2 * nx)?);
            let lap = (4.0f32 / 3.0) * near - (1.0f32 / 12.0) * far - 5.0 * u.get(i)?;
            let mut v = 2.0 * u.get(i)? - u_prev.get(i)? + c2 * lap;
            if x == src_x && y == src_y {
                v += src;
            }
            u_next.set(i, v)?;
        }
    }
    Ok(())
}
