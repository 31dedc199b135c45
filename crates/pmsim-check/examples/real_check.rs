//! Crash checking on *real* run records: where the time goes, phase by phase.
//!
//! `cargo run --release -p pmsim-check --example real_check WORKLOAD DESIGN [random N | every] [k=v ...] [--recovery]`
//!
//! WORKLOAD may be `trace:PATH` (a trace file, text or binary, e.g. one recorded with
//! `pmsim trace c++`), and `model=ep|rp|strict|x86` checks against that model instead of the
//! design's.
//!
//! Does what `pmsim-crash` does (a recorded full run builds the checker; a second run stops at
//! each crash instant, follows the crash image with `ImageTracker` and checks it with
//! `Incremental`) but times each phase separately: building the checker, advancing the
//! simulator, updating the tracked image, and checking (word changes + status). Recovery checks
//! are skipped unless `--recovery` (dfence lookups by linear scan of the record, as
//! `pmsim-crash` does) or `--recovery-fast` (dfence completion times in a hash map) is given.
//! Verdict failures are counted, never fatal.

use pmsim_check::{Checker, Model};
use pmsim_engine::crash::{ImageTracker, WordChange};
use pmsim_engine::{design, Config, Promise, Simulator};
use pmsim_trace::{MemImage, Trace, VecSource};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn sim(trace: &Arc<Trace>, d: &str, cfg: &Config) -> Simulator {
    let cfg = &cfg.for_threads(trace.num_threads());
    let des = design::build(d, cfg, true).expect("design");
    Simulator::new(cfg, des, trace.pm.clone(), VecSource::all(trace), trace.labels.clone(), true).expect("simulator")
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let w = a.get(1).cloned().unwrap_or("array".into());
    let d = a.get(2).cloned().unwrap_or("asap-rp".into());
    let mode = a.get(3).cloned().unwrap_or("random".into());
    let every = mode == "every";
    let mut rest = if every { 4 } else { 5 };
    let n_random: usize = if every { 0 } else { a.get(4).and_then(|x| x.parse().ok()).unwrap_or(1000) };
    let mut cfg = Config::default();
    let mut p = std::collections::BTreeMap::new();
    let mut recovery = false;
    let mut fast_done = false;
    let mut model_override: Option<Model> = None;
    while let Some(kv) = a.get(rest) {
        rest += 1;
        if kv == "--recovery" || kv == "--recovery-fast" {
            recovery = true;
            fast_done = kv == "--recovery-fast";
            continue;
        }
        let (k, v) = kv.split_once('=').expect("k=v");
        if k == "model" {
            model_override = Some(Model::from_name(v).expect("model: ep, rp, strict or x86"));
        } else if k.contains('.') {
            cfg.set(k, v).expect("config");
        } else {
            p.insert(k.to_string(), v.to_string());
        }
    }
    let (trace, recovery_check) = match w.strip_prefix("trace:") {
        Some(path) => (pmsim_trace::binary::read_any(std::path::Path::new(path)).expect("trace"), None),
        None => {
            let g = pmsim_workloads::generate(&w, &p).expect("workload");
            (g.trace, Some(g.recovery))
        }
    };
    let trace = Arc::new(trace);
    let recovery = recovery && recovery_check.is_some();

    let t0 = Instant::now();
    let mut full = sim(&trace, &d, &cfg);
    full.run().expect("run");
    let end = full.m.now;
    let record = full.m.record.take().unwrap_or_default();
    let model = match full.design.promise() {
        Promise::Ep => Model::Ep,
        Promise::Rp => Model::Rp,
        Promise::X86 => Model::X86,
        Promise::All | Promise::Strict => Model::Strict,
    };
    let model = model_override.unwrap_or(model);
    drop(full);
    let first_run = t0.elapsed();
    let t1 = Instant::now();
    let checker = Checker::new(&trace, &record, model).expect("checker");
    let build = t1.elapsed();

    let mut instants: Vec<u64> = {
        let mut s = 1u64;
        (0..n_random).map(|_| splitmix(&mut s) % (end + 1)).collect()
    };
    instants.sort_unstable();

    let mut s = sim(&trace, &d, &cfg);
    let mut tracker = ImageTracker::new();
    let mut inc = checker.incremental();
    let mut changes: Vec<WordChange> = Vec::new();
    let (mut t_sim, mut t_track, mut t_check, mut t_rec) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut images, mut bad, mut nchanges, mut rec_fail) = (0u64, 0u64, 0u64, 0u64);
    let dfences = record.dfences.clone();
    let dfence_time: rustc_hash::FxHashMap<u64, u64> = dfences.iter().copied().collect();
    let mut check_at = |s: &mut Simulator, t: u64| {
        let a = Instant::now();
        tracker.update(s, &mut changes);
        let b = Instant::now();
        for c in &changes {
            match c.value {
                Some(v) => inc.set_word(c.word, v.id),
                None => inc.clear_word(c.word),
            }
        }
        let (cons, dur) = inc.status(t);
        let c = Instant::now();
        t_track += b - a;
        t_check += c - b;
        nchanges += changes.len() as u64;
        images += 1;
        bad += !(cons && dur) as u64;
        if recovery {
            let mut img = MemImage::new();
            for (w, v) in tracker.words() {
                img.set(*w, *v);
            }
            let slow = |gid: u64| dfences.iter().any(|&(g, ct)| g == gid && ct <= t);
            let fast = |gid: u64| dfence_time.get(&gid).is_some_and(|&ct| ct <= t);
            let done: &dyn Fn(u64) -> bool = if fast_done { &fast } else { &slow };
            rec_fail += recovery_check.as_ref().is_some_and(|r| r.check(&img, done).is_err()) as u64;
            t_rec += c.elapsed();
        }
    };
    let t2 = Instant::now();
    if every {
        let mut seen = s.m.persist_version;
        loop {
            let a = Instant::now();
            let more = s.step().expect("step");
            t_sim += a.elapsed();
            if s.m.persist_version != seen {
                seen = s.m.persist_version;
                let t = s.m.now;
                if s.next_time() != Some(t) {
                    check_at(&mut s, t);
                }
            }
            if !more {
                break;
            }
        }
    } else {
        for &t in &instants {
            let a = Instant::now();
            s.run_until(t).expect("run");
            t_sim += a.elapsed();
            check_at(&mut s, t);
        }
    }
    let total = t2.elapsed();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{w} {d} {mode} ({model}, static={}): {} events, {} accesses, {images} images ({bad} failing, {rec_fail} recovery failures), {nchanges} word changes",
        checker.is_static(),
        trace.num_events(),
        record.accesses.len(),
    );
    println!(
        "  first run {:.0} ms, checker build {:.0} ms; instants loop {:.0} ms = sim {:.0} + tracker {:.0} + check {:.0} + recovery {:.0} (+ other)",
        ms(first_run),
        ms(build),
        ms(total),
        ms(t_sim),
        ms(t_track),
        ms(t_check),
        ms(t_rec)
    );
    println!(
        "  => {:.0} images/s end to end (loop only), checker alone {:.0} images/s",
        images as f64 / total.as_secs_f64(),
        images as f64 / t_check.as_secs_f64()
    );
}
