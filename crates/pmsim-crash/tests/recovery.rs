//! Every built-in workload's recovery succeeds on every crash image of a correct design: 300
//! seeded random crashes at ops=60 under `eadr` (every performed store survives, so a failure is a
//! workload or recovery bug, e.g. a data race in the generator or a recovery that assumes the
//! trace's global order) and under `asap-rp` (release persistency: only ordering the trace's
//! synchronisation expresses survives). Both the independent checker and the recovery must pass.

mod common;
use common::{crash_workload, describe};
use pmsim_crash::{run, Instants, Request};
use pmsim_engine::Config;
use std::sync::Arc;

const CRASHES: usize = 300;
const OPS: u64 = 60;

fn check(design: &str) {
    let mut bad = Vec::new();
    for w in pmsim_workloads::names() {
        let r = crash_workload(w, OPS, design, CRASHES, 3);
        // Both the checker and the workload's recovery count: any failure fails the test.
        if !r.ok() || r.images as usize != CRASHES {
            bad.push(format!("{w} under {design}: {}", describe(&r)));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_workload_recovers_from_eadr_crashes() {
    check("eadr");
}

#[test]
fn every_workload_recovers_from_asap_rp_crashes() {
    check("asap-rp");
}

/// Index splits are where recovery is subtle (a half-written copy of a segment, bits cleared in
/// the old one): small segments make dash-eh split many times in a short trace, and every
/// instant at which the persistent state changes is checked under a design that lets one
/// epoch's stores persist in any order.
#[test]
fn dash_eh_splits_recover_at_every_instant() {
    let mut p = std::collections::BTreeMap::new();
    for (k, v) in [("ops", "80"), ("buckets", "4"), ("initial_depth", "0")] {
        p.insert(k.to_string(), v.to_string());
    }
    let g = pmsim_workloads::generate("dash-eh", &p).unwrap();
    // Each split stores Dash's "splitting" state (-2) into the old segment's header.
    let splitting = (-2i64) as u64;
    let splits = g
        .trace
        .threads
        .iter()
        .flat_map(|t| &t.events)
        .filter(|e| e.kind == pmsim_trace::Kind::Store && e.size == 8 && e.has_value && e.data == splitting)
        .count();
    assert!(splits >= 4, "only {splits} splits");
    for design in ["asap-ep", "eadr"] {
        let req = Request {
            trace: Arc::new(g.trace.clone()),
            design: design.to_string(),
            allow_broken: false,
            config: Config::default(),
            instants: Instants::Every,
            model: None,
            recovery: Some(&*g.recovery),
            replay_input: "--workload dash-eh -p ops=80 -p buckets=4 -p initial_depth=0".into(),
            max_failures: 1,
        };
        let r = run(&req).unwrap();
        assert!(r.images > 1000, "{design}: {} images", r.images);
        assert!(
            r.ok(),
            "{design}: {:?} / {:?} at {}",
            r.failures[0].verdict.as_ref().and_then(|v| v.violations.first().map(|x| x.to_string())),
            r.failures[0].recovery_error,
            r.failures[0].replay
        );
    }
}
