//! PM memory controllers: address mapping, the write pending queue (WPQ, inside the ADR
//! persistence domain), and media timing with per-MC read and write bandwidth.
//!
//! The WPQ accepts a line write when it has a free entry (or coalesces it into an entry whose
//! media write has not started); the writer is acknowledged at acceptance, because from then on
//! ADR guarantees the write survives a power failure. Entries drain to the media in FIFO order:
//! each occupies the write channel for `64 B / write_gbps` and completes `write_ns` after it
//! starts; the entry stays in the WPQ until it completes. Reads take the read channel the same
//! way and are served from the WPQ when it holds the line. Writes that find the WPQ full wait,
//! in arrival order, exerting back-pressure on whoever sent them.
//!
//! Under `pm.model = "banked"` the media behind the queue is [`Banks`] instead: the queue is the
//! MC's write queue (`bank.write_queue`), writes start out of order when their bank is free
//! (FR-FCFS: row hits first, then oldest; write drain above the high watermark), and with
//! `bank.persist_at = "media"` a write is acknowledged when its bank write completes (the queue
//! is then outside the persistence domain). The engine collects the banked MC's outputs (wake-up
//! times, replies, retired lines) after each call.

use super::banked::Banks;
use super::nvm::{LineData, Nvm};
use crate::config::{ns, Config};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Maps a physical address to a memory controller.
pub trait AddressMapper: Send {
    fn mc_of(&self, addr: u64) -> usize;
}

/// `addr / granularity` and `x % count`, as a shift and a mask when they are powers of two (the
/// usual configuration): two integer divisions per call were most of an address mapping, which
/// every flush, write and read asks for.
#[inline(always)]
fn chunk_of(addr: u64, granularity: u64) -> u64 {
    if granularity.is_power_of_two() {
        addr >> granularity.trailing_zeros()
    } else {
        addr / granularity
    }
}

#[inline(always)]
fn modulo(x: u64, count: u64) -> u64 {
    if count.is_power_of_two() {
        x & (count - 1)
    } else {
        x % count
    }
}

/// Plain interleaving: `(addr / granularity) % count`.
pub struct Interleave {
    pub granularity: u64,
    pub count: u64,
}

impl AddressMapper for Interleave {
    #[inline]
    fn mc_of(&self, addr: u64) -> usize {
        modulo(chunk_of(addr, self.granularity), self.count) as usize
    }
}

/// Interleaving with the chunk index XOR-folded with higher bits (spreads strided patterns).
pub struct XorInterleave {
    pub granularity: u64,
    pub count: u64,
}

impl AddressMapper for XorInterleave {
    #[inline]
    fn mc_of(&self, addr: u64) -> usize {
        let c = chunk_of(addr, self.granularity);
        modulo(c ^ (c >> 7) ^ (c >> 14), self.count) as usize
    }
}

pub fn mapper(cfg: &Config) -> Box<dyn AddressMapper> {
    let (granularity, count) = (cfg.mc.interleave, cfg.mc.count as u64);
    match cfg.mc.mapping.as_str() {
        "xor" => Box::new(XorInterleave { granularity, count }),
        _ => Box::new(Interleave { granularity, count }),
    }
}

/// An entry of the write pending queue.
#[derive(Clone, Copy, Debug)]
pub struct WpqEntry {
    pub data: LineData,
    /// When its media write starts (it can still coalesce before then).
    pub start: u64,
    pub done: u64,
    /// When it entered the queue.
    pub arrive: u64,
    /// Its number among the writes offered to this MC (`Mc::offered`).
    pub seq: u64,
}

/// Not started yet (banked model: waits for its bank).
const UNSTARTED: u64 = u64::MAX;
/// [`Mc::offer`]'s answer for a write merged into a queued one: no completion to schedule. (Not
/// 0: with `pm.write_ns = 0` a write offered at time 0 completes at time 0.)
pub const COALESCED: u64 = u64::MAX;

/// A write waiting for a WPQ entry, with the event to send when it is accepted.
#[derive(Clone, Copy, Debug)]
pub struct WaitingWrite<R: Copy> {
    pub data: LineData,
    pub reply: Option<R>,
    /// Its number among the writes offered to this MC (`Mc::offered`).
    pub seq: u64,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct McStats {
    /// Line reads at the media.
    pub pm_reads: u64,
    /// Reads served from the WPQ.
    pub wpq_read_hits: u64,
    /// Line writes at the media.
    pub pm_writes: u64,
    /// Writes merged into a WPQ entry before it reached the media.
    pub wpq_coalesced: u64,
    pub wpq_occupancy_max: usize,
    /// Time-weighted sum of occupancy (entries × ps), for the average.
    #[serde(skip)]
    pub occ_integral: u128,
    /// Writes that found the WPQ full and waited.
    pub wpq_full_waits: u64,
    /// Reads delayed behind writes waiting for a full WPQ.
    pub reads_behind_writes: u64,
    /// Reads served by the on-DIMM buffer.
    pub xpbuffer_read_hits: u64,
}

pub struct Mc<R: Copy> {
    pub wpq: VecDeque<WpqEntry>,
    /// Changed only through `wait` and `accept_waiting`, which keep `waiting_lines` in step.
    pub waiting: VecDeque<WaitingWrite<R>>,
    /// How many writes of each line are in `waiting`. Every arriving write and every read asks
    /// whether its line waits, and under write-heavy load (baseline's clwb stream) hundreds of
    /// writes wait: a scan of them was ~9% of such a run.
    waiting_lines: FxHashMap<u64, u32>,
    /// Writes offered so far: the next one offered is number `offered` (see
    /// [`Mc::write_persistent`]).
    pub offered: u64,
    cap: usize,
    write_free: u64,
    read_free: u64,
    write_occ_ps: u64,
    read_occ_ps: u64,
    write_ps: u64,
    read_ps: u64,
    last_change: u64,
    /// On-DIMM buffer: recently accessed lines, most recent last.
    xpbuf: VecDeque<u64>,
    xpbuf_cap: usize,
    xpbuf_ps: u64,
    /// A read forwarded from a queued write of its line (`mc.wpq_read_ns`).
    wpq_read_ps: u64,
    pub stats: McStats,
    /// The banked media, when `pm.model = "banked"`.
    pub banks: Option<Banks>,
    /// Banked model: each queue entry's reply (acknowledged at completion under `persist_at =
    /// media`), aligned with `wpq`.
    replies: VecDeque<Option<R>>,
    /// Banked model outputs the engine collects after each call.
    pub out_wakes: Vec<u64>,
    pub out_replies: Vec<R>,
    /// Replies waiting for a write of their line to persist: (line, that write's number, reply),
    /// released into `out_replies` once it does (functional writes merged behind it,
    /// [`Mc::when_persistent`]).
    persist_waits: Vec<(u64, u64, R)>,
    pub out_retired: Vec<u64>,
    /// Scratch: best candidate per bank during an issue pass.
    pick: Vec<Option<(bool, usize)>>,
}

impl<R: Copy> Mc<R> {
    pub fn new(cfg: &Config) -> Mc<R> {
        Mc {
            wpq: VecDeque::with_capacity(cfg.mc.wpq_entries),
            waiting: VecDeque::new(),
            waiting_lines: FxHashMap::default(),
            offered: 0,
            cap: cfg.mc.wpq_entries,
            write_free: 0,
            read_free: 0,
            // 64 B at X GB/s = 64 / X ns.
            write_occ_ps: ns(64.0 / cfg.pm.write_gbps),
            read_occ_ps: ns(64.0 / cfg.pm.read_gbps),
            write_ps: ns(cfg.pm.write_ns),
            read_ps: ns(cfg.pm.read_ns),
            last_change: 0,
            xpbuf: VecDeque::with_capacity(cfg.pm.xpbuffer_lines),
            xpbuf_cap: cfg.pm.xpbuffer_lines,
            xpbuf_ps: ns(cfg.pm.xpbuffer_ns),
            wpq_read_ps: ns(cfg.mc.wpq_read_ns),
            stats: McStats::default(),
            banks: (cfg.pm.model == "banked").then(|| Banks::new(cfg)),
            replies: VecDeque::new(),
            out_wakes: Vec::new(),
            out_replies: Vec::new(),
            persist_waits: Vec::new(),
            out_retired: Vec::new(),
            pick: vec![None; cfg.bank.count],
        }
        .sized(cfg)
    }

    fn sized(mut self, cfg: &Config) -> Self {
        if self.banks.is_some() {
            self.cap = cfg.bank.write_queue;
        }
        self
    }

    /// Queues a write that found no free entry.
    fn wait(&mut self, w: WaitingWrite<R>) {
        *self.waiting_lines.entry(w.data.line).or_insert(0) += 1;
        self.waiting.push_back(w);
    }

    /// The oldest waiting write, which now takes an entry.
    fn accept_waiting(&mut self) -> Option<WaitingWrite<R>> {
        let w = self.waiting.pop_front()?;
        if let Some(n) = self.waiting_lines.get_mut(&w.data.line) {
            *n -= 1;
            if *n == 0 {
                self.waiting_lines.remove(&w.data.line);
            }
        }
        Some(w)
    }

    /// Whether a write of `line` waits for an entry.
    #[inline]
    fn line_waits(&self, line: u64) -> bool {
        !self.waiting.is_empty() && self.waiting_lines.contains_key(&line)
    }

    /// Whether write number `seq` of `line` (`offered` when it was offered) is persistent: no
    /// write of the line up to it waits for an entry, nor, where the queue is outside the
    /// persistence domain (banked, `persist_at = "media"`), is still in the queue. Writes of
    /// one line persist in the order offered, so an older one pending means this one is too.
    pub fn write_persistent(&self, line: u64, seq: u64) -> bool {
        let pending = |l: u64, k: u64| l == line && k <= seq;
        !(self.line_waits(line) && self.waiting.iter().any(|w| pending(w.data.line, w.seq))
            || !self.queue_persistent() && self.wpq.iter().any(|e| pending(e.data.line, e.seq)))
    }

    /// Whether the queue's contents survive a crash (ADR): always for the default model; for
    /// the banked model only with `persist_at = "queue"`.
    pub fn queue_persistent(&self) -> bool {
        self.banks.as_ref().is_none_or(|b| !b.persist_at_media)
    }

    /// Bank of `line` (0 when the model has no banks) and the number of banks.
    pub fn bank_of(&self, line: u64) -> usize {
        self.banks.as_ref().map_or(0, |b| b.locate(line).0)
    }

    pub fn bank_count(&self) -> usize {
        self.banks.as_ref().map_or(1, |b| b.count())
    }

    /// Writes queued for `bank` that have not started at the media (schedulers meter on this).
    pub fn bank_backlog(&self, now: u64, bank: usize) -> usize {
        match &self.banks {
            Some(b) => {
                self.wpq.iter().filter(|e| e.start > now && b.locate(e.data.line).0 == bank).count()
                    + self.waiting.iter().filter(|w| b.locate(w.data.line).0 == bank).count()
            }
            None => self.wpq.iter().filter(|e| e.start > now).count() + self.waiting.len(),
        }
    }

    /// The next time after `now` the queue changes by itself (a write starts at the media or
    /// completes and frees its entry), if any.
    pub fn next_change_after(&self, now: u64) -> Option<u64> {
        let q = self.wpq.iter().flat_map(|e| [e.start, e.done]).filter(|&t| t > now && t != UNSTARTED).min();
        let b = self.banks.as_ref().and_then(|b| b.free_at.iter().copied().filter(|&t| t > now).min());
        match (q, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    /// Whether a queued write completes at `now` but has not been retired yet: its completion
    /// event is still pending at this instant, and the queue entry it holds frees after it.
    pub fn retires_at(&self, now: u64) -> bool {
        self.wpq.iter().any(|e| e.done <= now)
    }

    /// [`Mc::bank_backlog`] of every bank at once (one pass over the queue). Without banks (the
    /// optane model) every count is 0: the media pipelines whatever the WPQ holds, so nothing
    /// waits on a bank and only the WPQ's room (`queue_free`) limits a scheduler. Reporting the
    /// queue's unstarted writes there made BROI keep one write per MC in flight, up to 2.6x
    /// slower than `delegated` on the default machine (a tester's finding). The same holds for
    /// banks that persist at the queue (`bank.persist_at = "queue"`, ADR): a queued write has
    /// persisted, so holding the next one back until the bank starts the last kept writes out of
    /// the persistence domain for whole bank-write times and the thread's next barrier epoch
    /// waiting (BROI 4.7x slower than `delegated` on tester X's trace, X1); the scheduler's
    /// choice then only orders what enters the queue while it has room.
    pub fn bank_backlogs(&self, now: u64, out: &mut [usize]) {
        out.iter_mut().for_each(|x| *x = 0);
        if let Some(b) = self.banks.as_ref().filter(|b| b.persist_at_media) {
            for e in self.wpq.iter().filter(|e| e.start > now) {
                out[b.locate(e.data.line).0] += 1;
            }
            for w in &self.waiting {
                out[b.locate(w.data.line).0] += 1;
            }
        }
    }

    /// Free entries in the queue.
    pub fn queue_free(&self) -> usize {
        if self.waiting.is_empty() {
            self.cap.saturating_sub(self.wpq.len())
        } else {
            0
        }
    }

    pub fn queue_cap(&self) -> usize {
        self.cap
    }

    // ---- the banked model ---------------------------------------------------------------

    fn offer_banked(&mut self, now: u64, data: LineData, reply: Option<R>, seq: u64) -> Option<u64> {
        let media = self.banks.as_ref().is_some_and(|b| b.persist_at_media);
        // Coalescing would merge two writes under one acknowledgement; with the media as the
        // persistence domain each write keeps its own.
        let older_waiting = self.line_waits(data.line);
        if !media && !older_waiting && self.coalesce(now, &data) {
            if let Some(r) = reply {
                self.out_replies.push(r);
            }
            return None;
        }
        if !media && older_waiting {
            self.coalesce_waiting(data, reply);
            return None;
        }
        if self.wpq.len() >= self.cap || !self.waiting.is_empty() {
            self.stats.wpq_full_waits += 1;
            self.wait(WaitingWrite { data, reply, seq });
            return None;
        }
        self.insert_banked(now, data, reply, seq);
        self.issue(now);
        None
    }

    fn insert_banked(&mut self, now: u64, data: LineData, reply: Option<R>, seq: u64) {
        self.account(now);
        self.wpq.push_back(WpqEntry { data, start: UNSTARTED, done: UNSTARTED, arrive: now, seq });
        let media = self.banks.as_ref().is_some_and(|b| b.persist_at_media);
        if media {
            self.replies.push_back(reply);
        } else {
            self.replies.push_back(None);
            if let Some(r) = reply {
                self.out_replies.push(r);
            }
        }
        self.stats.wpq_occupancy_max = self.stats.wpq_occupancy_max.max(self.wpq.len());
    }

    /// Starts, on every idle bank, its FR-FCFS choice among the queued writes.
    fn issue(&mut self, now: u64) {
        let Some(b) = self.banks.as_mut() else { return };
        b.settle(now);
        let n = self.wpq.len();
        if n >= b.drain_high {
            b.draining = true;
        } else if n <= b.drain_low {
            b.draining = false;
        }
        self.pick.iter_mut().for_each(|p| *p = None);
        let mut any = false;
        for (i, e) in self.wpq.iter().enumerate() {
            if e.start != UNSTARTED {
                continue;
            }
            let (bank, row) = b.locate(e.data.line);
            if b.free_at[bank] > now {
                continue;
            }
            let hit = b.is_hit(bank, row);
            // Row hits first, then oldest (queue order).
            match self.pick[bank] {
                Some((true, _)) => {}
                Some((false, _)) if !hit => {}
                _ => {
                    self.pick[bank] = Some((hit, i));
                    any = true;
                }
            }
        }
        if !any {
            return;
        }
        for bank in 0..self.pick.len() {
            if let Some((_, i)) = self.pick[bank] {
                let e = &mut self.wpq[i];
                let (_, row) = b.locate(e.data.line);
                let (start, done) = b.reserve(e.arrive, now, bank, row, true);
                e.start = start;
                e.done = done;
                self.out_wakes.push(done);
            }
        }
    }

    fn complete_banked(&mut self, now: u64, mut nvm: Option<&mut Nvm>) {
        // Retire in completion order (one bank's writes complete in its timeline order).
        while let Some((i, _)) =
            self.wpq.iter().enumerate().filter(|(_, e)| e.done <= now).min_by_key(|(i, e)| (e.done, *i))
        {
            self.account(now);
            let e = self.wpq.remove(i).expect("index in range");
            let reply = self.replies.remove(i).flatten();
            if let Some(nvm) = nvm.as_deref_mut() {
                nvm.write_line(&e.data);
            }
            self.stats.pm_writes += 1;
            self.out_retired.push(e.data.line);
            if let Some(r) = reply {
                self.out_replies.push(r);
            }
        }
        while self.wpq.len() < self.cap {
            let Some(w) = self.accept_waiting() else { break };
            self.insert_banked(now, w.data, w.reply, w.seq);
        }
        if !self.persist_waits.is_empty() {
            self.release_waits();
        }
        self.issue(now);
    }

    fn read_banked(&mut self, now: u64, line: u64) -> u64 {
        let draining = self.banks.as_ref().is_some_and(|b| b.draining);
        let Some(b) = self.banks.as_mut() else { return now };
        let (bank, row) = b.locate(line);
        if draining {
            // Write drain: the queued writes of this bank go before the read (FR-FCFS order).
            loop {
                let mut best: Option<(bool, usize)> = None;
                for (i, e) in self.wpq.iter().enumerate() {
                    if e.start != UNSTARTED {
                        continue;
                    }
                    let (eb, er) = b.locate(e.data.line);
                    if eb != bank {
                        continue;
                    }
                    let hit = b.is_hit(bank, er);
                    if best.is_none() || (hit && !best.is_some_and(|x| x.0)) {
                        best = Some((hit, i));
                    }
                }
                let Some((_, i)) = best else { break };
                let e = &mut self.wpq[i];
                let er = b.locate(e.data.line).1;
                let (start, done) = b.reserve(e.arrive, now, bank, er, true);
                e.start = start;
                e.done = done;
                self.out_wakes.push(done);
            }
        }
        let slot = b.read_slot(now);
        let (_, done) = b.reserve(slot, slot, bank, row, false);
        b.read_reserved(done);
        // Queued writes of this bank start once the read is done.
        self.out_wakes.push(done);
        self.stats.pm_reads += 1;
        done
    }

    fn account(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last_change);
        self.stats.occ_integral += dt as u128 * self.wpq.len() as u128;
        self.last_change = now;
    }

    /// Offers a write at `now`. Returns `Some(done_time_of_new_entry)` if it started a new media
    /// write (the caller schedules its completion), `Some(COALESCED)` if it coalesced, `None` if
    /// it must wait (it is queued; `complete` will accept it later).
    pub fn offer(&mut self, now: u64, data: LineData, reply: Option<R>) -> Option<u64> {
        let seq = self.offered;
        self.offered += 1;
        if self.banks.is_some() {
            return self.offer_banked(now, data, reply, seq);
        }
        // Coalescing must not jump ahead of an older write to the same line that is still
        // waiting for an entry: that write would later overwrite the newer data.
        let older_waiting = self.line_waits(data.line);
        if !older_waiting && self.coalesce(now, &data) {
            return Some(COALESCED);
        }
        if older_waiting {
            self.coalesce_waiting(data, reply);
            return None;
        }
        if self.wpq.len() >= self.cap || !self.waiting.is_empty() {
            self.stats.wpq_full_waits += 1;
            self.wait(WaitingWrite { data, reply, seq });
            return None;
        }
        Some(self.insert(now, data, seq))
    }

    /// Applies `data` at once, outside the queue and the media's bandwidth (the ASAP artifact's
    /// functional delay records): into every queued write of the line, so that none of them (all
    /// older) lands on top of it later, and into NVM unless one of them is not persistent yet
    /// (waiting for an entry, or under media persistence still queued). Then it persists with
    /// the oldest of them, never before an older write of its line, and its reply waits for that
    /// (`out_replies`); otherwise the reply is returned for the caller to send now. While a write
    /// of the line waits for an entry, the queued writes of a persistent queue are left alone:
    /// merged there it would be persistent at once, ahead of the waiting older write; the waiting
    /// one carries it (the queued ones reach the media first, so it still lands on top).
    pub fn apply_functional(&mut self, data: &LineData, nvm: Option<&mut Nvm>, reply: Option<R>) -> Option<R> {
        let queue_persistent = self.queue_persistent();
        let waits = self.waiting.iter().any(|w| w.data.line == data.line);
        let mut oldest_pending: Option<u64> = None;
        for e in self.wpq.iter_mut().filter(|e| e.data.line == data.line && !(waits && queue_persistent)) {
            e.data.merge(data);
            if !queue_persistent {
                oldest_pending = Some(oldest_pending.map_or(e.seq, |k| k.min(e.seq)));
            }
        }
        for w in self.waiting.iter_mut().filter(|w| w.data.line == data.line) {
            w.data.merge(data);
            oldest_pending = Some(oldest_pending.map_or(w.seq, |k| k.min(w.seq)));
        }
        match oldest_pending {
            Some(seq) => {
                if let Some(r) = reply {
                    self.persist_waits.push((data.line, seq, r));
                }
                None
            }
            None => {
                if let Some(nvm) = nvm {
                    nvm.write_line(data);
                }
                reply
            }
        }
    }

    /// `reply` once write number `seq` of `line` is persistent: returned if it already is,
    /// otherwise released into `out_replies` when it becomes so.
    pub fn when_persistent(&mut self, line: u64, seq: u64, reply: R) -> Option<R> {
        if self.write_persistent(line, seq) {
            return Some(reply);
        }
        self.persist_waits.push((line, seq, reply));
        None
    }

    /// Moves the replies whose line write has persisted to `out_replies`.
    fn release_waits(&mut self) {
        let mut i = 0;
        while i < self.persist_waits.len() {
            let (line, seq, r) = self.persist_waits[i];
            if self.write_persistent(line, seq) {
                self.out_replies.push(r);
                self.persist_waits.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Records an access in the on-DIMM buffer; returns whether the line was there.
    fn xp_touch(&mut self, line: u64) -> bool {
        if self.xpbuf_cap == 0 {
            return false;
        }
        let hit = match self.xpbuf.iter().position(|&l| l == line) {
            Some(i) => {
                self.xpbuf.remove(i);
                true
            }
            None => false,
        };
        if self.xpbuf.len() >= self.xpbuf_cap {
            self.xpbuf.pop_front();
        }
        self.xpbuf.push_back(line);
        hit
    }

    /// Merges `data` into the newest queued write of its line whose media write has not
    /// started, if there is one (the caller has made sure no older write of the line waits for
    /// an entry).
    fn coalesce(&mut self, now: u64, data: &LineData) -> bool {
        match self.wpq.iter_mut().rev().find(|e| e.data.line == data.line && e.start > now) {
            Some(e) => {
                e.data.merge(data);
                self.stats.wpq_coalesced += 1;
                true
            }
            None => false,
        }
    }

    /// Merges `data` into the newest write of its line that waits for an entry (there is one),
    /// where the queue is the persistence domain: the two then enter the queue, and persist,
    /// together, when the older one is accepted, and `reply` goes then. Persisting the newer
    /// write ahead of writes of other lines offered before it breaks no order: the MC has
    /// acknowledged none of them, so no sender has ordered anything after them. (A waiting list
    /// that kept one entry per write cost one media write each for a line written over and
    /// over while the queue stayed full: the same write coalesced when it found the queue with
    /// room and not when it had to wait, so BBB with a persist buffer larger than the WPQ ran
    /// up to 44% slower than with a smaller one, tester W's W4.)
    fn coalesce_waiting(&mut self, data: LineData, reply: Option<R>) {
        let w = self.waiting.iter_mut().rev().find(|w| w.data.line == data.line).expect("a write of the line waits");
        w.data.merge(&data);
        let seq = w.seq;
        self.stats.wpq_coalesced += 1;
        if let Some(r) = reply {
            self.persist_waits.push((data.line, seq, r));
        }
    }

    fn insert(&mut self, now: u64, data: LineData, seq: u64) -> u64 {
        self.xp_touch(data.line);
        self.account(now);
        let start = now.max(self.write_free);
        self.write_free = start + self.write_occ_ps;
        let done = start + self.write_ps;
        self.wpq.push_back(WpqEntry { data, start, done, arrive: now, seq });
        self.stats.wpq_occupancy_max = self.stats.wpq_occupancy_max.max(self.wpq.len());
        done
    }

    /// The head entry's media write completed at `now`: write it to NVM, free the entry, and accept
    /// waiting writes. Returns the accepted writes' replies and the done times to schedule.
    pub fn complete(&mut self, now: u64, nvm: Option<&mut Nvm>, accepted: &mut Vec<(Option<R>, u64)>) {
        accepted.clear();
        if self.banks.is_some() {
            return self.complete_banked(now, nvm);
        }
        let Some(e) = self.wpq.front().copied() else { return };
        if e.done > now {
            return;
        }
        self.account(now);
        self.wpq.pop_front();
        if let Some(nvm) = nvm {
            nvm.write_line(&e.data);
        }
        self.stats.pm_writes += 1;
        while self.wpq.len() < self.cap {
            let Some(w) = self.accept_waiting() else { break };
            let done = self.insert(now, w.data, w.seq);
            accepted.push((w.reply, done));
        }
        if !self.persist_waits.is_empty() {
            self.release_waits();
        }
    }

    /// A line read arriving at `now`; returns when the data is available at the MC.
    pub fn read(&mut self, now: u64, line: u64) -> u64 {
        if self.wpq.iter().any(|e| e.data.line == line) || self.line_waits(line) {
            self.stats.wpq_read_hits += 1;
            return now + self.wpq_read_ps;
        }
        if self.banks.is_some() {
            return self.read_banked(now, line);
        }
        if self.xp_touch(line) {
            self.stats.xpbuffer_read_hits += 1;
            return now + self.xpbuf_ps;
        }
        // A read behind writes waiting for a full WPQ waits until they are accepted (the MC
        // drains writes before serving reads when the WPQ is full): back-pressure from the write
        // path reaches the cores' misses.
        let mut start = now.max(self.read_free);
        if !self.waiting.is_empty() {
            let k = self.waiting.len().min(self.wpq.len());
            if k > 0 {
                start = start.max(self.wpq[k - 1].done);
            }
            self.stats.reads_behind_writes += 1;
        }
        self.read_free = start + self.read_occ_ps;
        self.stats.pm_reads += 1;
        start + self.read_ps
    }

    /// The newest data the MC holds for `line` over `base` (what a read sees): the WPQ, then
    /// the writes that arrived and wait for an entry.
    pub fn overlay(&self, base: &mut LineData) {
        for d in self.wpq.iter().map(|e| &e.data) {
            if d.line == base.line {
                base.merge(d);
            }
        }
        if self.line_waits(base.line) {
            for d in self.waiting.iter().map(|w| &w.data) {
                if d.line == base.line {
                    base.merge(d);
                }
            }
        }
    }

    /// Average occupancy up to `end`.
    pub fn occupancy_avg(&self, end: u64) -> f64 {
        let extra = end.saturating_sub(self.last_change) as u128 * self.wpq.len() as u128;
        if end == 0 {
            0.0
        } else {
            (self.stats.occ_integral + extra) as f64 / end as f64
        }
    }

    pub fn write_occupancy_ps(&self) -> u64 {
        self.write_occ_ps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u64) -> LineData {
        let mut d = LineData::new(0x1_0000_0000);
        d.set(0, id);
        d
    }

    /// A line of its own per `id`, written with value `id`.
    fn other(id: u64) -> LineData {
        let mut d = LineData::new(0x2_0000_0000 + id * 64);
        d.set(0, id);
        d
    }

    /// Two WPQ entries and a slow write channel (1000 ns per line), so accepted writes do not
    /// start at once.
    fn slow_two_entry_mc() -> Mc<u32> {
        let mut cfg = Config::default();
        cfg.mc.wpq_entries = 2;
        cfg.pm.write_gbps = 0.064;
        Mc::new(&cfg)
    }

    #[test]
    fn newer_write_never_overtakes_an_older_waiting_one() {
        let mut mc = slow_two_entry_mc();
        let mut nvm = Nvm::default();
        let mut acc = Vec::new();
        assert!(mc.offer(0, other(8), None).is_some());
        assert!(mc.offer(0, other(9), None).is_some());
        assert!(mc.offer(0, line(1), Some(1)).is_none());
        assert!(mc.offer(0, line(2), Some(2)).is_none());
        // The first write completes; write 1 is accepted but its media write starts later.
        let t = mc.wpq.front().unwrap().done;
        mc.complete(t, Some(&mut nvm), &mut acc);
        assert!(mc.wpq.iter().any(|e| e.data.line == 0x1_0000_0000 && e.start > t));
        // Write 3 must queue behind write 2, not merge into write 1's entry ahead of it.
        mc.offer(t, line(3), Some(3));
        while let Some(e) = mc.wpq.front() {
            let t = e.done;
            mc.complete(t, Some(&mut nvm), &mut acc);
        }
        assert_eq!(nvm.get(0x1_0000_0000), Some(3), "the newest write wins");
    }

    /// Tester W's W4: writes of one line arriving while an older one waits for an entry each
    /// waited for an entry of their own and cost a media write each; they merge into it, and
    /// are acknowledged when it enters the queue.
    #[test]
    fn writes_of_a_waiting_line_merge_into_it_and_persist_with_it() {
        let mut mc = slow_two_entry_mc();
        let (mut nvm, mut acc) = (Nvm::default(), Vec::new());
        assert!(mc.offer(0, other(8), None).is_some());
        assert!(mc.offer(0, other(9), None).is_some());
        assert!(mc.offer(0, line(1), Some(1)).is_none());
        assert!(mc.offer(0, other(10), Some(10)).is_none());
        for v in 2..=4 {
            assert!(mc.offer(0, line(v), Some(v as u32)).is_none(), "write {v} waits");
        }
        assert_eq!(mc.waiting.len(), 2, "writes 2-4 merged into write 1");
        assert_eq!(mc.stats.wpq_coalesced, 3);
        // No write of the line is acknowledged before write 1 enters the queue, then all are.
        let t = mc.wpq.front().unwrap().done;
        mc.complete(t, Some(&mut nvm), &mut acc);
        assert_eq!(acc.iter().filter_map(|a| a.0).collect::<Vec<_>>(), vec![1]);
        mc.out_replies.sort_unstable();
        assert_eq!(mc.out_replies, vec![2, 3, 4]);
        assert!(mc.write_persistent(0x1_0000_0000, 4));
        while let Some(e) = mc.wpq.front() {
            let t = e.done;
            mc.complete(t, Some(&mut nvm), &mut acc);
        }
        assert_eq!(nvm.get(0x1_0000_0000), Some(4), "the newest write wins");
        assert_eq!(mc.stats.pm_writes, 4, "8, 9, the line once, 10");
    }
}
