//! P-Masstree (RECIPE, SOSP'19): Masstree's B+tree layer with permutation-based nodes.
//!
//! Persist pattern reproduced:
//! - layout: a persistent root pointer; 320 B nodes (border and interior alike, as in P-Masstree):
//!   version lock, 8 B permutation (4-bit size + 15 4-bit slot indices in key order), next
//!   sibling, leftmost child, highest (low fence) key, level; 15 16 B (key slice, value) entries.
//! - insert with room, under the node's version lock: write key and value into the free slot the
//!   permutation names (the record in the same epoch), `ofence` (the entry flush), then publish it
//!   by one 8 B store of the new permutation, `ofence`.
//! - split: write the new right sibling (upper half, its permutation, next, highest) and `ofence`;
//!   link it as the node's next and `ofence`; shrink the node's permutation (one 8 B store) and
//!   `ofence`; insert the separator into the parent the same permutation way (splitting it in turn),
//!   or write a new root, `ofence`, swap the root pointer, `ofence`; finally insert the key into
//!   the proper half (entry, `ofence`, permutation, `ofence`).
//! - recovery: walk the border level by next pointers, ignoring keys at or above the next node's
//!   highest key (a split caught before the permutation shrink, the case RECIPE's code notes);
//!   every key must be reachable from the root (B-link search); locks are reset.
//!
//! Simplification: keys are unique in their first 8-byte slice, so only the root layer exists
//! (no lower trie layers); no deletes (the benchmark inserts).
//!
//! Synchronisation: a traversal reads each node's version word with an `acquire` (Masstree's
//! `stable()` version read) before the node's other words, and the root pointer is read with an
//! `acquire` and swapped with a `release`, so a reader sees every critical section that unlocked
//! the node (and every node published through it) before it.
//!
//! Built on [`crate::blocks::node`]; the permutation-word insert is Masstree's own.

use super::common::*;
use crate::blocks::node::{link, persist_new, publish_root, route, Blink, BlinkNode, NodeImage};
use crate::ctx::{Ctx, Gen};
use crate::params::{ParamSpec, Params};
use crate::recovery::{DfenceDone, PieceCache, Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

pub static P_MASSTREE: WorkloadSpec = WorkloadSpec {
    name: "p-masstree",
    description: "RECIPE P-Masstree: entry, ofence, 8 B permutation store, ofence; split: sibling, ofence, link, ofence, shrink, parent",
    params: PARAMS,
    generate,
};

const WIDTH: u64 = 15;
const NODE: u64 = 320;
const PERM: u64 = 8;
const NEXT: u64 = 16;
const LEFTMOST: u64 = 24;
const HIGHEST: u64 = 32;
const LEVEL: u64 = 40;
const ENTRIES: u64 = 64;

const PARAMS: &[ParamSpec] = &[COMPUTE_PARAM];

/// Permutation: size in the low nibble, slot of position i in nibble i + 1.
fn perm_decode(p: u64) -> (usize, Vec<u64>) {
    ((p & 15) as usize, (0..WIDTH).map(|i| (p >> (4 + 4 * i)) & 15).collect())
}

fn perm_encode(size: usize, slots: &[u64]) -> u64 {
    slots.iter().enumerate().fold(size as u64, |p, (i, &s)| p | s << (4 + 4 * i))
}

fn perm_empty() -> u64 {
    perm_encode(0, &(0..WIDTH).collect::<Vec<_>>())
}

/// A node's image.
struct Node(NodeImage);

impl Node {
    fn get(&self, off: u64) -> u64 {
        self.0.get(off)
    }
    /// Live (key, value) entries in key order, per the permutation.
    fn entries(&self) -> Vec<(u64, u64)> {
        let (size, slots) = perm_decode(self.get(PERM));
        slots[..size.min(WIDTH as usize)]
            .iter()
            .map(|&s| (self.get(ENTRIES + 16 * s), self.get(ENTRIES + 16 * s + 8)))
            .collect()
    }
    fn child(&self, k: u64) -> u64 {
        route(self.get(LEFTMOST), self.entries(), k)
    }
}

struct Ix {
    root: u64,
}

impl BlinkNode for Node {
    fn level(&self) -> u64 {
        self.get(LEVEL)
    }
    fn leftmost(&self) -> u64 {
        self.get(LEFTMOST)
    }
    fn sibling(&self) -> u64 {
        self.get(NEXT)
    }
    fn entries(&self) -> Vec<(u64, u64)> {
        Node::entries(self)
    }
}

impl Ix {
    fn read(c: &mut Ctx<'_>, n: u64) -> Node {
        Node(NodeImage::read(c, n, NODE))
    }

    /// An optimistic visit: acquire the version word, then read the rest of the node.
    fn visit(c: &mut Ctx<'_>, n: u64) -> Node {
        let v = c.acquire(n);
        let mut b = v.to_le_bytes().to_vec();
        b.extend(c.load_bytes(n + 8, NODE as usize - 8));
        Node(NodeImage(b))
    }

    /// The node at `level` whose range holds `k` (B-link: move right past splits).
    fn find(c: &mut Ctx<'_>, root: u64, k: u64, level: u64) -> u64 {
        let mut n = c.acquire(root);
        loop {
            let node = Self::visit(c, n);
            c.compute(PROBE_COST * node.entries().len() as u64);
            let next = node.get(NEXT);
            if next != 0 && k >= c.load_u64(next + HIGHEST) {
                n = next;
                continue;
            }
            if node.get(LEVEL) <= level {
                return n;
            }
            n = node.child(k);
        }
    }

    /// Permutation-based insert into a node known to have room.
    fn put(c: &mut Ctx<'_>, n: u64, k: u64, v: u64) {
        let (size, mut slots) = perm_decode(c.peek(n + PERM, 8));
        let slot = slots[size];
        c.store(n + ENTRIES + 16 * slot, &[k.to_le_bytes(), v.to_le_bytes()].concat());
        c.ofence();
        let pos = (0..size).find(|&i| k < c.peek(n + ENTRIES + 16 * slots[i], 8)).unwrap_or(size);
        slots.remove(size);
        slots.insert(pos, slot);
        c.store_u64(n + PERM, perm_encode(size + 1, &slots));
        c.ofence();
    }

    fn insert_at(&mut self, c: &mut Ctx<'_>, level: u64, k: u64, v: u64) {
        let n = Self::find(c, self.root, k, level);
        let vn = vlock(c, n);
        let node = Self::read(c, n);
        let (size, slots) = perm_decode(node.get(PERM));
        if (size as u64) < WIDTH {
            Self::put(c, n, k, v);
            vunlock(c, n, vn);
            return;
        }
        // Split: the right sibling takes the upper half.
        let es = node.entries();
        let mid = (WIDTH / 2 + 1) as usize;
        let nr = c.alloc_pm(NODE, 64);
        let vr = vlock(c, nr);
        let mut b = NodeImage::zeroed(NODE);
        let (moved, keep, split_key) = if level == 0 {
            (&es[mid..], mid, es[mid].0)
        } else {
            b.set(LEFTMOST, es[mid - 1].1);
            (&es[mid..], mid - 1, es[mid - 1].0)
        };
        for (i, &(key, val)) in moved.iter().enumerate() {
            b.set(ENTRIES + 16 * i as u64, key);
            b.set(ENTRIES + 16 * i as u64 + 8, val);
        }
        b.set(0, vr | 1);
        b.set(PERM, perm_encode(moved.len(), &(0..WIDTH).collect::<Vec<_>>()));
        b.set(NEXT, node.get(NEXT));
        b.set(HIGHEST, split_key);
        b.set(LEVEL, level);
        persist_new(c, nr, &b.0);
        link(c, n + NEXT, nr);
        c.store_u64(n + PERM, perm_encode(keep, &slots));
        c.ofence();
        if c.acquire(self.root) == n {
            let r = c.alloc_pm(NODE, 64);
            let mut b = NodeImage::zeroed(NODE);
            b.set(PERM, perm_encode(1, &(0..WIDTH).collect::<Vec<_>>()));
            b.set(LEFTMOST, n);
            b.set(LEVEL, level + 1);
            b.set(ENTRIES, split_key);
            b.set(ENTRIES + 8, nr);
            persist_new(c, r, &b.0);
            publish_root(c, self.root, r);
        } else {
            self.insert_at(c, level + 1, split_key, nr);
        }
        Self::put(c, if k < split_key { n } else { nr }, k, v);
        vunlock(c, nr, vr);
        vunlock(c, n, vn);
    }
}

impl Index for Ix {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, rec: u64) {
        self.insert_at(c, 0, w, rec);
    }
    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let n = Self::find(c, self.root, w, 0);
        Self::visit(c, n).entries().into_iter().find(|e| e.0 == w).map(|e| e.1)
    }
}

fn generate(p: &Params) -> Generated {
    let mut g = Gen::new(p);
    let root = g.heap.alloc_pm(64, 64);
    {
        let mut c = g.ctx(0);
        let r = c.alloc_pm(NODE, 64);
        c.store_u64(r + PERM, perm_empty());
        c.ofence();
        c.store_u64(root, r);
        c.dfence();
    }
    let mut ix = Ix { root };
    let (trace, truth) = run(p, g, &mut ix, Mix::default());
    Generated { trace, recovery: Box::new(MtRecovery { root, truth }) }
}

struct MtRecovery {
    root: u64,
    truth: Truth,
}

fn read(img: &MemImage, n: u64) -> R<Node> {
    let node = Node(NodeImage(img.read_bytes(n, NODE as usize)));
    let (size, slots) = perm_decode(node.get(PERM));
    let mut s = slots.clone();
    s.sort_unstable();
    s.dedup();
    if size > WIDTH as usize || s.len() != WIDTH as usize {
        return err(format!("node {n:#x}: malformed permutation {:#x}", node.get(PERM)));
    }
    if node.entries().windows(2).any(|p| p[0].0 >= p[1].0) {
        return err(format!("node {n:#x}: keys out of order"));
    }
    Ok(node)
}

impl Recovery for MtRecovery {
    /// One piece per leaf, per leaf's reachability check and per leaf's part of the verification.
    fn check_with(&self, img: &MemImage, dfence_done: &DfenceDone, pieces: &mut dyn PieceCache) -> R<RecoveryReport> {
        let tree = Blink {
            read: |n| read(img, n),
            bound: |node: &Node| {
                let next = node.get(NEXT);
                (next != 0).then(|| img.read_u64(next + HIGHEST))
            },
        };
        let leaves = tree.leaves_pieces(img.read_u64(self.root), pieces, LEAF)?;
        let leaf = |c: &mut dyn PieceCache, n: u64| tree.leaf_piece(c, LEAF, n);
        self.truth.verify_leaves(img, dfence_done, pieces, PART, &leaves, &leaf)
    }
}

/// Piece tags: a leaf, its reachability (`LEAF + 1`), its part of the verification.
const LEAF: u64 = 0;
const PART: u64 = 2;
