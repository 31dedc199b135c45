//! The Intel baseline: persistence by `clwb` + `sfence` through the caches.
//!
//! Stores go to the caches only. At every `ofence`, `dfence` and before every `release`, the
//! thread write-backs (clwb) each PM line it wrote since its previous fence — one issue per
//! cycle, each travelling the write-back path to its MC (`noc.writeback_ns`) — and then `sfence`
//! stalls the core until every MC has acknowledged them. With `baseline.flush = "clflush"` the
//! fences flush with clflush instead (the line leaves the caches; its next access misses to PM),
//! as the ASAP artifact's baseline binaries do. Dirty PM lines evicted from the LLC are
//! written back to the WPQ. Promise: release persistency (flushing before each release),
//! durability at each fence.
//!
//! A legacy x86 trace (`Dialect::X86`: the program's own flushes and fences, no
//! `ofence`/`dfence`) runs as written, as x86 hardware runs it: no flushes at releases or rmws
//! and no waits for a release's write-back; a `release` or `rmw` (a locked instruction) waits,
//! like `sfence`, for the thread's flushes still in flight. Promise: x86 persistency.
//!
//! What makes it correct when lines are shared (each was a crash-consistency bug):
//! - a clwb writes the line back wherever it is dirty in the coherence domain (another core's
//!   cache included), with the line's coherent data;
//! - a clwb of a line that is clean only because another write-back of it is still on its way
//!   (another core's clwb, an LLC eviction) is not done until that write is acknowledged: the
//!   fence waits for *that* ACK, attributed per line, not for an unrelated one;
//! - writes of one line reach the MC in the order they were taken (see `flush.rs`);
//! - a release's (or rmw's) own PM store is written back at once (clwb + sfence, as software
//!   does for a persistent lock): the releasing thread's later stores, and the later stores of
//!   every thread that acquires that address, perform only once it is acknowledged (RP: the
//!   release's store precedes the acquirer's later stores); volatile ones too, as the sfence
//!   stalls them all, or the order would not carry through a DRAM lock to a third thread.
//! - a `clflush` (unlike `clflushopt`/`clwb`) is ordered with later writes: the thread's later
//!   stores, volatile ones too, perform only once its write-back is acknowledged (so
//!   `st x; clflush x; st y` never persists y without x, as Intel specifies);
//! - a non-temporal store to a line dirty in a cache first writes that copy back (x86 evicts the
//!   line; `Hierarchy::nt_store`), so the dirty words of other stores are not silently dropped.
//!
//! Non-temporal stores combine in the core's write-combining buffers (`wc.rs`), which every
//! fence and locked instruction sends; the next `sfence` waits for their ACKs. An LLC write-back
//! to an MC whose writes already wait for the WPQ holds the access that caused it
//! (`stall_cycles.wpq_full`) until none waits.

use super::flush::InFlight;
use super::wc::{buffer_data, WcBuffers};
use super::{Design, DesignStats, PmStore, Promise, Step};
use crate::config::Config;
use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;
use rustc_hash::{FxHashMap, FxHashSet};

const ARRIVE: u16 = 1;
const ACK: u16 = 2;
/// The ACK of a write-combining buffer's write (frees the buffer too).
const NT_ACK: u16 = 3;
const NO_CORE: u16 = u16::MAX;

#[derive(Default)]
struct CoreState {
    /// PM lines written since the last fence, in first-write order.
    written: Vec<u64>,
    written_set: FxHashSet<u64>,
    /// Flush ACKs the next sfence waits for (own writes and writes of others it piggybacks on).
    outstanding: u32,
    waiting: bool,
    /// Synchronisation lines whose write-back must be acknowledged before this core's next PM
    /// store performs: (line, the line's write count that must be acknowledged).
    sync_waits: Vec<(u64, u64)>,
}

/// Write-backs of one line: sent and acknowledged so far (ACKs of one line come in send order).
#[derive(Clone, Copy, Default)]
struct LineFlight {
    sent: u64,
    acked: u64,
}

pub struct Baseline {
    cores: Vec<CoreState>,
    inflight: InFlight,
    flights: FxHashMap<u64, LineFlight>,
    /// Fences waiting for another write of a line: (core, line, write count to be acknowledged).
    piggyback: Vec<(usize, u64, u64)>,
    /// Cores whose store-buffer drain stalls on `sync_waits` (bit per core).
    admit_blocked: u64,
    /// false only in the test-only broken variant: sfence does not wait for ACKs.
    stall: bool,
    /// Fences flush with clflush (`baseline.flush`): the line leaves every cache.
    invalidate: bool,
    /// A legacy x86 trace: no release-persistency mapping (module doc).
    as_written: bool,
    wc: WcBuffers,
    wc_send: Vec<u64>,
    clwbs: u64,
    fence_flushes: u64,
    writebacks: u64,
    release_flushes: u64,
    flush_piggybacks: u64,
}

impl Baseline {
    /// Stalls `core`'s next store while a synchronisation line it must follow (a release's own
    /// store it acquired or wrote) is not yet acknowledged.
    fn sync_wait(&mut self, core: usize) -> Result<(), StallCause> {
        let flights = &self.flights;
        let c = &mut self.cores[core];
        if c.sync_waits.is_empty() || !self.stall {
            return Ok(());
        }
        c.sync_waits.retain(|&(l, target)| flights.get(&l).is_some_and(|f| f.acked < target));
        if c.sync_waits.is_empty() {
            Ok(())
        } else {
            self.admit_blocked |= 1u64 << (core % 64);
            Err(StallCause::Fence)
        }
    }

    pub fn new(cfg: &Config) -> Baseline {
        Baseline {
            cores: (0..64.max(cfg.core.count)).map(|_| CoreState::default()).collect(),
            inflight: InFlight::default(),
            flights: FxHashMap::default(),
            piggyback: Vec::new(),
            admit_blocked: 0,
            stall: true,
            invalidate: cfg.baseline.flush == "clflush",
            as_written: false,
            wc: WcBuffers::new(64.max(cfg.core.count), cfg.core.wc_buffers),
            wc_send: Vec::new(),
            clwbs: 0,
            fence_flushes: 0,
            writebacks: 0,
            release_flushes: 0,
            flush_piggybacks: 0,
        }
    }

    /// TEST ONLY: sfence returns without waiting for the flushes' ACKs.
    pub fn broken_no_stall(cfg: &Config) -> Baseline {
        Baseline { stall: false, ..Baseline::new(cfg) }
    }

    /// Sends `data` to its MC at `at`; the ACK names the line (and `core`, whose fence waits).
    fn send(&mut self, m: &mut Machine, at: u64, data: LineData, core: u16) {
        self.send_tagged(m, at, data, core, ACK);
    }

    fn send_tagged(&mut self, m: &mut Machine, at: u64, data: LineData, core: u16, tag: u16) {
        self.flights.entry(data.line).or_default().sent += 1;
        let ack = DesignEv { tag, core, arg: data.line };
        self.inflight.send(m, at, data, Some(ack), ARRIVE);
        if core != NO_CORE {
            self.cores[core as usize].outstanding += 1;
        }
    }

    /// The count of `line`'s writes that must be acknowledged for everything sent so far to be
    /// persistent, if some are still unacknowledged.
    fn pending(&self, line: u64) -> Option<u64> {
        self.flights.get(&line).filter(|f| f.acked < f.sent).map(|f| f.sent)
    }

    /// clwb of one line by `core`, issued `delay` after now. Returns whether a write was sent.
    fn clwb(&mut self, m: &mut Machine, core: usize, line: u64, delay: u64) -> bool {
        if !m.hier.clean(line) {
            // Clean, but maybe only because a write-back is on its way: wait for its ACK.
            if let Some(target) = self.pending(line) {
                self.piggyback.push((core, line, target));
                self.cores[core].outstanding += 1;
                self.flush_piggybacks += 1;
            }
            return false;
        }
        // The line may be dirty in another core's cache: the request snoops it there.
        let reach = m.hier.locate(core, line) + m.hier.remote_owner_hop(core, line);
        let data = m.coherent_line(line);
        let at = m.now + delay + reach + m.writeback_ps;
        self.send(m, at, data, core as u16);
        self.clwbs += 1;
        true
    }

    /// Sends the write-combining buffers in `wc_send` (the core's non-temporal stores).
    fn send_wc(&mut self, m: &mut Machine, core: usize) {
        let mut send = std::mem::take(&mut self.wc_send);
        for &line in &send {
            let data = buffer_data(m, line);
            self.send_tagged(m, m.now + m.writeback_ps, data, core as u16, NT_ACK);
        }
        send.clear();
        self.wc_send = send;
    }

    /// A fence or locked instruction sends every open write-combining buffer of the core.
    fn drain_wc(&mut self, m: &mut Machine, core: usize) {
        self.wc.send_open(core, &mut self.wc_send);
        self.send_wc(m, core);
    }

    /// Write back every line the core wrote since its last fence, then wait for the ACKs.
    fn flush_and_fence(&mut self, m: &mut Machine, core: usize, cause: StallCause) -> Step {
        let lines = std::mem::take(&mut self.cores[core].written);
        self.cores[core].written_set.clear();
        for (i, &line) in lines.iter().enumerate() {
            if self.clwb(m, core, line, i as u64 * m.cycle_ps) {
                self.fence_flushes += 1;
            }
            if self.invalidate {
                m.hier.flush_out(line);
            }
        }
        let mut lines = lines;
        lines.clear();
        self.cores[core].written = lines;
        self.sfence(core, cause)
    }

    fn sfence(&mut self, core: usize, cause: StallCause) -> Step {
        let c = &mut self.cores[core];
        if c.outstanding == 0 || !self.stall {
            Step::Done
        } else {
            c.waiting = true;
            Step::Wait(cause)
        }
    }

    /// One ACK for `core`'s fence arrived.
    fn ack_core(&mut self, m: &mut Machine, core: usize) {
        let c = &mut self.cores[core];
        c.outstanding -= 1;
        if c.outstanding == 0 && c.waiting {
            c.waiting = false;
            m.sb_head_done(core);
        }
    }

    fn on_ack(&mut self, m: &mut Machine, core: u16, line: u64) {
        let f = self.flights.entry(line).or_default();
        f.acked += 1;
        let acked = f.acked;
        if core != NO_CORE {
            self.ack_core(m, core as usize);
        }
        let mut i = 0;
        while i < self.piggyback.len() {
            let (c, l, target) = self.piggyback[i];
            if l == line && acked >= target {
                self.piggyback.swap_remove(i);
                self.ack_core(m, c);
            } else {
                i += 1;
            }
        }
        let mut blocked = std::mem::take(&mut self.admit_blocked);
        while blocked != 0 {
            let c = blocked.trailing_zeros() as usize;
            blocked &= blocked - 1;
            m.resume_drain(c);
        }
    }
}

impl Design for Baseline {
    fn name(&self) -> &'static str {
        if self.stall {
            "baseline"
        } else {
            "broken-baseline-no-sfence-stall"
        }
    }

    fn promise(&self) -> Promise {
        if self.as_written {
            Promise::X86
        } else {
            Promise::Rp
        }
    }

    fn run_as_written(&mut self) {
        self.as_written = true;
    }

    fn fence_blocks_core(&self, _kind: Kind) -> bool {
        true
    }

    fn admit_store(&mut self, _m: &mut Machine, core: usize, _line: u64) -> Result<(), StallCause> {
        self.sync_wait(core)
    }

    fn admit_nt_store(&mut self, m: &mut Machine, core: usize, line: u64) -> Result<(), StallCause> {
        self.sync_wait(core)?;
        if self.wc.admit(core, line, &mut self.wc_send) {
            return Ok(());
        }
        self.send_wc(m, core);
        self.admit_blocked |= 1u64 << (core % 64);
        Err(StallCause::WcFull)
    }

    fn admit_volatile_store(&mut self, _m: &mut Machine, core: usize) -> Result<(), StallCause> {
        // Software's sfence after persisting the lock stalls every later store, DRAM ones too:
        // `acquire L (PM); rmw V (DRAM)` / `acquire V; st P` must persist L's store before P.
        self.sync_wait(core)
    }

    fn on_store(&mut self, m: &mut Machine, core: usize, st: &PmStore) {
        let line = st.data.line;
        if st.nontemporal {
            // Into the core's write-combining buffer; the next sfence sends it and waits. (A copy
            // dirty in some cache was written back just before: the hierarchy reports it as an
            // eviction.)
            if self.wc.write(core, line, st.data.mask) {
                self.wc_send.push(line);
                self.send_wc(m, core);
            }
            return;
        }
        if self.as_written {
            return; // only the program's own flushes write it back
        }
        if st.sync {
            // clwb + sfence of the synchronisation word, as software persists a PM lock.
            if self.clwb(m, core, line, 0) {
                self.release_flushes += 1;
            }
            if self.invalidate {
                m.hier.flush_out(line);
            }
            if let Some(target) = self.pending(line) {
                self.cores[core].sync_waits.push((line, target));
            }
            return;
        }
        let c = &mut self.cores[core];
        if c.written_set.insert(line) {
            c.written.push(line);
        }
    }

    fn on_acquire_at(&mut self, m: &mut Machine, core: usize, addr: u64, _releaser: Option<usize>) {
        // The release's own store precedes this thread's later stores: they wait for its ACK.
        if m.is_pm(addr) && !self.as_written {
            let line = addr & !63;
            if let Some(target) = self.pending(line) {
                self.cores[core].sync_waits.push((line, target));
            }
        }
    }

    fn on_fence(&mut self, m: &mut Machine, core: usize, kind: Kind, _gid: u64) -> Step {
        self.drain_wc(m, core);
        match kind {
            Kind::Ofence => self.flush_and_fence(m, core, StallCause::Fence),
            Kind::Dfence => self.flush_and_fence(m, core, StallCause::Dfence),
            _ => self.sfence(core, StallCause::Fence),
        }
    }

    fn on_release(&mut self, m: &mut Machine, core: usize, _gid: u64) -> Step {
        self.drain_wc(m, core);
        if self.as_written {
            // A locked instruction orders the thread's earlier flushes, as sfence does.
            return self.sfence(core, StallCause::Fence);
        }
        self.flush_and_fence(m, core, StallCause::Fence)
    }

    fn on_flush(&mut self, m: &mut Machine, core: usize, kind: Kind, line: u64) -> Step {
        if m.is_pm(line) {
            self.clwb(m, core, line, 0);
            if kind != Kind::Clwb {
                m.hier.flush_out(line);
            }
            if kind == Kind::Clflush {
                // Unlike clflushopt/clwb, clflush is ordered with later writes: none of the
                // thread's later stores performs before the line is in the persistence domain.
                if let Some(target) = self.pending(line) {
                    self.cores[core].sync_waits.push((line, target));
                }
            }
        }
        Step::Done
    }

    fn on_llc_evict(&mut self, m: &mut Machine, line: u64, dirty: bool) {
        if dirty {
            let data = m.coherent_line(line);
            let at = m.now + m.writeback_ps;
            self.send(m, at, data, NO_CORE);
            self.writebacks += 1;
        }
    }

    fn holds_llc_eviction(&mut self, m: &mut Machine, core: usize, line: u64, dirty: bool) -> Option<StallCause> {
        super::hold_writeback_for_mc(m, core, line, dirty)
    }

    fn on_core_finished(&mut self, m: &mut Machine, core: usize) {
        self.drain_wc(m, core);
    }

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        match ev.tag {
            ARRIVE => self.inflight.arrive(m, ev.arg),
            ACK => self.on_ack(m, ev.core, ev.arg),
            NT_ACK => {
                self.wc.accepted(ev.core as usize, ev.arg);
                self.on_ack(m, ev.core, ev.arg);
            }
            _ => {}
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.inflight.count > 0 || self.cores.iter().any(|c| c.outstanding > 0) || self.wc.in_flight()
    }

    fn crash_writes(&self, _m: &Machine, _out: &mut Vec<LineData>) {}

    fn stats(&self, _m: &Machine, out: &mut DesignStats) {
        out.insert("clwbs".into(), self.clwbs as f64);
        out.insert("fence_flushes".into(), self.fence_flushes as f64);
        out.insert("llc_writebacks".into(), self.writebacks as f64);
        out.insert("release_flushes".into(), self.release_flushes as f64);
        out.insert("flush_piggybacks".into(), self.flush_piggybacks as f64);
        out.insert("wc_writes".into(), self.wc.writes as f64);
        out.insert("wc_combined".into(), self.wc.combined as f64);
    }

    fn describe_core(&self, core: usize) -> String {
        match self.cores.get(core) {
            Some(c) => format!(
                "baseline: {} flushes awaiting ACK, {} lines written since last fence, {} sync lines awaiting ACK, {} write-combining buffers taken",
                c.outstanding,
                c.written.len(),
                c.sync_waits.len(),
                self.wc.taken(core)
            ),
            None => format!("baseline: {} writes in flight", self.inflight.count),
        }
    }
}
