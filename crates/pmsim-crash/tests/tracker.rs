//! The incremental crash image equals the crash image built from scratch, at every instant the
//! persistent state changes, for every design.

use pmsim_engine::crash::{image, ImageTracker};
use pmsim_engine::{simulator, Config};
use std::sync::Arc;

#[test]
fn incremental_image_matches_full_image_everywhere() {
    for (w, ops) in [("echo", "60"), ("array", "40"), ("dash-eh", "30")] {
        let mut p = std::collections::BTreeMap::new();
        p.insert("ops".to_string(), ops.to_string());
        let t = Arc::new(pmsim_workloads::generate(w, &p).unwrap().trace);
        for d in ["baseline", "eadr", "bbb", "hops-ep", "asap-rp", "asap-ep"] {
            let mut sim = simulator(&t, &Config::default(), d, true, false).unwrap();
            let mut tr = ImageTracker::new();
            let mut ch = Vec::new();
            let mut seen = sim.m.persist_version;
            let mut checked = 0;
            while sim.step().unwrap() {
                if sim.m.persist_version == seen || sim.next_time() == Some(sim.m.now) {
                    continue;
                }
                seen = sim.m.persist_version;
                tr.update(&mut sim, &mut ch);
                let full = image(&sim);
                let mut a: Vec<_> =
                    full.sorted().into_iter().filter(|(_, v)| v.id != pmsim_trace::INITIAL_ID).collect();
                a.sort_unstable_by_key(|x| x.0);
                let mut b: Vec<_> = tr.words().iter().map(|(w, v)| (*w, *v)).collect();
                b.sort_unstable_by_key(|x| x.0);
                assert_eq!(a, b, "{w} {d} at {}", sim.m.now);
                checked += 1;
            }
            assert!(checked > 10, "{w} {d}: only {checked} instants");
        }
    }
}
