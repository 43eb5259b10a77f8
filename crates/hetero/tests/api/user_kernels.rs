//! A downstream crate's own kernels on every backend: portable source for
//! the GPU backends, registered Rust implementations for the host, and the
//! richer argument types (64-bit scalars, `double`, structs by value).

use hetero::host_kernel::{Args, Block, Fault, HostKernel};
use hetero::{Backend, Context, ErrorKind, LaunchConfig};

const SOURCE: &str = include_str!("../kernels/user.kern");

const SOURCE_F64: &str = include_str!("../kernels/user_f64.kern");

/// `Params` of [`SOURCE`]: 16 bytes, aligned to 8, no padding.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Params {
    scale: f32,
    offset: u32,
    big: u64,
}
// SAFETY: repr(C), every field plain data, no padding (4 + 4 + 8 bytes).
unsafe impl hetero::Zeroable for Params {}
// SAFETY: as above.
unsafe impl hetero::Pod for Params {}

/// The global index of each thread of `block` along x.
fn indices(block: &Block) -> impl Iterator<Item = usize> + use<> {
    let (b, d) = (block.idx()[0] as usize, block.dim()[0] as usize);
    (0..d).map(move |t| b * d + t)
}

fn saxpy(block: &Block, args: &Args) -> Fault {
    let (a, x, y, n) = (args.scalar::<f32>(0)?, args.slice::<f32>(1)?, args.slice_mut::<f32>(2)?, args.u32(3)?);
    for i in indices(block).filter(|&i| i < n as usize) {
        y.set(i, a * x.get(i)? + y.get(i)?)?;
    }
    Ok(())
}

fn wide(block: &Block, args: &Args) -> Fault {
    let (out_u, out_i, out_f) = (args.slice_mut::<u64>(0)?, args.slice_mut::<i64>(1)?, args.slice_mut::<f32>(2)?);
    let (a, b, p, n) = (args.scalar::<u64>(3)?, args.scalar::<i64>(4)?, args.scalar::<Params>(5)?, args.u32(6)?);
    for i in indices(block).filter(|&i| i < n as usize) {
        out_u.set(i, a + i as u64)?;
        out_i.set(i, b - i as i64)?;
        out_f.set(i, p.scale * (i as u32 + p.offset) as f32 + (p.big >> 40) as f32)?;
    }
    Ok(())
}

fn scale_f64(block: &Block, args: &Args) -> Fault {
    let (y, a, n) = (args.slice_mut::<f64>(0)?, args.scalar::<f64>(1)?, args.u32(2)?);
    for i in indices(block).filter(|&i| i < n as usize) {
        y.set(i, a * y.get(i)?)?;
    }
    Ok(())
}

fn registrations() -> Vec<HostKernel> {
    vec![
        HostKernel::new("saxpy", saxpy).scalar::<f32>().slice::<f32>().slice_mut::<f32>().scalar::<u32>(),
        HostKernel::new("wide", wide)
            .slice_mut::<u64>()
            .slice_mut::<i64>()
            .slice_mut::<f32>()
            .scalar::<u64>()
            .scalar::<i64>()
            .scalar::<Params>()
            .scalar::<u32>(),
    ]
}

/// A crate's own kernels run on every backend, the host through its
/// registered implementations (P: every user kernel failed on the host
/// with "no host implementation"), with 64-bit scalars and a struct by value.
pub fn own_kernels_run_everywhere(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let module = ctx.build_module_with(SOURCE, &registrations()).unwrap();
    let n = 1000u32;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let x_dev = stream.upload(&x).unwrap();
    let mut y = stream.upload(&vec![1.0f32; n as usize]).unwrap();
    let kernel = module.kernel("saxpy").unwrap();
    let config = LaunchConfig::covering([n, 1, 1], [kernel.block_size(hetero::BlockRequest::new(128)), 1, 1], 0);
    // SAFETY: each thread i < n reads x[i] and updates y[i], both n long.
    unsafe { stream.launch(&kernel, config, &[2.0f32.into(), (&x_dev).into(), (&mut y).into(), n.into()]).unwrap() };
    let got = stream.download(&y).unwrap();
    for (i, v) in got.iter().enumerate() {
        assert!((v - (2.0 * x[i] + 1.0)).abs() <= 1e-5 * v.abs(), "saxpy element {i}: {v}");
    }

    let (mut out_u, mut out_i) =
        (stream.alloc_zeros::<u64>(n as usize).unwrap(), stream.alloc_zeros::<i64>(n as usize).unwrap());
    let mut out_f = stream.alloc_zeros::<f32>(n as usize).unwrap();
    let (a, b) = (u64::MAX - 5000, -(1i64 << 40));
    let params = Params { scale: 0.25, offset: 7, big: 3 << 40 };
    // SAFETY: each thread i < n writes element i of three buffers n long.
    unsafe {
        stream
            .launch(
                &module.kernel("wide").unwrap(),
                config,
                &[
                    (&mut out_u).into(),
                    (&mut out_i).into(),
                    (&mut out_f).into(),
                    a.into(),
                    b.into(),
                    hetero::Arg::value(&params),
                    n.into(),
                ],
            )
            .unwrap()
    };
    let (u, i, f) =
        (stream.download(&out_u).unwrap(), stream.download(&out_i).unwrap(), stream.download(&out_f).unwrap());
    for k in 0..n as usize {
        assert_eq!(u[k], a + k as u64, "ulong element {k}");
        assert_eq!(i[k], b - k as i64, "long element {k}");
        assert_eq!(f[k], 0.25 * (k as u32 + 7) as f32 + 3.0, "struct-derived element {k}");
    }

    if ctx.info().fp64 {
        let module = ctx
            .build_module_with(
                SOURCE_F64,
                &[HostKernel::new("scale_f64", scale_f64).slice_mut::<f64>().scalar::<f64>().scalar::<u32>()],
            )
            .unwrap();
        let mut y = stream.upload(&[1.0f64 / 3.0, 1e300, -2.5]).unwrap();
        // SAFETY: each thread i < 3 updates y[i], 3 long.
        unsafe {
            stream
                .launch(
                    &module.kernel("scale_f64").unwrap(),
                    LaunchConfig::linear(1, 32, 0),
                    &[(&mut y).into(), 3.0f64.into(), 3u32.into()],
                )
                .unwrap()
        };
        assert_eq!(stream.download(&y).unwrap(), [3.0 * (1.0f64 / 3.0), 3e300, -7.5], "double is exact here");
    } else {
        println!("skipped: double on {}: the device does not support it", ctx.info().name);
    }
}

/// Struct arguments are checked against the struct the source defines, and
/// structs too large to pass are refused, on every backend.
pub fn struct_arguments_checked(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module_with(SOURCE, &registrations()).unwrap().kernel("wide").unwrap();
    let mut out_u = ctx.alloc::<u64>(4).unwrap();
    let mut out_i = ctx.alloc::<i64>(4).unwrap();
    let mut out_f = ctx.alloc::<f32>(4).unwrap();
    let config = LaunchConfig::linear(1, 4, 0);
    let mut launch = |p: hetero::Arg<'_>| {
        // SAFETY: refused before anything is enqueued (the test's assertion).
        unsafe {
            stream.launch(
                &kernel,
                config,
                &[
                    (&mut out_u).into(),
                    (&mut out_i).into(),
                    (&mut out_f).into(),
                    1u64.into(),
                    1i64.into(),
                    p,
                    4u32.into(),
                ],
            )
        }
        .unwrap_err()
    };
    let short = launch(hetero::Arg::value(&[0.5f32, 1.0]));
    assert_eq!(short.kind, ErrorKind::InvalidLaunch);
    for word in ["wide", "parameter 6 (`p`)", "`Params` of 16 bytes", "8 bytes"] {
        assert!(short.message.contains(word), "`{word}` missing from: {short}");
    }
    let huge = launch(hetero::Arg::value(&[0u64; 64]));
    assert!(huge.message.contains("cannot be passed by value") && huge.message.contains("512 bytes"), "{huge}");
    let params = Params { scale: 1.0, offset: 0, big: 0 };
    let raw = launch(hetero::Arg::Scalar(hetero::KernelArg::Bytes(hetero::ArgBytes::of(&params).unwrap())));
    assert!(raw.message.contains("raw struct bytes"), "{raw}");
    let scalar = launch(7u32.into());
    assert!(scalar.message.contains("Params") && scalar.message.contains("uint"), "{scalar}");
    stream.synchronize().unwrap();
}

/// Registrations are checked against the source when the host builds it,
/// and a kernel named like a built-in but with other text is never run as
/// the built-in; GPU backends compile the source and ignore registrations.
pub fn host_registrations_checked(ctx: &Context) {
    let host = ctx.info().backend == Backend::Host;
    let wrong = [
        HostKernel::new("saxpy", saxpy).scalar::<u32>().slice::<f32>().slice_mut::<f32>().scalar::<u32>(),
        registrations().remove(1),
    ];
    let built = ctx.build_module_with(SOURCE, &wrong);
    let read_only = [
        HostKernel::new("saxpy", saxpy).scalar::<f32>().slice::<f32>().slice::<f32>().scalar::<u32>(),
        registrations().remove(1),
    ];
    let built_read_only = ctx.build_module_with(SOURCE, &read_only);
    let impostor = "KERNEL void affine_u32(GLOBAL uint* x, uint n, uint a, uint b) {\n\
                    uint i = BLOCK_X * BLOCK_DIM_X + THREAD_X;\n    if (i < n) x[i] = a + x[i] * b;\n}";
    let renamed = ctx.build_module(impostor);
    // Regression: a struct parameter registered with a type of another
    // size built, and the launch then faulted and lost the stream.
    let wrong_struct = [
        registrations().remove(0),
        HostKernel::new("wide", wide)
            .slice_mut::<u64>()
            .slice_mut::<i64>()
            .slice_mut::<f32>()
            .scalar::<u64>()
            .scalar::<i64>()
            .scalar::<[u8; 3]>()
            .scalar::<u32>(),
    ];
    let built_wrong_struct = ctx.build_module_with(SOURCE, &wrong_struct);
    if !host {
        assert!(
            built.is_ok() && built_read_only.is_ok() && renamed.is_ok() && built_wrong_struct.is_ok(),
            "GPU backends ignore registrations"
        );
        return;
    }
    let err = built.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Build);
    for word in ["saxpy", "parameter 1 (`a`)", "`float a`", "u32 scalar"] {
        assert!(err.message.contains(word), "`{word}` missing from: {err}");
    }
    let err = built_read_only.unwrap_err();
    assert!(err.message.contains("`GLOBAL float* y`") && err.message.contains("read-only slice of f32"), "{err}");
    let err = renamed.unwrap_err();
    assert!(err.message.contains("affine_u32") && err.message.contains("name of a built-in"), "{err}");
    let err = built_wrong_struct.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Build);
    for word in ["wide", "parameter 6 (`p`)", "`Params` is 16 bytes", "of 3 bytes"] {
        assert!(err.message.contains(word), "`{word}` missing from: {err}");
    }
    // The built-in's own source, with other kernels around it, still resolves.
    ctx.build_module_with(&format!("{}\n{SOURCE}", hetero::kernels::UTIL), &registrations()).unwrap();
}

pub(crate) fn reads_past_the_end(block: &Block, args: &Args) -> Fault {
    let (a, x, y, n) = (args.scalar::<f32>(0)?, args.slice::<f32>(1)?, args.slice_mut::<f32>(2)?, args.u32(3)?);
    for i in indices(block).filter(|&i| i < n as usize) {
        y.set(i, a * x.get(i + 1)?)?;
    }
    Ok(())
}

fn reads_as_the_wrong_type(_block: &Block, args: &Args) -> Fault {
    args.scalar::<u32>(0).map(drop)
}

/// `saxpy` of [`SOURCE`] on the host, implemented by `function`.
pub(crate) fn host_saxpy(ctx: &Context, function: hetero::host_kernel::KernelFn) -> hetero::Kernel {
    let kernels = [
        HostKernel::new("saxpy", function).scalar::<f32>().slice::<f32>().slice_mut::<f32>().scalar::<u32>(),
        registrations().remove(1),
    ];
    ctx.build_module_with(SOURCE, &kernels).unwrap().kernel("saxpy").unwrap()
}

/// Enqueues `y = x + y` over 64 elements with a `saxpy` kernel.
pub(crate) fn launch_saxpy(
    stream: &hetero::Stream,
    kernel: &hetero::Kernel,
    x: &hetero::DeviceBuffer<f32>,
    y: &mut hetero::DeviceBuffer<f32>,
) {
    // SAFETY: saxpy's host implementations are bounds-checked (a fault is
    // what the tests that use this want); x and y hold 64 elements.
    unsafe {
        let config = LaunchConfig::covering([64, 1, 1], [kernel.block_size(hetero::BlockRequest::new(64)), 1, 1], 0);
        stream.launch(kernel, config, &[1.0f32.into(), x.into(), y.into(), 64u32.into()])
    }
    .unwrap();
}

/// A host implementation that breaks its contract (an access past the end,
/// an argument read as another type) faults its stream with a sticky
/// `KernelFault`; nothing undefined happens. GPU backends have no part.
pub fn host_implementation_faults_are_sticky(ctx: &Context) {
    if ctx.info().backend != Backend::Host {
        return;
    }
    for (what, function) in
        [("out-of-bounds", reads_past_the_end as hetero::host_kernel::KernelFn), ("read as", reads_as_the_wrong_type)]
    {
        let kernel = host_saxpy(ctx, function);
        let stream = ctx.stream().unwrap();
        let x = stream.upload(&[1.0f32; 64]).unwrap();
        let mut y = stream.alloc_zeros::<f32>(64).unwrap();
        launch_saxpy(&stream, &kernel, &x, &mut y);
        let err = stream.synchronize().unwrap_err();
        assert_eq!(err.kind, ErrorKind::KernelFault, "{err}");
        assert!(err.message.contains("saxpy") && err.message.contains(what), "{err}");
        assert_eq!(stream.synchronize().unwrap_err().kind, ErrorKind::KernelFault, "the fault is sticky");
    }
}

const NESTED_SOURCE: &str = include_str!("../kernels/nested.kern");

/// `Nested` of [`NESTED_SOURCE`]: a `P` (16 bytes) and a `uint`, padded to 24.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Nested {
    inner: Params,
    k: u32,
    _pad: u32,
}
// SAFETY: repr(C), every field plain data, the padding an explicit field.
unsafe impl hetero::Zeroable for Nested {}
// SAFETY: as above.
unsafe impl hetero::Pod for Nested {}

fn sk(block: &Block, args: &Args) -> Fault {
    let (x, q, p) = (args.slice_mut::<u32>(0)?, args.scalar::<Nested>(1)?, args.scalar::<Params>(2)?);
    if block.idx()[0] == 0 {
        x.set(0, q.inner.offset + q.k + (q.inner.big >> 32) as u32)?;
        x.set(1, (q.inner.scale * 4.0) as u32 + p.offset)?;
    }
    Ok(())
}

/// Regression (wrong result): a struct argument for a parameter whose
/// struct nests a struct was passed unchecked, and with a 4- or 16-byte
/// value for the 24-byte `Nested` the kernel read past it (valgrind on
/// PoCL: an invalid read). Now such values are refused and the right one runs.
pub fn nested_struct_arguments_checked(ctx: &Context) {
    let kernels = [HostKernel::new("sk", sk).slice_mut::<u32>().scalar::<Nested>().scalar::<Params>()];
    let kernel = ctx.build_module_with(NESTED_SOURCE, &kernels).unwrap().kernel("sk").unwrap();
    let stream = ctx.stream().unwrap();
    let mut x = stream.alloc_zeros::<u32>(2).unwrap();
    let p = Params { scale: 2.0, offset: 3, big: 5 << 32 };
    let config = LaunchConfig::linear(1, 1, 0);
    let wrong: [hetero::Arg<'_>; 2] = [hetero::Arg::value(&7u32), hetero::Arg::value(&p)];
    for q in wrong {
        // SAFETY: refused before anything is enqueued (the assertion).
        let err = unsafe { stream.launch(&kernel, config, &[(&mut x).into(), q, hetero::Arg::value(&p)]) }.unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidLaunch, "{err}");
        assert!(err.message.contains("`Nested` of 24 bytes aligned to 8"), "{err}");
    }
    let q = Nested { inner: Params { scale: 1.5, offset: 10, big: 2 << 32 }, k: 100, _pad: 0 };
    // SAFETY: sk writes x[0] and x[1] of a 2-element buffer; the values match the source's structs.
    let launched =
        unsafe { stream.launch(&kernel, config, &[(&mut x).into(), hetero::Arg::value(&q), hetero::Arg::value(&p)]) };
    if let Err(e) = &launched
        && ctx.info().platform.starts_with("rusticl")
        && e.code == Some(-51)
    {
        println!("skipped: {RUSTICL_STRUCT_PADDING}: {e}");
        return;
    }
    launched.unwrap();
    assert_eq!(stream.download(&x).unwrap(), [112, 9]);
}

/// Rusticl's defect that the last launch of `nested_struct_arguments_checked` meets.
const RUSTICL_STRUCT_PADDING: &str = "rusticl (Mesa 22.3, Debian 12's mesa-opencl-icd 22.3.6) refuses a struct argument \
    whose size includes tail padding: for `typedef struct { float scale; uint offset; ulong big; } P; typedef struct \
    { P inner; uint k; } Nested; __kernel void sk(__global uint* x, Nested q, P p)`, where the kernel's sizeof(Nested) \
    is 24 and alignof 8, clSetKernelArg(sk, 1, size, value) returns CL_INVALID_ARG_SIZE for every size but 20 \
    (PoCL takes 24); hetero passes the 24 bytes the type has";

/// Regression: a pinned buffer that a faulted stream only read (a copy to
/// the device before the fault, one skipped after it) refused every later
/// host access with the stream's `KernelFault`, and any stream writing it
/// failed too, though its bytes were never written. A buffer the faulted
/// stream wrote still reports the fault. Host only: it faults on demand.
pub fn a_faulted_streams_reads_do_not_poison_a_buffer(ctx: &Context) {
    if ctx.info().backend != Backend::Host {
        return;
    }
    let kernel = host_saxpy(ctx, reads_past_the_end);
    let (a, b) = (ctx.stream().unwrap(), ctx.stream().unwrap());
    let mut p = ctx.alloc_pinned::<f32>(64).unwrap();
    p.host_slice_mut().unwrap().fill(2.0);
    let x = a.upload(&[1.0f32; 64]).unwrap();
    let (mut y, mut z) = (a.alloc_zeros::<f32>(64).unwrap(), a.alloc_zeros::<f32>(64).unwrap());
    a.copy(&p, &mut y).unwrap();
    launch_saxpy(&a, &kernel, &x, &mut y);
    a.copy(&p, &mut z).unwrap();
    assert_eq!(a.synchronize().unwrap_err().kind, ErrorKind::KernelFault);
    assert_eq!(p.host_slice().unwrap(), [2.0; 64]);
    std::thread::scope(|s| s.spawn(|| assert_eq!(p.host_slice().unwrap(), [2.0; 64])).join().unwrap());
    // Another stream writes p: it waits for no failed read.
    let d = b.upload(&[3.0f32; 64]).unwrap();
    b.copy(&d, &mut p).unwrap();
    b.synchronize().unwrap();
    assert_eq!(p.host_slice_mut().unwrap(), [3.0; 64]);
    // z was written by the faulted stream (a skipped copy): that surfaces.
    let err = b.download(&z).unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelFault, "{err}");
}

/// Regression: a completion future polled again after `Ready(Err)`
/// answered `Ready(Ok(()))`, so code that re-polls read a failure as
/// success. Every later poll answers the same error. Host only: it faults
/// on demand.
pub fn a_failed_future_stays_failed(ctx: &Context) {
    use std::future::Future;
    use std::task::{Context as TaskContext, Poll};
    if ctx.info().backend != Backend::Host {
        return;
    }
    let kernel = host_saxpy(ctx, reads_past_the_end);
    let stream = ctx.stream().unwrap();
    let x = stream.upload(&[1.0f32; 64]).unwrap();
    let mut y = stream.alloc_zeros::<f32>(64).unwrap();
    launch_saxpy(&stream, &kernel, &x, &mut y);
    // One future resolved while waiting, one found complete at its first poll.
    let waited = stream.synchronize_async();
    let _ = stream.synchronize();
    for mut future in [waited, stream.synchronize_async()] {
        let mut cx = TaskContext::from_waker(futures::task::noop_waker_ref());
        let first = loop {
            match std::pin::Pin::new(&mut future).poll(&mut cx) {
                Poll::Ready(result) => break result,
                Poll::Pending => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        };
        assert_eq!(first.unwrap_err().kind, ErrorKind::KernelFault);
        for _ in 0..3 {
            match std::pin::Pin::new(&mut future).poll(&mut cx) {
                Poll::Ready(Err(e)) => assert_eq!(e.kind, ErrorKind::KernelFault, "{e}"),
                other => panic!("a failed future answered {other:?} when polled again"),
            }
        }
    }
}
