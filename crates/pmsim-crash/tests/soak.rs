//! Every correct design, every built-in workload: zero violations (persistency model and the
//! application's own recovery) over 10,000 seeded random crashes each. `PMSIM_CRASHES=N` changes
//! the count (e.g. for a quick local run).

mod common;
use common::{crash_workload, describe};
use pmsim_engine::DESIGNS;

fn crashes() -> usize {
    std::env::var("PMSIM_CRASHES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

#[test]
fn every_design_survives_random_crashes_on_every_workload() {
    let n = crashes();
    let mut bad = Vec::new();
    for w in pmsim_workloads::names() {
        for d in DESIGNS {
            let r = crash_workload(w, 60, d.name, n, 1);
            assert_eq!(r.images as usize, if r.ok() { n } else { r.images as usize });
            if !r.ok() {
                bad.push(format!("{w} under {}: {}", d.name, describe(&r)));
            }
        }
    }
    assert!(bad.is_empty(), "{} failing (workload, design) pairs:\n{}", bad.len(), bad.join("\n"));
}
