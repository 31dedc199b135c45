//! `cargo run --release -p pmsim-crash --example crashcheck WORKLOAD DESIGN [random N | every] [k=v ...]`
//! prints the crash report (used for development and benchmarks).

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::Config;
use std::sync::Arc;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let w = a.get(1).cloned().unwrap_or("array".into());
    let d = a.get(2).cloned().unwrap_or("asap-rp".into());
    let mode = a.get(3).cloned().unwrap_or("random".into());
    let mut rest = 4;
    let instants = if mode == "every" {
        Instants::Every
    } else {
        rest = 5;
        Instants::Random { n: a.get(4).and_then(|x| x.parse().ok()).unwrap_or(1000), seed: 1 }
    };
    let mut cfg = Config::default();
    let mut p = std::collections::BTreeMap::new();
    for kv in a.iter().skip(rest) {
        let (k, v) = kv.split_once('=').expect("k=v");
        if k.contains('.') {
            cfg.set(k, v).expect("config");
        } else {
            p.insert(k.to_string(), v.to_string());
        }
    }
    let g = pmsim_workloads::generate(&w, &p).expect("workload");
    let n = g.trace.num_events();
    let req = Request {
        trace: Arc::new(g.trace),
        design: d.clone(),
        allow_broken: d.starts_with("broken-"),
        config: cfg,
        instants,
        model: None,
        recovery: Some(&*g.recovery),
        replay_input: std::iter::once(format!("--workload {w}"))
            .chain(p.iter().map(|(k, v)| format!("-p {k}={v}")))
            .collect::<Vec<_>>()
            .join(" "),
        max_failures: 3,
    };
    match run(&req) {
        Ok(r) => {
            println!(
                "{w} {d}: {n} events, {} images, {} consistent, {} durable, {} recovered, {} failures, {:.2} s ({:.0} images/s)",
                r.images, r.consistent, r.durable, r.recovered, r.failures.len(), r.host_seconds, r.images as f64 / r.host_seconds
            );
            for f in r.failures.iter().take(2) {
                if let Some(v) = &f.verdict {
                    for x in v.violations.iter().take(1) {
                        println!("  {x}");
                    }
                }
                if let Some(e) = &f.recovery_error {
                    println!("  recovery: {e}");
                }
                println!("  replay: {}", f.replay);
            }
        }
        Err(e) => println!("{w} {d}: error {e}"),
    }
}
