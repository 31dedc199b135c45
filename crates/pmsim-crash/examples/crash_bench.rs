//! Crash checking with the workload's recovery, without Python: `cargo run --profile ci -p
//! pmsim-crash --example crash_bench WORKLOAD DESIGN OPS random:N|every [--no-recovery]`. Prints
//! instants, recovery and piece runs, and instants per CPU second of the whole check (the
//! reference run included, trace generation excluded). For profiling the crash driver with
//! `perf`; `pmsim bench --crash` is the benchmark.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::Config;
use std::sync::Arc;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: &str| a.get(i).cloned().unwrap_or_else(|| d.to_string());
    let (w, design, ops, mode) = (arg(1, "dash-eh"), arg(2, "asap-rp"), arg(3, "2000"), arg(4, "random:2000"));
    let recovery = !a.iter().any(|x| x == "--no-recovery");
    let instants = match mode.strip_prefix("random:") {
        Some(n) => Instants::Random { n: n.parse().unwrap_or(2000), seed: 1 },
        None => Instants::Every,
    };
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), ops.clone());
    let g = match pmsim_workloads::generate(&w, &p) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("crash_bench: error: {e}");
            std::process::exit(2);
        }
    };
    let req = Request {
        trace: Arc::new(g.trace),
        design: design.clone(),
        allow_broken: true,
        config: Config::default(),
        instants,
        model: None,
        recovery: recovery.then_some(&*g.recovery),
        replay_input: format!("--workload {w} -p ops={ops}"),
        max_failures: 10,
    };
    let c0 = thread_cpu_s();
    let rep = match run(&req) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("crash_bench: error: {e}");
            std::process::exit(2);
        }
    };
    let cpu = thread_cpu_s() - c0;
    println!(
        "{w} {design} ops={ops} {mode}: {} instants, {} failing, {} recovery runs, {} piece runs; wall {:.3} s (setup {:.3}); CPU {cpu:.3} s = {:.0} instants/CPU-s",
        rep.images,
        rep.failures.len(),
        rep.recovery_runs,
        rep.piece_runs,
        rep.host_seconds,
        rep.setup_seconds,
        rep.images as f64 / cpu
    );
}

fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}
