//! `pull_jets` of `pull.kern`.

use std::f32::consts::PI;

use super::{Args, Block, Fault, block_sum};

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

pub(super) fn pull_jets(block: &Block, args: &Args) -> Fault<()> {
    let (c_pt, c_eta, c_phi) = (args.slice::<f32>(0)?, args.slice::<f32>(1)?, args.slice::<f32>(2)?);
    let offsets = args.slice::<u32>(3)?;
    let (jet_pt, jet_eta, jet_phi) = (args.slice::<f32>(4)?, args.slice::<f32>(5)?, args.slice::<f32>(6)?);
    let pull = args.slice_mut::<f32>(7)?;
    let n_jets = args.u32(8)? as usize;
    let n_constituents = args.u32(9)? as usize;
    let threads = block.threads();
    block.need_shared(threads * 4)?;
    let jet = block.idx[0] as usize;
    if jet >= n_jets {
        return Ok(());
    }
    let begin = offsets.get(jet)? as usize;
    let end = if jet + 1 < n_jets { offsets.get(jet + 1)? as usize } else { n_constituents };
    let (pt, eta, phi) = (jet_pt.get(jet)?, jet_eta.get(jet)?, jet_phi.get(jet)?);
    let mut sx = vec![0.0f32; threads];
    let mut sy = vec![0.0f32; threads];
    for tid in 0..threads {
        let mut c = begin + tid;
        while c < end {
            let de = c_eta.get(c)? - eta;
            let dp = wrap_dphi(c_phi.get(c)? - phi);
            let w = c_pt.get(c)? / pt * (de * de + dp * dp).sqrt();
            sx[tid] += w * de;
            sy[tid] += w * dp;
            c += threads;
        }
    }
    pull.set(2 * jet, block_sum(&mut sx))?;
    pull.set(2 * jet + 1, block_sum(&mut sy))
}
