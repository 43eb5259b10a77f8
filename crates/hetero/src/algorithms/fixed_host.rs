//! The host backend's implementations of `fixed.kern`'s kernels: the same
//! tiles and the same order of additions ([`crate::ops::pairwise`]), so
//! they give the GPU kernels' bits.

use super::{Element, FIXED_ITEMS};
use crate::host_kernel::{Args, Block, Fault, HostKernel};
use crate::ops::pairwise;

/// The registrations for `T`, in the source's parameter order.
///
/// Trusted, as the other algorithms' host kernels are: each block writes
/// the outputs of its own tiles or segments only.
pub(super) fn kernels<T: Element>() -> Vec<HostKernel> {
    vec![
        HostKernel::new("alg_fixed_reduce", reduce::<T>).trusted().slice::<T>().slice_mut::<T>().scalar::<u32>(),
        HostKernel::new("alg_fixed_scan", scan::<T>)
            .trusted()
            .slice::<T>()
            .slice_mut::<T>()
            .slice::<T>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<u32>(),
        HostKernel::new("alg_fixed_segmented", segmented::<T>)
            .trusted()
            .slice::<T>()
            .slice::<u32>()
            .slice_mut::<T>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<u32>(),
    ]
}

/// The tiles block `block` takes: `idx, idx + grid, ...` below `tiles`.
fn my_tiles(block: &Block, tiles: usize) -> impl Iterator<Item = usize> {
    (block.idx()[0] as usize..tiles).step_by((block.grid()[0] as usize).max(1))
}

/// Elements `range` of `input`, read into a vector.
fn read<T: Element>(input: &crate::host_kernel::Slice<'_, T>, range: std::ops::Range<usize>) -> Fault<Vec<T>> {
    let mut values = vec![T::zeroed(); range.len()];
    input.read(range.start, &mut values)?;
    Ok(values)
}

/// `alg_fixed_reduce(in, out, n)`.
fn reduce<T: Element>(block: &Block, args: &Args) -> Fault {
    let (input, out, n) = (args.slice::<T>(0)?, args.slice_mut::<T>(1)?, args.u32(2)? as usize);
    let size = block.threads() * FIXED_ITEMS as usize;
    for tile in my_tiles(block, n.div_ceil(size)) {
        let values = read(&input, tile * size..((tile + 1) * size).min(n))?;
        out.set(tile, pairwise::sum(&values))?;
    }
    Ok(())
}

/// `alg_fixed_scan(in, out, offsets, n_in, n_out, shift)`.
fn scan<T: Element>(block: &Block, args: &Args) -> Fault {
    let (input, out, offsets) = (args.slice::<T>(0)?, args.slice_mut::<T>(1)?, args.slice::<T>(2)?);
    let (n_in, n_out, shift) = (args.u32(3)? as usize, args.u32(4)? as usize, args.u32(5)? as usize);
    let size = block.threads() * FIXED_ITEMS as usize;
    let last = n_out + shift;
    for tile in my_tiles(block, last.div_ceil(size)) {
        let first = tile * size;
        let values = read(&input, first.min(n_in)..(first + size).min(n_in))?;
        // E(j) for j in first..end; j = n_in at most, the sum of everything.
        let end = (first + size).min(last);
        if end - first > values.len() + 1 {
            return Err(format!(
                "alg_fixed_scan: {n_out} outputs from {n_in} inputs with shift {shift}: past E({n_in})"
            ));
        }
        let mut e = vec![T::zeroed(); end - first];
        pairwise::exclusive(&values, offsets.get(tile)?, &mut e);
        let skip = shift.saturating_sub(first);
        out.write(first + skip - shift, &e[skip..])?;
    }
    Ok(())
}

/// `alg_fixed_segmented(in, offsets, out, n, segments, lanes)`: a segment
/// per step of the block's loop (the lanes do not change the bits).
fn segmented<T: Element>(block: &Block, args: &Args) -> Fault {
    let (input, offsets, out) = (args.slice::<T>(0)?, args.slice::<u32>(1)?, args.slice_mut::<T>(2)?);
    let (n, segments) = (args.u32(3)? as usize, args.u32(4)? as usize);
    for s in my_tiles(block, segments) {
        let end = (offsets.get(s + 1)? as usize).min(n);
        let begin = (offsets.get(s)? as usize).min(end);
        out.set(s, pairwise::sum(&read(&input, begin..end)?))?;
    }
    Ok(())
}
