//! Every design on the banked NVM model (docs/design.md §9), where a write is persistent only when
//! its bank write completes and the MC's write queue is outside the persistence domain: the
//! litmus suite crashed at every instant, and random crashes of built-in workloads under
//! `delegated` and `broi` with their applications' recovery. Queues of one entry included.

use pmsim_crash::{run, Instants, Report, Request};
use pmsim_engine::{Config, DESIGNS};
use std::sync::Arc;

fn banked(tiny: bool) -> Config {
    let mut c = Config::default();
    c.pm.model = "banked".into();
    c.mc.count = 1;
    if tiny {
        c.bank.write_queue = 1;
        c.bank.read_queue = 1;
        c.broi.entry_slots = 1;
        c.broi.barrier_regs = 1;
        c.pb.entries = 1;
    }
    c
}

#[test]
fn litmus_suite_on_banked_memory_under_every_design() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/litmus");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for f in &files {
        let lit = pmsim_check::parse_litmus(f).unwrap();
        for d in DESIGNS {
            for cfg in [banked(false), banked(true)] {
                let req = Request {
                    trace: Arc::new(lit.trace.clone()),
                    design: d.name.to_string(),
                    allow_broken: false,
                    config: cfg,
                    instants: Instants::Every,
                    model: None,
                    recovery: None,
                    replay_input: format!("--trace {}", f.display()),
                    max_failures: 1,
                };
                let r = run(&req).unwrap_or_else(|e| panic!("{} under {}: {e}", f.display(), d.name));
                assert!(r.ok(), "{} under {}: {:?}", f.display(), d.name, r.failures.first());
            }
        }
    }
}

#[test]
fn workloads_on_banked_memory_survive_random_crashes() {
    for design in ["delegated", "broi", "asap-ep", "baseline"] {
        for w in ["array", "dash-eh", "cceh", "hash", "btree"] {
            let mut p = std::collections::BTreeMap::new();
            p.insert("ops".to_string(), "60".to_string());
            let Ok(g) = pmsim_workloads::generate(w, &p) else { continue };
            for cfg in [banked(false), banked(true)] {
                let req = Request {
                    trace: Arc::new(g.trace.clone()),
                    design: design.to_string(),
                    allow_broken: false,
                    config: cfg,
                    instants: Instants::Random { n: 150, seed: 3 },
                    model: None,
                    recovery: Some(&*g.recovery),
                    replay_input: format!("--workload {w} -p ops=60"),
                    max_failures: 1,
                };
                let r = run(&req).unwrap_or_else(|e| panic!("{w} under {design}: {e}"));
                assert!(r.ok(), "{w} under {design}: {}", describe(&r));
            }
        }
    }
}

#[test]
fn hybrid_remote_stream_through_the_remote_queue_survives_random_crashes() {
    for design in ["delegated", "broi"] {
        for w in ["hash", "sps"] {
            let mut p = std::collections::BTreeMap::new();
            for (k, v) in [("ops", "60"), ("threads", "2"), ("remote_gap", "200")] {
                p.insert(k.to_string(), v.to_string());
            }
            let g = pmsim_workloads::generate(w, &p).unwrap();
            let mut cfg = banked(false);
            cfg.core.count = 3;
            cfg.broi.remote_threads = 1;
            let req = Request {
                trace: Arc::new(g.trace.clone()),
                design: design.to_string(),
                allow_broken: false,
                config: cfg,
                instants: Instants::Random { n: 200, seed: 5 },
                model: None,
                recovery: Some(&*g.recovery),
                replay_input: format!("--workload {w} -p ops=60 -p threads=2 -p remote_gap=200"),
                max_failures: 1,
            };
            let r = run(&req).unwrap_or_else(|e| panic!("{w} under {design}: {e}"));
            assert!(r.ok(), "{w} hybrid under {design}: {}", describe(&r));
        }
    }
}

fn describe(r: &Report) -> String {
    match r.failures.first() {
        Some(f) => format!("{} images; first failure: {:?}", r.images, f),
        None => format!("{} images", r.images),
    }
}
