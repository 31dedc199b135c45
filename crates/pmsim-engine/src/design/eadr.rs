//! eADR: the caches are inside the persistence domain (a battery flushes them on power loss).
//!
//! A PM store is persistent as soon as it performs, so fences cost nothing: they retire from the
//! store buffer in order without stalling the core (a dfence's durability holds when it
//! retires). Lines reach NVM only by LLC eviction. At a crash the domain holds the WPQs, the
//! write-backs waiting at the MCs, every dirty line in the caches, and remote data the NIC wrote
//! into the LLC (DDIO): all of coherent memory. Promise: every performed store survives.

use super::flush::InFlight;
use super::{Design, DesignStats, PmStore, Promise, Step};
use crate::config::Config;
use crate::machine::{DesignEv, Machine};
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;

const ARRIVE: u16 = 1;

pub struct Eadr {
    inflight: InFlight,
    writebacks: u64,
    nt_stores: u64,
}

impl Eadr {
    pub fn new(_cfg: &Config) -> Eadr {
        Eadr { inflight: InFlight::default(), writebacks: 0, nt_stores: 0 }
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

    fn on_store(&mut self, m: &mut Machine, _core: usize, st: &PmStore) {
        if st.nontemporal {
            // Bypasses the caches: straight into the WPQ (the write-combining buffer is in the
            // battery-backed domain too, so it is modelled as arriving at once).
            let mc = m.mc_of(st.data.line);
            m.mc_write(mc, st.data, None);
            self.nt_stores += 1;
        }
        m.persist_version += 1;
    }

    fn on_fence(&mut self, _m: &mut Machine, _core: usize, _kind: Kind, _gid: u64) -> Step {
        Step::Done
    }

    fn on_flush(&mut self, _m: &mut Machine, _core: usize, _kind: Kind, _line: u64) -> Step {
        Step::Done
    }

    fn on_llc_evict(&mut self, m: &mut Machine, line: u64, dirty: bool) {
        if dirty {
            let data = m.coherent_line(line);
            // Arrives at once: a write-back in flight is inside the battery-backed domain.
            let mc = m.mc_of(line);
            m.mc_write(mc, data, None);
            self.writebacks += 1;
        }
    }

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        if ev.tag == ARRIVE {
            self.inflight.arrive(m, ev.arg);
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.inflight.count > 0
    }

    fn crash_writes(&self, m: &Machine, out: &mut Vec<LineData>) {
        // Everything performed survives: the WPQs and the write-backs waiting at the MCs (the
        // battery covers them even where ADR does not, banked media with `bank.persist_at =
        // media`), every dirty line in the caches, and remote data the NIC wrote into the LLC
        // (DDIO) that has not reached an MC yet. Coherent memory is the newest of all of them,
        // so it is the image (the tracker relies on it, `crash_image_is_coherent`).
        let mut lines: Vec<u64> = m.coherent.lines.keys().copied().filter(|&l| m.is_pm(l)).collect();
        lines.sort_unstable();
        out.extend(lines.into_iter().map(|l| m.coherent_line(l)));
    }

    fn crash_image_is_coherent(&self) -> bool {
        true
    }

    fn stats(&self, _m: &Machine, out: &mut DesignStats) {
        out.insert("llc_writebacks".into(), self.writebacks as f64);
        out.insert("nt_stores".into(), self.nt_stores as f64);
    }
}
