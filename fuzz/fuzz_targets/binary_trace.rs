#![no_main]
//! cargo-fuzz target `binary_trace`: the property `pmsim_fuzz::binary_trace` (see crates/pmsim-fuzz).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmsim_fuzz::binary_trace(data));
