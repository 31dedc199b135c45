//! Timing checked against the configured latencies: change a latency, the result moves by
//! exactly that much. No expected number here is copied from a run.

use pmsim_engine::{simulate, Config, RunStats};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

fn run(src: &str, design: &str, cfg: &Config) -> RunStats {
    let t = Arc::new(parse_str("test.trace", src).unwrap());
    simulate(&t, cfg, design).unwrap()
}

const ONE_STORE_DFENCE: &str = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 2a\nT0 dfence\n";
const ONE_STORE: &str = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 2a\n";

/// A store to an uncached PM line: read-for-ownership through L1, L2, LLC and the PM media.
fn rfo_ns(c: &Config) -> f64 {
    c.l1.latency_ns + c.l2.latency_ns + c.llc.latency_ns + c.pm.read_ns
}

#[test]
fn baseline_dfence_costs_a_clwb_round_trip() {
    let c = Config::default();
    let s = run(ONE_STORE_DFENCE, "baseline", &c);
    // store RFO, then clwb: reach the line in L1, the write-back path to the MC, the ACK back.
    let expect = rfo_ns(&c) + c.l1.latency_ns + c.noc.writeback_ns + c.noc.ack_ns;
    assert_eq!(s.sim_time_ns, expect);
    assert_eq!(s.pm_writes, 1, "exactly one line written at the media");
    assert_eq!(
        s.stall_cycles["dfence"],
        ((c.l1.latency_ns + c.noc.writeback_ns + c.noc.ack_ns + rfo_ns(&c) - 0.25) * 2.0).floor() as u64
    );
}

#[test]
fn baseline_time_moves_by_the_changed_latency() {
    let base = run(ONE_STORE_DFENCE, "baseline", &Config::default()).sim_time_ns;
    let mut c = Config::default();
    c.noc.ack_ns += 7.0;
    assert_eq!(run(ONE_STORE_DFENCE, "baseline", &c).sim_time_ns, base + 7.0, "one ACK");
    let mut c = Config::default();
    c.noc.writeback_ns += 5.0;
    assert_eq!(run(ONE_STORE_DFENCE, "baseline", &c).sim_time_ns, base + 5.0, "the clwb's trip to the MC");
    let mut c = Config::default();
    c.pm.read_ns += 100.0;
    assert_eq!(run(ONE_STORE_DFENCE, "baseline", &c).sim_time_ns, base + 100.0, "the RFO reads PM once");
    let mut c = Config::default();
    c.pm.write_ns += 100.0;
    assert_eq!(run(ONE_STORE_DFENCE, "baseline", &c).sim_time_ns, base, "ADR: the ACK does not wait for the media");
}

#[test]
fn eadr_dfence_costs_nothing() {
    let c = Config::default();
    let with = run(ONE_STORE_DFENCE, "eadr", &c);
    let without = run(ONE_STORE, "eadr", &c);
    assert_eq!(with.sim_time_ns, without.sim_time_ns);
    assert_eq!(with.sim_time_ns, rfo_ns(&c));
    assert_eq!(with.stall_cycles["dfence"], 0);
    // Nothing is written back: the line stays in the (persistent) cache.
    assert_eq!(with.pm_writes, 0);
}

#[test]
fn stats_json_is_byte_identical_across_runs() {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), "300".to_string());
    let g = pmsim_workloads::generate("array", &p).unwrap();
    let t = Arc::new(g.trace);
    for d in ["baseline", "eadr"] {
        let a = simulate(&t, &Config::default(), d).unwrap().to_json();
        let b = simulate(&t, &Config::default(), d).unwrap().to_json();
        assert_eq!(a, b, "{d}");
    }
}

fn bandwidth(design: &str, cfg: &Config, ops: u64) -> RunStats {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), ops.to_string());
    p.insert("threads".to_string(), "2".to_string());
    let g = pmsim_workloads::generate("bandwidth", &p).unwrap();
    simulate(&Arc::new(g.trace), cfg, design).unwrap()
}

#[test]
fn baseline_bandwidth_is_bounded_by_the_flush_round_trip() {
    let ops = 200;
    let c = Config::default();
    let base = bandwidth("baseline", &c, ops);
    let mut slow_noc = c.clone();
    slow_noc.noc.ack_ns += 10.0;
    slow_noc.noc.writeback_ns += 10.0;
    let t = bandwidth("baseline", &slow_noc, ops);
    // Each ofence waits for one flush round trip (write-back + ACK) per 256 B block.
    let per_op_ns = (t.sim_time_ns - base.sim_time_ns) / ops as f64;
    assert!((per_op_ns - 20.0).abs() < 2.0, "per-op change {per_op_ns} ns, expected ~20 (round trip +20 ns)");
    // Write bandwidth is not the bound: halving it barely moves the time.
    let mut slow_media = c.clone();
    slow_media.pm.write_gbps /= 2.0;
    let w = bandwidth("baseline", &slow_media, ops);
    assert!(w.sim_time_ns < base.sim_time_ns * 1.05, "{} vs {}", w.sim_time_ns, base.sim_time_ns);
}

#[test]
fn eadr_bandwidth_is_bounded_by_the_media_write_bandwidth() {
    // A small LLC so the stream reaches steady state (every new line evicts a dirty one).
    let mut c = Config::default();
    c.llc.size_kib = 256;
    c.l2.size_kib = 64;
    let ops = 6000;
    let base = bandwidth("eadr", &c, ops);
    let mut half = c.clone();
    half.pm.write_gbps /= 2.0;
    let h = bandwidth("eadr", &half, ops);
    let ratio = h.sim_time_ns / base.sim_time_ns;
    assert!(ratio > 1.6, "halving write bandwidth should nearly double the time, ratio {ratio}");
    let mut noc = c.clone();
    noc.noc.hop_ns += 10.0;
    noc.noc.writeback_ns += 10.0;
    let n = bandwidth("eadr", &noc, ops);
    assert!((n.sim_time_ns / base.sim_time_ns - 1.0).abs() < 0.05, "the NoC is not the bound under eADR");
    // Achieved write bandwidth approaches the configured media bandwidth of both MCs.
    let gbps: f64 = base.mcs.iter().map(|m| m.write_bandwidth_gbps).sum();
    assert!(gbps > 0.8 * 2.0 * c.pm.write_gbps, "achieved {gbps} GB/s");
}

#[test]
fn tracking_data_does_not_change_timing() {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), "300".to_string());
    let t = Arc::new(pmsim_workloads::generate("array", &p).unwrap().trace);
    for d in ["baseline", "eadr"] {
        let mut a = pmsim_engine::simulator(&t, &Config::default(), d, false, false).unwrap();
        a.run().unwrap();
        let mut b = pmsim_engine::simulator(&t, &Config::default(), d, true, false).unwrap();
        b.run().unwrap();
        assert_eq!(RunStats::collect(&a).to_json(), RunStats::collect(&b).to_json(), "{d}");
        assert!(!b.m.coherent.lines.is_empty() && a.m.coherent.lines.is_empty());
    }
}

/// docs/design.md §3: sync events follow the global order only where it decides what they read.
/// T0 reaches its sync event after `compute 20000` (5 µs at the default clock and IPC).
fn sync_after_compute(t0: &str, t1: &str) -> RunStats {
    let arg = |e: &str| if e == "rmw" { "0x2000 8" } else { "0x2000" };
    let src = format!("# pmsim trace v1\nthreads 2\nT0 compute 20000\nT0 {t0} {}\nT1 {t1} {}\n", arg(t0), arg(t1));
    run(&src, "eadr", &Config::default())
}

#[test]
fn acquires_between_releases_do_not_wait_for_each_other() {
    let c = Config::default();
    let compute_ns = 20000.0 / c.core.ipc / c.core.freq_ghz;
    let s = sync_after_compute("acquire", "acquire");
    assert!(s.cores[1].finish_ns < compute_ns, "T1's acquire waited for T0's: {}", s.cores[1].finish_ns);
    assert_eq!(s.cores[1].stall_cycles["sync"], 0);
    for (t0, t1) in [("release", "acquire"), ("acquire", "release"), ("release", "release"), ("acquire", "rmw")] {
        let s = sync_after_compute(t0, t1);
        assert!(s.cores[1].finish_ns >= compute_ns, "{t0} then {t1}: T1 did not wait ({})", s.cores[1].finish_ns);
        if t1 == "acquire" {
            // (a release or rmw waits at the store buffer's head, not as a core stall)
            assert!(s.cores[1].stall_cycles["sync"] > 0, "{t0} then {t1}");
        }
    }
}

/// `k` threads each doing one rmw of one PM word, in thread order.
fn rmw_chain(k: usize, hop_ns: f64) -> Vec<f64> {
    let mut src = format!("# pmsim trace v1\nthreads {k}\n");
    for t in 0..k {
        src.push_str(&format!("T{t} rmw 0x100001000 8 {:x}\n", t + 1));
    }
    let mut c = Config::default();
    c.noc.hop_ns = hop_ns;
    run(&src, "eadr", &c).cores.iter().map(|c| c.finish_ns).collect()
}

#[test]
fn contended_rmws_take_the_line_one_after_another() {
    // Each rmw performs after the one before it in the global order and must then take the line
    // from that core: the transfers add up. (They once overlapped: seven of eight rmws ended
    // together, because the next one started as soon as its predecessor began taking the line.)
    let (a, b) = (rmw_chain(8, 20.0), rmw_chain(8, 40.0));
    for i in 1..8 {
        let (ga, gb) = (a[i] - a[i - 1], b[i] - b[i - 1]);
        assert!(ga >= 20.0, "rmw {i} ended {ga} ns after rmw {} (a forward alone is 20 ns): {a:?}", i - 1);
        // A forward message is on each transfer's path: 20 ns more per hop, 20 ns more per gap.
        assert!((gb - ga - 20.0).abs() < 1e-9, "gap {i}: {ga} ns at hop 20, {gb} ns at hop 40");
    }
}
