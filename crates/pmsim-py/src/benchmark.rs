//! `pmsim bench`: how fast the timing engine replays a workload, in trace events per host second.
//!
//! The trace is generated once, outside the timed region; each repeat builds a fresh simulator
//! and runs it to the end, and the best repeat counts. The machine this runs on is usually
//! shared, so besides wall-clock time the thread's own CPU time is measured (POSIX
//! `CLOCK_THREAD_CPUTIME_ID`): it is what the engine would need on an idle host core.
//! Decoding the binary trace format is timed on its own (an in-memory encode, then a decode
//! timed in CPU seconds) so the reader can be ruled in or out as a bottleneck. Nothing here feeds the stats:
//! timing never enters a deterministic output.

use pmsim_engine::{Config, RunStats, Simulator};
use pmsim_trace::{binary, VecSource};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// One design's benchmark result (JSON field names are documented in docs/performance.md).
#[derive(serde::Serialize)]
pub struct BenchResult {
    pub workload: String,
    pub design: String,
    /// Trace threads (= simulated cores that run; `simulated_cores` may be larger).
    pub threads: usize,
    pub simulated_cores: usize,
    pub repeat: usize,
    pub trace_events: u64,
    /// Engine events one run processes (the simulator's own work).
    pub engine_events: u64,
    /// Host seconds to generate the trace (once, not part of the timed runs).
    pub generation_s: f64,
    /// Best wall-clock seconds of one run.
    pub sim_s: f64,
    /// Best thread CPU seconds of one run (equals `sim_s` where the OS does not report it).
    pub sim_cpu_s: f64,
    /// Trace events per wall-clock second of the best run.
    pub events_per_s: f64,
    /// Trace events per CPU second of the best run (insensitive to other processes).
    pub events_per_cpu_s: f64,
    /// Binary-format decode alone: trace events per CPU second (best of the repeats).
    pub decode_events_per_s: f64,
    /// The process's peak resident set so far (Linux `VmHWM`), in bytes; 0 if unknown.
    pub peak_rss_bytes: u64,
}

/// This thread's CPU time in seconds, if the OS reports it.
fn thread_cpu_s() -> Option<f64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// CPU seconds since `c0` (wall seconds since `t0` where CPU time is unknown).
fn elapsed(c0: Option<f64>, t0: Instant) -> f64 {
    match (c0, thread_cpu_s()) {
        (Some(a), Some(b)) if b > a => b - a,
        _ => t0.elapsed().as_secs_f64(),
    }
}

fn peak_rss_bytes() -> u64 {
    let Ok(s) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// A generated trace, ready to be benchmarked under several designs.
pub struct Prepared {
    workload: String,
    trace: Arc<pmsim_trace::Trace>,
    generation_s: f64,
    decode_events_per_s: f64,
}

/// Generates the workload's trace once and times its binary decode (`repeat` times, best kept);
/// `go_on` as for [`run`].
pub fn prepare(
    workload: &str,
    params: &BTreeMap<String, String>,
    repeat: usize,
    go_on: &dyn Fn() -> bool,
) -> Result<Prepared, String> {
    let t0 = Instant::now();
    let g = pmsim_workloads::generate(workload, params).map_err(|e| e.to_string())?;
    let generation_s = t0.elapsed().as_secs_f64();
    let trace = Arc::new(g.trace);
    let bytes = binary::write(Vec::new(), &trace, false).map_err(|e| e.to_string())?;
    let mut best = f64::MAX;
    for _ in 0..repeat.max(1) {
        if !go_on() {
            return Err(pmsim_crash::INTERRUPTED.to_string());
        }
        let (c0, t0) = (thread_cpu_s(), Instant::now());
        let back = binary::read("bench", std::io::Cursor::new(&bytes)).map_err(|e| e.to_string())?;
        best = best.min(elapsed(c0, t0));
        std::hint::black_box(back);
    }
    let n = trace.num_events() as f64;
    Ok(Prepared { workload: workload.to_string(), trace, generation_s, decode_events_per_s: n / best.max(1e-9) })
}

/// Runs `design` on the prepared trace `repeat` times and keeps the best run. `go_on()` is asked
/// before each run (outside the timed part): false stops with `pmsim_crash::INTERRUPTED`, so
/// Ctrl-C ends a long benchmark at the next run rather than at the last.
pub fn run(
    p: &Prepared,
    design: &str,
    cfg: &Config,
    repeat: usize,
    go_on: &dyn Fn() -> bool,
) -> Result<BenchResult, String> {
    let mut best_wall = f64::MAX;
    let mut best_cpu = f64::MAX;
    let mut stats: Option<RunStats> = None;
    let mut cores = 0;
    for _ in 0..repeat.max(1) {
        if !go_on() {
            return Err(pmsim_crash::INTERRUPTED.to_string());
        }
        let cfg = &cfg.for_threads(p.trace.num_threads());
        let d = pmsim_engine::design::build(design, cfg, false)?;
        let mut sim =
            Simulator::new(cfg, d, p.trace.pm.clone(), VecSource::all(&p.trace), p.trace.labels.clone(), false)
                .map_err(|e| e.to_string())?;
        let (c0, t0) = (thread_cpu_s(), Instant::now());
        sim.run().map_err(|e| e.to_string())?;
        let wall = t0.elapsed().as_secs_f64();
        let cpu = elapsed(c0, t0);
        best_wall = best_wall.min(wall);
        best_cpu = best_cpu.min(cpu);
        cores = sim.m.cores.len();
        stats = Some(RunStats::collect(&sim));
    }
    let s = stats.ok_or("no run")?;
    let n = p.trace.num_events() as u64;
    Ok(BenchResult {
        workload: p.workload.clone(),
        design: design.to_string(),
        threads: s.threads,
        simulated_cores: cores,
        repeat: repeat.max(1),
        trace_events: n,
        engine_events: s.engine_events,
        generation_s: p.generation_s,
        sim_s: best_wall,
        sim_cpu_s: best_cpu,
        events_per_s: n as f64 / best_wall.max(1e-9),
        events_per_cpu_s: n as f64 / best_cpu.max(1e-9),
        decode_events_per_s: p.decode_events_per_s,
        peak_rss_bytes: peak_rss_bytes(),
    })
}
