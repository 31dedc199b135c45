//! Computes every performed node's predecessor set ([`Req`]) as nodes perform.
//!
//! Nodes are processed in perform order. A node's set is the union of its in-neighbours' sets
//! (explicit edges from performed nodes, plus the union of its thread's latest earlier epoch
//! that has performed nodes). Edges that point *backwards* in perform order (a TSO load that
//! performed before an earlier store across a fence; a multi-word store whose last word
//! performs late) are handled exactly by propagating the new node's set forward from their
//! targets, stopping wherever it is already included: the sets stay the exact transitive
//! closure of the edges among performed nodes, cycles included. `propagated` records whether
//! that ever changed a set, i.e. whether sets depend on the crash instant.

use crate::graph::{Graph, NodeId};
use crate::model::Model;
use crate::req::Req;
use rustc_hash::FxHashMap;
use std::collections::BTreeSet;
use std::sync::Arc;

pub(crate) struct Closure {
    g: Arc<Graph>,
    reqs: Vec<Req>,
    pub performed: Vec<bool>,
    /// Per thread, per epoch: union of `{m} ∪ Pred(m)` over its performed nodes.
    eu: Vec<FxHashMap<u32, Req>>,
    perf_epochs: Vec<BTreeSet<u32>>,
    pub propagated: bool,
    /// The perform instants of the nodes whose sets changed others' through a backward edge:
    /// where a sweep's verdict may change while the image stands still.
    pub late: Vec<u64>,
}

impl Closure {
    pub fn new(g: Arc<Graph>) -> Closure {
        let n = g.nodes.len();
        let t = g.threads;
        Closure {
            reqs: vec![Req::empty(0); n],
            performed: vec![false; n],
            eu: vec![FxHashMap::default(); t],
            perf_epochs: vec![BTreeSet::new(); t],
            propagated: false,
            late: Vec::new(),
            g,
        }
    }

    pub fn req(&self, n: NodeId) -> &Req {
        &self.reqs[n as usize]
    }

    pub fn into_reqs(self) -> Vec<Req> {
        self.reqs
    }

    /// Performs node `x`. Nodes whose set changed through a backward edge are appended to
    /// `changed` with their previous set (possibly several times; the first entry is oldest).
    pub fn process(&mut self, x: NodeId, changed: &mut Vec<(NodeId, Req)>) {
        let g = self.g.clone();
        let node = &g.nodes[x as usize];
        let t = node.thread as usize;
        let mut r = Req::empty(g.threads);
        // Barriers: every earlier epoch. RP release rule: every store before it in its epoch
        // (explicit edges in the graph, each already implied by this prefix).
        r.c[t] = if g.model == Model::Rp && node.rel { node.pos } else { g.epoch_pos(t, node.epoch) };
        if let Some(&j) = self.perf_epochs[t].range(..node.epoch).next_back() {
            if let Some(u) = self.eu[t].get(&j) {
                r.merge(u, &g);
            }
        }
        for &(from, _) in g.in_edges(x) {
            if self.performed[from as usize] {
                r.merge_node(&self.reqs[from as usize], from, &g);
            }
        }
        self.performed[x as usize] = true;
        self.perf_epochs[t].insert(node.epoch);
        // The union is only ever merged into nodes of a later epoch of `t` (whose own prefix
        // covers this epoch), so it starts out covering this epoch of `t`: its own stores never
        // enter `ind`, which would otherwise grow with the epoch (quadratic on long epochs).
        self.eu[t]
            .entry(node.epoch)
            .or_insert_with(|| {
                let mut u = Req::empty(g.threads);
                u.c[t] = g.epoch_pos(t, node.epoch + 1);
                u
            })
            .merge_node(&r, x, &g);
        if !node.is_store {
            r.settle(&g);
        }
        self.reqs[x as usize] = r;

        let mut roots = Vec::new();
        self.successors(x, &mut roots);
        if roots.is_empty() {
            return;
        }
        let mut xs = self.reqs[x as usize].clone();
        xs.add(x, &g);
        let mut stack = roots;
        while let Some(z) = stack.pop() {
            let mut tmp = self.reqs[z as usize].clone();
            if !tmp.merge(&xs, &g) {
                continue;
            }
            self.propagated = true;
            if self.late.last() != Some(&g.nodes[x as usize].time) {
                self.late.push(g.nodes[x as usize].time);
            }
            changed.push((z, std::mem::replace(&mut self.reqs[z as usize], tmp)));
            let zn = &g.nodes[z as usize];
            if let Some(u) = self.eu[zn.thread as usize].get_mut(&zn.epoch) {
                u.merge(&xs, &g);
            }
            self.successors(z, &mut stack);
        }
    }

    /// Performed successors of `z`: explicit edges, and the nodes of the next epoch of its
    /// thread that has performed nodes (barrier order is transitive through them).
    fn successors(&self, z: NodeId, out: &mut Vec<NodeId>) {
        let g = &self.g;
        for &(to, _) in g.out_edges(z) {
            if self.performed[to as usize] {
                out.push(to);
            }
        }
        let zn = &g.nodes[z as usize];
        let t = zn.thread as usize;
        if let Some(&e) = self.perf_epochs[t].range(zn.epoch + 1..).next() {
            out.extend(g.epoch_nodes(t, e).iter().copied().filter(|&n| self.performed[n as usize]));
        }
    }
}
