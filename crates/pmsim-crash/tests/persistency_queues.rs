//! The seed-2 queues under the designs that promise the models their variants are written for:
//! every crash image passes the checker and the queue's own recovery (head covers only complete
//! entries; durable inserts present). The strict variant (a barrier after every persistent store)
//! and the epoch, racing and strand variants under epoch persistency (`asap-ep`) and release
//! persistency (`asap-rp`; racing epochs order heads through the locks), and all under `eadr`.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::Config;
use std::sync::Arc;

fn crash(q: &str, variant: &str, design: &str) {
    let mut p = std::collections::BTreeMap::new();
    for (k, v) in [("ops", "40"), ("threads", "4"), ("variant", variant)] {
        p.insert(k.to_string(), v.to_string());
    }
    let g = pmsim_workloads::generate(q, &p).unwrap();
    let req = Request {
        trace: Arc::new(g.trace),
        design: design.to_string(),
        allow_broken: false,
        config: Config::default(),
        instants: Instants::Random { n: 150, seed: 5 },
        model: None,
        recovery: Some(&*g.recovery),
        replay_input: format!("--workload {q} -p ops=40 -p threads=4 -p variant={variant}"),
        max_failures: 1,
    };
    let r = run(&req).unwrap();
    assert!(r.images >= 100, "{q} {variant} {design}: {} images", r.images);
    assert!(
        r.ok(),
        "{q} {variant} under {design}: {:?} / {:?} ({})",
        r.failures[0].verdict.as_ref().and_then(|v| v.violations.first().map(|x| x.to_string())),
        r.failures[0].recovery_error,
        r.failures[0].replay
    );
}

#[test]
fn queues_recover_under_designs_promising_their_model() {
    for q in ["cwl", "2lc"] {
        for v in ["strict", "epoch", "racing", "strand"] {
            for d in ["asap-ep", "asap-rp", "eadr"] {
                crash(q, v, d);
            }
        }
    }
}
