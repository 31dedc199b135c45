#![no_main]
//! cargo-fuzz target `set_overrides`: the property `pmsim_fuzz::set_overrides` (see crates/pmsim-fuzz).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmsim_fuzz::set_overrides(data));
