//! The host backend's implementations of `sort.kern`'s kernels. The
//! library launches the histogram and each pass as one block over the
//! whole input (as the host's scan is), so a pass is a stable counting
//! sort by one digit: counted in parallel, placed in order.

use rayon::prelude::*;

use super::host::one_block;
use crate::host_kernel::{Args, Block, Fault, HostKernel, KernelFn};

/// Digits of a pass.
const RADIX: usize = 256;

/// The words of `sort.kern`'s `sort_key` and `sort_value` buffers: not C
/// scalar types, so a launch passes keys of any type of the width.
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
struct W32(u32);
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
struct W64(u64);

/// A word that carries a key's bits.
trait Word: bytemuck::Pod + Send + Sync {
    /// The order-preserving bits (`sort_ordered` in `sort.kern`).
    fn ordered(self, kind: u32, descending: bool) -> u64;
}

macro_rules! word {
    ($($w:ident: $t:ty),*) => {$(
        impl Word for $w {
            fn ordered(self, kind: u32, descending: bool) -> u64 {
                let $w(bits) = self;
                let k: $t = bits;
                let sign: $t = 1 << (<$t>::BITS - 1);
                let k = match kind {
                    1 => k ^ sign,
                    2 if k & sign != 0 => !k,
                    2 => k | sign,
                    _ => k,
                };
                (if descending { !k } else { k }) as u64
            }
        }
    )*};
}

word!(W32: u32, W64: u64);

/// A pass's digit of `key`.
fn digit<K: Word>(key: K, kind: u32, descending: bool, shift: u32, bits: u32) -> usize {
    ((key.ordered(kind, descending) >> shift) & ((1u64 << bits) - 1)) as usize
}

/// The registrations for keys and values of these widths, in the source's
/// parameter order. Trusted, as the other algorithms' host kernels are:
/// the library launches the histogram and the passes as one block, and
/// the offsets' blocks each scan their own pass.
pub(super) fn kernels(key_size: usize, value_size: usize) -> Vec<HostKernel> {
    let histogram =
        HostKernel::new("alg_sort_histogram", if key_size == 8 { histogram::<W64> } else { histogram::<W32> })
            .trusted();
    let histogram = if key_size == 8 { histogram.slice::<W64>() } else { histogram.slice::<W32>() }
        .slice_mut::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>();
    let offsets = HostKernel::new("alg_sort_offsets", offsets).trusted().slice_mut::<u32>();
    let function: KernelFn = match (key_size, value_size) {
        (8, 0) => pass::<W64, W32, false>,
        (8, 8) => pass::<W64, W64, true>,
        (8, _) => pass::<W64, W32, true>,
        (_, 0) => pass::<W32, W32, false>,
        (_, 8) => pass::<W32, W64, true>,
        _ => pass::<W32, W32, true>,
    };
    let mut pass = HostKernel::new("alg_sort_pass", function).trusted();
    pass = if key_size == 8 { pass.slice::<W64>().slice_mut::<W64>() } else { pass.slice::<W32>().slice_mut::<W32>() };
    pass = match value_size {
        0 => pass,
        8 => pass.slice::<W64>().slice_mut::<W64>(),
        _ => pass.slice::<W32>().slice_mut::<W32>(),
    };
    let pass = pass
        .slice::<u32>()
        .scalar::<u32>()
        .slice_mut::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>();
    vec![histogram, offsets, pass]
}

/// `alg_sort_histogram(keys, hist, n, begin, end, passes, kind, descending)`.
fn histogram<K: Word>(block: &Block, args: &Args) -> Fault {
    one_block(block, "alg_sort_histogram")?;
    let (keys, hist) = (args.slice::<K>(0)?, args.slice_mut::<u32>(1)?);
    let (n, begin, end, passes) = (args.u32(2)? as usize, args.u32(3)?, args.u32(4)?, args.u32(5)? as usize);
    let (kind, descending) = (args.u32(6)?, args.u32(7)? != 0);
    let mut all = vec![K::zeroed(); n];
    keys.read(0, &mut all)?;
    let counts = all
        .par_chunks(1 << 16)
        .map(|chunk| {
            let mut counts = vec![0u32; passes * RADIX];
            for &k in chunk {
                let ordered = k.ordered(kind, descending);
                for p in 0..passes {
                    let shift = begin + 8 * p as u32;
                    let bits = (end - shift).min(8);
                    counts[p * RADIX + ((ordered >> shift) & ((1u64 << bits) - 1)) as usize] += 1;
                }
            }
            counts
        })
        .reduce(
            || vec![0u32; passes * RADIX],
            |mut a, b| {
                a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
                a
            },
        );
    let mut sums = vec![0u32; passes * RADIX];
    hist.read(0, &mut sums)?;
    sums.iter_mut().zip(counts).for_each(|(s, c)| *s = s.wrapping_add(c));
    hist.write(0, &sums)
}

/// `alg_sort_offsets(hist)`: block `p` makes pass `p`'s counts their
/// exclusive prefix.
fn offsets(block: &Block, args: &Args) -> Fault {
    let hist = args.slice_mut::<u32>(0)?;
    let at = block.idx()[0] as usize * RADIX;
    let mut counts = [0u32; RADIX];
    hist.read(at, &mut counts)?;
    let mut running = 0u32;
    for c in &mut counts {
        let count = *c;
        *c = running;
        running = running.wrapping_add(count);
    }
    hist.write(at, &counts)
}

/// `alg_sort_pass(keys_in, keys_out, [values_in, values_out,] digit_base,
/// digit_at, state, n, shift, bits, kind, descending, phase, tiles)` over the whole
/// input, in phase 0 (the library's only one on the host).
fn pass<K: Word, V: bytemuck::Pod + Send + Sync, const VALUES: bool>(block: &Block, args: &Args) -> Fault {
    one_block(block, "alg_sort_pass")?;
    let at = if VALUES { 4 } else { 2 };
    let digit_at = args.u32(at + 1)? as usize;
    let (n, shift, bits) = (args.u32(at + 3)? as usize, args.u32(at + 4)?, args.u32(at + 5)?);
    let (kind, descending) = (args.u32(at + 6)?, args.u32(at + 7)? != 0);
    if args.u32(at + 8)? != 0 {
        return Err("the host's alg_sort_pass runs phase 0 only".to_string());
    }
    let mut base = [0u32; RADIX];
    args.slice::<u32>(at)?.read(digit_at, &mut base)?;
    let mut keys = vec![K::zeroed(); n];
    args.slice::<K>(0)?.read(0, &mut keys)?;
    let digits: Vec<u8> = keys.par_iter().map(|&k| digit(k, kind, descending, shift, bits) as u8).collect();
    let mut next = base.map(|b| b as usize);
    let mut places = vec![0u32; n];
    for (place, &d) in places.iter_mut().zip(&digits) {
        *place = next[d as usize] as u32;
        next[d as usize] += 1;
    }
    if next.iter().zip(base.iter().skip(1).chain([&(n as u32)])).any(|(end, &b)| *end != b as usize) {
        return Err("alg_sort_pass: the digit offsets do not match the keys' digits".to_string());
    }
    let mut out = vec![K::zeroed(); n];
    for (&k, &p) in keys.iter().zip(&places) {
        out[p as usize] = k;
    }
    args.slice_mut::<K>(1)?.write(0, &out)?;
    if VALUES {
        let mut values = vec![V::zeroed(); n];
        args.slice::<V>(2)?.read(0, &mut values)?;
        let mut out = vec![V::zeroed(); n];
        for (&v, &p) in values.iter().zip(&places) {
            out[p as usize] = v;
        }
        args.slice_mut::<V>(3)?.write(0, &out)?;
    }
    Ok(())
}
