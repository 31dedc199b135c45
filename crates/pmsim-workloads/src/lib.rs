//! Built-in workloads: real data structures run on a simulated persistent heap, emitting traces.
//!
//! Why generators instead of recorded traces: each workload *executes* its algorithm on a
//! simulated heap ([`Ctx`]), so every load returns the value the structure really holds, every
//! store writes a real value, and the fences, locks and CASes fall exactly where the published
//! algorithm puts them. Operations run one at a time in a seeded random thread interleaving; the
//! trace's global order is that interleaving. Threads communicate only through
//! `acquire`/`release`/`rmw`, so the values stay valid whatever order the engine replays racy
//! plain accesses in.
//!
//! Each workload also returns a [`Recovery`]: given an NVM image and which `dfence`s had completed,
//! it runs the structure's recovery and checks its invariants.

mod ctx;
pub mod params;
pub mod races;
mod recovery;
mod registry;

pub mod atlas;
pub mod blocks;
pub mod broi;
pub mod index;
pub mod micro;
pub mod persistency;
pub mod remote;
pub mod whisper;

pub use ctx::{line_pieces, Ctx, Gen, Heap, Interleaver, Rng, DRAM_BASE};
pub use params::{ParamSpec, Params, ParamsError};
pub use recovery::{
    apply_store, global_order_image, piece, DfenceDone, OpLog, OpRecord, PieceCache, PieceOut, PieceRun, Recovery,
    RecoveryError, RecoveryReport, Uncached,
};
pub use registry::{check_params, find, generate, list, names, Generated, Workload, WORKLOADS};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn final_image(t: &pmsim_trace::Trace) -> pmsim_trace::MemImage {
        crate::recovery::global_order_image(t, u64::MAX)
    }

    #[test]
    fn every_workload_recovers_from_its_final_image() {
        // Remote-persistence clients (`rdma-*`) write only through rdma_pwrite; their server's
        // images are checked by the region-order rule (pmsim-check, crash tests), not by recovery.
        for w in list().into_iter().filter(|w| !w.name().starts_with("rdma-")) {
            let mut p = BTreeMap::new();
            p.insert("ops".to_string(), "200".to_string());
            let g = generate(w.name(), &p).unwrap();
            let img = final_image(&g.trace);
            let rep = g.recovery.check(&img, &|_| true).unwrap_or_else(|e| panic!("{}: {e}", w.name()));
            assert!(rep.durable_ops_checked > 0, "{}: checked nothing", w.name());
        }
    }

    #[test]
    fn recovery_catches_a_lost_durable_write() {
        for name in ["bandwidth", "array"] {
            let mut p = BTreeMap::new();
            p.insert("ops".to_string(), "50".to_string());
            let g = generate(name, &p).unwrap();
            let mut img = final_image(&g.trace);
            // Forget the last PM word written: it was made durable by the final dfence.
            let last = img.sorted().into_iter().max_by_key(|(_, v)| v.id).unwrap();
            img.words.remove(&last.0);
            assert!(g.recovery.check(&img, &|_| true).is_err(), "{name}: lost write not caught");
        }
    }

    #[test]
    fn same_seed_same_trace_other_seed_other_trace() {
        let mut p = BTreeMap::new();
        p.insert("ops".to_string(), "100".to_string());
        let a = generate("array", &p).unwrap().trace;
        let b = generate("array", &p).unwrap().trace;
        assert_eq!(a, b);
        p.insert("seed".to_string(), "2".to_string());
        let c = generate("array", &p).unwrap().trace;
        assert_ne!(a, c);
    }

    #[test]
    fn bad_parameters_are_named() {
        let mut p = BTreeMap::new();
        p.insert("frob".to_string(), "1".to_string());
        let e = generate("array", &p).err().unwrap().to_string();
        assert!(e.contains("unknown parameter 'frob'") && e.contains("dfence_every"), "{e}");
        let e = generate("nope", &BTreeMap::new()).err().unwrap().to_string();
        assert!(e.contains("unknown workload") && e.contains("bandwidth"), "{e}");
        p.clear();
        p.insert("threads".to_string(), "x".to_string());
        let e = generate("array", &p).err().unwrap().to_string();
        assert!(e.contains("'threads' = 'x'"), "{e}");
    }
}
