//! `hash`: an open-chain hash table (the seed's Table IV, after NV-heaps): look a key up;
//! insert it if absent, remove it if found.
//!
//! Per thread: a bucket array of head pointers and a pool of 64 B nodes {next, key, value[6]}.
//! Insert fills a fresh node (no undo record needed) and links it at its bucket's head (one
//! logged store); remove unlinks (one logged store to the predecessor's `next` or the head).
//! Removed nodes return to the thread's free list. Loads walk the chain, as the real lookup.
//!
//! Built on [`crate::blocks::undo_tx`] through the BROI driver. Simplifications: one private table
//! per thread (no sharing, no locks), a fixed bucket count (no resize), 64 B nodes from a fixed
//! per-thread pool (a full pool turns an insert into a read-only operation).

use super::common::{bytes_per_thread, drive, Done, Instance, KEYED_PARAMS};
use crate::atlas::undo_log::Tx;
use crate::ctx::Ctx;
use crate::params::Params;
use crate::registry::{Generated, WorkloadSpec};

pub static HASH: WorkloadSpec = WorkloadSpec {
    name: "hash",
    description: "BROI Table IV: open-chain hash table per thread, insert if absent / remove if found, undo-logged",
    params: KEYED_PARAMS,
    generate,
};

struct Table {
    buckets: u64,
    nbuckets: u64,
    pool: u64,
    pool_nodes: u64,
    used: u64,
    free: Vec<u64>,
    tag: u64,
}

impl Table {
    fn node(&mut self) -> Option<u64> {
        if let Some(n) = self.free.pop() {
            return Some(n);
        }
        (self.used < self.pool_nodes).then(|| {
            self.used += 1;
            self.pool + (self.used - 1) * 64
        })
    }
}

impl Instance for Table {
    fn op(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done {
        let head = self.buckets + (key % self.nbuckets) * 8;
        let (mut prev, mut cur) = (head, c.load_u64(head));
        while cur != 0 {
            if c.load_u64(cur + 8) == key + 1 {
                let next = c.load_u64(cur);
                tx.write_u64(c, prev, next);
                self.free.push(cur);
                return Done { op: 2, key, value: 0 };
            }
            prev = cur;
            cur = c.load_u64(cur);
        }
        let Some(n) = self.node() else { return Done { op: 3, key, value: 0 } };
        self.tag += 1;
        let first = c.load_u64(head);
        let mut bytes = Vec::with_capacity(64);
        for w in [first, key + 1, self.tag, 0, 0, 0, 0, 0] {
            bytes.extend_from_slice(&w.to_le_bytes());
        }
        // A reused node was reachable before: it is logged like any other data.
        tx.write(c, n, &bytes);
        tx.write_u64(c, head, n);
        Done { op: 0, key, value: self.tag }
    }
}

fn generate(p: &Params) -> Generated {
    let per = bytes_per_thread(p).max(8192);
    // A quarter of the region for buckets, the rest for nodes; the key space keeps the
    // table about half full.
    let nbuckets = (per / 4 / 8).max(16);
    let pool_nodes = (per - nbuckets * 8) / 64;
    drive(p, pool_nodes, |_, g| {
        let buckets = g.heap.alloc_pm(nbuckets * 8, 4096);
        let pool = g.heap.alloc_pm(pool_nodes * 64, 4096);
        Table { buckets, nbuckets, pool, pool_nodes, used: 0, free: Vec::new(), tag: 0 }
    })
}
