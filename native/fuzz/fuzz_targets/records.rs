//! Any bytes as one region of qlog records through the native scan, decoder and deriver; the
//! contract it must keep is `native/tests/contract/mod.rs` (shared with `cargo test`, which
//! runs it on every kept finding).
#![no_main]

#[path = "../../tests/contract/mod.rs"]
mod contract;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    contract::check(data);
});
