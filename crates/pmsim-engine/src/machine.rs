//! The hardware state every design acts on, and the event queue.
//!
//! [`Machine`] holds the cores' store buffers and stall state, the cache hierarchy, the memory
//! controllers, the NVM and coherent memory, the synchronisation replay state and the run
//! record. The timing loop (`sim.rs`) owns it together with the design, so a design gets
//! `&mut Machine` at each call and never needs to reach back into the loop.
//!
//! Time is in picoseconds. Events are ordered by (time, insertion sequence), so the same inputs
//! give the same run on any host.

use crate::config::{ns, Config};
use crate::mem::hierarchy::Hierarchy;
use crate::mem::mc::{self, AddressMapper, Mc};
use crate::mem::nvm::{word_index, CoherentMemory, LineData, Nvm, WordValues};
use pmsim_trace::{Kind, PmRange, RunRecord, LINE_BYTES};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// One entry of the optional event log (what a design did, for tests and debugging).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Note {
    pub time: u64,
    pub core: u16,
    pub what: &'static str,
    pub line: u64,
}

/// A design's own event: what `tag` and `arg` mean is the design's business, except the
/// [`AT_MC`] range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DesignEv {
    pub tag: u16,
    pub core: u16,
    pub arg: u64,
}

/// The tag range (`AT_MC | n`, n < 0x1000) of a [`DesignEv`] given to an MC as a write's reply
/// that goes to a controller at the MC itself (the delegated designs' MC-side scheduler): it
/// arrives when the write is persistent, with no `noc.ack_ns` crossing back to a core. Designs
/// number their own tags below 0x1000; the RDMA network's are 0xF000 and up.
pub const AT_MC: u16 = 0xE000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Ev {
    /// Core resumes executing its trace.
    Core(u16),
    /// The head of the core's store buffer performs.
    Drain(u16),
    /// A media write may have completed at this MC.
    McDone(u16),
    Design(DesignEv),
}

/// A queued event with its ordering key (time, insertion sequence). The event is stored
/// encoded in two aligned words (`code`: variant << 32 | design tag << 16 | core or MC; `arg`),
/// so entries are 32 bytes and move as plain words.
#[derive(Clone, Copy, Debug)]
struct QEntry {
    /// time << 64 | sequence: one integer comparison orders entries.
    key: u128,
    code: u64,
    arg: u64,
}

impl QEntry {
    #[inline(always)]
    fn new(t: u64, seq: u64, ev: Ev) -> QEntry {
        let (code, arg) = match ev {
            Ev::Core(c) => (c as u64, 0),
            Ev::Drain(c) => (1 << 32 | c as u64, 0),
            Ev::McDone(m) => (2 << 32 | m as u64, 0),
            Ev::Design(d) => (3 << 32 | (d.tag as u64) << 16 | d.core as u64, d.arg),
        };
        QEntry { key: (t as u128) << 64 | seq as u128, code, arg }
    }

    #[inline(always)]
    fn t(&self) -> u64 {
        (self.key >> 64) as u64
    }

    #[inline(always)]
    fn ev(&self) -> Ev {
        let low = self.code as u16;
        match self.code >> 32 {
            0 => Ev::Core(low),
            1 => Ev::Drain(low),
            2 => Ev::McDone(low),
            _ => Ev::Design(DesignEv { tag: (self.code >> 16) as u16, core: low, arg: self.arg }),
        }
    }
}

/// Children per heap node: four 32-byte entries share two cache lines, and the heap is half as
/// deep as a binary one.
const ARITY: usize = 4;

/// The event queue: a 4-ary min-heap on (time, sequence) plus a FIFO for events scheduled at
/// the current time (most drains and wake-ups), which arrive in sequence order and so need no
/// sorting. Pops take the smaller key of the two heads, so the order is exactly (time, sequence).
#[derive(Default)]
struct EventQueue {
    heap: Vec<QEntry>,
    /// `fifo[head..]`, sorted by (time, sequence): entries are only pushed while their time is
    /// not earlier than the last one's, and sequences only grow. Reset whenever it empties.
    fifo: Vec<QEntry>,
    head: usize,
}

impl EventQueue {
    #[inline(always)]
    fn push(&mut self, e: QEntry, now: u64) {
        if e.t() == now && self.fifo.last().is_none_or(|b| b.key <= e.key) {
            self.fifo.push(e);
        } else {
            self.heap_push(e.key, e.code, e.arg);
        }
    }

    /// Inlined, and the entry taken as scalars: out of line it received a stack copy whose
    /// first 16-byte load straddled the caller's two 8-byte stores (a failed store-to-load
    /// forward, ~60% of its samples); inlined, the entry stays in registers.
    #[inline(always)]
    fn heap_push(&mut self, key: u128, code: u64, arg: u64) {
        let e = QEntry { key, code, arg };
        let h = &mut self.heap;
        let mut i = h.len();
        h.push(e);
        while i > 0 {
            let p = (i - 1) / ARITY;
            if e.key < h[p].key {
                h[i] = h[p];
                i = p;
            } else {
                break;
            }
        }
        h[i] = e;
    }

    #[inline]
    fn heap_pop(&mut self) -> Option<QEntry> {
        let h = &mut self.heap;
        let last = h.pop()?;
        let n = h.len();
        if n == 0 {
            return Some(last);
        }
        let top = h[0];
        // Sift the last element down from the root: at each level the smallest of up to ARITY
        // children (adjacent in memory) moves up while it is smaller than `last`.
        let mut i = 0;
        loop {
            let first = ARITY * i + 1;
            if first >= n {
                break;
            }
            let end = (first + ARITY).min(n);
            let mut c = first;
            let mut ck = h[first].key;
            // The index is the point: the smallest child's position becomes the hole.
            #[allow(clippy::needless_range_loop)]
            for j in first + 1..end {
                let k = h[j].key;
                if k < ck {
                    c = j;
                    ck = k;
                }
            }
            if ck < last.key {
                h[i] = h[c];
                i = c;
            } else {
                break;
            }
        }
        h[i] = last;
        Some(top)
    }

    #[inline(always)]
    fn pop(&mut self) -> Option<QEntry> {
        self.pop_until(u64::MAX)
    }

    /// Pops the smallest entry if its time is not after `limit`.
    #[inline(always)]
    fn pop_until(&mut self, limit: u64) -> Option<QEntry> {
        let (from_fifo, t) = match (self.fifo.get(self.head), self.heap.first()) {
            (Some(f), Some(h)) if f.key < h.key => (true, f.t()),
            (Some(f), None) => (true, f.t()),
            (_, Some(h)) => (false, h.t()),
            (None, None) => return None,
        };
        if t > limit {
            return None;
        }
        if from_fifo {
            let e = self.fifo[self.head];
            self.head += 1;
            if self.head == self.fifo.len() {
                self.fifo.clear();
                self.head = 0;
            }
            Some(e)
        } else {
            self.heap_pop()
        }
    }

    #[inline(always)]
    fn peek_time(&self) -> Option<u64> {
        match (self.fifo.get(self.head), self.heap.first()) {
            (Some(f), Some(h)) => Some(f.t().min(h.t())),
            (Some(f), None) => Some(f.t()),
            (None, Some(h)) => Some(h.t()),
            (None, None) => None,
        }
    }

    fn len(&self) -> usize {
        self.heap.len() + self.fifo.len() - self.head
    }
}

/// Why a core (or its store buffer) is not making progress. Names are stable stats keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StallCause {
    /// Store buffer full while its head is only waiting for coherence.
    SbFull,
    /// Persist buffer full.
    PbFull,
    /// Epoch table full.
    EtFull,
    /// Flushes NACKed; the persist buffer fell back to conservative flushing.
    Nack,
    /// Waiting at an ordering fence (ofence, sfence, mfence, or a release's flush).
    Fence,
    /// Waiting at a durability fence.
    Dfence,
    /// Waiting for a synchronisation predecessor in global order.
    Sync,
    /// Waiting for the store buffer to drain before an atomic.
    Atomic,
    /// Write-back buffer full (ASAP).
    WbbFull,
    /// Another core's persist buffer holds the line (BBB keeps one copy per line).
    PbConflict,
    /// A remote-persistence client waiting for persist ACKs (`rdma_pwrite` under sync, a full
    /// send queue, `rdma_wait`).
    Rdma,
    /// Every write-combining buffer holds a non-temporal write its MC has not accepted yet.
    WcFull,
    /// An LLC write-back to an MC whose write queue is full with writes already waiting.
    WpqFull,
}

impl StallCause {
    /// A design structure that refuses the store buffer's head (full, or holding an eviction).
    pub fn is_structural(self) -> bool {
        matches!(
            self,
            StallCause::PbFull
                | StallCause::EtFull
                | StallCause::Nack
                | StallCause::WbbFull
                | StallCause::PbConflict
                | StallCause::WcFull
        )
    }

    pub const ALL: [StallCause; 13] = [
        StallCause::SbFull,
        StallCause::PbFull,
        StallCause::EtFull,
        StallCause::Nack,
        StallCause::Fence,
        StallCause::Dfence,
        StallCause::Sync,
        StallCause::Atomic,
        StallCause::WbbFull,
        StallCause::PbConflict,
        StallCause::Rdma,
        StallCause::WcFull,
        StallCause::WpqFull,
    ];
    pub fn name(self) -> &'static str {
        match self {
            StallCause::SbFull => "sb_full",
            StallCause::PbFull => "pb_full",
            StallCause::EtFull => "et_full",
            StallCause::Nack => "nack",
            StallCause::Fence => "fence",
            StallCause::Dfence => "dfence",
            StallCause::Sync => "sync",
            StallCause::Atomic => "atomic",
            StallCause::WbbFull => "wbb_full",
            StallCause::PbConflict => "pb_conflict",
            StallCause::Rdma => "rdma",
            StallCause::WcFull => "wc_full",
            StallCause::WpqFull => "wpq_full",
        }
    }
}

/// A store-buffer entry: a store waiting to perform, or an ordering point.
#[derive(Clone, Copy, Debug)]
pub struct SbEntry {
    pub seq: u64,
    pub kind: Kind,
    pub gid: u64,
    pub addr: u64,
    pub size: u8,
    /// Sync ordinal (release/rmw).
    pub aux: u32,
    pub has_value: bool,
    /// When the head may proceed: the store's prefetch has brought the line, or (once
    /// performed) the ownership grant has completed.
    pub ready_at: u64,
    /// The store has performed (visible); it retires at `ready_at`.
    pub performed: bool,
}

#[derive(Clone, Debug, Default)]
pub struct CoreStats {
    pub instructions: u64,
    pub events: u64,
    pub loads: u64,
    pub stores: u64,
    pub pm_stores: u64,
    pub load_latency_ps: u64,
    pub stall_ps: [u64; StallCause::ALL.len()],
    pub finish_ps: u64,
    pub ops: u64,
    pub op_latency_ps: u64,
    pub op_latency_max_ps: u64,
    /// When this core performed its first `begin`: the region of interest starts at the
    /// earliest of these (a workload's load phase before it is not throughput).
    pub first_begin_ps: Option<u64>,
    /// When this core performed its last `end`.
    pub last_end_ps: u64,
}

/// One core's hardware state outside the trace cursor.
pub struct CoreHw {
    pub sb: VecDeque<SbEntry>,
    /// The store-buffer entries' values (front = head's), kept only while tracking data: timing
    /// never reads them.
    pub sb_values: VecDeque<[u8; 64]>,
    pub sb_cap: usize,
    pub next_seq: u64,
    /// Local time: when the core can issue its next instruction.
    pub time: u64,
    pub drain_scheduled: bool,
    /// The design finished with the head after returning `Wait`.
    pub head_done: bool,
    /// Why the head cannot retire (None while it is just in flight).
    pub drain_stall: Option<StallCause>,
    /// The core is blocked: why, and since when.
    pub blocked: Option<(StallCause, u64)>,
    /// What the core itself waits for behind its store buffer (a full buffer, an atomic, a
    /// fence, an EP load behind a barrier) while `blocked` may name the design structure that
    /// refuses the buffer's head instead; `None` when the core is not waiting behind the buffer.
    pub blocked_own: Option<StallCause>,
    pub wait_seq: Option<u64>,
    pub wait_sb_space: bool,
    pub wait_sb_empty: bool,
    pub finished: bool,
    /// The thread has no more events; it finishes when its store buffer empties.
    pub ending: bool,
    pub op_start: u64,
    pub stats: CoreStats,
}

/// Per-address replay state of synchronisation events.
#[derive(Default)]
pub struct SyncAddr {
    /// How many sync events on this address have performed.
    pub performed: u32,
    /// How many of them were releasing (release, rmw).
    pub released: u32,
    /// Core that performed the last release or rmw on it.
    pub last_releaser: Option<u16>,
    /// When the last release or rmw on it performed (ps).
    pub released_at: u64,
    /// When the last release or rmw on it finished taking its line (ps): the next one cannot
    /// take the line from its core before then, so contended rmws serialise on the transfers.
    pub line_free_at: u64,
    /// Cores waiting to perform a sync event on this address (at most one per core).
    pub waiters: Vec<SyncWaiter>,
}

/// A core blocked on a sync event whose predecessors (see `pmsim_trace::Event::aux`) have not
/// all performed.
#[derive(Clone, Copy)]
pub struct SyncWaiter {
    pub core: u16,
    /// The event is an acquire (waits on `released`), else a release/rmw (waits on `performed`).
    pub acquire: bool,
    pub need: u32,
    /// Blocked at the store buffer's head (release/rmw) rather than at issue (acquire).
    pub drain: bool,
}

impl SyncAddr {
    pub fn ready(&self, acquire: bool, need: u32) -> bool {
        if acquire {
            self.released >= need
        } else {
            self.performed >= need
        }
    }
}

pub struct Machine {
    pub cfg: Config,
    pub now: u64,
    queue: EventQueue,
    qseq: u64,
    pub cores: Vec<CoreHw>,
    pub hier: Hierarchy,
    pub mcs: Vec<Mc<DesignEv>>,
    mapper: Box<dyn AddressMapper>,
    pub nvm: Nvm,
    pub coherent: CoherentMemory,
    /// The value of each (word, store) of `coherent` and `nvm` (only while tracking data).
    pub values: WordValues,
    pub pm: Vec<PmRange>,
    pub sync: FxHashMap<u64, SyncAddr>,
    pub record: Option<RunRecord>,
    /// NVM lines written since the crash-image tracker last looked (only while tracking data).
    pub nvm_written: Vec<u64>,
    /// Lines whose coherent contents changed since the crash-image tracker last looked (only
    /// while a tracker of a design whose crash image is coherent memory asks for it).
    pub coherent_written: Option<Vec<u64>>,
    /// Design actions, when enabled (`Simulator::enable_log`).
    pub log: Option<Vec<Note>>,
    /// Keep word values and identities (coherent memory, NVM). Timing never depends on them, so
    /// timing-only runs turn this off; crash checking and recovery turn it on. Set before the run
    /// starts (the store buffers keep values only while it is on).
    pub track_data: bool,
    /// Bumped whenever the persistent state (NVM, WPQs, a design's domain) changes.
    pub persist_version: u64,
    pub hop_ps: u64,
    /// An MC's ACK of an accepted write back to its sender (`noc.ack_ns`).
    pub ack_ps: u64,
    /// Line write-back from a core to an MC (clwb, LLC write-back).
    pub writeback_ps: u64,
    pub cycle_ps: u64,
    /// L1 hit latency (a store-buffer forward, a grant that hits).
    pub l1_ps: u64,
    mc_accepted: Vec<(Option<DesignEv>, u64)>,
    /// Per MC: cores whose access made an LLC write-back to it while its writes were waiting
    /// for the WPQ (`hold_for_mc`); woken when none waits.
    mc_held: Vec<Vec<u16>>,
    pub events_processed: u64,
}

impl Machine {
    pub fn new(cfg: &Config, pm: Vec<PmRange>, record: bool) -> Machine {
        let n = cfg.core.count;
        let cores = (0..n)
            .map(|_| CoreHw {
                sb: VecDeque::with_capacity(cfg.core.store_buffer),
                sb_values: VecDeque::new(),
                sb_cap: cfg.core.store_buffer,
                next_seq: 0,
                time: 0,
                drain_scheduled: false,
                head_done: false,
                drain_stall: None,
                blocked: None,
                blocked_own: None,
                wait_seq: None,
                wait_sb_space: false,
                wait_sb_empty: false,
                finished: false,
                ending: false,
                op_start: 0,
                stats: CoreStats::default(),
            })
            .collect();
        Machine {
            cfg: cfg.clone(),
            now: 0,
            queue: EventQueue::default(),
            qseq: 0,
            cores,
            hier: Hierarchy::new(cfg),
            mcs: (0..cfg.mc.count).map(|_| Mc::new(cfg)).collect(),
            mapper: mc::mapper(cfg),
            nvm: Nvm::default(),
            coherent: CoherentMemory::default(),
            values: WordValues::default(),
            pm,
            sync: FxHashMap::default(),
            record: if record { Some(RunRecord::default()) } else { None },
            track_data: true,
            nvm_written: Vec::new(),
            coherent_written: None,
            log: None,
            persist_version: 0,
            hop_ps: ns(cfg.noc.hop_ns),
            ack_ps: ns(cfg.noc.ack_ns),
            writeback_ps: ns(cfg.noc.writeback_ns),
            cycle_ps: cfg.cycle_ps(),
            l1_ps: ns(cfg.l1.latency_ns),
            mc_accepted: Vec::new(),
            mc_held: vec![Vec::new(); cfg.mc.count],
            events_processed: 0,
        }
    }

    /// Logs a design action if the log is enabled.
    #[inline]
    pub fn note(&mut self, what: &'static str, core: usize, line: u64) {
        if let Some(l) = &mut self.log {
            l.push(Note { time: self.now, core: core as u16, what, line });
        }
    }

    #[inline]
    pub fn is_pm(&self, addr: u64) -> bool {
        self.pm.iter().any(|r| r.contains(addr))
    }

    #[inline]
    pub fn schedule(&mut self, t: u64, ev: Ev) {
        debug_assert!(t >= self.now, "event in the past");
        self.qseq += 1;
        self.queue.push(QEntry::new(t, self.qseq, ev), self.now);
    }

    /// Schedules one of the design's own events at `t`.
    pub fn schedule_design(&mut self, t: u64, ev: DesignEv) {
        self.schedule(t, Ev::Design(ev));
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(u64, Ev)> {
        self.queue.pop().map(|e| (e.t(), e.ev()))
    }

    #[inline]
    pub fn peek_time(&self) -> Option<u64> {
        self.queue.peek_time()
    }

    /// Pops the next event if it is due at or before `limit` (one look at the heads, not a peek
    /// and then a pop).
    #[inline]
    pub fn pop_until(&mut self, limit: u64) -> Option<(u64, Ev)> {
        self.queue.pop_until(limit).map(|e| (e.t(), e.ev()))
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    #[inline]
    pub fn mc_of(&self, addr: u64) -> usize {
        self.mapper.mc_of(addr)
    }

    /// A line write arriving at MC `mc` now. `reply` is delivered one on-chip hop after the WPQ
    /// accepts it (the ACK).
    pub fn mc_write(&mut self, mc: usize, data: LineData, reply: Option<DesignEv>) {
        let now = self.now;
        if let Some(done) = self.mcs[mc].offer(now, data, reply) {
            if done != crate::mem::mc::COALESCED {
                self.schedule(done, Ev::McDone(mc as u16));
            }
            self.persist_version += 1;
            if let Some(r) = reply {
                self.schedule(now + self.reply_ps(&r), Ev::Design(r));
            }
        }
        self.mc_outputs(mc);
    }

    /// How long an MC's reply `r` takes to reach its receiver: an acknowledgement crosses the
    /// chip (`noc.ack_ns`); a reply to a controller at the MC itself ([`AT_MC`]) does not.
    #[inline]
    fn reply_ps(&self, r: &DesignEv) -> u64 {
        if r.tag & 0xF000 == AT_MC {
            0
        } else {
            self.ack_ps
        }
    }

    /// Collects a banked MC's outputs: wake-ups to schedule, replies (acknowledgements, one
    /// `noc.ack_ns` later, as the optane model's), retired lines.
    pub fn mc_outputs(&mut self, mc: usize) {
        if self.mcs[mc].banks.is_none() {
            return;
        }
        let m = &mut self.mcs[mc];
        let (mut wakes, mut replies, mut retired) =
            (std::mem::take(&mut m.out_wakes), std::mem::take(&mut m.out_replies), std::mem::take(&mut m.out_retired));
        if !replies.is_empty() || !retired.is_empty() {
            self.persist_version += 1;
        }
        for &t in &wakes {
            self.schedule(t, Ev::McDone(mc as u16));
        }
        for &r in &replies {
            self.schedule(self.now + self.reply_ps(&r), Ev::Design(r));
        }
        if self.track_data {
            self.nvm_written.extend_from_slice(&retired);
        }
        wakes.clear();
        replies.clear();
        retired.clear();
        let m = &mut self.mcs[mc];
        m.out_wakes = wakes;
        m.out_replies = replies;
        m.out_retired = retired;
    }

    /// A write applied by MC `mc` at once, outside its WPQ and media bandwidth (the ASAP
    /// artifact's functional delay records, `rt.delay_through_wpq = false`); `reply` one ACK later,
    /// or, if an older write of the line is not persistent yet, once it is (`Mc::apply_functional`).
    pub fn mc_apply_functional(&mut self, mc: usize, data: LineData, reply: Option<DesignEv>) {
        let reply =
            self.mcs[mc].apply_functional(&data, if self.track_data { Some(&mut self.nvm) } else { None }, reply);
        if self.track_data {
            self.nvm_written.push(data.line);
        }
        self.persist_version += 1;
        if let Some(r) = reply {
            self.schedule(self.now + self.ack_ps, Ev::Design(r));
        }
    }

    /// `reply` inside MC `mc` once write number `seq` of `line` is persistent: now if it is,
    /// otherwise one ACK after it becomes so (`Mc::when_persistent`).
    pub fn mc_when_persistent(&mut self, mc: usize, line: u64, seq: u64, reply: DesignEv) {
        if let Some(r) = self.mcs[mc].when_persistent(line, seq, reply) {
            self.schedule(self.now, Ev::Design(r));
        }
    }

    /// A line read arriving at MC `mc` now; `reply` is delivered one hop after the data is ready.
    pub fn mc_read(&mut self, mc: usize, line: u64, reply: DesignEv) {
        let ready = self.mcs[mc].read(self.now, line);
        self.mc_outputs(mc);
        self.schedule(ready + self.hop_ps, Ev::Design(reply));
    }

    /// A read inside the MC (ASAP's undo creation): `reply` when the data is at the MC, no hop.
    pub fn mc_read_local(&mut self, mc: usize, line: u64, reply: DesignEv) {
        let ready = self.mcs[mc].read(self.now, line);
        self.mc_outputs(mc);
        self.schedule(ready, Ev::Design(reply));
    }

    /// Handles `Ev::McDone`.
    pub fn mc_complete(&mut self, mc: usize) {
        if self.mcs[mc].banks.is_some() {
            let mut acc = std::mem::take(&mut self.mc_accepted);
            self.mcs[mc].complete(self.now, if self.track_data { Some(&mut self.nvm) } else { None }, &mut acc);
            self.mc_accepted = acc;
            self.mc_outputs(mc);
            self.release_mc_held(mc);
            return;
        }
        let mut acc = std::mem::take(&mut self.mc_accepted);
        let before = self.mcs[mc].stats.pm_writes;
        let head = self.mcs[mc].wpq.front().map(|e| e.data.line);
        self.mcs[mc].complete(self.now, if self.track_data { Some(&mut self.nvm) } else { None }, &mut acc);
        if self.track_data && self.mcs[mc].stats.pm_writes > before {
            if let Some(l) = head {
                self.nvm_written.push(l);
            }
        }
        self.persist_version += 1;
        for &(reply, done) in &acc {
            self.schedule(done, Ev::McDone(mc as u16));
            if let Some(r) = reply {
                self.schedule(self.now + self.reply_ps(&r), Ev::Design(r));
            }
        }
        self.mc_accepted = acc;
        // Functional writes whose line's older write just became persistent.
        for i in 0..self.mcs[mc].out_replies.len() {
            let r = self.mcs[mc].out_replies[i];
            self.schedule(self.now + self.reply_ps(&r), Ev::Design(r));
        }
        self.mcs[mc].out_replies.clear();
        self.release_mc_held(mc);
    }

    /// Holds `core` (its access made an LLC write-back to MC `mc`, whose writes are waiting for
    /// WPQ entries) until no write waits there: the LLC cannot take the access's line while its
    /// victim has nowhere to go. The design returns `WpqFull` from `holds_llc_eviction`.
    pub fn hold_for_mc(&mut self, core: usize, mc: usize) {
        let held = &mut self.mc_held[mc];
        if !held.contains(&(core as u16)) {
            held.push(core as u16);
        }
    }

    /// Whether writes wait at MC `mc` for WPQ entries (an LLC write-back arriving now would too).
    pub fn mc_backlogged(&self, mc: usize) -> bool {
        !self.mcs[mc].waiting.is_empty()
    }

    fn release_mc_held(&mut self, mc: usize) {
        if self.mc_held[mc].is_empty() || self.mc_backlogged(mc) {
            return;
        }
        let held = std::mem::take(&mut self.mc_held[mc]);
        for &c in &held {
            self.wake_held(c as usize);
        }
        let mut held = held;
        held.clear();
        self.mc_held[mc] = held;
    }

    /// What memory holds for `line` as a read would see it: NVM overlaid with the WPQ.
    pub fn persistent_line(&self, line: u64) -> LineData {
        let mut d = self.nvm.line(line);
        let mc = self.mc_of(line);
        self.mcs[mc].overlay(&mut d);
        d
    }

    /// `word` as NVM holds it (identity and value), if written.
    pub fn nvm_word(&self, word: u64) -> Option<pmsim_trace::WordVal> {
        self.nvm.get(word).map(|id| self.values.val(word, id))
    }

    /// The coherent (newest performed) contents of `line`'s written words.
    pub fn coherent_line(&self, line: u64) -> LineData {
        if self.track_data {
            self.coherent.line(line)
        } else {
            LineData { line, mask: 0xff, ids: [0; 8] }
        }
    }

    /// The design finished with the head of `core`'s store buffer (after returning `Wait`).
    pub fn sb_head_done(&mut self, core: usize) {
        let c = &mut self.cores[core];
        c.head_done = true;
        c.drain_stall = None;
        if !c.drain_scheduled {
            c.drain_scheduled = true;
            self.schedule(self.now, Ev::Drain(core as u16));
        }
    }

    /// The design can now admit the store it refused (`admit_store`): retry the drain. A core
    /// waiting behind its store buffer waits for its own reason again (the retry may be refused
    /// anew, which charges the structure again).
    pub fn resume_drain(&mut self, core: usize) {
        let now = self.now;
        let c = &mut self.cores[core];
        if c.drain_stall.is_some() && !c.drain_scheduled {
            structure_done(c, now, |own| own);
            c.drain_stall = None;
            c.drain_scheduled = true;
            self.schedule(self.now, Ev::Drain(core as u16));
        }
    }

    /// A design structure that refused the head (`drain_refused`) has room, and the head now
    /// waits for `cause` instead (a durability fence whose epoch table was full, waiting for the
    /// drain once its epoch opened): a core blocked behind the buffer is charged its own reason
    /// from now on, as if the structure had never refused (`cause` if it only waited for space).
    pub fn head_waits_instead(&mut self, core: usize, cause: StallCause) {
        let now = self.now;
        let c = &mut self.cores[core];
        structure_done(c, now, |own| if own == StallCause::SbFull { cause } else { own });
        c.drain_stall = Some(cause);
    }

    /// Blocks `core` from `since` behind its store buffer for `own` reasons (a full buffer, an
    /// atomic, a fence, an EP load behind a barrier): charged to the design structure holding
    /// the drain while one does (so the stall breakdown names the full persist buffer, not
    /// what is queued behind it), to `own` otherwise.
    pub fn block_behind(&mut self, core: usize, own: StallCause, since: u64) {
        let c = &mut self.cores[core];
        let cause = match c.drain_stall {
            Some(s) if s.is_structural() => s,
            _ => own,
        };
        c.blocked = Some((cause, since));
        c.blocked_own = Some(own);
    }

    /// The design refused the store buffer's head (`Design::admit_store`): the drain waits for
    /// `cause`, and so, from now on, does a core blocked behind its store buffer (a full
    /// buffer, an atomic, a fence or an EP load waiting for it), until the structure can admit
    /// the head again ([`Machine::resume_drain`]); its stall so far stays charged to what it
    /// was (its own cause, or another structure that refused before, e.g. a full persist buffer
    /// before the recovery table NACKs).
    pub fn drain_refused(&mut self, core: usize, cause: StallCause) {
        let now = self.now;
        let c = &mut self.cores[core];
        c.drain_stall = Some(cause);
        if let (Some((old, since)), Some(own)) = (c.blocked, c.blocked_own) {
            // An ordering wait at the head (the baseline's store behind an unacknowledged sync
            // predecessor) replaces only a wait for the buffer itself, not a fence's own.
            let moves = cause.is_structural() || matches!(own, StallCause::SbFull | StallCause::Atomic);
            if moves && old != cause {
                c.stats.stall_ps[old as usize] += now.saturating_sub(since);
                c.blocked = Some((cause, now.max(since)));
            }
        }
    }

    /// The drain waits at its head for `cause` (a fence's, a flush's or a release's step): as
    /// [`Machine::drain_refused`] when a design structure holds it.
    pub fn drain_waits(&mut self, core: usize, cause: StallCause) {
        if cause.is_structural() {
            self.drain_refused(core, cause);
        } else {
            let c = &mut self.cores[core];
            c.drain_stall = Some(cause);
            // A legacy sfence the design runs as a durability fence (`sfence_as_dfence`): the
            // core blocked at it waits for a dfence, from the moment it blocked.
            if cause == StallCause::Dfence && c.blocked_own == Some(StallCause::Fence) {
                if let Some((StallCause::Fence, since)) = c.blocked {
                    c.blocked = Some((StallCause::Dfence, since));
                }
                c.blocked_own = Some(StallCause::Dfence);
            }
        }
    }

    /// Marks the core blocked from `since`.
    pub fn block_core(&mut self, core: usize, cause: StallCause, since: u64) {
        self.cores[core].blocked = Some((cause, since));
        self.cores[core].blocked_own = None;
    }

    /// Unblocks `core` if a held eviction blocked it ([`Design::on_private_evict`]): blocked for
    /// `WbbFull` or `Nack` and waiting for nothing in its store buffer (a full or draining store
    /// buffer wakes the core when it retires).
    ///
    /// [`Design::on_private_evict`]: crate::design::Design::on_private_evict
    pub fn wake_held(&mut self, core: usize) {
        let c = &self.cores[core];
        let held = matches!(c.blocked, Some((StallCause::WbbFull | StallCause::Nack | StallCause::WpqFull, _)));
        if held && c.wait_seq.is_none() && !c.wait_sb_space && !c.wait_sb_empty {
            self.wake_core(core);
        }
    }

    /// Unblocks the core at `now`, charging the stall to its cause.
    pub fn wake_core(&mut self, core: usize) {
        let now = self.now;
        let c = &mut self.cores[core];
        if let Some((cause, since)) = c.blocked.take() {
            c.blocked_own = None;
            c.stats.stall_ps[cause as usize] += now.saturating_sub(since);
            c.time = c.time.max(now);
            c.wait_seq = None;
            c.wait_sb_space = false;
            c.wait_sb_empty = false;
            let t = c.time;
            self.schedule(t, Ev::Core(core as u16));
        }
    }

    /// Writes a performed store's bytes into coherent memory, filling `d` with the PM line data
    /// it produced (words with their new identity). `value` is the store's bytes (only read while
    /// tracking data; `None` reads as zeros). `d` is the caller's (the design's `PmStore`), so
    /// the 80 B record is written once in place instead of being returned and copied: the copy
    /// read it back right behind its narrower stores, a stall that forwarding could not serve.
    pub fn perform_store_words(&mut self, core: usize, e: &SbEntry, value: Option<&[u8; 64]>, d: &mut LineData) {
        let line = e.addr & !(LINE_BYTES - 1);
        *d = LineData::new(line);
        let end = e.addr + e.size as u64;
        let now = self.now;
        if !self.track_data {
            // The words `[addr & !7, end)` as a mask, all with the store's identity: a loop over
            // 1-8 words whose trip count varies from store to store mispredicted its exit on
            // most stores (a quarter of `perform_head` in an eADR run).
            let first = e.addr & !7;
            let words = end.saturating_sub(first).div_ceil(8);
            let i0 = word_index(first) as u64;
            if i0 + words <= 8 {
                d.mask = (((1u16 << words) - 1) << i0) as u8;
                for (i, id) in d.ids.iter_mut().enumerate() {
                    *id = if d.mask & (1 << i) != 0 { e.gid } else { 0 };
                }
            } else {
                // A store reaching past its line (not one a trace validator admits) keeps the
                // word-by-word rule: its words wrap around in the line.
                let mut w = first;
                while w < end {
                    d.set(word_index(w), e.gid);
                    w += 8;
                }
            }
            return;
        }
        let zeros = [0u8; 64];
        let value = value.unwrap_or(&zeros);
        if let Some(log) = &mut self.coherent_written {
            log.push(line);
        }
        let cur = self.coherent.line_mut(line);
        let mut w = e.addr & !7;
        self.values.start(e.gid, word_index(w));
        while w < end {
            let i = word_index(w);
            let lo = w.max(e.addr);
            let hi = (w + 8).min(end);
            let data = if lo == w && hi == w + 8 {
                let off = (w - e.addr) as usize;
                if e.has_value {
                    u64::from_le_bytes(value[off..off + 8].try_into().unwrap_or([0; 8]))
                } else {
                    0
                }
            } else {
                // A partial word keeps the bytes the store does not cover from the word's
                // current value.
                let mut data = if cur.mask & (1 << i) != 0 { self.values.get(w, cur.ids[i]) } else { 0 };
                for a in lo..hi {
                    let b = if e.has_value { value[(a - e.addr) as usize] } else { 0 };
                    let sh = (a - w) * 8;
                    data = (data & !(0xffu64 << sh)) | ((b as u64) << sh);
                }
                data
            };
            self.values.push(data);
            cur.set(i, e.gid);
            d.set(i, e.gid);
            w += 8;
        }
        if let Some(r) = &mut self.record {
            for (w, _) in d.iter() {
                r.accesses.push(pmsim_trace::WordAccess {
                    time: now,
                    gid: e.gid,
                    thread: core as u16,
                    word: w,
                    kind: pmsim_trace::Access::Store,
                });
            }
        }
    }

    /// Records a load's reads-from for each word it covers (`sb` supplies forwarded stores).
    pub fn record_load(&mut self, core: usize, gid: u64, addr: u64, size: u8) {
        if self.record.is_none() {
            return;
        }
        let end = addr + size as u64;
        let mut w = addr & !7;
        while w < end {
            let fwd = self.cores[core]
                .sb
                .iter()
                .rev()
                .find(|e| e.kind.writes() && e.addr < w + 8 && e.addr + e.size as u64 > w)
                .map(|e| e.gid);
            let read = fwd.unwrap_or_else(|| self.coherent.get(w).unwrap_or(pmsim_trace::INITIAL_ID));
            let now = self.now;
            if let Some(r) = &mut self.record {
                r.accesses.push(pmsim_trace::WordAccess {
                    time: now,
                    gid,
                    thread: core as u16,
                    word: w,
                    kind: pmsim_trace::Access::Load { read },
                });
            }
            w += 8;
        }
    }

    /// Whether the core's store buffer supplies every byte of `[addr, addr+size)` (at most 64),
    /// so the load reads no memory. A load it covers only in part still reads the rest from the
    /// cache hierarchy, where coherence sees it (a write-after-read with the next writer).
    pub fn sb_forwards(&self, core: usize, addr: u64, size: u8) -> bool {
        let end = addr + size as u64;
        let full = if size >= 64 { u64::MAX } else { (1u64 << size) - 1 };
        let mut covered = 0u64;
        for e in self.cores[core].sb.iter() {
            if e.kind.writes() && e.addr < end && e.addr + e.size as u64 > addr {
                let (lo, hi) = (e.addr.max(addr) - addr, (e.addr + e.size as u64).min(end) - addr);
                let n = hi - lo;
                covered |= if n >= 64 { u64::MAX } else { ((1u64 << n) - 1) << lo };
                if covered & full == full {
                    return true;
                }
            }
        }
        false
    }
}

/// The structure holding `c`'s drain (`drain_stall`) stops refusing at `now`: a core charged to
/// it since it refused is charged from now to `own(its own reason)`.
fn structure_done(c: &mut CoreHw, now: u64, own: impl Fn(StallCause) -> StallCause) {
    if let (Some((held, since)), Some(mine), Some(stall)) = (c.blocked, c.blocked_own, c.drain_stall) {
        if held == stall && held.is_structural() {
            c.stats.stall_ps[held as usize] += now.saturating_sub(since);
            c.blocked = Some((own(mine), now.max(since)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// Whatever mix of same-time (FIFO) and later (heap) events, pops come out in exactly
        /// (time, sequence) order, and `pop_until` never returns an event after its limit.
        #[test]
        fn queue_pops_in_time_then_sequence_order(
            ops in proptest::collection::vec((0u8..4, 0u64..50, 0u64..60), 1..400)
        ) {
            let mut q = EventQueue::default();
            let mut reference = BTreeSet::new();
            let (mut now, mut seq) = (0u64, 0u64);
            for (op, delay, limit_ahead) in ops {
                if op < 3 {
                    // Many events land at `now` (the FIFO), the others at a later time.
                    let t = now + if op == 0 { delay } else { 0 };
                    seq += 1;
                    q.push(QEntry::new(t, seq, Ev::McDone(seq as u16)), now);
                    reference.insert((t, seq));
                } else {
                    let limit = now + limit_ahead;
                    let want = reference.iter().next().copied().filter(|&(t, _)| t <= limit);
                    let got = q.pop_until(limit).map(|e| (e.t(), (e.key & u64::MAX as u128) as u64));
                    prop_assert_eq!(got, want);
                    if let Some(k) = want {
                        reference.remove(&k);
                        now = k.0;
                    }
                }
                prop_assert_eq!(q.len(), reference.len());
                prop_assert_eq!(q.peek_time(), reference.iter().next().map(|k| k.0));
            }
            while let Some((t, s)) = reference.pop_first() {
                let e = q.pop().expect("entries left");
                prop_assert_eq!((e.t(), (e.key & u64::MAX as u128) as u64), (t, s));
            }
            prop_assert!(q.pop().is_none());
        }
    }
}
