//! The crash driver reuses the application's recovery verdict, whole or piece by piece, while no
//! word a run read has changed and no dfence it saw pending completed (`memo`): the reports must
//! be exactly those of running the whole recovery on every image that differs from the last. A
//! recovery that looks at the image's size reads "everything" and is run without its pieces'
//! cache (`check`), so it runs in full on each of those: it is the reference here. Broken designs
//! give images the recovery rejects, so reused failures (their messages) are compared too.

use pmsim_crash::{run, Instants, Report, Request};
use pmsim_engine::Config;
use pmsim_trace::MemImage;
use pmsim_workloads::{Recovery, RecoveryError, RecoveryReport};
use std::sync::Arc;

/// The workload's recovery, made to read the whole image first.
struct Whole<'a>(&'a dyn Recovery);

impl Recovery for Whole<'_> {
    fn check(&self, image: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        let _ = image.len();
        self.0.check(image, dfence_done)
    }
}

fn crash(w: &str, design: &str, instants: Instants, whole: bool) -> Report {
    crash_ops(w, 25, design, instants, whole)
}

fn crash_ops(w: &str, ops: u64, design: &str, instants: Instants, whole: bool) -> Report {
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), ops.to_string());
    let g = pmsim_workloads::generate(w, &p).unwrap();
    let wrapped = Whole(&*g.recovery);
    let req = Request {
        trace: Arc::new(g.trace),
        design: design.to_string(),
        allow_broken: true,
        config: Config::default(),
        instants,
        model: None,
        recovery: Some(if whole { &wrapped } else { &*g.recovery }),
        replay_input: format!("--workload {w} -p ops={ops}"),
        max_failures: usize::MAX,
    };
    run(&req).unwrap_or_else(|e| panic!("{w} under {design}: {e}"))
}

fn json(r: &Report) -> String {
    serde_json::to_string(r).unwrap()
}

#[test]
fn reused_verdicts_are_the_verdicts_of_a_run_on_every_image() {
    let (mut reused, mut rejected) = (0, 0);
    // Piecewise recoveries: segments (Dash-EH, Dash-LH, CCEH), B-link leaves (FAST_FAIR,
    // P-Masstree); undo-logged ones, whose pieces (structure, history words) read through the
    // rollback's copy-on-write layer (N-Store, Vacation, Memcached, the Atlas structures, the
    // BROI hash table's history-only recovery).
    for w in [
        "dash-eh",
        "dash-lh",
        "cceh",
        "fastfair",
        "p-masstree",
        "nstore",
        "vacation",
        "memcached",
        "atlas-heap",
        "atlas-queue",
        "atlas-skiplist",
        "hash",
    ] {
        for design in ["asap-rp", "broken-asap-rp-commit-before-ack"] {
            // Every instant where the reference is affordable; seeded random ones for all.
            let every = ["dash-eh", "nstore"].contains(&w).then_some(Instants::Every);
            for instants in every.into_iter().chain([Instants::Random { n: 150, seed: 5 }]) {
                let fast = crash(w, design, instants.clone(), false);
                let every = crash(w, design, instants, true);
                assert_eq!(json(&fast), json(&every), "{w} under {design}");
                reused += every.recovery_runs - fast.recovery_runs;
                rejected += fast.failures.iter().filter(|f| f.recovery_error.is_some()).count();
            }
        }
    }
    // The comparison means something only if verdicts were reused and some were failures.
    assert!(reused > 1000, "only {reused} more verdicts reused than by the reference");
    assert!(rejected > 0, "no image was rejected by a recovery");
}

#[test]
fn reused_queue_pieces_are_the_verdicts_of_a_run_on_every_image() {
    // The persistent queues check their slots and their durable inserts 64 at a time: enough
    // inserts for several pieces of each, at every instant, under a design whose images the
    // recovery rejects (a head persisted before its entry) and under one it accepts.
    let (mut reused, mut rejected) = (0, 0);
    for w in ["cwl", "2lc"] {
        for design in ["asap-ep", "broken-asap-ep-no-delay", "broken-eadr-no-battery"] {
            let fast = crash_ops(w, 200, design, Instants::Every, false);
            let every = crash_ops(w, 200, design, Instants::Every, true);
            assert_eq!(json(&fast), json(&every), "{w} under {design}");
            reused += every.recovery_runs - fast.recovery_runs;
            rejected += fast.failures.iter().filter(|f| f.recovery_error.is_some()).count();
        }
    }
    assert!(reused > 1000, "only {reused} more verdicts reused than by the reference");
    assert!(rejected > 0, "no queue image was rejected by its recovery");
}

#[test]
fn progress_reports_climb_to_the_run_end_and_change_nothing() {
    // The same report with and without a progress display; the reports start at 0 once the
    // reference run gave the run's length, never go back, and end at (end, end).
    let mut p = std::collections::BTreeMap::new();
    p.insert("ops".to_string(), "60".to_string());
    let g = pmsim_workloads::generate("nstore", &p).unwrap();
    let req = Request {
        trace: Arc::new(g.trace),
        design: "asap-rp".to_string(),
        allow_broken: false,
        config: Config::default(),
        instants: Instants::Every,
        model: None,
        recovery: Some(&*g.recovery),
        replay_input: "--workload nstore -p ops=60".to_string(),
        max_failures: 10,
    };
    let seen = std::sync::Mutex::new(Vec::new());
    let record = |t: u64, end: u64| {
        seen.lock().unwrap().push((t, end));
        true
    };
    let with = pmsim_crash::run_with_progress(&req, Some(&record)).unwrap();
    // A display that says stop ends the check with the interruption error.
    let stop = |_: u64, _: u64| false;
    assert_eq!(pmsim_crash::run_with_progress(&req, Some(&stop)).unwrap_err(), pmsim_crash::INTERRUPTED);
    let without = run(&req).unwrap();
    assert_eq!(json(&with), json(&without));
    let seen = seen.into_inner().unwrap();
    let end = with.run_end_ps;
    assert!(seen.len() >= 2 && seen.iter().all(|&(t, e)| e == end && t <= end), "{seen:?}");
    assert_eq!((seen[0], *seen.last().unwrap()), ((0, end), (end, end)));
    assert!(seen.windows(2).all(|w| w[0].0 <= w[1].0), "{seen:?}");
}
