//! The driver the Table IV workloads share: per-thread structure instances, one undo-logged
//! transaction per operation ([`crate::atlas::undo_log::Tx`], PMDK-style: each range logged once
//! per transaction), the end-of-operation durability fence, the optional remote-style stream,
//! and recovery (roll back the active transactions, then every word's history).
//!
//! The remote stream (hybrid mode) runs on one extra thread, the last: every `remote_gap`
//! instructions it writes `remote_region` bytes sequentially into its own PM ring and ends the
//! region with an `ofence` — the shape of `rdma_pwrite` traffic reaching the server's NVM (one
//! barrier region per call). Run it with `broi.remote_threads = 1` so BROI treats it as remote.

use crate::atlas::undo_log::Tx;
use crate::blocks::undo_tx::UndoTxs;
use crate::ctx::{Ctx, Gen, Interleaver};
use crate::params::{compute_up_to_2_32, int, multiple, ParamSpec, Params};
use crate::recovery::OpRecord;
use crate::registry::Generated;

/// Parameters every Table IV workload has (after its own `footprint_kib`).
/// `footprint_kib`: the PM footprint over all threads (each workload's default and the seed's size).
pub const fn footprint(default: &'static str, help: &'static str) -> ParamSpec {
    ParamSpec { name: "footprint_kib", default, unit: "KiB", range: int(16, 1 << 24), help }
}

/// The footprint each worker thread's own instance gets, in bytes.
pub fn bytes_per_thread(p: &Params) -> u64 {
    p.get("footprint_kib").max(16) * 1024 / p.threads as u64
}

pub const REMOTE_GAP: ParamSpec = ParamSpec {
    name: "remote_gap",
    default: "0",
    unit: "instructions",
    range: int(0, 1 << 32),
    help: "hybrid mode: non-memory work between two remote-style regions on one extra thread (0: no remote stream)",
};
pub const REMOTE_REGION: ParamSpec = ParamSpec {
    name: "remote_region",
    default: "512",
    unit: "bytes",
    range: multiple(64, 64, REMOTE_RING),
    help: "bytes per remote-style barrier region (whole lines)",
};
pub const LOG_GAP: ParamSpec = ParamSpec {
    name: "log_gap",
    default: "4096",
    unit: "bytes",
    range: multiple(64, 0, 1 << 30), help: "space between consecutive threads' undo logs beyond the log size, in whole lines (0: logs exactly 256 KiB apart, all starting in one bank)",
};
pub const COMPUTE: ParamSpec = compute_up_to_2_32("20", "non-memory work per operation");

/// The parameters of the keyed structures (hash, rbtree, btree): the seed's 256 MB footprint.
pub const KEYED_PARAMS: &[ParamSpec] = &[
    footprint("4096", "PM footprint over all threads (the seed: 256 MB)"),
    REMOTE_GAP,
    REMOTE_REGION,
    COMPUTE,
    LOG_GAP,
];

/// Bytes of the remote stream's ring.
const REMOTE_RING: u64 = 1 << 20;

/// What one operation did (for the op log).
pub struct Done {
    pub op: u8,
    pub key: u64,
    pub value: u64,
}

/// A per-thread structure instance.
pub trait Instance {
    /// One operation on a key drawn by the driver in `0..keys`; stores go through `tx`.
    fn op(&mut self, c: &mut Ctx<'_>, tx: &mut Tx, key: u64) -> Done;
}

/// Runs `ops` operations per thread; `make(thread, gen)` builds each thread's instance (its
/// allocations come from the shared heap) and `keys` is the per-thread key space.
pub fn drive<I: Instance>(p: &Params, keys: u64, mut make: impl FnMut(usize, &mut Gen) -> I) -> Generated {
    let gap = p.get("remote_gap");
    let region = p.get("remote_region");
    let compute = p.get("compute");
    let workers = p.threads;
    let remote = gap > 0;
    let mut pg = p.clone();
    if remote {
        pg.threads += 1;
    }
    let mut g = Gen::new(&pg);
    // Per-thread logs `log_gap` bytes apart beyond their size (a heap's per-allocation header
    // page): with the logs exactly LOG_BYTES apart, every thread's log would start in the same
    // bank under the stride mapping (LOG_BYTES is a multiple of banks x row), and that one bank
    // would bound every design (docs/design.md §9 finding; `log_gap=0` reproduces it).
    let log_gap = p.get("log_gap");
    let logs: Vec<u64> =
        (0..workers).map(|_| g.heap.alloc_pm(crate::atlas::undo_log::LOG_BYTES + log_gap, 64)).collect();
    let mut undo = UndoTxs::with_logs(logs);
    let mut inst: Vec<I> = (0..workers).map(|t| make(t, &mut g)).collect();
    let ring = if remote { g.heap.alloc_pm(REMOTE_RING, 4096) } else { 0 };
    let mut ring_off = 0u64;
    let mut rtag = 0u64;
    let mut txid = 0u64;
    let keys = keys.max(1);
    Interleaver::run(&mut g, pg.threads, p.ops, |c, _| {
        if c.thread == workers {
            c.compute(gap);
            for off in (0..region).step_by(64) {
                rtag += 1;
                let a = ring + (ring_off + off) % REMOTE_RING;
                let mut line = [0u8; 64];
                line[..8].copy_from_slice(&rtag.to_le_bytes());
                c.store(a, &line);
            }
            ring_off = (ring_off + region) % REMOTE_RING;
            c.ofence();
            return;
        }
        let key = c.rng().below(keys);
        txid += 1;
        c.begin("op");
        c.compute(compute);
        let mut tx = undo.begin(c, txid, true, false);
        let d = inst[c.thread].op(c, &mut tx, key);
        undo.commit(c, tx);
        c.end("op", OpRecord { op: d.op, key: d.key, value: d.value, ..Default::default() });
        c.op_dfence();
    });
    let trace = undo.finish(g);
    // Each thread's structure is private and its only invariant is its history.
    Generated { trace, recovery: Box::new(undo) }
}

/// A host-side mirror of one node-structured PM region: fields are 8-byte words at
/// `node + 8 * field`; [`Mirror::set`] records a change that [`Mirror::flush`] writes through
/// the transaction (undo record first), so only words that really change are persisted.
#[derive(Default)]
pub struct Mirror {
    dirty: Vec<(u64, u64)>,
}

impl Mirror {
    pub fn set(&mut self, addr: u64, v: u64) {
        match self.dirty.iter_mut().find(|d| d.0 == addr) {
            Some(d) => d.1 = v,
            None => self.dirty.push((addr, v)),
        }
    }

    /// Writes the changed words whose value differs from the heap's, in address order.
    pub fn flush(&mut self, c: &mut Ctx<'_>, tx: &mut Tx) {
        self.dirty.sort_unstable();
        for (a, v) in std::mem::take(&mut self.dirty) {
            if c.peek(a, 8) != v {
                tx.write_u64(c, a, v);
            }
        }
    }
}
