//! Benchmark of incremental crash checking (`--every` mode).
//!
//! Synthesises a 100,000-event, 4-thread trace (stores of 1–8 words, an ofence every 2–5
//! stores, occasional cross-thread conflicts through a shared region and lock-protected
//! updates), records it performed in global order, and checks the image after every word
//! change of an idealised in-order persistence (stores persist in perform order, shuffled within
//! runs of one thread's epoch). Prints crash instants checked per second.
//!
//! `cargo run --release -p pmsim-check --example bench_check [EVENTS] [MODEL] [tso]`
//!
//! With `tso`, stores perform up to 8 events late (a store buffer), so loads after a fence
//! perform before earlier stores: persist order then has edges pointing backwards in perform
//! order and the checker takes its general (instant-dependent closure) path.

use pmsim_check::litmus::global_order_record;
use pmsim_check::{Checker, Model};
use pmsim_trace::{Event, Kind, TraceBuilder};
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let events: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let model = args.get(2).and_then(|s| Model::from_name(s)).unwrap_or(Model::Ep);
    let threads = 4usize;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    // Per-thread programs, then a random interleaving as the global order.
    let mut progs: Vec<Vec<Event>> = vec![Vec::new(); threads];
    for (t, prog) in progs.iter_mut().enumerate() {
        let base = 0x1_0000_0000 + (t as u64) * 0x1000_0000;
        let mut since_fence = 0;
        let mut fence_every = 2 + rng.below(4);
        while prog.len() < events / threads {
            let r = rng.below(100);
            if r < 3 {
                // lock-protected update of a shared persistent line
                let line = 0x1_8000_0000 + rng.below(64) * 64;
                prog.push(Event::mem(Kind::Acquire, 0x2000, 8));
                prog.push(Event::mem(Kind::Store, line, 8));
                prog.push(Event::new(Kind::Ofence));
                prog.push(Event::mem(Kind::Release, 0x2000, 8));
            } else if r < 6 {
                let line = 0x1_8000_0000 + rng.below(64) * 64;
                let k = if rng.below(2) == 0 { Kind::Load } else { Kind::Store };
                prog.push(Event::mem(k, line + 8 * rng.below(8), 8));
            } else if r < 16 {
                prog.push(Event::mem(Kind::Load, base + rng.below(4096) * 64, 8));
            } else {
                let words = 1 + rng.below(8);
                let off = rng.below(9 - words) * 8;
                prog.push(Event::mem(Kind::Store, base + rng.below(4096) * 64 + off, (words * 8) as u8));
                since_fence += 1;
                if since_fence >= fence_every {
                    prog.push(Event::new(Kind::Ofence));
                    since_fence = 0;
                    fence_every = 2 + rng.below(4);
                }
            }
        }
    }
    let mut b = TraceBuilder::new(threads);
    let mut next = vec![0usize; threads];
    loop {
        let live: Vec<usize> = (0..threads).filter(|&t| next[t] < progs[t].len()).collect();
        if live.is_empty() {
            break;
        }
        let t = live[rng.below(live.len() as u64) as usize];
        let e = progs[t][next[t]];
        next[t] += 1;
        let value = e.kind.writes().then(|| vec![1u8; e.size as usize]);
        b.push(t, e, value.as_deref());
    }
    let trace = b.finish();
    let mut record = global_order_record(&trace);
    if args.get(3).is_some_and(|a| a == "tso") {
        let syncs: std::collections::HashSet<u64> = record.syncs.iter().map(|s| s.gid).collect();
        let mut delay = std::collections::HashMap::new();
        for a in record.accesses.iter_mut() {
            if a.kind == pmsim_trace::Access::Store && !syncs.contains(&a.gid) {
                let d = *delay.entry(a.gid).or_insert_with(|| rng.below(8) * 1000 + 500);
                a.time += d;
            }
        }
        record.accesses.sort_by_key(|a| a.time);
    }

    // Idealised persistence: store words in global order, shuffled within same-epoch runs.
    let mut epoch_of = vec![0u32; trace.num_events()];
    for s in &trace.threads {
        let mut ep = 0;
        for e in &s.events {
            if e.kind.is_barrier() {
                ep += 1;
            }
            epoch_of[e.gid as usize] = ep;
        }
    }
    // Store words in perform order (the record's), each with its perform time.
    let mut seq: Vec<(u64, u64, (u16, u32), u64)> = Vec::new();
    for a in &record.accesses {
        if a.kind == pmsim_trace::Access::Store && trace.is_pm(a.word) {
            // under strict persistency every store is its own epoch
            let ep = if model == Model::Strict { a.gid as u32 } else { epoch_of[a.gid as usize] };
            seq.push((a.word, a.gid, (a.thread, ep), a.time));
        }
    }
    let mut i = 0;
    while i < seq.len() {
        let mut j = i;
        while j < seq.len() && seq[j].2 == seq[i].2 {
            j += 1;
        }
        let run = &mut seq[i..j];
        let mut ws: Vec<u64> = run.iter().map(|x| x.0).collect();
        ws.sort_unstable();
        ws.dedup();
        if ws.len() == run.len() {
            for k in (1..run.len()).rev() {
                let r = rng.below(k as u64 + 1) as usize;
                run.swap(k, r);
            }
        }
        i = j;
    }

    let t0 = Instant::now();
    let checker = match Checker::new(&trace, &record, model) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bench_check: {e}");
            std::process::exit(1);
        }
    };
    let build = t0.elapsed();
    let t1 = Instant::now();
    let mut inc = checker.incremental();
    let mut now = 0u64;
    let mut bad = 0usize;
    let mut failing: Vec<usize> = Vec::new();
    for (k, &(w, gid, _, time)) in seq.iter().enumerate() {
        inc.set_word(w, gid);
        now = now.max(time);
        let (consistent, durable) = inc.status(now);
        if !(consistent && durable) {
            bad += 1;
            if failing.len() < 50 {
                failing.push(k);
            }
        }
    }
    let el = t1.elapsed();
    // Naming violations (slow path, only for failing instants): time a few.
    let mut naming = String::new();
    if !failing.is_empty() {
        let mut inc = checker.incremental();
        let mut now = 0u64;
        let mut next = 0;
        let t2 = Instant::now();
        for (k, &(w, gid, _, time)) in seq.iter().enumerate().take(failing[failing.len() - 1] + 1) {
            inc.set_word(w, gid);
            now = now.max(time);
            if failing.get(next) == Some(&k) {
                next += 1;
                assert!(!inc.check(now).violations.is_empty());
            }
        }
        naming = format!(
            "\n  naming violations (Verdict::violations): {:.1} ms per failing instant",
            t2.elapsed().as_secs_f64() * 1e3 / failing.len() as f64
        );
    }
    let n = seq.len();
    println!(
        "model {model}: {} events, {} crash instants, checker build {:.3} s (static closure: {}), \
         checking {:.3} s = {:.0} instants/s, {bad} inconsistent{naming}",
        trace.num_events(),
        n,
        build.as_secs_f64(),
        checker.is_static(),
        el.as_secs_f64(),
        n as f64 / el.as_secs_f64()
    );
}
