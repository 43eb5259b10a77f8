//! `pull_jets`, `pull_jets_packed` and `pull_terms` of `pull.kern`.

use std::f32::consts::PI;

use super::{Args, Block, Fault, Slice, SliceMut, block_sum};

/// `wrap_dphi`: the phi difference wrapped into (-pi, pi].
fn wrap_dphi(d: f32) -> f32 {
    if d > PI {
        d - 2.0 * PI
    } else if d <= -PI {
        d + 2.0 * PI
    } else {
        d
    }
}

/// A constituent's two summands, `w (r_c - r_j)` with `w = pT_c / pT_j
/// |r_c - r_j|`, from its eta difference, raw phi difference and the jet's pT.
fn term(c_pt: f32, de: f32, raw_dphi: f32, pt: f32) -> (f32, f32) {
    let dp = wrap_dphi(raw_dphi);
    let w = c_pt / pt * (de * de + dp * dp).sqrt();
    (w * de, w * dp)
}

/// One of the six arrays: a slice and the element its array starts at.
type Array<'s, 'a> = (&'s Slice<'a, f32>, usize);

pub(super) fn pull_jets(block: &Block, args: &Args) -> Fault<()> {
    jets(block, args, false)
}

/// `pull_jets` of a deterministic build: each jet's terms summed in the
/// fixed pairwise order ([`crate::ops::pairwise`]).
pub(super) fn pull_jets_fixed(block: &Block, args: &Args) -> Fault<()> {
    jets(block, args, true)
}

pub(super) fn pull_jets_packed(block: &Block, args: &Args) -> Fault<()> {
    packed(block, args, false)
}

/// `pull_jets_packed` of a deterministic build.
pub(super) fn pull_jets_packed_fixed(block: &Block, args: &Args) -> Fault<()> {
    packed(block, args, true)
}

fn jets(block: &Block, args: &Args, fixed: bool) -> Fault<()> {
    let (c_pt, c_eta, c_phi) = (args.slice::<f32>(0)?, args.slice::<f32>(1)?, args.slice::<f32>(2)?);
    let offsets = args.slice::<u32>(3)?;
    let (jet_pt, jet_eta, jet_phi) = (args.slice::<f32>(4)?, args.slice::<f32>(5)?, args.slice::<f32>(6)?);
    let pull = args.slice_mut::<f32>(7)?;
    let (n_jets, n_constituents) = (args.u32(8)? as usize, args.u32(9)? as usize);
    let constituents = [(&c_pt, 0), (&c_eta, 0), (&c_phi, 0)];
    let jets = [(&jet_pt, 0), (&jet_eta, 0), (&jet_phi, 0)];
    pull_block(block, constituents, &offsets, jets, &pull, n_jets, n_constituents, fixed)
}

fn packed(block: &Block, args: &Args, fixed: bool) -> Fault<()> {
    let packed = args.slice::<f32>(0)?;
    let offsets = args.slice::<u32>(1)?;
    let pull = args.slice_mut::<f32>(2)?;
    let (n_jets, n_constituents) = (args.u32(3)? as usize, args.u32(4)? as usize);
    let at = |k: usize| args.u32(5 + k).map(|v| v as usize);
    let jets = [(&packed, at(0)?), (&packed, at(1)?), (&packed, at(2)?)];
    let constituents = [(&packed, at(3)?), (&packed, at(4)?), (&packed, at(5)?)];
    pull_block(block, constituents, &offsets, jets, &pull, n_jets, n_constituents, fixed)
}

pub(super) fn pull_terms(block: &Block, args: &Args) -> Fault<()> {
    let (c_pt, c_eta, c_phi) = (args.slice::<f32>(0)?, args.slice::<f32>(1)?, args.slice::<f32>(2)?);
    let offsets = args.slice::<u32>(3)?;
    let (jet_pt, jet_eta, jet_phi) = (args.slice::<f32>(4)?, args.slice::<f32>(5)?, args.slice::<f32>(6)?);
    let (tx, ty) = (args.slice_mut::<f32>(7)?, args.slice_mut::<f32>(8)?);
    let n_jets = args.u32(9)? as usize;
    let (threads, stride) = (block.threads(), block.grid[0] as usize);
    let mut jet = block.idx[0] as usize;
    while jet < n_jets {
        let (begin, end) = (offsets.get(jet)? as usize, offsets.get(jet + 1)? as usize);
        let (pt, eta, phi) = (jet_pt.get(jet)?, jet_eta.get(jet)?, jet_phi.get(jet)?);
        for tid in 0..threads {
            let mut c = begin + tid;
            while c < end {
                let de = c_eta.get(c)? - eta;
                let dp = wrap_dphi(c_phi.get(c)? - phi);
                let w = c_pt.get(c)? / pt * (de * de + dp * dp).sqrt();
                tx.set(c, w * de)?;
                ty.set(c, w * dp)?;
                c += threads;
            }
        }
        jet += stride;
    }
    Ok(())
}

/// `pull_block`: jet `block.idx[0]`'s pull vector; with `fixed`, each
/// component the pairwise sum of the jet's terms in constituent order.
#[allow(clippy::too_many_arguments)]
fn pull_block(
    block: &Block,
    [c_pt, c_eta, c_phi]: [Array<'_, '_>; 3],
    offsets: &Slice<'_, u32>,
    [jet_pt, jet_eta, jet_phi]: [Array<'_, '_>; 3],
    pull: &SliceMut<'_, f32>,
    n_jets: usize,
    n_constituents: usize,
    fixed: bool,
) -> Fault<()> {
    let get = |(s, at): Array<'_, '_>, i: usize| s.get(at + i);
    let threads = block.threads();
    block.need_shared(threads * 4)?;
    let jet = block.idx[0] as usize;
    if jet >= n_jets {
        return Ok(());
    }
    let begin = offsets.get(jet)? as usize;
    let end = if jet + 1 < n_jets { offsets.get(jet + 1)? as usize } else { n_constituents };
    let (pt, eta, phi) = (get(jet_pt, jet)?, get(jet_eta, jet)?, get(jet_phi, jet)?);
    if fixed {
        let (mut tx, mut ty) = (Vec::with_capacity(end - begin), Vec::with_capacity(end - begin));
        for c in begin..end {
            let (x, y) = term(get(c_pt, c)?, get(c_eta, c)? - eta, get(c_phi, c)? - phi, pt);
            tx.push(x);
            ty.push(y);
        }
        pull.set(2 * jet, crate::ops::pairwise::sum(&tx))?;
        return pull.set(2 * jet + 1, crate::ops::pairwise::sum(&ty));
    }
    let mut sx = vec![0.0f32; threads];
    let mut sy = vec![0.0f32; threads];
    for tid in 0..threads {
        let mut c = begin + tid;
        while c < end {
            let de = get(c_eta, c)? - eta;
            let dp = wrap_dphi(get(c_phi, c)? - phi);
            let w = get(c_pt, c)? / pt * (de * de + dp * dp).sqrt();
            sx[tid] += w * de;
            sy[tid] += w * dp;
            c += threads;
        }
    }
    pull.set(2 * jet, block_sum(&mut sx))?;
    pull.set(2 * jet + 1, block_sum(&mut sy))
}
