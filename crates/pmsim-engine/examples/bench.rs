//! Simulated trace events per host second: `cargo run --release -p pmsim-engine --example bench
//! [workload] [design] [threads] [ops] [section.field=value ...]`, e.g. `... array baseline 4
//! 50000 pm.model=banked` for the banked NVM model. (The user-facing command is `pmsim bench`.)

use pmsim_engine::{simulate, Config};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let workload = args.get(1).map(String::as_str).unwrap_or("array");
    let design = args.get(2).map(String::as_str).unwrap_or("baseline");
    let threads = args.get(3).map(String::as_str).unwrap_or("4");
    let ops = args.get(4).map(String::as_str).unwrap_or("50000");
    let mut p = std::collections::BTreeMap::new();
    p.insert("threads".to_string(), threads.to_string());
    p.insert("ops".to_string(), ops.to_string());
    let g = match pmsim_workloads::generate(workload, &p) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    };
    let mut cfg = Config::default();
    for kv in args.iter().skip(5) {
        let applied = kv.split_once('=').ok_or_else(|| format!("'{kv}' is not section.field=value"));
        if let Err(e) = applied.and_then(|(k, v)| cfg.set(k, v).map_err(|e| e.to_string())) {
            eprintln!("bench: {e}");
            std::process::exit(2);
        }
    }
    let t = Arc::new(g.trace);
    let n = t.num_events();
    let mut best = f64::MAX;
    let mut best_cpu = f64::MAX;
    let repeat: usize = std::env::var("PMSIM_BENCH_REPEAT").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let mut engine_events = 0;
    for _ in 0..repeat {
        let t0 = std::time::Instant::now();
        let c0 = thread_cpu_s();
        let s = match simulate(&t, &cfg, design) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("bench: {e}");
                std::process::exit(1);
            }
        };
        best = best.min(t0.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(thread_cpu_s() - c0);
        engine_events = s.engine_events;
        std::hint::black_box(s);
    }
    println!(
        "{workload} {design} threads={threads} ops={ops} pm.model={}: {n} events ({engine_events} engine events) in {best:.3} s = {:.0} events/s; CPU {best_cpu:.3} s = {:.0} events/CPU-s",
        cfg.pm.model,
        n as f64 / best,
        n as f64 / best_cpu
    );
}

/// This thread's CPU time (Linux schedstat; 0 elsewhere).
fn thread_cpu_s() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()))
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}
