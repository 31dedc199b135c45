//! `memcached`: persistent memcached (WHISPER's port, every SET an undo-logged transaction),
//! driven by a SET-heavy memslap-like mix.
//!
//! Pattern (memcached 1.2-era `process_update_command` → `item_alloc` → `do_store_item` →
//! `item_replace`, all under the global `cache_lock`, made persistent by wrapping the SET in a
//! PMDK/Mnemosyne-style transaction): allocate an item from the slab (pop the slab free list:
//! logged store of the free-list head; or, when the slab is full, evict the LRU tail: logged
//! unlinks from its hash chain and the LRU and a logged snapshot of the item before reuse), fill
//! it (fresh memory: no undo record), unlink and free the old item of the key (logged), link the
//! new one at its bucket head and the LRU head, and update the item count (all logged). Each
//! logged store's undo record is persisted (`ofence`) before the store; commit orders the data
//! (`ofence`), clears the log and `dfence`s. GETs walk the chain and copy the value out.
//!
//! Simplifications: one slab class (all items `key_size + value_size`); no expiry, no LRU bump
//! on GET. Recovery: roll back the active transaction, then check the slab accounting (every
//! item free xor linked, count right), hash chains (keys hash to their bucket, unique, well
//! formed), the LRU list (doubly linked, same items), each key's state against its SET/evict
//! history (nothing lost that a completed dfence made durable), and per-word history.
//!
//! Built on [`crate::blocks::undo_tx`] and [`crate::blocks::requests`] (the SET/GET mix).

use crate::blocks::requests::{Mix, Request};
use crate::blocks::undo_tx::{Structure, UndoRecovery, UndoTxs};
use crate::ctx::{Ctx, Gen};
use crate::params::{compute, int, percent, ParamSpec, Params};
use crate::recovery::{OpRecord, RecoveryError};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::{key_bytes, key_of, r8, value_bytes, value_of, OP_READ};
use pmsim_trace::MemImage;
use rustc_hash::{FxHashMap, FxHashSet};

pub static MEMCACHED: WorkloadSpec = WorkloadSpec {
    name: "memcached",
    description: "persistent memcached: each SET one undo-logged tx under cache_lock (slab alloc/evict, hash link, LRU), dfence at commit",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "items",
        default: "2048",
        unit: "items",
        range: int(2, 1 << 20),
        help: "slab capacity (items); when full, SET evicts the LRU tail",
    },
    ParamSpec { name: "keys", default: "4096", unit: "keys", range: int(1, 1 << 30), help: "key space of the clients" },
    ParamSpec { name: "buckets", default: "1024", unit: "buckets", range: int(1, 1 << 24), help: "hash table size" },
    percent("set_pct", "90", "share of SETs (the rest are GETs)"),
    compute("200", "non-memory work per request (protocol parsing, hashing)"),
];

// Item: {h_next, lru_prev, lru_next, key, value}.
const H_NEXT: u64 = 0;
const LRU_PREV: u64 = 8;
const LRU_NEXT: u64 = 16;
const KEY: u64 = 24;
// Meta words.
const FREE_HEAD: u64 = 0;
const LRU_HEAD: u64 = 8;
const LRU_TAIL: u64 = 16;
const COUNT: u64 = 24;

struct Layout {
    meta: u64,
    buckets: u64,
    nbuckets: u64,
    slab: u64,
    free_next: u64,
    items: u64,
    isize: u64,
    ks: usize,
    vs: usize,
}

impl Layout {
    fn item(&self, i: u64) -> u64 {
        self.slab + i * self.isize
    }
    fn index(&self, it: u64) -> Option<u64> {
        let off = it.checked_sub(self.slab)?;
        (off % self.isize == 0 && off / self.isize < self.items).then_some(off / self.isize)
    }
    fn free_next(&self, it: u64) -> u64 {
        self.free_next + self.index(it).unwrap_or(0) * 8
    }
    fn bucket(&self, key: u64) -> u64 {
        self.buckets + (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) % self.nbuckets * 8
    }
    fn val(&self, it: u64) -> u64 {
        it + KEY + r8(self.ks)
    }
    /// Walks `key`'s chain: (address of the link pointing to the item, item), or None.
    fn find(&self, c: &mut Ctx<'_>, key: u64) -> Option<(u64, u64)> {
        let mut link = self.bucket(key);
        loop {
            let it = c.load_u64(link);
            if it == 0 {
                return None;
            }
            if c.load_u64(it + KEY) == key + 1 {
                return Some((link, it));
            }
            link = it + H_NEXT;
        }
    }
}

/// What a committed operation did to a key (for the recovery's per-key check).
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyEvent {
    Set(u64),
    Gone,
}

fn generate(p: &Params) -> Generated {
    let nitems = p.get("items").max(2);
    let nkeys = p.get("keys").max(1);
    let nbuckets = p.get("buckets").max(1);
    let set_pct = p.get("set_pct").min(100);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let isize = KEY + r8(p.key_size) + r8(p.value_size);
    let l = Layout {
        meta: g.heap.alloc_pm(64, 64),
        buckets: g.heap.alloc_pm(nbuckets * 8, 64),
        nbuckets,
        slab: g.heap.alloc_pm(nitems * isize, 4096),
        free_next: g.heap.alloc_pm(nitems * 8, 64),
        items: nitems,
        isize,
        ks: p.key_size,
        vs: p.value_size,
    };
    let mut undo = UndoTxs::new(&mut g.heap, p.threads);
    let cache_lock = g.heap.alloc_dram(64, 64);
    let mut keyh: FxHashMap<u64, Vec<(u32, KeyEvent)>> = FxHashMap::default();
    {
        // Slab initialisation: every item on the free list.
        let mut c = g.ctx(0);
        let mut words = vec![l.meta + FREE_HEAD];
        for i in 0..nitems {
            let next = if i + 1 < nitems { l.item(i + 1) } else { 0 };
            c.store_u64(l.free_next + i * 8, next);
            words.push(l.free_next + i * 8);
        }
        c.store_u64(l.meta + FREE_HEAD, l.item(0));
        undo.setup_done(&mut c, words);
    }
    let (mut txid, mut tag) = (0u64, 0u64);
    let mix = Mix { primary_pct: set_pct, labels: ["set", "get"], keys: nkeys, compute };
    mix.run(&mut g, p, |c, Request { primary: set, key, .. }| {
        let m = l.meta;
        c.lock(cache_lock);
        if !set {
            let v = l.find(c, key).map(|(_, it)| c.load_bytes(l.val(it), l.vs));
            let t = v.map(|v| u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]))).unwrap_or(0);
            c.end("get", OpRecord { op: OP_READ, key, value: t, ..Default::default() });
            c.unlock(cache_lock);
            return;
        }
        txid += 1;
        tag += 1;
        let idx = c.g.log.ops.len() as u32;
        let mut tx = undo.begin(c, txid, true, false);
        let mut count = c.load_u64(m + COUNT);
        // item_alloc: slab free list, else evict the LRU tail.
        let free = c.load_u64(m + FREE_HEAD);
        let it = if free != 0 {
            let nx = c.load_u64(l.free_next(free));
            tx.write_u64(c, m + FREE_HEAD, nx);
            tx.fresh(free, l.isize);
            free
        } else {
            let t = c.load_u64(m + LRU_TAIL);
            let ek = c.load_u64(t + KEY) - 1;
            if let Some((link, _)) = l.find(c, ek) {
                let nx = c.load_u64(t + H_NEXT);
                tx.write_u64(c, link, nx);
            }
            let prev = c.load_u64(t + LRU_PREV);
            tx.write_u64(c, if prev == 0 { m + LRU_HEAD } else { prev + LRU_NEXT }, 0);
            tx.write_u64(c, m + LRU_TAIL, prev);
            count -= 1;
            tx.add(c, t, l.isize); // reachable before the tx: snapshot before reuse
            keyh.entry(ek).or_default().push((idx, KeyEvent::Gone));
            t
        };
        // item_replace: unlink and free the key's old item.
        if let Some((link, old)) = l.find(c, key) {
            let nx = c.load_u64(old + H_NEXT);
            tx.write_u64(c, link, nx);
            let (pv, nx) = (c.load_u64(old + LRU_PREV), c.load_u64(old + LRU_NEXT));
            tx.write_u64(c, if pv == 0 { m + LRU_HEAD } else { pv + LRU_NEXT }, nx);
            tx.write_u64(c, if nx == 0 { m + LRU_TAIL } else { nx + LRU_PREV }, pv);
            let fh = c.load_u64(m + FREE_HEAD);
            tx.write_u64(c, l.free_next(old), fh);
            tx.write_u64(c, m + FREE_HEAD, old);
            count -= 1;
        }
        // Fill the item, then link it at the bucket head and the LRU head.
        let (bh, lh) = (c.load_u64(l.bucket(key)), c.load_u64(m + LRU_HEAD));
        let mut body = Vec::with_capacity(l.isize as usize);
        for w in [bh, 0, lh] {
            body.extend_from_slice(&w.to_le_bytes());
        }
        body.extend_from_slice(&key_bytes(key, l.ks));
        body.resize((KEY + r8(l.ks)) as usize, 0);
        body.extend_from_slice(&value_bytes(tag, l.vs));
        body.resize(l.isize as usize, 0);
        tx.write(c, it, &body);
        tx.write_u64(c, l.bucket(key), it);
        tx.write_u64(c, if lh == 0 { m + LRU_TAIL } else { lh + LRU_PREV }, it);
        tx.write_u64(c, m + LRU_HEAD, it);
        tx.write_u64(c, m + COUNT, count + 1);
        undo.commit(c, tx);
        keyh.entry(key).or_default().push((idx, KeyEvent::Set(tag)));
        c.end("set", OpRecord { op: 1, key, value: tag, ..Default::default() });
        c.op_dfence();
        c.unlock(cache_lock);
    });
    let trace = undo.finish(g);
    Generated { trace, recovery: Box::new(UndoRecovery { undo, structure: McRecovery { l, keyh } }) }
}

struct McRecovery {
    l: Layout,
    keyh: FxHashMap<u64, Vec<(u32, KeyEvent)>>,
}

fn fail<T>(m: String) -> Result<T, RecoveryError> {
    Err(RecoveryError::new(m))
}

impl McRecovery {
    /// Slab, hash and LRU invariants; returns key -> value tag of every linked item.
    fn structure(&self, img: &MemImage) -> Result<FxHashMap<u64, u64>, RecoveryError> {
        let l = &self.l;
        let m = l.meta;
        let mut free = FxHashSet::default();
        let mut it = img.read_u64(m + FREE_HEAD);
        while it != 0 {
            if l.index(it).is_none() || !free.insert(it) {
                return fail(format!("slab free list broken at {it:#x}"));
            }
            it = img.read_u64(l.free_next(it));
        }
        let mut linked: FxHashMap<u64, u64> = FxHashMap::default(); // item -> key
        let mut kv: FxHashMap<u64, u64> = FxHashMap::default();
        for b in 0..l.nbuckets {
            let mut it = img.read_u64(l.buckets + b * 8);
            while it != 0 {
                if l.index(it).is_none() || free.contains(&it) || linked.contains_key(&it) {
                    return fail(format!("bucket {b}: chain reaches {it:#x}, not a live item (or a cycle)"));
                }
                let key = key_of(&img.read_bytes(it + KEY, l.ks));
                let val = value_of(&img.read_bytes(l.val(it), l.vs));
                let (Ok(Some(k)), Ok(Some(t))) = (key, val) else {
                    return fail(format!("item {it:#x} is not well formed"));
                };
                if l.bucket(k) != l.buckets + b * 8 || kv.insert(k, t).is_some() {
                    return fail(format!("key {k} is in the wrong bucket or linked twice"));
                }
                linked.insert(it, k);
                it = img.read_u64(it + H_NEXT);
            }
        }
        if linked.len() + free.len() != l.items as usize || img.read_u64(m + COUNT) != linked.len() as u64 {
            return fail(format!(
                "slab accounting: {} linked + {} free of {} items, count word {}",
                linked.len(),
                free.len(),
                l.items,
                img.read_u64(m + COUNT)
            ));
        }
        let (mut prev, mut it, mut n) = (0u64, img.read_u64(m + LRU_HEAD), 0usize);
        while it != 0 {
            if !linked.contains_key(&it) || img.read_u64(it + LRU_PREV) != prev || n > linked.len() {
                return fail(format!("LRU list broken at {it:#x}"));
            }
            (prev, it, n) = (it, img.read_u64(it + LRU_NEXT), n + 1);
        }
        if n != linked.len() || img.read_u64(m + LRU_TAIL) != prev {
            return fail(format!("LRU holds {n} items, hash {}; or tail wrong", linked.len()));
        }
        Ok(kv)
    }
}

impl Structure for McRecovery {
    fn check(&self, img: &MemImage, undo: &UndoTxs, dfence_done: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
        let kv = self.structure(img)?;
        let durable = |op: u32| undo.log.ops.get(op as usize).and_then(|o| o.durable_at).is_some_and(dfence_done);
        let mut keys: Vec<_> = self.keyh.iter().collect();
        keys.sort_unstable_by_key(|e| *e.0);
        for (&k, events) in keys {
            let state = kv.get(&k).copied();
            let pos = match state {
                Some(t) => events.iter().rposition(|&(_, e)| e == KeyEvent::Set(t)),
                None => events.iter().rposition(|&(_, e)| e == KeyEvent::Gone),
            };
            if let (Some(t), None) = (state, pos) {
                return fail(format!("key {k} holds value {t}, never SET for it"));
            }
            if let Some(need) = events.iter().rposition(|&(op, _)| durable(op)) {
                if pos.is_none_or(|p| p < need) {
                    return fail(format!("key {k}: a durable SET/evict (op #{}) is not reflected", events[need].0));
                }
            }
        }
        for k in kv.keys() {
            if !self.keyh.contains_key(k) {
                return fail(format!("key {k} is present but was never SET"));
            }
        }
        Ok(kv.len() as u64)
    }
}
