//! Reproducible inputs: every workload draws from its own ChaCha8 stream,
//! seeded from the run's seed and the workload's name, so changing one
//! workload never changes another's inputs and every backend sees the same data.

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The seed used when `--seed` is not given.
pub const DEFAULT_SEED: u64 = 0x6865_7465_726f; // "hetero"

/// The random stream of `workload` for `seed`.
pub fn rng(seed: u64, workload: &str) -> ChaCha8Rng {
    // FNV-1a of the name, mixed into the seed.
    let tag = workload.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    ChaCha8Rng::seed_from_u64(seed ^ tag)
}
