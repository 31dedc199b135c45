//! Property tests on random small traces: global-order prefixes are consistent, the incremental
//! checker agrees with checking from scratch, and the checker agrees with a brute-force
//! reference (tests/common) on random images, with in-order and jittered perform orders.

mod common;

use pmsim_check::litmus::{event_time, global_order_record};
use pmsim_check::{Checker, Model};
use pmsim_trace::{MemImage, RunRecord, Trace, WordVal, INITIAL_ID};
use proptest::prelude::*;

const PM: [u64; 4] = [0x1_0000_0000, 0x1_0000_0008, 0x1_0000_0010, 0x1_0000_1000];

fn line(op: u8, arg: u8) -> String {
    let pm = PM[(arg % 4) as usize];
    let sync = if arg.is_multiple_of(2) { 0x2000u64 } else { 0x1_0000_0040 };
    match op % 12 {
        0..=2 => format!("store {pm:#x} 8 1"),
        3 => "store 0x100000000 16 2".to_string(),
        4 | 5 => format!("load {pm:#x} 8"),
        6 => "ofence".to_string(),
        7 => "dfence".to_string(),
        8 => format!("acquire {sync:#x}"),
        9 => format!("release {sync:#x}"),
        10 => format!("rmw {sync:#x} 8 1"),
        _ => {
            if arg.is_multiple_of(2) {
                "store 0x2008 8 1".to_string()
            } else {
                "load 0x2008 8".to_string()
            }
        }
    }
}

fn build(threads: u8, ops: &[(u8, u8, u8)]) -> Trace {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for &(t, op, arg) in ops {
        s.push_str(&format!("T{} {}\n", t % threads, line(op, arg)));
    }
    pmsim_trace::text::parse_str("prop", &s).expect("generated trace parses")
}

/// Perform order = global order, except events are shifted by `jitter[gid]` (in units of
/// 1000 ps, may be negative); sync events keep their time so per-address sync order holds.
fn jittered(trace: &Trace, jitter: &[i8]) -> RunRecord {
    jittered_with(trace, jitter, 4)
}

/// As [`jittered`], stores shifted by `(jitter + store_bias) * 1500` ps: with a small bias a
/// store can also perform before earlier acquires and loads of its thread.
fn jittered_with(trace: &Trace, jitter: &[i8], store_bias: i64) -> RunRecord {
    let mut r = global_order_record(trace);
    // stores are delayed more (a store buffer), other accesses move either way
    let stores: std::collections::BTreeSet<u64> =
        r.accesses.iter().filter(|a| a.kind == pmsim_trace::Access::Store).map(|a| a.gid).collect();
    let shift = |gid: u64, time: u64| -> u64 {
        let j = jitter.get(gid as usize).copied().unwrap_or(0) as i64;
        let j = if stores.contains(&gid) { (j + store_bias) * 1500 } else { j * 700 };
        (time as i64 + j).max(1) as u64
    };
    let sync: std::collections::BTreeSet<u64> = r.syncs.iter().map(|s| s.gid).collect();
    for a in r.accesses.iter_mut() {
        if !sync.contains(&a.gid) {
            a.time = shift(a.gid, a.time);
        }
    }
    r.accesses.sort_by_key(|a| a.time);
    for d in r.dfences.iter_mut() {
        d.1 = shift(d.0, d.1);
    }
    r
}

fn stores_at(trace: &Trace, word: u64) -> Vec<u64> {
    let mut v = Vec::new();
    for s in &trace.threads {
        for e in &s.events {
            if e.kind.writes() && common::words(e.addr, e.size).contains(&word) {
                v.push(e.gid);
            }
        }
    }
    v.sort_unstable();
    v
}

fn all_words(trace: &Trace) -> Vec<u64> {
    let mut w: Vec<u64> = PM.to_vec();
    w.push(0x1_0000_0040);
    for s in &trace.threads {
        for e in &s.events {
            if e.kind.writes() && trace.is_pm(e.addr) {
                w.extend(common::words(e.addr, e.size));
            }
        }
    }
    w.sort_unstable();
    w.dedup();
    w
}

/// A word's image choice: initial, one of the stores that wrote it, or a bogus id.
fn pick(trace: &Trace, word: u64, choice: u8) -> u64 {
    let st = stores_at(trace, word);
    let k = choice as usize % (st.len() + 2);
    if k == 0 {
        INITIAL_ID
    } else if k <= st.len() {
        st[k - 1]
    } else if choice.is_multiple_of(7) {
        777 // not an event at all
    } else {
        INITIAL_ID
    }
}

fn ops() -> impl Strategy<Value = (u8, Vec<(u8, u8, u8)>)> {
    (2u8..=3, prop::collection::vec((0u8..3, 0u8..12, 0u8..8), 1..30))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn global_order_prefixes_are_consistent((threads, ops) in ops()) {
        let trace = build(threads, &ops);
        let rec = global_order_record(&trace);
        let n = trace.num_events() as u64;
        for model in Model::ALL {
            let ck = Checker::new(&trace, &rec, model).unwrap();
            let mut img = MemImage::new();
            for k in 0..n {
                let (t, i) = trace.global_order()[k as usize];
                let e = trace.threads[t as usize].events[i as usize];
                if e.kind.writes() && trace.is_pm(e.addr) {
                    for w in common::words(e.addr, e.size) {
                        img.set(w, WordVal { id: e.gid, data: 0 });
                    }
                }
                let v = ck.check(&img, event_time(k));
                prop_assert!(v.consistent && v.durable, "{model} prefix {k}: {:?}", v.violations);
                let later = ck.check(&img, event_time(n));
                prop_assert!(later.consistent, "{model} prefix {k} at end: {:?}", later.violations);
            }
        }
    }

    #[test]
    fn incremental_agrees_with_scratch(
        (threads, ops) in ops(),
        steps in prop::collection::vec((0u8..16, 0u8..16, 0u8..6), 1..40),
        jitter in prop::collection::vec(-4i8..4, 30),
        jit in any::<bool>(),
    ) {
        let trace = build(threads, &ops);
        let rec = if jit { jittered(&trace, &jitter) } else { global_order_record(&trace) };
        let words = all_words(&trace);
        for model in Model::ALL {
            let ck = Checker::new(&trace, &rec, model).unwrap();
            let mut inc = ck.incremental();
            let mut img = MemImage::new();
            let mut t = 0u64;
            for &(w, c, dt) in &steps {
                let word = words[w as usize % words.len()];
                let id = pick(&trace, word, c);
                inc.set_word(word, id);
                if id == INITIAL_ID { img.words.remove(&word); } else { img.set(word, WordVal { id, data: 0 }); }
                if dt == 5 { t = t.saturating_sub(3000); } else { t += dt as u64 * 700; }
                let a = inc.check(t);
                let b = ck.check(&img, t);
                prop_assert_eq!(a, b, "{} at t={}", model, t);
            }
        }
    }

    #[test]
    fn agrees_with_brute_force(
        (threads, ops) in ops(),
        choices in prop::collection::vec(0u8..16, 8),
        tfrac in 0u8..=10,
        jitter in prop::collection::vec(-4i8..4, 30),
        jit in any::<bool>(),
    ) {
        let trace = build(threads, &ops);
        let rec = if jit { jittered(&trace, &jitter) } else { global_order_record(&trace) };
        let words = all_words(&trace);
        let mut img = MemImage::new();
        for (i, &w) in words.iter().enumerate() {
            let id = pick(&trace, w, choices[i % choices.len()].wrapping_add(i as u8));
            if id != INITIAL_ID {
                img.set(w, WordVal { id, data: 0 });
            }
        }
        let t = event_time(trace.num_events() as u64 + 4) * tfrac as u64 / 10;
        for model in Model::ALL {
            let ck = Checker::new(&trace, &rec, model).unwrap();
            let v = ck.check(&img, t);
            let (c, d) = common::reference(&trace, &rec, model, &img, t);
            prop_assert_eq!((v.consistent, v.durable), (c, d), "{} t={} img={:?} v={:?}", model, t, img.sorted(), v.violations);
            if !v.consistent {
                prop_assert!(!v.violations.is_empty());
            }
            for viol in &v.violations {
                if let (Some(_), Some(_)) = (&viol.visible, &viol.missing) {
                    prop_assert!(!viol.path.is_empty(), "no path: {}", viol);
                }
            }
        }
    }
}

/// Long epochs over many words, as real records have (few fences, lock words, 4 threads): the
/// per-node sets outgrow `PRUNE_AT` and the per-epoch unions hold whole epochs, which is where
/// the closure's amortised pruning and the epoch unions that skip their own thread are used.
fn long_line(op: u8, arg: u8) -> String {
    let pm = 0x1_0000_0000u64 + (arg as u64 % 24) * 8;
    let sync = if arg.is_multiple_of(2) { 0x1000_0000u64 } else { 0x1_0000_0400 };
    match op % 40 {
        0..=19 => format!("store {pm:#x} 8 1"),
        20 | 21 => format!("store {:#x} 16 2", pm & !15), // 16-aligned: never crosses a line
        22..=26 => format!("load {pm:#x} 8"),
        27 => "ofence".to_string(),
        28 => "dfence".to_string(),
        29..=32 => format!("acquire {sync:#x}"),
        33..=35 => format!("release {sync:#x}"),
        36 => format!("rmw {sync:#x} 8 1"),
        37 => "store 0x10000008 8 1".to_string(),
        _ => "load 0x10000008 8".to_string(),
    }
}

fn long_ops() -> impl Strategy<Value = (u8, Vec<(u8, u8, u8)>)> {
    (2u8..=4, prop::collection::vec((0u8..4, 0u8..40, 0u8..48), 40..90))
}

fn build_long(threads: u8, ops: &[(u8, u8, u8)]) -> Trace {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for &(t, op, arg) in ops {
        s.push_str(&format!("T{} {}\n", t % threads, long_line(op, arg)));
    }
    pmsim_trace::text::parse_str("prop-long", &s).expect("generated trace parses")
}

/// The image of a run whose PM word stores performed by `t` persisted in perform order, the
/// first `pct` percent of them, with `holes` (indices into that prefix, wrapping) left out:
/// mostly consistent images, so the checker's sets decide rather than an early bogus id.
fn persisted_image(rec: &RunRecord, trace: &Trace, t: u64, pct: u8, holes: &[u8]) -> MemImage {
    let pm: Vec<&pmsim_trace::WordAccess> = rec
        .accesses
        .iter()
        .filter(|a| a.kind == pmsim_trace::Access::Store && trace.is_pm(a.word) && a.time <= t)
        .collect();
    let upto = pm.len() * pct.min(100) as usize / 100;
    let mut img = MemImage::new();
    for (i, a) in pm[..upto].iter().enumerate() {
        if !holes.iter().any(|&h| h as usize % upto == i) {
            img.set(a.word, WordVal { id: a.gid, data: 0 });
        }
    }
    img
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn long_epochs_agree_with_brute_force(
        (threads, ops) in long_ops(),
        jitter in prop::collection::vec(-4i8..4, 90),
        jit in 0u8..3,
        pct in 0u8..=100,
        holes in prop::collection::vec(any::<u8>(), 0..2),
        tfrac in 0u8..=10,
        choices in prop::collection::vec(0u8..16, 8),
    ) {
        let trace = build_long(threads, &ops);
        let rec = match jit {
            0 => global_order_record(&trace),
            1 => jittered(&trace, &jitter),
            _ => jittered_with(&trace, &jitter, 0),
        };
        let t_end = event_time(trace.num_events() as u64 + 4);
        // Six instants spread over the run (offset by `tfrac`), each with its own image.
        let instants: Vec<u64> = (0..6).map(|k| t_end * (10 * k + tfrac as u64) / 60).collect();
        let images: Vec<MemImage> = instants.iter().map(|&t| persisted_image(&rec, &trace, t, pct, &holes)).collect();
        // And arbitrary images: each word initial or any store that wrote it.
        let words = all_words(&trace);
        let mut arbitrary = MemImage::new();
        for (i, &w) in words.iter().enumerate() {
            let id = pick(&trace, w, choices[i % choices.len()].wrapping_add(i as u8));
            if id != INITIAL_ID {
                arbitrary.set(w, WordVal { id, data: 0 });
            }
        }
        for model in Model::ALL {
            let ck = Checker::new(&trace, &rec, model).unwrap();
            for (&t, img) in instants.iter().zip(&images) {
                for img in [img, &arbitrary] {
                    let v = ck.check(img, t);
                    let (c, d) = common::reference(&trace, &rec, model, img, t);
                    prop_assert_eq!((v.consistent, v.durable), (c, d), "{} t={} v={:?}", model, t, v.violations);
                }
            }
            // The last image reached word by word, checked at increasing instants.
            let (t, img) = (instants[5], &images[5]);
            let mut inc = ck.incremental();
            let mut scratch = MemImage::new();
            for (i, (w, val)) in img.sorted().into_iter().enumerate() {
                inc.set_word(w, val.id);
                scratch.set(w, val);
                if i % 7 == 0 {
                    let ti = t * i as u64 / img.words.len().max(1) as u64;
                    prop_assert_eq!(inc.check(ti), ck.check(&scratch, ti), "{} at t={}", model, ti);
                }
            }
            prop_assert_eq!(inc.check(t), ck.check(img, t), "{} final", model);
        }
    }
}

/// Lock hand-offs only: PM stores, acquires, releases and rmws on two lock words, few fences.
fn build_sync_heavy(threads: u8, ops: &[(u8, u8, u8)]) -> Trace {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for &(t, op, arg) in ops {
        let pm = PM[(arg % 4) as usize];
        let lock = if arg < 4 { 0x2000u64 } else { 0x2008 };
        let l = match op % 12 {
            0..=4 => format!("store {pm:#x} 8 1"),
            5..=7 => format!("acquire {lock:#x}"),
            8 | 9 => format!("release {lock:#x}"),
            10 => format!("rmw {lock:#x} 8 1"),
            _ => "ofence".to_string(),
        };
        s.push_str(&format!("T{} {l}\n", t % threads));
    }
    pmsim_trace::text::parse_str("prop-sync", &s).expect("generated trace parses")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Exactness of the per-store requirement sets, probed one store at a time: at every event
    /// instant, the image holds every PM store performed so far except one (`x`), so it is
    /// consistent iff `x` (or an older store `x` shadows) precedes no visible store. Stores may
    /// perform before earlier acquires and loads of their thread (store bias 0), which is when
    /// the RP acquire rule cannot be built as a chain.
    #[test]
    fn single_hole_images_agree_with_brute_force(
        (threads, ops) in ops(),
        sync_heavy in any::<bool>(),
        jitter in prop::collection::vec(-4i8..4, 30),
        bias in 0i64..=4,
    ) {
        let trace = if sync_heavy { build_sync_heavy(threads, &ops) } else { build(threads, &ops) };
        let rec = jittered_with(&trace, &jitter, bias);
        let n = trace.num_events() as u64;
        for model in Model::ALL {
            let ck = Checker::new(&trace, &rec, model).unwrap();
            for k in 0..=n + 4 {
                let t = event_time(k);
                let full = persisted_image(&rec, &trace, t, 100, &[]);
                let gids: std::collections::BTreeSet<u64> = full.words.values().map(|v| v.id).collect();
                for &x in &gids {
                    let mut img = persisted_image(&rec, &trace, t, 100, &[]);
                    // x's words show what they showed before x persisted
                    for a in rec.accesses.iter().filter(|a| a.gid == x && a.kind == pmsim_trace::Access::Store) {
                        let prev = rec
                            .accesses
                            .iter()
                            .take_while(|b| !std::ptr::eq(*b, a))
                            .filter(|b| b.word == a.word && b.kind == pmsim_trace::Access::Store && b.gid != x)
                            .last();
                        match prev {
                            Some(b) => img.set(a.word, WordVal { id: b.gid, data: 0 }),
                            None => {
                                img.words.remove(&a.word);
                            }
                        }
                    }
                    let v = ck.check(&img, t);
                    let (c, d) = common::reference(&trace, &rec, model, &img, t);
                    prop_assert_eq!((v.consistent, v.durable), (c, d), "{} t={} without g{}: {:?}", model, t, x, v.violations);
                }
            }
        }
    }
}
