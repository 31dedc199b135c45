//! Checking a sequence of images at non-decreasing crash instants without redoing the closure.
//!
//! State kept up to date as words change and time advances (costs per operation):
//! - per store, the number of its words whose image is older than it (`nd`); a `set_word` walks
//!   the positions between the old and the new store on that word (O(distance));
//! - per thread, the set of positions (in its node list) of performed, non-durable PM stores; its
//!   minimum `D[u]` means "every performed PM store of u at positions < D[u] is durable"
//!   (O(log) per flip);
//! - over the visible stores V, the multiset of required position prefixes per thread (`need`) and,
//!   per individually required store, how many visible stores require it (`req_count`), with
//!   `bad_ind` = number of (visible, required) pairs whose required store is not durable.
//!
//! The image is consistent iff no word shows a bogus or unperformed id, `bad_ind == 0`, and
//! `max need[u] <= D[u]` for every thread: O(threads) per check. It is durable iff every
//! completed dfence's prefix is durable and (x86) the same aggregates kept over the completed
//! fence points instead of the visible stores (`Agg::fenced`) hold. Only a failing check walks
//! the image to name violations.

use crate::closure::Closure;
use crate::graph::{Graph, NodeId};
use crate::req::Req;
use crate::verdict::Verdict;
use pmsim_trace::INITIAL_ID;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub(crate) enum Src {
    Static(Arc<Vec<Req>>),
    Dynamic(Box<Closure>),
}

impl Src {
    pub fn req(&self, n: NodeId) -> &Req {
        match self {
            Src::Static(v) => &v[n as usize],
            Src::Dynamic(c) => c.req(n),
        }
    }
}

/// What a word shows, classified.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shown {
    Initial,
    /// Not a store writing this word.
    Bogus,
    Store(NodeId, u32),
    /// A value from outside the graph over every store of the word ([`OUTSIDE_ID`]).
    Outside,
}

/// What [`Incremental::set_word_outside`] records: the word shows a value written by something
/// the graph does not order (a remote region, docs/design.md §9) after whatever of the word's
/// stores reached NVM. Nothing is known of which did: every store of the word counts as
/// overwritten, none as visible, so the word constrains nothing.
pub(crate) const OUTSIDE_ID: u64 = u64::MAX - 1;

/// The requirements of one group of nodes (the visible stores, or the completed x86 fences) as
/// aggregates (see the module docs).
pub(crate) struct Reqs {
    pub need: Vec<BTreeMap<u32, u32>>,
    /// Per node: how many of the group's sets hold it individually.
    pub req_count: Vec<u32>,
    /// (set, member) pairs whose member is not durable.
    pub bad_ind: u64,
    /// How many of the group's sets share each base (by [`crate::req::Base::key`]): a base's
    /// members are counted in `req_count` once while any set uses it, so stores that inherit one
    /// fence point's set (x86) cost O(their own `ind`), not O(base).
    pub base_users: FxHashMap<u64, u32>,
}

impl Reqs {
    fn new(threads: usize, nodes: usize) -> Reqs {
        Reqs {
            need: vec![BTreeMap::new(); threads],
            req_count: vec![0; nodes],
            bad_ind: 0,
            base_users: FxHashMap::default(),
        }
    }

    fn contribute(&mut self, nd: &[u32], r: &Req, add: bool) {
        for (u, &c) in r.c.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let m = &mut self.need[u];
            if add {
                *m.entry(c).or_insert(0) += 1;
            } else if let Some(k) = m.get_mut(&c) {
                *k -= 1;
                if *k == 0 {
                    m.remove(&c);
                }
            }
        }
        for b in &r.bases {
            let users = self.base_users.entry(b.key()).or_insert(0);
            let first_or_last = if add {
                *users += 1;
                *users == 1
            } else {
                *users -= 1;
                *users == 0
            };
            if first_or_last {
                if !add {
                    self.base_users.remove(&b.key());
                }
                self.count(nd, &b.ids, add);
            }
        }
        self.count(nd, &r.ind, add);
    }

    fn count(&mut self, nd: &[u32], members: &[NodeId], add: bool) {
        for &p in members {
            let bad = nd[p as usize] > 0;
            if add {
                self.req_count[p as usize] += 1;
                self.bad_ind += bad as u64;
            } else {
                self.req_count[p as usize] -= 1;
                self.bad_ind -= bad as u64;
            }
        }
    }

    /// A store's durability changed.
    fn flip(&mut self, p: NodeId, durable: bool) {
        let Some(&rc) = self.req_count.get(p as usize) else { return };
        if durable {
            self.bad_ind -= rc as u64;
        } else {
            self.bad_ind += rc as u64;
        }
    }

    /// Whether every set of the group is durable, given each thread's durable prefix.
    fn hold(&self, durable_prefix: impl Fn(usize) -> u32) -> bool {
        self.bad_ind == 0
            && self
                .need
                .iter()
                .enumerate()
                .all(|(u, m)| m.last_key_value().is_none_or(|(&c, _)| c <= durable_prefix(u)))
    }
}

/// Aggregates over the visible stores and the completed x86 fences (see the module docs).
pub(crate) struct Agg {
    pub nd: Vec<u32>,
    /// Per thread: positions of its performed PM stores that are not durable.
    pub nd_pos: Vec<BTreeSet<u32>>,
    /// What the visible stores require: consistency.
    pub vis: Reqs,
    /// What the completed x86 fences require: durability (empty under the other models).
    pub fenced: Reqs,
}

impl Agg {
    fn contribute(&mut self, r: &Req, add: bool) {
        self.vis.contribute(&self.nd, r, add);
    }

    /// `D[u]`: the position of `u`'s first performed non-durable PM store.
    pub fn durable_prefix(&self, u: usize) -> u32 {
        self.nd_pos[u].first().copied().unwrap_or(u32::MAX)
    }
}

/// Incremental checker; see the module docs. Created by [`crate::Checker::incremental`].
pub struct Incremental {
    pub(crate) g: Arc<Graph>,
    static_reqs: Option<Arc<Vec<Req>>>,
    pub(crate) src: Src,
    pub(crate) t: u64,
    next: usize,
    next_df: usize,
    pub(crate) performed: Vec<bool>,
    pub(crate) img_id: Vec<u64>,
    img_pos: Vec<i64>,
    /// Words the run never wrote that the image gives a non-initial id.
    pub(crate) unknown: BTreeMap<u64, u64>,
    bogus: usize,
    unperf_vis: usize,
    pub(crate) vis: Vec<u32>,
    pub(crate) agg: Agg,
    /// Per thread: (boundary position, ready time, gid) of its latest completed dfence.
    pub(crate) dreq: Vec<Option<(u32, u64, u64)>>,
    /// x86: per node, whether it is a completed fence point (its set counts in `agg.fenced`).
    pub(crate) fence_done: Vec<bool>,
    /// x86: how many of `g.fences_done` have completed.
    pub(crate) next_fence: usize,
    changed: Vec<(NodeId, Req)>,
}

impl Incremental {
    pub(crate) fn new(g: Arc<Graph>, static_reqs: Option<Arc<Vec<Req>>>) -> Incremental {
        let n = g.nodes.len();
        let t = g.threads;
        let nd: Vec<u32> = (0..n as NodeId).map(|x| g.store_words(x).len() as u32).collect();
        let src = match &static_reqs {
            Some(v) => Src::Static(v.clone()),
            None => Src::Dynamic(Box::new(Closure::new(g.clone()))),
        };
        Incremental {
            static_reqs,
            src,
            t: 0,
            next: 0,
            next_df: 0,
            performed: vec![false; n],
            img_id: vec![INITIAL_ID; g.words.len()],
            img_pos: vec![-1; g.words.len()],
            unknown: BTreeMap::new(),
            bogus: 0,
            unperf_vis: 0,
            vis: vec![0; n],
            agg: Agg {
                nd,
                nd_pos: vec![BTreeSet::new(); t],
                vis: Reqs::new(t, n),
                fenced: Reqs::new(t, if g.fences_done.is_empty() { 0 } else { n }),
            },
            fence_done: if g.fences_done.is_empty() { Vec::new() } else { vec![false; n] },
            next_fence: 0,
            dreq: vec![None; t],
            changed: Vec::new(),
            g,
        }
    }

    pub(crate) fn classify(&self, wi: u32, id: u64) -> Shown {
        if id == INITIAL_ID {
            return Shown::Initial;
        }
        if id == OUTSIDE_ID {
            return Shown::Outside;
        }
        match self.g.node_of(id) {
            Some(n) => match self.g.store_words(n).iter().find(|(w, _)| *w == wi) {
                Some(&(_, pos)) => Shown::Store(n, pos),
                None => Shown::Bogus,
            },
            None => Shown::Bogus,
        }
    }

    /// The image now shows store `id` at word address `word` (`INITIAL_ID` = initial contents).
    pub fn set_word(&mut self, word: u64, id: u64) {
        let Some(&wi) = self.g.word_idx.get(&word) else {
            // No store of the run wrote the word: an outside value is all it can show.
            let id = if id == OUTSIDE_ID { INITIAL_ID } else { id };
            let was = if id == INITIAL_ID { self.unknown.remove(&word) } else { self.unknown.insert(word, id) };
            match (was.is_some(), id != INITIAL_ID) {
                (false, true) => self.bogus += 1,
                (true, false) => self.bogus -= 1,
                _ => {}
            }
            return;
        };
        let old = self.img_id[wi as usize];
        if old == id {
            return;
        }
        let old_c = self.classify(wi, old);
        let new_c = self.classify(wi, id);
        self.unshow(old_c);
        self.show(new_c);
        self.img_id[wi as usize] = id;
        let new_pos = match new_c {
            Shown::Store(_, p) => p as i64,
            Shown::Outside => self.g.word_stores[wi as usize].len() as i64 - 1,
            _ => -1,
        };
        self.move_pos(wi, new_pos);
    }

    /// The image now shows the initial contents at `word`.
    pub fn clear_word(&mut self, word: u64) {
        self.set_word(word, INITIAL_ID);
    }

    /// The image now shows, at `word`, a value the graph does not order (a remote region's):
    /// it overwrote every store of the word that had reached NVM ([`OUTSIDE_ID`]).
    pub fn set_word_outside(&mut self, word: u64) {
        self.set_word(word, OUTSIDE_ID);
    }

    fn in_v(&self, n: NodeId) -> bool {
        self.performed[n as usize] && self.vis[n as usize] > 0
    }

    fn unshow(&mut self, s: Shown) {
        match s {
            Shown::Initial | Shown::Outside => {}
            Shown::Bogus => self.bogus -= 1,
            Shown::Store(n, _) => {
                self.vis[n as usize] -= 1;
                if !self.performed[n as usize] {
                    self.unperf_vis -= 1;
                } else if self.vis[n as usize] == 0 {
                    self.agg.contribute(self.src.req(n), false);
                }
            }
        }
    }

    fn show(&mut self, s: Shown) {
        match s {
            Shown::Initial | Shown::Outside => {}
            Shown::Bogus => self.bogus += 1,
            Shown::Store(n, _) => {
                self.vis[n as usize] += 1;
                if !self.performed[n as usize] {
                    self.unperf_vis += 1;
                } else if self.vis[n as usize] == 1 {
                    self.agg.contribute(self.src.req(n), true);
                }
            }
        }
    }

    fn move_pos(&mut self, wi: u32, new: i64) {
        let old = self.img_pos[wi as usize];
        self.img_pos[wi as usize] = new;
        let g = self.g.clone();
        let stores = &g.word_stores[wi as usize];
        if new > old {
            for pos in (old + 1)..=new {
                let p = stores[pos as usize];
                self.agg.nd[p as usize] -= 1;
                if self.agg.nd[p as usize] == 0 {
                    self.flip(p, true);
                }
            }
        } else {
            for pos in (new + 1)..=old {
                let p = stores[pos as usize];
                self.agg.nd[p as usize] += 1;
                if self.agg.nd[p as usize] == 1 {
                    self.flip(p, false);
                }
            }
        }
    }

    fn flip(&mut self, p: NodeId, durable: bool) {
        if !self.performed[p as usize] {
            return;
        }
        let n = &self.g.nodes[p as usize];
        self.agg.vis.flip(p, durable);
        self.agg.fenced.flip(p, durable);
        if n.pm {
            self.nd_store(n.thread as usize, n.pos, durable);
        }
    }

    fn nd_store(&mut self, u: usize, pos: u32, durable: bool) {
        if durable {
            self.agg.nd_pos[u].remove(&pos);
        } else {
            self.agg.nd_pos[u].insert(pos);
        }
    }

    /// Performs every node with perform time `<= t`.
    fn advance(&mut self, t: u64) {
        let g = self.g.clone();
        while let Some(&x) = g.order.get(self.next) {
            if g.nodes[x as usize].time > t {
                break;
            }
            self.next += 1;
            if let Src::Dynamic(cl) = &mut self.src {
                self.changed.clear();
                cl.process(x, &mut self.changed);
                let changed = std::mem::take(&mut self.changed);
                let mut seen: Vec<NodeId> = Vec::new();
                for (z, old) in &changed {
                    if seen.contains(z) {
                        continue;
                    }
                    seen.push(*z);
                    // New set first: old and new often share a base, which then stays counted.
                    let Src::Dynamic(cl) = &self.src else { unreachable!() };
                    if self.in_v(*z) {
                        self.agg.vis.contribute(&self.agg.nd, cl.req(*z), true);
                        self.agg.vis.contribute(&self.agg.nd, old, false);
                    }
                    if self.fence_done.get(*z as usize).is_some_and(|&d| d) {
                        self.agg.fenced.contribute(&self.agg.nd, cl.req(*z), true);
                        self.agg.fenced.contribute(&self.agg.nd, old, false);
                    }
                }
                self.changed = changed;
            }
            self.performed[x as usize] = true;
            let node = &g.nodes[x as usize];
            if node.is_store {
                if node.pm && self.agg.nd[x as usize] > 0 {
                    self.nd_store(node.thread as usize, node.pos, false);
                }
                let v = self.vis[x as usize];
                if v > 0 {
                    self.unperf_vis -= v as usize;
                    self.agg.contribute(self.src.req(x), true);
                }
            }
        }
        while let Some(d) = g.dfences.get(self.next_df) {
            if d.time > t {
                break;
            }
            self.next_df += 1;
            let cur = &mut self.dreq[d.thread as usize];
            if cur.is_none_or(|(b, _, _)| d.boundary >= b) {
                *cur = Some((d.boundary, d.ready, d.gid));
            }
        }
        while let Some(&(time, x)) = g.fences_done.get(self.next_fence) {
            if time > t {
                break;
            }
            self.next_fence += 1;
            // Performed: a completion is never before its node's time (`Graph::fences_done`).
            self.fence_done[x as usize] = true;
            self.agg.fenced.contribute(&self.agg.nd, self.src.req(x), true);
        }
        self.t = t;
    }

    /// Starts over from time 0 keeping the current image (used when time goes backwards).
    fn rewind(&mut self) {
        let mut words: Vec<(u64, u64)> = self
            .img_id
            .iter()
            .enumerate()
            .filter(|(_, &id)| id != INITIAL_ID)
            .map(|(wi, &id)| (self.g.words[wi], id))
            .collect();
        words.extend(self.unknown.iter().map(|(&w, &id)| (w, id)));
        *self = Incremental::new(self.g.clone(), self.static_reqs.clone());
        for (w, id) in words {
            self.set_word(w, id);
        }
    }

    /// Whether the current image is consistent and durable at crash instant `t`, without
    /// naming violations: O(threads) after advancing time.
    pub fn status(&mut self, t: u64) -> (bool, bool) {
        if t < self.t {
            self.rewind();
        }
        self.advance(t);
        let consistent = self.bogus == 0 && self.unperf_vis == 0 && self.agg.vis.hold(|u| self.agg.durable_prefix(u));
        let durable = (0..self.g.threads).all(|u| match self.dreq[u] {
            None => true,
            Some((b, ready, _)) => ready <= t && b <= self.agg.durable_prefix(u),
        }) && self.agg.fenced.hold(|u| self.agg.durable_prefix(u));
        (consistent, durable)
    }

    /// Checks the current image at crash instant `t` (ps). Instants should not decrease; if
    /// one does, the state is rebuilt from the start (correct, but O(trace)).
    pub fn check(&mut self, t: u64) -> Verdict {
        let (consistent, durable) = self.status(t);
        let violations = if consistent && durable { Vec::new() } else { self.violations(consistent, durable) };
        Verdict { consistent, durable, at: t, violations }
    }
}
