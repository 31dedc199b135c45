//! `nstore`: N-Store's write-ahead-logging engine on NVM (the "opt-WAL" engine WHISPER traces),
//! driven by a YCSB-like mix of updates and reads.
//!
//! Pattern (github.com/snalli/nstore, `opt_wal_engine::update` / `txn_end`): an update serialises
//! the tuple's before-image into a log entry that is allocated and persisted (entry stores +
//! `ofence`), appends it to the persistent log list (link store + `ofence`), updates the tuple in
//! place and persists it (`ofence`), and at transaction end clears the log (stores) and fences
//! (`dfence`). Reads look the tuple up and copy it out without persisting anything. Each thread
//! (N-Store executor) has its own log; tuples are protected by partition locks (the table is
//! shared and hashed over `partitions` locks, so executors conflict through the locks).
//!
//! Simplifications: the primary index is a direct array (the original's persistent hash map is
//! not modified by updates, so only its lookup loads are lost); one statement per transaction.
//! Recovery (N-Store's `recovery()`): undo the entries of a non-empty log, newest first; then
//! check every tuple's key, that its value is one written to it and not older than the last
//! durable update (per-word history).
//!
//! Built on [`crate::blocks::undo_tx`] (linked undo log) and [`crate::blocks::requests`] (YCSB's
//! update/read mix).

use crate::blocks::requests::{Mix, Request};
use crate::blocks::undo_tx::{Structure, StructurePiece, UndoRecovery, UndoTxs};
use crate::ctx::Gen;
use crate::params::{compute, int, percent, ParamSpec, Params};
use crate::recovery::{piece, OpRecord, PieceCache, RecoveryError};
use crate::registry::{Generated, WorkloadSpec};
use crate::whisper::common::{key_bytes, key_of, r8, value_bytes, value_of, OP_READ};
use pmsim_trace::MemImage;

pub static NSTORE: WorkloadSpec = WorkloadSpec {
    name: "nstore",
    description: "N-Store opt-WAL engine, YCSB 80/20: before-image log entry + ofence, link + ofence, in-place update + ofence, log clear + dfence",
    params: PARAMS,
    generate,
};

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "tuples",
        default: "4096",
        unit: "tuples",
        range: int(1, 1 << 20),
        help: "rows in the YCSB table (loaded before the run)",
    },
    percent("update_pct", "80", "share of update transactions (the rest read)"),
    ParamSpec {
        name: "partitions",
        default: "64",
        unit: "locks",
        range: int(1, 1 << 20),
        help: "lock partitions over the table",
    },
    compute("200", "non-memory work per transaction (statement parsing, serialisation)"),
];

struct Layout {
    table: u64,
    stride: u64,
    ks: usize,
    vs: usize,
    tuples: u64,
}

impl Layout {
    fn tuple(&self, i: u64) -> u64 {
        self.table + i * self.stride
    }
    fn val(&self, i: u64) -> u64 {
        self.tuple(i) + r8(self.ks)
    }
}

fn generate(p: &Params) -> Generated {
    let tuples = p.get("tuples").max(1);
    let upd = p.get("update_pct").min(100);
    let parts = p.get("partitions").max(1);
    let compute = p.get("compute");
    let mut g = Gen::new(p);
    let stride = (r8(p.key_size) + r8(p.value_size)).div_ceil(64) * 64;
    let l = Layout { table: g.heap.alloc_pm(tuples * stride, 4096), stride, ks: p.key_size, vs: p.value_size, tuples };
    let mut undo = UndoTxs::new(&mut g.heap, p.threads);
    let locks = g.heap.alloc_dram(parts * 64, 64);
    let mut tag = 0u64;
    {
        let mut c = g.ctx(0);
        let mut words = Vec::new();
        for i in 0..tuples {
            tag += 1;
            c.store(l.tuple(i), &key_bytes(i, l.ks));
            c.store(l.val(i), &value_bytes(tag, l.vs));
            words.extend((0..(r8(l.ks) + r8(l.vs)) / 8).map(|w| l.tuple(i) + w * 8));
        }
        undo.setup_done(&mut c, words);
    }
    let mut txid = 0u64;
    let mix = Mix { primary_pct: upd, labels: ["update", "read"], keys: tuples, compute };
    mix.run(&mut g, p, |c, Request { primary: update, key, label }| {
        let lock = locks + (key % parts) * 64;
        c.lock(lock);
        c.load_bytes(l.tuple(key), l.ks); // index lookup: compare the key
        if update {
            txid += 1;
            tag += 1;
            let mut tx = undo.begin(c, txid, true, true);
            tx.write(c, l.val(key), &value_bytes(tag, l.vs));
            undo.commit(c, tx);
            c.end(label, OpRecord { op: 1, key, value: tag, ..Default::default() });
            c.op_dfence();
        } else {
            let v = c.load_bytes(l.val(key), l.vs);
            let t = u64::from_le_bytes(v[..8].try_into().unwrap_or([0; 8]));
            c.end(label, OpRecord { op: OP_READ, key, value: t, ..Default::default() });
        }
        c.unlock(lock);
    });
    let trace = undo.finish(g);
    Generated { trace, recovery: Box::new(UndoRecovery { undo, structure: NStoreRecovery { l } }) }
}

struct NStoreRecovery {
    l: Layout,
}

/// Rows checked in one recovery piece.
const ROWS_PER_PIECE: u64 = 64;

impl NStoreRecovery {
    /// Rows `rows` are well formed, each with its own key; returns how many.
    fn check_rows(&self, img: &MemImage, rows: std::ops::Range<u64>) -> Result<u64, RecoveryError> {
        let l = &self.l;
        let mut items = 0;
        for i in rows {
            let key = key_of(&img.read_bytes(l.tuple(i), l.ks));
            let val = value_of(&img.read_bytes(l.val(i), l.vs));
            match (key, val) {
                (Ok(Some(k)), Ok(Some(_))) if k == i => items += 1,
                _ => return Err(RecoveryError::new(format!("tuple {i} is not a well-formed row with key {i}"))),
            }
        }
        Ok(items)
    }
}

impl Structure for NStoreRecovery {
    /// Runs once the load phase's dfence completed (before it the table may be partly written).
    fn check(&self, img: &MemImage, _: &UndoTxs, _: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
        self.check_rows(img, 0..self.l.tuples)
    }

    /// The rows in pieces of [`ROWS_PER_PIECE`], in order (so the first failure is the same).
    fn check_with(&self, img: &MemImage, _: &UndoTxs, pieces: &mut dyn PieceCache) -> Result<u64, RecoveryError> {
        let mut items = 0;
        for from in (0..self.l.tuples).step_by(ROWS_PER_PIECE as usize) {
            let rows = from..(from + ROWS_PER_PIECE).min(self.l.tuples);
            items += piece(pieces, &[from], |_, _| StructurePiece(self.check_rows(img, rows))).0.clone()?;
        }
        Ok(items)
    }
}
