//! `Instants::Every` is exhaustive: it checks the image at every instant at which the crash
//! image changes, whichever event of the instant changed it. Found wanting once: the sweep
//! noted a change but checked only when the instant's *last* event made it, so on banked NVM
//! (bank writes completing beside other events) `delegated` and `broi` were checked at 1 of
//! 8 instants and a broken variant passed. The oracle here is independent of the sweep: whole
//! images built from scratch at the end of every instant, compared with the previous one.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::crash::image;
use pmsim_engine::{simulator, Config, DESIGNS};
use std::sync::Arc;

/// `threads` threads, each `epochs` epochs of `stores` stores 2 KiB apart (a new bank, and
/// under the default interleaving another MC, for each; epochs 18 KiB apart, so each starts one
/// bank after the previous one and finds a bank the earlier epoch does not keep busy), epochs
/// split by `ofence`.
fn epochs_trace(threads: usize, epochs: usize, stores: usize) -> pmsim_trace::Trace {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for e in 0..epochs {
        for t in 0..threads {
            for k in 0..stores {
                let addr = 0x1_0000_0000u64 + (t as u64) * 0x10_0000 + (e as u64) * 0x4800 + (k as u64) * 0x800;
                s.push_str(&format!("T{t} store {addr:#x} 8 {:x}\n", e + 1));
            }
            s.push_str(&format!("T{t} ofence\n"));
        }
    }
    for t in 0..threads {
        s.push_str(&format!("T{t} dfence\n"));
    }
    pmsim_trace::text::parse_str("epochs.trace", &s).unwrap()
}

fn configs() -> Vec<(&'static str, Config)> {
    let mut banked = Config::default();
    banked.pm.model = "banked".into();
    banked.mc.count = 1;
    let mut tiny = banked.clone();
    tiny.bank.write_queue = 1;
    tiny.broi.entry_slots = 1;
    tiny.pb.entries = 1;
    vec![("default", Config::default()), ("banked", banked), ("banked, queues of 1", tiny)]
}

/// The instants at whose end the crash image differs from the one before.
fn changing_instants(trace: &Arc<pmsim_trace::Trace>, cfg: &Config, design: &str) -> Vec<u64> {
    let mut sim = simulator(trace, cfg, design, true, design.starts_with("broken-")).unwrap();
    let mut last = image(&sim).sorted();
    let mut out = Vec::new();
    loop {
        let more = sim.step().unwrap();
        if sim.next_time() != Some(sim.m.now) {
            let now = image(&sim).sorted();
            if now != last {
                out.push(sim.m.now);
                last = now;
            }
        }
        if !more {
            return out;
        }
    }
}

fn request(trace: &Arc<pmsim_trace::Trace>, cfg: &Config, design: &str, instants: Instants) -> Request<'static> {
    Request {
        trace: trace.clone(),
        design: design.to_string(),
        allow_broken: design.starts_with("broken-"),
        config: cfg.clone(),
        instants,
        model: None,
        recovery: None,
        replay_input: "--trace epochs.trace".into(),
        max_failures: 1000,
    }
}

#[test]
fn every_checks_each_instant_the_image_changes_under_every_design_and_memory() {
    let trace = Arc::new(epochs_trace(2, 6, 4));
    for (what, cfg) in configs() {
        for d in DESIGNS {
            let changes = changing_instants(&trace, &cfg, d.name);
            assert!(changes.len() >= 6, "{} on {what}: the image changed at only {} instants", d.name, changes.len());
            let r = run(&request(&trace, &cfg, d.name, Instants::Every)).unwrap();
            assert!(r.ok(), "{} on {what}: {:?}", d.name, r.failures.first());
            assert!(
                r.images >= changes.len() as u64,
                "{} on {what}: --every checked {} images, the image changed at {} instants",
                d.name,
                r.images,
                changes.len()
            );
            // Crashing exactly at those instants checks the same images.
            let at = run(&request(&trace, &cfg, d.name, Instants::At(changes))).unwrap();
            assert!(at.ok(), "{} on {what}: {:?}", d.name, at.failures.first());
        }
    }
}

#[test]
fn every_catches_a_broken_order_wherever_an_instant_shows_it() {
    let trace = Arc::new(epochs_trace(2, 6, 4));
    let mut violations = 0;
    for (what, cfg) in configs() {
        for broken in ["broken-broi-cross-barrier", "broken-asap-ep-no-delay"] {
            let changes = changing_instants(&trace, &cfg, broken);
            let at = run(&request(&trace, &cfg, broken, Instants::At(changes))).unwrap();
            let every = run(&request(&trace, &cfg, broken, Instants::Every)).unwrap();
            // Each instant whose image is inconsistent is found by both, whichever event made it.
            let bad = |r: &pmsim_crash::Report| r.failures.iter().map(|f| f.at_ps).collect::<Vec<_>>();
            for t in bad(&at) {
                assert!(bad(&every).contains(&t), "{broken} on {what}: --every missed the violation at {t} ps");
                violations += 1;
            }
        }
    }
    assert!(violations > 0, "no broken variant showed a violation: the comparison checked nothing");
    // Whether the broken BROI variant is caught at all is `broken.rs`'s question (on banked NVM:
    // without banks its picks enter the FIFO WPQ oldest first, so it is harmless there).
}

/// The end of every instant at which anything happens: a crash sweep denser than `Every`.
fn every_event_instant(trace: &Arc<pmsim_trace::Trace>, cfg: &Config, design: &str) -> Vec<u64> {
    let mut sim = simulator(trace, cfg, design, false, design.starts_with("broken-")).unwrap();
    let mut out = Vec::new();
    while sim.step().unwrap() {
        if sim.next_time() != Some(sim.m.now) {
            out.push(sim.m.now);
        }
    }
    out.push(sim.m.now);
    out
}

#[test]
fn every_fails_exactly_when_a_crash_after_any_event_fails() {
    // Between two instants `Every` checks, neither the image nor what must be durable changes;
    // so it fails iff crashing after each event of the run finds a failure. An early dfence
    // (the baseline without its sfence stall) shows only between the dfence's completion and
    // its store's persist, where the image stands still: `Every` missed it once.
    let dfence = "# pmsim trace v1\nthreads 1\nT0 store 0x100000000 8 1\nT0 dfence\n";
    let chain = "# pmsim trace v1\nthreads 4\nT0 store 0x100000100 8 a0\nT0 ofence\nT0 rmw 0x100000000 8 1\n\
                 T0 store 0x100000140 8 a1\nT1 rmw 0x100000000 8 2\nT1 store 0x100000180 8 b0\nT1 ofence\n\
                 T1 release 0x100000040 8 1\nT2 acquire 0x100000040\nT2 store 0x1000001c0 8 c0\n\
                 T2 rmw 0x100000000 8 3\nT2 ofence\nT2 store 0x100000200 8 c1\nT3 rmw 0x100000000 8 4\n\
                 T3 store 0x100000240 8 d0\nT3 dfence\n";
    let traces = [
        ("store+dfence", Arc::new(pmsim_trace::text::parse_str("d.trace", dfence).unwrap())),
        ("rmw chain", Arc::new(pmsim_trace::text::parse_str("c.trace", chain).unwrap())),
        ("epochs", Arc::new(epochs_trace(2, 3, 2))),
    ];
    let mut failed_somewhere = 0;
    for (what, trace) in &traces {
        for (mem, cfg) in configs() {
            for d in pmsim_engine::design::BROKEN.iter().map(|d| d.name).chain(DESIGNS.iter().map(|d| d.name)) {
                let dense = every_event_instant(trace, &cfg, d);
                let at = run(&request(trace, &cfg, d, Instants::At(dense))).unwrap();
                let every = run(&request(trace, &cfg, d, Instants::Every)).unwrap();
                assert_eq!(
                    every.ok(),
                    at.ok(),
                    "{d} on {what}, {mem}: --every says ok={}, a crash after each event says ok={} ({:?})",
                    every.ok(),
                    at.ok(),
                    at.failures.first().map(|f| f.at_ps)
                );
                failed_somewhere += !at.ok() as usize;
            }
        }
    }
    // The comparison means something only if some broken variant fails somewhere.
    assert!(failed_somewhere >= 3, "only {failed_somewhere} runs failed");
}

#[test]
fn every_crashes_where_a_late_store_adds_to_a_visible_stores_requirements() {
    // Tester O's shape: under strict persistency a load performs before its thread's earlier
    // store (TSO), so T1's store to the loaded line follows T0's store X (program order to the
    // load, then the conflict) though X performs last. T0's first load makes the line hot; X's
    // line is cold, so X performs at the end of its miss, well after T1's store reached the
    // image. Only at X's perform instant does the image lack the store's predecessor: nothing
    // in the image changes and no dfence completes then, so `Every` must crash at that perform
    // instant too. Whatever fails after any event must then fail at the last instant `Every`
    // checked before it.
    let text = "# pmsim trace v1\nthreads 2\nT0 load 0x100002000 8\nT0 store 0x100000000 8 3\n\
                T0 load 0x100002000 8\nT1 compute 900\nT1 store 0x100002000 8 5\n";
    let trace = Arc::new(pmsim_trace::text::parse_str("late.trace", text).unwrap());
    let cfg = Config::default();
    let strict =
        |instants| Request { model: Some(pmsim_check::Model::Strict), ..request(&trace, &cfg, "hops-ep", instants) };
    let dense = every_event_instant(&trace, &cfg, "hops-ep");
    let at = run(&strict(Instants::At(dense.clone()))).unwrap();
    let every = run(&strict(Instants::Every)).unwrap();
    let failing: Vec<u64> = at.failures.iter().map(|f| f.at_ps).collect();
    let every_failing: Vec<u64> = every.failures.iter().map(|f| f.at_ps).collect();
    assert!(!failing.is_empty(), "the trace no longer shows the late store: the test checks nothing");
    for &t in &failing {
        let s = every_failing.iter().copied().filter(|&s| s <= t).max();
        let s =
            s.unwrap_or_else(|| panic!("a crash at {t} ps fails; --every fails nowhere before it ({every_failing:?})"));
        // Between s and t every crash fails too (else `Every` skipped a change of verdict).
        let between: Vec<u64> = dense.iter().copied().filter(|&d| d >= s && d <= t).collect();
        assert!(between.iter().all(|d| failing.contains(d)), "{t}: --every's last failure before it is {s}");
    }
}
