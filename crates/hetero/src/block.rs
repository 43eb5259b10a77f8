//! Block sizes from a kernel's own limits.
//!
//! A device's maximum block ([`DeviceInfo::max_threads_per_block`]) is an
//! upper bound; a compiled kernel may allow fewer threads (registers on
//! CUDA and HIP, `CL_KERNEL_WORK_GROUP_SIZE` on OpenCL: 32 on Mesa's
//! rusticl for every kernel of this project). [`BlockRequest::pick`] turns
//! the size a launch would like into one the kernel can run on the device.

use crate::device::{DeviceInfo, KernelLimits};

/// The block size a launch would like, and what its algorithm needs of it.
///
/// ```
/// # use hetero::BlockRequest;
/// // A tree reduction with one float of shared memory per thread.
/// let request = BlockRequest::new(256).power_of_two().shared_per_thread(4);
/// # let _ = request;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRequest {
    wanted: u32,
    power_of_two: bool,
    shared_per_thread: usize,
    shared_fixed: usize,
}

impl BlockRequest {
    /// Asks for `wanted` threads (0 counts as 1).
    pub const fn new(wanted: u32) -> Self {
        Self { wanted, power_of_two: false, shared_per_thread: 0, shared_fixed: 0 }
    }

    /// The kernel's algorithm needs a power of two (a tree over shared
    /// memory that does not handle other sizes).
    #[must_use]
    pub const fn power_of_two(mut self) -> Self {
        self.power_of_two = true;
        self
    }

    /// Each thread needs `bytes` of dynamic shared memory, so a block must
    /// be small enough for its share to fit beside the kernel's own.
    #[must_use]
    pub const fn shared_per_thread(mut self, bytes: usize) -> Self {
        self.shared_per_thread = bytes;
        self
    }

    /// The launch also needs `bytes` of dynamic shared memory whatever the
    /// block size.
    #[must_use]
    pub const fn shared_fixed(mut self, bytes: usize) -> Self {
        self.shared_fixed = bytes;
        self
    }

    /// The block size to launch with: the wanted size clamped to the
    /// kernel's and the device's limits (threads, the first block
    /// dimension, shared memory), then rounded down to a power of two if
    /// the algorithm needs one, or else to the kernel's preferred multiple
    /// where the block holds at least one. Never 0: a kernel that can run
    /// at all gets at least one thread, even when its shared memory would
    /// not fit (the launch then fails with a message naming both).
    pub fn pick(&self, info: &DeviceInfo, limits: &KernelLimits) -> u32 {
        let mut most =
            self.wanted.min(limits.max_threads).min(info.max_threads_per_block).min(info.max_block_dims[0]).max(1);
        let free = info.shared_memory_per_block.saturating_sub(limits.static_shared.saturating_add(self.shared_fixed));
        if let Some(fits) = free.checked_div(self.shared_per_thread) {
            most = most.min(u32::try_from(fits).unwrap_or(u32::MAX)).max(1);
        }
        if self.power_of_two {
            return 1 << most.ilog2();
        }
        let multiple = limits.preferred_multiple.max(1);
        if most >= multiple { most / multiple * multiple } else { most }
    }
}

#[cfg(test)]
mod tests {
    use super::BlockRequest;
    use crate::device::{Backend, DeviceInfo, KernelLimits};

    fn device(shared: usize) -> DeviceInfo {
        DeviceInfo {
            backend: Backend::Host,
            ordinal: 0,
            name: "test".into(),
            vendor: String::new(),
            platform: String::new(),
            total_memory: 1 << 30,
            max_threads_per_block: 1024,
            max_block_dims: [1024, 1024, 64],
            max_grid_dims: [u32::MAX, 65535, 65535],
            max_blocks: u64::MAX,
            shared_memory_per_block: shared,
            compute_units: 2,
            warp_size: 32,
            subgroup_sizes: Vec::new(),
            fp64: true,
            pci_bus_id: None,
            uuid: None,
            arch: None,
        }
    }

    /// The kernel limits of the issue (1, 3, 32, 100, 1024 threads), with a
    /// preferred multiple of 32: clamped, rounded to the multiple where the
    /// block holds one, to a power of two where asked, never 0.
    #[rstest::rstest]
    #[case(1, 1, 1)]
    #[case(3, 3, 2)]
    #[case(32, 32, 32)]
    #[case(100, 96, 64)]
    #[case(1024, 256, 256)]
    fn a_block_fits_the_kernels_limit(#[case] limit: u32, #[case] any: u32, #[case] power_of_two: u32) {
        let info = device(48 * 1024);
        let limits = KernelLimits::new(&info, limit, 32, 0);
        assert_eq!(BlockRequest::new(256).pick(&info, &limits), any);
        assert_eq!(BlockRequest::new(256).power_of_two().pick(&info, &limits), power_of_two);
        // Asking for more than the kernel allows gives the kernel's limit
        // (rounded); asking for less gives what was asked.
        let all = BlockRequest::new(u32::MAX).pick(&info, &limits);
        assert!(all <= limit && all >= 1 && (all == limit || all.is_multiple_of(32)), "{all} for limit {limit}");
        assert_eq!(BlockRequest::new(1).pick(&info, &limits), 1);
        assert_eq!(BlockRequest::new(0).power_of_two().pick(&info, &limits), 1);
    }

    #[test]
    fn shared_memory_bounds_the_block() {
        let info = device(4096);
        let limits = KernelLimits::new(&info, 1024, 1, 1024);
        // 3072 bytes left for 16 bytes a thread: 192 threads, 128 as a power of two.
        let request = BlockRequest::new(1024).shared_per_thread(16);
        assert_eq!(request.pick(&info, &limits), 192);
        assert_eq!(request.power_of_two().pick(&info, &limits), 128);
        assert_eq!(request.shared_fixed(3072).pick(&info, &limits), 1, "nothing left: one thread, refused at launch");
    }

    #[test]
    fn limits_hold_their_invariant_and_combine() {
        let info = device(1024);
        let zero = KernelLimits::new(&info, 0, 0, 0);
        assert_eq!((zero.max_threads, zero.preferred_multiple), (1, 1));
        assert_eq!(KernelLimits::new(&info, 4096, 64, 0).max_threads, 1024);
        let both = KernelLimits::new(&info, 256, 32, 8).and(KernelLimits::new(&info, 128, 64, 16));
        assert_eq!(
            both,
            KernelLimits { max_threads: 128, preferred_multiple: 64, static_shared: 16, subgroup_size: None }
        );
    }
}
