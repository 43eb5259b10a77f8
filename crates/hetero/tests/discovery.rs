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
