//! The host backend's implementations of the algorithms' kernels, in
//! Rust, for each element type and operator.
//!
//! `alg_reduce` and `alg_segmented_reduce` keep the kernels' contract
//! (block `b` of `G` writes the combination of its share; a grid-stride
//! share of segments), with each block's share contiguous rather than
//! strided, as suits a CPU's caches. `alg_scan` runs as one block that
//! scans the whole input in parallel on the host's cores (reduce, scan
//! the chunk totals, rescan); the library launches it so.

use rayon::prelude::*;

use super::{Element, ReduceOp};
use crate::host_kernel::{Args, Block, Fault, HostKernel, KernelFn};

/// Elements read into a local buffer at a time.
const PIECE: usize = 4096;
/// Independent accumulators: lanes that the compiler can keep in vectors.
const LANES: usize = 8;

/// The registrations for `T` and `op`, in the source's parameter order.
///
/// Registered as trusted, as the host's built-in kernels are: their
/// accesses are plain copies, not atomic ones, which is sound because each
/// block (or, in the scan, each chunk) writes elements no other one
/// touches, and the typed layer never lets an input and an output of one
/// launch overlap.
pub(super) fn kernels<T: Element>(op: ReduceOp) -> Vec<HostKernel> {
    let (reduce, segmented): (KernelFn, KernelFn) = match op {
        ReduceOp::Sum => (reduce::<T, 0>, segmented::<T, 0>),
        ReduceOp::Min => (reduce::<T, 1>, segmented::<T, 1>),
        ReduceOp::Max => (reduce::<T, 2>, segmented::<T, 2>),
    };
    vec![
        HostKernel::new("alg_reduce", reduce).trusted().slice::<T>().slice_mut::<T>().scalar::<u32>().scalar::<T>(),
        HostKernel::new("alg_segmented_reduce", segmented)
            .trusted()
            .slice::<T>()
            .slice::<u32>()
            .slice_mut::<T>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<T>(),
        HostKernel::new("alg_scan", scan::<T>)
            .trusted()
            .slice::<T>()
            .slice_mut::<T>()
            .slice_mut::<u32>()
            .scalar::<u32>()
            .scalar::<u32>()
            .scalar::<T>(),
    ]
}

const fn op_of(code: u8) -> ReduceOp {
    match code {
        0 => ReduceOp::Sum,
        1 => ReduceOp::Min,
        _ => ReduceOp::Max,
    }
}

/// The combination of `input[range]` with `identity`, read a piece at a
/// time and folded in `LANES` independent lanes.
fn fold<T: Element>(
    input: &crate::host_kernel::Slice<'_, T>,
    range: std::ops::Range<usize>,
    op: ReduceOp,
    identity: T,
) -> Fault<T> {
    let mut lanes = [identity; LANES];
    let mut piece = vec![identity; PIECE.min(range.len())];
    let mut at = range.start;
    while at < range.end {
        let len = PIECE.min(range.end - at);
        let part = &mut piece[..len];
        input.read(at, part)?;
        let mut chunks = part.chunks_exact(LANES);
        for chunk in &mut chunks {
            for (lane, v) in lanes.iter_mut().zip(chunk) {
                *lane = op.apply(*lane, *v);
            }
        }
        for (lane, v) in lanes.iter_mut().zip(chunks.remainder()) {
            *lane = op.apply(*lane, *v);
        }
        at += len;
    }
    Ok(lanes.into_iter().fold(identity, |a, b| op.apply(a, b)))
}

/// `alg_reduce(in, partials, n, identity)`.
fn reduce<T: Element, const OP: u8>(block: &Block, args: &Args) -> Fault {
    let input = args.slice::<T>(0)?;
    let partials = args.slice_mut::<T>(1)?;
    let n = args.u32(2)? as usize;
    let identity = args.scalar::<T>(3)?;
    let (b, grid) = (block.idx()[0] as usize, block.grid()[0] as usize);
    let share = n.div_ceil(grid.max(1));
    let start = (b * share).min(n);
    let total = fold(&input, start..(start + share).min(n), op_of(OP), identity)?;
    partials.set(b, total)
}

/// `alg_segmented_reduce(in, offsets, out, n, segments, group,
/// identity)`: block `b` takes segments `b`, `b + G`, ...; offsets are
/// clamped to the input as the kernel clamps them.
fn segmented<T: Element, const OP: u8>(block: &Block, args: &Args) -> Fault {
    let input = args.slice::<T>(0)?;
    let offsets = args.slice::<u32>(1)?;
    let out = args.slice_mut::<T>(2)?;
    let n = args.u32(3)? as usize;
    let segments = args.u32(4)? as usize;
    let identity = args.scalar::<T>(6)?;
    let (b, grid) = (block.idx()[0] as usize, block.grid()[0] as usize);
    for s in (b..segments).step_by(grid.max(1)) {
        let end = (offsets.get(s + 1)? as usize).min(n);
        let begin = (offsets.get(s)? as usize).min(end);
        out.set(s, fold(&input, begin..end, op_of(OP), identity)?)?;
    }
    Ok(())
}

/// Scans `part` in place (inclusive), after `running`, in one chain of
/// adds; returns the total with it. Integer adds are quick enough for it.
fn scan_chain<T: Element>(part: &mut [T], mut running: T) -> T {
    for v in part.iter_mut() {
        running = running.add(*v);
        *v = running;
    }
    running
}

/// [`scan_chain`] for floats. A float add waits for the one before, so
/// one chain through the piece runs at one add's latency per element: its
/// four quarters are scanned as four interleaved chains instead, then each
/// is offset by the totals before it (an add per element that
/// vectorises). The sums differ from one chain's in rounding only, within
/// the sequential sum's bound. On 2 cores at 2^24 elements it took the
/// f32 scan from about 15 to about 11 ms; integers were slower with it.
fn scan_piece<T: Element>(part: &mut [T], running: T, zero: T) -> T {
    let q = part.len() / 4;
    let (body, tail) = part.split_at_mut(4 * q);
    let (a, rest) = body.split_at_mut(q);
    let (b, rest) = rest.split_at_mut(q);
    let (c, d) = rest.split_at_mut(q);
    let mut acc = [zero; 4];
    for (((x, y), z), w) in a.iter_mut().zip(b.iter_mut()).zip(c.iter_mut()).zip(d.iter_mut()) {
        acc[0] = acc[0].add(*x);
        *x = acc[0];
        acc[1] = acc[1].add(*y);
        *y = acc[1];
        acc[2] = acc[2].add(*z);
        *z = acc[2];
        acc[3] = acc[3].add(*w);
        *w = acc[3];
    }
    let mut offset = running;
    for (quarter, total) in [a, b, c, d].into_iter().zip(acc) {
        for v in quarter.iter_mut() {
            *v = offset.add(*v);
        }
        offset = offset.add(total);
    }
    for v in tail {
        offset = offset.add(*v);
        *v = offset;
    }
    offset
}

/// The error of a host kernel the library launches as one block over the
/// whole input, when it is launched otherwise.
pub(super) fn one_block(block: &Block, name: &str) -> Fault {
    if block.grid() != [1, 1, 1] {
        return Err(format!("the host's {name} runs as one block, not a grid of {:?}", block.grid()));
    }
    Ok(())
}

/// `alg_scan(in, out, state, n, items, exclusive, identity)`, as one
/// block over the whole input.
fn scan<T: Element>(block: &Block, args: &Args) -> Fault {
    one_block(block, "alg_scan")?;
    let n = args.u32(3)? as usize;
    let exclusive = args.u32(4)? != 0;
    let zero = args.scalar::<T>(5)?;
    let chunks = (rayon::current_num_threads() * 4).max(1);
    let chunk = n.div_ceil(chunks).div_ceil(PIECE).max(1) * PIECE;
    let ranges: Vec<_> = (0..n).step_by(chunk).map(|s| s..(s + chunk).min(n)).collect();
    let totals: Vec<T> =
        ranges.par_iter().map(|r| fold(&args.slice::<T>(0)?, r.clone(), ReduceOp::Sum, zero)).collect::<Fault<_>>()?;
    let mut carry = zero;
    let starts: Vec<T> = totals
        .iter()
        .map(|t| {
            let before = carry;
            carry = carry.add(*t);
            before
        })
        .collect();
    ranges.into_par_iter().zip(starts).try_for_each(|(range, mut running)| {
        let (input, output) = (args.slice::<T>(0)?, args.slice_mut::<T>(1)?);
        let mut piece = vec![zero; PIECE.min(range.len())];
        let mut at = range.start;
        while at < range.end {
            let len = PIECE.min(range.end - at);
            let part = &mut piece[..len];
            input.read(at, part)?;
            let before = running;
            running = if T::FLOAT { scan_piece(part, running, zero) } else { scan_chain(part, running) };
            if exclusive {
                part.copy_within(..len - 1, 1);
                part[0] = before;
            }
            output.write(at, part)?;
            at += len;
        }
        Ok(())
    })
}
