//! Timing of the paths tester P's hand derivations found wrong, each expected from the
//! configured latencies (no number copied from a run): a load of a line still being filled, a
//! release that misses, eADR's write-combining transfer, the banked model's ACK, the delegated
//! designs' MC-side scheduler, whose persist buffers the statistics read, and what a dfence that
//! first waited for epoch-table space is charged to.

use pmsim_engine::{simulate, Config, RunStats};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

fn run(src: &str, design: &str, cfg: &Config) -> RunStats {
    let t = Arc::new(parse_str("test.trace", src).unwrap());
    simulate(&t, cfg, design).unwrap()
}

/// A store to an uncached PM line: read-for-ownership through L1, L2, LLC and the PM media.
fn rfo_ns(c: &Config) -> f64 {
    c.l1.latency_ns + c.l2.latency_ns + c.llc.latency_ns + c.pm.read_ns
}

/// One instruction at the configured clock and IPC.
fn instr_ns(c: &Config) -> f64 {
    1.0 / (c.core.freq_ghz * c.core.ipc)
}

const DESIGNS: [&str; 9] = ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"];

/// The store buffer's prefetch installs the line when it asks for it; a load of another word
/// of that line (no store-buffer forwarding) must still wait for the data to arrive.
#[test]
fn a_load_of_a_line_the_store_prefetch_is_filling_waits_for_the_fill() {
    let src = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 load 0x100000008 8\nT0 compute 1000\n";
    let c = Config::default();
    for d in DESIGNS {
        let s = run(src, d, &c);
        // The load issues one instruction after the store and completes when the fill lands;
        // then the load's own instruction slot and 1000 more.
        let expect = rfo_ns(&c) + 1001.0 * instr_ns(&c);
        assert_eq!(s.sim_time_ns, expect, "{d}");
        assert_eq!(s.cores[0].load_latency_avg_ns, rfo_ns(&c) - instr_ns(&c), "{d}");
    }
}

/// A release whose line misses performs (and the baseline writes its line back) only once the
/// line is on chip: the store after it waits for that write-back's ACK.
#[test]
fn a_releases_write_back_leaves_after_its_line_arrives() {
    // The lock on MC 0, the data on MC 1 (4 KiB interleaving): no media channel shared.
    let src = "# pmsim trace v1\nthreads 1\nT0 release 0x100002000\nT0 store 0x100001000 8 1\n";
    let c = Config::default();
    let s = run(src, "baseline", &c);
    // The release's line lands at rfo; its clwb reaches the line in L1, travels, is ACKed;
    // the store (a hit by then) performs on that ACK.
    let expect = rfo_ns(&c) + c.l1.latency_ns + c.noc.writeback_ns + c.noc.ack_ns;
    assert_eq!(s.sim_time_ns, expect);
}

/// eADR's write-combining buffers take the same on-chip transfer as the baseline's: with one
/// buffer, each full line waits for the previous line's transfer and ACK.
#[test]
fn eadr_write_combining_buffers_cross_the_chip() {
    let mut src = String::from("# pmsim trace v1\nthreads 1\n");
    for i in 0..24u64 {
        src.push_str(&format!("T0 ntstore {:#x} 8 {:x}\n", 0x1_0000_0000u64 + 8 * i, i + 1));
    }
    src.push_str("T0 sfence\n");
    let mut c = Config::default();
    c.core.wc_buffers = 1;
    let trip = c.noc.writeback_ns + c.noc.ack_ns;
    // The first line fills at its 8th store (7 instructions in); lines 2 and 3 each wait for
    // the buffer; eADR's sfence waits for nothing, the baseline's for the last line's ACK.
    let eadr = run(&src, "eadr", &c);
    assert_eq!(eadr.sim_time_ns, 7.0 * instr_ns(&c) + 2.0 * trip);
    let baseline = run(&src, "baseline", &c);
    assert_eq!(baseline.sim_time_ns, 7.0 * instr_ns(&c) + 3.0 * trip);
}

/// Under the banked media model the MC's acknowledgement takes `noc.ack_ns`, like the optane
/// model's, and `noc.hop_ns` does not enter it.
#[test]
fn banked_acknowledgements_take_the_ack_latency() {
    let src = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 2a\nT0 dfence\n";
    let mut c = Config::default();
    c.pm.model = "banked".into();
    c.mc.count = 1;
    let base = run(src, "baseline", &c).sim_time_ns;
    let expect = c.l1.latency_ns
        + c.l2.latency_ns
        + c.llc.latency_ns
        + c.bank.read_conflict_ns
        + c.l1.latency_ns
        + c.noc.writeback_ns
        + c.bank.hit_ns
        + c.noc.ack_ns;
    assert_eq!(base, expect);
    let mut k = c.clone();
    k.noc.ack_ns += 30.0;
    assert_eq!(run(src, "baseline", &k).sim_time_ns, base + 30.0);
    let mut k = c.clone();
    k.noc.hop_ns += 30.0;
    assert_eq!(run(src, "baseline", &k).sim_time_ns, base);
}

/// The delegated designs' scheduler sits at the MC: it starts the next barrier epoch when the
/// previous one persists, not when the ACK is back at the core. Two epochs and a dfence pay
/// one ACK latency (the dfence's), so the run moves by exactly the ACK's change.
#[test]
fn the_mc_side_scheduler_does_not_wait_for_the_ack_to_reach_the_core() {
    let src = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 ofence\nT0 store 0x100000040 8 2\nT0 dfence\n";
    for d in ["delegated", "broi"] {
        let mut c = Config::default();
        c.noc.ack_ns = 20.0;
        let a = run(src, d, &c).sim_time_ns;
        c.noc.ack_ns = 100.0;
        let b = run(src, d, &c).sim_time_ns;
        assert!((b - a - 80.0).abs() < 1e-6, "{d}: {a} -> {b}");
    }
}

/// The persist-buffer statistics are the threads' buffers, whichever cores ran them.
#[test]
fn persist_buffer_statistics_follow_the_cores_that_ran() {
    let idle_first = "# pmsim trace v1\nthreads 2\nT1 store 0x100000000 8 1\nT1 dfence\n";
    let idle_last = "# pmsim trace v1\nthreads 2\nT0 store 0x100000000 8 1\nT0 dfence\n";
    for d in ["bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
        let c = Config::default();
        let a = run(idle_first, d, &c);
        let b = run(idle_last, d, &c);
        assert_eq!(a.design_stats["pb_inserts"], 1.0, "{d}");
        assert_eq!(a.design_stats["pb_occupancy_avg"], b.design_stats["pb_occupancy_avg"], "{d}");
        assert!(a.design_stats["pb_occupancy_avg"] > 0.0, "{d}");
    }
}

/// A durability fence that first waits for epoch-table space, then for the drain: the wait is
/// charged to `et_full` only until the table has room, and to `dfence` for the rest (it stayed
/// `et_full` to the end).
#[test]
fn a_dfence_that_waited_for_epoch_table_space_is_charged_to_dfence_once_there_is_room() {
    // One closed epoch fits (the open one is the core's register): epoch 1 holds A (MC 0), the
    // open epoch 2 holds B (MC 1), so the dfence must wait for epoch 1 to commit.
    let src = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 ofence\nT0 store 0x100001000 8 2\nT0 dfence\n";
    let mut c = Config::default();
    c.et.entries = 1;
    let s = run(src, "asap-rp", &c);
    // Stalls are reported in whole cycles, rounded down.
    let cycles = |ns: f64| (ns * c.core.freq_ghz).floor() as u64;
    // B performs one instruction after A (both prefetched); the dfence is at the head then.
    // Epoch 1, the oldest, commits when A's flush is acknowledged.
    let room_ns = c.pb.flush_ns + c.noc.ack_ns - instr_ns(&c);
    assert_eq!(s.cores[0].stall_cycles["et_full"], cycles(room_ns));
    // The table's size does not change when anything happens here, only what the wait is
    // charged to: all of it is the dfence's with room to spare.
    c.et.entries = 32;
    let roomy = run(src, "asap-rp", &c);
    assert_eq!(roomy.sim_time_ns, s.sim_time_ns);
    assert_eq!(roomy.cores[0].stall_cycles["et_full"], 0);
    // The same wait, split in two (each part rounded down to whole cycles).
    let total = |r: &RunStats| r.cores[0].stall_cycles.values().sum::<u64>();
    assert!(total(&roomy).abs_diff(total(&s)) <= 1, "{:?} {:?}", s.cores[0].stall_cycles, roomy.cores[0].stall_cycles);
}

/// A legacy trace's sfence after a clwb is a durability fence to the buffered designs
/// (`sfence_as_dfence`): the core's wait at it is charged as a dfence's, exactly as the same
/// program written with a dfence (it was charged to `fence`, so `dfence` read 0 on every
/// traced program).
#[test]
fn a_legacy_sfence_run_as_a_dfence_is_charged_as_one() {
    let legacy = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\nT0 store 0x100001000 8 2\n";
    let neutral = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 dfence\nT0 store 0x100001000 8 2\n";
    let c = Config::default();
    for d in ["hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
        let l = run(legacy, d, &c);
        let n = run(neutral, d, &c);
        assert_eq!(l.design_stats["sfence_as_dfence"], 1.0, "{d}");
        assert_eq!(l.sim_time_ns, n.sim_time_ns, "{d}");
        assert!(n.cores[0].stall_cycles["dfence"] > 0, "{d}");
        // Less the clwb's instruction slot (half a cycle: the core reaches its sfence that
        // much later), in whole cycles rounded down.
        let (ls, ns) = (&l.cores[0].stall_cycles, &n.cores[0].stall_cycles);
        assert_eq!(ls["fence"], 0, "{d}: {ls:?}");
        assert!(ns["dfence"].abs_diff(ls["dfence"]) <= 1, "{d}: {ls:?} {ns:?}");
    }
}
