//! `--device` values of `conform` and the bench: a selection or a message, never a panic.

#![no_main]

use std::str::FromStr;

use hetero::{DeviceList, DeviceSelector};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = DeviceSelector::from_str(text);
    let _ = DeviceList::from_str(text);
});
