//! `pmsim trace lint`: which PM stores a legacy x86 program never made persistent.
//!
//! Why it exists: `pmsim crash --model x86` checks the *hardware* against what x86 promises, so
//! a program that forgets a `clwb` or an `sfence` passes it (the design did nothing wrong).
//! A researcher tracing their own program wants the other answer too: which of its stores would
//! a crash at the end lose, and where it flushes or fences for nothing. This is that pass, in
//! the spirit of pmemcheck, over the trace's global order (the order the program ran in).
//!
//! The rule is the checker's x86 rule (docs/design.md §5) read at the end of the run: a store is
//! **persisted** once a flush of its line by some thread, after the store in global order, is
//! followed by that thread's next fence point (`sfence`, `mfence`, locked `rmw`, `release`), or,
//! for a non-temporal store, once its own thread's next fence point follows it. A byte counts
//! only through its last store: an earlier value that was overwritten needs no persisting, but
//! two stores to disjoint bytes of one 8-byte word are two stores (each is named).
//! What it reports (all deterministic; stores in gid order):
//! - **unpersisted** stores: the last store of some PM bytes that never became persisted, split
//!   into never flushed and flushed but not fenced; of the latter, `clflushed-not-fenced` ones
//!   were flushed by a `clflush` and miss only a fence (or a later store of the flushing
//!   thread) after it;
//! - **redundant flushes**: a flush of a PM line that holds no store waiting for one (nothing
//!   written since its last flush), and flushes of volatile lines;
//! - **empty fences**: an `sfence`/`mfence` with no flush or non-temporal store of its thread
//!   since its previous fence point (it orders nothing persistent).
//!
//! - **unpersisted lock words**: PM bytes the trace shows used as a lock, whose last store
//!   never persisted, reported apart (named, with their operation) and not counted as
//!   unpersisted stores: libpmemobj's `PMEMmutex` and most recoveries re-initialise their
//!   locks. A lock is recognised by its behaviour, not by the kind of its last store:
//!   * a **library sync object**: the target of a `release` that carries no value, which is
//!     how the tracer records `pthread_mutex_unlock`, `sem_post`, `pthread_spin_unlock`, ... (a
//!     C11 release store carries the value it stored, and is data);
//!   * a **lock/unlock pattern**: an `rmw` of thread T changes the bytes it addresses from `p`
//!     to `h`, and the next write changing them is T's own and either writes `p` back (a
//!     CAS/xchg lock released by a plain store, a release store or another rmw), or, within the
//!     same operation (`begin`/`end`) of T, clears every bit the rmw set (a version lock or
//!     seqlock: CAS `v`→`v|L`, then `v+2L`); and this is what happens after most of the
//!     changing rmws of those bytes that the same thread changes next (after the rmw of a
//!     `fetch_add` counter or a CAS'd list head, the thread's next update moves on instead of
//!     going back; a lock's initialisation by an rmw is outvoted by its use). A change by
//!     another thread decides nothing. Values come from the trace (the tracer records the value
//!     of every store, rmw and release store of up to 8 bytes); bytes whose previous value is
//!     unknown give no evidence, but on bytes the others' votes make a lock, the thread's next
//!     change within the rmw's operation is its unlock (a lock's first use in a pool the trace
//!     never wrote: that unlock is no late store).
//!
//!   An `acquire` alone proves nothing (a C11 acquire load reads data as often as a lock), so
//!   data published with release stores or updated by `fetch_add`/CAS and read with acquire
//!   is data, and counts.
//!
//! - **late stores** (traces with operations, `begin`/`end`): stores an operation made that
//!   were not persisted by its end, and persisted later after all (`persisted-late`: a later
//!   operation happened to flush the line or rewrite the bytes) or overwritten before they ever
//!   persisted (`never-persisted`). A crash in between loses a store of an operation that had
//!   already ended. This is how a forgotten flush shows in a program that keeps running (a
//!   benchmark loop), which the end-of-run rule cannot see. Reported apart, not counted as
//!   unpersisted (an operation may defer a store on purpose, e.g. a counter recovery rebuilds);
//!   lock words are left out. Without operations the end of one is unknown (a transaction may
//!   persist its data at its commit, several persist points after a store), so nothing is
//!   late: mark operations with `pmsim.h` to get this check.
//!
//! A `clflush` (unlike `clflushopt`/`clwb`) is ordered with later writes: a store of its thread
//! after it persists what it flushed, fence or not (docs/design.md §5). A program that ends
//! right after a `clflush` has ordered the write-back but not waited for it: the store is
//! reported `clflushed-not-fenced` (only a fence after the `clflush` is missing).
//!
//! A design-neutral trace (`ofence`/`dfence`) leaves persistence to the design, not the program:
//! it is reported as such, with nothing to lint. A trace recorded from a program by `pmsim trace
//! record` (its metadata says so) is the program's x86 code whatever it contains: one that never
//! flushes or fences is linted, not taken for design-neutral.

use crate::dialect::{Dialect, DialectScan};
use crate::event::{Event, Kind, LINE_BYTES, WORD_BYTES};
use crate::trace::{is_pm, PmRange};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// The state of a store's bytes in one PM word.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Written, not yet flushed (since the write).
    Dirty,
    /// Flushed (or non-temporal) after the write, waiting for a fence point of these threads.
    Flushed,
    Persisted,
}

/// The bytes of one 8-byte PM word that one store wrote and no later store overwrote.
#[derive(Clone, Copy)]
struct Slot {
    gid: u64,
    /// Bytes of the word (bit i = byte i) still showing this store's value.
    mask: u8,
    state: State,
    /// Threads (bit `t % 64`) whose flush since the store waits for their fence.
    flushed_by: u64,
    /// A `clflush` flushed it since the store (only a fence after it is missing).
    clflushed: bool,
    /// The store was non-temporal: it sits in its core's write-combining buffer, which no
    /// flush (of any thread) writes back; only its own thread's fence point does.
    nt: bool,
    /// Its operation ended before it persisted: late if persisted or overwritten after that.
    overdue: bool,
}

fn bit(t: usize) -> u64 {
    1u64 << (t % 64)
}

/// The bytes of word `w` that `[addr, addr + size)` covers (bit i = byte `w + i`).
fn mask_in(w: u64, addr: u64, size: u64) -> u8 {
    let lo = addr.max(w);
    let hi = (addr + size).min(w + WORD_BYTES);
    if hi <= lo {
        return 0;
    }
    (((1u16 << (hi - lo)) - 1) << (lo - w)) as u8
}

/// One store of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LintStore {
    pub gid: u64,
    pub thread: usize,
    pub kind: &'static str,
    pub addr: u64,
    pub size: u8,
    /// `never-flushed`, `flushed-not-fenced` or `clflushed-not-fenced` (unpersisted: flushed by
    /// a `clflush`, only a fence after it missing); `persisted-late` or `never-persisted`
    /// (late); `lock` or `sync-object` (an unpersisted lock word, not counted: module doc).
    pub state: &'static str,
    /// The operation (`begin`/`end` label) the store was in, if any, and its ordinal among
    /// that thread's operations (0-based).
    pub op: Option<String>,
    pub op_index: Option<u64>,
}

/// What `pmsim trace lint` reports (stable names, docs/design.md §3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LintReport {
    /// `x86` (linted) or `neutral` (persistence is the design's: nothing to lint).
    pub dialect: &'static str,
    pub threads: usize,
    pub events: u64,
    pub pm_stores: u64,
    /// Stores whose value some PM bytes still show at the end and that never became persisted.
    pub unpersisted_stores: u64,
    /// Of those, the ones never flushed after they were written.
    pub never_flushed: u64,
    /// Of those, the ones flushed but never followed by a fence point of the flushing thread.
    pub flushed_not_fenced: u64,
    /// Of those, the ones a `clflush` flushed: only a fence (or a later store of the flushing
    /// thread) after the `clflush` is missing.
    pub clflushed_not_fenced: u64,
    /// PM words with some unpersisted store.
    pub unpersisted_words: u64,
    /// PM lock words (bytes used as a lock: module doc) whose last store never persisted (not
    /// counted in `unpersisted_stores`).
    pub unpersisted_sync_words: u64,
    /// The stores whose bytes in those words are unpersisted.
    pub unpersisted_sync_stores: u64,
    /// The first of those stores, by gid (at most `max`; state `lock`, or `sync-object` for a
    /// library sync object).
    pub unpersisted_sync: Vec<LintStore>,
    pub flushes: u64,
    /// Flushes of a PM line with nothing written to it since its last flush (or ever).
    pub redundant_flushes: u64,
    /// Flushes of a volatile (non-PM) line.
    pub volatile_flushes: u64,
    pub fences: u64,
    /// `sfence`/`mfence` with no flush or non-temporal store of its thread since its previous
    /// fence point.
    pub empty_fences: u64,
    /// The first unpersisted stores, by gid (at most the `max` asked for).
    pub unpersisted: Vec<LintStore>,
    /// Stores not persisted by the end of their operation, then persisted or overwritten (lock
    /// words left out; module doc).
    pub late_stores: u64,
    /// The first of those, by gid (at most `max`).
    pub late: Vec<LintStore>,
}

struct StoreInfo {
    thread: usize,
    kind: Kind,
    addr: u64,
    size: u8,
    op: Option<(u32, u64)>,
}

/// An `rmw` that changed its bytes, waiting for the next change of them (module doc).
#[derive(Clone, Copy)]
struct Held {
    gid: u64,
    thread: usize,
    addr: u64,
    size: u8,
    /// The value before the rmw (unknown when the trace never wrote those bytes before) and the
    /// one it wrote.
    before: Option<u64>,
    after: u64,
    op: Option<(u32, u64)>,
}

/// Evidence about the bytes one `rmw` addresses: `[addr, addr + size)` -> (lock/unlock pairs,
/// changes after an rmw that were neither).
type Evidence = FxHashMap<(u64, u8), (u32, u32)>;

/// The pass, fed one event at a time in global order.
pub struct Lint<'a> {
    pm: &'a [PmRange],
    scan: DialectScan,
    rep: LintReport,
    /// Per PM word: the stores whose bytes it still shows.
    words: FxHashMap<u64, Vec<Slot>>,
    /// Per PM word: its bytes' last values (as written by the trace) and which are known.
    vals: FxHashMap<u64, (u64, u8)>,
    /// Per PM word: the rmws starting in it that wait for the next change of their bytes.
    held: FxHashMap<u64, Vec<Held>>,
    evidence: Evidence,
    /// Per PM word: bytes a `release` without a value addressed (library sync objects).
    sync_objects: FxHashMap<u64, u8>,
    /// Stores that act on a lock (an rmw, a value-less release, a write completing the
    /// lock/unlock pattern): only these are exempt on lock bytes; a plain store there (the
    /// memory reused for data) is data.
    sync_ops: rustc_hash::FxHashSet<u64>,
    /// Per thread: (word, store gid) flushed since its last fence point, waiting for the next.
    pending: Vec<Vec<(u64, u64)>>,
    /// Per thread: (word, store gid) a `clflush` flushed since the thread's last store or fence
    /// point, persisted by its next store.
    clflushed: Vec<Vec<(u64, u64)>>,
    /// Per thread: a flush or non-temporal store since its last fence point.
    since_fence: Vec<bool>,
    /// Per thread: its current operation (label id, ordinal) and how many it began.
    op: Vec<Option<(u32, u64)>>,
    ops_begun: Vec<u64>,
    /// Stores that are the last of some bytes (kept to name them in the report).
    stores: FxHashMap<u64, StoreInfo>,
    /// Per thread: (word, store gid) of the PM stores of its current operation.
    op_stores: Vec<Vec<(u64, u64)>>,
    /// Late stores: gid -> (a word of theirs, its bytes they showed, persisted).
    late: FxHashMap<u64, (u64, u8, bool)>,
}

impl<'a> Lint<'a> {
    pub fn new(pm: &'a [PmRange], threads: usize) -> Lint<'a> {
        Lint {
            pm,
            scan: DialectScan::default(),
            rep: LintReport { threads, ..Default::default() },
            words: FxHashMap::default(),
            vals: FxHashMap::default(),
            held: FxHashMap::default(),
            evidence: FxHashMap::default(),
            sync_objects: FxHashMap::default(),
            sync_ops: Default::default(),
            pending: vec![Vec::new(); threads],
            clflushed: vec![Vec::new(); threads],
            since_fence: vec![false; threads],
            op: vec![None; threads],
            ops_begun: vec![0; threads],
            stores: FxHashMap::default(),
            op_stores: vec![Vec::new(); threads],
            late: FxHashMap::default(),
        }
    }

    fn words_of(addr: u64, size: u64) -> impl Iterator<Item = u64> {
        let end = addr + size.max(1);
        (addr & !(WORD_BYTES - 1)..end).step_by(WORD_BYTES as usize)
    }

    /// The value of `[addr, addr + size)` (at most 8 bytes), if the trace gave every byte.
    fn value(&self, addr: u64, size: u8) -> Option<u64> {
        if size == 0 || size > 8 {
            return None;
        }
        let mut v = 0u64;
        for i in 0..size as u64 {
            let a = addr + i;
            let (val, known) = self.vals.get(&(a & !(WORD_BYTES - 1)))?;
            let b = a & (WORD_BYTES - 1);
            if known & (1 << b) == 0 {
                return None;
            }
            v |= ((val >> (8 * b)) & 0xff) << (8 * i);
        }
        Some(v)
    }

    /// Records what a write leaves in its bytes: its value, or unknown (no value recorded, a
    /// `release` without one, or more than 8 bytes).
    fn write_value(&mut self, ev: &Event) {
        let value = (ev.has_value && ev.size <= 8).then_some(ev.data);
        for w in Self::words_of(ev.addr, ev.size as u64) {
            let m = mask_in(w, ev.addr, ev.size.max(1) as u64);
            let e = self.vals.entry(w).or_insert((0, 0));
            match value {
                Some(v) => {
                    for b in 0..WORD_BYTES {
                        if m & (1 << b) != 0 {
                            let byte = (v >> (8 * (w + b - ev.addr))) & 0xff;
                            e.0 = (e.0 & !(0xff << (8 * b))) | (byte << (8 * b));
                        }
                    }
                    e.1 |= m;
                }
                None => e.1 &= !m,
            }
        }
    }

    /// The lock evidence a write to PM gives (module doc): it settles the rmws waiting for a
    /// change of its bytes, and an rmw that changes its bytes waits for the next one. Returns
    /// whether the write acts on a lock (an rmw, a value-less release, or the unlock of a pair).
    fn classify(&mut self, t: usize, ev: &Event) -> bool {
        let before = if ev.kind == Kind::Rmw { self.value(ev.addr, ev.size) } else { None };
        if ev.kind == Kind::Release && !ev.has_value {
            for w in Self::words_of(ev.addr, ev.size as u64) {
                *self.sync_objects.entry(w).or_default() |= mask_in(w, ev.addr, ev.size.max(1) as u64);
            }
        }
        self.write_value(ev);
        let end = ev.addr + ev.size.max(1) as u64;
        let mut unlocked = false;
        for w in Self::words_of(ev.addr, ev.size as u64) {
            let Some(list) = self.held.get_mut(&w) else { continue };
            let mut settled = Vec::new();
            list.retain(|h| {
                let overlaps = h.addr < end && ev.addr < h.addr + h.size as u64;
                if overlaps {
                    settled.push(*h);
                }
                !overlaps
            });
            if list.is_empty() {
                self.held.remove(&w);
            }
            for h in settled {
                let now = self.value(h.addr, h.size);
                if now == Some(h.after) {
                    // Unchanged (a failed CAS writes the old value back): still waiting.
                    self.held.entry(w).or_default().push(h);
                    continue;
                }
                let Some(now) = now.filter(|_| h.thread == t) else { continue };
                let same_op = h.op.is_some() && h.op == self.op[t];
                let Some(before) = h.before else {
                    // No evidence either way, but the same thread's next change in the same
                    // operation is the unlock if the bytes are a lock by the others' votes (a
                    // lock's first use in a program whose pool was never written in the trace).
                    unlocked |= same_op && h.addr == ev.addr && h.size == ev.size;
                    continue;
                };
                let set = h.after & !before;
                let pair = now == before || (same_op && set != 0 && now & set == 0);
                let e = self.evidence.entry((h.addr, h.size)).or_default();
                if pair {
                    e.0 += 1;
                    unlocked |= h.addr == ev.addr && h.size == ev.size;
                } else {
                    e.1 += 1;
                }
            }
        }
        if ev.kind == Kind::Rmw && !unlocked {
            if let Some(after) = self.value(ev.addr, ev.size) {
                if before != Some(after) {
                    let h =
                        Held { gid: ev.gid, thread: t, addr: ev.addr, size: ev.size, before, after, op: self.op[t] };
                    self.held.entry(ev.addr & !(WORD_BYTES - 1)).or_default().push(h);
                }
            }
        }
        ev.kind == Kind::Rmw || (ev.kind == Kind::Release && !ev.has_value) || unlocked
    }

    fn store(&mut self, t: usize, ev: &Event) {
        // Not visible before the clflushes ahead of it completed, volatile or not.
        self.persist(t, true);
        if !is_pm(self.pm, ev.addr) {
            return;
        }
        self.rep.pm_stores += 1;
        if self.classify(t, ev) {
            self.sync_ops.insert(ev.gid);
        }
        let nt = ev.kind == Kind::NtStore;
        let state = if nt { State::Flushed } else { State::Dirty };
        let flushed_by = if nt { bit(t) } else { 0 };
        for w in Self::words_of(ev.addr, ev.size as u64) {
            let mask = mask_in(w, ev.addr, ev.size.max(1) as u64);
            let slots = self.words.entry(w).or_default();
            let late = &mut self.late;
            slots.retain_mut(|o| {
                let had = o.mask;
                o.mask &= !mask;
                if o.mask != 0 {
                    return true;
                }
                if o.overdue && o.state != State::Persisted {
                    late.entry(o.gid).or_insert((w, had, false));
                }
                false
            });
            let slot = Slot { gid: ev.gid, mask, state, flushed_by, clflushed: false, nt, overdue: false };
            slots.push(slot);
            if nt {
                self.pending[t].push((w, ev.gid));
            }
            if self.op[t].is_some() {
                self.op_stores[t].push((w, ev.gid));
            }
        }
        if nt {
            self.since_fence[t] = true;
        }
        let info = StoreInfo { thread: t, kind: ev.kind, addr: ev.addr, size: ev.size, op: self.op[t] };
        self.stores.insert(ev.gid, info);
    }

    fn flush(&mut self, t: usize, ev: &Event) {
        self.rep.flushes += 1;
        self.since_fence[t] = true;
        let line = ev.addr & !(LINE_BYTES - 1);
        if !is_pm(self.pm, line) {
            self.rep.volatile_flushes += 1;
            return;
        }
        let mut useful = false;
        for w in (line..line + LINE_BYTES).step_by(WORD_BYTES as usize) {
            for s in self.words.get_mut(&w).into_iter().flatten() {
                // A store another thread flushed but has not fenced yet is covered by this
                // thread's fence too; one this thread flushed already waits for it.
                if s.state != State::Persisted && !s.nt {
                    if ev.kind == Kind::Clflush {
                        self.clflushed[t].push((w, s.gid));
                        s.clflushed = true;
                    }
                    if s.flushed_by & bit(t) == 0 {
                        s.state = State::Flushed;
                        s.flushed_by |= bit(t);
                        self.pending[t].push((w, s.gid));
                        useful = true;
                    }
                }
            }
        }
        if !useful {
            self.rep.redundant_flushes += 1;
        }
    }

    fn fence_point(&mut self, t: usize) {
        self.persist(t, false);
        self.clflushed[t].clear();
        self.since_fence[t] = false;
    }

    /// What thread `t` flushed is persistent now: what its `clflush`es flushed (`clflush_only`),
    /// or everything its flushes since its last fence point did.
    fn persist(&mut self, t: usize, clflush_only: bool) {
        let list = if clflush_only { &mut self.clflushed[t] } else { &mut self.pending[t] };
        for (w, gid) in list.drain(..) {
            if let Some(s) = self.words.get_mut(&w).and_then(|v| v.iter_mut().find(|s| s.gid == gid)) {
                s.state = State::Persisted;
                s.flushed_by = 0;
                if s.overdue {
                    self.late.entry(gid).or_insert((w, s.mask, true));
                }
            }
        }
    }

    pub fn step(&mut self, t: usize, ev: &Event) {
        self.scan.see(ev.kind);
        self.rep.events += 1;
        match ev.kind {
            Kind::Store | Kind::NtStore => self.store(t, ev),
            Kind::Clwb | Kind::ClflushOpt | Kind::Clflush => self.flush(t, ev),
            Kind::Sfence | Kind::Mfence => {
                self.rep.fences += 1;
                if !self.since_fence[t] {
                    self.rep.empty_fences += 1;
                }
                self.fence_point(t);
            }
            // Locked instructions (and releases, as the x86 model reads them) are fence points;
            // their own store is then written like any other.
            Kind::Rmw | Kind::Release => {
                self.fence_point(t);
                self.store(t, ev);
            }
            Kind::Begin => {
                self.op[t] = Some((ev.addr as u32, self.ops_begun[t]));
                self.ops_begun[t] += 1;
            }
            Kind::End => {
                self.op[t] = None;
                // What the operation stored and has not persisted by now is overdue.
                for (w, g) in self.op_stores[t].drain(..) {
                    let slots = self.words.get_mut(&w);
                    if let Some(s) =
                        slots.and_then(|v| v.iter_mut().find(|s| s.gid == g && s.state != State::Persisted))
                    {
                        s.overdue = true;
                    }
                }
            }
            _ => {}
        }
    }

    /// Per PM word: the bytes used as a lock (module doc), and whether as a library sync object.
    fn lock_bytes(&self) -> FxHashMap<u64, (u8, u8)> {
        let mut locks: FxHashMap<u64, (u8, u8)> = FxHashMap::default();
        for (&w, &m) in &self.sync_objects {
            let e = locks.entry(w).or_default();
            e.0 |= m;
            e.1 |= m;
        }
        for (&(addr, size), &(pairs, broken)) in &self.evidence {
            if pairs > broken {
                for w in Self::words_of(addr, size as u64) {
                    locks.entry(w).or_default().0 |= mask_in(w, addr, size.max(1) as u64);
                }
            }
        }
        locks
    }

    /// The report, naming at most `max` stores of each list.
    pub fn finish(mut self, labels: &[String], max: usize) -> LintReport {
        let mut rep = std::mem::take(&mut self.rep);
        if self.scan.dialect() != Dialect::X86 {
            return LintReport { dialect: "neutral", ..rep };
        }
        rep.dialect = "x86";
        let locks = self.lock_bytes();
        // An rmw still waiting for its unlock when the program ended took a "lock" nobody gave
        // back: real locks are released by then, so it is data (a reference count's last get,
        // a stack's last push, whose earlier pairs looked like lock and unlock). One whose old
        // value is unknown proves nothing either way.
        let still_held: rustc_hash::FxHashSet<u64> =
            self.held.values().flatten().filter(|h| h.before.is_some()).map(|h| h.gid).collect();
        let sync_op = |gid: &u64| self.sync_ops.contains(gid) && !still_held.contains(gid);
        // Is this store's part of word `w` lock bytes, and of a library sync object?
        let lock_of = |w: u64, mask: u8| -> Option<bool> {
            let &(l, obj) = locks.get(&w)?;
            (mask & !l == 0).then_some(mask & !obj == 0)
        };
        // Per unpersisted store: (flushed, by a clflush); per lock store: a sync object.
        let mut bad: FxHashMap<u64, (bool, bool)> = FxHashMap::default();
        let mut sync: FxHashMap<u64, bool> = FxHashMap::default();
        for (&w, slots) in &self.words {
            let (mut data, mut lock) = (false, false);
            for s in slots.iter().filter(|s| s.state != State::Persisted) {
                if let Some(obj) = lock_of(w, s.mask).filter(|_| sync_op(&s.gid)) {
                    lock = true;
                    *sync.entry(s.gid).or_insert(obj) &= obj;
                    continue;
                }
                data = true;
                let e = bad.entry(s.gid).or_insert((false, false));
                e.0 |= s.state == State::Flushed;
                e.1 |= s.state == State::Flushed && s.clflushed;
            }
            rep.unpersisted_words += data as u64;
            rep.unpersisted_sync_words += lock as u64;
        }
        let mut sync: Vec<(u64, bool)> = sync.into_iter().collect();
        sync.sort_unstable();
        rep.unpersisted_sync_stores = sync.len() as u64;
        rep.unpersisted_sync = sync
            .iter()
            .take(max)
            .map(|&(gid, obj)| self.named(gid, if obj { "sync-object" } else { "lock" }, labels))
            .collect();
        let mut late: Vec<(u64, bool)> = self
            .late
            .iter()
            .filter(|&(gid, &(w, mask, _))| lock_of(w, mask).is_none() || !sync_op(gid))
            .map(|(&gid, &(_, _, persisted))| (gid, persisted))
            .collect();
        late.sort_unstable();
        rep.late_stores = late.len() as u64;
        rep.late = late
            .iter()
            .take(max)
            .map(|&(gid, p)| self.named(gid, if p { "persisted-late" } else { "never-persisted" }, labels))
            .collect();
        let mut gids: Vec<(u64, (bool, bool))> = bad.into_iter().collect();
        gids.sort_unstable();
        rep.unpersisted_stores = gids.len() as u64;
        rep.flushed_not_fenced = gids.iter().filter(|g| g.1 .0).count() as u64;
        rep.clflushed_not_fenced = gids.iter().filter(|g| g.1 .1).count() as u64;
        rep.never_flushed = rep.unpersisted_stores - rep.flushed_not_fenced;
        rep.unpersisted = gids
            .iter()
            .take(max)
            .map(|&(gid, (flushed, by_clflush))| {
                let state = match (flushed, by_clflush) {
                    (_, true) => "clflushed-not-fenced",
                    (true, false) => "flushed-not-fenced",
                    (false, _) => "never-flushed",
                };
                self.named(gid, state, labels)
            })
            .collect();
        rep
    }

    fn named(&self, gid: u64, state: &'static str, labels: &[String]) -> LintStore {
        let s = &self.stores[&gid];
        LintStore {
            gid,
            thread: s.thread,
            kind: s.kind.name(),
            addr: s.addr,
            size: s.size,
            state,
            op: s.op.map(|(l, _)| labels.get(l as usize).cloned().unwrap_or_else(|| format!("#{l}"))),
            op_index: s.op.map(|(_, i)| i),
        }
    }
}

/// Lints an in-memory trace.
pub fn lint_trace(trace: &crate::Trace, max: usize) -> LintReport {
    let mut l = Lint::new(&trace.pm, trace.num_threads());
    if trace.recorded() {
        l.scan.recorded_program();
    }
    crate::for_each_in_global_order(trace, |t, ev| l.step(t, ev));
    l.finish(&trace.labels, max)
}

/// Lints a trace file: binary traces are streamed in global order, text traces read first.
pub fn lint_file(path: &std::path::Path, max: usize) -> Result<LintReport, crate::TraceError> {
    // A pipe or device can be read once only (probing its format would eat its first bytes).
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(lint_trace(&crate::binary::read_any(path)?, max));
    }
    if !crate::binary::is_binary(path) {
        return Ok(lint_trace(&crate::text::read_path(path)?, max));
    }
    let mut r = crate::GlobalOrderReader::open(path)?;
    let pm = r.header().pm.clone();
    let threads = r.header().threads;
    let labels = crate::BinarySource::labels(path)?;
    let mut l = Lint::new(&pm, threads);
    if crate::meta::recorded(&crate::meta::read_meta(path)?) {
        l.scan.recorded_program();
    }
    r.for_each(|t, ev| l.step(t, ev))?;
    Ok(l.finish(&labels, max))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lint(body: &str) -> LintReport {
        let t = crate::text::parse_str("t", &format!("# pmsim trace v1\n{body}")).unwrap();
        lint_trace(&t, 10)
    }

    fn unpersisted(r: &LintReport) -> Vec<(u64, &'static str)> {
        r.unpersisted.iter().map(|s| (s.gid, s.state)).collect()
    }

    fn late(r: &LintReport) -> Vec<(u64, &'static str)> {
        r.late.iter().map(|s| (s.gid, s.state)).collect()
    }

    #[test]
    fn a_store_its_operation_did_not_persist_is_late_if_persisted_or_overwritten_after() {
        // Op 1 stores 1 and 2 but persists only 1 by its end; op 2 stores and persists 7; then
        // 2's line is flushed (persisted late), or 2 is overwritten before any flush.
        let op1 = "T0 begin op\nT0 store 0x100000000 8 1\nT0 store 0x100001000 8 2\nT0 clwb 0x100000000\nT0 sfence\nT0 end op\n";
        let op2 = "T0 begin op\nT0 store 0x100002000 8 3\nT0 clwb 0x100002000\nT0 sfence\nT0 end op\n";
        let r = lint(&format!("threads 1\n{op1}{op2}T0 clwb 0x100001000\nT0 sfence\n"));
        assert_eq!((r.unpersisted_stores, late(&r)), (0, vec![(2, "persisted-late")]));
        assert_eq!(r.late[0].op.as_deref(), Some("op"));
        let r = lint(&format!("threads 1\n{op1}{op2}T0 store 0x100001000 8 5\nT0 clwb 0x100001000\nT0 sfence\n"));
        assert_eq!((r.unpersisted_stores, late(&r)), (0, vec![(2, "never-persisted")]));
        // Flushed by the end but fenced only in the next operation: late too.
        let r =
            lint(&format!("threads 1\nT0 begin op\nT0 store 0x100001000 8 2\nT0 clwb 0x100001000\nT0 end op\n{op2}"));
        assert_eq!(late(&r), vec![(1, "persisted-late")]);
        // Persisted before its operation ends: not late; stores outside operations never are.
        let r = lint(
            &format!(
                "threads 1\n{op1}T0 store 0x100003000 8 4\n{op2}T0 clwb 0x100001000\nT0 clwb 0x100003000\nT0 sfence\n"
            )
            .replace("T0 clwb 0x100000000", "T0 clwb 0x100000000\nT0 clwb 0x100001000"),
        );
        assert_eq!((r.unpersisted_stores, r.late_stores), (0, 0));
    }

    #[test]
    fn a_flushed_and_fenced_store_is_persisted_and_nothing_else_is() {
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\n");
        assert_eq!((r.dialect, r.unpersisted_stores, r.redundant_flushes, r.empty_fences), ("x86", 0, 0, 0));
        // flushed, never fenced; fenced, never flushed; flushed before the store
        for (body, state) in [
            ("T0 store 0x100000000 8 1\nT0 clwb 0x100000000\n", "flushed-not-fenced"),
            ("T0 store 0x100000000 8 1\nT0 clwb 0x100000040\nT0 sfence\n", "never-flushed"),
            ("T0 clwb 0x100000000\nT0 store 0x100000000 8 1\nT0 sfence\n", "never-flushed"),
        ] {
            let r = lint(&format!("threads 1\n{body}"));
            assert_eq!(unpersisted(&r), vec![(if body.starts_with("T0 clwb") { 1 } else { 0 }, state)], "{body}");
        }
    }

    #[test]
    fn only_a_words_last_store_counts_and_ntstores_need_only_a_fence() {
        // The first store is overwritten unflushed: only the second matters, and it persisted.
        let r = lint(
            "threads 1\nT0 store 0x100000000 8 1\nT0 store 0x100000000 8 2\nT0 clflushopt 0x100000000\nT0 mfence\n",
        );
        assert_eq!(r.unpersisted_stores, 0);
        // A store after the flush but before the fence is not covered by it.
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 store 0x100000008 8 2\nT0 sfence\n");
        assert_eq!(unpersisted(&r), vec![(2, "never-flushed")]);
        let r = lint("threads 1\nT0 ntstore 0x100000000 8 1\nT0 sfence\nT0 ntstore 0x100000040 8 2\n");
        assert_eq!(unpersisted(&r), vec![(2, "flushed-not-fenced")]);
    }

    #[test]
    fn the_flushing_threads_fence_counts_not_the_writers() {
        let body = "threads 2\nT0 store 0x100000000 8 1\nT1 clwb 0x100000000\nT0 sfence\n";
        assert_eq!(unpersisted(&lint(body)), vec![(0, "flushed-not-fenced")]);
        let r = lint(&format!("{body}T1 sfence\n"));
        assert_eq!(r.unpersisted_stores, 0);
        // A locked rmw is a fence point; its own store is not flushed by it (a lock word: a
        // library lock's release, without a value, addresses it).
        let r = lint(
            "threads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 release 0x100000040\n\
             T0 rmw 0x100000040 8 1\n",
        );
        assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![], 1));
    }

    #[test]
    fn redundant_flushes_and_empty_fences_are_counted() {
        let r = lint(
            "threads 1\nT0 clwb 0x100000000\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 clwb 0x100000000\n\
             T0 sfence\nT0 sfence\nT0 clwb 0x2000\nT0 mfence\n",
        );
        // The first flush (nothing written) and the third (the line already waits for this
        // thread's fence) are redundant; the volatile one is counted apart.
        assert_eq!((r.redundant_flushes, r.volatile_flushes, r.flushes), (2, 1, 4));
        assert_eq!((r.empty_fences, r.fences), (1, 3));
        assert_eq!(r.unpersisted_stores, 0);
    }

    #[test]
    fn an_unpersisted_store_names_its_operation() {
        let r = lint(
            "threads 1\nT0 begin put\nT0 end put\nT0 begin put\nT0 store 0x100000010 8 1\nT0 end put\nT0 sfence\n",
        );
        let s = &r.unpersisted[0];
        assert_eq!((s.gid, s.op.as_deref(), s.op_index, s.addr, s.size), (3, Some("put"), Some(1), 0x100000010, 8));
    }

    #[test]
    fn a_design_neutral_trace_has_nothing_to_lint() {
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 ofence\n");
        assert_eq!((r.dialect, r.unpersisted_stores, r.unpersisted.len()), ("neutral", 0, 0));
    }

    fn sync(r: &LintReport) -> Vec<(u64, &'static str)> {
        r.unpersisted_sync.iter().map(|s| (s.gid, s.state)).collect()
    }

    #[test]
    fn a_pthread_style_lock_is_a_sync_object_reported_apart_with_its_stores() {
        // acquire/release of a PM mutex (the tracer's release of a library lock carries no
        // value): exempt, and named with its operation; the data store is persisted.
        let r = lint(
            "threads 1\nT0 begin put\nT0 acquire 0x100000040\nT0 store 0x100000000 8 7\nT0 clwb 0x100000000\n\
             T0 sfence\nT0 release 0x100000040\nT0 end put\n",
        );
        assert_eq!((r.unpersisted_stores, r.unpersisted_words, r.unpersisted_sync_words), (0, 0, 1));
        assert_eq!(sync(&r), vec![(5, "sync-object")]);
        assert_eq!((r.unpersisted_sync[0].op.as_deref(), r.late_stores), (Some("put"), 0));
        // `max` bounds the listing, not the counts.
        let t = crate::text::parse_str(
            "t",
            "# pmsim trace v1\nthreads 1\nT0 acquire 0x100000040\nT0 sfence\nT0 release 0x100000040\n",
        )
        .unwrap();
        let r = lint_trace(&t, 0);
        assert_eq!((r.unpersisted_sync_words, r.unpersisted_sync_stores, r.unpersisted_sync.len()), (1, 1, 0));
    }

    #[test]
    fn data_published_with_a_release_store_or_read_with_acquire_is_data() {
        // A C11 release store (it carries its value) read by another thread's acquire, and a
        // fetch_add counter read with acquire: both once exempted as "lock words" (tester G5).
        let r = lint(
            "threads 2\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 sfence\nT0 release 0x100000048 1 7\n\
             T1 acquire 0x100000048 1\nT0 rmw 0x100000080 2 1\nT1 acquire 0x100000080 2\nT0 rmw 0x100000080 2 2\n",
        );
        assert_eq!(unpersisted(&r), vec![(3, "never-flushed"), (7, "never-flushed")]);
        assert_eq!((r.unpersisted_words, r.unpersisted_sync_words), (2, 0));
        // The same release store flushed and fenced is fine.
        let r = lint("threads 1\nT0 release 0x100000048 1 7\nT0 clwb 0x100000040\nT0 sfence\n");
        assert_eq!((r.unpersisted_stores, r.unpersisted_sync_words), (0, 0));
    }

    #[test]
    fn a_cas_lock_released_by_a_plain_store_is_a_lock_not_late() {
        // Tester G5b (CCEH): each operation takes the lock with a CAS (0 -> 1), writes and
        // persists its data, and releases the lock with a plain store of 0. Another thread's
        // failed CAS (writing back the 1 it read) changes nothing.
        let op = |d: u64| {
            format!(
                "T0 begin insert\nT0 rmw 0x100000040 8 1\nT1 rmw 0x100000040 8 1\nT0 store {:#x} 8 5\n\
                 T0 clwb {:#x}\nT0 sfence\nT0 store 0x100000040 8 0\nT0 end insert\n",
                0x100000100 + d,
                0x100000100 + d
            )
        };
        let body = format!("threads 2\nT0 store 0x100000040 8 0\n{}{}", op(0), op(0x40));
        let r = lint(&body);
        assert_eq!((unpersisted(&r), r.late_stores, r.unpersisted_sync_words), (vec![], 0, 1));
        assert_eq!((sync(&r), r.unpersisted_sync_stores), (vec![(15, "lock")], 1));
        // The same lock released by an rmw (CAS 1 -> 0) or by a release store of 0.
        for unlock in ["T0 rmw 0x100000040 8 0", "T0 release 0x100000040 8 0"] {
            let r = lint(&body.replace("T0 store 0x100000040 8 0\nT0 end", &format!("{unlock}\nT0 end")));
            assert_eq!((unpersisted(&r), r.late_stores, r.unpersisted_sync_words), (vec![], 0, 1), "{unlock}");
        }
    }

    #[test]
    fn data_on_lock_bytes_is_data_when_no_lock_operation_wrote_it() {
        // Tester J: a spinlock's (or a pthread mutex's) memory reused for data: the last store
        // is a plain data store, no unlock: reported.
        let head = "threads 1\nT0 store 0x100002000 8 1\nT0 clwb 0x100002000\nT0 sfence\n";
        let spin = "T0 rmw 0x100000000 8 1\nT0 store 0x100000000 8 0\nT0 rmw 0x100000000 8 1\n\
                    T0 store 0x100000000 8 0\nT0 store 0x100000000 8 123456789\n";
        let r = lint(&format!("{head}{spin}"));
        assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![(7, "never-flushed")], 0));
        let r = lint(&format!("{head}T0 acquire 0x100000000\nT0 release 0x100000000\nT0 store 0x100000000 8 77\n"));
        assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![(5, "never-flushed")], 0));
        // The spinlock alone, released at the end, is a lock.
        let r = lint(&format!("{head}{}", spin.rsplit_once("T0 store 0x100000000 8 123456789").unwrap().0));
        assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![], 1));
    }

    #[test]
    fn an_rmw_nobody_gave_back_by_the_end_is_data() {
        // Tester J: a reference count's get/put pairs and a stack's push/pop pairs restore the
        // value like lock/unlock; the last get (push) is never undone: a lock would have been
        // released by the end, so it is data, and unflushed it is reported. (The word's value
        // before the first rmw must be known, as a program initialises it: otherwise the pairs
        // are read the other way round, put as the lock and get as its unlock.)
        for (a, b) in [("2", "1"), ("100001000", "0")] {
            let body = format!(
                "threads 1\nT0 store 0x100000000 8 {b}\nT0 clwb 0x100000000\nT0 sfence\n\
                 T0 rmw 0x100000000 8 {a}\nT0 rmw 0x100000000 8 {b}\nT0 rmw 0x100000000 8 {a}\n\
                 T0 rmw 0x100000000 8 {b}\nT0 rmw 0x100000000 8 {a}\n"
            );
            let r = lint(&body);
            assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![(7, "never-flushed")], 0), "{a}/{b}");
        }
    }

    #[test]
    fn a_version_lock_is_a_lock_within_one_operation() {
        // P-ART's version lock: CAS v -> v|2 (lock bit), unlock by fetch_add(2) -> v+4, in one
        // operation; a counter incremented once per operation is data.
        let r = lint(
            "threads 1\nT0 store 0x100000040 8 4\nT0 clwb 0x100000040\nT0 sfence\n\
             T0 begin insert\nT0 rmw 0x100000040 8 6\nT0 rmw 0x100000040 8 8\nT0 end insert\n\
             T0 begin insert\nT0 rmw 0x100000040 8 a\nT0 rmw 0x100000040 8 c\nT0 end insert\n",
        );
        assert_eq!((unpersisted(&r), r.late_stores, r.unpersisted_sync_words), (vec![], 0, 1));
        // Its node type set by an rmw in the operation that made the node (a change that is no
        // unlock) is outvoted by the lock's use.
        let r = lint(
            "threads 1\nT0 begin insert\nT0 store 0x100000040 8 4\nT0 rmw 0x100000040 8 4000000000000004\n\
             T0 clwb 0x100000040\nT0 sfence\nT0 end insert\nT0 begin insert\nT0 rmw 0x100000040 8 4000000000000006\n\
             T0 rmw 0x100000040 8 4000000000000008\nT0 end insert\nT0 begin insert\n\
             T0 rmw 0x100000040 8 400000000000000a\nT0 rmw 0x100000040 8 400000000000000c\nT0 end insert\n",
        );
        assert_eq!((unpersisted(&r), r.late_stores, r.unpersisted_sync_words), (vec![], 0, 1));
        let r = lint(
            "threads 1\nT0 store 0x100000040 8 0\nT0 begin insert\nT0 rmw 0x100000040 8 1\nT0 end insert\n\
             T0 begin insert\nT0 rmw 0x100000040 8 2\nT0 end insert\nT0 begin insert\nT0 rmw 0x100000040 8 3\n\
             T0 end insert\nT0 sfence\n",
        );
        assert_eq!((unpersisted(&r), r.late_stores, r.unpersisted_sync_words), (vec![(8, "never-flushed")], 2, 0));
    }

    #[test]
    fn a_version_locks_first_unlock_is_no_late_store_when_its_old_value_is_unknown() {
        // Tester M (Dash-EH): a bucket's version lock in a pool the trace never wrote: the first
        // CAS's old value is unknown, so its unlock gives no evidence; the later pairs make the
        // word a lock, and the first unlock acts on it like the others. Within one operation
        // only: a plain store after the first rmw in the next operation is data (late).
        let op = |n: u32, lock: &str, unlock: &str| {
            format!(
                "T0 begin insert\nT0 rmw 0x100000000 4 {lock}\nT0 store 0x1000000{n}0 8 1\n\
                 T0 clwb 0x1000000{n}0\nT0 sfence\nT0 release 0x100000000 4 {unlock}\nT0 end insert\n"
            )
        };
        let pairs = format!("{}{}", op(4, "80000001", "2"), op(8, "80000002", "3"));
        let r = lint(&format!("threads 1\n{}{pairs}", op(4, "80000000", "1")));
        assert_eq!((unpersisted(&r), late(&r), r.unpersisted_sync_words), (vec![], vec![], 1));
        let r = lint(&format!(
            "threads 1\nT0 begin insert\nT0 rmw 0x100000000 4 80000000\nT0 end insert\n\
             T0 begin insert\nT0 store 0x100000000 4 1\nT0 end insert\n{pairs}"
        ));
        assert_eq!(late(&r), vec![(4, "never-persisted")]);
    }

    #[test]
    fn a_word_that_goes_back_once_but_mostly_moves_on_is_data() {
        // A CAS'd free-list head: pop A -> B, push A back (A again), then push C, D, E: most
        // changes of the thread's own after its rmws are no return, so the head is data.
        let r = lint(
            "threads 1\nT0 store 0x100000040 8 a\nT0 rmw 0x100000040 8 b\nT0 rmw 0x100000040 8 a\n\
             T0 rmw 0x100000040 8 c\nT0 rmw 0x100000040 8 d\nT0 rmw 0x100000040 8 e\nT0 sfence\n",
        );
        assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![(5, "never-flushed")], 0));
    }

    #[test]
    fn two_stores_to_disjoint_bytes_of_one_word_are_both_named() {
        // Listing 12-16 of "Programming Persistent Memory": data (bytes 4..8) and flag (bytes
        // 0..4) of one word, neither flushed.
        let r = lint("threads 1\nT0 store 0x100000004 4 4d2\nT0 store 0x100000000 4 1\nT0 sfence\n");
        assert_eq!(unpersisted(&r), vec![(0, "never-flushed"), (1, "never-flushed")]);
        assert_eq!((r.unpersisted_stores, r.unpersisted_words), (2, 1));
        // The part of a store a later one did not overwrite still counts; the overwritten part not.
        let r = lint(
            "threads 1\nT0 store 0x100000000 8 1\nT0 store 0x100000000 4 2\nT0 clwb 0x100000000\nT0 sfence\n\
             T0 store 0x100000000 4 3\n",
        );
        assert_eq!(unpersisted(&r), vec![(4, "never-flushed")]);
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 store 0x100000000 4 2\nT0 sfence\n");
        assert_eq!(unpersisted(&r), vec![(0, "never-flushed"), (1, "never-flushed")]);
        // An operation's store half overwritten by the next is still waiting, not late yet.
        let r = lint(
            "threads 1\nT0 begin op\nT0 store 0x100000000 8 1\nT0 end op\nT0 begin op\n\
             T0 store 0x100000000 4 2\nT0 clwb 0x100000000\nT0 sfence\nT0 end op\n",
        );
        assert_eq!((unpersisted(&r), late(&r)), (vec![], vec![(1, "persisted-late")]));
    }

    #[test]
    fn a_word_only_updated_by_rmw_is_data_not_a_lock() {
        // A fetch_add counter (or a CAS'd head) never flushed: a tester's finding, once excused.
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\nT0 rmw 0x100000040 8 1\nT0 rmw 0x100000040 8 2\n");
        assert_eq!((unpersisted(&r), r.unpersisted_sync_words), (vec![(3, "never-flushed")], 0));
    }

    #[test]
    fn a_clflush_is_persisted_by_its_threads_next_store() {
        // clflush is ordered with later writes (no fence needed); clflushopt is not.
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clflush 0x100000000\nT0 store 0x2000 8 2\n");
        assert_eq!(r.unpersisted_stores, 0);
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clflushopt 0x100000000\nT0 store 0x2000 8 2\n");
        assert_eq!(unpersisted(&r), vec![(0, "flushed-not-fenced")]);
        // Nothing after it: the flush may still be on its way; only a fence after it is missing
        // (listings 12-13 and 12-23 of "Programming Persistent Memory").
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clflush 0x100000000\n");
        assert_eq!(unpersisted(&r), vec![(0, "clflushed-not-fenced")]);
        assert_eq!((r.flushed_not_fenced, r.clflushed_not_fenced, r.never_flushed), (1, 1, 0));
        // Another thread's store does not wait for it.
        let r = lint("threads 2\nT0 store 0x100000000 8 1\nT0 clflush 0x100000000\nT1 store 0x2000 8 2\n");
        assert_eq!(unpersisted(&r), vec![(0, "clflushed-not-fenced")]);
        // A clflushopt/clwb is not that case: it needs a fence, not just any later store.
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clwb 0x100000000\n");
        assert_eq!((unpersisted(&r), r.clflushed_not_fenced), (vec![(0, "flushed-not-fenced")], 0));
    }

    #[test]
    fn a_recorded_program_that_never_flushes_is_linted_not_taken_for_neutral() {
        let dir = std::env::temp_dir().join(format!("pmsim-lint-rec-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let body = "threads 1\nT0 store 0x100000000 8 1\nT0 store 0x100000040 8 2\n";
        let plain = dir.join("plain.trace");
        std::fs::write(&plain, format!("# pmsim trace v1\n{body}")).unwrap();
        let rec = dir.join("rec.trace");
        std::fs::write(
            &rec,
            format!("# pmsim trace v1\n# meta tool={} (clang pass plugin + runtime)\n{body}", crate::meta::RECORDER),
        )
        .unwrap();
        let p = lint_file(&plain, 10).unwrap();
        let r = lint_file(&rec, 10).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!((p.dialect, p.unpersisted_stores), ("neutral", 0));
        assert_eq!((r.dialect, r.unpersisted_stores, r.never_flushed), ("x86", 2, 2));
    }

    #[test]
    fn another_threads_flush_does_not_persist_a_non_temporal_store() {
        let body = "threads 2\nT0 ntstore 0x100000000 8 1\nT1 clwb 0x100000000\nT1 sfence\n";
        let r = lint(body);
        assert_eq!((unpersisted(&r), r.redundant_flushes), (vec![(0, "flushed-not-fenced")], 1));
        assert_eq!(lint(&format!("{body}T0 sfence\n")).unpersisted_stores, 0);
    }
}
