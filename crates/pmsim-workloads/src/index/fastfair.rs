//! FAST_FAIR (Hwang et al., FAST'18): a B+tree persisted without logging.
//!
//! Persist pattern reproduced:
//! - layout: a persistent root pointer; 512 B nodes with a 32 B header (leftmost child, sibling,
//!   level / switch counter / last index, pointer to a DRAM mutex) and 30 16 B (key, pointer)
//!   entries; an entry list ends at the first null pointer.
//! - FAST insert (under the node's DRAM mutex): write the new terminator, then shift entries right
//!   one at a time (pointer then key, 8 B stores), with an `ofence` every time the entry written
//!   starts a cache line (the original's per-line clflush); finally write the new entry (pointer
//!   copy, key, pointer) and `ofence`. At every instant an entry whose pointer equals its left
//!   neighbour's is a transient duplicate that readers and recovery skip.
//! - FAIR split (node full): write the new sibling (upper half) and `ofence`; link it from the node
//!   and `ofence`; null the pointer at the split point and `ofence`; update the last index and
//!   `ofence`; insert the key; then insert the split key in the parent (same FAST insert, possibly
//!   splitting) or write a new root, `ofence`, and swap the root pointer, `ofence`.
//! - delete: the pointer of the deleted entry is set to its left neighbour's (making it a
//!   duplicate), then entries shift left with an `ofence` at each line start. The `ofence` comes
//!   *before* the first store into a new line, i.e. once the previous line is complete (as the
//!   insert's shift does): FAST_FAIR's `remove_key` flushes the line it has just entered, which
//!   leaves the completed line unordered before the next one and lets a crash expose an entry
//!   whose key moved without its pointer (fixed the same way in later FAST_FAIR forks).
//! - recovery (as FAST_FAIR's readers): skip duplicates; walk the leaf level by sibling pointers
//!   ignoring keys at or above the sibling's first key (a split caught before the truncation);
//!   every key must be reachable from the root by the B-link search.
//!
//! The value record is `ofence`d before the insert because any store of the shift can expose
//! the new entry. Simplification: no node merge or redistribution on delete.
//!
//! Synchronisation: FAST_FAIR's readers are lock-free and rely on x86-TSO, where every store is a
//! release and every load an acquire: a reader that reaches a node sees every store of the
//! critical sections that completed on it. The trace says so explicitly (docs/design.md §3): a lock-free
//! visit of a node `acquire`s the node's mutex word (the last unlock released it), a new node's
//! mutex is released once the node is written (its construction), and the root pointer is stored
//! by a `release` and read by an `acquire`. Without these, a thread that found a fresh sibling
//! through a racy read could insert into it before its creator's stores had landed.
//!
//! Built on [`crate::blocks::node`] (node image, routing, sibling link, root growth, the B-link
//! recovery walk); the in-node shift is FAST_FAIR's own.

use super::common::*;
use crate::blocks::node::{link, persist_new, publish_root, route, Blink, BlinkNode, NodeImage};
use crate::ctx::{Ctx, Gen};
use crate::params::{percent, ParamSpec, Params};
use crate::recovery::{DfenceDone, PieceCache, Recovery, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use pmsim_trace::MemImage;

pub static FAST_FAIR: WorkloadSpec = WorkloadSpec {
    name: "fastfair",
    description: "FAST_FAIR B+tree: in-node shift with an ofence per line; split: sibling, ofence, link, ofence, truncate, parent",
    params: PARAMS,
    generate,
};

const NODE: u64 = 512;
const CARD: u64 = 30;
const SIBLING: u64 = 8;
const LEVEL: u64 = 16;
const SWITCH: u64 = 20;
const LAST: u64 = 22;
const MTX: u64 = 24;

fn rec(n: u64, i: u64) -> u64 {
    n + 32 + 16 * i
}

const PARAMS: &[ParamSpec] = &[
    percent("search_pct", "20", "operations that search an inserted key"),
    percent("delete_pct", "10", "operations that delete an inserted key"),
    COMPUTE_PARAM,
];

/// A node's bytes and the entries readers accept.
struct Node(NodeImage);

impl Node {
    fn key(&self, i: u64) -> u64 {
        self.0.get(32 + 16 * i)
    }
    fn ptr(&self, i: u64) -> u64 {
        self.0.get(40 + 16 * i)
    }
    fn leftmost(&self) -> u64 {
        self.0.get(0)
    }
    fn sibling(&self) -> u64 {
        self.0.get(SIBLING)
    }
    fn level(&self) -> u64 {
        self.0.get(LEVEL) & 0xffff_ffff
    }
    /// Valid entries: up to the terminating null pointer, skipping transient duplicates (an entry
    /// whose pointer equals its left neighbour's) and a null first pointer mid-shift.
    fn entries(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        for i in 0..CARD {
            let p = self.ptr(i);
            if p == 0 {
                if i == 0 && CARD > 1 && self.ptr(1) != 0 {
                    continue;
                }
                break;
            }
            let prev = if i == 0 { self.leftmost() } else { self.ptr(i - 1) };
            if p != prev {
                v.push((self.key(i), p));
            }
        }
        v
    }
    fn first_key(&self) -> Option<u64> {
        self.entries().first().map(|e| e.0)
    }
    /// The child to follow for `k` in an internal node.
    fn child(&self, k: u64) -> u64 {
        route(self.leftmost(), self.entries(), k)
    }
}

impl BlinkNode for Node {
    fn level(&self) -> u64 {
        Node::level(self)
    }
    fn leftmost(&self) -> u64 {
        Node::leftmost(self)
    }
    fn sibling(&self) -> u64 {
        Node::sibling(self)
    }
    fn entries(&self) -> Vec<(u64, u64)> {
        Node::entries(self)
    }
}

struct Ix {
    root: u64,
}

impl Ix {
    fn read(c: &mut Ctx<'_>, n: u64) -> Node {
        Node(NodeImage::read(c, n, NODE))
    }

    /// A lock-free visit: synchronise with the node's last critical section, then read it.
    fn visit(c: &mut Ctx<'_>, n: u64) -> Node {
        let mtx = c.peek(n + MTX, 8);
        c.acquire(mtx);
        Self::read(c, n)
    }

    /// The node at `level` whose range holds `k` (B-link: move right past splits).
    fn find(&self, c: &mut Ctx<'_>, k: u64, level: u64) -> u64 {
        let mut n = c.acquire(self.root);
        loop {
            let node = Self::visit(c, n);
            c.compute(PROBE_COST * node.entries().len() as u64);
            let sib = node.sibling();
            if sib != 0 && Self::visit(c, sib).first_key().is_some_and(|f| k >= f) {
                n = sib;
                continue;
            }
            if node.level() <= level {
                return n;
            }
            n = node.child(k);
        }
    }

    fn new_node(c: &mut Ctx<'_>) -> (u64, u64) {
        (c.alloc_pm(NODE, 64), c.alloc_dram(64, 64))
    }

    /// Constructs node `n` (its bytes `b`, persisted) and its mutex `mtx`.
    fn construct(c: &mut Ctx<'_>, n: u64, mtx: u64, b: &[u8]) {
        persist_new(c, n, b);
        c.release_value(mtx, 0);
    }

    /// FAST: in-place shift with a fence at every line start.
    fn insert_key(c: &mut Ctx<'_>, n: u64, k: u64, p: u64, cnt: u64) {
        let sw = c.peek(n + SWITCH, 1);
        if sw % 2 == 1 {
            c.store_n(n + SWITCH, 1, (sw + 1) & 0xff);
        }
        if cnt == 0 {
            c.store_u64(rec(n, 0), k);
            c.store_u64(rec(n, 0) + 8, p);
            c.store_u64(rec(n, 1) + 8, 0);
            c.ofence();
        } else {
            c.store_u64(rec(n, cnt + 1) + 8, c.peek(rec(n, cnt) + 8, 8));
            if (rec(n, cnt + 1) + 8).is_multiple_of(64) {
                c.ofence();
            }
            let mut done = false;
            for i in (0..cnt).rev() {
                let (ki, pi) = (c.peek(rec(n, i), 8), c.peek(rec(n, i) + 8, 8));
                c.compute(PROBE_COST);
                c.store_u64(rec(n, i + 1) + 8, pi);
                if k < ki {
                    c.store_u64(rec(n, i + 1), ki);
                    if rec(n, i + 1).is_multiple_of(64) {
                        c.ofence();
                    }
                } else {
                    c.store_u64(rec(n, i + 1), k);
                    c.store_u64(rec(n, i + 1) + 8, p);
                    c.ofence();
                    done = true;
                    break;
                }
            }
            if !done {
                c.store_u64(rec(n, 0) + 8, c.peek(n, 8));
                c.store_u64(rec(n, 0), k);
                c.store_u64(rec(n, 0) + 8, p);
                c.ofence();
            }
        }
        c.store_n(n + LAST, 2, cnt);
    }

    /// Inserts (k, p) into node `n` (or a right sibling), splitting when full.
    fn store(&mut self, c: &mut Ctx<'_>, mut n: u64, k: u64, p: u64) {
        loop {
            let mtx = c.peek(n + MTX, 8);
            c.lock(mtx);
            let node = Self::read(c, n);
            let sib = node.sibling();
            if sib != 0 && Self::visit(c, sib).first_key().is_some_and(|f| k > f) {
                c.unlock(mtx);
                n = sib;
                continue;
            }
            let cnt = node.entries().len() as u64;
            c.compute(PROBE_COST * cnt);
            if cnt < CARD - 1 {
                Self::insert_key(c, n, k, p, cnt);
                c.unlock(mtx);
                return;
            }
            self.split(c, n, &node, k, p, mtx);
            return;
        }
    }

    fn split(&mut self, c: &mut Ctx<'_>, n: u64, node: &Node, k: u64, p: u64, mtx: u64) {
        let cnt = node.entries().len() as u64;
        let level = node.level();
        let m = cnt / 2;
        let split_key = node.key(m);
        let (s, smtx) = Self::new_node(c);
        let mut b = NodeImage::zeroed(NODE);
        let first = if level == 0 { m } else { m + 1 };
        for (j, i) in (first..cnt).enumerate() {
            b.set(32 + 16 * j as u64, node.key(i));
            b.set(40 + 16 * j as u64, node.ptr(i));
        }
        if level > 0 {
            b.set(0, node.ptr(m));
        }
        b.set(SIBLING, node.sibling());
        b.set(LEVEL, level | ((cnt - first - 1) << 48));
        b.set(MTX, smtx);
        Self::construct(c, s, smtx, &b.0);
        link(c, n + SIBLING, s);
        let sw = c.peek(n + SWITCH, 1);
        c.store_n(n + SWITCH, 1, (sw + if sw.is_multiple_of(2) { 2 } else { 1 }) & 0xff);
        c.store_u64(rec(n, m) + 8, 0);
        c.ofence();
        c.store_n(n + LAST, 2, m.wrapping_sub(1) & 0xffff);
        c.ofence();
        if k < split_key {
            Self::insert_key(c, n, k, p, m);
        } else {
            c.lock(smtx);
            Self::insert_key(c, s, k, p, cnt - first);
            c.unlock(smtx);
        }
        if c.acquire(self.root) == n {
            let (r, rmtx) = Self::new_node(c);
            let mut b = NodeImage::zeroed(NODE);
            b.set(0, n);
            b.set(LEVEL, level + 1);
            b.set(MTX, rmtx);
            b.set(32, split_key);
            b.set(40, s);
            Self::construct(c, r, rmtx, &b.0);
            publish_root(c, self.root, r);
            c.unlock(mtx);
        } else {
            c.unlock(mtx);
            let parent = self.find(c, split_key, level + 1);
            self.store(c, parent, split_key, s);
        }
    }
}

impl Index for Ix {
    fn insert(&mut self, c: &mut Ctx<'_>, w: u64, r: u64) {
        c.ofence();
        let leaf = self.find(c, w, 0);
        self.store(c, leaf, w, r);
    }

    fn search(&mut self, c: &mut Ctx<'_>, w: u64) -> Option<u64> {
        let leaf = self.find(c, w, 0);
        Self::visit(c, leaf).entries().into_iter().find(|e| e.0 == w).map(|e| e.1)
    }

    fn delete(&mut self, c: &mut Ctx<'_>, w: u64) -> bool {
        let n = self.find(c, w, 0);
        let mtx = c.peek(n + MTX, 8);
        c.lock(mtx);
        let node = Self::read(c, n);
        let cnt = node.entries().len() as u64;
        let Some(i) = (0..cnt).find(|&i| node.key(i) == w) else {
            c.unlock(mtx);
            return false;
        };
        let sw = c.peek(n + SWITCH, 1);
        if sw.is_multiple_of(2) {
            c.store_n(n + SWITCH, 1, (sw + 1) & 0xff);
        }
        c.store_u64(rec(n, i) + 8, if i == 0 { node.leftmost() } else { node.ptr(i - 1) });
        for j in i..cnt {
            if j > i && rec(n, j).is_multiple_of(64) {
                c.ofence(); // the line just completed persists before the next one changes
            }
            c.store_u64(rec(n, j), node.key(j + 1));
            c.store_u64(rec(n, j) + 8, node.ptr(j + 1));
        }
        c.store_n(n + LAST, 2, (cnt - 2) & 0xffff);
        c.ofence();
        c.unlock(mtx);
        true
    }
}

fn generate(p: &Params) -> Generated {
    let mut g = Gen::new(p);
    let root = g.heap.alloc_pm(64, 64);
    {
        let mut c = g.ctx(0);
        let (r, mtx) = Ix::new_node(&mut c);
        c.store_u64(r + MTX, mtx);
        c.ofence();
        c.store_u64(root, r);
        c.dfence();
    }
    let mut ix = Ix { root };
    let s = p.get("search_pct").min(100);
    let mix = Mix { search_pct: s, delete_pct: p.get("delete_pct").min(100 - s) };
    let (trace, truth) = run(p, g, &mut ix, mix);
    Generated { trace, recovery: Box::new(FfRecovery { root, truth }) }
}

struct FfRecovery {
    root: u64,
    truth: Truth,
}

fn read(img: &MemImage, n: u64) -> Node {
    Node(NodeImage(img.read_bytes(n, NODE as usize)))
}

impl Recovery for FfRecovery {
    /// One piece per leaf, per leaf's reachability check and per leaf's part of the verification.
    fn check_with(&self, img: &MemImage, dfence_done: &DfenceDone, pieces: &mut dyn PieceCache) -> R<RecoveryReport> {
        let tree = Blink {
            read: |n| Ok(read(img, n)),
            bound: |node: &Node| {
                let sib = node.sibling();
                if sib != 0 {
                    read(img, sib).first_key()
                } else {
                    None
                }
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
