//! Non-temporal stores through write-combining buffers (baseline, eADR): a buffer sends the
//! line's coherent data for its words when it leaves, possibly long after its stores performed,
//! and stores of other cores (and the core's own ordinary stores) hit those words meanwhile.
//! Crashed at every instant with one buffer (always evicting), two, and the default, under the
//! design-neutral and the x86 reading; a baseline whose fences do not wait is caught on them.

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::Config;
use pmsim_trace::Trace;
use std::sync::Arc;

/// Threads write words of two shared lines (one per MC) with partial non-temporal stores and
/// ordinary stores, with ofences, a lock, and a final dfence.
fn mixed(threads: usize, rounds: usize, x86: bool) -> Arc<Trace> {
    let mut s = format!("# pmsim trace v1\nthreads {threads}\n");
    let shared = [0x1_0000_0000u64, 0x1_0000_1000];
    let mut v = 0x10;
    for r in 0..rounds {
        for t in 0..threads {
            let own = 0x1_0000_2000u64 + 0x40 * t as u64 + 0x1000 * (r % 2) as u64;
            let a = shared[(t + r) % 2] + 8 * ((t + r) % 8) as u64;
            let b = shared[(t + r + 1) % 2] + 16 * ((t + 2 * r) % 4) as u64;
            v += 1;
            s += &format!("T{t} ntstore {a:#x} 8 {v:x}\n");
            v += 1;
            s += &format!("T{t} ntstore {b:#x} 16 {v:x}\nT{t} store {:#x} 8 {v:x}\n", a ^ 8);
            if x86 {
                s += &format!("T{t} clwb {:#x}\nT{t} sfence\n", a ^ 8);
            } else {
                s += &format!("T{t} ofence\n");
            }
            v += 1;
            s += &format!("T{t} ntstore {own:#x} 64 {v:x}\nT{t} store {a:#x} 8 {v:x}\n");
            if !x86 && r % 2 == 1 {
                s += &format!("T{t} acquire 0x100003000\nT{t} ntstore {own:#x} 8 {v:x}\nT{t} release 0x100003000\n");
            }
            if x86 {
                s += &format!("T{t} clwb {a:#x}\nT{t} sfence\n");
            } else {
                s += &format!("T{t} dfence\n");
            }
        }
    }
    Arc::new(pmsim_trace::text::parse_str("wc.trace", &s).unwrap())
}

fn crash_every(trace: &Arc<Trace>, design: &str, buffers: &str, allow_broken: bool) -> pmsim_crash::Report {
    let mut config = Config::default();
    config.set("core.wc_buffers", buffers).unwrap();
    let req = Request {
        trace: trace.clone(),
        design: design.to_string(),
        allow_broken,
        config,
        instants: Instants::Every,
        model: None,
        recovery: None,
        replay_input: "--trace wc.trace".into(),
        max_failures: 1,
    };
    run(&req).unwrap_or_else(|e| panic!("{design}: {e}"))
}

#[test]
fn write_combined_stores_stay_crash_consistent() {
    for x86 in [false, true] {
        for threads in [1, 3] {
            let trace = mixed(threads, 4, x86);
            for design in ["baseline", "eadr"] {
                for buffers in ["1", "2", "10"] {
                    let r = crash_every(&trace, design, buffers, false);
                    assert!(
                        r.ok(),
                        "{design} x86={x86} threads={threads} wc_buffers={buffers}: {:?}",
                        r.failures.first().map(|f| &f.verdict)
                    );
                    assert!(r.images > 10, "{design}: only {} images", r.images);
                }
            }
        }
    }
}

#[test]
fn a_baseline_whose_fences_do_not_wait_for_the_buffers_is_caught() {
    for x86 in [false, true] {
        let r = crash_every(&mixed(1, 4, x86), "broken-baseline-no-sfence-stall", "2", true);
        assert!(!r.ok(), "x86={x86}: the broken baseline passed");
    }
}
