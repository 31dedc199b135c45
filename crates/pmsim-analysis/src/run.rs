//! Drivers: one pass over a trace (in memory or streamed from a binary file) feeding one
//! [`Analyzer`] per requested model.

use crate::analyzer::{Analyzer, Counts};
use crate::config::{AnalysisError, Config, Model};
use crate::report::Report;
use pmsim_trace::{for_each_in_global_order, GlobalOrderReader, Trace};

/// Raw counts per model over an in-memory trace.
pub fn analyze_trace(trace: &Trace, models: &[Model], cfg: &Config) -> Result<Vec<(Model, Counts)>, AnalysisError> {
    cfg.validate()?;
    let mut an: Vec<Analyzer> = models.iter().map(|&m| Analyzer::new(m, cfg, &trace.pm, trace.num_threads())).collect();
    for_each_in_global_order(trace, |t, ev| {
        for a in an.iter_mut() {
            a.step(t, ev);
        }
    });
    Ok(an.iter().map(|a| (a.model(), a.counts())).collect())
}

/// Raw counts per model over a trace file: binary traces are streamed in global order (never
/// held in memory); text traces are read first (the text format is for small traces).
pub fn analyze_file(
    path: &std::path::Path,
    models: &[Model],
    cfg: &Config,
) -> Result<Vec<(Model, Counts)>, AnalysisError> {
    cfg.validate()?;
    if !pmsim_trace::binary::is_binary(path) {
        let t = pmsim_trace::text::read_path(path)?;
        return analyze_trace(&t, models, cfg);
    }
    let mut r = GlobalOrderReader::open(path)?;
    let pm = r.header().pm.clone();
    let threads = r.header().threads;
    let mut an: Vec<Analyzer> = models.iter().map(|&m| Analyzer::new(m, cfg, &pm, threads)).collect();
    if let [a] = an.as_mut_slice() {
        r.for_each(|t, ev| a.step(t, ev))?;
    } else {
        r.for_each(|t, ev| {
            for a in an.iter_mut() {
                a.step(t, ev);
            }
        })?;
    }
    Ok(an.iter().map(|a| (a.model(), a.counts())).collect())
}

/// Reports from counts. A trace without operations still has a critical path; its rates per
/// operation are `None`.
pub fn summarize(
    counts: &[(Model, Counts)],
    cfg: &Config,
    instr_ops_per_s: Option<f64>,
) -> Result<Vec<Report>, AnalysisError> {
    if let Some(r) = instr_ops_per_s {
        if !(r.is_finite() && r > 0.0) {
            return Err(AnalysisError::InstrRate(r));
        }
    }
    counts.iter().map(|&(m, c)| Ok(Report::new(m, c, cfg, instr_ops_per_s))).collect()
}
