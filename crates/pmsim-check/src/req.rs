//! The predecessor set of one node, in a form that makes union and durability checks cheap.
//!
//! `Pred(n) ∩ PM stores = { performed PM stores of thread u in epochs < c[u] } ∪ ind`.
//! The prefix part is what barriers give (and it stays exact as time advances: a store of an
//! earlier epoch that performs later is ordered before `n` by the barrier). `ind` holds the few
//! individual stores reached through conflict, SPA or sync edges in epochs the prefix does not
//! cover, so a partially persisted boundary epoch is never over-required. A store in `ind`
//! that writes one word and is followed on that word by another member is dropped: its
//! durability is implied by the later one's.

use crate::graph::{Graph, NodeId};

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Req {
    pub c: Box<[u32]>,
    pub ind: Vec<NodeId>,
}

const PRUNE_AT: usize = 16;

impl Req {
    pub fn empty(threads: usize) -> Req {
        Req { c: vec![0; threads].into_boxed_slice(), ind: Vec::new() }
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
                n.epoch >= c[n.thread as usize]
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
        if !node.pm || node.epoch < self.c[node.thread as usize] {
            return false;
        }
        match self.ind.binary_search(&p) {
            Ok(_) => false,
            Err(i) => {
                self.ind.insert(i, p);
                if self.ind.len() > PRUNE_AT {
                    self.prune(g);
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
