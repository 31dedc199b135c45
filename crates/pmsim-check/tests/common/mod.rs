//! Test helpers: a brute-force reference checker written directly from docs/design.md §6 (explicit
//! PMO graph over events, literal RP rule, BFS transitive closure), and trace builders.
#![allow(dead_code)]

use pmsim_check::Model;
use pmsim_trace::{Access, Kind, MemImage, RunRecord, Trace, INITIAL_ID};
use std::collections::{BTreeMap, BTreeSet};

pub struct Ev {
    pub gid: u64,
    pub thread: usize,
    pub prog: usize,
    pub kind: Kind,
    pub addr: u64,
    pub size: u8,
}

pub fn events(trace: &Trace) -> BTreeMap<u64, Ev> {
    let mut m = BTreeMap::new();
    for (t, s) in trace.threads.iter().enumerate() {
        for (i, e) in s.events.iter().enumerate() {
            m.insert(e.gid, Ev { gid: e.gid, thread: t, prog: i, kind: e.kind, addr: e.addr, size: e.size });
        }
    }
    m
}

pub fn words(addr: u64, size: u8) -> Vec<u64> {
    (addr & !7..addr + size as u64).step_by(8).collect()
}

/// Per record access, whether it is a load its store buffer forwarded (design.md §6): it reads
/// its own thread's store while the word's latest store before it in the record is another.
pub fn forwarded(evs: &BTreeMap<u64, Ev>, rec: &RunRecord) -> Vec<bool> {
    (0..rec.accesses.len())
        .map(|i| {
            let a = &rec.accesses[i];
            let Access::Load { read } = a.kind else { return false };
            let Some(src) = evs.get(&read) else { return false };
            let latest = rec.accesses[..i].iter().rev().find(|b| b.word == a.word && b.kind == Access::Store);
            src.thread == a.thread as usize
                && src.kind.writes()
                && words(src.addr, src.size).contains(&a.word)
                && latest.is_none_or(|b| b.gid != read)
        })
        .collect()
}

/// (consistent, durable) by brute force.
pub fn reference(trace: &Trace, rec: &RunRecord, model: Model, img: &MemImage, t: u64) -> (bool, bool) {
    let evs = events(trace);
    let forwarded = forwarded(&evs, rec);
    // perform time of each event: max over its record entries
    let mut ptime: BTreeMap<u64, u64> = BTreeMap::new();
    let mut store_words: BTreeMap<u64, usize> = BTreeMap::new();
    for a in &rec.accesses {
        let e = ptime.entry(a.gid).or_insert(0);
        *e = (*e).max(a.time);
        if a.kind == Access::Store {
            *store_words.entry(a.gid).or_insert(0) += 1;
        }
    }
    for s in &rec.syncs {
        let e = ptime.entry(s.gid).or_insert(0);
        *e = (*e).max(s.time);
    }
    let performed = |g: u64| -> bool {
        let Some(ev) = evs.get(&g) else { return false };
        if ev.kind.writes() && store_words.get(&g).copied().unwrap_or(0) != words(ev.addr, ev.size).len() {
            return false;
        }
        ptime.get(&g).is_some_and(|&x| x <= t)
    };
    let nodes: Vec<u64> = evs.keys().copied().filter(|&g| performed(g)).collect();
    let mut edges: BTreeSet<(u64, u64)> = BTreeSet::new();
    // program order / barriers
    for &a in &nodes {
        for &b in &nodes {
            let (ea, eb) = (&evs[&a], &evs[&b]);
            if ea.thread != eb.thread || ea.prog >= eb.prog {
                continue;
            }
            let barrier = trace.threads[ea.thread].events[ea.prog + 1..eb.prog].iter().any(|e| e.kind.is_barrier());
            if model == Model::Strict || barrier {
                edges.insert((a, b));
            }
        }
    }
    // per-word perform order
    // (gid, is store, orders across threads: not a forwarded load)
    let mut per_word: BTreeMap<u64, Vec<(u64, bool, bool)>> = BTreeMap::new();
    for (a, &fwd) in rec.accesses.iter().zip(&forwarded) {
        per_word.entry(a.word).or_default().push((a.gid, a.kind == Access::Store, !fwd));
    }
    for list in per_word.values() {
        for i in 0..list.len() {
            for j in i + 1..list.len() {
                let ((a, sa, xa), (b, sb, xb)) = (list[i], list[j]);
                if a == b || !performed(a) || !performed(b) {
                    continue;
                }
                if sa && sb {
                    edges.insert((a, b)); // SPA
                }
                if model != Model::Rp && evs[&a].thread != evs[&b].thread && (sa || sb) && xa && xb {
                    edges.insert((a, b));
                }
            }
        }
    }
    if model == Model::Rp {
        let evs = &evs;
        let nodes = &nodes;
        let stores_of =
            move |th: usize| nodes.iter().copied().filter(move |g| evs[g].thread == th && evs[g].kind.writes());
        // stores before a release precede it
        for &r in nodes.iter() {
            if matches!(evs[&r].kind, Kind::Release | Kind::Rmw) {
                for s in stores_of(evs[&r].thread) {
                    if evs[&s].prog < evs[&r].prog {
                        edges.insert((s, r));
                    }
                }
            }
        }
        // synchronisation: each acquire/rmw with the latest release/rmw before it on its address
        let mut last: BTreeMap<u64, u64> = BTreeMap::new();
        for s in &rec.syncs {
            let k = evs[&s.gid].kind;
            if matches!(k, Kind::Acquire | Kind::Rmw) && performed(s.gid) {
                if let Some(&r) = last.get(&s.addr) {
                    if performed(r) {
                        let (er, ea) = (&evs[&r], &evs[&s.gid]);
                        for x in stores_of(er.thread).filter(|x| evs[x].prog <= er.prog) {
                            for y in stores_of(ea.thread).filter(|y| evs[y].prog > ea.prog) {
                                edges.insert((x, y));
                            }
                        }
                    }
                }
            }
            if matches!(k, Kind::Release | Kind::Rmw) {
                last.insert(s.addr, s.gid);
            }
        }
    }
    // closure: preds[v] = nodes with a path of length >= 1 to v
    let mut succ: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &(a, b) in &edges {
        succ.entry(a).or_default().push(b);
    }
    let mut reach: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
    for &a in &nodes {
        let mut seen = BTreeSet::new();
        let mut st: Vec<u64> = succ.get(&a).cloned().unwrap_or_default();
        while let Some(x) = st.pop() {
            if seen.insert(x) {
                st.extend(succ.get(&x).cloned().unwrap_or_default());
            }
        }
        reach.insert(a, seen);
    }
    let store_pos =
        |w: u64, g: u64| -> Option<usize> { per_word.get(&w)?.iter().filter(|x| x.1).position(|x| x.0 == g) };
    let durable = |p: u64| -> bool {
        let e = &evs[&p];
        words(e.addr, e.size).into_iter().all(|w| {
            let shown = img.id_at(w);
            match (store_pos(w, p), store_pos(w, shown)) {
                (Some(pp), Some(sp)) => sp >= pp,
                _ => false,
            }
        })
    };
    let mut consistent = true;
    let mut visible: BTreeSet<u64> = BTreeSet::new();
    for (w, v) in img.sorted() {
        if v.id == INITIAL_ID {
            continue;
        }
        if store_pos(w, v.id).is_none() || !performed(v.id) {
            consistent = false;
        } else {
            visible.insert(v.id);
        }
    }
    for &p in &nodes {
        let e = &evs[&p];
        if !e.kind.writes() || !trace.is_pm(e.addr) {
            continue;
        }
        if visible.iter().any(|v| reach[&p].contains(v)) && !durable(p) {
            consistent = false;
        }
    }
    let mut dur = true;
    for &(d, time) in &rec.dfences {
        if time > t {
            continue;
        }
        let ed = &evs[&d];
        for e in evs.values() {
            let covered = e.thread == ed.thread && e.prog < ed.prog && e.kind.writes() && trace.is_pm(e.addr);
            if covered && (!performed(e.gid) || !durable(e.gid)) {
                dur = false;
            }
        }
    }
    (consistent, dur)
}
