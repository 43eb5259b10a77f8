//! The round trip on the host backend, with two host devices and with one
//! device to itself.

#![allow(clippy::unwrap_used)] // tests fail loudly

use hetero::backend::host::HostDevice;
use hetero::{AnyDevice, Context};

fn host(ordinal: usize) -> Context {
    Context::new(AnyDevice::Host(HostDevice::with_ordinal(ordinal)))
}

#[test]
fn two_host_devices_round_trip() {
    let (a, b) = (host(0), host(1));
    assert_eq!(multi_device::round_trip(&a, &b).unwrap(), hetero::PeerRoute::Direct);
    assert_eq!(multi_device::round_trip(&b, &a).unwrap(), hetero::PeerRoute::Direct);
}

#[test]
fn a_device_to_itself_round_trip() {
    let a = host(0);
    assert_eq!(multi_device::round_trip(&a, &a).unwrap(), hetero::PeerRoute::Direct);
}
