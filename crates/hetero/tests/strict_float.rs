//! A deterministic build (`BuildOptions::deterministic`) computes floating
//! point as written on every backend: `a * b + c` rounded twice (not fused
//! into one multiply-add, which NVRTC, hiprtc and PoCL otherwise do),
//! `hetero_fma_f32` rounded once, division and square root correctly
//! rounded (OpenCL's default allows 2.5 and 3 ulp), denormal results kept;
//! each the bits of the same operation in Rust, which the host backend
//! runs.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::host_kernel::{Args, Block, Fault, HostKernel};
use hetero::{Backend, BuildOptions, LaunchConfig};
use rand::{Rng, SeedableRng};

const SOURCE: &str = include_str!("kernels/strict.kern");

/// The four results of one element, as the kernel defines them.
fn expected(a: f32, b: f32, c: f32) -> [f32; 4] {
    [a * b + c, a.mul_add(b, c), a / b, a.abs().sqrt()]
}

/// `strict_f32` for the host, thread by thread.
fn strict_f32(block: &Block, args: &Args) -> Fault {
    let (a, b, c) = (args.slice::<f32>(0)?, args.slice::<f32>(1)?, args.slice::<f32>(2)?);
    let (out, n) = (args.slice_mut::<f32>(3)?, args.u32(4)?);
    let [bx, _, _] = block.idx();
    let [dx, _, _] = block.dim();
    for [tx, _, _] in block.thread_indices() {
        let i = bx * dx + tx;
        if i < n {
            let i = i as usize;
            out.write(4 * i, &expected(a.get(i)?, b.get(i)?, c.get(i)?))?;
        }
    }
    Ok(())
}

/// Products that cancel against `c` (where fusing changes the result),
/// quotients and roots of random values, and products in the denormal range.
fn inputs() -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(53);
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..4096 {
        let x: f32 = rng.random_range(0.5..2.0);
        let y: f32 = rng.random_range(0.5..2.0);
        a.push(x);
        b.push(y);
        c.push(-(x * y));
    }
    for _ in 0..1024 {
        a.push(rng.random_range(1e-20..1e-19));
        b.push(rng.random_range(1e-20..1e-19));
        c.push(0.0);
    }
    (a, b, c)
}

fn floating_point_as_written(backend: Backend) {
    let Some(ctx) = hetero::testing::context_or_skip(backend).unwrap_or_else(|e| panic!("{e}")) else { return };
    let (a, b, c) = inputs();
    let want: Vec<f32> = a.iter().zip(&b).zip(&c).flat_map(|((&a, &b), &c)| expected(a, b, c)).collect();
    let fused = (0..a.len()).filter(|&i| want[4 * i].to_bits() != want[4 * i + 1].to_bits()).count();
    assert!(fused > 1000, "the inputs tell a fused multiply-add from two roundings ({fused} do)");
    assert!(want.iter().any(|v| v.is_subnormal()), "some results are denormal");
    let host = HostKernel::new("strict_f32", strict_f32)
        .slice::<f32>()
        .slice::<f32>()
        .slice::<f32>()
        .slice_mut::<f32>()
        .scalar::<u32>();
    let module = ctx.build_module_with_options(SOURCE, &BuildOptions::deterministic(), &[host]).unwrap();
    let kernel = module.kernel("strict_f32").unwrap();
    let stream = ctx.stream().unwrap();
    let (da, db, dc) = (stream.upload(&a).unwrap(), stream.upload(&b).unwrap(), stream.upload(&c).unwrap());
    let mut out = stream.alloc_zeros::<f32>(4 * a.len()).unwrap();
    let n = a.len() as u32;
    let threads = kernel.block_size(hetero::BlockRequest::new(128));
    // SAFETY: each thread i < n reads a[i], b[i], c[i] and writes out[4i..4i + 4),
    // all within the buffers (n elements, 4n outputs).
    unsafe {
        stream
            .launch(
                &kernel,
                LaunchConfig::linear(n.div_ceil(threads), threads, 0),
                &[(&da).into(), (&db).into(), (&dc).into(), (&mut out).into(), n.into()],
            )
            .unwrap();
    }
    let got = stream.download(&out).unwrap();
    let names = ["a * b + c", "fma(a, b, c)", "a / b", "sqrt(|a|)"];
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let i = k / 4;
        assert_eq!(
            g.to_bits(),
            w.to_bits(),
            "{backend}: {} of a = {:e}, b = {:e}, c = {:e} is {g:e}, Rust says {w:e}",
            names[k % 4],
            a[i],
            b[i],
            c[i]
        );
    }
}

#[test]
fn host_floating_point_as_written() {
    floating_point_as_written(Backend::Host);
}

#[test]
fn opencl_floating_point_as_written() {
    floating_point_as_written(Backend::OpenCl);
}

#[test]
fn cuda_floating_point_as_written() {
    floating_point_as_written(Backend::Cuda);
}

#[test]
fn hip_floating_point_as_written() {
    floating_point_as_written(Backend::Hip);
}
