//! The timing loop: cores replay their threads, store buffers drain, and every event happens in
//! (time, sequence) order.
//!
//! A core runs ahead only while its local time is not later than the next queued event, so every
//! interaction with shared state (caches, directory, memory controllers, sync replay) happens in
//! global time order without per-instruction events. Loads block the core; stores, fences,
//! flushes and releases enter the TSO store buffer, whose head performs through the design.

use crate::design::{Design, PmStore, Step};
use crate::machine::{Ev, Machine, SbEntry, StallCause, SyncWaiter};
use crate::mem::nvm::LineData;
use crate::Config;
use pmsim_trace::{Chunk, Event, EventSource, Kind, PmRange, TraceError, LINE_BYTES};

/// Why a run could not complete.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{0}")]
    Trace(#[from] TraceError),
    #[error("simulation stuck at {at_ns} ns (no core made progress for {idle_ns} ns)\n{report}")]
    Stuck { at_ns: u64, idle_ns: u64, report: String },
    #[error("{0}")]
    Setup(String),
    #[error(
        "simulated time would pass {limit_days} days at {at}: pmsim keeps time in u64 picoseconds (213 days) and stops at half of that so no sum can wrap; shorten the trace or its compute counts, or lower latencies"
    )]
    TimeOverflow { limit_days: u64, at: String },
}

/// The latest simulated instant (ps) a run may reach: half of u64 picoseconds (106 days), so
/// that adding any one latency (each at most a simulated second, `limits::LATENCY_NS`) to a
/// time within the limit cannot wrap.
pub const MAX_SIM_PS: u64 = u64::MAX / 2;

fn time_overflow(at: String) -> SimError {
    SimError::TimeOverflow { limit_days: MAX_SIM_PS / 86_400_000_000_000_000, at }
}

struct Cursor {
    src: Box<dyn EventSource>,
    chunk: Chunk,
    pos: usize,
    exhausted: bool,
}

/// One simulation: machine + design + the threads' event streams.
pub struct Simulator {
    pub m: Machine,
    pub design: Box<dyn Design>,
    cursors: Vec<Cursor>,
    /// Picoseconds per non-memory instruction, ×1000 (fixed point, host-independent).
    ppi_milli: u64,
    last_progress: u64,
    /// `m.persist_version` when last looked at (its changes count as progress).
    seen_persist_version: u64,
    watchdog_ps: u64,
    /// Number of trace threads (cores beyond it stay idle).
    pub threads: usize,
    pub labels: Vec<String>,
    /// Remote persistence: client NICs, links and the server's NIC side (docs/design.md §9).
    pub net: crate::net::Net,
}

impl Simulator {
    /// Builds a simulator for `sources` (one per thread). The core count is raised to the thread
    /// count when smaller. `record` keeps the run record and word data (crash checking).
    pub fn new(
        cfg: &Config,
        mut design: Box<dyn Design>,
        pm: Vec<PmRange>,
        sources: Vec<Box<dyn EventSource>>,
        labels: Vec<String>,
        record: bool,
    ) -> Result<Simulator, SimError> {
        let threads = sources.len();
        if threads == 0 || threads > 64 {
            return Err(SimError::Setup(format!(
                "the trace has {threads} threads; pmsim simulates 1 to 64 (one core per thread, core.count at most 64)"
            )));
        }
        let mut cfg = cfg.clone();
        cfg.core.count = cfg.core.count.max(threads);
        // Checked here, not with the rest of the configuration: the remote-style stream is the
        // trace's last threads, known only now.
        if cfg.broi.remote_threads >= threads {
            return Err(SimError::Setup(format!(
                "parameter 'broi.remote_threads': the remote-style stream is the trace's last threads and must \
                 leave one local, so it must be below the trace's {threads} threads, got {}",
                cfg.broi.remote_threads
            )));
        }
        let mut m = Machine::new(&cfg, pm, record);
        m.track_data = record;
        for c in 0..threads {
            m.schedule(0, Ev::Core(c as u16));
        }
        for c in threads..cfg.core.count {
            m.cores[c].finished = true;
        }
        let ppi_milli = ((cfg.cycle_ps() as f64 * 1000.0) / cfg.core.ipc).round() as u64;
        let cursors =
            sources.into_iter().map(|src| Cursor { src, chunk: Chunk::default(), pos: 0, exhausted: false }).collect();
        let watchdog_ps = cfg.watchdog_ps();
        let net = crate::net::Net::new(&cfg);
        design.set_threads(threads);
        Ok(Simulator {
            m,
            design,
            cursors,
            ppi_milli,
            last_progress: 0,
            seen_persist_version: 0,
            watchdog_ps,
            threads,
            labels,
            net,
        })
    }

    /// Keeps a log of design actions (flushes, ACKs, undo/delay records, commits).
    pub fn enable_log(&mut self) {
        self.m.log = Some(Vec::new());
    }

    /// Runs to the end: every thread retired and every persist completed.
    pub fn run(&mut self) -> Result<(), SimError> {
        self.run_until(u64::MAX)?;
        if self.m.cores.iter().any(|c| !c.finished) || self.design.busy(&self.m) || self.net.busy() {
            return Err(self.stuck());
        }
        Ok(())
    }

    /// Processes every event at or before `limit` (ps). Returns whether events remain.
    pub fn run_until(&mut self, limit: u64) -> Result<bool, SimError> {
        while let Some((t, ev)) = self.m.pop_until(limit) {
            self.step_event(t, ev)?;
        }
        Ok(self.m.peek_time().is_some())
    }

    /// Trace events the cores have executed so far (the stats' `events` at the end).
    pub fn events_done(&self) -> u64 {
        self.m.cores.iter().map(|c| c.stats.events).sum()
    }

    /// Processes exactly one queued event; `Ok(false)` when none is left.
    pub fn step(&mut self) -> Result<bool, SimError> {
        match self.m.pop() {
            Some((t, ev)) => {
                self.step_event(t, ev)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Time of the next queued event.
    pub fn next_time(&self) -> Option<u64> {
        self.m.peek_time()
    }

    fn step_event(&mut self, t: u64, ev: Ev) -> Result<(), SimError> {
        if t > MAX_SIM_PS {
            return Err(time_overflow(match ev {
                Ev::Core(c) => format!("core {c}"),
                _ => "the memory system".to_string(),
            }));
        }
        self.m.now = t;
        self.m.events_processed += 1;
        match ev {
            Ev::Core(c) => self.run_core(c as usize)?,
            Ev::Drain(c) => self.drain(c as usize),
            Ev::McDone(mc) => self.m.mc_complete(mc as usize),
            Ev::Design(e) if crate::net::is_net(&e) => self.net.on_event(&mut self.m, &mut *self.design, e),
            Ev::Design(e) => self.design.on_event(&mut self.m, e),
        }
        // Progress is a core moving on, or the persistent state changing (a slow machine draining
        // a long queue of persists); a livelock does neither.
        if self.m.persist_version != self.seen_persist_version {
            self.seen_persist_version = self.m.persist_version;
            self.last_progress = t;
        } else if t.saturating_sub(self.last_progress) > self.watchdog_ps {
            return Err(self.stuck());
        }
        Ok(())
    }

    fn stuck(&self) -> SimError {
        let mut report = String::new();
        for (i, c) in self.m.cores.iter().enumerate().take(self.threads) {
            if c.finished {
                continue;
            }
            let head = c.sb.front().map(|e| e.kind.name()).unwrap_or("-");
            report.push_str(&format!(
                "  core {i}: {} ; store buffer {} entries, head {head}{} ; {}\n",
                match c.blocked {
                    Some((cause, since)) => format!("blocked ({}) since {} ns", cause.name(), since / 1000),
                    None => "runnable".into(),
                },
                c.sb.len(),
                c.drain_stall.map(|s| format!(" (stalled: {})", s.name())).unwrap_or_default(),
                self.design.describe_core(i),
            ));
        }
        if report.is_empty() {
            report = format!(
                "  every core finished but the design still has persists in flight: {}\n",
                self.design.describe_core(usize::MAX)
            );
        }
        SimError::Stuck {
            at_ns: self.m.now / 1000,
            idle_ns: self.m.now.saturating_sub(self.last_progress) / 1000,
            report,
        }
    }

    /// Shows the design what an access did to the caches (conflicts, evictions); returns the
    /// stall cause if an eviction it caused is held (the accessing core then waits).
    fn dispatch_side_effects(&mut self, core: usize) -> Option<StallCause> {
        let mut held = None;
        if !self.m.hier.conflicts.is_empty() {
            let cs = std::mem::take(&mut self.m.hier.conflicts);
            self.m.hier.ordering_conflicts = true;
            for c in &cs {
                self.design.on_conflict(&mut self.m, core, c);
            }
            self.m.hier.ordering_conflicts = false;
            self.m.hier.conflicts = cs;
            self.m.hier.conflicts.clear();
        }
        if !self.m.hier.llc_evictions.is_empty() {
            let ev = std::mem::take(&mut self.m.hier.llc_evictions);
            for &(line, dirty) in &ev {
                if self.m.is_pm(line) {
                    self.design.on_llc_evict(&mut self.m, line, dirty);
                    if let Some(cause) = self.design.holds_llc_eviction(&mut self.m, core, line, dirty) {
                        held = Some(cause);
                    }
                }
            }
            self.m.hier.llc_evictions = ev;
            self.m.hier.llc_evictions.clear();
        }
        if !self.m.hier.private_evictions.is_empty() {
            let ev = std::mem::take(&mut self.m.hier.private_evictions);
            for &(c, line) in &ev {
                if self.m.is_pm(line) && self.design.on_private_evict(&mut self.m, c, line) && c == core {
                    held = Some(StallCause::WbbFull);
                }
            }
            self.m.hier.private_evictions = ev;
            self.m.hier.private_evictions.clear();
        }
        held
    }

    /// The core's own access caused an eviction the design holds: the core waits from now
    /// until the design releases it ([`Machine::wake_held`]).
    fn hold_core(&mut self, c: usize, cause: StallCause) {
        if self.m.cores[c].blocked.is_none() {
            let now = self.m.now;
            self.m.block_core(c, cause, now);
        }
    }

    /// Latency of reading `line` from memory, the request arriving at `at`.
    fn mem_read(&mut self, line: u64, at: u64) -> u64 {
        if self.m.is_pm(line) {
            let mc = self.m.mc_of(line);
            let ready = self.m.mcs[mc].read(at, line);
            self.m.mc_outputs(mc);
            ready - at
        } else {
            crate::config::ns(self.m.cfg.dram.latency_ns)
        }
    }

    fn run_core(&mut self, c: usize) -> Result<(), SimError> {
        loop {
            let core = &self.m.cores[c];
            if core.blocked.is_some() || core.finished {
                return Ok(());
            }
            let t = core.time;
            if t > MAX_SIM_PS {
                return Err(time_overflow(format!("core {c}")));
            }
            if let Some(pt) = self.m.peek_time() {
                if t > pt {
                    self.m.schedule(t, Ev::Core(c as u16));
                    return Ok(());
                }
            }
            self.m.now = t;
            let cur = &mut self.cursors[c];
            if cur.pos >= cur.chunk.events.len() {
                if !cur.exhausted {
                    cur.pos = 0;
                    if !cur.src.next_chunk(&mut cur.chunk)? {
                        cur.exhausted = true;
                    }
                    continue;
                }
                // End of the thread: wait for the store buffer, then finish.
                if self.m.cores[c].sb.is_empty() {
                    let core = &mut self.m.cores[c];
                    core.finished = true;
                    core.stats.finish_ps = t;
                    self.design.on_core_finished(&mut self.m, c);
                    return Ok(());
                }
                self.m.cores[c].ending = true;
                return Ok(());
            }
            let ev = cur.chunk.events[cur.pos];
            if self.execute(c, &ev) {
                self.cursors[c].pos += 1;
                self.last_progress = self.m.now;
                self.m.cores[c].stats.events += 1;
            }
        }
    }

    fn push_sb(&mut self, c: usize, ev: &Event) -> Option<u64> {
        let core = &mut self.m.cores[c];
        if core.sb.len() >= core.sb_cap {
            core.wait_sb_space = true;
            let own = match core.drain_stall {
                Some(s) if !s.is_structural() => s,
                _ => StallCause::SbFull,
            };
            let now = self.m.now;
            self.m.block_behind(c, own, now);
            return None;
        }
        let seq = core.next_seq;
        core.next_seq += 1;
        // Stores prefetch their line as they enter the buffer, so misses overlap; ownership is
        // granted, and the store performs, in order at the head. A release or rmw writes too: it
        // prefetches the same way and performs only once its data is on chip (performing at the
        // start of its miss let a design act on the line before it had arrived).
        let ready_at =
            if matches!(ev.kind, Kind::Store | Kind::Release | Kind::Rmw) { self.prefetch(c, ev.addr) } else { 0 };
        let core = &mut self.m.cores[c];
        core.sb.push_back(SbEntry {
            seq,
            kind: ev.kind,
            gid: ev.gid,
            addr: ev.addr,
            size: ev.size,
            aux: ev.aux,
            has_value: ev.has_value,
            ready_at,
            performed: false,
        });
        if self.m.track_data {
            // `ev` is the cursor's current event: its value is in the cursor's chunk.
            let mut value = [0u8; 64];
            if ev.has_value {
                let mut buf = [0u8; 64];
                if let Some(v) = self.cursors[c].chunk.value(ev, &mut buf) {
                    value[..v.len()].copy_from_slice(v);
                }
            }
            core.sb_values.push_back(value);
        }
        if !core.drain_scheduled && core.sb.len() == 1 {
            core.drain_scheduled = true;
            let now = self.m.now;
            self.m.schedule(now, Ev::Drain(c as u16));
        }
        Some(seq)
    }

    /// Executes one trace event at the core's current time; false if it could not issue yet.
    fn execute(&mut self, c: usize, ev: &Event) -> bool {
        let ppi = self.ppi_milli;
        let now = self.m.now;
        match ev.kind {
            Kind::Compute => {
                let core = &mut self.m.cores[c];
                // Saturating: a huge count lands beyond MAX_SIM_PS and is reported, never wrapped.
                core.time =
                    core.time.saturating_add(((ev.addr as u128 * ppi as u128) / 1000).min(u64::MAX as u128) as u64);
                core.stats.instructions += ev.addr;
                true
            }
            Kind::Load | Kind::Acquire => {
                if self.design.loads_wait_for_barriers() && {
                    let clflush = self.design.clflush_is_barrier();
                    self.m.cores[c].sb.iter().any(|e| e.kind.is_barrier() || (clflush && e.kind == Kind::Clflush))
                } {
                    self.m.cores[c].wait_sb_empty = true;
                    self.m.block_behind(c, StallCause::Fence, now);
                    return false;
                }
                if ev.kind == Kind::Acquire && !self.sync_ready(ev.addr, true, ev.aux, c, false) {
                    self.m.block_core(c, StallCause::Sync, now);
                    return false;
                }
                let lat = self.load_latency(c, ev.addr, ev.size);
                self.m.record_load(c, ev.gid, ev.addr, ev.size);
                if ev.kind == Kind::Acquire {
                    let releaser = self.sync_performed(ev.addr, ev.gid, c, None);
                    self.design.on_acquire_at(&mut self.m, c, ev.addr, releaser);
                }
                let core = &mut self.m.cores[c];
                core.time += ppi / 1000 + lat;
                core.stats.instructions += 1;
                core.stats.loads += 1;
                core.stats.load_latency_ps += lat;
                true
            }
            Kind::Rmw => {
                if !self.m.cores[c].sb.is_empty() {
                    self.m.cores[c].wait_sb_empty = true;
                    self.m.block_behind(c, StallCause::Atomic, now);
                    return false;
                }
                let Some(seq) = self.push_sb(c, ev) else { return false };
                let core = &mut self.m.cores[c];
                core.stats.instructions += 1;
                core.stats.stores += 1;
                core.wait_seq = Some(seq);
                self.m.block_behind(c, StallCause::Atomic, now);
                true
            }
            Kind::Store | Kind::NtStore | Kind::Release | Kind::Clwb | Kind::ClflushOpt | Kind::Clflush => {
                if self.push_sb(c, ev).is_none() {
                    return false;
                }
                let core = &mut self.m.cores[c];
                core.time += ppi / 1000;
                core.stats.instructions += 1;
                if ev.kind.writes() {
                    core.stats.stores += 1;
                }
                true
            }
            Kind::Ofence | Kind::Dfence | Kind::Sfence | Kind::Mfence => {
                let Some(seq) = self.push_sb(c, ev) else { return false };
                let core = &mut self.m.cores[c];
                core.time += ppi / 1000;
                core.stats.instructions += 1;
                if self.design.fence_blocks_core(ev.kind) {
                    let cause = if ev.kind == Kind::Dfence { StallCause::Dfence } else { StallCause::Fence };
                    let t = self.m.cores[c].time;
                    self.m.cores[c].wait_seq = Some(seq);
                    self.m.block_behind(c, cause, t);
                }
                true
            }
            Kind::Strand => {
                self.design.on_strand(&mut self.m, c);
                true
            }
            Kind::Begin => {
                let core = &mut self.m.cores[c];
                core.op_start = now;
                core.stats.first_begin_ps.get_or_insert(now);
                true
            }
            Kind::RdmaPwrite | Kind::RdmaWait => self.net.execute(&mut self.m, c, ev),
            Kind::End => {
                let core = &mut self.m.cores[c];
                let lat = now.saturating_sub(core.op_start);
                core.stats.ops += 1;
                core.stats.op_latency_ps += lat;
                core.stats.op_latency_max_ps = core.stats.op_latency_max_ps.max(lat);
                core.stats.last_end_ps = now;
                true
            }
        }
    }

    fn load_latency(&mut self, c: usize, addr: u64, size: u8) -> u64 {
        if self.m.sb_forwards(c, addr, size) {
            return self.m.l1_ps;
        }
        let line = addr & !(LINE_BYTES - 1);
        let now = self.m.now;
        let acc = self.m.hier.load(c, line, now);
        let lat = self.finish_access(c, line, acc);
        if let Some(cause) = self.dispatch_side_effects(c) {
            self.hold_core(c, cause);
        }
        lat
    }

    /// Adds the memory read an access needs, recording when the fill lands.
    fn finish_access(&mut self, c: usize, line: u64, acc: crate::mem::hierarchy::Access) -> u64 {
        let mut lat = acc.latency;
        if acc.mem_read {
            let now = self.m.now;
            lat += self.mem_read(line, now + acc.latency);
            self.m.hier.set_ready(c, line, now + lat);
        }
        lat
    }

    /// Whether a sync event on `addr` with ordinal `aux` may perform (an acquire once `aux`
    /// releasing events performed, a release/rmw once `aux` sync events did); if not, registers
    /// the waiter.
    fn sync_ready(&mut self, addr: u64, acquire: bool, aux: u32, c: usize, drain: bool) -> bool {
        if aux == 0 {
            return true;
        }
        let s = self.m.sync.entry(addr).or_default();
        if s.ready(acquire, aux) {
            return true;
        }
        s.waiters.push(SyncWaiter { core: c as u16, acquire, need: aux, drain });
        false
    }

    /// The core a sync event on `addr` by `c` would synchronise with now (the last releaser, if
    /// another core).
    fn releaser_of(&self, addr: u64, c: usize) -> Option<usize> {
        self.m.sync.get(&addr).and_then(|s| s.last_releaser).map(|r| r as usize).filter(|&r| r != c)
    }

    /// Records a sync event as performed and wakes the waiters it makes ready. `releases`: a
    /// release or rmw, with when it has finished taking its line. Returns the core it
    /// synchronises with (the last releaser, if another core).
    fn sync_performed(&mut self, addr: u64, gid: u64, c: usize, releases: Option<u64>) -> Option<usize> {
        let s = self.m.sync.entry(addr).or_default();
        s.performed += 1;
        let releaser = s.last_releaser.map(|r| r as usize).filter(|&r| r != c);
        if let Some(line_free_at) = releases {
            s.released += 1;
            s.last_releaser = Some(c as u16);
            s.released_at = self.m.now;
            s.line_free_at = line_free_at;
        }
        let now = self.m.now;
        if let Some(r) = &mut self.m.record {
            r.syncs.push(pmsim_trace::SyncPerform { time: now, gid, thread: c as u16, addr });
        }
        let ready = |s: &mut crate::machine::SyncAddr| {
            let i = s.waiters.iter().position(|w| s.ready(w.acquire, w.need))?;
            Some(s.waiters.remove(i))
        };
        while let Some(w) = self.m.sync.get_mut(&addr).and_then(ready) {
            let wc = w.core as usize;
            if w.drain {
                let core = &mut self.m.cores[wc];
                core.drain_stall = None;
                if !core.drain_scheduled {
                    core.drain_scheduled = true;
                    self.m.schedule(now, Ev::Drain(w.core));
                }
            } else {
                self.m.wake_core(wc);
            }
        }
        releaser
    }

    /// The store buffer's prefetch of a store's line; returns when the line is there.
    fn prefetch(&mut self, c: usize, addr: u64) -> u64 {
        let line = addr & !(LINE_BYTES - 1);
        let now = self.m.now;
        let acc = self.m.hier.prefetch(c, line, now);
        let lat = self.finish_access(c, line, acc);
        if let Some(cause) = self.dispatch_side_effects(c) {
            self.hold_core(c, cause);
        }
        now + lat
    }

    /// Grants ownership of the head's line and performs it (store, non-temporal store, release or
    /// rmw write): conflicts reach the design first, so the store lands in the epoch they open.
    /// Returns how long the grant occupies the head.
    fn perform_head(&mut self, c: usize, head: &SbEntry) -> u64 {
        let line = head.addr & !(LINE_BYTES - 1);
        let now = self.m.now;
        let acc =
            if head.kind == Kind::NtStore { self.m.hier.nt_store(c, line) } else { self.m.hier.store(c, line, now) };
        let lat = self.finish_access(c, line, acc);
        // At the drain a held eviction holds the design's next admission, not the core.
        let _ = self.dispatch_side_effects(c);
        if head.kind == Kind::Rmw {
            self.m.record_load(c, head.gid, head.addr, head.size);
        }
        let value = if self.m.track_data { self.m.cores[c].sb_values.front().copied() } else { None };
        let mut st = PmStore {
            gid: head.gid,
            data: LineData::new(line),
            nontemporal: head.kind == Kind::NtStore,
            sync: head.kind.is_sync(),
        };
        self.m.perform_store_words(c, head, value.as_ref(), &mut st.data);
        if self.m.is_pm(head.addr) {
            self.m.cores[c].stats.pm_stores += 1;
            self.design.on_store(&mut self.m, c, &st);
        }
        lat
    }

    /// Whether the design lets the head's store to `addr` perform now.
    fn admit(&mut self, c: usize, kind: Kind, addr: u64) -> Result<(), StallCause> {
        if self.m.is_pm(addr) {
            let line = addr & !(LINE_BYTES - 1);
            if kind == Kind::NtStore {
                self.design.admit_nt_store(&mut self.m, c, line)
            } else {
                self.design.admit_store(&mut self.m, c, line)
            }
        } else {
            self.design.admit_volatile_store(&mut self.m, c)
        }
    }

    /// Schedules the drain at `t` if the head must wait until then; true if it must.
    fn wait_until(&mut self, c: usize, t: u64) -> bool {
        if t > self.m.now {
            self.m.cores[c].drain_scheduled = true;
            self.m.schedule(t, Ev::Drain(c as u16));
            return true;
        }
        false
    }

    /// Marks the head performed; it retires now if the grant was a hit, else when it completes.
    /// Returns true if the drain must return (waiting for the grant).
    fn performed(&mut self, c: usize, lat: u64) -> bool {
        let hit = self.m.l1_ps;
        if lat <= hit {
            return false;
        }
        let t = self.m.now + lat;
        if let Some(h) = self.m.cores[c].sb.front_mut() {
            h.performed = true;
            h.ready_at = t;
        }
        self.wait_until(c, t)
    }

    fn drain(&mut self, c: usize) {
        self.m.cores[c].drain_scheduled = false;
        while let Some(head) = self.m.cores[c].sb.front().copied() {
            if head.performed {
                if self.wait_until(c, head.ready_at) {
                    return;
                }
                self.retire(c, head.seq);
                continue;
            }
            let done = self.m.cores[c].head_done;
            match head.kind {
                Kind::Store | Kind::NtStore => {
                    if self.wait_until(c, head.ready_at) {
                        return;
                    }
                    if let Err(cause) = self.admit(c, head.kind, head.addr) {
                        self.m.drain_refused(c, cause);
                        return;
                    }
                    let lat = self.perform_head(c, &head);
                    if self.performed(c, lat) {
                        return;
                    }
                }
                Kind::Ofence
                | Kind::Dfence
                | Kind::Sfence
                | Kind::Mfence
                | Kind::Clwb
                | Kind::ClflushOpt
                | Kind::Clflush => {
                    if !done {
                        let step = if head.kind.is_barrier() || matches!(head.kind, Kind::Sfence | Kind::Mfence) {
                            self.design.on_fence(&mut self.m, c, head.kind, head.gid)
                        } else {
                            self.design.on_flush(&mut self.m, c, head.kind, head.addr & !(LINE_BYTES - 1))
                        };
                        if let Step::Wait(cause) = step {
                            self.m.drain_waits(c, cause);
                            return;
                        }
                    }
                    let now = self.m.now;
                    if let Some(r) = &mut self.m.record {
                        match head.kind {
                            Kind::Dfence => r.dfences.push((head.gid, now)),
                            Kind::Sfence | Kind::Mfence => r.fences.push((head.gid, now)),
                            _ => {}
                        }
                    }
                }
                Kind::Release | Kind::Rmw => {
                    if !self.sync_ready(head.addr, false, head.aux, c, true) {
                        self.m.cores[c].drain_stall = Some(StallCause::Sync);
                        return;
                    }
                    // Its predecessor has performed, but may still be taking the line (the
                    // first sync event on an address, aux 0, has no predecessor to wait for).
                    let free_at =
                        if head.aux == 0 { 0 } else { self.m.sync.get(&head.addr).map_or(0, |s| s.line_free_at) };
                    if self.wait_until(c, free_at) {
                        self.m.cores[c].drain_stall = Some(StallCause::Sync);
                        return;
                    }
                    if !done {
                        if let Step::Wait(cause) = self.design.on_release(&mut self.m, c, head.gid) {
                            self.m.drain_waits(c, cause);
                            return;
                        }
                        self.m.cores[c].head_done = true;
                    }
                    if self.wait_until(c, head.ready_at) {
                        return;
                    }
                    if let Err(cause) = self.admit(c, head.kind, head.addr) {
                        self.m.drain_refused(c, cause);
                        return;
                    }
                    // An rmw's acquire half comes first: its own write must already depend on
                    // the release it synchronises with.
                    if head.kind == Kind::Rmw {
                        let releaser = self.releaser_of(head.addr, c);
                        self.design.on_acquire_at(&mut self.m, c, head.addr, releaser);
                    }
                    let lat = self.perform_head(c, &head);
                    self.sync_performed(head.addr, head.gid, c, Some(self.m.now + lat));
                    self.design.on_released(&mut self.m, c);
                    if self.performed(c, lat) {
                        return;
                    }
                }
                _ => {}
            }
            self.retire(c, head.seq);
        }
    }

    fn retire(&mut self, c: usize, seq: u64) {
        self.last_progress = self.m.now;
        let core = &mut self.m.cores[c];
        core.sb.pop_front();
        core.sb_values.pop_front();
        core.head_done = false;
        core.drain_stall = None;
        let wake = core.blocked.is_some()
            && (core.wait_seq == Some(seq)
                || (core.wait_sb_space && core.sb.len() < core.sb_cap)
                || (core.wait_sb_empty && core.sb.is_empty()));
        if wake {
            self.m.wake_core(c);
        }
        let core = &mut self.m.cores[c];
        if core.ending && core.sb.is_empty() {
            let first = !core.finished;
            core.finished = true;
            core.stats.finish_ps = core.time.max(self.m.now);
            if first {
                self.design.on_core_finished(&mut self.m, c);
            }
        }
    }

    /// The persistence domain's contents at this instant, applied in order on top of NVM:
    /// the WPQs (ADR) first, then the design's own (undo records, caches, buffers).
    pub fn crash_writes(&self) -> Vec<LineData> {
        let mut out = Vec::new();
        for mc in self.m.mcs.iter().filter(|mc| mc.queue_persistent()) {
            for e in &mc.wpq {
                out.push(e.data);
            }
        }
        self.design.crash_writes(&self.m, &mut out);
        out
    }

    /// Simulated execution time: when the last thread retired its last event.
    pub fn exec_time_ps(&self) -> u64 {
        self.m.cores.iter().map(|c| c.stats.finish_ps).max().unwrap_or(0)
    }
}
