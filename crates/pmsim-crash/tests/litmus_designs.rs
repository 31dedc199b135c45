//! The litmus suite under every design, crashing at every instant the persistent state changes:
//! no design may produce an image its promised model forbids.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::{Config, DESIGNS};
use std::sync::Arc;

#[test]
fn every_litmus_trace_under_every_design_exhaustively() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/litmus");
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    assert!(files.len() >= 20, "litmus suite has {} files", files.len());
    let mut images = 0;
    for f in &files {
        let lit = pmsim_check::parse_litmus(f).unwrap();
        for d in DESIGNS {
            for cfg in [Config::default(), tiny()] {
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
                images += r.images;
            }
        }
    }
    assert!(images > 1000, "only {images} crash images");
}

/// Buffers of one entry: the corner where NACKs and stalls happen.
fn tiny() -> Config {
    let mut c = Config::default();
    c.pb.entries = 1;
    c.et.entries = 1;
    c.rt.entries = 1;
    c.mc.wpq_entries = 1;
    c
}
