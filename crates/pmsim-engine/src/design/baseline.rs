//! The Intel baseline: persistence by `clwb` + `sfence` through the caches.
//!
//! Stores go to the caches only. At every `ofence`, `dfence` and before every `release`, the
//! thread write-backs (clwb) each PM line it wrote since its previous fence — one issue per
//! cycle, each travelling the write-back path to its MC (`noc.writeback_ns`) — and then `sfence` stalls the core until every MC has
//! acknowledged them. Dirty PM lines evicted from the LLC are written back to the WPQ. Legacy
//! traces with explicit `clwb`/`sfence` run as written. Promise: release persistency (flushing
//! before each release), durability at each fence.

use super::flush::InFlight;
use super::{Design, DesignStats, PmStore, Promise, Step};
use crate::config::Config;
use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;
use rustc_hash::FxHashSet;

const ARRIVE: u16 = 1;
const ACK: u16 = 2;
const NO_CORE: u16 = u16::MAX;

#[derive(Default)]
struct CoreState {
    /// PM lines written since the last fence, in first-write order.
    written: Vec<u64>,
    written_set: FxHashSet<u64>,
    outstanding: u32,
    waiting: bool,
}

pub struct Baseline {
    cores: Vec<CoreState>,
    inflight: InFlight,
    /// false only in the test-only broken variant: sfence does not wait for ACKs.
    stall: bool,
    clwbs: u64,
    fence_flushes: u64,
    writebacks: u64,
}

impl Baseline {
    pub fn new(cfg: &Config) -> Baseline {
        Baseline {
            cores: (0..64.max(cfg.core.count)).map(|_| CoreState::default()).collect(),
            inflight: InFlight::default(),
            stall: true,
            clwbs: 0,
            fence_flushes: 0,
            writebacks: 0,
        }
    }

    /// TEST ONLY: sfence returns without waiting for the flushes' ACKs.
    pub fn broken_no_stall(cfg: &Config) -> Baseline {
        Baseline { stall: false, ..Baseline::new(cfg) }
    }

    /// clwb of one line by `core`, issued `delay` after now. Returns whether a write was sent.
    fn clwb(&mut self, m: &mut Machine, core: usize, line: u64, delay: u64) -> bool {
        let reach = m.hier.locate(core, line);
        if !m.hier.clean(line) {
            return false;
        }
        let data = m.coherent_line(line);
        let at = m.now + delay + reach + m.writeback_ps;
        self.inflight.send(m, at, data, Some(DesignEv { tag: ACK, core: core as u16, arg: 0 }), ARRIVE);
        self.cores[core].outstanding += 1;
        self.clwbs += 1;
        true
    }

    /// Write back every line the core wrote since its last fence, then wait for the ACKs.
    fn flush_and_fence(&mut self, m: &mut Machine, core: usize, cause: StallCause) -> Step {
        let lines = std::mem::take(&mut self.cores[core].written);
        self.cores[core].written_set.clear();
        for (i, &line) in lines.iter().enumerate() {
            if self.clwb(m, core, line, i as u64 * m.cycle_ps) {
                self.fence_flushes += 1;
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
        Promise::Rp
    }

    fn fence_blocks_core(&self, _kind: Kind) -> bool {
        true
    }

    fn on_store(&mut self, m: &mut Machine, core: usize, st: &PmStore) {
        if st.nontemporal {
            // Write-combining straight to the MC; the next sfence waits for it.
            let at = m.now + m.writeback_ps;
            self.inflight.send(m, at, st.data, Some(DesignEv { tag: ACK, core: core as u16, arg: 0 }), ARRIVE);
            self.cores[core].outstanding += 1;
            return;
        }
        let c = &mut self.cores[core];
        if c.written_set.insert(st.data.line) {
            c.written.push(st.data.line);
        }
    }

    fn on_fence(&mut self, m: &mut Machine, core: usize, kind: Kind, _gid: u64) -> Step {
        match kind {
            Kind::Ofence => self.flush_and_fence(m, core, StallCause::Fence),
            Kind::Dfence => self.flush_and_fence(m, core, StallCause::Dfence),
            _ => self.sfence(core, StallCause::Fence),
        }
    }

    fn on_release(&mut self, m: &mut Machine, core: usize, _gid: u64) -> Step {
        self.flush_and_fence(m, core, StallCause::Fence)
    }

    fn on_flush(&mut self, m: &mut Machine, core: usize, kind: Kind, line: u64) -> Step {
        if m.is_pm(line) {
            self.clwb(m, core, line, 0);
            if kind != Kind::Clwb {
                m.hier.flush_out(line);
            }
        }
        Step::Done
    }

    fn on_llc_evict(&mut self, m: &mut Machine, line: u64, dirty: bool) {
        if dirty {
            let data = m.coherent_line(line);
            let at = m.now + m.writeback_ps;
            self.inflight.send(m, at, data, None, ARRIVE);
            self.writebacks += 1;
        }
    }

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        match ev.tag {
            ARRIVE => self.inflight.arrive(m, ev.arg),
            ACK if ev.core != NO_CORE => {
                let c = &mut self.cores[ev.core as usize];
                c.outstanding -= 1;
                if c.outstanding == 0 && c.waiting {
                    c.waiting = false;
                    m.sb_head_done(ev.core as usize);
                }
            }
            _ => {}
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.inflight.count > 0 || self.cores.iter().any(|c| c.outstanding > 0)
    }

    fn crash_writes(&self, _m: &Machine, _out: &mut Vec<LineData>) {}

    fn stats(&self, _m: &Machine, out: &mut DesignStats) {
        out.insert("clwbs".into(), self.clwbs as f64);
        out.insert("fence_flushes".into(), self.fence_flushes as f64);
        out.insert("llc_writebacks".into(), self.writebacks as f64);
    }

    fn describe_core(&self, core: usize) -> String {
        match self.cores.get(core) {
            Some(c) => format!(
                "baseline: {} flushes awaiting ACK, {} lines written since last fence",
                c.outstanding,
                c.written.len()
            ),
            None => format!("baseline: {} writes in flight", self.inflight.count),
        }
    }
}
