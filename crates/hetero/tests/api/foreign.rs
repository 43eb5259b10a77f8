//! Memory and streams shared with other libraries, and DLPack exchanges.
//!
//! "Another library" is played by the raw trait: memory it allocates is
//! foreign to the typed layer, which adopts it as any framework's.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hetero::dlpack::{self, DLManagedTensorVersioned};
use hetero::{AnyDevice, Backend, Context, Device, ErrorKind, Release};

/// Raw device memory of `bytes`, the release that frees it and sets the
/// returned flag, and its native handle.
fn foreign_memory(ctx: &Context, bytes: usize) -> (hetero::RawMemory, Release, Arc<AtomicBool>) {
    let alloc = ctx.device().alloc_device(bytes).unwrap();
    // SAFETY: the allocation is ours.
    let raw = unsafe { ctx.device().raw_memory(alloc) }.unwrap();
    let released = Arc::new(AtomicBool::new(false));
    let (flag, device) = (Arc::clone(&released), ctx.clone());
    let release = Release::new(move || {
        // SAFETY: hetero is done with it (the release's promise), and so is everyone else.
        unsafe { device.device().free(alloc) }.unwrap();
        flag.store(true, Ordering::SeqCst);
    });
    (raw, release, released)
}

/// Guards against releasing foreign memory to its owner while queued work
/// still uses it: the release runs only after the gated copies complete.
pub fn adopted_memory_goes_back_only_after_queued_work(ctx: &Context) {
    let (raw, release, released) = foreign_memory(ctx, 4096 * 4);
    // SAFETY: 4096 u32 of this device's memory, ours alone until released.
    let mut adopted = unsafe { ctx.adopt_buffer::<u32>(raw, 4096, Some(release)) }.unwrap();
    let stream = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    let input = ctx.pinned_from_slice(&[11u32; 4096]).unwrap();
    let mut output = ctx.alloc_pinned::<u32>(4096).unwrap();
    stream.wait(&gate).unwrap();
    stream.copy(&input, &mut adopted).unwrap();
    stream.copy(&adopted, &mut output).unwrap();
    let stats = ctx.allocator_stats();
    drop(adopted);
    assert!(!released.load(Ordering::SeqCst), "released while the gate holds its copies");
    assert_eq!(
        ctx.allocator_stats().device.bytes_in_use,
        stats.device.bytes_in_use,
        "adopted bytes are not the allocator's"
    );
    gate.complete().unwrap();
    stream.synchronize().unwrap();
    assert!(output.host_slice().unwrap().iter().all(|&v| v == 11));
    assert!(released.load(Ordering::SeqCst), "the release runs once the work is done");
}

/// A buffer's native handle names its memory: adopted again (borrowed for
/// one call) it shows the same contents, and the borrow ends with its work.
pub fn native_handles_name_the_same_memory(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let mut buffer = stream.upload(&(0..1000u32).collect::<Vec<_>>()).unwrap();
    stream.synchronize().unwrap();
    let raw = buffer.raw_memory().unwrap();
    let other = ctx.stream().unwrap();
    // SAFETY: the memory is `buffer`'s, which lives and is not used
    // elsewhere during the borrow (it ends before `buffer` is used again).
    let seen = unsafe {
        ctx.borrow_buffer::<u32, _>(raw, 1000, |mut view| {
            let seen = other.download(view.slice(..).unwrap()).unwrap();
            other.fill(view.slice_mut(..10).unwrap(), 7u32).unwrap();
            seen
        })
    }
    .unwrap();
    assert_eq!(seen, (0..1000).collect::<Vec<_>>());
    let after = stream.download(&buffer).unwrap();
    assert_eq!(&after[..12], &[7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 10, 11]);
    stream.fill(&mut buffer, 0u32).unwrap();
    stream.synchronize().unwrap();
}

/// A native stream adopted runs hetero's work in order with the work
/// enqueued on it natively, and is not destroyed when its `Stream` drops.
/// The host has no native streams: refused with `Unsupported`.
pub fn adopted_streams_order_and_outlive_their_handle(ctx: &Context) {
    let native = ctx.stream().unwrap();
    let gate = ctx.user_event().unwrap();
    native.wait(&gate).unwrap();
    // After the wait: work enqueued on the native stream from here on runs
    // after it (OpenCL enqueued its deferred wait when asked: the fill did
    // not wait on NVIDIA's OpenCL before).
    let raw = match native.raw() {
        Ok(raw) => raw,
        Err(e) => {
            assert_eq!(ctx.info().backend, Backend::Host);
            assert_eq!(e.kind, ErrorKind::Unsupported, "{e}");
            // SAFETY: a null handle is refused before it is used.
            let refused = unsafe { ctx.adopt_stream(hetero::RawStream(std::ptr::null_mut())) }.unwrap_err();
            assert_eq!(refused.kind, ErrorKind::Unsupported, "{refused}");
            gate.complete().unwrap();
            return;
        }
    };
    let mut x = ctx.alloc::<u32>(256).unwrap();
    {
        // SAFETY: `native` is a live stream of this device and outlives `adopted`.
        let adopted = unsafe { ctx.adopt_stream(raw) }.unwrap();
        assert_eq!(adopted.raw().unwrap(), raw);
        adopted.fill(&mut x, 5u32).unwrap();
        assert!(!adopted.query().unwrap(), "the fill must wait behind the native stream's gate");
    }
    gate.complete().unwrap();
    native.synchronize().unwrap();
    assert!(native.download(&x).unwrap().iter().all(|&v| v == 5));
}

/// Foreign handles of the wrong kind or of another device are refused
/// with typed errors, and the release of refused memory still runs.
pub fn foreign_handles_of_the_wrong_kind_are_refused(ctx: &Context) {
    let (raw, release, released) = foreign_memory(ctx, 64);
    let wrong = match raw {
        hetero::RawMemory::Address(_) => hetero::RawMemory::ClMem(std::ptr::null_mut()),
        hetero::RawMemory::ClMem(_) => hetero::RawMemory::Address(64),
    };
    // SAFETY: refused before it is used.
    let refused = unsafe { ctx.adopt_buffer::<u32>(wrong, 16, Some(release)) }.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Unsupported, "{refused}");
    assert!(released.load(Ordering::SeqCst), "a refusal runs the release");
    let (small, release, released) = foreign_memory(ctx, 64);
    if let hetero::RawMemory::ClMem(_) = small {
        // SAFETY: a live cl_mem; refused for its size before it is used.
        let refused = unsafe { ctx.adopt_buffer::<u32>(small, 1 << 20, Some(release)) }.unwrap_err();
        assert_eq!(refused.kind, ErrorKind::OutOfBounds, "{refused}");
        assert!(released.load(Ordering::SeqCst));
    }
}

/// Exported and imported again, a buffer is the same memory with the same
/// shape; dropping the import runs the export's deleter, which frees the
/// buffer (no allocation outlives the exchange).
pub fn dlpack_round_trips_without_a_copy(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let data: Vec<f32> = (0..600).map(|i| i as f32 * 0.5).collect();
    let buffer = stream.upload(&data).unwrap();
    let address = buffer.raw_memory().unwrap();
    let in_use = ctx.allocator_stats().device.bytes_in_use;
    let tensor = dlpack::export(buffer, &[20, 30], Some(Arc::new(ctx.stream().unwrap()))).unwrap();
    {
        // SAFETY: a tensor export just made, read before it is handed on.
        let t = unsafe { &tensor.as_ref().dl_tensor };
        assert_eq!((t.ndim, t.dtype), (2, <f32 as dlpack::Element>::DTYPE));
        assert_eq!(t.device, dlpack::dl_device(ctx.info().backend, ctx.info().ordinal));
    }
    let consumer = ctx.stream().unwrap();
    // SAFETY: ownership of the exported tensor passes to import.
    let imported = unsafe { dlpack::import::<f32, AnyDevice>(ctx, tensor, Some(&consumer)) }.unwrap();
    assert_eq!(imported.shape, vec![20, 30]);
    assert_eq!(imported.buffer.raw_memory().unwrap(), address, "the same memory, not a copy");
    assert_eq!(consumer.download(&imported.buffer).unwrap(), data);
    assert_eq!(ctx.allocator_stats().device.bytes_in_use, in_use, "the exported buffer lives while imported");
    drop(imported);
    consumer.synchronize().unwrap();
    let after = ctx.allocator_stats().device.bytes_in_use;
    assert!(after + 2400 <= in_use, "the deleter gives the buffer back: {in_use} bytes in use before, {after} after");
}

/// Guards against an import that synchronises the device or lets hetero
/// read before the producer is done: the import returns while the
/// producer's work is gated, and a read on another stream waits for it.
pub fn dlpack_import_waits_for_the_producer_on_the_device(ctx: &Context) {
    let producer = ctx.stream().unwrap();
    let mut buffer = ctx.alloc::<u32>(1024).unwrap();
    producer.fill(&mut buffer, 1u32).unwrap();
    producer.synchronize().unwrap();
    let gate = ctx.user_event().unwrap();
    producer.wait(&gate).unwrap();
    producer.fill(&mut buffer, 9u32).unwrap(); // the producer's work, held by the gate
    // The handshake (`__dlpack__(stream=handover)`): the export makes the
    // consumer's stream wait for the producer's work, without a host wait.
    let handover = Arc::new(ctx.stream().unwrap());
    let tensor = dlpack::export(buffer, &[1024], Some(Arc::clone(&handover))).unwrap();
    // SAFETY: ownership passes; the producer's work is ordered before `handover`.
    let imported = unsafe { dlpack::import::<u32, AnyDevice>(ctx, tensor, Some(&handover)) }.unwrap();
    let reader = ctx.stream().unwrap();
    let mut out = ctx.alloc_pinned::<u32>(1024).unwrap();
    reader.copy(&imported.buffer, &mut out).unwrap();
    assert!(!reader.query().unwrap(), "the read must wait for the gated producer");
    gate.complete().unwrap();
    reader.synchronize().unwrap();
    assert!(out.host_slice().unwrap().iter().all(|&v| v == 9));
}

/// A deleter that counts its calls, for tensors made by hand.
unsafe extern "C" fn count_deletion(tensor: *mut DLManagedTensorVersioned) {
    // SAFETY: the test's tensors carry a counter that outlives them as their context.
    let calls = unsafe { &*(*tensor).manager_ctx.cast::<std::sync::atomic::AtomicUsize>() };
    calls.fetch_add(1, Ordering::SeqCst);
}

/// What cannot be a hetero buffer is refused with a typed error, and the
/// producer's deleter runs once either way.
pub fn dlpack_refuses_what_it_cannot_represent(ctx: &Context) {
    let stream = ctx.stream().unwrap();
    let buffer = stream.upload(&[1u32; 64]).unwrap();
    stream.synchronize().unwrap();
    let (backend, ordinal) = (ctx.info().backend, ctx.info().ordinal);
    let data = match buffer.raw_memory().unwrap() {
        hetero::RawMemory::Address(a) => a as usize as *mut std::ffi::c_void,
        hetero::RawMemory::ClMem(m) => m,
    };
    // Every deletion happens before this function returns (refusals at
    // once, the import once dropped and reaped), so the counter can live here.
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let calls = &counter;
    let mut shape = [8i64, 8];
    let mut strides = [1i64, 8];
    let shape_ptr = shape.as_mut_ptr();
    let good = || DLManagedTensorVersioned {
        version: dlpack::DLPackVersion { major: 1, minor: 1 },
        manager_ctx: std::ptr::from_ref(calls).cast_mut().cast(),
        deleter: Some(count_deletion),
        flags: 0,
        dl_tensor: dlpack::DLTensor {
            data,
            device: dlpack::dl_device(backend, ordinal),
            ndim: 2,
            dtype: <u32 as dlpack::Element>::DTYPE,
            shape: shape_ptr,
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
    };
    let other_device = if backend == Backend::Cuda { dlpack::device_type::ROCM } else { dlpack::device_type::CUDA };
    let mut cases: Vec<(&str, DLManagedTensorVersioned, ErrorKind)> = vec![
        (
            "version 2",
            DLManagedTensorVersioned { version: dlpack::DLPackVersion { major: 2, minor: 0 }, ..good() },
            ErrorKind::Unsupported,
        ),
        (
            "read-only",
            DLManagedTensorVersioned { flags: dlpack::DLPACK_FLAG_BITMASK_READ_ONLY, ..good() },
            ErrorKind::Unsupported,
        ),
    ];
    let mut wrong_type = good();
    wrong_type.dl_tensor.dtype = <f32 as dlpack::Element>::DTYPE;
    cases.push(("wrong type", wrong_type, ErrorKind::Unsupported));
    let mut strided = good();
    strided.dl_tensor.strides = strides.as_mut_ptr();
    cases.push(("strided", strided, ErrorKind::Unsupported));
    let mut elsewhere = good();
    elsewhere.dl_tensor.device = dlpack::DLDevice { device_type: other_device, device_id: 0 };
    cases.push(("another device", elsewhere, ErrorKind::DeviceMismatch));
    for (k, (what, mut tensor, kind)) in cases.into_iter().enumerate() {
        // SAFETY: a valid tensor over `buffer`'s memory, which outlives it;
        // its deleter only counts.
        let refused = unsafe { dlpack::import::<u32, AnyDevice>(ctx, NonNull::from(&mut tensor), None) }.unwrap_err();
        assert_eq!(refused.kind, kind, "{what}: {refused}");
        assert_eq!(calls.load(Ordering::SeqCst), k + 1, "{what}: the deleter runs once on a refusal");
    }
    let mut tensor = good();
    // SAFETY: as above, accepted this time.
    let imported = unsafe { dlpack::import::<u32, AnyDevice>(ctx, NonNull::from(&mut tensor), None) }.unwrap();
    assert_eq!(stream.download(&imported.buffer).unwrap(), vec![1u32; 64]);
    let before = calls.load(Ordering::SeqCst);
    drop(imported);
    stream.synchronize().unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), before + 1, "dropping the import runs the deleter");
    let shape_mismatch = dlpack::export(buffer, &[7, 9], None).unwrap_err();
    assert_eq!(shape_mismatch.kind, ErrorKind::OutOfBounds, "{shape_mismatch}");
}

/// On two devices: a stream of one is refused by the other (OpenCL checks
/// the queue's device; CUDA its context; the host adopts no stream), and
/// so is memory where the driver can tell (CUDA: the address's device;
/// OpenCL: the `cl_mem`'s context, when the devices have one each).
pub fn a_stream_of_one_device_is_refused_by_the_other(a: &Context, b: &Context) {
    if a.info().ordinal == b.info().ordinal && a.info().name == b.info().name {
        println!("skipped: one device, twice: its streams are the other's");
        return;
    }
    let stream = a.stream().unwrap();
    let Ok(raw) = stream.raw() else { return };
    if a.info().backend == Backend::Hip {
        return; // HIP cannot tell a stream's device cheaply: the contract's business.
    }
    // SAFETY: a live stream; refused before it is used.
    let refused = unsafe { b.adopt_stream(raw) }.unwrap_err();
    assert_eq!(refused.kind, ErrorKind::DeviceMismatch, "{refused}");
    let one_context = a.peer_route(b).unwrap() == hetero::PeerRoute::Direct;
    if a.info().backend == Backend::Cuda || (a.info().backend == Backend::OpenCl && !one_context) {
        let (memory, release, released) = foreign_memory(a, 256);
        // SAFETY: live memory of `a`; refused before it is used.
        let refused = unsafe { b.adopt_buffer::<u32>(memory, 64, Some(release)) }.unwrap_err();
        assert_eq!(refused.kind, ErrorKind::DeviceMismatch, "{refused}");
        assert!(released.load(Ordering::SeqCst), "a refusal runs the release");
    }
}
