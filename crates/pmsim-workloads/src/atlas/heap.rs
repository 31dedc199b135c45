//! `atlas-heap`: a persistent binary min-heap (priority queue) made failure-atomic by Atlas.
//!
//! Pattern (Atlas, OOPSLA'14; its data-structure examples): one lock protects the heap; the
//! critical section is a FASE, so every PM store inside it is preceded by an undo record that is
//! persisted first (store + `ofence`), and the lock acquire/release are logged too. Insert writes
//! the new element at the end and sifts it up (each swap = two logged element stores), then the
//! size word; delete-min moves the last element to the root, stores the size and sifts down. At
//! the unlock the data is ordered before the log truncation and made durable (`dfence`).
//! Elements are `key_size + value_size` bytes; the priority is the key.
//!
//! Simplifications: the heap array is preallocated (capacity = initial + all inserts); Atlas's
//! asynchronous log pruning is done at the unlock. Recovery: roll back the active FASE, then check
//! size ≤ capacity, every element well formed and unique, the heap property, and the per-word
//! history (nothing invented, nothing durable lost).
//!
//! Built on [`crate::blocks::undo_tx`] (FASE logging, history, rollback) and
//! [`crate::blocks::requests`] (the insert/delete-min mix).

use crate::blocks::requests::{Mix, Request};
use crate::blocks::undo_tx::{Structure, UndoRecovery, UndoTxs};
use crate::ctx::{Ctx, Gen};
use crate::params::{compute, int, percent, ParamSpec, Params};
use crate::recovery::{OpRecord, RecoveryError};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::{key_bytes, key_of, r8, value_bytes, value_of, OP_READ};
use pmsim_trace::MemImage;

pub static ATLAS_HEAP: WorkloadSpec = WorkloadSpec {
    name: "atlas-heap",
    description: "Atlas persistent binary heap: insert/delete-min in one lock-delimited FASE, undo record + ofence before every store",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "initial",
        default: "1024",
        unit: "elements",
        range: int(0, 1 << 20),
        help: "elements in the heap before the run",
    },
    percent("insert_pct", "50", "share of inserts (the rest are delete-min)"),
    compute("100", "non-memory work per operation (outside the lock)"),
];

struct Layout {
    hdr: u64,
    slots: u64,
    cap: u64,
    ks: usize,
    vs: usize,
    stride: u64,
}

impl Layout {
    fn slot(&self, i: u64) -> u64 {
        self.slots + i * self.stride
    }
    fn prio(&self, c: &mut Ctx<'_>, i: u64) -> u64 {
        c.load_u64(self.slot(i))
    }
}

fn elem(key: u64, tag: u64, l: &Layout) -> Vec<u8> {
    let mut e = key_bytes(key, l.ks);
    e.resize(r8(l.ks) as usize, 0);
    e.extend_from_slice(&value_bytes(tag, l.vs));
    e.resize(l.stride as usize, 0);
    e
}

fn generate(p: &Params) -> Generated {
    let initial = p.get("initial");
    let ins_pct = p.get("insert_pct").min(100);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let (ks, vs) = (p.key_size, p.value_size);
    let stride = r8(ks) + r8(vs);
    let cap = initial + p.ops * p.threads as u64 + 1;
    let hdr = g.heap.alloc_pm(64, 64);
    let slots = g.heap.alloc_pm(cap * stride, 64);
    let l = Layout { hdr, slots, cap, ks, vs, stride };
    let mut undo = UndoTxs::new(&mut g.heap, p.threads);
    let lock = g.heap.alloc_dram(64, 64);
    let mut tag = 0u64;
    // Setup: a sorted array is a valid min-heap.
    let mut keys: Vec<u64> = (0..initial).map(|_| g.rng.below(1 << 32)).collect();
    keys.sort_unstable();
    {
        let mut c = g.ctx(0);
        let mut words = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            tag += 1;
            c.store(l.slot(i as u64), &elem(k, tag, &l));
            words.extend((0..stride / 8).map(|w| l.slot(i as u64) + w * 8));
        }
        c.store_u64(hdr, initial);
        words.push(hdr);
        undo.setup_done(&mut c, words);
    }
    let mut txid = 0u64;
    let mix = Mix { primary_pct: ins_pct, labels: ["insert", "delete-min"], keys: 1 << 32, compute };
    mix.run(&mut g, p, |c, Request { primary: insert, key, label }| {
        txid += 1;
        let mut tx = undo.begin_fase(c, lock, txid);
        let n = c.load_u64(hdr);
        let mut rec = OpRecord { op: if insert { 0 } else { 2 }, key, ..Default::default() };
        if insert {
            tag += 1;
            rec.value = tag;
            let mut i = n;
            tx.write(c, l.slot(i), &elem(key, tag, &l));
            while i > 0 {
                let parent = (i - 1) / 2;
                if l.prio(c, parent) <= key + 1 {
                    break;
                }
                let (a, b) = (c.load_bytes(l.slot(parent), stride as usize), c.load_bytes(l.slot(i), stride as usize));
                tx.write(c, l.slot(parent), &b);
                tx.write(c, l.slot(i), &a);
                i = parent;
            }
            tx.write_u64(c, hdr, n + 1);
        } else if n == 0 {
            rec.op = OP_READ;
        } else {
            rec.key = c.load_u64(l.slot(0));
            let last = c.load_bytes(l.slot(n - 1), stride as usize);
            tx.write_u64(c, hdr, n - 1);
            tx.write(c, l.slot(0), &last);
            let (m, mut i) = (n - 1, 0u64);
            loop {
                let (lc, rc) = (2 * i + 1, 2 * i + 2);
                let mut s = i;
                if lc < m && l.prio(c, lc) < l.prio(c, s) {
                    s = lc;
                }
                if rc < m && l.prio(c, rc) < l.prio(c, s) {
                    s = rc;
                }
                if s == i {
                    break;
                }
                let (a, b) = (c.load_bytes(l.slot(i), stride as usize), c.load_bytes(l.slot(s), stride as usize));
                tx.write(c, l.slot(i), &b);
                tx.write(c, l.slot(s), &a);
                i = s;
            }
        }
        undo.commit_fase(c, tx, lock);
        c.end(label, rec);
        c.op_dfence();
        c.unlock(lock);
    });
    let trace = undo.finish(g);
    Generated { trace, recovery: Box::new(UndoRecovery { undo, structure: HeapRecovery { l } }) }
}

struct HeapRecovery {
    l: Layout,
}

impl Structure for HeapRecovery {
    fn check(&self, img: &MemImage, _undo: &UndoTxs, _dfence_done: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
        let l = &self.l;
        let n = img.read_u64(l.hdr);
        if n > l.cap {
            return Err(RecoveryError::new(format!("heap size {n} exceeds capacity {}", l.cap)));
        }
        let mut tags = rustc_hash::FxHashSet::default();
        let mut prio = Vec::with_capacity(n as usize);
        for i in 0..n {
            let a = l.slot(i);
            let key = key_of(&img.read_bytes(a, l.ks)).ok().flatten();
            let val = value_of(&img.read_bytes(a + r8(l.ks), l.vs)).ok().flatten();
            let (Some(k), Some(v)) = (key, val) else {
                return Err(RecoveryError::new(format!("heap slot {i} (of {n}) holds no well-formed element")));
            };
            if !tags.insert(v) {
                return Err(RecoveryError::new(format!("element {v} appears twice in the heap")));
            }
            if i > 0 && prio[((i - 1) / 2) as usize] > k {
                return Err(RecoveryError::new(format!("heap property violated at slot {i}")));
            }
            prio.push(k);
        }
        Ok(n)
    }
}
