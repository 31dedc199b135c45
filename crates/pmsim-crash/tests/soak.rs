//! Every correct design, every built-in workload: zero violations (persistency model and the
//! application's own recovery) over seeded random crashes — 1,000 per (workload, design) in the
//! explicit run (`-- --ignored`, ignored by default for CI time); `PMSIM_CRASHES=10000 cargo test --release -p pmsim-crash --test soak` runs
//! the full 10,000.

mod common;
use common::{crash_workload, describe};
use pmsim_engine::DESIGNS;

fn crashes() -> usize {
    std::env::var("PMSIM_CRASHES").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}

#[test]
#[ignore = "long: run with `PMSIM_CRASHES=10000 cargo test --release -p pmsim-crash --test soak -- --ignored`"]
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
