//! Buffered strict persistency with delegated ordering (Kolli et al., MICRO'16; the BROI
//! seed's §IV-A/C): designs `delegated` and `broi`.
//!
//! Why it exists: the BROI seed's point is that once ordering is *recorded* on the core side
//! and *enforced* only at the memory controller, the controller's interleaving of independent
//! threads' barrier epochs decides the memory bus's bank-level parallelism. This file is the
//! shared mechanism; the MC-side interleaving is a [`PersistScheduler`]
//! (`persist_sched/in_order.rs` for `delegated`, `persist_sched/broi.rs` for `broi`).
//!
//! Core side (one persist buffer per core, reusing [`PersistBuffer`]): PM stores enter the PB
//! tagged with the thread's barrier epoch (split at `ofence`/`dfence` and at a coherence
//! conflict under EP whose source access belongs to an epoch still in the persist buffer: the
//! requester starts a new epoch that depends on that one, and the source closes it if it is
//! still open; `et.dep_epoch = "current"` waits for the source's current epoch instead).
//! Entries leave the PB in FIFO order, one per cycle, each only when no epoch up to its own
//! has a cross-thread dependency outstanding and its BROI entry has a free unit and barrier
//! index register; the MC side is told of the barrier by the epoch number. A dependency
//! resolves when the source's epoch has fully persisted (its PB learns from the MC's
//! acknowledgements) and a message crosses one hop. Entries are freed when the MC acknowledges
//! them: under `pm.model = "banked"` with `bank.persist_at = "media"` that is when the bank
//! write completes; with the default model, when the WPQ (ADR) accepts it.
//!
//! MC side: requests arrive `pb.flush_ns` after release into their thread's entry (remote
//! threads, `broi.remote_threads`, into the remote entries, and so do the RDMA path's lines,
//! handed over by the network's remote persist buffer through [`super::Design::submit_remote`]:
//! a region's first line opens a new barrier region of the channel's entry); a
//! scheduling step (`broi.step_ns`) runs after every arrival and acknowledgement and asks the
//! scheduler what to send to the MC write queues.
//!
//! Guarantee: epoch persistency — a thread's epoch persists only after its earlier epochs and
//! after every epoch it depends on. Persist buffers and BROI queues are volatile: at a crash
//! only NVM (and a WPQ in the ADR domain) survive.

use super::pb::{active_pbs, occupancy_stats, EntryState, PersistBuffer};
use super::persist_sched::{self, BankView, EpochKey, PersistScheduler, Queues, Req, SchedParams};
use super::{DesignStats, PmStore, Promise, Step};
use crate::config::{ns, Config};
use crate::machine::{DesignEv, Machine, StallCause, AT_MC};
use crate::mem::coherence::Conflict;
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;
use std::collections::VecDeque;

const RELEASE: u16 = 1;
const ARRIVE: u16 = 2;
const STEP: u16 = 3;
/// The core's (or remote buffer's) acknowledgement of a persisted request, `noc.ack_ns` after
/// the MC side learnt it (`PERSISTED`).
const ACK: u16 = 4;
const DEP_DONE: u16 = 5;
/// A request persisted: the MC's reply to the MC-side scheduler itself, at once.
const PERSISTED: u16 = 6 | AT_MC;
/// `Req::core` of a request submitted through [`Delegated::submit_remote`].
const NO_CORE: u16 = u16::MAX;

#[derive(Clone, Debug)]
struct EpochRec {
    ts: u64,
    /// PB entries of this epoch not yet acknowledged.
    pending: u32,
    stores: u32,
    /// Cross-thread dependencies not yet resolved.
    unresolved: u32,
    closed: bool,
    /// The access stamp when it opened ([`crate::mem::hierarchy::Hierarchy::stamp`]): an
    /// access with a larger stamp, and not larger than the next epoch's, belongs to it.
    opened_seq: u64,
}

impl EpochRec {
    fn new(ts: u64, opened_seq: u64) -> EpochRec {
        EpochRec { ts, pending: 0, stores: 0, unresolved: 0, closed: false, opened_seq }
    }

    fn carries_order(&self) -> bool {
        self.stores > 0 || self.unresolved > 0
    }
}

struct CoreS {
    pb: PersistBuffer,
    et: VecDeque<EpochRec>,
    next_ts: u64,
    persisted_upto: u64,
    /// (my epoch, dependent core) waiting for my epoch to persist.
    dependents: Vec<(u64, u16)>,
    /// (my epoch, source core, source epoch) not yet resolved.
    deps: Vec<(u64, u16, u64)>,
    release_scheduled: bool,
    dfence_wait: bool,
    admit_stalled: bool,
    /// A flush or non-temporal store since the thread's last fence point (legacy x86: its next
    /// locked instruction is then a durability point).
    saw_flush: bool,
}

impl CoreS {
    fn new(cfg: &Config) -> CoreS {
        CoreS {
            pb: PersistBuffer::new(cfg.pb.entries),
            et: VecDeque::from([EpochRec::new(1, 0)]),
            next_ts: 2,
            persisted_upto: 0,
            dependents: Vec::new(),
            deps: Vec::new(),
            release_scheduled: false,
            dfence_wait: false,
            admit_stalled: false,
            saw_flush: false,
        }
    }

    fn cur(&mut self) -> &mut EpochRec {
        self.et.back_mut().expect("open epoch")
    }
}

#[derive(Default)]
struct Counters {
    epochs: u64,
    deps: u64,
    released: u64,
    issued: u64,
    entry_full_waits: u64,
    remote_submitted: u64,
    /// Legacy x86 traces (docs/design.md §3): every `sfence`/`mfence` taken as a `dfence`, and
    /// the `clwb`/`clflushopt`/`clflush` made redundant by the persist buffers.
    sfence_as_dfence: u64,
    clwb_ignored: u64,
    /// clflushes taken as an ofence (x86 orders them with later stores).
    clflush_as_ofence: u64,
}

pub struct Delegated {
    name: &'static str,
    sched: Box<dyn PersistScheduler>,
    cores: Vec<CoreS>,
    q: Queues,
    /// Requests travelling from a PB to the MC side.
    travelling: Vec<Option<Req>>,
    free_travel: Vec<usize>,
    /// Requests issued to an MC, waiting for the acknowledgement.
    issued: Vec<Option<Req>>,
    free_issued: Vec<usize>,
    picks: Vec<persist_sched::Pick>,
    view: BankView,
    local_entries: usize,
    remote_from: usize,
    remote_threads: usize,
    remote_entries: usize,
    slots: usize,
    barrier_regs: usize,
    flush_ps: u64,
    step_ps: u64,
    /// `et.dep_epoch = "current"`: a conflict waits for the source's current epoch.
    dep_on_current: bool,
    /// Earliest pending step (`u64::MAX`: none).
    next_step: u64,
    /// The instant a step last looked again for a completion pending at it.
    rechecked_at: u64,
    /// Per remote entry: the region being submitted and how many persisted in order.
    remote_region: Vec<u64>,
    remote_persisted: Vec<u64>,
    /// What to tell the submitter when a remote request persists (`Req::pb_entry` indexes it).
    remote_done: Vec<Option<DesignEv>>,
    free_done: Vec<usize>,
    /// Per remote entry: the submitters refused for lack of room, to tell when a unit frees.
    room_wait: Vec<Vec<DesignEv>>,
    c: Counters,
    /// TEST ONLY: an epoch is released with cross-thread dependencies still unresolved.
    broken_no_dep_wait: bool,
}

impl Delegated {
    pub fn new(name: &'static str, sched: &str, cfg: &Config, broken_cross_barrier: bool) -> Delegated {
        let n = cfg.core.count;
        let p = SchedParams {
            sigma: cfg.broi.sigma,
            starvation_ps: ns(cfg.broi.starvation_ns),
            remote_low_util_pct: cfg.broi.remote_low_util_pct,
            broken_cross_barrier,
        };
        let banks = if cfg.pm.model == "banked" { cfg.bank.count } else { 1 };
        Delegated {
            name,
            sched: persist_sched::build(sched, &p),
            cores: (0..n).map(|_| CoreS::new(cfg)).collect(),
            q: Queues::new(n, cfg.broi.remote_entries),
            travelling: Vec::new(),
            free_travel: Vec::new(),
            issued: Vec::new(),
            free_issued: Vec::new(),
            picks: Vec::new(),
            view: BankView {
                now: 0,
                banks_per_mc: banks,
                backlog: vec![0; banks * cfg.mc.count],
                open_row: vec![u64::MAX; banks * cfg.mc.count],
                queue_free: vec![0; cfg.mc.count],
                queue_cap: vec![0; cfg.mc.count],
            },
            local_entries: n,
            // Set from the trace's threads (`set_threads`); Simulator::new refuses
            // remote_threads >= threads.
            remote_from: n.saturating_sub(cfg.broi.remote_threads),
            remote_threads: cfg.broi.remote_threads,
            remote_entries: cfg.broi.remote_entries,
            slots: cfg.broi.entry_slots,
            barrier_regs: cfg.broi.barrier_regs,
            flush_ps: ns(cfg.pb.flush_ns),
            step_ps: ns(cfg.broi.step_ns),
            dep_on_current: cfg.et.dep_epoch == "current",
            next_step: u64::MAX,
            rechecked_at: u64::MAX,
            remote_region: vec![0; cfg.broi.remote_entries],
            remote_persisted: vec![0; cfg.broi.remote_entries],
            remote_done: Vec::new(),
            free_done: Vec::new(),
            room_wait: vec![Vec::new(); cfg.broi.remote_entries],
            c: Counters::default(),
            broken_no_dep_wait: false,
        }
    }

    /// TEST ONLY: the delegated controller releasing an epoch before the epochs of other
    /// threads it depends on have persisted (the core side's dependency wait, shared with BROI).
    pub fn broken_no_dep_wait(cfg: &Config) -> Delegated {
        Delegated {
            broken_no_dep_wait: true,
            ..Delegated::new("broken-delegated-no-dep-wait", "delegated", cfg, false)
        }
    }

    fn ev(tag: u16, core: usize, arg: u64) -> DesignEv {
        DesignEv { tag, core: core as u16, arg }
    }

    fn entry_of(&self, core: usize) -> usize {
        if core >= self.remote_from {
            self.local_entries + (core - self.remote_from) % self.remote_entries
        } else {
            core
        }
    }

    // ---- core side ------------------------------------------------------------------------

    /// Ends `c`'s open epoch if it carries order (the next opens at access stamp `seq`); returns
    /// the closed epoch's ts.
    fn close_epoch(&mut self, c: usize, seq: u64) -> Option<u64> {
        let core = &mut self.cores[c];
        if !core.cur().carries_order() {
            return None;
        }
        let cur = core.cur();
        cur.closed = true;
        let ts = cur.ts;
        let next = core.next_ts;
        core.next_ts += 1;
        core.et.push_back(EpochRec::new(next, seq));
        self.c.epochs += 1;
        Some(ts)
    }

    /// The epoch of `s` a conflict with its access stamped `seq` must wait for (the writer rule
    /// of `buffered.rs`): the epoch open then, if `s` still holds it; the open one is closed
    /// (its predecessor if it carries nothing). None: that epoch has persisted and left the
    /// table, so there is nothing to order. `et.dep_epoch = "current"`: always the open one.
    /// `now_seq` is the current access stamp.
    fn dep_target(&mut self, now_seq: u64, s: usize, seq: u64) -> Option<u64> {
        let et = &self.cores[s].et;
        let i = if self.dep_on_current { et.len() - 1 } else { et.iter().rposition(|e| e.opened_seq < seq)? };
        if i + 1 < et.len() {
            return Some(et[i].ts);
        }
        Some(match self.close_epoch(s, now_seq) {
            Some(ts) => ts,
            None => self.cores[s].cur().ts - 1,
        })
    }

    fn kick(&mut self, m: &mut Machine, c: usize) {
        if !self.cores[c].release_scheduled {
            self.cores[c].release_scheduled = true;
            m.schedule_design(m.now, Self::ev(RELEASE, c, 0));
        }
    }

    /// Releases the PB's oldest unreleased entry if nothing orders it behind a dependency and
    /// its BROI entry has room.
    fn release_tick(&mut self, m: &mut Machine, c: usize) {
        self.cores[c].release_scheduled = false;
        let entry = self.entry_of(c);
        let core = &self.cores[c];
        let Some(i) = core.pb.entries.iter().position(|e| e.state == EntryState::Queued) else { return };
        let e = core.pb.entries[i];
        if !self.broken_no_dep_wait && core.et.iter().take_while(|x| x.ts <= e.epoch).any(|x| x.unresolved > 0) {
            return;
        }
        let key = EpochKey { feed: c as u16, epoch: e.epoch };
        if !self.q.has_room(entry, key, self.slots, self.barrier_regs) {
            self.c.entry_full_waits += 1;
            return;
        }
        self.cores[c].pb.entries[i].state = EntryState::InFlight { early: false };
        self.c.released += 1;
        self.q.reserve(entry, key);
        let mc = m.mc_of(e.data.line);
        let (bank, row) = match &m.mcs[mc].banks {
            Some(b) => b.locate(e.data.line),
            None => (0, 0),
        };
        let req = Req {
            seq: 0,
            entry: entry as u16,
            core: c as u16,
            epoch: e.epoch,
            pb_entry: e.id,
            data: e.data,
            mc: mc as u16,
            bank: (mc * self.view.banks_per_mc + bank) as u16,
            row,
            arrive: m.now + self.flush_ps,
            tag: 0,
        };
        let slot = match self.free_travel.pop() {
            Some(s) => {
                self.travelling[s] = Some(req);
                s
            }
            None => {
                self.travelling.push(Some(req));
                self.travelling.len() - 1
            }
        };
        m.note("release", c, e.data.line);
        m.schedule_design(m.now + self.flush_ps, Self::ev(ARRIVE, c, slot as u64));
        self.cores[c].release_scheduled = true;
        m.schedule_design(m.now + m.cycle_ps, Self::ev(RELEASE, c, 0));
    }

    /// Retires `c`'s persisted epochs, resolves dependents, completes a waiting dfence.
    fn advance(&mut self, m: &mut Machine, c: usize) {
        let core = &mut self.cores[c];
        let mut upto = None;
        while let Some(f) = core.et.front() {
            if !(f.closed && f.pending == 0 && f.unresolved == 0) {
                break;
            }
            upto = Some(f.ts);
            core.et.pop_front();
        }
        if let Some(upto) = upto {
            core.persisted_upto = upto;
            m.persist_version += 1;
            let (ready, rest): (Vec<_>, Vec<_>) =
                std::mem::take(&mut core.dependents).into_iter().partition(|d| d.0 <= upto);
            core.dependents = rest;
            for (_, d) in ready {
                m.schedule_design(m.now + m.hop_ps, Self::ev(DEP_DONE, d as usize, ((c as u64) << 48) | upto));
            }
        }
        let core = &mut self.cores[c];
        if core.dfence_wait && core.et.len() == 1 && !core.et[0].carries_order() {
            core.dfence_wait = false;
            m.sb_head_done(c);
        }
    }

    fn dep_done(&mut self, m: &mut Machine, r: usize, s: usize, upto: u64) {
        let core = &mut self.cores[r];
        let mut i = 0;
        while i < core.deps.len() {
            let (mine, src, ts) = core.deps[i];
            if src as usize == s && ts <= upto {
                core.deps.swap_remove(i);
                if let Some(e) = core.et.iter_mut().find(|e| e.ts == mine) {
                    e.unresolved -= 1;
                }
            } else {
                i += 1;
            }
        }
        self.advance(m, r);
        self.kick(m, r);
    }

    fn fence(&mut self, m: &mut Machine, c: usize, drain: bool) -> Step {
        self.close_epoch(c, m.hier.stamp());
        if !drain {
            self.advance(m, c);
            return Step::Done;
        }
        self.advance(m, c);
        let core = &mut self.cores[c];
        if core.et.len() == 1 && !core.et[0].carries_order() {
            return Step::Done;
        }
        core.dfence_wait = true;
        Step::Wait(StallCause::Dfence)
    }

    // ---- MC side ----------------------------------------------------------------------------

    fn schedule_step(&mut self, m: &mut Machine, t: u64) {
        if t < self.next_step {
            self.next_step = t;
            m.schedule_design(t, Self::ev(STEP, 0, 0));
        }
    }

    fn arrive(&mut self, m: &mut Machine, slot: usize) {
        let Some(mut r) = self.travelling[slot].take() else { return };
        self.free_travel.push(slot);
        self.q.stamp(&mut r);
        self.sched.on_arrive(&self.q, &mut r);
        self.q.arrive(r);
        self.schedule_step(m, m.now + self.step_ps);
    }

    fn step(&mut self, m: &mut Machine) {
        if m.now < self.next_step {
            // A stale event: a later step was superseded by an earlier one that already ran.
            return;
        }
        self.next_step = u64::MAX;
        let now = m.now;
        let v = &mut self.view;
        v.now = now;
        for (mc, mcs) in m.mcs.iter().enumerate() {
            v.queue_free[mc] = mcs.queue_free();
            v.queue_cap[mc] = mcs.queue_cap();
            let bpm = v.banks_per_mc;
            mcs.bank_backlogs(now, &mut v.backlog[mc * bpm..(mc + 1) * bpm]);
            for b in 0..bpm {
                v.open_row[mc * bpm + b] = mcs.banks.as_ref().map_or(u64::MAX, |x| x.open_row(b));
            }
        }
        let mut picks = std::mem::take(&mut self.picks);
        picks.clear();
        self.sched.pick(&self.q, &self.view, &mut picks);
        for &(entry, seq) in &picks {
            let Some(r) = self.q.take(entry, seq) else { continue };
            self.c.issued += 1;
            let slot = match self.free_issued.pop() {
                Some(s) => {
                    self.issued[s] = Some(r);
                    s
                }
                None => {
                    self.issued.push(Some(r));
                    self.issued.len() - 1
                }
            };
            m.mc_write(r.mc as usize, r.data, Some(Self::ev(PERSISTED, r.core as usize, slot as u64)));
        }
        let left = self.q.entries.iter().any(|e| !e.queued.is_empty());
        self.picks = picks;
        if left {
            // Writes queued at an MC start by themselves (a bank or the channel frees); look again
            // when the next one does, in case no acknowledgement comes first.
            if let Some(t) = m.mcs.iter().filter_map(|x| x.next_change_after(now)).min() {
                self.schedule_step(m, t.max(now + self.step_ps));
            }
            // A write completing at this very instant, whose completion event comes after this
            // step, frees its queue entry with nothing to wake the scheduler (its ACK went
            // out at acceptance): look again after it. Once per instant, so a completion that
            // never came could not spin here.
            if self.rechecked_at != now && m.mcs.iter().any(|x| x.retires_at(now)) {
                self.rechecked_at = now;
                self.schedule_step(m, now + self.step_ps);
            }
            if let Some(t) = self.sched.wake_at() {
                self.schedule_step(m, t.max(now + self.step_ps));
            }
        }
    }

    /// The MC side learns that an issued request persisted when the MC does: the scheduler's
    /// next barrier epoch need not wait for the acknowledgement's trip to the core (that
    /// would charge every epoch the ACK latency twice, tester P's P10).
    fn persisted(&mut self, m: &mut Machine, slot: usize) {
        let Some(r) = self.issued[slot] else { return };
        self.sched.on_persisted(&r);
        if self.q.persisted(r.entry as usize, r.key()) {
            self.sched.on_epoch_done(&self.q, r.entry as usize, r.key());
        }
        self.schedule_step(m, m.now + self.step_ps);
        m.schedule_design(m.now + m.ack_ps, Self::ev(ACK, r.core as usize, slot as u64));
    }

    /// The acknowledgement reaches the request's persist buffer (a core's or the remote one).
    fn ack(&mut self, m: &mut Machine, slot: usize) {
        let Some(r) = self.issued[slot].take() else { return };
        self.free_issued.push(slot);
        if r.entry as usize >= self.local_entries {
            // A remote entry is shared: whoever feeds it may have room now.
            for c in self.remote_from..self.cores.len() {
                self.kick(m, c);
            }
            for room in std::mem::take(&mut self.room_wait[r.entry as usize - self.local_entries]) {
                m.schedule_design(m.now, room);
            }
        }
        if r.core == NO_CORE {
            let ch = r.entry as usize - self.local_entries;
            self.remote_persisted[ch] += 1;
            if let Some(done) = self.remote_done.get_mut(r.pb_entry as usize).and_then(Option::take) {
                self.free_done.push(r.pb_entry as usize);
                m.schedule_design(m.now, done);
            }
            return;
        }
        let c = r.core as usize;
        let core = &mut self.cores[c];
        if core.pb.remove(m.now, r.pb_entry).is_none() {
            return;
        }
        m.persist_version += 1;
        m.note("ack", c, r.data.line);
        if let Some(e) = core.et.iter_mut().find(|e| e.ts == r.epoch) {
            e.pending -= 1;
        }
        if core.admit_stalled {
            core.admit_stalled = false;
            m.resume_drain(c);
        }
        self.advance(m, c);
        self.kick(m, c);
    }

    /// The entry point for remote persistent writes (an RDMA path's remote persist buffer):
    /// `data` joins remote channel `channel`'s BROI entry; `new_region` starts a new barrier
    /// region (an `rdma_pwrite` call). Returns false, taking nothing, if the entry has no room
    /// (the caller retries after an acknowledgement). Progress: [`Delegated::remote_persisted`].
    pub fn submit_remote(&mut self, m: &mut Machine, channel: usize, data: LineData, new_region: bool) -> bool {
        self.submit_remote_line(m, channel, data, new_region, None, None)
    }

    /// [`Delegated::submit_remote`] telling the submitter: `done` when the line persisted, `room`
    /// (if refused) when the entry frees a unit.
    fn submit_remote_line(
        &mut self,
        m: &mut Machine,
        channel: usize,
        data: LineData,
        new_region: bool,
        done: Option<DesignEv>,
        room: Option<DesignEv>,
    ) -> bool {
        let ch = channel % self.remote_entries;
        let entry = self.local_entries + ch;
        if new_region {
            self.remote_region[ch] += 1;
        }
        let epoch = self.remote_region[ch];
        if !self.q.has_room(entry, EpochKey { feed: NO_CORE, epoch }, self.slots, self.barrier_regs) {
            if new_region {
                self.remote_region[ch] -= 1;
            }
            // Every refused submitter waits: several RDMA channels may share this entry
            // (net.channels above broi.remote_entries), and a single slot lost all but the last.
            if let Some(room) = room {
                if !self.room_wait[ch].contains(&room) {
                    self.room_wait[ch].push(room);
                }
            }
            return false;
        }
        let done_slot = match done {
            None => u64::MAX,
            Some(ev) => match self.free_done.pop() {
                Some(s) => {
                    self.remote_done[s] = Some(ev);
                    s as u64
                }
                None => {
                    self.remote_done.push(Some(ev));
                    (self.remote_done.len() - 1) as u64
                }
            },
        };
        let mc = m.mc_of(data.line);
        let (bank, row) = m.mcs[mc].banks.as_ref().map_or((0, 0), |b| b.locate(data.line));
        let mut r = Req {
            seq: 0,
            entry: entry as u16,
            core: NO_CORE,
            epoch,
            pb_entry: done_slot,
            data,
            mc: mc as u16,
            bank: (mc * self.view.banks_per_mc + bank) as u16,
            row,
            arrive: m.now,
            tag: 0,
        };
        self.c.remote_submitted += 1;
        m.note("remote_submit", ch, data.line);
        self.q.stamp(&mut r);
        self.sched.on_arrive(&self.q, &mut r);
        self.q.push(r);
        self.schedule_step(m, m.now + self.step_ps);
        true
    }

    /// Requests of remote channel `channel` persisted so far.
    pub fn remote_persisted(&self, channel: usize) -> u64 {
        self.remote_persisted[channel % self.remote_entries]
    }
}

impl super::Design for Delegated {
    fn name(&self) -> &'static str {
        self.name
    }

    fn promise(&self) -> Promise {
        Promise::Ep
    }

    fn fence_blocks_core(&self, kind: Kind) -> bool {
        matches!(kind, Kind::Dfence | Kind::Sfence | Kind::Mfence)
    }

    fn maps_x86_fences(&self) -> bool {
        true
    }

    fn loads_wait_for_barriers(&self) -> bool {
        true
    }

    fn clflush_is_barrier(&self) -> bool {
        true
    }

    fn admit_store(&mut self, _m: &mut Machine, c: usize, line: u64) -> Result<(), StallCause> {
        let core = &mut self.cores[c];
        let epoch = core.cur().ts;
        if core.pb.admits(line, epoch) {
            Ok(())
        } else {
            core.admit_stalled = true;
            Err(StallCause::PbFull)
        }
    }

    fn on_store(&mut self, m: &mut Machine, c: usize, st: &PmStore) {
        let core = &mut self.cores[c];
        core.saw_flush |= st.nontemporal;
        let ts = core.cur().ts;
        core.cur().stores += 1;
        let (_, new) = core.pb.insert(m.now, &st.data, ts);
        if new {
            core.cur().pending += 1;
        }
        self.kick(m, c);
    }

    fn on_fence(&mut self, m: &mut Machine, c: usize, kind: Kind, _gid: u64) -> Step {
        if kind != Kind::Ofence {
            self.cores[c].saw_flush = false; // every other fence drains
        }
        match kind {
            Kind::Ofence => self.fence(m, c, false),
            Kind::Dfence => self.fence(m, c, true),
            _ => {
                self.c.sfence_as_dfence += 1;
                self.fence(m, c, true)
            }
        }
    }

    fn set_threads(&mut self, threads: usize) {
        // The remote-style stream is the trace's last threads, not idle cores past them.
        self.remote_from = threads.saturating_sub(self.remote_threads);
    }

    fn on_flush(&mut self, m: &mut Machine, c: usize, kind: Kind, _line: u64) -> Step {
        // Persist buffers carry every PM store; flushes are redundant, except as order: x86
        // orders a clflush (not clflushopt/clwb) with the thread's later stores, so what it
        // flushes persists before them (a program may order by clflush alone, with no sfence).
        self.c.clwb_ignored += 1;
        self.cores[c].saw_flush = true;
        if kind == Kind::Clflush {
            self.c.clflush_as_ofence += 1;
            return self.fence(m, c, false);
        }
        Step::Done
    }

    fn on_release(&mut self, m: &mut Machine, c: usize, _gid: u64) -> Step {
        // Legacy x86: a locked instruction (rmw, release) after flushes or non-temporal stores
        // orders and persists them, as an sfence does.
        if std::mem::take(&mut self.cores[c].saw_flush) {
            self.c.sfence_as_dfence += 1;
            return self.fence(m, c, true);
        }
        Step::Done
    }

    fn on_conflict(&mut self, m: &mut Machine, r: usize, c: &Conflict) {
        let s = c.source;
        if r == s {
            return;
        }
        let Some(target) = self.dep_target(m.hier.stamp(), s, c.seq) else {
            self.advance(m, s);
            return;
        };
        if target <= self.cores[s].persisted_upto {
            self.advance(m, s);
            return;
        }
        self.close_epoch(r, m.hier.stamp());
        self.c.deps += 1;
        let rc = &mut self.cores[r];
        let mine = rc.cur().ts;
        rc.cur().unresolved += 1;
        rc.deps.push((mine, s as u16, target));
        self.cores[s].dependents.push((target, r as u16));
        // Closing may have completed epochs that were only waiting to be closed.
        self.advance(m, s);
        self.advance(m, r);
    }

    fn on_llc_evict(&mut self, _m: &mut Machine, _line: u64, _dirty: bool) {
        // PM lines leaving the LLC are dropped: writes take the persist path.
    }

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        let c = ev.core as usize;
        match ev.tag {
            RELEASE => self.release_tick(m, c),
            ARRIVE => self.arrive(m, ev.arg as usize),
            STEP => self.step(m),
            PERSISTED => self.persisted(m, ev.arg as usize),
            ACK => self.ack(m, ev.arg as usize),
            DEP_DONE => self.dep_done(m, c, (ev.arg >> 48) as usize, ev.arg & ((1 << 48) - 1)),
            _ => {}
        }
    }

    fn has_remote_queue(&self) -> bool {
        true
    }

    fn submit_remote(
        &mut self,
        m: &mut Machine,
        channel: usize,
        data: LineData,
        new_region: bool,
        done: DesignEv,
        room: DesignEv,
    ) -> super::RemoteSubmit {
        if self.submit_remote_line(m, channel, data, new_region, Some(done), Some(room)) {
            super::RemoteSubmit::Taken
        } else {
            super::RemoteSubmit::Full
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.cores.iter().any(|c| !c.pb.is_empty()) || !self.q.is_empty() || self.issued.iter().any(Option::is_some)
    }

    fn crash_writes(&self, _m: &Machine, _out: &mut Vec<LineData>) {
        // Persist buffers and BROI queues are volatile.
    }

    fn stats(&self, m: &Machine, out: &mut DesignStats) {
        let pbs = active_pbs(m, self.cores.iter().map(|c| &c.pb));
        occupancy_stats(&pbs, m.now, out);
        out.insert("epochs".into(), self.c.epochs as f64);
        out.insert("cross_thread_deps".into(), self.c.deps as f64);
        out.insert("persist_requests".into(), self.c.issued as f64);
        out.insert("broi_entry_full_waits".into(), self.c.entry_full_waits as f64);
        out.insert("remote_submitted".into(), self.c.remote_submitted as f64);
        out.insert("sfence_as_dfence".into(), self.c.sfence_as_dfence as f64);
        out.insert("clwb_ignored".into(), self.c.clwb_ignored as f64);
        out.insert("clflush_as_ofence".into(), self.c.clflush_as_ofence as f64);
        self.sched.stats(out);
    }

    fn describe_core(&self, c: usize) -> String {
        let Some(core) = self.cores.get(c) else { return String::new() };
        let entry = self.entry_of(c);
        format!(
            "{}: PB {}/{}, epochs {:?}, persisted up to {}, {} deps open, BROI entry {} holds {} ({} queued)",
            self.name,
            core.pb.len(),
            core.pb.cap,
            core.et.iter().map(|e| (e.ts, e.pending, e.unresolved, e.closed)).collect::<Vec<_>>(),
            core.persisted_upto,
            core.deps.len(),
            entry,
            self.q.entries[entry].held(),
            self.q.entries[entry].queued.len()
        )
    }
}
