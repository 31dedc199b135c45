//! A persistent transaction with undo logging, as a workload drives it.
//!
//! The log itself (entry + `ofence` before each data store, data `ofence`d before the log is
//! cleared, recovery by rollback) is [`crate::atlas::undo_log`]. What every undo-logged workload
//! adds around it is the same: one log per thread, a per-word [`History`] of committed writes
//! (recorded at commit, in commit order, against the operation about to end), the dfence that
//! made the initial population durable, and a recovery that rolls every log back before it checks
//! the structure and the history. [`UndoTxs`] is that bookkeeping; it emits no events of its own
//! besides those of the log and the setup's `dfence`, so a workload built on it produces the
//! trace it would produce by hand.

use crate::atlas::undo_log::{alloc_logs, fase_begin, fase_commit, rollback, Tx};
use crate::ctx::{Ctx, Gen, Heap};
use crate::recovery::{piece, OpLog, PieceCache, Recovery, RecoveryError, RecoveryReport};
use crate::whisper::common::{History, SETUP};
use pmsim_trace::{MemImage, Trace};
use std::collections::BTreeSet;

/// Per-thread undo logs plus what recovery checks them against.
pub struct UndoTxs {
    /// Base address of each thread's log.
    pub logs: Vec<u64>,
    pub hist: History,
    /// The operation log, filled in by [`UndoTxs::finish`].
    pub log: OpLog,
    /// The `dfence` that made the initial population durable (`None`: no population).
    pub setup_gid: Option<u64>,
}

impl UndoTxs {
    /// One log of `LOG_BYTES` per thread.
    pub fn new(heap: &mut Heap, threads: usize) -> UndoTxs {
        UndoTxs::with_logs(alloc_logs(heap, threads))
    }

    /// Logs the caller placed itself (e.g. spaced apart).
    pub fn with_logs(logs: Vec<u64>) -> UndoTxs {
        UndoTxs { logs, hist: History::default(), log: OpLog::default(), setup_gid: None }
    }

    /// Starts transaction `txid` in the calling thread's log (see [`Tx::begin`]).
    pub fn begin(&self, c: &Ctx<'_>, txid: u64, dedup: bool, linked: bool) -> Tx {
        Tx::begin(self.logs[c.thread], txid, dedup, linked)
    }

    /// Atlas: takes `lock` and opens a failure-atomic section in the calling thread's log.
    pub fn begin_fase(&self, c: &mut Ctx<'_>, lock: u64, txid: u64) -> Tx {
        fase_begin(c, lock, self.logs[c.thread], txid)
    }

    /// Ends the initial population: the `dfence` that makes it durable, and its words' values
    /// enter the history as written by the setup.
    pub fn setup_done(&mut self, c: &mut Ctx<'_>, words: Vec<u64>) -> u64 {
        let gid = c.dfence();
        self.hist.record(SETUP, words, &c.g.heap);
        self.setup_gid = Some(gid);
        gid
    }

    fn record(&mut self, c: &Ctx<'_>, words: BTreeSet<u64>) {
        let idx = c.g.log.ops.len() as u32;
        self.hist.record(idx, words, &c.g.heap);
    }

    /// Commits `tx` (data ordered before the log is cleared) and records the words it wrote as
    /// written by the operation the caller ends next; returns how many words that is.
    pub fn commit(&mut self, c: &mut Ctx<'_>, tx: Tx) -> usize {
        let words = tx.commit(c);
        let n = words.len();
        self.record(c, words);
        n
    }

    /// Atlas: logs the release of `lock`, commits the section and records its words.
    pub fn commit_fase(&mut self, c: &mut Ctx<'_>, tx: Tx, lock: u64) {
        let words = fase_commit(c, tx, lock);
        self.record(c, words);
    }

    /// Finishes the run (every thread's final dfence) and keeps the operation log.
    pub fn finish(&mut self, g: Gen) -> Trace {
        let (trace, log) = g.finish();
        self.log = log;
        trace
    }

    /// Recovery's first step: `image` with every thread's active transaction rolled back, as a
    /// copy-on-write view (the rollback's writes shadow the image's words until the view is
    /// dropped): no copy of the image, and a reader that memoises by reads sees only the words
    /// actually read (a copy would count as reading every word).
    pub fn rolled_back<'a>(&self, image: &'a MemImage) -> Result<RolledBack<'a>, RecoveryError> {
        let view = RolledBack(image);
        rollback(image, &self.logs)?;
        Ok(view)
    }

    /// Whether the initial population's dfence had completed (true when there was none).
    pub fn setup_durable(&self, dfence_done: &dyn Fn(u64) -> bool) -> bool {
        self.setup_gid.is_none_or(dfence_done)
    }

    /// The per-word history check of a rolled-back image, in pieces the crash driver may reuse
    /// ([`History::check_with`]); returns the durable operations verified.
    pub fn check_history_with(&self, img: &MemImage, pieces: &mut dyn PieceCache) -> Result<u64, RecoveryError> {
        self.hist.check_with(img, &self.log, self.setup_gid, pieces)
    }

    /// The report of a recovery that checks only the history (nothing structural to count).
    pub fn history_only(&self, img: &MemImage, pieces: &mut dyn PieceCache) -> Result<RecoveryReport, RecoveryError> {
        Ok(RecoveryReport { items: 0, durable_ops_checked: self.check_history_with(img, pieces)? })
    }
}

/// An image seen with its transactions rolled back ([`UndoTxs::rolled_back`]); dropping it
/// drops the rollback's copy-on-write layer.
pub struct RolledBack<'a>(&'a MemImage);

impl std::ops::Deref for RolledBack<'_> {
    type Target = MemImage;
    fn deref(&self) -> &MemImage {
        self.0
    }
}

impl Drop for RolledBack<'_> {
    fn drop(&mut self) {
        self.0.cow_clear();
    }
}

/// Recovery of a workload whose only invariant is its history: roll back, then check every word
/// (in pieces, [`History::check_with`]).
impl Recovery for UndoTxs {
    fn check_with(
        &self,
        image: &MemImage,
        _dfence_done: &dyn Fn(u64) -> bool, // the history's pieces answer from their own
        pieces: &mut dyn PieceCache,
    ) -> Result<RecoveryReport, RecoveryError> {
        let img = self.rolled_back(image)?;
        self.history_only(&img, pieces)
    }
}

/// A structure's own recovery check, run on an image whose transactions are rolled back and
/// whose initial population was durable.
pub trait Structure: Send + Sync {
    /// Checks the structure's invariants; returns how many items it holds.
    fn check(&self, img: &MemImage, undo: &UndoTxs, dfence_done: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError>;

    /// [`Structure::check`] as recovery pieces the crash driver may reuse: by default one piece;
    /// a structure made of independent parts (N-Store's rows) checks each part in a piece of
    /// its own. Must return exactly what `check` returns.
    fn check_with(&self, img: &MemImage, undo: &UndoTxs, pieces: &mut dyn PieceCache) -> Result<u64, RecoveryError> {
        piece(pieces, &[], |_, d| StructurePiece(self.check(img, undo, d))).0.clone()
    }
}

/// A structure check's verdict as a piece (a type of its own: piece keys are per output type).
pub struct StructurePiece(pub Result<u64, RecoveryError>);

/// Recovery of an undo-logged structure: roll every log back; unless the crash came during the
/// initial population (which is not failure-atomic), check the structure; then the history.
pub struct UndoRecovery<S> {
    pub undo: UndoTxs,
    pub structure: S,
}

impl<S: Structure> Recovery for UndoRecovery<S> {
    /// The rollback in the recovery itself; the structure check and the history in pieces: the
    /// crash driver reruns only those whose words changed.
    fn check_with(
        &self,
        image: &MemImage,
        dfence_done: &dyn Fn(u64) -> bool,
        pieces: &mut dyn PieceCache,
    ) -> Result<RecoveryReport, RecoveryError> {
        let img = self.undo.rolled_back(image)?;
        if !self.undo.setup_durable(dfence_done) {
            return self.undo.history_only(&img, pieces);
        }
        let items = self.structure.check_with(&img, &self.undo, pieces)?;
        Ok(RecoveryReport { items, durable_ops_checked: self.undo.check_history_with(&img, pieces)? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recovery::{global_order_image, OpRecord};

    /// One transaction overwriting a populated word; returns the trace, the undo state, the
    /// word and the gid of the transaction's commit (its log-clearing store).
    fn one_tx() -> (Trace, UndoTxs, u64) {
        let p = crate::params::Params::parse("t", &[], &Default::default()).unwrap();
        let mut g = Gen::new(&p);
        let mut undo = UndoTxs::new(&mut g.heap, p.threads);
        let word = g.heap.alloc_pm(64, 64);
        let mut c = g.ctx(0);
        c.store_u64(word, 1);
        undo.setup_done(&mut c, vec![word]);
        c.begin("op");
        let mut tx = undo.begin(&c, 1, true, false);
        tx.write_u64(&mut c, word, 2);
        assert_eq!(undo.commit(&mut c, tx), 1);
        c.end("op", OpRecord::default());
        c.dfence();
        (undo.finish(g), undo, word)
    }

    #[test]
    fn a_crash_inside_the_transaction_rolls_back_and_a_crash_after_it_keeps_it() {
        let (trace, undo, word) = one_tx();
        let stores: Vec<u64> = trace.threads[0].events.iter().filter(|e| e.kind.writes()).map(|e| e.gid).collect();
        // Stores: setup word, log header + entry (one or more), data, log clear. Cut after the data.
        let data = stores[stores.len() - 2];
        let cut = global_order_image(&trace, data + 1);
        let mid = undo.rolled_back(&cut).unwrap();
        assert_eq!(mid.read_u64(word), 1, "the uncommitted write is undone");
        drop(mid);
        // The view was copy-on-write: the image itself still holds the uncommitted write.
        assert_eq!(cut.read_u64(word), 2);
        let whole = global_order_image(&trace, u64::MAX);
        let end = undo.rolled_back(&whole).unwrap();
        assert_eq!(end.read_u64(word), 2, "the committed write stays");
        let rec = UndoRecovery { undo, structure: NoStructure };
        assert!(rec.check(&global_order_image(&trace, u64::MAX), &|_| true).is_ok());
        // The committed write made durable, but an image that lost it: history catches it.
        let mut lost = global_order_image(&trace, u64::MAX);
        lost.set(word, pmsim_trace::WordVal { data: 1, id: 1 });
        assert!(rec.check(&lost, &|_| true).is_err());
    }

    struct NoStructure;
    impl Structure for NoStructure {
        fn check(&self, _: &MemImage, _: &UndoTxs, _: &dyn Fn(u64) -> bool) -> Result<u64, RecoveryError> {
            Ok(0)
        }
    }
}
