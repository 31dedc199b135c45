//! PM anywhere in the 64-bit address space. A trace may declare its PM ranges where it likes
//! (`pm BASE SIZE`); these put them at the first lines of memory and at the last ones a trace may
//! use (up to `0xffff_ffff_ffff_ff80`, the line before the last, which traces may not name) and
//! run every design to every crash instant, on the default machine and on one with 4 MCs
//! interleaved per line under XOR mapping. An event argument that packs an address beside another
//! field, or a line address plus a line size, breaks here first (a bug found this way: ASAP's
//! undo-read event packed the MC above the line's *address*).

use pmsim_crash::{run, Instants, Request};
use pmsim_engine::design::DESIGNS;
use pmsim_engine::Config;
use pmsim_trace::Trace;
use std::sync::Arc;

const TOP: u64 = 0xffff_ffff_ffff_0000;

/// Two threads pass a lock word at the top of memory and write lines at both ends, with
/// design-neutral barriers (`neutral`) or x86 flushes and fences.
fn trace(neutral: bool) -> Arc<Trace> {
    let mut s = format!("# pmsim trace v1\nthreads 2\npm 0x0 0x1000\npm {TOP:#x} 0xffc0\n");
    let (order, durable) = if neutral { ("ofence", "dfence") } else { ("sfence", "mfence") };
    let mut v = 0;
    for round in 0..3u64 {
        for t in 0..2u64 {
            let high = 0xffff_ffff_ffff_ff80 - 0x40 * ((round + t) % 3);
            let low = 0x40 * (1 + t + 2 * round);
            let lock = TOP + 0x100;
            v += 1;
            s += &format!("T{t} acquire {lock:#x}\nT{t} store {high:#x} 8 {v:x}\n");
            if !neutral {
                s += &format!("T{t} clwb {high:#x}\n");
            }
            s += &format!("T{t} {order}\nT{t} store {low:#x} 16 {v:x}\nT{t} ntstore {:#x} 8 {v:x}\n", high + 0x20);
            if !neutral {
                s += &format!("T{t} clflushopt {low:#x}\n");
            }
            s += &format!("T{t} rmw {:#x} 8 {v:x}\nT{t} load {:#x} 8\n", TOP + 0x200, low);
            if !neutral {
                s += &format!("T{t} clflush {:#x}\n", TOP + 0x200);
            }
            s += &format!("T{t} release {lock:#x}\nT{t} {durable}\n");
        }
    }
    Arc::new(pmsim_trace::text::parse_str("edges.trace", &s).unwrap())
}

#[test]
fn pm_at_both_ends_of_the_address_space_crash_checks_under_every_design() {
    let mut wide = Config::default();
    for (k, v) in [("mc.count", "4"), ("mc.interleave", "64"), ("mc.mapping", "xor")] {
        wide.set(k, v).unwrap();
    }
    for neutral in [true, false] {
        let trace = trace(neutral);
        for cfg in [Config::default(), wide.clone()] {
            for d in DESIGNS {
                let req = Request {
                    trace: trace.clone(),
                    design: d.name.to_string(),
                    allow_broken: false,
                    config: cfg.clone(),
                    instants: Instants::Every,
                    model: None,
                    recovery: None,
                    replay_input: "--trace edges.trace".into(),
                    max_failures: 1,
                };
                let what =
                    format!("{} ({} trace, {} MCs)", d.name, if neutral { "neutral" } else { "x86" }, cfg.mc.count);
                let r = run(&req).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(r.ok(), "{what}: {:?}", r.failures.first());
                assert!(r.images >= 10, "{what}: only {} images", r.images);
            }
        }
    }
}
