//! PMDK's `hashmap_tx` and `ctree_map` examples (the Whisper set's `hashmap` and `ctree`) as
//! local generators, for the remote-persistence clients.
//!
//! Pattern (WHISPER's NVML fork, github.com/snalli/nvml: `src/examples/libpmemobj/hashmap/
//! hashmap_tx.c` `hm_tx_insert`/`hm_tx_remove`, `tree_map/ctree_map.c` `ctree_map_insert`/
//! `ctree_map_insert_leaf`/`ctree_map_remove`, driven by `src/benchmarks/map_bench.c`
//! `map_insert_op`, which WHISPER's `run_ctree.sh`/`run_hashmap.sh` run): every operation is
//! one libpmemobj transaction with the library's own persists ([`super::nvml`]): the value
//! object allocated by the driver (`pmemobj_tx_alloc`), each `TX_ADD` through the range cache,
//! each `TX_NEW` through the allocator's redo log, the commit's drain, state words, cache
//! zeroing and undo-vector clearing; the transaction's end is durable (`dfence`). A key found
//! is removed instead (WHISPER's run inserts random 64-bit keys, so it never finds one; the
//! generators keep a bounded key space so the structures stay small). Each client has its own
//! structure, lane and heap.
//!
//! Simplifications: one size class per object kind, blocks from a bump pointer or free list
//! (the heap's transient buckets); no rehash (`hashmap` has a fixed bucket count); TOIDs are
//! 8-byte offsets; the values are tagged bytes (ctree keeps the key beside the value, one
//! object per leaf). No recovery check of its own: these run as clients, and the server's
//! images are checked by the region-order rule.

use super::nvml::{Heap, Lane, NvmlTx};
use crate::ctx::{Gen, Interleaver};
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

fn hash(k: u64) -> u64 {
    let mut z = k.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 31)
}

/// `hashmap_tx` driven by pmembench's `map_insert` (`src/benchmarks/map_bench.c`: one
/// transaction allocating the value, `pmemobj_tx_alloc`, around `hm_tx_insert`): entry
/// {key, next, value}; buckets of head pointers; a count word. A key found is removed
/// (`hm_tx_remove`: the link and the count `TX_ADD`ed, the entry `TX_FREE`d).
pub fn hashmap(p: &Params) -> Generated {
    let keys = p.get("keys").max(1);
    let nb = p.get("buckets").max(1);
    let compute = p.get("compute");
    let vs = r8(p.value_size);
    let mut g = Gen::new(p);
    let mut maps: Vec<(u64, u64, Lane, Heap, Heap)> = (0..p.threads)
        .map(|t| {
            let mut c = g.ctx(t);
            let buckets = c.alloc_pm(nb * 8, 64);
            let count = c.alloc_pm(64, 64);
            let lane = Lane::new(&mut c);
            let entries = Heap::new(&mut c, 64, keys + 1);
            let values = Heap::new(&mut c, vs.max(8).div_ceil(64) * 64, keys + p.ops + 1);
            (buckets, count, lane, entries, values)
        })
        .collect();
    let mut tag = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let (buckets, count, lane, eh, vh) = &mut maps[c.thread];
        let (buckets, count) = (*buckets, *count);
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
        let mut tx = NvmlTx::begin();
        let n = c.load_u64(count);
        if cur != 0 {
            tx.add(c, lane, eh, prev, 8);
            tx.add(c, lane, eh, count, 8);
            let next = c.load_u64(cur + 8);
            c.store_u64(prev, next);
            c.store_u64(count, n.wrapping_sub(1));
            tx.free(c, lane, cur, 0);
        } else {
            let v = tx.alloc(c, lane, vh);
            tag += 1;
            c.store(v, &value_bytes(tag, vs as usize));
            tx.add(c, lane, eh, slot, 8);
            tx.add(c, lane, eh, count, 8);
            let e = tx.alloc(c, lane, eh);
            let head = c.load_u64(slot);
            c.store_u64(e, key);
            c.store_u64(e + 16, v);
            c.store_u64(e + 8, head);
            c.store_u64(slot, e);
            c.store_u64(count, n + 1);
        }
        tx.commit(c, lane, &mut [eh, vh]);
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
    let leaf_size = (8 + vs).div_ceil(64) * 64;
    let mut trees: Vec<(u64, Lane, Heap, Heap)> = (0..p.threads)
        .map(|t| {
            let mut c = g.ctx(t);
            let root = c.alloc_pm(64, 64);
            c.store_u64(root, 0);
            let lane = Lane::new(&mut c);
            let nodes = Heap::new(&mut c, 64, keys + 1);
            let leaves = Heap::new(&mut c, leaf_size, keys + p.ops + 1);
            (root, lane, nodes, leaves)
        })
        .collect();
    let bit = |k: u64, d: u64| (k >> d) & 1;
    let mut tag = 0u64;
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        let (root, lane, nh, lh) = &mut trees[c.thread];
        let root = &*root;
        let key = c.rng().below(keys) + 1;
        c.begin("op");
        c.compute(compute);
        let mut tx = NvmlTx::begin();
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
                tx.write_u64(c, lane, nh, *root, 0);
            } else {
                let parent = c.load_u64(gp_slot);
                let sib_slot = if p_slot == parent + 8 { parent + 16 } else { parent + 8 };
                let sib = c.load_u64(sib_slot);
                tx.write_u64(c, lane, nh, gp_slot, sib);
                tx.free(c, lane, parent, 0);
            }
        } else {
            // map_bench's value object (with the key, the leaf), then `ctree_map_insert`.
            let leaf = tx.alloc(c, lane, lh);
            c.store_u64(leaf, key);
            c.store(leaf + 8, &value_bytes(tag, vs as usize));
            match found {
                None => tx.write_u64(c, lane, nh, *root, leaf | LEAF),
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
                    let node = tx.alloc(c, lane, nh);
                    c.store_u64(node, diff);
                    let (s_new, s_old) =
                        if bit(key, diff) == 1 { (node + 16, node + 8) } else { (node + 8, node + 16) };
                    c.store_u64(s_new, leaf | LEAF);
                    c.store_u64(s_old, at);
                    tx.write_u64(c, lane, nh, dest, node);
                }
            }
        }
        tx.commit(c, lane, &mut [nh, lh]);
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
        let mut roots = Vec::new();
        for t in 0..p.threads {
            let mut c = g2.ctx(t);
            roots.push(c.alloc_pm(64, 64));
            let _ = Lane::new(&mut c);
            let _ = Heap::new(&mut c, 64, 4097);
            let _ = Heap::new(&mut c, (8 + r8(p.value_size)).div_ceil(64) * 64, 4097 + p.ops);
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

    /// Persist epochs (runs of `rdma_pwrite`s) and waits of each operation of a 1-client trace.
    fn per_op(w: &str, extra: &[(&str, &str)]) -> Vec<(usize, usize)> {
        let mut m: BTreeMap<String, String> = [("threads", "1"), ("epoch_compute", "0")]
            .iter()
            .chain(extra)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        m.insert("keys".into(), (1u64 << 20).to_string());
        let t = crate::generate(w, &m).unwrap().trace;
        let (mut out, mut open) = (Vec::new(), false);
        for e in &t.threads[0].events {
            match e.kind {
                pmsim_trace::Kind::Begin => out.push((0, 0)),
                pmsim_trace::Kind::RdmaPwrite if !open => {
                    out.last_mut().unwrap().0 += 1;
                    open = true;
                    continue;
                }
                pmsim_trace::Kind::RdmaPwrite => continue,
                pmsim_trace::Kind::RdmaWait => out.last_mut().unwrap().1 += 1,
                _ => {}
            }
            open = false;
        }
        out
    }

    /// Counted by hand from WHISPER's NVML (github.com/snalli/nvml: `tx.c`, `redo.c`,
    /// `pvector.c`) and its drivers (`map_bench.c` `map_insert_op`: a transaction with
    /// `pmemobj_tx_alloc` of the value around the map's insert):
    /// - hashmap, insert into an empty map (`hm_tx_insert`): value alloc (heap redo log: entries,
    ///   finish flag, apply, flag clear: 4), `TX_ADD_FIELD` bucket (cache snapshot, slot header:
    ///   2), `TX_ADD_FIELD` count (2), `TX_NEW` entry (4); commit: drain (1), state COMMITTED
    ///   (1), range cache zeroed (1), two `UNDO_ALLOC` slots cleared (2), state NONE (the
    ///   commit): 18 epochs, one wait;
    /// - ctree, insert into an empty tree (`ctree_map_insert`, `p->key == 0`): value alloc (4),
    ///   `tx_add_range_direct` of the root entry (2); commit 1 + 1 + 1, one slot cleared (1),
    ///   NONE: 11; a second, different key (`ctree_map_insert_leaf`): value (4), `TX_NEW`
    ///   node (4), `tx_add_range_direct` of the slot (2); commit 1 + 1 + 1 + 2, NONE: 16.
    #[test]
    fn nvml_transactions_have_the_libraries_persist_epochs() {
        assert_eq!(per_op("rdma-hashmap", &[("ops", "1")]), [(18, 1)]);
        assert_eq!(per_op("rdma-ctree", &[("ops", "2")]), [(11, 1), (16, 1)]);
    }
}
