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

/// Seeded random traces over three lines (two MCs): stores to random words, ofences, dfences,
/// 1 or 2 threads, a one-record recovery table so flushes are NACKed while later flushes of the
/// same line are in flight.
fn random_trace(seed: u64) -> Arc<Trace> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
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
