//! Buffered epoch persistency: the per-core persist buffer and epoch table that HOPS and ASAP
//! share, with the two flushing policies side by side.
//!
//! Stores enter the core's persist buffer (PB) tagged with the current epoch. Epochs end at
//! `ofence`/`dfence`; under epoch persistency also at a cross-core conflict seen by the
//! directory whose source access belongs to an epoch not yet committed (the requester starts a
//! new epoch depending on that one; the source closes it if it is still open), under release
//! persistency around every release and after an acquire that synchronises with another core's
//! release whose epochs have not all committed. A dependency on an epoch that already committed
//! orders nothing, so none is made (`et.dep_epoch = "current"`: the source's current epoch
//! instead, as the ASAP paper describes it, which orders far more).
//!
//! - **HOPS** flushes conservatively: only entries of the oldest unpersisted epoch, and only
//!   once its cross-thread dependencies are seen resolved in the global timestamp register,
//!   which the core polls (every `hops.poll_cycles`, `hops.access_cycles` per read).
//! - **ASAP** flushes eagerly: entries of later (unsafe) epochs go out marked *early* and the MC
//!   keeps undo/delay records ([`super::rt`]); an epoch commits when it is safe and complete,
//!   sending commit messages to the MCs that received its early flushes, in epoch order, and CDR
//!   messages to dependent cores once the MCs acknowledge. A NACK (recovery table full) makes the
//!   PB fall back to safe flushes until that epoch commits.
//!
//! A `dfence` waits until every earlier epoch has committed (HOPS: persisted). Test-only broken
//! variants switch off one mechanism each so the checker can be shown to catch them.

use super::pb::{active_pbs, occupancy_stats, EntryState, PersistBuffer};
use super::rt::{Layer, Record, RecordKind, RecoveryTable};
use super::{DesignStats, PmStore, Promise, Step};
use crate::config::{ns, Config};
use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::coherence::Conflict;
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;
use std::collections::VecDeque;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Hops,
    Asap,
}

/// Mechanisms a test-only broken variant switches off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Broken {
    pub no_undo: bool,
    pub no_delay: bool,
    pub commit_before_ack: bool,
    pub no_cross_thread_wait: bool,
    /// A `clflush` orders nothing (no ofence after it).
    pub clflush_unordered: bool,
}

/// `mc.count`'s maximum (config.rs).
const MAX_MCS: usize = 16;

const FLUSH: u16 = 1;
const ARRIVE: u16 = 2;
const ACK: u16 = 3;
const NACK: u16 = 4;
const UNDO_READ: u16 = 5;
const COMMIT_ARRIVE: u16 = 6;
const COMMIT_WRITE: u16 = 7;
const COMMIT_ACK: u16 = 8;
const CDR: u16 = 9;
const POLL: u16 = 10;
const POLL_DONE: u16 = 11;
const UNDO_ACCEPT: u16 = 12;
const SPLIT_ACCEPT: u16 = 13;
const LAYER_WAKE: u16 = 14;
/// `Record::ack_entry` when the flush was acknowledged at acceptance.
const NO_ACK: u64 = u64::MAX;

/// An MC and a line in one event argument: the MC in the top 6 bits, the line's index (its
/// address / 64, below 2^58 for every 64-bit address) in the others.
fn mc_line(mc: usize, line: u64) -> u64 {
    ((mc as u64) << 58) | (line >> 6)
}

fn of_mc_line(arg: u64) -> (usize, u64) {
    ((arg >> 58) as usize, (arg & ((1 << 58) - 1)) << 6)
}

#[derive(Clone, Debug)]
struct Dep {
    core: u16,
    ts: u64,
    resolved: bool,
}

#[derive(Clone, Debug)]
struct Epoch {
    ts: u64,
    /// The access stamp when the epoch opened ([`crate::mem::hierarchy::Hierarchy::stamp`]):
    /// an access with a larger stamp, and not larger than the next epoch's, belongs to it.
    opened_seq: u64,
    /// PB entries of this epoch not yet acknowledged.
    pending: u32,
    stores: u32,
    closed: bool,
    deps: Vec<Dep>,
    /// MCs that received early flushes of this epoch (bit per MC): those that may hold its
    /// undo or delay records, so its commit goes to them (ASAP §V-C). A bit clears when every
    /// early flush of the epoch to that MC came back NACKed: they left nothing there.
    early_mcs: u32,
    /// Per MC: early flushes of this epoch sent and not NACKed.
    early_sent: [u16; MAX_MCS],
    commit_acks: u32,
    committing: bool,
}

impl Epoch {
    /// Whether ending this epoch matters: it holds stores or waits for another thread.
    fn carries_order(&self) -> bool {
        self.stores > 0 || !self.deps.is_empty()
    }

    fn new(ts: u64, opened_seq: u64) -> Epoch {
        Epoch {
            ts,
            opened_seq,
            pending: 0,
            stores: 0,
            closed: false,
            deps: Vec::new(),
            early_mcs: 0,
            early_sent: [0; MAX_MCS],
            commit_acks: 0,
            committing: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FenceWait {
    /// dfence: every earlier epoch committed.
    Drain,
    /// A fence that must open a new epoch waits for a free epoch-table entry; a dfence then
    /// goes on to wait for durability (`drain`).
    EtSpace { drain: bool },
}

struct CoreP {
    pb: PersistBuffer,
    et: VecDeque<Epoch>,
    next_ts: u64,
    committed_upto: u64,
    /// Under RP, this core's releases whose epochs have not all committed: (when the release
    /// performed, the last epoch holding its accesses up to the release, its own write
    /// included). An acquire that synchronises with one waits for that epoch.
    releases: VecDeque<(u64, u64)>,
    /// (epoch ts of mine, dependent core) waiting for my commit.
    dependents: Vec<(u64, u16)>,
    flush_scheduled: bool,
    /// Fallback to safe-only flushing until this epoch commits (after a NACK).
    nack_until: Option<u64>,
    fence: Option<FenceWait>,
    admit_stalled: bool,
    blocked_since: Option<u64>,
    flush_stall_ps: u64,
    saw_flush: bool,
    poll_scheduled: bool,
    next_poll: u64,
    /// The global register as read by the poll in progress.
    poll_snapshot: Vec<u64>,
    /// The write-back buffer: private evictions of lines with queued PB entries, as (line, the
    /// id of the PB's tail entry at the eviction); each leaves when the PB has sent that entry.
    wbb: Vec<(u64, u64)>,
    /// Evictions that found the WBB full, in order (same form): the core's access that caused
    /// one waits, and no store enters the PB, until none is left.
    wbb_waiting: Vec<(u64, u64)>,
    /// LLC evictions this core's accesses caused of lines in their MC's Bloom filter (a NACKed
    /// flush still in a PB): held, as `wbb_waiting`, until the retry takes the line out.
    bloom_waiting: Vec<u64>,
}

/// A flush on its way to (or at) an MC.
#[derive(Clone, Copy)]
struct Packet {
    core: u16,
    entry: u64,
    epoch: u64,
    early: bool,
    /// The retry of a NACKed flush.
    retry: bool,
    data: LineData,
}

#[derive(Default)]
struct Counters {
    epochs: u64,
    deps: u64,
    early: u64,
    safe: u64,
    undo: u64,
    delay: u64,
    nacks: u64,
    commits_sent: u64,
    cdrs: u64,
    polls: u64,
    sfence_as_dfence: u64,
    clwb_ignored: u64,
    /// clflushes taken as an ofence (x86 orders them with later stores).
    clflush_as_ofence: u64,
    et_overflows: u64,
    bloom_hits: u64,
    wbb_max: u32,
    wbb_overflows: u64,
    pm_undo_reads: u64,
}

/// A safe write's memory part waiting for the WPQ while an undo record holds it (`Record::held`).
#[derive(Clone, Copy)]
struct SplitWrite {
    mc: usize,
    line: u64,
    /// The memory part's words.
    words: u8,
    /// The write's own reply, handled when the WPQ acknowledges the memory part.
    reply: Option<DesignEv>,
}

pub struct Buffered {
    name: &'static str,
    policy: Policy,
    promise: Promise,
    broken: Broken,
    cores: Vec<CoreP>,
    packets: Vec<Option<Packet>>,
    free_packets: Vec<usize>,
    rts: Vec<RecoveryTable>,
    /// Per MC, commits waiting for their delay writes: (core, ts, writes outstanding).
    commit_waits: Vec<Vec<(u16, u64, u32)>>,
    /// Safe writes split between an undo record and memory whose memory part the WPQ has not
    /// acknowledged yet. Slots are reused.
    split: Vec<Option<SplitWrite>>,
    /// A line's flushes may overlap in flight (`pb.line_flushes_overlap`).
    line_overlap: bool,
    /// Per MC, with overlapping line flushes: (core, line, PB entry) of each NACKed flush not yet
    /// retried; the core's later flushes of that line are NACKed until the retry arrives.
    nacked: Vec<Vec<(u16, u64, u64)>>,
    /// Acknowledge an early flush as soon as its undo record holds it (`rt.early_ack=accept`).
    ack_on_accept: bool,

    /// HOPS global timestamp register: per core, the newest persisted epoch.
    global_ts: Vec<u64>,
    et_cap: usize,
    wbb_cap: u32,
    flush_ps: u64,
    /// CDR message latency (`noc.cdr_ns`).
    cdr_ps: u64,
    /// Undo records read the old line from PM (`rt.undo_reads_pm`).
    undo_reads_pm: bool,
    /// Delay records are applied through the WPQ at commit (`rt.delay_through_wpq`).
    delay_through_wpq: bool,
    poll_ps: u64,
    poll_access_ps: u64,
    /// `et.dep_epoch = "current"`: a dependency waits for the source's current epoch.
    dep_on_current: bool,
    c: Counters,
    /// Scratch of `next_flush` (kept to avoid an allocation per flush tick).
    blockers: Vec<u64>,
}

impl Buffered {
    pub fn new(name: &'static str, policy: Policy, promise: Promise, cfg: &Config, broken: Broken) -> Buffered {
        let n = cfg.core.count.max(64);
        let cyc = cfg.cycle_ps();
        Buffered {
            name,
            policy,
            promise,
            broken,
            cores: (0..n)
                .map(|_| CoreP {
                    pb: PersistBuffer::new(cfg.pb.entries),
                    et: VecDeque::from([Epoch::new(1, 0)]),
                    next_ts: 2,
                    committed_upto: 0,
                    releases: VecDeque::new(),
                    dependents: Vec::new(),
                    flush_scheduled: false,
                    nack_until: None,
                    fence: None,
                    admit_stalled: false,
                    blocked_since: None,
                    flush_stall_ps: 0,
                    saw_flush: false,
                    poll_scheduled: false,
                    next_poll: 0,
                    poll_snapshot: Vec::new(),
                    wbb: Vec::new(),
                    wbb_waiting: Vec::new(),
                    bloom_waiting: Vec::new(),
                })
                .collect(),
            packets: Vec::new(),
            free_packets: Vec::new(),
            rts: (0..cfg.mc.count).map(|_| RecoveryTable::new(cfg.rt.entries, cfg.rt.bloom_counters)).collect(),
            commit_waits: vec![Vec::new(); cfg.mc.count],
            split: Vec::new(),
            line_overlap: cfg.pb.line_flushes_overlap,
            nacked: vec![Vec::new(); cfg.mc.count],
            ack_on_accept: cfg.rt.early_ack == "accept",
            global_ts: vec![0; n],
            et_cap: if policy == Policy::Asap { cfg.et.entries } else { usize::MAX },
            wbb_cap: cfg.pb.wbb_entries as u32,
            flush_ps: ns(cfg.pb.flush_ns),
            cdr_ps: ns(cfg.noc.cdr_ns),
            undo_reads_pm: cfg.rt.undo_reads_pm,
            delay_through_wpq: cfg.rt.delay_through_wpq,
            poll_ps: cfg.hops.poll_cycles * cyc,
            poll_access_ps: cfg.hops.access_cycles * cyc,
            dep_on_current: cfg.et.dep_epoch == "current",
            c: Counters::default(),
            blockers: Vec::new(),
        }
    }

    fn ev(tag: u16, core: usize, arg: u64) -> DesignEv {
        DesignEv { tag, core: core as u16, arg }
    }

    // ---- epochs -------------------------------------------------------------------------

    /// Ends the current epoch if it holds stores. `forced` splits (conflicts, releases) may
    /// exceed the epoch table; fences may not. Returns false if the table is full.
    fn close_epoch(&mut self, m: &mut Machine, c: usize, forced: bool) -> bool {
        let core = &mut self.cores[c];
        let cur = core.et.back().expect("current epoch");
        if !cur.carries_order() {
            return true;
        }
        // The table holds the closed, uncommitted epochs; the open one is the core's register.
        if core.et.len() > self.et_cap {
            if !forced {
                return false;
            }
            self.c.et_overflows += 1;
        }
        core.et.back_mut().expect("current epoch").closed = true;
        let ts = core.next_ts;
        core.next_ts += 1;
        core.et.push_back(Epoch::new(ts, m.hier.stamp()));
        self.c.epochs += 1;
        self.progress(m, c);
        true
    }

    /// The epoch of `s` a dependent must wait for: its current one if it holds stores (which
    /// then closes), else the last closed one. None if that has committed already.
    fn dep_target(&mut self, m: &mut Machine, s: usize) -> Option<u64> {
        let cur = self.cores[s].et.back().expect("current epoch");
        // An epoch without stores still carries its own dependencies: a dependent must wait for
        // it too, or order would not be transitive.
        let ts = if cur.carries_order() {
            let ts = cur.ts;
            self.close_epoch(m, s, true);
            ts
        } else {
            cur.ts - 1
        };
        (ts > self.cores[s].committed_upto).then_some(ts)
    }

    /// The epoch of `s` a dependent of its access stamped `seq` must wait for: the one the
    /// access belongs to (the last opened before it), or [`Self::dep_target`] if that is the
    /// open one. None if it has committed: the access's epoch, and every earlier one, is
    /// durable, so there is nothing to order.
    fn dep_target_at(&mut self, m: &mut Machine, s: usize, seq: u64) -> Option<u64> {
        let et = &self.cores[s].et;
        let i = et.iter().rposition(|e| e.opened_seq < seq)?;
        if i + 1 == et.len() {
            return self.dep_target(m, s);
        }
        let ts = et[i].ts;
        (ts > self.cores[s].committed_upto).then_some(ts)
    }

    /// `r`'s next stores depend on `s`'s epoch `ts`.
    fn add_dep(&mut self, m: &mut Machine, r: usize, s: usize, ts: u64) {
        // Already ordered: an epoch of `r` still in its table waits for that epoch of `s` or a
        // later one, and `r`'s epochs commit in order (an acquire's dependency, then a store to
        // the lock's line, found twice: no second dependency, no empty epoch split for it).
        if self.cores[r].et.iter().any(|e| e.deps.iter().any(|d| d.core as usize == s && d.ts >= ts)) {
            return;
        }
        self.close_epoch(m, r, true);
        self.c.deps += 1;
        let cur = self.cores[r].et.back_mut().expect("current epoch");
        if let Some(d) = cur.deps.iter_mut().find(|d| d.core as usize == s) {
            d.ts = d.ts.max(ts);
            d.resolved = false;
        } else {
            cur.deps.push(Dep { core: s as u16, ts, resolved: false });
        }
        self.cores[s].dependents.push((ts, r as u16));
        if self.policy == Policy::Hops {
            self.schedule_poll(m, r);
        }
    }

    fn deps_resolved(&self, e: &Epoch) -> bool {
        self.broken.no_cross_thread_wait || e.deps.iter().all(|d| d.resolved)
    }

    /// Is the epoch at position `i` of core `c`'s table safe (earlier ones committed, deps done)?
    fn safe(&self, c: usize, i: usize) -> bool {
        i == 0 && self.deps_resolved(&self.cores[c].et[0])
    }

    // ---- flushing -----------------------------------------------------------------------

    fn kick(&mut self, m: &mut Machine, c: usize) {
        if !self.cores[c].flush_scheduled {
            self.cores[c].flush_scheduled = true;
            m.schedule_design(m.now, Self::ev(FLUSH, c, 0));
        }
    }

    /// Index in the PB of the next entry the policy lets flush, and whether it would be early.
    fn next_flush(&mut self, c: usize) -> Option<(usize, bool)> {
        let core = &self.cores[c];
        let oldest = core.et.front().map(|e| e.ts).unwrap_or(u64::MAX);
        let oldest_safe = self.safe(c, 0);
        let early_ok = self.policy == Policy::Asap && core.nack_until.is_none();
        if !oldest_safe && !early_ok {
            // Only a safe entry could go, and none is.
            return None;
        }
        // Flushes of one line stay in order: an older entry still unacknowledged (in flight, or
        // NACKed and waiting to retry) goes first, so a retry never lands on newer data. With
        // overlapping line flushes only a queued older entry holds it back: the path delivers
        // in flight ones in order, and the MC NACKs what follows a NACKed one. One pass keeps
        // the lines of the entries seen so far that hold back later ones of their line.
        let blockers = &mut self.blockers;
        blockers.clear();
        for (i, e) in core.pb.entries.iter().enumerate() {
            let queued = e.state == EntryState::Queued;
            let line = e.data.line;
            if queued && !blockers.contains(&line) {
                if e.epoch == oldest && oldest_safe {
                    return Some((i, false));
                }
                if early_ok {
                    return Some((i, true));
                }
            }
            if queued || !self.line_overlap {
                blockers.push(line);
            }
        }
        None
    }

    fn flush_tick(&mut self, m: &mut Machine, c: usize) {
        self.cores[c].flush_scheduled = false;
        match self.next_flush(c) {
            Some((i, early)) => {
                if let Some(since) = self.cores[c].blocked_since.take() {
                    self.cores[c].flush_stall_ps += m.now - since;
                }
                let core = &mut self.cores[c];
                let e = &mut core.pb.entries[i];
                e.state = EntryState::InFlight { early };
                let pkt = Packet { core: c as u16, entry: e.id, epoch: e.epoch, early, retry: e.nacked, data: e.data };
                m.note(if early { "flush-early" } else { "flush" }, c, pkt.data.line);
                if early {
                    self.c.early += 1;
                    let mc = m.mc_of(pkt.data.line);
                    if let Some(ep) = self.cores[c].et.iter_mut().find(|x| x.ts == pkt.epoch) {
                        ep.early_mcs |= 1 << mc;
                        ep.early_sent[mc] += 1;
                    }
                } else {
                    self.c.safe += 1;
                }
                let slot = match self.free_packets.pop() {
                    Some(s) => {
                        self.packets[s] = Some(pkt);
                        s
                    }
                    None => {
                        self.packets.push(Some(pkt));
                        self.packets.len() - 1
                    }
                };
                m.schedule_design(m.now + self.flush_ps, Self::ev(ARRIVE, c, slot as u64));
                self.cores[c].flush_scheduled = true;
                m.schedule_design(m.now + m.cycle_ps, Self::ev(FLUSH, c, 0));
                if !self.cores[c].wbb.is_empty() {
                    self.wbb_release(m, c);
                }
            }
            None => {
                let core = &mut self.cores[c];
                if core.blocked_since.is_none() && core.pb.entries.iter().any(|e| e.state == EntryState::Queued) {
                    core.blocked_since = Some(m.now);
                }
                if self.policy == Policy::Hops {
                    self.schedule_poll(m, c);
                }
            }
        }
    }

    /// Frees the WBB entries whose tail entry the PB has sent; waiting evictions whose tail has
    /// gone meanwhile need none, the others take the free entries in order.
    fn wbb_release(&mut self, m: &mut Machine, c: usize) {
        let cap = self.wbb_cap as usize;
        let core = &mut self.cores[c];
        let pb = &core.pb;
        let held = |&(_, tail): &(u64, u64)| pb.get(tail).is_some_and(|e| e.state == EntryState::Queued);
        core.wbb.retain(held);
        if core.wbb_waiting.is_empty() {
            return;
        }
        core.wbb_waiting.retain(held);
        let n = core.wbb_waiting.len().min(cap - core.wbb.len().min(cap));
        core.wbb.extend(core.wbb_waiting.drain(..n));
        self.c.wbb_max = self.c.wbb_max.max(core.wbb.len() as u32);
        self.release_if_free(m, c);
    }

    /// Takes `line` out of MC `mc`'s Bloom filter (its NACKed write was retried) and lets go of
    /// the LLC evictions the filter no longer holds.
    fn bloom_remove(&mut self, m: &mut Machine, mc: usize, line: u64) {
        self.rts[mc].bloom_remove(line);
        for c in 0..self.cores.len() {
            if self.cores[c].bloom_waiting.is_empty() {
                continue;
            }
            let rts = &self.rts;
            self.cores[c].bloom_waiting.retain(|&l| rts[m.mc_of(l)].bloom_contains(l));
            self.release_if_free(m, c);
        }
    }

    /// Once no eviction of core `c` is held: the core goes on, and the store it refused enters.
    fn release_if_free(&mut self, m: &mut Machine, c: usize) {
        let core = &mut self.cores[c];
        if core.wbb_waiting.is_empty() && core.bloom_waiting.is_empty() {
            m.wake_held(c);
            if core.admit_stalled {
                core.admit_stalled = false;
                m.resume_drain(c);
            }
        }
    }

    fn on_ack(&mut self, m: &mut Machine, c: usize, entry: u64) {
        let core = &mut self.cores[c];
        let Some(e) = core.pb.remove(m.now, entry) else { return };
        m.persist_version += 1;
        m.note("ack", c, e.data.line);
        if let Some(ep) = core.et.iter_mut().find(|x| x.ts == e.epoch) {
            ep.pending -= 1;
        }
        if !core.wbb.is_empty() {
            self.wbb_release(m, c);
        }
        let core = &mut self.cores[c];
        if core.admit_stalled {
            core.admit_stalled = false;
            m.resume_drain(c);
        }
        self.progress(m, c);
    }

    fn on_nack(&mut self, m: &mut Machine, c: usize, entry: u64) {
        self.c.nacks += 1;
        m.note("nack", c, 0);
        let core = &mut self.cores[c];
        if let Some(e) = core.pb.get_mut(entry) {
            let was_early = e.state == (EntryState::InFlight { early: true });
            e.state = EntryState::Queued;
            e.nacked = true;
            let (ep, line) = (e.epoch, e.data.line);
            core.nack_until = Some(core.nack_until.map_or(ep, |x| x.max(ep)));
            if was_early {
                let mc = m.mc_of(line);
                if let Some(x) = core.et.iter_mut().find(|x| x.ts == ep) {
                    x.early_sent[mc] -= 1;
                    if x.early_sent[mc] == 0 {
                        x.early_mcs &= !(1 << mc);
                    }
                }
            }
        }
        self.kick(m, c);
    }

    /// Commits (ASAP) or persists (HOPS) every epoch that can, then restarts flushing and wakes
    /// whatever waited.
    fn progress(&mut self, m: &mut Machine, c: usize) {
        loop {
            let safe = self.safe(c, 0);
            let core = &mut self.cores[c];
            let Some(front) = core.et.front_mut() else { break };
            if front.committing || !(front.closed && front.pending == 0 && safe) {
                break;
            }
            if self.policy == Policy::Asap && front.early_mcs != 0 {
                front.committing = true;
                let ts = front.ts;
                let mut mask = front.early_mcs;
                front.commit_acks = mask.count_ones();
                while mask != 0 {
                    let mc = mask.trailing_zeros() as u64;
                    mask &= mask - 1;
                    self.c.commits_sent += 1;
                    m.schedule_design(m.now + m.hop_ps, Self::ev(COMMIT_ARRIVE, c, (mc << 48) | ts));
                }
                if self.broken.commit_before_ack {
                    self.committed(m, c);
                    continue;
                }
                break;
            }
            self.committed(m, c);
        }
        if let Some(FenceWait::EtSpace { drain }) = self.cores[c].fence {
            if self.cores[c].et.len() <= self.et_cap {
                // The fence's new epoch opens now that the table has room.
                self.cores[c].fence = if drain { Some(FenceWait::Drain) } else { None };
                self.close_epoch(m, c, true);
                if drain {
                    // The rest of its wait is the drain's, not the table's.
                    m.head_waits_instead(c, StallCause::Dfence);
                } else {
                    m.sb_head_done(c);
                }
            }
        }
        let core = &mut self.cores[c];
        if let Some(FenceWait::Drain) = core.fence {
            if core.et.len() == 1 && core.et[0].stores == 0 {
                core.fence = None;
                m.sb_head_done(c);
            }
        }
        self.kick(m, c);
    }

    /// The front epoch of `c` committed.
    fn committed(&mut self, m: &mut Machine, c: usize) {
        let core = &mut self.cores[c];
        let Some(e) = core.et.pop_front() else { return };
        core.committed_upto = e.ts;
        while core.releases.front().is_some_and(|&(_, upto)| upto <= e.ts) {
            core.releases.pop_front();
        }
        m.note("commit", c, e.ts);
        if core.et.is_empty() {
            let ts = core.next_ts;
            core.next_ts += 1;
            core.et.push_back(Epoch::new(ts, m.hier.stamp()));
        }
        if core.nack_until.is_some_and(|n| n <= e.ts) {
            core.nack_until = None;
        }
        self.global_ts[c] = e.ts;
        m.persist_version += 1;
        let upto = e.ts;
        let (ready, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.cores[c].dependents).into_iter().partition(|(ts, _)| *ts <= upto);
        self.cores[c].dependents = rest;
        if self.policy == Policy::Asap {
            for (_, d) in ready {
                self.c.cdrs += 1;
                m.schedule_design(m.now + self.cdr_ps, Self::ev(CDR, d as usize, ((c as u64) << 48) | upto));
            }
        }
    }

    fn on_cdr(&mut self, m: &mut Machine, d: usize, source: usize, upto: u64) {
        for e in self.cores[d].et.iter_mut() {
            for dep in e.deps.iter_mut() {
                if dep.core as usize == source && dep.ts <= upto {
                    dep.resolved = true;
                }
            }
        }
        self.progress(m, d);
    }

    // ---- HOPS polling -------------------------------------------------------------------

    fn schedule_poll(&mut self, m: &mut Machine, c: usize) {
        let core = &self.cores[c];
        let waiting = core.et.iter().any(|e| e.deps.iter().any(|d| !d.resolved));
        if !waiting || core.poll_scheduled {
            return;
        }
        let t = m.now.max(core.next_poll);
        self.cores[c].poll_scheduled = true;
        m.schedule_design(t, Self::ev(POLL, c, 0));
    }

    fn poll(&mut self, m: &mut Machine, c: usize) {
        self.c.polls += 1;
        self.cores[c].next_poll = m.now + self.poll_ps;
        self.cores[c].poll_snapshot.clone_from(&self.global_ts);
        // The register is read now; the value arrives after the access latency.
        m.schedule_design(m.now + self.poll_access_ps, Self::ev(POLL_DONE, c, m.now));
    }

    fn poll_done(&mut self, m: &mut Machine, c: usize, snapshot: Vec<u64>) {
        self.cores[c].poll_scheduled = false;
        for e in self.cores[c].et.iter_mut() {
            for d in e.deps.iter_mut() {
                if snapshot[d.core as usize] >= d.ts {
                    d.resolved = true;
                }
            }
        }
        self.progress(m, c);
        self.schedule_poll(m, c);
    }

    // ---- the memory-controller side -------------------------------------------------------

    fn arrive(&mut self, m: &mut Machine, slot: usize) {
        let Some(p) = self.packets[slot].take() else { return };
        self.free_packets.push(slot);
        let mc = m.mc_of(p.data.line);
        let ack = Self::ev(ACK, p.core as usize, p.entry);
        if self.line_overlap {
            // A later flush of a line whose older flush from this core was NACKed arrived before
            // that one's retry: it must not overtake it, so it is NACKed as well (even if safe:
            // the older one's epoch is then safe too, so its retry cannot wait on this one).
            // Every NACKed flush is remembered (entry ids grow with age), not only a line's
            // first: otherwise a third flush overtakes the second's retry once the first's
            // retry has arrived.
            let n = &mut self.nacked[mc];
            if let Some(i) = n.iter().position(|x| x.0 == p.core && x.1 == p.data.line && x.2 == p.entry) {
                n.swap_remove(i);
            }
            if n.iter().any(|x| x.0 == p.core && x.1 == p.data.line && x.2 < p.entry) {
                return self.nack(m, mc, p);
            }
        }
        if self.policy == Policy::Asap {
            // A write of an epoch that already has a delay record for this line is newer than the
            // delayed one: it joins the record (coalescing in the RT), or at commit the older
            // delayed value would land on top of it.
            if let Some(r) = self.rts[mc].records.iter_mut().find(|r| {
                r.kind == RecordKind::Delay && r.line == p.data.line && r.core == p.core && r.epoch == p.epoch
            }) {
                r.data.merge(&p.data);
                if p.retry {
                    self.bloom_remove(m, mc, p.data.line);
                }
                m.persist_version += 1;
                m.schedule_design(m.now + m.ack_ps, ack);
                return;
            }
        }
        if self.policy == Policy::Hops || !p.early {
            if p.retry {
                self.bloom_remove(m, mc, p.data.line);
            }
            self.safe_write(m, mc, p.data, Some(ack), Some((p.core, p.epoch)), false);
            return;
        }
        let has_undo = self.rts[mc].has_undo(p.data.line);
        if has_undo && self.broken.no_delay {
            // Broken: overwrite memory speculatively, keeping the first undo record only.
            if let Some(u) = self.rts[mc].undo_for(p.data.line) {
                u.spec |= p.data.mask;
            }
            m.mc_write(mc, p.data, Some(ack));
            return;
        }
        if self.broken.no_undo && !has_undo {
            m.mc_write(mc, p.data, Some(ack));
            return;
        }
        let rt = &mut self.rts[mc];
        if has_undo {
            // Table I, early flush with an undo record: delay it until its epoch commits.
            if rt.full() {
                return self.nack(m, mc, p);
            } else {
                rt.push(Record {
                    kind: RecordKind::Delay,
                    line: p.data.line,
                    core: p.core,
                    epoch: p.epoch,
                    data: p.data,
                    spec: 0,
                    reading: false,
                    fresh: 0,
                    pending_write: None,
                    ack_entry: p.entry,
                    accepted: true,
                    commit_pending: false,
                    held: 0,
                    spec_seq: 0,
                });
                self.c.delay += 1;
                m.note("delay", p.core as usize, p.data.line);
            }
            m.persist_version += 1;
            m.schedule_design(m.now + m.ack_ps, ack);
            return;
        }
        if rt.full() {
            return self.nack(m, mc, p);
        }
        // Table I, early flush without an undo record: read the old contents from PM, keep them
        // as the undo record, then write speculatively. The record (ADR domain) holds the write
        // meanwhile, so with `early_ack=accept` the flush is acknowledged now: a crash before the
        // read returns finds memory not yet updated and drops the uncommitted write.
        let ack_now = self.ack_on_accept;
        rt.push(Record {
            kind: RecordKind::Undo,
            line: p.data.line,
            core: p.core,
            epoch: p.epoch,
            data: LineData::new(p.data.line),
            spec: p.data.mask,
            reading: true,
            fresh: 0,
            pending_write: Some(p.data),
            ack_entry: if ack_now { NO_ACK } else { p.entry },
            accepted: false,
            commit_pending: false,
            held: 0,
            spec_seq: 0,
        });
        self.c.undo += 1;
        m.note("undo", p.core as usize, p.data.line);
        if ack_now {
            m.schedule_design(m.now + m.ack_ps, ack);
        }
        let read = Self::ev(UNDO_READ, p.core as usize, mc_line(mc, p.data.line));
        if self.undo_reads_pm {
            self.c.pm_undo_reads += 1;
            m.mc_read_local(mc, p.data.line, read);
        } else {
            // The artifact's free undo record: the old contents without a PM read.
            m.schedule_design(m.now, read);
        }
    }

    fn nack(&mut self, m: &mut Machine, mc: usize, p: Packet) {
        self.rts[mc].bloom_insert(p.data.line);
        if self.line_overlap && !self.nacked[mc].iter().any(|x| x.0 == p.core && x.1 == p.data.line && x.2 == p.entry) {
            self.nacked[mc].push((p.core, p.data.line, p.entry));
        }
        m.schedule_design(m.now + m.hop_ps, Self::ev(NACK, p.core as usize, p.entry));
    }

    /// A safe write (or a delay record applied at commit): words memory holds speculatively
    /// update the undo record instead (Table I, safe flush with an undo record); the rest go to
    /// memory.
    ///
    /// Table I assumes the undo record belongs to a later epoch. When it belongs to the writer's
    /// own epoch (a flush retried as safe after a NACK), the write is newer than the speculative
    /// one: it goes to memory and joins the speculative words the record can roll back.
    fn safe_write(
        &mut self,
        m: &mut Machine,
        mc: usize,
        data: LineData,
        reply: Option<DesignEv>,
        writer: Option<(u16, u64)>,
        functional: bool,
    ) {
        let mut to_mem = data;
        let layer_waits = self.rts[mc].layers.iter().any(|l| l.line == data.line);
        if let Some(u) = self.rts[mc].undo_for(data.line) {
            if writer == Some((u.core, u.epoch)) {
                u.spec |= data.mask;
                if u.reading {
                    // The speculative write still waits for the undo read: ride along with it so
                    // the two reach memory in order. The epoch cannot commit before that write's
                    // own ACK, so acknowledging this one now is safe.
                    match &mut u.pending_write {
                        Some(w) => w.merge(&data),
                        None => u.pending_write = Some(data),
                    }
                    if let Some(r) = reply {
                        m.schedule_design(m.now + m.ack_ps, r);
                    }
                } else if functional {
                    m.mc_apply_functional(mc, data, reply);
                } else {
                    m.mc_write(mc, data, reply);
                }
                return;
            }
            let absorbed = data.mask & u.spec;
            to_mem.mask &= !absorbed;
            // Behind an older write of the line that is not persistent, or behind a layer already
            // waiting, the record takes the write as a layer (`rt::Layer`).
            let older = m.mcs[mc].offered.checked_sub(1);
            if layer_waits || absorbed != 0 && older.is_some_and(|k| !m.mcs[mc].write_persistent(data.line, k)) {
                let l = Layer {
                    line: data.line,
                    owner: (u.core, u.epoch),
                    after: older.unwrap_or(0),
                    data,
                    absorbed,
                    held: 0,
                    reply,
                    split: None,
                };
                return self.layer_write(m, mc, data, to_mem, l, functional);
            }
            u.absorb(&data, absorbed, 0);
            m.persist_version += 1;
            if to_mem.mask != 0 && to_mem.mask != data.mask {
                // Split between the record and memory: the record holds the memory part too
                // until the WPQ takes it, or a crash while it waits for WPQ space (outside the
                // ADR domain) would keep the record's part alone, a torn line write (found by
                // the random x86 trace generator, seeds 16444 and 17188). A functional write
                // is held too: behind a queued write of its line that is not persistent yet
                // (media persistence) it persists only with that one (seed 12465).
                u.held |= to_mem.mask;
                let slot = self.split_slot(mc, data.line, to_mem.mask, reply);
                let accepted = Some(Self::ev(SPLIT_ACCEPT, 0, slot as u64));
                if functional {
                    m.mc_apply_functional(mc, to_mem, accepted);
                } else {
                    m.mc_write(mc, to_mem, accepted);
                }
                return;
            }
        }
        if to_mem.mask != 0 && functional {
            m.mc_apply_functional(mc, to_mem, reply);
        } else if to_mem.mask != 0 {
            m.mc_write(mc, to_mem, reply);
        } else if let Some(r) = reply {
            m.schedule_design(m.now + m.ack_ps, r);
        }
    }

    fn split_slot(&mut self, mc: usize, line: u64, words: u8, reply: Option<DesignEv>) -> usize {
        let slot = match self.split.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.split.push(None);
                self.split.len() - 1
            }
        };
        self.split[slot] = Some(SplitWrite { mc, line, words, reply });
        slot
    }

    /// A safe write an undo record takes as a layer: its memory part (`to_mem`) goes to memory
    /// now, in order with the line's other writes; the rest, and the reply of a write with no
    /// memory part, wait until the layer applies ([`Self::apply_layers`]). The memory part's
    /// reply waits for the layer too (`split_accept`).
    fn layer_write(
        &mut self,
        m: &mut Machine,
        mc: usize,
        data: LineData,
        to_mem: LineData,
        mut l: Layer,
        functional: bool,
    ) {
        let mut reply = None;
        if to_mem.mask != 0 {
            reply = l.reply.take();
            if to_mem.mask != data.mask {
                l.held = to_mem.mask;
                let slot = self.split_slot(mc, data.line, to_mem.mask, reply);
                l.split = Some(slot);
                reply = Some(Self::ev(SPLIT_ACCEPT, 0, slot as u64));
            }
        }
        let (line, after) = (l.line, l.after);
        self.rts[mc].layers.push(l);
        m.persist_version += 1;
        m.mc_when_persistent(mc, line, after, Self::ev(LAYER_WAKE, 0, mc_line(mc, line)));
        if to_mem.mask != 0 && functional {
            m.mc_apply_functional(mc, to_mem, reply);
        } else if to_mem.mask != 0 {
            m.mc_write(mc, to_mem, reply);
        }
    }

    /// Applies `line`'s leading layers whose older writes have persisted to their undo records
    /// (dropped if the record is gone) and sends their replies.
    fn apply_layers(&mut self, m: &mut Machine, mc: usize, line: u64) {
        let mut replies = Vec::new();
        let rt = &mut self.rts[mc];
        while let Some(i) = rt.layers.iter().position(|l| l.line == line) {
            let l = rt.layers[i];
            if !m.mcs[mc].write_persistent(line, l.after) {
                break;
            }
            rt.layers.remove(i);
            if let Some(u) = rt.owner_of(&l) {
                u.absorb(&l.data, l.absorbed, l.held);
            }
            replies.extend(l.reply);
        }
        m.persist_version += 1;
        for r in replies {
            self.forward(m, r);
        }
    }

    /// Handles a reply that waited here (for a split's memory part, or a layer) as if it had
    /// just arrived; the network model's (a remote line's) goes back through the event queue
    /// to the network.
    fn forward(&mut self, m: &mut Machine, r: DesignEv) {
        if crate::net::is_net(&r) {
            m.schedule_design(m.now, r);
        } else {
            super::Design::on_event(self, m, r);
        }
    }

    /// The WPQ acknowledged the memory part of a split safe write: the record stops holding
    /// those words (unless another split still waits for them), and the write's own reply is
    /// handled as it would have been.
    fn split_accept(&mut self, m: &mut Machine, slot: usize) {
        let Some(SplitWrite { mc, line, reply, .. }) = self.split.get_mut(slot).and_then(Option::take) else {
            return;
        };
        let still: u8 =
            self.split.iter().flatten().filter(|s| s.mc == mc && s.line == line).fold(0, |acc, s| acc | s.words);
        if let Some(u) = self.rts[mc].undo_for(line) {
            u.held &= still;
            m.persist_version += 1;
        }
        let mut reply = reply;
        for l in self.rts[mc].layers.iter_mut().filter(|l| l.line == line) {
            l.held &= still;
            if l.split == Some(slot) {
                // The layer has not applied: the write is acknowledged when it does.
                l.split = None;
                l.reply = reply.take();
            }
        }
        if let Some(r) = reply {
            self.forward(m, r);
        }
        self.apply_layers(m, mc, line);
    }

    fn undo_read_done(&mut self, m: &mut Machine, mc: usize, line: u64) {
        let old = m.persistent_line(line);
        let Some(u) =
            self.rts[mc].records.iter_mut().find(|r| r.kind == RecordKind::Undo && r.line == line && r.reading)
        else {
            return;
        };
        for i in 0..8 {
            if u.fresh & (1 << i) == 0 {
                let w = if old.mask & (1 << i) != 0 { old.ids[i] } else { pmsim_trace::INITIAL_ID };
                u.data.set(i, w);
            }
        }
        u.reading = false;
        let core = u.core as usize;
        match u.pending_write.take() {
            Some(w) => {
                u.spec_seq = m.mcs[mc].offered;
                m.mc_write(mc, w, Some(Self::ev(UNDO_ACCEPT, core, mc_line(mc, line))));
            }
            None => u.accepted = true,
        }
    }

    /// The WPQ took an undo record's speculative write (the reply crossed one hop, as an ACK
    /// would): acknowledge the flush if that waited for it, and finish a commit that did.
    fn undo_accept(&mut self, m: &mut Machine, mc: usize, line: u64) {
        let rt = &mut self.rts[mc];
        let Some(i) =
            rt.records.iter().position(|r| r.kind == RecordKind::Undo && r.line == line && !r.reading && !r.accepted)
        else {
            return;
        };
        let u = &mut rt.records[i];
        u.accepted = true;
        let (core, epoch) = (u.core as usize, u.epoch);
        if u.ack_entry != NO_ACK {
            m.schedule_design(m.now, Self::ev(ACK, core, u.ack_entry));
        }
        if u.commit_pending {
            rt.records.remove(i);
            m.persist_version += 1;
            self.commit_write_done(m, core, mc, epoch);
        }
    }

    fn commit_arrive(&mut self, m: &mut Machine, c: usize, mc: usize, ts: u64) {
        let rt = &mut self.rts[mc];
        // An undo record whose speculative write the WPQ has not taken yet (its PM read is in
        // flight, or the WPQ is full) still holds that write: the commit completes only once the
        // WPQ has it, like a delay record's write.
        let mut held = 0u32;
        rt.records.retain_mut(|r| {
            let mine = r.kind == RecordKind::Undo && r.core as usize == c && r.epoch == ts;
            if mine && (r.reading || !r.accepted) {
                r.commit_pending = true;
                held += 1;
                return true;
            }
            !mine
        });
        let mut delays = Vec::new();
        rt.records.retain(|r| {
            let mine = r.kind == RecordKind::Delay && r.core as usize == c && r.epoch == ts;
            if mine {
                delays.push(r.data);
            }
            !mine
        });
        m.persist_version += 1;
        if delays.is_empty() && held == 0 {
            m.schedule_design(m.now + m.hop_ps, Self::ev(COMMIT_ACK, c, ts));
            return;
        }
        self.commit_waits[mc].push((c as u16, ts, delays.len() as u32 + held));
        for d in delays {
            let reply = Self::ev(COMMIT_WRITE, c, ((mc as u64) << 48) | ts);
            // As the writer's own: an undo record of this epoch still held above is older.
            self.safe_write(m, mc, d, Some(reply), Some((c as u16, ts)), !self.delay_through_wpq);
        }
    }

    fn commit_write_done(&mut self, m: &mut Machine, c: usize, mc: usize, ts: u64) {
        let waits = &mut self.commit_waits[mc];
        if let Some(i) = waits.iter().position(|w| w.0 as usize == c && w.1 == ts) {
            waits[i].2 -= 1;
            if waits[i].2 == 0 {
                waits.remove(i);
                // The write's reply already crossed the network back to the core.
                self.commit_ack(m, c, ts);
            }
        }
    }

    fn commit_ack(&mut self, m: &mut Machine, c: usize, ts: u64) {
        let core = &mut self.cores[c];
        let Some(front) = core.et.front_mut() else { return };
        if front.ts != ts || !front.committing {
            return;
        }
        front.commit_acks -= 1;
        if front.commit_acks == 0 {
            self.committed(m, c);
            self.progress(m, c);
        }
    }

    fn fence(&mut self, m: &mut Machine, c: usize, drain: bool, cause: StallCause) -> Step {
        if !self.close_epoch(m, c, false) {
            self.cores[c].fence = Some(FenceWait::EtSpace { drain });
            return Step::Wait(StallCause::EtFull);
        }
        if drain {
            // close_epoch already ran `progress`; if epochs remain, `progress` completes the fence
            // later (never from inside this call, so the engine sees one answer).
            let core = &self.cores[c];
            if core.et.len() == 1 && core.et[0].stores == 0 {
                return Step::Done;
            }
            self.cores[c].fence = Some(FenceWait::Drain);
            return Step::Wait(cause);
        }
        Step::Done
    }
}

impl super::Design for Buffered {
    fn name(&self) -> &'static str {
        self.name
    }

    fn promise(&self) -> Promise {
        self.promise
    }

    fn fence_blocks_core(&self, kind: Kind) -> bool {
        matches!(kind, Kind::Dfence | Kind::Sfence | Kind::Mfence)
    }

    fn maps_x86_fences(&self) -> bool {
        true
    }

    fn loads_wait_for_barriers(&self) -> bool {
        self.promise == Promise::Ep
    }

    fn clflush_is_barrier(&self) -> bool {
        !self.broken.clflush_unordered
    }

    fn admit_store(&mut self, _m: &mut Machine, c: usize, line: u64) -> Result<(), StallCause> {
        let core = &mut self.cores[c];
        if !core.wbb_waiting.is_empty() || !core.bloom_waiting.is_empty() {
            // A held eviction: the L1 takes no line until it has gone.
            core.admit_stalled = true;
            return Err(if core.wbb_waiting.is_empty() { StallCause::Nack } else { StallCause::WbbFull });
        }
        let epoch = core.et.back().expect("current epoch").ts;
        if core.pb.admits(line, epoch) {
            Ok(())
        } else {
            core.admit_stalled = true;
            Err(if core.nack_until.is_some() { StallCause::Nack } else { StallCause::PbFull })
        }
    }

    fn on_store(&mut self, m: &mut Machine, c: usize, st: &PmStore) {
        let core = &mut self.cores[c];
        // x86 persists a non-temporal store at the thread's next sfence, as a flushed line.
        core.saw_flush |= st.nontemporal;
        let epoch = core.et.back_mut().expect("current epoch");
        epoch.stores += 1;
        let ts = epoch.ts;
        let (_, new) = core.pb.insert(m.now, &st.data, ts);
        if new {
            core.et.back_mut().expect("current epoch").pending += 1;
        }
        self.kick(m, c);
    }

    fn on_fence(&mut self, m: &mut Machine, c: usize, kind: Kind, _gid: u64) -> Step {
        match kind {
            Kind::Ofence => self.fence(m, c, false, StallCause::Fence),
            Kind::Dfence => {
                self.cores[c].saw_flush = false;
                self.fence(m, c, true, StallCause::Dfence)
            }
            _ => {
                // Legacy x86: an sfence/mfence after clwbs or ntstores is a durability point.
                if std::mem::take(&mut self.cores[c].saw_flush) {
                    self.c.sfence_as_dfence += 1;
                    self.fence(m, c, true, StallCause::Dfence)
                } else {
                    self.fence(m, c, false, StallCause::Fence)
                }
            }
        }
    }

    fn on_release(&mut self, m: &mut Machine, c: usize, _gid: u64) -> Step {
        // Legacy x86: a locked instruction (rmw, release) after clwbs or ntstores is a durability
        // point, as an sfence is (its epoch closes there, before the release's write, under RP).
        if std::mem::take(&mut self.cores[c].saw_flush) {
            self.c.sfence_as_dfence += 1;
            return self.fence(m, c, true, StallCause::Dfence);
        }
        if self.promise == Promise::Rp {
            // Stores before a release persist before the release's own write.
            if !self.close_epoch(m, c, false) {
                self.cores[c].fence = Some(FenceWait::EtSpace { drain: false });
                return Step::Wait(StallCause::EtFull);
            }
        }
        Step::Done
    }

    fn on_released(&mut self, m: &mut Machine, c: usize) {
        if self.promise == Promise::Rp {
            // The release's epoch ends with it, so acquirers wait for nothing later.
            self.close_epoch(m, c, true);
            let core = &mut self.cores[c];
            let upto = core.et.back().expect("current epoch").ts - 1;
            if upto > core.committed_upto {
                core.releases.push_back((m.now, upto));
            }
        }
    }

    fn on_acquire_at(&mut self, m: &mut Machine, c: usize, addr: u64, releaser: Option<usize>) {
        if self.promise != Promise::Rp {
            return;
        }
        let Some(r) = releaser else { return };
        if self.dep_on_current {
            if let Some(ts) = self.dep_target(m, r) {
                self.add_dep(m, c, r, ts);
            }
            return;
        }
        let Some(sync) = m.sync.get(&addr) else { return };
        // The release it synchronises with; gone from the list if its epochs have committed.
        let at = sync.released_at;
        let source = &self.cores[r];
        let Some(&(_, ts)) = source.releases.iter().rev().find(|&&(t, _)| t <= at) else { return };
        if ts > source.committed_upto {
            self.add_dep(m, c, r, ts);
        }
    }

    fn on_flush(&mut self, m: &mut Machine, c: usize, kind: Kind, _line: u64) -> Step {
        self.c.clwb_ignored += 1;
        self.cores[c].saw_flush = true;
        if kind == Kind::Clflush && !self.broken.clflush_unordered {
            // x86 orders a clflush (not clflushopt/clwb) with the thread's later stores: what it
            // flushes persists before them, fence or not (a program may order by clflush alone).
            self.c.clflush_as_ofence += 1;
            return self.fence(m, c, false, StallCause::Fence);
        }
        Step::Done
    }

    fn on_conflict(&mut self, m: &mut Machine, r: usize, c: &Conflict) {
        let s = c.source;
        // EP orders every conflict. RP orders what strong persist atomicity needs beyond its
        // synchronisation edges: a store to a line another core wrote last, so racing stores to
        // one word persist in the order they were performed (tracked per line, as EP is). A
        // volatile line counts too: design.md §6 orders stores to every word as performed, and
        // transitivity carries a persist order through them (`T0: st P; ofence; st V` /
        // `T1: st V; release R` orders P before R's own store; found by the random generator).
        let orders = match self.promise {
            Promise::Ep => true,
            Promise::Rp => c.source_wrote && c.requester_wrote,
            _ => false,
        };
        if !orders || r == s {
            return;
        }
        let target = if self.dep_on_current { self.dep_target(m, s) } else { self.dep_target_at(m, s, c.seq) };
        if let Some(ts) = target {
            self.add_dep(m, r, s, ts);
        }
    }

    fn on_llc_evict(&mut self, _m: &mut Machine, _line: u64, _dirty: bool) {
        // PM lines leaving the LLC are dropped: writes take the persist path.
    }

    fn holds_llc_eviction(&mut self, m: &mut Machine, c: usize, line: u64, _dirty: bool) -> Option<StallCause> {
        // A NACKed line still waiting in a PB (or a false positive of the counting filter) is
        // caught by its MC's Bloom filter: the eviction, and the access that caused it, wait
        // for the retry (ASAP §V-F).
        if !self.rts[m.mc_of(line)].bloom_contains(line) {
            return None;
        }
        self.c.bloom_hits += 1;
        self.cores[c].bloom_waiting.push(line);
        Some(StallCause::Nack)
    }

    fn on_private_evict(&mut self, _m: &mut Machine, c: usize, line: u64) -> bool {
        // The write-back buffer holds an eviction whose line the PB has yet to flush, so the
        // line's writer can still be found for cross-thread dependencies (ASAP §V-F).
        let core = &mut self.cores[c];
        if !core.pb.entries.iter().any(|e| e.data.line == line && e.state == EntryState::Queued) {
            return false;
        }
        let tail = core.pb.entries.back().map_or(0, |e| e.id);
        if core.wbb.len() < self.wbb_cap as usize && core.wbb_waiting.is_empty() {
            core.wbb.push((line, tail));
            self.c.wbb_max = self.c.wbb_max.max(core.wbb.len() as u32);
            false
        } else {
            self.c.wbb_overflows += 1;
            core.wbb_waiting.push((line, tail));
            true
        }
    }

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        let c = ev.core as usize;
        match ev.tag {
            FLUSH => self.flush_tick(m, c),
            ARRIVE => self.arrive(m, ev.arg as usize),
            ACK => self.on_ack(m, c, ev.arg),
            NACK => self.on_nack(m, c, ev.arg),
            UNDO_READ => {
                let (mc, line) = of_mc_line(ev.arg);
                self.undo_read_done(m, mc, line)
            }
            UNDO_ACCEPT => {
                let (mc, line) = of_mc_line(ev.arg);
                self.undo_accept(m, mc, line)
            }
            SPLIT_ACCEPT => self.split_accept(m, ev.arg as usize),
            LAYER_WAKE => {
                let (mc, line) = of_mc_line(ev.arg);
                self.apply_layers(m, mc, line)
            }
            COMMIT_ARRIVE => self.commit_arrive(m, c, (ev.arg >> 48) as usize, ev.arg & ((1 << 48) - 1)),
            COMMIT_WRITE => self.commit_write_done(m, c, (ev.arg >> 48) as usize, ev.arg & ((1 << 48) - 1)),
            COMMIT_ACK => self.commit_ack(m, c, ev.arg),
            CDR => self.on_cdr(m, c, (ev.arg >> 48) as usize, ev.arg & ((1 << 48) - 1)),
            POLL => self.poll(m, c),
            POLL_DONE => {
                let snap = std::mem::take(&mut self.cores[c].poll_snapshot);
                self.poll_done(m, c, snap)
            }
            _ => {}
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.cores.iter().any(|c| !c.pb.is_empty() || c.et.iter().any(|e| e.committing))
            || self.packets.iter().any(Option::is_some)
    }

    fn write_remote(&mut self, m: &mut Machine, mc: usize, data: LineData, accepted: DesignEv) {
        self.safe_write(m, mc, data, Some(accepted), None, false);
    }

    fn crash_writes(&self, m: &Machine, out: &mut Vec<LineData>) {
        // ASAP §V-E: after the WPQ drains, undo records restore speculatively written words.
        // A record whose speculative write is not persistent yet (its PM read is in flight, the
        // write waits for a WPQ entry, or under media persistence is not on the media yet)
        // restores only the words safe writes stored in it: its read may have seen writes still
        // pending ahead of it, which the crash loses. Words it holds for a split safe write
        // waiting for the WPQ go back too.
        for rt in &self.rts {
            for r in &rt.records {
                if r.kind != RecordKind::Undo {
                    continue;
                }
                let mc = &m.mcs[m.mc_of(r.line)];
                // Layers whose older writes have persisted count as applied.
                let mut r = *r;
                let (line, owner) = (r.line, (r.core, r.epoch));
                for l in rt.layers.iter().filter(|l| l.line == line && l.owner == owner) {
                    if !mc.write_persistent(l.line, l.after) {
                        break;
                    }
                    r.absorb(&l.data, l.absorbed, l.held);
                }
                let spec_persistent = !r.reading && mc.write_persistent(r.line, r.spec_seq);
                let words = (if spec_persistent { r.spec } else { r.fresh & r.spec }) | r.held;
                if words == 0 {
                    continue;
                }
                let mut d = LineData::new(r.line);
                for i in 0..8 {
                    if words & (1 << i) != 0 {
                        d.set(i, r.data.ids[i]);
                    }
                }
                out.push(d);
            }
        }
    }

    fn stats(&self, m: &Machine, out: &mut DesignStats) {
        let threads = m.cores.iter().filter(|c| c.stats.events > 0).count().max(1);
        let pbs = active_pbs(m, self.cores.iter().map(|c| &c.pb));
        occupancy_stats(&pbs, m.now, out);
        let exec_ms = m.cores.iter().map(|c| c.stats.finish_ps).max().unwrap_or(0) as f64 / 1e9;
        let stall_ps: u64 = self.cores.iter().map(|c| c.flush_stall_ps).sum();
        let cyc = m.cycle_ps.max(1);
        out.insert("epochs".into(), self.c.epochs as f64);
        out.insert("cross_thread_deps".into(), self.c.deps as f64);
        if exec_ms > 0.0 {
            out.insert("epochs_per_ms".into(), self.c.epochs as f64 / exec_ms);
            out.insert("cross_thread_deps_per_ms".into(), self.c.deps as f64 / exec_ms);
        }
        out.insert("flush_stall_cycles".into(), (stall_ps / cyc) as f64);
        let total_ps = exec_ms * 1e9 * threads as f64;
        out.insert("flush_stall_pct".into(), if total_ps > 0.0 { 100.0 * stall_ps as f64 / total_ps } else { 0.0 });
        out.insert("safe_flushes".into(), self.c.safe as f64);
        out.insert("sfence_as_dfence".into(), self.c.sfence_as_dfence as f64);
        out.insert("clwb_ignored".into(), self.c.clwb_ignored as f64);
        out.insert("clflush_as_ofence".into(), self.c.clflush_as_ofence as f64);
        match self.policy {
            Policy::Asap => {
                out.insert("early_flushes".into(), self.c.early as f64);
                out.insert("undo_records".into(), self.c.undo as f64);
                out.insert("delay_records".into(), self.c.delay as f64);
                out.insert("nacks".into(), self.c.nacks as f64);
                out.insert("commit_messages".into(), self.c.commits_sent as f64);
                out.insert("cdr_messages".into(), self.c.cdrs as f64);
                out.insert(
                    "rt_occupancy_max".into(),
                    self.rts.iter().map(|r| r.max_occupancy).max().unwrap_or(0) as f64,
                );
                out.insert("et_overflows".into(), self.c.et_overflows as f64);
                out.insert("bloom_hits".into(), self.c.bloom_hits as f64);
                out.insert("wbb_max".into(), self.c.wbb_max as f64);
                out.insert("wbb_overflows".into(), self.c.wbb_overflows as f64);
                out.insert("undo_pm_reads".into(), self.c.pm_undo_reads as f64);
            }
            Policy::Hops => {
                out.insert("polls".into(), self.c.polls as f64);
            }
        }
    }

    fn describe_core(&self, c: usize) -> String {
        let Some(core) = self.cores.get(c) else {
            return format!("{} packets in flight", self.packets.iter().filter(|p| p.is_some()).count());
        };
        let epochs: Vec<String> = core
            .et
            .iter()
            .map(|e| {
                let deps: Vec<String> = e
                    .deps
                    .iter()
                    .map(|d| format!("T{}:{}{}", d.core, d.ts, if d.resolved { "✓" } else { "" }))
                    .collect();
                format!(
                    "E{}[{}st {}pend{}{}{}]",
                    e.ts,
                    e.stores,
                    e.pending,
                    if e.closed { " closed" } else { "" },
                    if e.committing { " committing" } else { "" },
                    if deps.is_empty() { String::new() } else { format!(" deps {}", deps.join(",")) }
                )
            })
            .collect();
        format!(
            "{}: PB {}/{} entries, epochs {}, committed up to {}{}",
            self.name,
            core.pb.len(),
            core.pb.cap,
            epochs.join(" "),
            core.committed_upto,
            if core.nack_until.is_some() { ", NACK fallback" } else { "" }
        )
    }
}
