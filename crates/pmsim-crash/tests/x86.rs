//! Legacy x86 traces (clwb/clflush + sfence, as the tracer records them) under x86 persistency:
//! `baseline` running them unmapped satisfies it at every crash instant, so does every other
//! design (which maps sfence-after-flush to dfence), and the baseline whose sfence does not wait
//! for its flushes is caught. Hand-written, so this runs without clang.

use pmsim_check::Model;
use pmsim_crash::{Instants, Request};
use pmsim_engine::Config;
use std::fmt::Write;
use std::sync::Arc;

/// T0 persists a 1024-line arena (written oldest first, flushed newest first, so its oldest
/// lines are written back from L2 while the root's line is in L1), then publishes a root word
/// and releases a lock (the shape of `examples/pm_list.c`); T1 acquires
/// it and appends 20 nodes, each flushed and fenced before the root is updated and flushed.
fn legacy_trace() -> pmsim_trace::Trace {
    let mut s = String::from("# pmsim trace v1\nthreads 2\n");
    let arena = 0x1_0000_0000u64;
    let root = 0x1_0010_0000u64;
    let nodes = 0x1_0020_0000u64;
    writeln!(s, "T0 store {:#x} 8 0", root + 8).unwrap();
    for i in 0..1024u64 {
        writeln!(s, "T0 store {:#x} 8 {:x}", arena + 64 * i, i + 1).unwrap();
    }
    writeln!(s, "T0 load {root:#x} 8").unwrap(); // the root's line is hot again, the arena's oldest are not
    for i in (0..1024u64).rev() {
        writeln!(s, "T0 clwb {:#x}", arena + 64 * i).unwrap();
    }
    writeln!(s, "T0 sfence\nT0 store {root:#x} 8 1\nT0 clflushopt {root:#x}\nT0 mfence\nT0 release 0x2000").unwrap();
    writeln!(s, "T1 acquire 0x2000").unwrap();
    for j in 0..20u64 {
        let n = nodes + 64 * j;
        writeln!(s, "T1 store {n:#x} 8 {j:x}\nT1 store {:#x} 8 {j:x}\nT1 store {:#x} 8 {j:x}", n + 8, n + 16).unwrap();
        writeln!(s, "T1 clwb {n:#x}\nT1 sfence\nT1 store {root:#x} 8 {n:x}\nT1 clflush {root:#x}\nT1 sfence").unwrap();
    }
    pmsim_trace::text::parse_str("legacy", &s).unwrap()
}

/// Crashes `trace` at every instant under `design` (broken variants allowed), against `model`
/// (`None`: the model the design promises for this trace).
fn crash_every(trace: pmsim_trace::Trace, design: &str, config: Config, model: Option<Model>) -> pmsim_crash::Report {
    let req = Request {
        trace: Arc::new(trace),
        design: design.to_string(),
        allow_broken: true,
        config,
        instants: Instants::Every,
        model,
        recovery: None,
        replay_input: "--trace legacy".into(),
        max_failures: 1,
    };
    pmsim_crash::run(&req).unwrap()
}

fn crash(design: &str) -> pmsim_crash::Report {
    crash_every(legacy_trace(), design, Config::default(), Some(Model::X86))
}

#[test]
fn every_design_satisfies_x86_persistency_on_a_legacy_trace() {
    for d in ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp"] {
        let r = crash(d);
        assert!(r.images > 0, "{d}: no images");
        assert!(r.failures.is_empty(), "{d}: {:?}", r.failures.first());
    }
}

#[test]
fn baseline_whose_sfence_does_not_wait_is_caught_on_a_legacy_trace() {
    let r = crash("broken-baseline-no-sfence-stall");
    assert!(!r.failures.is_empty(), "not caught in {} images", r.images);
}

fn crash_default_model(trace: pmsim_trace::Trace, design: &str) -> pmsim_crash::Report {
    crash_every(trace, design, Config::default(), None)
}

/// The baseline's own flushes (`clwbs`, of which `release_flushes` at releases/rmws) and its
/// promise when it runs `trace`.
fn baseline_run(trace: pmsim_trace::Trace) -> (f64, f64, &'static str) {
    let t = Arc::new(trace);
    let mut sim = pmsim_engine::simulator(&t, &Config::default(), "baseline", false, false).unwrap();
    sim.run().unwrap();
    let mut st = Default::default();
    sim.design.stats(&sim.m, &mut st);
    (st["release_flushes"], st["fence_flushes"], sim.design.promise().name())
}

#[test]
fn baseline_runs_a_legacy_trace_as_written_and_a_neutral_one_mapped() {
    // T0 writes A, takes a PM lock by rmw, writes and persists B; A is never flushed.
    let body = "T0 store 0x100000000 8 1\nT0 rmw 0x100030000 8 1\nT0 store 0x100010000 8 2\n\
                T0 clwb 0x100010000\nT0 sfence\n";
    let legacy = pmsim_trace::text::parse_str("legacy", &format!("# pmsim trace v1\nthreads 2\n{body}")).unwrap();
    // Legacy: only the program's own flush; the rmw adds none (x86 does not flush there).
    assert_eq!(baseline_run(legacy), (0.0, 0.0, "x86"));
    // One design-neutral barrier and it is no longer legacy: the baseline maps the rmw (the
    // lines written before it, then the lock word's own write-back).
    let mixed =
        pmsim_trace::text::parse_str("mixed", &format!("# pmsim trace v1\nthreads 2\n{body}T1 ofence\n")).unwrap();
    assert_eq!(baseline_run(mixed), (1.0, 1.0, "rp"));
}

/// A locked instruction or a release is x86's fence point for earlier flushes: run as written,
/// the baseline must still make it wait for them, or a later store (the thread's own, or one of
/// a thread that acquires the lock) persists first. T1 first floods MC 0's write queue with 64
/// flushed lines, so the flush of A (MC 0) waits there while B's (MC 1, from a cache that owns
/// B) would overtake it. Crash-checked at every instant against the model the design promises
/// for such a trace (x86), with no `--model` given.
#[test]
fn legacy_rmw_and_release_order_earlier_flushes() {
    // MC = (address / 4096) % 2 by default: A, C and the flood on MC 0, B and the lock on MC 1.
    let (a, b, c) = (0x1_0000_0000u64, 0x1_0000_1000u64, 0x1_0000_2040u64);
    let lock = 0x1_0000_3000u64;
    let flood = 0x1_0004_0000u64;
    let mut handoff = String::new();
    for j in 0..64u64 {
        writeln!(handoff, "T1 store {:#x} 8 {j:x}\nT1 clwb {:#x}", flood + 64 * j, flood + 64 * j).unwrap();
    }
    write!(handoff, "T1 store {a:#x} 8 1\nT1 release 0x2000\nT0 acquire 0x2000\nT0 clwb {a:#x}\n").unwrap();
    for (name, owner, body) in [
        ("rmw", "T0", format!("T0 rmw {lock:#x} 8 1\nT0 store {b:#x} 8 2\nT0 clwb {b:#x}\nT0 sfence\n")),
        (
            "release",
            "T1",
            format!(
                "T0 release {lock:#x}\nT1 acquire {lock:#x}\nT1 store {b:#x} 8 2\nT1 clwb {b:#x}\nT1 sfence\n\
                 T1 store {c:#x} 8 3\nT1 clflush {c:#x}\nT1 mfence\n"
            ),
        ),
    ] {
        // B's storer owns B (and T0 the lock word) before anything else happens.
        let body = format!("{owner} store {b:#x} 8 9\nT0 store {lock:#x} 8 0\n{handoff}{body}");
        let trace = pmsim_trace::text::parse_str(name, &format!("# pmsim trace v1\nthreads 2\n{body}")).unwrap();
        assert_eq!(trace.dialect(), pmsim_trace::Dialect::X86);
        for design in ["baseline", "eadr", "bbb", "hops-rp", "asap-rp"] {
            let r = crash_default_model(trace.clone(), design);
            assert!(r.images > 0, "{name}/{design}: no images");
            assert!(r.failures.is_empty(), "{name}/{design} ({}): {:?}", r.model, r.failures.first());
            if design == "baseline" {
                assert_eq!(r.model, "x86", "{name}: the baseline promises x86 on a legacy trace");
            }
        }
        let r = crash_default_model(trace, "broken-baseline-no-sfence-stall");
        assert!(!r.failures.is_empty(), "{name}: the non-waiting baseline is not caught ({} images)", r.images);
    }
}

/// Legacy traces the random generator (`random_x86_traces_run_as_written`, seeds 25, 1972, 2636
/// and 3222) found to fail under `baseline` against x86: each was a tie in the checker, events of
/// two cores performed in the same picosecond and ordered differently by two rules. Each must
/// now pass at every instant.
#[test]
fn legacy_same_picosecond_regressions() {
    let cases: [(&str, bool, &str); 4] = [
        // two cores' stores to one word performed in the same picosecond: the line order followed gid, the word's order the record (checker, x86 line edges)
        ("seed25", true, "# pmsim trace v1\nthreads 4\nT1 begin op\nT3 store 0x100001034 4 5040302\nT0 mfence\nT0 store 0x100080024 4 7060504\nT2 clwb 0x100080028\nT3 clflushopt 0x100080028\nT3 clflush 0x100000012\nT0 acquire 0x100002000\nT3 store 0x8032 1 a\nT3 store 0x100080004 4 e0d0c0b\nT0 clwb 0x100000030\nT0 store 0x100080030 2 f0e\nT3 load 0x100000070 2\nT1 store 0x100080004 2 1211\nT2 ntstore 0x100000000 8 1918171615141312\nT3 load 0x100000000 64\nT3 clflushopt 0x100000045\nT1 end op\n"),
        // another core's rmw performed in the same picosecond as the flushing thread's last access was taken as visible to the flush (checker, x86 flush rule)
        ("case0", true, "# pmsim trace v1\nthreads 2\nT0 store 0x10000100a 2 201\nT0 rmw 0x100000038 8 2\nT1 store 0x100000040 64 4241403f3e3d3c3b3a393837363534333231302f2e2d2c2b2a292827262524232221201f1e1d1c1b1a191817161514131211100f0e0d0c0b0a09080706050403\nT1 ntstore 0x8024 4 8070605\nT1 clflushopt 0x100000000\nT1 load 0x100000030 2\nT0 compute 16\nT1 acquire 0x100002000\nT1 clwb 0x100080000\nT0 store 0x10008001b 1 b\nT0 acquire 0x100000038\nT1 load 0x100000040 64\nT0 clflushopt 0x100000030\nT1 sfence\nT0 store 0x100000070 1 10\nT1 ntstore 0x8024 1 11\nT0 store 0x10000103c 2 1312\nT1 ntstore 0x100001030 8 1a19181716151413\nT0 clwb 0x100000000\nT1 store 0x100080017 1 15\nT1 clflush 0x8028\nT1 clflush 0x100000016\nT1 store 0x100001028 8 1f1e1d1c1b1a1918\nT0 begin op\nT0 store 0x8018 8 21201f1e1d1c1b1a\nT1 store 0x100000078 8 2221201f1e1d1c1b\nT0 acquire 0x4000\nT0 end op\n"),
        // the same, with the rmw's line flushed by the other thread before an acquire
        ("case1", true, "# pmsim trace v1\nthreads 3\nT1 rmw 0x100000038 8 1\nT1 clflushopt 0x100000048\nT1 load 0x100040040 64\nT1 clflush 0x8028\nT0 clwb 0x100000000\nT1 clflushopt 0x100001008\nT2 compute 25\nT1 sfence\nT0 clflush 0x100040000\nT0 sfence\nT2 begin op\nT0 clflushopt 0x8024\nT0 acquire 0x100000038\nT0 store 0x100080000 8 161514131211100f\nT2 rmw 0x100002000 8 10\nT2 acquire 0x100002000\nT0 ntstore 0x100001000 8 1918171615141312\nT2 end op\n"),
        // the same, with a plain store and a chain through rmw and acquire
        ("case2", false, "# pmsim trace v1\nthreads 3\nT2 store 0x100000006 2 201\nT0 store 0x100001010 8 a09080706050403\nT1 store 0x100000040 64 434241403f3e3d3c3b3a393837363534333231302f2e2d2c2b2a292827262524232221201f1e1d1c1b1a191817161514131211100f0e0d0c0b0a090807060504\nT2 rmw 0x4000 8 5\nT1 clflush 0x100000023\nT0 clflush 0x100000054\nT2 load 0x100080020 4\nT2 store 0x100000000 64 494847464544434241403f3e3d3c3b3a393837363534333231302f2e2d2c2b2a292827262524232221201f1e1d1c1b1a191817161514131211100f0e0d0c0b0a\nT2 sfence\nT2 load 0x100000040 64\nT0 begin op\nT0 sfence\nT0 rmw 0x4000 8 f\nT2 clflushopt 0x10008001c\nT0 acquire 0x4000\nT2 clflushopt 0x100000040\nT1 clflush 0x8020\nT0 rmw 0x100000038 8 16\nT1 compute 40\nT1 store 0x100000023 1 18\nT2 acquire 0x100002000\nT0 end op\n"),
    ];
    for (name, one_entry_wpq, text) in cases {
        let trace = pmsim_trace::text::parse_str(name, text).unwrap();
        assert_eq!(trace.dialect(), pmsim_trace::Dialect::X86, "{name}");
        let mut config = Config::default();
        if one_entry_wpq {
            config.set("mc.wpq_entries", "1").unwrap();
        }
        let r = crash_every(trace, "baseline", config, None);
        assert_eq!(r.model, "x86");
        assert!(r.images > 0 && r.failures.is_empty(), "{name}: {:?}", r.failures.first());
    }
}

/// DESIGN §5: a store flushed and then fenced is persistent once the fence *completes*, not only
/// ordered before the thread's later stores. Nothing follows the last fence here, so only
/// durability catches a baseline whose fence returns before its flush is acknowledged; the
/// exhaustive sweep must crash at the fence's completion to see it.
/// Every image of `trace` passes under `baseline`; under the baseline whose sfence returns before
/// its flushes persist, some image is consistent but not durable: returns that verdict.
fn passes_baseline_but_not_its_early_sfence(trace: pmsim_trace::Trace, what: &str) -> pmsim_check::Verdict {
    let ok = crash_every(trace.clone(), "baseline", Config::default(), None);
    assert!(ok.images > 0 && ok.failures.is_empty(), "{what}: {:?}", ok.failures.first());
    let r = crash_every(trace, "broken-baseline-no-sfence-stall", Config::default(), None);
    let v = r.failures.into_iter().find_map(|f| f.verdict);
    let v = v.unwrap_or_else(|| panic!("{what}: not caught in {} images", r.images));
    assert!(v.consistent && !v.durable, "{what}: {v:?}");
    v
}

#[test]
fn a_fence_that_returns_before_its_flush_persists_is_caught() {
    for fence in ["sfence", "mfence", "rmw 0x100002000 8 1", "release 0x100002000"] {
        let text = format!(
            "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\n\
             T0 store 0x100000080 8 2\nT0 clwb 0x100000080\nT0 {fence}\n"
        );
        let trace = pmsim_trace::text::parse_str("t", &text).unwrap();
        assert_eq!(trace.dialect(), pmsim_trace::Dialect::X86);
        let v = passes_baseline_but_not_its_early_sfence(trace, fence);
        let name = fence.split(' ').next().unwrap();
        let last = v.violations[0].path.last().map(|s| s.kind);
        assert!(last == Some("sfence") || last == Some(name), "{fence}: {:?}", v.violations[0]);
    }
}

/// Another thread's store that performed before a flush's time in the run is captured by the
/// flush, whatever the trace's line order, and a completed fence of the flushing thread bounds
/// when its later flush executed (flushes are ordered after fences). Both shapes were passed by
/// the checker for the broken baseline (a tester's finding): the store's word is initial after
/// the flusher's sfence completed.
#[test]
fn a_flush_captures_what_performed_before_its_bound_in_the_run() {
    let shapes = [
        // T1's store performs before T2's, so before T2's clflush (ordered after T2's store),
        // though it comes after the clflush in the trace's lines.
        "threads 3\nT2 store 0x100000020 8 0101010101010101\nT2 clflush 0x100000080\n\
         T1 store 0x1000000bc 4 02020202\nT2 sfence\n",
        // T0's mfence completes after T1's store performed; T0's clflushopt follows the mfence.
        "threads 2\nT0 sfence\nT1 store 0x100000040 8 0101010101010101\nT0 acquire 0x100000100\n\
         T0 mfence\nT0 clflushopt 0x100000040\nT0 sfence\n",
    ];
    for body in shapes {
        let trace = pmsim_trace::text::parse_str("t", &format!("# pmsim trace v1\n{body}")).unwrap();
        passes_baseline_but_not_its_early_sfence(trace, body);
    }
}

#[test]
fn a_non_temporal_store_is_durable_at_its_threads_next_sfence_under_every_design() {
    // x86 persists a PM ntstore at the thread's next sfence, as a flushed line: every design
    // must map that sfence to a durability point (HOPS and ASAP once took only a flush to mean
    // it; a tester's finding), and the checker demands it under either reading of the fences.
    let mut s = String::from("# pmsim trace v1\nthreads 2\n");
    for i in 0..8u64 {
        writeln!(s, "T0 ntstore {:#x} 8 {:x}\nT0 sfence", 0x1_0000_0000u64 + 64 * i, i + 1).unwrap();
        writeln!(s, "T1 ntstore {:#x} 8 {:x}\nT1 compute 50\nT1 sfence", 0x1_0001_0040u64 + 128 * i, i + 1).unwrap();
    }
    let trace = pmsim_trace::text::parse_str("nt", &s).unwrap();
    for d in ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
        for model in [None, Some(Model::X86)] {
            let r = crash_every(trace.clone(), d, Config::default(), model);
            assert!(r.images > 0 && r.failures.is_empty(), "{d} {model:?}: {:?}", r.failures.first());
        }
    }
    // A baseline whose sfence does not wait for the write-combining buffer is caught under the
    // RP reading of the fences too, not only under x86: the sfence demands durability.
    let r = crash_every(trace, "broken-baseline-no-sfence-stall", Config::default(), Some(Model::Rp));
    assert!(!r.failures.is_empty(), "not caught in {} images", r.images);
}

/// A trace that mixes `ofence`/`dfence` with `clwb; sfence` is design-neutral, yet HOPS, ASAP,
/// delegated and BROI still map its sfence-after-flush to a dfence: the check holds them to that
/// (a tester's finding: the ASAP whose epochs commit before their ACKs passed such a trace, and
/// was caught only when the sfence was spelled `dfence`). The baseline runs the sfence
/// literally and is held only to what it flushed.
#[test]
fn a_mixed_traces_sfence_is_read_as_each_design_maps_it() {
    // Each sfence follows a clwb of one of the three lines its thread wrote in two epochs (so
    // ASAP flushes the second early): under the dfence reading all must be durable when it
    // completes; the baseline flushes only the first.
    let mixed = |fence: &str| {
        let mut s = String::from("# pmsim trace v1\nthreads 1\nT0 ofence\n");
        for i in 0..8u64 {
            let a = 0x1_0000_0000u64 + 64 * i;
            let v = i + 1;
            writeln!(s, "T0 store {a:#x} 8 {v:x}\nT0 ofence\nT0 store {:#x} 8 {v:x}", a + 0x1000).unwrap();
            writeln!(s, "T0 store {:#x} 8 {v:x}\nT0 clwb {a:#x}\nT0 {fence}", a + 0x2040).unwrap();
        }
        let trace = pmsim_trace::text::parse_str("mixed", &s).unwrap();
        assert_eq!(trace.dialect(), pmsim_trace::Dialect::Neutral);
        trace
    };
    for fence in ["dfence", "sfence", "mfence"] {
        for d in ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
            let r = crash_every(mixed(fence), d, Config::default(), None);
            assert!(r.images > 0 && r.failures.is_empty(), "{d} {fence}: {:?}", r.failures.first());
        }
        let r = crash_every(mixed(fence), "broken-asap-rp-commit-before-ack", Config::default(), None);
        let v = r.failures.into_iter().find_map(|f| f.verdict);
        let v = v.unwrap_or_else(|| panic!("{fence}: not caught in {} images", r.images));
        assert!(!v.durable, "{fence}: {v:?}");
        // The violation names the fence as written.
        assert_eq!(v.violations[0].path.last().map(|p| p.kind), Some(fence), "{v:?}");
    }
}

/// `clflush` (unlike `clflushopt`/`clwb`) is ordered with later writes: a line flushed by it
/// reaches the persistence domain before any later store of the thread becomes visible, so
/// `st x; clflush x; st y` never persists y without x, with no fence at all (a tester's
/// finding: the x86 model read it as weakly as clflushopt, and the baseline let later stores
/// pass). Forty flushes queue at one MC; the last store goes to the other, idle one.
#[test]
fn a_clflush_orders_the_threads_later_stores_after_its_line() {
    let trace = |flush: &str| {
        let mut s = String::from("# pmsim trace v1\nthreads 1\n");
        for i in 0..40u64 {
            let a = 0x1_0000_0000u64 + 64 * i;
            writeln!(s, "T0 store {a:#x} 8 {:x}\nT0 {flush} {a:#x}", i + 1).unwrap();
        }
        s.push_str("T0 store 0x100001000 8 63\nT0 clflush 0x100001000\n");
        pmsim_trace::text::parse_str("clflush", &s).unwrap()
    };
    let ok = crash_every(trace("clflush"), "baseline", Config::default(), Some(Model::X86));
    assert!(ok.images > 0 && ok.failures.is_empty(), "{:?}", ok.failures.first());
    // A baseline whose later stores do not wait for the clflush is caught, by the clflush rule.
    let r = crash_every(trace("clflush"), "broken-baseline-no-sfence-stall", Config::default(), Some(Model::X86));
    let v = r.failures.into_iter().find_map(|f| f.verdict);
    let v = v.unwrap_or_else(|| panic!("not caught in {} images", r.images));
    assert!(!v.consistent, "{v:?}");
    assert!(v.violations[0].path.iter().any(|p| p.kind == "clflush"), "{v:?}");
    // clflushopt promises no such order: the same run is consistent without a fence.
    let r = crash_every(trace("clflushopt"), "broken-baseline-no-sfence-stall", Config::default(), Some(Model::X86));
    assert!(r.failures.is_empty(), "{:?}", r.failures.first());
    // The persist-buffer designs take each clflush as an ofence, so a program ordering by
    // clflush alone (libpmem without clflushopt, no sfence) keeps its order under them too; they
    // once ran it unordered (a tester's finding).
    // Twenty lines of MC 0, then twenty of MC 1, through slow one-entry WPQs: unordered, MC 1's
    // lines persist while MC 0's older ones still wait.
    let two_mcs = || {
        let mut s = String::from("# pmsim trace v1\nthreads 1\n");
        for i in 0..40u64 {
            let a = 0x1_0000_0000u64 + 64 * (i % 20) + 4096 * (i / 20);
            writeln!(s, "T0 store {a:#x} 8 {:x}\nT0 clflush {a:#x}", i + 1).unwrap();
        }
        s.push_str("T0 store 0x100002000 8 63\nT0 clflush 0x100002000\n");
        pmsim_trace::text::parse_str("clflush", &s).unwrap()
    };
    let mut slow = Config::default();
    slow.set("mc.wpq_entries", "1").unwrap();
    slow.set("pm.write_gbps", "0.2").unwrap();
    for design in ["hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
        let r = crash_every(two_mcs(), design, slow.clone(), Some(Model::X86));
        assert!(r.images > 10 && r.failures.is_empty(), "{design}: {:?}", r.failures.first());
        let st = pmsim_engine::simulate(&Arc::new(two_mcs()), &slow, design).unwrap();
        assert_eq!(st.design_stats["clflush_as_ofence"], 41.0, "{design}");
    }
}

/// A locked instruction (`rmw`, `release`) is an x86 fence point: the thread's earlier flushes
/// and non-temporal stores are persistent when it performs, and order its later stores. HOPS,
/// ASAP, delegated and BROI once mapped only `sfence`/`mfence` so and failed `--model x86` on
/// these (a tester's finding); a slow, one-entry WPQ keeps the flushed lines in flight.
#[test]
fn a_locked_instruction_after_flushes_is_a_durability_point_under_every_design() {
    let shapes = [
        "T0 store 0x100000000 8 1\nT0 store 0x100002000 8 1\nT0 store 0x100004000 8 1\nT0 clwb 0x100000000\n\
         T0 clwb 0x100002000\nT0 clwb 0x100004000\nT0 rmw 0x2000 8 1\nT0 store 0x100001000 8 2\n\
         T0 clwb 0x100001000\nT0 sfence\n",
        "T0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 release 0x100003000\nT0 compute 2000\n",
        "T0 ntstore 0x100000000 8 1\nT0 ntstore 0x100002000 8 1\nT0 rmw 0x2000 8 1\nT0 store 0x100001000 8 2\n\
         T0 compute 2000\n",
    ];
    let mut cfg = Config::default();
    cfg.set("mc.wpq_entries", "1").unwrap();
    cfg.set("pm.write_gbps", "0.01").unwrap();
    for body in shapes {
        let trace = pmsim_trace::text::parse_str("t", &format!("# pmsim trace v1\nthreads 1\n{body}")).unwrap();
        for d in ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
            let r = crash_every(trace.clone(), d, cfg.clone(), Some(Model::X86));
            assert!(r.images > 0 && r.failures.is_empty(), "{d} on\n{body}: {:?}", r.failures.first());
        }
    }
}

/// The EP/RP reading of a legacy trace holds a design to the durability a locked instruction
/// after flushes gives (the designs mapping x86 fences take it as a dfence): a baseline whose
/// locked instruction does not wait for the flushes before it is caught there, under that
/// reading as under x86.
#[test]
fn a_locked_instruction_after_flushes_is_checked_as_a_durability_point() {
    let mut s = String::from("# pmsim trace v1\nthreads 1\n");
    for i in 0..8u64 {
        let a = 0x1_0000_0000u64 + 64 * i;
        writeln!(s, "T0 store {a:#x} 8 {:x}\nT0 clwb {a:#x}\nT0 rmw 0x2000 8 {:x}\nT0 compute 500", i + 1, i + 1)
            .unwrap();
    }
    let trace = pmsim_trace::text::parse_str("locked", &s).unwrap();
    assert_eq!(trace.dialect(), pmsim_trace::Dialect::X86);
    for d in ["baseline", "eadr", "bbb", "hops-ep", "hops-rp", "asap-ep", "asap-rp", "delegated", "broi"] {
        for model in [None, Some(Model::Ep), Some(Model::Rp)] {
            let r = crash_every(trace.clone(), d, Config::default(), model);
            assert!(r.images > 0 && r.failures.is_empty(), "{d} {model:?}: {:?}", r.failures.first());
        }
    }
    let r = crash_every(trace, "broken-baseline-no-sfence-stall", Config::default(), Some(Model::Ep));
    let v = r.failures.into_iter().find_map(|f| f.verdict);
    let v = v.unwrap_or_else(|| panic!("not caught in {} images", r.images));
    assert!(!v.durable, "{v:?}");
    assert_eq!(v.violations[0].path.last().map(|p| p.kind), Some("rmw"), "{v:?}");
}

/// A store another thread read is visible to it: that thread's later flush of the line and its
/// fence make the store persistent (an outside tester's independent checker found the x86
/// rule counting only the flushing thread's stores and fences as its accesses, so a load in
/// their place left the flush covering nothing).
#[test]
fn a_load_makes_what_it_read_visible_to_the_threads_later_flush() {
    let trace = |between: &str| {
        let s = format!(
            "# pmsim trace v1\nthreads 2\nT0 store 0x100000000 8 1\nT1 compute 2000\n{between}\
             T1 clwb 0x100000000\nT1 sfence\n"
        );
        pmsim_trace::text::parse_str("load-flush", &s).unwrap()
    };
    for between in ["T1 load 0x100000000 8\n", "T1 load 0x100000008 8\n"] {
        let ok = crash_every(trace(between), "baseline", Config::default(), Some(Model::X86));
        assert!(ok.images > 0 && ok.failures.is_empty(), "{between}: {:?}", ok.failures.first());
        let r = crash_every(trace(between), "broken-baseline-no-sfence-stall", Config::default(), Some(Model::X86));
        let v = r.failures.into_iter().find_map(|f| f.verdict);
        let v = v.unwrap_or_else(|| panic!("{between}: not caught in {} images", r.images));
        assert!(!v.durable, "{v:?}");
    }
}

/// The check by a mapping design's own promise (no `--model`) reads a `clflush` as the designs
/// run it, an ofence after it, so a design that let later stores pass it is caught there too,
/// not only under `--model x86` (before, only x86 held them to it).
#[test]
fn a_design_whose_clflush_orders_nothing_fails_its_own_promise() {
    // As in the test above: twenty lines of MC 0, twenty of MC 1, slow one-entry WPQs; no fence.
    let mut s = String::from("# pmsim trace v1\nthreads 1\n");
    for i in 0..40u64 {
        let a = 0x1_0000_0000u64 + 64 * (i % 20) + 4096 * (i / 20);
        writeln!(s, "T0 store {a:#x} 8 {:x}\nT0 clflush {a:#x}", i + 1).unwrap();
    }
    let trace = || pmsim_trace::text::parse_str("clflush", &s).unwrap();
    let mut slow = Config::default();
    slow.set("mc.wpq_entries", "1").unwrap();
    slow.set("pm.write_gbps", "0.2").unwrap();
    let ok = crash_every(trace(), "hops-rp", slow.clone(), None);
    assert!(ok.images > 10 && ok.failures.is_empty(), "{:?}", ok.failures.first());
    let r = crash_every(trace(), "broken-hops-rp-clflush-unordered", slow, None);
    let v = r.failures.into_iter().find_map(|f| f.verdict);
    let v = v.unwrap_or_else(|| panic!("not caught in {} images", r.images));
    assert!(!v.consistent, "{v:?}");
}
