//! A happens-before data-race detector for generated traces.
//!
//! Why: the engine replays each thread with its own timing and orders only `acquire`/`release`/
//! `rmw` on one address in global order (docs/design.md §3). Two accesses to one word from different
//! threads, at least one a store, that no chain of program order and release→acquire orders may
//! therefore be performed in either order in the simulated run. A built-in workload must not have
//! such races on persistent words: a racy store may land after a "later" one and the crash image
//! no longer holds the values the generator (and its recovery) computed; a racy load orders the
//! loader's earlier persists before the other thread's store under epoch persistency in whatever
//! direction the run happened to take.
//!
//! Happens-before: program order, plus every `release`/`rmw` of an address before every later
//! (global order) `acquire`/`rmw` of it. Accesses that are both synchronisation events are never
//! races (the engine orders them).

use pmsim_trace::{Kind, Trace};
use rustc_hash::FxHashMap;

/// One pair of conflicting, unordered accesses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Race {
    /// The 8-byte word both touch.
    pub word: u64,
    /// (thread, gid, kind) of the earlier access in global order.
    pub first: (u16, u64, Kind),
    /// (thread, gid, kind) of the later one.
    pub second: (u16, u64, Kind),
}

impl std::fmt::Display for Race {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "word {:#x}: T{} {} (gid {}) and T{} {} (gid {}) are not ordered by synchronisation",
            self.word,
            self.first.0,
            self.first.2.name(),
            self.first.1,
            self.second.0,
            self.second.2.name(),
            self.second.1
        )
    }
}

#[derive(Clone, Copy)]
struct Acc {
    thread: u16,
    clock: u32,
    gid: u64,
    kind: Kind,
}

#[derive(Default)]
struct WordState {
    store: Option<Acc>,
    /// Loads since the last store, the latest per thread.
    loads: Vec<Acc>,
}

/// Races on words `pm_only` restricts to persistent memory; at most `max` are returned (the
/// earliest in global order).
pub fn find_races(trace: &Trace, pm_only: bool, max: usize) -> Vec<Race> {
    let n = trace.num_threads();
    let mut vc: Vec<Vec<u32>> = (0..n).map(|t| (0..n).map(|u| (u == t) as u32).collect()).collect();
    let mut sync: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
    let mut words: FxHashMap<u64, WordState> = FxHashMap::default();
    let mut out = Vec::new();
    let hb = |a: &Acc, v: &[u32]| a.clock <= v[a.thread as usize];
    for (th, i) in trace.global_order() {
        let t = th as usize;
        let ev = trace.threads[t].events[i as usize];
        if !ev.kind.has_addr() || matches!(ev.kind, Kind::Clwb | Kind::ClflushOpt | Kind::Clflush) {
            continue;
        }
        if matches!(ev.kind, Kind::Acquire | Kind::Rmw) {
            if let Some(s) = sync.get(&ev.addr) {
                for (x, y) in vc[t].iter_mut().zip(s) {
                    *x = (*x).max(*y);
                }
            }
        }
        let me = Acc { thread: th, clock: vc[t][t], gid: ev.gid, kind: ev.kind };
        if !pm_only || trace.is_pm(ev.addr) {
            let first = ev.addr & !7;
            let last = (ev.addr + ev.size.max(1) as u64 - 1) & !7;
            for w in (first..=last).step_by(8) {
                let st = words.entry(w).or_default();
                let check = |a: &Acc, out: &mut Vec<Race>| {
                    let both_sync = a.kind.is_sync() && ev.kind.is_sync();
                    if a.thread != th && !both_sync && !hb(a, &vc[t]) && out.len() < max {
                        out.push(Race { word: w, first: (a.thread, a.gid, a.kind), second: (th, ev.gid, ev.kind) });
                    }
                };
                if let Some(s) = st.store {
                    check(&s, &mut out);
                }
                if ev.kind.writes() {
                    for l in &st.loads {
                        check(l, &mut out);
                    }
                    st.loads.clear();
                    st.store = Some(me);
                } else {
                    st.loads.retain(|l| l.thread != th);
                    st.loads.push(me);
                }
            }
        }
        if matches!(ev.kind, Kind::Release | Kind::Rmw) {
            let s = sync.entry(ev.addr).or_insert_with(|| vec![0; n]);
            for (x, y) in s.iter_mut().zip(&vc[t]) {
                *x = (*x).max(*y);
            }
            vc[t][t] += 1;
        }
        if out.len() >= max {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmsim_trace::{Event, TraceBuilder};

    const A: u64 = 0x1_0000_0000;
    const L: u64 = 0x1000;

    fn st(b: &mut TraceBuilder, t: usize, kind: Kind, addr: u64) {
        b.push(t, Event::mem(kind, addr, 8), Some(&[1, 0, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn unordered_stores_race_and_release_acquire_orders_them() {
        let mut b = TraceBuilder::new(2);
        st(&mut b, 0, Kind::Store, A);
        st(&mut b, 1, Kind::Store, A + 4);
        let r = find_races(&b.finish(), true, 10);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].word, r[0].first.2, r[0].second.2), (A, Kind::Store, Kind::Store));

        let mut b = TraceBuilder::new(2);
        st(&mut b, 0, Kind::Store, A);
        st(&mut b, 0, Kind::Release, L);
        b.push(1, Event::mem(Kind::Acquire, L, 8), None);
        b.push(1, Event::mem(Kind::Load, A, 8), None);
        st(&mut b, 1, Kind::Store, A);
        assert!(find_races(&b.finish(), true, 10).is_empty());
    }

    #[test]
    fn an_acquire_before_the_release_does_not_order() {
        let mut b = TraceBuilder::new(2);
        b.push(1, Event::mem(Kind::Acquire, L, 8), None);
        st(&mut b, 0, Kind::Store, A);
        st(&mut b, 0, Kind::Release, L);
        b.push(1, Event::mem(Kind::Load, A, 8), None);
        let r = find_races(&b.finish(), true, 10);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].first.2, r[0].second.2), (Kind::Store, Kind::Load));
        // DRAM words are only looked at on request.
        let mut b = TraceBuilder::new(2);
        st(&mut b, 0, Kind::Store, L + 64);
        st(&mut b, 1, Kind::Store, L + 64);
        let t = b.finish();
        assert!(find_races(&t, true, 10).is_empty());
        assert_eq!(find_races(&t, false, 10).len(), 1);
    }
}
