//! What holds a core besides its own instructions: an eviction the design must hold (ASAP's and
//! HOPS's write-back buffer, ASAP's Bloom filter of NACKed lines), and the design structure that
//! refuses the store buffer's head while an atomic waits behind it. Each is checked to cost time
//! where the paper says it does (the core is charged a stall) and nothing where it does not.

use pmsim_engine::{simulate, Config, RunStats};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

fn workload(name: &str, ops: u64, design: &str, cfg: &Config) -> RunStats {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), ops.to_string());
    let g = pmsim_workloads::generate(name, &p).unwrap();
    simulate(&Arc::new(g.trace), cfg, design).unwrap()
}

/// Private caches of one line per set and a one-way LLC: lines written close together evict
/// each other while their writes are still queued in the persist buffer.
fn tiny_caches() -> Config {
    let mut c = Config::default();
    for (k, v) in [
        ("l1.size_kib", "1"),
        ("l1.ways", "1"),
        ("l2.size_kib", "1"),
        ("l2.ways", "1"),
        ("llc.size_kib", "16"),
        ("llc.ways", "1"),
    ] {
        c.set(k, v).unwrap();
    }
    c
}

#[test]
fn a_full_write_back_buffer_stalls_the_evicting_core() {
    for (design, wl) in [("asap-rp", "vacation"), ("hops-rp", "vacation"), ("hops-ep", "p-masstree")] {
        let mut one = tiny_caches();
        one.set("pb.wbb_entries", "1").unwrap();
        let mut big = tiny_caches();
        big.set("pb.wbb_entries", "4096").unwrap();
        let s1 = workload(wl, 100, design, &one);
        let sb = workload(wl, 100, design, &big);
        assert!(s1.stall_cycles["wbb_full"] > 0, "{design} {wl}: a 1-entry WBB never stalled");
        assert_eq!(sb.stall_cycles["wbb_full"], 0, "{design} {wl}: a WBB with room stalled");
        if let Some(&n) = s1.design_stats.get("wbb_overflows") {
            assert!(n > 0.0, "{design} {wl}: stalls without an overflow");
            assert_eq!(sb.design_stats["wbb_overflows"], 0.0);
            assert_eq!(s1.design_stats["wbb_max"], 1.0, "{design} {wl}: the WBB held more than its entries");
        }
    }
}

#[test]
fn an_llc_eviction_of_a_nacked_line_waits_for_its_retry() {
    // A 1-record recovery table NACKs often; a 1-counter Bloom filter holds every LLC eviction
    // while any NACKed line is pending (false positives), a large one only the NACKed lines.
    for wl in ["nstore", "dash-eh"] {
        let mut one = tiny_caches();
        one.set("rt.entries", "1").unwrap();
        one.set("rt.bloom_counters", "1").unwrap();
        let mut big = one.clone();
        big.set("rt.bloom_counters", "1048576").unwrap();
        let s1 = workload(wl, 100, "asap-ep", &one);
        let sb = workload(wl, 100, "asap-ep", &big);
        assert!(s1.design_stats["nacks"] > 0.0, "{wl}: no NACK, nothing to test");
        assert!(
            s1.design_stats["bloom_hits"] > sb.design_stats["bloom_hits"],
            "{wl}: a 1-counter filter should hold more evictions ({} vs {})",
            s1.design_stats["bloom_hits"],
            sb.design_stats["bloom_hits"]
        );
        assert!(
            s1.stall_cycles["nack"] > sb.stall_cycles["nack"],
            "{wl}: held evictions cost no stall ({} vs {})",
            s1.stall_cycles["nack"],
            sb.stall_cycles["nack"]
        );
    }
}

#[test]
fn no_eviction_is_held_without_a_nack() {
    // Without NACKs the Bloom filter is empty: its size changes nothing at all.
    let mut a = tiny_caches();
    a.set("rt.bloom_counters", "1").unwrap();
    let mut b = tiny_caches();
    b.set("rt.bloom_counters", "1048576").unwrap();
    let sa = workload("dash-eh", 100, "asap-rp", &a);
    let sb = workload("dash-eh", 100, "asap-rp", &b);
    assert_eq!(sa.design_stats["nacks"], 0.0);
    assert_eq!(sa.to_json(), sb.to_json());
}

#[test]
fn an_atomic_behind_a_refused_store_is_charged_to_the_refusing_structure() {
    // BBB keeps one copy of a line across persist buffers: a core whose store buffer head
    // writes a line another core's PB holds waits, and so does its rmw queued behind it.
    let s = workload("hotline", 200, "bbb", &Config::default());
    assert!(s.design_stats["pb_line_conflicts"] > 0.0);
    assert!(s.stall_cycles["pb_conflict"] > 0, "pb_conflict stalls hidden behind 'atomic'");
}

#[test]
fn an_acquire_and_a_store_to_the_lock_line_make_one_dependency() {
    // T1's acquire synchronises with T0's release (a dependency on T0's epoch); its store to
    // the lock's line is a conflict on that same epoch: already ordered, no second dependency
    // and no empty epoch split for it.
    let src = "# pmsim trace v1\nthreads 2\n\
               T0 store 0x100001000 8 1\nT0 release 0x100000000 8 1\nT0 store 0x100002000 8 2\n\
               T1 compute 40\nT1 acquire 0x100000000\nT1 store 0x100000008 8 3\nT1 store 0x100003000 8 3\n";
    let t = Arc::new(parse_str("lock.trace", src).unwrap());
    let s = simulate(&t, &Config::default(), "asap-rp").unwrap();
    assert_eq!(s.design_stats["cross_thread_deps"], 1.0);
    assert_eq!(s.design_stats["cdr_messages"], 1.0);
    assert_eq!(s.design_stats["epochs"], 2.0);
}

/// 20 `store; ofence` pairs alternating between two cached PM lines (one per MC), then `last`.
fn ofence_chain(last: &str) -> Arc<pmsim_trace::Trace> {
    let mut src = String::from("# pmsim trace v1\nthreads 1\nT0 load 0x100000000 8\nT0 load 0x100001000 8\n");
    for i in 0..20u64 {
        src += &format!("T0 store 0x10000{}000 8 {:x}\nT0 ofence\n", i % 2, i + 1);
    }
    src += last;
    Arc::new(parse_str("chain.trace", &src).unwrap())
}

fn stalls(t: &Arc<pmsim_trace::Trace>, set: &[(&str, &str)]) -> std::collections::BTreeMap<String, u64> {
    let mut cfg = Config::default();
    for (k, v) in set {
        cfg.set(k, v).unwrap();
    }
    let s = simulate(t, &cfg, "asap-ep").unwrap();
    s.stall_cycles.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn a_fence_behind_a_refused_store_is_charged_to_the_refusing_structure_until_it_admits() {
    // The same wait behind a full persist buffer or epoch table, whether a dfence or an
    // atomic queues behind it: the structure is charged while it refuses the buffer's head,
    // the dfence only for its own wait once the buffer has drained into the PB.
    let (fence, atomic) = (ofence_chain("T0 dfence\n"), ofence_chain("T0 rmw 0x100002000 8 1\n"));
    for (key, set) in [("pb_full", ("pb.entries", "1")), ("et_full", ("et.entries", "1"))] {
        let (f, a) = (stalls(&fence, &[set]), stalls(&atomic, &[set]));
        assert!(a[key] > 1000, "{key}: the refused head is the atomic's wait: {a:?}");
        assert!(f[key] * 10 >= a[key] * 9, "{key}: the dfence hides the structure's stall: {f:?} vs {a:?}");
        assert!(f["dfence"] < f[key], "{key}: {f:?}");
    }
    let f = stalls(&fence, &[("pb.entries", "1")]);
    assert!(f["dfence"] > 0, "once the PB admits the head, the dfence waits for itself: {f:?}");
}

#[test]
fn a_recovery_table_nack_takes_over_a_persist_buffer_stall() {
    // A tiny recovery table NACKs flushes; the core, already charged to the full persist
    // buffer, is then held by the NACK fallback.
    let t = ofence_chain("T0 rmw 0x100002000 8 1\n");
    let mut cfg = Config::default();
    cfg.set("rt.entries", "1").unwrap();
    cfg.set("pb.entries", "2").unwrap();
    let s = simulate(&t, &cfg, "asap-ep").unwrap();
    assert!(s.design_stats["nacks"] > 0.0);
    assert!(s.stall_cycles["nack"] > 0, "{:?}", s.stall_cycles);
}
