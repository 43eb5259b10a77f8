//! The dialect's block collectives for host kernels: the same operators
//! and results as `block_reduce_OP_S`, `block_inclusive_scan_OP_S` and
//! `block_exclusive_scan_OP_S` (and their `_items_` forms), over one value
//! per thread (or `count` per thread in blocked order: the same calls over
//! the longer slice). A host kernel holds a block's per-thread values in a
//! vector, so a collective is a function of that vector, combined left to
//! right (float sums may differ from a GPU's in rounding; integer results
//! are the same).

use super::Block;
use crate::ops::{ReduceOp, Scalar};

impl Block {
    /// The combination of `values` by `op` (`block_reduce_OP_S`); the
    /// identity over none.
    pub fn reduce<T: Scalar>(&self, values: &[T], op: ReduceOp) -> T {
        values.iter().fold(op.identity(), |acc, &v| op.apply(acc, v))
    }

    /// Replaces each value by the combination of it and every value before
    /// it (`block_inclusive_scan_OP_S`); returns the total.
    pub fn inclusive_scan<T: Scalar>(&self, values: &mut [T], op: ReduceOp) -> T {
        let mut run = op.identity();
        for v in values {
            run = op.apply(run, *v);
            *v = run;
        }
        run
    }

    /// Replaces each value by the combination of the values before it, the
    /// identity for the first (`block_exclusive_scan_OP_S`); returns the
    /// total.
    pub fn exclusive_scan<T: Scalar>(&self, values: &mut [T], op: ReduceOp) -> T {
        let mut run = op.identity();
        for v in values {
            let next = op.apply(run, *v);
            *v = run;
            run = next;
        }
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans_and_reduces_follow_the_operator() {
        let block = Block { idx: [0; 3], dim: [4, 1, 1], grid: [1; 3], shared_bytes: 0 };
        let mut v = [3i32, -1, 4, -5];
        assert_eq!(block.reduce(&v, ReduceOp::Min), -5);
        assert_eq!(block.inclusive_scan(&mut v, ReduceOp::Max), 4);
        assert_eq!(v, [3, 3, 4, 4]);
        let mut v = [3u32, 1, 4, 1];
        assert_eq!(block.exclusive_scan(&mut v, ReduceOp::Sum), 9);
        assert_eq!(v, [0, 3, 4, 8]);
        assert_eq!(block.reduce::<f32>(&[], ReduceOp::Max), f32::NEG_INFINITY);
        assert_eq!(block.reduce(&[f64::NAN, 2.0], ReduceOp::Min), 2.0);
    }
}
