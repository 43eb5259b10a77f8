//! Rust implementations of the portable kernels, registered under the same
//! names and argument lists as the sources in `hetero-kernels`.
//!
//! Each kernel is a *block-level* function: it runs all threads of one
//! block, phase by phase between the points where the portable kernel has
//! barriers. Each thread's additions happen in the GPU kernel's order, so
//! float rounding follows it (no fused multiply-adds), but loops run across
//! the threads, over contiguous runs of elements the compiler vectorises.
//! Blocks run in parallel. Every memory access is bounds-checked, once per
//! run: an access outside a buffer is a kernel fault, reported by the
//! stream like a GPU's illegal-address error. Kernels copy runs through
//! local memory (`Slice::read`, `Slice::write`) instead of borrowing device
//! memory, so no Rust reference covers memory that a launch may also write.

mod pull;
mod reduce;
mod scan;
mod util;
mod wave;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::memory::HostMemory;

/// Where one block is and how large the launch is.
pub(super) struct Block {
    /// Block index per dimension.
    pub idx: [u32; 3],
    /// Threads per block per dimension.
    pub dim: [u32; 3],
    /// Blocks per dimension.
    pub grid: [u32; 3],
    /// Dynamic shared memory the launch provides, in bytes.
    pub shared_bytes: usize,
}

impl Block {
    /// Fails like a GPU would (out-of-bounds shared access) when the launch
    /// gave less dynamic shared memory than the kernel uses.
    pub fn need_shared(&self, bytes: usize) -> Fault<()> {
        if self.shared_bytes < bytes {
            return Err(format!(
                "kernel uses {bytes} bytes of dynamic shared memory but the launch provides {}",
                self.shared_bytes
            ));
        }
        Ok(())
    }

    /// Threads in the block's x dimension.
    pub fn threads(&self) -> usize {
        self.dim[0] as usize
    }
}

/// A kernel fault: the message names what went wrong.
pub(super) type Fault<T> = std::result::Result<T, String>;

/// A block-level kernel function.
pub(super) type HostKernel = fn(&Block, &Args) -> Fault<()>;

/// The host implementation of portable kernel `name`, if there is one.
pub(super) fn lookup(name: &str) -> Option<HostKernel> {
    Some(match name {
        "reduce_partial" => reduce::reduce_partial,
        "reduce_atomic" => reduce::reduce_atomic,
        "scan_tile_sums" => scan::scan_tile_sums,
        "scan_tiles" => scan::scan_tiles,
        "pull_jets" => pull::pull_jets,
        "wave_step" => wave::wave_step,
        "affine_u32" => util::affine_u32,
        _ => return None,
    })
}

/// Names of every registered host kernel, for build logs.
pub(super) const NAMES: &[&str] =
    &["reduce_partial", "reduce_atomic", "scan_tile_sums", "scan_tiles", "pull_jets", "wave_step", "affine_u32"];

/// A launch argument as the host kernel sees it.
pub(super) enum Arg {
    Buffer { mem: Arc<HostMemory>, offset: usize },
    U32(u32),
    I32(i32),
    F32(f32),
}

/// The arguments of one launch.
pub(super) struct Args(pub Vec<Arg>);

impl Args {
    fn get(&self, index: usize) -> Fault<&Arg> {
        self.0
            .get(index)
            .ok_or_else(|| format!("kernel expects an argument {index} but the launch passed {}", self.0.len()))
    }

    /// Argument `index` as a typed view of a buffer from its offset to the allocation's end.
    pub fn buffer<T: bytemuck::Pod>(&self, index: usize) -> Fault<Slice<T>> {
        match self.get(index)? {
            Arg::Buffer { mem, offset } => {
                let size = std::mem::size_of::<T>();
                let bytes = mem.size().saturating_sub(*offset);
                // SAFETY: offset <= size was checked at launch, so the pointer stays in the block.
                let ptr = unsafe { mem.ptr().as_ptr().add((*offset).min(mem.size())) };
                if !(ptr as usize).is_multiple_of(std::mem::align_of::<T>()) {
                    return Err(format!(
                        "buffer argument {index} at byte offset {offset} is misaligned for its element type"
                    ));
                }
                Ok(Slice { ptr: ptr.cast(), len: bytes / size, _mem: Arc::clone(mem) })
            }
            _ => Err(format!("argument {index} must be a buffer")),
        }
    }

    /// Argument `index` as a u32 scalar.
    pub fn u32(&self, index: usize) -> Fault<u32> {
        match self.get(index)? {
            Arg::U32(v) => Ok(*v),
            _ => Err(format!("argument {index} must be a u32")),
        }
    }

    /// Argument `index` as an f32 scalar.
    pub fn f32(&self, index: usize) -> Fault<f32> {
        match self.get(index)? {
            Arg::F32(v) => Ok(*v),
            _ => Err(format!("argument {index} must be an f32")),
        }
    }

    /// Argument `index` as an i32 scalar.
    #[allow(dead_code)]
    pub fn i32(&self, index: usize) -> Fault<i32> {
        match self.get(index)? {
            Arg::I32(v) => Ok(*v),
            _ => Err(format!("argument {index} must be an i32")),
        }
    }
}

/// A bounds-checked view of device memory shared by all blocks of a launch.
///
/// Invariant: `ptr` is aligned for `T` and valid for `len` elements while
/// `_mem` is held. Blocks write disjoint elements (the launch contract), so
/// plain reads and writes do not race.
pub(super) struct Slice<T> {
    ptr: *mut T,
    len: usize,
    _mem: Arc<HostMemory>,
}

impl<T: Copy> Slice<T> {
    fn check(&self, i: usize) -> Fault<()> {
        if i >= self.len {
            return Err(format!("out-of-bounds access at element {i} of a buffer of {} elements", self.len));
        }
        Ok(())
    }

    /// Reads element `i`.
    pub fn get(&self, i: usize) -> Fault<T> {
        self.check(i)?;
        // SAFETY: i < len (checked) and the invariant of the type.
        Ok(unsafe { self.ptr.add(i).read() })
    }

    /// Writes element `i`.
    pub fn set(&self, i: usize, value: T) -> Fault<()> {
        self.check(i)?;
        // SAFETY: i < len (checked) and the invariant of the type.
        unsafe { self.ptr.add(i).write(value) };
        Ok(())
    }

    /// Checks that elements `start..start + len` lie in the buffer.
    fn check_range(&self, start: usize, len: usize) -> Fault<()> {
        if start.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(format!(
                "out-of-bounds access at elements {start}..{} of a buffer of {} elements",
                start.saturating_add(len),
                self.len
            ));
        }
        Ok(())
    }

    /// Copies elements `start..start + out.len()` into `out`, checked once.
    ///
    /// Kernels copy runs of elements into local memory rather than borrow
    /// device memory, so no Rust reference ever covers memory another block
    /// or another argument (the same buffer passed twice) may write.
    pub fn read(&self, start: usize, out: &mut [T]) -> Fault<()> {
        self.check_range(start, out.len())?;
        // SAFETY: the range is in bounds (checked), `out` is local memory, so
        // the two do not overlap, and the invariant of the type.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(start), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Adds elements `start..start + sums.len()` to `sums`, checked once.
    pub fn add_to(&self, start: usize, sums: &mut [T]) -> Fault<()>
    where
        T: std::ops::AddAssign,
    {
        self.check_range(start, sums.len())?;
        for (j, sum) in sums.iter_mut().enumerate() {
            // SAFETY: start + j is in bounds (checked) and the invariant of the type.
            *sum += unsafe { self.ptr.add(start + j).read() };
        }
        Ok(())
    }

    /// Copies `values` to elements `start..start + values.len()`, checked once.
    pub fn write(&self, start: usize, values: &[T]) -> Fault<()> {
        self.check_range(start, values.len())?;
        // SAFETY: as in `read`, with the copy's direction reversed.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), self.ptr.add(start), values.len()) };
        Ok(())
    }
}

impl Slice<f32> {
    /// Atomically adds `value` to element `i`.
    pub fn atomic_add(&self, i: usize, value: f32) -> Fault<()> {
        self.check(i)?;
        // SAFETY: i < len, the element is 4-byte aligned, and during the
        // launch every access to it goes through this atomic.
        let cell = unsafe { AtomicU32::from_ptr(self.ptr.add(i).cast()) };
        let _ = cell
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| Some((f32::from_bits(bits) + value).to_bits()));
        Ok(())
    }
}

/// The block-wide tree sum of `common.kern`'s `block_sum`, in the same order.
pub(super) fn block_sum(sh: &mut [f32]) -> f32 {
    let n = sh.len();
    let mut s = n.next_power_of_two() >> 1;
    while s > 0 {
        for tid in 0..s.min(n) {
            if tid + s < n {
                sh[tid] += sh[tid + s];
            }
        }
        s >>= 1;
    }
    sh.first().copied().unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    //! The vectorised host kernels against the per-thread, per-cell order of
    //! the portable sources, bit for bit, at lengths that cut runs and blocks.

    use super::reduce::reduce_partial;
    use super::scan::{scan_tile_sums, scan_tiles};
    use super::wave::wave_step;
    use super::*;

    fn buffer<T: bytemuck::Pod>(values: &[T]) -> Arg {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let mem = HostMemory::new("test", bytes.len(), false, u64::MAX).expect("test allocation");
        // SAFETY: the block was just allocated with at least bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem.ptr().as_ptr(), bytes.len()) };
        Arg::Buffer { mem: Arc::new(mem), offset: 0 }
    }

    fn contents<T: bytemuck::Pod>(args: &Args, index: usize) -> Vec<T> {
        let view = args.buffer::<T>(index).expect("a buffer argument");
        (0..view.len).map(|i| view.get(i).expect("in bounds")).collect()
    }

    /// Runs `kernel` over every block of a `grid` of `dim` threads.
    fn launch(kernel: HostKernel, grid: [u32; 3], dim: [u32; 3], args: &Args) -> Fault<()> {
        for z in 0..grid[2] {
            for y in 0..grid[1] {
                for x in 0..grid[0] {
                    let block = Block { idx: [x, y, z], dim, grid, shared_bytes: 1 << 20 };
                    kernel(&block, args)?;
                }
            }
        }
        Ok(())
    }

    /// `thread_sum` of `reduce.kern` for one thread, element by element.
    fn thread_sum(x: &[f32], mut i: usize, stride: usize) -> f32 {
        let mut acc = [0.0f32; 4];
        while i + 3 * stride < x.len() {
            for (k, a) in acc.iter_mut().enumerate() {
                *a += x[i + k * stride];
            }
            i += 4 * stride;
        }
        while i < x.len() {
            acc[0] += x[i];
            i += stride;
        }
        (acc[0] + acc[1]) + (acc[2] + acc[3])
    }

    #[test]
    fn reduce_keeps_the_kernels_order_of_additions() {
        let (threads, grid) = (64usize, 3usize);
        let stride = threads * grid;
        let x: Vec<f32> = (0..11 * stride + 5).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1.37e-3).collect();
        for n in [0, 1, threads - 1, 4 * stride - 1, 4 * stride + threads / 2, 8 * stride + 1, x.len()] {
            let args = Args(vec![buffer(&x), buffer(&[0.0f32; 3]), Arg::U32(n as u32)]);
            launch(reduce_partial, [grid as u32, 1, 1], [threads as u32, 1, 1], &args).expect("no fault");
            let got = contents::<f32>(&args, 1);
            for (b, &sum) in got.iter().enumerate() {
                let mut sums: Vec<f32> = (0..threads).map(|t| thread_sum(&x[..n], b * threads + t, stride)).collect();
                assert_eq!(sum.to_bits(), block_sum(&mut sums).to_bits(), "n {n}, block {b}");
            }
        }
    }

    #[test]
    fn scan_tiles_carries_across_runs_and_wraps() {
        let (threads, items) = (32u32, 100u32);
        let tile = (threads * items) as usize;
        let x: Vec<u32> = (0..2 * tile + 77).map(|i| (i as u32).wrapping_mul(2_654_435_761)).collect();
        let n = x.len();
        let offsets = [7u32, u32::MAX - 3, 12];
        let args = Args(vec![
            buffer(&x),
            buffer(&vec![0u32; n]),
            buffer(&offsets),
            Arg::U32(n as u32),
            Arg::U32(items),
            Arg::U32(1),
        ]);
        launch(scan_tiles, [3, 1, 1], [threads, 1, 1], &args).expect("no fault");
        let got = contents::<u32>(&args, 1);
        for (t, chunk) in x.chunks(tile).enumerate() {
            let mut running = offsets[t];
            for (i, v) in chunk.iter().enumerate() {
                assert_eq!(got[t * tile + i], running, "tile {t}, element {i}");
                running = running.wrapping_add(*v);
            }
        }
        let sums = Args(vec![buffer(&x), buffer(&[0u32; 3]), Arg::U32(n as u32), Arg::U32(items)]);
        launch(scan_tile_sums, [3, 1, 1], [threads, 1, 1], &sums).expect("no fault");
        let want: Vec<u32> = x.chunks(tile).map(|c| c.iter().fold(0u32, |a, &v| a.wrapping_add(v))).collect();
        assert_eq!(contents::<u32>(&sums, 1), want);
    }

    #[test]
    fn wave_step_matches_the_cell_formula() {
        let (nx, ny) = (37usize, 23usize);
        let field =
            |seed: usize| -> Vec<f32> { (0..nx * ny).map(|i| ((i * seed % 97) as f32 - 48.0) / 97.0).collect() };
        let (prev, u) = (field(31), field(57));
        let (c2, sx, sy, src) = (0.21f32, 11usize, 9usize, 0.5f32);
        let args = Args(vec![
            buffer(&prev),
            buffer(&u),
            buffer(&vec![f32::NAN; nx * ny]),
            Arg::U32(nx as u32),
            Arg::U32(ny as u32),
            Arg::F32(c2),
            Arg::U32(sx as u32),
            Arg::U32(sy as u32),
            Arg::F32(src),
        ]);
        let rows = hetero_kernels::WAVE_ROWS as usize;
        let grid = [nx.div_ceil(8) as u32, ny.div_ceil(rows) as u32, 1];
        launch(wave_step, grid, [8, 1, 1], &args).expect("no fault");
        let got = contents::<f32>(&args, 2);
        for y in 0..ny {
            for x in 0..nx {
                let i = y * nx + x;
                let mut want = 0.0f32;
                if x >= 2 && y >= 2 && x + 2 < nx && y + 2 < ny {
                    let near = (u[i - 1] + u[i + 1]) + (u[i - nx] + u[i + nx]);
                    let far = (u[i - 2] + u[i + 2]) + (u[i - 2 * nx] + u[i + 2 * nx]);
                    let lap = (4.0f32 / 3.0) * near - (1.0f32 / 12.0) * far - 5.0 * u[i];
                    want = 2.0 * u[i] - prev[i] + c2 * lap;
                    if (x, y) == (sx, sy) {
                        want += src;
                    }
                }
                assert_eq!(got[i].to_bits(), want.to_bits(), "cell ({x}, {y})");
            }
        }
    }

    #[test]
    fn a_run_past_the_end_of_a_buffer_faults() {
        let (nx, ny) = (16u32, 16u32);
        let short = vec![0.0f32; (nx * ny) as usize - 1];
        let args = Args(vec![
            buffer(&short),
            buffer(&short),
            buffer(&short),
            Arg::U32(nx),
            Arg::U32(ny),
            Arg::F32(0.1),
            Arg::U32(0),
            Arg::U32(0),
            Arg::F32(0.0),
        ]);
        let fault = launch(wave_step, [1, 4, 1], [16, 1, 1], &args).expect_err("the last row is out of bounds");
        assert!(fault.contains("out-of-bounds"), "{fault}");
    }
}
