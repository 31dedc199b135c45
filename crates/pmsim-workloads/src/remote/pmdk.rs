//! PMDK's `hashmap_tx` and `ctree_map` examples (the Whisper set's `hashmap` and `ctree`) as
//! local generators, for the remote-persistence clients.
//!
//! Pattern (pmdk `examples/libpmemobj/hashmap/hashmap_tx.c`, `tree_map/ctree_map.c`): every
//! operation is one undo-logged transaction (`TX_BEGIN`; `TX_ADD` of each persistent range
//! before its first store: undo entry + `ofence`; stores into memory allocated in the
//! transaction need no entry; commit orders the data, truncates the log, and is durable:
//! `dfence`). Allocation and free update the allocator's persistent state inside the
//! transaction (a logged free-list or bump-pointer word). The Whisper driver inserts a random
//! key if absent and removes it if found. Each client has its own structure, log and allocator.
//!
//! Simplifications: one allocation class per structure; no rehash (`hashmap` has a fixed bucket
//! count); the values are tagged bytes. No recovery check of its own: these run as clients, and
//! the server's images are checked by the region-order rule.

use crate::atlas::undo_log::{alloc_logs, Tx};
use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::{int, ParamSpec, Params};
use crate::recovery::{OpRecord, Recovery, RecoveryError, RecoveryReport};
use crate::registry::Generated;
use crate::whisper::common::{r8, value_bytes};
use pmsim_trace::MemImage;

const KEYS: ParamSpec = ParamSpec {
    name: "keys",
    default: "4096",
    unit: "keys",
    range: int(1, 1 << 30),
    help: "key space (insert if absent, remove if found)",
};
const COMPUTE: ParamSpec = ParamSpec {
    name: "compute",
    default: "4000",
    unit: "instructions",
    range: int(0, 1 << 32),
    help: "client CPU work per operation (1 us at 2 GHz, IPC 2)",
};

pub const HASHMAP_PARAMS: &[ParamSpec] = &[
    KEYS,
    ParamSpec {
        name: "buckets",
        default: "1024",
        unit: "buckets",
        range: int(1, 1 << 30),
        help: "hash buckets per client's map",
    },
    COMPUTE,
    super::PMDK_EPOCH,
];

pub const CTREE_PARAMS: &[ParamSpec] = &[KEYS, COMPUTE, super::PMDK_EPOCH];

/// A local run of these generators has no recovery check (see the module doc).
struct Unchecked;

impl Recovery for Unchecked {
    fn check(&self, _image: &MemImage, _done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        Ok(RecoveryReport::default())
    }
}

/// A client's persistent allocator: a free list of fixed-size blocks, then a bump pointer; its
/// two words live in PM and are updated inside the caller's transaction (PMDK's allocator
/// redo-logs its metadata; here the update is an undo-logged word, same epoch count).
struct Alloc {
    /// Word holding the free-list head; the bump pointer is the next word.
    meta: u64,
    size: u64,
}

impl Alloc {
    fn new(c: &mut Ctx<'_>, size: u64, count: u64) -> Alloc {
        let meta = c.alloc_pm(64, 64);
        let pool = c.alloc_pm(size * count, 64);
        c.store_u64(meta, 0);
        c.store_u64(meta + 8, pool);
        Alloc { meta, size }
    }

    fn alloc(&self, c: &mut Ctx<'_>, tx: &mut Tx) -> u64 {
        let head = c.load_u64(self.meta);
        let blk = if head != 0 {
            let next = c.load_u64(head);
            tx.write_u64(c, self.meta, next);
            head
        } else {
            let bump = c.load_u64(self.meta + 8);
            tx.write_u64(c, self.meta + 8, bump + self.size);
            bump
        };
        tx.fresh(blk, self.size);
        blk
    }

    fn free(&self, c: &mut Ctx<'_>, tx: &mut Tx, blk: u64) {
        let head = c.load_u64(self.meta);
        tx.write_u64(c, blk, head);
        tx.write_u64(c, self.meta, blk);
    }
}

fn hash(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 31)
}

/// `hashmap_tx`: entry {key, next, value}; buckets of head pointers; a count word.
pub fn hashmap(p: &Params) -> Generated {
    let keys = p.get("keys").max(1);
    let nb = p.get("buckets").max(1);
    let compute = p.get("compute");
    let vs = r8(p.value_size);
    let mut g = Gen::new(p);
    let logs = alloc_logs(&mut g.heap, p.threads);
    let entry = (16 + vs).div_ceil(64) * 64;
    let maps: Vec<(u64, u64, Alloc)> = (0..p.threads)
        .map(|t| {
            let mut c = g.ctx(t);
            let buckets = c.alloc_pm(nb * 8, 64);
            let count = c.alloc_pm(64, 64);
            let a = Alloc::new(&mut c, entry, keys + 1);
            (buckets, count, a)
        })
        .collect();
    let mut txid = 0u64;
    let mut tag = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let (buckets, count, a) = &maps[c.thread];
        let key = c.rng().below(keys) + 1;
        c.begin("op");
        c.compute(compute);
        let slot = buckets + (hash(key) % nb) * 8;
        // Walk the chain: prev holds the link that points to the current entry.
        let (mut prev, mut cur) = (slot, c.load_u64(slot));
        while cur != 0 && c.load_u64(cur) != key {
            prev = cur + 8;
            cur = c.load_u64(cur + 8);
        }
        txid += 1;
        let mut tx = Tx::begin(logs[c.thread], txid, true, false);
        let n = c.load_u64(*count);
        if cur != 0 {
            let next = c.load_u64(cur + 8);
            tx.write_u64(c, prev, next);
            a.free(c, &mut tx, cur);
            tx.write_u64(c, *count, n.wrapping_sub(1));
        } else {
            let e = a.alloc(c, &mut tx);
            tag += 1;
            let head = c.load_u64(slot);
            tx.write_u64(c, e, key);
            tx.write_u64(c, e + 8, head);
            tx.write(c, e + 16, &value_bytes(tag, vs as usize));
            tx.write_u64(c, slot, e);
            tx.write_u64(c, *count, n + 1);
        }
        tx.commit(c);
        c.end("op", OpRecord { op: 1, key, ..Default::default() });
        c.op_dfence();
    });
    let (trace, _) = g.finish();
    Generated { trace, recovery: Box::new(Unchecked) }
}

const LEAF: u64 = 1;

/// `ctree_map`: crit-bit tree. Internal node {diff, slot[0], slot[1]}; leaf {key, value}; a
/// pointer with bit 0 set is a leaf.
pub fn ctree(p: &Params) -> Generated {
    let keys = p.get("keys").max(1);
    let compute = p.get("compute");
    let vs = r8(p.value_size);
    let mut g = Gen::new(p);
    let logs = alloc_logs(&mut g.heap, p.threads);
    let leaf_size = (8 + vs).div_ceil(64) * 64;
    let trees: Vec<(u64, Alloc, Alloc)> = (0..p.threads)
        .map(|t| {
            let mut c = g.ctx(t);
            let root = c.alloc_pm(64, 64);
            c.store_u64(root, 0);
            (root, Alloc::new(&mut c, 64, keys + 1), Alloc::new(&mut c, leaf_size, keys + 1))
        })
        .collect();
    let bit = |k: u64, d: u64| (k >> d) & 1;
    let mut txid = 0u64;
    let mut tag = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let (root, nodes, leaves) = &trees[c.thread];
        let key = c.rng().below(keys) + 1;
        c.begin("op");
        c.compute(compute);
        txid += 1;
        let mut tx = Tx::begin(logs[c.thread], txid, true, false);
        // Descend to the leaf the key's bits lead to, remembering parent and grandparent slots.
        let (mut gp_slot, mut p_slot) = (0u64, *root);
        let mut cur = c.load_u64(*root);
        while cur != 0 && cur & LEAF == 0 {
            let d = c.load_u64(cur);
            gp_slot = p_slot;
            p_slot = cur + 8 + 8 * bit(key, d);
            cur = c.load_u64(p_slot);
        }
        let found = if cur == 0 { None } else { Some(c.load_u64(cur & !LEAF)) };
        tag += 1;
        if found == Some(key) {
            // Remove: the grandparent's slot takes the sibling; the parent node and leaf are freed.
            if gp_slot == 0 {
                tx.write_u64(c, *root, 0);
            } else {
                let parent = c.load_u64(gp_slot);
                let sib_slot = if p_slot == parent + 8 { parent + 16 } else { parent + 8 };
                let sib = c.load_u64(sib_slot);
                tx.write_u64(c, gp_slot, sib);
                nodes.free(c, &mut tx, parent);
            }
            leaves.free(c, &mut tx, cur & !LEAF);
        } else {
            let leaf = leaves.alloc(c, &mut tx);
            tx.write_u64(c, leaf, key);
            tx.write(c, leaf + 8, &value_bytes(tag, vs as usize));
            match found {
                None => tx.write_u64(c, *root, leaf | LEAF),
                Some(other) => {
                    // The crit bit: highest bit where the key differs from the leaf reached.
                    let diff = 63 - (key ^ other).leading_zeros() as u64;
                    let mut dest = *root;
                    let mut at = c.load_u64(dest);
                    while at & LEAF == 0 {
                        let d = c.load_u64(at);
                        if d < diff {
                            break;
                        }
                        dest = at + 8 + 8 * bit(key, d);
                        at = c.load_u64(dest);
                    }
                    let node = nodes.alloc(c, &mut tx);
                    tx.write_u64(c, node, diff);
                    let (s_new, s_old) =
                        if bit(key, diff) == 1 { (node + 16, node + 8) } else { (node + 8, node + 16) };
                    tx.write_u64(c, s_new, leaf | LEAF);
                    tx.write_u64(c, s_old, at);
                    tx.write_u64(c, dest, node);
                }
            }
        }
        tx.commit(c);
        c.end("op", OpRecord { op: 1, key, ..Default::default() });
        c.op_dfence();
    });
    let (trace, _) = g.finish();
    Generated { trace, recovery: Box::new(Unchecked) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;
    use std::collections::BTreeMap;

    fn params(own: &[ParamSpec], ops: u64) -> Params {
        let mut m = BTreeMap::new();
        m.insert("ops".to_string(), ops.to_string());
        m.insert("threads".to_string(), "2".to_string());
        Params::parse("t", own, &m).unwrap()
    }

    /// Replays the generated stores into a map and checks the structure holds exactly the keys
    /// an independent model (a set toggled per operation) says it should.
    fn keys_in_ctree(img: &crate::Heap, root: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut stack = vec![img.read_u64(root, 8)];
        while let Some(p) = stack.pop() {
            if p == 0 {
                continue;
            }
            if p & LEAF != 0 {
                out.push(img.read_u64(p & !LEAF, 8));
            } else {
                stack.push(img.read_u64(p + 8, 8));
                stack.push(img.read_u64(p + 16, 8));
            }
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn ctree_and_hashmap_generate_transactions_with_undo_entries() {
        for gen in [ctree as fn(&Params) -> Generated, hashmap] {
            let g = gen(&params(CTREE_PARAMS, 300));
            let t = &g.trace;
            let ops = t.threads.iter().flat_map(|s| &s.events).filter(|e| e.kind == pmsim_trace::Kind::End).count();
            assert_eq!(ops, 600);
            let fences =
                t.threads.iter().flat_map(|s| &s.events).filter(|e| e.kind == pmsim_trace::Kind::Ofence).count();
            // At least one undo entry (ofence) and the commit's ofence per operation.
            assert!(fences >= 2 * ops, "{fences} ofences for {ops} ops");
        }
    }

    #[test]
    fn ctree_holds_the_keys_a_set_model_predicts() {
        // Run the generator's logic through a heap by regenerating with one thread and replaying.
        let p = params(CTREE_PARAMS, 400);
        let g = ctree(&p);
        let img = crate::recovery::global_order_image(&g.trace, u64::MAX);
        let mut heap = crate::Heap::new();
        for (w, v) in img.sorted() {
            heap.write(w, &v.data.to_le_bytes());
        }
        // Roots are the first PM allocation of each thread after the logs: find them by
        // replaying the key sequence the generator drew (same seed, same interleaving).
        let mut g2 = Gen::new(&p);
        let _ = alloc_logs(&mut g2.heap, p.threads);
        let mut roots = Vec::new();
        for t in 0..p.threads {
            let mut c = g2.ctx(t);
            roots.push(c.alloc_pm(64, 64));
            let _ = Alloc::new(&mut c, 64, 4097);
            let _ = Alloc::new(&mut c, (8 + r8(p.value_size)).div_ceil(64) * 64, 4097);
        }
        let mut model: Vec<std::collections::BTreeSet<u64>> = vec![Default::default(); p.threads];
        let mut g3 = Gen::new(&p);
        Interleaver::run(&mut g3, p.threads, p.ops, |c, _| {
            let key = c.rng().below(4096) + 1;
            let m = &mut model[c.thread];
            if !m.remove(&key) {
                m.insert(key);
            }
        });
        for t in 0..p.threads {
            let want: Vec<u64> = model[t].iter().copied().collect();
            assert_eq!(keys_in_ctree(&heap, roots[t]), want, "thread {t}");
        }
    }
}
