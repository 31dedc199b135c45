//! `btree`: a B+ tree (the seed's Table IV, after STX B+ tree): look a key up; insert it if
//! absent, remove it if found.
//!
//! Per thread: a root (inner) node of sorted (separator, leaf) pairs over 256 B leaves of up to
//! 15 sorted keys and their values. Insert shifts the larger keys and values of its leaf right;
//! a full leaf splits (the upper half moves to a fresh leaf) and the separator is inserted into
//! the root, shifting the pairs after it — the B+ tree's characteristic multi-line persist
//! pattern. Remove shifts left; leaves are not merged (as STX does below its fill threshold
//! only lazily). Simplification: two levels; the root is sized from the footprint, and once it
//! is full a split is refused (the insert becomes a lookup).
//!
//! Built on [`crate::blocks::undo_tx`] through the BROI driver.

use super::common::{bytes_per_thread, drive, Done, Instance, Mirror, KEYED_PARAMS};
use crate::atlas::undo_log::Tx;
use crate::ctx::Ctx;
use crate::params::Params;
use crate::registry::{Generated, WorkloadSpec};

pub static BTREE: WorkloadSpec = WorkloadSpec {
    name: "btree",
    description: "BROI Table IV: B+ tree per thread (sorted 15-key leaves, splits into the root), insert if absent / remove if found, undo-logged",
    params: KEYED_PARAMS,
    generate,
};

const SLOTS: usize = 15;
const LEAF: u64 = 256;

#[derive(Clone, Default)]
struct Leaf {
    keys: Vec<u64>,
    vals: Vec<u64>,
}

struct Tree {
    /// Root: word 0 = count, then (separator, leaf address) pairs.
    root: u64,
    fanout: usize,
    pool: u64,
    leaves: Vec<Leaf>,
    /// (separator, leaf index), sorted.
    dir: Vec<(u64, usize)>,
    m: Mirror,
    tag: u64,
}

impl Tree {
    fn leaf_addr(&self, i: usize) -> u64 {
        self.pool + i as u64 * LEAF
    }

    fn write_leaf(&mut self, i: usize) {
        let a = self.leaf_addr(i);
        let l = self.leaves[i].clone();
        self.m.set(a, l.keys.len() as u64);
        for (s, (&k, &v)) in l.keys.iter().zip(&l.vals).enumerate() {
            self.m.set(a + 8 + 8 * s as u64, k + 1);
            self.m.set(a + 128 + 8 * s as u64, v);
        }
    }

    fn write_dir(&mut self) {
        self.m.set(self.root, self.dir.len() as u64);
        for (s, &(sep, leaf)) in self.dir.clone().iter().enumerate() {
            let a = self.root + 16 + 16 * s as u64;
            self.m.set(a, sep);
            self.m.set(a + 8, self.leaf_addr(leaf));
        }
    }
}

impl Instance for Tree {
    fn op(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done {
        // Search: binary search of the root (its loads), then the leaf's keys.
        let pos = self.dir.partition_point(|d| d.0 <= key).max(1) - 1;
        let (mut lo, mut hi) = (0, self.dir.len());
        while lo + 1 < hi {
            let mid = (lo + hi) / 2;
            c.load_u64(self.root + 16 + 16 * mid as u64);
            if self.dir[mid].0 <= key {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let li = self.dir[pos].1;
        let la = self.leaf_addr(li);
        c.load_u64(la);
        let at = self.leaves[li].keys.partition_point(|&k| k < key);
        for s in 0..at.min(self.leaves[li].keys.len()) {
            c.load_u64(la + 8 + 8 * s as u64);
        }
        let found = self.leaves[li].keys.get(at) == Some(&key);
        let op = if found {
            self.leaves[li].keys.remove(at);
            self.leaves[li].vals.remove(at);
            self.write_leaf(li);
            2
        } else {
            if self.leaves[li].keys.len() == SLOTS {
                if self.dir.len() == self.fanout || self.leaves.len() * LEAF as usize >= self.fanout * LEAF as usize {
                    return Done { op: 3, key, value: 0 };
                }
                let ni = self.leaves.len();
                let upper = Leaf {
                    keys: self.leaves[li].keys.split_off(SLOTS / 2),
                    vals: self.leaves[li].vals.split_off(SLOTS / 2),
                };
                let sep = upper.keys[0];
                self.leaves.push(upper);
                self.dir.insert(pos + 1, (sep, ni));
                self.write_leaf(li);
                self.write_leaf(ni);
                self.write_dir();
                return self.op_insert(c, tx, key);
            }
            self.tag += 1;
            self.leaves[li].keys.insert(at, key);
            self.leaves[li].vals.insert(at, self.tag);
            self.write_leaf(li);
            0
        };
        self.m.flush(c, tx);
        Done { op, key, value: self.tag }
    }
}

impl Tree {
    /// Inserts after a split (the key now has room).
    fn op_insert(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done {
        let pos = self.dir.partition_point(|d| d.0 <= key).max(1) - 1;
        let li = self.dir[pos].1;
        let at = self.leaves[li].keys.partition_point(|&k| k < key);
        self.tag += 1;
        self.leaves[li].keys.insert(at, key);
        self.leaves[li].vals.insert(at, self.tag);
        self.write_leaf(li);
        self.m.flush(c, tx);
        Done { op: 0, key, value: self.tag }
    }
}

fn generate(p: &Params) -> Generated {
    let per = bytes_per_thread(p).max(8192);
    let fanout = ((per / (LEAF + 16)) as usize).max(2);
    drive(p, (fanout * SLOTS) as u64, |_, g| {
        let root = g.heap.alloc_pm(16 + 16 * fanout as u64, 4096);
        let pool = g.heap.alloc_pm(fanout as u64 * LEAF, 4096);
        // One empty leaf under separator 0; it is written by the first insert.
        Tree { root, fanout, pool, leaves: vec![Leaf::default()], dir: vec![(0, 0)], m: Mirror::default(), tag: 0 }
    })
}
