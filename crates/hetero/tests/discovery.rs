//! Device discovery.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

use hetero::{Backend, ErrorKind};

/// Regression: concurrent first calls into the OpenCL ICD loader listed no
/// platform or crashed (SIGSEGV on PoCL); discovery must give every thread
/// the same answer.
#[test]
fn concurrent_discovery_agrees() {
    for backend in hetero::compiled_backends() {
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    let found = hetero::discover(backend);
                    (found.devices.len(), found.unavailable.len())
                })
            })
            .collect();
        let answers: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{backend}: {answers:?}");
    }
}

#[test]
fn host_is_always_found() {
    let found = hetero::devices();
    assert!(found.devices.iter().any(|d| hetero::Device::info(d).backend == Backend::Host));
}

#[test]
fn a_backend_not_compiled_in_is_unavailable_with_its_feature_named() {
    for backend in Backend::ALL.into_iter().filter(|&b| !hetero::is_compiled(b)) {
        let err = hetero::backend_devices(backend).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Unavailable);
        assert!(err.to_string().contains(&format!("feature `{backend}`")), "{err}");
    }
}

/// Objects of two backends never mix: using an OpenCL buffer or event with
/// a host stream is a `DeviceMismatch`, not undefined behaviour.
#[test]
fn objects_of_two_backends_do_not_mix() {
    let Some(host) = hetero::testing::context_or_skip(Backend::Host).unwrap() else { return };
    let Some(other) = hetero::testing::context_or_skip(Backend::OpenCl).unwrap() else { return };
    let stream = host.stream().unwrap();
    let foreign = other.alloc_pinned::<f32>(8).unwrap();
    let mut local = host.alloc::<f32>(8).unwrap();
    assert_eq!(stream.copy(&foreign, &mut local).unwrap_err().kind, ErrorKind::DeviceMismatch);
    let event = other.event().unwrap();
    let err = stream.record(&event).unwrap_err();
    assert_eq!(err.kind, ErrorKind::DeviceMismatch);
    assert!(err.message.contains("host") && err.message.contains("opencl"), "{err}");
}

/// `best_device` takes the first usable backend in the documented order:
/// the host here unless a GPU or OpenCL backend finds a device first.
#[test]
fn the_best_device_follows_the_preference_order() {
    let device = hetero::best_device().unwrap();
    let chosen = hetero::Device::info(&device).backend;
    let first_usable = hetero::PREFERENCE
        .into_iter()
        .filter(|&b| hetero::is_compiled(b))
        .find(|&b| !hetero::discover(b).devices.is_empty())
        .unwrap();
    assert_eq!(chosen, first_usable);
}
