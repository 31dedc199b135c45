#![no_main]
//! cargo-fuzz target `text_trace`: the property `pmsim_fuzz::text_trace` (see crates/pmsim-fuzz).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmsim_fuzz::text_trace(data));
