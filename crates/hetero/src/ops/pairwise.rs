//! The fixed order of deterministic sums and prefix sums
//! ([`crate::algorithms::Algorithms::deterministic`]): a definition that
//! names every addition, so that every backend, device, launch shape and
//! core count that follows it gives the same bits.
//!
//! - **Sum**: the perfect binary tree over the elements padded to a power
//!   of two: adjacent pairs `(x0 + x1), (x2 + x3), ...`, then pairs of those,
//!   each left operand first. A pad adds nothing (`x + (-0.0)` is `x`
//!   exactly, with denormals kept), so the tree of `n` elements splits at
//!   the largest power of two below `n`. Each element passes through at most
//!   `ceil(log2 n)` roundings: the error is within
//!   `gamma(ceil(log2 n)) * sum |x_i|`, a pairwise sum's bound.
//! - **Prefix sums**: `E(j)`, the sum of `x[..j]`, is the running sum of the
//!   tree's subtrees that tile `[0, j)`, largest first, from `+0.0`:
//!   `((0 + B1) + B2) + ...`, each `B` the tree sum of its subtree (what a
//!   work-efficient down-sweep computes). An exclusive scan writes `E(i)`
//!   at `i`, an inclusive one `E(i + 1)`. At most `2 ceil(log2 n)` roundings
//!   reach an element: `gamma(2 ceil(log2 n)) * sum |x_i|`.
//!
//! Any implementation that tiles the input in aligned runs of a power of
//! two follows it: a tile's tree is a subtree, so tiles of any size give
//! the same bits. The empty sum is `+0.0`.

use super::Scalar;

/// Elements a leaf handles in a local array.
const LEAF: usize = 32;

/// The tree sum of `x` (`+0.0`, or zero, when empty).
pub fn sum<T: Scalar>(x: &[T]) -> T {
    let n = x.len();
    if n == 0 {
        return T::zeroed();
    }
    if n <= LEAF {
        let mut a = [T::zeroed(); LEAF];
        a[..n].copy_from_slice(x);
        let mut s = 1;
        while s < n {
            let mut k = 0;
            while k + s < n {
                a[k] = a[k].add(a[k + s]);
                k += 2 * s;
            }
            s *= 2;
        }
        return a[0];
    }
    let h = n.next_power_of_two() / 2;
    sum(&x[..h]).add(sum(&x[h..]))
}

/// Writes `out[j] = prefix + E(j)` in the tree's order for every `j <
/// out.len()`, where `out.len() <= x.len() + 1` (the last may be the sum
/// of all of `x`); `prefix` stands at the root, as a tile's offset does.
/// Returns [`sum`] of `x` when `out` is as long as `x`, else unspecified.
pub fn exclusive<T: Scalar>(x: &[T], prefix: T, out: &mut [T]) -> T {
    debug_assert!(out.len() <= x.len() + 1);
    if out.len() == x.len() + 1 {
        // E(len) lies past the input: a placeholder element that only the
        // sums past it would see.
        let mut padded = x.to_vec();
        padded.push(T::zeroed());
        return down(&padded, prefix, out);
    }
    down(&x[..out.len()], prefix, out)
}

/// `out[j] = prefix + E(j)` for `j < out.len() == x.len()`; returns the tree sum.
fn down<T: Scalar>(x: &[T], prefix: T, out: &mut [T]) -> T {
    let n = x.len();
    if n == 0 {
        return T::zeroed();
    }
    if n <= LEAF {
        // Up-sweep keeping left sums, the root set to `prefix`, down-sweep:
        // a right child gets its parent's value plus its left sibling.
        let p = n.next_power_of_two();
        let mut a = [T::zeroed(); LEAF];
        a[..n].copy_from_slice(x);
        let mut s = 1;
        while s < p {
            let mut k = 2 * s - 1;
            while k < p {
                // a[k] ends the right block [k + 1 - s, k]; a partial
                // block's sum stands at its end, a block of pads adds nothing.
                if k + 1 - s < n {
                    a[k] = a[k - s].add(a[k]);
                } else if k + 1 - 2 * s < n {
                    a[k] = a[k - s];
                }
                k += 2 * s;
            }
            s *= 2;
        }
        let total = a[p - 1];
        a[p - 1] = prefix;
        s = p / 2;
        while s >= 1 {
            let mut k = 2 * s - 1;
            while k < p {
                let left = a[k - s];
                a[k - s] = a[k];
                a[k] = a[k].add(left);
                k += 2 * s;
            }
            s /= 2;
        }
        out[..n].copy_from_slice(&a[..n]);
        return total;
    }
    let h = n.next_power_of_two() / 2;
    let (lo, hi) = out.split_at_mut(h);
    let left = down(&x[..h], prefix, lo);
    let right = down(&x[h..], prefix.add(left), hi);
    left.add(right)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree written out by hand for five elements: ((x0 + x1) + (x2 + x3)) + x4.
    #[test]
    fn the_sum_is_the_padded_binary_tree() {
        let x = [1.0f32, 1e-8, -1.0, 3e-8, 5.0];
        assert_eq!(sum(&x).to_bits(), (((x[0] + x[1]) + (x[2] + x[3])) + x[4]).to_bits());
        assert_eq!(sum::<f32>(&[]).to_bits(), 0.0f32.to_bits());
        assert_eq!(sum(&[-0.0f32, -0.0]).to_bits(), (-0.0f32).to_bits());
        let long: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.1 - 7.3).collect();
        let (a, b) = long.split_at(512);
        assert_eq!(sum(&long).to_bits(), (sum(a) + sum(b)).to_bits(), "splits at the largest power of two below n");
    }

    /// Prefix sums follow the subtrees of [0, j), largest first, from the
    /// prefix: E(7) = ((p + (x0+x1)+(x2+x3)) + (x4+x5)) + x6; and tiles of
    /// any power of two, each seeded with the prefix of the tiles before,
    /// give the same bits.
    #[test]
    fn prefix_sums_follow_the_subtrees_and_any_tiling() {
        let x: Vec<f32> = (0..300).map(|i| ((i * 7919) % 113) as f32 * 0.37 - 19.1).collect();
        let mut e = vec![0.0f32; x.len() + 1];
        let total = exclusive(&x, 0.0, &mut e[..x.len()]);
        assert_eq!(total.to_bits(), sum(&x).to_bits());
        exclusive(&x, 0.0, &mut e);
        let by_hand = ((0.0 + ((x[0] + x[1]) + (x[2] + x[3]))) + (x[4] + x[5])) + x[6];
        assert_eq!(e[7].to_bits(), by_hand.to_bits());
        assert_eq!(e[0].to_bits(), 0.0f32.to_bits());
        for tile in [1usize, 2, 16, 64, 256] {
            let sums: Vec<f32> = x.chunks(tile).map(sum).collect();
            let mut offsets = vec![0.0f32; sums.len() + 1];
            exclusive(&sums, 0.0, &mut offsets);
            let mut tiled = vec![0.0f32; x.len() + 1];
            for (t, out) in tiled.chunks_mut(tile).enumerate() {
                let input = &x[(t * tile).min(x.len())..((t + 1) * tile).min(x.len())];
                exclusive(input, offsets[t], out);
            }
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&tiled), bits(&e), "tiles of {tile}");
        }
    }
}
