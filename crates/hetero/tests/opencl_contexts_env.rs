//! `HETERO_OPENCL_CONTEXT` chooses how OpenCL devices of one platform get
//! their contexts: one for them all (`shared`; a peer copy is one copy
//! within it, route `direct`), one each (`device`; hetero stages peer
//! copies through host memory, route `staged`), or `auto` (the default:
//! shared except on NVIDIA's platform); a value that is
//! not understood makes opening the devices fail with a message naming it.
//! One test per process: it sets the variable before any device is opened.
//! With one OpenCL device it checks the refusal only (CI also runs it with
//! `POCL_DEVICES="pthread pthread"`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly

mod opencl_env;

use hetero::{Backend, Context, Device, PeerRoute};

const ENV: &str = "HETERO_OPENCL_CONTEXT";

/// The route and result of a copy from the first device of a platform with
/// two or more to its second; `None` with no such platform.
fn copy_between_the_first_two() -> Option<PeerRoute> {
    let devices = hetero::backend_devices(Backend::OpenCl).unwrap();
    let mut contexts = devices.into_iter().map(Context::new);
    let (a, b) = (contexts.next()?, contexts.next()?);
    if a.info().platform != b.info().platform {
        return None;
    }
    let route = a.peer_route(&b).unwrap();
    let (on_a, on_b) = (a.stream().unwrap(), b.stream().unwrap());
    let x = on_a.upload(&(0..4099u32).collect::<Vec<_>>()).unwrap();
    let mut y = on_b.alloc::<u32>(4099).unwrap();
    assert_eq!(on_b.copy_peer(&x, &mut y).unwrap(), route, "the copy takes the route peer_route names");
    let mut back = on_a.alloc::<u32>(4099).unwrap();
    assert_eq!(on_a.copy_peer(&y, &mut back).unwrap(), route);
    assert_eq!(on_a.download(&back).unwrap(), (0..4099u32).collect::<Vec<_>>());
    Some(route)
}

#[test]
fn contexts_follow_the_environment() {
    if !opencl_env::refuses(ENV, "both", &["\"both\"", "`auto`"]) {
        return;
    }
    // SAFETY: this test binary has one test, and no other thread reads the
    // environment while it is set.
    unsafe { std::env::remove_var(ENV) };
    let platform =
        hetero::backend_devices(Backend::OpenCl).ok().and_then(|d| d.first().map(|d| d.info().platform.clone()));
    let nvidia = platform.is_some_and(|p| p.to_ascii_uppercase().contains("NVIDIA"));
    let auto = if nvidia { PeerRoute::Staged } else { PeerRoute::Direct };
    for (value, expect) in [("device", PeerRoute::Staged), ("shared", PeerRoute::Direct), ("auto", auto)] {
        // SAFETY: as above.
        unsafe { std::env::set_var(ENV, value) };
        match copy_between_the_first_two() {
            Some(route) => assert_eq!(route, expect, "{ENV}={value}"),
            None => println!("skipped with {ENV}={value}: no platform with two OpenCL devices"),
        }
    }
}
