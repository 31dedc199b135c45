//! The x86 persistency model (Px86, docs/design.md §5) as persist-order edges.
//!
//! Why it exists: traces of legacy programs (the tracer's output) order persists with
//! `clwb`/`clflushopt`/`clflush` and `sfence`/`mfence`/locked rmw, not with `ofence`/`dfence`;
//! the checker must judge their crash images by what x86 guarantees, and the `baseline` design,
//! running them unmapped, must satisfy it.
//!
//! The rule, as edges of the persist-order graph (the closure makes them transitive):
//! - **Flush**: a store S is guaranteed persistent once a flush of S's line by any thread T,
//!   issued after S became visible, is followed by T's next fence F (`sfence`, `mfence`, a
//!   locked `rmw`, or a `release`, which is a locked instruction on x86). "Visible before the
//!   flush": S is T's own store earlier in program order, or another thread's store that had
//!   performed (in the run, whatever the trace's line order) strictly before a lower bound of
//!   the flush's own time: T's last performed access before the flush, or the completion of
//!   T's last `sfence`/`mfence` before it (flushes are ordered after fences), so the rule never
//!   requires more than x86 does. Edge: the latest such store of the line → F (earlier ones
//!   follow by **Line**).
//!   Non-temporal stores are covered by their thread's next fence directly.
//! - **Fence**: F, and every acquire and rmw, precede the later stores and fence points of
//!   their thread (a chain through the thread's points), and a release precedes the acquire or
//!   rmw that synchronises with it (**Sync**), so "a store performed after that fence, in that
//!   thread or in one synchronised with it" requires the flushed store.
//! - **CLFLUSH**: unlike `clflushopt`/`clwb`, a `clflush` is ordered with later writes: its line
//!   reaches the persistence domain before any later store of its thread becomes globally
//!   observable (Intel SDM; PMDK needs no fence after it). So a `clflush` is also a point of
//!   the chain, preceded by the latest store of its line visible before it (as above): that
//!   store precedes every later store and fence point of the thread. It is not a durability
//!   point: x86 does not promise the line persistent when the `clflush` retires.
//! - **Line**: cached stores to one 64 B line persist in their performed order.
//!
//! Nothing else is ordered: program order alone orders no persists, and loads order nothing.
//!
//! `sfence`/`mfence`/`clflush` become nodes of their own (never stores, so never required durable); their
//! time is that of their thread's latest performed node before them, which a fence cannot
//! complete before. **Durability**: once a fence point *completes* (the record's `fences` for
//! `sfence`/`mfence`; a locked instruction's point when it performs), its persist-order
//! predecessors must be durable whatever the image shows (`Graph::fences_done`, counted by the
//! incremental checker apart from the visible stores' requirements).

use crate::graph::{Node, NodeId};
use crate::verdict::EdgeRule;
use pmsim_trace::{Kind, RunRecord, Trace, LINE_BYTES};
use rustc_hash::FxHashMap;

/// Adds the x86 edges to `edges` and sets the perform times of the fence nodes.
pub(crate) fn add_edges(
    trace: &Trace,
    record: &RunRecord,
    nodes: &mut [Node],
    gid_node: &FxHashMap<u64, NodeId>,
    points: &FxHashMap<u64, NodeId>,
    edges: &mut Vec<(NodeId, NodeId, EdgeRule)>,
) {
    // The fence point of a locked rmw / release performs with it.
    for (gid, &p) in points {
        nodes[p as usize].time = nodes[gid_node[gid] as usize].time;
    }
    // The node that carries an event's order to later events of its thread: its fence point for
    // rmw and release, the node itself for acquire and sfence/mfence.
    let carrier = |gid: u64| points.get(&gid).or_else(|| gid_node.get(&gid)).copied();

    // Line order over performed cached stores.
    let mut line_stores: FxHashMap<u64, Vec<NodeId>> = FxHashMap::default();
    for s in &trace.threads {
        for e in &s.events {
            if !e.kind.writes() || e.kind == Kind::NtStore {
                continue;
            }
            if let Some(&n) = gid_node.get(&e.gid) {
                if nodes[n as usize].time != u64::MAX && nodes[n as usize].is_store {
                    line_stores.entry(e.addr / LINE_BYTES).or_default().push(n);
                }
            }
        }
    }
    // Stores of one line performed at the same picosecond (different cores) keep the order the
    // record gives them, the order each word's coherence order uses: a tie broken by gid could
    // put a line edge against a word's order (a store then "requires" one it overwrote).
    let mut seq: FxHashMap<u64, usize> = FxHashMap::default();
    for (i, a) in record.accesses.iter().enumerate() {
        if a.kind == pmsim_trace::Access::Store {
            seq.insert(a.gid, i);
        }
    }
    for list in line_stores.values_mut() {
        list.sort_unstable_by_key(|&n| {
            let node = &nodes[n as usize];
            (node.time, seq.get(&node.gid).copied().unwrap_or(usize::MAX), node.gid)
        });
        for w in list.windows(2) {
            edges.push((w[0], w[1], EdgeRule::Line));
        }
    }

    // Sync: each acquire/rmw follows the latest release/rmw on its address performed before it.
    let mut last_rel: FxHashMap<u64, NodeId> = FxHashMap::default();
    for sy in &record.syncs {
        let Some(&n) = gid_node.get(&sy.gid) else { continue };
        let Some(c) = carrier(sy.gid) else { continue };
        let kind = nodes[n as usize].kind;
        if matches!(kind, Kind::Acquire | Kind::Rmw) {
            if let Some(&r) = last_rel.get(&sy.addr) {
                if r != c {
                    edges.push((r, c, EdgeRule::Sync));
                }
            }
        }
        if matches!(kind, Kind::Release | Kind::Rmw) {
            last_rel.insert(sy.addr, c);
        }
    }

    // When each sfence/mfence completed: no later flush of its thread executes before.
    let fence_done: FxHashMap<u64, u64> = record.fences.iter().copied().collect();
    // When each load performed: loads are no nodes under x86, but what a thread's load could
    // see was visible before its later flushes too.
    let mut load_time: FxHashMap<u64, u64> = FxHashMap::default();
    for a in record.accesses.iter().filter(|a| matches!(a.kind, pmsim_trace::Access::Load { .. })) {
        load_time.insert(a.gid, a.time);
    }

    // Per thread: flushes, fences and the chain of points.
    for (t, s) in trace.threads.iter().enumerate() {
        let mut point: Option<NodeId> = None;
        let mut now = 0u64; // latest perform time of this thread's nodes so far
        let mut flushed: Vec<(u64, u32, u64)> = Vec::new(); // line, prog, lower bound of its time
        let mut nt: Vec<NodeId> = Vec::new();
        // The latest store of `line` visible before a flush of thread `t` at program position
        // `prog` whose time is at least `ftime`. `ftime` is at least the time of every earlier
        // node of the thread, so no store performed after it qualifies: a binary search skips
        // them (a hot line's later stores made this scan linear).
        let covered = |nodes: &[Node], line: u64, prog: u32, ftime: u64| {
            let list = line_stores.get(&line)?;
            let end = list.partition_point(|&m| nodes[m as usize].time <= ftime);
            list[..end].iter().rev().copied().find(|&m| {
                let mn = &nodes[m as usize];
                if mn.thread as usize == t {
                    mn.prog < prog
                } else {
                    // Strictly before: a store performed in the same picosecond as the bound
                    // may have performed after the flush.
                    mn.time < ftime
                }
            })
        };
        for (i, e) in s.events.iter().enumerate() {
            match e.kind {
                Kind::Clwb | Kind::ClflushOpt | Kind::Clflush => {
                    if trace.is_pm(e.addr) {
                        flushed.push((e.addr / LINE_BYTES, i as u32, now));
                    }
                    if e.kind != Kind::Clflush {
                        continue;
                    }
                    // A clflush point: after the store it writes back, before the later ones.
                    let Some(&n) = gid_node.get(&e.gid) else { continue };
                    nodes[n as usize].time = now;
                    if trace.is_pm(e.addr) {
                        if let Some(m) = covered(nodes, e.addr / LINE_BYTES, i as u32, now) {
                            edges.push((m, n, EdgeRule::Flush));
                        }
                    }
                }
                Kind::Sfence | Kind::Mfence => {
                    let Some(&n) = gid_node.get(&e.gid) else { continue };
                    nodes[n as usize].time = now;
                }
                Kind::Load => {
                    if let Some(&lt) = load_time.get(&e.gid) {
                        now = now.max(lt);
                    }
                }
                _ => {}
            }
            let Some(&n) = gid_node.get(&e.gid) else { continue };
            let kind = nodes[n as usize].kind;
            let is_point =
                matches!(kind, Kind::Sfence | Kind::Mfence | Kind::Clflush | Kind::Rmw | Kind::Release | Kind::Acquire);
            let is_fence = matches!(kind, Kind::Sfence | Kind::Mfence | Kind::Rmw | Kind::Release);
            let c = carrier(e.gid).unwrap_or(n);
            if let Some(p) = point {
                if nodes[n as usize].is_store && p != n {
                    edges.push((p, n, EdgeRule::Fence));
                }
                if is_point && p != c {
                    edges.push((p, c, EdgeRule::Fence));
                }
            }
            if is_fence {
                for &(line, prog, ftime) in &flushed {
                    if let Some(m) = covered(nodes, line, prog, ftime) {
                        if m != c {
                            edges.push((m, c, EdgeRule::Flush));
                        }
                    }
                }
                for &m in &nt {
                    if m != c {
                        edges.push((m, c, EdgeRule::Flush));
                    }
                }
                flushed.clear();
                nt.clear();
            }
            if kind == Kind::NtStore {
                nt.push(n);
            }
            if is_point {
                point = Some(c);
            }
            let time = nodes[n as usize].time;
            if time != u64::MAX {
                now = now.max(time);
            }
            if matches!(kind, Kind::Sfence | Kind::Mfence) {
                if let Some(&done) = fence_done.get(&e.gid) {
                    now = now.max(done);
                }
            }
        }
    }
}
