//! Simulated time is u64 picoseconds; a run that would pass `MAX_SIM_PS` stops with a clear
//! error instead of wrapping around (which once reported a huge compute as ~20 µs or "stuck").

use pmsim_engine::{simulate, Config, SimError};
use std::sync::Arc;

fn run(text: &str) -> Result<pmsim_engine::RunStats, SimError> {
    let t = Arc::new(pmsim_trace::text::parse_str("t.trace", text).unwrap());
    simulate(&t, &Config::default(), "baseline")
}

#[test]
fn huge_compute_count_is_a_time_overflow_not_a_wrap() {
    for threads in [
        "threads 1\nT0 compute 18446744073709551615\n",
        "threads 2\nT0 compute 18446744073709551615\nT1 store 0x100000000 8 1\n",
    ] {
        let e = run(&format!("# pmsim trace v1\n{threads}")).unwrap_err();
        assert!(matches!(e, SimError::TimeOverflow { .. }), "{e}");
        assert!(e.to_string().contains("213 days"), "{e}");
    }
}

#[test]
fn long_but_representable_compute_runs() {
    // 10^12 instructions at 2 GHz x 2 IPC = 250 simulated seconds: far from the limit.
    let s = run("# pmsim trace v1\nthreads 1\nT0 compute 1000000000000\n").unwrap();
    assert!(s.sim_time_ns > 2.4e11, "{}", s.sim_time_ns);
}

/// Every latency may be set to its largest valid value (1 s, or 10^9 cycles) and every bandwidth
/// to its smallest:
/// a run then goes seconds without a core making progress, which the watchdog must not take
/// for a stuck machine (it once did, at its fixed 1 s). Each parameter alone, under every design,
/// on a small index workload (ofences, dfences, locks, two MCs) and an RDMA trace whose region
/// the server persists line by line (1024 lines of 1 s each: longer than any fixed watchdog).
#[test]
fn the_slowest_valid_machine_is_slow_not_stuck() {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), "6".to_string());
    p.insert("threads".to_string(), "2".to_string());
    let local = Arc::new(pmsim_workloads::generate("dash-eh", &p).unwrap().trace);
    let remote = Arc::new(
        pmsim_trace::text::parse_str(
            "r.trace",
            "# pmsim trace v1\nthreads 2\nT0 rdma_pwrite 0 0x100000000 65536\nT0 rdma_wait\n\
             T1 store 0x100000040 8 1\nT1 dfence\n",
        )
        .unwrap(),
    );
    let mut slowest = Vec::new();
    for p in pmsim_engine::config::PARAMS {
        let v = match p.unit {
            "ns" => "1e9",
            "GB/s" => "0.001",
            "Gb/s" => "0.001",
            // HOPS's polling period and register latency: 10^9 cycles is 100 s at 0.01 GHz
            // (the watchdog once counted only the ns parameters, tester Y's Y1).
            "cycles" => "1000000000",
            _ => continue,
        };
        slowest.push((p.name, v));
    }
    assert!(slowest.len() >= 20, "{slowest:?}");
    for (name, v) in slowest {
        let mut cfg = Config::default();
        // The slowest clock too: the buffered designs' flush engines tick every cycle while they
        // wait, and a second of waiting is then 10^7 ticks instead of 2 x 10^9.
        cfg.set("core.freq_ghz", "0.01").unwrap();
        cfg.set(name, v).unwrap();
        for d in pmsim_engine::DESIGNS {
            for t in [&local, &remote] {
                let s = simulate(t, &cfg, d.name).unwrap_or_else(|e| panic!("{name}={v} under {}: {e}", d.name));
                assert_eq!(s.events as usize, t.num_events(), "{name}={v} {}", d.name);
            }
        }
    }
}
