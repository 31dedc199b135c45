//! Recovery must accept every image the hardware may leave, not only the ones one design happens
//! to produce. Within one epoch, stores to different lines may persist in any order (docs/design.md
//! §6); stores to one line persist in program order (a line is written back, flushed and queued
//! whole; FAST_FAIR relies on exactly that). The images here cut the trace at every point, then
//! keep, for each line the cutting thread stored to since its last barrier or sync event (no
//! other thread ran in between, so nothing else can depend on those stores), a seeded random
//! prefix of that line's stores. The workload's recovery must succeed on every such image.

use pmsim_trace::{Kind, MemImage, WordVal};
use pmsim_workloads::{apply_store, generate, Rng};
use std::collections::{BTreeMap, HashMap};

/// Barriers and sync events end the run of stores that may persist out of order.
fn ends_epoch(k: Kind) -> bool {
    k.is_sync() || matches!(k, Kind::Ofence | Kind::Dfence | Kind::Sfence | Kind::Mfence)
}

/// Images checked per workload (the first ones in global order; they include dash-eh's splits).
const PER_WORKLOAD: usize = 1500;

#[test]
fn recovery_accepts_any_subset_of_the_open_epoch() {
    let mut tried = 0;
    for name in pmsim_workloads::names() {
        let mut p = BTreeMap::new();
        p.insert("ops".to_string(), "30".to_string());
        if name == "dash-eh" {
            // small segments: many splits
            p.insert("buckets".to_string(), "4".to_string());
            p.insert("initial_depth".to_string(), "0".to_string());
        }
        let g = generate(name, &p).unwrap();
        let order = g.trace.global_order();
        let mut rng = Rng::new(7);
        // The image of every store before the cut, and what each store overwrote.
        let mut img = MemImage::new();
        let mut overwrote: HashMap<u64, Vec<(u64, Option<WordVal>)>> = HashMap::new();
        let mut checked = 0;
        for cut in 1..=order.len() {
            if checked == PER_WORKLOAD {
                break;
            }
            let (th, i) = order[cut - 1];
            let ev = g.trace.threads[th as usize].events[i as usize];
            if ev.kind.writes() && g.trace.is_pm(ev.addr) {
                overwrote.insert(ev.gid, apply_store(&mut img, &g.trace, th as usize, i as usize));
            }
            // This thread's stores since its last barrier, newest first, with no other thread
            // in between.
            let mut open = Vec::new();
            for &(t, i) in order[..cut].iter().rev() {
                let ev = g.trace.threads[t as usize].events[i as usize];
                if t != th || ends_epoch(ev.kind) {
                    break;
                }
                if ev.kind.writes() && g.trace.is_pm(ev.addr) {
                    open.push((ev.gid, ev.addr & !63));
                }
            }
            // Only epochs over two lines or more can persist out of order.
            if open.iter().all(|o| o.1 == open[0].1) {
                continue;
            }
            tried += 1;
            checked += 1;
            // Per line, drop a random number of the newest stores (undoing them newest first).
            let mut lines: BTreeMap<u64, usize> = BTreeMap::new();
            for &(_, line) in &open {
                *lines.entry(line).or_default() += 1;
            }
            let mut keep_back: BTreeMap<u64, usize> =
                lines.iter().map(|(&l, &n)| (l, rng.below(n as u64 + 1) as usize)).collect();
            let mut image = img.clone();
            let mut dropped = Vec::new();
            for &(gid, line) in &open {
                let left = keep_back.get_mut(&line).expect("line");
                if *left == 0 {
                    continue;
                }
                *left -= 1;
                dropped.push(gid);
                for &(w, prev) in &overwrote[&gid] {
                    match prev {
                        Some(v) => image.set(w, v),
                        None => image.remove(w),
                    }
                }
            }
            let cut_gid = ev.gid + 1;
            let done = |gid: u64| gid < cut_gid;
            if let Err(e) = g.recovery.check(&image, &done) {
                panic!("{name}: cut after gid {}, without {dropped:?} of the open epoch: {e}", ev.gid);
            }
        }
    }
    assert!(tried > 10_000, "only {tried} images with an open multi-line epoch");
}
