#![no_main]
//! cargo-fuzz target `checker`: the property `pmsim_fuzz::checker` (see crates/pmsim-fuzz).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmsim_fuzz::checker(data));
