//! The checker on random valid traces: small data-race-free traces built from the bytes (lock-
//! protected shared PM words on two MCs, private words, ofences, dfences), crashed at seeded
//! random instants under every correct design. Property: the run completes and no crash image
//! violates the design's own model.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::{Config, DESIGNS};
use pmsim_trace::{Event, Kind, Trace, TraceBuilder};
use std::sync::Arc;

const SHARED: [u64; 4] = [0x1_0000_0000, 0x1_0000_1000, 0x1_0000_0040, 0x1_0000_1048];
const LOCK: u64 = 0x2000;

/// Builds a trace from bytes: each byte is one step for thread `byte % threads`.
fn build(data: &[u8]) -> Option<(Trace, Config)> {
    let (&head, body) = data.split_first()?;
    let threads = 2 + (head % 2) as usize;
    let mut b = TraceBuilder::new(threads);
    let mut v = 1u64;
    let mut it = body.iter().take(24);
    while let Some(&x) = it.next() {
        let t = x as usize % threads;
        match (x >> 4) % 4 {
            0 => {
                b.store_u64(t, Kind::Rmw, LOCK, 8, 1);
                let ops = it.next().copied().unwrap_or(0);
                for i in 0..1 + (ops % 3) as usize {
                    let w = ((ops >> (2 + i)) as usize) % SHARED.len();
                    if ops & 0x80 != 0 && i > 0 {
                        b.push(t, Event::new(Kind::Ofence), None);
                    }
                    if (ops >> i) & 1 == 0 {
                        v += 1;
                        b.store_u64(t, Kind::Store, SHARED[w], 8, v);
                    } else {
                        b.push(t, Event::mem(Kind::Load, SHARED[w], 8), None);
                    }
                }
                b.store_u64(t, Kind::Release, LOCK, 8, 0);
            }
            1 => {
                v += 1;
                b.store_u64(t, Kind::Store, 0x1_0001_0000 + t as u64 * 0x1000 + (x as u64 % 3) * 8, 8, v);
            }
            2 => {
                b.push(t, Event::new(Kind::Ofence), None);
            }
            _ => {
                b.push(t, Event::new(Kind::Dfence), None);
            }
        }
    }
    let mut cfg = Config::default();
    cfg.pb.entries = 1 + (head >> 2) as usize % 3;
    cfg.et.entries = 1 + (head >> 4) as usize % 3;
    cfg.rt.entries = 1 + (head >> 6) as usize % 3;
    cfg.mc.wpq_entries = 1 + (head >> 1) as usize % 3;
    Some((b.finish(), cfg))
}

pub fn checker(data: &[u8]) {
    let Some((trace, cfg)) = build(data) else { return };
    let seed = data.iter().fold(7u64, |h, &b| h.wrapping_mul(31).wrapping_add(b as u64));
    pmsim_trace::validate::check_trace(&trace).expect("the builder makes valid traces");
    let trace = Arc::new(trace);
    for d in DESIGNS {
        let req = Request {
            trace: trace.clone(),
            design: d.name.to_string(),
            allow_broken: false,
            config: cfg.clone(),
            instants: Instants::Random { n: 8, seed },
            model: None,
            recovery: None,
            replay_input: "--trace fuzz.trace".into(),
            max_failures: 1,
        };
        let r = run(&req).unwrap_or_else(|e| panic!("{} did not complete: {e}", d.name));
        assert!(r.ok(), "{} violated {} on a data-race-free trace", d.name, r.model);
    }
}
