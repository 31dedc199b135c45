//! The seed-2 queues (`cwl`, `2lc`): every variant recovers on final and mid-run images, a head
//! that covers an incomplete entry is caught, and barriers, strands and MCS lock operations fall
//! where Algorithm 1 puts them.

use pmsim_trace::{Kind, Trace};
use pmsim_workloads::{generate, global_order_image, Generated};
use std::collections::BTreeMap;

const VARIANTS: [&str; 4] = ["strict", "epoch", "racing", "strand"];

fn gen(q: &str, variant: &str, threads: u64, ops: u64) -> Generated {
    let mut p = BTreeMap::new();
    for (k, v) in [("variant", variant.to_string()), ("threads", threads.to_string()), ("ops", ops.to_string())] {
        p.insert(k.to_string(), v);
    }
    generate(q, &p).unwrap_or_else(|e| panic!("{q} {variant}: {e}"))
}

fn count(t: &Trace, k: Kind) -> usize {
    t.threads.iter().flat_map(|s| &s.events).filter(|e| e.kind == k).count()
}

#[test]
fn every_variant_recovers_every_insert_from_the_final_image() {
    for q in ["cwl", "2lc"] {
        for v in VARIANTS {
            let g = gen(q, v, 4, 50);
            let rep = g.recovery.check(&global_order_image(&g.trace, u64::MAX), &|_| true).unwrap();
            assert_eq!((rep.items, rep.durable_ops_checked), (200, 200), "{q} {v}");
            // Before the final dfences nothing is promised durable.
            let rep = g.recovery.check(&global_order_image(&g.trace, u64::MAX), &|_| false).unwrap();
            assert_eq!(rep.durable_ops_checked, 0);
        }
    }
}

#[test]
fn prefix_images_recover() {
    for q in ["cwl", "2lc"] {
        for v in VARIANTS {
            let g = gen(q, v, 3, 40);
            let n = g.trace.num_events() as u64;
            let mut last_items = 0;
            for cut in (0..=n).step_by(7) {
                let rep = g.recovery.check(&global_order_image(&g.trace, cut), &|_| false);
                let rep = rep.unwrap_or_else(|e| panic!("{q} {v} cut {cut}: {e}"));
                assert!(rep.items >= last_items, "{q} {v}: head went back");
                last_items = rep.items;
            }
        }
    }
}

#[test]
fn a_head_covering_an_incomplete_entry_is_caught() {
    for q in ["cwl", "2lc"] {
        let g = gen(q, "epoch", 2, 20);
        let mut img = global_order_image(&g.trace, u64::MAX);
        // Lose the last word the copy of some covered entry wrote (its data never persisted).
        let data_store = g
            .trace
            .threads
            .iter()
            .flat_map(|s| &s.events)
            .filter(|e| e.kind == Kind::Store && g.trace.is_pm(e.addr) && e.size >= 8)
            .nth(30)
            .copied()
            .unwrap();
        img.words.remove(&(data_store.addr & !7));
        let e = g.recovery.check(&img, &|_| true).unwrap_err().to_string();
        assert!(e.contains("covers slot") || e.contains("lost"), "{q}: {e}");
    }
}

#[test]
fn barriers_and_strands_follow_algorithm_1() {
    let ops = 30;
    // CWL: epoch 5 barriers per insert, racing 3, strand 5 plus one strand; strict adds one per
    // persistent store (7 copy stores of 16 B for 108 B, and head).
    let per = |q: &str, v: &str, k: Kind| count(&gen(q, v, 1, ops).trace, k) as u64;
    assert_eq!(per("cwl", "epoch", Kind::Ofence), 5 * ops);
    assert_eq!(per("cwl", "racing", Kind::Ofence), 3 * ops);
    assert_eq!(per("cwl", "strand", Kind::Ofence), 5 * ops);
    assert_eq!(per("cwl", "strand", Kind::Strand), ops);
    assert_eq!(per("cwl", "epoch", Kind::Strand), 0);
    assert_eq!(per("cwl", "strict", Kind::Ofence), (5 + 8) * ops);
    // Every insert takes and releases its MCS lock with two rmws on the lock word.
    assert_eq!(per("cwl", "epoch", Kind::Rmw), 2 * ops);
    // 2LC: two locks; the seed puts no barriers around them, so epoch and racing are one trace.
    assert_eq!(gen("2lc", "epoch", 4, 20).trace, gen("2lc", "racing", 4, 20).trace);
    assert_eq!(per("2lc", "epoch", Kind::Rmw), 4 * ops);
    assert_eq!(per("2lc", "strand", Kind::Strand), ops);
}

#[test]
fn two_lock_inserts_complete_out_of_order() {
    // With phases interleaved, some inserts find an older insert still in flight and leave the
    // head persist to it: fewer head stores than inserts.
    let g = gen("2lc", "epoch", 4, 100);
    let hdr = g
        .trace
        .threads
        .iter()
        .flat_map(|s| &s.events)
        .find(|e| e.kind == Kind::Store && g.trace.is_pm(e.addr) && e.size == 8 && e.has_value && e.data == 128)
        .map(|e| e.addr)
        .expect("a first head store of one 128 B slot");
    let heads =
        g.trace.threads.iter().flat_map(|s| &s.events).filter(|e| e.kind == Kind::Store && e.addr == hdr).count();
    assert!(heads < 400 && heads > 100, "{heads} head stores for 400 inserts");
}

#[test]
fn bad_variant_is_named() {
    let mut p = BTreeMap::new();
    p.insert("variant".to_string(), "relaxed".to_string());
    let e = generate("cwl", &p).err().unwrap().to_string();
    assert!(e.contains("'variant' = 'relaxed'") && e.contains("strict, epoch, racing, strand"), "{e}");
}
