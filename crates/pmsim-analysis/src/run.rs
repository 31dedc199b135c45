//! Drivers: one pass over a trace (in memory or streamed from a binary file) feeding one
//! [`Analyzer`] per requested model.

use crate::analyzer::{Analyzer, Counts};
use crate::config::{AnalysisError, Config, Model};
use crate::report::Report;
use pmsim_trace::{for_each_in_global_order, Dialect, DialectScan, Event, GlobalOrderReader, Kind, Trace};

/// One pass's analyzers, over a trace whose dialect is known only at its end.
///
/// In a legacy x86 trace (flushes and x86 fences, no `ofence`/`dfence`/`strand`: docs/design.md
/// §3) an `sfence` or `mfence`, a `clflush` (x86 orders it with later stores), and a locked
/// instruction (`rmw`, `release`) after the thread's flushes, are the program's only persist
/// ordering, so they are persist barriers, as HOPS, ASAP, `delegated` and `broi` map them; in any other trace they order nothing. A streamed file's
/// dialect is known only at its end, so from the first x86 fence, clflush or locked instruction, while
/// no design-neutral event has been seen, a copy of the analyzers (identical so far: no fence has
/// acted yet) reads on with them as barriers; the first design-neutral event drops it. A
/// design-neutral trace pays nothing; an x86 trace pays a second analysis.
struct Pass {
    plain: Vec<Analyzer>,
    x86: Option<Vec<Analyzer>>,
    scan: DialectScan,
}

impl Pass {
    fn new(models: &[Model], cfg: &Config, pm: &[pmsim_trace::PmRange], threads: usize) -> Pass {
        let plain = models.iter().map(|&m| Analyzer::new(m, cfg, pm, threads)).collect();
        Pass { plain, x86: None, scan: DialectScan::default() }
    }

    #[inline]
    fn step(&mut self, t: usize, ev: &Event) {
        self.scan.see(ev.kind);
        match ev.kind {
            Kind::Sfence | Kind::Mfence | Kind::Rmw | Kind::Release | Kind::Clflush
                if self.x86.is_none() && !self.scan.has_neutral() =>
            {
                self.x86 = Some(self.plain.iter().map(Analyzer::with_x86_fences).collect());
            }
            Kind::Ofence | Kind::Dfence | Kind::Strand => self.x86 = None,
            _ => {}
        }
        for a in self.plain.iter_mut() {
            a.step(t, ev);
        }
        if let Some(x86) = &mut self.x86 {
            for a in x86.iter_mut() {
                a.step(t, ev);
            }
        }
    }

    fn counts(&self) -> Vec<(Model, Counts)> {
        let an = match (&self.x86, self.scan.dialect()) {
            (Some(x86), Dialect::X86) => x86,
            _ => &self.plain,
        };
        an.iter().map(|a| (a.model(), a.counts())).collect()
    }
}

/// Raw counts per model over an in-memory trace.
pub fn analyze_trace(trace: &Trace, models: &[Model], cfg: &Config) -> Result<Vec<(Model, Counts)>, AnalysisError> {
    cfg.validate()?;
    let mut pass = Pass::new(models, cfg, &trace.pm, trace.num_threads());
    if trace.recorded() {
        pass.scan.recorded_program();
    }
    for_each_in_global_order(trace, |t, ev| pass.step(t, ev));
    Ok(pass.counts())
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
    let mut pass = Pass::new(models, cfg, &pm, threads);
    r.for_each(|t, ev| pass.step(t, ev))?;
    // As for a text trace: a recorded program is x86 code even when only its locked
    // instructions after non-temporal stores order anything (META records may be anywhere in
    // the file, so they are read only when they could decide).
    if pass.scan.dialect() == Dialect::Neutral
        && !pass.scan.has_neutral()
        && pmsim_trace::meta::recorded(&pmsim_trace::meta::read_meta(path)?)
    {
        pass.scan.recorded_program();
    }
    Ok(pass.counts())
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
    let reports: Vec<Report> = counts.iter().map(|&(m, c)| Report::new(m, c, cfg, instr_ops_per_s)).collect();
    // Valid but extreme inputs (1e-300 ns) overflow the quotients, which JSON would show as null,
    // the value meaning "unbounded".
    let overflows = |v: Option<f64>| v.is_some_and(|v| !v.is_finite());
    if reports.iter().any(|r| overflows(r.persist_bound_ops_per_s) || overflows(r.normalized_rate)) {
        return Err(AnalysisError::Overflow(cfg.persist_ns, instr_ops_per_s));
    }
    Ok(reports)
}
