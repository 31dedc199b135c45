//! `atlas-skiplist`: a persistent skip list (ordered map) made failure-atomic by Atlas.
//!
//! Pattern (Atlas, OOPSLA'14, its skip-list example): one lock; the search walks the levels from
//! the head (loads of next pointers and keys). Insert of a new key fills a freshly allocated node
//! (unlogged: allocated inside the FASE) and links it at each of its levels with a logged store of
//! the predecessor's `next[i]` (undo record + `ofence` before each); insert of a present key
//! updates its value in place (logged). Delete unlinks the node at each level (logged stores).
//! Lock acquire/release are logged; at the unlock the data is ordered before the log truncation
//! and made durable (`dfence`). Levels are geometric (p = 1/2) up to `max_level`.
//!
//! Simplifications: unlinked nodes are not reused. Recovery: roll back the active FASE, then walk
//! level 0 (allocated nodes only, keys strictly increasing, well-formed elements), check each
//! upper level is an ordered sub-list of nodes tall enough; per-word history check.
//!
//! Built on [`crate::blocks::undo_tx`] and [`crate::blocks::requests`] (the insert/delete mix).

use crate::blocks::requests::{Mix, Request};
use crate::blocks::undo_tx::{Structure, UndoRecovery, UndoTxs};
use crate::ctx::{Ctx, Gen};
use crate::params::{compute, int, percent, ParamSpec, Params};
use crate::recovery::{OpRecord, RecoveryError};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::{key_bytes, key_of, r8, value_bytes, value_of, OP_READ};
use pmsim_trace::MemImage;
use rustc_hash::{FxHashMap, FxHashSet};

pub static ATLAS_SKIPLIST: WorkloadSpec = WorkloadSpec {
    name: "atlas-skiplist",
    description:
        "Atlas persistent skip list: insert/delete in one lock-delimited FASE, undo record + ofence before every store",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "keys",
        default: "4096",
        unit: "keys",
        range: int(2, 1 << 21),
        help: "key space; half of it is inserted before the run",
    },
    percent("insert_pct", "50", "share of inserts (the rest are deletes)"),
    ParamSpec { name: "max_level", default: "12", unit: "levels", range: int(1, 32), help: "maximum node height" },
    compute("100", "non-memory work per operation (outside the lock)"),
];

/// Node: {level, key, value, next[level]}.
struct Layout {
    head: u64,
    ks: usize,
    vs: usize,
    max: u64,
}

impl Layout {
    fn next_at(&self, n: u64, i: u64) -> u64 {
        n + 8 + r8(self.ks) + r8(self.vs) + 8 * i
    }
    fn size(&self, level: u64) -> u64 {
        self.next_at(0, level)
    }
    fn body(&self, level: u64, key: u64, tag: u64) -> Vec<u8> {
        let mut b = level.to_le_bytes().to_vec();
        b.extend_from_slice(&key_bytes(key, self.ks));
        b.resize(8 + r8(self.ks) as usize, 0);
        b.extend_from_slice(&value_bytes(tag, self.vs));
        b.resize(self.size(0) as usize, 0);
        b
    }
    /// Predecessors of `key` at every level (emits the search's loads); and the level-0 successor.
    fn search(&self, c: &mut Ctx<'_>, key: u64) -> (Vec<u64>, u64) {
        let mut preds = vec![self.head; self.max as usize];
        let mut cur = self.head;
        let mut succ = 0;
        for i in (0..self.max).rev() {
            loop {
                let nx = c.load_u64(self.next_at(cur, i));
                if nx != 0 && c.load_u64(nx + 8) < key + 1 {
                    cur = nx;
                } else {
                    succ = nx;
                    break;
                }
            }
            preds[i as usize] = cur;
        }
        (preds, succ)
    }
}

fn level(c: &mut Ctx<'_>, max: u64) -> u64 {
    let mut l = 1;
    while l < max && c.rng().percent(50) {
        l += 1;
    }
    l
}

fn generate(p: &Params) -> Generated {
    let keys = p.get("keys").max(2);
    let ins_pct = p.get("insert_pct").min(100);
    let max = p.get("max_level").clamp(1, 32);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let mut l = Layout { head: 0, ks: p.key_size, vs: p.value_size, max };
    l.head = g.heap.alloc_pm(l.size(max), 64);
    let mut undo = UndoTxs::new(&mut g.heap, p.threads);
    let lock = g.heap.alloc_dram(64, 64);
    let mut nodes: FxHashMap<u64, u64> = FxHashMap::default(); // node -> level
    let mut tag = 0u64;
    {
        let mut c = g.ctx(0);
        let mut words = Vec::new();
        let mut last = vec![l.head; max as usize];
        c.store_u64(l.head, max);
        for k in (0..keys).filter(|k| k % 2 == 0) {
            let lv = level(&mut c, max);
            let n = c.alloc_pm(l.size(lv), 64);
            nodes.insert(n, lv);
            tag += 1;
            c.store(n, &l.body(lv, k, tag));
            for i in 0..lv {
                c.store_u64(l.next_at(last[i as usize], i), n);
                words.push(l.next_at(last[i as usize], i));
                last[i as usize] = n;
            }
            words.extend((0..l.size(lv) / 8).map(|w| n + w * 8));
        }
        words.push(l.head);
        undo.setup_done(&mut c, words);
    }
    let mut txid = 0u64;
    let mix = Mix { primary_pct: ins_pct, labels: ["insert", "delete"], keys, compute };
    mix.run(&mut g, p, |c, Request { primary: ins, key, label }| {
        txid += 1;
        let mut tx = undo.begin_fase(c, lock, txid);
        let (preds, succ) = l.search(c, key);
        let found = succ != 0 && c.load_u64(succ + 8) == key + 1;
        let mut rec = OpRecord { op: if ins { 0 } else { 2 }, key, ..Default::default() };
        if ins {
            tag += 1;
            rec.value = tag;
            if found {
                rec.op = 1;
                tx.write(c, succ + 8 + r8(l.ks), &value_bytes(tag, l.vs));
            } else {
                let lv = level(c, max);
                let n = c.alloc_pm(l.size(lv), 64);
                nodes.insert(n, lv);
                tx.fresh(n, l.size(lv));
                let mut body = l.body(lv, key, tag);
                for i in 0..lv {
                    let nx = c.load_u64(l.next_at(preds[i as usize], i));
                    body.extend_from_slice(&nx.to_le_bytes());
                }
                tx.write(c, n, &body);
                for i in 0..lv {
                    tx.write_u64(c, l.next_at(preds[i as usize], i), n);
                }
            }
        } else if found {
            let lv = c.load_u64(succ);
            for i in 0..lv {
                let nx = c.load_u64(l.next_at(succ, i));
                tx.write_u64(c, l.next_at(preds[i as usize], i), nx);
            }
        } else {
            rec.op = OP_READ;
        }
        undo.commit_fase(c, tx, lock);
        c.end(label, rec);
        c.op_dfence();
        c.unlock(lock);
    });
    let trace = undo.finish(g);
    Generated { trace, recovery: Box::new(UndoRecovery { undo, structure: SkipRecovery { l, nodes } }) }
}

struct SkipRecovery {
    l: Layout,
    nodes: FxHashMap<u64, u64>,
}

impl Structure for SkipRecovery {
    fn check(&self, img: &MemImage, _undo: &UndoTxs, _dfence_done: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
        let l = &self.l;
        let err = |m: String| Err(RecoveryError::new(m));
        // Level 0: every node allocated, well formed, keys strictly increasing.
        let mut level0: FxHashSet<u64> = FxHashSet::default();
        let (mut cur, mut last_key) = (l.head, None::<u64>);
        loop {
            let nx = img.read_u64(l.next_at(cur, 0));
            if nx == 0 {
                break;
            }
            let Some(&lv) = self.nodes.get(&nx) else {
                return err(format!("level 0 links to {nx:#x}, not a node"));
            };
            if img.read_u64(nx) != lv {
                return err(format!("node {nx:#x} has level {} (allocated with {lv})", img.read_u64(nx)));
            }
            let key = key_of(&img.read_bytes(nx + 8, l.ks));
            let val = value_of(&img.read_bytes(nx + 8 + r8(l.ks), l.vs));
            let (Ok(Some(k)), Ok(Some(_))) = (key, val) else {
                return err(format!("node {nx:#x} holds no well-formed element"));
            };
            if last_key.is_some_and(|p| p >= k) {
                return err(format!("level 0 not sorted at key {k}"));
            }
            if !level0.insert(nx) {
                return err(format!("level 0 has a cycle at {nx:#x}"));
            }
            last_key = Some(k);
            cur = nx;
        }
        // Upper levels: ordered sub-lists of level 0 through nodes at least that tall.
        for i in 1..l.max {
            let (mut cur, mut last) = (l.head, 0u64);
            let mut steps = 0usize;
            loop {
                let nx = img.read_u64(l.next_at(cur, i));
                if nx == 0 {
                    break;
                }
                let k = img.read_u64(nx + 8);
                if !level0.contains(&nx) || self.nodes.get(&nx).is_none_or(|&lv| lv <= i) || k <= last {
                    return err(format!(
                        "level {i} links to {nx:#x}, which is not a later level-0 node of height > {i}"
                    ));
                }
                steps += 1;
                if steps > level0.len() {
                    return err(format!("level {i} is longer than level 0"));
                }
                (cur, last) = (nx, k);
            }
        }
        Ok(level0.len() as u64)
    }
}
