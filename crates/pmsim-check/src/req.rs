//! The predecessor set of one node, in a form that makes union and durability checks cheap.
//!
//! `Pred(n) ∩ PM stores = { performed PM stores of thread u at positions < c[u] } ∪ ind`, where
//! a position is the index in the thread's node list (program order). The prefix part is what
//! barriers give (every earlier epoch) and, under RP, what the release rule gives (a release
//! follows every store before it in its epoch); it stays exact as time advances: a store inside
//! the prefix that performs later is ordered before `n` by that barrier or release. `ind` holds
//! the few individual stores reached through conflict, SPA or sync edges beyond the prefix, so a
//! partially persisted boundary epoch is never over-required. A store in `ind`
//! that writes one word and is followed on that word by another member is dropped: its
//! durability is implied by the later one's.

use crate::graph::{Graph, NodeId};

#[derive(Clone, Debug)]
pub(crate) struct Req {
    pub c: Box<[u32]>,
    pub ind: Vec<NodeId>,
    /// Prune when `ind` grows past this. It doubles over what a prune leaves, so a set that
    /// prunes little (stores of distinct words, multi-word stores) costs amortised O(1) pruning
    /// per insertion instead of a full prune per insertion.
    prune_at: u32,
}

const PRUNE_AT: usize = 16;

impl Req {
    pub fn empty(threads: usize) -> Req {
        Req { c: vec![0; threads].into_boxed_slice(), ind: Vec::new(), prune_at: PRUNE_AT as u32 }
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
        if grew {
            let c = &self.c;
            self.ind.retain(|&p| {
                let n = &g.nodes[p as usize];
                n.pos >= c[n.thread as usize]
            });
        }
        let mut added = false;
        for &p in &src.ind {
            added |= self.add(p, g);
        }
        grew || added
    }

    /// Adds one PM store (ignored if not a PM store or already covered); true if it changed.
    pub fn add(&mut self, p: NodeId, g: &Graph) -> bool {
        let node = &g.nodes[p as usize];
        if !node.pm || node.pos < self.c[node.thread as usize] {
            return false;
        }
        match self.ind.binary_search(&p) {
            Ok(_) => false,
            Err(i) => {
                self.ind.insert(i, p);
                if self.ind.len() > self.prune_at as usize {
                    self.prune(g);
                    self.prune_at = (2 * self.ind.len()).max(PRUNE_AT) as u32;
                    return self.ind.binary_search(&p).is_ok();
                }
                true
            }
        }
    }

    /// `self ∪= src ∪ {n}`.
    pub fn merge_node(&mut self, src: &Req, n: NodeId, g: &Graph) -> bool {
        let a = self.merge(src, g);
        let b = self.add(n, g);
        a || b
    }

    fn prune(&mut self, g: &Graph) {
        let mut maxpos: rustc_hash::FxHashMap<u32, u32> = Default::default();
        for &p in &self.ind {
            for &(w, pos) in g.store_words(p) {
                let m = maxpos.entry(w).or_insert(pos);
                *m = (*m).max(pos);
            }
        }
        self.ind.retain(|&p| match g.store_words(p) {
            [(w, pos)] => maxpos.get(w).copied().unwrap_or(0) <= *pos,
            _ => true,
        });
    }
}
