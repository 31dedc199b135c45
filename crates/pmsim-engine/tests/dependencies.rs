//! Cross-thread dependencies of HOPS, ASAP, delegated and BROI wait for the source's epoch that made the
//! conflicting access (or the release), and only while it is uncommitted (`et.dep_epoch =
//! "writer"`, design.md §5); `"current"` waits for whatever the source's current epoch holds.
//! Timing is arranged with `compute` so the reader comes long after the writer's `dfence`.

use pmsim_engine::{simulate, Config};
use pmsim_trace::text::parse_str;
use pmsim_trace::Trace;
use std::sync::Arc;

fn deps(src: &str, design: &str, dep_epoch: &str) -> f64 {
    deps_of(&Arc::new(parse_str("test.trace", src).unwrap()), design, dep_epoch)
}

fn deps_of(t: &Arc<Trace>, design: &str, dep_epoch: &str) -> f64 {
    let mut c = Config::default();
    c.set("et.dep_epoch", dep_epoch).unwrap();
    simulate(t, &c, design).unwrap().design_stats["cross_thread_deps"]
}

/// T1 reads X long after T0's dfence made X durable, while T0's open epoch holds a later store.
const READ_AFTER_DURABLE: &str = "# pmsim trace v1\nthreads 2\n\
    T0 store 0x100000000 8 1\nT0 dfence\nT0 store 0x100000040 8 2\nT0 compute 40000\nT0 dfence\n\
    T1 compute 20000\nT1 load 0x100000000 8\nT1 store 0x100001000 8 3\nT1 dfence\n";

/// T1 reads X as soon as T0 has written it (handed over by a lock), while X is in flight.
const READ_IN_FLIGHT: &str = "# pmsim trace v1\nthreads 2\n\
    T0 store 0x100000000 8 1\nT0 release 0x1000\nT0 compute 40000\nT0 dfence\n\
    T1 acquire 0x1000\nT1 load 0x100000000 8\nT1 store 0x100001000 8 3\nT1 dfence\n";

/// T1 acquires a (volatile) lock T0 released before a dfence; T0 has stored since.
const ACQUIRE_AFTER_DURABLE: &str = "# pmsim trace v1\nthreads 2\n\
    T0 store 0x100000000 8 1\nT0 release 0x1000\nT0 dfence\nT0 store 0x100000040 8 2\n\
    T0 compute 40000\nT0 dfence\n\
    T1 compute 20000\nT1 acquire 0x1000\nT1 store 0x100001000 8 3\nT1 dfence\n";

/// T1 acquires the lock while the epoch T0 closed at the release is still in flight.
const ACQUIRE_IN_FLIGHT: &str = "# pmsim trace v1\nthreads 2\n\
    T0 store 0x100000000 8 1\nT0 release 0x1000\nT0 store 0x100000040 8 2\nT0 compute 40000\nT0 dfence\n\
    T1 acquire 0x1000\nT1 store 0x100001000 8 3\nT1 dfence\n";

#[test]
fn a_conflict_with_a_durable_write_orders_nothing() {
    for d in ["hops-ep", "asap-ep", "delegated", "broi"] {
        assert_eq!(deps(READ_AFTER_DURABLE, d, "writer"), 0.0, "{d}");
        // On T0's first epoch (through the lock word, which it also wrote).
        assert!(deps(READ_IN_FLIGHT, d, "writer") >= 1.0, "{d}");
    }
}

#[test]
fn an_acquire_of_a_durable_release_orders_nothing() {
    for d in ["hops-rp", "asap-rp"] {
        assert_eq!(deps(ACQUIRE_AFTER_DURABLE, d, "writer"), 0.0, "{d}");
        assert!(deps(ACQUIRE_IN_FLIGHT, d, "writer") >= 1.0, "{d}");
    }
}

#[test]
fn waiting_for_the_current_epoch_orders_more_on_a_lock_based_table() {
    // Dash-EH's bucket locks and shared directory: the paper's rule also waits for epochs that
    // hold nothing the dependent read, or that have long persisted.
    let p = [("threads", "4"), ("ops", "100")].map(|(k, v)| (k.to_string(), v.to_string()));
    let t = Arc::new(pmsim_workloads::generate("dash-eh", &p.into_iter().collect()).unwrap().trace);
    for d in ["hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
        let (writer, current) = (deps_of(&t, d, "writer"), deps_of(&t, d, "current"));
        assert!(writer > 0.0 && current > 2.0 * writer, "{d}: writer {writer}, current {current}");
    }
}
