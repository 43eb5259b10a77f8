//! The host backend's implementations of `select.kern`'s kernels. The
//! library launches the histogram and the select as one block over the
//! whole input (as the host's scan is); the association's preparation
//! takes a contiguous share per block.

use rayon::prelude::*;

use super::Element;
use super::host::one_block;
use crate::host_kernel::{Args, Block, Fault, HostKernel};

/// Elements counted or tested in one piece.
const PIECE: usize = 1 << 16;

/// The registrations for `T`, in the source's parameter order. Trusted,
/// as the other algorithms' host kernels are: the histogram and the select
/// run as one block, and each block of the preparation writes its own
/// share.
pub(super) fn kernels<T: Element>() -> Vec<HostKernel> {
    vec![
        HostKernel::new("alg_histogram", histogram::<T>)
            .trusted()
            .slice::<T>()
            .slice_mut::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<T>()
            .scalar::<T>()
            .scalar::<T>(),
        HostKernel::new("alg_select", select::<T>)
            .trusted()
            .slice::<T>()
            .slice::<u8>()
            .slice_mut::<T>()
            .slice_mut::<u32>()
            .slice_mut::<u32>()
            .slice::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<T>(),
        HostKernel::new("alg_assoc_prepare", assoc_prepare)
            .trusted()
            .slice::<u32>()
            .slice_mut::<u32>()
            .slice_mut::<u32>()
            .scalar::<u32>()
            .scalar::<u32>(),
    ]
}

/// `alg_histogram(in, counts, n, bins, mode, private_bins, lower, upper, scale)`.
fn histogram<T: Element>(block: &Block, args: &Args) -> Fault {
    one_block(block, "alg_histogram")?;
    let (n, bins, mode) = (args.u32(2)? as usize, args.u32(3)?, args.u32(4)?);
    let (lower, upper, scale) = (args.scalar::<T>(6)?, args.scalar::<T>(7)?, args.scalar::<T>(8)?);
    let sums = (0..n.div_ceil(PIECE))
        .into_par_iter()
        .map(|p| {
            let mut values = vec![T::zeroed(); PIECE.min(n - p * PIECE)];
            args.slice::<T>(0)?.read(p * PIECE, &mut values)?;
            let mut local = vec![0u32; bins as usize];
            for v in values {
                if let Some(b) = v.bin(mode, bins, lower, upper, scale) {
                    local[b as usize] += 1;
                }
            }
            Fault::Ok(local)
        })
        .try_reduce(
            || vec![0u32; bins as usize],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                Ok(a)
            },
        )?;
    let counts = args.slice_mut::<u32>(1)?;
    let mut total = vec![0u32; bins as usize];
    counts.read(0, &mut total)?;
    total.iter_mut().zip(sums).for_each(|(t, s)| *t = t.wrapping_add(s));
    counts.write(0, &total)
}

/// Whether `v` (element `i`, after `previous`) is kept (`sel_keep`).
fn keep<T: Element>(v: T, previous: Option<T>, flag: u8, mode: u32, value: T) -> bool {
    match mode {
        0 => flag != 0,
        1 => v < value,
        2 => v <= value,
        3 => v > value,
        4 => v >= value,
        5 => v == value,
        6 => v != value,
        _ => previous.is_none_or(|p| v != p),
    }
}

/// `alg_select(in, flags, out, count, state, prefixes, n, mode, phase,
/// value)`, in phase 0 (the library's only one on the host).
fn select<T: Element>(block: &Block, args: &Args) -> Fault {
    one_block(block, "alg_select")?;
    let (n, mode, value) = (args.u32(6)? as usize, args.u32(7)?, args.scalar::<T>(9)?);
    if args.u32(8)? != 0 {
        return Err("the host's alg_select runs phase 0 only".to_string());
    }
    let mut values = vec![T::zeroed(); n];
    args.slice::<T>(0)?.read(0, &mut values)?;
    let mut flags = vec![0u8; if mode == 0 { n } else { 0 }];
    args.slice::<u8>(1)?.read(0, &mut flags)?;
    let kept: Vec<T> = values
        .par_iter()
        .enumerate()
        .filter(|&(i, &v)| {
            let previous = if i == 0 { None } else { Some(values[i - 1]) };
            keep(v, previous, flags.get(i).copied().unwrap_or(0), mode, value)
        })
        .map(|(_, &v)| v)
        .collect();
    args.slice_mut::<T>(2)?.write(0, &kept)?;
    args.slice_mut::<u32>(3)?.set(0, kept.len() as u32)
}

/// `alg_assoc_prepare(keys, clamped, indices, n, bins)`.
fn assoc_prepare(block: &Block, args: &Args) -> Fault {
    let (keys, clamped, indices) = (args.slice::<u32>(0)?, args.slice_mut::<u32>(1)?, args.slice_mut::<u32>(2)?);
    let (n, bins) = (args.u32(3)? as usize, args.u32(4)?);
    let (b, grid) = (block.idx()[0] as usize, (block.grid()[0] as usize).max(1));
    let share = n.div_ceil(grid);
    let start = (b * share).min(n);
    let end = (start + share).min(n);
    let mut k = vec![0u32; end - start];
    keys.read(start, &mut k)?;
    let c: Vec<u32> = k.iter().map(|&k| k.min(bins)).collect();
    let i: Vec<u32> = (start as u32..end as u32).collect();
    clamped.write(start, &c)?;
    indices.write(start, &i)
}
