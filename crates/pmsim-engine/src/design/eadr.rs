//! eADR: the caches are inside the persistence domain (a battery flushes them on power loss).
//!
//! A PM store is persistent as soon as it performs, so fences cost nothing: they retire from the
//! store buffer in order without stalling the core (a dfence's durability holds when it
//! retires). Lines reach NVM only by LLC eviction. At a crash the domain holds the WPQs, the
//! write-backs waiting at the MCs, every dirty line in the caches, and remote data the NIC wrote
//! into the LLC (DDIO): all of coherent memory. Promise: every performed store survives.
//!
//! Non-temporal stores combine in the core's write-combining buffers (`wc.rs`; inside the
//! battery-backed domain, so only their timing is modelled): a core whose buffers all wait for
//! their MC waits too. An LLC write-back to an MC whose writes already wait for the WPQ holds the
//! access that caused it (`stall_cycles.wpq_full`) until none waits.

use super::flush::InFlight;
use super::wc::{buffer_data, WcBuffers};
use super::{Design, DesignStats, PmStore, Promise, Step};
use crate::config::Config;
use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;

const ARRIVE: u16 = 1;
/// The MC accepted a write-combining buffer's write (`core`, `arg` = line).
const NT_ACK: u16 = 2;

pub struct Eadr {
    inflight: InFlight,
    wc: WcBuffers,
    wc_send: Vec<u64>,
    /// Cores whose non-temporal store waits for a write-combining buffer (bit per core).
    wc_blocked: u64,
    writebacks: u64,
    nt_stores: u64,
    /// Broken (test only): no battery; the caches are lost at a crash (the domain is ADR's).
    no_battery: bool,
}

impl Eadr {
    pub fn new(cfg: &Config) -> Eadr {
        Eadr {
            inflight: InFlight::default(),
            wc: WcBuffers::new(64.max(cfg.core.count), cfg.core.wc_buffers),
            wc_send: Vec::new(),
            wc_blocked: 0,
            writebacks: 0,
            nt_stores: 0,
            no_battery: false,
        }
    }

    /// TEST ONLY: eADR without the battery (the caches are lost at a crash).
    pub fn broken_no_battery(cfg: &Config) -> Eadr {
        Eadr { no_battery: true, ..Eadr::new(cfg) }
    }

    /// Sends the write-combining buffers in `wc_send` to their MCs: the same on-chip transfer
    /// (`noc.writeback_ns`) as the baseline's; a buffer is free once the WPQ's ACK is back.
    fn send_wc(&mut self, m: &mut Machine, core: usize) {
        let mut send = std::mem::take(&mut self.wc_send);
        for &line in &send {
            let data = buffer_data(m, line);
            let ack = DesignEv { tag: NT_ACK, core: core as u16, arg: line };
            self.inflight.send(m, m.now + m.writeback_ps, data, Some(ack), ARRIVE);
        }
        send.clear();
        self.wc_send = send;
    }

    fn drain_wc(&mut self, m: &mut Machine, core: usize) {
        self.wc.send_open(core, &mut self.wc_send);
        self.send_wc(m, core);
    }
}

impl Design for Eadr {
    fn name(&self) -> &'static str {
        "eadr"
    }

    fn promise(&self) -> Promise {
        Promise::All
    }

    fn fence_blocks_core(&self, _kind: Kind) -> bool {
        false
    }

    fn admit_nt_store(&mut self, m: &mut Machine, core: usize, line: u64) -> Result<(), StallCause> {
        if self.wc.admit(core, line, &mut self.wc_send) {
            return Ok(());
        }
        self.send_wc(m, core);
        self.wc_blocked |= 1u64 << (core % 64);
        Err(StallCause::WcFull)
    }

    fn on_store(&mut self, m: &mut Machine, core: usize, st: &PmStore) {
        if st.nontemporal {
            // Bypasses the caches into a write-combining buffer, persistent already (battery).
            if self.wc.write(core, st.data.line, st.data.mask) {
                self.wc_send.push(st.data.line);
                self.send_wc(m, core);
            }
            self.nt_stores += 1;
        }
        m.persist_version += 1;
    }

    fn on_fence(&mut self, m: &mut Machine, core: usize, _kind: Kind, _gid: u64) -> Step {
        self.drain_wc(m, core);
        Step::Done
    }

    fn on_release(&mut self, m: &mut Machine, core: usize, _gid: u64) -> Step {
        self.drain_wc(m, core);
        Step::Done
    }

    fn on_core_finished(&mut self, m: &mut Machine, core: usize) {
        self.drain_wc(m, core);
    }

    fn on_flush(&mut self, _m: &mut Machine, _core: usize, _kind: Kind, _line: u64) -> Step {
        Step::Done
    }

    fn on_llc_evict(&mut self, m: &mut Machine, line: u64, dirty: bool) {
        if dirty {
            // Inside the battery-backed domain wherever it is (the crash image is coherent
            // memory), but it still takes the on-chip transfer to its MC.
            let data = m.coherent_line(line);
            self.inflight.send(m, m.now + m.writeback_ps, data, None, ARRIVE);
            self.writebacks += 1;
        }
    }

    fn holds_llc_eviction(&mut self, m: &mut Machine, core: usize, line: u64, dirty: bool) -> Option<StallCause> {
        super::hold_writeback_for_mc(m, core, line, dirty)
    }

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        match ev.tag {
            ARRIVE => self.inflight.arrive(m, ev.arg),
            NT_ACK => {
                self.wc.accepted(ev.core as usize, ev.arg);
                let mut blocked = std::mem::take(&mut self.wc_blocked);
                while blocked != 0 {
                    let c = blocked.trailing_zeros() as usize;
                    blocked &= blocked - 1;
                    m.resume_drain(c);
                }
            }
            _ => {}
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.inflight.count > 0 || self.wc.in_flight()
    }

    fn crash_writes(&self, m: &Machine, out: &mut Vec<LineData>) {
        // Everything performed survives: the WPQs and the write-backs waiting at the MCs (the
        // battery covers them even where ADR does not, banked media with `bank.persist_at =
        // media`), every dirty line in the caches, and remote data the NIC wrote into the LLC
        // (DDIO) that has not reached an MC yet. Coherent memory is the newest of all of them,
        // so it is the image (the tracker relies on it, `crash_image_is_coherent`).
        if self.no_battery {
            return;
        }
        let mut lines: Vec<u64> = m.coherent.lines.keys().copied().filter(|&l| m.is_pm(l)).collect();
        lines.sort_unstable();
        out.extend(lines.into_iter().map(|l| m.coherent_line(l)));
    }

    fn crash_image_is_coherent(&self) -> bool {
        !self.no_battery
    }

    fn stats(&self, _m: &Machine, out: &mut DesignStats) {
        out.insert("llc_writebacks".into(), self.writebacks as f64);
        out.insert("nt_stores".into(), self.nt_stores as f64);
        out.insert("wc_writes".into(), self.wc.writes as f64);
        out.insert("wc_combined".into(), self.wc.combined as f64);
    }
}
