//! Application-level recovery checks on NVM images.
//!
//! A workload's [`Recovery`] runs the structure's own recovery procedure on an image and checks
//! its invariants (docs/design.md §6 checks the *hardware* promise; this checks what an application
//! would see): the structure is well formed; every operation that completed before a `dfence`
//! that completed before the crash is present; nothing appears that was never written.

use pmsim_trace::{MemImage, WordVal};
use std::any::{Any, TypeId};
use std::rc::Rc;

/// One logical operation as the generator performed it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpRecord {
    pub thread: u16,
    /// Workload-defined operation kind (e.g. 0 = insert, 1 = update, 2 = delete, 3 = read).
    pub op: u8,
    pub key: u64,
    /// A digest of the value written (workload-defined), 0 if none.
    pub value: u64,
    /// gid of the operation's `end` marker.
    pub end_gid: u64,
    /// gid of the first `dfence` after the operation in its thread: the operation is durable
    /// once that dfence has completed.
    pub durable_at: Option<u64>,
}

/// Every operation, in global order.
#[derive(Clone, Debug, Default)]
pub struct OpLog {
    pub ops: Vec<OpRecord>,
}

impl OpLog {
    /// Operations durable under `dfence_done`.
    pub fn durable<'a>(&'a self, dfence_done: &'a dyn Fn(u64) -> bool) -> impl Iterator<Item = &'a OpRecord> + 'a {
        self.ops.iter().filter(move |o| o.durable_at.is_some_and(dfence_done))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RecoveryReport {
    /// Items (keys, records, nodes) the recovered structure holds.
    pub items: u64,
    /// Durable operations verified present.
    pub durable_ops_checked: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("recovery check failed: {msg}")]
pub struct RecoveryError {
    pub msg: String,
}

impl RecoveryError {
    pub fn new(msg: impl Into<String>) -> RecoveryError {
        RecoveryError { msg: msg.into() }
    }
}

/// Recovery for one generated trace.
pub trait Recovery: Send + Sync {
    /// Runs the structure's recovery on `image`; `dfence_done(gid)` tells whether the `dfence`
    /// with that gid had completed before the crash.
    ///
    /// Each of `check` and [`Recovery::check_with`] defaults to the other: a recovery implements
    /// `check`, or, if it is made of pieces, only `check_with` (its `check` then runs every piece
    /// through [`Uncached`]).
    fn check(&self, image: &MemImage, dfence_done: &DfenceDone) -> Result<RecoveryReport, RecoveryError> {
        self.check_with(image, dfence_done, &mut Uncached { dfence_done })
    }

    /// [`Recovery::check`] with its work split into [`piece`]s that `pieces` may reuse from an
    /// earlier image (the crash driver's memo). Must return exactly what `check` returns.
    fn check_with(
        &self,
        image: &MemImage,
        dfence_done: &dyn Fn(u64) -> bool,
        pieces: &mut dyn PieceCache,
    ) -> Result<RecoveryReport, RecoveryError> {
        let _ = pieces;
        self.check(image, dfence_done)
    }

    /// Whether this recovery checks anything: false for one that accepts every image because
    /// the application's recovery runs where pmsim does not crash (a remote client's), so a
    /// report can say "not checked" rather than count images as recovered.
    fn checks_images(&self) -> bool {
        true
    }
}

/// The crash driver's answer to "had the `dfence` with this gid completed before the crash?".
pub type DfenceDone<'a> = dyn Fn(u64) -> bool + 'a;

/// A piece's output as the cache holds it.
pub type PieceOut = Rc<dyn Any>;

/// A piece's work as the cache runs it: given the cache (for nested pieces) and the
/// `dfence_done` to use.
pub type PieceRun<'a> = dyn FnMut(&mut dyn PieceCache, &dyn Fn(u64) -> bool) -> PieceOut + 'a;

/// Runs the named pieces of a recovery, or hands back an earlier run's output.
///
/// A piece is a part of a recovery (the walk of one segment, one node, one log) whose output is
/// a deterministic function of its key, of the image words it reads through the image's
/// accessors, of the answers of the `dfence_done` it is given, and of the recovery's own
/// immutable state. A memoising cache (`pmsim-crash`'s) records each piece's reads and the
/// dfences it saw pending, and returns the cached output while none of those changed; pieces
/// may call pieces (the caller then depends on them too).
pub trait PieceCache {
    /// The output of the piece (`ty`, `key`): `run`'s, or a cached one equal to what `run` would
    /// return now. `run` gets the cache (for nested pieces) and the `dfence_done` to use.
    fn run_piece(&mut self, ty: TypeId, key: &[u64], run: &mut PieceRun<'_>) -> PieceOut;
}

/// Runs every piece (no reuse): what [`Recovery::check`] of a piecewise recovery uses.
pub struct Uncached<'a> {
    pub dfence_done: &'a dyn Fn(u64) -> bool,
}

impl PieceCache for Uncached<'_> {
    fn run_piece(&mut self, _ty: TypeId, _key: &[u64], run: &mut PieceRun<'_>) -> PieceOut {
        let d = self.dfence_done;
        run(self, d)
    }
}

/// Runs `f` as the piece named `key` of output type `T` under `cache` (see [`PieceCache`] for
/// what `f` may depend on). Keys are per output type; a recovery names its pieces so that two
/// different computations never share a key (e.g. a tag, then the segment and its depth).
pub fn piece<T: 'static>(
    cache: &mut dyn PieceCache,
    key: &[u64],
    f: impl FnOnce(&mut dyn PieceCache, &dyn Fn(u64) -> bool) -> T,
) -> Rc<T> {
    let mut f = Some(f);
    let out = cache.run_piece(TypeId::of::<T>(), key, &mut |c, d| match f.take() {
        Some(f) => Rc::new(f(c, d)) as PieceOut,
        None => unreachable!("a piece runs at most once per call"),
    });
    match out.downcast::<T>() {
        Ok(t) => t,
        Err(_) => unreachable!("pieces are cached by output type"),
    }
}

/// The NVM image holding every PM store with a global id below `cut`, applied in global order
/// (`u64::MAX`: the whole trace). Recovery checks are tested on it: it is the state a run in
/// the trace's own order leaves, and a prefix of it is a crash in the middle of operations.
pub fn global_order_image(t: &pmsim_trace::Trace, cut: u64) -> MemImage {
    let mut img = MemImage::new();
    for (th, i) in t.global_order() {
        let ev = t.threads[th as usize].events[i as usize];
        if ev.gid >= cut {
            break;
        }
        if ev.kind.writes() && t.is_pm(ev.addr) {
            apply_store(&mut img, t, th as usize, i as usize);
        }
    }
    img
}

/// Writes event `index` of `thread` (a store) into `img`, giving each word it touches the
/// store's identity; returns what those words held before (`None`: never written).
pub fn apply_store(
    img: &mut MemImage,
    t: &pmsim_trace::Trace,
    thread: usize,
    index: usize,
) -> Vec<(u64, Option<WordVal>)> {
    let s = &t.threads[thread];
    let ev = s.events[index];
    let mut buf = [0u8; 64];
    let v = s.value(&ev, &mut buf).map(|v| v.to_vec()).unwrap_or(vec![0; ev.size as usize]);
    let mut before: Vec<(u64, Option<WordVal>)> = Vec::new();
    for (k, b) in v.iter().enumerate() {
        let a = ev.addr + k as u64;
        let w = a & !7;
        if before.last().map(|x| x.0) != Some(w) {
            before.push((w, img.get(w)));
        }
        let sh = (a - w) * 8;
        let mut cur = img.get(w).unwrap_or_default();
        cur.data = (cur.data & !(0xff << sh)) | ((*b as u64) << sh);
        cur.id = ev.gid;
        img.set(w, cur);
    }
    before
}
