//! `echo`: the Echo key-value store (WHISPER's `kv-echo`): clients buffer updates in volatile
//! local stores and a master merges each batch into a persistent, versioned hash table under a
//! new snapshot number.
//!
//! Pattern (github.com/snalli/echo, `kp_local_commit` → `kp_commit`: append the commit record to
//! the persistent commit log, merge each key/value into the master's hash table as a new version
//! tagged with the snapshot, then mark the commit done): a client's PUT only stores into its
//! DRAM local store; every `batch` PUTs it hands the batch to the master with a `release` of its
//! mailbox counter. Thread 0 is the master (with one thread, the client merges its own batches):
//! each of its operations `acquire`s every mailbox and merges the new batches: the commit record
//! {snapshot, client, count} is written and persisted (`ofence`); per pair a version node
//! {snapshot, prev, value} (and a hash entry {key, next, latest} for a new key) is written and
//! persisted (`ofence`) before the pointer that links it (entry `latest` or bucket head); then
//! the data is ordered (`ofence`) before the committed-snapshot word is stored, and `dfence`.
//!
//! Simplifications: no garbage collection of old versions; clients do not wait for the master
//! (asynchronous commit), so a PUT is durable once the master's commit `dfence` that merged it has
//! completed; at the end each client hands over its partial batch and the master drains.
//! Recovery (Echo's): versions newer than the committed snapshot are discarded; then check the
//! table (chains, keys in their bucket and unique, versions ordered) and that every key shows a
//! value PUT for it, at least as new as its last PUT whose commit dfence completed.

use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::{compute, int, ParamSpec, Params};
use crate::recovery::{OpRecord, Recovery, RecoveryError, RecoveryReport};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::{key_bytes, key_of, r8, value_bytes, value_of, OP_READ};
use pmsim_trace::MemImage;
use rustc_hash::{FxHashMap, FxHashSet};

pub static ECHO: WorkloadSpec = WorkloadSpec {
    name: "echo",
    description: "Echo KV store: clients batch PUTs in DRAM, hand them over by release; master persists versioned entries + snapshot, ofence per pair, dfence per batch",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec { name: "keys", default: "4096", unit: "keys", range: int(1, 1 << 30), help: "key space of the clients" },
    ParamSpec {
        name: "buckets",
        default: "1024",
        unit: "buckets",
        range: int(1, 1 << 24),
        help: "master hash table size",
    },
    ParamSpec {
        name: "batch",
        default: "8",
        unit: "PUTs",
        range: int(1, 1 << 16),
        help: "PUTs a client buffers locally before handing them to the master",
    },
    compute("150", "non-memory work per PUT (request generation, local hashing)"),
    ParamSpec {
        name: "poll",
        default: "100",
        unit: "instructions",
        range: int(0, 1_000_000),
        help: "master's non-memory work per poll",
    },
];

struct Layout {
    hdr: u64,
    buckets: u64,
    nbuckets: u64,
    ks: usize,
    vs: usize,
}

impl Layout {
    fn bucket(&self, key: u64) -> u64 {
        self.buckets + (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) % self.nbuckets * 8
    }
    fn e_next(&self, e: u64) -> u64 {
        e + r8(self.ks)
    }
    fn e_latest(&self, e: u64) -> u64 {
        e + r8(self.ks) + 8
    }
}

/// Generator state of the master store and the mailboxes.
struct Master {
    l: Layout,
    entries: FxHashSet<u64>,
    nodes: FxHashSet<u64>,
    /// key -> (value tag, snapshot, commit dfence gid), in merge order.
    keyh: FxHashMap<u64, Vec<(u64, u64, u64)>>,
    /// Per client: published batches of (key, tag).
    batches: Vec<Vec<Vec<(u64, u64)>>>,
    consumed: Vec<usize>,
    mbox: u64,
    /// Per client: its volatile local store (reused batch after batch).
    local: Vec<u64>,
}

impl Master {
    fn merge(&mut self, c: &mut Ctx<'_>, client: usize, batch: &[(u64, u64)]) {
        let l = &self.l;
        let s = c.load_u64(l.hdr) + 1;
        let rec = c.alloc_pm(24, 64);
        c.store(rec, &[s, client as u64, batch.len() as u64].iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<_>>());
        c.ofence();
        for &(key, tag) in batch {
            let b = l.bucket(key);
            let mut e = c.load_u64(b);
            while e != 0 && c.load_u64(e) != key + 1 {
                e = c.load_u64(l.e_next(e));
            }
            let node = c.alloc_pm(16 + r8(l.vs), 64);
            self.nodes.insert(node);
            let prev = if e != 0 { c.load_u64(l.e_latest(e)) } else { 0 };
            let mut body: Vec<u8> = [s, prev].iter().flat_map(|w| w.to_le_bytes()).collect();
            body.extend_from_slice(&value_bytes(tag, l.vs));
            c.store(node, &body);
            if e == 0 {
                let ne = c.alloc_pm(r8(l.ks) + 16, 64);
                self.entries.insert(ne);
                let mut eb = key_bytes(key, l.ks);
                eb.resize(r8(l.ks) as usize, 0);
                let head = c.load_u64(b);
                eb.extend_from_slice(&head.to_le_bytes());
                eb.extend_from_slice(&node.to_le_bytes());
                c.store(ne, &eb);
                c.ofence();
                c.store_u64(b, ne);
            } else {
                c.ofence();
                c.store_u64(l.e_latest(e), node);
            }
        }
        c.ofence();
        c.store_u64(l.hdr, s);
        let gid = c.dfence();
        for &(key, tag) in batch {
            self.keyh.entry(key).or_default().push((tag, s, gid));
        }
    }

    /// One master poll: acquire every mailbox, merge what is new. Returns batches merged.
    fn poll(&mut self, c: &mut Ctx<'_>, clients: &[usize]) -> u64 {
        let mut merged = 0;
        for &cl in clients {
            let published = c.acquire(self.mbox + cl as u64 * 64) as usize;
            while self.consumed[cl] < published {
                let batch = std::mem::take(&mut self.batches[cl][self.consumed[cl]]);
                // Read the batch out of the client's local store.
                c.load_bytes(self.local[cl], batch.len() * (r8(self.l.ks) + r8(self.l.vs)) as usize);
                self.merge(c, cl, &batch);
                self.consumed[cl] += 1;
                merged += 1;
            }
        }
        merged
    }
}

fn generate(p: &Params) -> Generated {
    let keys = p.get("keys").max(1);
    let batch = p.get("batch").max(1) as usize;
    let (compute, poll) = (p.get("compute"), p.get("poll"));
    let mut g = Gen::new(p);
    let nbuckets = p.get("buckets").max(1);
    let l = Layout {
        hdr: g.heap.alloc_pm(64, 64),
        buckets: g.heap.alloc_pm(nbuckets * 8, 64),
        nbuckets,
        ks: p.key_size,
        vs: p.value_size,
    };
    let mbox = g.heap.alloc_dram(64 * p.threads as u64, 64);
    let pair = r8(p.key_size) + r8(p.value_size);
    let local_stores: Vec<u64> = (0..p.threads).map(|_| g.heap.alloc_dram(batch as u64 * pair, 64)).collect();
    let clients: Vec<usize> = if p.threads == 1 { vec![0] } else { (1..p.threads).collect() };
    let mut m = Master {
        l,
        entries: FxHashSet::default(),
        nodes: FxHashSet::default(),
        keyh: FxHashMap::default(),
        batches: vec![Vec::new(); p.threads],
        consumed: vec![0; p.threads],
        mbox,
        local: local_stores,
    };
    let mut local: Vec<Vec<(u64, u64)>> = vec![Vec::new(); p.threads];
    let mut tag = 0u64;
    let publish = |c: &mut Ctx<'_>, m: &mut Master, local: &mut Vec<(u64, u64)>| {
        let t = c.thread;
        m.batches[t].push(std::mem::take(local));
        c.release_value(m.mbox + t as u64 * 64, m.batches[t].len() as u64);
    };
    Interleaver::run(&mut g, p.threads, p.ops, |c, _| {
        if p.threads > 1 && c.thread == 0 {
            c.begin("commit");
            c.compute(poll);
            let merged = m.poll(c, &clients);
            let op = if merged > 0 { 2 } else { OP_READ };
            c.end("commit", OpRecord { op, key: merged, ..Default::default() });
            return;
        }
        let key = c.rng().below(keys);
        tag += 1;
        c.begin("put");
        c.compute(compute);
        let t = c.thread;
        let slot = m.local[t] + local[t].len() as u64 * pair;
        let mut kv = key_bytes(key, m.l.ks);
        kv.resize(r8(m.l.ks) as usize, 0);
        kv.extend_from_slice(&value_bytes(tag, m.l.vs));
        c.store(slot, &kv);
        local[t].push((key, tag));
        if local[t].len() >= batch {
            publish(c, &mut m, &mut local[t]);
            if p.threads == 1 {
                m.poll(c, &clients);
            }
        }
        c.end("put", OpRecord { op: 1, key, value: tag, ..Default::default() });
    });
    // Shutdown: clients hand over partial batches, the master drains everything.
    for &cl in &clients {
        if !local[cl].is_empty() {
            publish(&mut g.ctx(cl), &mut m, &mut local[cl]);
        }
    }
    {
        let mut c = g.ctx(0);
        c.begin("commit");
        let merged = m.poll(&mut c, &clients);
        c.end("commit", OpRecord { op: if merged > 0 { 2 } else { OP_READ }, key: merged, ..Default::default() });
    }
    let (trace, _log) = g.finish();
    let Master { l, entries, nodes, keyh, .. } = m;
    Generated { trace, recovery: Box::new(EchoRecovery { l, entries, nodes, keyh }) }
}

struct EchoRecovery {
    l: Layout,
    entries: FxHashSet<u64>,
    nodes: FxHashSet<u64>,
    keyh: FxHashMap<u64, Vec<(u64, u64, u64)>>,
}

fn fail<T>(m: String) -> Result<T, RecoveryError> {
    Err(RecoveryError::new(m))
}

impl Recovery for EchoRecovery {
    fn check(&self, img: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError> {
        let l = &self.l;
        let committed = img.read_u64(l.hdr);
        let mut visible: FxHashMap<u64, u64> = FxHashMap::default(); // key -> tag
        let mut seen = FxHashSet::default();
        for b in 0..l.nbuckets {
            let mut e = img.read_u64(l.buckets + b * 8);
            while e != 0 {
                if !self.entries.contains(&e) || !seen.insert(e) {
                    return fail(format!("bucket {b} reaches {e:#x}: not an entry, or a cycle"));
                }
                let Ok(Some(k)) = key_of(&img.read_bytes(e, l.ks)) else {
                    return fail(format!("entry {e:#x}: malformed key"));
                };
                if l.bucket(k) != l.buckets + b * 8 {
                    return fail(format!("key {k} is in bucket {b}, not its own"));
                }
                // Discard versions newer than the committed snapshot (Echo's recovery).
                let (mut v, mut last_snap, mut steps) = (img.read_u64(l.e_latest(e)), u64::MAX, 0);
                while v != 0 {
                    let snap = img.read_u64(v);
                    if !self.nodes.contains(&v) || snap > last_snap || steps > self.nodes.len() {
                        return fail(format!("key {k}: version chain broken at {v:#x}"));
                    }
                    if snap <= committed {
                        let Ok(Some(t)) = value_of(&img.read_bytes(v + 16, l.vs)) else {
                            return fail(format!("key {k}: committed version {v:#x} holds a malformed value"));
                        };
                        if visible.insert(k, t).is_some() {
                            return fail(format!("key {k} has two entries"));
                        }
                        break;
                    }
                    (last_snap, v, steps) = (snap, img.read_u64(v + 8), steps + 1);
                }
                e = img.read_u64(l.e_next(e));
            }
        }
        let mut checked = 0;
        for (&k, &t) in &visible {
            let h = self.keyh.get(&k).map(|h| h.as_slice()).unwrap_or(&[]);
            if !h.iter().any(|&(x, s, _)| x == t && s <= committed) {
                return fail(format!("key {k} shows value {t}, never committed for it"));
            }
        }
        let mut keys: Vec<_> = self.keyh.iter().collect();
        keys.sort_unstable_by_key(|e| *e.0);
        for (&k, h) in keys {
            let Some(need) = h.iter().rposition(|&(_, _, gid)| dfence_done(gid)) else {
                continue;
            };
            let pos = visible.get(&k).and_then(|&t| h.iter().rposition(|&(x, _, _)| x == t));
            if pos.is_none_or(|p| p < need) {
                return fail(format!(
                    "key {k}: PUT of value {} was merged and its commit dfence completed, but it is lost",
                    h[need].0
                ));
            }
            checked += need as u64 + 1;
        }
        Ok(RecoveryReport { items: visible.len() as u64, durable_ops_checked: checked })
    }
}
