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
pub mod machine;
pub mod mem;
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
    let d = design::build(design, cfg, false).map_err(SimError::Setup)?;
    let mut sim = Simulator::new(cfg, d, trace.pm.clone(), VecSource::all(trace), trace.labels.clone(), false)?;
    sim.run()?;
    Ok(RunStats::collect(&sim))
}
