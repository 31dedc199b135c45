//! Application-level recovery checks on NVM images.
//!
//! A workload's [`Recovery`] runs the structure's own recovery procedure on an image and checks
//! its invariants (docs/design.md §6 checks the *hardware* promise; this checks what an application
//! would see): the structure is well formed; every operation that completed before a `dfence`
//! that completed before the crash is present; nothing appears that was never written.

use pmsim_trace::{MemImage, WordVal};

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
    fn check(&self, image: &MemImage, dfence_done: &dyn Fn(u64) -> bool) -> Result<RecoveryReport, RecoveryError>;
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
