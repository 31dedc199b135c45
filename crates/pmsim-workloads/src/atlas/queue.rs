//! `atlas-queue`: a persistent linked FIFO queue made failure-atomic by Atlas.
//!
//! Pattern (Atlas, OOPSLA'14, its queue example): a singly linked list with a sentinel, header
//! {head, tail}, one lock (the "one lock" variant). Enqueue allocates and fills a node (stores to
//! memory allocated inside the FASE need no undo record, as in Atlas), then links it with two
//! logged stores (`tail->next`, `tail`), each preceded by its persisted undo record. Dequeue reads
//! the first node's element and advances `head` (one logged store; the old sentinel is dropped).
//! Lock acquire/release are logged; at the unlock the data is ordered before the log truncation
//! and made durable (`dfence`).
//!
//! Simplifications: nodes are never reused (bump allocation). Recovery: roll back the active
//! FASE, walk from `head` (only allocated nodes, no cycle), check `tail` is the last node, every
//! element well formed and the elements in enqueue order; per-word history check.
//!
//! Built on [`crate::blocks::undo_tx`] and [`crate::blocks::requests`] (the enqueue/dequeue mix).

use crate::blocks::requests::{Mix, Request};
use crate::blocks::undo_tx::{Structure, UndoRecovery, UndoTxs};
use crate::ctx::Gen;
use crate::params::{compute, int, percent, ParamSpec, Params};
use crate::recovery::{OpRecord, RecoveryError};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::{key_bytes, key_of, r8, value_bytes, value_of, OP_READ};
use pmsim_trace::MemImage;
use rustc_hash::FxHashSet;

pub static ATLAS_QUEUE: WorkloadSpec = WorkloadSpec {
    name: "atlas-queue",
    description: "Atlas persistent linked queue: enqueue/dequeue in one lock-delimited FASE, undo record + ofence before every store",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "initial",
        default: "256",
        unit: "elements",
        range: int(0, 1 << 20),
        help: "elements in the queue before the run",
    },
    percent("enqueue_pct", "50", "share of enqueues (the rest are dequeues)"),
    compute("100", "non-memory work per operation (outside the lock)"),
];

/// Node: {next, key, value}.
struct Layout {
    hdr: u64,
    ks: usize,
    vs: usize,
    size: u64,
}

impl Layout {
    fn node(&self, key: u64, tag: u64) -> Vec<u8> {
        let mut n = vec![0u8; 8];
        n.extend_from_slice(&key_bytes(key, self.ks));
        n.resize(8 + r8(self.ks) as usize, 0);
        n.extend_from_slice(&value_bytes(tag, self.vs));
        n.resize(self.size as usize, 0);
        n
    }
}

fn generate(p: &Params) -> Generated {
    let initial = p.get("initial");
    let enq_pct = p.get("enqueue_pct").min(100);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let l = Layout {
        hdr: g.heap.alloc_pm(64, 64),
        ks: p.key_size,
        vs: p.value_size,
        size: 8 + r8(p.key_size) + r8(p.value_size),
    };
    let mut undo = UndoTxs::new(&mut g.heap, p.threads);
    let lock = g.heap.alloc_dram(64, 64);
    let mut nodes: FxHashSet<u64> = FxHashSet::default();
    let mut tag = 0u64;
    {
        let mut c = g.ctx(0);
        let sentinel = c.alloc_pm(l.size, 64);
        nodes.insert(sentinel);
        let mut words = vec![l.hdr, l.hdr + 8];
        c.store(sentinel, &vec![0u8; l.size as usize]);
        let mut prev = sentinel;
        for _ in 0..initial {
            let n = c.alloc_pm(l.size, 64);
            nodes.insert(n);
            tag += 1;
            let key = c.rng().below(1 << 32);
            c.store(n, &l.node(key, tag));
            c.store_u64(prev, n);
            words.extend((0..l.size / 8).map(|w| n + w * 8));
            prev = n;
        }
        words.extend((0..l.size / 8).map(|w| sentinel + w * 8));
        c.store_u64(l.hdr, sentinel);
        c.store_u64(l.hdr + 8, prev);
        undo.setup_done(&mut c, words);
    }
    let mut txid = 0u64;
    let mix = Mix { primary_pct: enq_pct, labels: ["enqueue", "dequeue"], keys: 1 << 32, compute };
    mix.run(&mut g, p, |c, Request { primary: enq, key, label }| {
        txid += 1;
        let mut tx = undo.begin_fase(c, lock, txid);
        let mut rec = OpRecord { op: if enq { 0 } else { 2 }, key, ..Default::default() };
        if enq {
            let n = c.alloc_pm(l.size, 64);
            nodes.insert(n);
            tag += 1;
            rec.value = tag;
            tx.fresh(n, l.size);
            tx.write(c, n, &l.node(key, tag));
            let tail = c.load_u64(l.hdr + 8);
            tx.write_u64(c, tail, n);
            tx.write_u64(c, l.hdr + 8, n);
        } else {
            let head = c.load_u64(l.hdr);
            let first = c.load_u64(head);
            if first == 0 {
                rec.op = OP_READ;
            } else {
                let v = c.load_bytes(first + 8 + r8(l.ks), l.vs);
                rec.value = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
                rec.key = c.load_u64(first + 8);
                tx.write_u64(c, l.hdr, first);
            }
        }
        undo.commit_fase(c, tx, lock);
        c.end(label, rec);
        c.op_dfence();
        c.unlock(lock);
    });
    let trace = undo.finish(g);
    Generated { trace, recovery: Box::new(UndoRecovery { undo, structure: QueueRecovery { l, nodes } }) }
}

struct QueueRecovery {
    l: Layout,
    nodes: FxHashSet<u64>,
}

impl Structure for QueueRecovery {
    fn check(&self, img: &MemImage, _undo: &UndoTxs, _dfence_done: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
        let l = &self.l;
        let (head, tail) = (img.read_u64(l.hdr), img.read_u64(l.hdr + 8));
        let mut items = 0u64;
        if head != 0 || tail != 0 {
            if !self.nodes.contains(&head) || !self.nodes.contains(&tail) {
                return Err(RecoveryError::new(format!("queue head {head:#x} / tail {tail:#x} is not a node")));
            }
            let (mut cur, mut last_tag) = (head, 0u64);
            let mut seen = FxHashSet::default();
            loop {
                if !seen.insert(cur) {
                    return Err(RecoveryError::new(format!("queue has a cycle at {cur:#x}")));
                }
                let next = img.read_u64(cur);
                if next == 0 {
                    break;
                }
                if !self.nodes.contains(&next) {
                    return Err(RecoveryError::new(format!("node {cur:#x} links to {next:#x}, which is not a node")));
                }
                let key = key_of(&img.read_bytes(next + 8, l.ks));
                let val = value_of(&img.read_bytes(next + 8 + r8(l.ks), l.vs));
                let (Ok(Some(_)), Ok(Some(t))) = (key, val) else {
                    return Err(RecoveryError::new(format!("queued node {next:#x} holds no well-formed element")));
                };
                if t <= last_tag {
                    return Err(RecoveryError::new(format!("element {t} queued after {last_tag}: FIFO order broken")));
                }
                last_tag = t;
                items += 1;
                cur = next;
            }
            if cur != tail {
                return Err(RecoveryError::new(format!("tail {tail:#x} is not the last node {cur:#x}")));
            }
        }
        Ok(items)
    }
}
