//! The predecessor set of one node, in a form that makes union and durability checks cheap.
//!
//! `Pred(n) ∩ PM stores = { performed PM stores of thread u at positions < c[u] } ∪ bases ∪ ind`,
//! where a position is the index in the thread's node list (program order). The prefix part is
//! what barriers give (every earlier epoch) and, under RP, what the release rule gives (a release
//! follows every store before it in its epoch); it stays exact as time advances: a store inside
//! the prefix that performs later is ordered before `n` by that barrier or release. `ind` holds
//! the few individual stores reached through conflict, SPA or sync edges beyond the prefix, so a
//! partially persisted boundary epoch is never over-required. A store in `ind`
//! that writes one word and is followed on that word by another member is dropped: its
//! durability is implied by the later one's.
//!
//! `bases` exist for the x86 model, where program order orders nothing and no prefix covers
//! the flushed stores: a fence point's set holds every flushed word individually and every
//! later store of its thread inherits it. Copying it into each node would cost O(nodes ×
//! flushed words); instead the large part of a set is a few immutable [`Base`]s shared by
//! reference, and `ind` (itself shared until written) stays small: once a fence point's
//! outgrows `share_at`, it is folded with the bases into one new base. Bases form *lineages*:
//! a fold extends the lineage of the base it grew from (the first fold of that base to claim
//! the next generation does; later ones start a lineage of their own), and each base lists the
//! latest generation it includes of every lineage in its ancestry (`incl`), so merging a set
//! whose base is an ancestor of this one's (a store's line predecessor from an earlier fence,
//! however many folds ago) costs a binary search. Each base also keeps the latest position it
//! holds on every word (`latest`), so a store that a member supersedes is never re-added to
//! `ind` (the sets of old nodes still hold stores the current bases pruned; re-adding them made
//! `ind` outgrow `share_at` after every few stores, and each fold copies the whole base).
//! Invariant: `ind ∩ bases = ∅`. Under the other models only a long `ind` is folded (no
//! fence points settle): under EP a thread that reads many words another thread wrote in one
//! long epoch, which no prefix covers, carries them all (a real PMwCAS trace: its pool set-up),
//! and copying that `ind` into each later node was quadratic (73.6 s and 2.97 GB at 600
//! operations, 2.9 s and 350 MB with folding). A base member that a grown prefix covers later
//! stays in the base, required twice, which changes no verdict.

use crate::graph::{Graph, NodeId};
use crate::model::Model;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// An immutable, sorted, shared part of one or more predecessor sets.
#[derive(Debug)]
pub(crate) struct Base {
    pub ids: Box<[NodeId]>,
    /// Unique while the process runs (never reported, so its value does not affect results).
    id: u64,
    /// (word, latest position among the members' stores on it), sorted by word.
    latest: Box<[(u32, u32)]>,
    lineage: Arc<Lineage>,
    generation: u32,
    /// (lineage id, latest generation included) for this base and every base it was built from,
    /// transitively, sorted by lineage id; at most [`MAX_LINEAGES`] (dropping one only loses the
    /// shortcut, never soundness). Inclusion is up to pruning: a dropped store's durability is
    /// implied by a kept one.
    incl: Box<[(u64, u32)]>,
}

/// A chain of bases, each built from the previous one: generation `g + 1` includes `g`.
#[derive(Debug)]
struct Lineage {
    id: u64,
    /// The latest generation claimed.
    last: AtomicU32,
}

#[cfg(not(test))]
const MAX_LINEAGES: usize = 64;
#[cfg(test)]
const MAX_LINEAGES: usize = 2;

static NEXT_BASE: AtomicU64 = AtomicU64::new(1);
static NEXT_LINEAGE: AtomicU64 = AtomicU64::new(1);

impl Base {
    fn contains(&self, p: NodeId) -> bool {
        self.ids.binary_search(&p).is_ok()
    }

    /// Whether this base includes `other` (up to pruning).
    fn includes(&self, other: &Base) -> bool {
        self.id == other.id
            || match self.incl.binary_search_by_key(&other.lineage.id, |&(l, _)| l) {
                Ok(i) => self.incl[i].1 >= other.generation,
                Err(_) => false,
            }
    }

    /// Whether a member wrote word `w` after position `pos`.
    fn supersedes(&self, w: u32, pos: u32) -> bool {
        match self.latest.binary_search_by_key(&w, |&(x, _)| x) {
            Ok(i) => self.latest[i].1 > pos,
            Err(_) => false,
        }
    }

    /// Identity for counting distinct bases (see `incremental::Agg`).
    pub fn key(&self) -> u64 {
        self.id
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Req {
    pub c: Box<[u32]>,
    /// Shared parts, none including another (empty until `ind` grows long).
    pub bases: Vec<Arc<Base>>,
    pub ind: Arc<Vec<NodeId>>,
    /// Prune when `ind` grows past this. It doubles over what a prune leaves, so a set that
    /// prunes little (stores of distinct words, multi-word stores) costs amortised O(1) pruning
    /// per insertion instead of a full prune per insertion.
    prune_at: u32,
}

#[cfg(not(test))]
const PRUNE_AT: usize = 16;
/// More unrelated bases than this (sets reaching many threads' fence points) are folded into
/// one.
#[cfg(not(test))]
const MAX_BASES: usize = 8;
/// A fence point folds `ind` into a new base once it is longer than this: balances copying
/// `ind` (when a store adds to the set it inherits) against rebuilding the base (O(base) every
/// `share_at` insertions). Other nodes fold only past `FOLD_ANYWHERE` times this: folding where
/// many nodes inherit one set would build one equal base per node.
#[cfg(not(test))]
fn share_at(base_len: usize) -> usize {
    (base_len as f64).sqrt() as usize + 48
}
// Small thresholds for the crate's own tests, so small traces exercise every path.
#[cfg(test)]
const PRUNE_AT: usize = 4;
#[cfg(test)]
const MAX_BASES: usize = 3;
#[cfg(test)]
fn share_at(base_len: usize) -> usize {
    (base_len as f64).sqrt() as usize / 4 + 2
}

const FOLD_ANYWHERE: usize = 4;

impl Req {
    pub fn empty(threads: usize) -> Req {
        Req {
            c: vec![0; threads].into_boxed_slice(),
            bases: Vec::new(),
            ind: Arc::default(),
            prune_at: PRUNE_AT as u32,
        }
    }

    /// Every member of the set except the prefix part (bases first, then `ind`); a store in two
    /// bases is listed twice.
    pub fn members(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.bases.iter().flat_map(|b| b.ids.iter().copied()).chain(self.ind.iter().copied())
    }

    fn same_bases(&self, other: &Req) -> bool {
        self.bases.len() == other.bases.len() && self.bases.iter().zip(&other.bases).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    fn in_bases(&self, p: NodeId) -> bool {
        self.bases.iter().any(|b| b.contains(p))
    }

    /// Whether `p` is a one-word store a base member supersedes (so adding it changes nothing).
    fn superseded_by_bases(&self, p: NodeId, g: &Graph) -> bool {
        match g.store_words(p) {
            [(w, pos)] => self.bases.iter().any(|b| b.supersedes(*w, *pos)),
            _ => false,
        }
    }

    /// `self ∪= src`; true if the representation changed.
    pub fn merge(&mut self, src: &Req, g: &Graph) -> bool {
        let mut grew = false;
        for (d, s) in self.c.iter_mut().zip(src.c.iter()) {
            if *s > *d {
                *d = *s;
                grew = true;
            }
        }
        if grew && !self.ind.is_empty() {
            let c = &self.c;
            let keep = |p: &NodeId| {
                let n = &g.nodes[*p as usize];
                n.pos >= c[n.thread as usize]
            };
            if !self.ind.iter().all(keep) {
                Arc::make_mut(&mut self.ind).retain(keep);
            }
        }
        let mut added = self.merge_bases(src, g);
        let same_base = self.same_bases(src);
        if same_base && Arc::ptr_eq(&self.ind, &src.ind) {
            return grew || added;
        }
        if same_base && self.ind.is_empty() && !src.ind.is_empty() {
            let c = &self.c;
            if src.ind.iter().all(|&p| g.nodes[p as usize].pos >= c[g.nodes[p as usize].thread as usize]) {
                // An inherited set (a store after its fence point): share it until written.
                self.ind = src.ind.clone();
                self.prune_at = src.prune_at;
                return true;
            }
        }
        added |= self.merge_ind(&src.ind, g);
        grew || added
    }

    /// `ind ∪= src` (members of another set's `ind`) in one pass over both sorted lists; the
    /// result is the one [`Req::add`] would give up to when pruning happens. True if some store
    /// of `src` is new and kept.
    fn merge_ind(&mut self, src: &[NodeId], g: &Graph) -> bool {
        let mut new: Vec<NodeId> = Vec::new();
        let mine = &self.ind;
        let mut i = 0;
        for &p in src {
            while i < mine.len() && mine[i] < p {
                i += 1;
            }
            if i < mine.len() && mine[i] == p {
                continue;
            }
            let n = &g.nodes[p as usize];
            if n.pos < self.c[n.thread as usize] || self.in_bases(p) || self.superseded_by_bases(p, g) {
                continue;
            }
            new.push(p);
        }
        if new.is_empty() {
            return false;
        }
        let mut merged = Vec::new();
        merge_sorted(&self.ind, &new, &mut merged);
        self.ind = Arc::new(merged);
        if self.ind.len() <= self.prune_at as usize {
            return true;
        }
        self.prune(g);
        self.prune_at = (2 * self.ind.len()).max(PRUNE_AT) as u32;
        let kept = new.iter().any(|p| self.ind.binary_search(p).is_ok());
        if self.ind.len() > FOLD_ANYWHERE * share_at(self.bases_len()) {
            self.fold(g);
        }
        kept
    }

    /// `self.bases ∪= src.bases`; true if it changed.
    fn merge_bases(&mut self, src: &Req, g: &Graph) -> bool {
        if self.same_bases(src) {
            return false;
        }
        let mut changed = false;
        for b in &src.bases {
            if self.bases.iter().any(|a| a.includes(b)) {
                continue;
            }
            // `b` replaces the bases it includes (earlier folds of the same fence points).
            self.bases.retain(|a| !b.includes(a));
            let covered = |p: NodeId| {
                b.contains(p)
                    || match g.store_words(p) {
                        [(w, pos)] => b.supersedes(*w, *pos),
                        _ => false,
                    }
            };
            if self.ind.iter().any(|&p| covered(p)) {
                Arc::make_mut(&mut self.ind).retain(|&p| !covered(p));
            }
            self.bases.push(b.clone());
            changed = true;
        }
        if self.bases.len() > MAX_BASES {
            self.fold(g);
        }
        changed
    }

    /// Adds one PM store (ignored if not a PM store or already covered); true if it changed.
    pub fn add(&mut self, p: NodeId, g: &Graph) -> bool {
        let node = &g.nodes[p as usize];
        if !node.pm || node.pos < self.c[node.thread as usize] {
            return false;
        }
        match self.ind.binary_search(&p) {
            Ok(_) => false,
            Err(_) if !self.bases.is_empty() && (self.in_bases(p) || self.superseded_by_bases(p, g)) => false,
            Err(i) => {
                Arc::make_mut(&mut self.ind).insert(i, p);
                if self.ind.len() > self.prune_at as usize {
                    self.prune(g);
                    self.prune_at = (2 * self.ind.len()).max(PRUNE_AT) as u32;
                    let kept = self.ind.binary_search(&p).is_ok();
                    if self.ind.len() > FOLD_ANYWHERE * share_at(self.bases_len()) {
                        self.fold(g);
                    }
                    return kept;
                }
                true
            }
        }
    }

    fn bases_len(&self) -> usize {
        self.bases.iter().map(|b| b.ids.len()).sum()
    }

    /// Called on a node whose set later nodes inherit (an x86 fence point): makes the set cheap
    /// to inherit by folding a long `ind` into a shared base.
    pub fn settle(&mut self, g: &Graph) {
        if g.model == Model::X86 && self.ind.len() > share_at(self.bases_len()) {
            self.fold(g);
        }
    }

    /// Moves the bases and `ind` into one new base.
    fn fold(&mut self, g: &Graph) {
        let ind = std::mem::take(&mut self.ind);
        let from: Vec<&Base> = self.bases.iter().map(|b| &**b).collect();
        let mut parts: Vec<&[NodeId]> = from.iter().map(|b| &b.ids[..]).collect();
        parts.push(&ind);
        let base = Arc::new(Base::union(&from, &parts, g));
        self.bases = vec![base];
        self.prune_at = PRUNE_AT as u32;
    }

    /// `self ∪= src ∪ {n}`.
    pub fn merge_node(&mut self, src: &Req, n: NodeId, g: &Graph) -> bool {
        let a = self.merge(src, g);
        let b = self.add(n, g);
        a || b
    }

    fn prune(&mut self, g: &Graph) {
        prune_superseded(Arc::make_mut(&mut self.ind), g);
    }
}

/// Keeps one entry per key of a list sorted by (key, value): the last, i.e. the largest value.
fn keep_last_per_key<K: PartialEq, V: Copy>(list: &mut Vec<(K, V)>) {
    list.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            earlier.1 = later.1;
        }
        same
    });
}

/// `out = a ∪ b` for sorted, duplicate-free lists.
fn merge_sorted(a: &[NodeId], b: &[NodeId], out: &mut Vec<NodeId>) {
    out.clear();
    out.reserve(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        let (x, y) = (a[i], b[j]);
        out.push(x.min(y));
        i += (x <= y) as usize;
        j += (y <= x) as usize;
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

/// Removes from sorted `set` each one-word store that a later member to that word supersedes.
/// Uses a per-thread scratch array indexed by word (reset after use), so a prune costs
/// O(|set|) without hashing.
fn prune_superseded(set: &mut Vec<NodeId>, g: &Graph) {
    thread_local! {
        static MAXPOS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    MAXPOS.with_borrow_mut(|maxpos| {
        if maxpos.len() < g.words.len() {
            maxpos.resize(g.words.len(), 0);
        }
        // maxpos[w] = 1 + the latest position on w among members (0: none).
        for &p in set.iter() {
            for &(w, pos) in g.store_words(p) {
                let m = &mut maxpos[w as usize];
                *m = (*m).max(pos + 1);
            }
        }
        set.retain(|&p| match g.store_words(p) {
            [(w, pos)] => maxpos[*w as usize] <= pos + 1,
            _ => true,
        });
        for &p in set.iter() {
            for &(w, _) in g.store_words(p) {
                maxpos[w as usize] = 0;
            }
        }
    });
}

impl Base {
    /// The pruned union of sorted `parts`, including the bases `from`.
    fn union(from: &[&Base], parts: &[&[NodeId]], g: &Graph) -> Base {
        let mut ids: Vec<NodeId> = Vec::new();
        let mut tmp: Vec<NodeId> = Vec::new();
        for p in parts {
            merge_sorted(&ids, p, &mut tmp);
            std::mem::swap(&mut ids, &mut tmp);
        }
        prune_superseded(&mut ids, g);
        let mut latest: Vec<(u32, u32)> = ids.iter().flat_map(|&p| g.store_words(p).iter().copied()).collect();
        latest.sort_unstable();
        keep_last_per_key(&mut latest);
        // Extend the lineage of the largest parent if no other fold of it has; else start one.
        let extended = from.iter().max_by_key(|b| b.ids.len()).and_then(|b| {
            let next = b.generation + 1;
            let claimed = b.lineage.last.compare_exchange(b.generation, next, Ordering::Relaxed, Ordering::Relaxed);
            claimed.ok().map(|_| (b.lineage.clone(), next))
        });
        let (lineage, generation) = extended.unwrap_or_else(|| {
            let id = NEXT_LINEAGE.fetch_add(1, Ordering::Relaxed);
            (Arc::new(Lineage { id, last: AtomicU32::new(0) }), 0)
        });
        let mut incl: Vec<(u64, u32)> = from.iter().flat_map(|b| b.incl.iter().copied()).collect();
        incl.push((lineage.id, generation));
        incl.sort_unstable();
        keep_last_per_key(&mut incl);
        if incl.len() > MAX_LINEAGES {
            // Keep this base's own entry and the most recent other lineages.
            let mut extra = incl.len() - MAX_LINEAGES;
            incl.retain(|&(l, _)| {
                let drop = extra > 0 && l != lineage.id;
                extra -= drop as usize;
                !drop
            });
        }
        Base {
            ids: ids.into_boxed_slice(),
            id: NEXT_BASE.fetch_add(1, Ordering::Relaxed),
            latest: latest.into_boxed_slice(),
            lineage,
            generation,
            incl: incl.into_boxed_slice(),
        }
    }
}
