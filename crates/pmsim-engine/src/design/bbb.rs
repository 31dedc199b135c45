//! BBB, the battery-backed buffer (Alshboul et al., HPCA'21), as the ASAP paper evaluates it:
//! a persist buffer per core inside the persistence domain. A PM store is persistent the moment
//! it enters the buffer, so fences cost nothing; entries drain to the MCs in order in the
//! background (`pb.flush_ns` each, freed on the WPQ's ACK) and the core stalls only when its
//! buffer is full. A line lives in at most one core's buffer: a store to a line another buffer
//! still holds waits until that entry drains, so buffers never hold two versions of a line. At a
//! crash the battery drains every buffer after the WPQs. PM lines leaving the LLC are dropped
//! (the buffer already made them persistent).

use super::pb::{active_pbs, occupancy_stats, EntryState, PersistBuffer};
use super::{Design, DesignStats, PmStore, Promise, Step};
use crate::config::{ns, Config};
use crate::machine::{DesignEv, Machine, StallCause};
use crate::mem::nvm::LineData;
use pmsim_trace::Kind;

const FLUSH: u16 = 1;
const ARRIVE: u16 = 2;
const ACK: u16 = 3;

struct CoreB {
    pb: PersistBuffer,
    flush_scheduled: bool,
    /// The drain is stalled: on a full buffer, or on a line another buffer holds.
    stalled: Option<u64>,
}

pub struct Bbb {
    cores: Vec<CoreB>,
    flush_ps: u64,
    in_flight: u64,
    conflicts: u64,
    /// Broken (test only): the buffers are volatile, lost at a crash.
    volatile: bool,
}

impl Bbb {
    pub fn new(cfg: &Config) -> Bbb {
        let n = cfg.core.count.max(64);
        Bbb {
            cores: (0..n)
                .map(|_| CoreB { pb: PersistBuffer::new(cfg.pb.entries), flush_scheduled: false, stalled: None })
                .collect(),
            flush_ps: ns(cfg.pb.flush_ns),
            in_flight: 0,
            conflicts: 0,
            volatile: false,
        }
    }

    /// TEST ONLY: BBB without the battery (its buffers are lost at a crash).
    pub fn broken_volatile(cfg: &Config) -> Bbb {
        Bbb { volatile: true, ..Bbb::new(cfg) }
    }

    fn kick(&mut self, m: &mut Machine, c: usize) {
        if !self.cores[c].flush_scheduled {
            self.cores[c].flush_scheduled = true;
            m.schedule_design(m.now, DesignEv { tag: FLUSH, core: c as u16, arg: 0 });
        }
    }
}

impl Design for Bbb {
    fn name(&self) -> &'static str {
        "bbb"
    }

    fn promise(&self) -> Promise {
        Promise::All
    }

    fn fence_blocks_core(&self, _kind: Kind) -> bool {
        false
    }

    fn admit_store(&mut self, _m: &mut Machine, c: usize, line: u64) -> Result<(), StallCause> {
        if self.cores.iter().enumerate().any(|(i, o)| i != c && o.pb.holds_line(line)) {
            self.conflicts += 1;
            self.cores[c].stalled = Some(line);
            return Err(StallCause::PbConflict);
        }
        if !self.cores[c].pb.admits(line, 0) {
            self.cores[c].stalled = Some(line);
            return Err(StallCause::PbFull);
        }
        Ok(())
    }

    fn on_store(&mut self, m: &mut Machine, c: usize, st: &PmStore) {
        self.cores[c].pb.insert(m.now, &st.data, 0);
        m.persist_version += 1;
        self.kick(m, c);
    }

    fn on_fence(&mut self, _m: &mut Machine, _c: usize, _kind: Kind, _gid: u64) -> Step {
        Step::Done
    }

    fn on_flush(&mut self, _m: &mut Machine, _c: usize, _kind: Kind, _line: u64) -> Step {
        Step::Done
    }

    fn on_llc_evict(&mut self, _m: &mut Machine, _line: u64, _dirty: bool) {}

    fn on_event(&mut self, m: &mut Machine, ev: DesignEv) {
        let c = ev.core as usize;
        match ev.tag {
            FLUSH => {
                self.cores[c].flush_scheduled = false;
                let core = &mut self.cores[c];
                if let Some(e) = core.pb.entries.iter_mut().find(|e| e.state == EntryState::Queued) {
                    e.state = EntryState::InFlight { early: false };
                    let id = e.id;
                    self.in_flight += 1;
                    m.schedule_design(m.now + self.flush_ps, DesignEv { tag: ARRIVE, core: c as u16, arg: id });
                    self.cores[c].flush_scheduled = true;
                    m.schedule_design(m.now + m.cycle_ps, DesignEv { tag: FLUSH, core: c as u16, arg: 0 });
                }
            }
            ARRIVE => {
                if let Some(e) = self.cores[c].pb.get_mut(ev.arg) {
                    let data = e.data;
                    let mc = m.mc_of(data.line);
                    m.mc_write(mc, data, Some(DesignEv { tag: ACK, core: c as u16, arg: ev.arg }));
                }
            }
            ACK => {
                self.in_flight -= 1;
                self.cores[c].pb.remove(m.now, ev.arg);
                m.persist_version += 1;
                // Any core stalled on space or on this line may go on.
                for i in 0..self.cores.len() {
                    if self.cores[i].stalled.take().is_some() {
                        m.resume_drain(i);
                    }
                }
            }
            _ => {}
        }
    }

    fn busy(&self, _m: &Machine) -> bool {
        self.cores.iter().any(|c| !c.pb.is_empty())
    }

    fn crash_writes(&self, _m: &Machine, out: &mut Vec<LineData>) {
        if self.volatile {
            return;
        }
        for c in &self.cores {
            out.extend(c.pb.entries.iter().map(|e| e.data));
        }
    }

    fn stats(&self, m: &Machine, out: &mut DesignStats) {
        let pbs = active_pbs(m, self.cores.iter().map(|c| &c.pb));
        occupancy_stats(&pbs, m.now, out);
        out.insert("pb_line_conflicts".into(), self.conflicts as f64);
    }

    fn describe_core(&self, c: usize) -> String {
        match self.cores.get(c) {
            Some(core) => {
                format!("bbb: buffer {}/{} entries, stalled on {:?}", core.pb.len(), core.pb.cap, core.stalled)
            }
            None => format!("bbb: {} flushes in flight", self.in_flight),
        }
    }
}
