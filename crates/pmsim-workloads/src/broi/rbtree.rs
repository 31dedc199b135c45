//! `rbtree`: a red-black tree (the seed's Table IV, after Kiln): look a key up; insert it if
//! absent, remove it if found. Left-leaning red-black tree (Sedgewick), insert and delete with
//! their rotations and colour flips.
//!
//! Per thread: a root word and a pool of 64 B nodes {key + 1, left, right, red, value}. The
//! tree is mirrored host-side; every node field an operation changes (links, colours, the key
//! moved up by a delete) is persisted through the transaction, undo record first, so the persist
//! pattern is the real one: a few scattered line updates per operation. Loads follow the search
//! path.
//!
//! Built on [`crate::blocks::undo_tx`] through the BROI driver. Simplifications: one private tree
//! per thread (no sharing, no locks); nodes from a fixed per-thread pool; the host-side mirror
//! decides the rotations, the trace carries their loads and logged stores.

use super::common::{bytes_per_thread, drive, Done, Instance, Mirror, KEYED_PARAMS};
use crate::atlas::undo_log::Tx;
use crate::ctx::Ctx;
use crate::params::Params;
use crate::registry::{Generated, WorkloadSpec};

pub static RBTREE: WorkloadSpec = WorkloadSpec {
    name: "rbtree",
    description:
        "BROI Table IV: red-black tree per thread (LLRB insert/delete), insert if absent / remove if found, undo-logged",
    params: KEYED_PARAMS,
    generate,
};

const NIL: usize = usize::MAX;
const KEY: u64 = 0;
const LEFT: u64 = 8;
const RIGHT: u64 = 16;
const RED: u64 = 24;
const VAL: u64 = 32;

#[derive(Clone, Copy)]
struct Node {
    key: u64,
    left: usize,
    right: usize,
    red: bool,
    val: u64,
}

struct Tree {
    root_word: u64,
    pool: u64,
    cap: usize,
    nodes: Vec<Node>,
    free: Vec<usize>,
    root: usize,
    m: Mirror,
    tag: u64,
}

impl Tree {
    fn addr(&self, n: usize) -> u64 {
        if n == NIL {
            0
        } else {
            self.pool + n as u64 * 64
        }
    }
    fn red(&self, n: usize) -> bool {
        n != NIL && self.nodes[n].red
    }
    fn set_left(&mut self, h: usize, x: usize) {
        self.nodes[h].left = x;
        self.m.set(self.addr(h) + LEFT, self.addr(x));
    }
    fn set_right(&mut self, h: usize, x: usize) {
        self.nodes[h].right = x;
        self.m.set(self.addr(h) + RIGHT, self.addr(x));
    }
    fn set_red(&mut self, h: usize, r: bool) {
        self.nodes[h].red = r;
        self.m.set(self.addr(h) + RED, r as u64);
    }
    fn rotate_left(&mut self, h: usize) -> usize {
        let x = self.nodes[h].right;
        self.set_right(h, self.nodes[x].left);
        self.set_left(x, h);
        self.set_red(x, self.nodes[h].red);
        self.set_red(h, true);
        x
    }
    fn rotate_right(&mut self, h: usize) -> usize {
        let x = self.nodes[h].left;
        self.set_left(h, self.nodes[x].right);
        self.set_right(x, h);
        self.set_red(x, self.nodes[h].red);
        self.set_red(h, true);
        x
    }
    fn flip(&mut self, h: usize) {
        let (l, r) = (self.nodes[h].left, self.nodes[h].right);
        self.set_red(h, !self.nodes[h].red);
        self.set_red(l, !self.nodes[l].red);
        self.set_red(r, !self.nodes[r].red);
    }
    fn fix_up(&mut self, mut h: usize) -> usize {
        if self.red(self.nodes[h].right) {
            h = self.rotate_left(h);
        }
        if self.red(self.nodes[h].left) && self.red(self.nodes[self.nodes[h].left].left) {
            h = self.rotate_right(h);
        }
        if self.red(self.nodes[h].left) && self.red(self.nodes[h].right) {
            self.flip(h);
        }
        h
    }
    fn insert(&mut self, h: usize, n: usize) -> usize {
        if h == NIL {
            return n;
        }
        if self.nodes[n].key < self.nodes[h].key {
            let l = self.insert(self.nodes[h].left, n);
            self.set_left(h, l);
        } else {
            let r = self.insert(self.nodes[h].right, n);
            self.set_right(h, r);
        }
        self.fix_up(h)
    }
    fn move_red_left(&mut self, mut h: usize) -> usize {
        self.flip(h);
        let r = self.nodes[h].right;
        if self.red(self.nodes[r].left) {
            let nr = self.rotate_right(r);
            self.set_right(h, nr);
            h = self.rotate_left(h);
            self.flip(h);
        }
        h
    }
    fn move_red_right(&mut self, mut h: usize) -> usize {
        self.flip(h);
        if self.red(self.nodes[self.nodes[h].left].left) {
            h = self.rotate_right(h);
            self.flip(h);
        }
        h
    }
    /// Removes the minimum of `h`'s subtree; returns (new subtree, removed node).
    fn delete_min(&mut self, mut h: usize) -> (usize, usize) {
        if self.nodes[h].left == NIL {
            return (NIL, h);
        }
        if !self.red(self.nodes[h].left) && !self.red(self.nodes[self.nodes[h].left].left) {
            h = self.move_red_left(h);
        }
        let (l, min) = self.delete_min(self.nodes[h].left);
        self.set_left(h, l);
        (self.fix_up(h), min)
    }
    fn delete(&mut self, mut h: usize, key: u64, removed: &mut usize) -> usize {
        if key < self.nodes[h].key {
            if !self.red(self.nodes[h].left) && !self.red(self.nodes[self.nodes[h].left].left) {
                h = self.move_red_left(h);
            }
            let l = self.delete(self.nodes[h].left, key, removed);
            self.set_left(h, l);
        } else {
            if self.red(self.nodes[h].left) {
                h = self.rotate_right(h);
            }
            if key == self.nodes[h].key && self.nodes[h].right == NIL {
                *removed = h;
                return NIL;
            }
            if !self.red(self.nodes[h].right) && !self.red(self.nodes[self.nodes[h].right].left) {
                h = self.move_red_right(h);
            }
            if key == self.nodes[h].key {
                let (r, min) = self.delete_min(self.nodes[h].right);
                // The successor's key and value move up into h; its node is freed.
                let (k, v) = (self.nodes[min].key, self.nodes[min].val);
                self.nodes[h].key = k;
                self.nodes[h].val = v;
                self.m.set(self.addr(h) + KEY, k + 1);
                self.m.set(self.addr(h) + VAL, v);
                self.set_right(h, r);
                *removed = min;
            } else {
                let r = self.delete(self.nodes[h].right, key, removed);
                self.set_right(h, r);
            }
        }
        self.fix_up(h)
    }
    fn find(&self, c: &mut Ctx<'_>, key: u64) -> bool {
        let mut h = self.root;
        while h != NIL {
            let k = c.load_u64(self.addr(h) + KEY);
            debug_assert_eq!(k, self.nodes[h].key + 1);
            if key == self.nodes[h].key {
                return true;
            }
            h = if key < self.nodes[h].key { self.nodes[h].left } else { self.nodes[h].right };
        }
        false
    }
}

impl Instance for Tree {
    fn op(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done {
        let found = self.find(c, key);
        let op;
        if found {
            let root = self.root;
            if !self.red(self.nodes[root].left) && !self.red(self.nodes[root].right) {
                self.set_red(root, true);
            }
            let mut removed = NIL;
            self.root = self.delete(root, key, &mut removed);
            if removed != NIL {
                self.free.push(removed);
            }
            op = 2;
        } else {
            let n = match self.free.pop() {
                Some(n) => n,
                None if self.nodes.len() < self.cap => {
                    self.nodes.push(Node { key: 0, left: NIL, right: NIL, red: true, val: 0 });
                    self.nodes.len() - 1
                }
                None => return Done { op: 3, key, value: 0 },
            };
            self.tag += 1;
            self.nodes[n] = Node { key, left: NIL, right: NIL, red: true, val: self.tag };
            let a = self.addr(n);
            for (f, v) in [(KEY, key + 1), (LEFT, 0), (RIGHT, 0), (RED, 1), (VAL, self.tag)] {
                self.m.set(a + f, v);
            }
            self.root = self.insert(self.root, n);
            op = 0;
        }
        if self.root != NIL && self.nodes[self.root].red {
            let r = self.root;
            self.set_red(r, false);
        }
        let rw = self.addr(self.root);
        self.m.set(self.root_word, rw);
        self.m.flush(c, tx);
        Done { op, key, value: self.tag }
    }
}

fn generate(p: &Params) -> Generated {
    let per = bytes_per_thread(p).max(8192);
    let cap = (per / 64 - 1) as usize;
    drive(p, 2 * cap as u64, |_, g| {
        let root_word = g.heap.alloc_pm(64, 64);
        let pool = g.heap.alloc_pm(cap as u64 * 64, 4096);
        Tree { root_word, pool, cap, nodes: Vec::new(), free: Vec::new(), root: NIL, m: Mirror::default(), tag: 0 }
    })
}
