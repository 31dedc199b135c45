//! Property test: random small data-race-free traces (2–3 threads, lock-protected shared PM
//! words across two MCs, private words, ofences, dfences) under every correct design with random
//! small buffer sizes, crashed at every instant the persistent state changes: the run completes
//! (no deadlock) and no crash image violates the design's model. Failures print the seed-derived
//! trace, so a case replays from the proptest regression file.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::{Config, DESIGNS};
use pmsim_trace::{Event, Kind, TraceBuilder};
use proptest::prelude::*;
use std::sync::Arc;

const SHARED: [u64; 4] = [0x1_0000_0000, 0x1_0000_1000, 0x1_0000_0040, 0x1_0000_1048];
const LOCK: u64 = 0x2000;

#[derive(Clone, Debug)]
enum Step {
    /// A critical section: rmw the lock, stores/loads on shared words (ofence between when set),
    /// release.
    Critical {
        thread: usize,
        ops: Vec<(bool, usize)>,
        fenced: bool,
    },
    Private {
        thread: usize,
        slot: u64,
    },
    Ofence(usize),
    Dfence(usize),
}

fn step(threads: usize) -> impl Strategy<Value = Step> {
    prop_oneof![
        (0..threads, prop::collection::vec((any::<bool>(), 0..SHARED.len()), 1..4), any::<bool>())
            .prop_map(|(thread, ops, fenced)| Step::Critical { thread, ops, fenced }),
        (0..threads, 0u64..3).prop_map(|(thread, slot)| Step::Private { thread, slot }),
        (0..threads).prop_map(Step::Ofence),
        (0..threads).prop_map(Step::Dfence),
    ]
}

fn build(threads: usize, steps: &[Step]) -> pmsim_trace::Trace {
    let mut b = TraceBuilder::new(threads);
    let mut v = 1u64;
    for s in steps {
        match s {
            Step::Critical { thread, ops, fenced } => {
                b.store_u64(*thread, Kind::Rmw, LOCK, 8, 1);
                for (i, (is_store, w)) in ops.iter().enumerate() {
                    if i > 0 && *fenced {
                        b.push(*thread, Event::new(Kind::Ofence), None);
                    }
                    if *is_store {
                        v += 1;
                        b.store_u64(*thread, Kind::Store, SHARED[*w], 8, v);
                    } else {
                        b.push(*thread, Event::mem(Kind::Load, SHARED[*w], 8), None);
                    }
                }
                b.store_u64(*thread, Kind::Release, LOCK, 8, 0);
            }
            Step::Private { thread, slot } => {
                v += 1;
                b.store_u64(*thread, Kind::Store, 0x1_0001_0000 + (*thread as u64) * 0x1000 + slot * 8, 8, v);
            }
            Step::Ofence(t) => {
                b.push(*t, Event::new(Kind::Ofence), None);
            }
            Step::Dfence(t) => {
                b.push(*t, Event::new(Kind::Dfence), None);
            }
        }
    }
    b.finish()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn correct_designs_never_violate_their_model(
        threads in 2usize..4,
        steps in prop::collection::vec(step(3), 1..14),
        pb in 1usize..4, et in 1usize..4, rt in 1usize..4, wpq in 1usize..4,
        ack_after_read in any::<bool>(),
    ) {
        let steps: Vec<Step> = steps.into_iter().map(|s| match s {
            Step::Critical { thread, ops, fenced } => Step::Critical { thread: thread % threads, ops, fenced },
            Step::Private { thread, slot } => Step::Private { thread: thread % threads, slot },
            Step::Ofence(t) => Step::Ofence(t % threads),
            Step::Dfence(t) => Step::Dfence(t % threads),
        }).collect();
        let trace = Arc::new(build(threads, &steps));
        let mut cfg = Config::default();
        cfg.pb.entries = pb;
        cfg.et.entries = et;
        cfg.rt.entries = rt;
        cfg.mc.wpq_entries = wpq;
        cfg.rt.early_ack = if ack_after_read { "after_read" } else { "accept" }.into();
        for d in DESIGNS {
            let req = Request {
                trace: trace.clone(),
                design: d.name.to_string(),
                allow_broken: false,
                config: cfg.clone(),
                instants: Instants::Every,
                model: None,
                recovery: None,
                replay_input: "--trace case.trace".into(),
                max_failures: 1,
            };
            let r = run(&req);
            prop_assert!(r.is_ok(), "{} did not complete: {:?}\n{}", d.name, r.err(), text(&trace));
            let r = r.unwrap();
            prop_assert!(r.ok(), "{} violated {}: {}\n{}", d.name, r.model,
                r.failures[0].verdict.as_ref().map(|v| format!("{:?}", v.violations.first())).unwrap_or_default(), text(&trace));
        }
    }
}

fn text(t: &pmsim_trace::Trace) -> String {
    let mut out = Vec::new();
    pmsim_trace::text::write(&mut out, t).unwrap();
    String::from_utf8(out).unwrap()
}
