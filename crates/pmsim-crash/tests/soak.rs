//! Every correct design, every built-in workload: zero violations (persistency model and the
//! application's own recovery) over 10,000 seeded random crashes per (workload, design), or
//! `PMSIM_CRASHES` of them. One test per design, so the test harness spreads them over the cores.
//! It is meant for an optimised build: the README's test command runs it under `--profile ci`
//! (release optimisation with debug assertions); a debug build takes hours.

mod common;
use common::{crash_workload, describe};

fn crashes() -> usize {
    std::env::var("PMSIM_CRASHES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000)
}

fn soak(design: &str) {
    let n = crashes();
    let mut bad = Vec::new();
    for w in pmsim_workloads::names() {
        let r = crash_workload(w, 60, design, n, 1);
        assert_eq!(r.images as usize, if r.ok() { n } else { r.images as usize });
        if !r.ok() {
            bad.push(format!("{w} under {design}: {}", describe(&r)));
        }
    }
    assert!(bad.is_empty(), "{} failing workloads under {design}:\n{}", bad.len(), bad.join("\n"));
}

macro_rules! soak_tests {
    ($($test:ident => $design:literal,)*) => {
        $( #[test] fn $test() { soak($design); } )*

        #[test]
        fn every_correct_design_has_a_soak_test() {
            let mut covered = vec![$($design),*];
            covered.sort_unstable();
            let mut all: Vec<&str> = pmsim_engine::DESIGNS.iter().map(|d| d.name).collect();
            all.sort_unstable();
            assert_eq!(covered, all);
        }
    };
}

soak_tests! {
    soak_baseline => "baseline",
    soak_eadr => "eadr",
    soak_bbb => "bbb",
    soak_hops_ep => "hops-ep",
    soak_hops_rp => "hops-rp",
    soak_asap_ep => "asap-ep",
    soak_asap_rp => "asap-rp",
    soak_delegated => "delegated",
    soak_broi => "broi",
}
