//! Scenario tests of the persist-buffer designs, written as text traces (ASAP paper §III–VI).

use pmsim_engine::machine::{DesignEv, Machine, Note};
use pmsim_engine::{design, simulator, Config, RunStats, Simulator};
use pmsim_trace::text::parse_str;
use std::sync::Arc;

fn sim(src: &str, design: &str, cfg: &Config) -> Simulator {
    let t = Arc::new(parse_str("test.trace", src).unwrap());
    let mut s = simulator(&t, cfg, design, true, false).unwrap();
    s.enable_log();
    s.run().unwrap();
    s
}

fn notes<'a>(s: &'a Simulator, what: &'a str, line: u64) -> impl Iterator<Item = &'a Note> + 'a {
    s.m.log.as_ref().unwrap().iter().filter(move |n| n.what.starts_with(what) && n.line == line)
}

const X: u64 = 0x1_0000_0000; // MC 0
const Y: u64 = 0x1_0000_1000; // MC 1 (4 KiB interleaving)

/// Fig 1: epoch 2 (to MC 1) waits for epoch 1's ACK (from MC 0) under conservative flushing,
/// and is flushed before it under eager flushing.
#[test]
fn fig1_eager_flushing_overlaps_epochs_across_mcs() {
    let src = format!("# pmsim trace v1\nthreads 1\nT0 store {X:#x} 8 1\nT0 ofence\nT0 store {Y:#x} 8 2\nT0 dfence\n");
    for (d, eager) in [("asap-ep", true), ("asap-rp", true), ("hops-ep", false), ("hops-rp", false)] {
        let s = sim(&src, d, &Config::default());
        let ack_x = notes(&s, "ack", X).next().unwrap().time;
        let flush_y = notes(&s, "flush", Y).next().unwrap();
        if eager {
            assert!(flush_y.time < ack_x, "{d}: epoch 2 flushed at {} before epoch 1's ACK at {ack_x}", flush_y.time);
            assert_eq!(flush_y.what, "flush-early", "{d}");
        } else {
            assert!(flush_y.time >= ack_x, "{d}: epoch 2 flushed at {} before epoch 1's ACK at {ack_x}", flush_y.time);
        }
        assert_eq!(s.m.nvm_word(Y).unwrap().data, 2, "{d}");
        assert_eq!(s.m.nvm_word(X).unwrap().data, 1, "{d}");
    }
}

/// Fig 5: three threads write one address under epoch persistency. An early flush finds no undo
/// record and creates one (memory updated speculatively); a later-arriving early flush finds it
/// and is delayed; commits apply them in dependency order and NVM ends with the value of the
/// last store in coherence order (in this run T0, T2, T1: A=3 arrives before A=2, as in Fig 5).
#[test]
fn fig5_write_collision_uses_undo_and_delay_records() {
    let src = format!(
        "# pmsim trace v1\nthreads 3\nT0 store {X:#x} 8 1\nT1 store {X:#x} 8 2\nT2 store {X:#x} 8 3\nT0 dfence\nT1 dfence\nT2 dfence\n"
    );
    let s = sim(&src, "asap-ep", &Config::default());
    let undo: Vec<&Note> = notes(&s, "undo", X).collect();
    let delay: Vec<&Note> = notes(&s, "delay", X).collect();
    assert!(!undo.is_empty(), "an early flush to A created an undo record");
    assert!(!delay.is_empty(), "a colliding early flush created a delay record");
    assert!(delay[0].time > undo[0].time);
    // The last store to A in coherence order is what NVM must hold.
    let last =
        s.m.record
            .as_ref()
            .unwrap()
            .accesses
            .iter()
            .rev()
            .find(|a| a.word == X && a.kind == pmsim_trace::Access::Store)
            .unwrap();
    let w = s.m.nvm_word(X).unwrap();
    assert_eq!(w.id, last.gid);
    // Thread k wrote k+1 and its store is gid k.
    assert_eq!(w.data, last.gid + 1);
    let st = RunStats::collect(&s);
    assert!(st.design_stats["undo_records"] >= 1.0 && st.design_stats["delay_records"] >= 1.0);
}

fn final_nvm(
    w: &str,
    design: &str,
    cfg: &Config,
    params: &[(&str, &str)],
) -> (Vec<(u64, pmsim_trace::WordVal)>, RunStats) {
    let mut p = std::collections::BTreeMap::new();
    for (k, v) in params {
        p.insert(k.to_string(), v.to_string());
    }
    let t = Arc::new(pmsim_workloads::generate(w, &p).unwrap().trace);
    let mut s = simulator(&t, cfg, design, true, false).unwrap();
    s.run().unwrap();
    let mut words: Vec<_> = s.m.nvm.words().map(|(w, id)| (w, s.m.values.val(w, id))).collect();
    words.sort_unstable_by_key(|x| x.0);
    (words, RunStats::collect(&s))
}

/// §V-D: a recovery table of one record NACKs early flushes; the PB falls back to safe flushes and
/// the run completes with the same NVM contents.
#[test]
fn tiny_recovery_table_nacks_and_still_completes() {
    for d in ["asap-ep", "asap-rp"] {
        let params = [("threads", "4"), ("ops", "150")];
        let (full, a) = final_nvm("dash-eh", d, &Config::default(), &params);
        let mut tiny = Config::default();
        tiny.rt.entries = 1;
        let (small, b) = final_nvm("dash-eh", d, &tiny, &params);
        assert!(b.design_stats["nacks"] > 0.0, "{d}: no NACKs with a 1-record table");
        assert_eq!(a.design_stats["nacks"], 0.0, "{d}: NACKs with the default table");
        assert!(b.design_stats["rt_occupancy_max"] <= 1.0);
        assert_eq!(full, small, "{d}: final NVM differs");
    }
}

/// §V-C: the ET records the MCs that took early flushes so that commits go only where records
/// may be. An early flush NACKed by a full recovery table left nothing at its MC (its retry goes
/// safe), so an epoch whose only early flush to an MC was NACKed sends that MC no commit: every
/// commit message needs an accepted early flush (tester I's I6; the old build sent 3 commits for
/// 2 accepted early flushes here).
#[test]
fn a_nacked_early_flush_gets_no_commit_message() {
    let src = format!(
        "# pmsim trace v1\nthreads 1\nT0 store {X:#x} 8 1\nT0 store {:#x} 8 1\nT0 store {:#x} 8 1\n\
         T0 store {:#x} 8 1\nT0 ofence\nT0 store {Y:#x} 8 2\nT0 ofence\nT0 store {:#x} 8 3\nT0 ofence\n\
         T0 store {Y:#x} 8 4\nT0 dfence\n",
        X + 0x40,
        X + 0x80,
        X + 0xc0,
        X + 0x100
    );
    let mut cfg = Config::default();
    cfg.set("mc.wpq_entries", "1").unwrap();
    cfg.set("rt.entries", "1").unwrap();
    let st = RunStats::collect(&sim(&src, "asap-ep", &cfg));
    let ds = &st.design_stats;
    assert!(ds["nacks"] >= 1.0, "no NACK: {ds:?}");
    assert!(ds["commit_messages"] <= ds["early_flushes"] - ds["nacks"], "{ds:?}");
}

/// §VI-A: forward progress with the smallest buffers, every workload, 8 threads.
#[test]
fn forward_progress_with_tiny_buffers() {
    for w in pmsim_workloads::names() {
        for d in ["asap-ep", "asap-rp", "hops-ep", "hops-rp", "bbb"] {
            for size in [1usize, 2] {
                let mut c = Config::default();
                c.pb.entries = size;
                c.et.entries = size;
                c.rt.entries = size;
                let mut p = std::collections::BTreeMap::new();
                p.insert("threads".to_string(), "8".to_string());
                p.insert("ops".to_string(), "25".to_string());
                let t = Arc::new(pmsim_workloads::generate(w, &p).unwrap().trace);
                let mut s = simulator(&t, &c, d, false, false).unwrap();
                if let Err(e) = s.run() {
                    panic!("{w} under {d} with buffers of {size}: {e}");
                }
                let st = RunStats::collect(&s);
                assert_eq!(st.events as usize, t.num_events(), "{w} {d} {size}");
            }
        }
    }
}

/// A design that never completes a dfence: the watchdog reports the stuck core instead of hanging.
struct NeverDurable;

impl design::Design for NeverDurable {
    fn name(&self) -> &'static str {
        "never-durable"
    }
    fn promise(&self) -> design::Promise {
        design::Promise::Ep
    }
    fn fence_blocks_core(&self, k: pmsim_trace::Kind) -> bool {
        k == pmsim_trace::Kind::Dfence
    }
    fn on_store(&mut self, _m: &mut Machine, _c: usize, _s: &design::PmStore) {}
    fn on_fence(&mut self, _m: &mut Machine, _c: usize, k: pmsim_trace::Kind, _g: u64) -> design::Step {
        if k == pmsim_trace::Kind::Dfence {
            design::Step::Wait(pmsim_engine::machine::StallCause::Dfence)
        } else {
            design::Step::Done
        }
    }
    fn on_flush(&mut self, _m: &mut Machine, _c: usize, _k: pmsim_trace::Kind, _l: u64) -> design::Step {
        design::Step::Done
    }
    fn on_llc_evict(&mut self, _m: &mut Machine, _l: u64, _d: bool) {}
    fn on_event(&mut self, _m: &mut Machine, _e: DesignEv) {}
    fn busy(&self, _m: &Machine) -> bool {
        false
    }
    fn crash_writes(&self, _m: &Machine, _o: &mut Vec<pmsim_engine::mem::nvm::LineData>) {}
    fn stats(&self, _m: &Machine, _o: &mut design::DesignStats) {}
    fn describe_core(&self, c: usize) -> String {
        format!("never-durable core {c} holds its dfence")
    }
}

#[test]
fn watchdog_reports_a_stuck_core() {
    let t = Arc::new(
        parse_str("t", &format!("# pmsim trace v1\nthreads 2\nT0 store {X:#x} 8 1\nT0 dfence\nT1 compute 10\n"))
            .unwrap(),
    );
    let mut s = Simulator::new(
        &Config::default(),
        Box::new(NeverDurable),
        t.pm.clone(),
        pmsim_trace::VecSource::all(&t),
        vec![],
        false,
    )
    .unwrap();
    let e = s.run().unwrap_err().to_string();
    assert!(
        e.contains("stuck") && e.contains("core 0") && e.contains("dfence") && e.contains("holds its dfence"),
        "{e}"
    );
    assert!(!e.contains("core 1"), "core 1 finished: {e}");
}

/// Fig 13: one thread of ordered 256 B writes alternating across two MCs. Eager flushing keeps
/// both MCs busy; conservative flushing waits one round trip per block.
#[test]
fn fig13_eager_flushing_uses_both_mcs() {
    let run = |d: &str| final_nvm("bandwidth", d, &Config::default(), &[("threads", "1"), ("ops", "1500")]).1;
    let (hops, asap) = (run("hops-rp"), run("asap-rp"));
    let speedup = hops.sim_time_ns / asap.sim_time_ns;
    assert!(speedup > 1.3, "ASAP {speedup:.2}x HOPS");
    let bw = |s: &RunStats| s.mcs.iter().map(|m| m.write_bandwidth_gbps).sum::<f64>();
    let media = 2.0 * Config::default().pm.write_gbps;
    assert!(bw(&asap) > 0.9 * media, "ASAP reaches the media bandwidth: {:.2} of {media}", bw(&asap));
    assert!(bw(&hops) < 0.75 * media, "HOPS leaves bandwidth unused: {:.2} of {media}", bw(&hops));
    assert!(asap.design_stats["early_flushes"] > 0.5 * asap.pm_stores as f64 / 4.0);
    assert!(hops.design_stats["flush_stall_pct"] > 50.0);
}

/// An early flush that creates an undo record is acknowledged when the record takes it
/// (`rt.early_ack=accept`, the default: the record is in the ADR domain) or only after the PM read
/// of the old line returned (`after_read`). Either way the undo read is made, memory ends with the
/// epoch's value, and the dfence waits for the read (the commit needs the write in the WPQ).
#[test]
fn early_flush_ack_waits_for_the_undo_read_only_when_asked() {
    let src = format!("# pmsim trace v1\nthreads 1\nT0 store {X:#x} 8 1\nT0 ofence\nT0 store {Y:#x} 8 2\nT0 dfence\n");
    let c = Config::default();
    let mut ack_delay = Vec::new();
    for policy in ["accept", "after_read"] {
        let mut cfg = c.clone();
        cfg.rt.early_ack = policy.into();
        let s = sim(&src, "asap-rp", &cfg);
        let flush_y = notes(&s, "flush-early", Y).next().unwrap().time;
        let ack_y = notes(&s, "ack", Y).next().unwrap().time;
        assert_eq!(notes(&s, "undo", Y).count(), 1, "{policy}");
        assert_eq!(s.m.nvm_word(Y).unwrap().data, 2, "{policy}");
        let st = RunStats::collect(&s);
        assert_eq!(st.design_stats["undo_pm_reads"], 1.0, "{policy}");
        assert!(st.sim_time_ns >= c.pb.flush_ns + c.pm.read_ns, "{policy}: the dfence waited for the undo read");
        ack_delay.push((ack_y - flush_y) as f64 / 1000.0);
    }
    assert_eq!(ack_delay[0], c.pb.flush_ns + c.noc.hop_ns, "accept: flush there, ACK back");
    assert!(ack_delay[1] >= c.pb.flush_ns + c.pm.read_ns + c.noc.hop_ns, "after_read: {ack_delay:?}");
}

/// Legacy x86 traces (design §3): designs that order with persist buffers ignore the flushes and
/// take `sfence` as a durability point, and say how often in their statistics.
#[test]
fn legacy_sfence_and_flushes_are_mapped_and_counted() {
    let src = format!(
        "# pmsim trace v1\nthreads 1\nT0 store {X:#x} 8 1\nT0 clwb {X:#x}\nT0 sfence\n\
         T0 store {Y:#x} 8 2\nT0 clflushopt {Y:#x}\nT0 mfence\nT0 sfence\n"
    );
    // HOPS/ASAP map only an sfence/mfence that follows a flush; delegated/BROI map every one.
    for (d, mapped) in [("asap-rp", 2.0), ("hops-ep", 2.0), ("delegated", 3.0), ("broi", 3.0)] {
        let s = sim(&src, d, &Config::default());
        let st = RunStats::collect(&s);
        assert_eq!(st.design_stats["clwb_ignored"], 2.0, "{d}");
        assert_eq!(st.design_stats["sfence_as_dfence"], mapped, "{d}");
        assert_eq!(st.pm_writes, 2, "{d}: both lines reach the media");
    }
}

/// A trace with more threads than `core.count` raises the machine's core count, and every
/// design must see the raised count too (delegated and BROI once sized their per-core state by
/// the configured count and panicked on core 4 of an 8-thread trace).
#[test]
fn more_threads_than_configured_cores_run_under_every_design() {
    let mut src = String::from("# pmsim trace v1\nthreads 8\n");
    for t in 0..8u64 {
        src.push_str(&format!(
            "T{t} store {:#x} 8 1\nT{t} ofence\nT{t} store {:#x} 8 2\nT{t} dfence\n",
            X + 64 * t,
            Y + 64 * t
        ));
    }
    let t = Arc::new(parse_str("eight.trace", &src).unwrap());
    let cfg = Config::default();
    assert!(cfg.core.count < 8);
    for d in design::DESIGNS {
        let s = pmsim_engine::simulate(&t, &cfg, d.name).unwrap_or_else(|e| panic!("{}: {e}", d.name));
        assert_eq!(s.threads, 8, "{}", d.name);
        assert_eq!(s.pm_stores, 16, "{}", d.name);
    }
}

/// Tester W's W4: BBB sends its persist buffer's entries whatever the WPQ's room, so with a
/// buffer larger than the WPQ the backlog waits at the MC, where a line's later writes once
/// got entries of their own instead of merging: a larger buffer made this store stream up to
/// 44% slower, with more media writes. A larger buffer holds more, and never costs time or
/// media writes here.
#[test]
fn a_larger_persist_buffer_never_slows_a_store_stream() {
    let mut src = String::from("# pmsim trace v1\nthreads 1\n");
    for i in 0..400u64 {
        src.push_str(&format!("T0 store {:#x} 8 {:x}\n", 0x1_0000_0000u64 + (i % 20) * 64, i + 1));
    }
    let t = Arc::new(parse_str("stream.trace", &src).unwrap());
    let mut last: Option<(u64, f64, u64)> = None;
    for entries in [8, 16, 32, 64] {
        let mut cfg = Config::default();
        cfg.pb.entries = entries;
        let s = pmsim_engine::simulate(&t, &cfg, "bbb").unwrap();
        let writes: u64 = s.mcs.iter().map(|m| m.pm_writes).sum();
        if let Some((e, time, w)) = last {
            assert!(s.sim_time_ns <= time, "pb.entries {entries}: {} ns, {e}: {time} ns", s.sim_time_ns);
            assert!(writes <= w, "pb.entries {entries}: {writes} media writes, {e}: {w}");
        }
        last = Some((entries as u64, s.sim_time_ns, writes));
    }
}
