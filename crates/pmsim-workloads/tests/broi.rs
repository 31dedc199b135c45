//! The BROI seed's Table IV workloads: they generate, recover from their final image, the
//! hybrid mode adds one remote-style thread of sequential barrier regions, and recovery rejects
//! an image that lost durable operations.

use pmsim_trace::Kind;
use pmsim_workloads::{apply_store, generate, global_order_image};
use std::collections::BTreeMap;

const NAMES: [&str; 5] = ["hash", "rbtree", "sps", "btree", "ssca2"];

fn params(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn each_recovers_from_its_final_image_and_writes_pm() {
    for w in NAMES {
        let g = generate(w, &params(&[("ops", "300"), ("threads", "2"), ("footprint_kib", "64")])).unwrap();
        let img = global_order_image(&g.trace, u64::MAX);
        let rep = g.recovery.check(&img, &|_| true).unwrap_or_else(|e| panic!("{w}: {e}"));
        assert!(rep.durable_ops_checked > 50, "{w}: {rep:?}");
        let stores = g.trace.threads.iter().flat_map(|t| t.events.iter()).filter(|e| e.kind == Kind::Store).count();
        let ofences = g.trace.threads.iter().flat_map(|t| t.events.iter()).filter(|e| e.kind == Kind::Ofence).count();
        assert!(stores > 600 && ofences > 300, "{w}: {stores} stores, {ofences} ofences");
    }
}

#[test]
fn recovery_rejects_an_image_missing_durable_operations() {
    for w in NAMES {
        let g = generate(w, &params(&[("ops", "200"), ("threads", "2"), ("footprint_kib", "64")])).unwrap();
        let total: usize = g.trace.threads.iter().map(|t| t.events.len()).sum();
        // Half the stores in global order, but every dfence claimed complete.
        let img = global_order_image(&g.trace, (total / 2) as u64);
        assert!(g.recovery.check(&img, &|_| true).is_err(), "{w} accepted a truncated image");
    }
}

#[test]
fn hybrid_mode_adds_a_remote_stream_thread() {
    for w in NAMES {
        let local = generate(w, &params(&[("ops", "50"), ("threads", "2")])).unwrap();
        let hybrid =
            generate(w, &params(&[("ops", "50"), ("threads", "2"), ("remote_gap", "100"), ("remote_region", "512")]))
                .unwrap();
        assert_eq!(local.trace.threads.len(), 2);
        assert_eq!(hybrid.trace.threads.len(), 3, "{w}");
        let remote = &hybrid.trace.threads[2];
        let stores: Vec<u64> = remote.events.iter().filter(|e| e.kind == Kind::Store).map(|e| e.addr).collect();
        assert_eq!(stores.len(), 50 * 8, "{w}: 8 lines per 512 B region");
        assert!(stores.windows(2).all(|p| p[1] == p[0] + 64 || p[1] < p[0]), "{w}: sequential");
        assert_eq!(remote.events.iter().filter(|e| e.kind == Kind::Ofence).count(), 50);
        let img = global_order_image(&hybrid.trace, u64::MAX);
        hybrid.recovery.check(&img, &|_| true).unwrap();
    }
}

#[test]
fn footprint_scales_the_address_range() {
    let span = |fp: &str| {
        let g = generate("sps", &params(&[("ops", "400"), ("threads", "1"), ("footprint_kib", fp)])).unwrap();
        let a: Vec<u64> = g.trace.threads[0].events.iter().filter(|e| e.kind == Kind::Store).map(|e| e.addr).collect();
        a.iter().max().unwrap() - a.iter().min().unwrap()
    };
    assert!(span("4096") > 4 * span("256"));
}

/// Every crash instant of a run in its own order where every performed store survives (eADR):
/// after each PM store (a store split at a line boundary is two, so this includes every torn
/// undo-log entry whose first piece sits next to the stale tail of an older entry) recovery
/// must hold every operation whose dfence had completed. Regression: the undo log's checksum
/// depended on `txid ^ addr` only, so such a stale tail validated the torn entry and recovery
/// wrote its stale old value over durable data (`btree`, `ops=60`, 4 threads).
#[test]
fn every_crash_instant_recovers_with_every_performed_store_durable() {
    for (w, ops) in [("btree", "60"), ("hash", "40"), ("rbtree", "40")] {
        let g = generate(w, &params(&[("ops", ops)])).unwrap();
        let mut img = pmsim_trace::MemImage::new();
        let mut crashes = 0;
        for (th, i) in g.trace.global_order() {
            let ev = g.trace.threads[th as usize].events[i as usize];
            if !(ev.kind.writes() && g.trace.is_pm(ev.addr)) {
                continue;
            }
            // The crash just before this store: every event with a smaller gid was performed.
            g.recovery
                .check(&img, &|gid| gid < ev.gid)
                .unwrap_or_else(|e| panic!("{w}: crash before store gid {}: {e}", ev.gid));
            apply_store(&mut img, &g.trace, th as usize, i as usize);
            crashes += 1;
        }
        g.recovery.check(&img, &|_| true).unwrap_or_else(|e| panic!("{w}: final image: {e}"));
        assert!(crashes > 1000, "{w}: {crashes} crash instants");
    }
}
