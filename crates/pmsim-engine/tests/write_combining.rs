//! Back-pressure on the writes that bypass every design buffer (baseline, eADR): non-temporal
//! stores combine in a few write-combining buffers per core, each taken until its MC accepts the
//! write, and an LLC write-back to an MC whose writes already wait for the WPQ holds the access
//! that caused it. Without them a stream of such writes retires at any rate and the reported
//! write bandwidth exceeds the media's.

use pmsim_engine::{simulate, Config, RunStats};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

const PM: u64 = 0x1_0000_0000;

fn run(src: &str, design: &str, cfg: &Config) -> RunStats {
    let t = Arc::new(parse_str("test.trace", src).unwrap());
    simulate(&t, cfg, design).unwrap()
}

/// `n` lines of MC 0 (4 KiB interleaving over two MCs), in address order.
fn mc0_lines(n: usize) -> Vec<u64> {
    (0..).map(|i| PM + i * 64).filter(|a| (a / 4096) % 2 == 0).take(n).collect()
}

/// Each line written by `per_line` non-temporal stores that together cover it.
fn nt_stream(lines: &[u64], per_line: u64, end: &str) -> String {
    let size = 64 / per_line;
    let mut s = String::from("# pmsim trace v1\nthreads 1\n");
    for &l in lines {
        for k in 0..per_line {
            s += &format!("T0 ntstore {:#x} {size}\n", l + k * size);
        }
    }
    s + end
}

fn media_ns(lines: usize, cfg: &Config) -> f64 {
    lines as f64 * 64.0 / cfg.pm.write_gbps
}

#[test]
fn a_stream_of_non_temporal_stores_runs_at_the_media_write_bandwidth() {
    let cfg = Config::default();
    let lines = mc0_lines(1000);
    for design in ["baseline", "eadr"] {
        for end in ["", "T0 sfence\n"] {
            let s = run(&nt_stream(&lines, 1, end), design, &cfg);
            let media = media_ns(lines.len(), &cfg);
            // The last WPQ-full of writes, and the buffers' own, may still be queued when the core
            // finishes.
            let queued = (cfg.mc.wpq_entries + cfg.core.wc_buffers) as f64 * 64.0 / cfg.pm.write_gbps;
            assert!(
                s.sim_time_ns >= media - queued - 1.0,
                "{design}: {} ns for {media} ns of media writes",
                s.sim_time_ns
            );
            assert!(s.stall_cycles["wc_full"] > 0, "{design}: the core never waited for a buffer");
            let bw = s.mcs[0].write_bandwidth_gbps;
            assert!(bw <= cfg.pm.write_gbps * 1.1, "{design}: {bw} GB/s on a {} GB/s MC", cfg.pm.write_gbps);
            assert_eq!(s.mcs[0].pm_writes, 1000, "{design}");
        }
    }
}

#[test]
fn stores_to_one_line_combine_into_one_write() {
    let cfg = Config::default();
    let lines = mc0_lines(200);
    for design in ["baseline", "eadr"] {
        for per_line in [2, 4, 8] {
            let s = run(&nt_stream(&lines, per_line, "T0 sfence\n"), design, &cfg);
            assert_eq!(s.design_stats["wc_writes"], 200.0, "{design} {per_line} stores per line");
            assert_eq!(s.design_stats["wc_combined"], (200 * (per_line - 1)) as f64, "{design}");
            assert_eq!(s.mcs[0].pm_writes, 200, "{design} {per_line}: one media write per line");
        }
        // Half lines are sent only by the fence (or the thread's end), each as one write.
        let mut half = String::from("# pmsim trace v1\nthreads 1\n");
        for &l in &lines {
            half += &format!("T0 ntstore {l:#x} 16\nT0 ntstore {:#x} 16\n", l + 16);
        }
        for end in ["T0 sfence\n", ""] {
            let s = run(&format!("{half}{end}"), design, &cfg);
            assert_eq!(s.design_stats["wc_writes"], 200.0, "{design} {end:?}");
            assert_eq!(s.mcs[0].pm_writes, 200, "{design} {end:?}");
        }
    }
}

#[test]
fn fewer_buffers_cost_more_and_more_cost_nothing_beyond_the_media() {
    // Lines alternate between the two MCs: one buffer waits a round trip per line, ten overlap.
    let lines: Vec<u64> = (0..600).map(|i| PM + (i % 2) * 4096 + (i / 2) * 64 % 4096 + (i / 128) * 8192).collect();
    let src = nt_stream(&lines, 1, "T0 sfence\n");
    for design in ["baseline", "eadr"] {
        let time = |n: &str| {
            let mut c = Config::default();
            c.set("core.wc_buffers", n).unwrap();
            run(&src, design, &c).sim_time_ns
        };
        let (one, ten, many) = (time("1"), time("10"), time("64"));
        assert!(one > ten * 1.2, "{design}: 1 buffer {one} ns vs 10 buffers {ten} ns");
        assert!(many <= ten, "{design}: 64 buffers {many} ns vs 10 buffers {ten} ns");
    }
}

#[test]
fn llc_write_backs_wait_for_a_backlogged_memory_controller() {
    // Small caches make the bandwidth workload's stores leave the LLC as write-backs faster
    // than the media takes them.
    let mut small = Config::default();
    for (k, v) in [("l1.size_kib", "4"), ("l2.size_kib", "16"), ("llc.size_kib", "64")] {
        small.set(k, v).unwrap();
    }
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), "300".to_string());
    let g = pmsim_workloads::generate("bandwidth", &p).unwrap();
    let trace = Arc::new(g.trace);
    for design in ["eadr", "baseline"] {
        let s = simulate(&trace, &small, design).unwrap();
        let total: f64 = s.mcs.iter().map(|m| m.write_bandwidth_gbps).sum();
        let cap = small.pm.write_gbps * small.mc.count as f64;
        assert!(total <= cap * 1.05, "{design}: {total} GB/s written on {cap} GB/s of media");
        if design == "eadr" {
            assert!(s.stall_cycles["wpq_full"] > 0, "eadr: write-backs never waited");
        }
    }
    // With room in the caches, nothing waits.
    let s = simulate(&trace, &Config::default(), "eadr").unwrap();
    assert_eq!(s.stall_cycles["wpq_full"], 0);
}
