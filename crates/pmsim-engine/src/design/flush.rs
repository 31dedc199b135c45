//! Line write-backs in flight from a core to a memory controller, shared by the designs that
//! flush through the caches (baseline, eADR's write-backs).
//!
//! A flushed line travels the on-chip network to its MC; it is in no persistence domain until
//! the WPQ accepts it, and its ACK returns one hop later.

use crate::machine::{DesignEv, Machine};
use crate::mem::nvm::LineData;

/// Slab of in-flight line writes, indexed by the `arg` of their arrival events.
#[derive(Default)]
pub struct InFlight {
    slots: Vec<Option<(LineData, Option<DesignEv>)>>,
    free: Vec<usize>,
    pub count: usize,
}

impl InFlight {
    /// Sends `data` to its MC, arriving at `at`; the WPQ's ACK will be `ack` (if any).
    /// `arrive_tag` is the design's event tag for arrivals.
    pub fn send(&mut self, m: &mut Machine, at: u64, data: LineData, ack: Option<DesignEv>, arrive_tag: u16) {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((data, ack));
                i
            }
            None => {
                self.slots.push(Some((data, ack)));
                self.slots.len() - 1
            }
        };
        self.count += 1;
        m.schedule_design(at, DesignEv { tag: arrive_tag, core: 0, arg: idx as u64 });
    }

    /// Handles an arrival event: hands the write to the WPQ.
    pub fn arrive(&mut self, m: &mut Machine, idx: u64) {
        if let Some((data, ack)) = self.slots.get_mut(idx as usize).and_then(Option::take) {
            self.free.push(idx as usize);
            self.count -= 1;
            let mc = m.mc_of(data.line);
            m.mc_write(mc, data, ack);
        }
    }
}
