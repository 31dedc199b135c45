//! pmsim's timing engine: cores, caches, coherence, memory controllers and NVM, with the
//! persistence design as a run-time choice.
//!
//! Layout follows the hardware and the data flow: [`config`] (parameters) → [`machine`] (state
//! and event queue) and [`mem`] (caches, directory, MCs, NVM) → [`sim`] (the timing loop that
//! replays traces) → [`design`] (one module per persist path, behind one trait) → [`crash`]
//! (crash images) → [`stats`] (JSON).

pub mod config;
pub mod crash;
pub mod design;
pub mod limits;
pub mod machine;
pub mod mem;
pub mod net;
pub mod sim;
pub mod stats;

pub use config::Config;
pub use design::{Design, Promise, DESIGNS};
pub use sim::{SimError, Simulator};
pub use stats::RunStats;

use pmsim_trace::{Trace, VecSource};
use std::sync::Arc;

/// Simulates an in-memory trace under `design` and returns its statistics.
pub fn simulate(trace: &Arc<Trace>, cfg: &Config, design: &str) -> Result<RunStats, SimError> {
    let mut sim = simulator(trace, cfg, design, false, false)?;
    sim.run()?;
    Ok(RunStats::collect(&sim))
}

/// A simulator for an in-memory trace; `record` keeps word data and the run record (crash
/// checking, recovery), `allow_broken` admits the test-only broken design variants.
pub fn simulator(
    trace: &Arc<Trace>,
    cfg: &Config,
    design: &str,
    record: bool,
    allow_broken: bool,
) -> Result<Simulator, SimError> {
    let cfg = &cfg.for_threads(trace.num_threads());
    let d = design::for_trace(design, cfg, allow_broken, trace.dialect()).map_err(SimError::Setup)?;
    Simulator::new(cfg, d, trace.pm.clone(), VecSource::all(trace), trace.labels.clone(), record)
}
