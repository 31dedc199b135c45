//! Remote persistence over RDMA (docs/design.md §9): the round trip is made of the configured parts,
//! regions become durable at the server in posting order under both strategies, and the broken
//! strategy does reorder them.

use pmsim_engine::{simulator, Config, RunStats, Simulator};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

fn cfg(sets: &[(&str, &str)]) -> Config {
    let mut c = Config::default();
    for (k, v) in sets {
        c.set(k, v).unwrap();
    }
    c
}

fn run(src: &str, c: &Config, broken: bool) -> Simulator {
    let t = Arc::new(parse_str("t", src).unwrap());
    let mut s = simulator(&t, c, "baseline", false, broken).unwrap();
    s.enable_log();
    s.run().unwrap();
    s
}

/// Picoseconds to serialise `bytes` at `gbps`.
fn ser(bytes: u64, gbps: f64) -> u64 {
    (bytes as f64 * 8000.0 / gbps).ceil() as u64
}

#[test]
fn one_sync_region_on_an_idle_system_costs_the_modelled_round_trip_plus_the_server_persist() {
    let src = "# pmsim trace v1\nthreads 1\nT0 begin op\nT0 rdma_pwrite 0 0x100000000 256\nT0 end op\n";
    for (lat, gbps, nic, post) in [(1000.0, 40.0, 300.0, 100.0), (2500.0, 100.0, 150.0, 0.0), (20.0, 10.0, 0.0, 50.0)] {
        let c = cfg(&[
            ("net.strategy", "sync"),
            ("net.link_latency_ns", &lat.to_string()),
            ("net.link_gbps", &gbps.to_string()),
            ("net.nic_ns", &nic.to_string()),
            ("net.post_ns", &post.to_string()),
        ]);
        let s = run(src, &c, false);
        let st = RunStats::collect(&s);
        let p = |x: f64| (x * 1000.0).round() as u64;
        let overhead = c.net.packet_overhead_bytes;
        // Client: post, NIC, one packet of 256 B + headers, wire. Server: NIC, DDIO write into the
        // LLC, write-back of the 4 lines to the idle MCs, WPQ accept and the MC's signal (one hop).
        let there = p(post) + p(nic) + ser(256 + overhead, gbps) + p(lat) + p(nic) + p(c.llc.latency_ns);
        let persist = p(c.noc.writeback_ns) + p(c.noc.hop_ns);
        // Back: NIC, a header-only ACK packet, wire, client NIC.
        let back = p(nic) + ser(overhead, gbps) + p(lat) + p(nic);
        let want = there + persist + back;
        assert_eq!((st.op_latency_avg_ns * 1000.0).round() as u64, want, "lat {lat} gbps {gbps}");
        assert_eq!(st.net.regions, 1);
        assert_eq!(st.net.persist_acks, 1);
        assert_eq!(st.net.packets, 1);
        assert_eq!((st.net.server_persist_avg_ns * 1000.0).round() as u64, persist);
        assert_eq!(st.stall_cycles["rdma"], (want - p(post)) / c.cycle_ps());
    }
}

#[test]
fn a_region_larger_than_the_mtu_is_sent_as_several_packets() {
    let src = "# pmsim trace v1\nthreads 1\nT0 rdma_pwrite 0 0x100000000 10000\n";
    let s = run(src, &cfg(&[]), false);
    let st = RunStats::collect(&s);
    assert_eq!(st.net.packets, 3);
    assert_eq!(st.net.wire_bytes, 10000 + 4 * 78);
    assert_eq!(st.net.rpb_lines_issued, 157);
}

/// Client regions in posting order: one client with many regions of mixed sizes, another client
/// sharing the server.
fn ordering_trace() -> String {
    let mut s = String::from("# pmsim trace v1\nthreads 3\nT2 store 0x100800000 8 1\n");
    for i in 0..12u64 {
        let size = if i % 3 == 0 { 9000 } else { 64 + i * 8 };
        s.push_str(&format!("T0 rdma_pwrite 0 {:#x} {size}\n", 0x1_0000_0000u64 + i * 0x10000));
        s.push_str(&format!("T1 rdma_pwrite 0 {:#x} 128\n", 0x1_0040_0000u64 + i * 0x1000));
        s.push_str(&format!("T2 store {:#x} 8 2\nT2 ofence\n", 0x1_0080_0000u64 + i * 64));
    }
    s.push_str("T0 rdma_wait\nT1 rdma_wait\n");
    s
}

fn persisted(s: &Simulator, client: u16) -> Vec<u64> {
    let log = s.m.log.as_ref().unwrap();
    log.iter().filter(|n| n.what == "rdma_persist" && n.core == client).map(|n| n.line).collect()
}

#[test]
fn regions_persist_in_posting_order_under_both_strategies_and_bsp_is_faster() {
    let src = ordering_trace();
    let mut times = Vec::new();
    for strategy in ["sync", "bsp"] {
        for channels in ["1", "2"] {
            let s = run(&src, &cfg(&[("net.strategy", strategy), ("net.channels", channels)]), false);
            let c0 = persisted(&s, 0);
            let want: Vec<u64> = (0..12).map(|i| 0x1_0000_0000 + i * 0x10000).collect();
            assert_eq!(c0, want, "{strategy} channels {channels}");
            let c1 = persisted(&s, 1);
            let want: Vec<u64> = (0..12).map(|i| 0x1_0040_0000 + i * 0x1000).collect();
            assert_eq!(c1, want, "{strategy} channels {channels}");
            times.push((strategy, RunStats::collect(&s).sim_time_ps));
        }
    }
    assert!(times[2].1 < times[0].1 && times[3].1 < times[1].1, "{times:?}");
}

#[test]
fn the_broken_strategy_persists_regions_out_of_order() {
    let src = ordering_trace();
    let c = cfg(&[("net.strategy", "broken-bsp-unordered"), ("net.rpb_entries", "2")]);
    let s = run(&src, &c, true);
    let c0 = persisted(&s, 0);
    let mut sorted = c0.clone();
    sorted.sort_unstable();
    assert_eq!(sorted.len(), 12);
    assert_ne!(c0, sorted, "the broken variant should reorder regions");
    // And it is refused without the test-only switch.
    let t = Arc::new(parse_str("t", &src).unwrap());
    let e = simulator(&t, &c, "baseline", false, false).err().unwrap().to_string();
    assert!(e.contains("broken variant"), "{e}");
}

#[test]
fn bad_net_parameters_are_named() {
    let e = Config::default().set("net.link_gbps", "0").unwrap_err().to_string();
    assert!(e.contains("net.link_gbps") && e.contains("must be > 0"), "{e}");
    let e = Config::default().set("net.strategy", "async").unwrap_err().to_string();
    assert!(e.contains("net.strategy") && e.contains("unknown value 'async'"), "{e}");
    let e = Config::default().set("net.channels", "0").unwrap_err().to_string();
    assert!(e.contains("net.channels"), "{e}");
}

#[test]
fn clients_share_the_server_port_bandwidth() {
    // Four clients each send one 64 KiB region at once: each client's own link is free, so the
    // server's port is the bottleneck and the last region lands about 4 serialisations after the
    // first could have.
    let mut src = String::from("# pmsim trace v1\nthreads 4\n");
    for t in 0..4u64 {
        src.push_str(&format!("T{t} rdma_pwrite 0 {:#x} 65536\n", 0x1_0000_0000u64 + t * 0x100000));
    }
    let one = run("# pmsim trace v1\nthreads 1\nT0 rdma_pwrite 0 0x100000000 65536\n", &cfg(&[]), false);
    let four = run(&src, &cfg(&[]), false);
    let wire = 65536 + 16 * 78;
    let (t1, t4) = (RunStats::collect(&one).sim_time_ps, RunStats::collect(&four).sim_time_ps);
    assert!(t4 >= t1 + 3 * ser(wire, 40.0), "one {t1} four {t4}");
    // And a faster link shortens it.
    let fast = run(&src, &cfg(&[("net.link_gbps", "100")]), false);
    assert!(RunStats::collect(&fast).sim_time_ps < t4);
}

#[test]
fn remote_lines_share_the_wpqs_with_the_servers_local_threads() {
    // A server thread streaming stores and flushes keeps the WPQs busy: the same region takes
    // longer to persist than on an idle server.
    let mut busy = String::from("# pmsim trace v1\nthreads 2\n");
    for i in 0..400u64 {
        busy.push_str(&format!(
            "T0 store {:#x} 64\nT0 clwb {:#x}\n",
            0x1_0800_0000u64 + i * 64,
            0x1_0800_0000u64 + i * 64
        ));
        if i == 200 {
            busy.push_str("T1 rdma_pwrite 0 0x100000000 4096\n");
        }
    }
    busy.push_str("T0 sfence\n");
    let c = cfg(&[("mc.wpq_entries", "4")]);
    let idle = run("# pmsim trace v1\nthreads 1\nT0 rdma_pwrite 0 0x100000000 4096\n", &c, false);
    let shared = run(&busy, &c, false);
    let (a, b) =
        (RunStats::collect(&idle).net.server_persist_avg_ns, RunStats::collect(&shared).net.server_persist_avg_ns);
    assert!(b > a, "idle {a} ns, shared {b} ns");
}

#[test]
fn the_servers_nic_message_rate_is_shared_by_every_client() {
    // Four clients stream 50 small regions each (bsp): 200 packets into the server NIC and 200
    // persist ACKs out of it. At one message per µs per pipeline the server's receive pipeline
    // alone needs 200 µs; each client's own pipelines see only 50 messages.
    let mut src = String::from("# pmsim trace v1\nthreads 4\n");
    for i in 0..50u64 {
        for t in 0..4u64 {
            src.push_str(&format!("T{t} rdma_pwrite 0 {:#x} 8\n", 0x1_0000_0000u64 + t * 0x100000 + i * 64));
        }
    }
    for t in 0..4 {
        src.push_str(&format!("T{t} rdma_wait\n"));
    }
    let time = |msg_ns: &str| {
        let s = run(&src, &cfg(&[("net.strategy", "bsp"), ("net.nic_msg_ns", msg_ns)]), false);
        RunStats::collect(&s).sim_time_ps
    };
    let (slow, fast) = (time("1000"), time("30"));
    assert!(slow >= 200 * 1_000_000, "slow {slow}");
    assert!(fast < slow / 4, "fast {fast} slow {slow}");
    // One client alone at the slow rate is limited by its own 50 messages, not 200.
    let one: String = src
        .lines()
        .filter(|l| !l.starts_with("T1") && !l.starts_with("T2") && !l.starts_with("T3"))
        .map(|l| format!("{l}\n"))
        .collect();
    let one = one.replace("threads 4", "threads 1");
    let s = run(&one, &cfg(&[("net.strategy", "bsp"), ("net.nic_msg_ns", "1000")]), false);
    let t1 = RunStats::collect(&s).sim_time_ps;
    assert!(t1 >= 50 * 1_000_000 && t1 < slow / 2, "one client {t1}, four {slow}");
}
