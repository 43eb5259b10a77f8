//! Bad input gets a typed error, never a panic or undefined behaviour.

use hetero::{Backend, Context, Device, ErrorKind, LaunchConfig};

fn kind<T: std::fmt::Debug>(result: hetero::Result<T>) -> ErrorKind {
    result.expect_err("call should fail").kind
}

pub fn copy_out_of_bounds(ctx: &Context) {
    let pinned = ctx.alloc_pinned::<f32>(16).unwrap();
    let device = ctx.alloc::<f32>(16).unwrap();
    assert_eq!(kind(pinned.slice(10..17)), ErrorKind::OutOfBounds);
    assert_eq!(kind(device.slice(17..)), ErrorKind::OutOfBounds);
    #[allow(clippy::reversed_empty_ranges)]
    let reversed = device.slice(9..3);
    assert_eq!(kind(reversed), ErrorKind::OutOfBounds);
    assert_eq!(kind(device.slice(..=usize::MAX)), ErrorKind::OutOfBounds);
    // The raw layer checks too, before anything reaches a driver.
    let raw = hetero::DeviceRange { alloc: hetero::AllocId(u64::MAX), offset: 0, len: 4 };
    let dev = ctx.device();
    let stream = dev.create_stream(Default::default()).unwrap();
    let alloc = dev.alloc_device(64).unwrap();
    let pinned = dev.alloc_pinned(64).unwrap();
    // SAFETY: every handle is this test's own; each call is refused before
    // anything is enqueued, so nothing uses the allocations when they are freed.
    unsafe {
        assert_eq!(kind(dev.fill_u32(raw, 0, stream)), ErrorKind::InvalidHandle);
        let past_end = hetero::DeviceRange { alloc, offset: 60, len: 8 };
        assert_eq!(kind(dev.fill_u32(past_end, 0, stream)), ErrorKind::OutOfBounds);
        let wrapping = hetero::DeviceRange { alloc, offset: usize::MAX - 2, len: 8 };
        assert_eq!(kind(dev.copy_d2d(wrapping, wrapping, stream)), ErrorKind::OutOfBounds);
        // Overlapping ranges of one allocation: the same error on every backend.
        let (low, high) =
            (hetero::DeviceRange { alloc, offset: 0, len: 32 }, hetero::DeviceRange { alloc, offset: 16, len: 32 });
        let overlap = dev.copy_d2d(low, high, stream).unwrap_err();
        assert_eq!(overlap.kind, ErrorKind::OutOfBounds);
        assert!(overlap.message.contains("0..32") && overlap.message.contains("16..48"), "{overlap}");
        // Device operations refuse pinned host memory (U1: safe code filled
        // pinned memory while the host read it).
        let on_host = hetero::DeviceRange { alloc: pinned, offset: 0, len: 64 };
        assert_eq!(kind(dev.fill_u32(on_host, 0, stream)), ErrorKind::InvalidHandle);
        assert_eq!(
            kind(dev.copy_d2d(on_host, hetero::DeviceRange { alloc, offset: 0, len: 64 }, stream)),
            ErrorKind::InvalidHandle
        );
        dev.destroy_stream(stream).unwrap();
        dev.free(alloc).unwrap();
        dev.free(pinned).unwrap();
    }
}

pub fn copy_length_mismatch(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let pinned = ctx.alloc_pinned::<f32>(16).unwrap();
    let mut device = ctx.alloc::<f32>(8).unwrap();
    assert_eq!(kind(stream.copy(&pinned, &mut device)), ErrorKind::OutOfBounds);
    assert_eq!(kind(stream.copy_from_host(&[1.0f32; 3], &mut device)), ErrorKind::OutOfBounds);
    let mut host = [0.0f32; 9];
    assert_eq!(kind(stream.copy_to_host(&device, &mut host)), ErrorKind::OutOfBounds);
    let mut other = ctx.alloc::<f32>(9).unwrap();
    assert_eq!(kind(stream.copy(&device, &mut other)), ErrorKind::OutOfBounds);
}

pub fn zero_length_copies_are_no_ops(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let pinned = ctx.pinned_from_slice(&[7u32; 8]).unwrap();
    let mut device = ctx.alloc::<u32>(8).unwrap();
    stream.fill(&mut device, 1).unwrap();
    stream.copy(pinned.slice(8..).unwrap(), device.slice_mut(3..3).unwrap()).unwrap();
    stream.copy_from_host(&[], device.slice_mut(0..0).unwrap()).unwrap();
    let empty = ctx.alloc::<u32>(0).unwrap();
    let mut also_empty = ctx.alloc::<u32>(0).unwrap();
    stream.copy(&empty, &mut also_empty).unwrap();
    let mut out = [0u32; 8];
    stream.copy_to_host(&device, &mut out).unwrap();
    assert_eq!(out, [1; 8], "a zero-length copy changed data");
}

pub fn objects_of_another_device(ctx: &Context) {
    let Ok(mut devices) = hetero::backend_devices(ctx.info().backend) else { return };
    let other = Context::new(devices.remove(0));
    let stream = ctx.stream().unwrap();
    let foreign_pinned = other.alloc_pinned::<u32>(4).unwrap();
    let mut local = ctx.alloc::<u32>(4).unwrap();
    assert_eq!(kind(stream.copy(&foreign_pinned, &mut local)), ErrorKind::DeviceMismatch);
    let foreign_event = other.event().unwrap();
    assert_eq!(kind(stream.record(&foreign_event)), ErrorKind::DeviceMismatch);
    // Another device's recorded event may be waited on (a cross-device
    // wait); its gate may not (`peer::cross_device_event_waits`).
    assert!(stream.wait(&foreign_event).is_ok());
    assert_eq!(kind(stream.wait(&other.user_event().unwrap())), ErrorKind::InvalidHandle);
    let local_event = ctx.event().unwrap();
    assert_eq!(kind(local_event.elapsed_ms(&foreign_event)), ErrorKind::DeviceMismatch);
    let foreign_kernel = other.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let xs = local.slice_mut(..).unwrap();
    // SAFETY: refused before launch (device mismatch); otherwise in bounds.
    let launched = unsafe {
        stream.launch(
            &foreign_kernel,
            LaunchConfig::linear(1, 4, 0),
            &[(&xs).into(), 4u32.into(), 1u32.into(), 0u32.into()],
        )
    };
    assert_eq!(kind(launched), ErrorKind::DeviceMismatch);
}

pub fn raw_handles_of_another_device(ctx: &Context) {
    let Ok(mut devices) = hetero::backend_devices(ctx.info().backend) else { return };
    let other = devices.remove(0);
    let dev = ctx.device();
    let stream = dev.create_stream(Default::default()).unwrap();
    let foreign_event = other.create_event().unwrap();
    let foreign_alloc = other.alloc_device(16).unwrap();
    // SAFETY: every handle is this test's own; the foreign ones are refused
    // before anything is enqueued, so nothing uses the allocation when it is freed.
    unsafe {
        assert_eq!(kind(dev.record_event(foreign_event, stream)), ErrorKind::InvalidHandle);
        assert_eq!(kind(dev.stream_wait_event(stream, foreign_event)), ErrorKind::InvalidHandle);
        let range = hetero::DeviceRange { alloc: foreign_alloc, offset: 0, len: 16 };
        assert_eq!(kind(dev.fill_u32(range, 0, stream)), ErrorKind::InvalidHandle);
        dev.destroy_stream(stream).unwrap();
        assert_eq!(kind(dev.destroy_stream(stream)), ErrorKind::InvalidHandle, "a released stream is still accepted");
        other.destroy_event(foreign_event).unwrap();
        other.free(foreign_alloc).unwrap();
    }
}

pub fn launch_shapes_beyond_limits(ctx: &Context) {
    let info = ctx.info().clone();
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let xs = x.slice_mut(..).unwrap();
    let cases = [
        LaunchConfig::linear(1, info.max_threads_per_block + 1, 0),
        LaunchConfig::linear(0, 64, 0),
        LaunchConfig { grid: [1, 1, 1], block: [64, 0, 1], shared_bytes: 0 },
        LaunchConfig::linear(1, 64, info.shared_memory_per_block + 1),
    ];
    for config in cases {
        // SAFETY: every case is refused before launch; otherwise in bounds.
        let result = unsafe { stream.launch(&kernel, config, &[(&xs).into(), 64u32.into(), 1u32.into(), 0u32.into()]) };
        let err = result.expect_err("launch beyond limits must fail");
        assert_eq!(err.kind, ErrorKind::InvalidLaunch, "{config:?}: {err}");
        assert!(!err.message.is_empty());
    }
    let too_big = LaunchConfig::linear(1, info.max_threads_per_block + 1, 0);
    let message = too_big.validate(&info, "launch").unwrap_err().to_string();
    assert!(message.contains(&(info.max_threads_per_block + 1).to_string()), "message names the request: {message}");
    assert!(message.contains(&info.max_threads_per_block.to_string()), "message names the limit: {message}");
}

pub fn kernel_not_in_module(ctx: &Context) {
    let module = ctx.build_module(hetero::kernels::UTIL).unwrap();
    let err = module.kernel("no_such_kernel").unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelNotFound);
    assert!(err.to_string().contains("no_such_kernel"), "{err}");
}

pub fn build_failure_carries_log(ctx: &Context) {
    let source = "KERNEL void broken_kernel(GLOBAL uint* x) { this is not a statement }";
    let err = ctx.build_module(source).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Build);
    let log = err.build_log().expect("build errors carry a log");
    assert!(!log.trim().is_empty());
    if ctx.info().backend == Backend::Host {
        assert!(log.contains("broken_kernel"), "the log names the unresolved kernel: {log}");
    }
    assert_eq!(ctx.build_module("no kernels here").unwrap_err().kind, ErrorKind::Build);
}

pub fn out_of_memory_leaves_device_usable(ctx: &Context) {
    let too_much = (ctx.info().total_memory as usize).saturating_mul(4).max(1 << 50);
    assert_eq!(kind(ctx.alloc::<u8>(too_much)), ErrorKind::OutOfMemory);
    assert_eq!(kind(ctx.alloc::<u64>(usize::MAX / 2)), ErrorKind::OutOfMemory);
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<u32>(1024).unwrap();
    stream.fill(&mut x, 9).unwrap();
    let mut out = vec![0u32; 1024];
    stream.copy_to_host(&x, &mut out).unwrap();
    assert!(out.iter().all(|&v| v == 9));
}

/// A kernel name with a NUL byte is `KernelNotFound` on every backend
/// (it panicked inside opencl3).
pub fn kernel_name_with_nul(ctx: &Context) {
    let module = ctx.build_module(hetero::kernels::UTIL).unwrap();
    assert_eq!(kind(module.kernel("affine\0u32")), ErrorKind::KernelNotFound);
    assert_eq!(kind(module.kernel("a\0b")), ErrorKind::KernelNotFound);
}

/// Too few or too many launch arguments get one error, naming both counts,
/// on every backend (the host said "expects an argument 2 but the launch
/// passed 2" and accepted extra arguments).
pub fn argument_count_checked(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let xs = x.slice_mut(..).unwrap();
    let config = LaunchConfig::linear(1, 64, 0);
    // SAFETY: each launch is refused before it reaches the device.
    let few = unsafe { stream.launch(&kernel, config, &[(&xs).into(), 64u32.into()]) }.unwrap_err();
    assert_eq!(few.kind, ErrorKind::InvalidLaunch);
    assert!(few.message.contains("takes 4 arguments") && few.message.contains("passed 2"), "{few}");
    // SAFETY: as above.
    let many =
        unsafe { stream.launch(&kernel, config, &[(&xs).into(), 64u32.into(), 1u32.into(), 1u32.into(), 1u32.into()]) }
            .unwrap_err();
    assert!(many.message.contains("takes 4 arguments") && many.message.contains("passed 5"), "{many}");
}

/// Launch arguments are checked against the kernel's parameter list on
/// every backend, before anything is enqueued (a `float` passed for a
/// `uint` reached the kernel as its bit pattern; a read-only slice passed
/// for a parameter the kernel writes was tracked as a read).
pub fn argument_types_checked(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let mut f = ctx.alloc::<f32>(64).unwrap();
    let config = LaunchConfig::linear(1, 64, 0);
    let xs = x.slice_mut(..).unwrap();
    // SAFETY: each launch is refused before it reaches the device.
    let float = unsafe { stream.launch(&kernel, config, &[(&xs).into(), 64u32.into(), 3.0f32.into(), 1u32.into()]) }
        .unwrap_err();
    assert_eq!(float.kind, ErrorKind::InvalidLaunch);
    for word in ["affine_u32", "parameter 3 (`a`)", "uint", "float"] {
        assert!(float.message.contains(word), "`{word}` missing from: {float}");
    }
    let fs = f.slice_mut(..).unwrap();
    // SAFETY: as above.
    let element =
        unsafe { stream.launch(&kernel, config, &[(&fs).into(), 64u32.into(), 1u32.into(), 1u32.into()]) }.unwrap_err();
    assert!(element.message.contains("points to uint") && element.message.contains("buffer of float"), "{element}");
    let read_only = x.slice(..).unwrap();
    // SAFETY: as above.
    let written =
        unsafe { stream.launch(&kernel, config, &[(&read_only).into(), 64u32.into(), 1u32.into(), 1u32.into()]) }
            .unwrap_err();
    assert!(written.message.contains("read-only"), "{written}");
    stream.synchronize().unwrap();
}

/// Range errors print ranges as written (`10..20`), not `Included(10)..Excluded(20)`.
pub fn range_messages_read_as_written(ctx: &Context) {
    let buf = ctx.alloc::<u32>(16).unwrap();
    let check = |err: hetero::Error, range: &str| {
        assert!(err.message.contains(&format!("range {range} is outside")), "{err}");
        assert!(!err.message.contains("Included") && !err.message.contains("Excluded"), "{err}");
    };
    check(buf.slice(10..20).unwrap_err(), "10..20");
    check(buf.slice(..=16).unwrap_err(), "..=16");
    check(buf.slice(17..).unwrap_err(), "17..");
}

/// Grids beyond the device's limits are refused before anything runs
/// (P1: on the host `[1<<31, 1<<31, 4]` overflowed a multiplication in the
/// worker, which then hung every drop; `[1, 65536, 65536]` ran for minutes).
pub fn grid_beyond_limits(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let mut x = ctx.alloc::<u32>(64).unwrap();
    let xs = x.slice_mut(..).unwrap();
    let limits = ctx.info().max_grid_dims;
    assert!(limits.iter().all(|&l| l > 0), "{limits:?}");
    let grids = [[1u32 << 31, 1 << 31, 4], [1, 65536, 65536], [1, 1, limits[2].saturating_add(1)]];
    for grid in grids.into_iter().filter(|g| g.iter().zip(&limits).any(|(g, l)| g > l)) {
        let config = LaunchConfig { grid, block: [64, 1, 1], shared_bytes: 0 };
        // SAFETY: refused before launch.
        let err = unsafe { stream.launch(&kernel, config, &[(&xs).into(), 64u32.into(), 1u32.into(), 0u32.into()]) }
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidLaunch, "{grid:?}: {err}");
    }
    stream.synchronize().unwrap();
}

/// Regression (crash): grids whose dimensions are each within the limits
/// but whose work-groups number 2^32 or more ended the process on PoCL 3.1
/// (SIGFPE, or the assertion `max_wgs > 0`). They are refused before
/// anything is enqueued, naming the limit, wherever the device has one.
pub fn grids_beyond_the_block_count_are_refused(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let mut x = ctx.alloc::<u32>(16).unwrap();
    let xs = x.slice_mut(..).unwrap();
    let info = ctx.info();
    if info.backend == hetero::Backend::OpenCl {
        assert!(info.max_blocks < 1 << 32, "OpenCL takes fewer than 2^32 work-groups: {}", info.max_blocks);
    }
    let grids = [[1_048_576u32, 4096, 1], [2_097_152, 2048, 1], [1_048_576, 4096, 2], [65535, 65535, 65535]];
    let beyond = |g: &[u32; 3]| g.iter().map(|&d| u64::from(d)).product::<u64>() > info.max_blocks;
    for grid in grids.into_iter().filter(beyond) {
        let config = LaunchConfig { grid, block: [1, 1, 1], shared_bytes: 0 };
        // SAFETY: refused before launch.
        let err = unsafe { stream.launch(&kernel, config, &[(&xs).into(), 16u32.into(), 1u32.into(), 0u32.into()]) }
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::InvalidLaunch, "{grid:?}: {err}");
        assert!(err.message.contains(&info.max_blocks.to_string()), "the limit is named: {err}");
    }
    // The stream is usable after the refusals.
    stream.fill(&mut x, 2u32).unwrap();
    assert_eq!(stream.download(&x).unwrap(), vec![2; 16]);
}

/// Pinned buffers of an over-aligned type are aligned or refused with a
/// typed error (U3: PoCL maps at 128 bytes, and `host_slice` formed a
/// misaligned slice of a `#[repr(align(256))]` type).
pub fn over_aligned_pinned_types(ctx: &Context) {
    #[derive(Clone, Copy, bytemuck::Zeroable, bytemuck::Pod)]
    #[repr(C, align(256))]
    struct Wide([u8; 256]);
    for len in 1..=40 {
        match ctx.alloc_pinned::<Wide>(len) {
            Ok(buf) => {
                let slice = buf.host_slice().unwrap();
                assert!((slice.as_ptr() as usize).is_multiple_of(256), "misaligned pinned slice");
                assert_eq!(slice.len(), len);
            }
            Err(e) => {
                assert_eq!(e.kind, ErrorKind::OutOfBounds, "{e}");
                assert!(e.message.contains("256"), "{e}");
            }
        }
    }
}
