#![no_main]
//! cargo-fuzz target `workload_params`: the property `pmsim_fuzz::workload_params` (see crates/pmsim-fuzz).
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| pmsim_fuzz::workload_params(data));
