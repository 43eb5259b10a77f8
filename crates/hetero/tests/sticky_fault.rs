//! A faulting kernel on a GPU backend. Its own test binary, run once per
//! backend (`... Backend__Cuda`, `... Backend__Hip`): after a sticky error
//! the device's context is unusable for the rest of the process, which
//! would break tests running beside it (HIP on NVIDIA shares CUDA's context).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::testing::{Availability, context};
use hetero::{Backend, ErrorKind, LaunchConfig};
use rstest::rstest;

/// An out-of-bounds kernel makes the device report the fault from every
/// later call, instead of returning garbage.
#[rstest]
fn faulting_kernel_poisons_the_device(#[values(Backend::Cuda, Backend::Hip)] backend: Backend) {
    let ctx = match context(backend) {
        Ok(Availability::Ready(ctx)) => ctx,
        Ok(Availability::Skipped(reason)) => return println!("skipped: {reason}"),
        Err(e) => panic!("{e}"),
    };
    let kernel = ctx.build_module(hetero::kernels::UTIL).unwrap().kernel("affine_u32").unwrap();
    let stream = ctx.stream().unwrap();
    let mut x = ctx.alloc::<u32>(16).unwrap();
    {
        let xs = x.slice_mut(..).unwrap();
        // SAFETY: deliberately breaks the contract: 2^30 elements of a
        // 16-element buffer, to make the device fault.
        unsafe {
            stream.launch(
                &kernel,
                LaunchConfig::linear(1 << 22, 256, 0),
                &[(&xs).into(), (1u32 << 30).into(), 1u32.into(), 1u32.into()],
            )
        }
        .unwrap();
    }
    let err = stream.synchronize().unwrap_err();
    assert_eq!(err.kind, ErrorKind::KernelFault, "{err}");
    let later = ctx.alloc::<u32>(4).unwrap_err();
    assert_eq!(later.kind, ErrorKind::KernelFault, "calls after the fault must fail: {later}");
    std::mem::forget(x); // its memory went with the context
}
