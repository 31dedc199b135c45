//! One test per persist-order rule (an image that passes and one that fails), plus violation
//! reports, record validation, and perform orders that differ from the global order.

use pmsim_check::litmus::{event_time, global_order_record};
use pmsim_check::{CheckError, Checker, EdgeRule, Model, Verdict, ViolationKind};
use pmsim_trace::{Access, MemImage, RunRecord, SyncPerform, Trace, WordAccess, WordVal, INITIAL_ID};

const A: u64 = 0x1_0000_0000;
const B: u64 = 0x1_0000_0008;
const F: u64 = 0x1_0000_0040;
const G: u64 = 0x1_0000_0080;

fn trace(body: &str) -> Trace {
    pmsim_trace::text::parse_str("t", &format!("# pmsim trace v1\n{body}")).unwrap()
}

fn img(words: &[(u64, u64)]) -> MemImage {
    let mut m = MemImage::new();
    for &(w, id) in words {
        m.set(w, WordVal { id, data: 0 });
    }
    m
}

fn end(t: &Trace) -> u64 {
    event_time(t.num_events() as u64)
}

fn check(t: &Trace, model: Model, words: &[(u64, u64)]) -> Verdict {
    Checker::new(t, &global_order_record(t), model).unwrap().check(&img(words), end(t))
}

#[test]
fn barrier_orders_epochs_of_one_thread() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000080 8\n");
    for m in [Model::Ep, Model::Rp] {
        assert!(check(&t, m, &[(A, 0), (G, 2)]).consistent);
        let v = check(&t, m, &[(G, 2)]);
        assert!(!v.consistent);
        let x = &v.violations[0];
        assert_eq!(x.kind, ViolationKind::MissingPredecessor);
        assert_eq!(x.missing.as_ref().map(|m| (m.gid, m.word, m.shows)), Some((0, A, None)));
        assert_eq!(x.visible.as_ref().map(|v| (v.gid, v.word)), Some((2, G)));
        assert_eq!(
            x.path.iter().map(|s| (s.gid, s.edge)).collect::<Vec<_>>(),
            vec![(0, Some(EdgeRule::Barrier)), (2, None)]
        );
    }
}

#[test]
fn stores_of_one_epoch_are_unordered_except_under_strict() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 store 0x100000080 8\n");
    assert!(check(&t, Model::Ep, &[(G, 1)]).consistent);
    assert!(check(&t, Model::Rp, &[(G, 1)]).consistent);
    let v = check(&t, Model::Strict, &[(G, 1)]);
    assert!(!v.consistent);
    assert_eq!(v.violations[0].path[0].edge, Some(EdgeRule::ProgramOrder));
}

#[test]
fn conflict_through_a_load_orders_across_threads_under_ep() {
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000040 8\nT1 load 0x100000040 8\nT1 ofence\nT1 store 0x100000080 8\n",
    );
    assert!(check(&t, Model::Ep, &[(A, 0), (F, 2), (G, 5)]).consistent);
    let v = check(&t, Model::Ep, &[(A, 0), (G, 5)]);
    assert!(!v.consistent);
    let rules: Vec<_> = v.violations[0].path.iter().map(|s| (s.gid, s.edge)).collect();
    assert_eq!(rules, vec![(2, Some(EdgeRule::Conflict)), (3, Some(EdgeRule::Barrier)), (5, None)]);
    // RP: loads order nothing across threads
    assert!(check(&t, Model::Rp, &[(G, 5)]).consistent);
}

#[test]
fn write_after_read_orders_the_reader_first() {
    let t = trace("threads 2\nT0 store 0x100000008 8\nT0 ofence\nT0 load 0x100000000 8\nT1 store 0x100000000 8\n");
    assert!(check(&t, Model::Ep, &[(B, 0), (A, 3)]).consistent);
    let v = check(&t, Model::Ep, &[(A, 3)]);
    assert!(!v.consistent);
    assert_eq!(v.violations[0].missing.as_ref().map(|m| m.gid), Some(0));
    assert!(check(&t, Model::Rp, &[(A, 3)]).consistent);
}

#[test]
fn release_acquire_orders_under_rp_only() {
    let t = trace("threads 2\nT0 store 0x100000000 8\nT0 release 0x2000\nT1 acquire 0x2000\nT1 store 0x100000080 8\n");
    assert!(check(&t, Model::Rp, &[(A, 0), (G, 3)]).consistent);
    let v = check(&t, Model::Rp, &[(G, 3)]);
    assert!(!v.consistent);
    let rules: Vec<_> = v.violations[0].path.iter().filter_map(|s| s.edge).collect();
    assert_eq!(rules, vec![EdgeRule::Release, EdgeRule::Sync, EdgeRule::Acquire]);
    assert!(check(&t, Model::Ep, &[(G, 3)]).consistent);
}

#[test]
fn spa_orders_same_word_stores_and_reports_shadowing() {
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000008 8\nT1 store 0x100000008 8\nT1 ofence\nT1 store 0x100000080 8\n",
    );
    for m in Model::ALL {
        assert!(check(&t, m, &[(A, 0), (B, 3), (G, 5)]).consistent, "{m}");
        let v = check(&t, m, &[(A, 0), (B, 2), (G, 5)]);
        assert!(!v.consistent, "{m}");
        let x = &v.violations[0];
        assert_eq!(x.kind, ViolationKind::Shadowed);
        assert_eq!(x.missing.as_ref().map(|m| (m.gid, m.shows)), Some((3, Some(2))));
    }
}

#[test]
fn transitivity_across_three_threads() {
    let t = trace(
        "threads 3\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000040 8\nT1 load 0x100000040 8\nT1 ofence\nT1 store 0x1000000c0 8\nT2 load 0x1000000c0 8\nT2 ofence\nT2 store 0x100000080 8\n",
    );
    assert!(check(&t, Model::Ep, &[(A, 0), (F, 2), (0x1_0000_00c0, 5), (G, 8)]).consistent);
    let v = check(&t, Model::Ep, &[(F, 2), (0x1_0000_00c0, 5), (G, 8)]);
    assert!(!v.consistent);
    assert!(v.violations.iter().any(|x| x.missing.as_ref().map(|m| m.gid) == Some(0)));
}

#[test]
fn dfence_durability_counts_only_completed_dfences() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 dfence\nT0 store 0x100000080 8\n");
    let ck = Checker::new(&t, &global_order_record(&t), Model::Ep).unwrap();
    let v = ck.check(&img(&[]), end(&t));
    assert!(v.consistent && !v.durable);
    assert_eq!(v.violations[0].kind, ViolationKind::NotDurable);
    assert_eq!(v.violations[0].dfence, Some(1));
    assert!(ck.check(&img(&[(A, 0)]), end(&t)).ok());
    // before the dfence completes nothing is required
    assert!(ck.check(&img(&[]), event_time(0)).ok());
}

#[test]
fn never_written_and_not_yet_performed_ids_are_violations() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000080 8\n");
    let ck = Checker::new(&t, &global_order_record(&t), Model::Ep).unwrap();
    for (words, at) in [
        (vec![(A, 2)], end(&t)),
        (vec![(A, 99)], end(&t)),
        (vec![(0x1_0000_1000, 0)], end(&t)),
        (vec![(A, 0), (G, 2)], event_time(1)),
    ] {
        let v = ck.check(&img(&words), at);
        assert!(!v.consistent, "{words:?}");
        assert_eq!(v.violations[0].kind, ViolationKind::NeverWritten);
    }
}

#[test]
fn incremental_follows_changes_and_time() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000080 8\n");
    let ck = Checker::new(&t, &global_order_record(&t), Model::Ep).unwrap();
    let mut inc = ck.incremental();
    inc.set_word(G, 2);
    assert!(!inc.check(event_time(1)).consistent); // g2 not performed yet
    assert!(!inc.check(event_time(2)).consistent); // g0 missing
    inc.set_word(A, 0);
    assert!(inc.check(event_time(2)).consistent);
    inc.clear_word(A);
    assert!(!inc.check(event_time(3)).consistent);
    inc.set_word(G, INITIAL_ID);
    assert!(inc.check(event_time(3)).consistent);
    inc.set_word(G, 2);
    assert!(!inc.check(event_time(0)).consistent); // time went back: rebuilt, g2 unperformed
}

/// A TSO-style run: T0's load after its fence performs before its earlier store; T1's store
/// to the loaded word comes in between. The barrier edge st A -> ld F points backwards in
/// perform order and only exists once st A performs; then it orders A (and, through SPA, T2's
/// earlier store to A) before T1's store through the write-after-read.
#[test]
fn backward_edges_from_store_buffer_reordering_are_exact() {
    let t = trace(
        "threads 3\nT0 store 0x100000000 8\nT0 ofence\nT0 load 0x100000040 8\nT1 store 0x100000040 8\nT2 store 0x100000000 8\n",
    );
    let w = |time, gid, thread, word, kind| WordAccess { time, gid, thread, word, kind };
    let rec = RunRecord {
        accesses: vec![
            w(1000, 2, 0, F, Access::Load { read: INITIAL_ID }),
            w(2000, 3, 1, F, Access::Store),
            w(2500, 4, 2, A, Access::Store),
            w(3000, 0, 0, A, Access::Store),
        ],
        syncs: vec![],
        dfences: vec![],
        fences: vec![],
    };
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    assert!(!ck.is_static(), "T2's store reaches ld F only through the late edge");
    // before st A performs, g3 has no persistent predecessor
    assert!(ck.check(&img(&[(F, 3)]), 2500).consistent);
    // after: st A -barrier-> ld F -conflict-> st F
    let v = ck.check(&img(&[(F, 3)]), 3000);
    assert!(!v.consistent);
    let rules: Vec<_> = v.violations[0].path.iter().map(|s| (s.gid, s.edge)).collect();
    assert_eq!(rules, vec![(0, Some(EdgeRule::Barrier)), (2, Some(EdgeRule::Conflict)), (3, None)]);
    // T2's g4 is required too: A showing g4 (older than g0) is not enough
    assert!(!ck.check(&img(&[(F, 3), (A, 4)]), 3000).consistent);
    assert!(ck.check(&img(&[(F, 3), (A, 0)]), 3000).consistent);
    let mut inc = ck.incremental();
    inc.set_word(F, 3);
    assert!(inc.check(2500).consistent);
    assert!(!inc.check(3000).consistent);
    inc.set_word(A, 4);
    assert!(!inc.check(3000).consistent);
    inc.set_word(A, 0);
    assert!(inc.check(3000).consistent);
}

/// RP's acquire rule on an epoch taking several locks is built as a chain through its acquires;
/// reported paths still name model edges only (acquire -> store, never acquire -> acquire).
#[test]
fn acquire_chain_paths_name_model_edges() {
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 release 0x2000\nT1 acquire 0x2000\nT1 acquire 0x2008\nT1 store 0x100000080 8\n",
    );
    assert!(check(&t, Model::Rp, &[(A, 0), (G, 4)]).consistent);
    let v = check(&t, Model::Rp, &[(G, 4)]);
    assert!(!v.consistent);
    let path: Vec<_> = v.violations[0].path.iter().map(|s| (s.gid, s.edge)).collect();
    assert_eq!(
        path,
        vec![(0, Some(EdgeRule::Release)), (1, Some(EdgeRule::Sync)), (2, Some(EdgeRule::Acquire)), (4, None)]
    );
}

/// The chain is exact only if no store performs before an earlier acquire of its epoch. Here
/// T1's second acquire performs after its store: at 4000 the store is performed and the first
/// acquire orders T0's store before it, though the second acquire (a chain link) is not.
#[test]
fn acquire_chain_falls_back_when_a_store_overtakes_an_acquire() {
    let t = trace(
        "threads 2\nT0 store 0x100000000 8\nT0 release 0x2000\nT1 acquire 0x2000\nT1 acquire 0x2008\nT1 store 0x100000080 8\n",
    );
    let sync = |time, gid, thread, addr| SyncPerform { time, gid, thread, addr };
    let rec = RunRecord {
        accesses: vec![
            WordAccess { time: 1000, gid: 0, thread: 0, word: A, kind: Access::Store },
            WordAccess { time: 3000, gid: 4, thread: 1, word: G, kind: Access::Store },
        ],
        syncs: vec![sync(1500, 1, 0, 0x2000), sync(2000, 2, 1, 0x2000), sync(5000, 3, 1, 0x2008)],
        dfences: vec![],
        fences: vec![],
    };
    let ck = Checker::new(&t, &rec, Model::Rp).unwrap();
    let v = ck.check(&img(&[(G, 4)]), 4000);
    assert!(!v.consistent);
    let path: Vec<_> = v.violations[0].path.iter().map(|s| (s.gid, s.edge)).collect();
    assert_eq!(
        path,
        vec![(0, Some(EdgeRule::Release)), (1, Some(EdgeRule::Sync)), (2, Some(EdgeRule::Acquire)), (4, None)]
    );
    assert!(ck.check(&img(&[(A, 0), (G, 4)]), 4000).consistent);
    let mut inc = ck.incremental();
    inc.set_word(G, 4);
    assert!(!inc.check(4000).consistent);
    inc.set_word(A, 0);
    assert!(inc.check(4500).consistent);
}

#[test]
fn bad_records_are_typed_errors() {
    let t = trace("threads 2\nT0 store 0x100000000 8\nT0 dfence\nT1 acquire 0x2000\n");
    let good = global_order_record(&t);
    let mut r = good.clone();
    r.accesses[0].gid = 42;
    assert!(matches!(
        Checker::new(&t, &r, Model::Ep),
        Err(CheckError::UnknownGid { list: "accesses", index: 0, gid: 42 })
    ));
    let mut r = good.clone();
    r.accesses[0].thread = 1;
    assert!(matches!(Checker::new(&t, &r, Model::Ep), Err(CheckError::ThreadMismatch { .. })));
    let mut r = good.clone();
    r.accesses[0].word = 0x1_0000_0010;
    assert!(matches!(Checker::new(&t, &r, Model::Ep), Err(CheckError::WordOutside { .. })));
    let mut r = good.clone();
    r.accesses[0].kind = Access::Load { read: 0 };
    assert!(matches!(Checker::new(&t, &r, Model::Ep), Err(CheckError::KindMismatch { .. })));
    let mut r = good.clone();
    r.accesses.push(r.accesses[0]);
    r.accesses.last_mut().unwrap().time = 1 << 40;
    assert!(matches!(Checker::new(&t, &r, Model::Ep), Err(CheckError::DuplicateStore { .. })));
    let mut r = good.clone();
    r.accesses.insert(0, WordAccess { time: 1 << 40, ..r.accesses[0] });
    assert!(matches!(Checker::new(&t, &r, Model::Ep), Err(CheckError::TimeNotMonotone { .. })));
    let mut r = good.clone();
    r.syncs[0].addr = 0x3000;
    assert!(matches!(Checker::new(&t, &r, Model::Rp), Err(CheckError::SyncAddr { .. })));
    let mut r = good.clone();
    r.dfences[0].0 = 0;
    let e = Checker::new(&t, &r, Model::Ep).err().unwrap();
    assert_eq!(e.to_string(), "record dfences[0]: gid 0 is a 'store' event, which cannot perform a dfence completion");
    // x86: fence completions name an sfence or mfence of the trace.
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 clwb 0x100000000\nT0 sfence\n");
    let good = global_order_record(&t);
    assert_eq!(good.fences, vec![(2, 3000)]);
    let mut r = good.clone();
    r.fences[0].0 = 1;
    let e = Checker::new(&t, &r, Model::X86).err().unwrap();
    assert_eq!(
        e.to_string(),
        "record fences[0]: gid 1 is a 'clwb' event, which cannot perform an sfence/mfence completion"
    );
    r.fences[0].0 = 9;
    assert!(matches!(
        Checker::new(&t, &r, Model::X86),
        Err(CheckError::UnknownGid { list: "fences", index: 0, gid: 9 })
    ));
}

#[test]
fn verdicts_serialise_with_rule_names() {
    let t = trace("threads 1\nT0 store 0x100000000 8\nT0 ofence\nT0 store 0x100000080 8\n");
    let v = check(&t, Model::Ep, &[(G, 2)]);
    let j = serde_json::to_string(&v).unwrap();
    assert!(j.contains("\"kind\":\"MissingPredecessor\"") && j.contains("\"edge\":\"barrier\""), "{j}");
    assert!(v.violations[0].to_string().contains("requires store 0"), "{}", v.violations[0]);
}

#[test]
fn model_names_round_trip() {
    for m in Model::ALL {
        assert_eq!(Model::from_name(m.name()), Some(m));
    }
    assert_eq!(Model::from_name("tso"), None);
}

/// Renumbers a trace's, record's and image's gids sparsely (gid -> gid * 1_000_003 + 7).
fn sparse(gid: u64) -> u64 {
    if gid == INITIAL_ID {
        gid
    } else {
        gid * 1_000_003 + 7
    }
}

#[test]
fn sparse_gid_numbering_gives_the_same_verdicts_and_errors() {
    // The graph indexes events by gid directly when gids are dense (as readers number them) and
    // through a map otherwise: both must decide alike.
    let dense =
        trace("threads 2\nT0 store 0x100000000 16\nT0 ofence\nT0 store 0x100000080 8\nT1 store 0x100000040 8\n");
    let mut t = dense.clone();
    for s in &mut t.threads {
        for e in &mut s.events {
            e.gid = sparse(e.gid);
        }
    }
    let mut r = global_order_record(&dense);
    for a in &mut r.accesses {
        a.gid = sparse(a.gid);
    }
    for images in [vec![(A, 0), (B, 0), (G, 2)], vec![(G, 2)], vec![(A, 0), (G, 2)], vec![(F, 3)]] {
        let want = check(&dense, Model::Ep, &images);
        let sparse_img: Vec<(u64, u64)> = images.iter().map(|&(w, id)| (w, sparse(id))).collect();
        let got = Checker::new(&t, &r, Model::Ep).unwrap().check(&img(&sparse_img), end(&dense));
        assert_eq!((got.consistent, got.durable), (want.consistent, want.durable), "image {images:?}");
        assert_eq!(
            got.violations.iter().map(|v| v.missing.as_ref().map(|m| m.gid)).collect::<Vec<_>>(),
            want.violations.iter().map(|v| v.missing.as_ref().map(|m| sparse(m.gid))).collect::<Vec<_>>()
        );
    }
    // Record errors name the same entries under either numbering.
    let mut bad = r.clone();
    bad.accesses[1].gid = 5;
    assert!(matches!(Checker::new(&t, &bad, Model::Ep), Err(CheckError::UnknownGid { index: 1, gid: 5, .. })));
    let mut bad = r.clone();
    bad.accesses.push(WordAccess { time: 1 << 40, ..bad.accesses[1] });
    assert!(matches!(Checker::new(&t, &bad, Model::Ep), Err(CheckError::DuplicateStore { word: B, .. })));
    let mut dup = t.clone();
    dup.threads[1].events[0].gid = dup.threads[0].events[2].gid;
    assert!(matches!(Checker::new(&dup, &r, Model::Ep), Err(CheckError::DuplicateGid { .. })));
}

#[test]
fn each_word_of_a_multi_word_store_is_recorded_once() {
    // A 16-byte store performs two words; recording either twice is an error, both once is not.
    let t = trace("threads 1\nT0 store 0x100000000 16\n");
    let good = global_order_record(&t);
    assert_eq!(good.accesses.len(), 2);
    assert!(Checker::new(&t, &good, Model::Ep).is_ok());
    for i in 0..2 {
        let mut r = good.clone();
        r.accesses.push(WordAccess { time: 1 << 40, ..r.accesses[i] });
        let word = r.accesses[i].word;
        assert!(
            matches!(Checker::new(&t, &r, Model::Ep), Err(CheckError::DuplicateStore { word: w, .. }) if w == word)
        );
    }
}

/// A load its store buffer forwarded (it reads its own thread's store while that store is not
/// the word's latest performed one) read nothing from memory: it orders nothing across threads.
#[test]
fn forwarded_load_orders_nothing_across_threads() {
    let w = |time, gid, thread, word, kind| WordAccess { time, gid, thread, word, kind };
    // T0: st F; st A; ofence; ld F (forwarded from g0).  T1: st F, performed between the load
    // and T0's st F; T2: st F, after T0's st F.
    let t = trace(
        "threads 3\nT0 store 0x100000040 8\nT0 store 0x100000000 8\nT0 ofence\nT0 load 0x100000040 8\n\
         T1 store 0x100000040 8\nT2 store 0x100000040 8\n",
    );
    let mut rec = RunRecord {
        accesses: vec![
            w(1000, 1, 0, A, Access::Store),
            w(2000, 3, 0, F, Access::Load { read: 0 }),
            w(3000, 4, 1, F, Access::Store),
            w(4000, 0, 0, F, Access::Store),
            w(5000, 5, 2, F, Access::Store),
        ],
        syncs: vec![],
        dfences: vec![],
        fences: vec![],
    };
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    // neither T1's store (performed after the load executed) nor T2's (after the store it read)
    // needs T0's st A
    assert!(ck.check(&img(&[(F, 4)]), 3500).consistent);
    assert!(ck.check(&img(&[(F, 5)]), 5000).consistent);
    // once T0's st F performed (at 1500), a load of it at 2000 reads memory: it precedes
    // T1's and T2's stores, and st A (before its ofence) with it
    rec.accesses.insert(1, w(1500, 0, 0, F, Access::Store));
    rec.accesses.retain(|a| !(a.gid == 0 && a.time == 4000));
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    let v = ck.check(&img(&[(F, 4)]), 3500);
    assert!(!v.consistent);
    let rules: Vec<_> = v.violations[0].path.iter().map(|s| (s.gid, s.edge)).collect();
    assert_eq!(rules, vec![(1, Some(EdgeRule::Barrier)), (3, Some(EdgeRule::Conflict)), (4, None)]);
    assert!(ck.check(&img(&[(A, 1), (F, 4)]), 3500).consistent);

    // T0: st F; st A; ofence; ld F.  T1's st F performs after T0's and before the load, which
    // still reads T0's store (from the store buffer, where it waits for the line): the load did
    // not see T1's store, so nothing of T0's follows it.
    let t = trace(
        "threads 2\nT0 store 0x100000040 8\nT0 store 0x100000000 8\nT0 ofence\nT0 load 0x100000040 8\n\
         T0 ofence\nT0 store 0x100000080 8\nT1 store 0x100000008 8\nT1 ofence\nT1 store 0x100000040 8\n",
    );
    let rec = RunRecord {
        accesses: vec![
            w(1000, 0, 0, F, Access::Store),
            w(1100, 1, 0, A, Access::Store),
            w(1200, 6, 1, B, Access::Store),
            w(1500, 8, 1, F, Access::Store),
            w(2000, 3, 0, F, Access::Load { read: 0 }),
            w(3000, 5, 0, G, Access::Store),
        ],
        syncs: vec![],
        dfences: vec![],
        fences: vec![],
    };
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    assert!(ck.check(&img(&[(A, 1), (F, 0), (G, 5)]), 3000).consistent);
    let mut rec = rec;
    rec.accesses[4].kind = Access::Load { read: 8 }; // read from memory: T1's B before G
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    assert!(!ck.check(&img(&[(A, 1), (F, 0), (G, 5)]), 3000).consistent);

    // A 16-byte load, one word forwarded from T0's st F, the other (F2) read from memory before
    // T2 stores to it. T1: st B; ofence; st F, performed before T0's st F. The load follows
    // nothing of T1's (it did not read T1's store), so T2's store needs nothing of T1 either.
    const F2: u64 = F + 8;
    let t = trace(
        "threads 3\nT1 store 0x100000008 8\nT1 ofence\nT1 store 0x100000040 8\n\
         T0 store 0x100000040 8\nT0 load 0x100000040 16\nT2 store 0x100000048 8\n",
    );
    let mut rec = RunRecord {
        accesses: vec![
            w(1000, 0, 1, B, Access::Store),
            w(1500, 4, 0, F, Access::Load { read: 3 }),
            w(1500, 4, 0, F2, Access::Load { read: INITIAL_ID }),
            w(2000, 2, 1, F, Access::Store),
            w(2500, 5, 2, F2, Access::Store),
            w(4000, 3, 0, F, Access::Store),
        ],
        syncs: vec![],
        dfences: vec![],
        fences: vec![],
    };
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    assert!(ck.check(&img(&[(F2, 5)]), 4000).consistent);
    // the same load reading T1's store from memory: st B -barrier-> st F -conflict-> ld
    // -conflict-> T2's st F2
    rec.accesses.retain(|a| a.gid != 4);
    rec.accesses.insert(2, w(2200, 4, 0, F, Access::Load { read: 2 }));
    rec.accesses.insert(3, w(2200, 4, 0, F2, Access::Load { read: INITIAL_ID }));
    let ck = Checker::new(&t, &rec, Model::Ep).unwrap();
    assert!(!ck.check(&img(&[(F2, 5)]), 4000).consistent);
}
