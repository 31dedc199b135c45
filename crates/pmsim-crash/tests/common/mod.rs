use pmsim_crash::{run, Instants, Report, Request};
use pmsim_engine::Config;
use std::sync::Arc;

/// Crashes workload `w` (ops per thread) under `design` at `n` seeded random instants.
pub fn crash_workload(w: &str, ops: u64, design: &str, n: usize, max_failures: usize) -> Report {
    crash_workload_on(w, ops, design, n, max_failures, Config::default())
}

/// [`crash_workload`] on the machine `config`.
pub fn crash_workload_on(w: &str, ops: u64, design: &str, n: usize, max_failures: usize, config: Config) -> Report {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), ops.to_string());
    let g = pmsim_workloads::generate(w, &p).unwrap();
    let req = Request {
        trace: Arc::new(g.trace),
        design: design.to_string(),
        allow_broken: design.starts_with("broken-"),
        config,
        instants: Instants::Random { n, seed: 1 },
        model: None,
        recovery: Some(&*g.recovery),
        replay_input: format!("--workload {w} -p ops={ops}"),
        max_failures,
    };
    run(&req).unwrap_or_else(|e| panic!("{w} under {design}: {e}"))
}

pub fn describe(r: &Report) -> String {
    let mut s =
        format!("{} images, {} consistent, {} durable, {} recovered", r.images, r.consistent, r.durable, r.recovered);
    for f in r.failures.iter().take(2) {
        if let Some(v) = &f.verdict {
            if let Some(x) = v.violations.first() {
                s.push_str(&format!("\n  {x}"));
            }
        }
        if let Some(e) = &f.recovery_error {
            s.push_str(&format!("\n  {e}"));
        }
        if let Some(e) = &f.region_error {
            s.push_str(&format!("\n  {e}"));
        }
        s.push_str(&format!("\n  replay: {}", f.replay));
    }
    s
}
