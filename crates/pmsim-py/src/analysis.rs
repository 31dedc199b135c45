//! `pmsim analyze`: the persist critical-path analysis (crate `pmsim-analysis`, docs/design.md §8)
//! of a trace file or built-in workload, normalised to the trace's instruction execution rate.
//!
//! The instruction rate, unless the caller gives one, is the same trace's operation rate on the
//! timing engine with persists free (design `eadr`, the configuration the caller gave): the seed
//! measured it by running the queues natively, with no persist cost.

use crate::runner::{self, Input};
use pmsim_analysis::{analyze_file, analyze_trace, summarize, Config as ACfg, Model, Report};
use pmsim_engine::{design, Config, RunStats, Simulator};
use pmsim_trace::VecSource;
use std::path::Path;
use std::sync::Arc;

/// What one `analyze` call asks.
pub struct Request {
    pub models: String,
    pub atomic_bytes: u64,
    pub track_bytes: u64,
    pub persist_ns: f64,
    pub instr_ops_per_s: Option<f64>,
}

/// Runs the analysis; returns one report per model.
pub fn analyze(input: &Input, req: &Request, cfg: &Config) -> Result<Vec<Report>, String> {
    let models = Model::parse_list(&req.models).map_err(|e| e.to_string())?;
    let acfg = ACfg {
        atomic_bytes: req.atomic_bytes,
        track_bytes: req.track_bytes,
        persist_ns: req.persist_ns,
        ..ACfg::default()
    };
    acfg.validate().map_err(|e| e.to_string())?;
    if let Some(r) = req.instr_ops_per_s {
        if !(r.is_finite() && r > 0.0) {
            return Err(format!("--instr-ops-per-s must be a positive number, got {r}"));
        }
    }
    let (counts, instr) = match input {
        // A pipe or device (/dev/stdin), read once: the analysis and the eadr run share the
        // in-memory copy.
        Input::Piped(path, t) => in_memory(t, &models, &acfg, req, cfg, path)?,
        Input::File(path) => {
            let p = Path::new(path);
            if !p.exists() {
                return Err(format!("{path}: no such file"));
            }
            let counts = analyze_file(p, &models, &acfg).map_err(|e| e.to_string())?;
            let instr = match req.instr_ops_per_s {
                Some(r) => Some(r),
                None if has_ops(&counts) => {
                    Some(instr_rate(&runner::run(input, "eadr", cfg, false, None).map_err(rate_run_failed)?, path)?)
                }
                None => None,
            };
            (counts, instr)
        }
        Input::Workload(name, params) => {
            let g = pmsim_workloads::generate(name, params).map_err(|e| e.to_string())?;
            in_memory(&Arc::new(g.trace), &models, &acfg, req, cfg, &format!("workload {name}"))?
        }
    };
    summarize(&counts, &acfg, instr).map_err(|e| e.to_string())
}

type Analysed = (Vec<(Model, pmsim_analysis::Counts)>, Option<f64>);

/// The analysis of a trace in memory, and its instruction rate (an eadr run of it when needed).
fn in_memory(
    t: &Arc<pmsim_trace::Trace>,
    models: &[Model],
    acfg: &ACfg,
    req: &Request,
    cfg: &Config,
    what: &str,
) -> Result<Analysed, String> {
    let counts = analyze_trace(t, models, acfg).map_err(|e| e.to_string())?;
    let instr = match req.instr_ops_per_s {
        Some(r) => Some(r),
        None if !has_ops(&counts) => None,
        None => {
            let run = || -> Result<RunStats, String> {
                let cfg = &cfg.for_threads(t.num_threads());
                let d = design::for_trace("eadr", cfg, false, t.dialect())?;
                let mut sim = Simulator::new(cfg, d, t.pm.clone(), VecSource::all(t), t.labels.clone(), false)
                    .map_err(|e| e.to_string())?;
                sim.run().map_err(|e| e.to_string())?;
                Ok(RunStats::collect(&sim))
            };
            Some(instr_rate(&run().map_err(rate_run_failed)?, what)?)
        }
    };
    Ok((counts, instr))
}

/// The analysis itself needs no timing engine; only the instruction rate does. A trace the
/// engine cannot run (e.g. more threads than it has cores) is still analysed with a given rate.
fn rate_run_failed(e: String) -> String {
    format!(
        "{e}; the instruction rate comes from an eadr run of the trace, which failed: give \
         --instr-ops-per-s to analyze it without the timing engine"
    )
}

/// A trace without `begin`/`end` pairs still has a critical path, but no rate per operation, so
/// no instruction rate is needed (nor an `eadr` run to measure it).
fn has_ops(counts: &[(Model, pmsim_analysis::Counts)]) -> bool {
    counts.iter().any(|(_, c)| c.ops > 0)
}

fn instr_rate(s: &RunStats, what: &str) -> Result<f64, String> {
    if s.ops_per_sec > 0.0 {
        // The exact quotient (the JSON's `ops_per_sec` is rounded), as the analysis' own rates.
        Ok(s.operations as f64 * 1e12 / s.roi_ps as f64)
    } else if s.operations > 0 {
        Err(format!(
            "{what}: the eadr run completed its {} operation(s) in {} ns, so the instruction rate is unknown \
             (give --instr-ops-per-s)",
            s.operations, s.sim_time_ns
        ))
    } else {
        Err(format!(
            "{what}: the eadr run completed no operations, so the instruction rate is unknown (give --instr-ops-per-s)"
        ))
    }
}
