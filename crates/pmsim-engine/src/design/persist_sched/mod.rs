//! The MC-side persist schedulers of buffered strict persistency with delegated ordering
//! (docs/design.md §9): one trait, one file per scheduler.
//!
//! Why it exists: the core-side persist buffers ([`super::delegated`]) release a request only
//! once it has no cross-thread dependency outstanding, so what reaches the MC side is, per
//! thread, a sequence of barrier epochs that are independent of every other thread's. *How*
//! those epochs are interleaved into the memory controller is the research question of the
//! BROI seed; a scheduler answers it. A researcher's own scheduler is one new file here that
//! implements [`PersistScheduler`] and one line in [`build`].
//!
//! What the framework guarantees a scheduler: [`Queues`] holds, per thread (a *BROI entry*),
//! the requests that arrived and are not yet issued, in arrival order, and per epoch how many
//! are still unpersisted; [`BankView`] says which banks have room now. What a scheduler must
//! guarantee: it picks a request only from its entry's *first* unpersisted epoch (the
//! SubReady-SET); a request never passes its thread's barrier. The property test
//! `tests/persist_sched.rs` checks that over random epochs.

pub mod broi;
pub mod in_order;

use crate::mem::nvm::LineData;
use std::collections::VecDeque;

/// Which barrier epoch of which feed a request belongs to. An entry can be fed by several
/// sources that number their epochs independently (a remote thread of `broi.remote_threads` and
/// an RDMA channel, or two remote threads, sharing a remote entry), so an epoch number alone does
/// not name a group: two feeds' epochs of equal number once merged into one group and let a
/// later epoch pass an earlier one (a tester's finding, inconsistent images under `broi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochKey {
    /// The request's core, or `u16::MAX` for the RDMA channels (which share their entry's
    /// region counter).
    pub feed: u16,
    pub epoch: u64,
}

/// A persist request at the MC side.
#[derive(Clone, Copy, Debug)]
pub struct Req {
    /// Arrival order (unique, increasing).
    pub seq: u64,
    /// Index of its entry in [`Queues::entries`].
    pub entry: u16,
    /// The core whose persist buffer holds it (and is acknowledged).
    pub core: u16,
    /// Its thread's barrier epoch (increasing along the thread).
    pub epoch: u64,
    /// The persist-buffer entry to acknowledge.
    pub pb_entry: u64,
    pub data: LineData,
    pub mc: u16,
    /// Global bank index: `mc * banks_per_mc + bank`.
    pub bank: u16,
    pub row: u64,
    pub arrive: u64,
    /// The scheduler's own annotation (set in [`PersistScheduler::on_arrive`]).
    pub tag: u64,
}

impl Req {
    /// Its barrier epoch's group in its entry.
    #[inline]
    pub fn key(&self) -> EpochKey {
        EpochKey { feed: self.core, epoch: self.epoch }
    }
}

/// A BROI entry: one thread's (or one remote channel's) requests.
#[derive(Clone, Debug, Default)]
pub struct Entry {
    pub remote: bool,
    /// Arrived, not yet issued, in arrival order.
    pub queued: VecDeque<Req>,
    /// Per epoch in order: requests arrived and not yet persisted.
    pub outstanding: VecDeque<(EpochKey, u32)>,
}

impl Entry {
    /// The SubReady-SET's epoch (the first unpersisted one).
    pub fn first_epoch(&self) -> Option<EpochKey> {
        self.outstanding.front().map(|e| e.0)
    }

    /// The Next-SET's epoch.
    pub fn second_epoch(&self) -> Option<EpochKey> {
        self.outstanding.get(1).map(|e| e.0)
    }

    /// Requests held (queued or issued, not persisted).
    pub fn held(&self) -> u32 {
        self.outstanding.iter().map(|e| e.1).sum()
    }
}

/// Every entry of the controller: local threads first, then remote channels.
#[derive(Clone, Debug, Default)]
pub struct Queues {
    pub entries: Vec<Entry>,
    pub next_seq: u64,
}

impl Queues {
    pub fn new(local: usize, remote: usize) -> Queues {
        let mut entries = vec![Entry::default(); local + remote];
        for e in entries.iter_mut().skip(local) {
            e.remote = true;
        }
        Queues { entries, next_seq: 0 }
    }

    /// The next arrival's sequence number.
    pub fn stamp(&mut self, r: &mut Req) {
        r.seq = self.next_seq;
        self.next_seq += 1;
    }

    /// A request of `epoch` left its persist buffer for `entry`: the entry's barrier index
    /// registers record it now, before it arrives.
    pub fn reserve(&mut self, entry: usize, epoch: EpochKey) {
        let e = &mut self.entries[entry];
        match e.outstanding.back_mut() {
            Some(last) if last.0 == epoch => last.1 += 1,
            _ => e.outstanding.push_back((epoch, 1)),
        }
    }

    /// A reserved request arrived and can be scheduled.
    pub fn arrive(&mut self, r: Req) {
        self.entries[r.entry as usize].queued.push_back(r);
    }

    /// Reserves and queues at once (tests, remote submissions).
    pub fn push(&mut self, r: Req) {
        self.reserve(r.entry as usize, r.key());
        self.arrive(r);
    }

    /// Removes the queued request `seq` of `entry` (it is being issued).
    pub fn take(&mut self, entry: usize, seq: u64) -> Option<Req> {
        let q = &mut self.entries[entry].queued;
        let i = q.iter().position(|r| r.seq == seq)?;
        q.remove(i)
    }

    /// A request of `entry`'s `epoch` persisted; returns whether that epoch is now complete.
    pub fn persisted(&mut self, entry: usize, epoch: EpochKey) -> bool {
        let e = &mut self.entries[entry];
        let Some(i) = e.outstanding.iter().position(|x| x.0 == epoch) else { return false };
        e.outstanding[i].1 -= 1;
        if e.outstanding[i].1 == 0 {
            e.outstanding.remove(i);
            return true;
        }
        false
    }

    /// Whether `entry` can take a request of `epoch` (units and barrier index registers).
    pub fn has_room(&self, entry: usize, epoch: EpochKey, slots: usize, barrier_regs: usize) -> bool {
        let e = &self.entries[entry];
        if e.held() as usize >= slots {
            return false;
        }
        let new_epoch = e.outstanding.back().is_none_or(|l| l.0 != epoch);
        !new_epoch || e.outstanding.len() < barrier_regs + 1
    }

    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(|e| e.outstanding.is_empty())
    }
}

/// What the memory side can take now.
#[derive(Clone, Debug, Default)]
pub struct BankView {
    pub now: u64,
    pub banks_per_mc: usize,
    /// Per global bank: writes queued at the MC that have not started.
    pub backlog: Vec<usize>,
    /// Per global bank: the open row (`u64::MAX`: none or unknown).
    pub open_row: Vec<u64>,
    /// Per MC: free write-queue entries, and capacity.
    pub queue_free: Vec<usize>,
    pub queue_cap: Vec<usize>,
}

/// A request chosen to issue: (entry, seq).
pub type Pick = (usize, u64);

/// An MC-side persist scheduler.
pub trait PersistScheduler: Send {
    fn name(&self) -> &'static str;

    /// A request is arriving (before it is queued); the scheduler may set `r.tag`.
    fn on_arrive(&mut self, _q: &Queues, _r: &mut Req) {}

    /// An issued request persisted.
    fn on_persisted(&mut self, _r: &Req) {}

    /// Chooses the requests to issue now (in order). The framework issues them and updates the
    /// view between steps, never within one.
    fn pick(&mut self, q: &Queues, v: &BankView, out: &mut Vec<Pick>);

    /// When the last `pick` must be repeated even if nothing else changes (a request it held
    /// back becomes eligible by time alone), if ever.
    fn wake_at(&self) -> Option<u64> {
        None
    }

    /// An epoch of `entry` completed (all its requests persisted).
    fn on_epoch_done(&mut self, _q: &Queues, _entry: usize, _epoch: EpochKey) {}

    /// Scheduler statistics (stable names).
    fn stats(&self, _out: &mut super::DesignStats) {}
}

/// Scheduler parameters shared by the implementations.
#[derive(Clone, Debug)]
pub struct SchedParams {
    pub sigma: f64,
    pub starvation_ps: u64,
    pub remote_low_util_pct: f64,
    /// Test only: let the Ready-SET include the Next-SET (a request passes its barrier).
    pub broken_cross_barrier: bool,
}

/// Builds the scheduler named `name`.
pub fn build(name: &str, p: &SchedParams) -> Box<dyn PersistScheduler> {
    match name {
        "broi" => Box::new(broi::Broi::new(p)),
        _ => Box::new(in_order::InOrder::default()),
    }
}
