//! RDMA traffic through the server's BROI controller (docs/design.md §9, the seed's §IV-C/D and
//! §V): under the `delegated` and `broi` designs the remote persist buffer hands each region's
//! lines to the remote BROI entry of its channel, which keeps the regions in order while they
//! share the MCs and banks with the local threads' epochs.

use pmsim_engine::{simulator, Config, RunStats, Simulator};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

const BASE: u64 = 0x1_0000_0000;
/// The stride mapping of the banked model with one MC: 2 KiB groups go round the 8 banks.
const GROUP: u64 = 2048;
const ROW_STRIDE: u64 = GROUP * 8;

fn banked(sets: &[(&str, &str)]) -> Config {
    let mut c = Config::default();
    for (k, v) in [("pm.model", "banked"), ("mc.count", "1")].iter().chain(sets) {
        c.set(k, v).unwrap();
    }
    c
}

fn run(src: &str, c: &Config, design: &str) -> Simulator {
    let t = Arc::new(parse_str("t", src).unwrap());
    let mut s = simulator(&t, c, design, true, design.starts_with("broken")).unwrap();
    s.enable_log();
    s.run().unwrap();
    s
}

fn notes(s: &Simulator, what: &str) -> Vec<(u64, u16, u64)> {
    let log = s.m.log.as_ref().unwrap();
    log.iter().filter(|n| n.what == what).map(|n| (n.time, n.core, n.line)).collect()
}

/// One client streaming 10 regions of 4 lines (each region in its own bank, so the BROI entry
/// could finish a later region first if it ignored the barrier), a commit wait at the end.
fn one_client_trace() -> (String, Vec<Vec<u64>>) {
    let mut s = String::from("# pmsim trace v1\nthreads 1\n");
    let mut regions = Vec::new();
    for i in 0..10u64 {
        // Region i: 256 B in bank (7 - i % 8); early regions sit in banks a later region reuses
        // only after a row change, so their service times differ.
        let addr = BASE + (7 - i % 8) * GROUP + (i / 8) * ROW_STRIDE + (i % 3) * 512;
        s.push_str(&format!("T0 rdma_pwrite 0 {addr:#x} 256\n"));
        regions.push((0..4).map(|k| addr + k * 64).collect());
    }
    s.push_str("T0 rdma_wait\n");
    (s, regions)
}

#[test]
fn remote_regions_enter_the_remote_broi_entries_and_reach_nvm_in_order() {
    let (src, regions) = one_client_trace();
    for design in ["broi", "delegated"] {
        for strategy in ["sync", "bsp"] {
            let c = banked(&[("net.strategy", strategy)]);
            let s = run(&src, &c, design);
            let st = RunStats::collect(&s);
            // Every line went through the remote entry point (none bypassed the scheduler).
            assert_eq!(st.design_stats["remote_submitted"], 40.0, "{design}/{strategy}");
            if design == "broi" {
                assert_eq!(st.design_stats["broi_remote_picks"], 40.0, "{design}/{strategy}");
            }
            // Regions persist in posting order ...
            let acked: Vec<u64> = notes(&s, "rdma_persist").iter().map(|n| n.2).collect();
            assert_eq!(acked, regions.iter().map(|r| r[0]).collect::<Vec<_>>(), "{design}/{strategy}");
            // ... and at NVM no line of a region is written before every line of the previous one.
            let pos = |l: u64| s.m.nvm_written.iter().position(|&x| x == l).expect("line reached NVM");
            for w in regions.windows(2) {
                let last = w[0].iter().map(|&l| pos(l)).max().unwrap();
                let first = w[1].iter().map(|&l| pos(l)).min().unwrap();
                assert!(last < first, "{design}/{strategy}: {:x?}", s.m.nvm_written);
            }
        }
    }
}

#[test]
fn a_remote_entry_that_lets_requests_pass_their_barrier_reorders_regions_at_nvm() {
    // The test-only BROI whose Ready-SET includes the Next-SET: remote regions in different
    // banks overtake each other at NVM (what the region-order checker catches at a crash).
    let (src, regions) = one_client_trace();
    let s = run(&src, &banked(&[("net.strategy", "bsp")]), "broken-broi-cross-barrier");
    let pos = |l: u64| s.m.nvm_written.iter().position(|&x| x == l).expect("line reached NVM");
    let crossed =
        regions.windows(2).filter(|w| w[0].iter().map(|&l| pos(l)).max() > w[1].iter().map(|&l| pos(l)).min()).count();
    assert!(crossed > 0, "{:x?}", s.m.nvm_written);
}

#[test]
fn under_bsp_the_entry_holds_the_next_region_while_the_previous_one_drains() {
    // Intra-thread persistence parallelism (the seed's §IV-A): the remote persist buffer sends
    // region k+1's lines to the BROI entry before region k is persisted; the entry's barrier
    // holds them. Under sync there is never more than one region at the server.
    let (src, regions) = one_client_trace();
    let overlap = |strategy: &str| {
        let s = run(&src, &banked(&[("net.strategy", strategy)]), "broi");
        let submitted = notes(&s, "remote_submit");
        let persisted = notes(&s, "rdma_persist");
        (1..regions.len())
            .filter(|&k| {
                let first_submit = submitted.iter().find(|n| n.2 == regions[k][0]).unwrap().0;
                first_submit < persisted[k - 1].0
            })
            .count()
    };
    assert_eq!(overlap("sync"), 0);
    assert!(overlap("bsp") >= 5, "bsp overlapped only {} regions", overlap("bsp"));
}

#[test]
fn remote_requests_held_back_by_load_go_once_they_starve_even_when_nothing_else_happens() {
    // remote_low_util_pct = 0: no queue occupancy is below it, so a remote request goes only
    // once it has waited broi.starvation_ns. With no local traffic nothing else wakes the
    // scheduler then; the run used to stop with the client blocked for ever.
    let (src, _) = one_client_trace();
    for strategy in ["sync", "bsp"] {
        let free = run(&src, &banked(&[("net.strategy", strategy)]), "broi");
        let c =
            banked(&[("net.strategy", strategy), ("broi.remote_low_util_pct", "0"), ("broi.starvation_ns", "2000")]);
        let held = run(&src, &c, "broi");
        let st = RunStats::collect(&held);
        assert_eq!(st.design_stats["broi_remote_picks"], 40.0, "{strategy}");
        assert_eq!(st.design_stats["broi_starved_remote_picks"], 40.0, "{strategy}");
        // Under sync the regions go one at a time, each waiting the threshold at the server.
        let (t_free, t_held) = (RunStats::collect(&free).sim_time_ps, st.sim_time_ps);
        let waits = if strategy == "sync" { 10 } else { 1 };
        assert!(t_held >= t_free + waits * 2_000_000 - 1_000_000, "{strategy}: {t_free} -> {t_held} ps");
    }
}

/// A server thread persisting 120 one-line epochs, all in bank 0 with alternating rows (each a
/// row conflict), and a client writing one 4 KiB region into `bank` while that stream runs.
fn shared_trace(remote_bank: u64) -> String {
    let mut s = String::from("# pmsim trace v1\nthreads 2\n");
    for i in 0..120u64 {
        let a = BASE + 0x100_0000 + (i % 2) * ROW_STRIDE + (i / 2) * 64;
        s.push_str(&format!("T0 store {a:#x} 8 {:x}\nT0 ofence\n", i + 1));
    }
    s.push_str("T0 dfence\nT1 compute 4000\n");
    s.push_str(&format!("T1 rdma_pwrite 0 {:#x} 2048\nT1 rdma_wait\n", BASE + remote_bank * GROUP + 4 * ROW_STRIDE));
    s
}

#[test]
fn local_and_remote_persists_interleave_by_banks() {
    let c = banked(&[("net.strategy", "bsp")]);
    let other = run(&shared_trace(3), &c, "broi");
    let same = run(&shared_trace(0), &c, "broi");
    // The region in a bank the local stream leaves idle persists while the stream runs: its
    // lines reach NVM between local lines.
    let local_last = |s: &Simulator| s.m.nvm_written.iter().rposition(|&l| l >= BASE + 0x100_0000).unwrap();
    let remote_last = |s: &Simulator| s.m.nvm_written.iter().rposition(|&l| l < BASE + 0x100_0000).unwrap();
    assert!(remote_last(&other) < local_last(&other), "{:x?}", other.m.nvm_written);
    // In the local stream's own bank it competes for the bank (local before remote, the
    // starvation threshold) and takes longer to persist.
    let lat = |s: &Simulator| RunStats::collect(s).net.server_persist_avg_ns;
    assert!(lat(&same) > 1.5 * lat(&other), "same bank {} ns, other bank {} ns", lat(&same), lat(&other));
    // Every line of the remote region went through the remote entry; the local thread's
    // epochs through its own.
    let st = RunStats::collect(&other);
    assert_eq!(st.design_stats["remote_submitted"], 32.0);
    assert_eq!(st.design_stats["persist_requests"], 120.0 + 32.0);
}

#[test]
fn a_broken_server_drain_reorders_regions_under_broi() {
    // The test-only strategy hands the newest region to the BROI entry first: the entry keeps
    // the order it was given, so regions persist out of posting order.
    let (src, regions) = one_client_trace();
    let c = banked(&[("net.strategy", "broken-bsp-unordered"), ("net.rpb_entries", "2")]);
    let t = Arc::new(parse_str("t", &src).unwrap());
    let mut s = simulator(&t, &c, "broi", false, true).unwrap();
    s.enable_log();
    s.run().unwrap();
    let acked: Vec<u64> = notes(&s, "rdma_persist").iter().map(|n| n.2).collect();
    let want: Vec<u64> = regions.iter().map(|r| r[0]).collect();
    assert_eq!(acked.len(), want.len());
    assert_ne!(acked, want);
}

#[test]
fn designs_without_a_remote_queue_write_remote_lines_to_the_mc_directly() {
    let (src, _) = one_client_trace();
    for design in ["baseline", "hops-ep", "eadr"] {
        let s = run(&src, &banked(&[("net.strategy", "bsp")]), design);
        assert!(notes(&s, "remote_submit").is_empty(), "{design}");
        assert_eq!(RunStats::collect(&s).net.persist_acks, 10, "{design}");
    }
}

#[test]
fn a_remote_entry_shared_with_a_remote_style_core_serves_both() {
    // One RDMA channel and one remote-style core (`broi.remote_threads`) feed the same remote
    // entry of two units: the remote persist buffer is refused while the core's requests hold
    // the entry, and is told when a unit frees whoever freed it.
    let (regions_src, regions) = one_client_trace();
    let mut src = regions_src.replace("threads 1", "threads 2");
    for i in 0..40u64 {
        src.push_str(&format!("T1 store {:#x} 8 {:x}\nT1 ofence\n", BASE + 0x200_0000 + i * 64, i + 1));
    }
    let c = banked(&[
        ("net.strategy", "bsp"),
        ("net.channels", "1"),
        ("core.count", "2"),
        ("broi.remote_threads", "1"),
        ("broi.entry_slots", "2"),
    ]);
    let s = run(&src, &c, "broi");
    let acked: Vec<u64> = notes(&s, "rdma_persist").iter().map(|n| n.2).collect();
    assert_eq!(acked, regions.iter().map(|r| r[0]).collect::<Vec<_>>());
    let st = RunStats::collect(&s);
    assert_eq!(st.design_stats["remote_submitted"], 40.0);
    assert_eq!(st.design_stats["persist_requests"], 80.0);
}

#[test]
fn remote_style_cores_are_the_traces_last_threads() {
    // `broi.remote_threads` counts the trace's threads, whatever core.count says: 2 configured
    // (raised to 4 threads) or 8 (4 of them idle), the last n threads are remote-style.
    let mut src = String::from("# pmsim trace v1\nthreads 4\n");
    for t in 0..4u64 {
        for i in 0..5u64 {
            src.push_str(&format!("T{t} store {:#x} 8 {:x}\nT{t} ofence\n", BASE + t * 0x10_0000 + i * 64, i + 1));
        }
    }
    for cores in ["2", "8"] {
        let remote = |n: &str| {
            let c = banked(&[("core.count", cores), ("broi.remote_entries", "4"), ("broi.remote_threads", n)]);
            RunStats::collect(&run(&src, &c, "broi")).design_stats["broi_remote_picks"]
        };
        assert_eq!(remote("1"), 5.0, "{cores} cores");
        assert_eq!(remote("2"), 10.0, "{cores} cores");
        assert_eq!(remote("3"), 15.0, "{cores} cores");
    }
    // Every thread remote-style leaves no local one: refused, naming the trace's threads.
    let c = banked(&[("core.count", "8"), ("broi.remote_entries", "4"), ("broi.remote_threads", "4")]);
    let t = Arc::new(parse_str("t", &src).unwrap());
    let err = simulator(&t, &c, "broi", false, false).err().expect("refused").to_string();
    assert!(err.contains("broi.remote_threads") && err.contains("the trace's 4 threads"), "{err}");
}
