//! Legacy x86 traces (clwb/clflush + sfence, as the tracer records them) under x86 persistency:
//! `baseline` running them unmapped satisfies it at every crash instant, so does every other
//! design (which maps sfence-after-flush to dfence), and the baseline whose sfence does not wait
//! for its flushes is caught. Hand-written, so this runs without clang.

use pmsim_check::Model;
use pmsim_crash::{Instants, Request};
use pmsim_engine::Config;
use std::fmt::Write;
use std::sync::Arc;

/// T0 persists a 1024-line arena (written oldest first, flushed newest first, so its oldest
/// lines are written back from L2 while the root's line is in L1), then publishes a root word
/// and releases a lock (the shape of `examples/pm_list.c`); T1 acquires
/// it and appends 20 nodes, each flushed and fenced before the root is updated and flushed.
fn legacy_trace() -> pmsim_trace::Trace {
    let mut s = String::from("# pmsim trace v1\nthreads 2\n");
    let arena = 0x1_0000_0000u64;
    let root = 0x1_0010_0000u64;
    let nodes = 0x1_0020_0000u64;
    writeln!(s, "T0 store {:#x} 8 0", root + 8).unwrap();
    for i in 0..1024u64 {
        writeln!(s, "T0 store {:#x} 8 {:x}", arena + 64 * i, i + 1).unwrap();
    }
    writeln!(s, "T0 load {root:#x} 8").unwrap(); // the root's line is hot again, the arena's oldest are not
    for i in (0..1024u64).rev() {
        writeln!(s, "T0 clwb {:#x}", arena + 64 * i).unwrap();
    }
    writeln!(s, "T0 sfence\nT0 store {root:#x} 8 1\nT0 clflushopt {root:#x}\nT0 mfence\nT0 release 0x2000").unwrap();
    writeln!(s, "T1 acquire 0x2000").unwrap();
    for j in 0..20u64 {
        let n = nodes + 64 * j;
        writeln!(s, "T1 store {n:#x} 8 {j:x}\nT1 store {:#x} 8 {j:x}\nT1 store {:#x} 8 {j:x}", n + 8, n + 16).unwrap();
        writeln!(s, "T1 clwb {n:#x}\nT1 sfence\nT1 store {root:#x} 8 {n:x}\nT1 clflush {root:#x}\nT1 sfence").unwrap();
    }
    pmsim_trace::text::parse_str("legacy", &s).unwrap()
}

fn crash(design: &str) -> pmsim_crash::Report {
    let req = Request {
        trace: Arc::new(legacy_trace()),
        design: design.to_string(),
        allow_broken: true,
        config: Config::default(),
        instants: Instants::Every,
        model: Some(Model::X86),
        recovery: None,
        replay_input: "--trace legacy".into(),
        max_failures: 1,
    };
    pmsim_crash::run(&req).unwrap()
}

#[test]
fn every_design_satisfies_x86_persistency_on_a_legacy_trace() {
    for d in ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp"] {
        let r = crash(d);
        assert!(r.images > 0, "{d}: no images");
        assert!(r.failures.is_empty(), "{d}: {:?}", r.failures.first());
    }
}

#[test]
fn baseline_whose_sfence_does_not_wait_is_caught_on_a_legacy_trace() {
    let r = crash("broken-baseline-no-sfence-stall");
    assert!(!r.failures.is_empty(), "not caught in {} images", r.images);
}
