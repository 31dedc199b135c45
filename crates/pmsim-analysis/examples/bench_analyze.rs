//! Benchmark of the critical-path analysis: events per host second, streaming a binary trace.
//!
//! `cargo run --release -p pmsim-analysis --example bench_analyze [-- EVENTS THREADS]` or
//! `... -- WORKLOAD OPS THREADS` (a built-in workload, e.g. `cwl 100000 4`)
//! writes a synthetic persistent-queue-like trace (stores, loads, lock rmw/release, barriers,
//! strands) to a temporary binary file, then runs each model alone and all three in one pass.

use pmsim_analysis::{analyze_file, Config, Model};
use pmsim_trace::{Event, Kind};
use std::time::Instant;

/// CPU time this process has run (Linux `/proc/self/schedstat`): on a shared host the wall
/// clock measures the neighbours too.
fn cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/schedstat").ok()?;
    Some(s.split_whitespace().next()?.parse::<f64>().ok()? / 1e9)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = std::env::temp_dir().join(format!("pmsim-bench-analyze-{}.bin", std::process::id()));
    if let Some(w) = args.get(1).filter(|a| a.parse::<u64>().is_err()) {
        // A built-in workload: `bench_analyze cwl OPS THREADS`.
        let mut p = std::collections::BTreeMap::new();
        p.insert("ops".to_string(), args.get(2).cloned().unwrap_or("100000".into()));
        p.insert("threads".to_string(), args.get(3).cloned().unwrap_or("4".into()));
        let g = pmsim_workloads::generate(w, &p).expect("workload");
        let f = std::fs::File::create(&path).expect("create temp trace");
        pmsim_trace::binary::write(std::io::BufWriter::new(f), &g.trace, true).expect("write trace");
        println!("workload {w} {p:?}");
    } else {
        let events: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(20_000_000);
        let threads: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(4);
        let f = std::fs::File::create(&path).expect("create temp trace");
        let mut w = pmsim_trace::binary::Writer::new(std::io::BufWriter::new(f), true);
        use pmsim_trace::EventSink;
        w.set_threads(threads).unwrap();
        w.add_pm_range(0x1_0000_0000, 1 << 34).unwrap();
        let op = w.label("insert").unwrap() as u64;
        let mut n = 0u64;
        let mut i = 0u64;
        let mut rng = 88172645463325252u64;
        while n < events {
            let t = (i as usize) % threads;
            let base = 0x1_0000_0000 + (i % (1 << 16)) * 128;
            let lock = 0x4000 + (t as u64) * 64;
            let mut push = |ev: Event| {
                w.push(t, ev, None).unwrap();
                n += 1;
            };
            push(Event { addr: op, ..Event::new(Kind::Begin) });
            push(Event::mem(Kind::Rmw, 0x3000, 8));
            push(Event::new(Kind::Ofence));
            push(Event::new(Kind::Strand));
            for k in 0..13 {
                push(Event::mem(Kind::Store, base + k * 8, 8));
            }
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            push(Event::mem(Kind::Load, 0x1_0000_0000 + (rng % (1 << 20)) * 8, 8));
            push(Event::new(Kind::Ofence));
            push(Event::mem(Kind::Store, 0x1_ffff_0000, 8));
            push(Event::mem(Kind::Store, lock, 8));
            push(Event::mem(Kind::Release, 0x3000, 8));
            push(Event { addr: 10, ..Event::new(Kind::Compute) });
            push(Event { addr: op, ..Event::new(Kind::End) });
            i += 1;
        }
        w.finish().unwrap();
    }
    let cfg = Config::default();
    let mut runs: Vec<(String, Vec<Model>)> = Model::ALL.iter().map(|m| (m.name().to_string(), vec![*m])).collect();
    runs.push(("all (one pass)".into(), Model::ALL.to_vec()));
    for (name, models) in runs {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let r = analyze_file(&path, &models, &cfg).expect("analysis");
        let (s, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds().zip(c0).map(|(a, b)| a - b));
        let ev = r[0].1.events;
        println!(
            "{name:>16}: {ev} events in {s:.3} s = {:.1} M events/s wall{} (critical path {:?})",
            ev as f64 / s / 1e6,
            cpu.map(|c| format!(", {:.1} M events per CPU second", ev as f64 / c / 1e6)).unwrap_or_default(),
            r.iter().map(|(_, c)| c.critical_path).collect::<Vec<_>>()
        );
    }
    // The same analysis on the trace held in memory: the analysis alone, without decoding.
    let t = pmsim_trace::binary::read_path(&path).expect("read trace");
    for m in Model::ALL {
        let (t0, c0) = (Instant::now(), cpu_seconds());
        let r = pmsim_analysis::analyze_trace(&t, &[m], &cfg).expect("analysis");
        let (s, cpu) = (t0.elapsed().as_secs_f64(), cpu_seconds().zip(c0).map(|(a, b)| a - b));
        let ev = r[0].1.events;
        println!(
            "{:>16}: {:.1} M events/s wall{}",
            format!("{} in memory", m.name()),
            ev as f64 / s / 1e6,
            cpu.map(|c| format!(", {:.1} M events per CPU second", ev as f64 / c / 1e6)).unwrap_or_default(),
        );
    }
    std::fs::remove_file(&path).ok();
}
