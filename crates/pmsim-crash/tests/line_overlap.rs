//! `pb.line_flushes_overlap` (the ASAP artifact's in-order core->MC path): a persist buffer sends
//! a newer flush of a line while an older flush of that line is still unacknowledged. Sound only
//! if nothing overtakes a NACKed flush, so the MC NACKs the core's later flushes of the line until
//! the retry arrives. These traces write the same lines in many epochs of two threads, with a
//! one-record recovery table (NACKs all the time), and are crashed at every instant under every
//! buffered design; and the switch removes the wait it is named for.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::Config;
use pmsim_trace::Trace;
use std::sync::Arc;

const BUFFERED: [&str; 4] = ["hops-ep", "hops-rp", "asap-ep", "asap-rp"];

fn config(sets: &[(&str, &str)]) -> Config {
    let mut c = Config::default();
    for (k, v) in sets {
        c.set(k, v).unwrap();
    }
    c
}

/// Each thread writes words of a shared line and of a line of its own (the other MC) in epochs
/// that end with ofences, then makes them durable; the shared line is also passed by a lock.
fn rewrites(threads: usize, rounds: usize) -> Arc<Trace> {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    let shared = 0x1_0000_0000u64;
    let mut v = 0x10;
    for r in 0..rounds {
        for t in 0..threads {
            let own = 0x1_0000_1000u64 + 0x40 * (2 * t as u64 + 1);
            let w = |i: usize| shared + 8 * ((t + i + r) % 8) as u64;
            v += 1;
            s += &format!("T{t} store {:#x} 8 {v:x}\nT{t} ofence\n", w(0));
            v += 1;
            s += &format!("T{t} store {:#x} 8 {v:x}\nT{t} store {own:#x} 8 {v:x}\nT{t} ofence\n", w(1));
            v += 1;
            s += &format!("T{t} store {:#x} 8 {v:x}\nT{t} ofence\n", w(0));
            if r % 2 == 1 {
                s += &format!("T{t} acquire 0x100002000\nT{t} store {own:#x} 8 {v:x}\nT{t} release 0x100002000\n");
            }
            v += 1;
            s += &format!("T{t} store {:#x} 8 {v:x}\nT{t} dfence\n", w(2));
        }
    }
    Arc::new(pmsim_trace::text::parse_str("rewrites.trace", &s).unwrap())
}

fn crash_every(trace: &Arc<Trace>, design: &str, cfg: Config) {
    let req = Request {
        trace: trace.clone(),
        design: design.to_string(),
        allow_broken: false,
        config: cfg,
        instants: Instants::Every,
        model: None,
        recovery: None,
        replay_input: "--trace rewrites.trace".into(),
        max_failures: 1,
    };
    let r = run(&req).unwrap_or_else(|e| panic!("{design}: {e}"));
    assert!(r.ok(), "{design} with overlapping line flushes: {:?}", r.failures.first().map(|f| &f.verdict));
    assert!(r.images > 20, "{design}: only {} images", r.images);
}

#[test]
fn overlapping_line_flushes_stay_crash_consistent_under_nacks() {
    let tiny = [
        ("pb.line_flushes_overlap", "true"),
        ("rt.entries", "1"),
        ("pb.entries", "4"),
        ("mc.wpq_entries", "1"),
        ("noc.ack_ns", "10"),
    ];
    for threads in [1, 2] {
        let trace = rewrites(threads, 4);
        for d in BUFFERED {
            crash_every(&trace, d, config(&tiny));
            crash_every(&trace, d, config(&tiny[..1]));
        }
    }
    // The NACK path (and so the MC's NACK of a line's later flushes) is exercised.
    let st = pmsim_engine::simulate(&rewrites(2, 4), &config(&tiny), "asap-rp").unwrap();
    assert!(st.design_stats["nacks"] > 0.0, "no NACKs: {:?}", st.design_stats);
}

/// Under ASAP a line written in two epochs of one operation no longer waits for the older flush's
/// ACK before the dfence (HOPS flushes an epoch only after the earlier ones, so has no such wait).
#[test]
fn overlapping_line_flushes_shorten_the_dfence_wait() {
    let trace = rewrites(1, 20);
    for d in ["asap-ep", "asap-rp"] {
        let wait = |on: &str| {
            let st = pmsim_engine::simulate(&trace, &config(&[("pb.line_flushes_overlap", on)]), d).unwrap();
            st.stall_cycles["dfence"]
        };
        let (serial, overlapped) = (wait("false"), wait("true"));
        assert!(overlapped < serial, "{d}: dfence stall {overlapped} cycles overlapped vs {serial} serial");
    }
}

/// A seeded xorshift generator: `next(n)` is in `0..n`.
fn xorshift(seed: u64) -> impl FnMut(u64) -> u64 {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move |n| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    }
}

/// Seeded random traces over three lines (two MCs): stores to random words, ofences, dfences,
/// 1 or 2 threads, a one-record recovery table so flushes are NACKed while later flushes of the
/// same line are in flight.
fn random_trace(seed: u64) -> Arc<Trace> {
    let mut next = xorshift(seed);
    let threads = 1 + next(2) as usize;
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for i in 0..40 {
        let t = next(threads as u64);
        match next(8) {
            0 => s += &format!("T{t} ofence\n"),
            1 => s += &format!("T{t} dfence\n"),
            _ => {
                let line = 0x1_0000_0000u64 + 0x40 * next(3);
                s += &format!("T{t} store {:#x} 8 {:x}\n", line + 8 * next(4), 0x100 + i);
            }
        }
    }
    Arc::new(pmsim_trace::text::parse_str("random.trace", &s).unwrap())
}

#[test]
fn random_rewrites_with_nacks_stay_crash_consistent() {
    let sets = [("pb.line_flushes_overlap", "true"), ("rt.entries", "1"), ("noc.ack_ns", "10")];
    let n = std::env::var("PMSIM_OVERLAP_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(200u64);
    for seed in 0..n {
        let trace = random_trace(seed);
        for d in ["asap-ep", "asap-rp"] {
            let req = Request {
                trace: trace.clone(),
                design: d.to_string(),
                allow_broken: false,
                config: config(&sets),
                instants: Instants::Every,
                model: None,
                recovery: None,
                replay_input: "--trace random.trace".into(),
                max_failures: 1,
            };
            let r = run(&req).unwrap_or_else(|e| panic!("seed {seed} {d}: {e}"));
            assert!(r.ok(), "seed {seed} under {d}: {:?}", r.failures.first().map(|f| &f.verdict));
        }
    }
}

/// The ASAP artifact's configuration (`configs/asap-artifact.toml`) plus `sets`.
fn artifact(sets: &[(&str, &str)]) -> Config {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs/asap-artifact.toml");
    let mut c = Config::from_toml_file(&path).unwrap();
    for (k, v) in sets {
        c.set(k, v).unwrap();
    }
    c
}

fn assert_every_instant_consistent(name: &str, text: &str, design: &str, cfg: Config) {
    let trace = Arc::new(pmsim_trace::text::parse_str(name, text).unwrap());
    let req = Request {
        trace,
        design: design.to_string(),
        allow_broken: false,
        config: cfg,
        instants: Instants::Every,
        model: None,
        recovery: None,
        replay_input: format!("--trace {name}"),
        max_failures: 1,
    };
    let r = run(&req).unwrap_or_else(|e| panic!("{name} {design}: {e}"));
    assert!(r.ok(), "{name} under {design}: {:?}", r.failures.first().map(|f| &f.verdict));
}

/// Found by a random-trace fuzzer (tester I): T1's flush of line 0 is NACKed back to `Queued`
/// while a newer flush of the line (same epoch) is in flight; a later store to the word used to
/// coalesce into the older entry, whose retry then landed *before* the newer flush's retry with
/// the word's older value. Final memory was wrong after the dfence completed.
#[test]
fn a_store_never_coalesces_into_a_line_entry_older_than_one_in_flight() {
    let text = "# pmsim trace v1\nthreads 2\nT0 store 0x100000058 8 5\nT0 store 0x100000038 8 7\n\
                T1 store 0x100000040 8 8\nT1 dfence\nT0 rmw 0x1000000c0 8 16\nT1 store 0x100000028 16 24\n\
                T1 store 0x100000010 8 25\nT1 rmw 0x1000000c0 8 32\nT1 store 0x100000010 8 39\nT1 dfence\n";
    let sets = [("rt.entries", "1"), ("mc.interleave", "64"), ("pb.line_flushes_overlap", "true")];
    assert_every_instant_consistent("I1.trace", text, "asap-ep", config(&sets));
    let text = "# pmsim trace v1\nthreads 4\nT1 store 0x100000070 8 22\nT3 store 0x100000030 8 25\n\
                T0 store 0x100000028 8 26\nT3 store 0x100000010 8 28\nT2 store 0x100000050 8 29\n\
                T2 store 0x100000038 8 2c\nT2 store 0x100000008 16 2d\nT3 store 0x100000048 8 2f\n\
                T2 store 0x100000070 8 30\nT2 store 0x100000010 8 38\nT0 dfence\nT1 dfence\nT2 dfence\nT3 dfence\n";
    let sets = [("rt.entries", "2"), ("pb.line_flushes_overlap", "true"), ("et.dep_epoch", "current")];
    assert_every_instant_consistent("I1b.trace", text, "asap-rp", config(&sets));
}

/// Tester I's second shape, under the shipped artifact configuration: three flushes of one line
/// in one epoch; the first two are NACKed; the MC used to remember only the first, so once its
/// retry arrived the third flush was accepted ahead of the second's retry.
#[test]
fn a_flush_never_overtakes_the_retry_of_any_older_nacked_flush_of_its_line() {
    let text = "# pmsim trace v1\nthreads 3\nT1 store 0x100000008 16 4\nT2 compute 1000\nT0 compute 400\n\
                T0 store 0x1000000d0 8 b\nT2 compute 400\nT0 dfence\nT1 store 0x100000128 8 10\n\
                T0 store 0x100000008 16 17\nT0 store 0x100000130 8 1a\nT2 store 0x100000030 16 1b\n\
                T0 store 0x100000120 8 1f\nT0 store 0x100000178 8 20\nT0 store 0x100000118 16 25\nT0 dfence\n";
    let cfg = artifact(&[("rt.entries", "1"), ("mc.interleave", "64")]);
    assert_every_instant_consistent("I1c.trace", text, "asap-ep", cfg);
}

/// Tester I's third shape: a functional delay record (`rt.delay_through_wpq = false`) applied at
/// commit while its epoch's older write of the line waits for the single WPQ entry used to be
/// merged into the (persistent) queued write of another core: persistent ahead of that older
/// write of its own epoch.
#[test]
fn a_functional_delay_record_never_persists_ahead_of_a_waiting_older_write_of_its_line() {
    let text = "# pmsim trace v1\nthreads 2\nT1 store 0x100000010 8 2\nT0 rmw 0x2000 8 3\nT1 load 0x100000138 8\n\
                T1 store 0x1000000e8 8 a\nT0 store 0x100000118 8 b\nT0 store 0x100000068 8 c\nT0 rmw 0x2000 8 d\n\
                T1 store 0x100000110 8 e\nT1 dfence\nT0 store 0x100000020 8 10\nT0 store 0x1000000d8 8 11\n\
                T1 store 0x100000060 8 12\nT0 store 0x100000030 16 15\nT0 store 0x100000120 8 18\n\
                T0 store 0x100000028 8 1b\nT1 store 0x100000020 16 1f\nT1 store 0x100000028 8 21\nT1 rmw 0x2000 8 22\n";
    let cfg = artifact(&[
        ("rt.entries", "2"),
        ("mc.interleave", "128"),
        ("mc.wpq_entries", "1"),
        ("pb.line_flushes_overlap", "false"),
    ]);
    assert_every_instant_consistent("I3.trace", text, "asap-rp", cfg);
}

/// Seeded random traces in the shape that found the three bugs above: 1-3 threads, stores of one
/// or two words over five lines on two MCs (64 B interleave), rmws of a lock word, compute gaps,
/// under the artifact configuration with a 1-2 record recovery table and a 1-4 entry WPQ.
fn random_artifact_trace(seed: u64) -> (Arc<Trace>, Config) {
    let mut next = xorshift(seed);
    let threads = 1 + next(3) as usize;
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    for i in 0..30 {
        let t = next(threads as u64);
        match next(12) {
            0 => s += &format!("T{t} ofence\n"),
            1 => s += &format!("T{t} dfence\n"),
            2 => s += &format!("T{t} rmw 0x1000000c0 8 {:x}\n", 0x100 + i),
            3 => s += &format!("T{t} compute {}\n", 100 * (1 + next(8))),
            _ => {
                let line = 0x1_0000_0000u64 + 0x40 * next(5);
                let size = if next(3) == 0 { 16 } else { 8 };
                s += &format!(
                    "T{t} store {:#x} {size} {:x}\n",
                    line + 8 * next(if size == 16 { 7 } else { 8 }),
                    0x100 + i
                );
            }
        }
    }
    for t in 0..threads {
        s += &format!("T{t} dfence\n");
    }
    let rt = (1 + next(2)).to_string();
    let wpq = (1 + next(4)).to_string();
    let overlap = if next(4) == 0 { "false" } else { "true" };
    let cfg = artifact(&[
        ("rt.entries", &rt),
        ("mc.wpq_entries", &wpq),
        ("mc.interleave", "64"),
        ("pb.line_flushes_overlap", overlap),
    ]);
    (Arc::new(pmsim_trace::text::parse_str("random.trace", &s).unwrap()), cfg)
}

#[test]
fn random_traces_under_the_artifact_configuration_stay_crash_consistent() {
    let n = std::env::var("PMSIM_OVERLAP_SEEDS").ok().and_then(|v| v.parse().ok()).unwrap_or(4000u64);
    for seed in 0..n {
        let (trace, cfg) = random_artifact_trace(seed);
        for d in ["asap-ep", "asap-rp"] {
            let req = Request {
                trace: trace.clone(),
                design: d.to_string(),
                allow_broken: false,
                config: cfg.clone(),
                instants: Instants::Every,
                model: None,
                recovery: None,
                replay_input: "--trace random.trace".into(),
                max_failures: 1,
            };
            let r = run(&req).unwrap_or_else(|e| panic!("seed {seed} {d}: {e}"));
            assert!(
                r.ok(),
                "seed {seed} under {d} (PMSIM_OVERLAP_SEEDS): {:?}",
                r.failures.first().map(|f| &f.verdict)
            );
        }
    }
}
