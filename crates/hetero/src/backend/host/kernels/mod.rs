//! The built-in kernels: Rust implementations of the portable kernels in
//! `hetero-kernels`, registered under the same names and parameters.
//!
//! Each kernel is a *block-level* function (see [`crate::host_kernel`]):
//! it runs all threads of one block, phase by phase between the points
//! where the portable kernel has barriers. Each thread's additions happen in
//! the GPU kernel's order, so float rounding follows it (no fused
//! multiply-adds), but loops run across the threads, over contiguous runs of
//! elements the compiler vectorises. Built-ins are registered as trusted:
//! they write disjoint elements per block, so their views use plain copies.

mod bandwidth;
mod pull;
mod reduce;
mod scan;
mod util;
mod wave;

pub(super) use crate::host_kernel::{Args, Block, Fault, HostKernel, Slice, SliceMut};

/// Every built-in kernel, with the portable source file that declares it;
/// each one's parameters are read from that source ([`declared`]), not
/// restated here. A deterministic build (`options`) gets the kernels that
/// take a fixed order where the source does under `HETERO_DETERMINISTIC`
/// (the pull's sums per jet).
pub(super) fn builtins(options: &crate::device::BuildOptions) -> Vec<(&'static str, HostKernel)> {
    let (pull_jets, pull_jets_packed): (crate::host_kernel::KernelFn, crate::host_kernel::KernelFn) =
        if options.deterministic {
            (pull::pull_jets_fixed, pull::pull_jets_packed_fixed)
        } else {
            (pull::pull_jets, pull::pull_jets_packed)
        };
    use hetero_kernels::{BANDWIDTH, PULL, REDUCE, SCAN, UTIL, WAVE};
    let functions: [(&'static str, &str, crate::host_kernel::KernelFn); 15] = [
        (REDUCE, "reduce_partial", reduce::reduce_partial),
        (REDUCE, "reduce_atomic", reduce::reduce_atomic),
        (SCAN, "scan_tile_sums", scan::scan_tile_sums),
        (SCAN, "scan_tiles", scan::scan_tiles),
        (PULL, "pull_jets", pull_jets),
        (PULL, "pull_jets_packed", pull_jets_packed),
        (PULL, "pull_terms", pull::pull_terms),
        (WAVE, "wave_rows", wave::wave_rows),
        (WAVE, "wave_step", wave::wave_step),
        (UTIL, "affine_u32", util::affine_u32),
        (BANDWIDTH, "stream_copy", bandwidth::stream_copy),
        (BANDWIDTH, "stream_mul", bandwidth::stream_mul),
        (BANDWIDTH, "stream_add", bandwidth::stream_add),
        (BANDWIDTH, "stream_triad", bandwidth::stream_triad),
        (BANDWIDTH, "stream_dot", bandwidth::stream_dot),
    ];
    functions.into_iter().map(|(source, name, f)| (source, declared(source, name, f))).collect()
}

/// `function` registered as kernel `name` of `source`, trusted, with the
/// parameters the source declares. A parameter of a type a host kernel
/// cannot take leaves the list short, which the module build reports
/// naming the kernel (`builtins_are_registered_with_their_source_parameters`).
fn declared(source: &str, name: &str, function: crate::host_kernel::KernelFn) -> HostKernel {
    let mut kernel = HostKernel::new(name, function).trusted();
    let params = hetero_kernels::kernel_params(source)
        .into_iter()
        .find(|(kernel, _)| kernel == name)
        .and_then(|(_, declarations)| crate::signature::parse(&declarations))
        .unwrap_or_default();
    for param in params {
        kernel = match (param.ty.as_str(), param.pointer) {
            ("float", None) => kernel.scalar::<f32>(),
            ("float", Some(false)) => kernel.slice::<f32>(),
            ("float", Some(true)) => kernel.slice_mut::<f32>(),
            ("uint", None) => kernel.scalar::<u32>(),
            ("uint", Some(false)) => kernel.slice::<u32>(),
            ("uint", Some(true)) => kernel.slice_mut::<u32>(),
            ("int", None) => kernel.scalar::<i32>(),
            ("ulong", None) => kernel.scalar::<u64>(),
            ("long", None) => kernel.scalar::<i64>(),
            ("double", None) => kernel.scalar::<f64>(),
            _ => return kernel,
        };
    }
    kernel
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
    use std::sync::Arc;

    use super::*;
    use crate::KernelArg;
    use crate::backend::host::memory::HostMemory;
    use crate::host_kernel::{KernelFn, Value};

    /// Every built-in is registered with every parameter its source
    /// declares, of the source's types (read from the source, so a type
    /// the reader does not know would leave the list short).
    #[test]
    fn builtins_are_registered_with_their_source_parameters() {
        let all = builtins(&crate::device::BuildOptions::default());
        assert_eq!(all.len(), 15);
        for (source, kernel) in all {
            let declared = hetero_kernels::kernel_params(source)
                .into_iter()
                .find(|(name, _)| name == kernel.name())
                .map(|(_, d)| d)
                .unwrap_or_default();
            let params = crate::signature::parse(&declared).unwrap_or_default();
            assert!(!params.is_empty(), "{}", kernel.name());
            assert_eq!(kernel.params.len(), params.len(), "{}", kernel.name());
            assert_eq!(kernel.mismatch(&params, &[]), None, "{}", kernel.name());
        }
    }

    fn buffer<T: bytemuck::Pod>(values: &[T]) -> Value {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let mem = HostMemory::new("test", bytes.len(), false, u64::MAX).expect("test allocation");
        // SAFETY: the block was just allocated with at least bytes.len() bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), mem.ptr().as_ptr(), bytes.len()) };
        Value::Buffer { ptr: mem.ptr().as_ptr(), len: bytes.len(), _owner: Arc::new(mem) }
    }

    fn u32(v: u32) -> Value {
        Value::Scalar(KernelArg::U32(v))
    }

    fn f32(v: f32) -> Value {
        Value::Scalar(KernelArg::F32(v))
    }

    fn contents<T: bytemuck::Pod>(args: &Args, index: usize) -> Vec<T> {
        let view = args.slice::<T>(index).expect("a buffer argument");
        (0..view.len()).map(|i| view.get(i).expect("in bounds")).collect()
    }

    /// Runs `kernel` over every block of a `grid` of `dim` threads.
    fn launch(kernel: KernelFn, grid: [u32; 3], dim: [u32; 3], args: &Args) -> Fault<()> {
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

    /// Built-in registrations declare what their sources declare (the host
    /// checks only user registrations when it builds).
    #[test]
    fn builtin_registrations_match_their_sources() {
        for (file, kernel) in builtins(&crate::device::BuildOptions::deterministic()) {
            let declared = hetero_kernels::kernel_params(file).into_iter().find(|(n, _)| n == kernel.name());
            let params = crate::signature::parse(&declared.expect("declared in its file").1).expect("readable");
            assert_eq!(kernel.mismatch(&params, &hetero_kernels::struct_layouts(file)), None);
        }
    }

    #[test]
    fn reduce_keeps_the_kernels_order_of_additions() {
        let (threads, grid) = (64usize, 3usize);
        let stride = threads * grid;
        let x: Vec<f32> = (0..11 * stride + 5).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 1.37e-3).collect();
        for n in [0, 1, threads - 1, 4 * stride - 1, 4 * stride + threads / 2, 8 * stride + 1, x.len()] {
            let args = Args::unchecked(vec![buffer(&x), buffer(&[0.0f32; 3]), u32(n as u32)]);
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
        let args = Args::unchecked(vec![
            buffer(&x),
            buffer(&vec![0u32; n]),
            buffer(&offsets),
            u32(n as u32),
            u32(items),
            u32(1),
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
        let sums = Args::unchecked(vec![buffer(&x), buffer(&[0u32; 3]), u32(n as u32), u32(items)]);
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
        let args = Args::unchecked(vec![
            buffer(&prev),
            buffer(&u),
            buffer(&vec![f32::NAN; nx * ny]),
            u32(nx as u32),
            u32(ny as u32),
            f32(c2),
            u32(sx as u32),
            u32(sy as u32),
            f32(src),
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
        let args = Args::unchecked(vec![
            buffer(&short),
            buffer(&short),
            buffer(&short),
            u32(nx),
            u32(ny),
            f32(0.1),
            u32(0),
            u32(0),
            f32(0.0),
        ]);
        let fault = launch(wave_step, [1, 4, 1], [16, 1, 1], &args).expect_err("the last row is out of bounds");
        assert!(fault.contains("out-of-bounds"), "{fault}");
    }
}
