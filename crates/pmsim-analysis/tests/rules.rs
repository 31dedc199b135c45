//! Each rule of docs/design.md §8 pinned on a hand-written trace. Expected critical paths and persist
//! counts are worked out by hand in the comments (P = persistent, V = volatile addresses).

use pmsim_analysis::{analyze_trace, summarize, AnalysisError, Config, Model};

const HDR: &str = "# pmsim trace v1\nthreads 2\npm 0x100000000 0x40000000\n";
// Persistent words (same 64 B line for A0..A2, B elsewhere) and volatile words.
fn expand(body: &str) -> String {
    let s = body
        .replace("PA1", "0x100000008")
        .replace("PA2", "0x100000010")
        .replace("PA", "0x100000000")
        .replace("PB", "0x100001000")
        .replace("PC", "0x100002000")
        .replace("VX8", "0x2008")
        .replace("VX", "0x2000")
        .replace("LK", "0x3000");
    format!("{HDR}{s}")
}

/// (critical path, persists) under `model`.
fn run_cfg(body: &str, model: Model, cfg: Config) -> (u64, u64) {
    let t = pmsim_trace::text::parse_str("t", &expand(body)).unwrap();
    let r = analyze_trace(&t, &[model], &cfg).unwrap();
    (r[0].1.critical_path, r[0].1.persists)
}

fn run(body: &str, model: Model) -> (u64, u64) {
    run_cfg(body, model, Config::default())
}

fn cp(body: &str, model: Model) -> u64 {
    run(body, model).0
}

#[test]
fn program_order_strict_orders_every_earlier_event_relaxed_models_do_not() {
    let t = "T0 store PA 8\nT0 store PB 8\nT0 store PC 8\n";
    assert_eq!(run(t, Model::Strict), (3, 3));
    assert_eq!(run(t, Model::Epoch), (1, 3));
    assert_eq!(run(t, Model::Strand), (1, 3));
}

#[test]
fn persist_barriers_order_epochs() {
    // Epochs {PA, PB} then {PC}: two levels under epoch; dfence is a barrier too.
    let t = "T0 store PA 8\nT0 store PB 8\nT0 ofence\nT0 store PC 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    assert_eq!(cp(t, Model::Strict), 3);
    assert_eq!(cp(&t.replace("ofence", "dfence"), Model::Epoch), 2);
    // In a design-neutral trace clwb, sfence, mfence and compute are ignored: not barriers.
    let t = "T0 store PA 8\nT0 ofence\nT0 store PB 8\nT0 clwb PB\nT0 sfence\nT0 mfence\nT0 compute 5\nT0 store PC 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // In a legacy x86 trace (no ofence, dfence or strand) sfence and mfence are the barriers;
    // clwb and compute still are not: {PA, PB} {PC} {PA1}.
    let t =
        "T0 store PA 8\nT0 clwb PA\nT0 compute 5\nT0 store PB 8\nT0 sfence\nT0 store PC 8\nT0 mfence\nT0 store PA1 8\n";
    assert_eq!(cp(t, Model::Epoch), 3);
    assert_eq!(cp(t, Model::Strand), 3);
    // ... and so is a locked instruction after the thread's flushes (a spin lock's xchg after
    // clwb), before its own store: {PA} {LK, PB} {LK, PC} under epoch (the lock word is volatile).
    let t = "T0 store PA 8\nT0 clwb PA\nT0 rmw LK 8\nT0 store PB 8\nT0 clwb PB\nT0 rmw LK 8\nT0 store PC 8\n";
    assert_eq!(cp(t, Model::Epoch), 3);
    assert_eq!(cp(t, Model::Strand), 3);
    assert_eq!(cp(&t.replace("rmw LK 8", "release LK"), Model::Epoch), 3);
    // Without a flush before it, a locked instruction orders nothing (x86 has no flush to
    // persist there): {PA, PB} after an sfence, then the rmw and PC in the same epoch.
    let t = "T0 store PA 8\nT0 clwb PA\nT0 sfence\nT0 store PB 8\nT0 rmw LK 8\nT0 store PC 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // A non-temporal PM store is persisted there too: {PA} {PB}.
    let t = "T0 ntstore PA 8\nT0 rmw LK 8\nT0 store PB 8\nT0 sfence\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // A clflush is ordered with the thread's later stores, fence or not: {PA} {PB} {PC}; a
    // clwb or clflushopt is not: {PA, PB, PC}.
    let t = "T0 store PA 8\nT0 clflush PA\nT0 store PB 8\nT0 clflush PB\nT0 store PC 8\n";
    assert_eq!(cp(t, Model::Epoch), 3);
    assert_eq!(cp(t, Model::Strand), 3);
    assert_eq!(cp(&t.replace("clflush", "clflushopt"), Model::Epoch), 1);
    assert_eq!(cp(&t.replace("clflush", "clwb"), Model::Epoch), 1);
}

#[test]
fn strands_cut_program_order_barriers_order_within_a_strand() {
    let t = "T0 strand\nT0 store PA 8\nT0 ofence\nT0 store PB 8\nT0 strand\nT0 store PC 8\n";
    // Strand: PA -> PB inside strand 1, PC in a new strand has no predecessor.
    assert_eq!(cp(t, Model::Strand), 2);
    let t = "T0 store PA 8\nT0 ofence\nT0 strand\nT0 store PB 8\nT0 ofence\nT0 store PC 8\n";
    assert_eq!(cp(t, Model::Strand), 2); // PB -> PC only
    assert_eq!(cp(t, Model::Epoch), 3); // the strand barrier is ignored by epoch
    assert_eq!(cp(t, Model::Strict), 3);
}

#[test]
fn conflicts_carry_order_through_volatile_memory() {
    // T0: PA, barrier, volatile store VX. T1 reads VX, barrier, PB: PA -> VX -> load -> PB.
    let t = "T0 store PA 8\nT0 ofence\nT0 store VX 8\nT1 load VX 8\nT1 ofence\nT1 store PB 8\n";
    assert_eq!(run(t, Model::Epoch), (2, 2));
    assert_eq!(run(t, Model::Strand), (2, 2));
    // Without T0's barrier the volatile store is not ordered after PA.
    assert_eq!(cp(&t.replacen("T0 ofence\n", "", 1), Model::Epoch), 1);
    // Reading a different volatile word (G = 8) orders nothing.
    assert_eq!(cp(&t.replace("T1 load VX 8", "T1 load VX8 8"), Model::Epoch), 1);
}

#[test]
fn load_before_store_is_a_conflict() {
    // T0 loads VX after PA (barrier); T1 later stores VX, barrier, PB: SC orders PB after PA.
    let t = "T0 store PA 8\nT0 ofence\nT0 load VX 8\nT1 store VX 8\nT1 ofence\nT1 store PB 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // Two loads never conflict.
    assert_eq!(cp(&t.replace("T1 store VX 8", "T1 load VX 8"), Model::Epoch), 1);
}

#[test]
fn locks_order_persists_through_acquire_and_release() {
    let t = "T0 store PA 8\nT0 ofence\nT0 release LK\nT1 acquire LK\nT1 ofence\nT1 store PB 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // Racing: no barrier before the release, so PA and PB are concurrent.
    assert_eq!(cp(&t.replacen("T0 ofence\n", "", 1), Model::Epoch), 1);
    // An rmw is a load and a store: it reads the release and orders the next persist.
    let t = "T0 store PA 8\nT0 ofence\nT0 release LK\nT1 rmw LK 8 1\nT1 ofence\nT1 store PB 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // An acquire reads, and a release writes, its SIZE bytes (8 by default): a 16-byte acquire
    // reads PA1, written by T0, so T1's store after its barrier follows T0's (path 2).
    let t = "T0 store PA1 8\nT1 acquire PA 16\nT1 ofence\nT1 store PB 8\n";
    assert_eq!(cp(t, Model::Epoch), 2);
    // A 4-byte release inside one word is one persist; a 16-byte one two.
    assert_eq!(run("T0 release 0x100000004 4\n", Model::Epoch), (1, 1));
    assert_eq!(run("T0 release PA 16\n", Model::Epoch), (1, 2));
    // A release in PM is itself a persist.
    let t = "T0 release PA\nT0 ofence\nT0 store PB 8\n";
    assert_eq!(run(t, Model::Epoch), (2, 2));
}

#[test]
fn strong_persist_atomicity_orders_persists_to_one_block() {
    // T1 writes PA after T0 did, with an earlier persist PB in its epoch history: the second PA
    // cannot join the first (PB is at its level, not its predecessor) and is ordered after it.
    let t = "T0 store PA 8\nT1 store PB 8\nT1 load PA 8\nT1 ofence\nT1 store PA 8\n";
    assert_eq!(run(t, Model::Epoch), (2, 3));
    let off = Config { coalesce: false, ..Config::default() };
    // Without coalescing the second persist to PA is always a new persist after the first.
    assert_eq!(run_cfg("T0 store PA 8\nT1 store PA 8\n", Model::Epoch, off), (2, 2));
}

#[test]
fn coalescing_joins_the_last_persist_when_nothing_else_is_at_its_level() {
    // Strict, A = 64: PA and PA1 share an atomic block; PA1's only predecessor is PA: it joins.
    let a64 = Config { atomic_bytes: 64, ..Config::default() };
    assert_eq!(run_cfg("T0 store PA 8\nT0 store PA1 8\n", Model::Strict, a64), (1, 1));
    // A = 8: two atomic blocks, two persists in program order.
    assert_eq!(run("T0 store PA 8\nT0 store PA1 8\n", Model::Strict), (2, 2));
    // Same word again: joins even at A = 8.
    assert_eq!(run("T0 store PA 8\nT0 store PA 8\n", Model::Strict), (1, 1));
    // A persist to an unrelated block (PB, level 2) in between: PA2 must follow PB, which is at
    // or above the last PA persist's level, so it cannot join.
    assert_eq!(run_cfg("T0 store PA 8\nT0 store PB 8\nT0 store PA2 8\n", Model::Strict, a64), (3, 3));
    // Epoch, no predecessor at all: a concurrent persist may join a later-level persist.
    let t = "T0 store PB 8\nT0 ofence\nT0 store PA 8\nT1 store PA1 8\n";
    assert_eq!(run_cfg(t, Model::Epoch, a64), (2, 2));
    // With coalescing off the same trace keeps three persists.
    let off = Config { coalesce: false, ..a64 };
    assert_eq!(run_cfg(t, Model::Epoch, off), (2, 3));
}

#[test]
fn coalescing_refused_when_another_persist_shares_the_top_level() {
    let a64 = Config { atomic_bytes: 64, ..Config::default() };
    // T1 follows both PA (via its load) and its own PB, both at level 1: joining PA's persist
    // would order PB before it, so PA1 is a new persist at level 2.
    let t = "T0 store PA 8\nT1 store PB 8\nT1 load PA 8\nT1 ofence\nT1 store PA1 8\n";
    assert_eq!(run_cfg(t, Model::Epoch, a64), (2, 3));
    // Without PB the only predecessor is PA's persist itself: it joins.
    let t = "T0 store PA 8\nT1 load PA 8\nT1 ofence\nT1 store PA1 8\n";
    assert_eq!(run_cfg(t, Model::Epoch, a64), (1, 1));
}

#[test]
fn a_store_wider_than_a_is_one_persist_per_atomic_block_with_the_same_predecessors() {
    let t = "T0 store PA 64\nT0 store PB 8\n";
    assert_eq!(run(t, Model::Strict), (2, 9));
    let a256 = Config { atomic_bytes: 256, ..Config::default() };
    assert_eq!(run_cfg(t, Model::Strict, a256), (2, 2));
    // Volatile stores are never persists.
    assert_eq!(run("T0 store VX 8\nT0 store VX8 8\n", Model::Strict), (0, 0));
}

#[test]
fn false_sharing_appears_at_coarse_tracking_granularity() {
    // T0: PA, barrier, volatile VX. T1: volatile VX+8, barrier, PB. Disjoint words.
    let t = "T0 store PA 8\nT0 ofence\nT0 store VX 8\nT1 store VX8 8\nT1 ofence\nT1 store PB 8\n";
    assert_eq!(cp(t, Model::Epoch), 1);
    let g64 = Config { track_bytes: 64, ..Config::default() };
    assert_eq!(run_cfg(t, Model::Epoch, g64).0, 2);
}

#[test]
fn operations_and_rates() {
    let t = expand(
        "T0 begin op\nT0 store PA 8\nT0 ofence\nT0 store PB 8\nT0 end op\nT1 begin op\nT1 store PC 8\nT1 end op\n",
    );
    let t = pmsim_trace::text::parse_str("t", &t).unwrap();
    let cfg = Config { persist_ns: 1000.0, ..Config::default() };
    let c = analyze_trace(&t, &[Model::Epoch], &cfg).unwrap();
    let r = &summarize(&c, &cfg, Some(250_000.0)).unwrap()[0];
    assert_eq!((r.critical_path, r.persists, r.ops), (2, 3, 2));
    assert_eq!(r.critical_path_per_op, Some(1.0));
    // 2 ops per 2 × 1 µs = 1e6 ops/s; normalised to 250 k ops/s: 4.
    assert!((r.persist_bound_ops_per_s.unwrap() - 1e6).abs() < 1e-6);
    assert!((r.normalized_rate.unwrap() - 4.0).abs() < 1e-12);
    // Without begin/end pairs the path stands and nothing is per operation.
    let none = pmsim_trace::text::parse_str("t", &expand("T0 store PA 8\nT0 store PB 8\n")).unwrap();
    let c = analyze_trace(&none, &[Model::Strict], &cfg).unwrap();
    let r = &summarize(&c, &cfg, Some(250_000.0)).unwrap()[0];
    assert_eq!((r.critical_path, r.persists, r.ops), (2, 2, 0));
    assert_eq!((r.critical_path_per_op, r.persist_bound_ops_per_s, r.normalized_rate), (None, None, None));
}

/// Positive but extreme latencies or rates overflow the quotients: an error, never a null that
/// reads as "unbounded" while persists and operations exist.
#[test]
fn rates_that_overflow_are_refused() {
    let t = expand("T0 begin op\nT0 store PA 8\nT0 end op\n");
    let t = pmsim_trace::text::parse_str("t", &t).unwrap();
    let tiny = Config { persist_ns: 1e-300, ..Config::default() };
    let c = analyze_trace(&t, &[Model::Epoch], &tiny).unwrap();
    let e = summarize(&c, &tiny, Some(1e6)).unwrap_err();
    assert!(matches!(e, AnalysisError::Overflow(..)));
    let msg = e.to_string();
    assert!(msg.contains("1e-300 ns") && msg.contains("1e6 operations per second") && !msg.contains("Some("), "{msg}");
    let cfg = Config::default();
    let c = analyze_trace(&t, &[Model::Epoch], &cfg).unwrap();
    assert!(matches!(summarize(&c, &cfg, Some(1e-320)), Err(AnalysisError::Overflow(..))));
    assert!(summarize(&c, &cfg, Some(1e-9)).unwrap()[0].normalized_rate.is_some_and(f64::is_finite));
}

#[test]
fn bad_parameters_are_refused() {
    let t = pmsim_trace::text::parse_str("t", &expand("T0 store PA 8\n")).unwrap();
    for (a, g) in [(12, 8), (4, 8), (512, 8), (8, 0), (8, 24)] {
        let cfg = Config { atomic_bytes: a, track_bytes: g, ..Config::default() };
        assert!(matches!(analyze_trace(&t, &[Model::Strict], &cfg), Err(AnalysisError::Granularity(..))), "{a} {g}");
    }
    assert!(matches!(Model::parse_list("racing"), Err(AnalysisError::UnknownModel(_))));
    assert_eq!(Model::parse_list("all").unwrap(), Model::ALL.to_vec());
    assert_eq!(
        Model::parse_list("strand,strict,strand,all").unwrap(),
        vec![Model::Strand, Model::Strict, Model::Epoch]
    );
}

/// Nested operations (an outer `txn` around inner `put`s, as a traced program may mark them):
/// every `end` completes one, as the timing engine counts them, so the normalised rate divides
/// like by like. Here 1 txn and 2 puts on T0, a put inside a put on T1: 5.
#[test]
fn nested_operations_count_every_end() {
    let t = expand(
        "T0 begin txn\nT0 begin put\nT0 store PA 8\nT0 end put\nT0 begin put\nT0 store PB 8\nT0 end put\n\
         T0 end txn\nT1 begin put\nT1 begin put\nT1 store PC 8\nT1 end put\nT1 end put\n",
    );
    let t = pmsim_trace::text::parse_str("t", &t).unwrap();
    let c = analyze_trace(&t, &[Model::Epoch], &Config::default()).unwrap();
    assert_eq!(c[0].1.ops, 5);
}
