//! Naming violations (only run when a check fails): which visible store requires which missing
//! one, what the image shows instead, and a shortest persist-order path between them.
//!
//! Deterministic: bogus words by address first, then visible stores by gid with their missing
//! predecessors by gid (each missing store reported once), then dfences by thread, then (x86)
//! completed fence points, latest first.

use crate::graph::NodeId;
use crate::incremental::{Incremental, Shown};
use crate::verdict::{EdgeRule, MissingStore, PathStep, StoreRef, Violation, ViolationKind, MAX_VIOLATIONS};
use pmsim_trace::{Kind, INITIAL_ID};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

impl Incremental {
    pub(crate) fn violations(&self, consistent: bool, durable: bool) -> Vec<Violation> {
        let mut out = Vec::new();
        if !consistent {
            self.never_written(&mut out);
            self.missing(&mut out);
        }
        if !durable {
            self.not_durable(&mut out);
        }
        out.truncate(MAX_VIOLATIONS);
        out
    }

    fn never_written(&self, out: &mut Vec<Violation>) {
        let g = &self.g;
        let mut bad: Vec<(u64, u64)> = Vec::new();
        for (wi, &id) in self.img_id.iter().enumerate() {
            let ok = match self.classify(wi as u32, id) {
                Shown::Initial | Shown::Outside => true,
                Shown::Bogus => false,
                Shown::Store(n, _) => self.performed[n as usize],
            };
            if !ok {
                bad.push((g.words[wi], id));
            }
        }
        bad.extend(self.unknown.iter().map(|(&w, &id)| (w, id)));
        bad.sort_unstable();
        for (word, id) in bad.into_iter().take(MAX_VIOLATIONS) {
            let thread = g.gid_node.get(&id).map(|&n| g.nodes[n as usize].thread);
            out.push(Violation {
                kind: ViolationKind::NeverWritten,
                at: self.t,
                visible: Some(StoreRef { gid: id, thread, word }),
                missing: None,
                dfence: None,
                path: Vec::new(),
            });
        }
    }

    /// First word of `p` whose image is older than `p`, and what it shows.
    fn missing_store(&self, p: NodeId) -> MissingStore {
        let g = &self.g;
        let node = &g.nodes[p as usize];
        for &(wi, pos) in g.store_words(p) {
            let shown = self.img_id[wi as usize];
            let older = match self.classify(wi, shown) {
                Shown::Store(_, sp) => sp < pos,
                Shown::Outside => false,
                Shown::Initial | Shown::Bogus => true,
            };
            if older {
                let shows = if shown == INITIAL_ID { None } else { Some(shown) };
                return MissingStore { gid: node.gid, thread: node.thread, word: g.words[wi as usize], shows };
            }
        }
        MissingStore { gid: node.gid, thread: node.thread, word: 0, shows: None }
    }

    fn visible_word(&self, v: NodeId) -> u64 {
        let g = &self.g;
        g.store_words(v)
            .iter()
            .find(|&&(wi, _)| self.img_id[wi as usize] == g.nodes[v as usize].gid)
            .map(|&(wi, _)| g.words[wi as usize])
            .unwrap_or(0)
    }

    fn missing(&self, out: &mut Vec<Violation>) {
        let g = &self.g;
        let mut vis: Vec<NodeId> =
            (0..g.nodes.len() as NodeId).filter(|&n| self.performed[n as usize] && self.vis[n as usize] > 0).collect();
        vis.sort_unstable_by_key(|&n| g.nodes[n as usize].gid);
        let mut reported: Vec<NodeId> = Vec::new();
        for v in vis {
            if out.len() >= MAX_VIOLATIONS {
                return;
            }
            for p in self.not_durable_preds(v) {
                if reported.contains(&p) || out.len() >= MAX_VIOLATIONS {
                    continue;
                }
                reported.push(p);
                let missing = self.missing_store(p);
                let kind =
                    if missing.shows.is_some() { ViolationKind::Shadowed } else { ViolationKind::MissingPredecessor };
                let vn = &g.nodes[v as usize];
                out.push(Violation {
                    kind,
                    at: self.t,
                    visible: Some(StoreRef { gid: vn.gid, thread: Some(vn.thread), word: self.visible_word(v) }),
                    missing: Some(missing),
                    dfence: None,
                    path: self.path(p, v),
                });
            }
        }
    }

    /// The predecessors of `v` (in its current set) that are not durable, by gid.
    fn not_durable_preds(&self, v: NodeId) -> Vec<NodeId> {
        let g = &self.g;
        let r = self.src.req(v);
        let mut cands: Vec<NodeId> = Vec::new();
        for u in 0..g.threads {
            let d = self.agg.durable_prefix(u);
            if r.c[u] > d {
                let found = g.pos_nodes(u, d, r.c[u]).iter().copied().find(|&p| {
                    let n = &g.nodes[p as usize];
                    n.pm && self.performed[p as usize] && self.agg.nd[p as usize] > 0
                });
                cands.extend(found);
            }
        }
        cands.extend(r.members().filter(|&p| self.agg.nd[p as usize] > 0));
        cands.sort_unstable_by_key(|&p| g.nodes[p as usize].gid);
        cands.dedup(); // a store may be in two shared bases (x86)
                       // A one-word store that a later missing candidate of its word supersedes is implied by
                       // it: name only the latest, so the list (and what a cap of it shows) does not depend on
                       // how far the set representation pruned (x86's shared bases prune at folds only).
        let mut latest: FxHashMap<u32, u32> = FxHashMap::default();
        for &p in &cands {
            for &(w, pos) in g.store_words(p) {
                let m = latest.entry(w).or_insert(pos);
                *m = (*m).max(pos);
            }
        }
        cands.retain(|&p| match g.store_words(p) {
            [(w, pos)] => latest[w] == *pos,
            _ => true,
        });
        cands
    }

    /// x86: stores a completed fence point requires that are not durable, latest fence first
    /// (a thread's later fence requires what its earlier ones did), each store once.
    fn not_durable_after_fences(&self, out: &mut Vec<Violation>) {
        let g = &self.g;
        let mut reported: Vec<NodeId> = Vec::new();
        for &(_, f) in g.fences_done[..self.next_fence].iter().rev() {
            if out.len() >= MAX_VIOLATIONS {
                return;
            }
            for p in self.not_durable_preds(f) {
                if reported.contains(&p) || out.len() >= MAX_VIOLATIONS {
                    continue;
                }
                reported.push(p);
                out.push(Violation {
                    kind: ViolationKind::NotDurable,
                    at: self.t,
                    visible: None,
                    missing: Some(self.missing_store(p)),
                    dfence: Some(g.nodes[f as usize].gid),
                    path: self.path(p, f),
                });
            }
        }
    }

    fn not_durable(&self, out: &mut Vec<Violation>) {
        let g = &self.g;
        for u in 0..g.threads {
            let Some((boundary, _, dgid)) = self.dreq[u] else { continue };
            let found = g.pos_nodes(u, 0, boundary).iter().copied().find(|&p| {
                let n = &g.nodes[p as usize];
                n.pm && (!self.performed[p as usize] || self.agg.nd[p as usize] > 0)
            });
            if let Some(p) = found {
                let n = &g.nodes[p as usize];
                let point = g.dfences.iter().find(|d| d.gid == dgid);
                let fence = point.map_or(Kind::Dfence, |d| d.kind);
                // A performed store's own durability point (eADR, BBB) is no fence.
                let performed = point.is_some_and(|d| d.performed);
                let mut path = vec![
                    PathStep { gid: n.gid, thread: n.thread, kind: n.kind.name(), edge: Some(EdgeRule::ProgramOrder) },
                    PathStep { gid: dgid, thread: u as u16, kind: fence.name(), edge: None },
                ];
                if n.gid == dgid {
                    // The missing store is its own durability point: no path, not a self-loop.
                    path.truncate(1);
                    path[0].edge = None;
                }
                out.push(Violation {
                    kind: ViolationKind::NotDurable,
                    at: self.t,
                    visible: None,
                    missing: Some(self.missing_store(p)),
                    dfence: (!performed).then_some(dgid),
                    path,
                });
            }
        }
        self.not_durable_after_fences(out);
    }

    /// A shortest persist-order path from `from` to `to` among performed nodes (BFS; barrier
    /// steps jump straight to any later epoch of the thread).
    pub(crate) fn path(&self, from: NodeId, to: NodeId) -> Vec<PathStep> {
        let g = &self.g;
        let mut parent: FxHashMap<NodeId, (NodeId, EdgeRule)> = FxHashMap::default();
        let mut expanded: Vec<u32> = (0..g.threads).map(|u| g.num_epochs(u)).collect();
        let mut q = VecDeque::from([from]);
        let mut found = false;
        'bfs: while let Some(z) = q.pop_front() {
            let zn = &g.nodes[z as usize];
            let mut succ: Vec<(NodeId, EdgeRule)> =
                g.out_edges(z).iter().copied().filter(|&(n, _)| self.performed[n as usize]).collect();
            let t = zn.thread as usize;
            let lo = zn.epoch + 1;
            if lo < expanded[t] {
                for e in lo..expanded[t] {
                    succ.extend(
                        g.epoch_nodes(t, e)
                            .iter()
                            .filter(|&&n| self.performed[n as usize])
                            .map(|&n| (n, g.barrier_rule())),
                    );
                }
                expanded[t] = lo;
            }
            for (n, rule) in succ {
                if n == from || parent.contains_key(&n) {
                    if n == to && n == from && !found {
                        parent.insert(n, (z, rule));
                        found = true;
                        break 'bfs;
                    }
                    continue;
                }
                parent.insert(n, (z, rule));
                if n == to {
                    found = true;
                    break 'bfs;
                }
                q.push_back(n);
            }
        }
        if !found {
            return Vec::new();
        }
        let mut rev: Vec<(NodeId, Option<EdgeRule>)> = vec![(to, None)];
        let mut cur = to;
        loop {
            let (p, rule) = parent[&cur];
            rev.push((p, Some(rule)));
            cur = p;
            if cur == from {
                break;
            }
        }
        rev.reverse();
        // Acquire-chain links are not model edges: `a -> a' -> x` becomes `a -> x`, which is
        // one (an acquire precedes everything its epoch's later acquires precede).
        let mut i = 0;
        while i + 1 < rev.len() {
            match rev[i].1 {
                Some(rule) if g.is_chain_edge(rev[i + 1].0, rule) => {
                    rev[i].1 = rev[i + 1].1;
                    rev.remove(i + 1);
                }
                _ => i += 1,
            }
        }
        rev.into_iter()
            .map(|(n, edge)| {
                let node = &g.nodes[n as usize];
                PathStep { gid: node.gid, thread: node.thread, kind: node.kind.name(), edge }
            })
            .collect()
    }
}
