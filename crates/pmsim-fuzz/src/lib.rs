//! Fuzz properties of every input pmsim reads: text and binary traces, TOML configurations,
//! `--set` overrides, workload parameters, and the checker on random valid traces.
//!
//! Why a library: the same functions are driven by `cargo fuzz` (coverage-guided, nightly,
//! `fuzz/fuzz_targets/`) and by a stable, seeded harness in the normal test suite
//! (`tests/harness.rs`), so CI runs every target on every change and a long local run
//! (`scripts/fuzz.sh`) explores further. Each function panics exactly when a property fails:
//! - no input makes pmsim panic or abort (errors are values);
//! - work per input is bounded (traces that are simulated are small, configurations that are
//!   built are small);
//! - every trace either reader accepts round-trips text ↔ binary to the identical trace, and
//!   the in-memory and streaming binary readers agree on what they accept;
//! - correct designs never violate their model on data-race-free traces.

mod checker;
mod config;
mod traces;
mod workloads;

pub use checker::checker;
pub use config::{set_overrides, toml_config};
pub use traces::{binary_trace, text_trace};
pub use workloads::workload_params;

/// The fuzz targets by name (the names of `fuzz/fuzz_targets/*.rs` and the corpus folders).
pub type Target = fn(&[u8]);

pub const TARGETS: &[(&str, Target)] = &[
    ("text_trace", text_trace),
    ("binary_trace", binary_trace),
    ("toml_config", toml_config),
    ("set_overrides", set_overrides),
    ("workload_params", workload_params),
    ("checker", checker),
];
