#![no_main]
//! cargo-fuzz target `toml_config`: the property `pmsim_fuzz::toml_config` (see crates/pmsim-fuzz).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmsim_fuzz::toml_config(data));
