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
//! for a non-temporal store, once its own thread's next fence point follows it. A word counts
//! only through its last store: an earlier value that was overwritten needs no persisting.
//! What it reports (all deterministic; stores in gid order):
//! - **unpersisted** stores: the last store of some PM word that never became persisted, split
//!   into never flushed and flushed but not fenced;
//! - **redundant flushes**: a flush of a PM line that holds no store waiting for one (nothing
//!   written since its last flush), and flushes of volatile lines;
//! - **empty fences**: an `sfence`/`mfence` with no flush or non-temporal store of its thread
//!   since its previous fence point (it orders nothing persistent).
//!
//! - **unpersisted sync words**: PM lock words whose last store never persisted — the last
//!   store a `release`, or an `rmw` of a word some `acquire`/`release` also addresses (a lock
//!   taken by CAS) — reported apart and not counted as unpersisted stores: libpmemobj's pool
//!   and `PMEMmutex` locks, and locks a program re-initialises on recovery, are volatile by
//!   design. A word only ever updated by `rmw` (a `fetch_add` counter, a CAS'd list head) is
//!   data, and counts.
//!
//! - **late stores** (traces with operations, `begin`/`end`): stores an operation made that
//!   were not persisted by its end, and persisted later after all (`persisted-late`: a later
//!   operation happened to flush the line or rewrite the word) or overwritten before they ever
//!   persisted (`never-persisted`). A crash in between loses a store of an operation that had
//!   already ended. This is how a forgotten flush shows in a program that keeps running (a
//!   benchmark loop), which the end-of-run rule cannot see. Reported apart, not counted as
//!   unpersisted (an operation may defer a store on purpose, e.g. a counter recovery rebuilds);
//!   lock words are left out. Without operations the end of one is unknown (a transaction may
//!   persist its data at its commit, several persist points after a store), so nothing is
//!   late: mark operations with `pmsim.h` to get this check.
//!
//! A `clflush` (unlike `clflushopt`/`clwb`) is ordered with later writes: a store of its thread
//! after it persists what it flushed, fence or not (docs/design.md §5).
//!
//! A design-neutral trace (`ofence`/`dfence`) leaves persistence to the design, not the program:
//! it is reported as such, with nothing to lint. A trace recorded from a program by `pmsim trace
//! record` (its metadata says so) is the program's x86 code whatever it contains: one that never
//! flushes or fences is linted, not taken for design-neutral.

use crate::dialect::{Dialect, DialectScan};
use crate::event::{Event, Kind, LINE_BYTES, WORD_BYTES};
use crate::trace::{is_pm, PmRange};
use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;

/// The state of a PM word's last store.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Written, not yet flushed (since the write).
    Dirty,
    /// Flushed (or non-temporal) after the write, waiting for a fence point of these threads.
    Flushed,
    Persisted,
}

#[derive(Clone, Copy)]
struct WordStore {
    gid: u64,
    state: State,
    /// Threads (bit `t % 64`) whose flush since the store waits for their fence.
    flushed_by: u64,
    /// The store was non-temporal: it sits in its core's write-combining buffer, which no
    /// flush (of any thread) writes back; only its own thread's fence point does.
    nt: bool,
    /// Its operation ended before it persisted: late if persisted or overwritten after that.
    overdue: bool,
}

fn bit(t: usize) -> u64 {
    1u64 << (t % 64)
}

/// One store of the report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LintStore {
    pub gid: u64,
    pub thread: usize,
    pub kind: &'static str,
    pub addr: u64,
    pub size: u8,
    /// `never-flushed` or `flushed-not-fenced` (unpersisted); `persisted-late` or
    /// `never-persisted` (late).
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
    /// Stores whose value some PM word still shows at the end and that never became persisted.
    pub unpersisted_stores: u64,
    /// Of those, the ones never flushed after they were written.
    pub never_flushed: u64,
    /// Of those, the ones flushed but never followed by a fence point of the flushing thread.
    pub flushed_not_fenced: u64,
    /// PM words whose last store is unpersisted.
    pub unpersisted_words: u64,
    /// PM lock words (last store a `release`, or an `rmw` of a word an `acquire`/`release`
    /// addresses) that never persisted (not counted in `unpersisted_stores`).
    pub unpersisted_sync_words: u64,
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

/// The pass, fed one event at a time in global order.
pub struct Lint<'a> {
    pm: &'a [PmRange],
    scan: DialectScan,
    rep: LintReport,
    words: FxHashMap<u64, WordStore>,
    /// Per thread: (word, store gid) flushed since its last fence point, waiting for the next.
    pending: Vec<Vec<(u64, u64)>>,
    /// Per thread: (word, store gid) a `clflush` flushed since the thread's last store or fence
    /// point, persisted by its next store.
    clflushed: Vec<Vec<(u64, u64)>>,
    /// Per thread: a flush or non-temporal store since its last fence point.
    since_fence: Vec<bool>,
    /// PM words some `acquire`/`release` addresses (lock words).
    sync_words: FxHashSet<u64>,
    /// Per thread: its current operation (label id, ordinal) and how many it began.
    op: Vec<Option<(u32, u64)>>,
    ops_begun: Vec<u64>,
    /// Stores that are the last of some word (kept to name them in the report).
    stores: FxHashMap<u64, StoreInfo>,
    /// Per thread: (word, store gid) of the PM stores of its current operation.
    op_stores: Vec<Vec<(u64, u64)>>,
    /// Late stores: gid -> (a word of theirs, persisted).
    late: FxHashMap<u64, (u64, bool)>,
}

impl<'a> Lint<'a> {
    pub fn new(pm: &'a [PmRange], threads: usize) -> Lint<'a> {
        Lint {
            pm,
            scan: DialectScan::default(),
            rep: LintReport { threads, ..Default::default() },
            words: FxHashMap::default(),
            pending: vec![Vec::new(); threads],
            clflushed: vec![Vec::new(); threads],
            since_fence: vec![false; threads],
            sync_words: Default::default(),
            op: vec![None; threads],
            ops_begun: vec![0; threads],
            stores: FxHashMap::default(),
            op_stores: vec![Vec::new(); threads],
            late: FxHashMap::default(),
        }
    }

    fn words_of(ev: &Event) -> impl Iterator<Item = u64> {
        let end = ev.addr + ev.size.max(1) as u64;
        (ev.addr & !(WORD_BYTES - 1)..end).step_by(WORD_BYTES as usize)
    }

    fn store(&mut self, t: usize, ev: &Event) {
        // Not visible before the clflushes ahead of it completed, volatile or not.
        self.persist(t, true);
        if !is_pm(self.pm, ev.addr) {
            return;
        }
        self.rep.pm_stores += 1;
        let nt = ev.kind == Kind::NtStore;
        let state = if nt { State::Flushed } else { State::Dirty };
        let flushed_by = if nt { bit(t) } else { 0 };
        for w in Self::words_of(ev) {
            let old = self.words.insert(w, WordStore { gid: ev.gid, state, flushed_by, nt, overdue: false });
            if let Some(o) = old.filter(|o| o.overdue && o.state != State::Persisted) {
                self.late.entry(o.gid).or_insert((w, false));
            }
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
            if let Some(s) = self.words.get_mut(&w) {
                // A word another thread flushed but has not fenced yet is covered by this
                // thread's fence too; one this thread flushed already waits for it.
                if s.state != State::Persisted && !s.nt {
                    if ev.kind == Kind::Clflush {
                        self.clflushed[t].push((w, s.gid));
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
            if let Some(s) = self.words.get_mut(&w) {
                if s.gid == gid {
                    s.state = State::Persisted;
                    s.flushed_by = 0;
                    if s.overdue {
                        self.late.entry(gid).or_insert((w, true));
                    }
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
                if ev.kind == Kind::Release {
                    self.sync_words.extend(Self::words_of(ev));
                }
            }
            Kind::Acquire => self.sync_words.extend(Self::words_of(ev)),
            Kind::Begin => {
                self.op[t] = Some((ev.addr as u32, self.ops_begun[t]));
                self.ops_begun[t] += 1;
            }
            Kind::End => {
                self.op[t] = None;
                // What the operation stored and has not persisted by now is overdue.
                for (w, g) in self.op_stores[t].drain(..) {
                    if let Some(s) = self.words.get_mut(&w).filter(|s| s.gid == g && s.state != State::Persisted) {
                        s.overdue = true;
                    }
                }
            }
            _ => {}
        }
    }

    /// The report, naming at most `max` unpersisted stores.
    pub fn finish(mut self, labels: &[String], max: usize) -> LintReport {
        let mut rep = std::mem::take(&mut self.rep);
        if self.scan.dialect() != Dialect::X86 {
            return LintReport { dialect: "neutral", ..rep };
        }
        rep.dialect = "x86";
        // Per unpersisted store: flushed (some word waits for a fence) or never flushed.
        let mut bad: FxHashMap<u64, bool> = FxHashMap::default();
        for (w, s) in &self.words {
            if s.state != State::Persisted {
                let kind = self.stores[&s.gid].kind;
                if kind == Kind::Release || (kind == Kind::Rmw && self.sync_words.contains(w)) {
                    rep.unpersisted_sync_words += 1;
                    continue;
                }
                rep.unpersisted_words += 1;
                *bad.entry(s.gid).or_insert(false) |= s.state == State::Flushed;
            }
        }
        let mut late: Vec<(u64, bool)> = self
            .late
            .iter()
            .filter(|&(gid, (w, _))| {
                let kind = self.stores.get(gid).map(|s| s.kind);
                !(kind == Some(Kind::Release) || (kind == Some(Kind::Rmw) && self.sync_words.contains(w)))
            })
            .map(|(&gid, &(_, persisted))| (gid, persisted))
            .collect();
        late.sort_unstable();
        rep.late_stores = late.len() as u64;
        rep.late = late
            .iter()
            .take(max)
            .map(|&(gid, p)| self.named(gid, if p { "persisted-late" } else { "never-persisted" }, labels))
            .collect();
        let mut gids: Vec<(u64, bool)> = bad.into_iter().collect();
        gids.sort_unstable();
        rep.unpersisted_stores = gids.len() as u64;
        rep.flushed_not_fenced = gids.iter().filter(|g| g.1).count() as u64;
        rep.never_flushed = rep.unpersisted_stores - rep.flushed_not_fenced;
        rep.unpersisted = gids
            .iter()
            .take(max)
            .map(|&(gid, flushed)| {
                self.named(gid, if flushed { "flushed-not-fenced" } else { "never-flushed" }, labels)
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
    if trace.recorded {
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
        // A locked rmw is a fence point; its own store is not flushed by it (a lock word, as
        // the word is also released).
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

    #[test]
    fn lock_words_are_reported_apart_and_not_counted_as_unpersisted_stores() {
        // The release's and the rmw's words never persist; the data store is flushed and fenced.
        // The rmw's word is a lock taken by CAS: another thread acquires it.
        let r = lint(
            "threads 2\nT0 rmw 0x100000040 8 1\nT0 store 0x100000000 8 7\nT0 clwb 0x100000000\nT0 sfence\n\
             T0 release 0x100000080 8 0\nT1 acquire 0x100000040\n",
        );
        assert_eq!((r.dialect, r.unpersisted_stores, r.unpersisted_words, r.unpersisted_sync_words), ("x86", 0, 0, 2));
        // A data store after them still counts.
        let r =
            lint("threads 1\nT0 rmw 0x100000040 8 1\nT0 acquire 0x100000040\nT0 store 0x100000000 8 7\nT0 sfence\n");
        assert_eq!((r.unpersisted_stores, r.never_flushed, r.unpersisted_sync_words), (1, 1, 1));
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
        // Nothing after it: the flush may still be on its way.
        let r = lint("threads 1\nT0 store 0x100000000 8 1\nT0 clflush 0x100000000\n");
        assert_eq!(unpersisted(&r), vec![(0, "flushed-not-fenced")]);
        // Another thread's store does not wait for it.
        let r = lint("threads 2\nT0 store 0x100000000 8 1\nT0 clflush 0x100000000\nT1 store 0x2000 8 2\n");
        assert_eq!(unpersisted(&r), vec![(0, "flushed-not-fenced")]);
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
