//! The x86 persistency model (Px86) on hand-written traces: each rule with an image it allows
//! and one it forbids.

use pmsim_check::litmus::{event_time, global_order_record};
use pmsim_check::{Checker, EdgeRule, Model, Verdict, ViolationKind};
use pmsim_trace::{MemImage, Trace, WordVal};

const A: u64 = 0x1_0000_0000; // line 0
const B: u64 = 0x1_0000_0008; // line 0, another word
const G: u64 = 0x1_0000_0080; // line 2
const H: u64 = 0x1_0000_00c0; // line 3

fn trace(body: &str) -> Trace {
    pmsim_trace::text::parse_str("t", &format!("# pmsim trace v1\n{body}")).unwrap()
}

fn check(t: &Trace, words: &[(u64, u64)]) -> Verdict {
    let mut m = MemImage::new();
    for &(w, id) in words {
        m.set(w, WordVal { id, data: 0 });
    }
    Checker::new(t, &global_order_record(t), Model::X86).unwrap().check(&m, event_time(t.num_events() as u64))
}

#[test]
fn flushed_and_fenced_store_precedes_later_stores() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 clwb 0x100000000\nT0 sfence\nT0 store 0x100000080 8\n");
    assert!(check(&t, &[(A, 0), (G, 3)]).consistent);
    assert!(check(&t, &[(A, 0)]).consistent);
    let v = check(&t, &[(G, 3)]);
    assert!(!v.consistent);
    let rules: Vec<_> = v.violations[0].path.iter().map(|s| s.edge).collect();
    assert_eq!(rules, vec![Some(EdgeRule::Flush), Some(EdgeRule::Fence), None]);
}

#[test]
fn a_fence_without_a_flush_orders_nothing() {
    for body in [
        "T0 store 0x100000000 8\nT0 sfence\nT0 store 0x100000080 8\n",
        // flushed but never fenced
        "T0 store 0x100000000 8\nT0 clwb 0x100000000\nT0 store 0x100000080 8\n",
        // a flush of another line
        "T0 store 0x100000000 8\nT0 clwb 0x1000000c0\nT0 sfence\nT0 store 0x100000080 8\n",
        // the flush came before the store
        "T0 clwb 0x100000000\nT0 store 0x100000000 8\nT0 sfence\nT0 store 0x100000080 8\n",
    ] {
        let t = trace(&format!("threads 1\n{body}"));
        let last = t.num_events() as u64 - 1;
        assert!(check(&t, &[(G, last)]).consistent, "{body}");
    }
}

#[test]
fn mfence_rmw_and_release_are_fences_too() {
    for fence in ["mfence", "rmw 0x2000 8", "release 0x2000"] {
        let t = trace(&format!(
            "threads 1\nT0 store 0x100000000 8\nT0 clflushopt 0x100000000\nT0 {fence}\nT0 store 0x100000080 8\n"
        ));
        assert!(!check(&t, &[(G, 3)]).consistent, "{fence}");
        assert!(check(&t, &[(A, 0), (G, 3)]).consistent, "{fence}");
    }
}

#[test]
fn stores_to_one_line_persist_in_order() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 store 0x100000008 8\nT0 store 0x100000080 8\n");
    assert!(check(&t, &[(A, 0), (B, 1)]).consistent);
    assert!(check(&t, &[(A, 0)]).consistent);
    assert!(!check(&t, &[(B, 1)]).consistent); // B's line was written back without A
    assert!(check(&t, &[(G, 2)]).consistent); // other lines: unordered
}

#[test]
fn another_thread_flushing_after_synchronising_makes_the_store_persistent() {
    // T0 writes A and releases L; T1 acquires L, flushes A's line, fences, writes H.
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 release 0x2000\nT1 acquire 0x2000\n\
         T1 clwb 0x100000000\nT1 sfence\nT1 store 0x1000000c0 8\n",
    );
    assert!(check(&t, &[(A, 0), (H, 5)]).consistent);
    assert!(!check(&t, &[(H, 5)]).consistent);
}

#[test]
fn a_later_store_of_the_flushing_thread_in_a_synchronised_thread_requires_it() {
    // T0 flushes and fences A, then releases L; T1 acquires L and writes G.
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 clwb 0x100000000\nT0 sfence\nT0 release 0x2000\n\
         T1 acquire 0x2000\nT1 store 0x100000080 8\n",
    );
    assert!(!check(&t, &[(G, 5)]).consistent);
    assert!(check(&t, &[(A, 0), (G, 5)]).consistent);
    // without the synchronisation T1's store is unordered
    let u = trace("threads 2\nT0 store 0x100000000 8\nT0 clwb 0x100000000\nT0 sfence\nT1 store 0x100000080 8\n");
    assert!(check(&u, &[(G, 3)]).consistent);
}

#[test]
fn ntstore_is_persistent_at_the_next_fence() {
    let t = trace("threads 1\nT0 ntstore 0x100000000 8\nT0 sfence\nT0 store 0x100000080 8\n");
    assert!(!check(&t, &[(G, 2)]).consistent);
    assert!(check(&t, &[(A, 0), (G, 2)]).consistent);
}

/// DESIGN §5: a store is persistent once a flush of its line is followed by that thread's fence
/// and the fence has *completed*: from then on the image must hold it even if no later store is
/// visible. Before the fence completes nothing is promised.
#[test]
fn a_completed_fence_makes_what_was_flushed_before_it_durable() {
    for fence in ["sfence", "mfence", "rmw 0x2000 8", "release 0x2000"] {
        let t = trace(&format!("threads 1\nT0 store 0x100000000 8\nT0 clwb 0x100000000\nT0 {fence}\n"));
        let ck = Checker::new(&t, &global_order_record(&t), Model::X86).unwrap();
        let empty = MemImage::new();
        let before = ck.check(&empty, event_time(2) - 1);
        assert!(before.ok(), "{fence}: nothing is promised before the fence completes");
        let after = ck.check(&empty, event_time(2));
        assert!(after.consistent && !after.durable, "{fence}: {after:?}");
        let v = &after.violations[0];
        assert_eq!(
            (v.kind, v.dfence, v.missing.as_ref().map(|m| m.gid)),
            (ViolationKind::NotDurable, Some(2), Some(0))
        );
        let name = fence.split(' ').next().unwrap();
        assert!(v.to_string().contains(&format!("precedes completed {name} 2")), "{v}");
        let mut held = MemImage::new();
        held.set(A, WordVal { id: 0, data: 0 });
        assert!(ck.check(&held, event_time(2)).ok(), "{fence}");
    }
}

/// What a completed fence does not make durable: an unflushed store, a store after the flush, a
/// flush not yet fenced, another line; and another thread's store flushed by a thread that had
/// not synchronised with it (it may not have been visible to the flush).
#[test]
fn a_completed_fence_requires_only_what_was_flushed_before_it() {
    for body in [
        "T0 store 0x100000000 8\nT0 sfence\n",
        "T0 clwb 0x100000000\nT0 store 0x100000000 8\nT0 sfence\n",
        "T0 store 0x100000000 8\nT0 clwb 0x100000000\n",
        "T0 store 0x100000000 8\nT0 clwb 0x100000080\nT0 sfence\n",
        "T0 sfence\nT0 store 0x100000000 8\nT0 clwb 0x100000000\n",
    ] {
        let t = trace(&format!("threads 1\n{body}"));
        let ck = Checker::new(&t, &global_order_record(&t), Model::X86).unwrap();
        assert!(ck.check(&MemImage::new(), event_time(t.num_events() as u64)).ok(), "{body}");
    }
    // T1 flushes A's line after acquiring the lock T0 released after writing A: durable.
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 release 0x2000\nT1 acquire 0x2000\nT1 clwb 0x100000000\nT1 sfence\n",
    );
    let ck = Checker::new(&t, &global_order_record(&t), Model::X86).unwrap();
    let v = ck.check(&MemImage::new(), event_time(4));
    assert!(!v.durable && v.violations[0].dfence == Some(4), "{v:?}");
    assert!(ck.check(&MemImage::new(), event_time(3)).ok());
}

#[test]
fn model_is_named_x86() {
    assert_eq!(Model::from_name("x86"), Some(Model::X86));
    assert_eq!(Model::X86.name(), "x86");
}

#[test]
fn a_locked_rmw_orders_flushed_stores_but_not_its_own_unflushed_store() {
    // T0's rmw on a PM word (never flushed) and a later store to another line: the later store
    // may persist alone; the rmw fences only what was flushed before it.
    let t = trace("threads 1\nT0 rmw 0x100000000 8 1\nT0 store 0x100000080 8\n");
    assert!(check(&t, &[(G, 1)]).consistent);
    let u = trace(
        "threads 1\nT0 store 0x1000000c0 8\nT0 clwb 0x1000000c0\nT0 rmw 0x100000000 8 1\nT0 store 0x100000080 8\n",
    );
    assert!(!check(&u, &[(G, 3)]).consistent);
    assert!(check(&u, &[(H, 0), (G, 3)]).consistent);
}

/// A long x86 run: two threads each flush and fence hundreds of words (then rewrite half of them,
/// so superseded stores drop out of the sets), enough that the checker shares the sets of fence
/// points between the nodes after them. Each store's required set is written down here from
/// the rules alone; at the instant after every event, images that drop one store are checked
/// against "consistent iff no visible store requires the dropped one".
#[test]
fn shared_predecessor_sets_keep_every_verdict_of_a_long_run() {
    const N: u64 = 160;
    let w0 = |i: u64| 0x1_0000_1000 + i * 64 + (i % 8) * 8; // T0: one word per line
    let w1 = |i: u64| 0x1_0001_0000 + i * 64;
    let (x, y, v, z) = (0x1_0002_0000u64, 0x1_0002_0040u64, 0x1_0002_0008u64, 0x1_0002_0080u64);
    let mut body = String::from("threads 2\n");
    let mut gid = 0u64;
    let mut req: std::collections::BTreeMap<u64, Vec<u64>> = Default::default(); // store gid -> required gids
    let mut addr_of: std::collections::BTreeMap<u64, u64> = Default::default();
    let (mut f0, mut f1): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new()); // flushed and fenced so far
    let line = |body: &mut String, gid: &mut u64, s: &str| {
        body.push_str(s);
        body.push('\n');
        *gid += 1;
        *gid - 1
    };
    // store gid -> the sfence whose completion makes it durable
    let mut durable_after: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut flushed_store = |body: &mut String, gid: &mut u64, th: u8, a: u64, f: &mut Vec<u64>| {
        let g = line(body, gid, &format!("T{th} store {a:#x} 8"));
        req.insert(g, f.clone());
        addr_of.insert(g, a);
        line(body, gid, &format!("T{th} clwb {a:#x}"));
        let fence = line(body, gid, &format!("T{th} sfence"));
        durable_after.insert(g, fence);
        f.push(g);
        g
    };
    for pass in 0..2 {
        for i in 0..(if pass == 0 { N } else { N / 2 }) {
            flushed_store(&mut body, &mut gid, 0, w0(i), &mut f0);
            flushed_store(&mut body, &mut gid, 1, w1(i), &mut f1);
        }
    }
    let gx = flushed_store(&mut body, &mut gid, 0, x, &mut f0);
    let gy = line(&mut body, &mut gid, &format!("T0 store {y:#x} 8"));
    let gv = line(&mut body, &mut gid, &format!("T1 store {v:#x} 8"));
    line(&mut body, &mut gid, "T0 release 0x2000");
    line(&mut body, &mut gid, "T1 acquire 0x2000");
    let gz = line(&mut body, &mut gid, &format!("T1 store {z:#x} 8"));
    req.insert(gy, f0.clone()); // X was flushed and fenced before Y; Y's fence point did not have it
    let mut rv = f1.clone();
    rv.extend(req[&gx].iter().copied().chain([gx])); // V follows X on X's line
    req.insert(gv, rv);
    req.insert(gz, f1.iter().chain(&f0).copied().collect()); // through the release
    for (g, a) in [(gy, y), (gv, v), (gz, z)] {
        addr_of.insert(g, a);
    }
    let t = trace(&body);
    let checker = Checker::new(&t, &global_order_record(&t), Model::X86).unwrap();

    let mut dependents: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for (&s, r) in &req {
        for &d in r {
            dependents.entry(d).or_default().push(s);
        }
    }
    let stores: Vec<u64> = req.keys().copied().collect();
    let mut checked = 0;
    for now in 0..gid {
        let performed: Vec<u64> = stores.iter().copied().filter(|&s| s <= now).collect();
        let Some(&latest) = performed.last() else { continue };
        for drop in [latest, gx, gy, performed[(now as usize * 7) % performed.len()]] {
            if drop > now {
                continue;
            }
            // The image: the latest performed store of each word, but never `drop`.
            let mut shown: std::collections::BTreeMap<u64, u64> = Default::default();
            for &s in &performed {
                if s != drop {
                    shown.insert(addr_of[&s], s);
                }
            }
            let drop_lost = shown.get(&addr_of[&drop]).is_none_or(|&s| s < drop);
            let visible: std::collections::BTreeSet<u64> = shown.values().copied().collect();
            let expect = !drop_lost || !dependents.get(&drop).is_some_and(|ds| ds.iter().any(|d| visible.contains(d)));
            let words: Vec<(u64, u64)> = shown.iter().map(|(&a, &s)| (a, s)).collect();
            let mut m = MemImage::new();
            for &(a, s) in &words {
                m.set(a, WordVal { id: s, data: 0 });
            }
            let verdict = checker.check(&m, event_time(now));
            assert_eq!(verdict.consistent, expect, "at event {now}, store {drop} dropped");
            // Durable unless a completed sfence (gid <= now: performed by event_time(now)) made
            // the lost store persistent.
            let durable = !drop_lost || durable_after.get(&drop).is_none_or(|&f| f > now);
            assert_eq!(verdict.durable, durable, "at event {now}, store {drop} dropped: durability");
            checked += 1;
        }
    }
    assert!(checked > 2000);
}

/// A legacy trace checked against EP or RP (the promise of the designs other than `baseline` on
/// it) reads its `sfence`/`mfence` as those designs map them: a barrier, and a dfence when its
/// thread flushed a line since its previous one (docs/design.md §3).
#[test]
fn a_legacy_trace_under_ep_or_rp_reads_its_fences_as_the_designs_map_them() {
    for model in [Model::Ep, Model::Rp] {
        let check = |t: &Trace, words: &[(u64, u64)], at: u64| {
            let mut m = MemImage::new();
            for &(w, id) in words {
                m.set(w, WordVal { id, data: 0 });
            }
            Checker::new(t, &global_order_record(t), model).unwrap().check(&m, at)
        };
        // Without a flush the fence is a barrier only: G requires A, nothing must be durable.
        let t = trace("threads 1\nT0 store 0x100000000 8\nT0 sfence\nT0 store 0x100000080 8\nT0 clwb 0x1000000c0\n");
        assert!(!check(&t, &[(G, 2)], event_time(4)).consistent, "{model}");
        assert!(check(&t, &[], event_time(4)).ok(), "{model}");
        // After a flush (of any line, as the designs count it) it is a dfence: A must be durable
        // once the fence completed, and not before.
        let t = trace("threads 1\nT0 store 0x100000000 8\nT0 clwb 0x1000000c0\nT0 mfence\nT0 store 0x100000080 8\n");
        let v = check(&t, &[], event_time(2));
        assert!(v.consistent && !v.durable && v.violations[0].dfence == Some(2), "{model}: {v:?}");
        assert!(check(&t, &[], event_time(2) - 1).ok(), "{model}");
        assert!(check(&t, &[(A, 0)], event_time(3)).ok(), "{model}");
        // The flush counts once: the next fence without a new flush is a barrier only.
        let t = trace(
            "threads 1\nT0 clwb 0x100000000\nT0 sfence\nT0 store 0x100000000 8\nT0 sfence\nT0 store 0x100000080 8\n",
        );
        assert!(check(&t, &[], event_time(5)).ok(), "{model}");
        assert!(!check(&t, &[(G, 4)], event_time(5)).consistent, "{model}");
    }
}
