//! The analysis on the seed's queues: the orderings its evaluation reports must come out of the
//! rules, not be put in. Table 1: strict < epoch <= racing <= strand for both queues at 1 and 8
//! threads; Fig. 4: strict's path falls as the atomic persist grows until it meets epoch's at
//! 256 B; Fig. 5: epoch's path rises with the tracking granularity and never passes strict's.

use pmsim_analysis::{analyze_trace, Config, Model};
use std::collections::BTreeMap;

fn trace(q: &str, variant: &str, threads: u64, ops: u64) -> pmsim_trace::Trace {
    let mut p = BTreeMap::new();
    for (k, v) in [("variant", variant.to_string()), ("threads", threads.to_string()), ("ops", ops.to_string())] {
        p.insert(k.to_string(), v);
    }
    pmsim_workloads::generate(q, &p).unwrap().trace
}

fn path(q: &str, variant: &str, model: Model, threads: u64, cfg: Config) -> f64 {
    let ops = 400 / threads;
    let c = analyze_trace(&trace(q, variant, threads, ops), &[model], &cfg).unwrap()[0].1;
    assert_eq!(c.ops, ops * threads);
    c.critical_path as f64 / c.ops as f64
}

#[test]
fn table1_ordering_of_models() {
    let d = Config::default();
    for q in ["cwl", "2lc"] {
        for t in [1, 8] {
            let strict = path(q, "strict", Model::Strict, t, d);
            let epoch = path(q, "epoch", Model::Epoch, t, d);
            let racing = path(q, "racing", Model::Epoch, t, d);
            let strand = path(q, "strand", Model::Strand, t, d);
            assert!(
                strict > epoch && epoch >= racing && racing >= strand,
                "{q} {t}: {strict} {epoch} {racing} {strand}"
            );
        }
    }
    // Races only help with several threads, and only where locks order persists (CWL).
    assert!(path("cwl", "racing", Model::Epoch, 8, d) < path("cwl", "epoch", Model::Epoch, 8, d));
    assert_eq!(path("cwl", "racing", Model::Epoch, 1, d), path("cwl", "epoch", Model::Epoch, 1, d));
}

#[test]
fn fig4_strict_falls_with_atomic_persist_size_until_it_meets_epoch() {
    let at = |m: Model, a: u64| path("cwl", "epoch", m, 1, Config { atomic_bytes: a, ..Config::default() });
    let sizes = [8, 16, 32, 64, 128, 256];
    let strict: Vec<f64> = sizes.iter().map(|&a| at(Model::Strict, a)).collect();
    let epoch: Vec<f64> = sizes.iter().map(|&a| at(Model::Epoch, a)).collect();
    assert!(strict.windows(2).all(|w| w[1] <= w[0]), "{strict:?}");
    assert!(strict[0] > 2.0 * epoch[0], "{strict:?} {epoch:?}");
    assert!((strict[5] - epoch[5]).abs() < 1e-9, "{strict:?} {epoch:?}");
    assert!(epoch.windows(2).all(|w| (w[1] - w[0]).abs() < 1e-9), "{epoch:?}");
}

#[test]
fn fig5_epoch_rises_with_tracking_granularity_toward_strict() {
    let at = |m: Model, g: u64| path("cwl", "epoch", m, 1, Config { track_bytes: g, ..Config::default() });
    let sizes = [8, 16, 32, 64, 128, 256];
    let strict: Vec<f64> = sizes.iter().map(|&g| at(Model::Strict, g)).collect();
    let epoch: Vec<f64> = sizes.iter().map(|&g| at(Model::Epoch, g)).collect();
    assert!(epoch.windows(2).all(|w| w[1] >= w[0]), "{epoch:?}");
    assert!(epoch[5] > 2.0 * epoch[0], "{epoch:?}");
    assert!(epoch.iter().zip(&strict).all(|(e, s)| e <= s), "{epoch:?} {strict:?}");
}
