//! The portable dialect on every backend: three-dimensional indices, grid
//! dimensions on every axis and integer atomics. The host backend runs the
//! registered Rust implementation, written with the same indices and atomics.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::host_kernel::{Args, Block, Fault, HostKernel};
use hetero::{Backend, LaunchConfig};

const SOURCE: &str = include_str!("kernels/dialect.kern");

/// `dialect_3d` for the host, thread by thread.
fn dialect_3d(block: &Block, args: &Args) -> Fault {
    let (ids, count) = (args.slice_mut::<u32>(0)?, args.slice_mut::<u32>(1)?);
    let (signed_sum, extremes) = (args.slice_mut::<i32>(2)?, args.slice_mut::<u32>(3)?);
    let (nx, ny, nz) = (args.u32(4)?, args.u32(5)?, args.u32(6)?);
    let ([bx, by, bz], [dx, dy, dz], [gx, gy, gz]) = (block.idx(), block.dim(), block.grid());
    for [tx, ty, tz] in block.thread_indices() {
        let (x, y, z) = (bx * dx + tx, by * dy + ty, bz * dz + tz);
        if x < nx && y < ny && z < nz {
            let i = (z * ny + y) * nx + x;
            ids.set(i as usize, gx * 10000 + gy * 100 + gz)?;
            count.atomic_add(0, 1)?;
            signed_sum.atomic_add(0, -1)?;
            extremes.atomic_max(0, i)?;
            extremes.atomic_min(1, i)?;
        }
    }
    Ok(())
}

fn three_dimensions_and_atomics(backend: Backend) {
    let Some(ctx) = hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else { return };
    let stream = ctx.stream().unwrap();
    let host = HostKernel::new("dialect_3d", dialect_3d)
        .slice_mut::<u32>()
        .slice_mut::<u32>()
        .slice_mut::<i32>()
        .slice_mut::<u32>()
        .scalar::<u32>()
        .scalar::<u32>()
        .scalar::<u32>();
    let kernel = ctx.build_module_with(SOURCE, &[host]).unwrap().kernel("dialect_3d").unwrap();
    let (nx, ny, nz) = (5u32, 6u32, 7u32);
    let cells = (nx * ny * nz) as usize;
    let mut ids = stream.alloc_zeros::<u32>(cells).unwrap();
    let mut count = stream.alloc_zeros::<u32>(1).unwrap();
    let mut signed_sum = stream.alloc_zeros::<i32>(1).unwrap();
    let mut extremes = stream.upload(&[0u32, u32::MAX]).unwrap();
    let config = LaunchConfig::covering([nx, ny, nz], [4, 4, 2], 0);
    assert_eq!(config.grid, [2, 2, 4]);
    // SAFETY: every thread writes ids[i] for its own i < nx*ny*nz (the
    // buffer's length) and updates the counters atomically.
    unsafe {
        stream
            .launch(
                &kernel,
                config,
                &[
                    (&mut ids).into(),
                    (&mut count).into(),
                    (&mut signed_sum).into(),
                    (&mut extremes).into(),
                    nx.into(),
                    ny.into(),
                    nz.into(),
                ],
            )
            .unwrap()
    };
    assert!(stream.download(&ids).unwrap().iter().all(|&v| v == 20204), "grid dimensions 2, 2, 4 on every cell");
    assert_eq!(stream.download(&count).unwrap(), [cells as u32]);
    assert_eq!(stream.download(&signed_sum).unwrap(), [-(cells as i32)]);
    assert_eq!(stream.download(&extremes).unwrap(), [cells as u32 - 1, 0]);
}

#[test]
fn host_three_dimensions_and_atomics() {
    three_dimensions_and_atomics(Backend::Host);
}

#[test]
fn opencl_three_dimensions_and_atomics() {
    three_dimensions_and_atomics(Backend::OpenCl);
}

#[test]
fn cuda_three_dimensions_and_atomics() {
    three_dimensions_and_atomics(Backend::Cuda);
}

#[test]
fn hip_three_dimensions_and_atomics() {
    three_dimensions_and_atomics(Backend::Hip);
}
