//! The private caches and the LLC keep narrow (`u32`) tags while every line fits and widen them
//! on the first line at or above 256 GiB (`mem/cache.rs`). Where a trace sits in the address
//! space must not matter: the same accesses 1 TiB higher, or with the PM lines exactly 256 GiB
//! above the DRAM lines (the same 32 low bits of the line index: a narrow tag would confuse
//! them), give the same statistics as below 256 GiB (set indices, MC interleaving and PM
//! membership unchanged), for caches small enough to evict and invalidate constantly.

use pmsim_engine::{simulate, Config};
use pmsim_trace::text::parse_str;
use std::fmt::Write;
use std::sync::Arc;

/// Two threads of loads, stores, write-backs and fences over 400 lines of DRAM at `dram` and
/// the same 400 lines of PM at `pm`, shared between the threads (forwards, invalidations).
fn trace(dram: u64, pm: u64) -> String {
    let mut s = format!("# pmsim trace v1\nthreads 2\npm {pm:#x} 0x100000\n");
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..6000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = x & 1;
        let line = (x >> 8) % 400;
        let addr = if (x >> 20) & 3 != 0 { pm + line * 64 } else { dram + line * 64 };
        match (x >> 40) % 10 {
            0..=3 => writeln!(s, "T{t} load {addr:#x} 8"),
            4..=7 => writeln!(s, "T{t} store {addr:#x} 8 {:x}", x >> 48),
            8 => writeln!(s, "T{t} clwb {addr:#x}"),
            _ => writeln!(s, "T{t} sfence"),
        }
        .unwrap();
    }
    s
}

#[test]
fn a_trace_above_256_gib_runs_as_it_does_below() {
    let mut cfg = Config::default();
    for (k, v) in
        [("l1.size_kib", "1"), ("l1.ways", "2"), ("l2.size_kib", "4"), ("l2.ways", "4"), ("llc.size_kib", "16")]
    {
        cfg.set(k, v).unwrap();
    }
    let (dram, pm) = (0x10_0000, 0x1_0000_0000);
    let low = Arc::new(parse_str("low.trace", &trace(dram, pm)).unwrap());
    let high = Arc::new(parse_str("high.trace", &trace(dram + (1 << 40), pm + (1 << 40))).unwrap());
    let alias = Arc::new(parse_str("alias.trace", &trace(dram, dram + (1 << 38))).unwrap());
    for design in ["baseline", "eadr", "asap-rp"] {
        let a = simulate(&low, &cfg, design).unwrap();
        let c = &a.caches;
        assert!(
            c.llc_misses > 500 && c.l1_hits > 500 && c.invalidations > 100,
            "{design}: the caches are exercised: {c:?}"
        );
        let a = serde_json::to_value(&a).unwrap();
        for (name, t) in [("1 TiB higher", &high), ("PM 256 GiB above DRAM", &alias)] {
            let b = serde_json::to_value(simulate(t, &cfg, design).unwrap()).unwrap();
            assert_eq!(a, b, "{design}: {name}");
        }
    }
}
