//! `HETERO_ALLOCATOR` values: understood or refused with a message, never a panic.

#![no_main]

use hetero::{AllocatorOptions, Backend};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|spec: &str| {
    if let Err(e) = AllocatorOptions::for_backend(Backend::Host).with_spec(Backend::Host, spec) {
        assert!(e.message.contains("HETERO_ALLOCATOR"), "{e}");
    }
});
